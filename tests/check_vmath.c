/* check_vmath.c — lib/jit/vmath.c, kiln's vector math, against the C library.
 *
 * Oracles.  f32 functions: glibc's double functions (error below 1 ULP of double, ~2^-29 ULP
 * of float).  f64 functions: glibc's long double functions (~2^-11 ULP of double).  The
 * composites are the oracle's (ref_math, lib/check/refmath.c), evaluated in forms without
 * cancellation, in long double: sigmoid(x) = 1/(1 + e^-x), silu(x) = x/(1 + e^-x), gelu(x) =
 * x/(1 + e^-t) with t = 2*0.7978845608028654 (x + 0.044715 x^3) formed in __float128 where
 * it matters, gelu_erf(x) = x erfc(-x/sqrt2)/2 with the rounding of -x/sqrt2 corrected to
 * first order.  (ops.def's literal formulas, which the reference
 * interpreter evaluates, cancel in the negative tail and would be the less accurate side.)
 * The error is |got - exact| in ULP of the result's dtype, against the unrounded reference,
 * and must stay within the function's bound in ops.def (ir_op_ulp_bound).
 *
 * Each (function, dtype) is JIT-compiled twice: a kernel with a vector body at the host's
 * width plus a scalar tail, and an all-scalar kernel.  Both run on (a) a dense sweep: f32
 * 2^22 bit patterns spread evenly over every binade and both signs plus 2^21 points in the
 * function's interesting range; f64 2^20 random and structured points; and (b) special
 * values: ±0, ±inf, NaNs with payloads, subnormal and normal extremes, neighbours of the
 * overflow/underflow thresholds and switch points, multiples of pi/2, integers and half-
 * integers for pow, all signed-zero/infinity combinations for atan2.  NaN must give NaN,
 * results that are exactly 0, ±inf or 1 must be exact (with the sign of zero), and the two
 * kernels must agree bit for bit.  Under ASan the sweeps are 4 times sparser.
 *
 * The measured maxima are printed (one line per function and dtype); docs/accuracy.md
 * quotes them. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llvm.h"
#include "refmath.h"
#include "support.h"
#include "vmath.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif
#define SPARSE (UNDER_ASAN ? 4 : 1)

/* ---- references ------------------------------------------------------------------------ */

/* sigmoid, silu, gelu and gelu_erf: the oracle's forms free of cancellation
 * (lib/check/refmath.c), in its most accurate variant (the f64 one) for both dtypes. */
static long double
ref_composite(ir_op op, long double x)
{
    return ref_math(op, KILN_DTYPE_F64, x, 0);
}

static long double
ref(jit_vm_fn fn, long double x, long double y, bool f32)
{
    /* f32: double functions (the reference interpreter's definition); f64: long double. */
    double xd = (double)x, yd = (double)y;
    switch (fn) {
    case JIT_VM_EXP:
        return f32 ? exp(xd) : expl(x);
    case JIT_VM_EXP2:
        return f32 ? exp2(xd) : exp2l(x);
    case JIT_VM_EXPM1:
        return f32 ? expm1(xd) : expm1l(x);
    case JIT_VM_LOG:
        return f32 ? log(xd) : logl(x);
    case JIT_VM_LOG2:
        return f32 ? log2(xd) : log2l(x);
    case JIT_VM_LOG1P:
        return f32 ? log1p(xd) : log1pl(x);
    case JIT_VM_TANH:
        return f32 ? tanh(xd) : tanhl(x);
    case JIT_VM_SIGMOID:
        return ref_composite(IR_OP_SIGMOID, x);
    case JIT_VM_SILU:
        return ref_composite(IR_OP_SILU, x);
    case JIT_VM_GELU:
        return ref_composite(IR_OP_GELU, x);
    case JIT_VM_ERF:
        return f32 ? erf(xd) : erfl(x);
    case JIT_VM_GELU_ERF:
        return ref_composite(IR_OP_GELU_ERF, x);
    case JIT_VM_SIN:
        return f32 ? sin(xd) : sinl(x);
    case JIT_VM_COS:
        return f32 ? cos(xd) : cosl(x);
    case JIT_VM_TAN:
        return f32 ? tan(xd) : tanl(x);
    case JIT_VM_POW:
        return f32 ? pow(xd, yd) : powl(x, y);
    case JIT_VM_ATAN2:
        return f32 ? atan2(xd, yd) : atan2l(x, y);
    case JIT_VM_COUNT:
        break;
    }
    return NAN;
}

/* ---- kernels ----------------------------------------------------------------------------- */

typedef void (*kernel_fn)(const void *x, const void *y, void *out, int64_t n);

/* The functions of jit_vm_fn (ops.def's VMATH rows), and JIT_VM_COUNT for jit_vm_fmod (float
 * rem). */
#define FMOD JIT_VM_COUNT

static const char *
fn_name(jit_vm_fn fn)
{
    return fn == FMOD ? "fmod" : jit_vm_name(fn);
}

static LLVMValueRef
emit_fn(jit_vm *vm, jit_vm_fn fn, LLVMValueRef x, LLVMValueRef y)
{
    return fn == FMOD ? jit_vm_fmod(vm, x, y) : jit_vm_emit(vm, fn, x, y);
}

/* void name(ptr x, ptr y, ptr out, i64 n): `lanes`-wide vector body over the largest multiple
 * of lanes, scalar tail for the rest (lanes = 0: all scalar). */
