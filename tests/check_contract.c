/*
 * check_contract.c — matmul compiled as a CONTRACTION kernel (lib/jit/contract.c packs the
 * operands and blocks the work, lib/jit/lower_contract.c is the register-tiled macro-kernel
 * with its fused epilogue), against the reference interpreter.
 *
 * Every program is compiled in FUSED and in EAGER mode and compared with an INTERP program
 * (the oracle) on the same inputs, with poisoned output buffers and guard areas
 * (tests/support/oracle.h).  Public API only, plus the test support library.
 *
 * Tolerances.  The reference sums the products in double in increasing p and rounds once;
 * a compiled matmul carries the sum in the dtype, one FMA per p (ints: multiply and add,
 * wrapping).  Every output is held to the bound `kiln check` propagates through the graph
 * (lib/check/errbound.h, ts_bounds_for): for the matmul (gamma(K, u) + 3 gamma(K, 2^-53))
 * S + K subnormals + 1 ulp, S = sum_p |a_ip * b_pj|, u the dtype's unit roundoff, carried
 * through the views and ops after it; for ints 0 (both wrap; i32 = i64 reduced modulo
 * 2^32).  Where the bound cannot speak:
 *  - the sign of a zero, which a distance does not see: where the bound is 0 (K = 0: +0,
 *    docs/semantics.md) it must match (ts_tol.zero_sign); test 7's signed zeros compare
 *    every case of products of ±0 byte for byte;
 *  - ±inf and NaN in the inputs (test 7): the bound is infinite there, but with inputs
 *    in [-1, 1) no order of the sum overflows, so an infinity or NaN among the terms
 *    decides the result in any order: the same infinity, or a NaN (any payload)
 *    (ts_tol.nonfinite).
 *
 * Epilogues (elementwise consumers fused into the matmul kernel) are held two ways:
 *  - FUSED vs EAGER byte for byte: both run the same chain (the accumulator is rounded to
 *    the dtype before the epilogue in both, and the epilogue ops are the same code);
 *  - against the reference, on "dyadic" inputs (multiples of 1/8 in [-2, 2]) and on
 *    uniform ones in [-1, 1), to the same propagated bound, the chain included (each op's
 *    own error plus its operands' errors through its derivative).  Except where the bound
 *    cannot know what the test does: on dyadic inputs every partial sum is a multiple of
 *    1/64 below 2^11, so the matmul is exact in both, and so are the tails of exact ops
 *    (bias, residual, relu, scale, casts, i32 included): those are held byte for byte (the
 *    bound, which takes the matmul as inexact, would let a kernel one ulp off an add
 *    pass).  A cast to i32 is not compared on uniform inputs (a matmul within its bound
 *    may cross an integer).  Each vector-math op's own ULP bound against the exact value
 *    is check_jit's and check_vmath's to hold, in the same emitter (emit.c).

 * The tests:
 *  1. sizes: M, N, K in {0, 1, 2, 7, 16, 31, 33, 64, 100, 257}: every triple for f32, a
 *     fifth of them (each size in each position) for f64, i32 and i64.
 *  2. views: transposed and permuted operands, slices with steps (negative too), reshapes
 *     (of a permute, of a slice), expands, an attention block's per-head q, k, v (slices
 *     of one projection, reshaped and permuted), a scaled and a cast operand, a permuted
 *     result and a permuted result added to; f32, f64, i32, i64.
 *  3. batches and 1-D operands: [2,3,M,K] @ [K,N], [1,M,K] @ [4,K,N], [4,1,M,K] @ [3,K,N],
 *     [M,K] @ [2,K,N], an expanded batch, zero-size batches and K, [K] @ [K,N],
 *     [M,K] @ [K], [K] @ [K], [B,M,K] @ [K], [K] @ [B,K,N].
 *  4. epilogues: bias [N], per-row [M,1], gelu, relu, silu, tanh, residual [M,N],
 *     scale, casts (f32 <-> f64, to i32), bias + gelu (the mlp) and one chain of them all:
 *     the plan (kiln_program_dump "plan") has exactly one step, a kernel holding the
 *     matmul and every epilogue op, and no reference step; then the three checks above.
 *     Attention's scale, (q @ k) * c before its softmax, is computed in the reduction
 *     kernel instead: both matmuls are plain, one compiled kernel (unless the scale is
 *     an output too, or a matmul operand), results within the bound `kiln check`
 *     propagates.
 *  5. threads: [300,257] @ [257,333] (plain, and transposed W + bias + gelu), a broadcast
 *     batched f64 and an i32 matmul give the same bytes on 1, 2 and 4 threads (child
 *     processes: the pool size is fixed when the pool starts), and match the reference.
 *  6. constant weights: a W that is a graph constant (kiln_constant; plain, transposed,
 *     batched) is packed when the program is compiled: kiln_jit_stats().weights_packed
 *     grows by exactly 1 per compiled program, by 0 per run and on a program cache hit;
 *     results match the reference on every run.
 *  7. special values: inf, -inf, NaN, ±0 in the operands (plain, transposed, batched, and
 *     with a bias + relu epilogue) propagate as in the reference; sums of -0 products are
 *     -0 and K = 0 gives +0 (docs/semantics.md).
 *  8. skinny contractions (B read in place): rows and dots forms, slices, concatenated
 *     caches, per-head attention shapes, 1-D operands, long K and wide N, at M in {1, 2, 3,
 *     7, 13, 14, 15, 31} (both sides of the choice), every dtype, fused and eager; the
 *     choice in the plan (no temporaries for a one-row matmul with B an input) for each
 *     reason.  The threads test (5) holds skinny cases too (rows, dots, batched dots,
 *     batched rows in uneven runs, i64).
 *     A matmul whose contracted dim is 1 is a broadcast mul: exact, every dtype, no
 *     contraction kernel; a decoder's p_new @ v_new fused into the epilogue of p @ v_past.
 *  9. a decode loop: a decoder step captured through the tensor API with caches one row
 *     longer each step: no kernel compiled and no temporaries block allocated after the
 *     first step, outputs within the propagated bound.
 * 10. held inputs (kiln_program_hold_input): a weight input packed once while held, again
 *     after kiln_program_input_changed or for another pointer, stale (exactly the old
 *     results) when its change is not said, per run again once released.
 *
 * Random inputs use the base seed 0x636f6e74 unless KILN_TEST_SEED overrides it.
 */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decoder.h"
#include "oracle.h"
#include "randgraph.h"
#include "support.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define F32 KILN_DTYPE_F32
#define F64 KILN_DTYPE_F64
#define I32 KILN_DTYPE_I32
#define I64 KILN_DTYPE_I64

static uint64_t
base_seed(void)
{
    return ts_base_seed(0x636f6e74);
}

static bool
is_float(kiln_dtype t)
{
    return t == F32 || t == F64;
}

/* ---- text -------------------------------------------------------------------------------- */

static char *
strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *
strf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        abort();
    char *s = malloc((size_t)n + 1);
    if (!s)
        abort();
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* The dtype a case's $U stands for: another dtype the operand can be cast from. */
static kiln_dtype
other_dtype(kiln_dtype t)
{
    return t == F32 ? F64 : t == F64 ? F32 : t == I32 ? I64 : I32;
}

/* tmpl with $T (the dtype), $U (other_dtype) and $M, $N, $K replaced.  No Check calls (the
 * threads child uses it). */
static char *
expand(const char *tmpl, kiln_dtype t, int64_t M, int64_t N, int64_t K)
{
    size_t cap = strlen(tmpl) * 4 + 64, n = 0;
    char *s = malloc(cap);
    if (!s)
        abort();
    for (const char *p = tmpl; *p; p++) {
        char rep[32];
        const char *r = NULL;
        if (p[0] == '$' && p[1] && strchr("TUMNK", p[1])) {
            switch (p[1]) {
            case 'T': r = kiln_dtype_name(t); break;
            case 'U': r = kiln_dtype_name(other_dtype(t)); break;
            default:
                snprintf(rep, sizeof rep, "%lld",
     (long long)(p[1] == 'M' ? M : p[1] == 'N' ? N : K));
                r = rep;
            }
            p++;
        }
        size_t len = r ? strlen(r) : 1;
        if (n + len + 1 > cap)
            abort();
        memcpy(s + n, r ? r : p, len);
        n += len;
    }
    s[n] = '\0';
    return s;
}

/* ---- cases ------------------------------------------------------------------------------- */

/* One graph around one matmul: inputs `ins`, lines `pro` defining its operands a and b,
 * h = matmul(a, b), then lines `tail` defining the output y (NULL: the output is h) of type
 * `ytype`.  Templates take $T $U $M $N $K. */
typedef struct mcase {
    const char *name;
    const char *ins, *pro, *a, *b;
    const char *tail, *ytype;
    int64_t M, N, K;
} mcase;

static char *
case_text(const mcase *c, kiln_dtype t)
{
    char *tmpl = strf("graph c(%s) -> (%s: %s) {\n%s  h = matmul(%s, %s)\n%s}\n", c->ins,
                      c->tail ? "y" : "h", c->ytype, c->pro ? c->pro : "", c->a, c->b,
                      c->tail ? c->tail : "");
    char *s = expand(tmpl, t, c->M, c->N, c->K);
    free(tmpl);
    return s;
}

/* ---- inputs ------------------------------------------------------------------------------ */

typedef enum fill_kind {
    FILL_UNIFORM, /* floats uniform in [-1, 1); ints half small (|v| <= 100), half any */
    FILL_DYADIC,  /* floats k/8, |k| <= 16; ints as UNIFORM */
    FILL_SPECIAL, /* UNIFORM with 1 in 12 elements inf, -inf, NaN, -NaN, +0 or -0 */
} fill_kind;

static double
urand(ts_rng *r)
{
    return (double)(ts_rng_next(r) >> 11) * 0x1p-53;
}

static void
put_f(kiln_dtype t, void *p, size_t i, double v)
{
    if (t == F32) {
        float f = (float)v;
        memcpy((char *)p + 4 * i, &f, 4);
    } else {
        memcpy((char *)p + 8 * i, &v, 8);
    }
}

static void
fill(ts_rng *r, kiln_dtype t, void *p, size_t n, fill_kind how)
{
    static const double specials[6] = {INFINITY, -INFINITY, NAN, -NAN, 0.0, -0.0};
    for (size_t i = 0; i < n; i++) {
        if (!is_float(t)) {
            int64_t v = ts_rng_below(r, 2) ? (int64_t)ts_rng_below(r, 201) - 100
                                           : (int64_t)ts_rng_next(r);
            if (t == I32) {
                int32_t w = (int32_t)(uint32_t)(uint64_t)v;
                memcpy((char *)p + 4 * i, &w, 4);
            } else {
                memcpy((char *)p + 8 * i, &v, 8);
            }
        } else if (how == FILL_DYADIC) {
            put_f(t, p, i, (double)((int64_t)ts_rng_below(r, 33) - 16) / 8);
        } else if (how == FILL_SPECIAL && ts_rng_below(r, 12) == 0) {
            put_f(t, p, i, specials[ts_rng_below(r, 6)]);
        } else {
            put_f(t, p, i, 2 * urand(r) - 1);
        }
    }
}

/* Inputs of g, each malloc'd and filled from `seed`.  No Check calls (the threads child
 * uses it); false if out of memory. */
static bool
make_inputs(const kiln_graph *g, uint64_t seed, fill_kind how, ts_bufs *in)
{
    ts_rng r;
    ts_rng_seed(&r, seed);
    in->n = kiln_graph_num_inputs(g);
    for (int i = 0; i < in->n; i++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        if (kiln_graph_input(g, i,
     &vi) != KILN_OK || !(in->buf[i] = malloc(vi.bytes ? vi.bytes : 1)))
            return false;
        fill(&r, vi.dtype, in->buf[i], vi.count, how);
    }
    return true;
}

