/* emit.c — the IR-builder helpers every kernel kind shares (emit.h): types, constants,
 * splats, intrinsic calls, loads and stores of W lanes, and the emission of one elementwise
 * instruction (lower_op: an exhaustive switch over the op table, no default).
 *
 * No fast-math flags: + - * / sqrt round exactly as the reference interpreter's
 * f64-then-round-once does for f32, max/min are llvm.maximum/minimum (NaN-propagating,
 * -0 < +0), float->int casts are llvm.fptosi.sat (saturating, NaN -> 0), as ops.def says. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>

#include "emit.h"
#include "vmath.h"

typedef jit_em L;

/* Transcendental ops come from vmath.c: polynomials in IR, never a libm call per lane. */
static LLVMValueRef
math_op(L *l, ir_op op, LLVMValueRef *a)
{
    jit_vm vm = {l->ctx, l->mod, l->b};
    LLVMValueRef r = jit_vm_emit(&vm, jit_vm_for_op(op), a[0], a[1]);
    IR_ASSERT(r != NULL); /* the planner sends only VMATH ops (ir_op_is_vmath) */
    return r;
}

/* Float rem: vmath's exact vector fmod (LLVM's frem is a libm call per lane). */
static LLVMValueRef
fmod_op(L *l, LLVMValueRef *a)
{
    jit_vm vm = {l->ctx, l->mod, l->b};
    LLVMValueRef r = jit_vm_fmod(&vm, a[0], a[1]);
    IR_ASSERT(r != NULL);
    return r;
}

LLVMTypeRef
jit_em_scalar_type(L *l, kiln_dtype t)
{
    switch (t) {
    case KILN_DTYPE_F32: return l->f32;
    case KILN_DTYPE_F64: return l->f64;
    case KILN_DTYPE_I32: return l->i32;
    case KILN_DTYPE_I64: return l->i64;
    case KILN_DTYPE_BOOL: return l->i1;
    default: IR_ASSERT(!"bad dtype");
    }
}

LLVMTypeRef
jit_em_mem_type(L *l, kiln_dtype t)
{
    return t == KILN_DTYPE_BOOL ? l->i8 : jit_em_scalar_type(l, t);
}

LLVMTypeRef
jit_em_vec(L *l, LLVMTypeRef t)
{
    return LLVMVectorType(t, (unsigned)l->W);
}

LLVMValueRef
jit_em_i64(L *l, int64_t v)
{
    return LLVMConstInt(l->i64, (unsigned long long)v, 1);
}

LLVMValueRef
jit_em_arg(L *l, LLVMTypeRef t, LLVMValueRef base, int64_t i, const char *name)
{
    LLVMValueRef idx = jit_em_i64(l, i);
    return LLVMBuildLoad2(l->b, t, LLVMBuildGEP2(l->b, t, base, &idx, 1, ""), name);
}

/* Call an overloaded intrinsic. */
LLVMValueRef
jit_em_intr(L *l, const char *name, LLVMTypeRef *over, int nover, LLVMValueRef *args, int nargs)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    IR_ASSERT(id != 0);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(l->mod, id, over, (size_t)nover);
    LLVMTypeRef fty = LLVMIntrinsicGetType(l->ctx, id, over, (size_t)nover);
    return LLVMBuildCall2(l->b, fty, fn, args, (unsigned)nargs, "");
}

static LLVMValueRef
intr1(L *l, const char *name, LLVMValueRef x)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    return jit_em_intr(l, name, &t, 1, &x, 1);
}

LLVMValueRef
jit_em_intr2(L *l, const char *name, LLVMValueRef x, LLVMValueRef y)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef a[2] = {x, y};
    return jit_em_intr(l, name, &t, 1, a, 2);
}

LLVMValueRef
jit_em_splat(L *l, LLVMValueRef scalar)
{
    LLVMTypeRef vt = jit_em_vec(l, LLVMTypeOf(scalar));
    LLVMValueRef v = LLVMBuildInsertElement(l->b, LLVMGetPoison(vt), scalar,
                                            LLVMConstInt(l->i32, 0, 0), "");
    LLVMValueRef zero = LLVMConstNull(LLVMVectorType(l->i32, (unsigned)l->W));
    return LLVMBuildShuffleVector(l->b, v, LLVMGetPoison(vt), zero, "");
}

LLVMValueRef
jit_em_const_vec(L *l, kiln_dtype t, const ir_scalar *s)
{
    LLVMValueRef c;
    switch (t) {
    case KILN_DTYPE_F32: {
        float f;
        memcpy(&f, s->bytes, 4);
        uint32_t bits;
        memcpy(&bits, &f, 4);
        /* Through the bit pattern, so NaN payloads and -0.0 survive. */
        c = LLVMConstBitCast(LLVMConstInt(l->i32, bits, 0), l->f32);
        break;
    }
    case KILN_DTYPE_F64: {
        uint64_t bits;
        memcpy(&bits, s->bytes, 8);
        c = LLVMConstBitCast(LLVMConstInt(l->i64, bits, 0), l->f64);
        break;
    }
    default:
        c = LLVMConstInt(jit_em_scalar_type(l, t), (unsigned long long)ir_scalar_i64(t, s), 1);
    }
    LLVMValueRef lanes[64];
    for (int i = 0; i < l->W; i++)
        lanes[i] = c;
    return LLVMConstVector(lanes, (unsigned)l->W);
}

