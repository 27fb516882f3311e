/* compile_time.c — cold compile time of graphs, fused and eager.
 *
 *     compile_time [--runs N] [--mode fused|eager] [--code auto|full|compact] FILE.kiln ...
 *
 * For each graph: kiln_program_compile N times per mode (default 3; both modes unless
 * --mode names one), alternating fused and eager, each as a new process with the disk cache
 * off would pay: the in-memory program and kernel caches are emptied first and the disk
 * cache is not used (KILN_NO_DISK_CACHE), so kernels of the same description within one
 * plan are compiled once (eager mode's many `add` kernels are one), as in a real first
 * compile.  Prints the median wall time, the median CPU time of the process (the compile
 * runs on the calling thread: steadier than the wall time on a busy machine), the median
 * time inside LLVM (kiln_jit_stats' compile_ms: optimise + codegen + link), the kernels
 * compiled, and the wall time per elementwise node (a node line that is not a `full`).  The
 * first compile of the process also pays LLVM's one-time start-up, so a warm-up compile of
 * the first graph runs before anything is timed.  --code: the plan decides (auto, the
 * default), full code always (KILN_CODE_FULL) or compact code always (KILN_CODE_COMPACT;
 * docs/jit.md, "Compact code").  tests/bench/wide_bench.sh runs it
 * (docs/benchmarking.md, "Wide graphs").  Not a test: CTest never times anything. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jit.h"
#include "kiln.h"

enum {
    MAX_RUNS = 101
};

static double
clock_ms(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static char *
read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b)
                free(buf);
            buf = b;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

static kiln_code code = KILN_CODE_AUTO; /* --code */

/* One cold compile in mode m: wall ms, CPU ms of the process, LLVM ms and kernels
 * compiled. */
static kiln_status
compile_once(const kiln_graph *g, kiln_mode m, double *wall, double *cpu, double *llvm,
             unsigned long *kernels)
{
    kiln_stats a = KILN_STATS_INIT, b = KILN_STATS_INIT;
    kiln_options o = KILN_OPTIONS_INIT;
    o.mode = m;
    o.flags = KILN_NO_DISK_CACHE;
    o.code = code;
    kiln_program *p = NULL;
    jit_plan_cache_trim();
    jit_cache_trim();
    kiln_jit_stats(&a);
    double t0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
    kiln_status st = kiln_program_compile(g, &o, &p);
    *wall = clock_ms(CLOCK_MONOTONIC) - t0;
    *cpu = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
    kiln_jit_stats(&b);
    *llvm = b.compile_ms - a.compile_ms;
    *kernels = (unsigned long)(b.kernel_compiles - a.kernel_compiles);
    kiln_program_free(p);
    return st;
}

static int
elementwise_nodes(const char *text)
{
    /* a node line is "name = op(...)"; fulls are splats, not ops of a kernel */
    int n = 0;
    for (const char *s = text; (s = strstr(s, " = ")) != NULL; s += 3)
        if (strncmp(s + 3, "full(", 5) != 0)
            n++;
    return n;
}

int
main(int argc, char **argv)
{
    int runs = 3, first = 1, m0 = 0, m1 = 2;
    while (first + 1 < argc && argv[first][0] == '-') {
        if (strcmp(argv[first], "--runs") == 0)
            runs = atoi(argv[first + 1]);
        else if (strcmp(argv[first], "--mode") == 0 && strcmp(argv[first + 1], "fused") == 0)
            m1 = 1;
        else if (strcmp(argv[first], "--mode") == 0 && strcmp(argv[first + 1], "eager") == 0)
            m0 = 1;
        else if (strcmp(argv[first], "--code") == 0 && strcmp(argv[first + 1], "auto") == 0)
            code = KILN_CODE_AUTO;
        else if (strcmp(argv[first], "--code") == 0 && strcmp(argv[first + 1], "full") == 0)
            code = KILN_CODE_FULL;
        else if (strcmp(argv[first], "--code") == 0 && strcmp(argv[first + 1], "compact") == 0)
            code = KILN_CODE_COMPACT;
        else
            break;
        first += 2;
    }
    if (first >= argc || argv[first][0] == '-' || runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "usage: compile_time [--runs 1..%d] [--mode fused|eager] "
                        "[--code auto|full|compact] FILE.kiln ...\n", MAX_RUNS);
        return 2;
    }
    printf("%-24s %6s  %-6s %9s %9s %9s %8s %8s\n", "graph", "nodes", "mode", "wall ms", "cpu ms",
           "llvm ms", "kernels", "us/node");
    for (int i = first; i < argc; i++) {
        size_t len;
        char *text = read_all(argv[i], &len);
        kiln_graph *g = NULL;
        if (!text || kiln_graph_parse(text, len, &g)) {
            fprintf(stderr, "compile_time: %s: %s\n", argv[i],
                    text ? kiln_errmsg() : "cannot read");
            free(text);
            return 1;
        }
        int nodes = elementwise_nodes(text);
        free(text);
        double w[2][MAX_RUNS], c[2][MAX_RUNS], l[2][MAX_RUNS], dw, dc, dl;
        unsigned long k[2] = {0, 0};
        if (i == first && compile_once(g, KILN_MODE_FUSED, &dw, &dc, &dl, &k[0])) /* warm-up */
            goto fail;
        for (int r = 0; r < runs; r++)
            for (int m = m0; m < m1; m++)
                if (compile_once(g, m ? KILN_MODE_EAGER : KILN_MODE_FUSED, &w[m][r], &c[m][r],
                                 &l[m][r], &k[m]))
                    goto fail;
        for (int m = m0; m < m1; m++) {
            qsort(w[m], (size_t)runs, sizeof(double), cmp_double);
            qsort(c[m], (size_t)runs, sizeof(double), cmp_double);
            qsort(l[m], (size_t)runs, sizeof(double), cmp_double);
            printf("%-24s %6d  %-6s %9.1f %9.1f %9.1f %8lu %8.1f\n", argv[i], nodes,
                   m ? "eager" : "fused", w[m][runs / 2], c[m][runs / 2], l[m][runs / 2], k[m],
                   w[m][runs / 2] * 1e3 / (nodes ? nodes : 1));
        }
        fflush(stdout);
        kiln_graph_free(g);
        continue;
    fail:
        fprintf(stderr, "compile_time: %s: %s\n", argv[i], kiln_errmsg());
        kiln_graph_free(g);
        return 1;
    }
    return 0;
}
