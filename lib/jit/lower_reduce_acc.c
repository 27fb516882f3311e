/* lower_reduce_acc.c — the REDUCTION kind's accumulator algebra: per reduce op, the
 * accumulator's type, its identity and how two accumulators combine (argmax/argmin with
 * their indices; float max/min of rows kernels on the bare instruction, NaNs and the
 * zeros' signs tracked apart).  lower_reduce.c's header states the rules. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce_emit.h"

/* ---- accumulators ------------------------------------------------------------------------ */

LLVMTypeRef
rk_acc_scalar(rk *r, const jit_kinst *in)
{
    kiln_dtype t = rp_operand_dtype(r->d, in);
    return ir_dtype_is_float(t) && rp_algebra_of((ir_op)in->op)->wide ? r->l->f64
                                                                      : jit_em_scalar_type(r->l, t);
}

/* The start of an f32 block: -0.0, so a block of -0.0 terms sums to -0.0 as the reference. */
LLVMValueRef
rk_block_identity(jit_em *l)
{
    return jit_em_splat(l, LLVMConstReal(l->f32, -0.0));
}

/* Float max/min in rows kernels.  llvm.maximum (NaN wins, -0 < +0) is six instructions
 * on AVX-512, three of them on mask registers, in one dependency chain (docs/benchmarking.md,
 * "Rows kernels: bare vmaxps/vminps").  Instead a pass keeps three accumulators per
 * lane, each one instruction a vector and independent of the others:
 *   a = x > a ? x : a       (vmaxps: a stays on NaN and on equal values, -0 == +0)
 *   n = n | isnan(x)        (a NaN was seen)
 *   z = smax(z, bits(x))    (signed max of the bit patterns: 0 when +0 was seen and no
 *                            positive value; min: smin, INT_MIN exactly when -0 was seen)
 * and the end of the pass (fold_sets) puts them together: NaN if n; +0 for max (-0 for
 * min) if a == 0 and z says that zero was seen; else a.  This is exact: a NaN is never lost,
 * and a zero result takes the sign llvm.maximum would give it.  It holds however the pass
 * starts (identities, or a value combined from pieces, which the fix never worsens: it only
 * turns a zero into the zero that was seen).  Columns kernels keep llvm.maximum: their
 * accumulators move between arrays (emit_block), where these would have to follow.  Which
 * reductions take this path is the schedule's (rp_fast_extreme, reduce_plan.c). */

LLVMTypeRef
rk_bits_type(rk *r, const jit_kinst *in)
{
    return LLVMIntTypeInContext(r->l->ctx, (unsigned)kiln_dtype_size(rp_operand_dtype(r->d, in)) * 8);
}

/* The signed-integer extreme of the identity: INT_MIN for max, INT_MAX for min. */
LLVMValueRef
rk_bits_identity(rk *r, const jit_kinst *in)
{
    LLVMTypeRef it = rk_bits_type(r, in);
    unsigned long long top = 1ull << (LLVMGetIntTypeWidth(it) - 1);
    return jit_em_splat(r->l, LLVMConstInt(it, rp_algebra_of((ir_op)in->op)->combine == RP_MAX ? top : top - 1, 0));
}

/* One vector into the three accumulators of a fast max/min (v: masked lanes already the
 * identity). */
void
rk_fast_extreme_step(rk *r, const jit_kinst *in, int32_t i, LLVMValueRef v)
{
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    bool mx = rp_algebra_of((ir_op)in->op)->combine == RP_MAX;
    LLVMTypeRef at = LLVMTypeOf(v), nt = jit_em_vec(l, l->i1),
                bt = jit_em_vec(l, rk_bits_type(r, in));
    LLVMValueRef a = LLVMBuildLoad2(b, at, r->acc[i], "");
    LLVMValueRef gt = LLVMBuildFCmp(b, mx ? LLVMRealOGT : LLVMRealOLT, v, a, "");
    LLVMBuildStore(b, LLVMBuildSelect(b, gt, v, a, ""), r->acc[i]);
    LLVMValueRef n = LLVMBuildLoad2(b, nt, r->accnan[i], "");
    n = LLVMBuildOr(b, n, LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""), "");
    LLVMBuildStore(b, n, r->accnan[i]);
    LLVMValueRef z = LLVMBuildLoad2(b, bt, r->accbits[i], "");
    z = jit_em_intr2(l, mx ? "llvm.smax" : "llvm.smin", z, LLVMBuildBitCast(b, v, bt, ""));
    LLVMBuildStore(b, z, r->accbits[i]);
}

/* The exact max/min of set u's lanes from its three accumulators. */
LLVMValueRef
rk_fast_extreme_value(rk *r, const jit_kinst *in, int32_t i, int u, LLVMValueRef a)
{
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    bool mx = rp_algebra_of((ir_op)in->op)->combine == RP_MAX;
    LLVMTypeRef st = rk_acc_scalar(r, in), nt = jit_em_vec(l, l->i1),
                bt = jit_em_vec(l, rk_bits_type(r, in));
    LLVMValueRef n = LLVMBuildLoad2(b, nt, r->accnanset[u][i], "");
    LLVMValueRef z = LLVMBuildLoad2(b, bt, r->accbitsset[u][i], "");
    LLVMTypeRef it = rk_bits_type(r, in);
    LLVMValueRef seen = LLVMBuildICmp(b, LLVMIntEQ, z,
                                      jit_em_splat(l, mx ? LLVMConstNull(it)
                                                         : LLVMConstInt(it, 1ull << (LLVMGetIntTypeWidth(it) - 1), 0)),
                                      "");
    LLVMValueRef zero = LLVMBuildFCmp(b, LLVMRealOEQ, a, LLVMConstNull(LLVMTypeOf(a)), "");
    a = LLVMBuildSelect(b, LLVMBuildAnd(b, seen, zero, ""),
                        jit_em_splat(l, LLVMConstReal(st, mx ? 0.0 : -0.0)), a, "");
    return LLVMBuildSelect(b, n, jit_em_splat(l, LLVMConstReal(st, NAN)), a, "");
}

