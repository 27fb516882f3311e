/* errbound.c — `kiln check`'s per-element bound (errbound.h).
 *
 * For every node the walk keeps the interpreter's value v and a bound E with |k - v| <= E
 * for the value k a correct kernel computes.  With u the unit roundoff of the dtype,
 * ulp() of the dtype (refmath.h) and gamma(n, u) = n*u/(1 - n*u):
 *
 *   sources, movement       E = 0; movement moves E with the values (the interpreter runs
 *                           the same op on E, pad fills 0, an index that may differ: inf)
 *   exact elementwise ops   (everything but vector math, which round as the interpreter
 *                           does) E = 0 while the operands' E are 0; else the propagated
 *                           P + ulp(|v| + P): each side rounds once, half an ULP each
 *   vector-math ops         P + (b + r)*ulp(|v| + P): b the kernel's documented bound
 *                           (ir_op_ulp_bound), r the interpreter's own error (0.5 +
 *                           2^-29 r64 for f32, computed in double; r64 for f64)
 *   P, propagated           neg/abs/relu E; monotone functions (exp, log, sqrt, tanh,
 *                           sigmoid, erf, floor, round, ...) their change over [a-E, a+E];
 *                           sin/cos min(E, 2); gelu, gelu_erf 1.13 E, silu 1.1 E (largest
 *                           slopes); add/sub Ea + Eb; mul |a|Eb + |b|Ea + EaEb; div
 *                           (Ea + |a/b|Eb)/(|b| - Eb); max/min/clamp the largest E; pow
 *                           its change over the corners of the box; comparisons and where
 *                           may flip when the operands are within their E of each other
 *   reduce_sum, mean        sum E + 2 gamma(n-1, 2^-53)(sum |x| + sum E), + 1 ULP of the
 *                           result (f32 sums accumulate in f64, kernels in any order:
 *                           ops.def), / n for the mean; f32 sums also gamma(B-1, 2^-24)
 *                           (sum |x| + sum E): kernels add blocks of B = JIT_SUM_BLOCK
 *                           elements in f32 first; infinite where sum |x| + sum E exceeds
 *                           f32's largest finite value (a block's sum may overflow)
 *   matmul                  the change of sum |a||b| when |a|, |b| grow by their E, +
 *                           (gamma(k, u) + 3 gamma(k, 2^-53)) sum |a||b| + 1 ULP: u is the
 *                           output dtype's, so the bound also holds for kernels that
 *                           accumulate f32 products in f32; + k times the dtype's smallest
 *                           subnormal (products and sums rounded below the normal range
 *                           err absolutely); infinite where sum |a||b| exceeds the dtype's
 *                           largest finite value (a partial sum may overflow)
 *   reduce_max/min          the largest E; reduce_prod: prod(|x| + E) - prod |x| plus the
 *                           roundings, infinite where some order of the factors could
 *                           leave the normal range (the product of the factors below 1
 *                           under it, or of those above 1 over it): then the kernel's and
 *                           the interpreter's orders may underflow or overflow
 *                           differently; 0 where a factor is ±0 with E = 0 (the product
 *                           is then ±0, or NaN, in any order); argmax/argmin: anything
 *                           once an operand's E > 0
 *
 * A bound that comes out NaN (inf - inf in the arithmetic) is infinite: anything goes. */
#include "errbound.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jit.h"
#include "refmath.h"

#define U64 0x1p-53 /* unit roundoff of f64, the accumulator of f32 and f64 sums */

static double
unit(kiln_dtype t)
{
    return t == KILN_DTYPE_F32 ? 0x1p-24 : 0x1p-53;
}

/* ref_ulp_of in double arithmetic (it is called for every element: long double's ilogbl
 * and scalbnl were a third of kiln check's time). */
static double
ulp(kiln_dtype t, double x)
{
    if (isnan(x))
        return 0;
    bool f32 = t == KILN_DTYPE_F32;
    int p = f32 ? 24 : 53, emin = f32 ? -126 : -1022, emax = f32 ? 127 : 1023, e;
    x = fabs(x);
    if (x == 0)
        e = emin;
    else if (isinf(x))
        e = emax;
    else {
        frexp(x, &e);
        e--; /* x in [2^e, 2^(e+1)) */
    }
    e = e < emin ? emin : e > emax ? emax : e;
    return ldexp(1.0, e - p + 1);
}

static double
gamma_n(double n, double u)
{
    if (n <= 0)
        return 0;
    return n * u >= 0.5 ? INFINITY : n * u / (1 - n * u);
}

static double
max_finite(kiln_dtype t)
{
    return t == KILN_DTYPE_F32 ? FLT_MAX : DBL_MAX;
}

/* The dtype's smallest normal and smallest subnormal magnitudes. */
static double
min_normal(kiln_dtype t)
{
    return t == KILN_DTYPE_F32 ? FLT_MIN : DBL_MIN;
}

static double
min_subnormal(kiln_dtype t)
{
    return t == KILN_DTYPE_F32 ? FLT_TRUE_MIN : DBL_TRUE_MIN;
}

