/* lower_reduce.c — the REDUCTION kernel kind: one LLVM function per description.
 *
 * The iteration space is kept dims x reduced dims (jit.h).  A kernel computes, for each
 * kept element (a "row"), every JIT_REDUCE of its instruction list and everything that
 * depends on them, in passes over the row:
 *
 *   phase(load, splat) = 0;  phase(op) = max over its operands;
 *   phase(reduce) = phase(operand) + 1   (its result exists only after a whole pass)
 *
 *   per row:  for each phase p:
 *               row-wise values of phase p (computed once per row: reduction results,
 *               loads constant over the reduced dims, and ops of those)
 *               if a reduction's operand or a stored value has phase p: one pass over
 *               the row computing what they need (cheaper values of earlier phases are
 *               recomputed from the cached row rather than stored), accumulating
 *               reductions and storing values over the space
 *             row-wise stores (reduction results and values computed from them)
 *
 * So softmax (max; sum of exp(x - max); exp(x - max) / sum) is three passes over a row
 * that stays in L1/L2, one read of x from memory and one write of y (streaming, when the
 * description says so: see stream_row).  Its last pass runs one row behind, in the loop of
 * the next row's exp pass (defer_of), and its first one row ahead, in the loop of the
 * previous row's (ahead_of).
 *
 * Lanes.  "Rows" kernels (lanes_kept = 0) put the vector lanes along the last reduced
 * dim: lane-parallel accumulators, combined across lanes in a fixed tree at the end of
 * the pass, masked tails.  "Columns" kernels (lanes_kept = 1, when the innermost axis is
 * kept, as in a sum over axis 0) put the lanes along the last kept dim: each lane is its
 * own row, and a pass walks the reduced dims one vector of columns at a time.
 *
 * Accumulation.  f32 and f64 sums, means and products accumulate in f64 (f32 sums and means
 * of rows kernels in blocks of SUM_BLOCK elements per lane added in f32 first); integers wrap in
 * their own type; max/min are llvm.maximum/minimum (NaN wins, -0 < +0; in rows kernels the
 * passes use the bare vmaxps/vminps with the NaNs and the zeros' signs tracked apart, see
 * fast_extreme); argmax/argmin keep
 * (value, index) per lane with "first index wins, the first NaN wins" when lanes and pieces
 * are combined.  The order of every floating-point operation is fixed by the description
 * and the sizes alone, never by the thread count.
 *
 * Long rows (mode 1 and 2, see jit_raux): a kernel whose reductions all read the first
 * pass and that stores nothing over the space can reduce pieces of a row on several
 * threads; the pieces' accumulator vectors are combined in piece order, then the row is
 * finished (mode 2). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

typedef struct rk {
    jit_em *l;
    const jit_kdesc *d;
    LLVMValueRef fn;
    LLVMBasicBlockRef allocas;
    int R, nk, nslots;
    bool cols;
    int nphases;
    bool *uni;          /* per inst: one value per row */
    int *ph;            /* per inst: phase */
    LLVMValueRef *ptr;  /* per slot */
    LLVMValueRef pstrides; /* the strides argument: slot * R + dim */
    LLVMValueRef *dims; /* R */
    LLVMValueRef *kbase; /* per slot: element offset of the current row (cols: without the last kept dim) */
    LLVMValueRef *cur;  /* per slot: offset of the current position but the vector dim */
    LLVMValueRef *uval; /* per inst: row-wise values */
    LLVMValueRef *val;  /* per inst: values in the current pass body */
    LLVMValueRef *acc, *acci; /* per inst (JIT_REDUCE): accumulator allocas in use */
    LLVMValueRef *accset[4], *acciset[4]; /* UNROLL independent sets (chains) */
    LLVMValueRef *acc32, *acc32set[4]; /* rows: f32 block accumulators of f32 sums (NULL: none) */
    /* rows: float max/min on the bare instruction (see fast_extreme): per inst, a NaN seen
     * (<W x i1>) and the signed-integer max/min of the bit patterns (NULL: none) */
    LLVMValueRef *accnan, *accnanset[4], *accbits, *accbitsset[4];
    LLVMValueRef count; /* reduced elements per row */
    LLVMValueRef inner; /* size of the last reduced dim */
    LLVMValueRef vpos;  /* position of lane 0 along the vector dim */
    LLVMValueRef sub;   /* rows: flattened index of the current sub-row */
    LLVMValueRef rflat; /* cols: flattened reduced index */
    LLVMValueRef mask;  /* lanes in use (NULL: all) */
    int pass;           /* the pass being emitted */
    LLVMValueRef tilemask; /* cols: the tile's mask */
    size_t partial_bytes;
    int *spill;         /* per inst: 1 + scratch row offset (choose_spills; 0: recomputed) */
    LLVMValueRef scratch;
    LLVMValueRef *knext; /* rows: per slot, kbase of the next row (NULL: no prefetching) */
    bool *first_read;   /* per inst: a load the first pass's body reads (prefetched) */
    int prefetch_pass;  /* rows: the pass whose full vectors prefetch the next row (-1 none) */
    bool prefetch;      /* the body being emitted prefetches */
    bool prefetch_cheap; /* the prefetching pass has no vector math: loads only */
    /* cols kernels split along the reduced dims (partial_bytes > 0): the mode, this piece's
     * reduced range and index, the piece count, the partials, vectors per kept row */
    LLVMValueRef mode, rb, re, q, np, partial, nvr;
    /* rows: streaming stores (JIT_ST_STREAM): per store, i1, its full vectors in the current
     * sub-row are at addresses aligned for a non-temporal store (NULL: store ordinarily) */
    LLVMValueRef *ntok;
    bool streams;       /* the kernel has a streaming store: it fences before returning */
    /* rows: the last pass, run one row behind (0: none; see defer_of); per slot the
     * previous row's kbase and per instruction its row-wise values (allocas, carried from
     * row to row), and their values loaded for the current row's merged pass; the scratch
     * row of the current row (sbase: r->scratch unless deferred) and of the previous one */
    int defer;
    LLVMValueRef *pkvar, *puvar, *pkb, *pcur, *puv;
    LLVMValueRef sbase, psvar, psb;
    /* rows: pass 0 runs one row ahead, inside pass 1 (see ahead_of): per instruction the
     * next row's pass 0 results (allocas), the next row's kbase and offsets */
    bool ahead;
    LLVMValueRef *avar, *nkb, *ncur, *nuv;
} rk;

/* Full vectors per iteration of a pass that reduces cheap values: independent
 * accumulators break the latency chain of the combine (llvm.maximum is several
 * instructions long), combined in a fixed tree at the end of the pass. */
#define UNROLL 4

/* ---- accumulators ------------------------------------------------------------------------ */

static bool
is_arg(ir_op op)
{
    return op == IR_OP_ARGMAX || op == IR_OP_ARGMIN;
}

static kiln_dtype
operand_dtype(const jit_kdesc *d, const jit_kinst *in)
{
    return (kiln_dtype)d->inst[in->a[0]].dtype;
}

static LLVMTypeRef
acc_scalar(rk *r, const jit_kinst *in)
{
    kiln_dtype t = operand_dtype(r->d, in);
    switch ((ir_op)in->op) {
    case IR_OP_REDUCE_SUM: case IR_OP_REDUCE_MEAN: case IR_OP_REDUCE_PROD:
        return ir_dtype_is_float(t) ? r->l->f64 : jit_em_scalar_type(r->l, t);
    default:
        return jit_em_scalar_type(r->l, t);
    }
}

static size_t
acc_bytes(int W, const jit_kdesc *d, const jit_kinst *in)
{
    kiln_dtype t = (kiln_dtype)d->inst[in->a[0]].dtype;
    size_t s = ir_dtype_is_float(t) && !is_arg((ir_op)in->op) && in->op != IR_OP_REDUCE_MAX &&
                       in->op != IR_OP_REDUCE_MIN
                   ? 8
                   : kiln_dtype_size(t);
    return (size_t)W * (s + (is_arg((ir_op)in->op) ? 8 : 0));
}

/* f32 sums and means in rows kernels add SUM_BLOCK elements per lane in f32, then that block
 * sum into the lane's f64 accumulator: a conversion and a double add per SUM_BLOCK vectors
 * instead of per vector (the exp-and-sum pass of softmax: 6.5 -> 5.2 ns a vector on one
 * core, its data in L2).  Each block adds at most (SUM_BLOCK - 1) f32 roundings to a lane's
 * terms: docs/semantics.md states the bound. */
#define SUM_BLOCK JIT_SUM_BLOCK

/* The start of an f32 block: -0.0, so a block of -0.0 terms sums to -0.0 as the reference. */
static LLVMValueRef
block_identity(jit_em *l)
{
    return jit_em_splat(l, LLVMConstReal(l->f32, -0.0));
}

static bool
blocked_sum(const jit_kdesc *d, const jit_kinst *in)
{
    return (in->op == IR_OP_REDUCE_SUM || in->op == IR_OP_REDUCE_MEAN) &&
           operand_dtype(d, in) == KILN_DTYPE_F32;
}

/* Float max/min in rows kernels.  llvm.maximum (NaN wins, -0 < +0) is six instructions
 * on AVX-512, three of them on mask registers, in one dependency chain: the max pass of
 * softmax cost 1.4 ns a vector on one core.  Instead a pass keeps three accumulators per
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
 * accumulators move between arrays (emit_block), where these would have to follow. */
static bool
fast_extreme(const rk *r, const jit_kinst *in)
{
    return !r->cols && (in->op == IR_OP_REDUCE_MAX || in->op == IR_OP_REDUCE_MIN) &&
           ir_dtype_is_float(operand_dtype(r->d, in));
}

static LLVMTypeRef
bits_type(rk *r, const jit_kinst *in)
{
    return LLVMIntTypeInContext(r->l->ctx, (unsigned)kiln_dtype_size(operand_dtype(r->d, in)) * 8);
}

/* The signed-integer extreme of the identity: INT_MIN for max, INT_MAX for min. */
static LLVMValueRef
bits_identity(rk *r, const jit_kinst *in)
{
    LLVMTypeRef it = bits_type(r, in);
    unsigned long long top = 1ull << (LLVMGetIntTypeWidth(it) - 1);
    return jit_em_splat(r->l, LLVMConstInt(it, in->op == IR_OP_REDUCE_MAX ? top : top - 1, 0));
}

/* One vector into the three accumulators of a fast max/min (v: masked lanes already the
 * identity). */
