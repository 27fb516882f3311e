/* vmath.c — elementwise math emitted as LLVM IR, for float and double scalars and vectors.
 *
 * Each function is built from the same few pieces (details beside each function, bounds and
 * measured errors in docs/accuracy.md):
 *  - range reduction: Cody-Waite with FMA (the product n*C_hi is exact inside the FMA, so the
 *    first step is exact), Payne-Hanek for trig arguments of 2^27 and more;
 *  - a minimax polynomial on the reduced interval, evaluated with llvm.fma (Horner, or
 *    Estrin where the dependency chain matters).  The coefficients were fitted by
 *    scripts/vmath_remez.py (Remez exchange in decimal arithmetic, weighted by the error of
 *    the final function, rounded to the target precision one coefficient at a time with the
 *    rest refitted), which writes them to vmath_coef.inc;
 *  - 2^n scaling by building the power of two from exponent bits, in two factors so that
 *    overflow gives inf and results in the subnormal range are rounded once (on AVX-512
 *    hosts one vscalef, which rounds the same way);
 *  - on AVX-512 hosts, vrcp14 and a correction step instead of divisions where a quotient
 *    is corrected anyway (f32 sigmoid, silu, gelu, and tanh elsewhere), and f32 tanh as a
 *    polynomial per piece of its argument, the coefficients looked up by vpermi2ps;
 *  - explicit selects for NaN, ±inf, ±0 and the other special cases.
 * Integers are taken out of floats with the "magic number" addition (x + 1.5*2^mant) and a
 * bitcast, never fptosi, so NaN and inf lanes give defined garbage instead of poison, and
 * no fast-math flag is set anywhere.
 *
 * f32: exp, exp2, expm1, log, log2, log1p, tanh, sigmoid, silu, gelu, erf and gelu_erf are
 * pure f32 code (the activations are on the hot path of memory-bound kernels); sin, cos,
 * tan, pow and atan2 widen to f64, run the f64 code and round once.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmath.h"

typedef LLVMValueRef val;

/* Emitted like the functions of ops.def's VMATH rows, but not one of them: float rem. */
#define VM_FMOD JIT_VM_COUNT

/* ---- the function table ------------------------------------------------------------------ */

/* Name, operand count and op of each function, from its row of ops.def (which holds its
 * ULP bounds too: ir_op_ulp_bound). */
static const struct {
    const char *name;
    int arity;
    ir_op op;
} vm_info[VM_FMOD + 1] = {
#define OP(E, name, arity, kind, trule, attrs, calc, ulp_f32, ulp_f64, meaning)                    \
    IR_IF_VMATH_##calc([JIT_VM_##E] = {#name, arity, IR_OP_##E}, )
#include "ops.def"
#undef OP
    [VM_FMOD] = {"fmod", 2, IR_OP_REM}, /* float rem, exact */
};

const char *
jit_vm_name(jit_vm_fn fn)
{
    return (unsigned)fn < JIT_VM_COUNT ? vm_info[fn].name : NULL;
}

int
jit_vm_arity(jit_vm_fn fn)
{
    return (unsigned)fn < JIT_VM_COUNT ? vm_info[fn].arity : 0;
}

ir_op
jit_vm_op(jit_vm_fn fn)
{
    return (unsigned)fn < JIT_VM_COUNT ? vm_info[fn].op : IR_OP_COUNT;
}

jit_vm_fn
jit_vm_for_op(ir_op op)
{
    switch (op) {
#define OP(E, name, arity, kind, trule, attrs, calc, ulp_f32, ulp_f64, meaning)                    \
    IR_IF_VMATH_##calc(case IR_OP_##E : return JIT_VM_##E;)
#include "ops.def"
#undef OP
    default:
        return JIT_VM_COUNT;
    }
}

/* ---- polynomial coefficients and constants ---------------------------------------------- */

/* The tables and split constants scripts/vmath_remez.py derives (it writes the file; the
 * comment before each table says what it approximates and how closely): */
#include "vmath_coef.inc"

/* Constants the script does not derive. */
/* The f32 exp op: e^r = 1 + r + r^2 Q(r), Q degree 4, |r| <= 0.36: 2^-27.9 (fitted by
 * Lawson's iteration in mpmath, relative to e^r, rounded to f32 once; the script's Remez fit
 * of the same differs in the last coefficient's last bit) */
static const double exp_q4_f32[] = {0x1.fffffap-2, 0x1.555472p-3, 0x1.555988p-5, 0x1.125132p-7,
                                    0x1.69fd92p-10};
/* f32 gelu_erf: S = dlnM/dlnw ~ GELU_S_A + GELU_S_B w, the sensitivity of M = w P(w) to w's
 * error (1.19 to 2.17, to 0.016) */
#define GELU_S_A 0x1.da1ee8p-1
#define GELU_S_B 0x1.295bc6p+2
/* erf'(a) ~ ERF_D_A + ERF_D_B a on [0.875, 1.1875] (to 0.0053), for the rounding error of
 * a - ERF_BIG_C, which is not exact below 1.1875 */
#define ERF_D_A_F32 0x1.37af8cp+0
#define ERF_D_B_F32 -0x1.9874cap-1
/* gelu: c = 2 * 0.7978845608028654 (exact in double; its f32 split is the script's) */
#define GELU_C_F64 (2 * 0.7978845608028654)

#define NCOEF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- emitting one function body ------------------------------------------------------- */

typedef struct em {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMValueRef fn;    /* the function being built */
    jit_vm_fn which;    /* the math function it computes */
    bool dbl;           /* elements are double */
    unsigned lanes;     /* vector lanes; 0 for a scalar */
    LLVMTypeRef fe, ft; /* float element type, value type */
    LLVMTypeRef ie, it; /* integer of the same size: element, value */
    int mant, bias;     /* 23, 127 or 52, 1023 */
    bool avx512;        /* the host has AVX-512 F and VL: vrcp14, vscalef (x86_lanewise) */
    val nint, nf;       /* exp_core's last n, and the same n as a float */
} em;

static LLVMTypeRef
shaped(const em *e, LLVMTypeRef elt)
{
    return e->lanes ? LLVMVectorType(elt, e->lanes) : elt;
}

static void
em_types(em *e, LLVMContextRef ctx, bool dbl, unsigned lanes)
{
    e->ctx = ctx;
    e->dbl = dbl;
    e->lanes = lanes;
    e->fe = dbl ? LLVMDoubleTypeInContext(ctx) : LLVMFloatTypeInContext(ctx);
    e->ie = dbl ? LLVMInt64TypeInContext(ctx) : LLVMInt32TypeInContext(ctx);
    e->ft = shaped(e, e->fe);
    e->it = shaped(e, e->ie);
    e->mant = dbl ? 52 : 23;
    e->bias = dbl ? 1023 : 127;
}

static val
splat(const em *e, val c)
{
    if (!e->lanes)
        return c;
    val v[JIT_VM_MAX_LANES];
    for (unsigned i = 0; i < e->lanes; i++)
        v[i] = c;
    return LLVMConstVector(v, e->lanes);
}

/* A float constant (rounded to the element type: the f32 tables hold f32 values). */
static val
K(const em *e, double v)
{
    return splat(e, LLVMConstReal(e->fe, v));
}

static val
KI(const em *e, long long v)
{
    return splat(e, LLVMConstInt(e->ie, (unsigned long long)v, true));
}

static val
add(em *e, val a, val b)
{
    return LLVMBuildFAdd(e->b, a, b, "");
}

static val
sub(em *e, val a, val b)
{
    return LLVMBuildFSub(e->b, a, b, "");
}

static val
mul(em *e, val a, val b)
{
    return LLVMBuildFMul(e->b, a, b, "");
}

static val
dvd(em *e, val a, val b)
{
    return LLVMBuildFDiv(e->b, a, b, "");
}

static val
neg(em *e, val a)
{
    return LLVMBuildFNeg(e->b, a, "");
}

static val
sel(em *e, val c, val a, val b)
{
    return LLVMBuildSelect(e->b, c, a, b, "");
}

static val
fcmp(em *e, LLVMRealPredicate p, val a, val b)
{
    return LLVMBuildFCmp(e->b, p, a, b, "");
}

static val
icmp(em *e, LLVMIntPredicate p, val a, val b)
{
    return LLVMBuildICmp(e->b, p, a, b, "");
}

static val
and_(em *e, val a, val b)
{
    return LLVMBuildAnd(e->b, a, b, "");
}

static val
or_(em *e, val a, val b)
{
    return LLVMBuildOr(e->b, a, b, "");
}

static val
xor_(em *e, val a, val b)
{
    return LLVMBuildXor(e->b, a, b, "");
}

static val
not_(em *e, val a)
{
    return LLVMBuildNot(e->b, a, "");
}

static val
iadd(em *e, val a, val b)
{
    return LLVMBuildAdd(e->b, a, b, "");
}

static val
isub(em *e, val a, val b)
{
    return LLVMBuildSub(e->b, a, b, "");
}

static val
ishl(em *e, val a, long long s)
{
    return LLVMBuildShl(e->b, a, KI(e, s), "");
}

static val
iashr(em *e, val a, long long s)
{
    return LLVMBuildAShr(e->b, a, KI(e, s), "");
}

static val
ilshr(em *e, val a, long long s)
{
    return LLVMBuildLShr(e->b, a, KI(e, s), "");
}

static val
bits(em *e, val x)
{
    return LLVMBuildBitCast(e->b, x, e->it, "");
}

static val
fbits(em *e, val i)
{
    return LLVMBuildBitCast(e->b, i, e->ft, "");
}

static val
itof(em *e, val i)
{
    return LLVMBuildSIToFP(e->b, i, e->ft, "");
}

/* A call of the intrinsic `name` overloaded on the type of args[0]. */
static val
intrinsic(em *e, const char *name, val *args, unsigned n)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMTypeRef ty = LLVMTypeOf(args[0]);
    val f = LLVMGetIntrinsicDeclaration(e->mod, id, &ty, 1);
    return LLVMBuildCall2(e->b, LLVMIntrinsicGetType(e->ctx, id, &ty, 1), f, args, n, "");
}

static val
fma_(em *e, val a, val b, val c)
{
    val v[] = {a, b, c};
    return intrinsic(e, "llvm.fma", v, 3);
}

static val
fabs_(em *e, val a)
{
    return intrinsic(e, "llvm.fabs", &a, 1);
}

static val
copysign_(em *e, val mag, val sgn)
{
    val v[] = {mag, sgn};
    return intrinsic(e, "llvm.copysign", v, 2);
}

static val
roundeven_(em *e, val a)
{
    return intrinsic(e, "llvm.roundeven", &a, 1);
}

static val
is_nan(em *e, val x)
{
    return fcmp(e, LLVMRealUNO, x, x);
}

static val
is_inf(em *e, val x)
{
    return fcmp(e, LLVMRealOEQ, fabs_(e, x), K(e, INFINITY));
}