/* ---- one node through the interpreter ------------------------------------------------- */

/* Interpret one op on operands of the given types; *out is a new buffer of the result. */
static kiln_status
interp1(ir_op op, const ir_attrs *at, int nin, const ir_type *types, const void *const *ops,
        const ir_type *given, void **out)
{
    *out = NULL;
    kiln_graph *h = ir_graph_new("kiln_check");
    if (!h)
        return kiln_errcode();
    kiln_status st = KILN_OK;
    int32_t *ids = malloc(((size_t)nin + 1) * sizeof *ids);
    if (!ids) {
        st = ir_error(KILN_ERR_NOMEM, "kiln check: out of memory");
        goto done;
    }
    for (int k = 0; k < nin; k++) {
        char name[16];
        snprintf(name, sizeof name, "i%d", k);
        if ((ids[k] = ir_graph_add_input(h, name, &types[k])) < 0) {
            st = kiln_errcode();
            goto done;
        }
    }
    int32_t r = ir_graph_add_node(h, "kiln check", op, nin, ids, at, given, "r");
    if (r < 0 || ir_graph_add_output(h, "r", r) != KILN_OK) {
        st = kiln_errcode();
        goto done;
    }
    size_t bytes = ir_type_bytes(&h->nodes[r].type);
    void *buf = malloc(bytes ? bytes : 1);
    if (!buf) {
        st = ir_error(KILN_ERR_NOMEM, "kiln check: out of memory");
        goto done;
    }
    void *outs[1] = {buf};
    if ((st = ir_interpret(h, ops, outs)) != KILN_OK) {
        free(buf);
        goto done;
    }
    *out = buf;
done:
    free(ids);
    kiln_graph_free(h);
    return st;
}

/* ---- elementwise ----------------------------------------------------------------------- */

/* The exact value of a monotone or library function at x (long double). */
static long double
fval(ir_op op, long double x)
{
    switch (op) {
    case IR_OP_FLOOR: return floorl(x);
    case IR_OP_CEIL: return ceill(x);
    case IR_OP_ROUND: return nearbyintl(x); /* ties to even in the default mode */
    case IR_OP_TRUNC: return truncl(x);
    case IR_OP_SIGN: return x > 0 ? 1 : x < 0 ? -1 : x;
    default: return ref_math(op, KILN_DTYPE_F64, x, 0);
    }
}

static long double
change(long double x, long double y)
{
    if (x == y)
        return 0;
    long double d = fabsl(x - y);
    return isnan(d) ? (long double)INFINITY : d;
}

/* How far a monotone f can move over [a - e, a + e]. */
static double
endpoints(ir_op op, double a, double e)
{
    long double f0 = fval(op, a);
    long double d = fmaxl(change(fval(op, (long double)a - e), f0),
                          change(fval(op, (long double)a + e), f0));
    return isnan(d) ? INFINITY : (double)d;
}

/* pow over the box [a0 ± e0] x [a1 ± e1]: monotone in each argument, so the corners. */
static double
corners(double a0, double e0, double a1, double e1)
{
    long double f0 = ref_math(IR_OP_POW, KILN_DTYPE_F64, a0, a1), d = 0;
    for (int s = 0; s < 4; s++) {
        long double x = (long double)a0 + (s & 1 ? e0 : -e0);
        long double y = (long double)a1 + (s & 2 ? e1 : -e1);
        d = fmaxl(d, change(ref_math(IR_OP_POW, KILN_DTYPE_F64, x, y), f0));
    }
    return isnan(d) ? INFINITY : (double)d;
}

/* How far a cast's result can move when its operand moves by e. */
static double
cast_change(kiln_dtype from, kiln_dtype to, double a, double e)
{
    if (to == KILN_DTYPE_BOOL)
        return fabs(a) <= e ? 1 : 0; /* x != 0 may flip */
    if (from == KILN_DTYPE_BOOL || ir_dtype_is_float(to))
        return e;
    if (!ir_dtype_is_float(from)) /* int to int: wider keeps e, narrower wraps */
        return to == KILN_DTYPE_I64 ? e : INFINITY;
    /* float to int: truncation toward zero, saturated (monotone) */
    long double lo = to == KILN_DTYPE_I32 ? INT32_MIN : (long double)INT64_MIN;
    long double hi = to == KILN_DTYPE_I32 ? INT32_MAX : (long double)INT64_MAX;
    long double x0 = fminl(fmaxl(truncl((long double)a - e), lo), hi);
    long double x1 = fminl(fmaxl(truncl((long double)a + e), lo), hi);
    return (double)(x1 - x0);
}

