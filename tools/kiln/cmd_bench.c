/* cmd_bench.c — `kiln bench`: fused against eager against the machine's own bandwidth.
 *
 * For each workload: cold compile time (caches bypassed), compile time from the disk cache
 * (in-memory caches dropped; a temporary directory of the run's own), cached re-compile time, median
 * and min–max run times of fused and eager (and interp with --mode all), the speedup,
 * effective bandwidth from the graph's minimal traffic (its inputs and outputs), that as a
 * fraction of a STREAM-style probe (copy, triad, and copy with streaming stores) run on the
 * same thread pool right before and after the workload (the best run of any: the machine's
 * bandwidth drifts, and the limit is the best the machine can do), GFLOP/s
 * of matmuls, and the error of fused and eager against the reference interpreter.
 * Memory-bound workloads run from cold caches: a buffer several times the last-level cache
 * is read between timed runs, outside the timing (--warm keeps the caches). */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "errbound.h"
#include "jit.h"
#include "refmath.h"

double
bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- errors ---------------------------------------------------------------------------- */

/* The error of `got` against the reference `want` (count elements of dtype t), a figure
 * for the report (the verdict is bound_ratio's): the max distance in representable values
 * for floats (ref_ulp_distance: NaN vs NaN is 0, NaN vs number is infinite), and for ints
 * and bools 1 when any element differs.  *worst is the index of the largest error. */
static double
ulp_error(kiln_dtype t, const void *got, const void *want, size_t count, size_t *worst)
{
    double max = 0;
    *worst = 0;
    for (size_t i = 0; i < count; i++) {
        double e;
        if (ir_dtype_is_float(t)) {
            e = ref_ulp_distance(t, ir_load_f64(t, got, i), ir_load_f64(t, want, i));
        } else {
            size_t s = kiln_dtype_size(t);
            e = memcmp((const char *)got + i * s, (const char *)want + i * s, s) != 0;
        }
        if (e > max) {
            max = e;
            *worst = i;
        }
    }
    return max;
}

