/* interp.c — the reference interpreter: kiln's oracle for every later test.
 *
 * It runs a verified graph node by node on host buffers, following the meaning column and
 * the edge rules of ops.def (docs/semantics.md states them op by op).  It is written to be
 * obviously correct, not fast: every elementwise op goes through one scalar function,
 * f_eval (floats, computed in double and rounded once when stored) or i_eval (integers and
 * bools, computed in 64-bit two's complement and wrapped when stored), and every indexed
 * op is plain index arithmetic over row-major strides.
 *
 * Memory: inputs are read in place from the caller's buffers and constants from the graph;
 * every other node gets its own buffer, freed right after the node that reads it last.
 * Outputs are copied to the caller's buffers only after the whole graph has run, so an
 * output buffer may be one of the input buffers (in-place use).
 *
 * The op switches in run_node, f_eval and i_eval have no default case: a new row in ops.def
 * without an interpreter case is a -Wswitch error.
 */
#include <math.h>
#include <string.h>

#include "ir.h"

/* Stands in for the buffer of a zero-size input or constant (which may be NULL), so that
 * no pointer arithmetic ever starts from NULL. */
static const double empty_buffer[1];

/* ---- scalar semantics ------------------------------------------------------------------ */

/* int64 from its two's complement bits: the wrap of integer arithmetic done in uint64. */
static int64_t
wrap(uint64_t u)
{
    int64_t v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* NaN-propagating max/min; max(-0,+0) = +0, min(-0,+0) = -0 (either order). */
static double
f_max(double a, double b)
{
    if (isnan(a))
        return a;
    if (isnan(b))
        return b;
    if (a == b)
        return signbit(a) ? b : a;
    return a > b ? a : b;
}

static double
f_min(double a, double b)
{
    if (isnan(a))
        return a;
    if (isnan(b))
        return b;
    if (a == b)
        return signbit(a) ? a : b;
    return a < b ? a : b;
}

/* Round to nearest, ties to even, without depending on the floating-point environment. */
static double
round_even(double x)
{
    double r = round(x); /* ties away from zero; keeps the sign of -0.4 -> -0.0 */
    /* x - trunc(x) is exact, so a tie is recognised exactly; x/2 is exact for |x| >= 0.5. */
    if (fabs(x - trunc(x)) == 0.5)
        r = 2.0 * round(x / 2.0);
    return r;
}

/* Exact integer power modulo 2^64 (so also modulo 2^32 once stored to i32). */
static int64_t
i_pow(int64_t a, int64_t b)
{
    if (b < 0) /* 1/a^|b| truncates to 0 unless |a| is 1 */
        return a == 1 ? 1 : a == -1 ? (((uint64_t)b & 1) ? -1 : 1) : 0;
    uint64_t r = 1, base = (uint64_t)a;
    for (uint64_t e = (uint64_t)b; e; e >>= 1) {
        if (e & 1)
            r *= base;
        base *= base;
    }
    return wrap(r);
}

/* One element of a float elementwise op (unary: a; binary: a, b; clamp: a, lo=b, hi=c).
 * Computed in double; the caller rounds once when it stores to f32.  Tests (isnan, ...)
 * and comparisons return 1.0 or 0.0. */
static double
f_eval(ir_op op, double a, double b, double c)
{
    switch (op) {
    case IR_OP_NEG: return -a;
    case IR_OP_ABS: return fabs(a);
    case IR_OP_SIGN: return a > 0 ? 1.0 : a < 0 ? -1.0 : a; /* ±0 and NaN pass through */
    case IR_OP_EXP: return exp(a);
    case IR_OP_EXP2: return exp2(a);
    case IR_OP_EXPM1: return expm1(a);
    case IR_OP_LOG: return log(a);
    case IR_OP_LOG2: return log2(a);
    case IR_OP_LOG1P: return log1p(a);
    case IR_OP_SQRT: return sqrt(a);
    case IR_OP_RSQRT: return 1.0 / sqrt(a);
    case IR_OP_RECIP: return 1.0 / a;
    case IR_OP_SIN: return sin(a);
    case IR_OP_COS: return cos(a);
    case IR_OP_TAN: return tan(a);
    case IR_OP_TANH: return tanh(a);
    case IR_OP_SIGMOID: return 1.0 / (1.0 + exp(-a));
    case IR_OP_ERF: return erf(a);
    case IR_OP_RELU: return isnan(a) ? a : a > 0 ? a : 0.0; /* relu(-0.0) = +0.0 */
    /* The composite formulas are evaluated in forms equal to ops.def's but free of the
     * cancellation in 1 + tanh / 1 + erf in the negative tail (the reference must be
     * accurate there too): 0.5*(1 + tanh(u)) = 1/(1 + e^-2u) and 1 + erf(z) = erfc(-z).
     * At -inf gelu, gelu_erf and silu still give NaN (-inf * 0), as the literal formula. */
    case IR_OP_GELU:
        return a / (1.0 + exp(-2.0 * (0.7978845608028654 * (a + 0.044715 * (a * a * a)))));
    case IR_OP_GELU_ERF: return 0.5 * a * erfc(-a / sqrt(2.0));
    case IR_OP_SILU: return a * (1.0 / (1.0 + exp(-a)));
    case IR_OP_FLOOR: return floor(a);
    case IR_OP_CEIL: return ceil(a);
    case IR_OP_ROUND: return round_even(a);
    case IR_OP_TRUNC: return trunc(a);
    case IR_OP_ISNAN: return isnan(a) ? 1.0 : 0.0;
    case IR_OP_ISINF: return isinf(a) ? 1.0 : 0.0;
    case IR_OP_ADD: return a + b;
    case IR_OP_SUB: return a - b;
    case IR_OP_MUL: return a * b;
    case IR_OP_DIV: return a / b;
    case IR_OP_REM: return fmod(a, b);
    case IR_OP_POW: /* pow(x, 0) = pow(1, y) = 1 for a signalling NaN too (docs/semantics.md;
                     * glibc's pow gives NaN there): NaNs quieted first */
        return pow(isnan(a) ? a + a : a, isnan(b) ? b + b : b);
    case IR_OP_MAX: return f_max(a, b);
    case IR_OP_MIN: return f_min(a, b);
    case IR_OP_ATAN2: return atan2(a, b);
    case IR_OP_EQ: return a == b;
    case IR_OP_NE: return a != b;
    case IR_OP_LT: return a < b;
    case IR_OP_LE: return a <= b;
    case IR_OP_GT: return a > b;
    case IR_OP_GE: return a >= b;
    case IR_OP_CLAMP: return f_min(f_max(a, b), c);
    /* Not float elementwise ops (the verifier keeps them from floats or they are
     * interpreted elsewhere). */
    case IR_OP_INPUT: case IR_OP_CONSTANT: case IR_OP_FULL: case IR_OP_ARANGE:
    case IR_OP_NOT: case IR_OP_AND: case IR_OP_OR: case IR_OP_XOR: case IR_OP_WHERE:
    case IR_OP_CAST: case IR_OP_RESHAPE: case IR_OP_PERMUTE: case IR_OP_EXPAND:
    case IR_OP_SLICE: case IR_OP_CONCAT: case IR_OP_PAD: case IR_OP_GATHER:
    case IR_OP_REDUCE_SUM: case IR_OP_REDUCE_MEAN: case IR_OP_REDUCE_MAX:
    case IR_OP_REDUCE_MIN: case IR_OP_REDUCE_PROD: case IR_OP_ARGMAX: case IR_OP_ARGMIN:
    case IR_OP_MATMUL: case IR_OP_COUNT:
        break;
    }
    IR_ASSERT(!"f_eval: not a float elementwise op");
}

/* One element of an integer or bool elementwise op, in 64-bit two's complement.  i32
 * values are sign-extended on load and wrapped to 32 bits on store, which gives the
 * 32-bit wrapping result of every op here (they are all ring operations, comparisons, or
 * have their overflow case spelled out).  Bools are loaded as 0 or 1. */
static int64_t
i_eval(ir_op op, bool is_bool, int64_t a, int64_t b, int64_t c)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case IR_OP_NEG: return wrap(0 - ua);
    case IR_OP_ABS: return a < 0 ? wrap(0 - ua) : a;
    case IR_OP_SIGN: return (a > 0) - (a < 0);
    case IR_OP_RELU: return a > 0 ? a : 0;
    case IR_OP_NOT: return is_bool ? !a : wrap(~ua);
    case IR_OP_ADD: return wrap(ua + ub);
    case IR_OP_SUB: return wrap(ua - ub);
    case IR_OP_MUL: return wrap(ua * ub);
    /* x/0 = 0; x/-1 is the wrapping negation, so INT_MIN/-1 = INT_MIN. */
    case IR_OP_DIV: return b == 0 ? 0 : b == -1 ? wrap(0 - ua) : a / b;
    case IR_OP_REM: return b == 0 || b == -1 ? 0 : a % b;
    case IR_OP_POW: return i_pow(a, b);
    case IR_OP_MAX: return a > b ? a : b;
    case IR_OP_MIN: return a < b ? a : b;
    case IR_OP_EQ: return a == b;
    case IR_OP_NE: return a != b;
    case IR_OP_LT: return a < b;
    case IR_OP_LE: return a <= b;
    case IR_OP_GT: return a > b;
    case IR_OP_GE: return a >= b;
    case IR_OP_AND: return wrap(ua & ub);
    case IR_OP_OR: return wrap(ua | ub);
    case IR_OP_XOR: return wrap(ua ^ ub);
    case IR_OP_CLAMP: {
        int64_t m = a > b ? a : b;
        return m < c ? m : c;
    }
    /* Float-only ops (dtype rule FLOAT or FTEST: the verifier keeps integers from them;
     * reduce_mean among them), from ops.def, and ops interpreted elsewhere. */
#define FLOAT_ONLY_FLOAT(...) __VA_ARGS__
#define FLOAT_ONLY_FTEST(...) __VA_ARGS__
#define FLOAT_ONLY_SPECIAL(...)
#define FLOAT_ONLY_ANY(...)
#define FLOAT_ONLY_NUM(...)
#define FLOAT_ONLY_LOGIC(...)
#define FLOAT_ONLY_CMP(...)
#define FLOAT_ONLY_EQ(...)
#define OP(E, name, arity, kind, trule, attrs, calc, ulp_f32, ulp_f64, meaning)                    \
    FLOAT_ONLY_##trule(case IR_OP_##E:)
#include "ops.def"
#undef OP
    case IR_OP_INPUT: case IR_OP_CONSTANT: case IR_OP_FULL: case IR_OP_ARANGE:
    case IR_OP_WHERE: case IR_OP_CAST: case IR_OP_RESHAPE: case IR_OP_PERMUTE:
    case IR_OP_EXPAND: case IR_OP_SLICE: case IR_OP_CONCAT: case IR_OP_PAD: case IR_OP_GATHER:
    case IR_OP_REDUCE_SUM: case IR_OP_REDUCE_MAX: case IR_OP_REDUCE_MIN:
    case IR_OP_REDUCE_PROD: case IR_OP_ARGMAX: case IR_OP_ARGMIN: case IR_OP_MATMUL:
    case IR_OP_COUNT:
        break;
    }
    IR_ASSERT(!"i_eval: not an integer elementwise op");
}

