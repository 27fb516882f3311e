/*
 * check_reduce.c — reductions (reduce_sum/mean/max/min/prod, argmax/argmin) compiled, alone
 * and fused with their producers and consumers, against the reference interpreter.
 *
 * Every program is compiled in FUSED and in EAGER mode and compared with an INTERP program
 * (the oracle: f32 computed in f64 and rounded once) on the same inputs, with poisoned
 * output buffers and guard areas (tests/support/oracle.h).  Public API only, plus the test
 * support library.
 *
 * Tolerances (the compiled kernels may sum in another order than the reference's left
 * fold; the bound is what that order may cost, and nothing more):
 *  - test 1 (ops): the bound `kiln check` propagates (lib/check/errbound.h, ts_bounds_for),
 *    which is 0 for integer results, reduce_max/min and argmax/argmin (exact), and for a
 *    float sum or mean 2 gamma(n-1, 2^-53) S + 1 ulp of the result, S = sum of |x_i| over
 *    the reduced elements (/ n for a mean; f32 also gamma(7, 2^-24) S: the kernels' f32
 *    blocks), for a product its relative counterpart.  A NaN result must be a NaN (any
 *    payload: docs/semantics.md leaves it open).  The bound is a distance, so it takes
 *    -0.0 and +0.0 as equal; where it is 0 (exact results, a sum of ±0s, a product with
 *    a ±0 factor) the sign of a zero is exact in any order too, and must match
 *    (ts_tol.zero_sign).  Where the reference is ±inf or NaN (an infinity or NaN among
 *    the terms: the bound there is infinite), the result must be the same infinity or a
 *    NaN, as any order of the terms gives for these values (ts_tol.nonfinite).  Other
 *    elements with no bound (a product whose partial products may leave the normal
 *    range, an f32 sum whose blocks may overflow) are counted, not compared.
 *  - fused graphs (test 3: softmax, layernorm, ...) and the threads test (4): every
 *    output within the same propagated bound, which carries each op's own error (vmath's
 *    documented ULP bounds, half an ulp for + - * / sqrt, the sums' as above) through the
 *    graph; an output with no finite bound fails the test.  Elementwise producers must
 *    round as the reference does (no contraction into the accumulator), since the op
 *    semantics say so.
 *  - test 5 (accuracy) holds sums to the exact sum (a compensated long double sum), not to
 *    the reference interpreter: n * 2^-52 * S + 0.5 ulp, what accumulating in f64 gives
 *    (ops.def: "f32 accumulates in f64"), a claim about the sum itself that the propagated
 *    bound (a kernel against the interpreter) does not make.
 *
 * The tests:
 *  1. ops: every reduce op x accepted dtype x rank 1-4 x every axis subset (argmax/argmin:
 *     each single axis) x keepdim, on three shapes each (dims 2-6; with 0- and 1-sized
 *     axes; one long axis); an empty max/min/argmax/argmin is a verify error.
 *  2. argmax/argmin (and max/min) on rows built to tie and to hold NaNs, inner, outer and
 *     middle axes, lengths mostly not multiples of 16; also against a direct computation.
 *  3. fused: softmax, logsumexp, layernorm, rmsnorm, l2norm, column sums, x - mean over
 *     axis 0, max -> sum, with rows of 1, 3, 15, 16, 17, 1000, 1024 and one long row.
 *  4. threads: a full reduction of 2^22+13 elements and a softmax of [300,777] give the
 *     same bytes on 1, 2 and 4 threads (the pool size is fixed per process when the pool
 *     starts, so this binary runs itself as a child with KILN_NUM_THREADS set).
 *  5. accuracy: f32 sums of 2^24 elements (mixed signs and magnitudes; all positive),
 *     and cancelling f32 and f64 sums, against a compensated long double sum, within
 *     n * 2^-52 * S + 0.5 ulp.
 *  6. random graphs with reductions and their consumers: outputs that no inexact op
 *     feeds must be exact, the others within the per-element bound `kiln check`
 *     propagates through the graph (lib/check/errbound.h; elements it leaves unbounded
 *     are counted, not compared); and no plan of them, nor of the bench/ graphs, has a
 *     reference step (matmul, the contraction kind's, excepted).
 *  7. errors: empty reductions, bad axes, mean of integers, through parse and capture.
 *  8. every axis of a rank-8 value reduced (a kernel space one dim above the graph's rank),
 *     alone and as a softmax.
 *  9. a concat, pad or gather and a reduction of another value read by two elementwise
 *     ops: the fused plan is acyclic.
 * 10. a concat along the reduced last axis read in place by the reduction kernel (softmax
 *     of concatenated scores, sub-rows, rows split into pieces): one step, within the
 *     bound; a concat along a kept axis stays a kernel of its own.
 *
 * A known bug (empty innermost reduced axis, below) is probed in a child process; while
 * the probe fails, test 1 skips the shapes that may hit it and says so on stderr.
 *
 * Random inputs use the base seed 0x72656475 unless KILN_TEST_SEED overrides it.
 */
#include <check.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "oracle.h"
#include "randgraph.h"
#include "support.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t
base_seed(void)
{
    return ts_base_seed(0x72656475);
}

/* ---- text ------------------------------------------------------------------------------- */

/* printf into a new string. */
static char *
strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *
strf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    ck_assert_int_ge(n, 0);
    char *s = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(s);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* A template with $R, $L and $T replaced. */
static char *
expand(const char *tmpl, long long R, long long L, kiln_dtype t)
{
    size_t cap = strlen(tmpl) * 3 + 64, n = 0;
    char *s = malloc(cap);
    ck_assert_ptr_nonnull(s);
    for (const char *p = tmpl; *p; p++) {
        char rep[32];
        const char *r = NULL;
        if (p[0] == '$' && (p[1] == 'R' || p[1] == 'L' || p[1] == 'T')) {
            if (p[1] == 'T')
                r = kiln_dtype_name(t);
            else
                snprintf(rep, sizeof rep, "%lld", p[1] == 'R' ? R : L), r = rep;
            p++;
        }
        size_t len = r ? strlen(r) : 1;
        ck_assert_uint_lt(n + len, cap);
        memcpy(s + n, r ? r : p, len);
        n += len;
    }
    s[n] = '\0';
    return s;
}

static void
shape_str(const int64_t *dims, int rank, char *buf, size_t cap)
{
    size_t n = 0;
    buf[n++] = '[';
    for (int i = 0; i < rank; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? "," : "", (long long)dims[i]);
    snprintf(buf + n, cap - n, "]");
}

static void
axes_str(unsigned axes, int rank, char *buf, size_t cap)
{
    size_t n = 0;
    buf[n++] = '[';
    bool first = true;
    for (int i = 0; i < rank; i++)
        if (axes & (1u << i)) {
            n += (size_t)snprintf(buf + n, cap - n, "%s%d", first ? "" : ",", i);
            first = false;
        }
    snprintf(buf + n, cap - n, "]");
}

/* ---- values ------------------------------------------------------------------------------ */

static double
urand(ts_rng *r)
{
    return (double)(ts_rng_next(r) >> 11) * 0x1p-53;
}

static int64_t
irange(ts_rng *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)ts_rng_below(r, (uint64_t)(hi - lo + 1));
}

static double
rsign(ts_rng *r)
{
    return ts_rng_next(r) >> 63 ? -1.0 : 1.0;
}

static void
put_f(kiln_dtype t, void *p, size_t i, double v)
{
    if (t == KILN_DTYPE_F32) {
        float f = (float)v;
        memcpy((char *)p + 4 * i, &f, 4);
    } else {
        memcpy((char *)p + 8 * i, &v, 8);
    }
}

static void
put_i(kiln_dtype t, void *p, size_t i, int64_t v)
{
    if (t == KILN_DTYPE_I32) {
        int32_t w = (int32_t)(uint32_t)(uint64_t)v;
        memcpy((char *)p + 4 * i, &w, 4);
    } else {
        memcpy((char *)p + 8 * i, &v, 8);
    }
}

static int64_t
get_i(kiln_dtype t, const void *p, size_t i)
{
    if (t == KILN_DTYPE_I32) {
        int32_t w;
        memcpy(&w, (const char *)p + 4 * i, 4);
        return w;
    }
    int64_t v;
    memcpy(&v, (const char *)p + 8 * i, 8);
    return v;
}

static bool
is_float(kiln_dtype t)
{
    return t == KILN_DTYPE_F32 || t == KILN_DTYPE_F64;
}

/* A NaN with a payload and sign drawn from r, or ±inf. */
static void
put_nan(ts_rng *r, kiln_dtype t, void *p, size_t i)
{
    if (t == KILN_DTYPE_F32) {
        uint32_t u = 0x7fc00000u | (uint32_t)(ts_rng_next(r) & 0x3fffff);
        u |= (uint32_t)(ts_rng_next(r) >> 63) << 31;
        memcpy((char *)p + 4 * i, &u, 4);
    } else {
        uint64_t u = 0x7ff8000000000000ull | (ts_rng_next(r) & 0x7ffffffffffffull);
        u |= (ts_rng_next(r) >> 63) << 63;
        memcpy((char *)p + 8 * i, &u, 8);
    }
}

/* Value mixes for reductions.  SUMS (sum, mean): small multiples of 1/8, random mantissas
 * over 2^-20..2^20, signed zeros, subnormals, and (f32) any finite value, (f64) magnitudes
 * up to 2^500 (so no order of summation overflows where another does not); ints over the
 * whole range (they wrap).  PRODS: magnitudes in [0.75, 1.33) so products stay in range,
 * ±1, ±0; ints mostly ±1, ±2.  ORDER (max, min, argmax, argmin): many ties (-3..3, ±0),
 * wide values, ±inf, the extremes, subnormals.  `specials` adds NaNs (and ±inf to sums
 * and products) at a rate of about 1%. */
enum { MIX_SUMS, MIX_PRODS, MIX_ORDER };

static void
fill_mix(ts_rng *r, int mix, kiln_dtype t, void *p, size_t n, bool specials)
{
    bool f32 = t == KILN_DTYPE_F32;
    for (size_t i = 0; i < n; i++) {
        uint64_t k = ts_rng_below(r, 1000);
        if (is_float(t)) {
            if (specials && k < 10) {
                put_nan(r, t, p, i);
                continue;
            }
            if (specials && k < 20) {
                put_f(t, p, i, rsign(r) * INFINITY);
                continue;
            }
            double v;
            switch (mix) {
            case MIX_SUMS:
                if (k < 350)
                    v = (double)irange(r, -64, 64) / 8;
                else if (k < 800)
                    v = rsign(r) * (1 + urand(r)) * ldexp(1, (int)irange(r, -20, 20));
                else if (k < 860)
                    v = rsign(r) * 0.0;
                else if (k < 900)
                    v = rsign(r) * (f32 ? ldexp((double)irange(r, 1, (1 << 23) - 1), -149)
                                        : ldexp((double)irange(r, 1, INT64_C(1) << 52), -1074));
                else
                    v = rsign(r) * (1 + urand(r)) *
                        ldexp(1, f32 ? (int)irange(r, -126, 126) : (int)irange(r, -500, 500));
                break;
            case MIX_PRODS:
                if (k < 850)
                    v = rsign(r) * (0.75 + 0.58 * urand(r));
                else if (k < 900)
                    v = rsign(r);
                else if (k < 940)
                    v = rsign(r) * 0.0;
                else
                    v = rsign(r) * (k & 1 ? 2.0 : 0.5);
                break;
            default: /* MIX_ORDER */
                if (k < 300)
                    v = (double)irange(r, -3, 3);
                else if (k < 600)
                    v = rsign(r) * (1 + urand(r)) * ldexp(1, (int)irange(r, -20, 20));
                else if (k < 700)
                    v = rsign(r) * 0.0;
                else if (k < 750)
                    v = rsign(r) * (f32 ? ldexp(1, -140) : ldexp(1, -1070));
                else if (k < 800)
                    v = rsign(r) * (f32 ? (double)FLT_MAX : DBL_MAX);
                else if (k < 850)
                    v = rsign(r) * (f32 ? (double)FLT_MIN : DBL_MIN);
                else if (k < 880)
                    v = rsign(r) * INFINITY;
                else
                    v = (double)irange(r, -3, 3) + urand(r) / 4;
                break;
            }
            put_f(t, p, i, v);
            continue;
        }
        int64_t v;
        int64_t mn = t == KILN_DTYPE_I32 ? INT32_MIN : INT64_MIN;
        int64_t mx = t == KILN_DTYPE_I32 ? INT32_MAX : INT64_MAX;
        switch (mix) {
        case MIX_SUMS:
            v = k < 500 ? irange(r, -100, 100) : k < 800 ? (int64_t)ts_rng_next(r)
                : (k & 1 ? mn : mx);
            break;
        case MIX_PRODS:
            v = k < 800 ? (int64_t)rsign(r) * irange(r, 1, 2) : k < 850 ? 0
                : k < 950 ? irange(r, -100, 100) : (int64_t)ts_rng_next(r);
            break;
        default:
            v = k < 400 ? irange(r, -3, 3) : k < 700 ? (int64_t)ts_rng_next(r)
                : k < 800 ? mn : k < 900 ? mx : -1;
            break;
        }
        put_i(t, p, i, v);
    }
}