/* The identity of the reduction, as a vector (argmax: any value, index -1). */
LLVMValueRef
rk_identity(rk *r, const jit_kinst *in)
{
    jit_em *l = r->l;
    LLVMTypeRef st = rk_acc_scalar(r, in), vt = jit_em_vec(l, st);
    bool fl = ir_dtype_is_float(rp_operand_dtype(r->d, in));
    LLVMValueRef c = NULL;
    switch (rp_algebra_of((ir_op)in->op)->combine) {
    case RP_ADD:
        /* -0.0: a sum of one element is that element exactly (-0.0 included) */
        c = fl ? LLVMConstReal(st, -0.0) : LLVMConstInt(st, 0, 0);
        break;
    case RP_MUL:
        c = fl ? LLVMConstReal(st, 1.0) : LLVMConstInt(st, 1, 0);
        break;
    case RP_MAX:
        c = fl ? LLVMConstReal(st, -1.0 / 0.0)
               : LLVMConstInt(st, (unsigned long long)1 << (LLVMGetIntTypeWidth(st) - 1), 0);
        break;
    case RP_MIN:
        c = fl ? LLVMConstReal(st, 1.0 / 0.0)
               : LLVMConstInt(st, ((unsigned long long)1 << (LLVMGetIntTypeWidth(st) - 1)) - 1, 0);
        break;
    case RP_ARGMAX: case RP_ARGMIN:
        /* any value: the index -1 marks the pair empty (arg_takes) */
        c = LLVMConstNull(st);
        break;
    }
    (void)vt;
    return jit_em_splat(l, c);
}

/* Does (bv, bi) win over (av, ai)?  ai/bi == -1: empty.  First index and first NaN win. */
static LLVMValueRef
arg_takes(rk *r, bool mx, bool fl, LLVMValueRef av, LLVMValueRef ai, LLVMValueRef bv,
          LLVMValueRef bi)
{
    LLVMBuilderRef b = r->l->b;
    LLVMTypeRef it = LLVMTypeOf(ai);
    LLVMValueRef m1 = LLVMConstAllOnes(it);
    LLVMValueRef a_empty = LLVMBuildICmp(b, LLVMIntEQ, ai, m1, "");
    LLVMValueRef b_some = LLVMBuildICmp(b, LLVMIntNE, bi, m1, "");
    LLVMValueRef b_first = LLVMBuildICmp(b, LLVMIntSLT, bi, ai, "");
    LLVMValueRef better, equal;
    if (fl) {
        better = LLVMBuildFCmp(b, mx ? LLVMRealOGT : LLVMRealOLT, bv, av, "");
        equal = LLVMBuildFCmp(b, LLVMRealOEQ, bv, av, "");
        LLVMValueRef an = LLVMBuildFCmp(b, LLVMRealUNO, av, av, "");
        LLVMValueRef bn = LLVMBuildFCmp(b, LLVMRealUNO, bv, bv, "");
        /* both NaN: the first; only b NaN: b; only a NaN: a; else by value, then index */
        LLVMValueRef both = LLVMBuildAnd(b, an, bn, "");
        LLVMValueRef nan_pick = LLVMBuildSelect(b, both, b_first, bn, "");
        LLVMValueRef any = LLVMBuildOr(b, an, bn, "");
        LLVMValueRef val_pick = LLVMBuildOr(b, better, LLVMBuildAnd(b, equal, b_first, ""), "");
        better = LLVMBuildSelect(b, any, nan_pick, val_pick, "");
    } else {
        better = LLVMBuildICmp(b, mx ? LLVMIntSGT : LLVMIntSLT, bv, av, "");
        equal = LLVMBuildICmp(b, LLVMIntEQ, bv, av, "");
        better = LLVMBuildOr(b, better, LLVMBuildAnd(b, equal, b_first, ""), "");
    }
    return LLVMBuildAnd(b, b_some, LLVMBuildOr(b, a_empty, better, ""), "");
}

/* Combine accumulator state (av, ai) with (bv, bi), scalars or vectors alike. */
void
rk_combine(rk *r, const jit_kinst *in, LLVMValueRef *av, LLVMValueRef *ai, LLVMValueRef bv,
        LLVMValueRef bi)
{
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    bool fl = ir_dtype_is_float(rp_operand_dtype(r->d, in));
    rp_combine c = rp_algebra_of((ir_op)in->op)->combine;
    switch (c) {
    case RP_ADD:
        *av = fl ? LLVMBuildFAdd(b, *av, bv, "") : LLVMBuildAdd(b, *av, bv, "");
        return;
    case RP_MUL:
        *av = fl ? LLVMBuildFMul(b, *av, bv, "") : LLVMBuildMul(b, *av, bv, "");
        return;
    case RP_MAX:
        *av = jit_em_intr2(l, fl ? "llvm.maximum" : "llvm.smax", *av, bv);
        return;
    case RP_MIN:
        *av = jit_em_intr2(l, fl ? "llvm.minimum" : "llvm.smin", *av, bv);
        return;
    case RP_ARGMAX: case RP_ARGMIN: {
        LLVMValueRef take = arg_takes(r, c == RP_ARGMAX, fl, *av, *ai, bv, bi);
        *av = LLVMBuildSelect(b, take, bv, *av, "");
        *ai = LLVMBuildSelect(b, take, bi, *ai, "");
        return;
    }
    }
}