static kiln_graph *
parse_or_null(const char *text)
{
    kiln_graph *g = NULL;
    return kiln_graph_parse(text, strlen(text), &g) == KILN_OK ? g : NULL;
}

/* A case's output against the reference (see the header): within the bound `kiln check`
 * propagates, the sign of a zero where that bound is 0, and where the reference is ±inf or
 * NaN, the same.  bd to free (ts_bounds_free). */
static ts_tol
case_tol(const kiln_graph *g, const ts_bufs *in, ts_bounds *bd)
{
    const bool which[TS_MAXIO] = {true};
    ts_bounds_for(g, in, which, bd);
    return (ts_tol){.kind = TS_TOL_BOUND, .bound = bd->bound[0], .zero_sign = true,
                    .nonfinite = true};
}

/* FUSED and EAGER against INTERP under the matmul bound. */
static void
check_case(const mcase *c, kiln_dtype t, uint64_t seed, fill_kind how)
{
    char *text = case_text(c, t);
    kiln_graph *g = ts_parse(text);
    ts_bufs in = {0};
    ck_assert(make_inputs(g, seed, how, &in));
    ts_bounds bd;
    ts_tol tol = case_tol(g, &in, &bd);
    char ctx[160];
    snprintf(ctx, sizeof ctx, "%s, %s, M=%lld N=%lld K=%lld, seed 0x%" PRIx64, c->name,
             kiln_dtype_name(t), (long long)c->M, (long long)c->N, (long long)c->K, seed);
    ts_check_fused_eager(g, &in, &tol, ctx);
    ts_bounds_free(&bd);
    ts_bufs_free(&in);
    kiln_graph_free(g);
    free(text);
}

/* ---- 1. sizes ---------------------------------------------------------------------------- */

static const int64_t sizes[] = {0, 1, 2, 7, 16, 31, 33, 64, 100, 257};
#define NSIZES ((int)NELEM(sizes))

static void
check_plain(kiln_dtype t, int64_t M, int64_t N, int64_t K, uint64_t seed, fill_kind how)
{
    mcase c = {.name = "plain", .ins = "a: $T[$M,$K], b: $T[$K,$N]", .a = "a", .b = "b",
               .ytype = "$T[$M,$N]", .M = M, .N = N, .K = K};
    check_case(&c, t, seed, how);
}

/* Slices 0..NSIZES-1: f32, every N and K for M = sizes[slice]; then f64, i32, i64: the
 * triples with (im + 2 in + 3 ik + dtype) % 5 == 0, which hold each size in each position. */
START_TEST(test_sizes)
{
    uint64_t seed = base_seed() + 0x1000 * (uint64_t)(_i + 1);
    if (_i < NSIZES) {
        for (int in = 0; in < NSIZES; in++)
            for (int ik = 0; ik < NSIZES; ik++)
                check_plain(F32, sizes[_i], sizes[in], sizes[ik], seed + (uint64_t)(in * 16 + ik),
                            FILL_UNIFORM);
        return;
    }
    static const kiln_dtype others[3] = {F64, I32, I64};
    int d = _i - NSIZES;
    for (int im = 0; im < NSIZES; im++)
        for (int in = 0; in < NSIZES; in++)
            for (int ik = 0; ik < NSIZES; ik++)
                if ((im + 2 * in + 3 * ik + d) % 5 == 0)
                    check_plain(others[d], sizes[im], sizes[in], sizes[ik],
                                seed + (uint64_t)(im * 256 + in * 16 + ik), FILL_UNIFORM);
}
END_TEST

/* ---- 2. views, 3. batches and 1-D operands ------------------------------------------------ */

static const mcase view_cases[] = {
    {"W transposed", "x: $T[$M,$K], W: $T[$N,$K]", "  Wt = permute(W, perm=[1,0])\n", "x", "Wt",
     NULL, "$T[$M,$N]", 33, 100, 31},
    {"x transposed", "xt: $T[$K,$M], W: $T[$K,$N]", "  x = permute(xt, perm=[1,0])\n", "x", "W",
     NULL, "$T[$M,$N]", 33, 100, 31},
    {"both transposed", "xt: $T[$K,$M], W: $T[$N,$K]",
     "  x = permute(xt, perm=[1,0])\n  Wt = permute(W, perm=[1,0])\n", "x", "Wt", NULL,
     "$T[$M,$N]", 17, 40, 64},
    {"slices with steps", "X: $T[70,65], Y: $T[64,210]",
     "  A = slice(X, start=[1,2], stop=[67,64], step=[2,2])\n"
     "  B = slice(Y, start=[62,209], stop=[0,9], step=[-2,-2])\n",
     "A", "B", NULL, "$T[$M,$N]", 33, 100, 31},
    {"slices of the middle", "X: $T[40,50], Y: $T[50,120]",
     "  A = slice(X, start=[3,5], stop=[36,36])\n  B = slice(Y, start=[5,7], stop=[36,107])\n",
     "A", "B", NULL, "$T[$M,$N]", 33, 100, 31},
    {"reshapes", "X: $T[1023], Y: $T[31,2,50]",
     "  A = reshape(X, shape=[33,31])\n  B = reshape(Y, shape=[31,100])\n", "A", "B", NULL,
     "$T[$M,$N]", 33, 100, 31},
    {"reshape of a permute", "X: $T[31,3,11], W: $T[$K,$N]",
     "  P = permute(X, perm=[1,2,0])\n  A = reshape(P, shape=[33,31])\n", "A", "W", NULL,
     "$T[$M,$N]", 33, 100, 31},
    {"expands", "u: $T[1,$K], v: $T[$K,1]",
     "  A = expand(u, shape=[$M,$K])\n  B = expand(v, shape=[$K,$N])\n", "A", "B", NULL,
     "$T[$M,$N]", 33, 100, 31},
    {"per-head q @ k^T", "qkv: $T[2,9,96]",
     "  qs = slice(qkv, start=[0,0,0], stop=[2,9,32])\n  q4 = reshape(qs, shape=[2,9,4,8])\n"
     "  q = permute(q4, perm=[0,2,1,3])\n"
     "  ks = slice(qkv, start=[0,0,32], stop=[2,9,64])\n  k4 = reshape(ks, shape=[2,9,4,8])\n"
     "  kt = permute(k4, perm=[0,2,3,1])\n",
     "q", "kt", NULL, "$T[2,4,9,9]", 9, 9, 8},
    {"per-head p @ v", "p: $T[2,4,9,9], qkv: $T[2,9,96]",
     "  vs = slice(qkv, start=[0,0,64], stop=[2,9,96])\n  v4 = reshape(vs, shape=[2,9,4,8])\n"
     "  v = permute(v4, perm=[0,2,1,3])\n",
     "p", "v", NULL, "$T[2,4,9,8]", 9, 8, 9},
    {"scaled and cast operands", "x: $T[$M,$K], W: $U[$K,$N]",
     "  k = full(value=3) : $T[]\n  A = mul(x, k)\n  B = cast(W, to=$T)\n", "A", "B", NULL,
     "$T[$M,$N]", 33, 100, 31},
    /* k longer than any slice (contract.c splits k so that 64 rows of A fit half the L2:
     * 2048 f32 or 1024 f64 with a 1 MiB L2, 8192 f32 with 4 MiB): partial sums go through
     * memory between slices, the epilogue runs after the last */
    {"long k, k blocked", "x: $T[$M,$K], W: $T[$K,$N]", NULL, "x", "W", NULL, "$T[$M,$N]", 9, 37,
     9001},
    {"long k, k blocked, transposed W and a bias", "x: $T[$M,$K], W: $T[$N,$K], c: $T[$N]",
     "  Wt = permute(W, perm=[1,0])\n", "x", "Wt", "  y = add(h, c)\n", "$T[$M,$N]", 20, 33, 8500},
    /* fulls are materialised for packing: each must keep its own buffer until the matmul
     * has read it (two once shared one) */
    {"full operands", "x: $T[$M,$K]",
     "  A = full(value=-3) : $T[$M,$K]\n  B = full(value=5) : $T[$K,$N]\n", "A", "B", NULL,
     "$T[$M,$N]", 33, 100, 31},
    {"a 1-D full and a full", "x: $T[$K]",
     "  A = full(value=-66) : $T[$K]\n  B = full(value=91) : $T[$K,$N]\n", "A", "B", NULL,
     "$T[$N]", 1, 24, 21},
    {"permuted result", "x: $T[$M,$K], W: $T[$K,$N]", NULL, "x", "W",
     "  y = permute(h, perm=[1,0])\n", "$T[$N,$M]", 33, 100, 31},
    {"permuted result added to", "x: $T[$M,$K], W: $T[$K,$N], c: $T[$N,$M]", NULL, "x", "W",
     "  ht = permute(h, perm=[1,0])\n  y = add(ht, c)\n", "$T[$N,$M]", 33, 100, 31},
};

static const mcase batch_cases[] = {
    {"[2,3,M,K] @ [K,N]", "x: $T[2,3,$M,$K], W: $T[$K,$N]", NULL, "x", "W", NULL,
     "$T[2,3,$M,$N]", 33, 17, 31},
    {"[1,M,K] @ [4,K,N]", "x: $T[1,$M,$K], W: $T[4,$K,$N]", NULL, "x", "W", NULL,
     "$T[4,$M,$N]", 33, 17, 31},
    {"[4,1,M,K] @ [3,K,N]", "x: $T[4,1,$M,$K], W: $T[3,$K,$N]", NULL, "x", "W", NULL,
     "$T[4,3,$M,$N]", 33, 17, 31},
    {"[M,K] @ [2,K,N]", "x: $T[$M,$K], W: $T[2,$K,$N]", NULL, "x", "W", NULL, "$T[2,$M,$N]", 33,
     17, 31},
    {"expanded batch", "x: $T[$M,$K], W: $T[3,$K,$N]", "  X = expand(x, shape=[3,$M,$K])\n", "X",
     "W", NULL, "$T[3,$M,$N]", 33, 17, 31},
    {"batch of a transposed", "xt: $T[2,$K,$M], W: $T[$K,$N]", "  x = permute(xt, perm=[0,2,1])\n",
     "x", "W", NULL, "$T[2,$M,$N]", 33, 17, 31},
    {"[0,M,K] @ [K,N]", "x: $T[0,$M,$K], W: $T[$K,$N]", NULL, "x", "W", NULL, "$T[0,$M,$N]", 5, 4,
     3},
    {"[2,M,0] @ [0,N]", "x: $T[2,$M,$K], W: $T[$K,$N]", NULL, "x", "W", NULL, "$T[2,$M,$N]", 5, 4,
     0},
    {"[K] @ [K,N]", "v: $T[$K], W: $T[$K,$N]", NULL, "v", "W", NULL, "$T[$N]", 1, 100, 31},
    {"[M,K] @ [K]", "x: $T[$M,$K], v: $T[$K]", NULL, "x", "v", NULL, "$T[$M]", 33, 1, 31},
    {"[K] @ [K]", "u: $T[$K], v: $T[$K]", NULL, "u", "v", NULL, "$T[]", 1, 1, 257},
    {"[B,M,K] @ [K]", "x: $T[3,$M,$K], v: $T[$K]", NULL, "x", "v", NULL, "$T[3,$M]", 33, 1, 31},
    {"[K] @ [B,K,N]", "v: $T[$K], W: $T[3,$K,$N]", NULL, "v", "W", NULL, "$T[3,$N]", 1, 17, 31},
    {"[K] @ [K] of a slice", "u: $T[70], v: $T[$K]",
     "  us = slice(u, start=[68], stop=[0], step=[-2])\n", "us", "v", NULL, "$T[]", 1, 1, 34},
};

static const kiln_dtype all_dtypes[4] = {F32, F64, I32, I64};