/* c[0] + c[1] x + ... + c[n-1] x^(n-1) by Horner's rule */
static val
horner(em *e, val x, const double *c, int n)
{
    val acc = K(e, c[n - 1]);
    for (int i = n - 2; i >= 0; i--)
        acc = fma_(e, acc, x, K(e, c[i]));
    return acc;
}

/* The same polynomial by Estrin's scheme: pairs c[i] + c[i+1] x, then x^2, x^4, ...: fewer
 * dependent steps than Horner (log2(n) FMAs deep instead of n), slightly different rounding. */
static val
estrin(em *e, val x, const double *c, int n)
{
    val t[32];
    int m = 0;
    for (int i = 0; i < n; i += 2)
        t[m++] = i + 1 < n ? fma_(e, K(e, c[i + 1]), x, K(e, c[i])) : K(e, c[i]);
    val xp = mul(e, x, x);
    while (m > 1) {
        int k = 0;
        for (int i = 0; i < m; i += 2)
            t[k++] = i + 1 < m ? fma_(e, t[i + 1], xp, t[i]) : t[i];
        m = k;
        if (m > 1)
            xp = mul(e, xp, xp);
    }
    return t[0];
}

/* Horner for the first h coefficients, whose roundings reach the result almost undamped, and
 * Estrin for the rest. */
static val
poly(em *e, val x, const double *c, int n, int h)
{
    val acc = estrin(e, x, c + h, n - h);
    for (int i = h - 1; i >= 0; i--)
        acc = fma_(e, acc, x, K(e, c[i]));
    return acc;
}

/* x clamped to [lo, hi]; NaN stays NaN (ordered compares are false for it). */
static val
clamp(em *e, val x, double lo, double hi)
{
    x = sel(e, fcmp(e, LLVMRealOGT, x, K(e, hi)), K(e, hi), x);
    return sel(e, fcmp(e, LLVMRealOLT, x, K(e, lo)), K(e, lo), x);
}

/* Adding 1.5 * 2^mant rounds |v| < 2^(mant-1) to an integer (ties to even) held in the low
 * bits of the sum. */
static double
magic(const em *e)
{
    return e->dbl ? 0x1.8p52 : 0x1.8p23;
}

/* The integer in t = v + magic, and v rounded as a float. */
static val
magic_int(em *e, val t, val *kf)
{
    *kf = sub(e, t, K(e, magic(e)));
    return isub(e, bits(e, t), bits(e, K(e, magic(e))));
}

/* 2^n for n in the normal exponent range. */
static val
pow2i(em *e, val n)
{
    return fbits(e, ishl(e, iadd(e, n, KI(e, e->bias)), e->mant));
}

/* Does the host have AVX-512 F and VL (vrcp14 and vscalef at 128, 256 and 512 bits)?  Unless
 * KILN_VMATH_PORTABLE is set (the tests use it to run the generic form on such hosts). */
static bool
host_has_avx512(void)
{
    if (ir_config_get()->vmath_portable)
        return false;
    const char *f = jit_host_info()->features;
    bool f512 = false, vl = false;
    for (const char *p = f; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        size_t n = strcspn(p, ",");
        f512 |= n == 8 && strncmp(p, "+avx512f", 8) == 0;
        vl |= n == 9 && strncmp(p, "+avx512vl", 9) == 0;
    }
    return f512 && vl;
}

/* The shuffle of a and b (NULL: poison) taking lanes from[0..n-1]; from[i] < 0 for a one. */
static val
shuffle(em *e, val a, val b, const int *from, unsigned n)
{
    LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
    val idx[JIT_VM_MAX_LANES];
    for (unsigned i = 0; i < n; i++)
        idx[i] = from[i] < 0 ? LLVMGetPoison(i32) : LLVMConstInt(i32, (unsigned)from[i], 0);
    return LLVMBuildShuffleVector(e->b, a, b ? b : LLVMGetPoison(LLVMTypeOf(a)),
                                  LLVMConstVector(idx, n), "");
}

/* x (e's shape: a scalar or n lanes) cut into pieces of pw lanes, a power of two of them
 * (so that join_pieces can join pairs), the lanes past n taken from `pad` (a constant of
 * x's element type); a scalar goes in lane 0.  Returns the number of pieces (at most 8). */
static unsigned
cut_pieces(em *e, val x, val pad, unsigned pw, val *piece)
{
    LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
    unsigned n = e->lanes ? e->lanes : 1, np = 1;
    while (np * pw < n)
        np *= 2;
    int from[JIT_VM_MAX_LANES];
    val pads[JIT_VM_MAX_LANES];
    for (unsigned i = 0; i < JIT_VM_MAX_LANES; i++)
        pads[i] = pad;
    val wide; /* np * pw lanes */
    if (!e->lanes) {
        wide = LLVMBuildInsertElement(e->b, LLVMConstVector(pads, pw), x, LLVMConstInt(i32, 0, 0),
                                      "");
    } else if (n == np * pw) {
        wide = x;
    } else {
        for (unsigned i = 0; i < np * pw; i++)
            from[i] = (int)(i < n ? i : n);
        wide = shuffle(e, x, LLVMConstVector(pads, n), from, np * pw);
    }
    for (unsigned p = 0; p < np; p++) {
        for (unsigned i = 0; i < pw; i++)
            from[i] = (int)(p * pw + i);
        piece[p] = np == 1 ? wide : shuffle(e, wide, NULL, from, pw);
    }
    return np;
}

/* The np pieces of pw lanes of cut_pieces joined again into e's shape (the padding off). */
static val
join_pieces(em *e, val *piece, unsigned pw, unsigned np)
{
    int from[JIT_VM_MAX_LANES];
    for (unsigned m = np, len = pw; m > 1; m /= 2, len *= 2) /* join pairs */
        for (unsigned p = 0; p < m / 2; p++) {
            for (unsigned i = 0; i < 2 * len; i++)
                from[i] = (int)i;
            piece[p] = shuffle(e, piece[2 * p], piece[2 * p + 1], from, 2 * len);
        }
    unsigned n = e->lanes;
    if (!n)
        return LLVMBuildExtractElement(e->b, piece[0],
                                       LLVMConstInt(LLVMInt32TypeInContext(e->ctx), 0, 0), "");
    if (n == np * pw)
        return piece[0];
    for (unsigned i = 0; i < n; i++)
        from[i] = (int)i;
    return shuffle(e, piece[0], NULL, from, n);
}

/* An AVX-512 intrinsic "llvm.x86.avx512.<base>.{ps,pd}.{512,256,128}" applied lane by
 * lane to nargs (1 or 2) operands of e's type, for any lane count: the operands are cut
 * into 512-, 256- or 128-bit pieces (the last padded with ones; a scalar goes in lane 0 of
 * a 128-bit one) and the results joined again.  The intrinsic takes (operands...,
 * passthru, mask) and, at 512 bits where `rounding`, a rounding argument (4: the current
 * mode).  Each lane goes through the same instruction, so vector lanes and scalars get the
 * same bits. */
static val
x86_lanewise(em *e, const char *base, bool rounding, val *x, int nargs)
{
    LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
    unsigned w = e->dbl ? 2 : 4, n = e->lanes ? e->lanes : 1; /* w: lanes of 128 bits */
    unsigned pw = n >= 4 * w ? 4 * w : n > w ? 2 * w : w;     /* lanes of a piece */
    char nm[64];
    snprintf(nm, sizeof nm, "llvm.x86.avx512.%s.%s.%u", base, e->dbl ? "pd" : "ps",
             pw * (e->dbl ? 64 : 32));
    unsigned id = LLVMLookupIntrinsicID(nm, strlen(nm));
    val f = LLVMGetIntrinsicDeclaration(e->mod, id, NULL, 0);
    LLVMTypeRef fty = LLVMIntrinsicGetType(e->ctx, id, NULL, 0);
    LLVMTypeRef pt = LLVMVectorType(e->fe, pw);
    LLVMTypeRef mt = LLVMIntTypeInContext(e->ctx, pw == 16 ? 16 : 8);
    val piece[2][8]; /* at most 8 pieces: n <= 64 lanes in pieces of 4w */
    unsigned np = 0;
    for (int k = 0; k < nargs; k++)
        np = cut_pieces(e, x[k], LLVMConstReal(e->fe, 1.0), pw, piece[k]);
    val out[8];
    for (unsigned p = 0; p < np; p++) {
        val args[5];
        int na = 0;
        for (int k = 0; k < nargs; k++)
            args[na++] = piece[k][p];
        args[na++] = LLVMConstNull(pt);
        args[na++] = LLVMConstAllOnes(mt);
        if (rounding && pw * (e->dbl ? 64 : 32) == 512)
            args[na++] = LLVMConstInt(i32, 4, 0);
        out[p] = LLVMBuildCall2(e->b, fty, f, args, (unsigned)na, "");
    }
    return join_pieces(e, out, pw, np);
}

/* Lane i of the result: tab[idx[i] mod 32] (AVX-512 hosts only).  vpermi2ps picks from two
 * registers of 16 floats; idx (e's integer type) is cut into 16-lane pieces, padded with
 * zeros, and the results joined again. */
static val
lookup32(em *e, val idx, const double *tab)
{
    val lo[16], hi[16];
    for (int i = 0; i < 16; i++) {
        lo[i] = LLVMConstReal(e->fe, tab[i]);
        hi[i] = LLVMConstReal(e->fe, tab[16 + i]);
    }
    const char *nm = "llvm.x86.avx512.vpermi2var.ps.512";
    unsigned id = LLVMLookupIntrinsicID(nm, strlen(nm));
    val f = LLVMGetIntrinsicDeclaration(e->mod, id, NULL, 0);
    LLVMTypeRef fty = LLVMIntrinsicGetType(e->ctx, id, NULL, 0);
    val piece[JIT_VM_MAX_LANES / 16];
    unsigned np = cut_pieces(e, idx, LLVMConstInt(e->ie, 0, 0), 16, piece);
    for (unsigned p = 0; p < np; p++) {
        val args[3] = {LLVMConstVector(lo, 16), piece[p], LLVMConstVector(hi, 16)};
        piece[p] = LLVMBuildCall2(e->b, fty, f, args, 3, "");
    }
    return join_pieces(e, piece, 16, np);
}

/* vrcp14: 1/x with a relative error below 2^-14 (AVX-512 hosts only). */
static val
rcp14(em *e, val x)
{
    return x86_lanewise(e, "rcp14", false, &x, 1);
}

/* y * 2^n for |n| up to about 2 * bias, rounded once: y * 2^n1 is exact (n1 = n/2 keeps it
 * normal), the second factor rounds into the subnormals or overflows to inf as an exact
 * product would. */