/* The propagated part P of an elementwise op's bound (operands a, their bounds e). */
static double
propagate(ir_op op, const kiln_dtype *ad, kiln_dtype t, const double *a, const double *e)
{
    bool out_float = ir_dtype_is_float(t);
    switch (op) {
    case IR_OP_NEG: case IR_OP_ABS: case IR_OP_RELU:
        return e[0];
    case IR_OP_SIGN: case IR_OP_EXP: case IR_OP_EXP2: case IR_OP_EXPM1: case IR_OP_LOG:
    case IR_OP_LOG2: case IR_OP_LOG1P: case IR_OP_SQRT: case IR_OP_TANH: case IR_OP_SIGMOID:
    case IR_OP_ERF: case IR_OP_FLOOR: case IR_OP_CEIL: case IR_OP_ROUND: case IR_OP_TRUNC:
        return ir_dtype_is_float(ad[0]) ? endpoints(op, a[0], e[0]) : INFINITY;
    case IR_OP_RSQRT: case IR_OP_RECIP: /* monotone on either side of the pole at 0 */
        return a[0] - e[0] <= 0 && a[0] + e[0] >= 0 ? INFINITY : endpoints(op, a[0], e[0]);
    case IR_OP_SIN: case IR_OP_COS:
        return fmin(e[0], 2);
    case IR_OP_TAN: {
        long double l = tanl((long double)a[0] - e[0]), m = tanl(a[0]),
                    h = tanl((long double)a[0] + e[0]);
        return l <= m && m <= h ? endpoints(op, a[0], e[0]) : INFINITY; /* no pole between */
    }
    case IR_OP_GELU: case IR_OP_GELU_ERF:
        return 1.13 * e[0];
    case IR_OP_SILU:
        return 1.1 * e[0];
    case IR_OP_ISNAN:
        return 0; /* a value within a finite bound of a number is a number */
    case IR_OP_ISINF:
        return fabs(a[0]) + e[0] >= max_finite(ad[0]) ? 1 : 0;
    case IR_OP_NOT: case IR_OP_AND: case IR_OP_OR: case IR_OP_XOR:
        return t == KILN_DTYPE_BOOL ? 1 : INFINITY;
    case IR_OP_ADD: case IR_OP_SUB:
        return e[0] + e[1];
    case IR_OP_MUL:
        return fabs(a[0]) * e[1] + fabs(a[1]) * e[0] + e[0] * e[1];
    case IR_OP_DIV:
        if (!out_float || !(fabs(a[1]) > e[1]))
            return INFINITY;
        return (e[0] + fabs(a[0] / a[1]) * e[1]) / (fabs(a[1]) - e[1]);
    case IR_OP_REM: /* exact; moves with a while a/b stays in one integer interval */
        if (!out_float || e[1] != 0 || a[1] == 0 ||
            floor((a[0] - e[0]) / a[1]) != floor((a[0] + e[0]) / a[1]))
            return INFINITY;
        return e[0];
    case IR_OP_POW:
        return out_float ? corners(a[0], e[0], a[1], e[1]) : INFINITY;
    case IR_OP_ATAN2: {
        /* slope 1/r away from the origin; across the cut (x < 0, y near 0) it jumps 2 pi */
        double r = hypot(a[0], a[1]), s = e[0] + e[1];
        if (!(r > s) || (a[1] < 0 && fabs(a[0]) <= e[0]))
            return 2 * 3.141592653589793 + s;
        return s / (r - s);
    }
    case IR_OP_MAX: case IR_OP_MIN:
        return fmax(e[0], e[1]);
    case IR_OP_EQ: case IR_OP_NE: case IR_OP_LT: case IR_OP_LE: case IR_OP_GT: case IR_OP_GE:
        return fabs(a[0] - a[1]) <= e[0] + e[1] ? 1 : 0;
    case IR_OP_WHERE:
        if (e[0] > 0) /* the condition may differ: either branch */
            return fmax(e[1], e[2]) + fabs(a[1] - a[2]);
        return a[0] != 0 ? e[1] : e[2];
    case IR_OP_CLAMP:
        return fmax(e[0], fmax(e[1], e[2]));
    case IR_OP_CAST:
        return cast_change(ad[0], t, a[0], e[0]);
    /* not elementwise */
    case IR_OP_INPUT: case IR_OP_CONSTANT: case IR_OP_FULL: case IR_OP_ARANGE:
    case IR_OP_RESHAPE: case IR_OP_PERMUTE: case IR_OP_EXPAND: case IR_OP_SLICE:
    case IR_OP_CONCAT: case IR_OP_PAD: case IR_OP_GATHER: case IR_OP_REDUCE_SUM:
    case IR_OP_REDUCE_MEAN: case IR_OP_REDUCE_MAX: case IR_OP_REDUCE_MIN:
    case IR_OP_REDUCE_PROD: case IR_OP_ARGMAX: case IR_OP_ARGMIN: case IR_OP_MATMUL:
    case IR_OP_COUNT:
        break;
    }
    return INFINITY;
}

