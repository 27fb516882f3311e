/* check_resize.c — plans at new sizes (lib/jit/resize.c): a graph equal to one already
 * planned but for its sizes is planned from that plan's model.  Every case runs with
 * KILN_TEST_RESIZE=verify (set here), so every plan made from a model is also made from
 * scratch and compared field by field (an internal error, so a failed compile, if they
 * differ), and every result is checked against the reference interpreter.
 *
 *   flips:  graphs where a decision the planner takes from sizes flips exactly at a size:
 *           two slices or two `full`s equal at one size only (simplify merges them), rows
 *           crossing the long-row limit (a reduction kept to one pass); each size against
 *           the reference, and some of them made from a model (kiln_stats.plans_resized);
 *   random: random graphs (tests/support/randgraph.c) at two sets of sizes with the same
 *           generic hash: the first compiled (its model kept), the second against the
 *           reference, fused and eager;
 *   threads: decoder steps (lib/check/decoder.c) captured by four threads at once, each
 *           its own sizes every step, so the models are kept and used concurrently: every
 *           program's outputs equal those of the same graph planned from scratch (bit for
 *           bit: the same kernels in the same order). */
#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder.h"
#include "ir.h"
#include "kiln.h"
#include "oracle.h"
#include "randgraph.h"
#include "support.h"

static uint64_t
resized_now(void)
{
    kiln_stats s = KILN_STATS_INIT;
    ck_assert(kiln_jit_stats(&s) == KILN_OK);
    return s.plans_resized;
}

/* Random inputs for g, and its outputs compared exactly (integers, bools; NaN payloads
 * aside) or, when inexact, within the bound `kiln check` propagates; fused and eager
 * against the interpreter. */
static void
check_graph(const kiln_graph *g, uint64_t seed, const char *ctx)
{
    ts_bufs in = {0};
    ts_bufs_for_inputs(g, &in);
    ts_rng r;
    ts_rng_seed(&r, seed);
    for (int i = 0; i < in.n; i++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_input(g, i, &vi);
        if (in.buf[i])
            ts_random_elements(&r, vi.dtype, in.buf[i], vi.count, true);
    }
    bool inexact[TS_MAXIO] = {false};
    int nout = kiln_graph_num_outputs(g);
    ck_assert_int_le(nout, TS_MAXIO);
    ts_outputs_inexact(g, inexact);
    ts_bounds b;
    ts_bounds_for(g, &in, inexact, &b);
    ts_tol tols[TS_MAXIO];
    for (int i = 0; i < nout; i++)
        tols[i] = inexact[i] ? (ts_tol){.kind = TS_TOL_BOUND, .bound = b.bound[i]}
                             : (ts_tol){.kind = TS_TOL_EXACT};
    ts_check_fused_eager(g, &in, tols, ctx);
    ts_bounds_free(&b);
    ts_bufs_free(&in);
}

/* ---- flips ------------------------------------------------------------------------------ */