/* Normwise relative error ||got - want|| / ||want|| (floats; 0 when both are zero). */
static double
rel_error(kiln_dtype t, const void *got, const void *want, size_t count)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < count; i++) {
        double a = ir_load_f64(t, got, i), b = ir_load_f64(t, want, i);
        if (isnan(a) != isnan(b))
            return INFINITY;
        if (isnan(a))
            continue;
        num += (a - b) * (a - b);
        den += b * b;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

bool
bench_is_elementwise(const kiln_graph *g)
{
    for (int32_t i = 0; i < g->nnodes; i++) {
        ir_kind k = ir_ops[g->nodes[i].op].kind;
        if (k == IR_KIND_REDUCE || k == IR_KIND_MATMUL)
            return false;
    }
    return true;
}

/* ---- options ------------------------------------------------------------------------------ */

typedef struct opts {
    double scale;
    const char *json, *plot;
    bool eager, interp;
    bool warm;     /* --warm: no cache eviction between timed runs */
    kiln_stores stores; /* --stores: KILN_STORES_AUTO, _STREAM or _CACHED */
    kiln_code code;     /* --code: KILN_CODE_AUTO, _FULL or _COMPACT */
    double budget; /* seconds of timed runs per mode and workload */
    double preload_ms; /* CPU time of the process before kiln bench started */
} opts;

void
cmd_bench_help(FILE *f)
{
    fprintf(f,
            "usage: kiln bench [FILE.kiln | WORKLOAD ...] [options]\n"
            "\n"
            "Benchmark fused against eager execution.  With no files, runs the built-in suite\n"
            "(chain gelu softmax layernorm bcast l2norm small mlp colsum rmsnorm logsumexp\n"
            "sgemm sgemm_1t attn matmul_small; see docs/benchmarking.md); a WORKLOAD name runs\n"
            "that one.  A workload whose name ends in _1t runs on one thread.\n"
            "Inputs are random with a fixed seed.  Each workload is bracketed by a STREAM-style\n"
            "probe (copy, triad, and copy with streaming stores) on the same thread pool; %%bw\n"
            "is against the probe's best run of any of them.\n"
            "Memory-bound workloads run from cold caches: a buffer four times the last-level\n"
            "cache is read between timed runs, outside the timing.  A workload with matmuls is\n"
            "also bracketed by an FMA probe (a kiln-compiled loop of FMAs), for %%peak.\n"
            "\n"
            "options:\n"
            "  --scale S        divide the leading dimension of the main inputs by S (quick runs)\n"
            "  --threads N      thread pool size (default: KILN_NUM_THREADS or all cores)\n"
            "  --mode M         fused (fused only), eager (fused and eager, the default) or all\n"
            "                   (also the reference interpreter, slow)\n"
            "  --time SECONDS   timed-run budget per mode and workload (default 1)\n"
            "  --warm           keep the caches between timed runs (cache-resident figures,\n"
            "                   labelled 'warm' in the table and the JSON)\n"
            "  --stores S       auto (default: kiln decides by size), stream (non-temporal\n"
            "                   stores wherever allowed: KILN_STORES_STREAM) or cached\n"
            "                   (KILN_STORES_CACHED)\n"
            "  --code C         auto (default: kiln decides by size), full (KILN_CODE_FULL) or\n"
            "                   compact (KILN_CODE_COMPACT: out-of-line vector math, one masked\n"
            "                   loop body, LLVM's fast code generator; docs/jit.md)\n"
            "  --json FILE      every figure, the machine and kiln's version as JSON\n"
            "  --plot FILE.svg  bars of fused and eager bandwidth against the probe\n"
            "  -h, --help       this text\n"
            "\n"
            "Progress goes to stderr, the table to stdout.  Exit code 1 if a workload fails or\n"
            "an element of its fused or eager result is beyond its bound against the\n"
            "reference (kiln check's bound, propagated through the graph).\n");
}

/* ---- timing ------------------------------------------------------------------------------- */

typedef struct timing {
    double median, min, max;
    int runs;
} timing;

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- cache eviction ------------------------------------------------------------------------
 * Between timed runs of a memory-bound workload, every thread of the pool reads its part
 * of a buffer four times the last-level cache (jit_host_info()->llc_bytes), so the next
 * run finds its inputs in memory, not in cache, and the previous run's dirty output lines
 * are written back outside the timing: what a program that touches other data between
 * calls sees, and what a STREAM run measures. */
typedef struct evictor {
    uint64_t *buf;
    size_t words;
    int64_t parts;
    _Atomic uint64_t sink; /* keeps the reads */
} evictor;

static kiln_status
evict_init(evictor *ev)
{
    size_t bytes = 4 * jit_host_info()->llc_bytes;
    if (bytes < ((size_t)64 << 20))
        bytes = (size_t)64 << 20;
    ev->words = bytes / 8;
    ev->parts = 4 * jit_pool_threads();
    ev->buf = malloc(bytes);
    if (!ev->buf)
        return ir_error(KILN_ERR_NOMEM, "kiln bench: out of memory for the cache-eviction buffer "
                                        "(%zu MiB)", bytes >> 20);
    for (size_t i = 0; i < ev->words; i++)
        ev->buf[i] = i;
    atomic_init(&ev->sink, 0);
    return KILN_OK;
}

static void
evict_part(void *ctx, int64_t part)
{
    evictor *ev = ctx;
    size_t per = (ev->words + (size_t)ev->parts - 1) / (size_t)ev->parts;
    size_t lo = (size_t)part * per, hi = lo + per < ev->words ? lo + per : ev->words;
    uint64_t s = 0;
    for (size_t i = lo; i < hi; i += 8) /* one word per 64-byte line */
        s += ev->buf[i];
    atomic_fetch_add_explicit(&ev->sink, s, memory_order_relaxed);
}

/* Read the whole eviction buffer on the pool (NULL: nothing, the warm case). */
static void
evict_caches(evictor *ev)
{
    if (ev && ev->buf)
        jit_pool_run(evict_part, ev, ev->parts);
}

static void
evict_free(evictor *ev)
{
    free(ev->buf);
    ev->buf = NULL;
}

/* Warm up, then append timed runs to samples[*n..cap) until `budget` seconds or `cap`
 * samples (at least 5 more); with ev, the caches are evicted before each timed run
 * (outside the timing). */
static kiln_status
time_samples(kiln_program *p, const void *const *in, void *const *out, double budget,
             evictor *ev, double *samples, int cap, int *n)
{
    for (int i = 0; i < 2; i++) {
        kiln_status st = kiln_program_run(p, in, out);
        if (st)
            return st;
    }
    double start = bench_now();
    for (int k = 0; *n < cap && (k < 5 || bench_now() - start < budget); k++) {
        evict_caches(ev);
        double a = bench_now();
        kiln_status st = kiln_program_run(p, in, out);
        if (st)
            return st;
        samples[(*n)++] = bench_now() - a;
    }
    return KILN_OK;
}

/* Median, min and max of n > 0 samples (sorted in place). */
static void
summarize(double *samples, int n, timing *t)
{
    qsort(samples, (size_t)n, sizeof samples[0], cmp_double);
    t->median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
    t->min = samples[0];
    t->max = samples[n - 1];
    t->runs = n;
}

static kiln_status
time_program(kiln_program *p, const void *const *in, void *const *out, double budget,
             evictor *ev, timing *t)
{
    double samples[200];
    int n = 0;
    kiln_status st = time_samples(p, in, out, budget, ev, samples, 200, &n);
    if (!st)
        summarize(samples, n, t);
    return st;
}

/* ---- the bandwidth probe ------------------------------------------------------------------------
 * The limit: the best run of four kernels, STREAM's copy (y = x * 1, 8 bytes per element)
 * and triad (a = b + s*c, 12 bytes per element) compiled by kiln itself with ordinary
 * stores (KILN_STORES_CACHED), the same copy with non-temporal stores
 * (KILN_STORES_STREAM), and a read (s = sum(x), 4 bytes per element), run on its thread
 * pool over 2^25 floats per array (128 MiB each: far beyond any last-level cache), at least
 * 5 runs of each per call of probe_run.  A workload that only reads (gemv, decode: their
 * weights) is also given as a fraction of the read's best: on the development machine a
 * read streams about half the bytes per second that the streaming copy moves.  The bytes
 * counted are STREAM's: a store's read-for-ownership is not counted, as in STREAM.  That
 * makes the streaming copy the fastest on most machines (it really moves 8 bytes per
 * element where the ordinary copy moves 12), and a workload that streams its stores (chain
 * by default at its size) is measured against the streaming copy, not against a limit it
 * can beat. */
#define PROBE_CAP 256

typedef struct probe_kind {
    kiln_program *prog;
    double bytes_per_elem;
    double samples[PROBE_CAP];
    int n;
} probe_kind;

enum { PROBE_COPY, PROBE_TRIAD, PROBE_NT_COPY, PROBE_READ, PROBE_KINDS };

typedef struct probe {
    probe_kind k[PROBE_KINDS];
    float *a, *b, *c;
    size_t n;
} probe;

/* What a workload's probes measured: GB/s of the best run and the median run per kind;
 * best = the limit, the best of all three. */
typedef struct probe_figs {
    double best;
    double best_of[PROBE_KINDS], median_of[PROBE_KINDS];
    int runs[PROBE_KINDS];
    int limit_kind; /* which kernel's run is the limit */
} probe_figs;

static const char *const probe_names[PROBE_KINDS] = {"copy", "triad", "stream_copy", "read"};

static kiln_status
probe_compile(const char *text, kiln_stores stores, kiln_program **out)
{
    kiln_graph *g;
    kiln_status st = kiln_graph_parse(text, strlen(text), &g);
    if (st)
        return st;
    kiln_options o = KILN_OPTIONS_INIT;
    o.stores = stores;
    st = kiln_program_compile(g, &o, out);
    kiln_graph_free(g);
    return st;
}

static kiln_status
probe_init(probe *pr)
{
    char copy[512], triad[512], rd[512];
    pr->n = (size_t)1 << 25;
    snprintf(copy, sizeof copy,
             "graph probe_copy(x: f32[%zu]) -> (y: f32[%zu]) {\n"
             "  one = full(value=1) : f32[]\n  y = mul(x, one)\n}\n",
             pr->n, pr->n);
    snprintf(triad, sizeof triad,
             "graph probe_triad(b: f32[%zu], c: f32[%zu]) -> (a: f32[%zu]) {\n"
             "  s = full(value=3) : f32[]\n  sc = mul(c, s)\n  a = add(b, sc)\n}\n",
             pr->n, pr->n, pr->n);
    snprintf(rd, sizeof rd,
             "graph probe_read(x: f32[%zu]) -> (s: f32[]) {\n  s = reduce_sum(x, axes=[0])\n}\n",
             pr->n);
    pr->k[PROBE_COPY].bytes_per_elem = pr->k[PROBE_NT_COPY].bytes_per_elem = 8;
    pr->k[PROBE_TRIAD].bytes_per_elem = 12;
    pr->k[PROBE_READ].bytes_per_elem = 4;
    kiln_status st;
    if ((st = probe_compile(copy, KILN_STORES_CACHED, &pr->k[PROBE_COPY].prog)) ||
        (st = probe_compile(triad, KILN_STORES_CACHED, &pr->k[PROBE_TRIAD].prog)) ||
        (st = probe_compile(copy, KILN_STORES_STREAM, &pr->k[PROBE_NT_COPY].prog)) ||
        (st = probe_compile(rd, KILN_STORES_CACHED, &pr->k[PROBE_READ].prog)))
        return st;
    pr->a = malloc(pr->n * 4);
    pr->b = malloc(pr->n * 4);
    pr->c = malloc(pr->n * 4);
    if (!pr->a || !pr->b || !pr->c)
        return ir_error(KILN_ERR_NOMEM, "kiln bench: out of memory for the bandwidth probe");
    for (size_t i = 0; i < pr->n; i++)
        pr->a[i] = pr->b[i] = pr->c[i] = (float)(i & 1023);
    return KILN_OK;
}

/* Start a workload's probe figures (its samples are those of the probe_run calls that
 * follow). */
static void
probe_reset(probe *pr)
{
    for (int i = 0; i < PROBE_KINDS; i++)
        pr->k[i].n = 0;
}

/* At least 5 more timed runs of each kernel (0.15 s each at most beyond that). */
static kiln_status
probe_run(probe *pr)
{
    const void *in[2] = {pr->b, pr->c};
    float sum;
    void *out[1] = {pr->a}, *sout[1] = {&sum};
    for (int i = 0; i < PROBE_KINDS; i++) {
        probe_kind *k = &pr->k[i];
        kiln_status st = time_samples(k->prog, in, i == PROBE_READ ? sout : out, 0.15, NULL,
                                      k->samples, PROBE_CAP, &k->n);
        if (st)
            return st;
    }
    return KILN_OK;
}

/* The figures of every run since probe_reset. */
static void
probe_result(probe *pr, probe_figs *f)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < PROBE_KINDS; i++) {
        probe_kind *k = &pr->k[i];
        if (!k->n)
            continue;
        timing t;
        double bytes = k->bytes_per_elem * (double)pr->n;
        summarize(k->samples, k->n, &t);
        f->best_of[i] = bytes / t.min * 1e-9;
        f->median_of[i] = bytes / t.median * 1e-9;
        f->runs[i] = t.runs;
    }
    f->best = 0;
    for (int i = 0; i < PROBE_KINDS; i++)
        if (f->best_of[i] > f->best) {
            f->best = f->best_of[i];
            f->limit_kind = i;
        }
}