/* The interpreter's own error for a vector-math op, in ULPs of t.  It evaluates ops.def's
 * formula in double: glibc's functions (within 2 ULP of double), and for the composites
 * the roundings of the formula, which gelu's and gelu_erf's negative tails amplify (the
 * argument of e^-t or erfc carries relative error, which becomes relative error of the
 * result times |t|, or 2z^2 for erfc(z)).  For gelu_erf, z = -x/sqrt(2) carries two
 * roundings (sqrt(2) and the division), 2u of relative error, so the result's relative
 * error is 2z^2 * 2u = 2x^2 u: up to 2x^2 ULPs, not x^2, where the result sits low in its
 * binade (fuzz_graphs: gelu_erf(-25) off by 826 ULPs, 1.3x the x^2 of before). */
static double
interp_error(ir_op op, kiln_dtype t, double a)
{
    double r64;
    switch (op) {
    case IR_OP_SIGMOID: r64 = 3; break;
    case IR_OP_SILU: r64 = 3.5; break;
    case IR_OP_GELU: {
        double u = 0.7978845608028654 * fabs(a + 0.044715 * (a * a * a));
        r64 = 3 + 10 * (a < 0 ? u : fmin(u, 0.5));
        break;
    }
    case IR_OP_GELU_ERF: r64 = a < 0 ? 6 + 2 * a * a : 6; break;
    default: r64 = 2; break;
    }
    return t == KILN_DTYPE_F32 ? 0.5 + r64 * 0x1p-29 : r64;
}

static bool
is_composite(ir_op op)
{
    return op == IR_OP_SIGMOID || op == IR_OP_SILU || op == IR_OP_GELU || op == IR_OP_GELU_ERF;
}

/* E of element i of an elementwise node (operands broadcast: values av, bounds ae). */
static double
elem_bound(ir_op op, kiln_dtype t, double vm_bound, const kiln_dtype *ad, int nin,
           const void *const *av, const double *const *ae, const void *val, size_t i)
{
    bool vm = vm_bound >= 0;
    double a[3] = {0, 0, 0}, e[3] = {0, 0, 0};
    bool exact_in = true;
    for (int k = 0; k < nin; k++) {
        a[k] = ir_load_f64(ad[k], av[k], i);
        e[k] = ae[k] ? ae[k][i] : 0;
        if (e[k] != 0) {
            exact_in = false;
            if (!isfinite(a[k]) || !(e[k] < INFINITY))
                return INFINITY;
        }
    }
    double p = exact_in ? 0 : propagate(op, ad, t, a, e);
    if (!(p < INFINITY))
        return INFINITY;
    if (!ir_dtype_is_float(t))
        return p;
    double v = ir_load_f64(t, val, i);
    double m = (fabs(v) + p) * (1 + 0x1p-20); /* the magnitude of either side's result */
    if (vm) {
        double own = (vm_bound + interp_error(op, t, a[0])) * ulp(t, m);
        if (t == KILN_DTYPE_F64 && is_composite(op)) /* e^-x overflows before the result */
            own += 2 * DBL_MIN * (1 + fabs(a[0]));   /* underflows: interpreter gives 0 */
        return p + own;
    }
    if (exact_in)
        return 0;
    if (op == IR_OP_CAST && (ad[0] == KILN_DTYPE_BOOL || ad[0] == t ||
                             (ad[0] == KILN_DTYPE_F32 && t == KILN_DTYPE_F64)))
        return p; /* exact conversions */
    return p + ulp(t, m); /* each side rounds its own result: half an ULP each */
}

/* ---- the walk --------------------------------------------------------------------------- */

typedef struct nstate {
    void *val;    /* the interpreter's values, the node's dtype */
    bool own;     /* val is ours to free */
    double *err;  /* NULL: all 0 */
    int32_t last; /* the last node reading this one (nnodes: an output, kept) */
} nstate;

static double *
new_f64(size_t n, bool zero)
{
    return zero ? calloc(n ? n : 1, sizeof(double)) : malloc((n ? n : 1) * sizeof(double));
}

/* |x| (+ e) in f64. */
static double *
magnitudes(kiln_dtype t, const void *x, const double *e, size_t n)
{
    double *m = new_f64(n, false);
    if (m)
        for (size_t i = 0; i < n; i++)
            m[i] = fabs(ir_load_f64(t, x, i)) + (e ? e[i] : 0);
    return m;
}

static kiln_status
nomem(void)
{
    return ir_error(KILN_ERR_NOMEM, "kiln check: out of memory");
}

static ir_type
as_f64(const ir_type *t)
{
    ir_type r = *t;
    r.dtype = KILN_DTYPE_F64;
    return r;
}

