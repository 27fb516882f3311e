/* decode_steps.c — a client generating tokens: the decoder step of lib/check/decoder.c
 * (default: bench/decode's shape, 2 layers, D 768, 12 heads, MLP 3072, every weight an
 * input) captured through the public tensor API with its K/V caches one row longer every
 * step, then run.
 *
 *     decode_steps [--layers L] [--t0 T] [--steps N] [--mode fused|eager] [--tiered]
 *                  [--plan-only]
 *
 * Per step: the capture (kiln_scope_begin and one call per op), kiln_scope_end (the
 * program cache misses: new sizes; the plan is built, every kernel found in the kernel
 * cache), and the run; the first step, which compiles, is reported apart.  Prints the
 * medians over steps 2-31 and, with more than 300 steps, over the last 30 (the program
 * cache long past its first plans), each with the calling thread's CPU time (the wall time
 * less any time the thread was not running) and the page faults; the kernels compiled and
 * the temporaries blocks allocated after the first step, the plans made from another
 * size's plan (docs/jit.md, "Plans at new sizes"), and the step's minimal traffic
 * (weights and caches read once) over the median run.  Inputs are random (weights and
 * caches in [-0.1, 0.1)), the same every step.  --tiered compiles with KILN_TIERED (a quick
 * first tier, the full code from a background thread) and prints the first five steps'
 * run times, over which the full code arrives.  --plan-only runs the first step only (to
 * profile the per-step overhead alone: valgrind --tool=callgrind --toggle-collect=
 * kiln_scope_end; the run figures are then the first step's).  Not a test: CTest never times anything
 * (docs/benchmarking.md, "Decode"). */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "decoder.h"
#include "kiln.h"

static double
now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* the calling thread's CPU time: the step's wall time less any time it was not running */
static double
cpu_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static double
minor_faults(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_minflt;
}

static int
cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n ? v[n / 2] : 0;
}