/* ---- index arithmetic ---------------------------------------------------------------- */

static size_t
count_of(const ir_shape *s)
{
    return ir_shape_count(s);
}

/* A row-major walk over the index space `dims`, tracking for each of `n` operands the
 * offset of the current element in that operand (its own strides: 0 on broadcast axes,
 * negative for reversed slices). */
#define WALK_MAX 3
typedef struct walk {
    int rank, n;
    int64_t dims[IR_MAX_RANK];
    int64_t idx[IR_MAX_RANK];
    int64_t st[WALK_MAX][IR_MAX_RANK];
    int64_t off[WALK_MAX];
} walk;

/* Strides and offsets start at zero; callers fill st (and off for a base offset). */
static void
walk_init(walk *w, int rank, const int64_t *dims, int n)
{
    memset(w, 0, sizeof *w);
    w->rank = rank;
    w->n = n;
    memcpy(w->dims, dims, sizeof(int64_t) * (size_t)rank);
}

static void
walk_next(walk *w)
{
    for (int d = w->rank - 1; d >= 0; d--) {
        for (int k = 0; k < w->n; k++)
            w->off[k] += w->st[k][d];
        if (++w->idx[d] < w->dims[d])
            return;
        for (int k = 0; k < w->n; k++)
            w->off[k] -= w->st[k][d] * w->dims[d];
        w->idx[d] = 0;
    }
}