static LLVMValueRef
fconst(L *l, LLVMTypeRef vt, double v)
{
    return jit_em_splat(l, LLVMConstReal(LLVMGetElementType(vt), v));
}

static LLVMValueRef
iconst(L *l, LLVMTypeRef vt, int64_t v)
{
    return jit_em_splat(l, LLVMConstInt(LLVMGetElementType(vt), (unsigned long long)v, 1));
}

/* Integer a/b or a%b with the documented edge rules: x/0 = 0, x%0 = 0,
 * INT_MIN/-1 = INT_MIN, INT_MIN%-1 = 0 (no undefined behaviour in any lane). */
static LLVMValueRef
int_divrem(L *l, LLVMValueRef a, LLVMValueRef b, bool rem)
{
    LLVMTypeRef vt = LLVMTypeOf(a);
    unsigned bits = LLVMGetIntTypeWidth(LLVMGetElementType(vt));
    LLVMValueRef zero = LLVMConstNull(vt), one = iconst(l, vt, 1), m1 = iconst(l, vt, -1);
    LLVMValueRef minv = iconst(l, vt, (int64_t)((uint64_t)1 << (bits - 1)));
    LLVMValueRef bz = LLVMBuildICmp(l->b, LLVMIntEQ, b, zero, "");
    LLVMValueRef ovf = LLVMBuildAnd(l->b, LLVMBuildICmp(l->b, LLVMIntEQ, a, minv, ""),
                                    LLVMBuildICmp(l->b, LLVMIntEQ, b, m1, ""), "");
    LLVMValueRef safe = LLVMBuildSelect(l->b, LLVMBuildOr(l->b, bz, ovf, ""), one, b, "");
    LLVMValueRef r = rem ? LLVMBuildSRem(l->b, a, safe, "") : LLVMBuildSDiv(l->b, a, safe, "");
    /* With divisor 1: INT_MIN/1 = INT_MIN and INT_MIN%1 = 0, as documented. */
    return LLVMBuildSelect(l->b, bz, zero, r, "");
}

static LLVMValueRef
cast(L *l, LLVMValueRef x, kiln_dtype from, kiln_dtype to)
{
    LLVMTypeRef vt = jit_em_vec(l, jit_em_scalar_type(l, to));
    if (from == to)
        return x;
    if (to == KILN_DTYPE_BOOL) {
        LLVMValueRef zero = LLVMConstNull(LLVMTypeOf(x));
        return ir_dtype_is_float(from) ? LLVMBuildFCmp(l->b, LLVMRealUNE, x, zero, "")
                                       : LLVMBuildICmp(l->b, LLVMIntNE, x, zero, "");
    }
    if (from == KILN_DTYPE_BOOL)
        return ir_dtype_is_float(to) ? LLVMBuildUIToFP(l->b, x, vt, "")
                                     : LLVMBuildZExt(l->b, x, vt, "");
    if (ir_dtype_is_float(from) && ir_dtype_is_float(to))
        return to == KILN_DTYPE_F64 ? LLVMBuildFPExt(l->b, x, vt, "")
                                    : LLVMBuildFPTrunc(l->b, x, vt, "");
    if (ir_dtype_is_float(from)) {
        LLVMTypeRef over[2] = {vt, LLVMTypeOf(x)};
        return jit_em_intr(l, "llvm.fptosi.sat", over, 2, &x, 1);
    }
    if (ir_dtype_is_float(to))
        return LLVMBuildSIToFP(l->b, x, vt, "");
    return to == KILN_DTYPE_I64 ? LLVMBuildSExt(l->b, x, vt, "") : LLVMBuildTrunc(l->b, x, vt, "");
}

/* Integer a^b with wrap, as the reference: b < 0 gives 0 unless a is 1 or -1.  Square
 * and multiply over every bit of b, with selects, so all lanes run the same code. */
static LLVMValueRef
int_pow(L *l, LLVMValueRef a, LLVMValueRef bexp)
{
    LLVMBuilderRef b = l->b;
    LLVMTypeRef vt = LLVMTypeOf(a);
    unsigned bits = LLVMGetIntTypeWidth(LLVMGetElementType(vt));
    LLVMValueRef zero = LLVMConstNull(vt), one = iconst(l, vt, 1), m1 = iconst(l, vt, -1);
    LLVMValueRef r = one, base = a;
    for (unsigned k = 0; k + 1 < bits; k++) {
        LLVMValueRef bit = LLVMBuildICmp(b, LLVMIntNE,
                                         LLVMBuildAnd(b, bexp, iconst(l, vt, (int64_t)1 << k), ""),
                                         zero, "");
        r = LLVMBuildSelect(b, bit, LLVMBuildMul(b, r, base, ""), r, "");
        base = LLVMBuildMul(b, base, base, "");
    }
    LLVMValueRef odd = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, bexp, one, ""), zero, "");
    LLVMValueRef neg = LLVMBuildSelect(
        b, LLVMBuildICmp(b, LLVMIntEQ, a, one, ""), one,
        LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, a, m1, ""),
                        LLVMBuildSelect(b, odd, m1, one, ""), zero, ""),
        "");
    return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, bexp, zero, ""), neg, r, "");
}