START_TEST(test_views)
{
    for (int d = 0; d < 4; d++)
        check_case(&view_cases[_i], all_dtypes[d], base_seed() + 0x20000 + (uint64_t)(_i * 4 + d),
                   FILL_UNIFORM);
}
END_TEST

START_TEST(test_batches)
{
    for (int d = 0; d < 4; d++)
        check_case(&batch_cases[_i], all_dtypes[d], base_seed() + 0x30000 + (uint64_t)(_i * 4 + d),
                   FILL_UNIFORM);
}
END_TEST

/* ---- 4. epilogues ------------------------------------------------------------------------ */

typedef struct ecase {
    const char *name;
    const char *ins;  /* inputs besides x and W */
    const char *tail; /* from h to y */
    const char *ytype;
    const char *ops;  /* the epilogue ops the kernel must hold, space-separated */
    bool exact;       /* exact ops only: exact on dyadic inputs */
} ecase;

static const ecase epi_cases[] = {
    {"bias", ", b: $T[$N]", "  y = add(h, b)\n", "$T[$M,$N]", "add", true},
    {"per-row add", ", r: $T[$M,1]", "  y = add(h, r)\n", "$T[$M,$N]", "add", true},
    {"gelu", "", "  y = gelu(h)\n", "$T[$M,$N]", "gelu", false},
    {"relu", "", "  y = relu(h)\n", "$T[$M,$N]", "relu", true},
    {"silu", "", "  y = silu(h)\n", "$T[$M,$N]", "silu", false},
    {"tanh", "", "  y = tanh(h)\n", "$T[$M,$N]", "tanh", false},
    {"residual", ", res: $T[$M,$N]", "  y = add(h, res)\n", "$T[$M,$N]", "add", true},
    {"scale", "", "  k = full(value=0.5) : $T[]\n  y = mul(h, k)\n", "$T[$M,$N]", "mul", true},
    {"cast to $U", "", "  y = cast(h, to=$U)\n", "$U[$M,$N]", "cast", true},
    {"cast to i32", "", "  y = cast(h, to=i32)\n", "i32[$M,$N]", "cast", true},
    {"bias + gelu", ", b: $T[$N]", "  z = add(h, b)\n  y = gelu(z)\n", "$T[$M,$N]", "add gelu",
     false},
    {"chain", ", b: $T[$N], r: $T[$M,1], res: $T[$M,$N]",
     "  z1 = add(h, b)\n  z2 = add(z1, r)\n  g = gelu(z2)\n  s1 = silu(g)\n  t = tanh(s1)\n"
     "  u = relu(t)\n  v = add(u, res)\n  k = full(value=0.5) : $T[]\n  w = mul(v, k)\n"
     "  y = cast(w, to=$U)\n",
     "$U[$M,$N]", "add gelu silu tanh relu mul cast", false},
};

static const int64_t epi_shapes[2][3] = {{33, 100, 31}, {7, 257, 64}}; /* M, N, K */

/* Does the plan line hold op `op` as a word? */
static bool
line_has_op(const char *line, size_t len, const char *op)
{
    size_t n = strlen(op);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(line + i, op, n) == 0 && (i == 0 || line[i - 1] == ' ') &&
            (i + n == len || line[i + n] == ' '))
            return true;
    return false;
}

/* The fused plan of g: one step, a kernel holding matmul and every op of `ops` (and, for a
 * rows-form skinny step, its core). */
static void
check_epilogue_plan(const kiln_graph *g, const char *ops, const char *ctx)
{
    kiln_options o = KILN_OPTIONS_INIT;
    o.mode = KILN_MODE_FUSED;
    kiln_program *p = NULL;
    ck_assert_msg(kiln_program_compile(g, &o, &p) == KILN_OK, "%s: %s", ctx, kiln_errmsg());
    char *plan = ts_plan_text(p);
    int steps = -1, kernels = -1;
    ck_assert_msg(sscanf(plan, "plan: %d steps, %d kernels", &steps, &kernels) == 2,
                  "%s: plan header:\n%s", ctx, plan);
    /* a rows-form skinny step runs its k loop in a kernel of its own (its core) */
    int nk = 1 + (strstr(plan, "rows of B (vectors along N)") != NULL);
    ck_assert_msg(steps == 1 && kernels == nk, "%s: %d steps, %d kernels, want 1 and %d:\n%s", ctx,
                  steps, kernels, nk, plan);
    ck_assert_msg(ts_plan_reference_steps(plan) == 0, "%s: a reference step:\n%s", ctx, plan);
    const char *line = strstr(plan, "\nstep 0: ");
    ck_assert_msg(line != NULL, "%s: no step 0:\n%s", ctx, plan);
    line++;
    size_t len = strcspn(line, "\n");
    ck_assert_msg(line_has_op(line, len, "kernel"), "%s: step 0 is not a kernel:\n%s", ctx, plan);
    ck_assert_msg(line_has_op(line, len, "matmul"), "%s: step 0 lacks the matmul:\n%s", ctx, plan);
    char *want = strdup(ops);
    for (char *save = NULL, *op = strtok_r(want, " ", &save); op; op = strtok_r(NULL, " ", &save))
        ck_assert_msg(line_has_op(line, len, op), "%s: the matmul kernel lacks %s:\n%s", ctx, op,
                      plan);
    free(want);
    free(plan);
    kiln_program_free(p);
}

/* A cast to a float dtype and a product with a scalar full, read by the matmul alone, are
 * computed while packing (one kernel; their values: the "scaled and cast operands" case).
 * Read by anything else too, the cast is a kernel of its own. */
START_TEST(test_packing_folds)
{
    static const char *const text[2] = {
        "graph f(x: f64[33,31], W: f32[31,100]) -> (h: f32[33,100]) {\n"
        "  a = cast(x, to=f32)\n  k = full(value=0.5) : f32[]\n  b = mul(W, k)\n"
        "  h = matmul(a, b)\n}\n",
        "graph f(x: f64[33,31], W: f32[31,100]) -> (h: f32[33,100], a: f32[33,31]) {\n"
        "  a = cast(x, to=f32)\n  h = matmul(a, W)\n}\n",
    };
    kiln_graph *g = ts_parse(text[0]);
    check_epilogue_plan(g, "", "a folded cast and scale");
    kiln_graph_free(g);
    g = ts_parse(text[1]);
    kiln_options o = KILN_OPTIONS_INIT;
    kiln_program *p = NULL;
    ck_assert_int_eq(kiln_program_compile(g, &o, &p), KILN_OK);
    char *plan = ts_plan_text(p);
    int steps = -1, kernels = -1;
    ck_assert(sscanf(plan, "plan: %d steps, %d kernels", &steps, &kernels) == 2);
    ck_assert_msg(kernels == 2 && !strstr(plan, "packing computes"),
                  "a cast that is also an output is folded:\n%s", plan);
    free(plan);
    kiln_program_free(p);
    kiln_graph_free(g);
}
END_TEST

/* The plan's line for step `step` (a pointer into plan; its length in *len), or NULL. */
static const char *
plan_step(const char *plan, int step, size_t *len)
{
    char tag[32];
    snprintf(tag, sizeof tag, "\nstep %d: ", step);
    const char *line = strstr(plan, tag);
    if (!line)
        return NULL;
    line++;
    *len = strcspn(line, "\n");
    return line;
}

/* g compiled in `mode` past the caches; *compiled: the kernels that took. */
static kiln_program *
compile_uncached(const kiln_graph *g, kiln_mode mode, const char *ctx, uint64_t *compiled)
{
    kiln_options o = KILN_OPTIONS_INIT;
    o.mode = mode;
    o.flags = KILN_NO_CACHE;
    kiln_stats s0 = KILN_STATS_INIT, s1 = KILN_STATS_INIT;
    kiln_jit_stats(&s0);
    kiln_program *p = NULL;
    ck_assert_msg(kiln_program_compile(g, &o, &p) == KILN_OK, "%s: %s", ctx, kiln_errmsg());
    kiln_jit_stats(&s1);
    *compiled = s1.kernel_compiles - s0.kernel_compiles;
    return p;
}

/* Attention's scale, (q @ k) * c, read first by its softmax's reduce_max: computed in the
 * reduction kernel, not in the contraction's epilogue, so both matmuls are plain and share
 * one compiled kernel (2 kernels compiled for 3 steps, caches bypassed); the results are
 * the reference's within the bound `kiln check` propagates, fused and eager.  Also an
 * output, the scale stays in the epilogue (the contraction stores it anyway). */
START_TEST(test_epilogue_to_reduction)
{
    kiln_dtype t = _i % 2 ? F64 : F32;
    int variant = _i / 2; /* 0: attention; 1: the scale an output; 2: the scale a matmul operand */
    bool stays = variant > 0;
    const char *tn = kiln_dtype_name(t);
    static const char *const what[3] = {"", ", the scale an output",
                                        ", the scale a matmul operand"};
    char *extra_in = variant == 2 ? strf(", w: %s[2,45,17]", tn) : strf("%s", "");
    char *extra_out = variant == 1   ? strf(", t: %s[2,33,45]", tn)
                      : variant == 2 ? strf(", o2: %s[2,33,17]", tn)
                                     : strf("%s", "");
    char *text = strf("graph attn(q: %s[2,33,20], k: %s[2,20,45], v: %s[2,45,17]%s) -> "
                      "(o: %s[2,33,17]%s) {\n"
                      "  s = matmul(q, k)\n  c = full(value=0.125) : %s[]\n  t = mul(s, c)\n"
                      "  m = reduce_max(t, axes=[2], keepdim=true)\n  d = sub(t, m)\n"
                      "  e = exp(d)\n  z = reduce_sum(e, axes=[2], keepdim=true)\n"
                      "  p = div(e, z)\n  o = matmul(p, v)\n%s}\n",
                      tn, tn, tn, extra_in, tn, extra_out, tn,
                      variant == 2 ? "  o2 = matmul(t, w)\n" : "");
    char ctx[96];
    snprintf(ctx, sizeof ctx, "attention, %s%s", tn, what[variant]);
    kiln_graph *g = ts_parse(text);

    uint64_t compiled;
    kiln_program *p = compile_uncached(g, KILN_MODE_FUSED, ctx, &compiled);
    char *plan = ts_plan_text(p);
    size_t l0 = 0, l1 = 0, l2 = 0, lx = 0;
    const char *s0l = plan_step(plan, 0, &l0), *s1l = plan_step(plan, 1, &l1),
               *s2l = plan_step(plan, 2, &l2);
    ck_assert_msg(s0l && s1l && s2l && (variant == 2) == (plan_step(plan, 3, &lx) != NULL) &&
                      !plan_step(plan, 4, &lx),
                  "%s: want %d steps:\n%s", ctx, variant == 2 ? 4 : 3, plan);
    ck_assert_msg(line_has_op(s0l, l0, "matmul") && line_has_op(s2l, l2, "matmul") &&
                      line_has_op(s1l, l1, "reduce_max"),
                  "%s: steps:\n%s", ctx, plan);
    ck_assert_msg(line_has_op(s0l, l0, "mul") == stays && line_has_op(s1l, l1, "mul") == !stays,
                  "%s: the scale is in the %s:\n%s", ctx,
                  line_has_op(s0l, l0, "mul") ? "epilogue" : "reduction", plan);
    /* the plain p @ v (and t @ w: the same description) once; the scaled q @ k apart */
    ck_assert_msg(compiled == (stays ? 3u : 2u), "%s: %llu kernels compiled:\n%s", ctx,
                  (unsigned long long)compiled, plan);
    free(plan);
    kiln_program_free(p);

    ts_bufs in = {0};
    ts_bufs_for_inputs(g, &in);
    ts_rng r;
    ts_rng_seed(&r, base_seed() + 0x70000 + (uint64_t)_i);
    for (int k = 0; k < in.n; k++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_input(g, k, &vi);
        ts_random_elements(&r, vi.dtype, in.buf[k], vi.count, true);
    }
    bool all[TS_MAXIO];
    for (int k = 0; k < TS_MAXIO; k++)
        all[k] = true;
    ts_bounds bd;
    ts_bounds_for(g, &in, all, &bd);
    ck_assert_msg(bd.finite > 0, "%s: no element has a finite bound", ctx);
    ts_tol tols[TS_MAXIO];
    for (int k = 0; k < kiln_graph_num_outputs(g); k++)
        tols[k] = (ts_tol){.kind = TS_TOL_BOUND, .bound = bd.bound[k]};
    ts_check_fused_eager(g, &in, tols, ctx);
    ts_bounds_free(&bd);
    ts_bufs_free(&in);
    kiln_graph_free(g);
    free(text);
    free(extra_in);
    free(extra_out);
}
END_TEST