static void
build_kernel(jit_unit *u, const char *name, jit_vm_fn fn, bool dbl, unsigned lanes)
{
    LLVMContextRef ctx = u->ctx;
    LLVMTypeRef et = dbl ? LLVMDoubleTypeInContext(ctx) : LLVMFloatTypeInContext(ctx);
    LLVMTypeRef i64 = LLVMInt64TypeInContext(ctx), ptr = LLVMPointerTypeInContext(ctx, 0);
    LLVMTypeRef params[] = {ptr, ptr, ptr, i64};
    LLVMValueRef f =
        LLVMAddFunction(u->mod, name, LLVMFunctionType(LLVMVoidTypeInContext(ctx), params, 4, 0));
    LLVMValueRef px = LLVMGetParam(f, 0), py = LLVMGetParam(f, 1), po = LLVMGetParam(f, 2);
    LLVMValueRef n = LLVMGetParam(f, 3);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(ctx, f, "entry");
    LLVMBasicBlockRef vloop = LLVMAppendBasicBlockInContext(ctx, f, "vloop");
    LLVMBasicBlockRef tpre = LLVMAppendBasicBlockInContext(ctx, f, "tail_pre");
    LLVMBasicBlockRef tloop = LLVMAppendBasicBlockInContext(ctx, f, "tail");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ctx, f, "done");
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    jit_vm vm = {ctx, u->mod, b};
    bool binary = fn == FMOD || jit_vm_arity(fn) == 2;
    unsigned align = dbl ? 8 : 4;

    LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef zero = LLVMConstInt(i64, 0, 0);
    LLVMValueRef nv = zero;
    if (lanes)
        nv = LLVMBuildSub(b, n, LLVMBuildSRem(b, n, LLVMConstInt(i64, lanes, 0), ""), "nv");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, zero, nv, ""), vloop, tpre);

    /* vector body */
    LLVMPositionBuilderAtEnd(b, vloop);
    LLVMValueRef i = LLVMBuildPhi(b, i64, "i");
    LLVMValueRef inext = zero;
    if (lanes) {
        LLVMTypeRef vt = LLVMVectorType(et, lanes);
        LLVMValueRef lx = LLVMBuildLoad2(b, vt, LLVMBuildGEP2(b, et, px, &i, 1, ""), "");
        LLVMSetAlignment(lx, align);
        LLVMValueRef ly = NULL;
        if (binary) {
            ly = LLVMBuildLoad2(b, vt, LLVMBuildGEP2(b, et, py, &i, 1, ""), "");
            LLVMSetAlignment(ly, align);
        }
        LLVMValueRef r = emit_fn(&vm, fn, lx, ly);
        ck_assert_msg(r != NULL, "jit_vm_emit: %s", kiln_errmsg());
        LLVMValueRef st = LLVMBuildStore(b, r, LLVMBuildGEP2(b, et, po, &i, 1, ""));
        LLVMSetAlignment(st, align);
        inext = LLVMBuildAdd(b, i, LLVMConstInt(i64, lanes, 0), "");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, inext, nv, ""), vloop, tpre);
    } else {
        LLVMBuildBr(b, tpre);
    }
    LLVMValueRef inc[] = {zero, inext};
    LLVMBasicBlockRef incb[] = {entry, vloop};
    LLVMAddIncoming(i, inc, incb, lanes ? 2 : 1);

    /* scalar tail */
    LLVMPositionBuilderAtEnd(b, tpre);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, nv, n, ""), tloop, done);
    LLVMPositionBuilderAtEnd(b, tloop);
    LLVMValueRef j = LLVMBuildPhi(b, i64, "j");
    LLVMValueRef sx = LLVMBuildLoad2(b, et, LLVMBuildGEP2(b, et, px, &j, 1, ""), "");
    LLVMValueRef sy =
        binary ? LLVMBuildLoad2(b, et, LLVMBuildGEP2(b, et, py, &j, 1, ""), "") : NULL;
    LLVMValueRef sr = emit_fn(&vm, fn, sx, sy);
    ck_assert_msg(sr != NULL, "jit_vm_emit: %s", kiln_errmsg());
    LLVMBuildStore(b, sr, LLVMBuildGEP2(b, et, po, &j, 1, ""));
    LLVMValueRef jnext = LLVMBuildAdd(b, j, LLVMConstInt(i64, 1, 0), "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, jnext, n, ""), tloop, done);
    LLVMValueRef jinc[] = {nv, jnext};
    LLVMBasicBlockRef jincb[] = {tpre, tloop};
    LLVMAddIncoming(j, jinc, jincb, 2);

    LLVMPositionBuilderAtEnd(b, done);
    LLVMBuildRetVoid(b);
    LLVMDisposeBuilder(b);
}

typedef struct kernels {
    kernel_fn vec, scl;
    jit_code *code;
    char *opt; /* optimised IR */
} kernels;

static unsigned
host_lanes(bool dbl)
{
    return (unsigned)jit_host_info()->vector_bits / (dbl ? 64 : 32);
}

static kernels
compile(jit_vm_fn fn, bool dbl)
{
    jit_unit u;
    ck_assert_msg(jit_unit_new(&u, "vmath_test") == KILN_OK, "jit_unit_new: %s", kiln_errmsg());
    /* names unique per kernel: the JIT's symbols are global while code is alive */
    char vname[64], sname[64];
    snprintf(vname, sizeof vname, "vmath_%s_%s_vec", fn_name(fn), dbl ? "f64" : "f32");
    snprintf(sname, sizeof sname, "vmath_%s_%s_scl", fn_name(fn), dbl ? "f64" : "f32");
    build_kernel(&u, vname, fn, dbl, host_lanes(dbl));
    build_kernel(&u, sname, fn, dbl, 0);
    const char *names[] = {vname, sname};
    void *addrs[2];
    kernels k = {0};
    jit_dumps d = {.want_opt = true};
    kiln_status st = jit_unit_compile(&u, 2, names, addrs, &k.code, &d);
    ck_assert_msg(st == KILN_OK, "compile %s: %s", fn_name(fn), kiln_errmsg());
    k.vec = (kernel_fn)(uintptr_t)addrs[0];
    k.scl = (kernel_fn)(uintptr_t)addrs[1];
    k.opt = d.opt;
    return k;
}

static void
release(kernels *k)
{
    jit_code_free(k->code);
    free(k->opt);
}

/* ---- inputs ------------------------------------------------------------------------------ */

