/* refmath.c — exact values of kiln's float functions, and errors in ULPs (refmath.h).
 *
 * The composite functions are written without the cancellation of ops.def's literal
 * formulas (1 + tanh(u) and 1 + erf(z) lose everything in the negative tail):
 *   sigmoid(x) = 1/(1 + e^-x),  silu(x) = x/(1 + e^-x),
 *   gelu(x) = x/(1 + e^-t), t = 2*0.7978845608028654*(x + 0.044715*x^3) formed in binary128
 *     (ops.def's decimals as doubles, as the interpreter and vmath multiply by them),
 *   gelu_erf(x) = x*erfc(-x/sqrt2)/2 with the rounding of -x/sqrt2 corrected to first order.
 * These are the forms tests/check_vmath.c measures vmath against (docs/accuracy.md). */
#include "refmath.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__SIZEOF_FLOAT128__) && !defined(__clang__)
__extension__ typedef __float128 wide;
#else
typedef long double wide; /* enough for gelu's t where long double is binary128 */
#endif

/* RN(1/sqrt2) in long double, and the rest. */
#define SQRT_HALF_L 0x1.6a09e667f3bcc908p-1L
#define SQRT_HALF_REST 0x1.65f626cdd52b0p-66L

static long double
gelu(long double x, bool f64)
{
    /* t to ~2^-110 relative, then e^-t = e^-th (1 - tl) */
    if (isinf(x))
        return x > 0 ? x : (long double)NAN; /* x * 1, -inf * 0 */
    if (!f64 || x >= 0) {
        /* t's relative error (2^-62) reaches the result times |t| e^-t / (1 + e^-t) <= 1/e
         * for x >= 0; for x < 0 times |t|, which f32's ULP still absorbs */
        long double t = (long double)(2 * 0.7978845608028654) *
                        (x + (long double)0.044715 * x * x * x);
        return x / (1.0L + expl(-t));
    }
    wide xq = x;
    wide t = (wide)(2 * 0.7978845608028654) * (xq + (wide)0.044715 * xq * xq * xq);
    long double th = (long double)t;
    long double tl = fabsl(th) < 1e5L ? (long double)(t - (wide)th) : 0;
    return x / (1.0L + expl(-th) * (1.0L - tl));
}

static long double
gelu_erf(long double x)
{
    long double a = -x * SQRT_HALF_L;
    long double d = fmal(-x, SQRT_HALF_L, -a) - x * SQRT_HALF_REST; /* exact a: a + d */
    if (isinf(x))
        return 0.5L * x * erfcl(a);
    long double phi =
        0.5L *
        (erfcl(a) - d * (2.0L / sqrtl(3.14159265358979323846264338327950288L)) * expl(-a * a));
    return x * phi;
}

bool
ref_math_has(ir_op op)
{
    return ir_op_is_vmath(op) || op == IR_OP_SQRT || op == IR_OP_RSQRT || op == IR_OP_RECIP;
}