static void
fast_extreme_step(rk *r, const jit_kinst *in, int32_t i, LLVMValueRef v)
{
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    bool mx = in->op == IR_OP_REDUCE_MAX;
    LLVMTypeRef at = LLVMTypeOf(v), nt = jit_em_vec(l, l->i1),
                bt = jit_em_vec(l, bits_type(r, in));
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
static LLVMValueRef
fast_extreme_value(rk *r, const jit_kinst *in, int32_t i, int u, LLVMValueRef a)
{
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    bool mx = in->op == IR_OP_REDUCE_MAX;
    LLVMTypeRef st = acc_scalar(r, in), nt = jit_em_vec(l, l->i1),
                bt = jit_em_vec(l, bits_type(r, in));
    LLVMValueRef n = LLVMBuildLoad2(b, nt, r->accnanset[u][i], "");
    LLVMValueRef z = LLVMBuildLoad2(b, bt, r->accbitsset[u][i], "");
    LLVMTypeRef it = bits_type(r, in);
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
static LLVMValueRef
identity(rk *r, const jit_kinst *in)
{
    jit_em *l = r->l;
    LLVMTypeRef st = acc_scalar(r, in), vt = jit_em_vec(l, st);
    bool fl = ir_dtype_is_float(operand_dtype(r->d, in));
    LLVMValueRef c;
    switch ((ir_op)in->op) {
    case IR_OP_REDUCE_SUM: case IR_OP_REDUCE_MEAN:
        /* -0.0: a sum of one element is that element exactly (-0.0 included) */
        c = fl ? LLVMConstReal(st, -0.0) : LLVMConstInt(st, 0, 0);
        break;
    case IR_OP_REDUCE_PROD:
        c = fl ? LLVMConstReal(st, 1.0) : LLVMConstInt(st, 1, 0);
        break;
    case IR_OP_REDUCE_MAX:
        c = fl ? LLVMConstReal(st, -1.0 / 0.0)
               : LLVMConstInt(st, (unsigned long long)1 << (LLVMGetIntTypeWidth(st) - 1), 0);
        break;
    case IR_OP_REDUCE_MIN:
        c = fl ? LLVMConstReal(st, 1.0 / 0.0)
               : LLVMConstInt(st, ((unsigned long long)1 << (LLVMGetIntTypeWidth(st) - 1)) - 1, 0);
        break;
    default:
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
static void
combine(rk *r, const jit_kinst *in, LLVMValueRef *av, LLVMValueRef *ai, LLVMValueRef bv,
        LLVMValueRef bi)
{
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    bool fl = ir_dtype_is_float(operand_dtype(r->d, in));
    switch ((ir_op)in->op) {
    case IR_OP_REDUCE_SUM: case IR_OP_REDUCE_MEAN:
        *av = fl ? LLVMBuildFAdd(b, *av, bv, "") : LLVMBuildAdd(b, *av, bv, "");
        return;
    case IR_OP_REDUCE_PROD:
        *av = fl ? LLVMBuildFMul(b, *av, bv, "") : LLVMBuildMul(b, *av, bv, "");
        return;
    case IR_OP_REDUCE_MAX:
        *av = jit_em_intr2(l, fl ? "llvm.maximum" : "llvm.smax", *av, bv);
        return;
    case IR_OP_REDUCE_MIN:
        *av = jit_em_intr2(l, fl ? "llvm.minimum" : "llvm.smin", *av, bv);
        return;
    case IR_OP_ARGMAX: case IR_OP_ARGMIN: {
        LLVMValueRef take = arg_takes(r, in->op == IR_OP_ARGMAX, fl, *av, *ai, bv, bi);
        *av = LLVMBuildSelect(b, take, bv, *av, "");
        *ai = LLVMBuildSelect(b, take, bi, *ai, "");
        return;
    }
    default:
        IR_ASSERT(!"combine: not a reduction");
    }
}

/* ---- spilling ---------------------------------------------------------------------------- */

/* What recomputing instruction i costs (its cone down to loads and row-wise values), in
 * rough vector-op units: vector math 20, divisions and square roots 4, the rest 1. */
static int
recompute_cost(const jit_kdesc *d, const bool *uni, int32_t i, int depth)
{
    const jit_kinst *in = &d->inst[i];
    if (uni[i] || in->kind != JIT_OP || depth > 64)
        return 0;
    int c;
    switch ((ir_op)in->op) {
    case IR_OP_DIV: case IR_OP_REM: case IR_OP_SQRT: case IR_OP_RSQRT: case IR_OP_RECIP:
        c = 4;
        break;
    default:
        c = jit_math_available((ir_op)in->op) ? 20 : 1;
        break;
    }
    for (int k = 0; k < ir_ops[in->op].arity && c < 1000; k++)
        c += recompute_cost(d, uni, in->a[k], depth + 1);
    return c;
}

/* Phases and row-wise flags of every instruction (see the top of the file). */
static int
analyse(const jit_kdesc *d, bool *uni, int *ph)
{
    int nphases = 0;
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        ph[i] = 0;
        switch ((jit_kind)in->kind) {
        case JIT_LOAD: uni[i] = (in->cls & JIT_ROWWISE) != 0; break;
        case JIT_SPLAT:
        case JIT_PARAM: uni[i] = true; break;
        case JIT_OP:
            uni[i] = true;
            for (int k = 0; k < ir_ops[in->op].arity; k++) {
                uni[i] &= uni[in->a[k]];
                if (ph[in->a[k]] > ph[i])
                    ph[i] = ph[in->a[k]];
            }
            break;
        case JIT_REDUCE:
            uni[i] = true;
            ph[i] = ph[in->a[0]] + 1;
            break;
        }
        if (ph[i] > nphases)
            nphases = ph[i];
    }
    return nphases;
}

/* Does instruction i accumulate in pass p (a reduction whose operand has phase p)? */
static bool
reduces_in(const jit_kdesc *d, const int *ph, int32_t i, int p)
{
    return d->inst[i].kind == JIT_REDUCE && ph[d->inst[i].a[0]] == p;
}

/* Is store k one over the space, made in pass p? */
static bool
space_store_in(const jit_kdesc *d, const int *ph, int32_t k, int p)
{
    return d->store_cls[k] != JIT_ST_ROW && ph[d->stores[k]] == p;
}

/* Is all the work over the space in the first pass: every reduction reads it and every
 * store over the space is made in it (what can be split into pieces of a row)? */
static bool
first_pass_only(const jit_kdesc *d, const int *ph)
{
    for (int32_t i = 0; i < d->ninst; i++)
        if (d->inst[i].kind == JIT_REDUCE && !reduces_in(d, ph, i, 0))
            return false;
    for (int32_t k = 0; k < d->nstores; k++)
        if (d->store_cls[k] != JIT_ST_ROW && !space_store_in(d, ph, k, 0))
            return false;
    return true;
}

/* Does pass p have work: a reduction to accumulate or a store over the space? */
static bool
pass_needed_d(const jit_kdesc *d, const int *ph, int p)
{
    for (int32_t i = 0; i < d->ninst; i++)
        if (reduces_in(d, ph, i, p))
            return true;
    for (int32_t k = 0; k < d->nstores; k++)
        if (space_store_in(d, ph, k, p))
            return true;
    return false;
}

/* Mark in need[] what pass p computes, from its roots down to loads, row-wise values and
 * (below pass p) spilled values. */
static void
mark_need(const jit_kdesc *d, const bool *uni, const int *spill, const int *ph, int p,
          int32_t i, bool *need)
{
    if (uni[i] || need[i])
        return;
    need[i] = true;
    if (spill && spill[i] && ph[i] < p)
        return;
    const jit_kinst *in = &d->inst[i];
    if (in->kind == JIT_OP)
        for (int k = 0; k < ir_ops[in->op].arity; k++)
            mark_need(d, uni, spill, ph, p, in->a[k], need);
}

static void
pass_needs(const jit_kdesc *d, const bool *uni, const int *spill, const int *ph, int p, bool *need)
{
    memset(need, 0, sizeof(bool) * (size_t)d->ninst);
    for (int32_t i = 0; i < d->ninst; i++)
        if (reduces_in(d, ph, i, p))
            mark_need(d, uni, spill, ph, p, d->inst[i].a[0], need);
    for (int32_t k = 0; k < d->nstores; k++)
        if (space_store_in(d, ph, k, p))
            mark_need(d, uni, spill, ph, p, d->stores[k], need);
}

/* Choose the spilled values: spill[i] = 1 + the byte offset, per reduced element, of i's
 * scratch row (rows one after another in instruction order; 0: recomputed); *bytes, the
 * bytes per element.  KILN_ERR_NOMEM when out of memory (never a plan without its spills:
 * the runner would provide no scratch for the code that spills). */
static kiln_status
choose_spills(const jit_kdesc *d, const bool *uni, const int *ph, int nphases, int *spill,
              size_t *bytes_out)
{
    size_t bytes = 0;
    *bytes_out = 0;
    if (d->kind != JIT_KERNEL_REDUCTION || d->lanes_kept || nphases < 2)
        return KILN_OK;
    bool *first = ir_calloc((size_t)d->ninst + 1, sizeof(bool));
    bool *later = ir_calloc((size_t)d->ninst + 1, sizeof(bool));
    bool *need = ir_calloc((size_t)d->ninst + 1, sizeof(bool));
    kiln_status st = KILN_OK;
    if (!first || !later || !need) {
        st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory analysing a kernel");
    } else {
        for (int p = 0; p <= nphases; p++) {
            pass_needs(d, uni, NULL, ph, p, need);
            for (int32_t i = 0; i < d->ninst; i++) {
                if (need[i] && ph[i] == p)
                    first[i] = true;
                if (need[i] && ph[i] < p)
                    later[i] = true;
            }
        }
        for (int32_t i = 0; i < d->ninst; i++)
            if (first[i] && later[i] && recompute_cost(d, uni, i, 0) >= 6) {
                spill[i] = (int)bytes + 1;
                bytes += kiln_dtype_size((kiln_dtype)d->inst[i].dtype);
            }
    }
    ir_free(first);
    ir_free(later);
    ir_free(need);
    *bytes_out = bytes;
    return st;
}

/* Rows kernels whose last pass only stores (softmax's e / s) and whose pass before it
 * computes vector math (softmax's exp and sum) run the last pass one row behind: row t's
 * last pass L goes into the loop of row t + 1's pass L - 1, the body of that pass first,
 * then the deferred one's, at each position; the last row's after the rows loop.  The two
 * then overlap in the core (softmax: the division of one row beside the exp of the next;
 * the divider idles in one, the FMA pipes in the other) instead of running one after the
 * other.  The results are the same bits: every element gets the same
 * operations, only the order of independent rows' work changes.  Spilled values live in two
 * scratch rows, used by alternate rows (row t's pass L - 1 writes one while row t - 1's
 * deferred pass reads the other).  The first row of a call runs the deferred body on itself
 * with zero row values and the other scratch row, a harmless result its own deferred pass
 * overwrites later (outputs never overlap inputs or each other, kiln.h).  Conditions: rows,
 * L >= 2, L - 1 is a pass with vector math, L reduces nothing and reads no spilled value of
 * a pass before L - 1, no streaming stores (their heads and fences are per pass) and no
 * pieces of long rows (partial_bytes 0).  Returns L, 0 when not deferred.  `need`: room for
 * ninst flags (no allocation here: the runner's scratch size and the lowering must agree). */
static int
defer_of(const jit_kdesc *d, const bool *uni, const int *ph, const int *spill, int nphases,
         size_t partial_bytes, bool *need)
{
    if (d->kind != JIT_KERNEL_REDUCTION || d->lanes_kept || partial_bytes)
        return 0;
    for (int32_t k = 0; k < d->nstores; k++)
        if (d->store_cls[k] == JIT_ST_STREAM)
            return 0;
    int L = 0;
    for (int p = nphases; p >= 1 && !L; p--)
        if (pass_needed_d(d, ph, p))
            L = p;
    if (L < 2 || !pass_needed_d(d, ph, L - 1))
        return 0;
    /* only behind a pass with vector math: layernorm's cheap passes (a sum of squares, then
     * the normalisation) ran 30% slower merged (one core, caches cold), the rows of x, y,
     * gamma and beta of two rows then all in use and all 4 KiB apart, in the same sets of
     * L1, where softmax's exp pass took the division of the row before for nothing */
    int cost = 0;
    for (int32_t i = 0; i < d->ninst; i++)
        if (reduces_in(d, ph, i, L - 1))
            cost += recompute_cost(d, uni, d->inst[i].a[0], 0);
    for (int32_t k = 0; k < d->nstores; k++)
        if (space_store_in(d, ph, k, L - 1))
            cost += recompute_cost(d, uni, d->stores[k], 0);
    if (cost < 20)
        return 0;
    pass_needs(d, uni, spill, ph, L, need);
    bool ok = true;
    for (int32_t i = 0; i < d->ninst; i++)
        ok = ok && !reduces_in(d, ph, i, L) && !(need[i] && spill[i] && ph[i] < L - 1);
    return ok ? L : 0;
}

/* Rows kernels whose first pass only takes a float max or min of the row (softmax's and
 * logsumexp's) and whose second pass computes vector math run the first pass one row
 * ahead: row t + 1's max goes into the loop of row t's exp pass, after that row's body at
 * each position, so the load-bound max of one row overlaps the FMA-bound exp of the other
 * (logsumexp on one core, rows of 1024 in L2: 5.65 -> 5.07 ns a vector).  The first row's
 * max comes from a warm-up iteration of the rows loop (jit_lower_reduce), and the last
 * row's iteration takes its own row's max again (the row after it does not exist), so pass
 * 0 is emitted once, inside pass 1.  Same bits: every row's max is the same operations over
 * the same elements.  Conditions: rows, no pieces, pass 0 reduces only float max/min (no
 * f32 blocks, one accumulator set), the kernel stores nothing over the space and spills
 * nothing, no row-wise load (pass 0's row values are then constants, the same for every
 * row), and pass 1 has vector math (so it runs one vector per iteration).  Softmax is not
 * ahead: with its output rows and scratch rows besides the two rows of x, all 4 KiB apart
 * in the same sets of L1, it ran 20% slower from cold caches (one core, f32[4096,1024]:
 * 2.0-2.2 ms with its last pass deferred alone, 2.6-3.9 ahead too), though faster in L2. */
static bool
ahead_of(const jit_kdesc *d, const bool *uni, const int *ph, const int *spill, int nphases,
         size_t partial_bytes)
{
    if (d->kind != JIT_KERNEL_REDUCTION || d->lanes_kept || partial_bytes || nphases < 1 ||
        !pass_needed_d(d, ph, 0) || !pass_needed_d(d, ph, 1))
        return false;
    for (int32_t k = 0; k < d->nstores; k++)
        if (d->store_cls[k] != JIT_ST_ROW)
            return false;
    int cost = 0;
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        if (reduces_in(d, ph, i, 0) &&
            ((in->op != IR_OP_REDUCE_MAX && in->op != IR_OP_REDUCE_MIN) ||
             !ir_dtype_is_float((kiln_dtype)d->inst[in->a[0]].dtype)))
            return false;
        if (spill[i] || (in->kind == JIT_LOAD && uni[i]))
            return false;
        if (reduces_in(d, ph, i, 1))
            cost += recompute_cost(d, uni, in->a[0], 0);
    }
    for (int32_t k = 0; k < d->nstores; k++)
        if (space_store_in(d, ph, k, 1))
            cost += recompute_cost(d, uni, d->stores[k], 0);
    return cost >= 20;
}

/* The scratch address of spilled instruction i at the current position. */
static LLVMValueRef
spill_addr(rk *r, int32_t i)
{
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    LLVMValueRef off = LLVMBuildMul(b, r->count, jit_em_i64(l, (int64_t)r->spill[i] - 1), "");
    return LLVMBuildGEP2(b, l->i8, r->sbase, &off, 1, "");
}

/* ---- helpers ------------------------------------------------------------------------------ */

static LLVMValueRef
new_alloca(rk *r, LLVMTypeRef t)
{
    LLVMBuilderRef ab = LLVMCreateBuilderInContext(r->l->ctx);
    LLVMPositionBuilderBefore(ab, LLVMGetBasicBlockTerminator(r->allocas));
    LLVMValueRef a = LLVMBuildAlloca(ab, t, "");
    LLVMDisposeBuilder(ab);
    return a;
}

/* An alloca for a row-wise value of instruction i (a vector of its dtype), zero at the
 * builder's position: the values carried from row to row (defer_of, ahead_of). */
static LLVMValueRef
zeroed_row_value(rk *r, int32_t i)
{
    kiln_dtype dt = (kiln_dtype)r->d->inst[i].dtype;
    LLVMTypeRef t = jit_em_vec(r->l, jit_em_scalar_type(r->l, dt));
    LLVMValueRef a = new_alloca(r, t);
    LLVMBuildStore(r->l->b, LLVMConstNull(t), a);
    return a;
}

static LLVMBasicBlockRef
block(rk *r, const char *name)
{
    return LLVMAppendBasicBlockInContext(r->l->ctx, r->fn, name);
}

static LLVMValueRef
stride(rk *r, int slot, int dim)
{
    /* loaded where it is used, not kept live from the entry: a kernel's strides would
     * otherwise hold most of the general registers through its hot loops */
    LLVMValueRef ix = jit_em_i64(r->l, (int64_t)slot * r->R + dim);
    return LLVMBuildLoad2(r->l->b, r->l->i64, LLVMBuildGEP2(r->l->b, r->l->i64, r->pstrides, &ix, 1, ""), "");
}

/* The vector dim's stride of a slot. */
static int
vdim(rk *r)
{
    return r->cols ? r->nk - 1 : r->R - 1;
}

/* A counted loop: for (i = from; i < to; i++).  Returns the body block's i.  Unless `lsr`,
 * the counter and its next value pass through jit_em_opaque: scalar evolution sees no
 * induction variable, so loop strength reduction (a seventh of a rows kernel's code
 * generation) has nothing to analyse; the loop costs the same instructions, addresses
 * computed from i.  The hot loops over vectors of columns keep `lsr`: their addresses
 * become pointer increments. */
typedef struct cloop {
    LLVMValueRef var, i, iv, to;
    LLVMBasicBlockRef head, exit;
    bool lsr;
} cloop;

static void
loop_open(rk *r, cloop *c, LLVMValueRef from, LLVMValueRef to, const char *name, bool lsr)
{
    LLVMBuilderRef b = r->l->b;
    c->var = new_alloca(r, r->l->i64);
    c->to = to;
    c->lsr = lsr;
    LLVMBuildStore(b, from, c->var);
    c->head = block(r, name);
    LLVMBasicBlockRef body = block(r, name);
    c->exit = block(r, name);
    LLVMBuildBr(b, c->head);
    LLVMPositionBuilderAtEnd(b, c->head);
    c->iv = LLVMBuildLoad2(b, r->l->i64, c->var, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, c->iv, to, ""), body, c->exit);
    LLVMPositionBuilderAtEnd(b, body);
    c->i = lsr ? c->iv : jit_em_opaque(r->l, c->iv);
}

static void
loop_close(rk *r, cloop *c)
{
    LLVMBuilderRef b = r->l->b;
    LLVMValueRef next = LLVMBuildAdd(b, c->iv, jit_em_i64(r->l, 1), "");
    LLVMBuildStore(b, c->lsr ? next : jit_em_opaque(r->l, next), c->var);
    LLVMBuildBr(b, c->head);
    LLVMPositionBuilderAtEnd(b, c->exit);
}

/* ---- values ----------------------------------------------------------------------------- */

/* Instruction i in the current pass body (memoised in r->val for this body). */
static LLVMValueRef
body_value(rk *r, int32_t i)
{
    const jit_kinst *in = &r->d->inst[i];
    if (r->uni[i])
        return r->uval[i];
    if (r->val[i])
        return r->val[i];
    LLVMValueRef v;
    if (r->spill[i] && r->ph[i] < r->pass) {
        /* computed and spilled by an earlier pass: read it back */
        LLVMValueRef rowpos = LLVMBuildMul(r->l->b, r->sub, r->inner, "");
        v = jit_em_load(r->l, (kiln_dtype)in->dtype, JIT_CONTIG, spill_addr(r, i), rowpos, r->vpos,
                        NULL, r->mask);
    } else if (in->kind == JIT_LOAD) {
        int j = in->slot;
        v = jit_em_load(r->l, (kiln_dtype)in->dtype, JIT_CLS(in->cls), r->ptr[j], r->cur[j], r->vpos,
                        stride(r, j, vdim(r)), r->mask);
    } else {
        IR_ASSERT(in->kind == JIT_OP);
        int nin = ir_ops[in->op].arity;
        for (int k = 0; k < nin; k++)
            r->val[in->a[k]] = body_value(r, in->a[k]);
        v = jit_em_inst(r->l, r->d, in, r->val);
        if (r->spill[i] && r->ph[i] == r->pass) {
            LLVMValueRef rowpos = LLVMBuildMul(r->l->b, r->sub, r->inner, "");
            jit_em_store(r->l, (kiln_dtype)in->dtype, JIT_CONTIG, v, spill_addr(r, i), rowpos,
                         r->vpos, NULL, r->mask);
        }
    }
    r->val[i] = v;
    return v;
}

/* Row-wise values of phase p, in instruction order (reductions are finished elsewhere). */
static void
row_values(rk *r, int p)
{
    const jit_kdesc *d = r->d;
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        if (!r->uni[i] || r->ph[i] != p || in->kind == JIT_REDUCE)
            continue;
        if (in->kind == JIT_LOAD) {
            int j = in->slot;
            /* rows: the vector dim is reduced, so the load is a splat (JIT_BCAST) */
            r->uval[i] = jit_em_load(r->l, (kiln_dtype)in->dtype, JIT_CLS(in->cls), r->ptr[j], r->kbase[j],
                                     r->cols ? r->vpos : jit_em_i64(r->l, 0),
                                     stride(r, j, vdim(r)), r->cols ? r->tilemask : NULL);
        } else {
            r->uval[i] = jit_em_inst(r->l, d, in, r->uval);
        }
    }
}