static LLVMValueRef
lower_op(L *l, ir_op op, kiln_dtype t, LLVMValueRef *a)
{
    LLVMBuilderRef b = l->b;
    bool fl = ir_dtype_is_float(t);
    LLVMTypeRef vt = LLVMTypeOf(a[0]);
    switch (op) {
    case IR_OP_NEG: return fl ? LLVMBuildFNeg(b, a[0], "") : LLVMBuildSub(b, LLVMConstNull(vt), a[0], "");
    case IR_OP_ABS: {
        if (fl)
            return intr1(l, "llvm.fabs", a[0]);
        LLVMTypeRef over = vt;
        LLVMValueRef args[2] = {a[0], LLVMConstInt(l->i1, 0, 0)};
        return jit_em_intr(l, "llvm.abs", &over, 1, args, 2);
    }
    case IR_OP_SIGN:
        if (fl) {
            LLVMValueRef zero = LLVMConstNull(vt);
            LLVMValueRef r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, a[0], zero, ""),
                                             fconst(l, vt, -1.0), a[0], "");
            return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, a[0], zero, ""),
                                   fconst(l, vt, 1.0), r, "");
        } else {
            LLVMValueRef zero = LLVMConstNull(vt);
            LLVMValueRef pos = LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntSGT, a[0], zero, ""), vt, "");
            LLVMValueRef neg = LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntSLT, a[0], zero, ""), vt, "");
            return LLVMBuildSub(b, pos, neg, "");
        }
    case IR_OP_SQRT: return intr1(l, "llvm.sqrt", a[0]);
    case IR_OP_RSQRT:
        if (t == KILN_DTYPE_F32) {
            /* In f64 and rounded once, like the reference: sqrt then divide in f32 would
             * round twice. */
            LLVMValueRef x = LLVMBuildFPExt(b, a[0], jit_em_vec(l, l->f64), "");
            LLVMValueRef r = LLVMBuildFDiv(b, fconst(l, jit_em_vec(l, l->f64), 1.0), intr1(l, "llvm.sqrt", x), "");
            return LLVMBuildFPTrunc(b, r, vt, "");
        }
        return LLVMBuildFDiv(b, fconst(l, vt, 1.0), intr1(l, "llvm.sqrt", a[0]), "");
    case IR_OP_RECIP: return LLVMBuildFDiv(b, fconst(l, vt, 1.0), a[0], "");
    case IR_OP_RELU:
        return fl ? jit_em_fextreme(l, true, a[0], LLVMConstNull(vt))
                  : jit_em_intr2(l, "llvm.smax", a[0], LLVMConstNull(vt));
    case IR_OP_FLOOR: return intr1(l, "llvm.floor", a[0]);
    case IR_OP_CEIL: return intr1(l, "llvm.ceil", a[0]);
    case IR_OP_ROUND: return intr1(l, "llvm.roundeven", a[0]);
    case IR_OP_TRUNC: return intr1(l, "llvm.trunc", a[0]);
    case IR_OP_NOT: return LLVMBuildNot(b, a[0], "");
    case IR_OP_ISNAN: return LLVMBuildFCmp(b, LLVMRealUNO, a[0], a[0], "");
    case IR_OP_ISINF:
        return LLVMBuildFCmp(b, LLVMRealOEQ, intr1(l, "llvm.fabs", a[0]), fconst(l, vt, 1.0 / 0.0), "");
    case IR_OP_ADD: return fl ? LLVMBuildFAdd(b, a[0], a[1], "") : LLVMBuildAdd(b, a[0], a[1], "");
    case IR_OP_SUB: return fl ? LLVMBuildFSub(b, a[0], a[1], "") : LLVMBuildSub(b, a[0], a[1], "");
    case IR_OP_MUL: return fl ? LLVMBuildFMul(b, a[0], a[1], "") : LLVMBuildMul(b, a[0], a[1], "");
    case IR_OP_DIV: return fl ? LLVMBuildFDiv(b, a[0], a[1], "") : int_divrem(l, a[0], a[1], false);
    case IR_OP_REM: return fl ? fmod_op(l, a) : int_divrem(l, a[0], a[1], true);
    case IR_OP_MAX: return fl ? jit_em_fextreme(l, true, a[0], a[1]) : jit_em_intr2(l, "llvm.smax", a[0], a[1]);
    case IR_OP_MIN: return fl ? jit_em_fextreme(l, false, a[0], a[1]) : jit_em_intr2(l, "llvm.smin", a[0], a[1]);
    case IR_OP_EQ: return fl ? LLVMBuildFCmp(b, LLVMRealOEQ, a[0], a[1], "") : LLVMBuildICmp(b, LLVMIntEQ, a[0], a[1], "");
    case IR_OP_NE: return fl ? LLVMBuildFCmp(b, LLVMRealUNE, a[0], a[1], "") : LLVMBuildICmp(b, LLVMIntNE, a[0], a[1], "");
    case IR_OP_LT: return fl ? LLVMBuildFCmp(b, LLVMRealOLT, a[0], a[1], "") : LLVMBuildICmp(b, LLVMIntSLT, a[0], a[1], "");
    case IR_OP_LE: return fl ? LLVMBuildFCmp(b, LLVMRealOLE, a[0], a[1], "") : LLVMBuildICmp(b, LLVMIntSLE, a[0], a[1], "");
    case IR_OP_GT: return fl ? LLVMBuildFCmp(b, LLVMRealOGT, a[0], a[1], "") : LLVMBuildICmp(b, LLVMIntSGT, a[0], a[1], "");
    case IR_OP_GE: return fl ? LLVMBuildFCmp(b, LLVMRealOGE, a[0], a[1], "") : LLVMBuildICmp(b, LLVMIntSGE, a[0], a[1], "");
    case IR_OP_AND: return LLVMBuildAnd(b, a[0], a[1], "");
    case IR_OP_OR: return LLVMBuildOr(b, a[0], a[1], "");
    case IR_OP_XOR: return LLVMBuildXor(b, a[0], a[1], "");
    case IR_OP_WHERE: return LLVMBuildSelect(b, a[0], a[1], a[2], "");
    case IR_OP_CLAMP:
        return fl ? jit_em_fextreme(l, false, jit_em_fextreme(l, true, a[0], a[1]), a[2])
                  : jit_em_intr2(l, "llvm.smin", jit_em_intr2(l, "llvm.smax", a[0], a[1]), a[2]);
    /* The VMATH rows of ops.def: vmath.c's functions on floats (whose switch of bodies
     * demands one for each); of them only pow takes integers (op.c checks), exactly. */
