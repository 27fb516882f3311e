/*
 * check_jit.c — the JIT (lib/jit) against the reference interpreter, kiln's oracle.
 *
 * Every test compiles a graph with kiln_program_compile in FUSED and in EAGER mode, runs
 * it, runs kiln_graph_interpret on the same input buffers and compares the outputs:
 *
 *  - Exact ops (arithmetic, comparisons, logic, casts, where/clamp, max/min, rounding,
 *    abs/neg/sign/relu, sqrt/rsqrt/recip, isnan/isinf, integer div/rem, movement, and
 *    every op that runs as a reference step) must match BIT FOR BIT: raw bytes compared,
 *    except for which NaN a float result is where IEEE 754 leaves it open or where the
 *    interpreter quiets a signalling NaN that the hardware keeps (the NAN_* rules below
 *    say which, and why).  Every non-NaN value is compared bit for bit, -0.0 included.
 *  - Transcendental ops compiled by vmath (ops.def's VMATH rows) are held to their ULP
 *    bound (ops.def) against a long double reference (ref_math, lib/check/refmath.c); while they
 *    run as reference steps they must match the interpreter exactly.
 *
 * Output buffers are pre-filled with a poison pattern and followed by a guard area, so an
 * element the program never writes, or a write past the end, is a mismatch.
 *
 * Random graphs use the base seed 0x6b696c6e unless KILN_TEST_SEED overrides it; a
 * failure prints the graph's seed, its text and the plan.
 *
 * Test-only hooks used: jit_plan_cache_trim and jit_cache_trim (empty the caches, for the
 * memory test), jit_host_info (W), jit_op_is_lowerable; the 1-vs-N-threads test runs this
 * binary again as a child (--threads-child FILE) with KILN_NUM_THREADS set.
 */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jit.h"
#include "errbound.h"
#include "randgraph.h"
#include "oracle.h"
#include "refmath.h"
#include "support.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#else
#define UNDER_ASAN 0
#endif

extern char **environ;

#define MAXIO 16
#define GUARD 64
#define POISON_JIT 0xa5
#define POISON_REF 0x5a

/* Lanes of one vector body: the kernels' W. */
static int
lanes(void)
{
    return jit_host_info()->vector_bits / 32;
}

/* ---- values ------------------------------------------------------------------------------ */

/* Special values per dtype, as bit patterns (exact, NaN payloads and -0.0 included). */
static const uint32_t f32_special[] = {
    0x00000000, 0x80000000,                         /* +0, -0 */
    0x3f800000, 0xbf800000, 0x3f000000, 0xbf000000, /* 1, -1, 0.5, -0.5 */
    0x3fc00000, 0xbfc00000, 0x40200000, 0xc0200000, /* ±1.5, ±2.5: ties of round */
    0x3effffff, 0x40400000, 0xc0e00000, 0x40e00000, /* 0.49999997, 3, -7, 7 */
    0x3eaaaaab, 0x3dcccccd, 0x42c80000,             /* 1/3, 0.1, 100 */
    0x4b000001, 0x4affffff, 0x4b800000,             /* 2^23+1, 2^23-0.5, 2^24 */
    0x4f000000, 0xcf000000, 0x4effffff,             /* 2^31, -2^31, below 2^31 */
    0x5f000000, 0xdf000000, 0x501502f9,             /* 2^63, -2^63, 1e10 */
    0x7f7fffff, 0xff7fffff, 0x00800000, 0x80800000, /* ±FLT_MAX, ±FLT_MIN */
    0x00000001, 0x80000001, 0x007fffff, 0x807fffff, /* subnormals */
    0x7f800000, 0xff800000,                         /* ±inf */
    0x7fc00000, 0xffc00000, 0x7fc12345,             /* quiet NaNs, a payload */
    0x7f800001, 0xffa00000,                         /* signalling NaNs */
};

static const uint64_t f64_special[] = {
    0x0000000000000000ull, 0x8000000000000000ull, 0x3ff0000000000000ull, 0xbff0000000000000ull,
    0x3fe0000000000000ull, 0xbfe0000000000000ull, 0x3ff8000000000000ull, 0xbff8000000000000ull,
    0x4004000000000000ull, 0xc004000000000000ull, /* ±2.5 */
    0x3fdfffffffffffffull,                        /* 0.49999999999999994 */
    0x4008000000000000ull, 0xc01c000000000000ull, 0x401c000000000000ull, /* 3, -7, 7 */
    0x3fd5555555555555ull, 0x3fb999999999999aull, 0x4059000000000000ull, /* 1/3, 0.1, 100 */
    0x4330000000000001ull, 0x432fffffffffffffull, 0x4340000000000000ull, /* 2^52+1, .., 2^53 */
    0x41e0000000000000ull, 0xc1e0000000000000ull, /* ±2^31 */
    0x41dfffffffe00000ull, 0xc1e0000000100000ull, /* 2147483647.5, -2147483648.5 */
    0x43e0000000000000ull, 0xc3e0000000000000ull, 0x43dfffffffffffffull, /* ±2^63, below */
    0x47efffffe0000000ull, 0x47efffffefffffffull, 0x47effffff0000000ull, /* FLT_MAX, +, tie */
    0x7e37e43c8800759cull,                        /* 1e300 */
    0x7fefffffffffffffull, 0xffefffffffffffffull, 0x0010000000000000ull, 0x8010000000000000ull,
    0x0000000000000001ull, 0x8000000000000001ull, 0x000fffffffffffffull, /* subnormals */
    0x36a0000000000000ull, 0x3690000000000000ull, 0x3690000000000001ull, /* f32 denorm edges */
    0x7ff0000000000000ull, 0xfff0000000000000ull,                         /* ±inf */
    0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff8000012345678ull, /* quiet NaNs */
    0x7ff0000000000001ull, 0xfff4000000000000ull,                         /* signalling */
};

static const int64_t i32_special[] = {
    0, 1, -1, 2, -2, 3, -3, 7, -7, 100, -100, INT32_MIN, INT32_MAX, INT32_MIN + 1,
    16777217, -16777217, 0x55555555, -0x55555556, 31, 32, 65536,
};

