/* bench_measure.c — `kiln bench`'s measurements of one workload (bench_one): cold compile
 * time (caches bypassed), compile time from the disk cache (in-memory caches dropped; a
 * temporary directory of the run's own), cached re-compile time, median and min–max run
 * times of fused and eager (and interp with --mode all), effective bandwidth from the
 * graph's minimal traffic (its inputs and outputs) against a STREAM-style probe (copy,
 * triad, and copy with streaming stores) run on the same thread pool right before and after
 * the workload (the best run of any: the machine's bandwidth drifts, and the limit is the
 * best the machine can do), GFLOP/s of matmuls against an FMA probe, and the error of fused
 * and eager against the oracle (lib/check).  Memory-bound workloads run from cold caches: a
 * buffer several times the last-level cache is read between timed runs, outside the timing
 * (--warm keeps the caches). */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_run.h"
#include "capture.h"
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

/* ---- timing ------------------------------------------------------------------------------- */

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- cache eviction ------------------------------------------------------------------------
 * Between timed runs of a memory-bound workload, every thread of the pool reads its part
 * of a buffer four times the last-level cache (kiln_host_info.llc_bytes), so the next
 * run finds its inputs in memory, not in cache, and the previous run's dirty output lines
 * are written back outside the timing: what a program that touches other data between
 * calls sees, and what a STREAM run measures. */

kiln_status
bench_evict_init(bench_evictor *ev)
{
    kiln_host_info h = KILN_HOST_INFO_INIT;
    kiln_host_info_get(&h);
    size_t bytes = 4 * h.llc_bytes;
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
    bench_evictor *ev = ctx;
    size_t per = (ev->words + (size_t)ev->parts - 1) / (size_t)ev->parts;
    size_t lo = (size_t)part * per, hi = lo + per < ev->words ? lo + per : ev->words;
    uint64_t s = 0;
    for (size_t i = lo; i < hi; i += 8) /* one word per 64-byte line */
        s += ev->buf[i];
    atomic_fetch_add_explicit(&ev->sink, s, memory_order_relaxed);
}

/* Read the whole eviction buffer on the pool (NULL: nothing, the warm case). */
static void
evict_caches(bench_evictor *ev)
{
    if (ev && ev->buf)
        jit_pool_run(evict_part, ev, ev->parts);
}

void
bench_evict_free(bench_evictor *ev)
{
    free(ev->buf);
    ev->buf = NULL;
}

/* Warm up, then append timed runs to samples[*n..cap) until `budget` seconds or `cap`
 * samples (at least 5 more); with ev, the caches are evicted before each timed run
 * (outside the timing). */
static kiln_status
time_samples(kiln_program *p, const void *const *in, void *const *out, double budget,
             bench_evictor *ev, double *samples, int cap, int *n)
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
summarize(double *samples, int n, bench_timing *t)
{
    qsort(samples, (size_t)n, sizeof samples[0], cmp_double);
    t->median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
    t->min = samples[0];
    t->max = samples[n - 1];
    t->runs = n;
}

static kiln_status
time_program(kiln_program *p, const void *const *in, void *const *out, double budget,
             bench_evictor *ev, bench_timing *t)
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
 * weights) is also given as a fraction of the read's best: a read streams far fewer bytes
 * per second than the streaming copy moves (docs/benchmarking.md, "The limit", has the
 * figures).  The bytes counted are STREAM's: a store's read-for-ownership is not counted,
 * as in STREAM.  That makes the streaming copy the fastest on most machines (it really
 * moves 8 bytes per element where the ordinary copy moves 12), and a workload that streams
 * its stores (chain by default at its size) is measured against the streaming copy, not
 * against a limit it can beat. */

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

kiln_status
bench_probe_init(bench_probe *pr)
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
probe_reset(bench_probe *pr)
{
    for (int i = 0; i < PROBE_KINDS; i++)
        pr->k[i].n = 0;
}

/* At least 5 more timed runs of each kernel (0.15 s each at most beyond that). */
static kiln_status
probe_run(bench_probe *pr)
{
    const void *in[2] = {pr->b, pr->c};
    float sum;
    void *out[1] = {pr->a}, *sout[1] = {&sum};
    for (int i = 0; i < PROBE_KINDS; i++) {
        bench_probe_kind *k = &pr->k[i];
        kiln_status st = time_samples(k->prog, in, i == PROBE_READ ? sout : out, 0.15, NULL,
                                      k->samples, PROBE_CAP, &k->n);
        if (st)
            return st;
    }
    return KILN_OK;
}