/* The bound of an elementwise node. */
static kiln_status
elementwise(const kiln_graph *g, const ir_node *nd, nstate *ns, size_t n, double **out)
{
    kiln_dtype t = nd->type.dtype;
    bool vm = ir_dtype_is_float(t) && ir_op_is_vmath(nd->op);
    bool any = false;
    for (int k = 0; k < nd->nin; k++)
        any |= ns[nd->in[k]].err != NULL;
    *out = NULL;
    if (!any && !vm)
        return KILN_OK;
    kiln_status st = KILN_OK;
    kiln_dtype ad[3];
    const void *av[3];
    const double *ae[3];
    void *tmp[6] = {0};
    ir_attrs ex = {0};
    ex.shape = nd->type.shape;
    for (int k = 0; k < nd->nin && k < 3; k++) {
        const ir_node *o = &g->nodes[nd->in[k]];
        const nstate *s = &ns[nd->in[k]];
        ad[k] = o->type.dtype;
        av[k] = s->val;
        ae[k] = s->err;
        if (ir_shape_equal(&o->type.shape, &nd->type.shape))
            continue;
        const void *in[1] = {s->val};
        if ((st = interp1(IR_OP_EXPAND, &ex, 1, &o->type, in, NULL, &tmp[2 * k])) != KILN_OK)
            goto done;
        av[k] = tmp[2 * k];
        if (s->err) {
            ir_type ft = as_f64(&o->type);
            const void *ein[1] = {s->err};
            if ((st = interp1(IR_OP_EXPAND, &ex, 1, &ft, ein, NULL, &tmp[2 * k + 1])) != KILN_OK)
                goto done;
            ae[k] = tmp[2 * k + 1];
        }
    }
    double *e = new_f64(n, false);
    if (!e) {
        st = nomem();
        goto done;
    }
    double vm_bound = vm ? ir_op_ulp_bound(nd->op, t) : -1; /* < 0: not vector math */
    for (size_t i = 0; i < n; i++) {
        double b = elem_bound(nd->op, t, vm_bound, ad, nd->nin, av, ae, ns[nd - g->nodes].val, i);
        e[i] = isnan(b) ? INFINITY : b;
    }
    *out = e;
done:
    for (int k = 0; k < 6; k++)
        free(tmp[k]);
    return st;
}

/* Movement: E moves with the values. */
static kiln_status
movement(const kiln_graph *g, const ir_node *nd, nstate *ns, size_t n, double **out)
{
    *out = NULL;
    bool any = false;
    for (int k = 0; k < nd->nin; k++)
        any |= ns[nd->in[k]].err != NULL;
    if (!any)
        return KILN_OK;
    if (nd->op == IR_OP_GATHER && ns[nd->in[1]].err) { /* the indices may differ */
        double *e = new_f64(n, false);
        if (!e)
            return nomem();
        for (size_t i = 0; i < n; i++)
            e[i] = INFINITY;
        *out = e;
        return KILN_OK;
    }
    int nin = nd->nin;
    ir_type *types = malloc((size_t)nin * sizeof *types);
    const void **ops = malloc((size_t)nin * sizeof *ops);
    double **zeros = calloc((size_t)nin, sizeof *zeros);
    kiln_status st = KILN_OK;
    if (!types || !ops || !zeros) {
        st = nomem();
        goto done;
    }
    for (int k = 0; k < nin; k++) {
        const ir_node *o = &g->nodes[nd->in[k]];
        types[k] = o->type;
        if (nd->op == IR_OP_GATHER && k == 1) { /* the index operand: its values */
            ops[k] = ns[nd->in[k]].val;
            continue;
        }
        types[k].dtype = KILN_DTYPE_F64;
        ops[k] = ns[nd->in[k]].err;
        if (!ops[k]) {
            if (!(zeros[k] = new_f64(ir_shape_count(&o->type.shape), true))) {
                st = nomem();
                goto done;
            }
            ops[k] = zeros[k];
        }
    }
    ir_attrs at = *nd->at;
    if (nd->op == IR_OP_PAD)
        at.value = ir_scalar_from_f64(KILN_DTYPE_F64, 0);
    void *e;
    st = interp1(nd->op, &at, nin, types, ops, NULL, &e);
    if (!st)
        *out = e;
done:
    for (int k = 0; zeros && k < nin; k++)
        free(zeros[k]);
    free(zeros);
    free(types);
    free(ops);
    return st;
}

static double *
all_infinite(size_t n)
{
    double *e = new_f64(n, false);
    if (e)
        for (size_t i = 0; i < n; i++)
            e[i] = INFINITY;
    return e;
}