/* Prefetch slot j's element of the next row at the current position (write: for a store),
 * into L1. */
static void
prefetch_slot(rk *r, int j, kiln_dtype t, bool write)
{
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildSub(b, r->cur[j], r->kbase[j], ""), r->knext[j], "");
    off = LLVMBuildAdd(b, off, r->vpos, "");
    LLVMValueRef args[4] = {LLVMBuildGEP2(b, jit_em_mem_type(l, t), r->ptr[j], &off, 1, ""),
                            LLVMConstInt(l->i32, write, 0), LLVMConstInt(l->i32, 3, 0),
                            LLVMConstInt(l->i32, 1, 0)}; /* read or write, keep in L1, data */
    LLVMTypeRef pt = l->ptr;
    jit_em_intr(l, "llvm.prefetch", &pt, 1, args, 4);
}

/* Rows kernels read a row from memory in their first pass and work on it in cache in the
 * later ones; with nothing else in flight the memory would idle meanwhile.  So the full
 * vectors of the first later pass prefetch the same position of the next row of every
 * slot loaded contiguously along the row (one line per vector of f32 at 512 bits): the
 * next row's memory traffic overlaps this row's arithmetic.  Only slots the first pass
 * reads are prefetched (layernorm's x, not its gamma and beta).  A prefetch never faults,
 * so the row after the last one costs nothing but the hint. */
static void
prefetch_next_row(rk *r)
{
    const jit_kdesc *d = r->d;
    uint64_t done = 0; /* slots < 64 prefetched already */
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        int j = in->slot;
        if (in->kind != JIT_LOAD || !r->first_read[i] || JIT_CLS(in->cls) != JIT_CONTIG ||
            j >= 64 || (done >> j & 1))
            continue;
        done |= (uint64_t)1 << j;
        prefetch_slot(r, j, (kiln_dtype)in->dtype, false);
    }
    /* the next row's stores over the space, for writing, when this pass is costly (vector
     * math): their lines' read-for-ownership overlaps the arithmetic instead of stalling the
     * later pass's stores (softmax on one core, f32[4096,1024]: 3.06 -> 2.80 ms).  Cheap
     * passes leave it to the hardware: there it cost layernorm 10%, its x, y, gamma and
     * beta rows and the next x and y all 4 KiB apart, in the same sets of L1. */
    for (int32_t k = 0; k < d->nstores && !r->prefetch_cheap; k++)
        if (d->store_cls[k] == JIT_ST_SPACE)
            prefetch_slot(r, d->nloads + k, (kiln_dtype)d->inst[d->stores[k]].dtype, true);
}

/* One pass body at the current position: values, accumulation, stores over the space. */
static void
pass_body(rk *r, int p)
{
    const jit_kdesc *d = r->d;
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    r->pass = p;
    memset(r->val, 0, sizeof(LLVMValueRef) * (size_t)d->ninst);
    if (r->prefetch && r->knext)
        prefetch_next_row(r);
    /* spilled values of this pass are computed (and stored) even if nothing of this
     * pass reads them: a later pass will */
    for (int32_t i = 0; i < d->ninst; i++)
        if (r->spill[i] && r->ph[i] == p)
            body_value(r, i);
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        if (!reduces_in(d, r->ph, i, p))
            continue;
        LLVMValueRef v = body_value(r, in->a[0]);
        LLVMValueRef acc = r->acc32 && r->acc32[i] ? r->acc32[i] : r->acc[i];
        LLVMTypeRef at = r->acc32 && r->acc32[i] ? LLVMTypeOf(v) : jit_em_vec(l, acc_scalar(r, in));
        if (LLVMTypeOf(v) != at)
            v = LLVMBuildFPExt(b, v, at, "");
        LLVMValueRef a = LLVMBuildLoad2(b, at, acc, "");
        if (is_arg((ir_op)in->op)) {
            LLVMValueRef pos = r->cols ? jit_em_splat(l, r->rflat)
                                       : LLVMBuildAdd(b, jit_em_splat(l, LLVMBuildAdd(b, LLVMBuildMul(b, r->sub, r->inner, ""), r->vpos, "")),
                                                      jit_em_lane_ids(l), "");
            LLVMTypeRef it = jit_em_vec(l, l->i64);
            LLVMValueRef ai = LLVMBuildLoad2(b, it, r->acci[i], "");
            if (r->mask && !r->cols)
                pos = LLVMBuildSelect(b, r->mask, pos, LLVMConstAllOnes(it), "");
            combine(r, in, &a, &ai, v, pos);
            LLVMBuildStore(b, ai, r->acci[i]);
        } else {
            if (r->mask && !r->cols)
                v = LLVMBuildSelect(b, r->mask, v,
                                    acc != r->acc[i] ? block_identity(l)
                                                     : identity(r, in), "");
            if (fast_extreme(r, in)) {
                fast_extreme_step(r, in, i, v);
                continue;
            }
            combine(r, in, &a, NULL, v, NULL);
        }
        LLVMBuildStore(b, a, acc);
    }
    for (int32_t k = 0; k < d->nstores; k++) {
        int32_t i = d->stores[k];
        if (d->store_cls[k] == JIT_ST_ROW || r->ph[i] != p)
            continue;
        int j = d->nloads + k;
        LLVMValueRef v = body_value(r, i);
        kiln_dtype t = (kiln_dtype)d->inst[i].dtype;
        if (d->store_cls[k] == JIT_ST_STREAM && !r->mask && r->ntok && r->ntok[k]) {
            /* streaming where this sub-row's alignment allows it, else an ordinary store */
            jit_em_store_stream_if(l, t, v, r->ptr[j], r->cur[j], r->vpos,
                                   jit_em_stream_align(l, t), r->ntok[k]);
            continue;
        }
        jit_em_store(l, t, d->store_cls[k] == JIT_ST_SPACE || d->store_cls[k] == JIT_ST_STREAM
                               ? JIT_CONTIG : JIT_STRIDED,
                     v, r->ptr[j], r->cur[j], r->vpos, stride(r, j, vdim(r)), r->mask);
    }
}