/* Uniform floats in [lo, hi). */
static void
fill_uniform(ts_rng *r, kiln_dtype t, void *p, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        put_f(t, p, i, lo + (hi - lo) * urand(r));
}

/* ---- reductions: the op table as this test sees it --------------------------------------- */

typedef struct rop {
    const char *name;
    int mix;
    bool floats_only, one_axis, needs_elements;
} rop;

static const rop rops[] = {
    {"reduce_sum", MIX_SUMS, false, false, false},
    {"reduce_mean", MIX_SUMS, true, false, false},
    {"reduce_max", MIX_ORDER, false, false, true},
    {"reduce_min", MIX_ORDER, false, false, true},
    {"reduce_prod", MIX_PRODS, false, false, false},
    {"argmax", MIX_ORDER, false, true, true},
    {"argmin", MIX_ORDER, false, true, true},
};

static const kiln_dtype num_dtypes[] = {KILN_DTYPE_F32, KILN_DTYPE_F64, KILN_DTYPE_I32,
                                        KILN_DTYPE_I64};

/* ---- 1. every op x dtype x axes x keepdim ------------------------------------------------ */

typedef struct rcase {
    int op; /* index into rops */
    kiln_dtype t;
    int rank;
    unsigned axes;
    bool keepdim;
} rcase;

static rcase cases[2048];
static int ncases;

static void
cases_setup(void)
{
    if (ncases)
        return;
    for (int op = 0; op < (int)NELEM(rops); op++)
        for (size_t d = 0; d < NELEM(num_dtypes); d++) {
            if (rops[op].floats_only && !is_float(num_dtypes[d]))
                continue;
            for (int rank = 1; rank <= 4; rank++)
                for (unsigned axes = 0; axes < (1u << rank); axes++) {
                    if (rops[op].one_axis && (axes == 0 || (axes & (axes - 1))))
                        continue;
                    for (int kd = 0; kd < 2; kd++) {
                        ck_assert_int_lt(ncases, (int)NELEM(cases));
                        cases[ncases++] = (rcase){op, num_dtypes[d], rank, axes, kd == 1};
                    }
                }
        }
}

/* Shape `variant` of a case: 0 plain (dims 2..6; rank 1: up to 50), 1 edges (dims of 1
 * and 0 among 2..5), 2 one long axis (15..257, the others 1..3), at most 4096 elements. */
static void
case_shape(ts_rng *r, int rank, int variant, int64_t *dims)
{
    static const int64_t longs[] = {15, 17, 31, 33, 65, 100, 257};
    int la = (int)ts_rng_below(r, (uint64_t)rank);
    for (int i = 0; i < rank; i++) {
        switch (variant) {
        case 0: dims[i] = rank == 1 ? irange(r, 2, 50) : irange(r, 2, 6); break;
        case 1: {
            uint64_t k = ts_rng_below(r, 100);
            dims[i] = k < 30 ? 1 : k < 42 ? 0 : irange(r, 2, 5);
            break;
        }
        default: dims[i] = i == la ? longs[ts_rng_below(r, NELEM(longs))] : irange(r, 1, 3); break;
        }
    }
    for (;;) {
        int64_t c = 1;
        int big = 0;
        for (int i = 0; i < rank; i++) {
            c *= dims[i];
            if (dims[i] > dims[big])
                big = i;
        }
        if (c <= 4096)
            break;
        dims[big] /= 2;
    }
}

/* ---- a regression, probed in a child process ---------------------------------------------
 * A reduction over two or more axes whose innermost axis is reduced and has size 0 killed
 * the process with SIGFPE (found by this suite at 58759da, fixed in fcfdead):
 * lib/jit/lower_reduce.c built `nsub = count / inner` and only then selected 0 when
 * inner == 0.  A child process runs the graphs below, so a regression fails
 * test_empty_innermost_axis instead of killing the suite; test 1 then skips the shapes
 * that could hit it and says so on stderr. */
static const char *const empty_inner_graphs[] = {
    "graph e(x: f32[1,0]) -> (y: f32[]) {\n  y = reduce_sum(x, axes=[0,1])\n}\n",
    "graph e(x: f32[2,3,0]) -> (y: f32[2,1,1]) {\n  y = reduce_mean(x, axes=[1,2], keepdim=true)\n}\n",
    "graph e(x: i64[4,2,0]) -> (y: i64[4]) {\n  y = reduce_prod(x, axes=[1,2])\n}\n",
};

/* The child: every graph in FUSED and EAGER, byte-compared with INTERP.  No Check calls. */
static int
empty_inner_child(void)
{
    for (size_t k = 0; k < NELEM(empty_inner_graphs); k++) {
        kiln_graph *g = NULL;
        if (kiln_graph_parse(empty_inner_graphs[k], strlen(empty_inner_graphs[k]), &g))
            return 2;
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_output(g, 0, &vi);
        unsigned char want[64], got[64];
        const void *ins[1] = {NULL};
        for (int m = 0; m < 3; m++) {
            kiln_options o = KILN_OPTIONS_INIT;
            o.mode = m == 0 ? KILN_MODE_INTERP : m == 1 ? KILN_MODE_FUSED : KILN_MODE_EAGER;
            kiln_program *p = NULL;
            void *outs[1] = {m ? got : want};
            memset(outs[0], 0xa5, sizeof got);
            if (kiln_program_compile(g, &o, &p) || kiln_program_run(p, ins, outs))
                return 3;
            kiln_program_free(p);
            if (m && memcmp(got, want, vi.bytes) != 0)
                return 4;
        }
        kiln_graph_free(g);
    }
    return 0;
}

static int empty_inner_state; /* 0 not probed, 1 works, 2 crashes or differs */

static bool
empty_inner_works(void)
{
    if (!empty_inner_state) {
        const char *args[] = {"--probe-empty-inner", NULL};
        int rc = ts_spawn_self(args, NULL);
        empty_inner_state = rc == 0 ? 1 : 2;
        if (rc != 0)
            fprintf(stderr, "check_reduce: REGRESSION: a sum/mean/prod over 2+ axes with an empty "
                    "innermost reduced axis %s (e.g. reduce_sum of f32[1,0] over [0,1]; "
                    "lib/jit/lower_reduce.c: count / inner with inner = 0); test 1 skips those "
                    "shapes and test_empty_innermost_axis fails\n",
                    rc < 0 ? "crashes the process" : "gives a wrong result");
    }
    return empty_inner_state == 1;
}

/* Shapes that may hit it: two or more reduced axes, one of them empty (a superset: size-1
 * axes move which axis is innermost for the kernel, e.g. x: i32[2,0,0,1] over [1,2]). */
static bool
hits_empty_inner(const rcase *c, const int64_t *dims)
{
    int nred = 0;
    bool empty = false;
    for (int i = 0; i < c->rank; i++)
        if (c->axes & (1u << i)) {
            nred++;
            empty |= dims[i] == 0;
        }
    return nred >= 2 && empty;
}

START_TEST(test_empty_innermost_axis)
{
    ck_assert_msg(empty_inner_works(), "a reduction over an empty innermost axis crashes or "
                  "differs (run `%s --probe-empty-inner` for the graph)", "check_reduce");
}
END_TEST

static int empty_inner_skipped; /* shapes of test 1 skipped for the known bug */
/* elements of test 1's results with a finite bound, and with none (not compared) */
static size_t reduce_bounded, reduce_unbounded;

/* One case on one shape.  Returns false (details on stderr) on a mismatch. */
static bool
check_case_shape(const rcase *c, const int64_t *dims, uint64_t seed, bool specials)
{
    const rop *o = &rops[c->op];
    char xs[128], ys[128], ax[64];
    int64_t od[8];
    int orank = 0;
    bool empty_reduced = false;
    for (int i = 0; i < c->rank; i++) {
        if (c->axes & (1u << i)) {
            empty_reduced |= dims[i] == 0;
            if (c->keepdim)
                od[orank++] = 1;
        } else {
            od[orank++] = dims[i];
        }
    }
    shape_str(dims, c->rank, xs, sizeof xs);
    shape_str(od, orank, ys, sizeof ys);
    axes_str(c->axes, c->rank, ax, sizeof ax);
    const char *tn = kiln_dtype_name(c->t);
    const char *on = o->one_axis ? "i64" : tn;
    char *text = strf("graph r(x: %s%s) -> (y: %s%s) {\n  y = %s(x, axes=%s, keepdim=%s)\n}\n",
                      tn, xs, on, ys, o->name, ax, c->keepdim ? "true" : "false");
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s %s x%s axes=%s keepdim=%d%s", o->name, tn, xs, ax, c->keepdim,
             specials ? " (NaN/inf)" : "");
    if (!o->needs_elements && hits_empty_inner(c, dims) && !empty_inner_works()) {
        empty_inner_skipped++;
        free(text);
        return true;
    }
    kiln_graph *g = NULL;
    kiln_status st = kiln_graph_parse(text, strlen(text), &g);
    if (o->needs_elements && empty_reduced) {
        /* the verifier rejects it: an error code and message, no graph, no crash */
        bool ok = st == KILN_ERR_SHAPE && g == NULL && strstr(kiln_errmsg(), "empty reduction");
        if (!ok)
            fprintf(stderr, "FAIL %s: expected KILN_ERR_SHAPE (empty reduction), got %s: %s\n",
                    ctx, kiln_status_str(st), kiln_errmsg());
        kiln_graph_free(g);
        free(text);
        return ok;
    }
    ck_assert_msg(st == KILN_OK, "%s: %s\n%s", ctx, kiln_errmsg(), text);
    ts_bufs in = {0};
    ts_bufs_for_inputs(g, &in);
    kiln_value_info xi = KILN_VALUE_INFO_INIT;
    kiln_graph_input(g, 0, &xi);
    ts_rng r;
    ts_rng_seed(&r, seed);
    fill_mix(&r, o->mix, c->t, in.buf[0], xi.count, specials);
    /* the bound `kiln check` propagates (exact for ints, max, min and the arg ops); where
     * it is 0, the sign of a zero too (a sum of ±0s, a product with a ±0 factor); where
     * the reference is ±inf or NaN, the same (see the header) */
    const bool which[1] = {true};
    ts_bounds b;
    ts_bounds_for(g, &in, which, &b);
    reduce_bounded += b.finite;
    reduce_unbounded += b.infinite;
    ts_tol tol = {.kind = TS_TOL_BOUND, .bound = b.bound[0], .zero_sign = true,
                  .nonfinite = true};
    static const kiln_mode modes[2] = {KILN_MODE_FUSED, KILN_MODE_EAGER};
    char *rep = ts_check_modes(g, &in, &tol, 2, modes);
    if (rep)
        fprintf(stderr, "FAIL %s\n%s\n", ctx, rep);
    free(rep);
    ts_bounds_free(&b);
    ts_bufs_free(&in);
    kiln_graph_free(g);
    free(text);
    return rep == NULL;
}