/* Reductions. */
static kiln_status
reduction(const kiln_graph *g, const ir_node *nd, nstate *ns, size_t n, double **out)
{
    *out = NULL;
    const ir_node *x = &g->nodes[nd->in[0]];
    const nstate *xs = &ns[nd->in[0]];
    kiln_dtype t = x->type.dtype, rt = nd->type.dtype;
    size_t nx = ir_shape_count(&x->type.shape);
    double cnt = n ? (double)nx / (double)n : 0; /* terms per result */
    const void *val = ns[nd - g->nodes].val;
    ir_type ft = as_f64(&x->type);
    kiln_status st = KILN_OK;
    void *s0 = NULL, *s1 = NULL, *slo = NULL, *shi = NULL, *szero = NULL;
    double *mag = NULL;
    if (!ir_dtype_is_float(t) || nd->op == IR_OP_ARGMAX || nd->op == IR_OP_ARGMIN ||
        nd->op == IR_OP_REDUCE_MAX || nd->op == IR_OP_REDUCE_MIN) {
        if (!xs->err)
            return KILN_OK; /* exact: the same elements, compared or summed exactly */
        if (!ir_dtype_is_float(t))
            return (*out = all_infinite(n)) ? KILN_OK : nomem();
        /* max/min move by at most the largest E; arg* may then pick another index */
        const void *in[1] = {xs->err};
        if ((st = interp1(IR_OP_REDUCE_MAX, nd->at, 1, &ft, in, NULL, &s0)) != KILN_OK)
            return st;
        double *e = s0;
        if (nd->op == IR_OP_ARGMAX || nd->op == IR_OP_ARGMIN)
            for (size_t i = 0; i < n; i++)
                e[i] = e[i] > 0 ? INFINITY : 0;
        *out = e;
        return KILN_OK;
    }
    if (cnt <= 1 && !xs->err && nd->op != IR_OP_REDUCE_PROD)
        return KILN_OK; /* one term or none: no sum to round */
    double *e = new_f64(n, false);
    if (!e)
        return nomem();
    switch (nd->op) {
    case IR_OP_REDUCE_SUM: case IR_OP_REDUCE_MEAN: {
        if (!(mag = magnitudes(t, xs->val, NULL, nx))) {
            st = nomem();
            goto done;
        }
        const void *in[1] = {mag};
        if ((st = interp1(IR_OP_REDUCE_SUM, nd->at, 1, &ft, in, NULL, &s0)) != KILN_OK)
            goto done;
        if (xs->err) {
            const void *ein[1] = {xs->err};
            if ((st = interp1(IR_OP_REDUCE_SUM, nd->at, 1, &ft, ein, NULL, &s1)) != KILN_OK)
                goto done;
        }
        const double *sa = s0, *se = s1;
        double gam = 2 * gamma_n(cnt - 1, U64); /* kernel and interpreter */
        if (t == KILN_DTYPE_F32) /* the kernels' f32 blocks */
            gam += gamma_n(fmin(cnt, JIT_SUM_BLOCK) - 1, 0x1p-24);
        for (size_t i = 0; i < n; i++) {
            double ei = se ? se[i] : 0;
            double b = ei + gam * (sa[i] + ei);
            if (nd->op == IR_OP_REDUCE_MEAN)
                b /= cnt;
            if (b > 0)
                b += ulp(rt, (fabs(ir_load_f64(rt, val, i)) + b) * (1 + 0x1p-20));
            /* an f32 block's partial sum may overflow f32 where sum |x| exceeds its largest
             * finite value (the interpreter's f64 sum does not): no bound there */
            if (t == KILN_DTYPE_F32 && sa[i] + ei > 0x1.fffffep+127)
                b = INFINITY;
            e[i] = isnan(b) ? INFINITY : b;
        }
        break;
    }
    case IR_OP_REDUCE_PROD: {
        if (!(mag = magnitudes(t, xs->val, NULL, nx))) {
            st = nomem();
            goto done;
        }
        const void *in[1] = {mag};
        if ((st = interp1(IR_OP_REDUCE_PROD, nd->at, 1, &ft, in, NULL, &s0)) != KILN_OK)
            goto done;
        if (xs->err) {
            for (size_t i = 0; i < nx; i++)
                mag[i] += xs->err[i];
            if ((st = interp1(IR_OP_REDUCE_PROD, nd->at, 1, &ft, in, NULL, &s1)) != KILN_OK)
                goto done;
        }
        /* the smallest |x| + E: 0 where some factor is exactly ±0 (none in an empty
         * product, which the verifier refuses to take the min of) */
        if (nx > 0 && (st = interp1(IR_OP_REDUCE_MIN, nd->at, 1, &ft, in, NULL, &szero)))
            goto done;
        const double *p0 = s0, *p1 = s1 ? s1 : s0, *zmin = szero;
        /* every partial product, in any order, lies between the product of the factors
         * below 1 and that of those above 1 (errors included): outside the normal range
         * there, no bound */
        for (size_t i = 0; i < nx; i++) {
            double m = fabs(ir_load_f64(t, xs->val, i)) - (xs->err ? xs->err[i] : 0);
            mag[i] = fmin(fmax(m, 0), 1);
        }
        if ((st = interp1(IR_OP_REDUCE_PROD, nd->at, 1, &ft, in, NULL, &slo)) != KILN_OK)
            goto done;
        for (size_t i = 0; i < nx; i++) {
            double m = fabs(ir_load_f64(t, xs->val, i)) + (xs->err ? xs->err[i] : 0);
            mag[i] = fmax(m, 1);
        }
        if ((st = interp1(IR_OP_REDUCE_PROD, nd->at, 1, &ft, in, NULL, &shi)) != KILN_OK)
            goto done;
        const double *lo = slo, *hi = shi;
        /* kernels may multiply in the dtype, the interpreter in f64 (and the difference
         * p1 - p0 is itself rounded) */
        double gam = gamma_n(cnt, unit(t)) + 3 * gamma_n(cnt, U64);
        for (size_t i = 0; i < n; i++) {
            double b = fmax(p1[i] - p0[i], 0) + gam * p1[i];
            if (b > 0)
                b += ulp(rt, (fabs(ir_load_f64(rt, val, i)) + b) * (1 + 0x1p-20));
            bool leaves = cnt > 1 && (lo[i] < min_normal(t) || hi[i] > max_finite(t));
            e[i] = isnan(b) || leaves ? INFINITY : b;
            /* an exact zero factor makes the product ±0 in any order, the sign that of
             * the factors' signs (or NaN in any order, with an infinity or a NaN among
             * them): exact, whatever the other factors do */
            if (zmin && zmin[i] == 0)
                e[i] = 0;
        }
        break;
    }
    default:
        break;
    }
    *out = e;
    e = NULL;
done:
    free(e);
    free(mag);
    free(s0);
    free(s1);
    free(slo);
    free(shi);
    free(szero);
    return st;
}