static val
scale2(em *e, val y, val n)
{
    if (e->avx512) { /* vscalef: y 2^n rounded once, inf and subnormals as IEEE multiplies */
        /* n as a float: exp_core's, when n is its integer (no conversion back) */
        val args[2] = {y, e->nf && n == e->nint ? e->nf : itof(e, n)};
        return x86_lanewise(e, "mask.scalef", true, args, 2);
    }
    val n1 = iashr(e, n, 1);
    return mul(e, mul(e, y, pow2i(e, n1)), pow2i(e, isub(e, n, n1)));
}

/* Error-free sum: s + *err == a + b exactly. */
static val
two_sum(em *e, val a, val b, val *err)
{
    val s = add(e, a, b);
    val bb = sub(e, s, a);
    *err = add(e, sub(e, a, sub(e, s, bb)), sub(e, b, bb));
    return s;
}

/* Error-free sum for |a| >= |b| (or a == 0). */
static val
fast_two_sum(em *e, val a, val b, val *err)
{
    val s = add(e, a, b);
    *err = sub(e, b, sub(e, s, a));
    return s;
}

/* ---- exponentials ---------------------------------------------------------------------- */

/* e^(x + xlo) = p * 2^n with p in [0.7, 1.42] (xlo small, may be NULL).  Cody-Waite:
 * n = round(x / ln2), r = x - n ln2_hi (exact: the FMA forms n ln2_hi exactly and the
 * difference is representable) - n ln2_lo + xlo.  Callers keep |x| below about 1.1 * bias
 * * ln2 so that n fits scale2.  1 + r_hi is kept exact (Fast2Sum), so that only the last
 * addition rounds noticeably: ~0.52 ULP instead of ~0.75 for 1 + (r + r^2 q), for 3 more
 * operations. */
static val exp_core_dw(em *e, val x, val xlo, val *n, val *lo);

static val
exp_core(em *e, val x, val xlo, val *n)
{
    val lo;
    val hi = exp_core_dw(e, x, xlo, n, &lo);
    return add(e, hi, lo);
}

/* exp_core's p unrounded: hi + *lo, hi = 1 + r_hi exactly. */
static val
exp_core_dw(em *e, val x, val xlo, val *n, val *lo)
{
    bool d = e->dbl;
    val kf;
    *n = magic_int(e, fma_(e, x, K(e, d ? LOG2E_HI_F64 : LOG2E_HI_F32), K(e, magic(e))), &kf);
    e->nint = *n; /* scale2(p, n) passes kf to vscalef as it is */
    e->nf = kf;
    val nk = neg(e, kf);
    val rh = fma_(e, nk, K(e, d ? LN2_HI_F64 : LN2_HI_F32), x);
    val rl = fma_(e, nk, K(e, d ? LN2_LO_F64 : LN2_LO_F32), xlo ? xlo : K(e, 0));
    val r = add(e, rh, rl);
    val q =
        d ? estrin(e, r, exp_q_f64, NCOEF(exp_q_f64)) : estrin(e, r, exp_q_f32, NCOEF(exp_q_f32));
    val c;
    val s = fast_two_sum(e, K(e, 1), rh, &c);
    *lo = fma_(e, mul(e, r, r), q, add(e, c, rl));
    return s;
}

/* The f32 exp op, three or four operations shorter than exp_core: n = round(x/ln2),
 * r = x - n ln2 with rh exact (Sterbenz) and rl, then e^r = 1 + (rh + (r^2 Q(r) + rl)),
 * the inner sum rounded at |s| < 0.42 (a quarter ULP of the result at most) and 1 + s
 * once more; Horner's Q on the FMA chain.  Over all 2^32 inputs 0.9013 ULP (kiln check
 * --exhaustive, as a C model of these operations predicted), against exp_core's 0.7724
 * with 1 + rh kept exact.  exp_core stays for sigmoid, silu, gelu and tanh, whose bounds were
 * verified with it. */
static val
exp_f32(em *e, val x)
{
    val xc = clamp(e, x, -104.0, 89.0);
    val kf;
    val n = magic_int(e, fma_(e, xc, K(e, LOG2E_HI_F32), K(e, magic(e))), &kf);
    e->nint = n;
    e->nf = kf;
    val nk = neg(e, kf);
    val rh = fma_(e, nk, K(e, LN2_HI_F32), xc);
    val rl = mul(e, nk, K(e, LN2_LO_F32));
    val r = add(e, rh, rl);
    int nc = NCOEF(exp_q4_f32);
    val q = K(e, exp_q4_f32[nc - 1]);
    for (int i = nc - 2; i >= 0; i--)
        q = fma_(e, q, r, K(e, exp_q4_f32[i]));
    val sm = add(e, rh, fma_(e, mul(e, r, r), q, rl));
    return scale2(e, add(e, K(e, 1), sm), n);
}

static val
b_exp(em *e, val *a)
{
    if (!e->dbl)
        return exp_f32(e, a[0]);
    /* Beyond the clamps the result is 0 or inf already. */
    val x = clamp(e, a[0], e->dbl ? -746.0 : -104.0, e->dbl ? 710.0 : 89.0);
    val n;
    val p = exp_core(e, x, NULL, &n);
    return scale2(e, p, n);
}

static val
b_exp2(em *e, val *a)
{
    val x = clamp(e, a[0], e->dbl ? -1080.0 : -152.0, e->dbl ? 1025.0 : 129.0);
    val kf;
    val n = magic_int(e, add(e, x, K(e, magic(e))), &kf);
    val r = sub(e, x, kf); /* exact, |r| <= 1/2 */
    val q = e->dbl ? poly(e, r, exp2_q_f64, NCOEF(exp2_q_f64), 2)
                   : poly(e, r, exp2_q_f32, NCOEF(exp2_q_f32), 2);
    return scale2(e, fma_(e, r, q, K(e, 1)), n);
}

/* e^x - 1 = 2^n (1 + u) - 1 with u = e^r - 1 = r + r^2 Q(r) kept apart from the 1, so that
 * small results keep their relative accuracy. */
static val
b_expm1(em *e, val *a)
{
    bool d = e->dbl;
    val x = a[0];
    /* Below the low clamp the result rounds to -1; above the high one it is inf. */
    val xc = clamp(e, x, d ? -40.0 : -25.0, d ? 710.0 : 89.0);
    val kf;
    val n = magic_int(e, fma_(e, xc, K(e, d ? LOG2E_HI_F64 : LOG2E_HI_F32), K(e, magic(e))), &kf);
    val nk = neg(e, kf);
    val rh = fma_(e, nk, K(e, d ? LN2_HI_F64 : LN2_HI_F32), xc);
    val rl = mul(e, nk, K(e, d ? LN2_LO_F64 : LN2_LO_F32));
    val r = add(e, rh, rl);
    val q =
        d ? poly(e, r, exp_q_f64, NCOEF(exp_q_f64), 2) : poly(e, r, exp_q_f32, NCOEF(exp_q_f32), 2);
    val u = add(e, rh, fma_(e, mul(e, r, r), q, rl));
    /* 2^n (1 + u) - 1 = 2 (h u + (h - 1/2)), h = 2^(n-1): one rounding, in the FMA (h - 1/2
     * is exact while it matters); n - 1 stays in the normal range thanks to the clamps. */
    val h = pow2i(e, isub(e, n, KI(e, 1)));
    val y = mul(e, K(e, 2), fma_(e, h, u, sub(e, h, K(e, 0.5))));
    val res = sel(e, icmp(e, LLVMIntEQ, n, KI(e, 0)), u, y);
    return sel(e, fcmp(e, LLVMRealOEQ, x, K(e, 0)), x, res); /* expm1(-0) = -0 */
}

/* x * sigmoid(th + tl) = x / (1 + e^-t), or x e^t / (1 + e^t) for t < 0, with the 2^n of
 * e^t applied last: x e^t is representable where e^t alone would already be subnormal.
 * For t < -uf the result underflows to 0 (x * 0: NaN for x = -inf, as ops.def's formulas
 * give).  `precise` adds one correction step to the quotient that takes the roundings of
 * x e^t and of 1 + e^-|t| into account (one more division; for f32 on AVX-512 hosts no
 * division at all, vrcp14 instead), for the 2-ULP functions and f64 gelu.  On AVX-512 the
 * 2^n scalings are vscalef. */
static val
xsig(em *e, val x, val th, val tl, double uf, bool precise)
{
    val tneg = fcmp(e, LLVMRealOLT, th, K(e, 0));
    val ah = neg(e, fabs_(e, th)); /* -|t| */
    val al = sel(e, tneg, tl, neg(e, tl));
    /* past -uf the result is selected away below; al is tiny and may stay */
    ah = sel(e, fcmp(e, LLVMRealOLT, ah, K(e, -uf)), K(e, -uf), ah);
    val n;
    val p = exp_core(e, ah, al, &n);
    /* e^-|t| for 1 + e^-|t|: where it is below the normal range it does not matter */
    val nmin = KI(e, 1 - e->bias);
    val ea = e->avx512 ? scale2(e, p, n)
                       : mul(e, p, pow2i(e, sel(e, icmp(e, LLVMIntSLT, n, nmin), nmin, n)));
    val num = sel(e, tneg, mul(e, x, p), x);
    val d = add(e, K(e, 1), ea);
    /* precise f32 on AVX-512: q from vrcp14's 1/d (2^-14), which the correction below
     * removes (its term is itself ~2^-14 q, computed to 2^-14 of itself: 2^-28 q, far below
     * f32's ULP, not f64's): no division at all */
    val rd = precise && e->avx512 && !e->dbl ? rcp14(e, d) : NULL;
    val q = rd ? mul(e, num, rd) : dvd(e, num, d);
    if (precise) {
        /* (num + nl)/(d + dl) = q + (num - q d + nl - q dl)/d, num - q d exact by FMA */
        val nl = sel(e, tneg, fma_(e, x, p, neg(e, num)), K(e, 0));
        val dl = add(e, sub(e, K(e, 1), d), ea);
        val rho = fma_(e, neg(e, q), d, num);
        val corr = fma_(e, neg(e, q), dl, add(e, rho, nl));
        val q1 = rd ? fma_(e, corr, rd, q) : add(e, q, dvd(e, corr, d));
        q = sel(e, or_(e, is_inf(e, q), fcmp(e, LLVMRealOEQ, q, K(e, 0))), q, q1);
    }
    /* t < 0: q 2^n rounded once (|q| is at most ~1.5 uf here): by vscalef, or in two steps,
     * q 2^(n+c) exact (normal: n >= -uf/ln2 - 1), then one rounding by 2^-c */
    int c = e->dbl ? 100 : 48;
    val scaled = e->avx512
                     ? scale2(e, q, n)
                     : mul(e, mul(e, q, pow2i(e, iadd(e, n, KI(e, c)))), K(e, ldexp(1.0, -c)));
    val res = sel(e, tneg, scaled, q);
    return sel(e, fcmp(e, LLVMRealOLT, th, K(e, -uf)), mul(e, x, K(e, 0)), res);
}