/* ---- the run ----------------------------------------------------------------------- */

typedef struct slot {
    const void *data; /* the node's elements: own, a caller's input, or a constant */
    void *own;        /* allocated here, freed after the last reader */
    int32_t last;     /* id of the last node that reads this one; nnodes for outputs */
} slot;

typedef struct run {
    const kiln_graph *g;
    const void *const *inputs;
    slot *s;
} run;

static const void *
operand(const run *r, const ir_node *nd, int k)
{
    return r->s[nd->in[k]].data;
}

static const ir_type *
operand_type(const run *r, const ir_node *nd, int k)
{
    return &r->g->nodes[nd->in[k]].type;
}

static void
fill(void *out, size_t n, size_t es, const void *elem)
{
    for (size_t i = 0; i < n; i++)
        memcpy((char *)out + i * es, elem, es);
}

static void
run_arange(const ir_node *nd, void *out, size_t n)
{
    kiln_dtype t = nd->type.dtype;
    if (ir_dtype_is_float(t)) {
        double start = ir_scalar_f64(t, &nd->at->start), delta = ir_scalar_f64(t, &nd->at->delta);
        for (size_t i = 0; i < n; i++)
            ir_store_f64(t, out, i, start + (double)i * delta);
    } else {
        uint64_t start = (uint64_t)ir_scalar_i64(t, &nd->at->start);
        uint64_t delta = (uint64_t)ir_scalar_i64(t, &nd->at->delta);
        for (size_t i = 0; i < n; i++)
            ir_store_i64(t, out, i, wrap(start + (uint64_t)i * delta));
    }
}

/* Element access for the elementwise loop, which runs once per element: the conversions
 * of ir_load_f64 / ir_store_f64 (float operands) and ir_load_i64 / ir_store_i64 (int and
 * bool operands), inlined. */
static inline double
load_float(kiln_dtype t, const void *p, size_t i)
{
    if (t == KILN_DTYPE_F32) {
        float v;
        memcpy(&v, (const char *)p + 4 * i, 4);
        return v;
    }
    double v;
    memcpy(&v, (const char *)p + 8 * i, 8);
    return v;
}