static bool
pass_needed(rk *r, int p)
{
    return pass_needed_d(r->d, r->ph, p);
}

static void
init_accs(rk *r, int p)
{
    const jit_kdesc *d = r->d;
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        if (!reduces_in(d, r->ph, i, p))
            continue;
        for (int u = 0; u < UNROLL; u++) {
            LLVMBuildStore(r->l->b, identity(r, in), r->accset[u][i]);
            if (r->acc32set[u] && r->acc32set[u][i])
                LLVMBuildStore(r->l->b, block_identity(r->l), r->acc32set[u][i]);
            if (is_arg((ir_op)in->op))
                LLVMBuildStore(r->l->b, LLVMConstAllOnes(jit_em_vec(r->l, r->l->i64)), r->acciset[u][i]);
            if (fast_extreme(r, in)) {
                LLVMBuildStore(r->l->b,
                               LLVMConstNull(jit_em_vec(r->l, r->l->i1)),
                               r->accnanset[u][i]);
                LLVMBuildStore(r->l->b, bits_identity(r, in), r->accbitsset[u][i]);
            }
        }
    }
}

/* Accumulator sets of the reductions of pass p into set 0: (0 + 1) + (2 + 3). */
static void
fold_sets(rk *r, int p)
{
    const jit_kdesc *d = r->d;
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        if (!reduces_in(d, r->ph, i, p))
            continue;
        LLVMTypeRef at = jit_em_vec(l, acc_scalar(r, in)), it = jit_em_vec(l, l->i64);
        bool arg = is_arg((ir_op)in->op);
        LLVMValueRef v[UNROLL], x[UNROLL];
        for (int u = 0; u < UNROLL; u++) {
            v[u] = LLVMBuildLoad2(b, at, r->accset[u][i], "");
            x[u] = arg ? LLVMBuildLoad2(b, it, r->acciset[u][i], "") : NULL;
            if (fast_extreme(r, in))
                v[u] = fast_extreme_value(r, in, i, u, v[u]);
        }
        for (int h = UNROLL / 2; h >= 1; h /= 2)
            for (int u = 0; u < h; u++)
                combine(r, in, &v[u], &x[u], v[u + h], x[u + h]);
        LLVMBuildStore(b, v[0], r->accset[0][i]);
        if (arg)
            LLVMBuildStore(b, x[0], r->acciset[0][i]);
    }
}

/* Is pass p a cheap reduction pass (worth independent accumulators)?  Not when its
 * reductions are all fast max/min: their chains are one instruction long, so one set keeps
 * up (0.65 ns a vector either way) and the four-vector loop would only cost compile time. */
static bool
pass_unrolls(rk *r, int p)
{
    const jit_kdesc *d = r->d;
    bool red = false, slow = false;
    int cost = 0;
    for (int32_t i = 0; i < d->ninst; i++)
        if (reduces_in(d, r->ph, i, p)) {
            red = true;
            slow |= !fast_extreme(r, &d->inst[i]);
            cost += recompute_cost(d, r->uni, d->inst[i].a[0], 0);
        }
    if (!slow)
        return false;
    for (int32_t k = 0; k < d->nstores; k++)
        if (space_store_in(d, r->ph, k, p))
            cost += 8;
    return red && cost < 16;
}

/* Does pass p compute vector math (a reduction's operand or a stored value)? */
static bool
pass_has_math(rk *r, int p)
{
    const jit_kdesc *d = r->d;
    int cost = 0;
    for (int32_t i = 0; i < d->ninst; i++)
        if (reduces_in(d, r->ph, i, p))
            cost += recompute_cost(d, r->uni, d->inst[i].a[0], 0);
    for (int32_t k = 0; k < d->nstores; k++)
        if (space_store_in(d, r->ph, k, p))
            cost += recompute_cost(d, r->uni, d->stores[k], 0);
    return cost >= 20;
}

static void
use_set(rk *r, int u)
{
    r->acc = r->accset[u];
    r->acci = r->acciset[u];
    r->acc32 = r->acc32set[u];
    r->accnan = r->accnanset[u];
    r->accbits = r->accbitsset[u];
}

/* The f32 block sums of pass p's reductions into set 0's f64 accumulators, and the blocks
 * restarted.  `sets` blocks (1, or UNROLL after an unrolled iteration: their tree
 * (0 + 1) + (2 + 3) in f32, two more roundings of each term, then one conversion per four
 * vectors). */
static void
flush_blocks(rk *r, int p, int sets)
{
    const jit_kdesc *d = r->d;
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    LLVMTypeRef t32 = jit_em_vec(l, l->f32), t64 = jit_em_vec(l, l->f64);
    LLVMValueRef zero = block_identity(l);
    for (int32_t i = 0; i < d->ninst; i++) {
        if (!reduces_in(d, r->ph, i, p) || !r->acc32set[0] || !r->acc32set[0][i])
            continue;
        LLVMValueRef v[UNROLL];
        for (int u = 0; u < sets; u++) {
            v[u] = LLVMBuildLoad2(b, t32, r->acc32set[u][i], "");
            LLVMBuildStore(b, zero, r->acc32set[u][i]);
        }
        for (int h = sets / 2; h >= 1; h /= 2)
            for (int u = 0; u < h; u++)
                v[u] = LLVMBuildFAdd(b, v[u], v[u + h], "");
        LLVMValueRef a = LLVMBuildLoad2(b, t64, r->accset[0][i], "");
        LLVMBuildStore(b, LLVMBuildFAdd(b, a, LLVMBuildFPExt(b, v[0], t64, ""), ""), r->accset[0][i]);
    }
}

/* Does pass p have f32 block sums? */
static bool
pass_blocks(rk *r, int p)
{
    for (int32_t i = 0; r->acc32set[0] && i < r->d->ninst; i++)
        if (r->acc32set[0][i] && reduces_in(r->d, r->ph, i, p))
            return true;
    return false;
}

/* After an iteration of the one-vector loop: count it, and flush the block every SUM_BLOCK
 * iterations. */
static void
count_block(rk *r, int p, LLVMValueRef kvar)
{
    if (!kvar)
        return;
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    LLVMValueRef k = LLVMBuildAdd(b, LLVMBuildLoad2(b, l->i64, kvar, ""), jit_em_i64(l, 1), "");
    LLVMValueRef full = LLVMBuildICmp(b, LLVMIntEQ, k, jit_em_i64(l, SUM_BLOCK), "");
    LLVMBasicBlockRef fb = block(r, "block.flush"), cont = block(r, "block.next");
    LLVMBuildCondBr(b, full, fb, cont);
    LLVMPositionBuilderAtEnd(b, fb);
    flush_blocks(r, p, 1);
    LLVMBuildBr(b, cont);
    LLVMPositionBuilderAtEnd(b, cont);
    LLVMBuildStore(b, LLVMBuildSelect(b, full, jit_em_i64(l, 0), k, ""), kvar);
}

/* Offsets of slot positions: base + sum over dims [from, to) of idx(flat) * stride, where
 * flat is decomposed row-major over those dims. */
static void
add_offsets(rk *r, LLVMValueRef *out, LLVMValueRef *base, LLVMValueRef flat, int from, int to)
{
    LLVMBuilderRef b = r->l->b;
    for (int j = 0; j < r->nslots; j++)
        out[j] = base[j];
    LLVMValueRef rest = flat;
    for (int dd = to - 1; dd >= from; dd--) {
        LLVMValueRef ix = dd == from ? rest : LLVMBuildURem(b, rest, r->dims[dd], "");
        if (dd != from)
            rest = LLVMBuildUDiv(b, rest, r->dims[dd], "");
        for (int j = 0; j < r->nslots; j++)
            out[j] = LLVMBuildAdd(b, out[j], LLVMBuildMul(b, ix, stride(r, j, dd), ""), "");
    }
}

/* Pass p's body at the current position for another row than the current: its row offsets
 * kb and cur, row-wise values uv and scratch row sb; it never prefetches. */
static void
other_row_body(rk *r, int p, LLVMValueRef *kb, LLVMValueRef *cur, LLVMValueRef *uv,
               LLVMValueRef sb)
{
    bool pf = r->prefetch;
    LLVMValueRef *kb0 = r->kbase, *cur0 = r->cur, *uv0 = r->uval, sb0 = r->sbase;
    r->prefetch = false;
    r->kbase = kb;
    r->cur = cur;
    r->uval = uv;
    r->sbase = sb;
    pass_body(r, p);
    r->kbase = kb0;
    r->cur = cur0;
    r->uval = uv0;
    r->sbase = sb0;
    r->prefetch = pf;
}

/* Pass p's body at the current position; in the pass that hosts them, then the next row's
 * pass 0 (ahead_of: its row values are constants, this row's serve) and then the previous
 * row's deferred pass (defer_of).  In that order: a store of the previous row's output
 * followed by a load of a later row's input at the same offset in the row, often the same
 * address modulo 4 KiB, was measured to stall the load. */
static void
bodies(rk *r, int p)
{
    pass_body(r, p);
    if (r->ahead && p == 1)
        other_row_body(r, 0, r->nkb, r->ncur, r->uval, r->sbase);
    if (r->defer && p == r->defer - 1)
        other_row_body(r, r->defer, r->pkb, r->pcur, r->puv, r->psb);
}

/* Pass p's instructions at column pos under a mask of the first n lanes, in block bb when
 * n > 0; the builder goes on at `after` (r->mask stays the mask). */
static void
masked_pass(rk *r, int p, LLVMValueRef pos, LLVMValueRef n, LLVMBasicBlockRef bb,
            LLVMBasicBlockRef after)
{
    LLVMBuilderRef b = r->l->b;
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, n, jit_em_i64(r->l, 0), ""), bb, after);
    LLVMPositionBuilderAtEnd(b, bb);
    r->vpos = pos;
    r->mask = jit_em_first_lanes(r->l, n);
    bodies(r, p);
    LLVMBuildBr(b, after);
    LLVMPositionBuilderAtEnd(b, after);
}

/* Rows, pass p with streaming stores, at the start of a sub-row whose pass runs from
 * column ib (cvar) to ie: ntok[k], store k's full vectors are aligned for a non-temporal
 * store.  When pass p reduces nothing, the lanes before the first streaming store's next
 * aligned address run first under a mask (a head, as lower.c peels; only when its buffer is
 * aligned to its element size, as kiln assumes no more of a caller's buffer), and cvar
 * moves past them.  A pass that also reduces is not peeled (a shifted start would regroup
 * its f32 blocks, and the sums must come out the same whether the kernel streams or not):
 * it streams in the sub-rows that happen to be aligned. */
static void
stream_row(rk *r, int p, LLVMValueRef ib, LLVMValueRef ie, LLVMValueRef cvar)
{
    const jit_kdesc *d = r->d;
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    int k0 = -1;
    for (int32_t k = 0; k < d->nstores; k++) {
        r->ntok[k] = NULL;
        if (k0 < 0 && d->store_cls[k] == JIT_ST_STREAM && r->ph[d->stores[k]] == p)
            k0 = k;
    }
    if (k0 < 0)
        return;
    bool reduces = false;
    for (int32_t i = 0; i < d->ninst; i++)
        reduces = reduces || reduces_in(d, r->ph, i, p);
    LLVMValueRef start = ib;
    if (!reduces) {
        int j0 = d->nloads + k0;
        kiln_dtype t0 = (kiln_dtype)d->inst[d->stores[k0]].dtype;
        int64_t es = (int64_t)kiln_dtype_size(t0);
        LLVMValueRef ok = jit_em_elem_aligned(l, r->ptr[j0], es);
        LLVMValueRef first = LLVMBuildAdd(b, r->cur[j0], ib, "");
        LLVMValueRef h = jit_em_head_lanes(l, r->ptr[j0], first, es, jit_em_stream_align(l, t0), ok,
                                           LLVMBuildSub(b, ie, ib, ""));
        masked_pass(r, p, ib, h, block(r, "row.head"), block(r, "row.head.done"));
        r->mask = NULL;
        start = LLVMBuildAdd(b, ib, h, "");
        LLVMBuildStore(b, start, cvar);
    }
    for (int32_t k = 0; k < d->nstores; k++) {
        if (d->store_cls[k] != JIT_ST_STREAM || r->ph[d->stores[k]] != p)
            continue;
        int j = d->nloads + k;
        kiln_dtype t = (kiln_dtype)d->inst[d->stores[k]].dtype;
        LLVMValueRef gap = jit_em_align_gap(l, r->ptr[j], LLVMBuildAdd(b, r->cur[j], start, ""),
                                            (int64_t)kiln_dtype_size(t), jit_em_stream_align(l, t));
        r->ntok[k] = LLVMBuildICmp(b, LLVMIntEQ, gap, jit_em_i64(l, 0), "");
    }
}