#define CASE_SLICES 8

START_TEST(test_reduce_ops)
{
    cases_setup();
    char failed[2048] = "";
    int nfailed = 0, ran = 0, skipped0 = empty_inner_skipped;
    size_t bounded0 = reduce_bounded, unbounded0 = reduce_unbounded;
    uint64_t base = base_seed();
    for (int k = _i; k < ncases; k += CASE_SLICES) {
        const rcase *c = &cases[k];
        ts_rng r;
        ts_rng_seed(&r, base + 0x1000 + (uint64_t)k);
        bool ok = true;
        for (int v = 0; v < 3; v++) {
            int64_t dims[4];
            case_shape(&r, c->rank, v, dims);
            /* NaN and inf in the edge shapes; finite values elsewhere, so that float
             * results are compared as numbers */
            ok = check_case_shape(c, dims, base + (uint64_t)k * 8 + (uint64_t)v, v == 1) && ok;
            ran++;
        }
        if (!ok) {
            size_t len = strlen(failed);
            snprintf(failed + len, sizeof failed - len, "%s%s %s rank %d axes 0x%x keepdim %d",
                     nfailed++ ? "; " : "", rops[c->op].name, kiln_dtype_name(c->t), c->rank,
                     c->axes, c->keepdim);
        }
    }
    if (empty_inner_skipped > skipped0)
        fprintf(stderr, "check_reduce: slice %d: %d shapes skipped for the known bug above\n", _i,
                empty_inner_skipped - skipped0);
    ck_assert_msg(nfailed == 0, "%d of the cases of slice %d differ (details on stderr): %s",
                  nfailed, _i, failed);
    ck_assert_int_gt(ran, 0);
    size_t nb = reduce_bounded - bounded0, nu = reduce_unbounded - unbounded0;
    fprintf(stderr, "check_reduce: slice %d: %zu result elements bounded, %zu unbounded\n", _i,
            nb, nu);
    ck_assert_msg(nu * 100 < nb, "slice %d: %zu of %zu result elements not compared", _i, nu,
                  nb + nu);
}
END_TEST

/* The case list is what the header says: 7 ops, 2 or 4 dtypes, 30 axis subsets (10 for
 * the arg ops), 2 keepdims. */
START_TEST(test_reduce_ops_coverage)
{
    cases_setup();
    /* sum, max, min, prod: 4 dtypes x 30 x 2; mean: 2 x 30 x 2; arg: 2 x 4 x 10 x 2 */
    ck_assert_int_eq(ncases, 4 * 4 * 30 * 2 + 2 * 30 * 2 + 2 * 4 * 10 * 2);
    bool noncontig = false;
    for (int k = 0; k < ncases; k++)
        noncontig |= cases[k].rank == 3 && cases[k].axes == 5; /* {0,2} */
    ck_assert(noncontig);
}
END_TEST

/* Every axis of a rank-8 value reduced (issue 26, defect 1): the reduction's iteration
 * space is a kept dim of size 1 then the 8 reduced ones, one dim more than a graph's rank,
 * and describe.c wrote it past an array of IR_MAX_RANK (an abort in emit.c, lower_reduce.c
 * or contract.c, or a wrong result).  Every reduce op but the one-axis argmax/argmin, every
 * dtype, keepdim both ways, on shapes of size-1 dims, of no size-1 dim and of a long inner
 * dim; then softmax over all 8 axes (a producer and consumers in the same kernel). */
START_TEST(test_full_reduction_rank8)
{
    static const int64_t shapes[][8] = {
        {1, 1, 1, 1, 1, 1, 1, 5}, {2, 1, 3, 1, 2, 2, 1, 3}, {2, 2, 2, 2, 2, 2, 2, 2},
        {1, 2, 1, 2, 1, 2, 1, 17}};
    uint64_t base = base_seed() + 0x880000;
    int nfailed = 0, k = 0;
    for (int op = 0; op < (int)NELEM(rops); op++) {
        if (rops[op].one_axis)
            continue;
        for (size_t d = 0; d < NELEM(num_dtypes); d++) {
            if (rops[op].floats_only && !is_float(num_dtypes[d]))
                continue;
            for (int kd = 0; kd < 2; kd++)
                for (size_t sh = 0; sh < NELEM(shapes); sh++, k++) {
                    rcase c = {op, num_dtypes[d], 8, 0xffu, kd == 1};
                    nfailed += !check_case_shape(&c, shapes[sh], base + (uint64_t)k, false);
                }
        }
    }
    ck_assert_msg(nfailed == 0, "%d rank-8 full reductions differ (details on stderr)", nfailed);

    kiln_graph *g = ts_parse("graph sm(x: f32[2,1,3,1,2,2,1,3]) -> (y: f32[2,1,3,1,2,2,1,3]) {\n"
                             "  m = reduce_max(x, axes=[0,1,2,3,4,5,6,7], keepdim=true)\n"
                             "  d = sub(x, m)\n  e = exp(d)\n"
                             "  s = reduce_sum(e, axes=[0,1,2,3,4,5,6,7], keepdim=true)\n"
                             "  y = div(e, s)\n}\n");
    ts_bufs in = {0};
    ts_bufs_for_inputs(g, &in);
    ts_rng r;
    ts_rng_seed(&r, base);
    kiln_value_info xi = KILN_VALUE_INFO_INIT;
    kiln_graph_input(g, 0, &xi);
    fill_uniform(&r, KILN_DTYPE_F32, in.buf[0], xi.count, -4, 4);
    bool which[1] = {true};
    ts_bounds b;
    ts_bounds_for(g, &in, which, &b);
    ts_tol tol = {.kind = TS_TOL_BOUND, .bound = b.bound[0]};
    ts_check_fused_eager(g, &in, &tol, "softmax over every axis of a rank-8 value");
    ts_bounds_free(&b);
    ts_bufs_free(&in);
    kiln_graph_free(g);
}
END_TEST

/* Negative axes through the capture API, and keepdim both ways, compile like the parsed
 * graphs. */