/* Slice i: case i / 4, dtype F32 or F64 (i % 2), shape (i / 2) % 2. */
START_TEST(test_epilogues)
{
    const ecase *e = &epi_cases[_i / 4];
    kiln_dtype t = _i % 2 ? F64 : F32;
    const int64_t *sh = epi_shapes[(_i / 2) % 2];
    int64_t M = sh[0], N = sh[1], K = sh[2];
    char *ins = strf("x: $T[$M,$K], W: $T[$K,$N]%s", e->ins);
    mcase c = {.name = e->name, .ins = ins, .a = "x", .b = "W", .tail = e->tail, .ytype = e->ytype,
               .M = M, .N = N, .K = K};
    char *text = case_text(&c, t);
    kiln_graph *g = ts_parse(text);
    char *name = expand(e->name, t, M, N, K);
    char ctx[200];
    snprintf(ctx, sizeof ctx, "epilogue %s, %s, M=%lld N=%lld K=%lld", name, kiln_dtype_name(t),
             (long long)M, (long long)N, (long long)K);
    check_epilogue_plan(g, e->ops, ctx);

    kiln_value_info yi = KILN_VALUE_INFO_INIT;
    kiln_graph_output(g, 0, &yi);
    for (int how = 0; how < 2; how++) {
        fill_kind fk = how ? FILL_UNIFORM : FILL_DYADIC;
        uint64_t seed = base_seed() + 0x40000 + (uint64_t)(_i * 2 + how);
        ts_bufs in = {0}, fused = {0}, eager = {0}, want = {0};
        ck_assert(make_inputs(g, seed, fk, &in));
        char *err = ts_run_mode(g, KILN_MODE_FUSED, &in, &fused, 0xa5);
        ck_assert_msg(err == NULL, "%s: fused: %s", ctx, err);
        err = ts_run_mode(g, KILN_MODE_EAGER, &in, &eager, 0x5a);
        ck_assert_msg(err == NULL, "%s: eager: %s", ctx, err);
        err = ts_run_mode(g, KILN_MODE_INTERP, &in, &want, 0x3c);
        ck_assert_msg(err == NULL, "%s: interp: %s", ctx, err);
        char *msg = NULL;
        size_t mlen = 0;
        FILE *f = open_memstream(&msg, &mlen);
        /* fused and eager: the same chain, the same bytes */
        size_t bad = ts_compare(f, "fused vs eager", yi.dtype, yi.count, fused.buf[0], eager.buf[0],
                                NULL);
        ts_tol tol;
        ts_bounds bd = {0};
        if (fk == FILL_DYADIC && e->exact) {
            /* the matmul exact, and the ops after it: exact (see the header) */
            tol = (ts_tol){.kind = TS_TOL_EXACT};
        } else if (!is_float(yi.dtype)) {
            /* a cast to i32 on uniform inputs: a matmul within its bound may cross an
             * integer */
            tol = (ts_tol){.kind = TS_TOL_SKIP};
        } else {
            const bool which[TS_MAXIO] = {true};
            ts_bounds_for(g, &in, which, &bd);
            /* inputs in [-2, 2]: no element escapes the bound (an infinite one passes all) */
            ck_assert_msg(bd.infinite == 0, "%s: %zu elements without a bound", ctx, bd.infinite);
            tol = (ts_tol){.kind = TS_TOL_BOUND, .bound = bd.bound[0], .zero_sign = true};
        }
        bad += ts_compare(f, fk == FILL_DYADIC ? "vs reference, dyadic inputs"
                                               : "vs reference, uniform inputs",
                          yi.dtype, yi.count, fused.buf[0], want.buf[0], &tol);
        fclose(f);
        ck_assert_msg(bad == 0, "%s, seed 0x%" PRIx64 ":\n%s%s", ctx, seed, msg, text);
        free(msg);
        ts_bounds_free(&bd);
        ts_bufs_free(&in);
        ts_bufs_free(&fused);
        ts_bufs_free(&eager);
        ts_bufs_free(&want);
    }
    free(name);
    kiln_graph_free(g);
    free(text);
    free(ins);
}
END_TEST

/* ---- 5. threads -------------------------------------------------------------------------- */

#define THREADS_SEED (base_seed() + 0x50000)

static const mcase thread_cases[] = {
    {"[300,257] @ [257,333]", "x: $T[$M,$K], W: $T[$K,$N]", NULL, "x", "W", NULL, "$T[$M,$N]", 300,
     333, 257},
    {"gelu(x @ W^T + b)", "x: $T[$M,$K], W: $T[$N,$K], b: $T[$N]",
     "  Wt = permute(W, perm=[1,0])\n", "x", "Wt", "  z = add(h, b)\n  y = gelu(z)\n",
     "$T[$M,$N]", 300, 333, 257},
    {"[3,1,70,129] @ [2,129,90]", "x: $T[3,1,$M,$K], W: $T[2,$K,$N]", NULL, "x", "W", NULL,
     "$T[3,2,$M,$N]", 70, 90, 129},
    {"[200,150] @ [150,120]", "x: $T[$M,$K], W: $T[$K,$N]", NULL, "x", "W", NULL, "$T[$M,$N]", 200,
     120, 150},
    {"[70,9001] @ [9001,50], k blocked", "x: $T[$M,$K], W: $T[$K,$N]", NULL, "x", "W", NULL,
     "$T[$M,$N]", 70, 50, 9001},
    /* skinny: B read in place, columns split across threads */
    {"[1,4000] @ [4000,3001]", "x: $T[$M,$K], W: $T[$K,$N]", NULL, "x", "W", NULL, "$T[$M,$N]", 1,
     3001, 4000},
    {"[3,2000] @ [1500,2000]^T", "x: $T[$M,$K], W: $T[$N,$K]", "  Wt = permute(W, perm=[1,0])\n",
     "x", "Wt", NULL, "$T[$M,$N]", 3, 1500, 2000},
    {"[16,1,129] @ [16,700,129]^T", "q: $T[16,$M,$K], k: $T[16,$N,$K]",
     "  kt = permute(k, perm=[0,2,1])\n", "q", "kt", NULL, "$T[16,$M,$N]", 1, 700, 129},
    /* batched rows: 13 elements in runs of consecutive ones, uneven on 2 and 4 threads */
    {"[13,2,300] @ [13,300,70] + r", "p: $T[13,$M,$K], v: $T[13,$K,$N], r: $T[13,$M,$N]", NULL,
     "p", "v", "  y = add(h, r)\n", "$T[13,$M,$N]", 2, 70, 300},
    {"[2,900] @ [900,1000], i64", "x: $T[$M,$K], W: $T[$K,$N]", NULL, "x", "W", NULL, "$T[$M,$N]",
     2, 1000, 900},
    /* skinny rows, K in pieces (8 and 16 by the sizes), the pieces on any thread */
    {"[1,3000] @ [3000,200] + b, K in pieces", "x: $T[$M,$K], W: $T[$K,$N], b: $T[$N]", NULL, "x",
     "W", "  y = add(h, b)\n", "$T[$M,$N]", 1, 200, 3000},
    {"[3,1100] @ [1100,700], K in pieces", "x: $T[$M,$K], W: $T[$K,$N]", NULL, "x", "W", NULL,
     "$T[$M,$N]", 3, 700, 1100},
};
static const kiln_dtype thread_dtypes[NELEM(thread_cases)] = {F32, F32, F64, I32, F32, F32,
                                                              F64, F32, F32, I64, F32, F64};

/* Child: every case in FUSED then EAGER, the output's bytes after the pool size.  No Check
 * calls: it runs outside any test. */