/* One pass over the current row (rows) or tile (cols). */
static void
emit_pass(rk *r, int p, LLVMValueRef sb, LLVMValueRef se, LLVMValueRef ib, LLVMValueRef ie)
{
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    if (r->cols) {
        /* every reduced element, one vector of columns at a time */
        cloop lr;
        loop_open(r, &lr, r->rb, r->re, "col.pass", true);
        r->rflat = lr.i;
        add_offsets(r, r->cur, r->kbase, lr.i, r->nk, r->R);
        r->mask = r->tilemask;
        pass_body(r, p);
        loop_close(r, &lr);
    } else {
        cloop ls;
        loop_open(r, &ls, sb, se, "row.sub", false);
        r->sub = ls.i;
        add_offsets(r, r->cur, r->kbase, ls.i, r->nk, r->R - 1);
        if (r->defer && p == r->defer - 1)
            add_offsets(r, r->pcur, r->pkb, ls.i, r->nk, r->R - 1);
        if (r->ahead && p == 1)
            add_offsets(r, r->ncur, r->nkb, ls.i, r->nk, r->R - 1);
        /* UNROLL vectors at a time on independent accumulators (cheap passes), then full
         * vectors, then the tail under a mask */
        LLVMValueRef cvar = new_alloca(r, l->i64);
        LLVMBuildStore(b, ib, cvar);
        if (r->streams)
            stream_row(r, p, ib, ie, cvar);
        LLVMValueRef kvar = pass_blocks(r, p) ? new_alloca(r, l->i64) : NULL;
        if (kvar)
            LLVMBuildStore(b, jit_em_i64(l, 0), kvar);
        if (pass_unrolls(r, p)) {
            LLVMBasicBlockRef uh = block(r, "row.unroll"), ub = block(r, "row.unroll.body"),
                              ud = block(r, "row.unroll.done");
            LLVMBuildBr(b, uh);
            LLVMPositionBuilderAtEnd(b, uh);
            LLVMValueRef c0 = LLVMBuildLoad2(b, l->i64, cvar, "");
            LLVMValueRef cu = LLVMBuildAdd(b, c0, jit_em_i64(l, (int64_t)UNROLL * l->W), "");
            LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLE, cu, ie, ""), ub, ud);
            LLVMPositionBuilderAtEnd(b, ub);
            r->mask = NULL;
            LLVMValueRef c0o = jit_em_opaque(l, c0);
            for (int u = 0; u < UNROLL; u++) {
                use_set(r, u);
                r->vpos = LLVMBuildAdd(b, c0o, jit_em_i64(l, (int64_t)u * l->W), "");
                r->prefetch = p == r->prefetch_pass;
                bodies(r, p);
                r->prefetch = false;
            }
            use_set(r, 0);
            if (kvar)
                flush_blocks(r, p, UNROLL);
            LLVMBuildStore(b, jit_em_opaque(l, cu), cvar);
            LLVMBuildBr(b, uh);
            LLVMPositionBuilderAtEnd(b, ud);
        }
        LLVMBasicBlockRef head = block(r, "row.vec"), body = block(r, "row.vec.body"),
                          tchk = block(r, "row.tail.check"), tail = block(r, "row.tail"),
                          done = block(r, "row.done");
        LLVMBuildBr(b, head);
        LLVMPositionBuilderAtEnd(b, head);
        LLVMValueRef c = LLVMBuildLoad2(b, l->i64, cvar, "");
        LLVMValueRef cn = LLVMBuildAdd(b, c, jit_em_i64(l, l->W), "");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLE, cn, ie, ""), body, tchk);
        LLVMPositionBuilderAtEnd(b, body);
        r->vpos = jit_em_opaque(l, c); /* as lower.c's vector body */
        r->mask = NULL;
        r->prefetch = p == r->prefetch_pass;
        bodies(r, p);
        r->prefetch = false;
        count_block(r, p, kvar);
        LLVMBuildStore(b, jit_em_opaque(l, cn), cvar);
        LLVMBuildBr(b, head);
        LLVMPositionBuilderAtEnd(b, tchk);
        masked_pass(r, p, jit_em_opaque(l, c), LLVMBuildSub(b, ie, c, ""), tail, done);
        if (kvar) {
            flush_blocks(r, p, 1);
            LLVMBuildStore(b, jit_em_i64(l, 0), kvar);
        }
        loop_close(r, &ls);
        r->mask = NULL;
    }
    fold_sets(r, p);
}

/* Finish the reductions whose operand has phase p: lanes combined (rows) or not (cols),
 * then the mean's division and the result dtype. */
static void
finish_reduces(rk *r, int p)
{
    const jit_kdesc *d = r->d;
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        if (!reduces_in(d, r->ph, i, p))
            continue;
        LLVMTypeRef ast = acc_scalar(r, in), at = jit_em_vec(l, ast);
        LLVMValueRef a = LLVMBuildLoad2(b, at, r->acc[i], "");
        LLVMValueRef ai = is_arg((ir_op)in->op) ? LLVMBuildLoad2(b, jit_em_vec(l, l->i64), r->acci[i], "") : NULL;
        if (!r->cols) {
            /* a fixed tree over the lanes: lane k with lane k + h, h = W/2, W/4, ..., 1, on
             * vectors of h lanes (the low and high halves) */
            for (int h = l->W / 2; h >= 1; h /= 2) {
                LLVMValueRef lo_i[32], hi_i[32];
                for (int k = 0; k < h; k++) {
                    lo_i[k] = LLVMConstInt(l->i32, (unsigned long long)k, 0);
                    hi_i[k] = LLVMConstInt(l->i32, (unsigned long long)(k + h), 0);
                }
                LLVMValueRef lo = LLVMConstVector(lo_i, (unsigned)h), hi = LLVMConstVector(hi_i, (unsigned)h);
                LLVMValueRef av = LLVMBuildShuffleVector(b, a, LLVMGetPoison(LLVMTypeOf(a)), lo, "");
                LLVMValueRef bv = LLVMBuildShuffleVector(b, a, LLVMGetPoison(LLVMTypeOf(a)), hi, "");
                LLVMValueRef ax = NULL, bx = NULL;
                if (ai) {
                    ax = LLVMBuildShuffleVector(b, ai, LLVMGetPoison(LLVMTypeOf(ai)), lo, "");
                    bx = LLVMBuildShuffleVector(b, ai, LLVMGetPoison(LLVMTypeOf(ai)), hi, "");
                }
                combine(r, in, &av, &ax, bv, bx);
                a = av;
                ai = ax;
            }
            LLVMValueRef zero = LLVMConstInt(l->i32, 0, 0);
            a = jit_em_splat(l, LLVMBuildExtractElement(b, a, zero, ""));
            if (ai)
                ai = jit_em_splat(l, LLVMBuildExtractElement(b, ai, zero, ""));
        }
        kiln_dtype t = (kiln_dtype)in->dtype, ot = operand_dtype(d, in);
        LLVMTypeRef rt = jit_em_vec(l, jit_em_scalar_type(l, t));
        LLVMValueRef v;
        if (ai) {
            v = t == KILN_DTYPE_I64 ? ai : LLVMBuildTrunc(b, ai, rt, "");
        } else {
            v = a;
            bool fl = ir_dtype_is_float(ot);
            if (fl && (in->op == IR_OP_REDUCE_SUM || in->op == IR_OP_REDUCE_MEAN)) {
                LLVMValueRef cnt = jit_em_splat(l, LLVMBuildSIToFP(b, r->count, l->f64, ""));
                LLVMValueRef empty = LLVMBuildICmp(b, LLVMIntEQ, r->count, jit_em_i64(l, 0), "");
                if (in->op == IR_OP_REDUCE_MEAN) {
                    /* the empty mean is the quiet NaN the reference gives (+NaN; x86's
                     * 0/0 would be -NaN) */
                    v = LLVMBuildFDiv(b, v, cnt, "");
                    v = LLVMBuildSelect(b, empty, jit_em_splat(l, LLVMConstReal(l->f64, NAN)), v, "");
                } else {
                    /* the empty sum is +0 */
                    v = LLVMBuildSelect(b, empty, LLVMConstNull(at), v, "");
                }
            }
            if (fl && t == KILN_DTYPE_F32 && ast == l->f64)
                v = LLVMBuildFPTrunc(b, v, rt, "");
        }
        r->uval[i] = v;
    }
}

static void
store_partial(rk *r, LLVMValueRef base)
{
    const jit_kdesc *d = r->d;
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    size_t off = 0;
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        if (in->kind != JIT_REDUCE)
            continue;
        LLVMTypeRef at = jit_em_vec(l, acc_scalar(r, in));
        LLVMValueRef o = jit_em_i64(l, (int64_t)off);
        LLVMValueRef p = LLVMBuildGEP2(b, l->i8, base, &o, 1, "");
        LLVMSetAlignment(LLVMBuildStore(b, LLVMBuildLoad2(b, at, r->acc[i], ""), p), 8);
        if (is_arg((ir_op)in->op)) {
            LLVMTypeRef it = jit_em_vec(l, l->i64);
            size_t vb = acc_bytes(l->W, d, in) - (size_t)l->W * 8;
            LLVMValueRef o2 = jit_em_i64(l, (int64_t)(off + vb));
            LLVMValueRef p2 = LLVMBuildGEP2(b, l->i8, base, &o2, 1, "");
            LLVMSetAlignment(LLVMBuildStore(b, LLVMBuildLoad2(b, it, r->acci[i], ""), p2), 8);
        }
        off += acc_bytes(l->W, d, in);
    }
}

/* Accumulators := the pieces at `base`, combined in piece order. */
static void
load_partials(rk *r, LLVMValueRef base, LLVMValueRef npieces)
{
    const jit_kdesc *d = r->d;
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    init_accs(r, 0);
    cloop lq;
    loop_open(r, &lq, jit_em_i64(l, 0), npieces, "pieces", false);
    LLVMValueRef pb = LLVMBuildMul(b, lq.i, jit_em_i64(l, (int64_t)r->partial_bytes), "");
    pb = LLVMBuildGEP2(b, l->i8, base, &pb, 1, "");
    size_t off = 0;
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        if (in->kind != JIT_REDUCE)
            continue;
        LLVMTypeRef at = jit_em_vec(l, acc_scalar(r, in)), it = jit_em_vec(l, l->i64);
        LLVMValueRef o = jit_em_i64(l, (int64_t)off);
        LLVMValueRef x = LLVMBuildLoad2(b, at, LLVMBuildGEP2(b, l->i8, pb, &o, 1, ""), "");
        LLVMSetAlignment(x, 8);
        LLVMValueRef a = LLVMBuildLoad2(b, at, r->acc[i], "");
        if (is_arg((ir_op)in->op)) {
            size_t vb = acc_bytes(l->W, d, in) - (size_t)l->W * 8;
            LLVMValueRef o2 = jit_em_i64(l, (int64_t)(off + vb));
            LLVMValueRef xi = LLVMBuildLoad2(b, it, LLVMBuildGEP2(b, l->i8, pb, &o2, 1, ""), "");
            LLVMSetAlignment(xi, 8);
            LLVMValueRef ai = LLVMBuildLoad2(b, it, r->acci[i], "");
            combine(r, in, &a, &ai, x, xi);
            LLVMBuildStore(b, ai, r->acci[i]);
        } else {
            combine(r, in, &a, NULL, x, NULL);
        }
        LLVMBuildStore(b, a, r->acc[i]);
        off += acc_bytes(l->W, d, in);
    }
    loop_close(r, &lq);
}

/* Row-wise stores, after the last phase. */
static void
row_stores(rk *r)
{
    const jit_kdesc *d = r->d;
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    for (int32_t k = 0; k < d->nstores; k++) {
        if (d->store_cls[k] != JIT_ST_ROW)
            continue;
        int32_t i = d->stores[k];
        int j = d->nloads + k;
        kiln_dtype t = (kiln_dtype)d->inst[i].dtype;
        LLVMValueRef v = r->uval[i];
        if (r->cols) {
            jit_em_store(l, t, JIT_CONTIG, v, r->ptr[j], r->kbase[j], r->vpos, NULL, r->tilemask);
        } else {
            LLVMTypeRef mt = jit_em_mem_type(l, t);
            LLVMValueRef x = LLVMBuildExtractElement(b, v, LLVMConstInt(l->i32, 0, 0), "");
            if (t == KILN_DTYPE_BOOL)
                x = LLVMBuildZExt(b, x, mt, "");
            LLVMValueRef p = LLVMBuildGEP2(b, mt, r->ptr[j], &r->kbase[j], 1, "");
            LLVMSetAlignment(LLVMBuildStore(b, x, p), (unsigned)kiln_dtype_size(t));
        }
    }
}

/* ---- the last pass one row behind --------------------------------------------------------- */

/* The row-wise values a deferred pass can read: all but constants and parameters (an
 * alloca each). */
static bool
carried(rk *r, int32_t i)
{
    return r->uni[i] && r->d->inst[i].kind != JIT_SPLAT && r->d->inst[i].kind != JIT_PARAM;
}