#define OP(E, name, arity, kind, trule, attrs, calc, ulp_f32, ulp_f64, meaning)                    \
    IR_IF_VMATH_##calc(case IR_OP_##E:)
#include "ops.def"
#undef OP
        return fl ? math_op(l, op, a) : int_pow(l, a[0], a[1]);
    /* Not elementwise arithmetic: casts and aranges are emitted by jit_em_inst, the rest
     * are loads, reductions or reference steps.  No default: an op added to ops.def must be
     * placed here, or the build fails (-Wswitch). */
    case IR_OP_CAST: case IR_OP_INPUT: case IR_OP_CONSTANT: case IR_OP_FULL: case IR_OP_ARANGE:
    case IR_OP_RESHAPE: case IR_OP_PERMUTE: case IR_OP_EXPAND: case IR_OP_SLICE:
    case IR_OP_CONCAT: case IR_OP_PAD: case IR_OP_GATHER: case IR_OP_REDUCE_SUM:
    case IR_OP_REDUCE_MEAN: case IR_OP_REDUCE_MAX: case IR_OP_REDUCE_MIN: case IR_OP_REDUCE_PROD:
    case IR_OP_ARGMAX: case IR_OP_ARGMIN: case IR_OP_MATMUL: case IR_OP_COUNT:
        break;
    }
    IR_ASSERT(!"lower_op: not an elementwise op");
    return NULL;
}

void
jit_em_init(L *l, LLVMContextRef ctx, LLVMModuleRef mod)
{
    memset(l, 0, sizeof *l);
    l->ctx = ctx;
    l->mod = mod;
    l->b = LLVMCreateBuilderInContext(ctx);
    l->W = jit_host_info()->vector_bits / 32;
    l->i1 = LLVMInt1TypeInContext(ctx);
    l->i8 = LLVMInt8TypeInContext(ctx);
    l->i32 = LLVMInt32TypeInContext(ctx);
    l->i64 = LLVMInt64TypeInContext(ctx);
    l->f32 = LLVMFloatTypeInContext(ctx);
    l->f64 = LLVMDoubleTypeInContext(ctx);
    l->ptr = LLVMPointerTypeInContext(ctx, 0);
    const char *pert = ir_config_get()->test_perturb;
    l->perturb = *pert ? ir_op_from_name(pert, strlen(pert)) : -1;
}

LLVMValueRef
jit_em_lane_ids(L *l)
{
    LLVMValueRef lanes[64];
    for (int i = 0; i < l->W; i++)
        lanes[i] = LLVMConstInt(l->i64, (unsigned long long)i, 0);
    return LLVMConstVector(lanes, (unsigned)l->W);
}

/* x (a vector of W floats) with a signalling NaN made quiet (its quiet bit set), every
 * other value unchanged (LLVM 19 cannot select llvm.canonicalize on x86). */
static LLVMValueRef
quiet_nan(L *l, LLVMValueRef x)
{
    LLVMBuilderRef b = l->b;
    LLVMTypeRef vt = LLVMTypeOf(x);
    bool f64 = LLVMGetElementType(vt) == l->f64;
    LLVMTypeRef ivt = jit_em_vec(l, f64 ? l->i64 : l->i32);
    LLVMValueRef bits = LLVMBuildOr(b, LLVMBuildBitCast(b, x, ivt, ""),
                                    iconst(l, ivt, f64 ? INT64_C(1) << 51 : INT64_C(1) << 22), "");
    return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, x, x, ""),
                           LLVMBuildBitCast(b, bits, vt, ""), x, "");
}

LLVMValueRef
jit_em_fextreme(L *l, bool max, LLVMValueRef a, LLVMValueRef b)
{
    return jit_em_intr2(l, max ? "llvm.maximum" : "llvm.minimum", quiet_nan(l, a), quiet_nan(l, b));
}

LLVMValueRef
jit_em_clamp_lanes(L *l, LLVMValueRef rest)
{
    LLVMBuilderRef b = l->b;
    LLVMValueRef zero = jit_em_i64(l, 0), w = jit_em_i64(l, l->W);
    rest = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, rest, zero, ""), zero, rest, "");
    return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, rest, w, ""), w, rest, "");
}

LLVMValueRef
jit_em_first_lanes(L *l, LLVMValueRef rest)
{
    LLVMValueRef lanes[64];
    for (int i = 0; i < l->W; i++)
        lanes[i] = LLVMConstInt(l->i32, (unsigned long long)i, 0);
    LLVMValueRef r32 = LLVMBuildTrunc(l->b, rest, l->i32, "");
    return LLVMBuildICmp(l->b, LLVMIntSLT, LLVMConstVector(lanes, (unsigned)l->W),
                         jit_em_splat(l, r32), "mask");
}