/* The fewest runs of any probe kernel. */
static int
probe_min_runs(const probe_figs *f)
{
    int n = f->runs[0];
    for (int i = 1; i < PROBE_KINDS; i++)
        n = f->runs[i] < n ? f->runs[i] : n;
    return n;
}

static void
probe_free(probe *pr)
{
    for (int i = 0; i < PROBE_KINDS; i++)
        kiln_program_free(pr->k[i].prog);
    free(pr->a);
    free(pr->b);
    free(pr->c);
}

/* ---- re-capture -----------------------------------------------------------------------------
 * Record a parsed graph again through the public capture API, op by op, and end the scope:
 * what a program capturing the same graph every step pays when the graph is cached. */

typedef kiln_tensor (*unary_fn)(kiln_tensor);
typedef kiln_tensor (*binary_fn)(kiln_tensor, kiln_tensor);
typedef kiln_tensor (*reduce_fn)(kiln_tensor, int, const int *, int);
#define DEF_SOURCE(E, name)
#define DEF_UNARY(E, name) [IR_OP_##E] = kiln_##name,
#define DEF_BINARY(E, name)
#define DEF_TERNARY(E, name)
#define DEF_CAST(E, name)
#define DEF_MOVE(E, name)
#define DEF_REDUCE(E, name)
#define DEF_MATMUL(E, name)
static const unary_fn unary_fns[IR_OP_COUNT] = {
#define OP(E, name, arity, kind, trule, attrs, meaning) DEF_##kind(E, name)
#include "ops.def"
#undef OP
};
#undef DEF_UNARY
#undef DEF_BINARY
#undef DEF_REDUCE
#undef DEF_MATMUL
#define DEF_UNARY(E, name)
#define DEF_BINARY(E, name) [IR_OP_##E] = kiln_##name,
#define DEF_REDUCE(E, name)
#define DEF_MATMUL(E, name) [IR_OP_##E] = kiln_##name,
static const binary_fn binary_fns[IR_OP_COUNT] = {
#define OP(E, name, arity, kind, trule, attrs, meaning) DEF_##kind(E, name)
#include "ops.def"
#undef OP
};
#undef DEF_BINARY
#undef DEF_REDUCE
#undef DEF_MATMUL
#define DEF_BINARY(E, name)
#define DEF_REDUCE(E, name) [IR_OP_##E] = kiln_##name,
#define DEF_MATMUL(E, name)
static const reduce_fn reduce_fns[IR_OP_COUNT] = {
#define OP(E, name, arity, kind, trule, attrs, meaning) DEF_##kind(E, name)
#include "ops.def"
#undef OP
};

/* Record node n of g (operands already in t[]) in the open scope of dev. */
static kiln_tensor
replay_node(kiln_device *dev, const kiln_graph *g, int32_t n, const kiln_tensor *t)
{
    const ir_node *nd = &g->nodes[n];
    const ir_type *ty = &nd->type;
    kiln_tensor a = nd->nin > 0 ? t[nd->in[0]] : (kiln_tensor){0, 0, 0};
    kiln_tensor b = nd->nin > 1 ? t[nd->in[1]] : (kiln_tensor){0, 0, 0};
    switch (ir_ops[nd->op].kind) {
    case IR_KIND_SOURCE:
        if (nd->op == IR_OP_INPUT)
            return kiln_input(dev, nd->name, ty->dtype, ty->shape.rank, ty->shape.dims);
        if (nd->op == IR_OP_FULL)
            return kiln_full(dev, ty->dtype, ty->shape.rank, ty->shape.dims,
                             ir_scalar_f64(ty->dtype, &nd->at.value));
        if (nd->op == IR_OP_CONSTANT)
            return kiln_constant(dev, ty->dtype, ty->shape.rank, ty->shape.dims, nd->at.data);
        return kiln_arange(dev, ty->dtype, ty->shape.dims[0], ir_scalar_f64(ty->dtype, &nd->at.start),
                           ir_scalar_f64(ty->dtype, &nd->at.delta));
    case IR_KIND_UNARY:
        return unary_fns[nd->op](a);
    case IR_KIND_BINARY:
    case IR_KIND_MATMUL:
        return binary_fns[nd->op](a, b);
    case IR_KIND_TERNARY:
        return (nd->op == IR_OP_WHERE ? kiln_where : kiln_clamp)(a, b, t[nd->in[2]]);
    case IR_KIND_CAST:
        return kiln_cast(a, nd->at.to);
    case IR_KIND_REDUCE: {
        int axes[IR_MAX_RANK], na = 0;
        for (int i = 0; i < IR_MAX_RANK; i++)
            if (nd->at.axes & (1u << i))
                axes[na++] = i;
        return reduce_fns[nd->op](a, na, axes, nd->at.keepdim);
    }
    case IR_KIND_MOVE:
        switch (nd->op) {
        case IR_OP_RESHAPE: return kiln_reshape(a, nd->at.shape.rank, nd->at.shape.dims);
        case IR_OP_EXPAND: return kiln_expand(a, nd->at.shape.rank, nd->at.shape.dims);
        case IR_OP_PERMUTE: return kiln_permute(a, ty->shape.rank, nd->at.perm);
        case IR_OP_SLICE: return kiln_slice(a, nd->at.begin, nd->at.stop, nd->at.step);
        case IR_OP_PAD:
            return kiln_pad(a, nd->at.low, nd->at.high, ir_scalar_f64(ty->dtype, &nd->at.value));
        case IR_OP_GATHER: return kiln_gather(a, b, nd->at.axis);
        case IR_OP_CONCAT: {
            kiln_tensor xs[64];
            if (nd->nin > 64)
                break;
            for (int k = 0; k < nd->nin; k++)
                xs[k] = t[nd->in[k]];
            return kiln_concat(nd->nin, xs, nd->at.axis);
        }
        default: break;
        }
        break;
    }
    return (kiln_tensor){0, 0, 0};
}

/* compile_disk_ms: the graph compiled with the in-memory caches dropped and the disk cache
 * warm (kiln bench's own directory, see cmd_bench): what a new process pays for it once
 * LLVM and LLJIT are up.  Median of 5. */
static kiln_status
disk_compile_ms(const kiln_graph *g, const opts *o, double *ms)
{
    kiln_options of = KILN_OPTIONS_INIT;
    of.stores = o->stores;
    of.code = o->code;
    kiln_program *p;
    kiln_status st = kiln_program_compile(g, &of, &p); /* fills the disk cache */
    if (st)
        return st;
    kiln_program_free(p);
    double t[5];
    for (int k = 0; k < 5; k++) {
        jit_plan_cache_trim();
        jit_cache_trim();
        double a = bench_now();
        if ((st = kiln_program_compile(g, &of, &p)))
            return st;
        t[k] = bench_now() - a;
        kiln_program_free(p);
    }
    qsort(t, 5, sizeof t[0], cmp_double);
    *ms = t[2] * 1e3;
    return KILN_OK;
}

/* Median time of capturing g again and ending the scope (a cache hit); -1 if the graph
 * cannot be recorded through the API exactly (e.g. a full value not exact in a double). */