/* The previous row's kbase, row-wise values (constants: this row's) and scratch row into
 * kb, uv and *sb. */
static void
load_prev(rk *r, LLVMValueRef *kb, LLVMValueRef *uv, LLVMValueRef *sb)
{
    jit_em *l = r->l;
    *sb = LLVMBuildLoad2(l->b, l->ptr, r->psvar, "");
    for (int j = 0; j < r->nslots; j++)
        kb[j] = LLVMBuildLoad2(l->b, l->i64, r->pkvar[j], "");
    for (int32_t i = 0; i < r->d->ninst; i++)
        uv[i] = r->puvar[i]
                    ? LLVMBuildLoad2(l->b, LLVMGetAllocatedType(r->puvar[i]), r->puvar[i], "")
                    : r->uval[i];
}

/* This row's kbase and row-wise values, for the next row's merged pass. */
static void
save_prev(rk *r)
{
    LLVMBuildStore(r->l->b, r->sbase, r->psvar);
    for (int j = 0; j < r->nslots; j++)
        LLVMBuildStore(r->l->b, r->kbase[j], r->pkvar[j]);
    for (int32_t i = 0; i < r->d->ninst; i++)
        if (r->puvar[i]) {
            IR_ASSERT(r->uval[i] && LLVMTypeOf(r->uval[i]) == LLVMGetAllocatedType(r->puvar[i]));
            LLVMBuildStore(r->l->b, r->uval[i], r->puvar[i]);
        }
}

/* The scratch row of row t of a deferring kernel: the (t & 1)th of two, each `srow` bytes
 * per reduced element. */
static LLVMValueRef
scratch_row(rk *r, size_t srow, LLVMValueRef t)
{
    LLVMBuilderRef b = r->l->b;
    LLVMValueRef odd = LLVMBuildAnd(b, t, jit_em_i64(r->l, 1), "");
    LLVMValueRef off = LLVMBuildMul(b, LLVMBuildMul(b, odd, r->count, ""),
                                    jit_em_i64(r->l, (int64_t)srow), "");
    return LLVMBuildGEP2(b, r->l->i8, r->scratch, &off, 1, "");
}

/* Pass 0's reductions of the row ahead finished into their allocas (r->uval keeps this
 * row's). */
static void
finish_ahead(rk *r)
{
    LLVMValueRef *uv = r->uval;
    fold_sets(r, 0);
    r->uval = r->nuv;
    finish_reduces(r, 0);
    r->uval = uv;
    for (int32_t i = 0; i < r->d->ninst; i++)
        if (r->avar[i])
            LLVMBuildStore(r->l->b, r->nuv[i], r->avar[i]);
}

/* Everything for one row (rows) or one tile of columns (cols). */
static void
emit_row(rk *r, LLVMValueRef mode, LLVMValueRef sb, LLVMValueRef se, LLVMValueRef ib,
         LLVMValueRef ie, LLVMValueRef npieces, LLVMValueRef partial, LLVMValueRef row)
{
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    int first = 0;
    if (r->partial_bytes) {
        /* mode 2: the accumulators come from the pieces; mode 1: a piece, then stop */
        LLVMBasicBlockRef fromp = block(r, "from.pieces"), pass0 = block(r, "pass0"),
                          after = block(r, "after.pass0"), wr = block(r, "write.piece"),
                          fin = block(r, "finish");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, mode, jit_em_i64(l, 2), ""), fromp, pass0);
        LLVMPositionBuilderAtEnd(b, fromp);
        LLVMValueRef rb = LLVMBuildMul(b, LLVMBuildMul(b, row, npieces, ""),
                                       jit_em_i64(l, (int64_t)r->partial_bytes), "");
        load_partials(r, LLVMBuildGEP2(b, l->i8, partial, &rb, 1, ""), npieces);
        LLVMBuildBr(b, after);
        LLVMPositionBuilderAtEnd(b, pass0);
        row_values(r, 0);
        init_accs(r, 0);
        emit_pass(r, 0, sb, se, ib, ie);
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, mode, jit_em_i64(l, 1), ""), wr, after);
        LLVMPositionBuilderAtEnd(b, wr);
        store_partial(r, partial);
        LLVMBuildBr(b, fin);
        LLVMPositionBuilderAtEnd(b, after);
        row_values(r, 0); /* again: the pieces path skipped them */
        finish_reduces(r, 0);
        first = 1;
        for (int p = first; p <= r->nphases; p++)
            row_values(r, p);
        row_stores(r);
        LLVMBuildBr(b, fin);
        LLVMPositionBuilderAtEnd(b, fin);
        return;
    }
    for (int p = 0; p <= r->nphases; p++) {
        row_values(r, p);
        if (r->defer && p == r->defer) /* in the next row's pass p - 1, or after the last row */
            continue;
        if (r->ahead && p == 0) { /* computed by the row before (or before the rows loop) */
            for (int32_t i = 0; i < r->d->ninst; i++)
                if (r->avar[i])
                    r->uval[i] = LLVMBuildLoad2(r->l->b, LLVMGetAllocatedType(r->avar[i]),
                                                r->avar[i], "");
            continue;
        }
        if (pass_needed(r, p)) {
            if (r->defer && p == r->defer - 1)
                load_prev(r, r->pkb, r->puv, &r->psb);
            if (r->ahead && p == 1)
                init_accs(r, 0);
            init_accs(r, p);
            emit_pass(r, p, sb, se, ib, ie);
            if (r->ahead && p == 1)
                finish_ahead(r);
            finish_reduces(r, p);
        }
    }
    row_stores(r);
    if (r->defer)
        save_prev(r);
}

/* A split columns kernel's partials of vector of columns `vec`, piece `piece`: at
 * (vec * np + piece) * partial_bytes. */
static LLVMValueRef
piece_partial(rk *r, LLVMValueRef vec, LLVMValueRef piece)
{
    LLVMBuilderRef b = r->l->b;
    LLVMValueRef o = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, vec, r->np, ""), piece, ""),
                                  jit_em_i64(r->l, (int64_t)r->partial_bytes), "");
    return LLVMBuildGEP2(b, r->l->i8, r->partial, &o, 1, "");
}

/* One tile of W columns of kept row krow (cols; r->vpos at its first column).  A split
 * columns kernel is a blockable one (partial_of asks what cols_blockable
 * does), whose blocks take every full vector of columns: its tiles are only its last
 * partial vector, which has no pieces (the pieces' calls skip it; the finishing call, like
 * an unsplit one, reduces it over every reduced row, in one order whatever the threads), so
 * the pieces' code exists once, in the block path. */
static void
emit_tile(rk *r, LLVMValueRef sb, LLVMValueRef se, LLVMValueRef ib, LLVMValueRef ie,
          LLVMValueRef krow)
{
    if (!r->partial_bytes) {
        emit_row(r, r->mode, sb, se, ib, ie, r->np, r->partial, krow);
        return;
    }
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    LLVMBasicBlockRef whole = block(r, "tile.whole"), skip = block(r, "tile.skip");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, r->mode, jit_em_i64(l, 1), ""), skip, whole);
    LLVMPositionBuilderAtEnd(b, whole);
    size_t pb = r->partial_bytes;
    r->partial_bytes = 0;
    emit_row(r, r->mode, sb, se, ib, ie, r->np, r->partial, krow);
    r->partial_bytes = pb;
    LLVMBuildBr(b, skip);
    LLVMPositionBuilderAtEnd(b, skip);
}

/* Columns kernels whose reductions all read the first pass and that store nothing over
 * the space reduce a block of up to COL_BLOCK vectors of columns at once: the reduced
 * dims outside, the vectors inside, the accumulators in an array in L1.  A reduced row's
 * block is one contiguous run of memory, so a column sum streams its input in order
 * instead of walking one page per row for each vector of columns. */
#define COL_BLOCK 64

static bool
cols_blockable(rk *r)
{
    const jit_kdesc *d = r->d;
    if (!r->cols || !first_pass_only(d, r->ph))
        return false;
    for (int32_t k = 0; k < d->nstores; k++)
        if (d->store_cls[k] != JIT_ST_ROW)
            return false;
    return true;
}

/* Point accumulator set 0 at element v of the block arrays. */
static void
block_accs(rk *r, LLVMValueRef *arr, LLVMValueRef *arri, LLVMValueRef v)
{
    const jit_kdesc *d = r->d;
    jit_em *l = r->l;
    for (int32_t i = 0; i < d->ninst; i++) {
        if (d->inst[i].kind != JIT_REDUCE)
            continue;
        LLVMTypeRef at = jit_em_vec(l, acc_scalar(r, &d->inst[i]));
        r->accset[0][i] = LLVMBuildGEP2(l->b, at, arr[i], &v, 1, "");
        if (arri[i])
            r->acciset[0][i] = LLVMBuildGEP2(l->b, jit_em_vec(l, l->i64), arri[i], &v, 1, "");
    }
    use_set(r, 0);
}

/* One block of nv vectors of columns from column c.  KILN_ERR_NOMEM when out of memory
 * (nothing emitted). */
static kiln_status
emit_block(rk *r, LLVMValueRef *arr, LLVMValueRef *arri, LLVMValueRef c, LLVMValueRef nv,
           LLVMValueRef vi0)
{
    const jit_kdesc *d = r->d;
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    LLVMValueRef *saved = r->accset[0], *savedi = r->acciset[0];
    LLVMValueRef *cur_set = ir_calloc((size_t)d->ninst + 1, sizeof(LLVMValueRef));
    LLVMValueRef *cur_seti = ir_calloc((size_t)d->ninst + 1, sizeof(LLVMValueRef));
    if (!cur_set || !cur_seti) {
        ir_free(cur_set);
        ir_free(cur_seti);
        return ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory lowering a kernel");
    }
    r->accset[0] = cur_set;
    r->acciset[0] = cur_seti;
    r->tilemask = NULL;
    r->mask = NULL;
    /* split kernels: mode 2 takes the accumulators from the pieces, mode 1 writes them */
    LLVMBasicBlockRef from = NULL, fin = NULL, wr = NULL, done = NULL;
    if (r->partial_bytes) {
        from = block(r, "block.from.pieces");
        fin = block(r, "block.finish.pieces");
        wr = block(r, "block.write.pieces");
        done = block(r, "block.done.pieces");
        LLVMBasicBlockRef own = block(r, "block.reduce");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, r->mode, jit_em_i64(l, 2), ""), from, own);
        LLVMPositionBuilderAtEnd(b, from);
        cloop lp;
        loop_open(r, &lp, jit_em_i64(l, 0), nv, "block.pieces", false);
        block_accs(r, arr, arri, lp.i);
        load_partials(r, piece_partial(r, LLVMBuildAdd(b, vi0, lp.i, ""), jit_em_i64(l, 0)), r->np);
        loop_close(r, &lp);
        LLVMBuildBr(b, fin);
        LLVMPositionBuilderAtEnd(b, own);
    }
    cloop lv;
    loop_open(r, &lv, jit_em_i64(l, 0), nv, "block.init", false);
    block_accs(r, arr, arri, lv.i);
    init_accs(r, 0);
    loop_close(r, &lv);
    cloop lr;
    loop_open(r, &lr, r->rb, r->re, "block.pass", true);
    r->rflat = lr.i;
    add_offsets(r, r->cur, r->kbase, lr.i, r->nk, r->R);
    cloop lv2;
    loop_open(r, &lv2, jit_em_i64(l, 0), nv, "block.vec", true);
    r->vpos = LLVMBuildAdd(b, c, LLVMBuildMul(b, lv2.i, jit_em_i64(l, l->W), ""), "");
    block_accs(r, arr, arri, lv2.i);
    row_values(r, 0);
    pass_body(r, 0);
    loop_close(r, &lv2);
    loop_close(r, &lr);
    if (r->partial_bytes) {
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, r->mode, jit_em_i64(l, 1), ""), wr, fin);
        LLVMPositionBuilderAtEnd(b, wr);
        cloop lw;
        loop_open(r, &lw, jit_em_i64(l, 0), nv, "block.write", false);
        block_accs(r, arr, arri, lw.i);
        store_partial(r, piece_partial(r, LLVMBuildAdd(b, vi0, lw.i, ""), r->q));
        loop_close(r, &lw);
        LLVMBuildBr(b, done);
        LLVMPositionBuilderAtEnd(b, fin);
    }
    cloop lf;
    loop_open(r, &lf, jit_em_i64(l, 0), nv, "block.finish", false);
    r->vpos = LLVMBuildAdd(b, c, LLVMBuildMul(b, lf.i, jit_em_i64(l, l->W), ""), "");
    block_accs(r, arr, arri, lf.i);
    row_values(r, 0);
    finish_reduces(r, 0);
    for (int p = 1; p <= r->nphases; p++)
        row_values(r, p);
    row_stores(r);
    loop_close(r, &lf);
    if (r->partial_bytes) {
        LLVMBuildBr(b, done);
        LLVMPositionBuilderAtEnd(b, done);
    }
    r->accset[0] = saved;
    r->acciset[0] = savedi;
    use_set(r, 0);
    ir_free(cur_set);
    ir_free(cur_seti);
    return KILN_OK;
}