static uint64_t
rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static double
uniform(uint64_t *s, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(rnd(s) >> 11) * 0x1p-53);
}

static float
f32_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static double
f64_of_bits(uint64_t u)
{
    double f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* A value with magnitude uniform in bit pattern (log-uniform) up to `max`, random sign. */
static double
log_uniform(uint64_t *s, bool dbl, double max)
{
    if (dbl) {
        uint64_t lim;
        memcpy(&lim, &max, sizeof lim);
        return f64_of_bits((rnd(s) % (lim + 1)) | (rnd(s) & 1u) << 63);
    }
    float m = (float)max;
    uint32_t lim;
    memcpy(&lim, &m, sizeof lim);
    return f32_of_bits((uint32_t)(rnd(s) % ((uint64_t)lim + 1)) | (uint32_t)(rnd(s) & 1u) << 31);
}

/* The function's interesting interval, per dtype (beyond it results are 0, ±1, inf, x, ...). */
typedef struct domain {
    double lo, hi;
} domain;

static domain
focus(jit_vm_fn fn, bool dbl)
{
    switch (fn) {
    case JIT_VM_EXP:
        return dbl ? (domain){-746, 710} : (domain){-104, 89};
    case JIT_VM_EXP2:
        return dbl ? (domain){-1076, 1025} : (domain){-151, 129};
    case JIT_VM_EXPM1:
        return dbl ? (domain){-40, 710} : (domain){-20, 89};
    case JIT_VM_LOG:
    case JIT_VM_LOG2:
        return (domain){0, 4};
    case JIT_VM_LOG1P:
        return (domain){-1, 4};
    case JIT_VM_TANH:
        return dbl ? (domain){-20, 20} : (domain){-10, 10};
    case JIT_VM_SIGMOID:
        return dbl ? (domain){-750, 50} : (domain){-110, 30};
    case JIT_VM_SILU:
        return dbl ? (domain){-760, 50} : (domain){-120, 30};
    case JIT_VM_GELU:
        return dbl ? (domain){-25, 25} : (domain){-12, 12};
    case JIT_VM_ERF:
        return (domain){-6, 6};
    case JIT_VM_GELU_ERF:
        return dbl ? (domain){-40, 40} : (domain){-16, 16};
    case JIT_VM_SIN:
    case JIT_VM_COS:
    case JIT_VM_TAN:
        return (domain){-100, 100};
    case JIT_VM_POW:
        return (domain){0, 4};
    case JIT_VM_ATAN2:
        return (domain){-4, 4};
    case JIT_VM_COUNT:
        break;
    }
    return (domain){-1, 1};
}

typedef struct inputs {
    size_t n, cap;
    double *x, *y;   /* as doubles; f32 inputs are exactly representable */
    size_t nspecial; /* the first nspecial entries are special values */
} inputs;

static void
push(inputs *in, double x, double y)
{
    if (in->n == in->cap) {
        in->cap = in->cap ? in->cap * 2 : 1024;
        in->x = realloc(in->x, in->cap * sizeof *in->x);
        in->y = realloc(in->y, in->cap * sizeof *in->y);
        ck_assert(in->x && in->y);
    }
    in->x[in->n] = x;
    in->y[in->n] = y;
    in->n++;
}

/* v and its neighbours up to k steps away, in the dtype. */
static void
push_around(inputs *in, double v, int k, bool dbl, double y)
{
    if (dbl) {
        double a = v, b = v;
        push(in, v, y);
        for (int i = 0; i < k; i++) {
            a = nextafter(a, INFINITY);
            b = nextafter(b, -INFINITY);
            push(in, a, y);
            push(in, b, y);
        }
    } else {
        float a = (float)v, b = (float)v;
        push(in, a, y);
        for (int i = 0; i < k; i++) {
            a = nextafterf(a, INFINITY);
            b = nextafterf(b, -INFINITY);
            push(in, a, y);
            push(in, b, y);
        }
    }
}

static void
specials(inputs *in, jit_vm_fn fn, bool dbl)
{
    const double nanpay = dbl ? f64_of_bits(0x7ff8000000001234u) : (double)f32_of_bits(0x7fc01234u);
    const double nanneg = dbl ? f64_of_bits(0xfff8000000000001u) : (double)f32_of_bits(0xffc00001u);
    const double snan = dbl ? f64_of_bits(0x7ff0000000000001u) : (double)f32_of_bits(0x7fa00000u);
    const double tmin = dbl ? 0x1p-1074 : 0x1p-149,
                 tmaxsub = dbl ? 0x1.ffffffffffffep-1023 : 0x1.fffffcp-127;
    const double nmin = dbl ? DBL_MIN : FLT_MIN, nmax = dbl ? DBL_MAX : FLT_MAX;
    const double base[] = {0.0,   INFINITY, NAN,  nanpay, snan, tmin, tmaxsub, nmin, nmax,
                           1,     0.5,      2,    3,      0.25, 1.5,  10,      100,  1e-5,
                           1e-10, 1e10,     1e30, 0.625,  0.85, 6,    20,      40};
    double y0 = 1.0;
    if (jit_vm_arity(fn) == 1) {
        for (size_t i = 0; i < sizeof base / sizeof base[0]; i++) {
            push(in, base[i], y0);
            push(in, -base[i], y0);
        }
        push(in, nanneg, y0);
        for (int k = -20; k <= 20; k++) /* integers and halves */
            push(in, k * 0.5, y0);
        /* thresholds: overflow/underflow of e^x, 2^x, the switch points, pi/2 multiples */
        const double ln2 = 0.69314718055994530942;
        double th[] = {dbl ? 709.782712893384 : 88.72283935546875,
                       dbl ? -708.3964185322641 : -87.33654022216797,
                       dbl ? -745.1332191019411 : -103.97208404541016,
                       dbl ? -744.4400719213812 : -103.27893829345703,
                       dbl ? 1024 : 128,
                       dbl ? -1022 : -126,
                       dbl ? -1074 : -149,
                       dbl ? -1075 : -150,
                       0.5 * ln2,
                       -0.5 * ln2,
                       ln2,
                       0.625,
                       -0.625,
                       0.85,
                       -0.85,
                       1,
                       -1,
                       5.9215871957945,
                       -10.39,
                       -21.8,
                       -38.6,
                       -112,
                       -751,
                       0.41421356237309503,
                       -0.2928932188134524,
                       9.01,
                       19.06,
                       -0.5,
                       /* f32 erf: its branch point, where a - 2.375 becomes exact, the
                        * polynomial's centre and end, and where erf rounds to 1 */
                       0.875,
                       -0.875,
                       1.1875,
                       2.375,
                       4,
                       -4,
                       3.919205,
                       /* f32 gelu_erf: its branch point, its clamp, and where its result
                        * becomes subnormal and 0 */
                       0.75,
                       -0.75,
                       15,
                       -15,
                       -13.2,
                       -14.4};
        for (size_t i = 0; i < sizeof th / sizeof th[0]; i++)
            push_around(in, th[i], 8, dbl, y0);
        const double pio2 = 1.57079632679489661923;
        for (int k = -8; k <= 8; k++)
            push_around(in, k * pio2, 4, dbl, y0);
        for (double k = 1e3; k < 1e16; k *= 7.3)
            push_around(in, nearbyint(k) * pio2, 2, dbl, y0);
        for (int e = 20; e < (dbl ? 1024 : 128); e += 3) {
            push(in, ldexp(1.0, e), y0);
            push(in, -ldexp(1.0, e) * 1.3, y0);
        }
        /* known hard cases for reduction mod pi/2 */
        push(in, dbl ? ldexp(6381956970095103.0, 797) : 0x1.99bc5cp+27, y0);
        push(in, dbl ? 0x1.5bfc9f6d7e5bep+42 : 0x1.921fb6p+0, y0);
        return;
    }
    const double vals[] = {0.0,
                           INFINITY,
                           NAN,
                           nanpay,
                           tmin,
                           nmin,
                           nmax,
                           1,
                           0.5,
                           2,
                           3,
                           0.75,
                           1.5,
                           2.5,
                           8,
                           10,
                           0.1,
                           1e10,
                           dbl ? 0x1p53 : 0x1p24,
                           dbl ? 0x1p53 + 2 : 0x1p24 + 2,
                           dbl ? 0x1p53 - 1 : 0x1p24 - 1,
                           1e300};
    size_t nv = sizeof vals / sizeof vals[0];
    for (size_t i = 0; i < nv; i++)
        for (size_t j = 0; j < nv; j++)
            for (int s = 0; s < 4; s++)
                push(in, s & 1 ? -vals[i] : vals[i], s & 2 ? -vals[j] : vals[j]);
    if (fn == JIT_VM_POW) {
        for (int k = -40; k <= 40; k++) { /* integer and half-integer exponents */
            push(in, -1.7, k);
            push(in, -1.7, k + 0.5);
            push(in, 2, k * 30);
            push(in, -3, k);
            push(in, 10, k);
            push(in, 0.9, k * 100.0);
        }
        push(in, 2, dbl ? 1023.99 : 127.99);
        push(in, 2, dbl ? -1074 : -149);
        push(in, 2, dbl ? -1075 : -150);
        push(in, 2, dbl ? -1074.5 : -149.5);
        push(in, 0.5, dbl ? 1074 : 149);
    }
}

static void
sweep(inputs *in, jit_vm_fn fn, bool dbl)
{
    uint64_t s = 0x5eed0000u + (uint64_t)fn * 2 + dbl;
    domain d = focus(fn, dbl);
    double dmax = fmax(fabs(d.lo), fabs(d.hi));
    bool binary = jit_vm_arity(fn) == 2;
    /* VMATH_DENSE=k samples 2^k times more densely (for re-measuring; slow) */
    const char *dense = getenv("VMATH_DENSE");
    int shift = dense ? atoi(dense) : 0;
    shift = shift < 0 ? 0 : shift > 10 ? 10 : shift;
    size_t nall = ((dbl ? (size_t)1 << 19 : (size_t)1 << 22) << shift) / SPARSE;
    size_t nfoc = ((dbl ? (size_t)1 << 19 : (size_t)1 << 21) << shift) / SPARSE;
    /* KILN_QUICK: 1/16 of the samples (the specials stay whole) */
    if (ts_quick()) {
        nall /= 16;
        nfoc /= 16;
    }
    if (!dbl && nall > ((size_t)1 << 32))
        nall = (size_t)1 << 32;
    /* (1) every binade: evenly spaced bit patterns, jittered */
    for (size_t i = 0; i < nall; i++) {
        double x, y = 1.0;
        if (dbl) {
            x = f64_of_bits(rnd(&s));
        } else {
            uint64_t step = ((uint64_t)1 << 32) / nall;
            x = f32_of_bits((uint32_t)(i * step + rnd(&s) % step));
        }
        if (binary)
            y = dbl ? f64_of_bits(rnd(&s)) : f32_of_bits((uint32_t)rnd(&s));
        push(in, x, y);
    }
    /* (2) the interesting range: half uniform in value, half log-uniform */
    for (size_t i = 0; i < nfoc; i++) {
        double x = i % 2 ? uniform(&s, d.lo, d.hi) : log_uniform(&s, dbl, dmax);
        if (!dbl)
            x = (float)x;
        double y = 1.0;
        if (fn ==
            JIT_VM_POW) { /* |x| near 1 with large y, positive x with moderate y, negative x with integer y */
            switch (i % 4) {
            case 0:
                x = uniform(&s, 0.5, 2);
                y = uniform(&s, -1000, 1000);
                break;
            case 1:
                x = log_uniform(&s, dbl, dbl ? 1e300 : 1e38);
                x = fabs(x);
                y = uniform(&s, -4, 4);
                break;
            case 2:
                x = uniform(&s, -10, 10);
                y = nearbyint(uniform(&s, -40, 40));
                break;
            default:
                x = uniform(&s, 0, 4);
                y = log_uniform(&s, dbl, dbl ? 300 : 60);
                break;
            }
        } else if (binary) {
            y = i % 2 ? uniform(&s, d.lo, d.hi) : log_uniform(&s, dbl, dbl ? 1e300 : 1e38);
        }
        if (!dbl) {
            x = (float)x;
            y = (float)y;
        }
        push(in, x, y);
    }
}

/* ---- measuring ----------------------------------------------------------------------------- */

/* ULP of the dtype at the magnitude of r (r finite). */
static long double
ulp_at(long double r, bool dbl)
{
    r = fabsl(r);
    int mant = dbl ? 52 : 23, emin = dbl ? -1022 : -126;
    int e = r > 0 ? ilogbl(r) : emin;
    if (e < emin)
        e = emin;
    return ldexpl(1.0L, e - mant);
}

typedef struct result {
    double max_ulp;
    double worst_x, worst_y;
    long double worst_ref;
    double worst_got;
    size_t mismatches; /* vector vs scalar */
    size_t n;
} result;

static double
load(const void *buf, size_t i, bool dbl)
{
    return dbl ? ((const double *)buf)[i] : (double)((const float *)buf)[i];
}

/* The inputs in the dtype, both kernels compiled and run on them; the optimised module must
 * call no library function (every call an LLVM intrinsic). */
typedef struct run {
    size_t n;
    void *x, *y, *ov, *os; /* inputs, vector kernel's and scalar kernel's outputs */
    kernels k;
} run;

static run
run_kernels(const inputs *in, jit_vm_fn fn, bool dbl)
{
    size_t n = in->n, es = dbl ? 8 : 4;
    run r = {.n = n, .x = malloc(n * es), .y = malloc(n * es), .ov = malloc(n * es),
             .os = malloc(n * es)};
    ck_assert(r.x && r.y && r.ov && r.os);
    for (size_t i = 0; i < n; i++) {
        if (dbl) {
            ((double *)r.x)[i] = in->x[i];
            ((double *)r.y)[i] = in->y[i];
        } else {
            ((float *)r.x)[i] = (float)in->x[i];
            ((float *)r.y)[i] = (float)in->y[i];
        }
    }
    r.k = compile(fn, dbl);
    r.k.vec(r.x, r.y, r.ov, (int64_t)n);
    r.k.scl(r.x, r.y, r.os, (int64_t)n);
    for (const char *p = r.k.opt; (p = strstr(p, " call ")) != NULL; p++) {
        const char *at = strchr(p, '@');
        ck_assert_msg(at && strncmp(at, "@llvm.", 6) == 0,
                      "%s: a call that is not an intrinsic: %.80s", fn_name(fn), p);
    }
    return r;
}

static void
run_free(run *r)
{
    release(&r->k);
    free(r->x);
    free(r->y);
    free(r->ov);
    free(r->os);
}

static void
check_function(jit_vm_fn fn, bool dbl)
{
    /* VMATH_ONLY=name[,name...] restricts the accuracy tests (for re-measuring one function) */
    const char *only = getenv("VMATH_ONLY");
    if (only && *only) {
        char buf[256];
        snprintf(buf, sizeof buf, ",%s,", only);
        char want[32];
        snprintf(want, sizeof want, ",%s,", jit_vm_name(fn));
        if (!strstr(buf, want))
            return;
    }
    inputs in = {0};
    specials(&in, fn, dbl);
    in.nspecial = in.n;
    sweep(&in, fn, dbl);
    run r = run_kernels(&in, fn, dbl);
    size_t n = r.n, es = dbl ? 8 : 4;
    void *x = r.x, *y = r.y, *ov = r.ov, *os = r.os;
    kernels k = r.k;
    char vt[32];
    snprintf(vt, sizeof vt, "<%u x %s>", host_lanes(dbl), dbl ? "double" : "float");
    ck_assert_msg(strstr(k.opt, vt) != NULL, "%s: no %s in the optimised kernel", jit_vm_name(fn),
                  vt);

    double bound = ir_op_ulp_bound(jit_vm_op(fn), dbl ? KILN_DTYPE_F64 : KILN_DTYPE_F32);
    ck_assert(bound > 0);
    result res = {.n = n};
    size_t bad = 0;
    char first_bad[256] = "";
    for (size_t i = 0; i < n; i++) {
        if (memcmp((char *)ov + i * es, (char *)os + i * es, es) != 0 && res.mismatches++ == 0)
            printf("vmath: %s %s: vector and scalar differ at x=%a y=%a: %a vs %a\n",
                   jit_vm_name(fn), dbl ? "f64" : "f32", load(x, i, dbl), load(y, i, dbl),
                   load(ov, i, dbl), load(os, i, dbl));
        double xv = load(x, i, dbl), yv = load(y, i, dbl), got = load(ov, i, dbl);
        long double r = ref(fn, xv, yv, !dbl);
        long double rr = dbl ? (long double)(double)r : (long double)(float)r; /* rounded */
        bool ok;
        double err = 0;
        long double big = dbl ? 0x1p1024L : 0x1p128L; /* where inf sits on the ULP scale */
        if (isnan(r)) {
            ok = isnan(got);
        } else if (isnan(got)) {
            ok = false;
        } else if (isinf(r) || r == 0 || fabsl(r) == 1) { /* exact results are exact */
            ok = (long double)got == r && !signbit(got) == !signbit(r);
            err = ok ? 0 : INFINITY;
        } else if (isinf(rr)) { /* overflows the dtype: inf, or within the bound of max */
            ok = (long double)got == rr;
            if (!ok) {
                err = (double)(fabsl((long double)got - r) / ulp_at(big / 2, dbl));
                ok = err <= bound;
            }
        } else {
            long double g = isinf(got) ? copysignl(big, got) : (long double)got;
            err = (double)(fabsl(g - r) / ulp_at(r, dbl));
            ok = err <= bound && (got != 0 || !signbit(got) == !signbit(r));
        }
        if (err > res.max_ulp && !isnan(r)) {
            res.max_ulp = err;
            res.worst_x = xv;
            res.worst_y = yv;
            res.worst_ref = r;
            res.worst_got = got;
        }
        if (!ok && bad++ == 0)
            snprintf(first_bad, sizeof first_bad, "x=%a y=%a got %a want %La (%.3g ulp)%s", xv, yv,
                     got, r, err, i < in.nspecial ? " [special]" : "");
    }
    printf(
        "vmath: %-8s %s  max %.3f ulp (bound %g)  at x=%a  n=%zu  vector/scalar mismatches %zu\n",
        jit_vm_name(fn), dbl ? "f64" : "f32", res.max_ulp, bound, res.worst_x, n, res.mismatches);
    printf("vmath:          worst: x=%a y=%a got %a want %La\n", res.worst_x, res.worst_y,
           res.worst_got, res.worst_ref);
    fflush(stdout);
    run_free(&r);
    free(in.x);
    free(in.y);
    ck_assert_msg(bad == 0, "%s %s: %zu of %zu results out of bounds, first: %s", jit_vm_name(fn),
                  dbl ? "f64" : "f32", bad, n, first_bad);
    ck_assert_msg(res.mismatches == 0, "%s %s: vector body and scalar tail differ on %zu inputs",
                  jit_vm_name(fn), dbl ? "f64" : "f32", res.mismatches);
}

/* ---- tests ----------------------------------------------------------------------------------- */

START_TEST(accuracy_f32)
{
    check_function((jit_vm_fn)_i, false);
}
END_TEST

START_TEST(accuracy_f64)
{
    check_function((jit_vm_fn)_i, true);
}
END_TEST

/* Every lane count a kernel may use gives the scalar's bits: the AVX-512 forms cut vectors
 * into 128- to 512-bit pieces (x86_lanewise) or 16-lane ones (lookup32, f32 tanh), padding
 * short ones, and the accuracy tests run the host's width only.  For each function and
 * dtype: kernels of 4 to 64 lanes (12, 24 and 48 among them: vmath takes any count up to
 * JIT_VM_MAX_LANES) against the scalar kernel, bit for bit, on the
 * special values and 2^15 random bit patterns plus 2^15 values in [-12, 12]. */
START_TEST(lane_widths)
{
    jit_vm_fn fn = (jit_vm_fn)(_i / 2);
    bool dbl = _i % 2;
    inputs in = {0};
    specials(&in, fn, dbl);
    uint64_t seed = 0x5eed0000u + (uint64_t)_i;
    for (int i = 0; i < ts_quick_n(1 << 15, 8); i++) {
        uint64_t bx = rnd(&seed), by = rnd(&seed);
        double x = dbl ? f64_of_bits(bx) : (double)f32_of_bits((uint32_t)bx);
        double y = dbl ? f64_of_bits(by) : (double)f32_of_bits((uint32_t)by);
        push(&in, x, y);
        push(&in, uniform(&seed, -12, 12), uniform(&seed, -12, 12));
    }
    size_t n = in.n, es = dbl ? 8 : 4;
    char *x = malloc(n * es), *y = malloc(n * es), *os = malloc(n * es), *ov = malloc(n * es);
    ck_assert(x && y && os && ov);
    for (size_t i = 0; i < n; i++) {
        if (dbl) {
            ((double *)x)[i] = in.x[i];
            ((double *)y)[i] = in.y[i];
        } else {
            ((float *)x)[i] = (float)in.x[i];
            ((float *)y)[i] = (float)in.y[i];
        }
    }
    const unsigned widths[] = {4, 12, 64, 8, 24, 32, 48};
    /* KILN_QUICK: the first three (a narrow, an odd and the widest legalisation) */
    const int nw = ts_quick() ? 3 : (int)(sizeof widths / sizeof widths[0]);
    jit_unit u;
    ck_assert_msg(jit_unit_new(&u, "vmath_widths") == KILN_OK, "%s", kiln_errmsg());
    char names[8][64];
    const char *np[8];
    const char *dt = dbl ? "f64" : "f32";
    snprintf(names[0], sizeof names[0], "w_%s_%s_scl", fn_name(fn), dt);
    build_kernel(&u, names[0], fn, dbl, 0);
    for (int w = 0; w < nw; w++) {
        snprintf(names[w + 1], sizeof names[w + 1], "w_%s_%s_%u", fn_name(fn), dt, widths[w]);
        build_kernel(&u, names[w + 1], fn, dbl, widths[w]);
    }
    for (int w = 0; w <= nw; w++)
        np[w] = names[w];
    void *addrs[8];
    jit_code *code = NULL;
    jit_dumps d = {0};
    ck_assert_msg(jit_unit_compile(&u, nw + 1, np, addrs, &code, &d) == KILN_OK, "%s: %s",
                  fn_name(fn), kiln_errmsg());
    ((kernel_fn)(uintptr_t)addrs[0])(x, y, os, (int64_t)n);
    for (int w = 0; w < nw; w++) {
        ((kernel_fn)(uintptr_t)addrs[w + 1])(x, y, ov, (int64_t)n);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(memcmp(ov + i * es, os + i * es, es) == 0,
                          "%s %s at %u lanes: x=%a y=%a gives %a, the scalar %a", fn_name(fn),
                          dt, widths[w], load(x, i, dbl), load(y, i, dbl),
                          load(ov, i, dbl), load(os, i, dbl));
    }
    jit_code_free(code);
    free(x);
    free(y);
    free(os);
    free(ov);
    free(in.x);
    free(in.y);
}
END_TEST

/* Float rem (jit_vm_fmod) equals C's fmod/fmodf bit for bit, NaN payloads included (x86's
 * rules: the first NaN operand's, quieted; the negative default NaN), in the vector body
 * and the scalar tail: all pairs of special values (zeros, infinities, NaNs, subnormal and
 * normal extremes), random bit patterns of both operands (quotients up to 2^277 for f32,
 * 2^2098 for f64), quotients just below and above integers and of up to 2^64, and for f32
 * every 4096th bit pattern of x against a set of divisors from subnormal to 10^30. */
static void
check_fmod(bool dbl)
{
    inputs in = {0};
    const double tmin = dbl ? 0x1p-1074 : 0x1p-149, nmin = dbl ? DBL_MIN : FLT_MIN;
    const double tmaxsub = dbl ? 0x1.ffffffffffffep-1023 : 0x1.fffffcp-127;
    const double nmax = dbl ? DBL_MAX : FLT_MAX;
    const double nanpay = dbl ? f64_of_bits(0x7ff8000000001234u) : (double)f32_of_bits(0x7fc01234u);
    const double snan = dbl ? f64_of_bits(0x7ff0000000000001u) : (double)f32_of_bits(0x7fa00000u);
    const double vals[] = {0.0, INFINITY, NAN, nanpay, snan, tmin, tmaxsub, nmin, nmax, 1, 0.5, 2, 3,
                           0.1, 1.5, 7, 1e10, 1e30, 3.14159265358979, dbl ? 0x1p53 : 0x1p24,
                           dbl ? 0x1p53 + 2 : 0x1p24 + 2, dbl ? 0x1p53 - 1 : 0x1p24 - 1};
    size_t nv = sizeof vals / sizeof vals[0];
    for (size_t i = 0; i < nv; i++)
        for (size_t j = 0; j < nv; j++)
            for (int sg = 0; sg < 4; sg++)
                push(&in, sg & 1 ? -vals[i] : vals[i], sg & 2 ? -vals[j] : vals[j]);
    uint64_t st = 0xf0d0u + dbl;
    size_t nr = ((size_t)1 << 20) / SPARSE;
    for (size_t i = 0; i < nr; i++) {
        double x, y;
        switch (i % 4) {
        case 0: /* any bit patterns */
            x = dbl ? f64_of_bits(rnd(&st)) : f32_of_bits((uint32_t)rnd(&st));
            y = dbl ? f64_of_bits(rnd(&st)) : f32_of_bits((uint32_t)rnd(&st));
            break;
        case 1: /* x = q y (1 + tiny): quotients near integers, up to 2^64 */
            y = log_uniform(&st, dbl, dbl ? 1e300 : 1e38);
            x = y * nearbyint(ldexp(uniform(&st, 1, 2), (int)(rnd(&st) % 64))) *
                (1 + (double)((int)(rnd(&st) % 7) - 3) * (dbl ? 0x1p-52 : 0x1p-23));
            break;
        case 2: /* moderate magnitudes, both signs */
            x = uniform(&st, -1e6, 1e6);
            y = uniform(&st, -10, 10);
            break;
        default: /* log-uniform magnitudes */
            x = log_uniform(&st, dbl, dbl ? 1e308 : 3e38);
            y = log_uniform(&st, dbl, dbl ? 1e308 : 3e38);
            break;
        }
        if (!dbl) {
            x = (float)x;
            y = (float)y;
        }
        push(&in, x, y);
    }
    if (!dbl) {
        const float ys[] = {1.0f, 0.1f, 3.0f, -2.5e-39f, 1e30f, 0x1p-149f, 65537.0f, -0.75f};
        for (uint64_t b = 0; b < ((uint64_t)1 << 32); b += 4096 * SPARSE)
            for (size_t j = 0; j < sizeof ys / sizeof ys[0]; j++)
                push(&in, f32_of_bits((uint32_t)(b + (b >> 12) % 4096)), ys[j]);
    }
    run r = run_kernels(&in, FMOD, dbl);
    size_t n = r.n;
    void *x = r.x, *y = r.y, *ov = r.ov, *os = r.os;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t want, got[2];
        if (dbl) {
            double w = fmod(((double *)x)[i], ((double *)y)[i]);
            memcpy(&want, &w, 8);
            memcpy(&got[0], (char *)ov + 8 * i, 8);
            memcpy(&got[1], (char *)os + 8 * i, 8);
        } else {
            float w = fmodf(((float *)x)[i], ((float *)y)[i]);
            uint32_t u[3];
            memcpy(&u[0], &w, 4);
            memcpy(&u[1], (char *)ov + 4 * i, 4);
            memcpy(&u[2], (char *)os + 4 * i, 4);
            want = u[0];
            got[0] = u[1];
            got[1] = u[2];
        }
        for (int v = 0; v < 2; v++) {
            if (got[v] == want) /* NaN payloads included */
                continue;
            if (bad++ < 5)
                printf("vmath: fmod %s %s: fmod(%a, %a) = %a, want %a\n", dbl ? "f64" : "f32",
                       v ? "scalar" : "vector", load(x, i, dbl), load(y, i, dbl),
                       load(v ? os : ov, i, dbl),
                       dbl ? f64_of_bits(want) : (double)f32_of_bits((uint32_t)want));
        }
    }
    printf("vmath: fmod     %s  exact on %zu of %zu pairs (vector and scalar)\n", dbl ? "f64" : "f32",
           n - bad, n);
    run_free(&r);
    free(in.x);
    free(in.y);
    ck_assert_msg(bad == 0, "fmod %s: %zu results differ from the C library's", dbl ? "f64" : "f32",
                  bad);
}