LLVMValueRef
jit_em_all_true(L *l)
{
    LLVMValueRef lanes[64];
    for (int k = 0; k < l->W; k++)
        lanes[k] = LLVMConstInt(l->i1, 1, 0);
    return LLVMConstVector(lanes, (unsigned)l->W);
}

/* Lane i's element pointer: base + off + (c + i) * stride (gathers and scatters). */
static LLVMValueRef
lane_ptrs(L *l, LLVMTypeRef mt, LLVMValueRef base, LLVMValueRef off, LLVMValueRef c,
          LLVMValueRef istride)
{
    LLVMBuilderRef b = l->b;
    LLVMValueRef cl = LLVMBuildAdd(b, jit_em_splat(l, c), jit_em_lane_ids(l), "");
    LLVMValueRef idx = LLVMBuildAdd(b, jit_em_splat(l, off),
                                    LLVMBuildMul(b, cl, jit_em_splat(l, istride), ""), "");
    return LLVMBuildGEP2(b, mt, base, &idx, 1, "");
}

LLVMValueRef
jit_em_load(L *l, kiln_dtype t, int cls, LLVMValueRef base, LLVMValueRef off, LLVMValueRef c,
            LLVMValueRef istride, LLVMValueRef mask)
{
    LLVMBuilderRef b = l->b;
    LLVMTypeRef mt = jit_em_mem_type(l, t), vmt = jit_em_vec(l, mt);
    unsigned align = (unsigned)kiln_dtype_size(t);
    LLVMValueRef v;
    if (cls == JIT_BCAST) {
        LLVMValueRef p = LLVMBuildGEP2(b, mt, base, &off, 1, "");
        LLVMValueRef x = LLVMBuildLoad2(b, mt, p, "");
        LLVMSetAlignment(x, align);
        v = jit_em_splat(l, x);
    } else if (cls == JIT_CONTIG) {
        LLVMValueRef idx = LLVMBuildAdd(b, off, c, "");
        LLVMValueRef p = LLVMBuildGEP2(b, mt, base, &idx, 1, "");
        if (!mask) {
            v = LLVMBuildLoad2(b, vmt, p, "");
            LLVMSetAlignment(v, align);
        } else {
            LLVMTypeRef over[2] = {vmt, l->ptr};
            LLVMValueRef args[4] = {p, LLVMConstInt(l->i32, align, 0), mask, LLVMConstNull(vmt)};
            v = jit_em_intr(l, "llvm.masked.load", over, 2, args, 4);
        }
    } else {
        LLVMValueRef ps = lane_ptrs(l, mt, base, off, c, istride);
        LLVMTypeRef over[2] = {vmt, LLVMTypeOf(ps)};
        LLVMValueRef args[4] = {ps, LLVMConstInt(l->i32, align, 0), mask ? mask : jit_em_all_true(l),
                                LLVMConstNull(vmt)};
        v = jit_em_intr(l, "llvm.masked.gather", over, 2, args, 4);
    }
    if (t == KILN_DTYPE_BOOL)
        v = LLVMBuildICmp(b, LLVMIntNE, v, LLVMConstNull(vmt), "");
    return v;
}

void
jit_em_store(L *l, kiln_dtype t, int cls, LLVMValueRef v, LLVMValueRef base, LLVMValueRef off,
             LLVMValueRef c, LLVMValueRef istride, LLVMValueRef mask)
{
    LLVMBuilderRef b = l->b;
    LLVMTypeRef mt = jit_em_mem_type(l, t), vmt = jit_em_vec(l, mt);
    unsigned align = (unsigned)kiln_dtype_size(t);
    if (t == KILN_DTYPE_BOOL)
        v = LLVMBuildZExt(b, v, vmt, "");
    if (cls == JIT_CONTIG) {
        LLVMValueRef idx = LLVMBuildAdd(b, off, c, "");
        LLVMValueRef p = LLVMBuildGEP2(b, mt, base, &idx, 1, "");
        if (!mask) {
            LLVMValueRef st = LLVMBuildStore(b, v, p);
            LLVMSetAlignment(st, align);
        } else {
            LLVMTypeRef over[2] = {vmt, l->ptr};
            LLVMValueRef args[4] = {v, p, LLVMConstInt(l->i32, align, 0), mask};
            jit_em_intr(l, "llvm.masked.store", over, 2, args, 4);
        }
    } else {
        LLVMValueRef ps = lane_ptrs(l, mt, base, off, c, istride);
        LLVMTypeRef over[2] = {vmt, LLVMTypeOf(ps)};
        LLVMValueRef args[4] = {v, ps, LLVMConstInt(l->i32, align, 0), mask ? mask : jit_em_all_true(l)};
        jit_em_intr(l, "llvm.masked.scatter", over, 2, args, 4);
    }
}