static inline void
store_float(kiln_dtype t, void *p, size_t i, double v)
{
    if (t == KILN_DTYPE_F32) {
        float f = (float)v; /* the one rounding of an f32 op */
        memcpy((char *)p + 4 * i, &f, 4);
    } else if (t == KILN_DTYPE_F64) {
        memcpy((char *)p + 8 * i, &v, 8);
    } else {
        ir_store_f64(t, p, i, v); /* bool results of tests and comparisons */
    }
}

static inline int64_t
load_int(kiln_dtype t, const void *p, size_t i)
{
    if (t == KILN_DTYPE_I32) {
        int32_t v;
        memcpy(&v, (const char *)p + 4 * i, 4);
        return v;
    }
    if (t == KILN_DTYPE_I64) {
        int64_t v;
        memcpy(&v, (const char *)p + 8 * i, 8);
        return v;
    }
    return ((const uint8_t *)p)[i] != 0;
}

static inline void
store_int(kiln_dtype t, void *p, size_t i, int64_t v)
{
    if (t == KILN_DTYPE_I32) {
        int32_t x = (int32_t)(uint32_t)(uint64_t)v; /* wrap to 32 bits */
        memcpy((char *)p + 4 * i, &x, 4);
    } else if (t == KILN_DTYPE_I64) {
        memcpy((char *)p + 8 * i, &v, 8);
    } else {
        ((uint8_t *)p)[i] = v != 0;
    }
}

/* Unary, binary and clamp: operands broadcast to the result shape.  The last axis is a
 * plain loop (a row); a walk steps over the rows. */
static void
run_elementwise(const run *r, const ir_node *nd, void *out, size_t n)
{
    const ir_shape *os = &nd->type.shape;
    kiln_dtype xt = operand_type(r, nd, 0)->dtype, ot = nd->type.dtype;
    int nin = nd->nin, rank = os->rank, outer = rank > 0 ? rank - 1 : 0;
    int64_t len = rank > 0 ? os->dims[rank - 1] : 1, row_st[WALK_MAX] = {0, 0, 0};
    const void *src[WALK_MAX];
    walk w;
    walk_init(&w, outer, os->dims, nin);
    for (int k = 0; k < nin; k++) {
        int64_t st[IR_MAX_RANK];
        src[k] = operand(r, nd, k);
        ir_broadcast_strides(&operand_type(r, nd, k)->shape, rank, st);
        memcpy(w.st[k], st, sizeof(int64_t) * (size_t)outer);
        row_st[k] = rank > 0 ? st[rank - 1] : 0;
    }
    bool fl = ir_dtype_is_float(xt), is_bool = xt == KILN_DTYPE_BOOL;
    size_t i = 0;
    for (size_t row = 0; row < n / (size_t)len; row++, walk_next(&w)) {
        for (int64_t j = 0; j < len; j++, i++) {
            if (fl) {
                double v[WALK_MAX] = {0, 0, 0};
                for (int k = 0; k < nin; k++)
                    v[k] = load_float(xt, src[k], (size_t)(w.off[k] + j * row_st[k]));
                store_float(ot, out, i, f_eval(nd->op, v[0], v[1], v[2]));
            } else {
                int64_t v[WALK_MAX] = {0, 0, 0};
                for (int k = 0; k < nin; k++)
                    v[k] = load_int(xt, src[k], (size_t)(w.off[k] + j * row_st[k]));
                store_int(ot, out, i, i_eval(nd->op, is_bool, v[0], v[1], v[2]));
            }
        }
    }
}

static void
run_where(const run *r, const ir_node *nd, void *out, size_t n)
{
    const ir_shape *os = &nd->type.shape;
    size_t es = kiln_dtype_size(nd->type.dtype);
    walk w;
    walk_init(&w, os->rank, os->dims, 3);
    for (int k = 0; k < 3; k++)
        ir_broadcast_strides(&operand_type(r, nd, k)->shape, os->rank, w.st[k]);
    const uint8_t *cond = operand(r, nd, 0);
    const char *a = operand(r, nd, 1), *b = operand(r, nd, 2);
    for (size_t i = 0; i < n; i++, walk_next(&w)) {
        const char *src = cond[w.off[0]] ? a + (size_t)w.off[1] * es : b + (size_t)w.off[2] * es;
        memcpy((char *)out + i * es, src, es);
    }
}

static void
run_cast(const run *r, const ir_node *nd, void *out, size_t n)
{
    kiln_dtype from = operand_type(r, nd, 0)->dtype;
    const void *x = operand(r, nd, 0);
    for (size_t i = 0; i < n; i++)
        ir_convert(nd->at->to, out, i, from, x, i);
}

/* Permute, expand and slice: copy the result's elements in row-major order from the
 * operand offsets a walk computes. */
static void
run_gather_walk(const void *x, size_t es, walk *w, void *out, size_t n)
{
    for (size_t i = 0; i < n; i++, walk_next(w))
        memcpy((char *)out + i * es, (const char *)x + (size_t)w->off[0] * es, es);
}