static kiln_status
capture_neg_axes(kiln_scope s, void *user)
{
    kiln_device *dev = user;
    int64_t dims[3] = {4, 5, 19};
    kiln_tensor x = kiln_input(dev, "x", KILN_DTYPE_F32, 3, dims);
    int a1[1] = {-1}, a2[2] = {-3, -1}, a3[1] = {-2};
    kiln_tensor outs[4] = {kiln_reduce_sum(x, 1, a1, 1), kiln_reduce_max(x, 2, a2, 0),
                           kiln_argmin(x, 1, a3, 0), kiln_reduce_mean(x, 0, NULL, 1)};
    for (int i = 0; i < 4; i++) {
        kiln_status st = kiln_scope_output(s, NULL, outs[i]);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

START_TEST(test_capture_negative_axes)
{
    kiln_device *dev = kiln_device_new();
    ck_assert_ptr_nonnull(dev);
    kiln_program *p = NULL;
    kiln_options o = KILN_OPTIONS_INIT;
    o.mode = KILN_MODE_INTERP;
    ck_assert_msg(kiln_capture_scope(dev, capture_neg_axes, dev, &o, &p) == KILN_OK, "%s",
                  kiln_errmsg());
    const kiln_graph *g = kiln_program_graph(p);
    char *text = kiln_graph_to_string(g);
    ck_assert_msg(strstr(text, "reduce_sum(x, axes=[2], keepdim=true)") &&
                      strstr(text, "reduce_max(x, axes=[0,2], keepdim=false)") &&
                      strstr(text, "argmin(x, axes=[1], keepdim=false)") &&
                      strstr(text, "reduce_mean(x, axes=[], keepdim=true)"),
                  "%s", text);
    free(text);
    ts_bufs in = {0};
    ts_bufs_for_inputs(g, &in);
    ts_rng r;
    ts_rng_seed(&r, base_seed() + 0x2000);
    fill_mix(&r, MIX_ORDER, KILN_DTYPE_F32, in.buf[0], 4 * 5 * 19, false);
    /* the sum within its bound (as test 1), the max, argmin and mean of one element exact */
    const bool which[4] = {true, true, true, true};
    ts_bounds b;
    ts_bounds_for(g, &in, which, &b);
    ts_tol tols[4];
    for (int i = 0; i < 4; i++)
        tols[i] = (ts_tol){.kind = TS_TOL_BOUND, .bound = b.bound[i], .zero_sign = true,
                           .nonfinite = true};
    ts_check_fused_eager(g, &in, tols, "captured reductions with negative axes");
    ts_bounds_free(&b);
    ts_bufs_free(&in);
    kiln_program_free(p);
    ck_assert_int_eq(kiln_device_free(dev), KILN_OK);
}
END_TEST

/* ---- 2. argmax / argmin: ties and NaN --------------------------------------------------- */

/* Row pattern p of length L into vals (dtype t), for argmax/argmin/max/min. */
static void
arg_row(ts_rng *r, kiln_dtype t, int p, int64_t L, void *vals)
{
    bool fl = is_float(t);
    int64_t mn = t == KILN_DTYPE_I32 ? INT32_MIN : INT64_MIN;
    int64_t mx = t == KILN_DTYPE_I32 ? INT32_MAX : INT64_MAX;
    for (int64_t j = 0; j < L; j++) {
        size_t i = (size_t)j;
        switch (p) {
        case 0: /* all equal */
            fl ? put_f(t, vals, i, 2.5) : put_i(t, vals, i, 7);
            break;
        case 1: /* -1, 0, 1 (signed zeros): ties everywhere */
            if (fl) {
                int64_t k = irange(r, -1, 1);
                put_f(t, vals, i, k ? (double)k : rsign(r) * 0.0);
            } else {
                put_i(t, vals, i, irange(r, -1, 1));
            }
            break;
        case 2: /* ascending: the last wins argmax, the first argmin */
            fl ? put_f(t, vals, i, (double)j / 4) : put_i(t, vals, i, j);
            break;
        case 3: /* random below 10 with 10 (and -10) at three places each */
            fl ? put_f(t, vals, i, (double)irange(r, -9, 9) + urand(r) / 2)
               : put_i(t, vals, i, irange(r, -9, 9));
            break;
        case 4: /* NaNs (floats) / the extremes tied (ints) */
        case 5:
        case 6:
            if (fl)
                put_f(t, vals, i, (double)irange(r, -5, 5));
            else
                put_i(t, vals, i, ts_rng_below(r, 3) == 0 ? mx : ts_rng_below(r, 2) ? mn : 0);
            break;
        case 7: /* infinities (ints: random over the whole range) */
            if (fl)
                put_f(t, vals, i, ts_rng_below(r, 3) == 0 ? INFINITY : -INFINITY);
            else
                put_i(t, vals, i, (int64_t)ts_rng_next(r));
            break;
        default: /* -0.0 then +0.0 (ints: zeros and -1) */
            if (fl)
                put_f(t, vals, i, j < L / 2 ? -0.0 : 0.0);
            else
                put_i(t, vals, i, j % 3 == 2 ? -1 : 0);
            break;
        }
    }
    if (p == 3 && L >= 3) {
        for (int k = 0; k < 3; k++) {
            size_t a = (size_t)irange(r, 0, L - 1), b = (size_t)irange(r, 0, L - 1);
            fl ? put_f(t, vals, a, 10) : put_i(t, vals, a, 10);
            fl ? put_f(t, vals, b, -10) : put_i(t, vals, b, -10);
        }
    }
    if (fl && p >= 4 && p <= 6 && L > 0) {
        /* 4: NaNs at two random places; 5: a NaN first; 6: a NaN last */
        size_t q = p == 5 ? 0 : p == 6 ? (size_t)L - 1 : (size_t)irange(r, 0, L - 1);
        put_nan(r, t, vals, q);
        if (p == 4)
            put_nan(r, t, vals, (size_t)irange(r, 0, L - 1));
    }
    if (!fl && p == 6 && L > 0) /* ints: MAX first and last, MIN at both ends too */
        put_i(t, vals, 0, mx), put_i(t, vals, (size_t)L - 1, mx);
}

/* First index of the largest (smallest) element, or of the first NaN. */
static int64_t
direct_arg(kiln_dtype t, const void *vals, int64_t L, bool mx)
{
    int64_t best = 0;
    for (int64_t j = 0; j < L; j++) {
        if (is_float(t)) {
            double v = ts_load_float(t, vals, (size_t)j), b = ts_load_float(t, vals, (size_t)best);
            if (isnan(v))
                return j;
            if (mx ? v > b : v < b)
                best = j;
        } else {
            int64_t v = get_i(t, vals, (size_t)j), b = get_i(t, vals, (size_t)best);
            if (mx ? v > b : v < b)
                best = j;
        }
    }
    return best;
}

#define ARG_PATTERNS 9

/* layout 0: [R, L] over axis 1; 1: [L, R] over axis 0; 2: [3, L, R/3] over axis 1.
 * Group g (of R = 9 or 15) holds pattern g % 9. */
static bool
check_arg_layout(kiln_dtype t, int layout, int64_t L, bool keepdim, uint64_t seed)
{
    int64_t R = layout == 2 ? 15 : ARG_PATTERNS;
    int64_t dims[3];
    int rank, axis;
    if (layout == 0)
        rank = 2, axis = 1, dims[0] = R, dims[1] = L;
    else if (layout == 1)
        rank = 2, axis = 0, dims[0] = L, dims[1] = R;
    else
        rank = 3, axis = 1, dims[0] = 3, dims[1] = L, dims[2] = 5;
    int64_t od[3];
    int orank = 0;
    for (int i = 0; i < rank; i++)
        if (i != axis)
            od[orank++] = dims[i];
        else if (keepdim)
            od[orank++] = 1;
    char xs[64], ys[64];
    shape_str(dims, rank, xs, sizeof xs);
    shape_str(od, orank, ys, sizeof ys);
    const char *tn = kiln_dtype_name(t), *kd = keepdim ? "true" : "false";
    char *text = strf("graph arg(x: %s%s) -> (amax: i64%s, amin: i64%s, vmax: %s%s, vmin: %s%s) {\n"
                      "  amax = argmax(x, axes=[%d], keepdim=%s)\n"
                      "  amin = argmin(x, axes=[%d], keepdim=%s)\n"
                      "  vmax = reduce_max(x, axes=[%d], keepdim=%s)\n"
                      "  vmin = reduce_min(x, axes=[%d], keepdim=%s)\n}\n",
                      tn, xs, ys, ys, tn, ys, tn, ys, axis, kd, axis, kd, axis, kd, axis, kd);
    kiln_graph *g = ts_parse(text);
    free(text);
    ts_bufs in = {0};
    ts_bufs_for_inputs(g, &in);
    size_t es = kiln_dtype_size(t);
    void *row = malloc((size_t)L * es + 1);
    ck_assert_ptr_nonnull(row);
    ts_rng r;
    ts_rng_seed(&r, seed);
    int64_t *want_max = malloc(sizeof(int64_t) * (size_t)R), *want_min = malloc(sizeof(int64_t) * (size_t)R);
    ck_assert(want_max && want_min);
    /* strides of the reduced axis and of the group */
    for (int64_t gi = 0; gi < R; gi++) {
        arg_row(&r, t, (int)(gi % ARG_PATTERNS), L, row);
        want_max[gi] = direct_arg(t, row, L, true);
        want_min[gi] = direct_arg(t, row, L, false);
        for (int64_t j = 0; j < L; j++) {
            size_t off;
            if (layout == 0)
                off = (size_t)(gi * L + j);
            else if (layout == 1)
                off = (size_t)(j * R + gi);
            else
                off = (size_t)((gi / 5) * L * 5 + j * 5 + gi % 5);
            memcpy((char *)in.buf[0] + off * es, (char *)row + (size_t)j * es, es);
        }
    }
    char ctx[160];
    snprintf(ctx, sizeof ctx, "argmax/argmin %s x%s axis %d keepdim %d", tn, xs, axis, keepdim);
    static const kiln_mode modes[2] = {KILN_MODE_FUSED, KILN_MODE_EAGER};
    char *rep = ts_check_modes(g, &in, NULL, 2, modes);
    bool ok = rep == NULL;
    if (rep)
        fprintf(stderr, "FAIL %s\n%s\n", ctx, rep);
    free(rep);
    /* the reference itself follows the documented rule (first index; first NaN) */
    ts_bufs ref = {0};
    char *err = ts_run_mode(g, KILN_MODE_INTERP, &in, &ref, 0);
    ck_assert_msg(err == NULL, "%s", err);
    for (int64_t gi = 0; gi < R; gi++) {
        int64_t a, b;
        memcpy(&a, (char *)ref.buf[0] + 8 * gi, 8);
        memcpy(&b, (char *)ref.buf[1] + 8 * gi, 8);
        if (a != want_max[gi] || b != want_min[gi]) {
            fprintf(stderr, "FAIL %s: group %lld (pattern %d): reference argmax %lld argmin %lld, "
                    "the documented rule gives %lld %lld\n", ctx, (long long)gi,
                    (int)(gi % ARG_PATTERNS), (long long)a, (long long)b,
                    (long long)want_max[gi], (long long)want_min[gi]);
            ok = false;
        }
    }
    ts_bufs_free(&ref);
    free(want_max);
    free(want_min);
    free(row);
    ts_bufs_free(&in);
    kiln_graph_free(g);
    return ok;
}

START_TEST(test_arg_ties_nan)
{
    static const int64_t lens[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 47, 63, 65, 100, 127, 1000,
                                   1023, 1025};
    int nfailed = 0;
    uint64_t base = base_seed();
    kiln_dtype t = num_dtypes[_i];
    for (size_t li = 0; li < NELEM(lens); li++)
        for (int layout = 0; layout < 3; layout++)
            nfailed += !check_arg_layout(t, layout, lens[li], (li + (size_t)layout) & 1,
                                         base + 0x3000 + li * 4 + (uint64_t)layout);
    ck_assert_msg(nfailed == 0, "%s: %d argmax/argmin layouts differ (details on stderr)",
                  kiln_dtype_name(t), nfailed);
}
END_TEST

/* ---- 3. reductions fused with producers and consumers ------------------------------------- */


typedef struct comp {
    const char *name;
    const char *text; /* $R rows, $L the reduced length, $T dtype */
    int inputs;       /* how inputs are drawn: see comp_inputs */
    bool f64_too;
    bool long_row; /* also on [1, 1<<20] */
    bool columns;  /* reduces axis 0 of [$L,$R] (else axis 1 of [$R,$L]) */
} comp;

enum { IN_SOFTMAX, IN_NORM, IN_UNIFORM };

static const comp comps[] = {
    /* softmax: exp of x - max (vmath), a sum of positive terms, a division */
    {.name = "softmax",
     .text = "graph softmax(x: $T[$R,$L]) -> (y: $T[$R,$L]) {\n"
             "  m = reduce_max(x, axes=[1], keepdim=true)\n  d = sub(x, m)\n  e = exp(d)\n"
             "  s = reduce_sum(e, axes=[1], keepdim=true)\n  y = div(e, s)\n}\n",
     .inputs = IN_SOFTMAX,
     .long_row = true},
    /* softmax with its statistics as outputs too (the sum without keepdim, reshaped for
     * the division) */
    {.name = "softmax+stats",
     .text = "graph softmax_stats(x: $T[$R,$L]) -> (y: $T[$R,$L], m: $T[$R,1], s: $T[$R]) {\n"
             "  m = reduce_max(x, axes=[1], keepdim=true)\n  d = sub(x, m)\n  e = exp(d)\n"
             "  s = reduce_sum(e, axes=[1])\n  sr = reshape(s, shape=[$R,1])\n"
             "  y = div(e, sr)\n}\n",
     .inputs = IN_SOFTMAX,
     .long_row = true},
    /* logsumexp = log(s) + m */
    {.name = "logsumexp",
     .text = "graph logsumexp(x: $T[$R,$L]) -> (y: $T[$R,1]) {\n"
             "  m = reduce_max(x, axes=[1], keepdim=true)\n  d = sub(x, m)\n  e = exp(d)\n"
             "  s = reduce_sum(e, axes=[1], keepdim=true)\n  l = log(s)\n  y = add(l, m)\n}\n",
     .inputs = IN_SOFTMAX,
     .long_row = true},
    /* layernorm, x in [-4, 4) with -3 and 3 in every row (so var >= 4 once L >= 2; L = 1
     * is exact: x - mean = 0): a mean, a cancelling x - mean, a mean of squares, sqrt, a
     * division */
    {.name = "layernorm",
     .text = "graph layernorm(x: $T[$R,$L], gamma: $T[$L], beta: $T[$L]) -> (y: $T[$R,$L]) {\n"
             "  mean = reduce_mean(x, axes=[1], keepdim=true)\n  xc = sub(x, mean)\n"
             "  sq = mul(xc, xc)\n  var = reduce_mean(sq, axes=[1], keepdim=true)\n"
             "  eps = full(value=1e-05) : $T[]\n  ve = add(var, eps)\n  sd = sqrt(ve)\n"
             "  n = div(xc, sd)\n  g = mul(n, gamma)\n  y = add(g, beta)\n}\n",
     .inputs = IN_NORM,
     .long_row = true},
    /* layernorm's statistics as outputs */
    {.name = "layernorm+stats",
     .text = "graph layernorm_stats(x: $T[$R,$L], gamma: $T[$L], beta: $T[$L]) ->\n"
             "    (y: $T[$R,$L], mean: $T[$R,1], var: $T[$R,1]) {\n"
             "  mean = reduce_mean(x, axes=[1], keepdim=true)\n  xc = sub(x, mean)\n"
             "  sq = mul(xc, xc)\n  var = reduce_mean(sq, axes=[1], keepdim=true)\n"
             "  eps = full(value=1e-05) : $T[]\n  ve = add(var, eps)\n  sd = sqrt(ve)\n"
             "  n = div(xc, sd)\n  g = mul(n, gamma)\n  y = add(g, beta)\n}\n",
     .inputs = IN_NORM,
     .long_row = true},
    /* rmsnorm y = x * rsqrt(mean(x*x) + eps) * w */
    {.name = "rmsnorm",
     .text = "graph rmsnorm(x: $T[$R,$L], w: $T[$L]) -> (y: $T[$R,$L]) {\n"
             "  sq = mul(x, x)\n  ms = reduce_mean(sq, axes=[1], keepdim=true)\n"
             "  eps = full(value=1e-06) : $T[]\n  v = add(ms, eps)\n  r = rsqrt(v)\n"
             "  xr = mul(x, r)\n  y = mul(xr, w)\n}\n",
     .inputs = IN_NORM,
     .f64_too = true,
     .long_row = true},
    /* l2norm sqrt(sum(x*x)) to a scalar */
    {.name = "l2norm",
     .text = "graph l2norm(x: $T[$R,$L]) -> (y: $T[]) {\n"
             "  sq = mul(x, x)\n  s = reduce_sum(sq, axes=[0,1])\n  y = sqrt(s)\n}\n",
     .inputs = IN_UNIFORM,
     .f64_too = true,
     .long_row = true},
    /* column sums over axis 0, plain and of a producer (x*x, rounded as the reference
     * rounds it) */
    {.name = "colsum",
     .text = "graph colsum(x: $T[$L,$R]) -> (s: $T[$R], q: $T[1,$R]) {\n"
             "  s = reduce_sum(x, axes=[0])\n  sq = mul(x, x)\n"
             "  q = reduce_sum(sq, axes=[0], keepdim=true)\n}\n",
     .inputs = IN_UNIFORM,
     .f64_too = true,
     .columns = true},
    /* x - mean over axis 0 */
    {.name = "center",
     .text = "graph center(x: $T[$L,$R]) -> (y: $T[$L,$R]) {\n"
             "  m = reduce_mean(x, axes=[0], keepdim=true)\n  y = sub(x, m)\n}\n",
     .inputs = IN_UNIFORM,
     .f64_too = true,
     .columns = true},
    /* a max -> sum chain with an exact producer: s = sum(x - max) */
    {.name = "max->sum",
     .text = "graph maxsum(x: $T[$R,$L]) -> (s: $T[$R], m: $T[$R,1]) {\n"
             "  m = reduce_max(x, axes=[1], keepdim=true)\n  d = sub(x, m)\n"
             "  s = reduce_sum(d, axes=[1])\n}\n",
     .inputs = IN_SOFTMAX,
     .f64_too = true,
     .long_row = true},
};

/* Inputs: x per kind; other inputs (gamma, w: [0.5, 1.5]; beta: [-0.5, 0.5]).
 * IN_SOFTMAX: x in [-6, 0), one in 64 in [2, 4) (so a long row's sum has many large
 * terms: losing any stretch of the row shows).  IN_NORM: x in [-4, 4) with -3 and 3 first
 * in every row.  IN_UNIFORM: x in [-4, 4). */
static void
comp_inputs(const comp *c, const kiln_graph *g, ts_bufs *in, kiln_dtype t, int64_t L,
            uint64_t seed)
{
    ts_rng r;
    ts_rng_seed(&r, seed);
    for (int i = 0; i < in->n; i++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_input(g, i, &vi);
        if (i == 0) {
            for (size_t e = 0; e < vi.count; e++) {
                double v;
                if (c->inputs == IN_SOFTMAX)
                    v = ts_rng_below(&r, 64) == 0 ? 2 + 2 * urand(&r) : -6 + 6 * urand(&r);
                else
                    v = -4 + 8 * urand(&r);
                if (c->inputs == IN_NORM && L >= 2 && e % (size_t)L < 2)
                    v = e % (size_t)L == 0 ? -3 : 3;
                put_f(t, in->buf[0], e, v);
            }
        } else if (strcmp(vi.name, "beta") == 0) {
            fill_uniform(&r, t, in->buf[i], vi.count, -0.5, 0.5);
        } else {
            fill_uniform(&r, t, in->buf[i], vi.count, 0.5, 1.5);
        }
    }
}

static bool
check_comp(const comp *c, kiln_dtype t, int64_t R, int64_t L, uint64_t seed)
{
    /* columns: the graph's $L is the reduced axis 0's length, $R the columns */
    char *text = expand(c->text, R, L, t);
    kiln_graph *g = ts_parse(text);
    ts_bufs in = {0};
    ts_bufs_for_inputs(g, &in);
    comp_inputs(c, g, &in, t, c->columns ? R : L, seed);
    /* every output within the bound `kiln check` propagates (exact ones: 0) */
    bool which[TS_MAXIO];
    for (int i = 0; i < TS_MAXIO; i++)
        which[i] = true;
    ts_bounds bd;
    ts_bounds_for(g, &in, which, &bd);
    ts_tol tols[TS_MAXIO];
    for (int i = 0; i < bd.n; i++)
        tols[i] = (ts_tol){.kind = TS_TOL_BOUND, .bound = bd.bound[i], .zero_sign = true};
    char ctx[128];
    snprintf(ctx, sizeof ctx, "%s %s [%lld,%lld]", c->name, kiln_dtype_name(t),
             (long long)(c->columns ? L : R), (long long)(c->columns ? R : L));
    static const kiln_mode modes[2] = {KILN_MODE_FUSED, KILN_MODE_EAGER};
    char *rep = ts_check_modes(g, &in, tols, 2, modes);
    if (rep)
        fprintf(stderr, "FAIL %s\n%s\n", ctx, rep);
    bool ok = rep == NULL;
    free(rep);
    if (bd.infinite) {
        fprintf(stderr, "FAIL %s: %zu elements without a bound\n", ctx, bd.infinite);
        ok = false;
    }
    ts_bounds_free(&bd);
    ts_bufs_free(&in);
    kiln_graph_free(g);
    free(text);
    return ok;
}

START_TEST(test_fused)
{
    const comp *c = &comps[_i];
    static const int64_t lens[] = {1, 3, 15, 16, 17, 1000, 1024};
    uint64_t base = base_seed() + 0x4000 + (uint64_t)_i * 64;
    int nfailed = 0;
    for (int d = 0; d < (c->f64_too ? 2 : 1); d++) {
        kiln_dtype t = d ? KILN_DTYPE_F64 : KILN_DTYPE_F32;
        for (size_t li = 0; li < NELEM(lens); li++) {
            /* rows: 7 (a few more when rows are short), never a multiple of the lanes */
            int64_t R = lens[li] < 16 ? 37 : 7;
            nfailed += !check_comp(c, t, R, lens[li], base + li * 2 + (uint64_t)d);
        }
        if (c->long_row)
            nfailed += !check_comp(c, t, 1, (int64_t)1 << 20, base + 40 + (uint64_t)d);
        else if (c->columns) /* a long column: [2^16 + 3, 5] */
            nfailed += !check_comp(c, t, 5, ((int64_t)1 << 16) + 3, base + 40 + (uint64_t)d);
    }
    ck_assert_msg(nfailed == 0, "%s: %d shapes differ from the reference beyond the bound "
                  "(details on stderr)", c->name, nfailed);
}
END_TEST

/* ---- 4. 1, 2 and 4 threads ------------------------------------------------------------- */

#define BIG_N ((1 << 22) + 13)
#define THREADS_SEED 0x7468726564756365ull

static const char big_reduce_text[] =
    "graph fullred(x: f32[4194317], z: f32[4194317]) ->\n"
    "    (s: f32[], m: f32[], a: i64[], b: i64[], az: i64[], mz: f32[1]) {\n"
    "  s = reduce_sum(x, axes=[0])\n  m = reduce_max(x, axes=[0])\n"
    "  a = argmax(x, axes=[0])\n  b = argmin(x, axes=[0])\n"
    "  az = argmax(z, axes=[0])\n  mz = reduce_min(z, axes=[0], keepdim=true)\n}\n";

static const char big_softmax_text[] =
    "graph sm(x: f32[300,777]) -> (y: f32[300,777]) {\n"
    "  m = reduce_max(x, axes=[1], keepdim=true)\n  d = sub(x, m)\n  e = exp(d)\n"
    "  s = reduce_sum(e, axes=[1], keepdim=true)\n  y = div(e, s)\n}\n";

/* Reductions over axis 0 long enough to be split along the reduced rows (run.c's columns
 * pieces): 100 columns are 6 vectors (a block) and a 4-lane tail at 512 bits. */
static const char big_colsum_text[] =
    "graph cs(x: f32[3001,100]) -> (s: f32[100], m: f32[1,100], a: i64[100]) {\n"
    "  s = reduce_sum(x, axes=[0])\n  m = reduce_mean(x, axes=[0], keepdim=true)\n"
    "  a = argmax(x, axes=[0])\n}\n";
#define NTHREADS_GRAPHS 3

/* x: values in [-1, 1) with the max 2 at three places (argmax: the first) and the min -2
 * at two; z: x with NaNs at two places (argmax and min: the first NaN).  No Check calls
 * here: the child runs outside any test. */
static bool
threads_inputs(const kiln_graph *g, ts_bufs *in, int which)
{
    in->n = kiln_graph_num_inputs(g);
    for (int i = 0; i < in->n; i++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_input(g, i, &vi);
        if (!(in->buf[i] = malloc(vi.bytes)))
            return false;
    }
    ts_rng r;
    ts_rng_seed(&r, THREADS_SEED + (uint64_t)which);
    if (which == 0) {
        float *x = in->buf[0], *z = in->buf[1];
        for (size_t i = 0; i < BIG_N; i++)
            x[i] = (float)(-1 + 2 * urand(&r));
        x[BIG_N / 10 + 3] = x[BIG_N / 2] = x[BIG_N - 7] = 2;
        x[BIG_N / 3] = x[BIG_N - 1] = -2;
        memcpy(z, x, sizeof(float) * BIG_N);
        z[BIG_N / 10 * 7] = NAN;
        z[BIG_N / 10 * 3 + 1] = -NAN;
    } else {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_input(g, 0, &vi);
        for (size_t i = 0; i < vi.count; i++)
            put_f(KILN_DTYPE_F32, in->buf[0], i,
                  ts_rng_below(&r, 64) == 0 ? 2 + 2 * urand(&r) : -6 + 6 * urand(&r));
    }
    return true;
}

/* Child: both graphs in FUSED then EAGER, every output's bytes after the pool size. */
static int
threads_child(const char *path)
{
    const char *texts[NTHREADS_GRAPHS] = {big_reduce_text, big_softmax_text, big_colsum_text};
    FILE *f = fopen(path, "wb");
    if (!f)
        return 2;
    kiln_stats st = KILN_STATS_INIT;
    kiln_jit_stats(&st);
    int32_t threads = st.threads;
    fwrite(&threads, sizeof threads, 1, f);
    for (int m = 0; m < 2; m++)
        for (int k = 0; k < NTHREADS_GRAPHS; k++) {
            kiln_graph *g = NULL;
            if (kiln_graph_parse(texts[k], strlen(texts[k]), &g) != KILN_OK)
                return 3;
            ts_bufs in = {0}, out = {0};
            if (!threads_inputs(g, &in, k))
                return 4;
            out.n = kiln_graph_num_outputs(g);
            for (int i = 0; i < out.n; i++) {
                kiln_value_info vi = KILN_VALUE_INFO_INIT;
                kiln_graph_output(g, i, &vi);
                if (!(out.buf[i] = malloc(vi.bytes)))
                    return 4;
                memset(out.buf[i], 0xa5, vi.bytes);
            }
            kiln_options o = KILN_OPTIONS_INIT;
            o.mode = m ? KILN_MODE_EAGER : KILN_MODE_FUSED;
            kiln_program *p = NULL;
            if (kiln_program_compile(g, &o, &p) != KILN_OK ||
                kiln_program_run(p, (const void *const *)in.buf, out.buf) != KILN_OK) {
                fprintf(stderr, "threads child: %s\n", kiln_errmsg());
                return 5;
            }
            for (int i = 0; i < out.n; i++) {
                kiln_value_info vi = KILN_VALUE_INFO_INIT;
                kiln_graph_output(g, i, &vi);
                fwrite(out.buf[i], 1, vi.bytes, f);
            }
            kiln_program_free(p);
            ts_bufs_free(&out);
            ts_bufs_free(&in);
            kiln_graph_free(g);
        }
    kiln_jit_stats(&st);
    if (st.threads != threads)
        return 6;
    return fclose(f) == 0 ? 0 : 7;
}

START_TEST(test_threads_bit_identical)
{
    char *bytes[3];
    size_t len[3];
    ts_threads_children("reduce", bytes, len);
    /* and the results are the reference's, within the bounds */
    size_t off = 4;
    const char *texts[NTHREADS_GRAPHS] = {big_reduce_text, big_softmax_text, big_colsum_text};
    for (int m = 0; m < 2; m++)
        for (int k = 0; k < NTHREADS_GRAPHS; k++) {
            kiln_graph *g = ts_parse(texts[k]);
            ts_bufs in = {0}, want = {0};
            ck_assert(threads_inputs(g, &in, k));
            char *err = ts_run_mode(g, KILN_MODE_INTERP, &in, &want, 0x5a);
            ck_assert_msg(err == NULL, "%s", err);
            /* each output within the bound `kiln check` propagates (exact ones: 0) */
            bool which[TS_MAXIO];
            for (int i = 0; i < TS_MAXIO; i++)
                which[i] = true;
            ts_bounds bd;
            ts_bounds_for(g, &in, which, &bd);
            ck_assert_uint_eq(bd.infinite, 0);
            for (int i = 0; i < want.n; i++) {
                kiln_value_info vi = KILN_VALUE_INFO_INIT;
                kiln_graph_output(g, i, &vi);
                ck_assert_uint_le(off + vi.bytes, len[0]);
                ts_tol tol = {.kind = TS_TOL_BOUND, .bound = bd.bound[i], .zero_sign = true};
                char what[64];
                static const char *const names[NTHREADS_GRAPHS] = {"full reduction", "softmax",
                                                                   "column reductions"};
                snprintf(what, sizeof what, "%s %s output %d", m ? "eager" : "fused", names[k], i);
                size_t bad = ts_compare(stderr, what, vi.dtype, vi.count, bytes[0] + off,
                                        want.buf[i], &tol);
                ck_assert_msg(bad == 0, "%s: %zu elements differ from the reference", what, bad);
                off += vi.bytes;
            }
            /* the documented answers */
            if (k == 0) {
                int64_t a, b, az;
                memcpy(&a, (char *)want.buf[2], 8);
                memcpy(&b, (char *)want.buf[3], 8);
                memcpy(&az, (char *)want.buf[4], 8);
                ck_assert_int_eq(a, BIG_N / 10 + 3);
                ck_assert_int_eq(b, BIG_N / 3);
                ck_assert_int_eq(az, BIG_N / 10 * 3 + 1);
            }
            ts_bounds_free(&bd);
            ts_bufs_free(&want);
            ts_bufs_free(&in);
            kiln_graph_free(g);
        }
    ck_assert_uint_eq(off, len[0]);
    for (int k = 0; k < 3; k++)
        free(bytes[k]);
}
END_TEST

/* ---- 5. accuracy of long f32 and f64 sums ------------------------------------------------ */

/* f32 roundings a compiled f32 sum may add to each term: JIT_SUM_BLOCK - 1 (lib/jit/jit.h). */
#define SUM_F32_BLOCK_ROUNDINGS 7

/* Neumaier's compensated sum in long double: within a few units of long double of the
 * exact sum (and still well inside the bound where long double is double). */
static long double
exact_sum(kiln_dtype t, const void *x, size_t n, long double *abs_sum)
{
    long double s = 0, c = 0, a = 0;
    for (size_t i = 0; i < n; i++) {
        long double v = ts_load_float(t, x, i);
        long double u = s + v;
        c += fabsl(s) >= fabsl(v) ? (s - u) + v : (v - u) + s;
        s = u;
        a += fabsl(v);
    }
    *abs_sum = a;
    return s + c;
}

/* dist 0: sign * [1, 2) * 2^[-20, 20]; dist 1: the same, then every odd element is minus
 * its predecessor plus a small term (the sum cancels to a small fraction of S); dist 2:
 * positive, in [1, 2) (S is the sum itself, so the bound is tight: an f32 accumulator,
 * serial or in lanes, misses it by far). */
static void
accuracy_case(kiln_dtype t, size_t n, int dist)
{
    const char *tn = kiln_dtype_name(t);
    char *text = strf("graph acc(x: %s[%zu]) -> (s: %s[], m: %s[]) {\n"
                      "  s = reduce_sum(x, axes=[0])\n  m = reduce_mean(x, axes=[0])\n}\n",
                      tn, n, tn, tn);
    kiln_graph *g = ts_parse(text);
    free(text);
    ts_bufs in = {0};
    ts_bufs_for_inputs(g, &in);
    ts_rng r;
    ts_rng_seed(&r, base_seed() + 0x5000 + (uint64_t)dist * 2 + (t == KILN_DTYPE_F64));
    for (size_t i = 0; i < n; i++) {
        double v = rsign(&r) * (1 + urand(&r)) * ldexp(1, (int)irange(&r, -20, 20));
        if (dist == 2)
            v = 1 + urand(&r);
        if (dist == 1 && (i & 1))
            v = -ts_load_float(t, in.buf[0], i - 1) + (urand(&r) - 0.5) * 0x1p-10;
        put_f(t, in.buf[0], i, v);
    }
    long double S;
    long double exact = exact_sum(t, in.buf[0], n, &S);
    /* the bound, in long double; the reference's own error is negligible next to it.  f32:
     * the kernels' f32 blocks add up to JIT_SUM_BLOCK - 1 roundings of each term
     * (docs/semantics.md) */
    long double bound_s = (long double)n * 0x1p-52L * S;
    if (t == KILN_DTYPE_F32)
        bound_s += SUM_F32_BLOCK_ROUNDINGS * 0x1p-24L * S;
    static const kiln_mode modes[3] = {KILN_MODE_FUSED, KILN_MODE_EAGER, KILN_MODE_INTERP};
    for (int m = 0; m < 3; m++) {
        ts_bufs out = {0};
        char *err = ts_run_mode(g, modes[m], &in, &out, 0xa5);
        ck_assert_msg(err == NULL, "%s", err);
        double got_s = ts_load_float(t, out.buf[0], 0), got_m = ts_load_float(t, out.buf[1], 0);
        long double es = fabsl((long double)got_s - exact);
        long double mean = exact / (long double)n;
        long double em = fabsl((long double)got_m - mean);
        long double half_s = 0.5L * ts_ulp(t, fmax(fabs(got_s), fabs((double)exact)));
        long double half_m = 0.5L * ts_ulp(t, fmax(fabs(got_m), fabs((double)mean)));
        fprintf(stderr, "check_reduce: accuracy %s n=%zu dist %d mode %d: sum %.17g exact %.17Lg "
                "err %.3Lg (bound %.3Lg), mean err %.3Lg (bound %.3Lg)\n", tn, n, dist, m,
                got_s, exact, es, bound_s + half_s, em, bound_s / n + 2 * half_m);
        ck_assert_msg(es <= bound_s + half_s,
                      "%s sum of %zu (dist %d, mode %d): %.17g vs exact %.21Lg: error %.3Lg > "
                      "bound %.3Lg", tn, n, dist, m, got_s, exact, es, bound_s + half_s);
        /* the mean: the sum's bound / n, plus the division's rounding in f64 and the final
         * rounding (half an ulp each) */
        ck_assert_msg(em <= bound_s / n + 2 * half_m,
                      "%s mean of %zu (dist %d, mode %d): %.17g vs exact %.21Lg: error %.3Lg",
                      tn, n, dist, m, got_m, mean, em);
        ts_bufs_free(&out);
    }
    ts_bufs_free(&in);
    kiln_graph_free(g);
}

START_TEST(test_accuracy_f32_2p24)
{
    accuracy_case(KILN_DTYPE_F32, (size_t)1 << 24, 0);
    accuracy_case(KILN_DTYPE_F32, (size_t)1 << 24, 2);
}
END_TEST

START_TEST(test_accuracy_cancelling)
{
    accuracy_case(KILN_DTYPE_F32, ((size_t)1 << 22) + 1, 1);
    accuracy_case(KILN_DTYPE_F64, (size_t)1 << 22, 0);
    accuracy_case(KILN_DTYPE_F64, ((size_t)1 << 20) + 3, 1);
}
END_TEST

/* ---- 6. random graphs with reductions and their consumers --------------------------------- */

#define RANDOM_GRAPHS 240
#define RANDOM_SLICES 4

static const int reduce_op_ids[] = {IR_OP_REDUCE_SUM, IR_OP_REDUCE_MEAN, IR_OP_REDUCE_MAX,
                                    IR_OP_REDUCE_MIN, IR_OP_REDUCE_PROD, IR_OP_ARGMAX,
                                    IR_OP_ARGMIN};

/* Graphs of every op but matmul (contraction is another issue's kernel kind), each with
 * at least one reduction, reductions consumed by broadcasts back over their rows and
 * chained, small sizes. */
static kiln_graph *
random_reduce_graph(uint64_t seed, bool *tame)
{
    static bool ops[IR_OP_COUNT];
    for (int op = 0; op < IR_OP_COUNT; op++)
        ops[op] = op != IR_OP_MATMUL && op != IR_OP_INPUT;
    ts_randgraph_opts o;
    ts_randgraph_jit_defaults(&o);
    o.kinds = 0;
    o.ops = ops;
    o.require_op = reduce_op_ids[seed % NELEM(reduce_op_ids)];
    o.reduce_consumer_pct = 70;
    switch (seed % 3) {
    case 0: break;
    case 1: o.max_dim = 19; o.max_elems = 1024; break;
    default: o.max_dim = 37; o.max_rank = 2; o.max_elems = 2048; break;
    }
    o.tame_values = (seed >> 2) & 1;
    *tame = o.tame_values;
    kiln_graph *g = ts_random_graph(seed, &o);
    ck_assert_msg(g != NULL, "seed %" PRIu64 ": generator failed: %s", seed, kiln_errmsg());
    return g;
}

START_TEST(test_random_graphs)
{
    uint64_t base = base_seed() + 0x600000;
    int per = RANDOM_GRAPHS / RANDOM_SLICES, inexact_outputs = 0, outputs = 0;
    size_t compared = 0, unbounded = 0;
    for (int i = 0; i < ts_quick_n(per, 5); i++) { /* KILN_QUICK: the first fifth */
        uint64_t seed = base + (uint64_t)(_i * per + i);
        bool tame;
        kiln_graph *g = random_reduce_graph(seed, &tame);
        int nout = kiln_graph_num_outputs(g);
        bool inexact[TS_MAXIO];
        ck_assert_int_le(nout, TS_MAXIO);
        inexact_outputs += ts_outputs_inexact(g, inexact);
        outputs += nout;
        ts_bufs in = {0};
        ts_bufs_for_inputs(g, &in);
        ts_rng r;
        ts_rng_seed(&r, seed ^ 0x9e3779b97f4a7c15ull);
        for (int k = 0; k < in.n; k++) {
            kiln_value_info vi = KILN_VALUE_INFO_INIT;
            kiln_graph_input(g, k, &vi);
            ts_random_elements(&r, vi.dtype, in.buf[k], vi.count, tame);
        }
        /* outputs no float sum/mean/prod or transcendental op feeds must be exact (NaN:
         * any); the others must be within the forward error bound `kiln check` propagates
         * through the graph, element by element (errbound.h).  No bound survives some
         * later ops (a comparison that may flip, a cancelling division): those elements
         * are infinite there, not compared, and counted */
        ts_bounds b;
        ts_bounds_for(g, &in, inexact, &b);
        compared += b.finite;
        unbounded += b.infinite;
        ts_tol tols[TS_MAXIO];
        for (int k = 0; k < nout; k++)
            tols[k] = inexact[k] ? (ts_tol){.kind = TS_TOL_BOUND, .bound = b.bound[k]}
                                 : (ts_tol){.kind = TS_TOL_EXACT};
        char ctx[160];
        snprintf(ctx, sizeof ctx, "random graph seed %" PRIu64 " (KILN_TEST_SEED or the "
                 "default + 0x600000 + %d)", seed, _i * per + i);
        ts_check_fused_eager(g, &in, tols, ctx);
        ts_bounds_free(&b);
        ts_bufs_free(&in);
        kiln_graph_free(g);
    }
    fprintf(stderr, "check_reduce: random slice %d: %d of %d outputs depend on float "
            "sums/means/products or transcendental ops: %zu of their elements compared "
            "against the propagated bound, %zu with no finite bound not compared\n", _i,
            inexact_outputs, outputs, compared, unbounded);
}
END_TEST

/* ---- 7. passes one row behind or ahead ----------------------------------------------------- */

/* Graph txt (f32 input x of R rows of C first) on random inputs, rows of x offset by
 * `offset` * (-1, 0, +1) in turn, every output fused and eager within the reference's
 * propagated bound; and the fused plan contains `plan_says` (unless C == 1: a row of one
 * element needs no reduction, the simplifier removes them). */
static void
check_rows_graph(const char *txt, int R, int C, float offset, ts_rng *r, const char *plan_says,
                 const char *ctx)
{
    kiln_graph *g = NULL;
    ck_assert_msg(kiln_graph_parse(txt, strlen(txt), &g) == KILN_OK, "%s", kiln_errmsg());
    ts_bufs in = {0};
    ts_bufs_for_inputs(g, &in);
    for (int k = 0; k < in.n; k++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_input(g, k, &vi);
        ts_random_elements(r, vi.dtype, in.buf[k], vi.count, false);
    }
    float *x = in.buf[0];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            x[(size_t)i * C + j] += offset * (float)(i % 3 - 1);
    int nout = kiln_graph_num_outputs(g);
    bool all[TS_MAXIO];
    for (int k = 0; k < TS_MAXIO; k++)
        all[k] = true;
    ts_bounds bd;
    ts_bounds_for(g, &in, all, &bd);
    ts_tol tols[TS_MAXIO];
    for (int k = 0; k < nout; k++)
        tols[k] = (ts_tol){.kind = TS_TOL_BOUND, .bound = bd.bound[k]};
    ts_check_fused_eager(g, &in, tols, ctx);
    kiln_options o = KILN_OPTIONS_INIT;
    o.mode = KILN_MODE_FUSED;
    kiln_program *p = NULL;
    ck_assert_msg(kiln_program_compile(g, &o, &p) == KILN_OK, "%s", kiln_errmsg());
    char *plan = ts_plan_text(p);
    ck_assert_msg(C == 1 || (plan && strstr(plan, plan_says)), "%s: plan:\n%s", ctx,
                  plan ? plan : "(none)");
    free(plan);
    kiln_program_free(p);
    ts_bounds_free(&bd);
    ts_bufs_free(&in);
    kiln_graph_free(g);
}

static const int rows_counts[] = {1, 2, 3, 7, 64};
static const int row_lengths[] = {1, 2, 15, 16, 17, 1000};

/* Softmax's last pass runs one row behind, in the next row's exp pass (lower_reduce.c,
 * defer_of).  Every row count (1: the deferred body runs only on the first row itself and
 * after the loop; odd and even: the two scratch rows), rows with and without a masked tail
 * (and of one element, where nothing is reduced), a second output of the deferred pass that
 * reads a [rows, 1] input (a row-wise value the next row's pass carries) and a [cols] one
 * (the same row for every row: a row offset of its own), and a row-wise output.  The plan
 * must say the pass was deferred: a kernel that silently stopped deferring would pass the
 * value checks.  (Each of two bugs put in on purpose, one scratch row for both rows and the
 * first slot's row offset carried for every slot, fails this test.) */
START_TEST(test_deferred_last_pass)
{
    ts_rng r;
    ts_rng_seed(&r, base_seed() + 0x700000);
    for (size_t a = 0; a < NELEM(rows_counts); a++)
        for (size_t c = 0; c < NELEM(row_lengths); c++) {
            int R = rows_counts[a], C = row_lengths[c];
            char txt[1024], ctx[96];
            snprintf(txt, sizeof txt,
                     "graph g(x: f32[%d,%d], b: f32[%d,1], w: f32[%d]) -> (y: f32[%d,%d], "
                     "z: f32[%d,%d], s: f32[%d,1]) {\n"
                     "  m = reduce_max(x, axes=[1], keepdim=true)\n"
                     "  d = sub(x, m)\n"
                     "  e = exp(d)\n"
                     "  s = reduce_sum(e, axes=[1], keepdim=true)\n"
                     "  y = div(e, s)\n"
                     "  yb = mul(y, b)\n"
                     "  z = mul(yb, w)\n"
                     "}\n",
                     R, C, R, C, R, C, R, C, R);
            snprintf(ctx, sizeof ctx, "softmax over f32[%d,%d] with its last pass deferred", R, C);
            check_rows_graph(txt, R, C, 0, &r, "pass 2 runs one row behind", ctx);
        }
}
END_TEST

/* Logsumexp's first pass (the row max) runs one row ahead, in the previous row's exp pass
 * (lower_reduce.c, ahead_of).  The max itself is an output (exact), and rows are offset by
 * -100, 0 and +100 in turn: a max taken from the wrong row would overflow or underflow
 * exp, not just round differently (logsumexp is the same number for any m).  Every row
 * count and rows with and without a masked tail; the plan must say the pass moved.
 * (Computing the row ahead's max from the current row, on purpose, fails this test.) */
START_TEST(test_ahead_first_pass)
{
    ts_rng r;
    ts_rng_seed(&r, base_seed() + 0x710000);
    for (size_t a = 0; a < NELEM(rows_counts); a++)
        for (size_t c = 0; c < NELEM(row_lengths); c++) {
            int R = rows_counts[a], C = row_lengths[c];
            char txt[1024], ctx[96];
            snprintf(txt, sizeof txt,
                     "graph g(x: f32[%d,%d]) -> (l: f32[%d,1], m: f32[%d,1], s: f32[%d,1]) {\n"
                     "  m = reduce_max(x, axes=[1], keepdim=true)\n"
                     "  d = sub(x, m)\n"
                     "  e = exp(d)\n"
                     "  s = reduce_sum(e, axes=[1], keepdim=true)\n"
                     "  ls = log(s)\n"
                     "  l = add(ls, m)\n"
                     "}\n",
                     R, C, R, R, R);
            snprintf(ctx, sizeof ctx, "logsumexp over f32[%d,%d], max one row ahead", R, C);
            check_rows_graph(txt, R, C, 100, &r, "pass 0 runs one row ahead", ctx);
        }
}
END_TEST

/* A concat along the last axis read in place by the reduction kernel that reduces that
 * axis (fuse.c's reduce_reads; lower_reduce_pass.c: each part a load masked to its range
 * of the row): attention's softmax(concat(s_past, s_new) * scale) is one kernel, the concat
 * never stored.  Softmax (its last pass one row behind) over parts of 1 to 1000 elements
 * (rows with and without a masked tail, a part inside one vector, a part across vectors,
 * three parts), every row count; a sum over axes [1,2] of a concat along axis 2 (sub-rows);
 * a sum of rows long enough to be split into pieces across threads (each piece's range of
 * the row); all within the propagated bound, fused and eager, the fused plan one step.  A
 * concat along a kept axis stays a kernel of its own (two steps). */
static const int concat_parts[][3] = {{2, 1, 0}, {15, 17, 0}, {16, 16, 0}, {512, 1, 0},
                                      {1000, 3, 0}, {17, 1000, 0}, {5, 16, 1}};

START_TEST(test_concat_in_reduction)
{
    ts_rng r;
    ts_rng_seed(&r, base_seed() + 0x720000);
    for (size_t a = 0; a < NELEM(rows_counts); a++)
        for (size_t c = 0; c < NELEM(concat_parts); c++) {
            int R = rows_counts[a], c1 = concat_parts[c][0], c2 = concat_parts[c][1],
                c3 = concat_parts[c][2], C = c1 + c2 + c3;
            char txt[1024], ctx[96], third[64] = "", third_in[32] = "";
            if (c3) {
                snprintf(third, sizeof third, ", x3: f32[%d,%d]", R, c3);
                snprintf(third_in, sizeof third_in, ", x3");
            }
            snprintf(txt, sizeof txt,
                     "graph g(x: f32[%d,%d], x2: f32[%d,%d]%s) -> (y: f32[%d,%d]) {\n"
                     "  c = concat(x, x2%s, axis=1)\n"
                     "  h = full(value=0.125) : f32[]\n"
                     "  t = mul(c, h)\n"
                     "  m = reduce_max(t, axes=[1], keepdim=true)\n"
                     "  d = sub(t, m)\n  e = exp(d)\n"
                     "  s = reduce_sum(e, axes=[1], keepdim=true)\n"
                     "  y = div(e, s)\n}\n",
                     R, c1, R, c2, third, R, C, third_in);
            snprintf(ctx, sizeof ctx, "softmax over concat [%d,%d]+[%d,%d]+[%d,%d]", R, c1, R,
                     c2, R, c3);
            check_rows_graph(txt, R, c1, 100, &r, "plan: 1 steps", ctx);
        }
    static const char *const others[][3] = {
        {"graph g(x: f32[3,4,5], x2: f32[3,4,17]) -> (s: f32[3,1,1]) {\n"
         "  c = concat(x, x2, axis=2)\n"
         "  s = reduce_sum(c, axes=[1,2], keepdim=true)\n}\n",
         "plan: 1 steps", "a sum over axes [1,2] of a concat along 2"},
        {"graph g(x: f32[2,70000], x2: f32[2,70001]) -> (s: f32[2,1]) {\n"
         "  c = concat(x, x2, axis=1)\n  h = full(value=0.5) : f32[]\n  t = mul(c, h)\n"
         "  s = reduce_sum(t, axes=[1], keepdim=true)\n}\n",
         "plan: 1 steps", "a sum of long rows (pieces) of a concat"},
        {"graph g(x: f32[2,7], x2: f32[3,7]) -> (s: f32[5,1]) {\n"
         "  c = concat(x, x2, axis=0)\n"
         "  s = reduce_sum(c, axes=[1], keepdim=true)\n}\n",
         "plan: 2 steps", "a sum of a concat along a kept axis"},
    };
    for (size_t k = 0; k < NELEM(others); k++)
        check_rows_graph(others[k][0], 2, 2, 0, &r, others[k][1], others[k][2]);
}
END_TEST

/* A ranged or indexed load (concat, pad, gather) and a reduction of another value, both
 * read by two elementwise ops (issue 26, defect 2, found by random valid graphs): the
 * first op joined the reduction's kernel with the concat settled in a newer kernel, the
 * second joined the concat's kernel, and the plan had a cycle ("fusion plan has a
 * cycle", KILN_ERR_INTERNAL).  Every graph compiles fused and matches the interpreter. */
static const char *const acyclic_graphs[] = {
    "graph g() -> (o1: f32[3], o2: f32[3]) {\n"
    "  a = arange(start=0x1p+0, delta=0x1p+0) : f32[2]\n"
    "  b = full(value=0x1.8p+1) : f32[1]\n"
    "  x = full(value=0x1p+0) : f32[3]\n"
    "  c = concat(a, b, axis=0)\n"
    "  s = reduce_sum(x, axes=[0], keepdim=true)\n"
    "  o1 = add(c, s)\n  o2 = mul(c, s)\n}\n",
    "graph g(a: f32[4,2], b: f32[4,3], x: f32[4,5]) -> (o1: f32[4,5], o2: f32[4,5]) {\n"
    "  c = concat(a, b, axis=1)\n"
    "  s = reduce_sum(x, axes=[1], keepdim=true)\n"
    "  o1 = add(c, s)\n  o2 = mul(c, s)\n}\n",
    "graph g(a: f32[4,3], x: f32[4,5]) -> (o1: f32[4,5], o2: f32[4,5]) {\n"
    "  c = pad(a, low=[0,1], high=[0,1], value=2)\n"
    "  s = reduce_max(x, axes=[1], keepdim=true)\n"
    "  o1 = sub(c, s)\n  o2 = div(c, s)\n}\n",
    "graph g(t: f32[6,5], i: i64[4], x: f32[4,5]) -> (o1: f32[4,5], o2: f32[4,5]) {\n"
    "  c = gather(t, i, axis=0)\n"
    "  s = reduce_sum(x, axes=[1], keepdim=true)\n"
    "  o1 = add(s, c)\n  o2 = mul(s, c)\n  }\n",
};

START_TEST(test_fusion_acyclic)
{
    kiln_graph *g = ts_parse(acyclic_graphs[_i]);
    ts_bufs in = {0};
    ts_bufs_for_inputs(g, &in);
    ts_rng r;
    ts_rng_seed(&r, base_seed() + 0x720000 + (uint64_t)_i);
    for (int k = 0; k < in.n; k++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_input(g, k, &vi);
        if (vi.dtype == KILN_DTYPE_I64)
            for (size_t e = 0; e < vi.count; e++)
                put_i(vi.dtype, in.buf[k], e, irange(&r, 0, 5));
        else
            fill_uniform(&r, vi.dtype, in.buf[k], vi.count, 1, 4);
    }
    bool which[TS_MAXIO] = {true, true};
    ts_bounds b;
    ts_bounds_for(g, &in, which, &b);
    ts_tol tols[2] = {{.kind = TS_TOL_BOUND, .bound = b.bound[0]},
                      {.kind = TS_TOL_BOUND, .bound = b.bound[1]}};
    char ctx[64];
    snprintf(ctx, sizeof ctx, "acyclic_graphs[%d]", _i);
    ts_check_fused_eager(g, &in, tols, ctx);
    ts_bounds_free(&b);
    ts_bufs_free(&in);
    kiln_graph_free(g);
}
END_TEST

/* The plan of g in FUSED and EAGER has no reference step other than matmul; NULL or a
 * report. */
static char *
reference_steps_report(const kiln_graph *g, const char *what)
{
    static const kiln_mode modes[2] = {KILN_MODE_FUSED, KILN_MODE_EAGER};
    for (int m = 0; m < 2; m++) {
        kiln_options o = KILN_OPTIONS_INIT;
        o.mode = modes[m];
        kiln_program *p = NULL;
        ck_assert_msg(kiln_program_compile(g, &o, &p) == KILN_OK, "%s: %s", what, kiln_errmsg());
        char *plan = ts_plan_text(p);
        kiln_program_free(p);
        int refs = 0;
        for (char *line = plan; line && *line;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = '\0';
            if (ts_plan_reference_steps(line) && !strstr(line, " matmul "))
                refs++;
            if (nl)
                *nl = '\n';
            line = nl ? nl + 1 : NULL;
        }
        if (refs) {
            char *text = kiln_graph_to_string(g);
            char *rep = strf("%s (%s): %d reference steps\n---- plan\n%s---- graph\n%s", what,
                             m ? "eager" : "fused", refs, plan, text ? text : "");
            free(text);
            free(plan);
            return rep;
        }
        free(plan);
    }
    return NULL;
}

START_TEST(test_no_reference_steps_random)
{
    uint64_t base = base_seed() + 0x600000;
    int bad = 0;
    for (int i = 0; i < ts_quick_n(RANDOM_GRAPHS, 5); i++) {
        bool tame;
        kiln_graph *g = random_reduce_graph(base + (uint64_t)i, &tame);
        char what[64];
        snprintf(what, sizeof what, "random graph seed %" PRIu64, base + (uint64_t)i);
        char *rep = reference_steps_report(g, what);
        if (rep && bad++ < 5)
            fprintf(stderr, "FAIL %s\n", rep);
        free(rep);
        kiln_graph_free(g);
    }
    ck_assert_msg(bad == 0, "%d of %d random graphs have reference steps (the first on stderr)",
                  bad, RANDOM_GRAPHS);
}
END_TEST

START_TEST(test_no_reference_steps_bench)
{
    /* mlp's matmuls are the contraction kind's (another issue): only they may remain */
    static const char *const files[] = {"bench/softmax.kiln", "bench/layernorm.kiln",
                                        "bench/l2norm.kiln",  "bench/chain.kiln",
                                        "bench/gelu.kiln",    "bench/bcast.kiln",
                                        "bench/small.kiln",   "bench/mlp.kiln"};
    int bad = 0;
    for (size_t i = 0; i < NELEM(files); i++) {
        char *text = ts_read_source_file(files[i], NULL);
        kiln_graph *g = ts_parse(text);
        free(text);
        char *rep = reference_steps_report(g, files[i]);
        if (rep) {
            fprintf(stderr, "FAIL %s\n", rep);
            bad++;
        }
        free(rep);
        kiln_graph_free(g);
    }
    ck_assert_msg(bad == 0, "%d bench graphs have reference steps (plans on stderr)", bad);
}
END_TEST

/* The reference-step counter reads plan dumps as they are written today. */
START_TEST(test_plan_reference_counter)
{
    kiln_graph *g = ts_parse("graph c(x: f32[4,5]) -> (y: f32[4,1], z: f32[4,5]) {\n"
                             "  y = reduce_sum(x, axes=[1], keepdim=true)\n  z = neg(x)\n}\n");
    kiln_program *p;
    ck_assert_int_eq(kiln_program_compile(g, NULL, &p), KILN_OK);
    char *plan = ts_plan_text(p);
    int n = ts_plan_reference_steps(plan);
    /* 1 while reduce_sum is a reference step, 0 once compiled; never more */
    ck_assert_msg(n == 0 || n == 1, "%d reference steps in\n%s", n, plan);
    ck_assert_int_eq(ts_plan_reference_steps("step 0: reference: %1 reduce_sum (the JIT does "
                                             "not compile reduce_sum yet)\nstep 1: kernel\n"), 1);
    ck_assert_int_eq(ts_plan_reference_steps("step 0: kernel over [4,5]\n"), 0);
    free(plan);
    kiln_program_free(p);
    kiln_graph_free(g);
}
END_TEST

/* ---- 7. errors ---------------------------------------------------------------------------- */

typedef struct errcase {
    const char *what;
    int op; /* 0 max, 1 min, 2 argmax, 3 argmin, 4 mean, 5 sum */
    kiln_dtype t;
    int64_t dims[2];
    int naxes, axes[2];
    kiln_status code;
    const char *needle;
} errcase;

static const errcase errcases[] = {
    {"empty max", 0, KILN_DTYPE_F32, {3, 0}, 1, {1}, KILN_ERR_SHAPE, "empty reduction"},
    {"empty min", 1, KILN_DTYPE_I64, {0, 3}, 1, {0}, KILN_ERR_SHAPE, "empty reduction"},
    {"empty argmax", 2, KILN_DTYPE_F64, {3, 0}, 1, {-1}, KILN_ERR_SHAPE, "empty reduction"},
    {"empty argmin", 3, KILN_DTYPE_I32, {0, 0}, 1, {0}, KILN_ERR_SHAPE, "empty reduction"},
    {"argmax of two axes", 2, KILN_DTYPE_F32, {3, 4}, 2, {0, 1}, KILN_ERR_SHAPE, "exactly one axis"},
    {"argmin of no axis", 3, KILN_DTYPE_F32, {3, 4}, 0, {0}, KILN_ERR_SHAPE, "exactly one axis"},
    {"mean of i32", 4, KILN_DTYPE_I32, {3, 4}, 1, {1}, KILN_ERR_DTYPE, "reduce_mean"},
    {"sum over axis 2 of rank 2", 5, KILN_DTYPE_F32, {3, 4}, 1, {2}, KILN_ERR_SHAPE, "bad axes"},
    {"sum over axis 1 twice", 5, KILN_DTYPE_F32, {3, 4}, 2, {1, -1}, KILN_ERR_SHAPE, "twice"},
};

START_TEST(test_errors)
{
    for (size_t k = 0; k < NELEM(errcases); k++) {
        const errcase *c = &errcases[k];
        for (int m = 0; m < 2; m++) {
            kiln_device *dev = kiln_device_new();
            ck_assert_ptr_nonnull(dev);
            kiln_scope s = kiln_scope_begin(dev);
            ck_assert(!kiln_scope_is_null(s));
            kiln_tensor x = kiln_input(dev, "x", c->t, 2, c->dims);
            ck_assert(!kiln_tensor_is_null(x));
            kiln_tensor y;
            switch (c->op) {
            case 0: y = kiln_reduce_max(x, c->naxes, c->axes, 0); break;
            case 1: y = kiln_reduce_min(x, c->naxes, c->axes, 1); break;
            case 2: y = kiln_argmax(x, c->naxes, c->axes, 0); break;
            case 3: y = kiln_argmin(x, c->naxes, c->axes, 1); break;
            case 4: y = kiln_reduce_mean(x, c->naxes, c->axes, 0); break;
            default: y = kiln_reduce_sum(x, c->naxes, c->axes, 0); break;
            }
            ck_assert_msg(kiln_tensor_is_null(y), "%s: recorded", c->what);
            ts_assert_error(c->code, c->needle);
            /* the scope's first error comes back from ending it, in either mode; no
             * program, no crash, the device free again */
            kiln_options o = KILN_OPTIONS_INIT;
            o.mode = m ? KILN_MODE_EAGER : KILN_MODE_FUSED;
            kiln_program *p = (kiln_program *)(uintptr_t)1;
            kiln_status st = kiln_scope_end(s, 1, &y, &o, &p);
            ck_assert_msg(st == c->code, "%s: scope_end gave %s: %s", c->what,
                          kiln_status_str(st), kiln_errmsg());
            ck_assert_ptr_null(p);
            ck_assert_int_eq(kiln_device_free(dev), KILN_OK);
        }
    }
    /* and through the parser: the verifier's code and message, no graph */
    static const char *const texts[] = {
        "graph e(x: f32[3,0]) -> (y: f32[3]) {\n  y = reduce_max(x, axes=[1])\n}\n",
        "graph e(x: f64[0,2]) -> (y: i64[1,2]) {\n  y = argmin(x, axes=[0], keepdim=true)\n}\n",
        "graph e(x: i32[2,3]) -> (y: i64[]) {\n  y = argmax(x, axes=[0,1])\n}\n",
        "graph e(x: i64[2,3]) -> (y: i64[2]) {\n  y = reduce_mean(x, axes=[1])\n}\n",
    };
    static const kiln_status codes[] = {KILN_ERR_SHAPE, KILN_ERR_SHAPE, KILN_ERR_SHAPE,
                                        KILN_ERR_DTYPE};
    static const char *const needles[] = {"empty reduction", "empty reduction",
                                          "exactly one axis", "reduce_mean"};
    for (size_t k = 0; k < NELEM(texts); k++) {
        kiln_graph *g = NULL;
        kiln_status st = kiln_graph_parse(texts[k], strlen(texts[k]), &g);
        ck_assert_msg(st == codes[k], "text %zu: %s: %s", k, kiln_status_str(st), kiln_errmsg());
        ts_assert_error(codes[k], needles[k]);
        ck_assert_ptr_null(g);
    }
}
END_TEST

static Suite *
reduce_suite(void)
{
    Suite *s = suite_create("reduce");
    TCase *tc = tcase_create("ops");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_reduce_ops_coverage);
    tcase_add_test(tc, test_full_reduction_rank8);
    tcase_add_test(tc, test_empty_innermost_axis);
    tcase_add_loop_test(tc, test_reduce_ops, 0, CASE_SLICES);
    tcase_add_test(tc, test_capture_negative_axes);
    tcase_add_loop_test(tc, test_arg_ties_nan, 0, (int)NELEM(num_dtypes));
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);

    tc = tcase_create("fused");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_fused, 0, (int)NELEM(comps));
    suite_add_tcase(s, tc);

    tc = tcase_create("runtime");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_threads_bit_identical);
    tcase_add_test(tc, test_accuracy_f32_2p24);
    tcase_add_test(tc, test_accuracy_cancelling);
    suite_add_tcase(s, tc);

    tc = tcase_create("random");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_random_graphs, 0, RANDOM_SLICES);
    tcase_add_test(tc, test_plan_reference_counter);
    tcase_add_test(tc, test_no_reference_steps_random);
    tcase_add_test(tc, test_no_reference_steps_bench);
    tcase_add_test(tc, test_deferred_last_pass);
    tcase_add_test(tc, test_ahead_first_pass);
    tcase_add_test(tc, test_concat_in_reduction);
    tcase_add_loop_test(tc, test_fusion_acyclic, 0, (int)NELEM(acyclic_graphs));
    suite_add_tcase(s, tc);
    return s;
}

int
main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--threads-child") == 0)
        return threads_child(argv[2]);
    if (argc == 2 && strcmp(argv[1], "--probe-empty-inner") == 0)
        return empty_inner_child();
    return ts_run(reduce_suite());
}