static const int64_t i64_special[] = {
    0, 1, -1, 2, -2, 3, -3, 7, -7, 100, INT64_MIN, INT64_MAX, INT64_MIN + 1,
    INT32_MIN, INT32_MAX, (int64_t)INT32_MAX + 1, (int64_t)INT32_MIN - 1,
    9007199254740993ll, -9007199254740993ll, 16777217, 0x5555555555555555ll,
    -0x5555555555555556ll, (int64_t)1 << 62, 63, 64,
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static size_t
special_count(kiln_dtype t)
{
    switch (t) {
    case KILN_DTYPE_F32: return NELEM(f32_special);
    case KILN_DTYPE_F64: return NELEM(f64_special);
    case KILN_DTYPE_I32: return NELEM(i32_special);
    case KILN_DTYPE_I64: return NELEM(i64_special);
    default: return 2;
    }
}

/* Special value k of dtype t into element i of dst. */
static void
put_special(kiln_dtype t, void *dst, size_t i, size_t k)
{
    switch (t) {
    case KILN_DTYPE_F32: memcpy((char *)dst + 4 * i, &f32_special[k], 4); break;
    case KILN_DTYPE_F64: memcpy((char *)dst + 8 * i, &f64_special[k], 8); break;
    case KILN_DTYPE_I32: {
        int32_t v = (int32_t)i32_special[k];
        memcpy((char *)dst + 4 * i, &v, 4);
        break;
    }
    case KILN_DTYPE_I64: memcpy((char *)dst + 8 * i, &i64_special[k], 8); break;
    default: ((uint8_t *)dst)[i] = (uint8_t)(k & 1); break;
    }
}

/* ---- comparison -------------------------------------------------------------------------- */

/* How a float NaN result is compared (everything that is not a NaN is compared bit for
 * bit, or within `ulp`):
 *  NAN_EXACT  the same bits;
 *  NAN_QUIET  the same bits once both are quieted.  The interpreter computes f32 in f64,
 *             and converting a signalling NaN to f64 quiets it, so neg/abs/sign/relu of a
 *             signalling NaN come back quiet from the reference while the kernels flip or
 *             keep the bits as IEEE 754 §5.5.1 says a sign operation must.  Conversely
 *             glibc's f64 floor/ceil/trunc hand a signalling NaN back unquieted where the
 *             hardware rounding quiets it (IEEE §6.2: computational ops quiet).  Sign and
 *             payload must still agree.
 *  NAN_ANY    any NaN: with two NaN operands IEEE §6.2.3 leaves which one propagates open,
 *             and LLVM may commute the operands of add/mul/max/min, so only NaN-ness is
 *             defined.  Graphs of several ops compare this way (a NaN's payload is chosen
 *             anew at every binary op it passes). */
enum { NAN_EXACT, NAN_QUIET, NAN_ANY };

typedef struct rule {
    int nan;             /* NAN_* */
    int ulp;             /* > 0: floats within this many units in the last place */
    bool skip;           /* not compared (a matmul's values: check_contract's business) */
    bool bounded;        /* instead: within bound[i] as `kiln check` compares (eb_within;
                          * INFINITY passes anything, NULL is 0), for outputs of inexact
                          * ops (see the unrestricted random graphs) */
    const double *bound; /* with bounded: one per element, from ts_bounds_for */
} rule;

static bool
is_nan_elem(kiln_dtype t, const void *p, size_t i)
{
    if (t == KILN_DTYPE_F32) {
        float f;
        memcpy(&f, (const char *)p + 4 * i, 4);
        return isnan(f);
    }
    if (t == KILN_DTYPE_F64) {
        double d;
        memcpy(&d, (const char *)p + 8 * i, 8);
        return isnan(d);
    }
    return false;
}

static bool
is_inf_elem(kiln_dtype t, const void *p, size_t i)
{
    if (t == KILN_DTYPE_F32) {
        float f;
        memcpy(&f, (const char *)p + 4 * i, 4);
        return isinf(f);
    }
    double d;
    memcpy(&d, (const char *)p + 8 * i, 8);
    return isinf(d);
}

/* Does element i of `got` match `want` under rule r? */
static bool
elem_match(kiln_dtype t, const void *got, const void *want, size_t i, rule r)
{
    size_t es = kiln_dtype_size(t);
    if (r.bounded) {
        double ratio;
        return eb_within(t, got, want, i, r.bound ? r.bound[i] : 0, &ratio);
    }
    if (memcmp((const char *)got + es * i, (const char *)want + es * i, es) == 0)
        return true;
    if (!ir_dtype_is_float(t))
        return false;
    bool gn = is_nan_elem(t, got, i), wn = is_nan_elem(t, want, i);
    if (gn || wn) {
        if (!gn || !wn)
            return false;
        if (r.nan == NAN_ANY || r.ulp > 0)
            return true;
        if (r.nan == NAN_QUIET) {
            uint64_t a = 0, b = 0, q = t == KILN_DTYPE_F32 ? 1ull << 22 : 1ull << 51;
            memcpy(&a, (const char *)got + es * i, es);
            memcpy(&b, (const char *)want + es * i, es);
            return (a | q) == (b | q);
        }
        return false;
    }
    if (r.ulp <= 0 || is_inf_elem(t, got, i) || is_inf_elem(t, want, i))
        return false;
    /* the oracle's distance in representable values (lib/check/refmath.h) */
    return ref_ulp_distance(t, ir_load_f64(t, got, i), ir_load_f64(t, want, i)) <= r.ulp;
}

static const char *
mode_name(kiln_mode m)
{
    return m == KILN_MODE_FUSED ? "fused" : m == KILN_MODE_EAGER ? "eager" : "interp";
}

/* ---- running a graph both ways -------------------------------------------------------- */

/* Inputs for a graph: one malloc'd buffer of exactly its size per input (a zero-size input
 * gets NULL, which kiln_program_run must accept). */
typedef struct inputs {
    int n;
    void *buf[MAXIO];
} inputs;

static void
inputs_free(inputs *in)
{
    for (int i = 0; i < in->n; i++)
        free(in->buf[i]);
    in->n = 0;
}

/* Random inputs for every input of g (the generator's value mix; tame: small values). */
static void
inputs_random(const kiln_graph *g, uint64_t seed, bool tame, inputs *in)
{
    ts_rng r;
    ts_rng_seed(&r, seed);
    in->n = kiln_graph_num_inputs(g);
    ck_assert_int_le(in->n, MAXIO);
    for (int i = 0; i < in->n; i++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        ck_assert_int_eq(kiln_graph_input(g, i, &vi), KILN_OK);
        in->buf[i] = vi.bytes ? malloc(vi.bytes) : NULL;
        if (vi.bytes)
            ck_assert_ptr_nonnull(in->buf[i]);
        ts_random_elements(&r, vi.dtype, in->buf[i], vi.count, tame);
    }
}

/* Append "graph text + plan" of program p (or of g) to f, for failure messages. */
static void
describe(FILE *f, const kiln_graph *g, kiln_program *p)
{
    char *text = kiln_graph_to_string(g);
    fprintf(f, "\n---- graph\n%s", text ? text : "(cannot print)\n");
    free(text);
    if (p) {
        fprintf(f, "---- plan\n");
        kiln_program_dump(p, KILN_VIEW_PLAN, f);
    }
}

/* kiln_options.code for run_compare's compiles: the compact-code tests set
 * KILN_CODE_COMPACT around the same checks as the full code's (and clear it again:
 * CK_FORK=no). */
static kiln_code test_code;

/* Compile g in `mode` (with test_code), run it and the interpreter on `in` (or take
 * `ref`, the expected outputs, when not NULL), compare every output by rules[i] (NULL:
 * exact).  Returns NULL when all match, else a malloc'd report. */
static char *
run_compare(const kiln_graph *g, kiln_mode mode, const inputs *in, const rule *rules,
            void *const *ref)
{
    char *rep = NULL;
    size_t replen = 0;
    FILE *f = open_memstream(&rep, &replen);
    ck_assert_ptr_nonnull(f);
    bool bad = false;
    int nout = kiln_graph_num_outputs(g);
    ck_assert_int_le(nout, MAXIO);
    void *got[MAXIO] = {0}, *want[MAXIO] = {0};
    kiln_value_info info[MAXIO];
    kiln_program *p = NULL;
    kiln_options opt = KILN_OPTIONS_INIT;
    opt.mode = mode;
    opt.code = test_code;
    for (int i = 0; i < nout; i++) {
        info[i] = (kiln_value_info)KILN_VALUE_INFO_INIT;
        ck_assert_int_eq(kiln_graph_output(g, i, &info[i]), KILN_OK);
        got[i] = malloc(info[i].bytes + GUARD);
        want[i] = malloc(info[i].bytes + GUARD);
        ck_assert(got[i] && want[i]);
        memset(got[i], POISON_JIT, info[i].bytes + GUARD);
        memset(want[i], POISON_REF, info[i].bytes + GUARD);
    }
    if (ref) {
        for (int i = 0; i < nout; i++)
            memcpy(want[i], ref[i], info[i].bytes);
    } else if (kiln_graph_interpret(g, (const void *const *)in->buf, want) != KILN_OK) {
        fprintf(f, "interpreter failed: %s", kiln_errmsg());
        bad = true;
        goto done;
    }
    if (kiln_program_compile(g, &opt, &p) != KILN_OK) {
        fprintf(f, "%s compile failed: %s", mode_name(mode), kiln_errmsg());
        bad = true;
        goto done;
    }
    if (kiln_program_run(p, (const void *const *)in->buf, got) != KILN_OK) {
        fprintf(f, "%s run failed: %s", mode_name(mode), kiln_errmsg());
        bad = true;
        goto done;
    }
    for (int i = 0; i < nout; i++) {
        rule r = rules ? rules[i] : (rule){0};
        const unsigned char *gd = (const unsigned char *)got[i] + info[i].bytes;
        for (int k = 0; k < GUARD; k++)
            if (gd[k] != POISON_JIT) {
                fprintf(f, "%s: output %d '%s' written past its end (guard byte %d)\n",
                        mode_name(mode), i, info[i].name, k);
                bad = true;
                break;
            }
        if (r.skip)
            continue;
        int shown = 0;
        size_t nbad = 0;
        for (size_t e = 0; e < info[i].count; e++) {
            if (elem_match(info[i].dtype, got[i], want[i], e, r))
                continue;
            nbad++;
            if (shown++ < 6) {
                char a[64], b[64];
                ts_elem_str(info[i].dtype, got[i], e, a, sizeof a);
                ts_elem_str(info[i].dtype, want[i], e, b, sizeof b);
                fprintf(f, "%s: output %d '%s' (%s) element %zu: jit %s, reference %s",
                        mode_name(mode), i, info[i].name, kiln_dtype_name(info[i].dtype), e, a, b);
                if (r.bounded)
                    fprintf(f, " (bound %.3g)", r.bound ? r.bound[e] : 0.0);
                /* inputs of the output's size are shown at the same index (one-op graphs) */
                for (int k = 0; k < in->n; k++) {
                    kiln_value_info vi = KILN_VALUE_INFO_INIT;
                    kiln_graph_input(g, k, &vi);
                    if (vi.count == info[i].count) {
                        ts_elem_str(vi.dtype, in->buf[k], e, a, sizeof a);
                        fprintf(f, "%s %s = %s", k ? "," : "; input", vi.name, a);
                    }
                }
                fputc('\n', f);
            }
        }
        if (nbad) {
            fprintf(f, "%s: output %d '%s': %zu of %zu elements differ\n", mode_name(mode), i,
                    info[i].name, nbad, info[i].count);
            bad = true;
        }
    }
done:
    if (bad)
        describe(f, g, p);
    kiln_program_free(p);
    for (int i = 0; i < nout; i++) {
        free(got[i]);
        free(want[i]);
    }
    fclose(f);
    if (!bad) {
        free(rep);
        return NULL;
    }
    return rep;
}

/* Both modes.  A mismatch prints the report (and `ctx`) to stderr and, when `fatal`,
 * fails the test; returns whether both modes matched. */
static bool
check_both_ref(const kiln_graph *g, const inputs *in, const rule *rules, void *const *ref,
               const char *ctx, bool fatal)
{
    static const kiln_mode modes[2] = {KILN_MODE_FUSED, KILN_MODE_EAGER};
    for (int m = 0; m < 2; m++) {
        char *rep = run_compare(g, modes[m], in, rules, ref);
        if (rep) {
            fprintf(stderr, "FAIL %s\n%s\n", ctx, rep);
            if (fatal)
                ck_abort_msg("%s: %s mode differs from the reference (details on stderr): %.300s",
                             ctx, mode_name(modes[m]), rep);
            free(rep);
            return false;
        }
    }
    return true;
}

static void
check_both(const kiln_graph *g, const inputs *in, const rule *rules, const char *ctx)
{
    check_both_ref(g, in, rules, NULL, ctx, true);
}

/* Parse printf-formatted text (fails the test when it does not parse). */
static kiln_graph *
parsef(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static kiln_graph *
parsef(const char *fmt, ...)
{
    char text[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    ck_assert_int_lt(n, (int)sizeof text);
    return ts_parse(text);
}

/* Parse, run FUSED and EAGER on random inputs (all value kinds), compare exactly except
 * that NaN results may carry any payload (NAN_ANY: a NaN passes through several ops). */
static void
check_text(const char *ctx, uint64_t seed, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void
check_text(const char *ctx, uint64_t seed, const char *fmt, ...)
{
    char text[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    ck_assert_int_lt(n, (int)sizeof text);
    kiln_graph *g = ts_parse(text);
    rule rules[MAXIO];
    for (int i = 0; i < MAXIO; i++)
        rules[i] = (rule){.nan = NAN_ANY};
    for (int tame = 0; tame < 2; tame++) {
        inputs in = {0};
        inputs_random(g, seed + (uint64_t)tame, tame, &in);
        check_both(g, &in, rules, ctx);
        inputs_free(&in);
    }
    kiln_graph_free(g);
}

/* ---- the op table: which dtypes each elementwise op accepts ------------------------------ */

#define DT(x) (1u << KILN_DTYPE_##x)
static unsigned
operand_dtypes(ir_op op)
{
    switch (ir_ops[op].trule) {
    case IR_T_ANY: case IR_T_EQ: return DT(F32) | DT(F64) | DT(I32) | DT(I64) | DT(BOOL);
    case IR_T_NUM: case IR_T_CMP: return DT(F32) | DT(F64) | DT(I32) | DT(I64);
    case IR_T_FLOAT: case IR_T_FTEST: return DT(F32) | DT(F64);
    case IR_T_LOGIC: return DT(BOOL) | DT(I32) | DT(I64);
    case IR_T_SPECIAL: /* where (value operands), cast (source) */
        return DT(F32) | DT(F64) | DT(I32) | DT(I64) | DT(BOOL);
    }
    return 0;
}

/* The ULP bound a compiled vector-math op is held to.  ops.def states each function's
 * bound against the exact result (ir_op_ulp_bound); the test's reference (ref_math) is the
 * exact result rounded once to the dtype, which adds up to half an ULP: the bound + 1. */
static int
ulp_bound(ir_op op, kiln_dtype t)
{
    return (int)ceil(ir_op_ulp_bound(op, t)) + 1;
}

/* Reference outputs of one-op graph g (all operands the output's shape): the exact values
 * of lib/check/refmath.c (long double, formulas rewritten without cancellation), the
 * ones `kiln check --ulp` measures against, rounded to the output dtype.  Not the
 * interpreter: it evaluates ops.def's formulas literally in double, the spec's value but
 * not accurate to an ULP where the formula cancels (gelu(-7) in f32). */
static void *
math_reference(const kiln_graph *g, const inputs *in)
{
    const ir_node *nd = &g->nodes[g->outputs[0].node];
    kiln_dtype t = nd->type.dtype;
    size_t n = ir_shape_count(&nd->type.shape);
    void *out = malloc(n * kiln_dtype_size(t) + 1);
    ck_assert_ptr_nonnull(out);
    for (size_t e = 0; e < n; e++) {
        long double a = ir_load_f64(t, in->buf[0], e);
        long double b = nd->nin > 1 ? ir_load_f64(t, in->buf[1], e) : 0;
        ck_assert_msg(ref_math_has(nd->op), "%s is not transcendental", ir_ops[nd->op].name);
        long double r = ref_math(nd->op, t, a, b); /* quiets signalling NaNs, as f32 does */
        if (t == KILN_DTYPE_F32) {
            float f = (float)r;
            memcpy((char *)out + 4 * e, &f, 4);
        } else {
            double d = (double)r;
            memcpy((char *)out + 8 * e, &d, 8);
        }
    }
    return out;
}

/* The rule for the output of one op: compiled transcendental ops within their ULP bound;
 * the commutative float ops (add, mul, max, min, clamp) NAN_ANY, since LLVM may swap their
 * operands and with two NaNs either comes out; the sign and rounding ops NAN_QUIET
 * (signalling NaNs, see above); everything else bit-exact, NaNs included: sub, div, rem,
 * sqrt, rsqrt, recip, casts, where, integer and bool ops, and reference steps (which run
 * the interpreter's own code).  Measured: each relaxation is needed on this host, and
 * nothing looser is. */
static rule
op_rule(const kiln_graph *g, const ir_node *nd)
{
    rule r = {0};
    kiln_dtype in0 = g->nodes[nd->in[0]].type.dtype;
    if (ir_op_is_vmath(nd->op) && ir_dtype_is_float(nd->type.dtype) &&
        jit_op_is_lowerable(g, nd)) {
        r.ulp = ulp_bound(nd->op, nd->type.dtype);
        return r;
    }
    r.nan = NAN_EXACT;
    if (!ir_dtype_is_float(in0) || !jit_op_is_lowerable(g, nd))
        return r;
    switch (nd->op) {
    case IR_OP_ADD: case IR_OP_MUL: case IR_OP_MAX: case IR_OP_MIN: case IR_OP_CLAMP:
        r.nan = NAN_ANY;
        break;
    case IR_OP_NEG: case IR_OP_ABS: case IR_OP_SIGN: case IR_OP_RELU: case IR_OP_FLOOR:
    case IR_OP_CEIL: case IR_OP_ROUND: case IR_OP_TRUNC:
        r.nan = NAN_QUIET;
        break;
    default:
        break;
    }
    return r;
}

/* ---- 1. every elementwise op x every dtype ---------------------------------------------- */

/* A graph computing op on inputs of `n` elements: a (and b, c) of dtype t; where takes a
 * bool condition first; cast converts t to `to`. */
static kiln_graph *
op_graph(ir_op op, kiln_dtype t, kiln_dtype to, int rank, const int64_t *dims)
{
    kiln_graph *g = ir_graph_new(ir_ops[op].name);
    ck_assert_ptr_nonnull(g);
    ir_type ty = {t, {rank, {0}}};
    memcpy(ty.shape.dims, dims, sizeof(int64_t) * (size_t)rank);
    int arity = ir_ops[op].arity;
    int32_t in[3];
    static const char *const names[3] = {"a", "b", "c"};
    for (int k = 0; k < arity; k++) {
        ir_type tk = ty;
        if (op == IR_OP_WHERE && k == 0)
            tk.dtype = KILN_DTYPE_BOOL;
        in[k] = ir_graph_add_input(g, names[k], &tk);
        ck_assert_msg(in[k] >= 0, "%s", kiln_errmsg());
    }
    ir_attrs at;
    memset(&at, 0, sizeof at);
    at.to = to;
    int32_t r = ir_graph_add_node(g, "check_jit", op, arity, in, &at, NULL, "r");
    ck_assert_msg(r >= 0, "%s %s: %s", ir_ops[op].name, kiln_dtype_name(t), kiln_errmsg());
    ck_assert_int_eq(ir_graph_add_output(g, "r", r), KILN_OK);
    ck_assert_int_eq(ir_graph_verify(g), KILN_OK);
    return g;
}

/* Inputs covering every combination of special values (the cross product over the op's
 * operands, a smaller list for ternary ops), then `extra` random elements. */
static size_t
cross_inputs(ir_op op, kiln_dtype t, size_t extra, uint64_t seed, inputs *in, size_t *count)
{
    int arity = ir_ops[op].arity;
    size_t ns = special_count(t);
    size_t nv = arity == 3 ? (ns < 14 ? ns : 14) : ns; /* values per operand */
    size_t cross = 1;
    int varying = op == IR_OP_WHERE ? 2 : arity; /* where: the condition is random */
    for (int k = 0; k < varying; k++)
        cross *= nv;
    size_t n = cross + extra;
    ts_rng r;
    ts_rng_seed(&r, seed);
    in->n = arity;
    for (int k = 0; k < arity; k++) {
        kiln_dtype tk = op == IR_OP_WHERE && k == 0 ? KILN_DTYPE_BOOL : t;
        in->buf[k] = malloc(n * kiln_dtype_size(tk));
        ck_assert_ptr_nonnull(in->buf[k]);
        if (op == IR_OP_WHERE && k == 0) {
            ts_random_elements(&r, tk, in->buf[k], n, false);
            continue;
        }
        int v = op == IR_OP_WHERE ? k - 1 : k;
        size_t div = 1;
        for (int j = 0; j < v; j++)
            div *= nv;
        /* operand k cycles through the list with period nv^(k+1): every combination once */
        for (size_t e = 0; e < cross; e++) {
            size_t idx = (e / div) % nv;
            /* spread the ternary subset over the whole list */
            put_special(tk, in->buf[k], e, nv == ns ? idx : idx * ns / nv);
        }
        ts_random_elements(&r, tk, (char *)in->buf[k] + cross * kiln_dtype_size(tk), extra, false);
    }
    *count = n;
    return n;
}

/* The op x dtype pairs of test 1 (casts: every from x to). */
typedef struct opcase {
    ir_op op;
    kiln_dtype t, to;
} opcase;

static int
op_cases(opcase *out, int cap)
{
    int n = 0;
    for (int op = 0; op < IR_OP_COUNT; op++) {
        if (!ir_op_is_elementwise((ir_op)op))
            continue;
        unsigned m = operand_dtypes((ir_op)op);
        for (int t = 0; t < KILN_DTYPE_COUNT; t++) {
            if (!(m & (1u << t)))
                continue;
            if (op == IR_OP_CAST) {
                for (int to = 0; to < KILN_DTYPE_COUNT; to++) {
                    ck_assert_int_lt(n, cap);
                    out[n++] = (opcase){(ir_op)op, (kiln_dtype)t, (kiln_dtype)to};
                }
            } else {
                ck_assert_int_lt(n, cap);
                out[n++] = (opcase){(ir_op)op, (kiln_dtype)t, (kiln_dtype)t};
            }
        }
    }
    return n;
}

static void
op_case_name(const opcase *c, char *buf, size_t n)
{
    if (c->op == IR_OP_CAST)
        snprintf(buf, n, "cast %s->%s", kiln_dtype_name(c->t), kiln_dtype_name(c->to));
    else
        snprintf(buf, n, "%s %s", ir_ops[c->op].name, kiln_dtype_name(c->t));
}

/* A one-op graph in both modes: against the interpreter, or (rule r.ulp: a transcendental
 * op compiled by vmath) against ref_math. */
static bool
check_op_graph(const kiln_graph *g, const inputs *in, rule r, const char *ctx)
{
    if (r.ulp <= 0)
        return check_both_ref(g, in, &r, NULL, ctx, false);
    void *ref[1] = {math_reference(g, in)};
    bool ok = check_both_ref(g, in, &r, ref, ctx, false);
    free(ref[0]);
    return ok;
}

/* One op x dtype: the special-value cross product, then sizes 0, 1, W-1, W, W+1, a prime
 * and a 2-D shape whose rows are no multiple of W, in both modes.  Returns false (the
 * details on stderr) when any differs. */
static bool
check_op_case(const opcase *c)
{
    bool ok = true;
    char name[64];
    op_case_name(c, name, sizeof name);
    int W = lanes();
    /* the cross product (plus random elements) */
    {
        inputs in = {0};
        size_t n;
        cross_inputs(c->op, c->t, 300, 0x1000 + (uint64_t)c->op * 16 + c->t, &in, &n);
        int64_t dims[1] = {(int64_t)n};
        kiln_graph *g = op_graph(c->op, c->t, c->to, 1, dims);
        rule r = op_rule(g, &g->nodes[g->outputs[0].node]);
        char ctx[128];
        snprintf(ctx, sizeof ctx, "%s, special values x %zu", name, n);
        ok = check_op_graph(g, &in, r, ctx) && ok;
        inputs_free(&in);
        kiln_graph_free(g);
    }
    /* sizes */
    const int64_t sizes[][2] = {{1, 0}, {1, 1}, {1, W - 1}, {1, W}, {1, W + 1}, {1, 1009},
                                {2, 3}};
    for (size_t s = 0; s < NELEM(sizes); s++) {
        int rank = (int)sizes[s][0];
        int64_t dims[2] = {sizes[s][1], 2 * W + 3};
        if (rank == 2)
            dims[0] = 5;
        kiln_graph *g = op_graph(c->op, c->t, c->to, rank, dims);
        rule r = op_rule(g, &g->nodes[g->outputs[0].node]);
        inputs in = {0};
        inputs_random(g, 0x2000 + s, false, &in);
        char ctx[128];
        snprintf(ctx, sizeof ctx, "%s, shape [%lld%s%s]", name, (long long)dims[0],
                 rank == 2 ? "," : "", rank == 2 ? "2W+3" : "");
        ok = check_op_graph(g, &in, r, ctx) && ok;
        inputs_free(&in);
        kiln_graph_free(g);
    }
    return ok;
}

static opcase all_cases[512];
static int nall_cases;

static void
cases_setup(void)
{
    nall_cases = op_cases(all_cases, (int)NELEM(all_cases));
}

START_TEST(test_elementwise_op)
{
    if (!nall_cases)
        cases_setup();
    /* _i runs over op x dtype pairs in slices; every case runs, the failing ones are named */
    char failed[1024] = "";
    int nfailed = 0;
    for (int k = _i; k < nall_cases; k += 8) {
        if (check_op_case(&all_cases[k]))
            continue;
        char name[64];
        op_case_name(&all_cases[k], name, sizeof name);
        size_t len = strlen(failed);
        snprintf(failed + len, sizeof failed - len, "%s%s", nfailed++ ? ", " : "", name);
    }
    ck_assert_msg(nfailed == 0, "%d op/dtype cases differ from the reference (details on "
                  "stderr): %s", nfailed, failed);
}
END_TEST

/* The same cases compiled as compact code (KILN_CODE_COMPACT: vector math called out of line,
 * every vector under a mask, LLVM's fast code generator), held to the same rules. */
START_TEST(test_elementwise_op_compact)
{
    test_code = KILN_CODE_COMPACT;
    test_elementwise_op_fn(_i);
    test_code = KILN_CODE_AUTO;
}
END_TEST

/* The cases list covers what it claims: every elementwise op appears, and the op count of
 * each dtype rule matches the op table. */
START_TEST(test_elementwise_coverage)
{
    cases_setup();
    bool seen[IR_OP_COUNT] = {0};
    int casts = 0;
    for (int k = 0; k < nall_cases; k++) {
        seen[all_cases[k].op] = true;
        casts += all_cases[k].op == IR_OP_CAST;
    }
    for (int op = 0; op < IR_OP_COUNT; op++)
        ck_assert_msg(seen[op] == ir_op_is_elementwise((ir_op)op), "op %s", ir_ops[op].name);
    ck_assert_int_eq(casts, KILN_DTYPE_COUNT * KILN_DTYPE_COUNT);
}
END_TEST

/* Integer division and remainder at their documented edges, spelled out (the cross
 * product covers them too; this names them). */
START_TEST(test_int_div_edges)
{
    static const char *const dts[2] = {"i32", "i64"};
    for (int d = 0; d < 2; d++) {
        const char *t = dts[d];
        kiln_graph *g = parsef(
            "graph e(a: %s[6], b: %s[6]) -> (q: %s[6], r: %s[6]) {\n"
            "  q = div(a, b)\n  r = rem(a, b)\n}\n", t, t, t, t);
        inputs in = {0};
        in.n = 2;
        for (int k = 0; k < 2; k++)
            ck_assert_ptr_nonnull(in.buf[k] = malloc(6 * 8));
        int64_t mn = d ? INT64_MIN : INT32_MIN;
        int64_t a[6] = {mn, mn, 7, -7, 0, mn}, b[6] = {-1, 0, 0, 2, -1, 1};
        for (int i = 0; i < 6; i++) {
            ir_store_i64(d ? KILN_DTYPE_I64 : KILN_DTYPE_I32, in.buf[0], (size_t)i, a[i]);
            ir_store_i64(d ? KILN_DTYPE_I64 : KILN_DTYPE_I32, in.buf[1], (size_t)i, b[i]);
        }
        check_both(g, &in, NULL, t);
        /* and the documented values themselves, from the compiled program */
        kiln_program *p;
        ck_assert_int_eq(kiln_program_compile(g, NULL, &p), KILN_OK);
        int64_t q[6], r[6];
        void *outs[2] = {q, r};
        ck_assert_int_eq(kiln_program_run(p, (const void *const *)in.buf, outs), KILN_OK);
        kiln_dtype dt = d ? KILN_DTYPE_I64 : KILN_DTYPE_I32;
        ck_assert(ir_load_i64(dt, q, 0) == mn && ir_load_i64(dt, r, 0) == 0);  /* MIN/-1 */
        ck_assert(ir_load_i64(dt, q, 1) == 0 && ir_load_i64(dt, r, 1) == 0);   /* /0 */
        ck_assert(ir_load_i64(dt, q, 2) == 0 && ir_load_i64(dt, r, 2) == 0);
        ck_assert(ir_load_i64(dt, q, 3) == -3 && ir_load_i64(dt, r, 3) == -1); /* truncation */
        ck_assert(ir_load_i64(dt, q, 5) == mn && ir_load_i64(dt, r, 5) == 0);
        kiln_program_free(p);
        inputs_free(&in);
        kiln_graph_free(g);
    }
}
END_TEST

/* ---- 2. sizes: fused chains over every dtype ----------------------------------------------- */

START_TEST(test_sizes_chain)
{
    int W = lanes();
    const int64_t ns[] = {0, 1, W - 1, W, W + 1, 1009};
    for (size_t i = 0; i < NELEM(ns); i++) {
        char ctx[64];
        snprintf(ctx, sizeof ctx, "chain n=%lld", (long long)ns[i]);
        long long n = (long long)ns[i];
        check_text(ctx, 0x3000 + i,
                   "graph chain(x: f32[%lld], y: f32[%lld], z: f32[%lld], k: i32[%lld],\n"
                   "            d: f64[%lld], c: bool[%lld]) ->\n"
                   "    (out: f32[%lld], kk: i64[%lld], dd: f64[%lld], m: bool[%lld]) {\n"
                   "  a = mul(x, y)\n  b = add(a, z)\n  zero = full(value=0) : f32[]\n"
                   "  r = max(b, zero)\n  half = full(value=0.5) : f32[]\n  h = mul(r, half)\n"
                   "  out = add(h, x)\n"
                   "  k2 = mul(k, k)\n  seven = full(value=7) : i32[]\n  q = div(k2, seven)\n"
                   "  kk = cast(q, to=i64)\n"
                   "  xd = cast(out, to=f64)\n  dd = sub(d, xd)\n"
                   "  lt0 = lt(dd, d)\n  m = xor(lt0, c)\n}\n",
                   n, n, n, n, n, n, n, n, n, n);
    }
    /* 2-D: rows of W+3 and 2W-1 elements (never a multiple of W), a broadcast row and
     * column */
    const int64_t cols[] = {W + 3, 2 * W - 1, 1};
    for (size_t i = 0; i < NELEM(cols); i++) {
        char ctx[64];
        snprintf(ctx, sizeof ctx, "2-D chain [7,%lld]", (long long)cols[i]);
        long long c = (long long)cols[i];
        check_text(ctx, 0x3100 + i,
                   "graph chain2(x: f32[7,%lld], row: f32[%lld], col: f32[7,1], k: i64[7,%lld]) ->\n"
                   "    (out: f32[7,%lld], kk: i64[7,%lld], b: bool[7,%lld]) {\n"
                   "  a = mul(x, row)\n  s = sub(a, col)\n  out = min(s, x)\n"
                   "  kc = cast(col, to=i64)\n  kk = rem(k, kc)\n"
                   "  b = ge(out, row)\n}\n",
                   c, c, c, c, c, c);
    }
}
END_TEST

/* ---- 3. broadcasting and movement folded into loads ---------------------------------------- */

START_TEST(test_broadcasting)
{
    int W = lanes();
    check_text("bcast size-1 on both sides", 0x4000,
               "graph b(x: f32[4,1,%d], y: f32[3,1]) -> (o: f32[4,3,%d]) {\n"
               "  o = add(x, y)\n}\n", W + 1, W + 1);
    check_text("bcast rank mismatch, scalar, full", 0x4010,
               "graph b(x: f32[4,3,%d], y: f32[%d], s: f32[], u: f32[1,1,1]) ->\n"
               "    (o: f32[4,3,%d], o2: f32[4,3,%d]) {\n"
               "  a = mul(x, y)\n  b = sub(a, s)\n  f = full(value=-2.5) : f32[3,1]\n"
               "  c = div(b, f)\n  o = max(c, u)\n  o2 = clamp(x, s, y)\n}\n",
               W - 1, W - 1, W - 1, W - 1);
    check_text("bcast where with bool row", 0x4020,
               "graph w(c: bool[%d], a: i64[5,%d], b: i64[5,1]) -> (o: i64[5,%d]) {\n"
               "  o = where(c, a, b)\n}\n", W + 2, W + 2, W + 2);
    check_text("bcast full operands only", 0x4030,
               "graph f(x: f64[2,%d]) -> (o: f64[2,%d], z: f64[2,1]) {\n"
               "  a = full(value=3) : f64[]\n  b = full(value=0.25) : f64[2,1]\n"
               "  c = mul(a, b)\n  z = add(c, c)\n  o = add(x, c)\n}\n", W, W);
    check_text("rank 0", 0x4040,
               "graph r0(x: f32[], y: f32[]) -> (o: f32[], b: bool[]) {\n"
               "  o = mul(x, y)\n  b = gt(o, x)\n}\n");
}
END_TEST

START_TEST(test_movement)
{
    int W = lanes();
    check_text("expand", 0x5000,
               "graph e(v: f32[%d], c: f32[4,1], x: f32[3,4,%d]) -> (o: f32[3,4,%d]) {\n"
               "  ev = expand(v, shape=[4,%d])\n  ec = expand(c, shape=[3,4,%d])\n"
               "  a = add(ev, ec)\n  o = mul(a, x)\n}\n",
               W + 1, W + 1, W + 1, W + 1, W + 1);
    check_text("permute rank 3", 0x5010,
               "graph p(x: f32[3,4,%d], y: f32[%d,3,4]) -> (o: f32[%d,3,4], o2: f32[4,%d,3]) {\n"
               "  p = permute(x, perm=[2,0,1])\n  o = mul(p, y)\n"
               "  q = permute(x, perm=[1,2,0])\n  o2 = neg(q)\n}\n",
               W + 3, W + 3, W + 3, W + 3);
    check_text("slice with steps", 0x5020,
               "graph s(x: f32[5,6,%d]) -> (o: f32[2,6,%d], o2: f32[5,6,%d]) {\n"
               "  a = slice(x, start=[1,-1,0], stop=[4,-100,%d], step=[2,-1,1])\n"
               "  b = slice(x, start=[0,0,%d], stop=[5,6,-%d], step=[3,1,-1])\n"
               "  o = add(a, a)\n"
               "  r = slice(x, step=[-1,-1,-1])\n  o2 = sub(r, x)\n}\n",
               2 * W + 1, 2 * W + 1, 2 * W + 1, 2 * W + 1, 2 * W, 2 * W + 2);
    check_text("slice strided inner", 0x5030,
               "graph s2(x: i32[3,%d]) -> (o: i32[3,%d]) {\n"
               "  a = slice(x, start=[0,1], stop=[3,%d], step=[1,2])\n"
               "  b = slice(x, start=[0,%d], stop=[3,0], step=[1,-2])\n"
               "  o = add(a, b)\n}\n",
               4 * W + 2, 2 * W, 4 * W + 1, 4 * W);
    check_text("slice with huge steps", 0x5038,
               "graph hs(x: f32[3,%d]) -> (o: f32[1,%d], o2: f32[1,%d]) {\n"
               "  a = slice(x, start=[1,0], stop=[3,%d], step=[9223372036854775807,1])\n"
               "  b = slice(x, start=[-1,0], stop=[-100,%d], step=[-9223372036854775807,1])\n"
               "  o = add(a, b)\n  o2 = neg(b)\n}\n",
               W + 1, W + 1, W + 1, W + 1, W + 1);
    check_text("reshape contiguous", 0x5040,
               "graph r(x: f32[4,%d], y: f32[2,2,%d]) -> (o: f32[2,2,%d], o2: f32[%d]) {\n"
               "  a = mul(x, x)\n  ra = reshape(a, shape=[2,2,%d])\n  o = add(ra, y)\n"
               "  rx = reshape(x, shape=[%d])\n  o2 = neg(rx)\n}\n",
               W + 1, W + 1, W + 1, 4 * (W + 1), W + 1, 4 * (W + 1));
    check_text("reshape of permuted (copy)", 0x5050,
               "graph rp(x: f32[3,%d], y: f32[%d]) -> (o: f32[%d]) {\n"
               "  p = permute(x, perm=[1,0])\n  r = reshape(p, shape=[%d])\n"
               "  o = add(r, y)\n}\n",
               W + 2, 3 * (W + 2), 3 * (W + 2), 3 * (W + 2));
    check_text("reshape of a sliced view (copy)", 0x5058,
               "graph rs(x: i64[6,%d]) -> (o: i64[3,%d]) {\n"
               "  s = slice(x, step=[2,1])\n  r = reshape(s, shape=[3,%d])\n"
               "  o = neg(r)\n}\n", W + 1, W + 1, W + 1);
    check_text("view of a view", 0x5060,
               "graph vv(x: f32[4,%d]) -> (o: f32[%d,2]) {\n"
               "  p = permute(x, perm=[1,0])\n  s = slice(p, start=[0,3], stop=[%d,0], step=[1,-2])\n"
               "  o = neg(s)\n}\n", W + 1, W + 1, W + 1);
    check_text("view of a view read by a reference step", 0x5068,
               "graph vr(x: f32[4,%d]) -> (s: f32[4], o: f32[%d,2]) {\n"
               "  p = permute(x, perm=[1,0])\n  s = reduce_sum(p, axes=[0])\n"
               "  v = slice(p, start=[0,3], stop=[%d,0], step=[1,-2])\n"
               "  o = abs(v)\n}\n", W + 1, W + 1, W + 1);
    check_text("views of reference results", 0x5069,
               "graph vref(x: f32[4,%d], w: f32[%d,3]) -> (o: f32[4,%d], o2: f32[3,4]) {\n"
               "  s = reduce_max(x, axes=[1], keepdim=true)\n  e = expand(s, shape=[4,%d])\n"
               "  o = sub(x, e)\n  m = matmul(x, w)\n  t = permute(m, perm=[1,0])\n"
               "  o2 = mul(t, t)\n}\n", W + 1, W + 1, W + 1, W + 1);
    check_text("rank 8", 0x506a,
               "graph r8(x: f32[2,1,3,2,1,2,3,%d], y: f32[2,1,1,3,%d]) ->\n"
               "    (o: f32[2,1,3,2,1,2,3,%d], p: f32[%d,3,2,1,2,3,1,2], s: f32[1,1,2,2,1,2,3,%d]) {\n"
               "  o = add(x, y)\n"
               "  p = permute(o, perm=[7,6,5,4,3,2,1,0])\n"
               "  s = slice(x, start=[1,0,2,0,0,1,0,0], stop=[2,1,0,2,1,-3,3,%d],\n"
               "            step=[1,1,-1,1,1,-1,1,1])\n}\n",
               W + 1, W + 1, W + 1, W + 1, W + 1, W + 1);
    check_text("views as outputs", 0x5070,
               "graph vo(x: f32[3,%d], v: i32[%d]) -> (p: f32[%d,3], s: f32[3,2], e: i32[2,%d],\n"
               "    r: f32[%d]) {\n"
               "  p = permute(x, perm=[1,0])\n  s = slice(x, start=[0,1], stop=[3,3])\n"
               "  e = expand(v, shape=[2,%d])\n  r = reshape(x, shape=[%d])\n}\n",
               W, W, W, W, 3 * W, W, 3 * W);
    check_text("input, constant and full as outputs; one value twice", 0x5080,
               "graph io(x: f32[%d]) -> (x: f32[%d], c: f32[3], f: f32[2,2], a: f32[%d],\n"
               "    a2: f32[%d] = a, x2: f32[%d] = x) {\n"
               "  c = constant(data=[1.5, -0, nan]) : f32[3]\n"
               "  f = full(value=-inf) : f32[2,2]\n"
               "  a = mul(x, x)\n}\n", W, W, W, W, W);
    check_text("full viewed", 0x5090,
               "graph fv(x: f32[4,%d]) -> (o: f32[4,%d], e: f32[4,%d]) {\n"
               "  f = full(value=3) : f32[4,1]\n  e = expand(f, shape=[4,%d])\n"
               "  o = sub(x, e)\n}\n", W, W, W, W);
    check_text("bool and i64 through views", 0x50a0,
               "graph bv(b: bool[3,%d], k: i64[%d,3]) -> (o: bool[%d,3], q: i64[%d,3]) {\n"
               "  p = permute(b, perm=[1,0])\n  s = slice(k, step=[-1,1])\n"
               "  t = gt(s, k)\n  o = and(p, t)\n  q = where(o, s, k)\n}\n",
               W + 1, W + 1, W + 1, W + 1);
    check_text("elementwise value read directly and through a view", 0x50b0,
               "graph ev(x: f32[%d,%d]) -> (o: f32[%d,%d]) {\n"
               "  a = mul(x, x)\n  t = permute(a, perm=[1,0])\n  o = add(a, t)\n}\n",
               W + 1, W + 1, W + 1, W + 1);
}
END_TEST

/* Fusion happens: the chain is one kernel fused, five eager (the fulls are folded into
 * the kernels as constants). */
static int
plan_steps(kiln_program *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_int_eq(kiln_program_dump(p, KILN_VIEW_PLAN, f), KILN_OK);
    fclose(f);
    int steps = -1;
    ck_assert_msg(sscanf(text, "plan: %d steps", &steps) == 1, "plan dump: %s", text);
    free(text);
    return steps;
}

/* A wide, shallow graph (the shape of tests/bench/wide_graph.py, smaller and of exact ops
 * only): 8 inputs squared, then 4 layers of 150 ops of two nodes of the layer before, the
 * last layer summed in groups of 10 into 15 outputs.  Its ops join their operands' kernels,
 * so unbounded they would make kernels of hundreds of ops holding hundreds of values until
 * the end of the body (LLVM's time grows faster than linearly with them).  The planner
 * ends a kernel at its bound on such values (lib/jit/planner.h), names that bound in the plan,
 * and the result still matches the interpreter bit for bit, fused and eager. */
/* A copy of a view whose elements are one contiguous range of its base (rows of a slice; a
 * reshape and a permute that moves only a dim of size 1) is a COPY step, a memmove, not a
 * kernel, where no kernel computes the base (rows of an input; an input's slice reshaped);
 * one of a value a kernel computes is stored by that kernel (test_ranged_outputs); other
 * views keep their copy kernel.  Values bit for bit against the interpreter (check_text:
 * fused and eager, inputs with and without specials); the fused plan is checked for which
 * became which. */
START_TEST(test_contiguous_copies)
{
    static const char text[] =
        "graph cc(x: f32[6,40], y: i64[3,1,24]) -> (rows: f32[2,40], kn: f32[4,1,10], "
        "yr: i64[1,24], cols: f32[6,8], t: f32[40,6]) {\n"
        "  rows = slice(x, start=[3,0], stop=[5,40])\n"
        "  h = mul(x, x)\n  hs = slice(h, start=[2,0], stop=[3,40])\n"
        "  hr = reshape(hs, shape=[1,4,10])\n  kn = permute(hr, perm=[1,0,2])\n"
        "  ys = slice(y, start=[2,0,0], stop=[3,1,24])\n  yr = reshape(ys, shape=[1,24])\n"
        "  cols = slice(x, start=[0,8], stop=[6,16])\n  t = permute(x, perm=[1,0])\n}\n";
    check_text("contiguous copies", 0x5100, "%s", text);
    kiln_graph *g = ts_parse(text);
    kiln_program *p = NULL;
    ck_assert_int_eq(kiln_program_compile(g, NULL, &p), KILN_OK);
    char *plan = ts_plan_text(p);
    int copies = ts_count(plan, "copy (one contiguous range"),
        kernels = ts_count(plan, "kernel: materialise");
    ck_assert_msg(copies == 2 && kernels == 2, "%d copies, %d copy kernels:\n%s", copies,
                  kernels, plan);
    ck_assert_ptr_nonnull(strstr(plan, "from its byte 480")); /* rows 3-4 of x */
    ck_assert_ptr_nonnull(strstr(plan, "elements [80, 120) of the space only")); /* kn */
    free(plan);
    kiln_program_free(p);
    kiln_graph_free(g);
}
END_TEST

static int output_rules(const kiln_graph *g, rule *rules);
static void check_modes_agree(const kiln_graph *g, const inputs *in, const rule *rules,
                              const char *ctx);

/* A graph of ranged outputs at sizes n (the matmul's K and the elementwise value's rows
 * grow with it): slices of a skinny matmul's row with a bias (q is read by another kernel,
 * so the row is stored whole too; k and v are one contiguous range each, at offsets that
 * are no multiple of a vector), rows of an elementwise value (read by another op of its
 * kernel, hn, in registers) and of a packed contraction's (read by nothing else: neither is
 * stored whole), and rows of a larger elementwise value (only its
 * range is computed, in chunks on every thread). */
static char *
ranged_text(int n)
{
    char *t = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&t, &len);
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "graph ro(x: f32[1,%d], w: f32[%d,45], bias: f32[45], a: f32[%d,19], "
            "c: f32[40,%d], w2: f32[%d,20], b2: f32[20], e: f32[400,1000]) -> (q: f32[1,13], "
            "kn: f32[2,1,8], vn: f32[16], rows: f32[3,19], cr: f32[1,3,20], big: f32[200,1000], "
            "hn: f32[%d,19]) {\n"
            "  mm = matmul(x, w)\n  qkv = add(mm, bias)\n"
            "  qs = slice(qkv, start=[0,0], stop=[1,13])\n  q = mul(qs, qs)\n"
            "  ks = slice(qkv, start=[0,13], stop=[1,29])\n  kr = reshape(ks, shape=[1,2,8])\n"
            "  kn = permute(kr, perm=[1,0,2])\n"
            "  vs = slice(qkv, start=[0,29], stop=[1,45])\n  vn = reshape(vs, shape=[16])\n"
            "  h = mul(a, a)\n  rows = slice(h, start=[2,0], stop=[5,19])\n"
            "  m2 = matmul(c, w2)\n  cm = add(m2, b2)\n"
            "  cs = slice(cm, start=[3,0], stop=[6,20])\n  cr = reshape(cs, shape=[1,3,20])\n"
            "  h2 = add(e, e)\n  big = slice(h2, start=[101,0], stop=[301,1000])\n"
            "  hn = neg(h)\n}\n",
            n, n, n + 3, n, n, n + 3);
    fclose(f);
    return t;
}

/* An output that is one contiguous range of a value an elementwise, skinny or contraction
 * kernel computes is stored straight into the output by that kernel (a JIT_ST_RANGE store:
 * only the elements [lo, hi) of its space, lo and hi run-time parameters), not copied by a
 * step of its own; the value is stored whole only where another step reads it.  Against the
 * interpreter within the propagated bound (matmuls sum in another order), fused and eager
 * (eager: one kernel per op, the copies stay), and fused and eager the same bit for bit; at
 * two sizes of one graph, so that the second plan is made from the first's model
 * (KILN_TEST_RESIZE=verify compares it with one made from scratch). */
START_TEST(test_ranged_outputs)
{
    for (int n = 24; n <= 40; n += 16) {
        char *text = ranged_text(n);
        kiln_graph *g = ts_parse(text);
        rule rules[MAXIO];
        ck_assert_int_eq(output_rules(g, rules), 4); /* of a matmul: all but rows, big, hn */
        for (int tame = 0; tame < 2; tame++) {
            inputs in = {0};
            inputs_random(g, 0x5200 + (uint64_t)(n + tame), tame, &in);
            ts_bufs tb = {.n = in.n};
            bool which[MAXIO];
            for (int k = 0; k < in.n; k++)
                tb.buf[k] = in.buf[k];
            for (int k = 0; k < g->noutputs; k++)
                which[k] = true;
            ts_bounds b = {0};
            ts_bounds_for(g, &tb, which, &b);
            for (int k = 0; k < g->noutputs; k++)
                rules[k].bound = b.bound[k];
            char ctx[64];
            snprintf(ctx, sizeof ctx, "ranged outputs, n = %d, tame %d", n, tame);
            check_both(g, &in, rules, ctx);
            check_modes_agree(g, &in, rules, ctx);
            ts_bounds_free(&b);
            inputs_free(&in);
        }
        kiln_program *p = NULL;
        ck_assert_int_eq(kiln_program_compile(g, NULL, &p), KILN_OK);
        char *plan = ts_plan_text(p);
        int copies = ts_count(plan, "materialise"), ranged = ts_count(plan, "of the space only");
        ck_assert_msg(copies == 0 && ranged == 5, "%d copies, %d ranged stores:\n%s", copies,
                      ranged, plan);
        static const char *const want[] = {
            "store 1: output 1, elements [13, 29) of the space only",  /* kn, of the skinny row */
            "store 2: output 2, elements [29, 45) of the space only",  /* vn */
            "store 1: output 3, elements [38, 95) of the space only",  /* rows, beside hn */
            "store 0: output 4, elements [60, 120) of the space only", /* cr: cm not stored */
            "store 0: output 5, elements [101000, 301000) of the space only", /* big */
        };
        for (size_t i = 0; i < sizeof want / sizeof *want; i++)
            ck_assert_msg(strstr(plan, want[i]), "no \"%s\" in\n%s", want[i], plan);
        /* stored whole for its views: qkv alone (q reads it), not h, cm or h2 */
        int whole = ts_count(plan, "(a view needs a buffer)");
        ck_assert_msg(whole == 1, "%d values stored whole for views:\n%s", whole, plan);
        free(plan);
        kiln_program_free(p);
        kiln_graph_free(g);
        free(text);
    }
}
END_TEST

START_TEST(test_wide_graph_bounded)
{
    enum { NIN = 8, LAYERS = 4, WIDTH = 150, GROUP = 10, NOUT = WIDTH / GROUP };
    static const char *const ops[5] = {"add", "mul", "sub", "max", "min"};
    size_t cap = 4096 + (size_t)(LAYERS + 1) * WIDTH * 64, n = 0;
    char *t = malloc(cap);
    ck_assert_ptr_nonnull(t);
    int len = lanes() * 3 + 1;
    n += (size_t)snprintf(t + n, cap - n, "graph wide(");
    for (int i = 0; i < NIN; i++)
        n += (size_t)snprintf(t + n, cap - n, "%sx%d: f32[%d]", i ? ", " : "", i, len);
    n += (size_t)snprintf(t + n, cap - n, ") -> (");
    for (int j = 0; j < NOUT; j++)
        n += (size_t)snprintf(t + n, cap - n, "%sy%d: f32[%d]", j ? ", " : "", j, len);
    n += (size_t)snprintf(t + n, cap - n, ") {\n");
    for (int i = 0; i < NIN; i++)
        n += (size_t)snprintf(t + n, cap - n, "  h%d = mul(x%d, x%d)\n", i, i, i);
    uint64_t r = 0x10;
    for (int l = 0; l < LAYERS; l++)
        for (int j = 0; j < WIDTH; j++) {
            r = r * 6364136223846793005u + 1442695040888963407u;
            unsigned a = (unsigned)(r >> 33), b = (unsigned)(r >> 45);
            if (l == 0) /* two different squares */
                n += (size_t)snprintf(t + n, cap - n, "  v0_%d = %s(h%u, h%u)\n", j, ops[a % 5],
                                      a % NIN, (a % NIN + 1 + b % (NIN - 1)) % NIN);
            else /* the first operand walks a permutation of the layer before (7 and 150
                  * are coprime), so every node is read */
                n += (size_t)snprintf(t + n, cap - n, "  v%d_%d = %s(v%d_%d, v%d_%u)\n", l, j,
                                      ops[a % 5], l - 1, (7 * j + l) % WIDTH, l - 1, b % WIDTH);
        }
    for (int k = 0; k < NOUT; k++)
        for (int i = 1; i < GROUP; i++) {
            char sum[16];
            snprintf(sum, sizeof sum, i == GROUP - 1 ? "y%d" : "s%d_%d", k, i);
            if (i == 1)
                n += (size_t)snprintf(t + n, cap - n, "  %s = add(v%d_%d, v%d_%d)\n", sum,
                                      LAYERS - 1, k * GROUP, LAYERS - 1, k * GROUP + 1);
            else
                n += (size_t)snprintf(t + n, cap - n, "  %s = add(s%d_%d, v%d_%d)\n", sum, k, i - 1,
                                      LAYERS - 1, k * GROUP + i);
        }
    n += (size_t)snprintf(t + n, cap - n, "}\n");
    ck_assert_uint_lt(n, cap);
    kiln_graph *g = ts_parse(t);
    free(t);

    /* the plan: several kernels, each storing no more values than the bound it names */
    kiln_program *p;
    kiln_options o = KILN_OPTIONS_INIT;
    ck_assert_int_eq(kiln_program_compile(g, &o, &p), KILN_OK);
    char *plan = NULL;
    size_t plen = 0;
    FILE *f = open_memstream(&plan, &plen);
    ck_assert_int_eq(kiln_program_dump(p, KILN_VIEW_PLAN, f), KILN_OK);
    fclose(f);
    kiln_program_free(p);
    const char *lim = strstr(plan, "(kernel size limit: ");
    int bound = 0, kernels = 0;
    if (!lim || sscanf(lim, "(kernel size limit: %d computed values still needed", &bound) != 1)
        fprintf(stderr, "---- plan\n%s", plan);
    ck_assert_msg(bound > 0, "no kernel ends at the bound on live values (plan on stderr)");
    for (const char *s = plan; (s = strstr(s, " instructions\n")) != NULL; s++) {
        const char *line = s;
        while (line > plan && line[-1] != '\n')
            line--;
        int loads, stores;
        ck_assert_int_eq(sscanf(line, "%*d elements, rank %*d, %d loads, %d stores", &loads, &stores),
                         2);
        if (stores > bound)
            fprintf(stderr, "---- plan\n%s", plan);
        ck_assert_msg(stores <= bound,
                      "a kernel stores %d values, more than its bound %d (plan on stderr)", stores,
                      bound);
        kernels++;
    }
    ck_assert_int_gt(kernels, 1);
    free(plan);

    inputs in = {0};
    inputs_random(g, 0x5101, true, &in);
    rule rules[NOUT];
    for (int j = 0; j < NOUT; j++)
        rules[j] = (rule){.nan = NAN_ANY};
    check_both(g, &in, rules, "wide graph");
    inputs_free(&in);
    kiln_graph_free(g);
}
END_TEST

START_TEST(test_fusion_counts)
{
    kiln_graph *g = parsef(
        "graph chain(x: f32[1000], y: f32[1000], z: f32[1000]) -> (out: f32[1000]) {\n"
        "  a = mul(x, y)\n  b = add(a, z)\n  zero = full(value=0) : f32[]\n"
        "  c = max(b, zero)\n  half = full(value=0.5) : f32[]\n  d = mul(c, half)\n"
        "  out = add(d, x)\n}\n");
    kiln_options o = KILN_OPTIONS_INIT;
    kiln_program *p;
    o.mode = KILN_MODE_FUSED;
    ck_assert_int_eq(kiln_program_compile(g, &o, &p), KILN_OK);
    ck_assert_int_eq(plan_steps(p), 1);
    kiln_program_free(p);
    o.mode = KILN_MODE_EAGER;
    ck_assert_int_eq(kiln_program_compile(g, &o, &p), KILN_OK);
    ck_assert_int_eq(plan_steps(p), 5);
    kiln_program_free(p);
    kiln_graph_free(g);
}
END_TEST

/* A chain longer than one kernel may hold (JIT_MAX_INST instructions) is split into
 * several kernels instead of failing. */
START_TEST(test_long_chain)
{
    enum { N = 5000 };
    size_t cap = 256 + (size_t)N * 48, n = 0;
    char *t = malloc(cap);
    ck_assert_ptr_nonnull(t);
    n += (size_t)snprintf(t + n, cap - n, "graph long(x: f32[%d], y: f32[%d]) -> (z: f32[%d]) {\n"
                          "  v0 = add(x, y)\n", lanes() + 1, lanes() + 1, lanes() + 1);
    static const char *const ops[3] = {"mul", "sub", "max"};
    for (int i = 1; i < N; i++)
        n += (size_t)snprintf(t + n, cap - n, "  v%d = %s(v%d, %s)\n", i, ops[i % 3], i - 1,
                              i % 2 ? "x" : "y");
    n += (size_t)snprintf(t + n, cap - n, "  z = neg(v%d)\n}\n", N - 1);
    ck_assert_uint_lt(n, cap);
    kiln_graph *g = ts_parse(t);
    free(t);
    inputs in = {0};
    inputs_random(g, 0x5100, true, &in);
    rule r = {.nan = NAN_ANY};
    check_both(g, &in, &r, "long chain");
    kiln_program *p;
    ck_assert_int_eq(kiln_program_compile(g, NULL, &p), KILN_OK);
    ck_assert_int_gt(plan_steps(p), 1);
    kiln_program_free(p);
    inputs_free(&in);
    kiln_graph_free(g);
}
END_TEST

/* ---- 4. random graphs ------------------------------------------------------------------- */

static uint64_t
base_seed(void)
{
    return ts_base_seed(0x6b696c6e);
}

/* Ops whose compiled form must match bit for bit: exact elementwise ops, the movement ops
 * the planner folds into loads, and sources (arange is computed exactly, as the
 * interpreter computes it). */
static void
exact_ops(bool *ops)
{
    for (int op = 0; op < IR_OP_COUNT; op++)
        ops[op] = (ir_op_is_elementwise((ir_op)op) && !ir_op_is_vmath((ir_op)op)) ||
                  op == IR_OP_RESHAPE || op == IR_OP_PERMUTE || op == IR_OP_EXPAND ||
                  op == IR_OP_SLICE || op == IR_OP_FULL || op == IR_OP_CONSTANT ||
                  op == IR_OP_ARANGE;
}

/* Per output: bound it when it depends on a transcendental op the JIT compiles (vmath), or
 * on a float sum, mean, product or matmul (another order of additions, see below): its error,
 * within the op's ULP bound, grows through later ops (a cancelling subtraction, a
 * comparison or cast that flips, a NaN from a domain edge), so no one tolerance fits a
 * whole random graph.  Such an output is held element by element to the bound `kiln
 * check` propagates through the graph (lib/check/errbound.h, ts_bounds_for), which is
 * infinite, and the element not compared, where nothing survives; those ops are held to
 * their own bound one op at a time in test 1, and bounded outputs must also agree between
 * FUSED and EAGER (check_modes_agree).  Everything else must be exact (NaN payloads
 * aside).  The bounds themselves: set by the caller (rules[i].bound). */
static int
output_rules(const kiln_graph *g, rule *rules)
{
    bool *taint = calloc((size_t)g->nnodes + 1, sizeof *taint);
    ck_assert_ptr_nonnull(taint);
    for (int32_t n = 0; n < g->nnodes; n++) {
        const ir_node *nd = &g->nodes[n];
        /* and float sums, means, products and matmuls: compiled, they add in another
         * (fixed) order than the interpreter, within the bounds check_reduce and
         * check_contract hold them to (an f32 matmul also accumulates in f32) */
        taint[n] = (ir_op_is_vmath(nd->op) && jit_op_is_lowerable(g, nd)) ||
                   ((nd->op == IR_OP_REDUCE_SUM || nd->op == IR_OP_REDUCE_MEAN ||
                     nd->op == IR_OP_REDUCE_PROD || nd->op == IR_OP_MATMUL) &&
                    ir_dtype_is_float(nd->type.dtype));
        for (int k = 0; k < nd->nin; k++)
            taint[n] = taint[n] || taint[nd->in[k]];
    }
    int bounded = 0;
    for (int32_t i = 0; i < g->noutputs; i++) {
        rules[i] = (rule){.nan = NAN_ANY, .bounded = taint[g->outputs[i].node]};
        bounded += rules[i].bounded;
    }
    free(taint);
    return bounded;
}

/* Compile g with `flags` in `mode`, run it on `in`; res[i] malloc'd outputs. */
static void
run_with_code(const kiln_graph *g, kiln_mode mode, kiln_code code, const inputs *in, void **res,
              const char *ctx)
{
    kiln_options o = KILN_OPTIONS_INIT;
    o.mode = mode;
    o.code = code;
    kiln_program *p;
    ck_assert_msg(kiln_program_compile(g, &o, &p) == KILN_OK, "%s: %s", ctx, kiln_errmsg());
    for (int i = 0; i < kiln_graph_num_outputs(g); i++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_output(g, i, &vi);
        res[i] = malloc(vi.bytes + 1);
        ck_assert_ptr_nonnull(res[i]);
    }
    ck_assert_msg(kiln_program_run(p, (const void *const *)in->buf, res) == KILN_OK, "%s: %s", ctx,
                  kiln_errmsg());
    kiln_program_free(p);
}

/* Output k of g, `a` and `b` computed two ways (named an and bn): every element the same,
 * NaN payloads aside; else the element, both values and the graph, and the test fails. */
static void
assert_same_output(const kiln_graph *g, int k, const void *a, const void *b, const char *an,
                   const char *bn, const char *ctx)
{
    kiln_value_info vi = KILN_VALUE_INFO_INIT;
    kiln_graph_output(g, k, &vi);
    for (size_t e = 0; e < vi.count; e++)
        if (!elem_match(vi.dtype, a, b, e, (rule){.nan = NAN_ANY})) {
            char x[64], y[64];
            ts_elem_str(vi.dtype, a, e, x, sizeof x);
            ts_elem_str(vi.dtype, b, e, y, sizeof y);
            fprintf(stderr, "FAIL %s: output %d element %zu: %s %s, %s %s\n", ctx, k, e, an, x, bn, y);
            describe(stderr, g, NULL);
            ck_abort_msg("%s: output %d element %zu: %s %s, %s %s", ctx, k, e, an, x, bn, y);
        }
}

/* Outputs only bounded against the reference must still be the same in FUSED and EAGER: the
 * same vmath code computes them one op per kernel or fused (no fast-math contraction, the
 * vector body and tail run the same instructions), so they agree bit for bit (NaN
 * payloads aside). */
static void
check_modes_agree(const kiln_graph *g, const inputs *in, const rule *rules, const char *ctx)
{
    int nout = kiln_graph_num_outputs(g);
    void *res[2][MAXIO] = {{0}};
    for (int m = 0; m < 2; m++)
        run_with_code(g, m ? KILN_MODE_EAGER : KILN_MODE_FUSED, KILN_CODE_AUTO, in, res[m], ctx);
    for (int i = 0; i < nout; i++) {
        if (rules[i].bounded)
            assert_same_output(g, i, res[0][i], res[1][i], "fused", "eager", ctx);
        free(res[0][i]);
        free(res[1][i]);
    }
}

static void
random_graphs(int count, bool unrestricted, uint64_t salt, int slice)
{
    uint64_t base = base_seed();
    static bool ops[IR_OP_COUNT];
    exact_ops(ops);
    int bounded = 0, outputs = 0;
    size_t compared = 0, unbounded = 0;
    for (int i = 0; i < count; i++) {
        uint64_t seed = base + salt + (uint64_t)i;
        ts_randgraph_opts o;
        if (unrestricted) {
            ts_randgraph_defaults(&o);
            o.plain_names = true;
        } else {
            ts_randgraph_jit_defaults(&o);
            o.kinds = 0;
            o.ops = ops;
        }
        /* small graphs most of the time; rows longer than W (the vector body) in the rest */
        switch (seed % 3) {
        case 0: break;
        case 1: o.max_dim = 19; o.max_elems = 2048; break;
        default: o.max_dim = 37; o.max_rank = 2; o.max_elems = 4096; break;
        }
        o.tame_values = (seed >> 2) & 1;
        kiln_graph *g = ts_random_graph(seed, &o);
        ck_assert_msg(g != NULL, "seed %" PRIu64 ": generator failed: %s", seed, kiln_errmsg());
        rule rules[MAXIO];
        ck_assert_int_le(g->noutputs, MAXIO);
        int bounded_here = output_rules(g, rules);
        bounded += bounded_here;
        outputs += g->noutputs;
        inputs in = {0};
        inputs_random(g, seed ^ 0x9e3779b97f4a7c15ull, o.tame_values, &in);
        ts_bounds b = {0};
        if (bounded_here) {
            ts_bufs tb = {.n = in.n};
            bool which[MAXIO];
            for (int k = 0; k < in.n; k++)
                tb.buf[k] = in.buf[k];
            for (int k = 0; k < g->noutputs; k++)
                which[k] = rules[k].bounded;
            ts_bounds_for(g, &tb, which, &b);
            for (int k = 0; k < g->noutputs; k++)
                rules[k].bound = b.bound[k];
            compared += b.finite;
            unbounded += b.infinite;
        }
        char ctx[160];
        snprintf(ctx, sizeof ctx, "random graph seed %" PRIu64 " (%s; base seed %" PRIu64
                 " = KILN_TEST_SEED or the default, + %" PRIu64 ")", seed,
                 unrestricted ? "all ops" : "exact ops", base, salt + (uint64_t)i);
        check_both(g, &in, rules, ctx);
        if (bounded_here)
            check_modes_agree(g, &in, rules, ctx);
        ts_bounds_free(&b);
        inputs_free(&in);
        kiln_graph_free(g);
    }
    if (bounded)
        fprintf(stderr, "check_jit: random (%s) slice %d: %d of %d outputs depend on compiled "
                "transcendental ops or float sums/means/products/matmuls: %zu of their elements "
                "compared against the propagated bound, %zu with no finite bound not "
                "compared\n", unrestricted ? "all ops" : "exact ops", slice, bounded,
                outputs, compared, unbounded);
}

#define RANDOM_EXACT 500
#define RANDOM_ALL 150
#define RANDOM_SLICES 5

START_TEST(test_random_exact)
{
    int per = RANDOM_EXACT / RANDOM_SLICES;
    random_graphs(ts_quick_n(per, 5), false, (uint64_t)_i * (uint64_t)per, _i);
}
END_TEST

START_TEST(test_random_all)
{
    int per = RANDOM_ALL / RANDOM_SLICES;
    random_graphs(ts_quick_n(per, 5), true, 1000000 + (uint64_t)_i * (uint64_t)per, _i);
}
END_TEST

/* ---- 5. 1 vs N threads ------------------------------------------------------------------- */

/* > 1M elements, rows of 1031 (chunk edges fall inside rows), a strided (permuted) load,
 * broadcasts, casts and integer division. */
static const char big_text[] =
    "graph big(x: f32[1024,1031], y: f32[1031], k: i32[1024,1]) ->\n"
    "    (a: f32[1024,1031], b: i32[1024,1031], c: f64[1031,1024], d: bool[1024,1031]) {\n"
    "  m = mul(x, y)\n  kf = cast(k, to=f32)\n  s = add(m, kf)\n"
    "  h = full(value=0.3) : f32[]\n  a = div(s, h)\n"
    "  b0 = cast(a, to=i32)\n  three = full(value=3) : i32[]\n  b = div(b0, three)\n"
    "  t = permute(x, perm=[1,0])\n  td = cast(t, to=f64)\n  c = mul(td, td)\n"
    "  d = lt(a, x)\n}\n";

#define BIG_SEED 0x7468726561647321ull

/* Child mode: compile big_text, run it once on the seeded inputs, write the pool size
 * and every output's bytes to `path`.  Returns the exit code. */
static int
threads_child(const char *path)
{
    kiln_graph *g = NULL;
    if (kiln_graph_parse(big_text, strlen(big_text), &g) != KILN_OK)
        return 2;
    inputs in = {0};
    ts_rng r;
    ts_rng_seed(&r, BIG_SEED);
    in.n = kiln_graph_num_inputs(g);
    for (int i = 0; i < in.n; i++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_input(g, i, &vi);
        in.buf[i] = malloc(vi.bytes);
        ts_random_elements(&r, vi.dtype, in.buf[i], vi.count, false);
    }
    kiln_program *p = NULL;
    if (kiln_program_compile(g, NULL, &p) != KILN_OK)
        return 3;
    int nout = kiln_graph_num_outputs(g);
    void *out[MAXIO];
    kiln_value_info oi[MAXIO];
    for (int i = 0; i < nout; i++) {
        oi[i] = (kiln_value_info)KILN_VALUE_INFO_INIT;
        kiln_graph_output(g, i, &oi[i]);
        out[i] = malloc(oi[i].bytes);
        memset(out[i], POISON_JIT, oi[i].bytes);
    }
    if (kiln_program_run(p, (const void *const *)in.buf, out) != KILN_OK)
        return 4;
    FILE *f = fopen(path, "wb");
    if (!f)
        return 5;
    kiln_stats st = KILN_STATS_INIT;
    kiln_jit_stats(&st);
    int32_t threads = st.threads;
    fwrite(&threads, sizeof threads, 1, f);
    for (int i = 0; i < nout; i++) {
        fwrite(out[i], 1, oi[i].bytes, f);
        free(out[i]);
    }
    int rc = fclose(f) == 0 ? 0 : 6;
    kiln_program_free(p);
    inputs_free(&in);
    kiln_graph_free(g);
    return rc;
}

static char *
read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    ck_assert(b && fread(b, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* Run this test binary as a child with KILN_NUM_THREADS=threads writing to path. */
static void
spawn_child(const char *threads, const char *path)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    ck_assert(n > 0);
    self[n] = '\0';
    size_t ne = 0;
    while (environ[ne])
        ne++;
    char **env = calloc(ne + 2, sizeof *env);
    ck_assert_ptr_nonnull(env);
    size_t k = 0;
    for (size_t i = 0; i < ne; i++)
        if (strncmp(environ[i], "KILN_NUM_THREADS=", 17) != 0 &&
            strncmp(environ[i], "KILN_DUMP", 9) != 0)
            env[k++] = environ[i];
    char var[64];
    snprintf(var, sizeof var, "KILN_NUM_THREADS=%s", threads);
    env[k++] = var;
    env[k] = NULL;
    char *argv[] = {self, (char *)"--threads-child", (char *)path, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, self, NULL, NULL, argv, env);
    free(env);
    ck_assert_msg(rc == 0, "posix_spawn: %s", strerror(rc));
    int status;
    ck_assert(waitpid(pid, &status, 0) == pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "child with KILN_NUM_THREADS=%s failed (status %d)", threads, status);
}

START_TEST(test_threads_bit_identical)
{
    char dir[] = "/tmp/kiln-jit-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char p1[64], p4[64];
    snprintf(p1, sizeof p1, "%s/t1", dir);
    snprintf(p4, sizeof p4, "%s/t4", dir);
    spawn_child("1", p1);
    spawn_child("4", p4);
    size_t n1, n4;
    char *b1 = read_file(p1, &n1), *b4 = read_file(p4, &n4);
    unlink(p1);
    unlink(p4);
    rmdir(dir);
    int32_t t1, t4;
    memcpy(&t1, b1, 4);
    memcpy(&t4, b4, 4);
    ck_assert_int_eq(t1, 1);
    ck_assert_int_eq(t4, 4);
    ck_assert_uint_eq(n1, n4);
    size_t first = n1;
    for (size_t i = 4; i < n1 && first == n1; i++)
        if (b1[i] != b4[i])
            first = i;
    ck_assert_msg(first == n1, "1 and 4 threads differ at byte %zu of %zu", first, n1);

    /* and the result is the reference's */
    kiln_graph *g = ts_parse(big_text);
    inputs in = {0};
    ts_rng r;
    ts_rng_seed(&r, BIG_SEED);
    in.n = kiln_graph_num_inputs(g);
    for (int i = 0; i < in.n; i++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_input(g, i, &vi);
        in.buf[i] = malloc(vi.bytes);
        ts_random_elements(&r, vi.dtype, in.buf[i], vi.count, false);
    }
    size_t off = 4;
    void *want[MAXIO];
    kiln_value_info oi[MAXIO];
    int nout = kiln_graph_num_outputs(g);
    for (int i = 0; i < nout; i++) {
        oi[i] = (kiln_value_info)KILN_VALUE_INFO_INIT;
        kiln_graph_output(g, i, &oi[i]);
        want[i] = malloc(oi[i].bytes);
    }
    ck_assert_int_eq(kiln_graph_interpret(g, (const void *const *)in.buf, want), KILN_OK);
    for (int i = 0; i < nout; i++) {
        ck_assert_uint_le(off + oi[i].bytes, n1);
        size_t bad = 0;
        for (size_t e = 0; e < oi[i].count; e++)
            bad += !elem_match(oi[i].dtype, b1 + off, want[i], e, (rule){.nan = NAN_ANY});
        ck_assert_msg(bad == 0, "output %s: %zu elements differ from the reference", oi[i].name,
                      bad);
        off += oi[i].bytes;
        free(want[i]);
    }
    ck_assert_uint_eq(off, n1);
    free(b1);
    free(b4);
    inputs_free(&in);
    kiln_graph_free(g);
}
END_TEST

/* ---- 6. the cache ------------------------------------------------------------------------ */

static const char cache_fmt[] =
    "graph cached(x: f32[%d], y: f32[%d]) -> (out: f32[%d]) {\n"
    "  a = mul(x, y)\n  k = full(value=0.8134765625) : f32[]\n  b = add(a, k)\n"
    "  out = max(b, x)\n}\n";

static kiln_status
cached_capture(kiln_scope s, void *user)
{
    (void)s;
    kiln_device *dev = user;
    int64_t n = 37;
    kiln_tensor x = kiln_input(dev, "x", KILN_DTYPE_F32, 1, &n);
    kiln_tensor y = kiln_input(dev, "y", KILN_DTYPE_F32, 1, &n);
    kiln_tensor a = kiln_mul(x, y);
    kiln_tensor b = kiln_add(a, kiln_scalar(dev, KILN_DTYPE_F32, 0.8134765625));
    kiln_tensor out = kiln_max(b, x);
    return kiln_scope_output(s, "out", out);
}

START_TEST(test_cache_hit_no_llvm)
{
    kiln_stats s0 = KILN_STATS_INIT, s1 = KILN_STATS_INIT, s2 = KILN_STATS_INIT;
    kiln_stats s3 = KILN_STATS_INIT, s4 = KILN_STATS_INIT;
    kiln_program *p;
    /* first compile: LLVM work (the constant is unique to this test) */
    kiln_graph *g = parsef(cache_fmt, 37, 37, 37);
    kiln_jit_stats(&s0);
    ck_assert_int_eq(kiln_program_compile(g, NULL, &p), KILN_OK);
    kiln_jit_stats(&s1);
    ck_assert_uint_gt(s1.kernel_compiles, s0.kernel_compiles);
    /* the compile's LLVM time, split into its three parts */
    double opt = s1.optimise_ms - s0.optimise_ms, gen = s1.codegen_ms - s0.codegen_ms,
           link = s1.link_ms - s0.link_ms, all = s1.compile_ms - s0.compile_ms;
    ck_assert(opt > 0 && gen > 0 && link > 0);
    ck_assert_double_eq_tol(opt + gen + link, all, 1e-9 * (1 + s1.compile_ms));
    kiln_program_free(p);
    kiln_graph_free(g);

    /* an equal graph, parsed afresh: no LLVM work */
    g = parsef(cache_fmt, 37, 37, 37);
    ck_assert_int_eq(kiln_program_compile(g, NULL, &p), KILN_OK);
    kiln_jit_stats(&s2);
    ck_assert_uint_eq(s2.kernel_compiles, s1.kernel_compiles);
    ck_assert_uint_gt(s2.plan_hits, s1.plan_hits);
    inputs in = {0};
    inputs_random(g, 77, false, &in);
    rule r = {.nan = NAN_ANY};
    check_both(g, &in, &r, "cache hit");
    inputs_free(&in);
    kiln_program_free(p);
    kiln_graph_free(g);

    /* the same graph captured through a scope: no LLVM work either */
    kiln_jit_stats(&s2);
    kiln_device *dev = kiln_device_new();
    ck_assert_ptr_nonnull(dev);
    kiln_scope sc = kiln_scope_begin(dev);
    ck_assert(!kiln_scope_is_null(sc));
    ck_assert_int_eq(cached_capture(sc, dev), KILN_OK);
    ck_assert_int_eq(kiln_scope_end(sc, 0, NULL, NULL, &p), KILN_OK);
    kiln_jit_stats(&s3);
    ck_assert_uint_eq(s3.kernel_compiles, s2.kernel_compiles);
    ck_assert_uint_gt(s3.plan_hits, s2.plan_hits); /* the captured graph equals the parsed one */
    /* and it computes the right thing */
    g = parsef(cache_fmt, 37, 37, 37);
    inputs_random(g, 78, false, &in);
    float got[37], want[37];
    void *o1[1] = {got}, *o2[1] = {want};
    ck_assert_int_eq(kiln_program_run(p, (const void *const *)in.buf, o1), KILN_OK);
    ck_assert_int_eq(kiln_graph_interpret(g, (const void *const *)in.buf, o2), KILN_OK);
    for (size_t e = 0; e < 37; e++)
        ck_assert(elem_match(KILN_DTYPE_F32, got, want, e, r));
    inputs_free(&in);
    kiln_graph_free(g);
    kiln_program_free(p);
    ck_assert_int_eq(kiln_device_free(dev), KILN_OK);

    /* other sizes, same ranks and broadcast pattern: the kernels are reused */
    kiln_jit_stats(&s3);
    g = parsef(cache_fmt, 1001, 1001, 1001);
    ck_assert_int_eq(kiln_program_compile(g, NULL, &p), KILN_OK);
    kiln_jit_stats(&s4);
    ck_assert_uint_eq(s4.kernel_compiles, s3.kernel_compiles);
    ck_assert_uint_gt(s4.kernel_hits, s3.kernel_hits);
    ck_assert_uint_gt(s4.plan_misses, s3.plan_misses);
    inputs_random(g, 79, false, &in);
    check_both(g, &in, &r, "kernel reused at another size");
    inputs_free(&in);
    kiln_program_free(p);
    kiln_graph_free(g);
}
END_TEST

/* ---- scalar parameters (issue 26, defect 9) ---------------------------------------------
 * A `full` value, a pad's fill and an arange's start and step are run-time arguments of the
 * kernel, not constants in its code: graphs that differ only in them share every kernel.
 * For each dtype, a graph reading one scalar in an elementwise kernel, a reduction's
 * producer, a packed matmul's epilogue and packing (a scaled operand), a skinny matmul's
 * epilogue, a pad and an arange, compiled for a list of special values: the first compiles,
 * the others compile nothing, and every value's results match the interpreter (the ops are
 * exact: the matmuls have K = 1). */
static const char scalar_text[] =
    "graph p(x: T[3,37], a: T[20,1], b: T[1,1], w: T[1,5]) -> (e: T[3,37], r: T[3,1], "
    "m: T[20,5], t: T[20,5], s: T[1,5], q: T[3,41], g: T[9]) {\n"
    "  c = full(value=V) : T[]\n"
    "  e0 = mul(x, c)\n  e = add(e0, c)\n"
    "  d = sub(x, c)\n  r = reduce_max(d, axes=[1], keepdim=true)\n"
    "  m0 = matmul(a, w)\n  m = add(m0, c)\n"
    "  a2 = mul(a, c)\n  t = matmul(a2, w)\n"
    "  s0 = matmul(b, w)\n  s = mul(s0, c)\n"
    "  q = pad(x, low=[0,3], high=[0,1], value=V)\n"
    "  g = arange(start=V, delta=V) : T[9]\n"
    "}\n";

/* scalar_text with dtype t for every T and value v for every V. */
static kiln_graph *
scalar_graph(const char *t, const char *v)
{
    char text[2048];
    size_t n = 0;
    for (const char *c = scalar_text; *c && n + 64 < sizeof text; c++) {
        const char *r = *c == 'T' ? t : *c == 'V' ? v : NULL;
        if (r) {
            memcpy(text + n, r, strlen(r));
            n += strlen(r);
        } else {
            text[n++] = *c;
        }
    }
    text[n] = 0;
    return parsef("%s", text);
}

START_TEST(test_scalar_parameters)
{
    static const struct {
        const char *dtype;
        const char *values[8];
    } cases[] = {
        {"f32", {"0x1.8p+1", "-0", "0x1p-149", "inf", "-inf", "nan:0x7fc00123", "0x1.fffffep+127", "-0x1.99999ap-4"}},
        {"f64", {"0x1.8p+1", "-0", "0x1p-1074", "-inf", "nan:0x7ff8000000000123", "-0x1.999999999999ap-4"}},
        {"i32", {"7", "-2147483648", "-1", "0", "2147483647"}},
        {"i64", {"5", "-9223372036854775808", "-1", "9223372036854775807"}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        bool fl = cases[c].dtype[0] == 'f';
        rule rules[7];
        for (int i = 0; i < 7; i++)
            rules[i] = (rule){.nan = fl ? NAN_ANY : NAN_EXACT};
        kiln_stats s0 = KILN_STATS_INIT, s1 = KILN_STATS_INIT;
        for (int v = 0; v < 8 && cases[c].values[v]; v++) {
            kiln_graph *g = scalar_graph(cases[c].dtype, cases[c].values[v]);
            inputs in = {0};
            inputs_random(g, 900 + (uint64_t)v, false, &in);
            char ctx[64];
            snprintf(ctx, sizeof ctx, "%s value %s", cases[c].dtype, cases[c].values[v]);
            kiln_jit_stats(&s0);
            check_both(g, &in, rules, ctx);
            kiln_jit_stats(&s1);
            if (v == 0)
                ck_assert_uint_gt(s1.kernel_compiles, s0.kernel_compiles);
            else
                ck_assert_msg(s1.kernel_compiles == s0.kernel_compiles, "%s: %llu kernels compiled",
                              ctx, (unsigned long long)(s1.kernel_compiles - s0.kernel_compiles));
            inputs_free(&in);
            kiln_graph_free(g);
        }
    }
    /* bool: a `where` on a scalar condition */
    for (int v = 0; v < 2; v++) {
        kiln_graph *g = parsef("graph b(x: f32[50], y: f32[50]) -> (o: f32[50]) {\n"
                               "  c = full(value=%s) : bool[]\n  o = where(c, x, y)\n}\n",
                               v ? "false" : "true");
        inputs in = {0};
        inputs_random(g, 950, false, &in);
        rule r = {.nan = NAN_EXACT};
        kiln_stats s0 = KILN_STATS_INIT, s1 = KILN_STATS_INIT;
        kiln_jit_stats(&s0);
        check_both(g, &in, &r, v ? "bool false" : "bool true");
        kiln_jit_stats(&s1);
        if (v)
            ck_assert_uint_eq(s1.kernel_compiles, s0.kernel_compiles);
        inputs_free(&in);
        kiln_graph_free(g);
    }
}
END_TEST

/* More scalars in one kernel than it takes as parameters (JIT_MAX_PARAMS): the rest are
 * constants in its code, and every value still lands where it belongs. */
START_TEST(test_scalar_parameters_overflow)
{
    enum { N = JIT_MAX_PARAMS + 8 };
    for (int round = 0; round < 2; round++) {
        char text[8192];
        int n = snprintf(text, sizeof text, "graph o(x: f32[100]) -> (y: f32[100]) {\n  y0 = neg(x)\n");
        for (int i = 1; i <= N; i++)
            n += snprintf(text + n, sizeof text - (size_t)n,
                          "  c%d = full(value=%d.25) : f32[]\n  y%d = add(y%d, c%d)\n", i,
                          i == 1 ? 1000 * (round + 1) : i, i, i - 1, i);
        snprintf(text + n, sizeof text - (size_t)n, "  y = neg(y%d)\n}\n", N);
        kiln_graph *g = parsef("%s", text);
        inputs in = {0};
        inputs_random(g, 960, true, &in);
        rule r = {.nan = NAN_ANY};
        kiln_stats s0 = KILN_STATS_INIT, s1 = KILN_STATS_INIT;
        kiln_jit_stats(&s0);
        check_both(g, &in, &r, "more scalars than parameters");
        kiln_jit_stats(&s1);
        if (round) /* the first value is a parameter: the fused kernel is shared */
            ck_assert_uint_eq(s1.kernel_compiles, s0.kernel_compiles);
        inputs_free(&in);
        kiln_graph_free(g);
    }
}
END_TEST

/* Signalling NaNs through max, min, clamp and relu whose other operand LLVM knows is never
 * a NaN (a converted integer, a constant): LLVM 19's x86 lowering of llvm.maximum then
 * tested only the maybe-NaN operand for a quiet NaN or +0, so a signalling NaN lost to the
 * number (found by fuzz_graphs: max(cast(argmin(x)), c) gave 2 for c = sNaN).  NaN wins,
 * whichever kind (NaN-ness compared: the payload may be quieted). */
START_TEST(test_signalling_nan_extremes)
{
    for (int t = 0; t < 2; t++) {
        const char *ty = t ? "f64" : "f32";
        const char *snan = t ? "nan:0x7ff7ffffffffffff" : "nan:0x7fa00001";
        kiln_graph *g = parsef(
            "graph s(i: i64[5], y: %s[5]) -> (a: %s[5], b: %s[5], c: %s[5], d: %s[5], e: %s[5]) {\n"
            "  f = cast(i, to=%s) : %s[5]\n"
            "  k = constant(data=[3.25, %s, -1.5, nan, %s]) : %s[5]\n"
            "  a = max(f, k)\n  b = min(f, k)\n"
            "  lo = full(value=-1) : %s[]\n  hi = full(value=1) : %s[]\n"
            "  c = clamp(k, lo, hi)\n  d = relu(k)\n  e = max(k, y)\n}\n",
            ty, ty, ty, ty, ty, ty, ty, ty, snan, snan, ty, ty, ty);
        inputs in = {0};
        inputs_random(g, 970 + (uint64_t)t, true, &in);
        rule r[5];
        for (int k = 0; k < 5; k++)
            r[k] = (rule){.nan = NAN_ANY};
        check_both(g, &in, r, ty);
        inputs_free(&in);
        kiln_graph_free(g);
        /* the finding: row-wise values of a reduction kernel (one scalar per row) */
        g = parsef("graph mn(x: %s[2,5,3]) -> (o: %s[2,5], p: %s[2,5], q: %s[2,5]) {\n"
                   "  a = argmin(x, axes=[2], keepdim=false) : i64[2,5]\n"
                   "  f = cast(a, to=%s) : %s[2,5]\n"
                   "  c = constant(data=[3.25, -3, %s, nan, -1.5]) : %s[5]\n"
                   "  o = max(f, c)\n  p = min(c, f)\n  r = relu(c)\n  q = max(r, f)\n}\n",
                   ty, ty, ty, ty, ty, ty, snan, ty);
        inputs_random(g, 980 + (uint64_t)t, true, &in);
        check_both(g, &in, r, ty);
        inputs_free(&in);
        kiln_graph_free(g);
    }
}
END_TEST

/* ---- 7. compile/free cycles do not grow memory ------------------------------------------- */

static size_t
rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(f);
    unsigned long size, resident;
    ck_assert_int_eq(fscanf(f, "%lu %lu", &size, &resident), 2);
    fclose(f);
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* Growth allowed between cycle 100 and cycle 1000.  The caches are emptied whenever the
 * constant changes (jit_plan_cache_trim, jit_cache_trim), so every kernel compiled is also
 * destroyed again (its code freed through its resource tracker) and the process should
 * return to the same state every 10 cycles; what remains is allocator noise.  One leaked
 * LLVM context or module per compile (hundreds of KiB), or 10 KiB per cycle, exceeds it.
 * (Without trimming, the caches legitimately keep up to 256 programs of ~60 KiB and 1024
 * kernels of ~10 KiB: measured on the development machine.) */
#define RSS_GROWTH_BOUND ((size_t)4 << 20)

START_TEST(test_compile_free_cycles)
{
    size_t at100 = 0;
    float x[64], y[64];
    kiln_stats s0 = KILN_STATS_INIT, s1 = KILN_STATS_INIT;
    for (int i = 0; i < 64; i++) {
        x[i] = (float)i;
        y[i] = 0.0f;
    }
    kiln_jit_stats(&s0);
    for (int i = 1; i <= 1000; i++) {
        /* a new constant every 10th cycle: a kernel compiled by LLVM; the others hit */
        kiln_graph *g = parsef("graph cyc(x: f32[64]) -> (y: f32[64]) {\n"
                               "  k = full(value=%d.5) : f32[]\n  a = mul(x, k)\n"
                               "  y = sub(a, x)\n}\n", 1000 + i / 10);
        kiln_program *p;
        ck_assert_int_eq(kiln_program_compile(g, NULL, &p), KILN_OK);
        const void *ins[1] = {x};
        void *outs[1] = {y};
        ck_assert_int_eq(kiln_program_run(p, ins, outs), KILN_OK);
        float k = (float)(1000 + i / 10) + 0.5f;
        ck_assert(y[5] == 5.0f * k - 5.0f);
        kiln_program_free(p);
        kiln_graph_free(g);
        if ((i + 1) % 10 == 0) { /* the next cycle has a new constant */
            jit_plan_cache_trim();
            jit_cache_trim();
        }
        if (i == 100)
            at100 = rss_bytes();
    }
    size_t at1000 = rss_bytes();
    kiln_jit_stats(&s1);
    /* 101 constants, each compiled once (the trims make sure nothing is left to hit) */
    ck_assert_uint_eq(s1.kernel_compiles - s0.kernel_compiles, 101);
    size_t growth = at1000 > at100 ? at1000 - at100 : 0;
    fprintf(stderr, "check_jit: RSS after 100 cycles %zu KiB, after 1000 %zu KiB\n",
            at100 >> 10, at1000 >> 10);
    if (!UNDER_ASAN) /* ASan's quarantine holds freed memory on purpose */
        ck_assert_msg(growth < RSS_GROWTH_BOUND, "RSS grew by %zu KiB over 900 compile/free cycles",
                      growth >> 10);
}
END_TEST

/* ---- 8. ops the JIT does not compile, inside programs -------------------------------------- */

static char *
dump_of(kiln_program *p, kiln_view what)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_int_eq(kiln_program_dump(p, what, f), KILN_OK);
    fclose(f);
    return text;
}

START_TEST(test_reference_steps)
{
    int W = lanes();
    char text[4096];
    const char *const graphs[] = {
        /* reduce_sum between elementwise ops */
        "graph rs(x: f32[6,%d]) -> (o: f32[6,%d]) {\n"
        "  a = mul(x, x)\n  s = reduce_sum(a, axes=[1], keepdim=true)\n"
        "  r = div(a, s)\n  o = add(r, x)\n}\n",
        /* matmul */
        "graph mm(x: f32[6,%d], w: f32[%d,5]) -> (o: f32[6,5]) {\n"
        "  a = relu(x)\n  m = matmul(a, w)\n  h = full(value=0.5) : f32[]\n"
        "  o = mul(m, h)\n}\n",
        /* gather */
        "graph ga(x: f32[6,%d], i: i64[4]) -> (o: f32[4,%d]) {\n"
        "  a = neg(x)\n  g = gather(a, i, axis=0)\n  o = mul(g, g)\n}\n",
        /* concat */
        "graph co(x: f32[6,%d], y: f32[6,%d]) -> (o: f32[6,%d]) {\n"
        "  a = abs(x)\n  c = concat(a, y, axis=1)\n  o = sub(c, c)\n}\n",
        /* pad */
        "graph pa(x: f32[6,%d]) -> (o: f32[7,%d]) {\n"
        "  a = sqrt(x)\n  p = pad(a, low=[1,0], high=[0,2], value=-1)\n"
        "  z = full(value=0) : f32[]\n  o = max(p, z)\n}\n",
    };
    static const char *const refop[] = {"reduce_sum", "matmul", "gather", "concat", "pad"};
    for (size_t i = 0; i < NELEM(graphs); i++) {
        switch (i) {
        case 0: snprintf(text, sizeof text, graphs[i], W + 1, W + 1); break;
        case 1: snprintf(text, sizeof text, graphs[i], W + 1, W + 1); break;
        case 2: snprintf(text, sizeof text, graphs[i], W + 1, W + 1); break;
        case 3: snprintf(text, sizeof text, graphs[i], W, W + 1, 2 * W + 1); break;
        default: snprintf(text, sizeof text, graphs[i], W + 1, W + 3); break;
        }
        kiln_graph *g = ts_parse(text);
        for (int tame = 0; tame < 2; tame++) {
            inputs in = {0};
            inputs_random(g, 0x6000 + i * 2 + (size_t)tame, tame, &in);
            if (i == 2) { /* indices: in range, negative, past the end */
                int64_t idx[4] = {5, 0, -1, 6};
                memcpy(in.buf[1], idx, sizeof idx);
            }
            /* matmul's values: check_contract, against its error bound */
            rule r = {.nan = NAN_ANY, .skip = i == 1};
            check_both(g, &in, &r, refop[i]);
            inputs_free(&in);
        }
        for (int m = 0; m < 2; m++) {
            kiln_options o = KILN_OPTIONS_INIT;
            o.mode = m ? KILN_MODE_EAGER : KILN_MODE_FUSED;
            kiln_program *p;
            ck_assert_int_eq(kiln_program_compile(g, &o, &p), KILN_OK);
            char *plan = dump_of(p, KILN_VIEW_PLAN);
            ck_assert_msg(!strstr(plan, "reference") && strstr(plan, refop[i]),
                          "%s plan has a reference step or lacks the op:\n%s", refop[i], plan);
            ck_assert_msg(strstr(plan, "kernel"), "%s plan has no kernel:\n%s", refop[i], plan);
            free(plan);
            kiln_program_free(p);
        }
        kiln_graph_free(g);
    }
}
END_TEST

START_TEST(test_dumps_vectorized)
{
    int W = lanes();
    kiln_graph *g = parsef(
        "graph vec(x: f32[4096], y: f32[4096]) -> (o: f32[4096], s: f32[1]) {\n"
        "  a = mul(x, y)\n  b = add(a, x)\n  s = reduce_sum(b, axes=[0], keepdim=true)\n"
        "  o = div(b, s)\n}\n");
    kiln_options o = KILN_OPTIONS_INIT;
    o.flags = KILN_KEEP_DUMPS;
    kiln_program *p;
    ck_assert_int_eq(kiln_program_compile(g, &o, &p), KILN_OK);
    char *plan = dump_of(p, KILN_VIEW_PLAN), *opt = dump_of(p, KILN_VIEW_OPT), *as = dump_of(p, KILN_VIEW_ASM);
    char *llvm = dump_of(p, KILN_VIEW_LLVM), *gr = dump_of(p, KILN_VIEW_GRAPH);
    char vt[32];
    snprintf(vt, sizeof vt, "<%d x float>", W);
    const char *reg = W == 16 ? "zmm" : W == 8 ? "ymm" : "xmm";
    ck_assert_msg(!strstr(plan, "reference") && strstr(plan, "reduction kernel"), "plan:\n%s", plan);
    ck_assert_msg(strstr(opt, vt) != NULL, "opt dump lacks %s:\n%.2000s", vt, opt);
    ck_assert_msg(strstr(llvm, "define") != NULL, "llvm dump:\n%.2000s", llvm);
    ck_assert_msg(strstr(as, reg) != NULL, "asm dump lacks %s:\n%.2000s", reg, as);
    ck_assert_msg(strstr(gr, "graph vec") != NULL, "graph dump:\n%s", gr);
    free(plan);
    free(opt);
    free(as);
    free(llvm);
    free(gr);
    /* and with dumps kept the program still computes the right thing */
    inputs in = {0};
    inputs_random(g, 0x7000, true, &in);
    float *got = malloc(4096 * 4), *want = malloc(4096 * 4), s1, s2;
    void *o1[2] = {got, &s1}, *o2[2] = {want, &s2};
    ck_assert_int_eq(kiln_program_run(p, (const void *const *)in.buf, o1), KILN_OK);
    ck_assert_int_eq(kiln_graph_interpret(g, (const void *const *)in.buf, o2), KILN_OK);
    ck_assert(memcmp(got, want, 4096 * 4) == 0 && memcmp(&s1, &s2, 4) == 0);
    free(got);
    free(want);
    inputs_free(&in);
    kiln_program_free(p);
    kiln_graph_free(g);
}
END_TEST

/* ---- streaming stores ------------------------------------------------------------------- */

/* Run p on `in` with output i placed off + 8*i bytes past a 64-byte boundary (so the
 * outputs are misaligned differently from one another), GUARD poisoned bytes on both
 * sides; returns the outputs, each in a malloc'd block of its own size. */
static void
run_placed(kiln_program *p, const kiln_graph *g, const inputs *in, size_t off, void **res,
           const char *ctx)
{
    int nout = kiln_graph_num_outputs(g);
    void *blk[MAXIO], *out[MAXIO];
    kiln_value_info vi[MAXIO];
    for (int i = 0; i < nout; i++) {
        vi[i] = (kiln_value_info)KILN_VALUE_INFO_INIT;
        ck_assert_int_eq(kiln_graph_output(g, i, &vi[i]), KILN_OK);
        size_t pre = GUARD + off + 8 * (size_t)i;
        blk[i] = aligned_alloc(64, (pre + vi[i].bytes + GUARD + 63) & ~(size_t)63);
        ck_assert_ptr_nonnull(blk[i]);
        memset(blk[i], POISON_JIT, pre + vi[i].bytes + GUARD);
        out[i] = (char *)blk[i] + pre;
    }
    ck_assert_msg(kiln_program_run(p, (const void *const *)in->buf, out) == KILN_OK, "%s: %s", ctx,
                  kiln_errmsg());
    for (int i = 0; i < nout; i++) {
        const unsigned char *lo = (const unsigned char *)out[i] - GUARD,
                            *hi = (const unsigned char *)out[i] + vi[i].bytes;
        for (int k = 0; k < GUARD; k++)
            ck_assert_msg(lo[k] == POISON_JIT && hi[k] == POISON_JIT,
                          "%s: output %d written outside its buffer (offset %zu)", ctx, i, off);
        res[i] = malloc(vi[i].bytes + 1);
        ck_assert_ptr_nonnull(res[i]);
        memcpy(res[i], out[i], vi[i].bytes);
        free(blk[i]);
    }
}

/* Kernels with non-temporal stores (KILN_STORES_STREAM) give the same bits as with ordinary ones
 * (KILN_STORES_CACHED), and both the interpreter's: 1-D and 2-D spaces, sizes around W and
 * large enough to split over threads, outputs of four element sizes at several
 * misalignments, fused and eager; and reduction kernels over rows (the normalised row of
 * a max, whose pass stores the row's head under a mask first, and softmax, whose sums
 * differ from the interpreter's order: compared between the two only).  The plan says
 * which stores stream, and on x86 the assembly has non-temporal vector stores only when
 * asked for. */
START_TEST(test_streaming_stores)
{
    int W = lanes();
    const int64_t ns[] = {1, W - 1, W + 1, 1009, 300007};
    char text[4096];
    for (size_t gi = 0; gi < NELEM(ns) + 6; gi++) {
        bool exact = true; /* else: only streaming against ordinary stores */
        if (gi < NELEM(ns)) {
            long long n = (long long)ns[gi];
            snprintf(text, sizeof text,
                     "graph st(x: f32[%lld], y: f32[%lld], z: f32[%lld], k: i32[%lld], d: f64[%lld]) ->\n"
                     "    (out: f32[%lld], kk: i64[%lld], dd: f64[%lld], m: bool[%lld], o2: f32[%lld]) {\n"
                     "  a = mul(x, y)\n  b = add(a, z)\n  zero = full(value=0) : f32[]\n"
                     "  r = max(b, zero)\n  half = full(value=0.5) : f32[]\n  h = mul(r, half)\n"
                     "  out = add(h, x)\n  o2 = sub(h, y)\n  kk = cast(k, to=i64)\n"
                     "  xd = cast(out, to=f64)\n  dd = sub(d, xd)\n  m = lt(dd, d)\n}\n",
                     n, n, n, n, n, n, n, n, n, n);
        } else if (gi < NELEM(ns) + 2) {
            long long c = gi == NELEM(ns) ? 2 * W + 3 : 1024;
            snprintf(text, sizeof text,
                     "graph st2(x: f32[37,%lld], row: f32[%lld], col: f32[37,1]) ->\n"
                     "    (out: f32[37,%lld], b: bool[37,%lld]) {\n"
                     "  a = mul(x, row)\n  s = sub(a, col)\n  out = min(s, x)\n  b = ge(out, row)\n}\n",
                     c, c, c, c);
        } else if (gi < NELEM(ns) + 4) {
            long long c = gi == NELEM(ns) + 2 ? 2 * W + 3 : 1024;
            snprintf(text, sizeof text,
                     "graph rmax(x: f32[37,%lld], g: f32[%lld], k: f64[37,%lld]) ->\n"
                     "    (o: f32[37,%lld], m: f32[37,1], q: f64[37,%lld]) {\n"
                     "  m = reduce_max(x, axes=[1], keepdim=true)\n  d = sub(x, m)\n  o = mul(d, g)\n"
                     "  mk = reduce_min(k, axes=[1], keepdim=true)\n  q = sub(k, mk)\n}\n",
                     c, c, c, c, c);
        } else {
            long long c = gi == NELEM(ns) + 4 ? 2 * W + 3 : 1024;
            exact = false;
            snprintf(text, sizeof text,
                     "graph rsm(x: f32[37,%lld]) -> (y: f32[37,%lld]) {\n"
                     "  m = reduce_max(x, axes=[1], keepdim=true)\n  d = sub(x, m)\n  e = exp(d)\n"
                     "  s = reduce_sum(e, axes=[1], keepdim=true)\n  y = div(e, s)\n}\n",
                     c, c);
        }
        kiln_graph *g = ts_parse(text);
        int nout = kiln_graph_num_outputs(g);
        inputs in = {0};
        inputs_random(g, 0x5700 + gi, true, &in);
        void *want[MAXIO];
        kiln_value_info vi[MAXIO];
        for (int i = 0; i < nout; i++) {
            vi[i] = (kiln_value_info)KILN_VALUE_INFO_INIT;
            ck_assert_int_eq(kiln_graph_output(g, i, &vi[i]), KILN_OK);
            want[i] = malloc(vi[i].bytes + 1);
        }
        ck_assert_int_eq(kiln_graph_interpret(g, (const void *const *)in.buf, want), KILN_OK);
        for (int m = 0; m < 2; m++) {
            kiln_program *ps, *pn;
            kiln_options os = KILN_OPTIONS_INIT, on = KILN_OPTIONS_INIT;
            os.mode = on.mode = m ? KILN_MODE_EAGER : KILN_MODE_FUSED;
            os.stores = KILN_STORES_STREAM;
            on.stores = KILN_STORES_CACHED;
            ck_assert_int_eq(kiln_program_compile(g, &os, &ps), KILN_OK);
            ck_assert_int_eq(kiln_program_compile(g, &on, &pn), KILN_OK);
            char *plan_s = dump_of(ps, KILN_VIEW_PLAN), *plan_n = dump_of(pn, KILN_VIEW_PLAN);
            ck_assert_msg(strstr(plan_s, "streaming") != NULL, "KILN_STORES_STREAM plan:\n%s", plan_s);
            ck_assert_msg(strstr(plan_n, "streaming") == NULL, "KILN_STORES_CACHED plan:\n%s", plan_n);
            free(plan_s);
            free(plan_n);
            for (size_t off = 0; off < 64; off += 24) {
                char ctx[128];
                snprintf(ctx, sizeof ctx, "%s %s, outputs at +%zu bytes", g->name, m ? "eager" : "fused", off);
                void *got_s[MAXIO], *got_n[MAXIO];
                run_placed(ps, g, &in, off, got_s, ctx);
                run_placed(pn, g, &in, off, got_n, ctx);
                for (int i = 0; i < nout; i++) {
                    ck_assert_msg(memcmp(got_s[i], got_n[i], vi[i].bytes) == 0,
                                  "%s: output '%s': streaming and ordinary stores differ", ctx, vi[i].name);
                    /* one assertion, not one per element: each costs Check a write */
                    for (size_t e = 0; exact && e < vi[i].count; e++)
                        if (!elem_match(vi[i].dtype, got_n[i], want[i], e, (rule){.nan = NAN_ANY}))
                            ck_abort_msg("%s: output '%s' element %zu differs from the interpreter",
                                         ctx, vi[i].name, e);
                    free(got_s[i]);
                    free(got_n[i]);
                }
            }
            kiln_program_free(ps);
            kiln_program_free(pn);
        }
        for (int i = 0; i < nout; i++)
            free(want[i]);
        inputs_free(&in);
        kiln_graph_free(g);
    }
    /* the assembly: vmovntps (AVX) only where streaming was asked for */
    if (!strncmp(jit_host_info()->triple, "x86_64", 6) && W >= 8) {
        kiln_graph *g = parsef("graph nt(x: f32[4096], y: f32[4096]) -> (o: f32[4096]) {\n"
                               "  o = mul(x, y)\n}\n");
        kiln_graph *gr = parsef("graph ntr(x: f32[64,1024]) -> (o: f32[64,1024]) {\n"
                                "  m = reduce_max(x, axes=[1], keepdim=true)\n  o = sub(x, m)\n}\n");
        for (int k = 0; k < 4; k++) {
            if (k == 2) {
                kiln_graph_free(g);
                g = gr; /* a rows reduction kernel */
            }
            kiln_options o = KILN_OPTIONS_INIT;
            o.flags = KILN_KEEP_DUMPS;
            o.stores = k % 2 ? KILN_STORES_CACHED : KILN_STORES_STREAM;
            kiln_program *p;
            ck_assert_int_eq(kiln_program_compile(g, &o, &p), KILN_OK);
            char *as = dump_of(p, KILN_VIEW_ASM);
            ck_assert_msg((strstr(as, "vmovntps") != NULL) == !(k % 2) &&
                              (strstr(as, "sfence") != NULL) == !(k % 2),
                          "%s %s: asm:\n%.3000s", k % 2 ? "KILN_STORES_CACHED" : "KILN_STORES_STREAM", g->name, as);
            free(as);
            kiln_program_free(p);
        }
        kiln_graph_free(g);
    }
    /* a value outside the enum: an error, not a guess */
    kiln_graph *g = parsef("graph e(x: f32[4]) -> (o: f32[4]) {\n  o = neg(x)\n}\n");
    kiln_options o = KILN_OPTIONS_INIT;
    o.stores = KILN_STORES_COUNT;
    kiln_program *p = NULL;
    ck_assert_int_eq(kiln_program_compile(g, &o, &p), KILN_ERR_INVALID_ARG);
    ck_assert_ptr_null(p);
    ts_assert_error(KILN_ERR_INVALID_ARG, "kiln_program_compile: invalid argument: stores 3");
    kiln_graph_free(g);
}
END_TEST

/* ---- compact code ----------------------------------------------------------------------- */

/* Does program p's plan say its kernels are compact? */
static bool
plan_compact(const kiln_graph *g, kiln_mode mode, kiln_code code)
{
    kiln_options o = KILN_OPTIONS_INIT;
    o.mode = mode;
    o.code = code;
    kiln_program *p;
    ck_assert_int_eq(kiln_program_compile(g, &o, &p), KILN_OK);
    char *plan = dump_of(p, KILN_VIEW_PLAN);
    bool c = strstr(plan, "\ncompact code: ") != NULL;
    free(plan);
    kiln_program_free(p);
    return c;
}

/* Compact code (KILN_CODE_COMPACT) gives the same bits as full code (KILN_CODE_FULL), NaN
 * payloads aside, on random graphs of every op (reductions and matmuls stay full code in
 * a compact plan), fused and eager: the same instructions, out of line and under a mask.
 * The plan decides by size: a wide graph of more than 1024 distinct instructions is
 * compact by default, fused; its eager plan (a few distinct one-op kernels) and a small
 * graph are not.  Out-of-line vector math is a call in the assembly.  A code outside
 * the enum: an error. */
START_TEST(test_compact_code)
{
    uint64_t base = base_seed();
    for (int i = 0; i < ts_quick_n(60, 5); i++) {
        uint64_t seed = base + 3000000 + (uint64_t)i;
        ts_randgraph_opts o;
        ts_randgraph_defaults(&o);
        o.plain_names = true;
        o.reduce_consumer_pct = 30;
        if (i % 2) {
            o.max_dim = 37;
            o.max_rank = 2;
            o.max_elems = 4096;
        }
        kiln_graph *g = ts_random_graph(seed, &o);
        ck_assert_msg(g != NULL, "seed %" PRIu64 ": generator failed: %s", seed, kiln_errmsg());
        inputs in = {0};
        inputs_random(g, seed ^ 0x636f6d70ull, (seed >> 3) & 1, &in);
        int nout = kiln_graph_num_outputs(g);
        ck_assert_int_le(nout, MAXIO);
        for (int m = 0; m < 2; m++) {
            kiln_mode mode = m ? KILN_MODE_EAGER : KILN_MODE_FUSED;
            char ctx[160];
            snprintf(ctx, sizeof ctx, "compact code, random graph seed %" PRIu64 " (base %" PRIu64
                     " + %d), %s", seed, base, 3000000 + i, mode_name(mode));
            void *full[MAXIO] = {0}, *comp[MAXIO] = {0};
            run_with_code(g, mode, KILN_CODE_FULL, &in, full, ctx);
            run_with_code(g, mode, KILN_CODE_COMPACT, &in, comp, ctx);
            for (int k = 0; k < nout; k++) {
                assert_same_output(g, k, comp[k], full[k], "compact", "full", ctx);
                free(full[k]);
                free(comp[k]);
            }
        }
        inputs_free(&in);
        kiln_graph_free(g);
    }

    /* the plan's choice: 12 inputs, 1,200 ops of two earlier values each (each new op
     * reads the one before it, so the kernels are long and distinct) */
    enum { NIN = 12, NOPS = 1200 };
    static const char *const ops[4] = {"add", "mul", "sub", "max"};
    size_t cap = 1024 + (size_t)NOPS * 48, n = 0;
    char *t = malloc(cap);
    ck_assert_ptr_nonnull(t);
    n += (size_t)snprintf(t + n, cap - n, "graph big(");
    for (int i = 0; i < NIN; i++)
        n += (size_t)snprintf(t + n, cap - n, "%sx%d: f32[%d]", i ? ", " : "", i, 3 * lanes() + 1);
    n += (size_t)snprintf(t + n, cap - n, ") -> (y: f32[%d]) {\n  v0 = add(x0, x1)\n", 3 * lanes() + 1);
    uint64_t r = 0x636f;
    for (int j = 1; j < NOPS; j++) {
        r = r * 6364136223846793005u + 1442695040888963407u;
        unsigned a = (unsigned)(r >> 33);
        if (a % 3 == 0)
            n += (size_t)snprintf(t + n, cap - n, "  v%d = %s(v%d, x%u)\n", j, ops[a % 4], j - 1, a % NIN);
        else
            n += (size_t)snprintf(t + n, cap - n, "  v%d = %s(v%d, v%u)\n", j, ops[a % 4], j - 1,
                                  (unsigned)(r >> 45) % (unsigned)j);
    }
    n += (size_t)snprintf(t + n, cap - n, "  y = neg(v%d)\n}\n", NOPS - 1);
    ck_assert_uint_lt(n, cap);
    kiln_graph *big = ts_parse(t);
    free(t);
    kiln_graph *small = parsef("graph s(x: f32[100]) -> (o: f32[100]) {\n  a = tanh(x)\n  o = mul(a, x)\n}\n");
    ck_assert(plan_compact(big, KILN_MODE_FUSED, KILN_CODE_AUTO));
    ck_assert(!plan_compact(big, KILN_MODE_FUSED, KILN_CODE_FULL));
    ck_assert(!plan_compact(big, KILN_MODE_EAGER, KILN_CODE_AUTO));
    ck_assert(!plan_compact(small, KILN_MODE_FUSED, KILN_CODE_AUTO));
    ck_assert(plan_compact(small, KILN_MODE_FUSED, KILN_CODE_COMPACT));
    ck_assert(plan_compact(small, KILN_MODE_EAGER, KILN_CODE_COMPACT));
    {
        inputs in = {0};
        inputs_random(big, 0x636f6d71, true, &in);
        void *full[1], *comp[1];
        run_with_code(big, KILN_MODE_FUSED, KILN_CODE_FULL, &in, full, "big graph");
        run_with_code(big, KILN_MODE_FUSED, KILN_CODE_AUTO, &in, comp, "big graph");
        for (size_t e = 0; e < (size_t)(3 * lanes() + 1); e++)
            ck_assert_msg(elem_match(KILN_DTYPE_F32, comp[0], full[0], e, (rule){.nan = NAN_ANY}),
                          "big graph: element %zu: compact and full code differ", e);
        free(full[0]);
        free(comp[0]);
        inputs_free(&in);
    }
    /* out-of-line vector math: a call in the compact kernel's assembly, none in the full one */
    for (int k = 0; k < 2; k++) {
        kiln_options o = KILN_OPTIONS_INIT;
        o.flags = KILN_KEEP_DUMPS;
        o.code = k ? KILN_CODE_COMPACT : KILN_CODE_FULL;
        kiln_program *p;
        ck_assert_int_eq(kiln_program_compile(small, &o, &p), KILN_OK);
        char *as = dump_of(p, KILN_VIEW_ASM);
        ck_assert_msg((strstr(as, "call") != NULL) == (k == 1), "%s: asm:\n%.3000s",
                      k ? "KILN_CODE_COMPACT" : "KILN_CODE_FULL", as);
        free(as);
        kiln_program_free(p);
    }
    /* a value outside the enum: an error, not a guess */
    kiln_options o = KILN_OPTIONS_INIT;
    o.code = (kiln_code)-1;
    kiln_program *p = NULL;
    ck_assert_int_eq(kiln_program_compile(small, &o, &p), KILN_ERR_INVALID_ARG);
    ck_assert_ptr_null(p);
    ts_assert_error(KILN_ERR_INVALID_ARG, "kiln_program_compile: invalid argument: code -1");
    kiln_graph_free(big);
    kiln_graph_free(small);
}
END_TEST

/* ---- programs shared between threads ----------------------------------------------------- */

/* Several threads compile the same graphs (racing on both caches) and run one shared
 * program at once (each run needs its own temporaries; the pool takes one job at a
 * time).  Every result must still be the reference's. */
static const char shared_text[] =
    "graph sh(x: f32[300,257], y: f32[257]) -> (o: f32[257,300]) {\n"
    "  a = mul(x, y)\n  b = add(a, x)\n  t = permute(b, perm=[1,0])\n"
    "  two = full(value=2) : f32[]\n  o = div(t, two)\n}\n";

typedef struct shared_ctx {
    kiln_program *p;
    const inputs *in;
    const float *want;
    int bad;
} shared_ctx;

static void *
shared_worker(void *arg)
{
    shared_ctx *c = arg;
    float *got = malloc(300 * 257 * sizeof(float));
    for (int r = 0; r < 8 && got; r++) {
        /* compile an equal graph of our own as well: a plan cache hit or a race to fill it */
        kiln_graph *g = NULL;
        kiln_program *mine = NULL;
        if (kiln_graph_parse(shared_text, strlen(shared_text), &g) ||
            kiln_program_compile(g, NULL, &mine)) {
            c->bad++;
        }
        kiln_program *use = r & 1 ? mine : c->p;
        void *outs[1] = {got};
        memset(got, 0xff, 300 * 257 * sizeof(float));
        if (!use || kiln_program_run(use, (const void *const *)c->in->buf, outs) != KILN_OK)
            c->bad++;
        else
            for (size_t e = 0; e < 300 * 257; e++)
                c->bad += !elem_match(KILN_DTYPE_F32, got, c->want, e, (rule){.nan = NAN_ANY});
        kiln_program_free(mine);
        kiln_graph_free(g);
    }
    free(got);
    return NULL;
}

START_TEST(test_threads_share_programs)
{
    kiln_graph *g = ts_parse(shared_text);
    inputs in = {0};
    inputs_random(g, 0x8000, false, &in);
    float *want = malloc(300 * 257 * sizeof(float));
    void *o[1] = {want};
    ck_assert_int_eq(kiln_graph_interpret(g, (const void *const *)in.buf, o), KILN_OK);
    kiln_program *p;
    ck_assert_int_eq(kiln_program_compile(g, NULL, &p), KILN_OK);
    enum { NT = 4 };
    pthread_t th[NT];
    shared_ctx ctx[NT];
    for (int i = 0; i < NT; i++) {
        ctx[i] = (shared_ctx){p, &in, want, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, shared_worker, &ctx[i]), 0);
    }
    for (int i = 0; i < NT; i++) /* all joined before any assertion can leave the test */
        pthread_join(th[i], NULL);
    for (int i = 0; i < NT; i++)
        ck_assert_msg(ctx[i].bad == 0, "thread %d: %d failures or wrong elements", i, ctx[i].bad);
    kiln_program_free(p);
    free(want);
    inputs_free(&in);
    kiln_graph_free(g);
}
END_TEST

/* ---- 9. errors ---------------------------------------------------------------------------- */

START_TEST(test_errors)
{
    kiln_graph *g = parsef("graph e(x: f32[8], z: f32[0]) -> (y: f32[8], w: f32[0]) {\n"
                           "  y = neg(x)\n  w = abs(z)\n}\n");
    kiln_program *p;
    ck_assert_int_eq(kiln_program_compile(g, NULL, &p), KILN_OK);
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
    const void *ins[2] = {x, NULL}; /* a zero-size input may be NULL */
    void *outs[2] = {y, NULL};
    ck_assert_int_eq(kiln_program_run(p, ins, outs), KILN_OK);
    ck_assert(y[7] == -8.0f);

    const void *noin[2] = {NULL, NULL};
    ck_assert_int_eq(kiln_program_run(p, noin, outs), KILN_ERR_INVALID_ARG);
    ts_assert_error(KILN_ERR_INVALID_ARG, "kiln_program_run: invalid argument: input 0 ('x') is NULL");
    ck_assert_int_eq(kiln_program_run(p, NULL, outs), KILN_ERR_INVALID_ARG);
    ts_assert_error(KILN_ERR_INVALID_ARG, "input 0");
    void *noout[2] = {NULL, NULL};
    ck_assert_int_eq(kiln_program_run(p, ins, noout), KILN_ERR_INVALID_ARG);
    ts_assert_error(KILN_ERR_INVALID_ARG, "kiln_program_run: invalid argument: output 0 ('y') is NULL");
    ck_assert_int_eq(kiln_program_run(p, ins, NULL), KILN_ERR_INVALID_ARG);
    ts_assert_error(KILN_ERR_INVALID_ARG, "output 0");

    ck_assert_int_eq(kiln_program_run(NULL, ins, outs), KILN_ERR_MISUSE);
    ts_assert_error(KILN_ERR_MISUSE, "kiln_program_run: invalid handle");
    uint64_t junk[64];
    memset(junk, 0x3c, sizeof junk);
    ck_assert_int_eq(kiln_program_run((kiln_program *)(void *)junk, ins, outs), KILN_ERR_MISUSE);
    ts_assert_error(KILN_ERR_MISUSE, "not a live kiln_program");
    ck_assert_int_eq(kiln_program_dump((kiln_program *)(void *)junk, KILN_VIEW_PLAN, stderr),
                     KILN_ERR_MISUSE);
    kiln_program_free((kiln_program *)(void *)junk); /* refused, nothing freed */
    kiln_program_free(NULL);

    ck_assert_int_eq(kiln_program_dump(p, KILN_VIEW_COUNT, stderr), KILN_ERR_INVALID_ARG);
    ts_assert_error(KILN_ERR_INVALID_ARG, "kiln_program_dump: invalid argument: view 5");
    ck_assert_int_eq(kiln_program_dump(p, (kiln_view)-1, stderr), KILN_ERR_INVALID_ARG);
    ts_assert_error(KILN_ERR_INVALID_ARG, "kiln_program_dump: invalid argument: view -1");
    ck_assert_str_eq(kiln_view_name(KILN_VIEW_ASM), "asm");
    ck_assert_ptr_null(kiln_view_name(KILN_VIEW_COUNT));
    ck_assert_int_eq(kiln_program_dump(p, KILN_VIEW_PLAN, NULL), KILN_ERR_INVALID_ARG);
    ck_assert_int_eq(kiln_program_dump(NULL, KILN_VIEW_PLAN, stderr), KILN_ERR_MISUSE);
    /* llvm/opt/asm without KILN_KEEP_DUMPS: a note, not an error */
    char *t = dump_of(p, KILN_VIEW_ASM);
    ck_assert_msg(strstr(t, "not captured") != NULL, "%s", t);
    free(t);
    kiln_program_free(p);

    ck_assert_int_eq(kiln_program_compile(NULL, NULL, &p), KILN_ERR_MISUSE);
    ts_assert_error(KILN_ERR_MISUSE, "kiln_program_compile: invalid handle");
    ck_assert_int_eq(kiln_program_compile(g, NULL, NULL), KILN_ERR_INVALID_ARG);
    kiln_options bad = KILN_OPTIONS_INIT;
    bad.mode = (kiln_mode)7;
    ck_assert_int_eq(kiln_program_compile(g, &bad, &p), KILN_ERR_INVALID_ARG);
    ts_assert_error(KILN_ERR_INVALID_ARG, "mode 7");
    ck_assert_ptr_null(p);
    kiln_graph_free(g);
}
END_TEST

/* INTERP programs run the interpreter itself; the plan dump says so. */
/* A zero-size value kept in the temporaries of a plan that has none (0 bytes): the runner
 * offset the NULL block (`(char *)NULL + 0`, undefined behaviour: UBSan in the ASan build
 * stops there; found by fuzz_graphs, issue 26: a reduction over no axes of an empty value,
 * kept for the op that reads it; a matmul with an empty operand).  Fused and eager. */
START_TEST(test_zero_size_temporaries)
{
    static const char *const texts[] = {
        "graph z(x: i32[0,4,4,3]) -> (y: i32[0,4,4,3]) {\n"
        "  m = reduce_max(x, axes=[], keepdim=false)\n  y = mul(m, x)\n}\n",
        "graph z(x: f32[2,0]) -> (y: f32[2,0]) {\n"
        "  m = reduce_sum(x, axes=[], keepdim=true)\n  y = sub(x, m)\n}\n",
        /* a contraction with nothing to pack: K = 0 (zeros out), M = 0 */
        "graph m(a: f32[3,0], b: f32[0,4]) -> (y: f32[3,4]) {\n  y = matmul(a, b)\n}\n",
        "graph m(a: f32[0,5], b: f32[5,4]) -> (y: f32[0,4]) {\n  y = matmul(a, b)\n}\n",
    };
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        kiln_graph *g = ts_parse(texts[k]);
        ts_bufs in = {0};
        ts_bufs_for_inputs(g, &in);
        ts_check_fused_eager(g, &in, NULL, texts[k]);
        ts_bufs_free(&in);
        kiln_graph_free(g);
    }
}
END_TEST

START_TEST(test_interp_mode)
{
    kiln_graph *g = parsef("graph i(x: f32[5]) -> (y: f32[5]) {\n  y = exp(x)\n}\n");
    kiln_options o = KILN_OPTIONS_INIT;
    o.mode = KILN_MODE_INTERP;
    kiln_program *p;
    ck_assert_int_eq(kiln_program_compile(g, &o, &p), KILN_OK);
    ck_assert_int_eq(kiln_program_mode(p), KILN_MODE_INTERP);
    char *plan = dump_of(p, KILN_VIEW_PLAN);
    ck_assert_msg(strstr(plan, "interp") != NULL, "%s", plan);
    free(plan);
    inputs in = {0};
    inputs_random(g, 5, false, &in);
    float got[5], want[5];
    void *o1[1] = {got}, *o2[1] = {want};
    ck_assert_int_eq(kiln_program_run(p, (const void *const *)in.buf, o1), KILN_OK);
    ck_assert_int_eq(kiln_graph_interpret(g, (const void *const *)in.buf, o2), KILN_OK);
    ck_assert(memcmp(got, want, sizeof got) == 0);
    inputs_free(&in);
    kiln_program_free(p);
    kiln_graph_free(g);
}
END_TEST

static Suite *
jit_suite(void)
{
    Suite *s = suite_create("jit");
    TCase *tc = tcase_create("ops");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_elementwise_coverage);
    tcase_add_loop_test(tc, test_elementwise_op, 0, 8);
    tcase_add_loop_test(tc, test_elementwise_op_compact, 0, 8);
    tcase_add_test(tc, test_int_div_edges);
    tcase_add_test(tc, test_sizes_chain);
    suite_add_tcase(s, tc);

    tc = tcase_create("layout");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_broadcasting);
    tcase_add_test(tc, test_movement);
    tcase_add_test(tc, test_contiguous_copies);
    tcase_add_test(tc, test_ranged_outputs);
    tcase_add_test(tc, test_fusion_counts);
    tcase_add_test(tc, test_long_chain);
    tcase_add_test(tc, test_wide_graph_bounded);
    suite_add_tcase(s, tc);

    tc = tcase_create("random");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_random_exact, 0, RANDOM_SLICES);
    tcase_add_loop_test(tc, test_random_all, 0, RANDOM_SLICES);
    suite_add_tcase(s, tc);

    tc = tcase_create("runtime");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_threads_bit_identical);
    tcase_add_test(tc, test_cache_hit_no_llvm);
    tcase_add_test(tc, test_scalar_parameters);
    tcase_add_test(tc, test_scalar_parameters_overflow);
    tcase_add_test(tc, test_signalling_nan_extremes);
    tcase_add_test(tc, test_compile_free_cycles);
    tcase_add_test(tc, test_threads_share_programs);
    tcase_add_test(tc, test_reference_steps);
    tcase_add_test(tc, test_dumps_vectorized);
    tcase_add_test(tc, test_streaming_stores);
    tcase_add_test(tc, test_compact_code);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_interp_mode);
    tcase_add_test(tc, test_zero_size_temporaries);
    suite_add_tcase(s, tc);
    return s;
}

int
main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--threads-child") == 0)
        return threads_child(argv[2]);
    return ts_run(jit_suite());
}