int
main(int argc, char **argv)
{
    ck_decoder dec = {.layers = 2, .d = 768, .heads = 12, .ff = 3072};
    int64_t t0 = 512;
    int steps = 21;
    kiln_mode mode = KILN_MODE_FUSED;
    unsigned flags = 0;
    bool plan_only = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--layers") && i + 1 < argc)
            dec.layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--t0") && i + 1 < argc)
            t0 = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mode") && i + 1 < argc)
            mode = !strcmp(argv[++i], "eager") ? KILN_MODE_EAGER : KILN_MODE_FUSED;
        else if (!strcmp(argv[i], "--tiered"))
            flags |= KILN_TIERED;
        else if (!strcmp(argv[i], "--plan-only"))
            plan_only = true;
        else {
            fprintf(stderr, "usage: decode_steps [--layers L] [--t0 T] [--steps N] [--mode "
                            "fused|eager] [--tiered] [--plan-only]\n");
            return 2;
        }
    }
    if (dec.layers < 1 || dec.layers > 16 || steps < 2 || t0 < 1) {
        fprintf(stderr, "decode_steps: bad arguments\n");
        return 2;
    }
    kiln_device *dev = kiln_device_new();
    int nin = ck_decoder_num_inputs(&dec), nout = ck_decoder_num_outputs(&dec);
    void **in = calloc((size_t)nin, sizeof *in), **out = calloc((size_t)nout, sizeof *out);
    size_t *cap = calloc((size_t)nin, sizeof *cap);
    double *end_us = calloc((size_t)steps, sizeof(double)),
           *run_us = calloc((size_t)steps, sizeof(double)),
           *faults = calloc((size_t)steps, sizeof(double)),
           *cpu = calloc((size_t)steps, sizeof(double));
    if (!dev || !in || !out || !cap || !end_us || !run_us || !faults || !cpu)
        return 1;
    uint64_t seed = 0x6b696c6e;
    kiln_stats first = KILN_STATS_INIT, last = KILN_STATS_INIT;
    double traffic = 0;
    for (int s = 0; s < steps; s++) {
        int64_t t = t0 + s;
        kiln_options o = KILN_OPTIONS_INIT;
        o.mode = mode;
        o.flags = flags;
        kiln_program *p = NULL;
        /* a client's step: capture, and end the scope into a program */
        double f0 = minor_faults(), c0 = cpu_us(), a = now_us();
        kiln_status st = ck_decoder_capture(dev, &dec, t, &o, &p);
        double b = now_us();
        cpu[s] = cpu_us() - c0;
        faults[s] = minor_faults() - f0;
        if (st) {
            fprintf(stderr, "decode_steps: step %d: %s\n", s, kiln_errmsg());
            return 1;
        }
        const kiln_graph *g = kiln_program_graph(p);
        traffic = 0;
        for (int i = 0; i < nin; i++) {
            kiln_value_info vi = KILN_VALUE_INFO_INIT;
            kiln_graph_input(g, i, &vi);
            traffic += (double)vi.bytes;
            if (cap[i] < vi.bytes) {
                free(in[i]);
                in[i] = malloc(vi.bytes);
                if (!in[i])
                    return 1;
                ck_decoder_fill(in[i], vi.count, &seed);
                cap[i] = vi.bytes;
            }
        }
        for (int i = 0; i < nout && s == 0; i++) {
            kiln_value_info vi = KILN_VALUE_INFO_INIT;
            kiln_graph_output(g, i, &vi);
            out[i] = malloc(vi.bytes);
            if (!out[i])
                return 1;
        }
        double c = now_us();
        if ((!plan_only || s == 0) && kiln_program_run(p, (const void *const *)in, out)) {
            fprintf(stderr, "decode_steps: run: %s\n", kiln_errmsg());
            return 1;
        }
        double d = now_us();
        end_us[s] = b - a;
        run_us[s] = d - c;
        kiln_program_free(p);
        if (s == 0)
            kiln_jit_stats(&first);
    }
    kiln_jit_stats(&last);
    printf("decode_steps: %d layers, D %lld, %lld heads, MLP %lld, caches of %lld..%lld rows, %s\n",
           dec.layers, (long long)dec.d, (long long)dec.heads, (long long)dec.ff, (long long)t0,
           (long long)(t0 + steps - 1), mode == KILN_MODE_EAGER ? "eager" : "fused");
    printf("first step: capture + scope end (compiles) %.1f ms, run %.3f ms\n", end_us[0] / 1e3,
           run_us[0] / 1e3);
    printf("first step's LLVM: %llu kernels; start-up %.1f ms (LLJIT %.1f); CPU summed over "
           "threads: optimise %.1f, code generation %.1f, link %.1f ms\n",
           (unsigned long long)first.kernel_compiles, first.startup_ms, first.lljit_ms,
           first.optimise_ms, first.codegen_ms, first.link_ms);
    if (flags & KILN_TIERED) {
        printf("tiered: runs of steps 1-%d:", steps < 5 ? steps : 5);
        for (int s = 0; s < steps && s < 5; s++)
            printf(" %.3f", run_us[s] / 1e3);
        printf(" ms; full code for %llu kernels by the last step\n",
               (unsigned long long)last.kernel_tierups);
    }
    /* the program cache keeps 256 plans: while it fills, every step's plan is new memory
     * (page faults); after, evictions recycle it.  Both phases when there are steps enough */
    int n1 = steps - 1 < 30 ? steps - 1 : 30;
    double e = median(end_us + 1, n1), r = median(run_us + 1, n1), pf = median(faults + 1, n1),
           cu = median(cpu + 1, n1);
    printf("steps 2-%d (median): capture + scope end + plan %.1f us (%.1f us of CPU, %.0f page "
           "faults)", n1 + 1, e, cu, pf);
    if (plan_only)
        printf(", not run (--plan-only)\n");
    else
        printf(", run %.3f ms (%.1f GB/s: %.1f MB of weights, caches and x read once)\n",
               r / 1e3, traffic / (r * 1e3), traffic / 1e6);
    if (steps > 300) {
        double e2 = median(end_us + steps - 30, 30), r2 = median(run_us + steps - 30, 30),
               pf2 = median(faults + steps - 30, 30), cu2 = median(cpu + steps - 30, 30);
        printf("the last 30 steps (median): capture + scope end + plan %.1f us (%.1f us of CPU, "
               "%.0f page faults), run %.3f ms\n", e2, cu2, pf2, plan_only ? 0.0 : r2 / 1e3);
    }
    printf("after the first step: %llu kernels compiled, %llu temporaries blocks allocated, "
           "%llu of %d plans made from another size's (KILN_TEST_RESIZE=off: none)\n",
           (unsigned long long)(last.kernel_compiles - first.kernel_compiles),
           (unsigned long long)(last.workspace_allocs - first.workspace_allocs),
           (unsigned long long)(last.plans_resized - first.plans_resized), steps - 1);
    for (int i = 0; i < nin; i++)
        free(in[i]);
    for (int i = 0; i < nout; i++)
        free(out[i]);
    free(in);
    free(out);
    free(cap);
    free(end_us);
    free(run_us);
    free(faults);
    free(cpu);
    kiln_device_free(dev);
    return 0;
}