static double
recapture_us(const kiln_graph *g)
{
    kiln_device *dev = kiln_device_new();
    kiln_tensor *t = calloc((size_t)g->nnodes + 1, sizeof *t);
    kiln_tensor *outs = calloc((size_t)g->noutputs + 1, sizeof *outs);
    const char **names = calloc((size_t)g->noutputs + 1, sizeof *names);
    double samples[51], result = -1;
    int ok = 0;
    if (!dev || !t || !outs || !names)
        goto done;
    for (int32_t i = 0; i < g->noutputs; i++)
        names[i] = g->outputs[i].name;
    kiln_options o = KILN_OPTIONS_INIT;
    o.output_names = names;
    o.graph_name = g->name;
    for (int rep = 0; rep < 52; rep++) {
        double a = bench_now();
        kiln_scope s = kiln_scope_begin(dev);
        for (int32_t n = 0; n < g->nnodes; n++)
            t[n] = replay_node(dev, g, n, t);
        for (int32_t i = 0; i < g->noutputs; i++)
            outs[i] = t[g->outputs[i].node];
        kiln_program *p;
        kiln_status st = kiln_scope_end(s, g->noutputs, outs, &o, &p);
        double e = bench_now() - a;
        if (st)
            goto done;
        /* the first capture compiles (or finds a parsed twin): time the rest */
        bool same = kiln_graph_equal(kiln_program_graph(p), g);
        kiln_program_free(p);
        if (!same)
            goto done;
        if (rep > 0)
            samples[ok++] = e;
    }
    qsort(samples, (size_t)ok, sizeof samples[0], cmp_double);
    result = samples[ok / 2] * 1e6;
done:
    kiln_clear_error();
    kiln_device_free(dev);
    free(t);
    free(outs);
    free(names);
    return result;
}

/* ---- the FMA peak probe ------------------------------------------------------------------
 * jit_fma_peak: a kiln-compiled loop of independent vector FMA chains on the same thread
 * pool; best of 5 runs of about 10 ms each. */
static double
peak_run(void)
{
    double best = 0;
    for (int k = 0; k < 5; k++) {
        double g;
        if (jit_fma_peak(600, &g) == KILN_OK && g > best)
            best = g;
    }
    kiln_clear_error();
    return best;
}

/* ---- one workload ------------------------------------------------------------------------- */

typedef struct result {
    const char *name;
    char shape[128];
    bool ok;
    char error[256];
    double traffic, flops;
    timing fused, eager, interp;
    bool have_eager, have_interp;
    double compile_ms, disk_ms, recompile_us, recapture_us, probe_gbs;
    double first_run_ms; /* the first run of a program the program cache answered (median of 5) */
    double read_share;   /* of the minimal traffic, the inputs' bytes */
    probe_figs probe;
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
} result;

/* Divide the leading dim of every input of maximal rank whose leading dim equals the first
 * input's by `scale`; keep the graph if the result does not verify. */
static kiln_graph *
scaled(kiln_graph *g, double scale)
{
    if (scale <= 1)
        return g;
    int maxrank = 0;
    size_t count = 0;
    for (int32_t i = 0; i < g->ninputs; i++) {
        const ir_type *t = &g->nodes[g->inputs[i]].type;
        if (t->shape.rank > maxrank)
            maxrank = t->shape.rank;
        count += ir_shape_count(&t->shape);
    }
    if (maxrank == 0 || count <= 4096)
        return g; /* per-call overhead workloads keep their size */
    int64_t lead = g->nodes[g->inputs[0]].type.shape.dims[0];
    ir_type *types = calloc((size_t)g->ninputs + 1, sizeof *types);
    if (!types)
        return g;
    for (int32_t i = 0; i < g->ninputs; i++) {
        ir_type t = g->nodes[g->inputs[i]].type;
        if (t.shape.rank == maxrank && t.shape.dims[0] == lead) {
            int64_t d = (int64_t)((double)t.shape.dims[0] / scale);
            t.shape.dims[0] = d < 1 ? 1 : d;
        }
        types[i] = t;
    }
    kiln_graph *s = ir_graph_rebuild(g, types);
    free(types);
    if (!s || ir_graph_verify(s)) {
        kiln_graph_free(s);
        return g; /* the graph does not scale this way: keep its size */
    }
    kiln_graph_free(g);
    return s;
}

static double
graph_flops(const kiln_graph *g)
{
    double f = 0;
    for (int32_t i = 0; i < g->nnodes; i++) {
        const ir_node *nd = &g->nodes[i];
        if (nd->op != IR_OP_MATMUL)
            continue;
        const ir_shape *a = &g->nodes[nd->in[0]].type.shape;
        double k = (double)a->dims[a->rank - 1];
        f += 2.0 * k * (double)ir_shape_count(&nd->type.shape);
    }
    return f;
}

static double
minimal_traffic(const kiln_graph *g)
{
    double bytes = 0;
    for (int32_t i = 0; i < g->ninputs; i++)
        bytes += (double)ir_type_bytes(&g->nodes[g->inputs[i]].type);
    for (int32_t i = 0; i < g->noutputs; i++)
        bytes += (double)ir_type_bytes(&g->nodes[g->outputs[i].node].type);
    return bytes;
}

/* Error of `got` outputs against `want`: ULP for elementwise graphs, normwise relative
 * otherwise (max over outputs). */
static double
graph_error(const kiln_graph *g, void **got, void **want, bool ulp)
{
    double max = 0;
    for (int32_t i = 0; i < g->noutputs; i++) {
        const ir_type *t = &g->nodes[g->outputs[i].node].type;
        size_t n = ir_shape_count(&t->shape), worst;
        double e = ulp || !ir_dtype_is_float(t->dtype)
                       ? ulp_error(t->dtype, got[i], want[i], n, &worst)
                       : rel_error(t->dtype, got[i], want[i], n);
        if (e > max || isnan(e))
            max = e;
    }
    return max;
}

/* The verdict: the largest |got - reference| / bound over every element of every output
 * (INFINITY for an element beyond a zero bound; 0 when all are equal), the bound being
 * kiln check's, propagated through the graph (errbound.h: an elementwise ULP bound
 * cannot hold after a subtraction that cancels, an absolute one propagated does). */
static double
bound_ratio(const kiln_graph *g, void **got, const eb_output *eb)
{
    double max = 0;
    for (int32_t i = 0; i < g->noutputs; i++) {
        const ir_type *t = &g->nodes[g->outputs[i].node].type;
        eb_cmp c = eb_compare(t->dtype, got[i], &eb[i], ir_shape_count(&t->shape));
        if (c.ratio > max)
            max = c.ratio;
    }
    return max;
}

static void
free_bufs(void **b, int n)
{
    if (!b)
        return;
    for (int i = 0; i < n; i++)
        free(b[i]);
    free(b);
}

static void **
alloc_outputs(const kiln_graph *g)
{
    void **b = calloc((size_t)g->noutputs + 1, sizeof *b);
    for (int32_t i = 0; b && i < g->noutputs; i++) {
        b[i] = malloc(ir_type_bytes(&g->nodes[g->outputs[i].node].type) + 1);
        if (!b[i]) {
            free_bufs(b, g->noutputs);
            return NULL;
        }
    }
    return b;
}

/* The first run of a program that the program cache answered (a client whose shapes change
 * every step gets such a program every step): compile again (a hit), evict (cold
 * workloads), time one run, free; the median of 5, in ms. */
static kiln_status
first_run_ms(const kiln_graph *g, const kiln_options *o, const void *const *in, void *const *out,
             evictor *ev, double *ms)
{
    double t[5];
    for (int k = 0; k < 5; k++) {
        kiln_program *p;
        kiln_status st = kiln_program_compile(g, o, &p);
        if (st)
            return st;
        evict_caches(ev);
        double a = bench_now();
        st = kiln_program_run(p, in, out);
        t[k] = bench_now() - a;
        kiln_program_free(p);
        if (st)
            return st;
    }
    qsort(t, 5, sizeof t[0], cmp_double);
    *ms = t[2] * 1e3;
    return KILN_OK;
}