static int
threads_child(const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return 2;
    kiln_stats st = KILN_STATS_INIT;
    kiln_jit_stats(&st);
    int32_t threads = st.threads;
    fwrite(&threads, sizeof threads, 1, f);
    for (size_t k = 0; k < NELEM(thread_cases); k++)
        for (int m = 0; m < 2; m++) {
            char *text = case_text(&thread_cases[k], thread_dtypes[k]);
            kiln_graph *g = parse_or_null(text);
            ts_bufs in = {0};
            if (!g || !make_inputs(g, THREADS_SEED + k, FILL_UNIFORM, &in))
                return 3;
            kiln_value_info vi = KILN_VALUE_INFO_INIT;
            kiln_graph_output(g, 0, &vi);
            void *out = malloc(vi.bytes);
            if (!out)
                return 4;
            memset(out, 0xa5, vi.bytes);
            kiln_options o = KILN_OPTIONS_INIT;
            o.mode = m ? KILN_MODE_EAGER : KILN_MODE_FUSED;
            kiln_program *p = NULL;
            if (kiln_program_compile(g, &o, &p) != KILN_OK ||
                kiln_program_run(p, (const void *const *)in.buf, &out) != KILN_OK) {
                fprintf(stderr, "threads child: %s\n", kiln_errmsg());
                return 5;
            }
            fwrite(out, 1, vi.bytes, f);
            free(out);
            kiln_program_free(p);
            ts_bufs_free(&in);
            kiln_graph_free(g);
            free(text);
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
    ts_threads_children("contract", bytes, len);
    /* and the results are the reference's, within the bounds */
    size_t off = 4;
    for (size_t k = 0; k < NELEM(thread_cases); k++) {
        const mcase *c = &thread_cases[k];
        kiln_dtype t = thread_dtypes[k];
        char *text = case_text(c, t);
        kiln_graph *g = ts_parse(text);
        ts_bufs in = {0}, want = {0};
        ck_assert(make_inputs(g, THREADS_SEED + k, FILL_UNIFORM, &in));
        char *err = ts_run_mode(g, KILN_MODE_INTERP, &in, &want, 0x5a);
        ck_assert_msg(err == NULL, "%s", err);
        ts_bounds bd;
        ts_tol tol = case_tol(g, &in, &bd);
        ck_assert_msg(bd.infinite == 0, "%s: %zu elements without a bound", c->name, bd.infinite);
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_output(g, 0, &vi);
        for (int m = 0; m < 2; m++) {
            ck_assert_uint_le(off + vi.bytes, len[0]);
            char what[96];
            snprintf(what, sizeof what, "%s %s, %s", c->name, kiln_dtype_name(t),
                     m ? "eager" : "fused");
            ck_assert_msg(ts_compare(stderr, what, vi.dtype, vi.count, bytes[0] + off, want.buf[0],
                                     &tol) == 0,
                          "%s: differs from the reference", what);
            off += vi.bytes;
        }
        ts_bounds_free(&bd);
        ts_bufs_free(&in);
        ts_bufs_free(&want);
        kiln_graph_free(g);
        free(text);
    }
    ck_assert_uint_eq(off, len[0]);
    for (int k = 0; k < 3; k++)
        free(bytes[k]);
}
END_TEST

/* ---- 6. constant weights ----------------------------------------------------------------- */

/* x [B?, M, K] (an input) @ W (a constant: [K,N], or its transpose [N,K] permuted, or
 * [B,K,N]), captured through the tensor API.  The constant's values are new on every call
 * (a process-wide counter), so no program of it is in the cache yet. */
typedef enum wkind { W_PLAIN, W_TRANSPOSED, W_BATCHED } wkind;
enum { CM = 33, CN = 100, CK = 64, CB = 3 };

static kiln_graph *
const_graph(wkind w, float *x, float *W)
{
    static unsigned calls;
    ts_rng r;
    ts_rng_seed(&r, base_seed() + 0x60000 + calls++);
    int64_t B = w == W_BATCHED ? CB : 1;
    fill(&r, F32, x, (size_t)(B * CM * CK), FILL_UNIFORM);
    fill(&r, F32, W, (size_t)(B * CK * CN), FILL_UNIFORM);
    kiln_device *dev = kiln_device_new();
    ck_assert_ptr_nonnull(dev);
    kiln_scope s = kiln_scope_begin(dev);
    int64_t xd[3] = {CB, CM, CK}, wd[3] = {CB, CK, CN}, td[2] = {CN, CK};
    kiln_tensor xt = w == W_BATCHED ? kiln_input(dev, "x", F32, 3, xd)
                                    : kiln_input(dev, "x", F32, 2, xd + 1);
    kiln_tensor Wt;
    if (w == W_TRANSPOSED) {
        /* the constant holds W transposed: Wc[n][k] = W[k][n] */
        float *wc = malloc(sizeof(float) * CK * CN);
        ck_assert_ptr_nonnull(wc);
        for (int k = 0; k < CK; k++)
            for (int n = 0; n < CN; n++)
                wc[n * CK + k] = W[k * CN + n];
        static const int perm[2] = {1, 0};
        Wt = kiln_permute(kiln_constant(dev, F32, 2, td, wc), 2, perm);
        free(wc);
    } else {
        Wt = w == W_BATCHED ? kiln_constant(dev, F32, 3, wd, W)
                            : kiln_constant(dev, F32, 2, wd + 1, W);
    }
    kiln_tensor h = kiln_matmul(xt, Wt);
    kiln_graph *g = NULL;
    ck_assert_msg(kiln_scope_end_graph(s, 1, &h, NULL, &g) == KILN_OK, "%s", kiln_errmsg());
    ck_assert_int_eq(kiln_device_free(dev), KILN_OK);
    return g;
}

static kiln_program *
compile_mode(const kiln_graph *g, kiln_mode mode)
{
    kiln_options o = KILN_OPTIONS_INIT;
    o.mode = mode;
    kiln_program *p = NULL;
    ck_assert_msg(kiln_program_compile(g, &o, &p) == KILN_OK, "%s", kiln_errmsg());
    return p;
}

static uint64_t
packed_now(void)
{
    kiln_stats st = KILN_STATS_INIT;
    kiln_jit_stats(&st);
    return st.weights_packed;
}

/* Run p on x and compare with the reference interpreter on p's graph, within the bound
 * `kiln check` propagates. */
static void
run_const(kiln_program *p, const float *x, const char *ctx)
{
    const kiln_graph *g = kiln_program_graph(p);
    ts_bufs in = {0}, want = {0};
    ts_bufs_for_inputs(g, &in);
    kiln_value_info xi = KILN_VALUE_INFO_INIT, yi = KILN_VALUE_INFO_INIT;
    kiln_graph_input(g, 0, &xi);
    kiln_graph_output(g, 0, &yi);
    memcpy(in.buf[0], x, xi.bytes);
    char *err = ts_run_mode(g, KILN_MODE_INTERP, &in, &want, 0x5a);
    ck_assert_msg(err == NULL, "%s: %s", ctx, err);
    const bool which[TS_MAXIO] = {true};
    ts_bounds bd;
    ts_bounds_for(g, &in, which, &bd);
    ck_assert_uint_eq(bd.infinite, 0);
    void *y = malloc(yi.bytes);
    ck_assert_ptr_nonnull(y);
    memset(y, 0xa5, yi.bytes);
    void *out[1] = {y};
    ck_assert_msg(kiln_program_run(p, (const void *const *)in.buf, out) == KILN_OK, "%s: %s", ctx,
                  kiln_errmsg());
    ts_tol tol = {.kind = TS_TOL_BOUND, .bound = bd.bound[0], .zero_sign = true};
    ck_assert_msg(ts_compare(stderr, ctx, yi.dtype, yi.count, y, want.buf[0], &tol) == 0,
                  "%s: wrong result", ctx);
    free(y);
    ts_bounds_free(&bd);
    ts_bufs_free(&want);
    ts_bufs_free(&in);
}

START_TEST(test_constant_packed_once)
{
    static const char *const names[3] = {"constant W", "constant W transposed",
                                         "constant batched W"};
    wkind w = (wkind)_i;
    float *x = malloc(sizeof(float) * CB * CM * CK), *W = malloc(sizeof(float) * CB * CK * CN);
    ck_assert(x && W);
    kiln_graph *g = const_graph(w, x, W);
    kiln_stats s0 = KILN_STATS_INIT;
    kiln_jit_stats(&s0);
    kiln_program *p = compile_mode(g, KILN_MODE_FUSED);
    kiln_stats s1 = KILN_STATS_INIT;
    kiln_jit_stats(&s1);
    ck_assert_msg(s1.plan_misses == s0.plan_misses + 1, "%s: the program was not compiled afresh",
                  names[w]);
    ck_assert_msg(s1.weights_packed == s0.weights_packed + 1,
                  "%s: compiling packed %" PRIu64 " constant operands, want 1", names[w],
                  s1.weights_packed - s0.weights_packed);
    for (int run = 0; run < 3; run++)
        run_const(p, x, names[w]);
    ck_assert_msg(packed_now() == s1.weights_packed, "%s: running packed the constant again",
                  names[w]);
    /* the same graph again: the cached program, nothing packed */
    kiln_program *p2 = compile_mode(g, KILN_MODE_FUSED);
    kiln_stats s2 = KILN_STATS_INIT;
    kiln_jit_stats(&s2);
    ck_assert_msg(s2.plan_hits == s1.plan_hits + 1, "%s: no program cache hit", names[w]);
    ck_assert_msg(s2.weights_packed == s1.weights_packed,
                  "%s: a program cache hit packed %" PRIu64 " constant operands", names[w],
                  s2.weights_packed - s1.weights_packed);
    run_const(p2, x, names[w]);
    /* another program of it (eager): packed once for that program.  Except a transposed
     * constant: eager mode materialises the permute (one kernel per op), so B is a
     * temporary, packed on every run like any other operand, and the counter stays. */
    kiln_program *pe = compile_mode(g, KILN_MODE_EAGER);
    uint64_t after = packed_now(), want = w == W_TRANSPOSED ? 0 : 1;
    char *plan = ts_plan_text(pe);
    ck_assert_msg(after == s2.weights_packed + want,
                  "%s, eager: compiling packed %" PRIu64 " constant operands, want %" PRIu64
                  ":\n%s",
                  names[w], after - s2.weights_packed, want, plan);
    free(plan);
    for (int run = 0; run < 2; run++)
        run_const(pe, x, names[w]);
    ck_assert_uint_eq(packed_now(), after);
    kiln_program_free(p);
    kiln_program_free(p2);
    kiln_program_free(pe);
    kiln_graph_free(g);
    free(x);
    free(W);
}
END_TEST

/* ---- 7. special values ------------------------------------------------------------------- */

static const mcase special_cases[] = {
    {"plain", "a: $T[$M,$K], b: $T[$K,$N]", NULL, "a", "b", NULL, "$T[$M,$N]", 17, 35, 19},
    {"W transposed", "x: $T[$M,$K], W: $T[$N,$K]", "  Wt = permute(W, perm=[1,0])\n", "x", "Wt",
     NULL, "$T[$M,$N]", 33, 40, 31},
    {"batched", "x: $T[2,1,$M,$K], W: $T[3,$K,$N]", NULL, "x", "W", NULL, "$T[2,3,$M,$N]", 15, 33,
     7},
    {"bias + relu", "x: $T[$M,$K], W: $T[$K,$N], b: $T[$N]", NULL, "x", "W",
     "  z = add(h, b)\n  y = relu(z)\n", "$T[$M,$N]", 33, 100, 31},
    {"skinny rows", "a: $T[$M,$K], b: $T[$K,$N]", NULL, "a", "b", NULL, "$T[$M,$N]", 1, 35, 19},
    {"skinny dots", "x: $T[$M,$K], W: $T[$N,$K]", "  Wt = permute(W, perm=[1,0])\n", "x", "Wt",
     NULL, "$T[$M,$N]", 3, 40, 31},
};

START_TEST(test_special_values)
{
    for (int d = 0; d < 2; d++)
        check_case(&special_cases[_i], d ? F64 : F32,
     base_seed() + 0x70000 + (uint64_t)(_i * 2 + d),
                   FILL_SPECIAL);
}
END_TEST

/* Sums of -0 products are -0 (the sum starts from the first product), K = 0 gives +0. */
static const struct {
    const char *text;
    float a, b; /* every element of the inputs */
} zero_cases[] = {
    {"graph z(a: $T[1,1], b: $T[1,1]) -> (h: $T[1,1]) {\n  h = matmul(a, b)\n}\n", -0.0f, 1},
    {"graph z(a: $T[3,4], b: $T[4,37]) -> (h: $T[3,37]) {\n  h = matmul(a, b)\n}\n", 0, -2},
    {"graph z(a: $T[17,5], b: $T[5,33]) -> (h: $T[17,33]) {\n  h = matmul(a, b)\n}\n", -0.0f,
     -0.0f},
    {"graph z(a: $T[40], b: $T[40]) -> (h: $T[]) {\n  h = matmul(a, b)\n}\n", -0.0f, 3},
    {"graph z(a: $T[2,3,0], b: $T[0,5]) -> (h: $T[2,3,5]) {\n  h = matmul(a, b)\n}\n", 0, 0},
    /* skinny, dots form: -0 through the masked last part of k and the lane sums; K = 0 */
    {"graph z(a: $T[2,37], w: $T[5,37]) -> (h: $T[2,5]) {\n  b = permute(w, perm=[1,0])\n"
     "  h = matmul(a, b)\n}\n", -0.0f, 2},
    {"graph z(a: $T[2,0], w: $T[5,0]) -> (h: $T[2,5]) {\n  b = permute(w, perm=[1,0])\n"
     "  h = matmul(a, b)\n}\n", 0, 0},
    /* skinny rows, K in pieces: each piece's sum -0, and -0 added in order */
    {"graph z(a: $T[1,2000], b: $T[2000,70]) -> (h: $T[1,70]) {\n  h = matmul(a, b)\n}\n", -0.0f,
     5},
};

/* The compiled sum must start from -0, not +0, or [[-0.0]] @ [[1]] comes out +0 (as it did
 * when this test was written).  Both dtypes are checked before the test fails. */
START_TEST(test_signed_zero)
{
    char *reports[2] = {NULL, NULL};
    for (int d = 0; d < 2; d++) {
        kiln_dtype t = d ? F64 : F32;
        char *text = expand(zero_cases[_i].text, t, 0, 0, 0);
        kiln_graph *g = ts_parse(text);
        ts_bufs in = {0};
        ts_bufs_for_inputs(g, &in);
        for (int k = 0; k < 2; k++) {
            kiln_value_info vi = KILN_VALUE_INFO_INIT;
            kiln_graph_input(g, k, &vi);
            for (size_t e = 0; e < vi.count; e++)
                put_f(t, in.buf[k], e, k ? zero_cases[_i].b : zero_cases[_i].a);
        }
        /* all exact: every |product| is 0 */
        static const kiln_mode modes[2] = {KILN_MODE_FUSED, KILN_MODE_EAGER};
        reports[d] = ts_check_modes(g, &in, NULL, 2, modes);
        ts_bufs_free(&in);
        kiln_graph_free(g);
        free(text);
    }
    ck_assert_msg(!reports[0] && !reports[1], "signed zeros, case %d:\nf32: %s\nf64: %s", _i,
                  reports[0] ? reports[0] : "ok\n", reports[1] ? reports[1] : "ok\n");
}
END_TEST

/* ---- 8. skinny contractions: B read in place ---------------------------------------------- */

/* Few rows per batch element: the SKINNY kernel reads B in place, by rows (B's N stride 1)
 * or by dot products along K (B transposed); more rows than one register tile holds, or a
 * B that packing must gather or convert, go to the packed CONTRACTION kernel.  Every case at
 * every M of skinny_ms, both sides of the choice, fused and eager against the reference
 * under the matmul bound (any summation order is within it). */
static const int64_t skinny_ms[] = {1, 2, 3, 7, 13, 14, 15, 31};

static const mcase skinny_cases[] = {
    {"rows: x @ W", "x: $T[$M,$K], W: $T[$K,$N]", NULL, "x", "W", NULL, "$T[$M,$N]", 0, 100, 37},
    {"dots: x @ W^T", "x: $T[$M,$K], W: $T[$N,$K]", "  Wt = permute(W, perm=[1,0])\n", "x", "Wt",
     NULL, "$T[$M,$N]", 0, 100, 37},
    {"rows: a slice of W", "x: $T[$M,$K], Y: $T[50,120]",
     "  W = slice(Y, start=[5,7], stop=[42,107])\n",
     "x", "W", NULL, "$T[$M,$N]", 0, 100, 37},
    {"dots: a slice of W^T", "x: $T[$M,$K], Y: $T[110,40]",
     "  W = slice(Y, start=[3,1], stop=[103,38])\n  Wt = permute(W, perm=[1,0])\n", "x", "Wt", NULL,
     "$T[$M,$N]", 0, 100, 37},
    {"packed: a slice with steps", "x: $T[$M,$K], Y: $T[74,210]",
     "  W = slice(Y, start=[0,9], stop=[74,209], step=[2,2])\n", "x", "W", NULL, "$T[$M,$N]", 0,
     100, 37},
    {"rows: W concatenated along K (a cache grown by rows)",
     "x: $T[$M,$K], W1: $T[30,$N], W2: $T[7,$N]",
     "  W = concat(W1, W2, axis=0)\n", "x", "W", NULL, "$T[$M,$N]", 0, 100, 37},
    {"dots: a key cache concatenated, transposed", "q: $T[$M,$K], kp: $T[93,$K], kn: $T[7,$K]",
     "  kc = concat(kp, kn, axis=0)\n  kt = permute(kc, perm=[1,0])\n", "q", "kt", NULL,
     "$T[$M,$N]", 0, 100, 37},
    {"rows: per-head p @ three value parts along K",
     "p: $T[3,$M,$K], v1: $T[3,20,$N], v2: $T[3,16,$N], v3: $T[3,1,$N]",
     "  v = concat(v1, v2, v3, axis=1)\n", "p", "v", NULL, "$T[3,$M,$N]", 0, 100, 37},
    {"dots: per-head q @ concat(kp, kn)^T", "q: $T[3,$M,$K], kp: $T[3,93,$K], kn: $T[3,7,$K]",
     "  kc = concat(kp, kn, axis=1)\n  kt = permute(kc, perm=[0,2,1])\n", "q", "kt", NULL,
     "$T[3,$M,$N]", 0, 100, 37},
    {"dots: per-head q @ k^T", "q: $T[3,$M,$K], k: $T[3,$N,$K]",
     "  kt = permute(k, perm=[0,2,1])\n",
     "q", "kt", NULL, "$T[3,$M,$N]", 0, 100, 37},
    {"rows: per-head p @ v", "p: $T[3,$M,$K], v: $T[3,$K,$N]", NULL, "p", "v", NULL,
     "$T[3,$M,$N]", 0, 100, 37},
    {"[K] @ [K,N]", "v: $T[$K], W: $T[$K,$N]", NULL, "v", "W", NULL, "$T[$N]", 1, 100, 37},
    {"dots: [M,K] @ [K]", "x: $T[$M,$K], v: $T[$K]", NULL, "x", "v", NULL, "$T[$M]", 0, 1, 37},
    {"long K, wide N", "x: $T[$M,$K], W: $T[$K,$N]", NULL, "x", "W", NULL, "$T[$M,$N]", 0, 2500,
     1100},
    /* 560 KB of f32 (1120 KB of f64): K in 2 (4) pieces, the last shorter; with an epilogue */
    {"rows: long K in pieces", "x: $T[$M,$K], W: $T[$K,$N], r: $T[$M,$N]", NULL, "x", "W",
     "  y = add(h, r)\n", "$T[$M,$N]", 0, 100, 1403},
};

START_TEST(test_skinny)
{
    const mcase *base = &skinny_cases[_i];
    for (size_t im = 0; im < NELEM(skinny_ms); im++) {
        mcase c = *base;
        if (c.M == 0)
            c.M = skinny_ms[im];
        else if (im > 0)
            break;
        for (int d = 0; d < 4; d++)
            check_case(&c, all_dtypes[d], base_seed() + 0x80000 + (uint64_t)(_i * 256 + im * 4 + d),
                       FILL_UNIFORM);
    }
}
END_TEST

/* The choice, in the fused plan: a one-row matmul with B an input allocates no temporaries (B is
 * read in place, not packed) and says why; transposed B reads dot products; more rows than a
 * tile holds, or a B shared by batch elements, pack it once; a B strided both ways is
 * packed.  Sums of -0 products stay -0 and K = 0 gives +0 in both forms (special values
 * against the reference). */
static const struct {
    const char *text;
    const char *want;  /* in step 0's line */
    bool temps;        /* the plan has temporaries (a packed copy of B) */
} skinny_plans[] = {
    {"graph g(x: f32[1,512], W: f32[512,300]) -> (y: f32[1,300]) {\n  y = matmul(x, W)\n}\n",
     "skinny contraction kernel f32[1,512] @ [512,300] -> [1,300], rows of B", false},
    {"graph g(x: f32[2,512], W: f32[300,512]) -> (y: f32[2,300]) {\n"
     "  Wt = permute(W, perm=[1,0])\n  y = matmul(x, Wt)\n}\n",
     "skinny contraction kernel f32[2,512] @ [512,300] -> [2,300], dot products along K", false},
    {"graph g(x: f64[1,64], W: f64[64,300], b: f64[300]) -> (y: f64[1,300]) {\n"
     "  h = matmul(x, W)\n  z = add(h, b)\n  y = gelu(z)\n}\n",
     "skinny contraction kernel", false},
    {"graph g(x: f32[1,3000], W: f32[3000,200]) -> (y: f32[1,200]) {\n  y = matmul(x, W)\n}\n",
     "register tiles; K in 8 pieces of 376 rows of B", false},
    {"graph g(x: f32[64,512], W: f32[512,300]) -> (y: f32[64,300]) {\n  y = matmul(x, W)\n}\n",
     "contraction kernel f32[64,512] @ [512,300] -> [64,300]", true},
    {"graph g(x: f32[4,1,512], W: f32[512,300]) -> (y: f32[4,1,300]) {\n  y = matmul(x, W)\n}\n",
     "packed: packing B once buys reuse", true},
    {"graph g(x: f32[1,40], Y: f32[80,600]) -> (y: f32[1,300]) {\n"
     "  W = slice(Y, start=[0,0], stop=[80,600], step=[2,2])\n  y = matmul(x, W)\n}\n",
     "packed: B is contiguous along neither", true},
};

START_TEST(test_skinny_plan)
{
    kiln_graph *g = ts_parse(skinny_plans[_i].text);
    {
        kiln_options o = KILN_OPTIONS_INIT;
        o.mode = KILN_MODE_FUSED;
        kiln_program *p = NULL;
        ck_assert_msg(kiln_program_compile(g, &o, &p) == KILN_OK, "%s", kiln_errmsg());
        char *plan = ts_plan_text(p);
        size_t len = 0;
        const char *line = plan_step(plan, 0, &len);
        char *l0 = line ? strf("%.*s", (int)len, line) : NULL;
        ck_assert_msg(l0 && strstr(l0, skinny_plans[_i].want),
                      "case %d: want \"%s\" in step 0:\n%s", _i, skinny_plans[_i].want, plan);
        free(l0);
        bool temps = strstr(plan, ", 0 bytes of temporaries") == NULL;
        ck_assert_msg(temps == skinny_plans[_i].temps, "case %d: temporaries %s:\n%s", _i,
                      temps ? "planned" : "none", plan);
        /* explained on demand (this program's plan was built without its explanations) or
         * when built (a program compiled for dumps): the same text past the first line */
        kiln_options od = KILN_OPTIONS_INIT;
        od.flags = KILN_KEEP_DUMPS;
        kiln_program *pd = NULL;
        ck_assert_msg(kiln_program_compile(g, &od, &pd) == KILN_OK, "%s", kiln_errmsg());
        char *plan_d = ts_plan_text(pd);
        ck_assert_msg(!strcmp(strchr(plan, '\n'), strchr(plan_d, '\n')),
                      "case %d: plans differ:\n%s\n---- built for dumps:\n%s", _i, plan, plan_d);
        free(plan_d);
        kiln_program_free(pd);
        free(plan);
        kiln_program_free(p);
    }
    kiln_graph_free(g);
}
END_TEST

/* Rows-form skinny steps run their k loop in a kernel of its own, the same description for
 * every step of one dtype and tile whatever its epilogue: three f32 steps (gelu of a bias,
 * a residual, none) and an f64 one compile three epilogues and one core of f32, one of each
 * of f64 (caches bypassed); the plan counts two kernels a step. */
START_TEST(test_shared_core)
{
    kiln_graph *g =
        ts_parse("graph sc(x: f32[1,256], w1: f32[256,512], b1: f32[512], w2: f32[256,300], "
                 "r: f32[1,300], w3: f32[256,200], xd: f64[1,256], wd: f64[256,100]) -> "
                 "(y1: f32[1,512], y2: f32[1,300], y3: f32[1,200], y4: f64[1,100]) {\n"
                 "  h1 = matmul(x, w1)\n  z1 = add(h1, b1)\n  y1 = gelu(z1)\n"
                 "  h2 = matmul(x, w2)\n  y2 = add(h2, r)\n"
                 "  y3 = matmul(x, w3)\n  y4 = matmul(xd, wd)\n}\n");
    uint64_t compiled;
    kiln_program *p = compile_uncached(g, KILN_MODE_FUSED, "shared core", &compiled);
    char *plan = ts_plan_text(p);
    int steps = -1, kernels = -1;
    ck_assert_msg(sscanf(plan, "plan: %d steps, %d kernels", &steps, &kernels) == 2 && steps == 4 &&
                      kernels == 8 && ts_count(plan, "rows of B (vectors along N)") == 4,
                  "want 4 rows steps, 8 kernels:\n%s", plan);
    ck_assert_msg(compiled == 6, "%llu kernels compiled, want 6:\n%s", (unsigned long long)compiled,
                  plan);
    free(plan);
    kiln_program_free(p);
    /* kiln dump --llvm shows each step's core after its kernel */
    kiln_options od = KILN_OPTIONS_INIT;
    od.flags = KILN_KEEP_DUMPS;
    ck_assert_msg(kiln_program_compile(g, &od, &p) == KILN_OK, "%s", kiln_errmsg());
    char *ir = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&ir, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(kiln_program_dump(p, KILN_VIEW_LLVM, f), KILN_OK);
    fclose(f);
    ck_assert_msg(ts_count(ir, "'s core: its k loop") == 4 && !strstr(ir, "(not captured"),
                  "want each of the 4 steps' cores, captured: %d",
                  ts_count(ir, "'s core: its k loop"));
    free(ir);
    kiln_program_free(p);
    kiln_graph_free(g);
}
END_TEST

/* A decoder's attention written the natural way: the new row's key and value concatenated
 * to the caches, q @ k^T, softmax, p @ v.  The two matmuls read B in place, part by part
 * (simplify.c splits them), so in fused mode neither cache is copied: the temporaries are
 * smaller than one cache (1.6 MB of them before, two concats of 1.5 MB); and the results
 * are the reference's within kiln check's propagated bound, fused and eager. */
START_TEST(test_concat_in_place)
{
    const char *text =
        "graph kv(q: f32[12,1,64], kp: f32[12,512,64], kn: f32[12,1,64], vp: f32[12,512,64], "
        "vn: f32[12,1,64]) -> (o: f32[12,1,64]) {\n"
        "  k = concat(kp, kn, axis=1)\n  kt = permute(k, perm=[0,2,1])\n  s = matmul(q, kt)\n"
        "  c = full(value=0.125) : f32[]\n  s2 = mul(s, c)\n"
        "  m = reduce_max(s2, axes=[2], keepdim=true)\n  d = sub(s2, m)\n  e = exp(d)\n"
        "  z = reduce_sum(e, axes=[2], keepdim=true)\n  p = div(e, z)\n"
        "  v = concat(vp, vn, axis=1)\n  o = matmul(p, v)\n}\n";
    kiln_graph *g = ts_parse(text);
    for (int m = 0; m < 2; m++) {
        kiln_options o = KILN_OPTIONS_INIT;
        o.mode = m ? KILN_MODE_EAGER : KILN_MODE_FUSED;
        kiln_program *p = NULL;
        ck_assert_msg(kiln_program_compile(g, &o, &p) == KILN_OK, "%s", kiln_errmsg());
        char *plan = ts_plan_text(p);
        ck_assert_msg(strstr(plan, "2 matmuls split"), "no split in the %s plan",
                      m ? "eager" : "fused");
        unsigned long long temps = 0;
        const char *t = strstr(plan, " bytes of temporaries");
        ck_assert_ptr_nonnull(t);
        while (t > plan && t[-1] >= '0' && t[-1] <= '9')
            t--;
        temps = strtoull(t, NULL, 10);
        /* (eager mode materialises every view, the permuted cache too) */
        ck_assert_msg(m || temps < 12 * 512 * 64 * 4, "%llu bytes of temporaries", temps);
        free(plan);
        kiln_program_free(p);
    }
    ts_bufs in = {0};
    ts_bufs_for_inputs(g, &in);
    ts_rng r;
    ts_rng_seed(&r, base_seed() + 0x90000);
    for (int i = 0; i < in.n; i++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_input(g, i, &vi);
        ts_random_elements(&r, vi.dtype, in.buf[i], vi.count, true);
    }
    bool which[1] = {true};
    ts_bounds b;
    ts_bounds_for(g, &in, which, &b);
    ts_tol tol = {.kind = TS_TOL_BOUND, .bound = b.bound[0]};
    ts_check_fused_eager(g, &in, &tol, "attention over concatenated caches");
    ts_bounds_free(&b);
    ts_bufs_free(&in);
    kiln_graph_free(g);
}
END_TEST

/* A matmul whose contracted dim is 1 is a broadcast mul (simplify.c's k1_matmul): no
 * contraction kernel of its own.
 *   _i 0-3, f32 f64 i32 i64: K = 1 matmuls of ranks 2 @ 2, 3 @ 2 (batch broadcast) and
 *   2 @ 3, and a 1-D @ 2-D one that stays a matmul (its added axis is dropped), with inf,
 *   NaN and ±0 among the operands: every element is one product, so the results equal the
 *   reference's bit for bit (EXACT), fused and eager; the plans hold one contraction.
 *   _i 4-5, f32 f64: a decoder's attention output over a cache and a new row,
 *   p[:, :, :T] @ v_past + p[:, :, T:] @ v_new: one fused kernel (the contraction of the
 *   cache, the new row's product and the sum in its epilogue, one kernel compiled), within
 *   the propagated bound (the epilogue adds the same two values the reference does). */
START_TEST(test_k1_matmul)
{
    static const kiln_dtype dts[4] = {F32, F64, I32, I64};
    kiln_dtype t = _i < 4 ? dts[_i] : _i == 4 ? F32 : F64;
    const char *tn = kiln_dtype_name(t);
    bool attn = _i >= 4;
    char *text = attn
        ? strf("graph o(pp: %s[4,1,40], vp: %s[4,40,16], pn: %s[4,1,1], vn: %s[4,1,16]) -> "
               "(o: %s[4,1,16]) {\n  op = matmul(pp, vp)\n  on = matmul(pn, vn)\n"
               "  o = add(op, on)\n}\n", tn, tn, tn, tn, tn)
        : strf("graph k1(a: %s[3,1], b: %s[1,5], c: %s[2,3,1], d: %s[4,1], e: %s[2,1,6], "
               "f: %s[1], h: %s[1,5]) -> (o1: %s[3,5], o2: %s[2,3,5], o3: %s[2,4,6], "
               "o4: %s[5]) {\n  o1 = matmul(a, b)\n  o2 = matmul(c, b)\n"
               "  o3 = matmul(d, e)\n  o4 = matmul(f, h)\n}\n",
               tn, tn, tn, tn, tn, tn, tn, tn, tn, tn, tn);
    char ctx[64];
    snprintf(ctx, sizeof ctx, "K = 1 %s, %s", attn ? "attention output" : "matmuls", tn);
    kiln_graph *g = ts_parse(text);
    for (int m = 0; m < 2; m++) {
        uint64_t compiled;
        kiln_mode mode = m ? KILN_MODE_EAGER : KILN_MODE_FUSED;
        kiln_program *p = compile_uncached(g, mode, ctx, &compiled);
        char *plan = ts_plan_text(p);
        const char *want = attn ? "1 matmuls of K = 1 made muls" : "3 matmuls of K = 1 made muls";
        ck_assert_msg(strstr(plan, want) && ts_count(plan, "contraction kernel") == 1,
                      "%s, %s: want \"%s\" and one contraction:\n%s", ctx, m ? "eager" : "fused",
                      want, plan);
        if (attn && !m) {
            size_t len = 0, lx = 0;
            const char *l0 = plan_step(plan, 0, &len);
            ck_assert_msg(l0 && !plan_step(plan, 1, &lx) && line_has_op(l0, len, "matmul") &&
                              line_has_op(l0, len, "mul") && line_has_op(l0, len, "add"),
                          "%s: want one step, matmul mul add:\n%s", ctx, plan);
            /* the step's kernel (its epilogue) and its core (the k loop) */
            ck_assert_msg(compiled == 2, "%s: %llu kernels compiled:\n%s", ctx,
                          (unsigned long long)compiled, plan);
        }
        free(plan);
        kiln_program_free(p);
    }
    ts_bufs in = {0};
    ck_assert(make_inputs(g, base_seed() + 0xa0000 + (uint64_t)_i,
                          attn ? FILL_UNIFORM : FILL_SPECIAL, &in));
    if (attn) {
        bool which[1] = {true};
        ts_bounds b;
        ts_bounds_for(g, &in, which, &b);
        ck_assert_msg(b.finite > 0, "%s: no element has a finite bound", ctx);
        ts_tol tol = {.kind = TS_TOL_BOUND, .bound = b.bound[0]};
        ts_check_fused_eager(g, &in, &tol, ctx);
        ts_bounds_free(&b);
    } else {
        ts_check_fused_eager(g, &in, NULL, ctx); /* all EXACT */
    }
    ts_bufs_free(&in);
    kiln_graph_free(g);
    free(text);
}
END_TEST

/* ---- 9. a decode loop through the C API ------------------------------------------------- */

/* A decoder step (lib/check/decoder.c: one layer, D 64, 4 heads, MLP 128, weights as
 * inputs) captured through the tensor API with its K/V caches one row longer every step,
 * as a client generating tokens does: the caches are read in place (the temporaries are
 * smaller than one cache: no copy of it); after the first step no kernel is compiled (the
 * kernels are size-free; only the plan is new), every plan is made from the first step's
 * (lib/jit/resize.c: kiln_stats.plans_resized; under CTest, KILN_TEST_RESIZE=verify also
 * compares it with the plan from scratch) and no temporaries block is allocated (the
 * pool's block, a power of two, still holds the grown temporaries); every step's outputs
 * are the reference's within the bound `kiln check` propagates. */
START_TEST(test_decode_loop)
{
    ck_decoder dec = {.layers = 1, .d = 64, .heads = 4, .ff = 128};
    kiln_device *dev = kiln_device_new();
    ck_assert_ptr_nonnull(dev);
    uint64_t allocs = 0;
    for (int step = 0; step < 6; step++) {
        int64_t t = 40 + step;
        kiln_stats s0 = KILN_STATS_INIT, s1 = KILN_STATS_INIT;
        kiln_jit_stats(&s0);
        kiln_options o = KILN_OPTIONS_INIT;
        kiln_program *p = NULL;
        ck_assert_msg(ck_decoder_capture(dev, &dec, t, &o, &p) == KILN_OK, "step %d: %s", step,
                      kiln_errmsg());
        const kiln_graph *g = kiln_program_graph(p);
        ck_assert_int_eq(kiln_graph_num_inputs(g), ck_decoder_num_inputs(&dec));
        /* the caches are read in place: the temporaries (the score rows, the activations) are
         * smaller than one cache (H * t * D/H floats), never a copy of it */
        char *plan = ts_plan_text(p);
        unsigned long long temps = 0;
        const char *tp = strstr(plan,
     "from the cache), "); /* "plan: ... (n from the cache), B bytes" */
        ck_assert_msg(tp && sscanf(tp + 17, "%llu bytes of temporaries", &temps) == 1,
                      "no temporaries in the plan:\n%s", plan);
        ck_assert_msg(temps < (unsigned long long)(dec.d * t * 4),
                      "step %d: %llu bytes of temporaries, a cache is %lld:\n%s", step, temps,
                      (long long)(dec.d * t * 4), plan);
        free(plan);
        int nout = kiln_graph_num_outputs(g);
        ck_assert_int_eq(nout, ck_decoder_num_outputs(&dec));
        ts_bufs in = {0}, want = {0}, got = {0};
        ck_assert(make_inputs(g, base_seed() + 0x90000 + (uint64_t)step, FILL_UNIFORM, &in));
        got.n = nout;
        for (int i = 0; i < nout; i++) {
            kiln_value_info vi = KILN_VALUE_INFO_INIT;
            kiln_graph_output(g, i, &vi);
            got.buf[i] = malloc(vi.bytes);
            ck_assert_ptr_nonnull(got.buf[i]);
        }
        ck_assert_msg(kiln_program_run(p, (const void *const *)in.buf, got.buf) == KILN_OK, "%s",
                      kiln_errmsg());
        kiln_jit_stats(&s1);
        if (step == 0)
            allocs = s1.workspace_allocs;
        else
            ck_assert_msg(s1.kernel_compiles == s0.kernel_compiles &&
                              s1.workspace_allocs == allocs &&
                              s1.plans_resized == s0.plans_resized + 1,
                          "step %d (caches of %lld rows): %llu kernels compiled, %llu blocks "
                          "allocated since the first step, %llu plans made from a model (1)",
                          step, (long long)t,
                          (unsigned long long)(s1.kernel_compiles - s0.kernel_compiles),
                          (unsigned long long)(s1.workspace_allocs - allocs),
                          (unsigned long long)(s1.plans_resized - s0.plans_resized));
        char *err = ts_run_mode(g, KILN_MODE_INTERP, &in, &want, 0x5a);
        ck_assert_msg(err == NULL, "%s", err);
        bool which[TS_MAXIO];
        for (int i = 0; i < nout; i++)
            which[i] = true;
        ts_bounds b;
        ts_bounds_for(g, &in, which, &b);
        for (int i = 0; i < nout; i++) {
            kiln_value_info vi = KILN_VALUE_INFO_INIT;
            kiln_graph_output(g, i, &vi);
            ts_tol tol = {.kind = TS_TOL_BOUND, .bound = b.bound[i]};
            char what[64];
            snprintf(what, sizeof what, "decode step %d, output %s", step, vi.name);
            ck_assert_msg(ts_compare(stderr, what, vi.dtype, vi.count, got.buf[i], want.buf[i],
                                     &tol) == 0,
                          "%s: beyond the propagated bound", what);
        }
        ts_bounds_free(&b);
        ts_bufs_free(&in);
        ts_bufs_free(&want);
        ts_bufs_free(&got);
        kiln_program_free(p);
    }
    kiln_device_free(dev);
}
END_TEST

/* A decoder whose sizes change every step keeps only its last few plans in the program
 * cache (program.c, PLAN_GROUP_LIMIT: 8), and does not evict another graph's: after 12
 * steps the plan of the latest sizes is a cache hit, the first step's a miss (planned
 * again), and a plan of another generic graph captured before the loop still a hit. */
static void
capture_step(kiln_device *dev, const ck_decoder *dec, int64_t t, bool hit)
{
    kiln_stats s0 = KILN_STATS_INIT, s1 = KILN_STATS_INIT;
    kiln_jit_stats(&s0);
    kiln_options o = KILN_OPTIONS_INIT;
    kiln_program *p = NULL;
    ck_assert_msg(ck_decoder_capture(dev, dec, t, &o, &p) == KILN_OK, "%s", kiln_errmsg());
    kiln_jit_stats(&s1);
    ck_assert_msg(s1.plan_hits - s0.plan_hits == (hit ? 1u : 0u),
                  "%d layer(s), caches of %lld rows: a plan cache %s, expected a %s",
                  dec->layers, (long long)t, s1.plan_hits > s0.plan_hits ? "hit" : "miss",
                  hit ? "hit" : "miss");
    kiln_program_free(p);
}

START_TEST(test_decode_keeps_few_plans)
{
    ck_decoder dec = {.layers = 1, .d = 32, .heads = 2, .ff = 64};
    ck_decoder other = {.layers = 2, .d = 32, .heads = 2, .ff = 64};
    kiln_device *dev = kiln_device_new();
    ck_assert_ptr_nonnull(dev);
    capture_step(dev, &other, 7, false);
    for (int step = 0; step < 12; step++)
        capture_step(dev, &dec, 10 + step, false);
    capture_step(dev, &dec, 10 + 11, true);
    capture_step(dev, &other, 7, true);
    capture_step(dev, &dec, 10, false);
    kiln_device_free(dev);
}
END_TEST

/* The program cache finds plans by the generic hash (sizes left out) and tells a graph's
 * size variants apart by structural equality: one generic graph, x @ W + b, at rows
 * that flip the contraction between skinny (B read in place) and packed, and back, each
 * time against the reference (fused and eager); the second time round every size is a
 * cache hit and must still have its own plan.  A cache that handed one size's plan to
 * another (equality by the generic structure alone) fails here: packed at 2 rows or
 * skinny at 40, and wrong results. */
START_TEST(test_generic_sizes_alternate)
{
    static const int64_t ms[] = {2, 40, 3, 64, 2, 40, 3, 64};
    for (size_t i = 0; i < NELEM(ms); i++) {
        mcase c = {.name = "alternate", .ins = "x: $T[$M,$K], W: $T[$K,$N], b: $T[$N]",
                   .a = "x", .b = "W", .tail = "  y = add(h, b)\n", .ytype = "$T[$M,$N]",
                   .M = ms[i], .N = 300, .K = 96};
        char *text = case_text(&c, F32);
        kiln_graph *g = ts_parse(text);
        kiln_stats s0 = KILN_STATS_INIT, s1 = KILN_STATS_INIT;
        kiln_jit_stats(&s0);
        kiln_options o = KILN_OPTIONS_INIT;
        kiln_program *p = NULL;
        ck_assert_msg(kiln_program_compile(g, &o, &p) == KILN_OK, "%s", kiln_errmsg());
        kiln_jit_stats(&s1);
        bool hit = s1.plan_hits > s0.plan_hits;
        ck_assert_msg(hit == (i >= NELEM(ms) / 2), "M=%lld, round %d: a plan cache %s",
                      (long long)ms[i], (int)(i / (NELEM(ms) / 2)), hit ? "hit" : "miss");
        char *plan = ts_plan_text(p);
        size_t len = 0;
        const char *line = plan_step(plan, 0, &len);
        char *l0 = line ? strf("%.*s", (int)len, line) : NULL;
        bool skinny = l0 && strstr(l0, "skinny contraction kernel");
        ck_assert_msg(l0 && skinny == (ms[i] < 8), "M=%lld: a %s plan:\n%s", (long long)ms[i],
                      skinny ? "skinny" : "packed", plan);
        free(l0);
        free(plan);
        kiln_program_free(p);
        kiln_graph_free(g);
        free(text);
        check_case(&c, F32, base_seed() + 0xa0000 + (uint64_t)i, FILL_UNIFORM);
    }
}
END_TEST

/* ---- 10. held inputs ---------------------------------------------------------------------- */

/* A weight bound per run that a packed matmul reads ([64,300] @ [300,200] + bias, W an
 * input), held (kiln_program_hold_input): packed on the first run only while the caller
 * passes the same pointer (kiln_stats.held_packs); after new data at the same pointer and
 * kiln_program_input_changed, the new results; without saying so, the old weight's results
 * exactly (documented, the copy is the program's); another pointer repacks; released, the
 * program packs per run again and holds nothing.  Every result against the reference. */
static const mcase held_case = {.name = "held", .ins = "x: $T[$M,$K], W: $T[$K,$N], c: $T[$N]",
                                .a = "x", .b = "W", .tail = "  y = add(h, c)\n",
     .ytype = "$T[$M,$N]",
                                .M = 64, .N = 200, .K = 300};

static void
held_check(kiln_program *p, const kiln_graph *g, ts_bufs *in, const void *w, const char *what)
{
    ts_bufs want = {0}, got = {0};
    char *err = ts_run_mode(g, KILN_MODE_INTERP, in, &want, 0x5a);
    ck_assert_msg(err == NULL, "%s", err);
    kiln_value_info vi = KILN_VALUE_INFO_INIT;
    kiln_graph_output(g, 0, &vi);
    got.n = 1;
    got.buf[0] = malloc(vi.bytes);
    const void *ins[3] = {in->buf[0], w, in->buf[2]};
    ck_assert_msg(kiln_program_run(p, ins, got.buf) == KILN_OK, "%s: %s", what, kiln_errmsg());
    ts_bounds bd;
    ts_tol tol = case_tol(g, in, &bd);
    ck_assert_msg(ts_compare(stderr, what, vi.dtype, vi.count, got.buf[0], want.buf[0], &tol) == 0,
                  "%s: differs from the reference", what);
    ts_bounds_free(&bd);
    ts_bufs_free(&want);
    ts_bufs_free(&got);
}

static uint64_t
held_packs(void)
{
    kiln_stats s = KILN_STATS_INIT;
    kiln_jit_stats(&s);
    return s.held_packs;
}

START_TEST(test_held_input)
{
    const mcase *c = &held_case;
    char *text = case_text(c, F32);
    kiln_graph *g = ts_parse(text);
    ts_bufs in = {0};
    ck_assert(make_inputs(g, base_seed() + 0xa0000, FILL_UNIFORM, &in));
    kiln_options o = KILN_OPTIONS_INIT;
    kiln_program *p = NULL;
    ck_assert(kiln_program_compile(g, &o, &p) == KILN_OK);
    ck_assert_int_eq(kiln_program_hold_input(p, 3, 1), KILN_ERR_INVALID_ARG);
    ck_assert_int_eq(kiln_program_hold_input(p, 1, 1), KILN_OK);
    uint64_t h0 = held_packs();
    for (int r = 0; r < 3; r++)
        held_check(p, g, &in, in.buf[1], "held, same pointer");
    ck_assert_uint_eq(held_packs() - h0, 1);

    /* the caller's old result, to compare a stale run with */
    size_t wbytes = 300 * 200 * 4, ybytes = 64 * 200 * 4;
    float *old_y = malloc(ybytes), *stale_y = malloc(ybytes);
    const void *ins[3] = {in.buf[0], in.buf[1], in.buf[2]};
    void *o1[1] = {old_y}, *o2[1] = {stale_y};
    ck_assert(kiln_program_run(p, ins, o1) == KILN_OK);
    /* new data at the same pointer, not said: the old weight's results, exactly */
    float *w = in.buf[1];
    for (size_t e = 0; e < wbytes / 4; e++)
        w[e] = -w[e] * 0.5f;
    ck_assert(kiln_program_run(p, ins, o2) == KILN_OK);
    ck_assert(memcmp(old_y, stale_y, ybytes) == 0);
    /* said: the new results */
    ck_assert_int_eq(kiln_program_input_changed(p, 1), KILN_OK);
    held_check(p, g, &in, in.buf[1], "held, input changed");
    ck_assert_uint_eq(held_packs() - h0, 2);
    /* another pointer: packed again from it */
    float *w2 = malloc(wbytes);
    memcpy(w2, w, wbytes);
    held_check(p, g, &in, w2, "held, another pointer");
    ck_assert_uint_eq(held_packs() - h0, 3);
    /* released: packed per run, nothing kept */
    ck_assert_int_eq(kiln_program_hold_input(p, 1, 0), KILN_OK);
    held_check(p, g, &in, w2, "released");
    ck_assert_uint_eq(held_packs() - h0, 3);
    free(w2);
    free(old_y);
    free(stale_y);
    kiln_program_free(p);
    ts_bufs_free(&in);
    kiln_graph_free(g);
    free(text);
}
END_TEST

static Suite *
contract_suite(void)
{
    Suite *s = suite_create("contract");
    TCase *tc = tcase_create("sizes");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_sizes, 0, NSIZES + 3);
    suite_add_tcase(s, tc);

    tc = tcase_create("views");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_views, 0, (int)NELEM(view_cases));
    tcase_add_loop_test(tc, test_batches, 0, (int)NELEM(batch_cases));
    tcase_add_test(tc, test_packing_folds);
    suite_add_tcase(s, tc);

    tc = tcase_create("epilogues");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_epilogues, 0, 4 * (int)NELEM(epi_cases));
    tcase_add_loop_test(tc, test_epilogue_to_reduction, 0, 6);
    suite_add_tcase(s, tc);

    tc = tcase_create("runtime");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_threads_bit_identical);
    tcase_add_loop_test(tc, test_constant_packed_once, 0, 3);
    suite_add_tcase(s, tc);

    tc = tcase_create("special");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_special_values, 0, (int)NELEM(special_cases));
    tcase_add_loop_test(tc, test_signed_zero, 0, (int)NELEM(zero_cases));
    suite_add_tcase(s, tc);

    tc = tcase_create("skinny");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_skinny, 0, (int)NELEM(skinny_cases));
    tcase_add_loop_test(tc, test_skinny_plan, 0, (int)NELEM(skinny_plans));
    tcase_add_test(tc, test_shared_core);
    tcase_add_test(tc, test_concat_in_place);
    tcase_add_loop_test(tc, test_k1_matmul, 0, 6);
    tcase_add_test(tc, test_decode_loop);
    tcase_add_test(tc, test_decode_keeps_few_plans);
    tcase_add_test(tc, test_generic_sizes_alternate);
    tcase_add_test(tc, test_held_input);
    suite_add_tcase(s, tc);
    return s;
}

int
main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--threads-child") == 0)
        return threads_child(argv[2]);
    return ts_run(contract_suite());
}