/* $T in text replaced by t (every occurrence) */
static kiln_graph *
parse_at(const char *text, int64_t t)
{
    char out[4096];
    size_t n = 0;
    for (const char *p = text; *p && n + 32 < sizeof out; p++) {
        if (p[0] == '$' && p[1] == 'T') {
            n += (size_t)snprintf(out + n, sizeof out - n, "%lld", (long long)t);
            p++;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
    return ts_parse(out);
}

typedef struct flip {
    const char *name, *text;
    int64_t sizes[6];
    int nsizes;
    int min_resized; /* plans made from a model over the sizes, at least */
} flip;

static const flip flips[] = {
    /* s1 [t,64] and s2 [64,t] are one slice at t = 64 (simplify merges them), two else */
    {"slices equal at 64",
     "graph f(x: f32[128,128]) -> (z: f32[$T,64]) {\n"
     "  s1 = slice(x, start=[0,0], stop=[$T,64], step=[1,1])\n"
     "  s2 = slice(x, start=[0,0], stop=[64,$T], step=[1,1])\n"
     "  p = permute(s2, perm=[1,0])\n  z = add(s1, p)\n}\n",
     {60, 64, 70, 64, 63, 65}, 6, 2},
    /* two `full`s of one value, [t] and [64]: one node at t = 64 */
    {"fulls equal at 64",
     "graph f(x: f32[$T], y: f32[64]) -> (a: f32[$T], b: f32[64]) {\n"
     "  c = full(value=2.5) : f32[$T]\n  d = full(value=2.5) : f32[64]\n"
     "  a = mul(x, c)\n  b = mul(y, d)\n}\n",
     {50, 64, 70, 64, 50, 71}, 6, 2},
    /* two rows: one pass over each (long rows, split over the threads) from 2^20 elements
     * a row (fuse.c's long_rows), softmax's passes in one kernel below */
    {"long rows",
     "graph f(x: f32[2,$T]) -> (y: f32[2,$T]) {\n"
     "  m = reduce_max(x, axes=[1], keepdim=true)\n  d = sub(x, m)\n  e = exp(d)\n"
     "  s = reduce_sum(e, axes=[1], keepdim=true)\n  y = div(e, s)\n}\n",
     {(1 << 20) - 64, (1 << 20) + 64, (1 << 20) - 32, (1 << 20) + 32}, 4, 2},
    /* b's sizes stay, its buffer moves: a [t,64] and b [64,64] are live together (c reads
     * both), so one of them is placed after the other in the temporaries.  A step whose
     * description is taken from the model (describe.c's jit_describe_same) must see that
     * what it reads or writes moved, not only what changed size */
    {"a buffer moved, b first",
     "graph f(x: f32[$T,64], y: f32[64,64]) -> (c: f32[$T,64]) {\n"
     "  b = matmul(y, y)\n  a = matmul(x, y)\n  c = matmul(a, b)\n}\n",
     {80, 96, 112, 80}, 4, 3},
    {"a buffer moved, a first",
     "graph f(x: f32[$T,64], y: f32[64,64]) -> (c: f32[$T,64]) {\n"
     "  a = matmul(x, y)\n  b = matmul(y, y)\n  c = matmul(a, b)\n}\n",
     {80, 96, 112, 80}, 4, 3},
};

START_TEST(test_resize_flips)
{
    const flip *f = &flips[_i];
    uint64_t r0 = resized_now();
    for (int i = 0; i < f->nsizes; i++) {
        kiln_graph *g = parse_at(f->text, f->sizes[i]);
        char ctx[128];
        snprintf(ctx, sizeof ctx, "%s, size %lld", f->name, (long long)f->sizes[i]);
        check_graph(g, ts_base_seed(0x7265) + (uint64_t)i, ctx);
        kiln_graph_free(g);
    }
    uint64_t n = resized_now() - r0;
    ck_assert_msg(n >= (uint64_t)f->min_resized, "%s: %llu plans made from a model, expected at "
                  "least %d", f->name, (unsigned long long)n, f->min_resized);
}
END_TEST

/* ---- random graphs at two sizes --------------------------------------------------------- */

/* g at other sizes: every input dim of 2 or more grown by `by` (shrunk, by < 0: every dim
 * of 2 - by or more; the same value the same everywhere, so broadcast partners stay
 * partners); NULL when the type rules reject it (a reshape's target, a full's shape) or
 * its generic hash differs (a slice now empty). */
static kiln_graph *
grown(const kiln_graph *g, int64_t by)
{
    ir_type t[TS_MAXIO];
    if (g->ninputs > TS_MAXIO)
        return NULL;
    for (int32_t i = 0; i < g->ninputs; i++) {
        t[i] = g->nodes[g->inputs[i]].type;
        for (int d = 0; d < t[i].shape.rank; d++)
            if (t[i].shape.dims[d] >= (by < 0 ? 2 - by : 2))
                t[i].shape.dims[d] += by;
    }
    kiln_graph *g2 = ir_graph_rebuild(g, t);
    if (!g2)
        return NULL;
    if (ir_graph_hash(g2, true) != ir_graph_hash(g, true) || ir_graph_equal(g, g2)) {
        kiln_graph_free(g2);
        return NULL;
    }
    return g2;
}

#define RANDOM_GRAPHS 400

START_TEST(test_resize_random)
{
    uint64_t base = ts_base_seed(0x72657369);
    int count = ts_quick_n(RANDOM_GRAPHS, 4), tried = 0;
    uint64_t r0 = resized_now();
    for (int i = 0; i < count; i++) {
        uint64_t seed = base + (uint64_t)i;
        ts_randgraph_opts o;
        ts_randgraph_defaults(&o);
        o.plain_names = true;
        o.tame_values = true;
        o.max_dim = 6;
        o.max_elems = 512;
        kiln_graph *g = ts_random_graph(seed, &o);
        ck_assert_msg(g != NULL, "seed %" PRIu64 ": generator failed: %s", seed, kiln_errmsg());
        kiln_graph *g2 = grown(g, seed % 4 == 3 ? -1 : 1 + (int64_t)(seed % 4));
        if (g2) {
            /* the first sizes planned (models kept, fused and eager), then the second */
            static const kiln_mode modes[2] = {KILN_MODE_FUSED, KILN_MODE_EAGER};
            for (int m = 0; m < 2; m++) {
                kiln_options opt = KILN_OPTIONS_INIT;
                opt.mode = modes[m];
                kiln_program *p = NULL;
                ck_assert_msg(kiln_program_compile(g, &opt, &p) == KILN_OK, "seed %" PRIu64 ": %s",
                              seed, kiln_errmsg());
                kiln_program_free(p);
            }
            char ctx[96];
            snprintf(ctx, sizeof ctx, "random graph seed %" PRIu64 " at its second sizes", seed);
            check_graph(g2, seed ^ 0x5eed, ctx);
            tried++;
            kiln_graph_free(g2);
        }
        kiln_graph_free(g);
    }
    uint64_t n = resized_now() - r0;
    fprintf(stderr, "check_resize: %d random graphs of %d at two sizes, %llu plans made from a "
            "model\n", tried, count, (unsigned long long)n);
    ck_assert_msg(tried >= count / 8 && n >= (uint64_t)tried / 4,
                  "%d graphs of %d at two sizes, %llu plans made from a model", tried, count,
                  (unsigned long long)n);
}
END_TEST

/* ---- threads ---------------------------------------------------------------------------- */

typedef struct worker {
    int id;
    pthread_barrier_t *start;
    int failures, resized_steps;
    char msg[256];
} worker;

/* Run p on inputs from seed into freshly malloc'd outputs (out->n set). */
static bool
run_program(kiln_program *p, const ts_bufs *in, ts_bufs *out)
{
    const kiln_graph *g = kiln_program_graph(p);
    out->n = kiln_graph_num_outputs(g);
    for (int i = 0; i < out->n; i++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_output(g, i, &vi);
        out->buf[i] = malloc(vi.bytes ? vi.bytes : 1);
    }
    return kiln_program_run(p, (const void *const *)in->buf, out->buf) == KILN_OK;
}

static void *
worker_main(void *arg)
{
    worker *w = arg;
    ck_decoder dec = {.layers = 1, .d = 32, .heads = 2, .ff = 64};
    kiln_device *dev = kiln_device_new();
    pthread_barrier_wait(w->start);
    for (int step = 0; step < 8 && dev && !w->failures; step++) {
        int64_t t = 20 + 4 * step + w->id; /* every thread its own sizes */
        kiln_options o = KILN_OPTIONS_INIT, scratch = KILN_OPTIONS_INIT;
        scratch.flags = KILN_NO_CACHE;
        kiln_program *p = NULL, *q = NULL;
        if (ck_decoder_capture(dev, &dec, t, &o, &p) != KILN_OK ||
            ck_decoder_capture(dev, &dec, t, &scratch, &q) != KILN_OK) {
            snprintf(w->msg, sizeof w->msg, "thread %d, t %lld: %s", w->id, (long long)t, kiln_errmsg());
            w->failures++;
            kiln_program_free(p);
            break;
        }
        const kiln_graph *g = kiln_program_graph(p);
        ts_bufs in = {0}, a = {0}, b = {0};
        ts_bufs_for_inputs(g, &in);
        ts_rng r;
        ts_rng_seed(&r, (uint64_t)(w->id * 100 + step));
        for (int i = 0; i < in.n; i++) {
            kiln_value_info vi = KILN_VALUE_INFO_INIT;
            kiln_graph_input(g, i, &vi);
            if (in.buf[i])
                ts_random_elements(&r, vi.dtype, in.buf[i], vi.count, true);
        }
        if (!run_program(p, &in, &a) || !run_program(q, &in, &b)) {
            snprintf(w->msg, sizeof w->msg, "thread %d, t %lld: run: %s", w->id, (long long)t,
                     kiln_errmsg());
            w->failures++;
        }
        for (int i = 0; i < a.n && !w->failures; i++) {
            kiln_value_info vi = KILN_VALUE_INFO_INIT;
            kiln_graph_output(g, i, &vi);
            if (memcmp(a.buf[i], b.buf[i], vi.bytes) != 0) {
                snprintf(w->msg, sizeof w->msg, "thread %d, t %lld: output %d differs from the "
                         "plan from scratch", w->id, (long long)t, i);
                w->failures++;
            }
        }
        ts_bufs_free(&in);
        ts_bufs_free(&a);
        ts_bufs_free(&b);
        kiln_program_free(p);
        kiln_program_free(q);
    }
    kiln_device_free(dev);
    return NULL;
}

START_TEST(test_resize_threads)
{
    enum { N = 4 };
    pthread_t th[N];
    worker w[N];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, N);
    uint64_t r0 = resized_now();
    for (int i = 0; i < N; i++) {
        w[i] = (worker){.id = i, .start = &start};
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < N; i++)
        ck_assert_msg(w[i].failures == 0, "%s", w[i].msg);
    uint64_t n = resized_now() - r0;
    ck_assert_msg(n >= N, "%llu plans made from a model by %d threads of 8 steps",
                  (unsigned long long)n, N);
}
END_TEST

static Suite *
resize_suite(void)
{
    Suite *s = suite_create("resize");
    TCase *tc = tcase_create("resize");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_resize_flips, 0, (int)(sizeof flips / sizeof flips[0]));
    tcase_add_test(tc, test_resize_random);
    tcase_add_test(tc, test_resize_threads);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    setenv("KILN_TEST_RESIZE", "verify", 1);
    ir_config_reload(); /* the library reads the environment once */
    return ts_run(resize_suite());
}