START_TEST(fmod_exact)
{
    check_fmod(_i != 0);
}
END_TEST

/* The table: every VMATH op of ops.def has a vmath function and no other op has one, names
 * and operand counts are the rows', every function has its bounds (1 to 4 ULP as
 * documented) and its exact value in the oracle (ref_math). */
START_TEST(table)
{
    int mapped = 0;
    for (int op = 0; op < IR_OP_COUNT; op++) {
        jit_vm_fn fn = jit_vm_for_op((ir_op)op);
        ck_assert_int_eq(fn != JIT_VM_COUNT, ir_op_is_vmath((ir_op)op));
        if (fn == JIT_VM_COUNT) {
            ck_assert(ir_op_ulp_bound((ir_op)op, KILN_DTYPE_F32) == 0);
            continue;
        }
        mapped++;
        ck_assert_int_eq(jit_vm_op(fn), op);
        ck_assert_str_eq(jit_vm_name(fn), ir_ops[op].name);
        ck_assert_int_eq(jit_vm_arity(fn), ir_ops[op].arity);
        for (int d = 0; d < 2; d++) {
            double b = ir_op_ulp_bound((ir_op)op, d ? KILN_DTYPE_F64 : KILN_DTYPE_F32);
            ck_assert_msg(b >= 1 && b <= 4, "%s: bound %g", ir_ops[op].name, b);
        }
        ck_assert(ref_math_has((ir_op)op));
        ck_assert(!isnan((double)ref_math((ir_op)op, KILN_DTYPE_F64, 0.5L, 0.5L)));
    }
    ck_assert_int_eq(mapped, JIT_VM_COUNT);
    ck_assert(ir_op_ulp_bound(IR_OP_EXP, KILN_DTYPE_F32) == 1);
    ck_assert(ir_op_ulp_bound(IR_OP_TANH, KILN_DTYPE_F32) == 2);
    ck_assert(ir_op_ulp_bound(IR_OP_GELU, KILN_DTYPE_F32) == 3);
    ck_assert(ir_op_ulp_bound(IR_OP_GELU, KILN_DTYPE_F64) == 3);
    ck_assert(ir_op_ulp_bound(IR_OP_POW, KILN_DTYPE_F64) == 4);
    ck_assert(ir_op_ulp_bound(IR_OP_EXP, KILN_DTYPE_I32) == 0);
    ck_assert(jit_vm_name(JIT_VM_COUNT) == NULL);
    ck_assert_int_eq(jit_vm_op(JIT_VM_COUNT), IR_OP_COUNT);
}
END_TEST