bool
jit_em_ranges(L *l, const jit_kdesc *d, LLVMValueRef pptrs, LLVMValueRef *ptr)
{
    l->range = NULL;
    if (!d->store_cls)
        return true;
    for (int32_t k = 0; k < d->nstores; k++) {
        if (!jit_kdesc_store_ranged(d, k))
            continue;
        if (!l->range && !(l->range = ir_calloc(2 * (size_t)d->nstores, sizeof(LLVMValueRef))))
            return false;
        int32_t j = jit_kdesc_range_param(d, k);
        LLVMValueRef lo = LLVMBuildLoad2(l->b, l->i64,
                                         jit_em_arg(l, l->ptr, pptrs, d->nloads + d->nstores + j, ""), "lo");
        LLVMValueRef hi = LLVMBuildLoad2(l->b, l->i64,
                                         jit_em_arg(l, l->ptr, pptrs, d->nloads + d->nstores + j + 1, ""), "hi");
        l->range[2 * k] = lo;
        l->range[2 * k + 1] = hi;
        /* element i of the space at index i: the buffer's start moved back by lo elements
         * (no inbounds: the address may lie before the buffer; only [lo, hi) is stored) */
        LLVMValueRef neg = LLVMBuildNeg(l->b, lo, "");
        LLVMTypeRef mt = jit_em_mem_type(l, (kiln_dtype)d->inst[d->stores[k]].dtype);
        ptr[d->nloads + k] = LLVMBuildGEP2(l->b, mt, ptr[d->nloads + k], &neg, 1, "ranged");
    }
    return true;
}

void
jit_em_ranges_free(L *l)
{
    ir_free(l->range);
    l->range = NULL;
}

void
jit_em_store_space(L *l, const jit_kdesc *d, int32_t k, LLVMValueRef v, LLVMValueRef base,
                   LLVMValueRef off, LLVMValueRef c, LLVMValueRef mask)
{
    kiln_dtype t = (kiln_dtype)d->inst[d->stores[k]].dtype;
    if (!jit_kdesc_store_ranged(d, k)) {
        jit_em_store(l, t, JIT_CONTIG, v, base, off, c, NULL, mask);
        return;
    }
    if (!l->range)
        return; /* jit_em_ranges ran out of memory: the lowering fails */
    /* lane i is element e + i, e = off + c: stored when lo - e <= i < hi - e.  Vectors
     * with no lane in the range store nothing and are branched around: a masked store
     * whose mask is empty still costs a microcode assist when its address is not mapped
     * (AVX-512 fault suppression: ~85 ms instead of ~10 for a 64 MB value of which half is
     * an output), and the range's buffer is all that is mapped for sure */
    LLVMBuilderRef b = l->b;
    LLVMValueRef e = LLVMBuildAdd(b, off, c, "");
    LLVMValueRef rlo = LLVMBuildSub(b, l->range[2 * k], e, ""), rhi = LLVMBuildSub(b, l->range[2 * k + 1], e, "");
    LLVMValueRef any = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGT, rhi, jit_em_i64(l, 0), ""),
                                    LLVMBuildICmp(b, LLVMIntSLT, rlo, jit_em_i64(l, l->W), ""), "");
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
    LLVMBasicBlockRef st = LLVMAppendBasicBlockInContext(l->ctx, fn, "range.store");
    LLVMBasicBlockRef after = LLVMAppendBasicBlockInContext(l->ctx, fn, "range.after");
    LLVMBuildCondBr(b, any, st, after);
    LLVMPositionBuilderAtEnd(b, st);
    LLVMValueRef below = jit_em_first_lanes(l, jit_em_clamp_lanes(l, rlo));
    LLVMValueRef upto = jit_em_first_lanes(l, jit_em_clamp_lanes(l, rhi));
    LLVMValueRef m = LLVMBuildAnd(b, upto, LLVMBuildNot(b, below, ""), "inrange");
    if (mask)
        m = LLVMBuildAnd(b, m, mask, "");
    jit_em_store(l, t, JIT_CONTIG, v, base, off, c, NULL, m);
    LLVMBuildBr(b, after);
    LLVMPositionBuilderAtEnd(b, after);
}

void
jit_em_store_stream(L *l, kiln_dtype t, LLVMValueRef v, LLVMValueRef base, LLVMValueRef off,
                    LLVMValueRef c, unsigned align)
{
    LLVMBuilderRef b = l->b;
    LLVMTypeRef mt = jit_em_mem_type(l, t);
    if (t == KILN_DTYPE_BOOL)
        v = LLVMBuildZExt(b, v, jit_em_vec(l, mt), "");
    LLVMValueRef idx = LLVMBuildAdd(b, off, c, "");
    LLVMValueRef st = LLVMBuildStore(b, v, LLVMBuildGEP2(b, mt, base, &idx, 1, ""));
    LLVMSetAlignment(st, align);
    LLVMMetadataRef one = LLVMValueAsMetadata(LLVMConstInt(l->i32, 1, 0));
    LLVMSetMetadata(st, LLVMGetMDKindIDInContext(l->ctx, "nontemporal", 11),
                    LLVMMetadataAsValue(l->ctx, LLVMMDNodeInContext2(l->ctx, &one, 1)));
}

void
jit_em_store_stream_if(L *l, kiln_dtype t, LLVMValueRef v, LLVMValueRef base, LLVMValueRef off,
                       LLVMValueRef c, unsigned align, LLVMValueRef ok)
{
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(l->b));
    LLVMBasicBlockRef nt = LLVMAppendBasicBlockInContext(l->ctx, fn, "store.nt");
    LLVMBasicBlockRef plain = LLVMAppendBasicBlockInContext(l->ctx, fn, "store.plain");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(l->ctx, fn, "store.join");
    LLVMBuildCondBr(l->b, ok, nt, plain);
    LLVMPositionBuilderAtEnd(l->b, nt);
    jit_em_store_stream(l, t, v, base, off, c, align);
    LLVMBuildBr(l->b, join);
    LLVMPositionBuilderAtEnd(l->b, plain);
    jit_em_store(l, t, JIT_CONTIG, v, base, off, c, NULL, NULL);
    LLVMBuildBr(l->b, join);
    LLVMPositionBuilderAtEnd(l->b, join);
}