static void
run_move(const run *r, const ir_node *nd, void *out, size_t n)
{
    const ir_type *xt = operand_type(r, nd, 0);
    const void *x = operand(r, nd, 0);
    const ir_shape *os = &nd->type.shape;
    size_t es = kiln_dtype_size(xt->dtype);
    int64_t xs[IR_MAX_RANK];
    ir_shape_strides(&xt->shape, xs);
    walk w;
    walk_init(&w, os->rank, os->dims, 1);
    switch (nd->op) {
    case IR_OP_PERMUTE:
        for (int i = 0; i < os->rank; i++)
            w.st[0][i] = xs[nd->at->perm[i]];
        break;
    case IR_OP_EXPAND:
        ir_broadcast_strides(&xt->shape, os->rank, w.st[0]);
        break;
    case IR_OP_SLICE:
        for (int i = 0; i < os->rank; i++) {
            int64_t first, cnt;
            ir_slice_axis(xt->shape.dims[i], nd->at->begin[i], nd->at->stop[i], nd->at->step[i],
                          &first, &cnt);
            IR_ASSERT(cnt == os->dims[i]);
            w.off[0] += first * xs[i];
            /* With two or more elements |step| < n, so the product stays inside the
             * tensor; with one the stride is never used (and a huge step would overflow). */
            w.st[0][i] = cnt > 1 ? xs[i] * nd->at->step[i] : 0;
        }
        break;
    default:
        IR_ASSERT(!"run_move: not a strided movement op");
    }
    run_gather_walk(x, es, &w, out, n);
}

static void
run_concat(const run *r, const ir_node *nd, void *out)
{
    const ir_shape *os = &nd->type.shape;
    int axis = nd->at->axis;
    size_t es = kiln_dtype_size(nd->type.dtype), outer = 1, inner = es;
    for (int i = 0; i < axis; i++)
        outer *= (size_t)os->dims[i];
    for (int i = axis + 1; i < os->rank; i++)
        inner *= (size_t)os->dims[i];
    char *dst = out;
    for (size_t o = 0; o < outer; o++)
        for (int k = 0; k < nd->nin; k++) {
            size_t chunk = (size_t)operand_type(r, nd, k)->shape.dims[axis] * inner;
            if (chunk) {
                memcpy(dst, (const char *)operand(r, nd, k) + o * chunk, chunk);
                dst += chunk;
            }
        }
}

static void
run_pad(const run *r, const ir_node *nd, void *out, size_t n)
{
    const ir_type *xt = operand_type(r, nd, 0);
    size_t es = kiln_dtype_size(xt->dtype), nx = count_of(&xt->shape);
    const char *x = operand(r, nd, 0);
    fill(out, n, es, nd->at->value.bytes);
    int64_t os[IR_MAX_RANK];
    ir_shape_strides(&nd->type.shape, os);
    walk w;
    walk_init(&w, xt->shape.rank, xt->shape.dims, 1);
    for (int i = 0; i < xt->shape.rank; i++) {
        w.st[0][i] = os[i];
        w.off[0] += nd->at->low[i] * os[i];
    }
    for (size_t i = 0; i < nx; i++, walk_next(&w))
        memcpy((char *)out + (size_t)w.off[0] * es, x + i * es, es);
}

static void
run_gather(const run *r, const ir_node *nd, void *out)
{
    const ir_type *xt = operand_type(r, nd, 0), *it = operand_type(r, nd, 1);
    const char *x = operand(r, nd, 0);
    const void *idx = operand(r, nd, 1);
    int axis = nd->at->axis;
    size_t es = kiln_dtype_size(xt->dtype), outer = 1, inner = es;
    for (int i = 0; i < axis; i++)
        outer *= (size_t)xt->shape.dims[i];
    for (int i = axis + 1; i < xt->shape.rank; i++)
        inner *= (size_t)xt->shape.dims[i];
    int64_t len = xt->shape.dims[axis];
    size_t nidx = count_of(&it->shape);
    char *dst = out;
    for (size_t o = 0; o < outer; o++)
        for (size_t t = 0; t < nidx; t++, dst += inner) {
            int64_t j = ir_load_i64(it->dtype, idx, t);
            if (j >= 0 && j < len) /* all-zero bytes: 0, +0.0, false */
                memcpy(dst, x + (o * (size_t)len + (size_t)j) * inner, inner);
            else
                memset(dst, 0, inner);
        }
}

/* Reductions: for each result element (the kept axes in row-major order) the reduced
 * elements are visited in row-major order of the reduced axes. */