/* matmul: sum_k a*b. */
static kiln_status
contraction(const kiln_graph *g, const ir_node *nd, nstate *ns, size_t n, double **out)
{
    *out = NULL;
    const ir_node *A = &g->nodes[nd->in[0]], *B = &g->nodes[nd->in[1]];
    const nstate *as = &ns[nd->in[0]], *bs = &ns[nd->in[1]];
    kiln_dtype t = nd->type.dtype;
    if (!ir_dtype_is_float(t)) {
        if (!as->err && !bs->err)
            return KILN_OK;
        return (*out = all_infinite(n)) ? KILN_OK : nomem();
    }
    double k = (double)A->type.shape.dims[A->type.shape.rank - 1];
    size_t na = ir_shape_count(&A->type.shape), nb = ir_shape_count(&B->type.shape);
    ir_type ft[2] = {as_f64(&A->type), as_f64(&B->type)};
    ir_attrs none = {0};
    kiln_status st = KILN_OK;
    void *p0 = NULL, *p1 = NULL;
    double *ma = magnitudes(A->type.dtype, as->val, NULL, na),
           *mb = magnitudes(B->type.dtype, bs->val, NULL, nb), *e = new_f64(n, false);
    if (!ma || !mb || !e) {
        st = nomem();
        goto done;
    }
    const void *in[2] = {ma, mb};
    if ((st = interp1(IR_OP_MATMUL, &none, 2, ft, in, NULL, &p0)) != KILN_OK)
        goto done;
    if (as->err || bs->err) {
        for (size_t i = 0; as->err && i < na; i++)
            ma[i] += as->err[i];
        for (size_t i = 0; bs->err && i < nb; i++)
            mb[i] += bs->err[i];
        if ((st = interp1(IR_OP_MATMUL, &none, 2, ft, in, NULL, &p1)) != KILN_OK)
            goto done;
    }
    const double *q0 = p0, *q1 = p1 ? p1 : p0;
    double gam = gamma_n(k, unit(t)) + 3 * gamma_n(k, U64);
    for (size_t i = 0; i < n; i++) {
        /* k roundings below the normal range err by up to half a subnormal step each */
        double b = fmax(q1[i] - q0[i], 0) + gam * q1[i] + k * min_subnormal(t);
        if (b > 0)
            b += ulp(t, (fabs(ir_load_f64(t, ns[nd - g->nodes].val, i)) + b) * (1 + 0x1p-20));
        e[i] = isnan(b) || q1[i] > max_finite(t) ? INFINITY : b;
    }
    *out = e;
    e = NULL;
done:
    free(ma);
    free(mb);
    free(e);
    free(p0);
    free(p1);
    return st;
}

static void
release(nstate *s)
{
    if (s->own)
        free(s->val);
    free(s->err);
    s->val = NULL;
    s->err = NULL;
    s->own = false;
}