unsigned
jit_em_stream_align(const L *l, kiln_dtype t)
{
    size_t a = (size_t)l->W * kiln_dtype_size(t);
    return (unsigned)(a < 64 ? a : 64);
}

LLVMValueRef
jit_em_elem_aligned(L *l, LLVMValueRef ptr, int64_t es)
{
    LLVMBuilderRef b = l->b;
    LLVMValueRef p = LLVMBuildPtrToInt(b, ptr, l->i64, "");
    return LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, p, jit_em_i64(l, es - 1), ""),
                         jit_em_i64(l, 0), "");
}

LLVMValueRef
jit_em_align_gap(L *l, LLVMValueRef ptr, LLVMValueRef idx, int64_t es, int64_t a)
{
    LLVMBuilderRef b = l->b;
    LLVMValueRef base = LLVMBuildPtrToInt(b, ptr, l->i64, "");
    LLVMValueRef at = LLVMBuildAdd(b, base, LLVMBuildMul(b, idx, jit_em_i64(l, es), ""), "");
    return LLVMBuildAnd(b, LLVMBuildSub(b, jit_em_i64(l, 0), at, ""), jit_em_i64(l, a - 1), "");
}

LLVMValueRef
jit_em_head_lanes(L *l, LLVMValueRef ptr, LLVMValueRef idx, int64_t es, int64_t a, LLVMValueRef ok,
                  LLVMValueRef len)
{
    LLVMBuilderRef b = l->b;
    LLVMValueRef h = LLVMBuildUDiv(b, jit_em_align_gap(l, ptr, idx, es, a), jit_em_i64(l, es), "");
    h = LLVMBuildSelect(b, ok, h, jit_em_i64(l, 0), "");
    return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, h, len, ""), h, len, "head");
}

void
jit_em_stream_fence(L *l)
{
    const char *t = jit_host_info()->triple;
    if (!strncmp(t, "x86_64", 6) || !strncmp(t, "i386", 4) || !strncmp(t, "i686", 4))
        jit_em_intr(l, "llvm.x86.sse.sfence", NULL, 0, NULL, 0);
    else
        LLVMBuildFence(l->b, LLVMAtomicOrderingSequentiallyConsistent, 0, "");
}

void
jit_em_params(L *l, const jit_kdesc *d, LLVMValueRef pptrs)
{
    bool read[JIT_MAX_PARAMS] = {false};
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        if (in->kind != JIT_PARAM || read[in->slot])
            continue; /* a `full` read in both contexts of a reduction: two instructions */
        read[in->slot] = true;
        kiln_dtype t = (kiln_dtype)in->dtype;
        LLVMValueRef p = jit_em_arg(l, l->ptr, pptrs, d->nloads + d->nstores + in->slot, "param");
        LLVMValueRef v;
        if (ir_dtype_is_float(t)) {
            v = LLVMBuildLoad2(l->b, jit_em_scalar_type(l, t), p, "");
        } else {
            v = LLVMBuildLoad2(l->b, l->i64, p, "");
            v = t == KILN_DTYPE_BOOL ? LLVMBuildICmp(l->b, LLVMIntNE, v, jit_em_i64(l, 0), "")
                : t == KILN_DTYPE_I64 ? v
                                      : LLVMBuildTrunc(l->b, v, jit_em_scalar_type(l, t), "");
        }
        /* splat here, in the entry block, so that every use is dominated */
        l->param[in->slot] = jit_em_splat(l, v);
    }
}

LLVMValueRef
jit_em_inst(L *l, const jit_kdesc *d, const jit_kinst *in, LLVMValueRef *val)
{
    kiln_dtype t = (kiln_dtype)in->dtype;
    if (in->kind == JIT_SPLAT)
        return jit_em_const_vec(l, t, &in->value);
    if (in->kind == JIT_PARAM)
        return l->param[in->slot];
    IR_ASSERT(in->kind == JIT_OP);
    if (in->op == IR_OP_ARANGE) {
        /* start + i*delta: floats in f64 rounded once, ints wrapping */
        IR_ASSERT(l->lin != NULL);
        LLVMValueRef i = LLVMBuildAdd(l->b, jit_em_splat(l, l->lin), jit_em_lane_ids(l), "");
        LLVMValueRef st = val[in->a[0]], de = val[in->a[1]];
        if (ir_dtype_is_float(t)) {
            LLVMTypeRef vd = jit_em_vec(l, l->f64);
            LLVMValueRef fi = LLVMBuildSIToFP(l->b, i, vd, "");
            if (t == KILN_DTYPE_F32) {
                st = LLVMBuildFPExt(l->b, st, vd, "");
                de = LLVMBuildFPExt(l->b, de, vd, "");
            }
            LLVMValueRef v = LLVMBuildFAdd(l->b, st, LLVMBuildFMul(l->b, fi, de, ""), "");
            return t == KILN_DTYPE_F32 ? LLVMBuildFPTrunc(l->b, v, jit_em_vec(l, l->f32), "") : v;
        }
        LLVMTypeRef vi = jit_em_vec(l, l->i64);
        if (t != KILN_DTYPE_I64) {
            st = LLVMBuildSExt(l->b, st, vi, "");
            de = LLVMBuildSExt(l->b, de, vi, "");
        }
        LLVMValueRef v = LLVMBuildAdd(l->b, st, LLVMBuildMul(l->b, i, de, ""), "");
        return t == KILN_DTYPE_I64 ? v : LLVMBuildTrunc(l->b, v, jit_em_vec(l, jit_em_scalar_type(l, t)), "");
    }
    LLVMValueRef a[3] = {NULL, NULL, NULL};
    int nin = ir_ops[in->op].arity;
    for (int k = 0; k < nin; k++)
        a[k] = val[in->a[k]];
    LLVMValueRef v;
    if (in->op == IR_OP_CAST)
        v = cast(l, a[0], (kiln_dtype)d->inst[in->a[0]].dtype, t);
    else
        v = lower_op(l, (ir_op)in->op, (kiln_dtype)d->inst[in->a[0]].dtype, a);
    if (l->perturb == (int)in->op && ir_dtype_is_float(t)) {
        /* test-only (KILN_TEST_PERTURB=op): flip the last bit of the op's results, so
         * tests can show that kiln check catches a wrong kernel */
        LLVMTypeRef it = jit_em_vec(l, t == KILN_DTYPE_F32 ? l->i32 : l->i64);
        LLVMValueRef bits = LLVMBuildBitCast(l->b, v, it, "");
        bits = LLVMBuildXor(l->b, bits, iconst(l, it, 1), "");
        v = LLVMBuildBitCast(l->b, bits, LLVMTypeOf(v), "");
    }
    return v;
}