/* Bytes of one piece's accumulators (jit_reduce_scratch), from the phases. */
static size_t
partial_of(const jit_kdesc *d, const int *ph)
{
    if (d->kind != JIT_KERNEL_REDUCTION)
        return 0;
    int W = jit_host_info()->vector_bits / 32;
    size_t bytes = 0;
    /* each piece reduces, and stores, its own range of the row */
    bool ok = first_pass_only(d, ph);
    for (int32_t k = 0; d->lanes_kept && k < d->nstores; k++)
        ok &= d->store_cls[k] == JIT_ST_ROW; /* cols: as cols_blockable */
    if (ok)
        for (int32_t i = 0; i < d->ninst; i++)
            if (d->inst[i].kind == JIT_REDUCE)
                bytes += acc_bytes(W, d, &d->inst[i]);
    return bytes;
}

/* What the lowering and the runner's and the dump's questions about a description all
 * start from, computed in one place so that they cannot disagree (the runner sizes the
 * scratch rows the lowering spills into): phases, row-wise flags, spills, the pieces'
 * bytes and the passes that move between rows. */
typedef struct rplan {
    bool *uni;      /* per inst: one value per row */
    int *ph;        /* per inst: phase */
    int *spill;     /* per inst: choose_spills */
    int nphases;
    size_t srow;    /* bytes per reduced element of one scratch row */
    size_t partial; /* partial_of */
    int defer;      /* defer_of */
    bool ahead;     /* ahead_of */
} rplan;

static void
rplan_free(rplan *a)
{
    ir_free(a->uni);
    ir_free(a->ph);
    ir_free(a->spill);
    memset(a, 0, sizeof *a);
}

/* KILN_ERR_NOMEM (with *a freed) when out of memory. */
static kiln_status
rplan_make(const jit_kdesc *d, rplan *a)
{
    memset(a, 0, sizeof *a);
    size_t ni = (size_t)d->ninst + 1;
    a->uni = ir_calloc(ni, sizeof(bool));
    a->ph = ir_calloc(ni, sizeof(int));
    a->spill = ir_calloc(ni, sizeof(int));
    bool *need = ir_calloc(ni, sizeof(bool));
    if (!a->uni || !a->ph || !a->spill || !need) {
        ir_free(need);
        rplan_free(a);
        return ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory analysing a kernel");
    }
    a->nphases = analyse(d, a->uni, a->ph);
    kiln_status st = choose_spills(d, a->uni, a->ph, a->nphases, a->spill, &a->srow);
    if (st) {
        ir_free(need);
        rplan_free(a);
        return st;
    }
    a->partial = partial_of(d, a->ph);
    a->defer = defer_of(d, a->uni, a->ph, a->spill, a->nphases, a->partial, need);
    a->ahead = ahead_of(d, a->uni, a->ph, a->spill, a->nphases, a->partial);
    ir_free(need);
    return KILN_OK;
}

/* The scratch of plan a: one piece's accumulators, and the spill bytes per reduced element
 * (deferred: two scratch rows). */
static void
rplan_scratch(const rplan *a, size_t *partial, size_t *spill)
{
    *partial = a->partial;
    *spill = a->defer ? 2 * a->srow : a->srow;
}

kiln_status
jit_reduce_scratch(jit_kdesc *d)
{
    d->partial_bytes = d->spill_bytes = 0;
    if (d->kind != JIT_KERNEL_REDUCTION)
        return KILN_OK;
    rplan a;
    kiln_status st = rplan_make(d, &a);
    if (st)
        return st;
    rplan_scratch(&a, &d->partial_bytes, &d->spill_bytes);
    rplan_free(&a);
    return KILN_OK;
}

void
jit_reduce_passes(const jit_kdesc *d, int *passes, int *deferred, bool *ahead)
{
    *passes = *deferred = 0;
    *ahead = false;
    rplan a;
    if (d->kind != JIT_KERNEL_REDUCTION || d->lanes_kept || rplan_make(d, &a))
        return;
    for (int p = 0; p <= a.nphases; p++)
        *passes += pass_needed_d(d, a.ph, p);
    *deferred = a.defer;
    *ahead = a.ahead;
    rplan_free(&a);
}

