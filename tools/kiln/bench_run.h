/* bench_run.h — the parts of `kiln bench`: cmd_bench.c parses the options and runs the
 * workloads; bench_measure.c measures one (timings from cold caches, the bandwidth and FMA
 * probes around it, compile and re-capture times, the error against the oracle of
 * lib/check); bench_report.c prints the table and writes the JSON and the SVG.  Internal to
 * kiln bench, which reads the library's internals (bench.h). */
#ifndef KILN_BENCH_RUN_H
#define KILN_BENCH_RUN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "bench.h"

/* What the command line asked for. */
typedef struct bench_opts {
    double scale;
    const char *json, *plot;
    bool eager, interp;
    bool warm;     /* --warm: no cache eviction between timed runs */
    kiln_stores stores; /* --stores: KILN_STORES_AUTO, _STREAM or _CACHED */
    kiln_code code;     /* --code: KILN_CODE_AUTO, _FULL or _COMPACT */
    double budget; /* seconds of timed runs per mode and workload */
    double preload_ms; /* CPU time of the process before kiln bench started */
} bench_opts;

/* Run times of one program: the median, the fastest and slowest run, in seconds. */
typedef struct bench_timing {
    double median, min, max;
    int runs;
} bench_timing;

/* The buffer read between timed runs to evict the caches (bench_measure.c says how). */
typedef struct bench_evictor {
    uint64_t *buf;
    size_t words;
    int64_t parts;
    _Atomic uint64_t sink; /* keeps the reads */
} bench_evictor;

/* The bandwidth probe: its kernels and arrays (bench_measure.c has the method). */
#define PROBE_CAP 256

typedef struct bench_probe_kind {
    kiln_program *prog;
    double bytes_per_elem;
    double samples[PROBE_CAP];
    int n;
} bench_probe_kind;

enum { PROBE_COPY, PROBE_TRIAD, PROBE_NT_COPY, PROBE_READ, PROBE_KINDS };

typedef struct bench_probe {
    bench_probe_kind k[PROBE_KINDS];
    float *a, *b, *c;
    size_t n;
} bench_probe;

/* What a workload's probes measured: GB/s of the best run and the median run per kind;
 * best = the limit, the best of all three. */
typedef struct bench_probe_figs {
    double best;
    double best_of[PROBE_KINDS], median_of[PROBE_KINDS];
    int runs[PROBE_KINDS];
    int limit_kind; /* which kernel's run is the limit */
} bench_probe_figs;

/* Everything measured of one workload. */
typedef struct bench_result {
    const char *name;
    char shape[128];
    bool ok;
    char error[256];
    double traffic, flops;
    bench_timing fused, eager, interp;
    bool have_eager, have_interp;
    double compile_ms, disk_ms, recompile_us, recapture_us, probe_gbs;
    double first_run_ms; /* the first run of a program the program cache answered (median of 5) */
    double read_share;   /* of the minimal traffic, the inputs' bytes */
    /* a workload that only reads (read_share >= 0.9), cold: each of `paired` pairs is a run
     * of the read probe and a run of the workload right after it, caches evicted before each;
     * the median over the pairs of the workload's GB/s / that probe run's (0: not measured) */
    double read_paired;
    int paired;
    bench_probe_figs probe;
    bool cold; /* timed runs from evicted caches (else warm: --warm, or not memory-bound) */
    double peak_gflops; /* compute-bound workloads: the FMA probe around them */
    bool single;        /* a "_1t" workload: run on the calling thread alone */
    double err_fused, err_eager; /* max ULP (elementwise graphs) or normwise relative */
    const char *err_unit;
    /* the verdict: max over elements of |got - reference| / the element's bound, the bound
     * kiln check propagates through the graph (errbound.h); <= 1 passes */
    double ratio_fused, ratio_eager;
    int kernels;
    int refsteps;
    /* decode only: the step captured through the C API at sizes that change every step
     * (bench_steps.c): capture + scope end + plan per step, median of the steps after the
     * first (overhead_us), the first's (first_us), the run (run_ms), kernels compiled and
     * plans made from another size's plan after the first step */
    struct {
        bool run, ok;
        char error[160];
        int steps, t0;
        double first_us, overhead_us, run_ms;
        uint64_t compiled_after_first, resized;
    } steps;
} bench_result;

/* ---- measuring (bench_measure.c) ---------------------------------------------------------- */

/* Seconds on the monotonic clock. */
double bench_now(void);
/* Does the graph consist of elementwise, movement and source ops only? */
bool bench_is_elementwise(const kiln_graph *g);
/* Compile the probe kernels and allocate their arrays (2^25 floats each); free with
 * bench_probe_free (also after a failure). */
kiln_status bench_probe_init(bench_probe *pr);
void bench_probe_free(bench_probe *pr);
/* The eviction buffer, four times the last-level cache; free with bench_evict_free. */
kiln_status bench_evict_init(bench_evictor *ev);
void bench_evict_free(bench_evictor *ev);
/* g with the leading dimension of its main inputs divided by `scale` (g itself, unchanged,
 * when it does not scale that way; g is freed when a new graph is returned). */
kiln_graph *bench_scaled(kiln_graph *g, double scale);
/* Measure workload `name` (graph g) into *r: r->ok false and r->error set on failure. */
void bench_one(const char *name, kiln_graph *g, const bench_opts *o, bench_probe *pr,
               bench_evictor *evb, bench_result *r);

/* The decode step at sizes that change every step (bench_steps.c) into r->steps
 * (r->steps.ok false and r->steps.error set on failure). */
void bench_decode_steps(const bench_opts *o, bench_result *r);

/* ---- reporting (bench_report.c) ----------------------------------------------------------- */

/* The table of n results, and the probes measured around each workload. */
void bench_print_table(FILE *f, const bench_result *rs, int n, const bench_opts *o);
void bench_print_probes(FILE *f, const bench_result *rs, int n);
/* Every figure, the machine and kiln's version as JSON; bars of fused and eager bandwidth
 * against the probe as SVG.  KILN_ERR_IO with the path in the message (cli_error). */
kiln_status bench_write_json(const char *path, const bench_result *rs, int n,
                             const kiln_stats *ks, const bench_opts *o);
kiln_status bench_write_svg(const char *path, const bench_result *rs, int n);

#endif