/* Per-call overhead workloads (at most 4096 input elements, like `small`) and compute-bound
 * matmul workloads (GFLOP/s is their figure: more than MEMORY_BOUND_INTENSITY flops per
 * byte of minimal traffic) run warm; the rest, memory-bound, from cold caches: elementwise
 * and reduction graphs, and matmuls with few rows such as gemv (0.5 flops per byte), whose
 * work is reading the weights once. */
#define MEMORY_BOUND_INTENSITY 4.0

static bool
is_memory_bound(const kiln_graph *g)
{
    size_t count = 0;
    for (int32_t i = 0; i < g->ninputs; i++)
        count += ir_shape_count(&g->nodes[g->inputs[i]].type.shape);
    return count > 4096 && graph_flops(g) <= MEMORY_BOUND_INTENSITY * minimal_traffic(g);
}

static void
bench_one(const char *name, kiln_graph *g, const opts *o, probe *pr, evictor *evb, result *r)
{
    char tb[IR_TYPE_STR_MAX];
    r->name = name;
    r->ok = false;
    snprintf(r->shape, sizeof r->shape, "%s", ir_type_str(&g->nodes[g->inputs[0]].type, tb, sizeof tb));
    r->traffic = minimal_traffic(g);
    r->read_share = 0;
    for (int32_t i = 0; i < g->ninputs && r->traffic > 0; i++)
        r->read_share += (double)ir_type_bytes(&g->nodes[g->inputs[i]].type) / r->traffic;
    r->flops = graph_flops(g);
    size_t nl = strlen(name);
    r->single = nl > 3 && !strcmp(name + nl - 3, "_1t");
    jit_pool_single(r->single);
    bool elementwise = bench_is_elementwise(g);
    r->err_unit = elementwise ? "ulp" : "rel";

    const void **in = calloc((size_t)g->ninputs + 1, sizeof *in);
    void **ref = calloc((size_t)g->noutputs + 1, sizeof *ref), **fo = alloc_outputs(g),
         **eo = alloc_outputs(g);
    eb_output *eb = calloc((size_t)g->noutputs + 1, sizeof *eb);
    bool have_eb = false;
    kiln_program *pf = NULL, *pe = NULL, *pi = NULL;
    kiln_status st = KILN_OK;
    if (!in || !ref || !fo || !eo || !eb) {
        st = ir_error(KILN_ERR_NOMEM, "kiln bench: out of memory");
        goto done;
    }
    uint64_t seed = 0x6b696c6e;
    for (int32_t i = 0; i < g->ninputs; i++) {
        const ir_type *t = &g->nodes[g->inputs[i]].type;
        void *b = malloc(ir_type_bytes(t) + 1);
        if (!b) {
            st = ir_error(KILN_ERR_NOMEM, "kiln bench: out of memory");
            goto done;
        }
        cli_fill_random(t->dtype, b, ir_shape_count(&t->shape), &seed);
        in[i] = b;
    }
    /* cold compile: caches bypassed, median of 3 */
    double cold[3];
    for (int k = 0; k < 3; k++) {
        kiln_options oc = KILN_OPTIONS_INIT;
        oc.flags = KILN_NO_CACHE;
        oc.stores = o->stores;
        oc.code = o->code;
        kiln_program *p;
        double a = bench_now();
        if ((st = kiln_program_compile(g, &oc, &p)))
            goto done;
        cold[k] = bench_now() - a;
        kiln_program_free(p);
    }
    qsort(cold, 3, sizeof cold[0], cmp_double);
    r->compile_ms = cold[1] * 1e3;
    kiln_options of = KILN_OPTIONS_INIT;
    of.stores = o->stores;
    of.code = o->code;
    kiln_options oe = of, oi = KILN_OPTIONS_INIT;
    oe.mode = KILN_MODE_EAGER;
    oi.mode = KILN_MODE_INTERP;
    if ((st = disk_compile_ms(g, o, &r->disk_ms)))
        goto done;
    if ((st = kiln_program_compile(g, &of, &pf)))
        goto done;
    /* cached: the same graph again finds its compiled form */
    double rec[21];
    for (int k = 0; k < 21; k++) {
        kiln_program *p;
        double a = bench_now();
        if ((st = kiln_program_compile(g, &of, &p)))
            goto done;
        rec[k] = bench_now() - a;
        kiln_program_free(p);
    }
    qsort(rec, 21, sizeof rec[0], cmp_double);
    r->recompile_us = rec[10] * 1e6;
    r->recapture_us = recapture_us(g);
    if (o->eager && (st = kiln_program_compile(g, &oe, &pe)))
        goto done;

    fprintf(stderr, "kiln bench: %s: reference...\n", name);
    if ((st = eb_reference(g, in, eb)))
        goto done;
    have_eb = true;
    for (int32_t i = 0; i < g->noutputs; i++)
        ref[i] = eb[i].ref;
    r->cold = !o->warm && is_memory_bound(g);
    evictor *ev = r->cold ? evb : NULL;
    probe_reset(pr);
    if ((st = probe_run(pr)))
        goto done;
    double f0 = r->flops > 0 ? peak_run() : 0;
    fprintf(stderr, "kiln bench: %s: fused...\n", name);
    if ((st = time_program(pf, in, fo, o->budget, ev, &r->fused)))
        goto done;
    r->err_fused = graph_error(g, fo, ref, elementwise);
    r->ratio_fused = bound_ratio(g, fo, eb);
    if ((st = first_run_ms(g, &of, in, fo, ev, &r->first_run_ms)))
        goto done;
    if (pe) {
        fprintf(stderr, "kiln bench: %s: eager...\n", name);
        if ((st = time_program(pe, in, eo, o->budget, ev, &r->eager)))
            goto done;
        r->have_eager = true;
        r->err_eager = graph_error(g, eo, ref, elementwise);
        r->ratio_eager = bound_ratio(g, eo, eb);
    }
    if (o->interp) {
        fprintf(stderr, "kiln bench: %s: interp...\n", name);
        if ((st = kiln_program_compile(g, &oi, &pi)) ||
            (st = time_program(pi, in, eo, o->budget, ev, &r->interp)))
            goto done;
        r->have_interp = true;
    }
    if ((st = probe_run(pr)))
        goto done;
    probe_result(pr, &r->probe);
    r->probe_gbs = r->probe.best;
    if (r->flops > 0) {
        double f1 = peak_run();
        r->peak_gflops = f0 > f1 ? f0 : f1;
    }
    r->ok = r->ratio_fused <= 1 && (!r->have_eager || r->ratio_eager <= 1);
    if (!r->ok)
        snprintf(r->error, sizeof r->error,
                 "an element beyond its bound (kiln check's): %.3g times the bound, fused; %.3g, eager",
                 r->ratio_fused, r->ratio_eager);
done:
    if (st) {
        r->ok = false;
        snprintf(r->error, sizeof r->error, "%s", kiln_errmsg());
    }
    jit_pool_single(false);
    kiln_program_free(pf);
    kiln_program_free(pe);
    kiln_program_free(pi);
    if (in)
        for (int32_t i = 0; i < g->ninputs; i++)
            free((void *)in[i]);
    free(in);
    if (have_eb)
        eb_free(g, eb);
    free(eb);
    free(ref);
    free_bufs(fo, g->noutputs);
    free_bufs(eo, g->noutputs);
}

/* ---- output ---------------------------------------------------------------------------- */