kiln_status
eb_reference(const kiln_graph *g, const void *const *inputs, eb_output *outs)
{
    int32_t nn = g->nnodes;
    for (int k = 0; k < g->noutputs; k++)
        outs[k] = (eb_output){NULL, NULL};
    nstate *ns = calloc((size_t)nn + 1, sizeof *ns);
    if (!ns)
        return nomem();
    for (int32_t i = 0; i < nn; i++) {
        ns[i].last = -1; /* read by no one: freed at once */
        for (int k = 0; k < g->nodes[i].nin; k++)
            ns[g->nodes[i].in[k]].last = i;
    }
    for (int k = 0; k < g->noutputs; k++)
        ns[g->outputs[k].node].last = nn;

    kiln_status st = KILN_OK;
    for (int32_t id = 0; id < nn && !st; id++) {
        const ir_node *nd = &g->nodes[id];
        nstate *s = &ns[id];
        size_t n = ir_shape_count(&nd->type.shape);
        ir_kind kind = ir_ops[nd->op].kind;
        if (nd->op == IR_OP_INPUT) {
            s->val = (void *)inputs[nd->index];
        } else {
            int nin = nd->nin;
            ir_type *types = malloc(((size_t)nin + 1) * sizeof *types);
            const void **ops = malloc(((size_t)nin + 1) * sizeof *ops);
            if (!types || !ops) {
                free(types);
                free(ops);
                st = nomem();
                break;
            }
            for (int k = 0; k < nin; k++) {
                types[k] = g->nodes[nd->in[k]].type;
                ops[k] = ns[nd->in[k]].val;
            }
            st = interp1(nd->op, nd->at, nin, types, ops,
                         kind == IR_KIND_SOURCE ? &nd->type : NULL, &s->val);
            free(types);
            free(ops);
            if (st)
                break;
            s->own = true;
        }
        switch (kind) {
        case IR_KIND_SOURCE: break;
        case IR_KIND_UNARY: case IR_KIND_BINARY: case IR_KIND_TERNARY: case IR_KIND_CAST:
            st = elementwise(g, nd, ns, n, &s->err);
            break;
        case IR_KIND_MOVE: st = movement(g, nd, ns, n, &s->err); break;
        case IR_KIND_REDUCE: st = reduction(g, nd, ns, n, &s->err); break;
        case IR_KIND_MATMUL: st = contraction(g, nd, ns, n, &s->err); break;
        }
        for (int k = 0; k < nd->nin; k++)
            if (ns[nd->in[k]].last == id)
                release(&ns[nd->in[k]]);
        if (s->last < 0)
            release(s);
    }
    for (int k = 0; k < g->noutputs && !st; k++) {
        const ir_node *nd = &g->nodes[g->outputs[k].node];
        const nstate *s = &ns[g->outputs[k].node];
        size_t bytes = ir_type_bytes(&nd->type), n = ir_shape_count(&nd->type.shape);
        outs[k].ref = malloc(bytes ? bytes : 1);
        if (!outs[k].ref) {
            st = nomem();
            break;
        }
        memcpy(outs[k].ref, s->val, bytes);
        if (s->err) {
            if (!(outs[k].bound = new_f64(n, false))) {
                st = nomem();
                break;
            }
            memcpy(outs[k].bound, s->err, n * sizeof(double));
        }
    }
    for (int32_t i = 0; i < nn; i++)
        release(&ns[i]);
    free(ns);
    if (st)
        eb_free(g, outs);
    return st;
}

void
eb_free(const kiln_graph *g, eb_output *outs)
{
    for (int k = 0; k < g->noutputs; k++) {
        free(outs[k].ref);
        free(outs[k].bound);
        outs[k] = (eb_output){NULL, NULL};
    }
}

bool
eb_within(kiln_dtype t, const void *got, const void *ref, size_t i, double bound, double *ratio)
{
    size_t es = kiln_dtype_size(t);
    *ratio = 0;
    if (memcmp((const char *)got + i * es, (const char *)ref + i * es, es) == 0)
        return true;
    if (!ir_dtype_is_float(t)) {
        long double d = fabsl((long double)ir_load_i64(t, got, i) - (long double)ir_load_i64(t, ref, i));
        if (!(bound < INFINITY))
            return true;
        *ratio = bound > 0 ? (double)(d / bound) : INFINITY;
        return d <= bound;
    }
    double g = ir_load_f64(t, got, i), r = ir_load_f64(t, ref, i);
    if (isnan(g) || isnan(r)) {
        if ((isnan(g) && isnan(r)) || !(bound < INFINITY))
            return true;
        *ratio = INFINITY;
        return false;
    }
    if (!(bound < INFINITY))
        return true;
    long double top = t == KILN_DTYPE_F32 ? 0x1p128L : 0x1p1024L;
    long double gl = isinf(g) ? copysignl(top, g) : g, rl = isinf(r) ? copysignl(top, r) : r;
    long double d = fabsl(gl - rl);
    if (d == 0)
        return true; /* ±0 */
    *ratio = bound > 0 ? (double)(d / bound) : INFINITY;
    return d <= (long double)bound * (1 + 0x1p-20L);
}

eb_cmp
eb_compare(kiln_dtype t, const void *got, const eb_output *ref, size_t n)
{
    eb_cmp r = {.pass = true};
    size_t worst_ulp = 0;
    bool fl = ir_dtype_is_float(t);
    for (size_t i = 0; i < n; i++) {
        double b = ref->bound ? ref->bound[i] : 0, ratio;
        bool ok = eb_within(t, got, ref->ref, i, b, &ratio);
        if (fl) {
            double d = ref_ulp_distance(t, ir_load_f64(t, got, i), ir_load_f64(t, ref->ref, i));
            if (d > r.ulp) {
                r.ulp = d;
                worst_ulp = i;
            }
        } else if (ratio > 0 || !ok) {
            r.ulp += 1;
        }
        if (!ok && !(ratio > 1))
            ratio = INFINITY; /* a failure reads as one */
        if (ratio > r.ratio || (!ok && r.pass)) {
            r.ratio = ratio;
            r.worst = i;
        }
        r.pass &= ok;
    }
    if (r.ratio == 0)
        r.worst = worst_ulp;
    return r;
}