/* sigmoid(x) = 1 * sigmoid(x): 1/(1 + e^-x) for x >= 0, e^x/(1 + e^x) below (no
 * cancellation, and e^x's scaling last, so subnormal results are rounded once). */
static val
b_sigmoid(em *e, val *a)
{
    return xsig(e, K(e, 1), a[0], K(e, 0), e->dbl ? 760.0 : 110.0, true);
}

static val
b_silu(em *e, val *a)
{
    return xsig(e, a[0], a[0], K(e, 0), e->dbl ? 770.0 : 120.0, true);
}

/* gelu(x) = 0.5 x (1 + tanh(c/2 (x + k x^3))) = x sigmoid(c (x + k x^3)) exactly, which has
 * no cancellation for x < 0.  There the result is about x e^t and carries the absolute
 * error of t as relative error, so t = x (c + ck x^2) is formed in double-word arithmetic
 * (x^2 and the products split by FMA, the sum by two_sum): a few ULP of t would be many ULP
 * of gelu. */
static val
b_gelu(em *e, val *a)
{
    bool d = e->dbl;
    val x = a[0];
    /* Past the clamps the result is x (t > 600) or 0 (t < -600). */
    val xc = clamp(e, x, d ? -40.0 : -20.0, d ? 40.0 : 20.0);
    val wh = mul(e, xc, xc);
    val wl = fma_(e, xc, xc, neg(e, wh));
    val ckh = K(e, d ? GELU_CK_HI_F64 : GELU_CK_HI_F32),
        ckl = K(e, d ? GELU_CK_LO_F64 : GELU_CK_LO_F32);
    val p = mul(e, ckh, wh);
    val small = fma_(e, ckh, wl, fma_(e, ckl, wh, fma_(e, ckh, wh, neg(e, p))));
    val ge;
    val gh = two_sum(e, K(e, d ? GELU_C_F64 : GELU_C_HI_F32), p, &ge); /* c + ck x^2 */
    val gl = add(e, ge, small);
    if (!d)
        gl = add(e, gl, K(e, GELU_C_LO_F32));
    val th = mul(e, xc, gh);
    val tl = fma_(e, xc, gl, fma_(e, xc, gh, neg(e, th)));
    /* the quotient's correction step for both dtypes: without it the error reaches ~3 ULP
     * in f64 and 3.198 ULP in f32 (at x = -1.8379065, over all 2^32 inputs), above the
     * gelu forms' bound of 3; with it f32 costs about a quarter more (vrcp14 and three FMAs
     * instead of the division) */
    return xsig(e, x, th, tl, d ? 770.0 : 120.0, true);
}

/* tanh f32: E/D with E = e^2a - 1 = 2^n (1 + u) - 1 and D = E + 2, a = |x|, for every a
 * (no cancellation anywhere, no second branch): n = round(2a/ln2 - 1/2) puts r = 2a - n ln2
 * in [0, ln2], where u = e^r - 1 = rh + (r^2 Q(r) + rl) keeps its relative accuracy down to
 * 0; E = fma(2^n, u, 2^n - 1) and D = fma(2^n, u, 2^n + 1) round once each, and u's error
 * reaches E damped by 2^n u / E <= 2/3 for n >= 1 (u >= 0).  D's rounding error dl (exact:
 * 2^n + 1 - D is) would be a whole ULP of the quotient for small a, so the quotient is
 * corrected for it: q = E/D', q1 = q + (E - q D - q dl)/D with the residual exact by FMA,
 * where 1/D' is vrcp14's estimate (the correction removes its 2^-14 error too) or, on
 * hosts without it, a division.  For 2a >= 4, 1 - 2/D instead. */
static val
tanh_f32(em *e, val x)
{
    val ax = fabs_(e, x);
    val a2 = add(e, ax, ax);
    a2 = clamp(e, a2, 0, 20.0); /* tanh rounds to 1 beyond 9.01 */
    val kf;
    val n = magic_int(e, add(e, fma_(e, a2, K(e, LOG2E_HI_F32), K(e, -0.5)), K(e, magic(e))), &kf);
    val nk = neg(e, kf);
    val rh = fma_(e, nk, K(e, LN2_HI_F32), a2); /* exact */
    val rl = mul(e, nk, K(e, LN2_LO_F32));
    val r = add(e, rh, rl);
    val q = estrin(e, r, expm1_q01_f32, NCOEF(expm1_q01_f32));
    val u = add(e, rh, fma_(e, mul(e, r, r), q, rl));
    val p = pow2i(e, n);
    val em1 = fma_(e, p, u, sub(e, p, K(e, 1)));
    val p1 = add(e, p, K(e, 1));
    val d = fma_(e, p, u, p1);
    val dl = fma_(e, p, u, sub(e, p1, d)); /* d + dl = 2^n (1 + u) + 1 exactly */
    val rd = e->avx512 ? rcp14(e, d) : dvd(e, K(e, 1), d);
    val t = mul(e, em1, rd);
    val rho = fma_(e, neg(e, t), d, em1);
    t = fma_(e, fma_(e, neg(e, t), dl, rho), rd, t);
    /* 2a >= 4: 1 - 2/D (2/D < 0.04: its errors are damped 25 times, the result is within
     * ~0.55 ULP, and 1 + tanh near -1 keeps what accuracy it can), with vrcp14's estimate
     * refined by one Newton step; this also covers n >= 23, where 2^n +- 1 are not exact */
    val rd1 = e->avx512 ? fma_(e, rd, fma_(e, neg(e, d), rd, K(e, 1)), rd) : rd;
    t = sel(e, fcmp(e, LLVMRealOGE, a2, K(e, 4.0)), fma_(e, K(e, -2), rd1, K(e, 1)), t);
    return copysign_(e, t, x);
}

/* tanh f32 on AVX-512: the piecewise polynomial of tanh_pw_f32, a = |x| clamped to 9.5 (NaN
 * stays NaN through t); the piece from the bits of a, those below 1/16 to piece 0; Horner
 * in t = a - c, the coefficients looked up with vpermi2ps, which runs beside the FMAs
 * (about a third of tanh_f32's FMA-pipe operations); sign copied. */
static val
tanh_pw(em *e, val x)
{
    val a = clamp(e, fabs_(e, x), 0, TANH_PW_CLAMP);
    val idx = isub(e, ilshr(e, bits(e, a), 21), KI(e, (123 << 2) - 1));
    idx = sel(e, icmp(e, LLVMIntSLT, idx, KI(e, 0)), KI(e, 0), idx);
    val t = sub(e, a, lookup32(e, idx, tanh_pw_f32[0]));
    val acc = lookup32(e, idx, tanh_pw_f32[TANH_PW_DEG + 1]);
    for (int k = TANH_PW_DEG - 1; k >= 0; k--)
        acc = fma_(e, acc, t, lookup32(e, idx, tanh_pw_f32[k + 1]));
    return copysign_(e, acc, x);
}

/* tanh f64: a + a^3 T(a^2) below 0.625, 1 - 2/(e^2a + 1) above (no cancellation there:
 * tanh >= 0.55). */
static val
b_tanh(em *e, val *a)
{
    if (!e->dbl)
        return e->avx512 ? tanh_pw(e, a[0]) : tanh_f32(e, a[0]);
    val x = a[0];
    val ax = fabs_(e, x);
    val z = mul(e, ax, ax);
    val t = estrin(e, z, tanh_t_f64, NCOEF(tanh_t_f64));
    val small = fma_(e, mul(e, ax, z), t, ax);
    val ac = clamp(e, ax, 0, 20.0); /* tanh is 1 to the last bit beyond */
    val n;
    val p = exp_core(e, add(e, ac, ac), NULL, &n);
    val ee = mul(e, p, pow2i(e, n));
    val big = sub(e, K(e, 1), dvd(e, K(e, 2), add(e, ee, K(e, 1))));
    val res = sel(e, fcmp(e, LLVMRealOLT, ax, K(e, 0.625)), small, big);
    return copysign_(e, res, x);
}

/* ---- logarithms ------------------------------------------------------------------------ */

/* x = 2^k m with m in [sqrt(1/2), sqrt(2)): returns f = m - 1 (exact) and k as a float.
 * For x > 0 finite; subnormals are scaled up first when `subnormals`. */
static val
log_reduce(em *e, val x, bool subnormals, val *kf)
{
    val adj = KI(e, 0);
    if (subnormals) {
        val tiny = fcmp(e, LLVMRealOLT, x, K(e, e->dbl ? 0x1p-1022 : 0x1p-126));
        x = sel(e, tiny, mul(e, x, K(e, e->dbl ? 0x1p54 : 0x1p25)), x);
        adj = sel(e, tiny, KI(e, e->dbl ? -54 : -25), adj);
    }
    val ix = bits(e, x);
    val k = iashr(e, isub(e, ix, bits(e, K(e, SQRT_HALF))), e->mant);
    val m = fbits(e, isub(e, ix, LLVMBuildShl(e->b, k, KI(e, e->mant), "")));
    *kf = itof(e, iadd(e, k, adj));
    return sub(e, m, K(e, 1));
}

/* log(1 + f) + lo for f in [sqrt(1/2)-1, sqrt(2)-1]: f32 f + f^2 Q(f); f64 as fdlibm,
 * f - (hfsq - s (hfsq + R(s^2))) with s = f/(2+f). */
static val
log1p_kernel(em *e, val f, val lo)
{
    if (!e->dbl)
        return fma_(e, mul(e, f, f), poly(e, f, log_q_f32, NCOEF(log_q_f32), 2), add(e, f, lo));
    val s = dvd(e, f, add(e, K(e, 2), f));
    val z = mul(e, s, s);
    val r = mul(e, z, estrin(e, z, log_r_f64, NCOEF(log_r_f64)));
    val hfsq = mul(e, K(e, 0.5), mul(e, f, f));
    return sub(e, f, sub(e, hfsq, fma_(e, s, add(e, hfsq, r), lo)));
}

static val
log_specials(em *e, val x, val res)
{
    res = sel(e, fcmp(e, LLVMRealOEQ, x, K(e, INFINITY)), x, res);
    res = sel(e, fcmp(e, LLVMRealOEQ, x, K(e, 0)), K(e, -INFINITY), res);
    return sel(e, fcmp(e, LLVMRealULT, x, K(e, 0)), K(e, NAN), res); /* x < 0 or NaN */
}

static val
b_log(em *e, val *a)
{
    bool d = e->dbl;
    val x = a[0], kf;
    val f = log_reduce(e, x, true, &kf);
    val l = log1p_kernel(e, f, mul(e, kf, K(e, d ? LN2_LO_F64 : LN2_LO_F32)));
    return log_specials(e, x, fma_(e, kf, K(e, d ? LN2_HI_F64 : LN2_HI_F32), l));
}