static double
gbs(const result *r, const timing *t)
{
    return t->median > 0 ? r->traffic / t->median * 1e-9 : 0;
}

static void
print_table(FILE *f, const result *rs, int n, const opts *o)
{
    fprintf(f, "\n%-12s %-22s %-6s %20s %20s %7s %8s %6s %8s %6s %13s %9s %14s\n", "workload",
            "input", "caches", "fused ms (min-max)", o->eager ? "eager ms (min-max)" : "",
            o->eager ? "f/e" : "", "GB/s", "%bw", "GFLOP/s", "%peak", "compile", "recapture",
            "error f/e");
    fprintf(f, "%-12s %-22s %-6s %20s %20s %7s %8s %6s %8s %6s %13s %9s %14s\n", "", "", "", "", "",
            "", "", "", "", "", "ms (disk)", "us", "");
    for (int i = 0; i < n; i++) {
        const result *r = &rs[i];
        if (!r->fused.runs) {
            fprintf(f, "%-12s FAILED: %s\n", r->name, r->error);
            continue;
        }
        char fm[64], em[64] = "", sp[16] = "", gf[16] = "-", pk[16] = "-", err[48];
        snprintf(fm, sizeof fm, "%.3f (%.3f-%.3f)", r->fused.median * 1e3, r->fused.min * 1e3,
                 r->fused.max * 1e3);
        if (r->have_eager) {
            snprintf(em, sizeof em, "%.3f (%.3f-%.3f)", r->eager.median * 1e3,
                     r->eager.min * 1e3, r->eager.max * 1e3);
            snprintf(sp, sizeof sp, "%.2fx", r->eager.median / r->fused.median);
        }
        if (r->flops > 0)
            snprintf(gf, sizeof gf, "%.1f", r->flops / r->fused.median * 1e-9);
        if (r->flops > 0 && r->peak_gflops > 0)
            snprintf(pk, sizeof pk, "%.0f%%", 100 * r->flops / r->fused.median * 1e-9 / r->peak_gflops);
        if (r->have_eager)
            snprintf(err, sizeof err, "%.3g/%.3g %s", r->err_fused, r->err_eager, r->err_unit);
        else
            snprintf(err, sizeof err, "%.3g %s", r->err_fused, r->err_unit);
        char cm[32];
        snprintf(cm, sizeof cm, "%.2f (%.2f)", r->compile_ms, r->disk_ms);
        fprintf(f, "%-12s %-22s %-6s %20s %20s %7s %8.2f %5.0f%% %8s %6s %13s %9.2f %14s%s\n",
                r->name, r->shape, r->cold ? "cold" : "warm", fm, em, sp, gbs(r, &r->fused),
                r->probe_gbs > 0 ? 100 * gbs(r, &r->fused) / r->probe_gbs : 0, gf, pk, cm,
                r->recapture_us, err, r->ok ? "" : "  <-- FAIL");
        if (!strcmp(r->name, "small") || !strcmp(r->name, "matmul_small"))
            fprintf(f, "%-12s   per call: fused %.2f us\n", "", r->fused.median * 1e6);
        if (r->cold && r->read_share >= 0.9 && r->probe.best_of[PROBE_READ] > 0)
            fprintf(f, "%-12s   reads: %.0f%% of its traffic is input; %.2f of the read probe's "
                       "best (%.2f GB/s)\n", "", 100 * r->read_share,
                    gbs(r, &r->fused) / r->probe.best_of[PROBE_READ], r->probe.best_of[PROBE_READ]);
        if (r->first_run_ms > 1.2e3 * r->fused.median)
            fprintf(f, "%-12s   first run of a program from the cache: %.3f ms, %.2fx the median\n",
                    "", r->first_run_ms, r->first_run_ms / (r->fused.median * 1e3));
        if (r->peak_gflops > 0)
            fprintf(f, "%-12s   FMA peak probed around it: %.1f GFLOP/s on %s\n", "",
                    r->peak_gflops, r->single ? "1 thread" : "all threads");
    }
}

/* The probe's figures per workload: best / median GB/s of each kernel. */
static void
print_probes(FILE *f, const result *rs, int n)
{
    fprintf(f, "\nbandwidth probe around each workload, GB/s as STREAM counts bytes, best / median "
               "of the runs (count):\n%-12s %-22s %-22s %7s   %s\n", "workload", "copy", "triad",
            "limit", "streaming copy (non-temporal stores)  read");
    for (int i = 0; i < n; i++) {
        const probe_figs *p = &rs[i].probe;
        if (!rs[i].fused.runs)
            continue;
        char c[PROBE_KINDS][48];
        for (int k = 0; k < PROBE_KINDS; k++)
            snprintf(c[k], sizeof c[k], "%.2f / %.2f (%d)", p->best_of[k], p->median_of[k], p->runs[k]);
        fprintf(f, "%-12s %-22s %-22s %7.2f   %-22s %-22s limit: %s\n", rs[i].name,
                c[PROBE_COPY], c[PROBE_TRIAD], p->best, c[PROBE_NT_COPY], c[PROBE_READ],
                probe_names[p->limit_kind]);
    }
}

static void
json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

/* JSON has no infinity or NaN: an infinite error (an element beyond a zero bound, a NaN
 * where a number was expected) is written as 1e300. */
static double
jfin(double v)
{
    return isfinite(v) ? v : 1e300;
}

static void
json_timing(FILE *f, const char *name, const timing *t)
{
    fprintf(f, "\"%s\": {\"median_s\": %.9g, \"min_s\": %.9g, \"max_s\": %.9g, \"runs\": %d}",
            name, t->median, t->min, t->max, t->runs);
}