static void
run_reduce(const run *r, const ir_node *nd, void *out, size_t n)
{
    const ir_type *xt = operand_type(r, nd, 0);
    kiln_dtype t = xt->dtype, ot = nd->type.dtype;
    const void *x = operand(r, nd, 0);
    int64_t xs[IR_MAX_RANK], kd[IR_MAX_RANK], rd[IR_MAX_RANK];
    ir_shape_strides(&xt->shape, xs);
    walk outer, inner;
    int nk = 0, nr = 0;
    size_t count = 1;
    for (int i = 0; i < xt->shape.rank; i++) {
        if (nd->at->axes & (1u << i)) {
            rd[nr++] = xt->shape.dims[i];
            count *= (size_t)xt->shape.dims[i];
        } else {
            kd[nk++] = xt->shape.dims[i];
        }
    }
    walk_init(&outer, nk, kd, 1);
    walk_init(&inner, nr, rd, 1);
    for (int i = 0, k = 0, m = 0; i < xt->shape.rank; i++) {
        if (nd->at->axes & (1u << i))
            inner.st[0][m++] = xs[i];
        else
            outer.st[0][k++] = xs[i];
    }
    bool fl = ir_dtype_is_float(t);
    for (size_t o = 0; o < n; o++, walk_next(&outer)) {
        /* Restart the inner walk at this result element's first operand element. */
        memset(inner.idx, 0, sizeof inner.idx);
        inner.off[0] = outer.off[0];
        double facc = 0, fbest = 0;
        uint64_t iacc = 0;
        int64_t ibest = 0, arg = 0;
        switch (nd->op) {
        case IR_OP_REDUCE_SUM:
        case IR_OP_REDUCE_MEAN:
            /* Starting from -0.0 makes a one-element sum that element exactly (-0.0
             * included); the empty sum is +0. */
            facc = count ? -0.0 : 0.0;
            for (size_t j = 0; j < count; j++, walk_next(&inner)) {
                if (fl)
                    facc += load_float(t, x, (size_t)inner.off[0]);
                else
                    iacc += (uint64_t)load_int(t, x, (size_t)inner.off[0]);
            }
            if (nd->op == IR_OP_REDUCE_MEAN)
                facc = count ? facc / (double)count : NAN;
            break;
        case IR_OP_REDUCE_PROD:
            facc = 1.0;
            iacc = 1;
            for (size_t j = 0; j < count; j++, walk_next(&inner)) {
                if (fl)
                    facc *= load_float(t, x, (size_t)inner.off[0]);
                else
                    iacc *= (uint64_t)load_int(t, x, (size_t)inner.off[0]);
            }
            break;
        case IR_OP_REDUCE_MAX:
        case IR_OP_REDUCE_MIN: {
            /* The verifier rejects empty reductions; NaN / 0 keep this total anyway. */
            bool mx = nd->op == IR_OP_REDUCE_MAX;
            facc = count ? 0.0 : NAN;
            for (size_t j = 0; j < count; j++, walk_next(&inner)) {
                if (fl) {
                    double v = load_float(t, x, (size_t)inner.off[0]);
                    facc = j == 0 ? v : mx ? f_max(facc, v) : f_min(facc, v);
                } else {
                    int64_t v = load_int(t, x, (size_t)inner.off[0]);
                    if (j == 0 || (mx ? v > ibest : v < ibest))
                        ibest = v;
                }
            }
            iacc = (uint64_t)ibest;
            break;
        }
        case IR_OP_ARGMAX:
        case IR_OP_ARGMIN: {
            bool mx = nd->op == IR_OP_ARGMAX;
            for (size_t j = 0; j < count; j++, walk_next(&inner)) {
                if (fl) {
                    double v = load_float(t, x, (size_t)inner.off[0]);
                    if (isnan(v)) { /* the first NaN wins */
                        arg = (int64_t)j;
                        break;
                    }
                    if (j == 0 || (mx ? v > fbest : v < fbest)) {
                        fbest = v;
                        arg = (int64_t)j;
                    }
                } else {
                    int64_t v = load_int(t, x, (size_t)inner.off[0]);
                    if (j == 0 || (mx ? v > ibest : v < ibest)) {
                        ibest = v;
                        arg = (int64_t)j;
                    }
                }
            }
            ir_store_i64(ot, out, o, arg);
            continue;
        }
        default:
            IR_ASSERT(!"run_reduce: not a reduction");
        }
        if (fl)
            store_float(ot, out, o, facc);
        else
            store_int(ot, out, o, wrap(iacc));
    }
}

/* NumPy matmul.  The operands are first converted to double (floats) or int64 (ints);
 * each result element is the sum over p = 0..k-1 of a[i,p]*b[p,j] in that order (floats:
 * products and sum in double, rounded once on store; ints: wrapping). */