static val
b_log2(em *e, val *a)
{
    val x = a[0], kf, y;
    val f = log_reduce(e, x, true, &kf);
    if (e->dbl) {
        val l = log1p_kernel(e, f, K(e, 0));
        y = fma_(e, l, K(e, LOG2E_HI_F64), mul(e, l, K(e, LOG2E_LO_F64)));
    } else {
        y = fma_(e, mul(e, f, f), poly(e, f, log2_q_f32, NCOEF(log2_q_f32), 2),
                 mul(e, f, K(e, LOG2E_LO_F32)));
        y = fma_(e, f, K(e, LOG2E_HI_F32), y);
    }
    return log_specials(e, x, add(e, kf, y)); /* exact for powers of two */
}

/* log1p: f = x itself while 1 + x is in the kernel's range (no rounding at all); otherwise
 * u = 1 + x rounded, with the rounding error c added back as c/u. */
static val
b_log1p(em *e, val *a)
{
    bool d = e->dbl;
    val x = a[0], kfu, c;
    val inside = and_(e, fcmp(e, LLVMRealOGE, x, K(e, SQRT_HALF - 1)),
                      fcmp(e, LLVMRealOLT, x, K(e, 0.41421356237309504880)));
    val u = two_sum(e, K(e, 1), x, &c);
    val fu = log_reduce(e, u, false, &kfu);
    val f = sel(e, inside, x, fu);
    val kf = sel(e, inside, K(e, 0), kfu);
    val corr = sel(e, inside, K(e, 0), dvd(e, c, u));
    val l = log1p_kernel(e, f, fma_(e, kf, K(e, d ? LN2_LO_F64 : LN2_LO_F32), corr));
    val res = fma_(e, kf, K(e, d ? LN2_HI_F64 : LN2_HI_F32), l);
    res = sel(e, fcmp(e, LLVMRealOEQ, x, K(e, INFINITY)), x, res);
    res = sel(e, fcmp(e, LLVMRealOEQ, x, K(e, -1)), K(e, -INFINITY), res);
    res = sel(e, fcmp(e, LLVMRealULT, x, K(e, -1)), K(e, NAN), res);
    return sel(e, fcmp(e, LLVMRealOEQ, x, K(e, 0)), x, res); /* log1p(-0) = -0 */
}

/* ---- erf, gelu_erf (f64) ------------------------------------------------------------------ */

/* erfc(a) = bracket * 2^n for a >= 0, with (ah2 + al2) = a^2 and (dh + dl) = 1 + 2a:
 * erfc(a) = e^(-a^2) G(y) / (1 + 2a), y = (a - K)/(a + K), after Shepherd and Laframboise
 * (1981): G is smooth on all of a >= 0, so one polynomial covers it.  a^2 must be exact to
 * ~2^-106 (its error shows in e^(-a^2) multiplied by a^2); the quotient is corrected for the
 * roundings of p G and of 1 + 2a, which would otherwise add up to ~2 ULP in the far tail. */
static val
erfc_core(em *e, val a, val ah2, val al2, val dh, val dl, val *n)
{
    val p = exp_core(e, neg(e, ah2), neg(e, al2), n);
    val y = dvd(e, sub(e, a, K(e, ERFC_K)), add(e, a, K(e, ERFC_K)));
    val g = horner(e, y, erfc_g_f64, NCOEF(erfc_g_f64));
    val num = mul(e, p, g);
    val nl = fma_(e, p, g, neg(e, num));
    val q = dvd(e, num, dh);
    val rho = fma_(e, neg(e, q), dh, num);
    return add(e, q, dvd(e, fma_(e, neg(e, q), dl, add(e, rho, nl)), dh));
}

static val
b_erf(em *e, val *args)
{
    val x = args[0];
    val a = fabs_(e, x);
    val z = mul(e, a, a);
    /* a P(z) = a c0 + a z P1(z): the product a c0 exact inside the FMA */
    val small = fma_(e, a, K(e, erf_p_f64[0]),
                     mul(e, mul(e, a, z), horner(e, z, erf_p_f64 + 1, NCOEF(erf_p_f64) - 1)));
    val ac = clamp(e, a, 0, 6.0); /* erf is 1 to the last bit beyond 5.93 */
    val ah2 = mul(e, ac, ac);
    val n, dl;
    val dh = two_sum(e, K(e, 1), add(e, ac, ac), &dl);
    val br = erfc_core(e, ac, ah2, fma_(e, ac, ac, neg(e, ah2)), dh, dl, &n);
    val big = sub(e, K(e, 1), mul(e, br, pow2i(e, n)));
    return copysign_(e, sel(e, fcmp(e, LLVMRealOLT, a, K(e, 0.85)), small, big), x);
}

/* f32 erf in f32: a (c0 + z P1(z)) below 0.875, where the relative error matters (c0 in two
 * parts, so that a c0 keeps 2^-48); above, one polynomial in t = a - 2.375 up to 4 (erf rounds
 * to 1 beyond 3.92): erf near 1 needs absolute accuracy only, and t near 0 keeps Horner's
 * roundings small (the sum of |c_k t^k| is at most 1.33).  t = s + d exactly by Fast2Sum
 * (2.375 has the larger exponent up to a = 4); d is non-zero below 1.1875 only, where
 * Sterbenz's lemma does not hold, and enters as erf'(a) d. */
static val
b_erf_f32(em *e, val *args)
{
    val x = args[0];
    val a = fabs_(e, x);
    val z = mul(e, a, a);
    val p1 = horner(e, z, erf_p_f32, NCOEF(erf_p_f32));
    val small = fma_(e, a, K(e, ERF_C0_HI_F32),
                     fma_(e, a, K(e, ERF_C0_LO_F32), mul(e, mul(e, a, z), p1)));
    val ac = clamp(e, a, 0, 4.0);
    val s = sub(e, ac, K(e, ERF_BIG_C));
    val d = sub(e, ac, add(e, s, K(e, ERF_BIG_C)));
    val dd = mul(e, d, fma_(e, ac, K(e, ERF_D_B_F32), K(e, ERF_D_A_F32)));
    val q = horner(e, s, erf_big_f32 + 2, NCOEF(erf_big_f32) - 2);
    val big = add(e, K(e, erf_big_f32[0]), fma_(e, s, q, add(e, K(e, erf_big_f32[1]), dd)));
    /* NaN takes the first branch (unordered), which keeps it */
    return copysign_(e, sel(e, fcmp(e, LLVMRealULT, a, K(e, 0.875)), small, big), x);
}

/* gelu_erf(x) = x Phi(x), Phi(x) = erfc(-x/sqrt2)/2: x (1 - erfc(a)/2) for x >= 0 (no
 * cancellation: erfc(a)/2 <= 1/2) and x erfc(a)/2 for x < 0, a = |x|/sqrt2, a^2 = x^2/2
 * exactly from the FMA-split square (a^2 enters e^(-a^2), where its rounding would show). */
static val
b_gelu_erf(em *e, val *args)
{
    val x = args[0];
    val xc = clamp(e, x, -40.0, 40.0); /* Phi is 0 or 1 beyond */
    val x2h = mul(e, xc, xc);
    val x2l = fma_(e, xc, xc, neg(e, x2h));
    val ax = fabs_(e, xc);
    val a = mul(e, ax, K(e, SQRT_HALF));
    /* 1 + 2a = 1 + sqrt2 |x| in double-word, from |x| (a itself is rounded) */
    val ph = mul(e, ax, K(e, SQRT2_HI));
    val pl = fma_(e, ax, K(e, SQRT2_LO), fma_(e, ax, K(e, SQRT2_HI), neg(e, ph)));
    val dl;
    val dh = two_sum(e, K(e, 1), ph, &dl);
    dl = add(e, dl, pl);
    val n;
    val br = erfc_core(e, a, mul(e, x2h, K(e, 0.5)), mul(e, x2l, K(e, 0.5)), dh, dl, &n);
    val pos = mul(e, x, sub(e, K(e, 1), mul(e, K(e, 0.5), scale2(e, br, n))));
    val negv = scale2(e, mul(e, mul(e, x, K(e, 0.5)), br), n);
    val res = sel(e, fcmp(e, LLVMRealOLT, x, K(e, 0)), negv, pos);
    /* |x| < 3/4: x Phi(x) = x (1/2 + x Q(x^2)) (the erfc path's roundings of a and y would
     * show as relative error where erfc(a) is near 1) */
    val small = mul(e, x, fma_(e, x, horner(e, x2h, phi_q_f64, NCOEF(phi_q_f64)), K(e, 0.5)));
    res = sel(e, fcmp(e, LLVMRealOLT, fabs_(e, x), K(e, 0.75)), small, res);
    return sel(e, fcmp(e, LLVMRealOLT, x, K(e, -40.0)), mul(e, x, K(e, 0)), res);
}

/* f32 gelu_erf in f32, from u = |x| (exact) rather than a = u/sqrt2 (rounded), so that no
 * rounding of the argument shows in the tail: |x| < 3/4: x (1/2 + x Q(x^2)); above,
 * t = u Phi(-u) = u e^(-u^2/2) M(u) with u^2 = h + hl exactly (FMA split), e^(-(h + hl)/2)
 * = (ph + pl) 2^n by exp_core_dw (unrounded), M(u) = w P(w), w = 1/(u + 3) (vrcp14 and a
 * Newton step on AVX-512), 2^n applied last (subnormal results rounded once); then
 * x Phi(x) = -t for x < 0 and x - t for x > 0 (t <= 0.23 x there: no cancellation).  u is
 * clamped to 15, past which t underflows: x - 0 = x above, -0 below, NaN at -inf (ops.def:
 * -inf * 0). */
static val
b_gelu_erf_f32(em *e, val *args)
{
    val x = args[0];
    val small = mul(e, x, fma_(e, x, horner(e, mul(e, x, x), phi_q_f32, NCOEF(phi_q_f32)),
                               K(e, 0.5)));
    val u = clamp(e, fabs_(e, x), 0, 15.0);
    val h = mul(e, u, u);
    val hl = fma_(e, u, u, neg(e, h));
    val n, pl;
    val ph = exp_core_dw(e, mul(e, h, K(e, -0.5)), mul(e, hl, K(e, -0.5)), &n, &pl);
    val d = add(e, u, K(e, GELU_M_K));
    val w; /* ~1/d to 2^-28 */
    if (e->avx512) {
        val r = rcp14(e, d);
        w = fma_(e, r, fma_(e, neg(e, r), d, K(e, 1)), r);
    } else {
        w = dvd(e, K(e, 1), d);
    }
    /* w's error: 1/(u + 3) = w (1 + eps) with d = u + 3 exact as dh + dl; M moves by
     * S eps, S = dlnM/dlnw ~ GELU_S_A + GELU_S_B w (1.19 to 2.17, to 0.016) */
    val dl;
    val dh = two_sum(e, u, K(e, GELU_M_K), &dl);
    val eps = fma_(e, neg(e, w), dl, fma_(e, neg(e, w), dh, K(e, 1)));
    val se = mul(e, eps, fma_(e, w, K(e, GELU_S_B), K(e, GELU_S_A)));
    /* M = w P(w) (1 + S eps) = mh + ml, w P(w) exactly by FMA */
    val pw = horner(e, w, gelu_m_f32, NCOEF(gelu_m_f32));
    val mh = mul(e, w, pw);
    val ml = fma_(e, mh, se, fma_(e, w, pw, neg(e, mh)));
    /* t = u (mh + ml)(ph + pl), rounded once: mh ph = qh + ql exactly */
    val qh = mul(e, mh, ph);
    val ql = fma_(e, mh, pl, fma_(e, ml, ph, fma_(e, mh, ph, neg(e, qh))));
    val t = scale2(e, fma_(e, u, qh, mul(e, u, ql)), n);
    val res = sel(e, fcmp(e, LLVMRealOLT, x, K(e, 0)), neg(e, t), sub(e, x, t));
    res = sel(e, fcmp(e, LLVMRealOLT, fabs_(e, x), K(e, 0.75)), small, res);
    return sel(e, fcmp(e, LLVMRealOEQ, x, K(e, -INFINITY)), K(e, NAN), res);
}