LLVMValueRef
jit_em_opaque(jit_em *l, LLVMValueRef v)
{
    LLVMTypeRef t = LLVMTypeOf(v);
    LLVMTypeRef ft = LLVMFunctionType(t, &t, 1, 0);
    LLVMValueRef as = LLVMGetInlineAsm(ft, "", 0, "=r,0", 4, 0, 0, LLVMInlineAsmDialectATT, 0);
    return LLVMBuildCall2(l->b, ft, as, &v, 1, "");
}

void
jit_em_loop_begin(jit_em *l, LLVMValueRef fn, jit_em_loop *lp, LLVMValueRef from,
                  LLVMValueRef to, int64_t step, bool whole, const char *tag)
{
    LLVMBuilderRef b = l->b;
    lp->step = step;
    lp->pre = LLVMGetInsertBlock(b);
    lp->head = LLVMAppendBasicBlockInContext(l->ctx, fn, tag);
    lp->body = LLVMAppendBasicBlockInContext(l->ctx, fn, "body");
    lp->done = LLVMAppendBasicBlockInContext(l->ctx, fn, "done");
    LLVMBuildBr(b, lp->head);
    LLVMPositionBuilderAtEnd(b, lp->head);
    lp->iv = LLVMBuildPhi(b, l->i64, tag);
    LLVMValueRef cond = whole ? LLVMBuildICmp(b, LLVMIntSLE, LLVMBuildAdd(b, lp->iv, jit_em_i64(l, step), ""), to, "")
                              : LLVMBuildICmp(b, LLVMIntSLT, lp->iv, to, "");
    LLVMBuildCondBr(b, cond, lp->body, lp->done);
    LLVMValueRef in[1] = {from};
    LLVMBasicBlockRef bb[1] = {lp->pre};
    LLVMAddIncoming(lp->iv, in, bb, 1);
    LLVMPositionBuilderAtEnd(b, lp->body);
}

void
jit_em_loop_end(jit_em *l, jit_em_loop *lp)
{
    LLVMBuilderRef b = l->b;
    LLVMValueRef next = jit_em_opaque(l, LLVMBuildAdd(b, lp->iv, jit_em_i64(l, lp->step), ""));
    LLVMBasicBlockRef at = LLVMGetInsertBlock(b);
    LLVMBuildBr(b, lp->head);
    LLVMValueRef in[1] = {next};
    LLVMBasicBlockRef bb[1] = {at};
    LLVMAddIncoming(lp->iv, in, bb, 1);
    LLVMPositionBuilderAtEnd(b, lp->done);
}

void
jit_em_delinearise(jit_em *l, LLVMValueRef flat, int top, const LLVMValueRef *dims, int R,
                   int nloads, LLVMValueRef pstrides, LLVMValueRef *off, const LLVMValueRef *ext,
                   LLVMValueRef *inbox)
{
    LLVMBuilderRef b = l->b;
    LLVMValueRef rem = flat;
    for (int k = top; k >= 0; k--) {
        LLVMValueRef ik = LLVMBuildURem(b, rem, dims[k], "");
        rem = LLVMBuildUDiv(b, rem, dims[k], "");
        for (int j = 0; j < nloads; j++) {
            LLVMValueRef st = jit_em_arg(l, l->i64, pstrides, (int64_t)j * R + k, "");
            off[j] = LLVMBuildAdd(b, off[j], LLVMBuildMul(b, ik, st, ""), "");
            if (ext) {
                LLVMValueRef lo = ext[j * R * 2 + 2 * k], hi = ext[j * R * 2 + 2 * k + 1];
                LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, ik, lo, ""),
                                               LLVMBuildICmp(b, LLVMIntSLT, ik, hi, ""), "");
                inbox[j] = LLVMBuildAnd(b, inbox[j], ok, "");
            }
        }
    }
}