kiln_status
jit_lower_reduce(jit_em *l, const jit_kdesc *d, const char *name)
{
    LLVMBuilderRef b = l->b;
    rk r = {0};
    r.l = l;
    r.d = d;
    r.R = d->rank;
    r.nk = d->rank - d->nred;
    r.cols = d->lanes_kept != 0;
    r.nslots = d->nloads + d->nstores;
    IR_ASSERT(r.nk >= 1 && d->nred >= 1);
    size_t ni = (size_t)d->ninst + 1, ns = (size_t)r.nslots + 1;
    /* phases, row-wise values, spills, what moves between rows */
    rplan plan;
    kiln_status st = rplan_make(d, &plan);
    if (st)
        return st;
    /* the runner provides the scratch the describe pass computed (jit_reduce_scratch) and
     * no more: code spilling into rows it does not provide would write past them */
    size_t want_partial, want_spill;
    rplan_scratch(&plan, &want_partial, &want_spill);
    if (want_partial != d->partial_bytes || want_spill != d->spill_bytes) {
        rplan_free(&plan);
        return ir_error(KILN_ERR_INTERNAL,
                        "kiln_jit: internal error: reduction kernel %s needs %zu partial and %zu "
                        "spill bytes, its description provides %zu and %zu",
                        name, want_partial, want_spill, d->partial_bytes, d->spill_bytes);
    }
    r.uni = plan.uni;
    r.ph = plan.ph;
    r.spill = plan.spill;
    r.nphases = plan.nphases;
    r.partial_bytes = plan.partial;
    r.defer = plan.defer;
    r.ahead = plan.ahead;
    size_t srow = plan.srow;
    r.ptr = ir_calloc(ns, sizeof(LLVMValueRef));
    r.dims = ir_calloc((size_t)r.R, sizeof(LLVMValueRef));
    r.kbase = ir_calloc(ns, sizeof(LLVMValueRef));
    r.cur = ir_calloc(ns, sizeof(LLVMValueRef));
    r.uval = ir_calloc(ni, sizeof(LLVMValueRef));
    r.val = ir_calloc(ni, sizeof(LLVMValueRef));
    bool sets_ok = true;
    for (int u = 0; u < UNROLL; u++) {
        r.accset[u] = ir_calloc(ni, sizeof(LLVMValueRef));
        r.acciset[u] = ir_calloc(ni, sizeof(LLVMValueRef));
        sets_ok &= r.accset[u] && r.acciset[u];
        if (!r.cols) {
            r.acc32set[u] = ir_calloc(ni, sizeof(LLVMValueRef));
            r.accnanset[u] = ir_calloc(ni, sizeof(LLVMValueRef));
            r.accbitsset[u] = ir_calloc(ni, sizeof(LLVMValueRef));
            sets_ok &= r.acc32set[u] && r.accnanset[u] && r.accbitsset[u];
        }
    }
    r.acc = r.accset[0];
    r.acci = r.acciset[0];
    for (int32_t k = 0; k < d->nstores; k++)
        r.streams = r.streams || (!r.cols && d->store_cls[k] == JIT_ST_STREAM);
    r.ntok = r.streams ? ir_calloc((size_t)d->nstores + 1, sizeof(LLVMValueRef)) : NULL;
    if (r.ahead) {
        r.avar = ir_calloc(ni, sizeof(LLVMValueRef));
        r.nuv = ir_calloc(ni, sizeof(LLVMValueRef));
        r.nkb = ir_calloc(ns, sizeof(LLVMValueRef));
        r.ncur = ir_calloc(ns, sizeof(LLVMValueRef));
    }
    if (r.defer) {
        r.pkvar = ir_calloc(ns, sizeof(LLVMValueRef));
        r.pkb = ir_calloc(ns, sizeof(LLVMValueRef));
        r.pcur = ir_calloc(ns, sizeof(LLVMValueRef));
        r.puvar = ir_calloc(ni, sizeof(LLVMValueRef));
        r.puv = ir_calloc(ni, sizeof(LLVMValueRef));
    }
    if (!r.ptr || !r.dims || !r.kbase || !r.cur || !r.uval || !r.val || !sets_ok ||
        (r.streams && !r.ntok) || (r.ahead && (!r.avar || !r.nuv || !r.nkb || !r.ncur)) ||
        (r.defer && (!r.pkvar || !r.pkb || !r.pcur || !r.puvar || !r.puv))) {
        st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory lowering a kernel");
        goto done;
    }
    /* prefetching: rows kernels with a later pass (pieces of long rows have none) */
    r.prefetch_pass = -1;
    for (int p = 1; !r.cols && !r.partial_bytes && p <= r.nphases && r.prefetch_pass < 0; p++)
        if (pass_needed(&r, p))
            r.prefetch_pass = p;
    if (r.prefetch_pass > 0) {
        r.knext = ir_calloc(ns, sizeof(LLVMValueRef));
        r.first_read = ir_calloc(ni, sizeof(bool));
        if (!r.knext || !r.first_read) {
            st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory lowering a kernel");
            goto done;
        }
        pass_needs(d, r.uni, r.spill, r.ph, 0, r.first_read);
        r.prefetch_cheap = !pass_has_math(&r, r.prefetch_pass);
    }

    LLVMTypeRef params[6] = {l->ptr, l->ptr, l->ptr, l->i64, l->i64, l->ptr};
    r.fn = LLVMAddFunction(l->mod, name, LLVMFunctionType(LLVMVoidTypeInContext(l->ctx), params, 6, 0));
    LLVMValueRef pptrs = LLVMGetParam(r.fn, 0), pstrides = LLVMGetParam(r.fn, 1),
                 pdims = LLVMGetParam(r.fn, 2), pbegin = LLVMGetParam(r.fn, 3),
                 pend = LLVMGetParam(r.fn, 4), paux = LLVMGetParam(r.fn, 5);
    r.pstrides = pstrides;
    r.allocas = block(&r, "allocas");
    LLVMBasicBlockRef entry = block(&r, "entry");
    LLVMPositionBuilderAtEnd(b, r.allocas);
    LLVMBuildBr(b, entry);
    LLVMPositionBuilderAtEnd(b, entry);
    for (int j = 0; j < r.nslots; j++) {
        r.ptr[j] = jit_em_arg(l, l->ptr, pptrs, j, "");

    }
    jit_em_params(l, d, pptrs);
    for (int k = 0; k < r.R; k++) {
        r.dims[k] = jit_em_arg(l, l->i64, pdims, k, "");
    }
    r.count = jit_em_i64(l, 1);
    for (int k = r.nk; k < r.R; k++)
        r.count = LLVMBuildMul(b, r.count, r.dims[k], "");
    r.inner = r.dims[r.R - 1];
    /* sub-rows: count / inner, 0 when the last dim is empty (never a division by 0) */
    LLVMValueRef empty = LLVMBuildICmp(b, LLVMIntEQ, r.inner, jit_em_i64(l, 0), "");
    LLVMValueRef nsub = LLVMBuildUDiv(b, r.count, LLVMBuildSelect(b, empty, jit_em_i64(l, 1), r.inner, ""), "");
    /* aux fields: the piece mode and ranges matter only to kernels that can be split */
    LLVMValueRef aux[7];
    for (int k = 0; k < 6; k++)
        aux[k] = r.partial_bytes ? jit_em_arg(l, l->i64, paux, k, "") : jit_em_i64(l, 0);
    aux[6] = r.partial_bytes ? jit_em_arg(l, l->ptr, paux, 6, "") : LLVMConstNull(l->ptr);
    LLVMValueRef mode = aux[0];
    LLVMValueRef piece = LLVMBuildICmp(b, LLVMIntEQ, mode, jit_em_i64(l, 1), "");
    LLVMValueRef sb = LLVMBuildSelect(b, piece, aux[1], jit_em_i64(l, 0), "");
    LLVMValueRef se = LLVMBuildSelect(b, piece, aux[2], nsub, "");
    LLVMValueRef ib = LLVMBuildSelect(b, piece, aux[3], jit_em_i64(l, 0), "");
    LLVMValueRef ie = LLVMBuildSelect(b, piece, aux[4], r.inner, "");
    LLVMValueRef npieces = aux[5], partial = aux[6];
    /* cols: the reduced range (mode 1: a piece's), the piece, the partials */
    r.mode = mode;
    r.rb = LLVMBuildSelect(b, piece, aux[3], jit_em_i64(l, 0), "");
    r.re = LLVMBuildSelect(b, piece, aux[4], r.count, "");
    r.q = aux[1];
    r.np = npieces;
    r.partial = partial;
    r.scratch = jit_em_arg(l, l->ptr, paux, 7, "");
    r.sbase = r.scratch;
    for (int u = 0; u < UNROLL; u++)
        for (int32_t i = 0; i < d->ninst; i++)
            if (d->inst[i].kind == JIT_REDUCE) {
                r.accset[u][i] = new_alloca(&r, jit_em_vec(l, acc_scalar(&r, &d->inst[i])));
                if (r.acc32set[u] && blocked_sum(d, &d->inst[i]))
                    r.acc32set[u][i] = new_alloca(&r, jit_em_vec(l, l->f32));
                if (is_arg((ir_op)d->inst[i].op))
                    r.acciset[u][i] = new_alloca(&r, jit_em_vec(l, l->i64));
                if (fast_extreme(&r, &d->inst[i])) {
                    r.accnanset[u][i] =
                        new_alloca(&r, jit_em_vec(l, l->i1));
                    r.accbitsset[u][i] = new_alloca(&r, jit_em_vec(l, bits_type(&r, &d->inst[i])));
                }
            }
    use_set(&r, 0);

    if (!r.cols) {
        LLVMValueRef *zero = ir_calloc((size_t)r.nslots + 1, sizeof(LLVMValueRef));
        if (!zero) {
            st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory lowering a kernel");
            goto done;
        }
        for (int j = 0; j < r.nslots; j++)
            zero[j] = jit_em_i64(l, 0);
        if (r.defer) {
            /* the "previous row" of the first: the first row itself, zero row values */
            add_offsets(&r, r.pkb, zero, pbegin, 0, r.nk);
            for (int j = 0; j < r.nslots; j++) {
                r.pkvar[j] = new_alloca(&r, l->i64);
                LLVMBuildStore(b, r.pkb[j], r.pkvar[j]);
            }
            for (int32_t i = 0; i < d->ninst; i++)
                if (carried(&r, i))
                    r.puvar[i] = zeroed_row_value(&r, i);
            /* scratch row t & 1 for row t: the first row's "previous" is the other */
            r.psvar = new_alloca(&r, l->ptr);
            LLVMBuildStore(b, scratch_row(&r, srow, LLVMBuildXor(b, pbegin, jit_em_i64(l, 1), "")),
                           r.psvar);
        }
        if (r.ahead) /* the rows' pass 0 results, zero before the warm-up row below */
            for (int32_t i = 0; i < d->ninst; i++)
                if (reduces_in(d, r.ph, i, 0))
                    r.avar[i] = zeroed_row_value(&r, i);
        /* one row per iteration: kept index t.  With pass 0 one row ahead, a warm-up
         * iteration first (t = begin - 1, when there is a row): it works on the first row
         * with zero pass 0 results, which only its pass 0 of the row ahead (the first row
         * again) is for; whatever else it stores goes to the first row's outputs, which
         * that row's own iteration writes again. */
        LLVMValueRef from = pbegin, row = NULL;
        if (r.ahead) {
            LLVMValueRef some = LLVMBuildICmp(b, LLVMIntSLT, pbegin, pend, "");
            LLVMValueRef before = LLVMBuildSub(b, pbegin, jit_em_i64(l, 1), "");
            from = LLVMBuildSelect(b, some, before, pend, "");
        }
        cloop lt;
        loop_open(&r, &lt, from, pend, "rows", false);
        row = lt.i;
        if (r.ahead) { /* the warm-up's row is the first; the row ahead is the next, or
                        * this one again for the last */
            LLVMValueRef warm = LLVMBuildICmp(b, LLVMIntSLT, lt.i, pbegin, "");
            row = LLVMBuildSelect(b, warm, pbegin, lt.i, "");
            LLVMValueRef nx = LLVMBuildAdd(b, lt.i, jit_em_i64(l, 1), "");
            LLVMValueRef last = LLVMBuildICmp(b, LLVMIntSGE, nx, pend, "");
            add_offsets(&r, r.nkb, zero, LLVMBuildSelect(b, last, row, nx, ""), 0, r.nk);
        }
        add_offsets(&r, r.kbase, zero, row, 0, r.nk);
        if (r.defer)
            r.sbase = scratch_row(&r, srow, lt.i);
        /* the row to prefetch: the next, or with pass 0 one row ahead the one after it
         * (pass 0 reads the next itself: logsumexp f32[4096,1024] cold, one core, 1.43-1.47
         * ms prefetching nothing there, 1.35 the row after next) */
        if (r.knext)
            add_offsets(&r, r.knext, zero, LLVMBuildAdd(b, row, jit_em_i64(l, r.ahead ? 2 : 1), ""),
                        0, r.nk);
        ir_free(zero);
        r.vpos = jit_em_i64(l, 0);
        emit_row(&r, mode, sb, se, ib, ie, npieces, partial, row);
        loop_close(&r, &lt);
        if (r.defer) {
            /* the last row's deferred pass, when there was a row */
            LLVMBasicBlockRef last = block(&r, "row.last"), fin = block(&r, "row.last.done");
            LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, pbegin, pend, ""), last, fin);
            LLVMPositionBuilderAtEnd(b, last);
            load_prev(&r, r.kbase, r.uval, &r.sbase);
            int L = r.defer;
            r.defer = 0; /* a pass of its own now */
            emit_pass(&r, L, sb, se, ib, ie);
            LLVMBuildBr(b, fin);
            LLVMPositionBuilderAtEnd(b, fin);
        }
    } else {
        /* kept elements [begin, end) walked as the elementwise kernel walks its space: row
         * by row of the last kept dim, W columns at a time, the tail under a mask */
        LLVMValueRef kin = r.dims[r.nk - 1];
        /* vectors of columns per kept row: a split kernel's partials are per vector, its
         * calls cover whole kept rows (run.c), so vectors start at multiples of W */
        r.nvr = LLVMBuildUDiv(b, LLVMBuildAdd(b, kin, jit_em_i64(l, l->W - 1), ""), jit_em_i64(l, l->W), "");
        LLVMValueRef pos = new_alloca(&r, l->i64);
        LLVMBuildStore(b, pbegin, pos);
        LLVMBasicBlockRef rowh = block(&r, "krow"), rowb = block(&r, "krow.body"),
                          exit = block(&r, "exit");
        LLVMBuildBr(b, rowh);
        LLVMPositionBuilderAtEnd(b, rowh);
        LLVMValueRef ps = LLVMBuildLoad2(b, l->i64, pos, "");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, ps, pend, ""), rowb, exit);
        LLVMPositionBuilderAtEnd(b, rowb);
        LLVMValueRef krow = LLVMBuildUDiv(b, ps, kin, "");
        LLVMValueRef col = LLVMBuildURem(b, ps, kin, "");
        LLVMValueRef left = LLVMBuildSub(b, pend, ps, "");
        LLVMValueRef room = LLVMBuildSub(b, kin, col, "");
        LLVMValueRef seg = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, left, room, ""), left, room, "");
        LLVMValueRef cend = LLVMBuildAdd(b, col, seg, "");
        LLVMValueRef *zero = ir_calloc((size_t)r.nslots + 1, sizeof(LLVMValueRef));
        if (!zero) {
            st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory lowering a kernel");
            goto done;
        }
        for (int j = 0; j < r.nslots; j++)
            zero[j] = jit_em_i64(l, 0);
        add_offsets(&r, r.kbase, zero, krow, 0, r.nk - 1);
        ir_free(zero);
        /* tiles of W columns (after blocks of them, when the kernel allows) */
        LLVMValueRef cvar = new_alloca(&r, l->i64);
        LLVMBuildStore(b, col, cvar);
        if (cols_blockable(&r)) {
            LLVMValueRef *arr = ir_calloc(ni, sizeof(LLVMValueRef));
            LLVMValueRef *arri = ir_calloc(ni, sizeof(LLVMValueRef));
            if (!arr || !arri) {
                ir_free(arr);
                ir_free(arri);
                st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory lowering a kernel");
                goto done;
            }
            for (int32_t i = 0; i < d->ninst; i++)
                if (d->inst[i].kind == JIT_REDUCE) {
                    LLVMTypeRef at = jit_em_vec(l, acc_scalar(&r, &d->inst[i]));
                    arr[i] = new_alloca(&r, LLVMArrayType2(at, COL_BLOCK));
                    if (is_arg((ir_op)d->inst[i].op))
                        arri[i] = new_alloca(&r, LLVMArrayType2(jit_em_vec(l, l->i64), COL_BLOCK));
                }
            LLVMBasicBlockRef bh = block(&r, "block"), bb = block(&r, "block.body"),
                              bd = block(&r, "block.done");
            LLVMBuildBr(b, bh);
            LLVMPositionBuilderAtEnd(b, bh);
            LLVMValueRef c0 = LLVMBuildLoad2(b, l->i64, cvar, "");
            LLVMValueRef nvec = LLVMBuildSDiv(b, LLVMBuildSub(b, cend, c0, ""), jit_em_i64(l, l->W), "");
            LLVMValueRef big = LLVMBuildICmp(b, LLVMIntSGT, nvec, jit_em_i64(l, COL_BLOCK), "");
            nvec = LLVMBuildSelect(b, big, jit_em_i64(l, COL_BLOCK), nvec, "");
            LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, nvec, jit_em_i64(l, 0), ""), bb, bd);
            LLVMPositionBuilderAtEnd(b, bb);
            LLVMValueRef vi0 = LLVMBuildAdd(b, LLVMBuildMul(b, krow, r.nvr, ""),
                                            LLVMBuildUDiv(b, c0, jit_em_i64(l, l->W), ""), "");
            st = emit_block(&r, arr, arri, c0, nvec, vi0);
            if (st) {
                ir_free(arr);
                ir_free(arri);
                goto done;
            }
            LLVMBuildStore(b, LLVMBuildAdd(b, c0, LLVMBuildMul(b, nvec, jit_em_i64(l, l->W), ""), ""), cvar);
            LLVMBuildBr(b, bh);
            LLVMPositionBuilderAtEnd(b, bd);
            ir_free(arr);
            ir_free(arri);
        }
        /* full tiles, unless the blocks took every full vector of columns: then only the
         * masked tail is left (one path fewer to compile: colsum's code is a third smaller) */
        LLVMBasicBlockRef th = block(&r, "tile"), tc = block(&r, "tile.tail.check"),
                          tt = block(&r, "tile.tail"), tn = block(&r, "krow.next");
        LLVMBuildBr(b, th);
        LLVMPositionBuilderAtEnd(b, th);
        LLVMValueRef c = LLVMBuildLoad2(b, l->i64, cvar, "");
        if (!cols_blockable(&r)) {
            LLVMBasicBlockRef tb = block(&r, "tile.body");
            LLVMValueRef cn = LLVMBuildAdd(b, c, jit_em_i64(l, l->W), "");
            LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLE, cn, cend, ""), tb, tc);
            LLVMPositionBuilderAtEnd(b, tb);
            r.vpos = c;
            r.tilemask = NULL;
            emit_tile(&r, sb, se, ib, ie, krow);
            LLVMBuildStore(b, cn, cvar);
            LLVMBuildBr(b, th);
        } else {
            LLVMBuildBr(b, tc);
        }
        LLVMPositionBuilderAtEnd(b, tc);
        LLVMValueRef rest = LLVMBuildSub(b, cend, c, "");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, rest, jit_em_i64(l, 0), ""), tt, tn);
        LLVMPositionBuilderAtEnd(b, tt);
        r.vpos = c;
        r.tilemask = jit_em_first_lanes(l, rest);
        emit_tile(&r, sb, se, ib, ie, krow);
        LLVMBuildBr(b, tn);
        LLVMPositionBuilderAtEnd(b, tn);
        LLVMBuildStore(b, LLVMBuildAdd(b, ps, seg, ""), pos);
        LLVMBuildBr(b, rowh);
        LLVMPositionBuilderAtEnd(b, exit);
        LLVMBuildRetVoid(b);
        goto done;
    }
    if (r.streams) /* the pool's join then publishes what the non-temporal stores wrote */
        jit_em_stream_fence(l);
    LLVMBuildRetVoid(b);
done:
    rplan_free(&plan);
    ir_free(r.ptr);
    ir_free(r.dims);
    ir_free(r.kbase);
    ir_free(r.ntok);
    ir_free(r.cur);
    ir_free(r.uval);
    ir_free(r.val);
    for (int u = 0; u < UNROLL; u++) {
        ir_free(r.accset[u]);
        ir_free(r.acciset[u]);
        ir_free(r.acc32set[u]);
        ir_free(r.accnanset[u]);
        ir_free(r.accbitsset[u]);
    }
    ir_free(r.knext);
    ir_free(r.first_read);
    ir_free(r.pkvar);
    ir_free(r.pkb);
    ir_free(r.pcur);
    ir_free(r.puvar);
    ir_free(r.puv);
    ir_free(r.avar);
    ir_free(r.nuv);
    ir_free(r.nkb);
    ir_free(r.ncur);
    return st;
}