/* ---- sin, cos, tan (f64) -------------------------------------------------------------------- */

#define PH_ROWS 256 /* one row per 4 binades of |x|, 4 doubles each */

/* The Payne-Hanek table: row i holds 2/pi from bit J0 = max(1, 4i - 53) on (earlier bits
 * only add multiples of 4 to |x| * 2/pi for |x| >= 2^(4i), so they drop out mod 4), as four
 * doubles of 53 bits each, scaled by 2^J0 so that none is subnormal. */
static LLVMValueRef
ph_table(em *e)
{
    const char *name = "kiln.vm.two_over_pi";
    LLVMValueRef g = LLVMGetNamedGlobal(e->mod, name);
    if (g)
        return g;
    LLVMTypeRef d = LLVMDoubleTypeInContext(e->ctx);
    LLVMValueRef v[PH_ROWS * 4];
    for (int i = 0; i < PH_ROWS; i++) {
        int j0 = 4 * i - 53 < 1 ? 1 : 4 * i - 53;
        for (int k = 0; k < 4; k++) {
            uint64_t m = 0;
            for (int j = j0 + 53 * k; j < j0 + 53 * k + 53; j++) { /* bit j after the point */
                int hex = (j - 1) / 4;
                int digit = two_over_pi_hex[hex];
                digit = digit <= '9' ? digit - '0' : digit - 'a' + 10;
                m = m << 1 | (uint64_t)((digit >> (3 - (j - 1) % 4)) & 1);
            }
            v[i * 4 + k] = LLVMConstReal(d, ldexp((double)m, -53 * k - 52));
        }
    }
    LLVMTypeRef at = LLVMArrayType(d, PH_ROWS * 4);
    g = LLVMAddGlobal(e->mod, at, name);
    LLVMSetInitializer(g, LLVMConstArray(d, v, PH_ROWS * 4));
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMInternalLinkage);
    LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
    return g;
}

/* Table entries idx (i64 lanes), by gather or by load for a scalar. */
static val
ph_load(em *e, LLVMValueRef table, val idx)
{
    LLVMTypeRef d = LLVMDoubleTypeInContext(e->ctx);
    val ptr = LLVMBuildGEP2(e->b, d, table, &idx, 1, "");
    if (!e->lanes)
        return LLVMBuildLoad2(e->b, d, ptr, "");
    LLVMTypeRef i1 = LLVMInt1TypeInContext(e->ctx);
    LLVMTypeRef over[2] = {e->ft, LLVMTypeOf(ptr)};
    const char *nm = "llvm.masked.gather";
    unsigned id = LLVMLookupIntrinsicID(nm, strlen(nm));
    val f = LLVMGetIntrinsicDeclaration(e->mod, id, over, 2);
    val mask[JIT_VM_MAX_LANES];
    for (unsigned i = 0; i < e->lanes; i++)
        mask[i] = LLVMConstInt(i1, 1, 0);
    val args[] = {ptr, LLVMConstInt(LLVMInt32TypeInContext(e->ctx), 8, 0),
                  LLVMConstVector(mask, e->lanes), LLVMGetUndef(e->ft)};
    return LLVMBuildCall2(e->b, LLVMIntrinsicGetType(e->ctx, id, over, 2), f, args, 4, "");
}

static val
mod4(em *e, val v)
{
    return sub(e, v, mul(e, K(e, 4), roundeven_(e, mul(e, v, K(e, 0.25)))));
}

/* |x| >= 2^27 (finite): |x| = q pi/2 + (rh + rl) by Payne-Hanek.  With a' = |x| 2^-J0 and
 * the row's C0..C3, |x| 2/pi = sum a' Ck (mod 4); each product is split exactly by FMA, the
 * large parts reduced mod 4 and stripped of their integers (exactly), and the small parts
 * summed in double-word, so the fraction keeps ~100 bits even when it is tiny. */
static void
payne_hanek(em *e, val x, val *q, val *rh, val *rl)
{
    val a = fabs_(e, x);
    val ok =
        and_(e, fcmp(e, LLVMRealOGE, a, K(e, 0x1p27)), fcmp(e, LLVMRealOLT, a, K(e, INFINITY)));
    a = sel(e, ok, a, K(e, 0x1p27)); /* other lanes: any valid value, their result is unused */
    val ex = isub(e, LLVMBuildAnd(e->b, ilshr(e, bits(e, a), 52), KI(e, 0x7ff), ""), KI(e, 1023));
    val row = iashr(e, ex, 2);
    val j0 = isub(e, ishl(e, row, 2), KI(e, 53));
    j0 = sel(e, icmp(e, LLVMIntSLT, j0, KI(e, 1)), KI(e, 1), j0);
    val ap = mul(e, a, pow2i(e, isub(e, KI(e, 0), j0)));
    LLVMValueRef table = ph_table(e);
    val c[4], ph[4], pl[4];
    for (int k = 0; k < 4; k++) {
        c[k] = ph_load(e, table, iadd(e, ishl(e, row, 2), KI(e, k)));
        ph[k] = mul(e, ap, c[k]);
        pl[k] = fma_(e, ap, c[k], neg(e, ph[k]));
    }
    val e1, e2, t;
    val s = two_sum(e, mod4(e, ph[0]), mod4(e, pl[0]), &e1);
    val n1 = roundeven_(e, s);
    s = sub(e, s, n1);
    s = two_sum(e, s, mod4(e, ph[1]), &e2);
    val n2 = roundeven_(e, s);
    s = sub(e, s, n2);
    /* the small terms, all below 2^-46 */
    val sl;
    val sh = two_sum(e, pl[1], ph[2], &sl);
    sh = two_sum(e, sh, e2, &t);
    sl = add(e, sl, t);
    sh = two_sum(e, sh, e1, &t);
    sl = add(e, sl, add(e, t, add(e, pl[2], ph[3])));
    val fl;
    val fh = two_sum(e, s, sh, &fl);
    fl = add(e, fl, sl);
    fh = fast_two_sum(e, fh, fl, &fl);
    val kf;
    val qi = magic_int(e, add(e, add(e, n1, n2), K(e, magic(e))), &kf);
    /* r = f pi/2 */
    val r = mul(e, fh, K(e, PIO2_1));
    val rr =
        fma_(e, fl, K(e, PIO2_1), fma_(e, fh, K(e, PIO2_2), fma_(e, fh, K(e, PIO2_1), neg(e, r))));
    r = fast_two_sum(e, r, rr, &rr);
    val xneg = fcmp(e, LLVMRealOLT, x, K(e, 0));
    *rh = sel(e, xneg, neg(e, r), r);
    *rl = sel(e, xneg, neg(e, rr), rr);
    *q = sel(e, xneg, isub(e, KI(e, 0), qi), qi);
}

/* x = q pi/2 + (rh + rl), |rh + rl| <= pi/4 (a little more for huge x).  Cody-Waite with
 * three parts of pi/2 for |x| < 2^27 (the first product is exact inside the FMA, the second
 * split exactly, the error ~2^-106 |r| + 2^-132); Payne-Hanek, on a branch taken only when
 * some lane needs it, above. */
static void
trig_reduce(em *e, val x, val *q, val *rh, val *rl)
{
    val kf;
    val n = magic_int(e, fma_(e, x, K(e, TWO_OVER_PI), K(e, magic(e))), &kf);
    val nk = neg(e, kf);
    val r1 = fma_(e, nk, K(e, PIO2_1), x);
    val th = mul(e, nk, K(e, PIO2_2));
    val tl = fma_(e, nk, K(e, PIO2_2), neg(e, th));
    val err;
    val s = two_sum(e, r1, th, &err);
    val lo = fma_(e, nk, K(e, PIO2_3), add(e, err, tl));
    val lo2;
    val fh = fast_two_sum(e, s, lo, &lo2);

    val big = fcmp(e, LLVMRealOGE, fabs_(e, x), K(e, 0x1p27));
    val any = big;
    if (e->lanes)
        any = intrinsic(e, "llvm.vector.reduce.or", &big, 1);
    LLVMBasicBlockRef fast_bb = LLVMGetInsertBlock(e->b);
    LLVMBasicBlockRef slow_bb = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "payne_hanek");
    LLVMBasicBlockRef join_bb = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "reduced");
    LLVMBuildCondBr(e->b, any, slow_bb, join_bb);
    LLVMPositionBuilderAtEnd(e->b, slow_bb);
    val sq, sh, sl;
    payne_hanek(e, x, &sq, &sh, &sl);
    sq = sel(e, big, sq, n);
    sh = sel(e, big, sh, fh);
    sl = sel(e, big, sl, lo2);
    LLVMBasicBlockRef slow_end = LLVMGetInsertBlock(e->b);
    LLVMBuildBr(e->b, join_bb);
    LLVMPositionBuilderAtEnd(e->b, join_bb);
    val in[3][2] = {{n, sq}, {fh, sh}, {lo2, sl}};
    LLVMBasicBlockRef from[2] = {fast_bb, slow_end};
    val *out[3] = {q, rh, rl};
    for (int i = 0; i < 3; i++) {
        *out[i] = LLVMBuildPhi(e->b, LLVMTypeOf(in[i][0]), "");
        LLVMAddIncoming(*out[i], in[i], from, 2);
    }
}

/* sin(rh + rl) = rh + (rh^3 S(rh^2) + rl) (rl's own term is below 2^-53 |rh|). */
static val
sin_kernel(em *e, val rh, val rl)
{
    val z = mul(e, rh, rh);
    return add(e, rh, fma_(e, mul(e, rh, z), horner(e, z, sin_s_f64, NCOEF(sin_s_f64)), rl));
}

/* cos(rh + rl) = w + ((1 - w) - z/2) + (z^2 C(z) - rh rl), w = 1 - z/2 rounded (fdlibm's
 * way of keeping the rounding error of w). */