static kiln_status
run_matmul(const run *r, const ir_node *nd, void *out, size_t n)
{
    const ir_type *at = operand_type(r, nd, 0), *bt = operand_type(r, nd, 1);
    kiln_dtype t = at->dtype;
    bool fl = ir_dtype_is_float(t);
    /* Promote 1-D operands as NumPy does: a [k] is [1,k], b [k] is [k,1].  The dropped
     * axes have size 1, so the result's row-major layout is batch x m x n either way. */
    ir_shape sa = at->shape, sb = bt->shape;
    if (sa.rank == 1) {
        sa.rank = 2;
        sa.dims[1] = sa.dims[0];
        sa.dims[0] = 1;
    }
    if (sb.rank == 1) {
        sb.rank = 2;
        sb.dims[1] = 1;
    }
    size_t m = (size_t)sa.dims[sa.rank - 2], k = (size_t)sa.dims[sa.rank - 1];
    size_t nn = (size_t)sb.dims[sb.rank - 1];
    ir_shape ba = {sa.rank - 2, {0}}, bb = {sb.rank - 2, {0}}, batch;
    memcpy(ba.dims, sa.dims, sizeof(int64_t) * (size_t)ba.rank);
    memcpy(bb.dims, sb.dims, sizeof(int64_t) * (size_t)bb.rank);
    bool ok = ir_broadcast(&ba, &bb, &batch);
    IR_ASSERT(ok && count_of(&batch) * m * nn == n);
    walk w;
    walk_init(&w, batch.rank, batch.dims, 2);
    ir_broadcast_strides(&ba, batch.rank, w.st[0]);
    ir_broadcast_strides(&bb, batch.rank, w.st[1]);
    for (int i = 0; i < batch.rank; i++) { /* strides in matrices -> in elements */
        w.st[0][i] *= (int64_t)(m * k);
        w.st[1][i] *= (int64_t)(k * nn);
    }

    size_t na = count_of(&at->shape), nb = count_of(&bt->shape);
    /* Scratch: both operands converted, and one result row; 8-byte elements (double for
     * floats, uint64 for wrapping ints), so one set of buffers serves both paths. */
    void *sa_buf = ir_malloc(na * 8);
    void *sb_buf = sa_buf ? ir_malloc(nb * 8) : NULL;
    void *row_buf = sb_buf ? ir_malloc(nn * 8) : NULL;
    if (!row_buf) {
        ir_free(sa_buf);
        ir_free(sb_buf);
        return ir_error(KILN_ERR_NOMEM,
                        "kiln_graph_interpret: out of memory: matmul of %zu and %zu elements", na,
                        nb);
    }
    double *A = sa_buf, *B = sb_buf, *acc = row_buf;
    uint64_t *IA = sa_buf, *IB = sb_buf, *iacc = row_buf;
    const void *a = operand(r, nd, 0), *b = operand(r, nd, 1);
    for (size_t i = 0; i < na; i++) {
        if (fl)
            A[i] = load_float(t, a, i);
        else
            IA[i] = (uint64_t)load_int(t, a, i);
    }
    for (size_t i = 0; i < nb; i++) {
        if (fl)
            B[i] = load_float(t, b, i);
        else
            IB[i] = (uint64_t)load_int(t, b, i);
    }
    size_t o = 0, nbatch = count_of(&batch);
    for (size_t bi = 0; bi < nbatch; bi++, walk_next(&w)) {
        size_t ao = (size_t)w.off[0], bo = (size_t)w.off[1];
        for (size_t i = 0; i < m; i++) {
            /* Row i of the result, accumulated over p in order.  Floats start from -0.0 so
             * that a one-term sum is that term exactly; k = 0 gives +0. */
            for (size_t j = 0; j < nn; j++) {
                if (fl)
                    acc[j] = k ? -0.0 : 0.0;
                else
                    iacc[j] = 0;
            }
            for (size_t p = 0; p < k; p++) {
                if (fl) {
                    double av = A[ao + i * k + p];
                    const double *brow = B + bo + p * nn;
                    for (size_t j = 0; j < nn; j++)
                        acc[j] += av * brow[j];
                } else {
                    uint64_t av = IA[ao + i * k + p];
                    const uint64_t *brow = IB + bo + p * nn;
                    for (size_t j = 0; j < nn; j++)
                        iacc[j] += av * brow[j];
                }
            }
            for (size_t j = 0; j < nn; j++, o++) {
                if (fl)
                    store_float(t, out, o, acc[j]);
                else
                    store_int(t, out, o, wrap(iacc[j]));
            }
        }
    }
    ir_free(sa_buf);
    ir_free(sb_buf);
    ir_free(row_buf);
    return KILN_OK;
}

