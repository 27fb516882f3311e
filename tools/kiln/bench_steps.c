/* bench_steps.c — `kiln bench`'s decode with sizes that change every step: a client
 * generating tokens.  The decoder step of bench/decode.kiln (2 layers, D 768, 12 heads, MLP
 * 3072, every weight an input: lib/check/decoder.c builds the same graph through the public
 * tensor API) is captured with K/V caches of 512, 513, ... rows, one more every step, and
 * run.  Per step: the capture (kiln_scope_begin and one call per op) and kiln_scope_end, which
 * misses the program cache (new sizes) and plans (from the plan of another size: docs/jit.md,
 * "Plans at new sizes"; every kernel found in the kernel cache), timed together as the
 * step's overhead; then the run.  The first step, which may compile, is left out of the
 * medians.  What a client whose shapes change every step pays on top of the run
 * (docs/benchmarking.md, "Decode"; tests/bench/decode_steps.c has more figures). */
#include <stdlib.h>
#include <string.h>

#include "bench_run.h"
#include "decoder.h"

#define STEPS 31   /* the first, then 30 timed */
#define T0 512     /* cache rows of the first step: bench/decode.kiln's */

static int
cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void
bench_decode_steps(const bench_opts *o, bench_result *r)
{
    ck_decoder dec = {.layers = 2, .d = 768, .heads = 12, .ff = 3072};
    int nin = ck_decoder_num_inputs(&dec), nout = ck_decoder_num_outputs(&dec);
    kiln_device *dev = kiln_device_new();
    void **in = calloc((size_t)nin, sizeof *in), **out = calloc((size_t)nout, sizeof *out);
    size_t *cap = calloc((size_t)nin, sizeof *cap);
    double over[STEPS], run[STEPS];
    kiln_stats first = KILN_STATS_INIT, last = KILN_STATS_INIT;
    uint64_t seed = 0x6b696c6e;
    r->steps.ok = false;
    if (!dev || !in || !out || !cap) {
        snprintf(r->steps.error, sizeof r->steps.error, "out of memory");
        goto done;
    }
    for (int s = 0; s < STEPS; s++) {
        kiln_options ko = KILN_OPTIONS_INIT;
        ko.stores = o->stores;
        ko.code = o->code;
        kiln_program *p = NULL;
        double a = bench_now();
        kiln_status st = ck_decoder_capture(dev, &dec, T0 + s, &ko, &p);
        over[s] = bench_now() - a;
        if (st) {
            snprintf(r->steps.error, sizeof r->steps.error, "step %d: %s", s, kiln_errmsg());
            goto done;
        }
        /* inputs: random in [-0.1, 0.1), made again only where a cache grew */
        const kiln_graph *g = kiln_program_graph(p);
        for (int i = 0; i < nin; i++) {
            kiln_value_info vi = KILN_VALUE_INFO_INIT;
            kiln_graph_input(g, i, &vi);
            if (cap[i] < vi.bytes) {
                free(in[i]);
                if (!(in[i] = malloc(vi.bytes))) {
                    kiln_program_free(p);
                    snprintf(r->steps.error, sizeof r->steps.error, "out of memory");
                    goto done;
                }
                ck_decoder_fill(in[i], vi.count, &seed);
                cap[i] = vi.bytes;
            }
        }
        for (int i = 0; i < nout && s == 0; i++) {
            kiln_value_info vi = KILN_VALUE_INFO_INIT;
            kiln_graph_output(g, i, &vi);
            if (!(out[i] = malloc(vi.bytes))) {
                kiln_program_free(p);
                snprintf(r->steps.error, sizeof r->steps.error, "out of memory");
                goto done;
            }
        }
        a = bench_now();
        st = kiln_program_run(p, (const void *const *)in, out);
        run[s] = bench_now() - a;
        kiln_program_free(p);
        if (st) {
            snprintf(r->steps.error, sizeof r->steps.error, "step %d: run: %s", s, kiln_errmsg());
            goto done;
        }
        if (s == 0)
            kiln_jit_stats(&first);
    }
    kiln_jit_stats(&last);
    qsort(over + 1, STEPS - 1, sizeof *over, cmp_d);
    qsort(run + 1, STEPS - 1, sizeof *run, cmp_d);
    r->steps.ok = true;
    r->steps.steps = STEPS;
    r->steps.t0 = T0;
    r->steps.first_us = over[0] * 1e6;
    r->steps.overhead_us = over[1 + (STEPS - 1) / 2] * 1e6;
    r->steps.run_ms = run[1 + (STEPS - 1) / 2] * 1e3;
    r->steps.compiled_after_first = last.kernel_compiles - first.kernel_compiles;
    r->steps.resized = last.plans_resized - first.plans_resized;
done:
    cli_free_buffers(in, nin);
    cli_free_buffers(out, nout);
    free(cap);
    kiln_device_free(dev);
    kiln_clear_error();
}