static val
cos_kernel(em *e, val rh, val rl)
{
    val z = mul(e, rh, rh);
    val hz = mul(e, z, K(e, 0.5));
    val w = sub(e, K(e, 1), hz);
    val tail =
        fma_(e, mul(e, z, z), horner(e, z, cos_c_f64, NCOEF(cos_c_f64)), neg(e, mul(e, rh, rl)));
    return add(e, w, add(e, sub(e, sub(e, K(e, 1), w), hz), tail));
}

static val
trig(em *e, val x, jit_vm_fn fn)
{
    val q, rh, rl, res;
    trig_reduce(e, x, &q, &rh, &rl);
    val s = sin_kernel(e, rh, rl);
    val c = cos_kernel(e, rh, rl);
    val odd = icmp(e, LLVMIntNE, LLVMBuildAnd(e->b, q, KI(e, 1), ""), KI(e, 0));
    if (fn == JIT_VM_TAN) {
        res = dvd(e, sel(e, odd, c, s), sel(e, odd, s, c));
        res = sel(e, odd, neg(e, res), res);
    } else {
        val qq = fn == JIT_VM_COS ? iadd(e, q, KI(e, 1)) : q;
        res = fn == JIT_VM_COS ? sel(e, odd, s, c) : sel(e, odd, c, s);
        val flip = icmp(e, LLVMIntNE, LLVMBuildAnd(e->b, qq, KI(e, 2), ""), KI(e, 0));
        res = sel(e, flip, neg(e, res), res);
    }
    if (fn != JIT_VM_COS)
        res = sel(e, fcmp(e, LLVMRealOEQ, x, K(e, 0)), x, res); /* sin(-0) = tan(-0) = -0 */
    return sel(e, is_inf(e, x), K(e, NAN), res);
}

static val
b_sin(em *e, val *a)
{
    return trig(e, a[0], JIT_VM_SIN);
}

static val
b_cos(em *e, val *a)
{
    return trig(e, a[0], JIT_VM_COS);
}

static val
b_tan(em *e, val *a)
{
    return trig(e, a[0], JIT_VM_TAN);
}

/* ---- atan2 (f64) ---------------------------------------------------------------------------- */

/* atan2(y, x) = k pi/4 ± atan(u): with num = min(|x|,|y|), den = max, u = num/den, or
 * (num - den)/(num + den) (and one more pi/4) above tan(pi/8); then reflections for
 * |y| > |x| and for x < 0 (by its sign bit, so -0 counts), and y's sign.  k pi/4 is added
 * in two parts by FMA. */
static val
b_atan2(em *e, val *args)
{
    val y = args[0], x = args[1];
    val ay = fabs_(e, y), ax = fabs_(e, x);
    val swap = fcmp(e, LLVMRealOGT, ay, ax);
    val num = sel(e, swap, ax, ay);
    val den = sel(e, swap, ay, ax);
    val infs = and_(e, is_inf(e, ax), is_inf(e, ay));
    num = sel(e, infs, K(e, 1), num);
    den = sel(e, infs, K(e, 1), den);
    /* keep num + den finite */
    val huge = fcmp(e, LLVMRealOGT, den, K(e, 0x1p1020));
    num = sel(e, huge, mul(e, num, K(e, 0.25)), num);
    den = sel(e, huge, mul(e, den, K(e, 0.25)), den);
    val hi = fcmp(e, LLVMRealOGT, num, mul(e, den, K(e, 0.41421356237309504880)));
    val u = sel(e, hi, dvd(e, sub(e, num, den), add(e, num, den)), dvd(e, num, den));
    u = sel(e, fcmp(e, LLVMRealOEQ, num, K(e, 0)), K(e, 0), u); /* 0/0 */
    val z = mul(e, u, u);
    val at = fma_(e, mul(e, u, z), estrin(e, z, atan_p_f64, NCOEF(atan_p_f64)), u);
    val k = sel(e, hi, K(e, 1), K(e, 0));
    val sg = K(e, 1);
    k = sel(e, swap, sub(e, K(e, 2), k), k);
    sg = sel(e, swap, K(e, -1), sg);
    val xneg = icmp(e, LLVMIntSLT, bits(e, x), KI(e, 0));
    k = sel(e, xneg, sub(e, K(e, 4), k), k);
    sg = sel(e, xneg, neg(e, sg), sg);
    val ang = fma_(e, k, K(e, PIO4_HI), fma_(e, k, K(e, PIO4_LO), mul(e, sg, at)));
    val res = copysign_(e, ang, y);
    return sel(e, or_(e, is_nan(e, x), is_nan(e, y)), add(e, x, y), res);
}

/* ---- pow (f64) -------------------------------------------------------------------------------- */

/* log|x| as Lh + Ll to ~2^-66 relative: x = 2^k (1 + f), s = f/(2+f) in double-word,
 * log(1+f) = 2s + 2/3 s^3 + s^5 W(s^2) with the first two terms in double-word. */
static val
log_dd(em *e, val ax, val *ll)
{
    val kf, t;
    val f = log_reduce(e, ax, true, &kf);
    val u = add(e, K(e, 2), f);
    val ue = sub(e, f, sub(e, u, K(e, 2))); /* 2 + f = u + ue exactly */
    val sh = dvd(e, f, u);
    val sl = dvd(e, sub(e, fma_(e, neg(e, sh), u, f), mul(e, sh, ue)), u);
    val z = mul(e, sh, sh);
    val zl = fma_(e, sh, sh, neg(e, z));
    val c3 = mul(e, z, sh); /* s^3 = c3 + c3l */
    val c3l = fma_(e, mul(e, K(e, 3), z), sl, fma_(e, zl, sh, fma_(e, z, sh, neg(e, c3))));
    val t3 = mul(e, K(e, TWO_THIRDS_HI), c3);
    val t3l = fma_(e, K(e, TWO_THIRDS_LO), c3,
                   fma_(e, K(e, TWO_THIRDS_HI), c3l, fma_(e, K(e, TWO_THIRDS_HI), c3, neg(e, t3))));
    val tail = mul(e, mul(e, c3, z), estrin(e, z, pow_w_f64, NCOEF(pow_w_f64)));
    val lh = fast_two_sum(e, mul(e, K(e, 2), sh), t3, &t);
    val lo = add(e, add(e, t, mul(e, K(e, 2), sl)), add(e, t3l, tail));
    val kh = mul(e, kf, K(e, LN2_HI_F64));
    val kl = fma_(e, kf, K(e, LN2_LO_F64), fma_(e, kf, K(e, LN2_HI_F64), neg(e, kh)));
    val h = two_sum(e, kh, lh, &t);
    lo = add(e, t, add(e, kl, lo));
    return fast_two_sum(e, h, lo, ll);
}

/* pow(x, y) = e^(y log|x|) with y log|x| in double-word, the sign for negative x from y's
 * parity, and C99 Annex F's special cases selected last (later rules win). */
static val
b_pow(em *e, val *args)
{
    val x = args[0], y = args[1];
    val ax = fabs_(e, x), ll;
    val lh = log_dd(e, ax, &ll);
    val ph = mul(e, y, lh);
    val pl = fma_(e, y, ll, fma_(e, y, lh, neg(e, ph)));
    val out = or_(e, fcmp(e, LLVMRealOGT, ph, K(e, 710.0)), fcmp(e, LLVMRealOLT, ph, K(e, -746.0)));
    pl = sel(e, out, K(e, 0), pl);
    ph = clamp(e, ph, -746.0, 710.0);
    val n;
    val p = exp_core(e, ph, pl, &n);
    val r = scale2(e, p, n);

    val yfin = fcmp(e, LLVMRealOLT, fabs_(e, y), K(e, INFINITY));
    val yint = and_(e, yfin, fcmp(e, LLVMRealOEQ, roundeven_(e, y), y));
    val hy = mul(e, y, K(e, 0.5));
    val yodd = and_(e, yint, fcmp(e, LLVMRealONE, roundeven_(e, hy), hy));
    val xneg = fcmp(e, LLVMRealOLT, x, K(e, 0));
    val ylt0 = fcmp(e, LLVMRealOLT, y, K(e, 0));
    val inf = K(e, INFINITY), zero = K(e, 0), one = K(e, 1);
    val res = sel(e, and_(e, xneg, yodd), neg(e, r), r);
    res = sel(e, and_(e, xneg, not_(e, yint)), K(e, NAN), res);
    /* x = ±0: ±inf / +inf for y < 0, ±0 / +0 for y > 0 (the sign only for odd integer y) */
    val zr = sel(e, ylt0, inf, zero);
    zr = sel(e, yodd, copysign_(e, zr, x), zr);
    res = sel(e, fcmp(e, LLVMRealOEQ, x, zero), zr, res);
    /* x = ±inf: +0 / +inf, negated for x = -inf and odd integer y */
    val ir = sel(e, ylt0, zero, inf);
    ir = sel(e, and_(e, xneg, yodd), neg(e, ir), ir);
    res = sel(e, is_inf(e, x), ir, res);
    /* y = ±inf: 0 or inf by |x| < 1 and the sign of y; 1 for |x| = 1 */
    val yr = sel(e, xor_(e, fcmp(e, LLVMRealOLT, ax, one), ylt0), zero, inf);
    yr = sel(e, fcmp(e, LLVMRealOEQ, ax, one), one, yr);
    res = sel(e, is_inf(e, y), yr, res);
    res = sel(e, or_(e, is_nan(e, x), is_nan(e, y)), add(e, x, y), res);
    res = sel(e, fcmp(e, LLVMRealOEQ, y, zero), one, res); /* even for NaN x */
    return sel(e, fcmp(e, LLVMRealOEQ, x, one), one, res); /* even for NaN y */
}

/* ---- fmod (f64; f32 widened: exact both ways) -------------------------------------------- */

/* floor(log2 |x|) for x > 0 finite, subnormals included (0 gives about -bias - 54). */
static val
ilogb_(em *e, val x)
{
    val tiny = fcmp(e, LLVMRealOLT, x, K(e, 0x1p-1022));
    x = sel(e, tiny, mul(e, x, K(e, 0x1p54)), x);
    val ex = LLVMBuildAnd(e->b, ilshr(e, bits(e, x), e->mant), KI(e, 2 * e->bias + 1), "");
    return isub(e, ex, sel(e, tiny, KI(e, e->bias + 54), KI(e, e->bias)));
}

/* fmod(x, y) exactly, as C's fmod on x86, bit for bit: the sign of x; x for |x| < |y| (±0
 * and y = ±inf included); for a NaN operand x's NaN, else y's, quieted; for x = ±inf or
 * y = 0 x86's default NaN.  Long division in steps of up to 51 bits of
 * quotient, on A = |x|, B = |y|: with k = max(ilogb A - ilogb B - 51, 0) and Bk = B 2^k
 * (exact), q = trunc(A / Bk) is the integer part n of A/Bk or n + 1 (the rounded quotient
 * cannot pass the representable n or n + 1, and A/Bk < 2^52), so R = A - q Bk lies in
 * (-Bk, Bk), is a multiple of Bk's or A's last place, and comes out of one FMA exactly;
 * R + Bk for R < 0 is exact too.  A = R then has at least 51 fewer bits of quotient left:
 * the loop runs until every lane has A < B (once for quotients below 2^52, at most 42
 * times for doubles, 6 for widened floats). */