/* Compute node `id` into its slot. */
static kiln_status
run_node(run *r, int32_t id)
{
    const ir_node *nd = &r->g->nodes[id];
    slot *s = &r->s[id];
    size_t n = count_of(&nd->type.shape), es = kiln_dtype_size(nd->type.dtype);
    if (nd->op == IR_OP_INPUT) {
        const void *p = r->inputs ? r->inputs[nd->index] : NULL;
        s->data = p ? p : (const void *)empty_buffer;
        return KILN_OK;
    }
    if (nd->op == IR_OP_CONSTANT) {
        s->data = nd->at->data ? nd->at->data : (const void *)empty_buffer;
        return KILN_OK;
    }
    void *out = ir_malloc(n * es);
    if (!out)
        return ir_error(KILN_ERR_NOMEM,
                        "kiln_graph_interpret: out of memory: %zu bytes for node %d (%s)", n * es,
                        (int)id, ir_ops[nd->op].name);
    s->data = s->own = out;
    if (n == 0) /* nothing to compute; operands may be empty too */
        return KILN_OK;
    switch (nd->op) {
    case IR_OP_INPUT:
    case IR_OP_CONSTANT:
        break; /* bound above, without a buffer of their own */
    case IR_OP_FULL:
        fill(out, n, es, nd->at->value.bytes);
        break;
    case IR_OP_ARANGE:
        run_arange(nd, out, n);
        break;
    case IR_OP_NEG: case IR_OP_ABS: case IR_OP_SIGN: case IR_OP_EXP: case IR_OP_EXP2:
    case IR_OP_EXPM1: case IR_OP_LOG: case IR_OP_LOG2: case IR_OP_LOG1P: case IR_OP_SQRT:
    case IR_OP_RSQRT: case IR_OP_RECIP: case IR_OP_SIN: case IR_OP_COS: case IR_OP_TAN:
    case IR_OP_TANH: case IR_OP_SIGMOID: case IR_OP_ERF: case IR_OP_RELU: case IR_OP_GELU:
    case IR_OP_GELU_ERF: case IR_OP_SILU: case IR_OP_FLOOR: case IR_OP_CEIL: case IR_OP_ROUND:
    case IR_OP_TRUNC: case IR_OP_NOT: case IR_OP_ISNAN: case IR_OP_ISINF:
    case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_DIV: case IR_OP_REM:
    case IR_OP_POW: case IR_OP_MAX: case IR_OP_MIN: case IR_OP_ATAN2: case IR_OP_EQ:
    case IR_OP_NE: case IR_OP_LT: case IR_OP_LE: case IR_OP_GT: case IR_OP_GE: case IR_OP_AND:
    case IR_OP_OR: case IR_OP_XOR: case IR_OP_CLAMP:
        run_elementwise(r, nd, out, n);
        break;
    case IR_OP_WHERE:
        run_where(r, nd, out, n);
        break;
    case IR_OP_CAST:
        run_cast(r, nd, out, n);
        break;
    case IR_OP_RESHAPE: /* same elements, same row-major order */
        memcpy(out, operand(r, nd, 0), n * es);
        break;
    case IR_OP_PERMUTE:
    case IR_OP_EXPAND:
    case IR_OP_SLICE:
        run_move(r, nd, out, n);
        break;
    case IR_OP_CONCAT:
        run_concat(r, nd, out);
        break;
    case IR_OP_PAD:
        run_pad(r, nd, out, n);
        break;
    case IR_OP_GATHER:
        run_gather(r, nd, out);
        break;
    case IR_OP_REDUCE_SUM: case IR_OP_REDUCE_MEAN: case IR_OP_REDUCE_MAX:
    case IR_OP_REDUCE_MIN: case IR_OP_REDUCE_PROD: case IR_OP_ARGMAX: case IR_OP_ARGMIN:
        run_reduce(r, nd, out, n);
        break;
    case IR_OP_MATMUL:
        return run_matmul(r, nd, out, n);
    case IR_OP_COUNT:
        IR_ASSERT(!"run_node: bad op");
    }
    return KILN_OK;
}

static void
release(slot *s)
{
    ir_free(s->own);
    s->own = NULL;
    s->data = NULL;
}

/* Copy output i to the caller (memmove: the buffer may be the very input it returns). */
static void
copy_output(const run *r, int32_t i, void *const *outputs)
{
    const ir_output *o = &r->g->outputs[i];
    size_t bytes = ir_type_bytes(&r->g->nodes[o->node].type);
    if (bytes)
        memmove(outputs[i], r->s[o->node].data, bytes);
}

kiln_status
ir_interpret(const kiln_graph *g, const void *const *inputs, void *const *outputs)
{
    int32_t nn = g->nnodes;
    run r = {g, inputs, ir_calloc((size_t)nn, sizeof(slot))};
    if (!r.s)
        return ir_error(KILN_ERR_NOMEM, "kiln_graph_interpret: out of memory: %d nodes",
                        (int)nn);
    /* Last readers; a node nobody reads is freed right after it is computed. */
    for (int32_t id = 0; id < nn; id++) {
        r.s[id].last = id;
        for (int k = 0; k < g->nodes[id].nin; k++)
            r.s[g->nodes[id].in[k]].last = id; /* ids ascend, so the last write wins */
    }
    for (int32_t i = 0; i < g->noutputs; i++)
        r.s[g->outputs[i].node].last = nn;

    kiln_status st = KILN_OK;
    for (int32_t id = 0; id < nn; id++) {
        if ((st = run_node(&r, id)))
            goto done;
        const ir_node *nd = &g->nodes[id];
        for (int k = 0; k < nd->nin; k++)
            if (r.s[nd->in[k]].last == id)
                release(&r.s[nd->in[k]]); /* an operand read twice is released once */
        if (r.s[id].last == id)
            release(&r.s[id]);
    }
    /* Outputs that return an input first: a later output may be written into that very
     * input's buffer. */
    for (int pass = 0; pass < 2; pass++)
        for (int32_t i = 0; i < g->noutputs; i++)
            if ((g->nodes[g->outputs[i].node].op == IR_OP_INPUT) == (pass == 0))
                copy_output(&r, i, outputs);
done:
    for (int32_t id = 0; id < nn; id++)
        ir_free(r.s[id].own);
    ir_free(r.s);
    return st;
}