static kiln_status
write_json(const char *path, const result *rs, int n, const kiln_stats *ks, const opts *o)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return ir_error(KILN_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    const jit_host *h = jit_host_info();
    fprintf(f, "{\n  \"kiln_version\": \"%s\",\n  \"machine\": {\"cpu\": ", kiln_version());
    json_str(f, h->cpu);
    fprintf(f, ", \"features\": ");
    json_str(f, h->features);
    fprintf(f, ", \"vector_bits\": %d, \"threads\": %d, \"llvm_version\": \"%s\", "
               "\"llc_bytes\": %zu, \"llc_source\": \"%s\"},\n",
            h->vector_bits, ks->threads, h->llvm_version, h->llc_bytes, h->llc_source);
    fprintf(f, "  \"warm\": %s,\n  \"stores\": \"%s\",\n  \"code\": \"%s\",\n",
            o->warm ? "true" : "false",
            o->stores == KILN_STORES_STREAM ? "stream"
            : o->stores == KILN_STORES_CACHED ? "cached" : "auto",
            o->code == KILN_CODE_COMPACT ? "compact" : o->code == KILN_CODE_FULL ? "full" : "auto");
    fprintf(f,
            "  \"preload_cpu_ms\": %.6g,\n  \"startup_ms\": %.6g,\n  \"lljit_ms\": %.6g,\n"
            "  \"workloads\": [\n",
            o->preload_ms, ks->startup_ms, ks->lljit_ms);
    for (int i = 0; i < n; i++) {
        const result *r = &rs[i];
        fprintf(f, "    {\"name\": ");
        json_str(f, r->name);
        fprintf(f, ", \"input\": ");
        json_str(f, r->shape);
        fprintf(f, ", \"ok\": %s, \"caches\": \"%s\", ", r->ok ? "true" : "false",
                r->cold ? "cold" : "warm");
        if (!r->ok) {
            fprintf(f, "\"error\": ");
            json_str(f, r->error);
            fprintf(f, ", ");
        }
        json_timing(f, "fused", &r->fused);
        if (r->have_eager) {
            fprintf(f, ", ");
            json_timing(f, "eager", &r->eager);
            fprintf(f, ", \"speedup_fused_over_eager\": %.6g", r->eager.median / r->fused.median);
            fprintf(f, ", \"eager_gbs\": %.6g", gbs(r, &r->eager));
            fprintf(f, ", \"error_eager\": %.6g, \"bound_ratio_eager\": %.6g", jfin(r->err_eager),
                    jfin(r->ratio_eager));
        }
        if (r->have_interp) {
            fprintf(f, ", ");
            json_timing(f, "interp", &r->interp);
        }
        fprintf(f, ", \"threads\": %d, \"peak_gflops\": %.6g, \"fraction_of_peak\": %.6g",
                r->single ? 1 : ks->threads, r->peak_gflops,
                r->peak_gflops > 0 && r->fused.median > 0
                    ? r->flops / r->fused.median * 1e-9 / r->peak_gflops
                    : 0);
        const probe_figs *pf = &r->probe;
        fprintf(f,
                ", \"probe_copy_best_gbs\": %.6g, \"probe_copy_median_gbs\": %.6g, "
                "\"probe_triad_best_gbs\": %.6g, \"probe_triad_median_gbs\": %.6g, "
                "\"probe_stream_copy_best_gbs\": %.6g, \"probe_stream_copy_median_gbs\": %.6g, "
                "\"probe_read_best_gbs\": %.6g, \"probe_read_median_gbs\": %.6g, "
                "\"fraction_of_read\": %.6g, \"read_share\": %.6g, "
                "\"probe_runs\": %d, \"probe_limit_kind\": \"%s\"",
                pf->best_of[PROBE_COPY], pf->median_of[PROBE_COPY], pf->best_of[PROBE_TRIAD],
                pf->median_of[PROBE_TRIAD], pf->best_of[PROBE_NT_COPY], pf->median_of[PROBE_NT_COPY],
                pf->best_of[PROBE_READ], pf->median_of[PROBE_READ],
                pf->best_of[PROBE_READ] > 0 ? gbs(r, &r->fused) / pf->best_of[PROBE_READ] : 0,
                r->read_share, probe_min_runs(pf), probe_names[pf->limit_kind]);
        fprintf(f,
                ", \"minimal_traffic_bytes\": %.17g, \"fused_gbs\": %.6g, \"probe_gbs\": %.6g, "
                "\"fraction_of_bandwidth\": %.6g, \"flops\": %.17g, \"gflops\": %.6g, "
                "\"compile_cold_ms\": %.6g, \"compile_disk_ms\": %.6g, \"compile_cached_us\": %.6g, "
                "\"recapture_us\": %.6g, \"first_run_ms\": %.6g, "
                "\"error_fused\": %.6g, \"error_unit\": \"%s\", \"bound_ratio_fused\": %.6g}%s\n",
                r->traffic, gbs(r, &r->fused), r->probe_gbs,
                r->probe_gbs > 0 ? gbs(r, &r->fused) / r->probe_gbs : 0, r->flops,
                r->flops > 0 && r->fused.median > 0 ? r->flops / r->fused.median * 1e-9 : 0,
                r->compile_ms, r->disk_ms, r->recompile_us, r->recapture_us, r->first_run_ms,
                jfin(r->err_fused),
                r->err_unit, jfin(r->ratio_fused),
                i + 1 < n ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    if (fclose(f) != 0)
        return ir_error(KILN_ERR_IO, "%s: write failed", path);
    return KILN_OK;
}

/* Grouped bars per workload: fused and eager effective bandwidth, with the probe's
 * bandwidth as a line over each group. */
static kiln_status
write_svg(const char *path, const result *rs, int n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return ir_error(KILN_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    double top = 1;
    for (int i = 0; i < n; i++) {
        if (rs[i].probe_gbs > top) top = rs[i].probe_gbs;
        if (gbs(&rs[i], &rs[i].fused) > top) top = gbs(&rs[i], &rs[i].fused);
    }
    top *= 1.15;
    int W = 120 * n + 120, H = 400, x0 = 70, y0 = 340, ph = 280;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%d\" y=\"20\" font-size=\"15\">kiln bench: effective bandwidth "
               "(GB/s, minimal traffic / median time)</text>\n", x0);
    for (int k = 0; k <= 4; k++) {
        double v = top * k / 4;
        int y = y0 - (int)(ph * k / 4);
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#ddd\"/>\n", x0, y, W - 20, y);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.0f</text>\n", x0 - 6, y + 4, v);
    }
    for (int i = 0; i < n; i++) {
        const result *r = &rs[i];
        int gx = x0 + 20 + 120 * i;
        double fv = gbs(r, &r->fused), ev = r->have_eager ? gbs(r, &r->eager) : 0;
        int fh = (int)(ph * fv / top), eh = (int)(ph * ev / top), py = y0 - (int)(ph * r->probe_gbs / top);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"40\" height=\"%d\" fill=\"#d9532b\"/>\n", gx, y0 - fh, fh);
        if (r->have_eager)
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"40\" height=\"%d\" fill=\"#7a9cc6\"/>\n", gx + 42, y0 - eh, eh);
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\" stroke-width=\"2\" stroke-dasharray=\"5,3\"/>\n",
                gx - 6, py, gx + 88, py);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", gx + 41, y0 + 18, r->name);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\">%.0f%%</text>\n",
                gx + 20, y0 - fh - 4, r->probe_gbs > 0 ? 100 * fv / r->probe_gbs : 0);
    }
    fprintf(f, "<rect x=\"%d\" y=\"365\" width=\"12\" height=\"12\" fill=\"#d9532b\"/><text x=\"%d\" y=\"376\">fused</text>\n", x0, x0 + 16);
    fprintf(f, "<rect x=\"%d\" y=\"365\" width=\"12\" height=\"12\" fill=\"#7a9cc6\"/><text x=\"%d\" y=\"376\">eager</text>\n", x0 + 70, x0 + 86);
    fprintf(f, "<line x1=\"%d\" y1=\"371\" x2=\"%d\" y2=\"371\" stroke=\"black\" stroke-width=\"2\" stroke-dasharray=\"5,3\"/><text x=\"%d\" y=\"376\">limit: the best copy/triad/streaming-copy probe run (same run)</text>\n",
            x0 + 140, x0 + 170, x0 + 176);
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0)
        return ir_error(KILN_ERR_IO, "%s: write failed", path);
    return KILN_OK;
}

/* ---- the command ---------------------------------------------------------------------- */