static val
b_fmod(em *e, val *args)
{
    val x = args[0], y = args[1];
    val ax = fabs_(e, x), ay = fabs_(e, y);
    val nan = or_(e, or_(e, is_nan(e, x), is_nan(e, y)),
                  or_(e, is_inf(e, x), fcmp(e, LLVMRealOEQ, ay, K(e, 0))));
    val keep = fcmp(e, LLVMRealOLT, ax, ay); /* false for NaNs */
    val work = not_(e, or_(e, nan, keep));
    val a0 = sel(e, work, ax, K(e, 0));
    val b = sel(e, work, ay, K(e, 1));
    val eb = ilogb_(e, b);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(e->b);
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "fmod_step");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "fmod_done");
    LLVMBuildBr(e->b, loop);
    LLVMPositionBuilderAtEnd(e->b, loop);
    val a = LLVMBuildPhi(e->b, e->ft, "");
    val k = isub(e, isub(e, ilogb_(e, a), eb), KI(e, 51));
    k = sel(e, icmp(e, LLVMIntSGT, k, KI(e, 0)), k, KI(e, 0));
    val bk = scale2(e, b, k);
    val q = intrinsic(e, "llvm.trunc", (val[]){dvd(e, a, bk)}, 1);
    val r = fma_(e, neg(e, q), bk, a);
    r = sel(e, fcmp(e, LLVMRealOLT, r, K(e, 0)), add(e, r, bk), r);
    val more = fcmp(e, LLVMRealOGE, r, b);
    if (e->lanes)
        more = intrinsic(e, "llvm.vector.reduce.or", &more, 1);
    LLVMBasicBlockRef end = LLVMGetInsertBlock(e->b);
    LLVMBuildCondBr(e->b, more, loop, done);
    val in[2] = {a0, r};
    LLVMBasicBlockRef from[2] = {pre, end};
    LLVMAddIncoming(a, in, from, 2);
    LLVMPositionBuilderAtEnd(e->b, done);
    val res = copysign_(e, r, x);
    res = sel(e, keep, x, res);
    /* NaNs as the C library's (x y)/(x y) gives them on x86: x's NaN, else y's, quieted;
     * x86's default NaN (negative) for x = ±inf or y = 0 */
    val quiet = KI(e, e->dbl ? 0x0008000000000000ll : 0x00400000);
    val dflt = fbits(e, KI(e, e->dbl ? (long long)0xfff8000000000000ull : (long long)0xffc00000));
    res = sel(e, nan, dflt, res);
    res = sel(e, is_nan(e, y), fbits(e, or_(e, bits(e, y), quiet)), res);
    return sel(e, is_nan(e, x), fbits(e, or_(e, bits(e, x), quiet)), res);
}

/* ---- functions, types, calls ------------------------------------------------------------------ */

typedef val (*body_fn)(em *e, val *args);

static val b_widen(em *e, val *args);

/* The body of fn for doubles (dbl) or floats; NULL: an f32 function computed by its f64
 * body, rounded once (b_widen).  No default: a VMATH row added to ops.def is a function of
 * jit_vm_fn, and the build fails (-Werror=switch) until it has a body here. */
static body_fn
body_of(jit_vm_fn fn, bool dbl)
{
    switch (fn) {
    case JIT_VM_EXP: return b_exp;
    case JIT_VM_EXP2: return b_exp2;
    case JIT_VM_EXPM1: return b_expm1;
    case JIT_VM_LOG: return b_log;
    case JIT_VM_LOG2: return b_log2;
    case JIT_VM_LOG1P: return b_log1p;
    case JIT_VM_TANH: return b_tanh;
    case JIT_VM_SIGMOID: return b_sigmoid;
    case JIT_VM_SILU: return b_silu;
    case JIT_VM_GELU: return b_gelu;
    case JIT_VM_ERF: return dbl ? b_erf : b_erf_f32;
    case JIT_VM_GELU_ERF: return dbl ? b_gelu_erf : b_gelu_erf_f32;
    case JIT_VM_SIN: return dbl ? b_sin : NULL;
    case JIT_VM_COS: return dbl ? b_cos : NULL;
    case JIT_VM_TAN: return dbl ? b_tan : NULL;
    case JIT_VM_POW: return dbl ? b_pow : NULL;
    case JIT_VM_ATAN2: return dbl ? b_atan2 : NULL;
    case VM_FMOD: return dbl ? b_fmod : NULL;
    }
    return NULL;
}

static void
add_fn_attr(LLVMContextRef ctx, LLVMValueRef fn, const char *name)
{
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx, kind, 0));
}

/* "kiln.vm.<name>.<type>" of (fn, dbl, lanes), built on first use with its own builder, so
 * the caller's builder is never moved. */
static LLVMValueRef
get_fn(LLVMContextRef ctx, LLVMModuleRef mod, jit_vm_fn fn, bool dbl, unsigned lanes,
       LLVMTypeRef *fty)
{
    em e = {.mod = mod, .which = fn, .avx512 = host_has_avx512()};
    em_types(&e, ctx, dbl, lanes);
    int arity = vm_info[fn].arity;
    LLVMTypeRef params[2] = {e.ft, e.ft};
    *fty = LLVMFunctionType(e.ft, params, (unsigned)arity, 0);
    char name[64];
    if (lanes)
        snprintf(name, sizeof name, "kiln.vm.%s.v%u%s", vm_info[fn].name, lanes,
                 dbl ? "f64" : "f32");
    else
        snprintf(name, sizeof name, "kiln.vm.%s.%s", vm_info[fn].name, dbl ? "f64" : "f32");
    LLVMValueRef f = LLVMGetNamedFunction(mod, name);
    if (f)
        return f;
    f = LLVMAddFunction(mod, name, *fty);
    LLVMSetLinkage(f, LLVMInternalLinkage);
    add_fn_attr(ctx, f, "alwaysinline");
    add_fn_attr(ctx, f, "nounwind");
    add_fn_attr(ctx, f, "willreturn");
    e.fn = f;
    e.b = LLVMCreateBuilderInContext(ctx);
    LLVMPositionBuilderAtEnd(e.b, LLVMAppendBasicBlockInContext(ctx, f, "entry"));
    val args[2] = {LLVMGetParam(f, 0), arity > 1 ? LLVMGetParam(f, 1) : NULL};
    body_fn body = body_of(fn, dbl);
    val r = (body ? body : b_widen)(&e, args);
    /* One NaN for every NaN result: which operand's NaN an instruction passes on depends on
     * operand order, which may differ between a vector body and a scalar tail.  (fmod
     * chooses its NaNs itself, as the C library's.) */
    LLVMBuildRet(e.b, fn == VM_FMOD ? r : sel(&e, is_nan(&e, r), K(&e, NAN), r));
    LLVMDisposeBuilder(e.b);
    return f;
}

void
jit_vm_outline(LLVMModuleRef mod)
{
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    unsigned inl = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
        size_t n;
        const char *name = LLVMGetValueName2(f, &n);
        if (n < 9 || strncmp(name, "kiln.vm.", 8) ||
            !LLVMGetEnumAttributeAtIndex(f, LLVMAttributeFunctionIndex, inl))
            continue;
        LLVMRemoveEnumAttributeAtIndex(f, LLVMAttributeFunctionIndex, inl);
        add_fn_attr(ctx, f, "noinline");
    }
}

/* An f32 function computed by its f64 version, rounded once. */
static val
b_widen(em *e, val *args)
{
    LLVMTypeRef dt = shaped(e, LLVMDoubleTypeInContext(e->ctx)), fty;
    LLVMValueRef f = get_fn(e->ctx, e->mod, e->which, true, e->lanes, &fty);
    val wide[2];
    int arity = vm_info[e->which].arity;
    for (int i = 0; i < arity; i++)
        wide[i] = LLVMBuildFPExt(e->b, args[i], dt, "");
    val r = LLVMBuildCall2(e->b, fty, f, wide, (unsigned)arity, "");
    return LLVMBuildFPTrunc(e->b, r, e->ft, "");
}

/* jit_vm_emit for fn a function of jit_vm_fn or VM_FMOD. */
static LLVMValueRef
emit_call(jit_vm *vm, jit_vm_fn fn, LLVMValueRef x, LLVMValueRef y)
{
    const char *api = "jit_vm_emit";
    if (!vm || !vm->ctx || !vm->mod || !vm->b || !x) {
        ir_error(KILN_ERR_INTERNAL,
                 "%s: internal error: %s: missing context, module, builder or operand", api,
                 vm_info[fn].name);
        return NULL;
    }
    LLVMTypeRef t = LLVMTypeOf(x), elt = t;
    unsigned lanes = 0;
    if (LLVMGetTypeKind(t) == LLVMVectorTypeKind) {
        lanes = LLVMGetVectorSize(t);
        elt = LLVMGetElementType(t);
    }
    LLVMTypeKind k = LLVMGetTypeKind(elt);
    if ((k != LLVMFloatTypeKind && k != LLVMDoubleTypeKind) || lanes > JIT_VM_MAX_LANES ||
        (LLVMGetTypeKind(t) == LLVMVectorTypeKind && lanes == 0)) {
        ir_error(
            KILN_ERR_INTERNAL,
            "%s: internal error: %s: operand is not float/double or a vector of at most %d of them",
            api, vm_info[fn].name, JIT_VM_MAX_LANES);
        return NULL;
    }
    int arity = vm_info[fn].arity;
    if (arity == 2 && (!y || LLVMTypeOf(y) != t)) {
        ir_error(KILN_ERR_INTERNAL,
                 "%s: internal error: %s: second operand missing or of another type", api,
                 vm_info[fn].name);
        return NULL;
    }
    LLVMTypeRef fty;
    LLVMValueRef f = get_fn(vm->ctx, vm->mod, fn, k == LLVMDoubleTypeKind, lanes, &fty);
    LLVMValueRef args[2] = {x, y};
    return LLVMBuildCall2(vm->b, fty, f, args, (unsigned)arity, "");
}

LLVMValueRef
jit_vm_emit(jit_vm *vm, jit_vm_fn fn, LLVMValueRef x, LLVMValueRef y)
{
    if ((unsigned)fn >= JIT_VM_COUNT) {
        ir_error(KILN_ERR_INTERNAL, "jit_vm_emit: internal error: unknown function %d", (int)fn);
        return NULL;
    }
    return emit_call(vm, fn, x, y);
}

LLVMValueRef
jit_vm_fmod(jit_vm *vm, LLVMValueRef x, LLVMValueRef y)
{
    return emit_call(vm, VM_FMOD, x, y);
}