/* The read against the read probe, in the same moments: READ_PAIRS times, caches evicted,
 * one run of the read probe; evicted again, one run of the workload; the median of the
 * workloads' GB/s over the probe's of its pair.  The host's bandwidth moves by a third
 * within seconds (docs/benchmarking.md, "Workloads that only read"), so the probe's best
 * run, taken at another moment, can be from a faster phase than any of the workload's. */
#define READ_PAIRS 15

static kiln_status
read_paired(bench_probe *pr, kiln_program *p, const void *const *in, void *const *out,
            double traffic, bench_evictor *ev, double *fraction, int *pairs)
{
    const void *pin[1] = {pr->b};
    float sum;
    void *pout[1] = {&sum};
    bench_probe_kind *k = &pr->k[PROBE_READ];
    double ratio[READ_PAIRS];
    for (int i = 0; i < READ_PAIRS; i++) {
        evict_caches(ev);
        double a = bench_now();
        kiln_status st = kiln_program_run(k->prog, pin, pout);
        double tp = bench_now() - a;
        if (st)
            return st;
        evict_caches(ev);
        a = bench_now();
        if ((st = kiln_program_run(p, in, out)))
            return st;
        double tw = bench_now() - a;
        ratio[i] = (traffic / tw) / (k->bytes_per_elem * (double)pr->n / tp);
    }
    qsort(ratio, READ_PAIRS, sizeof ratio[0], cmp_double);
    *fraction = ratio[READ_PAIRS / 2];
    *pairs = READ_PAIRS;
    return KILN_OK;
}

/* The figures of every run since probe_reset. */
static void
probe_result(bench_probe *pr, bench_probe_figs *f)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < PROBE_KINDS; i++) {
        bench_probe_kind *k = &pr->k[i];
        if (!k->n)
            continue;
        bench_timing t;
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

void
bench_probe_free(bench_probe *pr)
{
    for (int i = 0; i < PROBE_KINDS; i++)
        kiln_program_free(pr->k[i].prog);
    free(pr->a);
    free(pr->b);
    free(pr->c);
}

/* ---- re-capture -----------------------------------------------------------------------------
 * Record a parsed graph again through the public capture API, op by op (cap_replay,
 * lib/capture/replay.c), and end the scope: what a program capturing the same graph every
 * step pays when the graph is cached. */

/* compile_disk_ms: the graph compiled with the in-memory caches dropped and the disk cache
 * warm (kiln bench's own directory, see cmd_bench): what a new process pays for it once
 * LLVM and LLJIT are up.  Median of 5. */
static kiln_status
disk_compile_ms(const kiln_graph *g, const bench_opts *o, double *ms)
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
        kiln_jit_cache_drop();
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
        cap_replay(dev, g, t);
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

/* Divide the leading dim of every input of maximal rank whose leading dim equals the first
 * input's by `scale`; keep the graph if the result does not verify. */
kiln_graph *
bench_scaled(kiln_graph *g, double scale)
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
             bench_evictor *ev, double *ms)
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

void
bench_one(const char *name, kiln_graph *g, const bench_opts *o, bench_probe *pr, bench_evictor *evb, bench_result *r)
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
    bench_evictor *ev = r->cold ? evb : NULL;
    probe_reset(pr);
    if ((st = probe_run(pr)))
        goto done;
    double f0 = r->flops > 0 ? peak_run() : 0;
    fprintf(stderr, "kiln bench: %s: fused...\n", name);
    if ((st = time_program(pf, in, fo, o->budget, ev, &r->fused)))
        goto done;
    r->err_fused = graph_error(g, fo, ref, elementwise);
    r->ratio_fused = bound_ratio(g, fo, eb);
    r->read_paired = 0;
    r->paired = 0;
    if (ev && r->read_share >= 0.9 &&
        (st = read_paired(pr, pf, in, fo, r->traffic, ev, &r->read_paired, &r->paired)))
        goto done;
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
        snprintf(r->error, sizeof r->error, "%s", cli_errmsg());
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