int
cmd_bench(int argc, char **argv)
{
    /* what the process paid before this line: the dynamic loader (libLLVM's relocations)
     * and the static constructors (docs/benchmarking.md, "Start-up") */
    opts o = {.scale = 1, .eager = true, .budget = 1.0,
              .preload_ms = cli_clock_ms(CLOCK_PROCESS_CPUTIME_ID)};
    const char **files = calloc((size_t)argc + 1, sizeof *files);
    int nfiles = 0;
    if (!files)
        return cli_fail();
    for (int i = 1; i < argc; i++) {
        const char *v;
        int m;
        if (cli_is_help(argv[i])) {
            cmd_bench_help(stdout);
            free(files);
            return CLI_OK;
        }
        if ((m = cli_option("bench", argc, argv, &i, "--scale", &v)) != 0) {
            if (m < 0 || (o.scale = atof(v)) < 1) {
                free(files);
                return m < 0 ? CLI_USAGE : cli_usage("bench", "--scale needs a number >= 1");
            }
        } else if ((m = cli_option("bench", argc, argv, &i, "--threads", &v)) != 0) {
            if (m < 0 || atoi(v) < 1) {
                free(files);
                return m < 0 ? CLI_USAGE : cli_usage("bench", "--threads needs a number >= 1");
            }
            /* before anything starts the pool */
            setenv("KILN_NUM_THREADS", v, 1);
        } else if ((m = cli_option("bench", argc, argv, &i, "--mode", &v)) != 0) {
            if (m < 0) {
                free(files);
                return CLI_USAGE;
            }
            if (!strcmp(v, "fused"))
                o.eager = false;
            else if (!strcmp(v, "all"))
                o.interp = true;
            else if (strcmp(v, "eager") != 0) {
                free(files);
                return cli_usage("bench", "--mode is fused, eager or all, not '%s'", v);
            }
        } else if ((m = cli_option("bench", argc, argv, &i, "--time", &v)) != 0) {
            if (m < 0 || (o.budget = atof(v)) <= 0) {
                free(files);
                return m < 0 ? CLI_USAGE : cli_usage("bench", "--time needs seconds > 0");
            }
        } else if (!strcmp(argv[i], "--warm")) {
            o.warm = true;
        } else if ((m = cli_option("bench", argc, argv, &i, "--stores", &v)) != 0) {
            if (m < 0) {
                free(files);
                return CLI_USAGE;
            }
            if (!strcmp(v, "stream"))
                o.stores = KILN_STORES_STREAM;
            else if (!strcmp(v, "cached"))
                o.stores = KILN_STORES_CACHED;
            else if (strcmp(v, "auto") != 0) {
                free(files);
                return cli_usage("bench", "--stores is auto, stream or cached, not '%s'", v);
            }
        } else if ((m = cli_option("bench", argc, argv, &i, "--code", &v)) != 0) {
            if (m < 0 || cli_parse_code(v, &o.code)) {
                free(files);
                return m < 0 ? CLI_USAGE
                             : cli_usage("bench", "--code is auto, full or compact, not '%s'", v);
            }
        } else if ((m = cli_option("bench", argc, argv, &i, "--json", &o.json)) != 0) {
            if (m < 0) {
                free(files);
                return CLI_USAGE;
            }
        } else if ((m = cli_option("bench", argc, argv, &i, "--plot", &o.plot)) != 0) {
            if (m < 0) {
                free(files);
                return CLI_USAGE;
            }
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            free(files);
            return cli_usage("bench", "unknown option '%s'", argv[i]);
        } else {
            files[nfiles++] = argv[i];
        }
    }
    int n = nfiles ? nfiles : bench_suite_count;
    result *rs = calloc((size_t)n, sizeof *rs);
    probe pr = {0};
    evictor ev = {0};
    int rc = CLI_OK;
    if (!rs) {
        free(files);
        return cli_fail();
    }
    /* The disk cache is measured in a directory of the run's own, removed at the end: a
     * benchmark neither reads nor fills the user's cache. */
    char cache_dir[] = "/tmp/kiln-bench-XXXXXX";
    if (!mkdtemp(cache_dir) || setenv("KILN_CACHE_DIR", cache_dir, 1) != 0) {
        fprintf(stderr, "kiln bench: cannot make a temporary cache directory: %s\n",
                strerror(errno));
        free(rs);
        free(files);
        return CLI_FAIL;
    }
    ir_config_reload(); /* the library reads the environment once: these two settings */
    const jit_host *h = jit_host_info();
    fprintf(stderr, "kiln bench: %d workload(s) on %s (%d-bit vectors), %d thread(s); probe...\n",
            n, h->cpu, h->vector_bits, jit_pool_threads());
    if (probe_init(&pr) || (!o.warm && evict_init(&ev))) {
        rc = cli_fail();
        goto done;
    }
    for (int i = 0; i < n; i++) {
        kiln_graph *g = NULL;
        kiln_status st;
        /* a file, or the name of a workload of the built-in suite */
        int w = nfiles ? -1 : i;
        for (int k = 0; nfiles && k < bench_suite_count; k++)
            if (!strcmp(files[i], bench_suite[k].name))
                w = k;
        if (w < 0) {
            st = cli_load_graph(files[i], &g);
            rs[i].name = files[i];
        } else {
            char src[64];
            snprintf(src, sizeof src, "<bench:%s>", bench_suite[w].name);
            st = ir_parse(bench_suite[w].text, bench_suite[w].len, src, &g);
            rs[i].name = bench_suite[w].name;
        }
        if (st) {
            snprintf(rs[i].error, sizeof rs[i].error, "%s", kiln_errmsg());
            rc = CLI_FAIL;
            continue;
        }
        g = scaled(g, o.scale);
        bench_one(rs[i].name, g, &o, &pr, &ev, &rs[i]);
        kiln_graph_free(g);
        if (!rs[i].ok) {
            fprintf(stderr, "kiln bench: %s: %s\n", rs[i].name, rs[i].error);
            rc = CLI_FAIL;
        }
    }
    kiln_stats ks = KILN_STATS_INIT;
    kiln_jit_stats(&ks);
    printf("kiln %s bench on %s (%d-bit vectors), %d threads, LLVM %s\n", kiln_version(), h->cpu,
           h->vector_bits, ks.threads, h->llvm_version);
    printf("process start-up before kiln bench ran (loading libLLVM, its static constructors): "
           "%.1f ms of CPU\n",
           o.preload_ms);
    printf("one-time start-up (LLVM + LLJIT): %.1f ms, of it LLJIT %.1f ms; kernels compiled %llu, "
           "cache hits %llu; disk cache: %llu modules loaded, %llu written\n",
           ks.startup_ms, ks.lljit_ms, (unsigned long long)ks.kernel_compiles,
           (unsigned long long)ks.kernel_hits, (unsigned long long)ks.disk_hits,
           (unsigned long long)ks.disk_writes);
    print_table(stdout, rs, n, &o);
    print_probes(stdout, rs, n);
    if (o.warm)
        printf("\ncaches: warm everywhere (--warm): kept between timed runs, so a working set "
               "that fits in the %zu MiB last-level cache (from %s) runs from cache.\n",
               h->llc_bytes >> 20, h->llc_source);
    else
        printf("\ncaches: cold = a buffer of %zu MiB (4x the %zu MiB last-level cache, from %s) "
               "read between timed runs, outside the timing; warm = per-call and compute-bound "
               "matmul workloads, the caches kept between runs.\n",
               ev.words * 8 >> 20, h->llc_bytes >> 20, h->llc_source);
    if (o.stores)
        printf("stores: %s in every workload (--stores).\n",
               o.stores == KILN_STORES_STREAM
                   ? "non-temporal wherever allowed (KILN_STORES_STREAM)"
                   : "ordinary, never non-temporal (KILN_STORES_CACHED)");
    if (o.code)
        printf("code: %s in every workload (--code).\n",
               o.code == KILN_CODE_COMPACT ? "compact (KILN_CODE_COMPACT)"
                                           : "full (KILN_CODE_FULL)");
    printf("GB/s = minimal traffic (inputs + outputs) / median fused time; %%bw = that / the "
           "limit, the best run of the copy, triad and streaming-copy probes around the "
           "workload; %%peak = "
           "GFLOP/s / the FMA probe's best around it; compile = cold (caches bypassed), and in "
           "parentheses from the disk cache (in-memory caches dropped); recapture = recording "
           "the graph again through the capture API and ending the scope (a cache hit; -1: not "
           "replayable).\n");
    if (o.json && write_json(o.json, rs, n, &ks, &o))
        rc = cli_fail();
    if (o.plot && write_svg(o.plot, rs, n))
        rc = cli_fail();
done:
    probe_free(&pr);
    kiln_cache_clear(NULL);
    rmdir(cache_dir);
    evict_free(&ev);
    free(rs);
    free(files);
    return rc;
}