long double
ref_math(ir_op op, kiln_dtype t, long double a, long double b)
{
    /* Signalling NaNs as quiet ones, as C11 Annex F knows them (pow(NaN, 0) = 1); glibc
     * follows TS 18661 and gives pow(sNaN, 0) = NaN. */
    a = isnan(a) ? copysignl((long double)NAN, a) : a;
    b = isnan(b) ? copysignl((long double)NAN, b) : b;
    switch (op) {
    case IR_OP_EXP: return expl(a);
    case IR_OP_EXP2: return exp2l(a);
    case IR_OP_EXPM1: return expm1l(a);
    case IR_OP_LOG: return logl(a);
    case IR_OP_LOG2: return log2l(a);
    case IR_OP_LOG1P: return log1pl(a);
    case IR_OP_SQRT: return sqrtl(a);
    case IR_OP_RSQRT: return 1.0L / sqrtl(a);
    case IR_OP_RECIP: return 1.0L / a;
    case IR_OP_SIN: return sinl(a);
    case IR_OP_COS: return cosl(a);
    case IR_OP_TAN: return tanl(a);
    case IR_OP_TANH: return tanhl(a);
    case IR_OP_SIGMOID: return 1.0L / (1.0L + expl(-a));
    case IR_OP_ERF: return erfl(a);
    case IR_OP_GELU: return gelu(a, t == KILN_DTYPE_F64);
    case IR_OP_GELU_ERF: return gelu_erf(a);
    case IR_OP_SILU: return a / (1.0L + expl(-a));
    case IR_OP_POW:
        /* glibc 2.36's powl(-inf, -2^63) is inf (Annex F: +0); the special cases' results
         * are exact, so double pow gives them */
        if (!isfinite(a) || !isfinite(b) || a == 0 || b == 0)
            return pow((double)a, (double)b);
        return powl(a, b);
    case IR_OP_ATAN2: return atan2l(a, b);
    /* Not functions.  No default: a VMATH row added to ops.def fails the build here
     * (-Werror=switch) until it has its exact value. */
    case IR_OP_INPUT: case IR_OP_CONSTANT: case IR_OP_FULL: case IR_OP_ARANGE: case IR_OP_NEG:
    case IR_OP_ABS: case IR_OP_SIGN: case IR_OP_RELU: case IR_OP_FLOOR: case IR_OP_CEIL:
    case IR_OP_ROUND: case IR_OP_TRUNC: case IR_OP_NOT: case IR_OP_ISNAN: case IR_OP_ISINF:
    case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_DIV: case IR_OP_REM:
    case IR_OP_MAX: case IR_OP_MIN: case IR_OP_EQ: case IR_OP_NE: case IR_OP_LT: case IR_OP_LE:
    case IR_OP_GT: case IR_OP_GE: case IR_OP_AND: case IR_OP_OR: case IR_OP_XOR:
    case IR_OP_WHERE: case IR_OP_CLAMP: case IR_OP_CAST: case IR_OP_RESHAPE:
    case IR_OP_PERMUTE: case IR_OP_EXPAND: case IR_OP_SLICE: case IR_OP_CONCAT: case IR_OP_PAD:
    case IR_OP_GATHER: case IR_OP_REDUCE_SUM: case IR_OP_REDUCE_MEAN: case IR_OP_REDUCE_MAX:
    case IR_OP_REDUCE_MIN: case IR_OP_REDUCE_PROD: case IR_OP_ARGMAX: case IR_OP_ARGMIN:
    case IR_OP_MATMUL: case IR_OP_COUNT:
        break;
    }
    return NAN;
}

/* Precision (bits), smallest and largest exponent of a float dtype. */
static void
format_of(kiln_dtype t, int *p, int *emin, int *emax)
{
    bool f32 = t == KILN_DTYPE_F32;
    *p = f32 ? FLT_MANT_DIG : DBL_MANT_DIG;
    *emin = f32 ? FLT_MIN_EXP - 1 : DBL_MIN_EXP - 1; /* -126, -1022 */
    *emax = f32 ? FLT_MAX_EXP - 1 : DBL_MAX_EXP - 1; /* 127, 1023 */
}

long double
ref_ulp_of(kiln_dtype t, long double x)
{
    int p, emin, emax;
    format_of(t, &p, &emin, &emax);
    x = fabsl(x);
    int e = x > 0 && isfinite(x) ? ilogbl(x) : x > 0 ? emax : emin;
    e = e < emin ? emin : e > emax ? emax : e;
    return ldexpl(1.0L, e - p + 1);
}

double
ref_ulp_error(kiln_dtype t, double got, long double exact)
{
    if (isnan(exact))
        return isnan(got) ? 0 : INFINITY;
    if (isnan(got))
        return INFINITY;
    if ((long double)got == exact)
        return 0;
    if (isinf(exact))
        return INFINITY;
    int p, emin, emax;
    format_of(t, &p, &emin, &emax);
    long double top = ldexpl(1.0L, emax + 1); /* where infinity sits on the ULP scale */
    /* the exact value rounds to infinity in t: infinity itself is exact */
    if (fabsl(exact) >= top - ldexpl(1.0L, emax - p) && isinf(got) &&
        !signbit(got) == !signbit(exact))
        return 0;
    long double g = isinf(got) ? copysignl(top, got) : (long double)got;
    return (double)(fabsl(g - exact) / ref_ulp_of(t, exact));
}

/* The bits of a float as a line on which adjacent values differ by one (±0 both 0). */
static int64_t
ordered(kiln_dtype t, double x)
{
    if (t == KILN_DTYPE_F32) {
        float f = (float)x;
        uint32_t u;
        memcpy(&u, &f, 4);
        return u >> 31 ? -(int64_t)(u & 0x7fffffffu) : (int64_t)u;
    }
    uint64_t u;
    memcpy(&u, &x, 8);
    return u >> 63 ? -(int64_t)(u & 0x7fffffffffffffffull) : (int64_t)u;
}

double
ref_ulp_distance(kiln_dtype t, double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b) ? 0 : INFINITY;
    /* both in (-2^63, 2^63): the difference is below 2^64, exact in unsigned arithmetic */
    int64_t x = ordered(t, a), y = ordered(t, b);
    return (double)(x > y ? (uint64_t)x - (uint64_t)y : (uint64_t)y - (uint64_t)x);
}