/* Misuse is reported, not crashed on; the caller's builder stays where it was; a function is
 * emitted once per type. */
START_TEST(emit_contract)
{
    jit_unit u;
    ck_assert_msg(jit_unit_new(&u, "vmath_contract") == KILN_OK, "%s", kiln_errmsg());
    LLVMContextRef ctx = u.ctx;
    LLVMTypeRef f32 = LLVMFloatTypeInContext(ctx), i32 = LLVMInt32TypeInContext(ctx);
    LLVMTypeRef v8 = LLVMVectorType(f32, 8);
    LLVMTypeRef params[] = {v8, i32, f32};
    LLVMValueRef f = LLVMAddFunction(u.mod, "k", LLVMFunctionType(v8, params, 3, 0));
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    LLVMBasicBlockRef bb = LLVMAppendBasicBlockInContext(ctx, f, "entry");
    LLVMPositionBuilderAtEnd(b, bb);
    jit_vm vm = {ctx, u.mod, b};

    ck_assert_ptr_null(jit_vm_emit(&vm, JIT_VM_EXP, LLVMGetParam(f, 1), NULL));
    ts_assert_error(KILN_ERR_INTERNAL, "not float/double");
    ck_assert_ptr_null(jit_vm_emit(&vm, JIT_VM_POW, LLVMGetParam(f, 0), NULL));
    ts_assert_error(KILN_ERR_INTERNAL, "second operand");
    ck_assert_ptr_null(jit_vm_emit(&vm, JIT_VM_ATAN2, LLVMGetParam(f, 0), LLVMGetParam(f, 2)));
    ts_assert_error(KILN_ERR_INTERNAL, "second operand");
    ck_assert_ptr_null(jit_vm_emit(&vm, JIT_VM_COUNT, LLVMGetParam(f, 0), NULL));
    ts_assert_error(KILN_ERR_INTERNAL, "unknown function");
    LLVMTypeRef v128 = LLVMVectorType(f32, 128);
    ck_assert_ptr_null(jit_vm_emit(&vm, JIT_VM_EXP, LLVMGetUndef(v128), NULL));
    ts_assert_error(KILN_ERR_INTERNAL, "at most");

    LLVMValueRef a = jit_vm_emit(&vm, JIT_VM_TANH, LLVMGetParam(f, 0), NULL);
    ck_assert_ptr_nonnull(a);
    LLVMValueRef c = jit_vm_emit(&vm, JIT_VM_TANH, a, NULL);
    ck_assert_ptr_nonnull(c);
    ck_assert(LLVMGetInsertBlock(b) == bb);
    ck_assert(LLVMGetLastInstruction(bb) == c);
    ck_assert(LLVMTypeOf(c) == v8);
    int count = 0;
    for (LLVMValueRef g = LLVMGetFirstFunction(u.mod); g; g = LLVMGetNextFunction(g)) {
        size_t len;
        const char *nm = LLVMGetValueName2(g, &len);
        if (strncmp(nm, "kiln.vm.", 8) == 0) {
            count++;
            ck_assert_str_eq(nm, "kiln.vm.tanh.v8f32");
            ck_assert_int_eq(LLVMGetLinkage(g), LLVMInternalLinkage);
        }
    }
    ck_assert_int_eq(count, 1);
    LLVMBuildRet(b, c);
    LLVMDisposeBuilder(b);
    jit_unit_dispose(&u);
}
END_TEST

static Suite *
vmath_suite(void)
{
    Suite *s = suite_create("vmath");
    TCase *tc = tcase_create("vmath");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, table);
    tcase_add_test(tc, emit_contract);
    tcase_add_loop_test(tc, fmod_exact, 0, 2);
    tcase_add_loop_test(tc, accuracy_f32, 0, JIT_VM_COUNT);
    tcase_add_loop_test(tc, accuracy_f64, 0, JIT_VM_COUNT);
    tcase_add_loop_test(tc, lane_widths, 0, 2 * JIT_VM_COUNT);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return ts_run(vmath_suite());
}
