/* lower_reduce_pass.c — the REDUCTION kind's passes over a row (or a tile of columns):
 * instruction values, a pass's body with its accumulations and stores, unrolled and
 * masked iterations, streaming stores, the reductions finished across lanes, row-wise
 * stores, and the partials of split rows.  lower_reduce.c's header explains the passes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce_emit.h"

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

LLVMValueRef
rk_new_alloca(rk *r, LLVMTypeRef t)
{
    LLVMBuilderRef ab = LLVMCreateBuilderInContext(r->l->ctx);
    LLVMPositionBuilderBefore(ab, LLVMGetBasicBlockTerminator(r->allocas));
    LLVMValueRef a = LLVMBuildAlloca(ab, t, "");
    LLVMDisposeBuilder(ab);
    return a;
}

/* An alloca for a row-wise value of instruction i (a vector of its dtype), zero at the
 * builder's position: the values carried from row to row (defer_of, ahead_of). */
LLVMValueRef
rk_zeroed_row_value(rk *r, int32_t i)
{
    kiln_dtype dt = (kiln_dtype)r->d->inst[i].dtype;
    LLVMTypeRef t = jit_em_vec(r->l, jit_em_scalar_type(r->l, dt));
    LLVMValueRef a = rk_new_alloca(r, t);
    LLVMBuildStore(r->l->b, LLVMConstNull(t), a);
    return a;
}

LLVMBasicBlockRef
rk_block(rk *r, const char *name)
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

void
rk_loop_open(rk *r, cloop *c, LLVMValueRef from, LLVMValueRef to, const char *name, bool lsr)
{
    LLVMBuilderRef b = r->l->b;
    c->var = rk_new_alloca(r, r->l->i64);
    c->to = to;
    c->lsr = lsr;
    LLVMBuildStore(b, from, c->var);
    c->head = rk_block(r, name);
    LLVMBasicBlockRef body = rk_block(r, name);
    c->exit = rk_block(r, name);
    LLVMBuildBr(b, c->head);
    LLVMPositionBuilderAtEnd(b, c->head);
    c->iv = LLVMBuildLoad2(b, r->l->i64, c->var, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, c->iv, to, ""), body, c->exit);
    LLVMPositionBuilderAtEnd(b, body);
    c->i = lsr ? c->iv : jit_em_opaque(r->l, c->iv);
}

void
rk_loop_close(rk *r, cloop *c)
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
    } else if (in->kind == JIT_LOAD && (in->cls & JIT_RANGED)) {
        /* a part of a concat along the vector dim: the lanes in its range [lo, hi) load
         * (masked: the others may lie outside its buffer), the rest are a[0]'s */
        jit_em *l = r->l;
        LLVMBuilderRef b = l->b;
        int j = in->slot;
        LLVMValueRef other = body_value(r, in->a[0]);
        LLVMValueRef lanes = LLVMBuildAdd(b, jit_em_splat(l, r->vpos), jit_em_lane_ids(l), "");
        LLVMValueRef in_box =
            LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, lanes, jit_em_splat(l, r->rlo[j]), ""),
                         LLVMBuildICmp(b, LLVMIntSLT, lanes, jit_em_splat(l, r->rhi[j]), ""), "");
        LLVMValueRef m = r->mask ? LLVMBuildAnd(b, r->mask, in_box, "") : in_box;
        int cls = JIT_CLS(in->cls) == JIT_CONTIG ? JIT_CONTIG : JIT_STRIDED;
        v = jit_em_load(l, (kiln_dtype)in->dtype, cls, r->ptr[j], r->cur[j], r->vpos,
                        stride(r, j, vdim(r)), m);
        v = LLVMBuildSelect(b, in_box, v, other, "");
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
void
rk_row_values(rk *r, int p)
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
     * later pass's stores.  Cheap passes leave it to the hardware: there it cost layernorm,
     * its x, y, gamma and beta rows and the next x and y all 4 KiB apart, in the same sets
     * of L1 (docs/benchmarking.md, "Rows kernels: prefetching the next row"). */
    for (int32_t k = 0; k < d->nstores && r->plan->prefetch_stores; k++)
        if (d->store_cls[k] == JIT_ST_SPACE)
            prefetch_slot(r, d->nloads + k, (kiln_dtype)d->inst[d->stores[k]].dtype, true);
}

/* One pass body at the current position: values, accumulation, stores over the space. */
void
rk_pass_body(rk *r, int p)
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
        if (!rp_reduces_in(d, r->ph, i, p))
            continue;
        LLVMValueRef v = body_value(r, in->a[0]);
        LLVMValueRef acc = r->acc32 && r->acc32[i] ? r->acc32[i] : r->acc[i];
        LLVMTypeRef at = r->acc32 && r->acc32[i] ? LLVMTypeOf(v) : jit_em_vec(l, rk_acc_scalar(r, in));
        if (LLVMTypeOf(v) != at)
            v = LLVMBuildFPExt(b, v, at, "");
        LLVMValueRef a = LLVMBuildLoad2(b, at, acc, "");
        if (rp_is_arg((ir_op)in->op)) {
            LLVMValueRef pos = r->cols ? jit_em_splat(l, r->rflat)
                                       : LLVMBuildAdd(b, jit_em_splat(l, LLVMBuildAdd(b, LLVMBuildMul(b, r->sub, r->inner, ""), r->vpos, "")),
                                                      jit_em_lane_ids(l), "");
            LLVMTypeRef it = jit_em_vec(l, l->i64);
            LLVMValueRef ai = LLVMBuildLoad2(b, it, r->acci[i], "");
            if (r->mask && !r->cols)
                pos = LLVMBuildSelect(b, r->mask, pos, LLVMConstAllOnes(it), "");
            rk_combine(r, in, &a, &ai, v, pos);
            LLVMBuildStore(b, ai, r->acci[i]);
        } else {
            if (r->mask && !r->cols)
                v = LLVMBuildSelect(b, r->mask, v,
                                    acc != r->acc[i] ? rk_block_identity(l)
                                                     : rk_identity(r, in), "");
            if (rp_fast_extreme(r->d, in)) {
                rk_fast_extreme_step(r, in, i, v);
                continue;
            }
            rk_combine(r, in, &a, NULL, v, NULL);
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

bool
rk_pass_needed(rk *r, int p)
{
    return rp_pass_needed_d(r->d, r->ph, p);
}

void
rk_init_accs(rk *r, int p)
{
    const jit_kdesc *d = r->d;
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        if (!rp_reduces_in(d, r->ph, i, p))
            continue;
        for (int u = 0; u < RP_UNROLL; u++) {
            LLVMBuildStore(r->l->b, rk_identity(r, in), r->accset[u][i]);
            if (r->acc32set[u] && r->acc32set[u][i])
                LLVMBuildStore(r->l->b, rk_block_identity(r->l), r->acc32set[u][i]);
            if (rp_is_arg((ir_op)in->op))
                LLVMBuildStore(r->l->b, LLVMConstAllOnes(jit_em_vec(r->l, r->l->i64)), r->acciset[u][i]);
            if (rp_fast_extreme(r->d, in)) {
                LLVMBuildStore(r->l->b,
                               LLVMConstNull(jit_em_vec(r->l, r->l->i1)),
                               r->accnanset[u][i]);
                LLVMBuildStore(r->l->b, rk_bits_identity(r, in), r->accbitsset[u][i]);
            }
        }
    }
}

/* Accumulator sets of the reductions of pass p into set 0: (0 + 1) + (2 + 3). */
void
rk_fold_sets(rk *r, int p)
{
    const jit_kdesc *d = r->d;
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        if (!rp_reduces_in(d, r->ph, i, p))
            continue;
        LLVMTypeRef at = jit_em_vec(l, rk_acc_scalar(r, in)), it = jit_em_vec(l, l->i64);
        bool arg = rp_is_arg((ir_op)in->op);
        LLVMValueRef v[RP_UNROLL], x[RP_UNROLL];
        for (int u = 0; u < RP_UNROLL; u++) {
            v[u] = LLVMBuildLoad2(b, at, r->accset[u][i], "");
            x[u] = arg ? LLVMBuildLoad2(b, it, r->acciset[u][i], "") : NULL;
            if (rp_fast_extreme(r->d, in))
                v[u] = rk_fast_extreme_value(r, in, i, u, v[u]);
        }
        for (int h = RP_UNROLL / 2; h >= 1; h /= 2)
            for (int u = 0; u < h; u++)
                rk_combine(r, in, &v[u], &x[u], v[u + h], x[u + h]);
        LLVMBuildStore(b, v[0], r->accset[0][i]);
        if (arg)
            LLVMBuildStore(b, x[0], r->acciset[0][i]);
    }
}

void
rk_use_set(rk *r, int u)
{
    r->acc = r->accset[u];
    r->acci = r->acciset[u];
    r->acc32 = r->acc32set[u];
    r->accnan = r->accnanset[u];
    r->accbits = r->accbitsset[u];
}

/* The f32 block sums of pass p's reductions into set 0's f64 accumulators, and the blocks
 * restarted.  `sets` blocks (1, or RP_UNROLL after an unrolled iteration: their tree
 * (0 + 1) + (2 + 3) in f32, two more roundings of each term, then one conversion per four
 * vectors). */
static void
flush_blocks(rk *r, int p, int sets)
{
    const jit_kdesc *d = r->d;
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    LLVMTypeRef t32 = jit_em_vec(l, l->f32), t64 = jit_em_vec(l, l->f64);
    LLVMValueRef zero = rk_block_identity(l);
    for (int32_t i = 0; i < d->ninst; i++) {
        if (!rp_reduces_in(d, r->ph, i, p) || !r->acc32set[0] || !r->acc32set[0][i])
            continue;
        LLVMValueRef v[RP_UNROLL];
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
        if (r->acc32set[0][i] && rp_reduces_in(r->d, r->ph, i, p))
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
    LLVMBasicBlockRef fb = rk_block(r, "block.flush"), cont = rk_block(r, "block.next");
    LLVMBuildCondBr(b, full, fb, cont);
    LLVMPositionBuilderAtEnd(b, fb);
    flush_blocks(r, p, 1);
    LLVMBuildBr(b, cont);
    LLVMPositionBuilderAtEnd(b, cont);
    LLVMBuildStore(b, LLVMBuildSelect(b, full, jit_em_i64(l, 0), k, ""), kvar);
}

/* Offsets of slot positions: base + sum over dims [from, to) of idx(flat) * stride, where
 * flat is decomposed row-major over those dims. */
void
rk_add_offsets(rk *r, LLVMValueRef *out, LLVMValueRef *base, LLVMValueRef flat, int from, int to)
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
    rk_pass_body(r, p);
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
    rk_pass_body(r, p);
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
        reduces = reduces || rp_reduces_in(d, r->ph, i, p);
    LLVMValueRef start = ib;
    if (!reduces) {
        int j0 = d->nloads + k0;
        kiln_dtype t0 = (kiln_dtype)d->inst[d->stores[k0]].dtype;
        int64_t es = (int64_t)kiln_dtype_size(t0);
        LLVMValueRef ok = jit_em_elem_aligned(l, r->ptr[j0], es);
        LLVMValueRef first = LLVMBuildAdd(b, r->cur[j0], ib, "");
        LLVMValueRef h = jit_em_head_lanes(l, r->ptr[j0], first, es, jit_em_stream_align(l, t0), ok,
                                           LLVMBuildSub(b, ie, ib, ""));
        masked_pass(r, p, ib, h, rk_block(r, "row.head"), rk_block(r, "row.head.done"));
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
void
rk_emit_pass(rk *r, int p, LLVMValueRef sb, LLVMValueRef se, LLVMValueRef ib, LLVMValueRef ie)
{
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    if (r->cols) {
        /* every reduced element, one vector of columns at a time */
        cloop lr;
        rk_loop_open(r, &lr, r->rb, r->re, "col.pass", true);
        r->rflat = lr.i;
        rk_add_offsets(r, r->cur, r->kbase, lr.i, r->nk, r->R);
        r->mask = r->tilemask;
        rk_pass_body(r, p);
        rk_loop_close(r, &lr);
    } else {
        cloop ls;
        rk_loop_open(r, &ls, sb, se, "row.sub", false);
        r->sub = ls.i;
        rk_add_offsets(r, r->cur, r->kbase, ls.i, r->nk, r->R - 1);
        if (r->defer && p == r->defer - 1)
            rk_add_offsets(r, r->pcur, r->pkb, ls.i, r->nk, r->R - 1);
        if (r->ahead && p == 1)
            rk_add_offsets(r, r->ncur, r->nkb, ls.i, r->nk, r->R - 1);
        /* RP_UNROLL vectors at a time on independent accumulators (cheap passes), then full
         * vectors, then the tail under a mask */
        LLVMValueRef cvar = rk_new_alloca(r, l->i64);
        LLVMBuildStore(b, ib, cvar);
        if (r->plan->streams)
            stream_row(r, p, ib, ie, cvar);
        LLVMValueRef kvar = pass_blocks(r, p) ? rk_new_alloca(r, l->i64) : NULL;
        if (kvar)
            LLVMBuildStore(b, jit_em_i64(l, 0), kvar);
        if (r->plan->unroll[p]) {
            LLVMBasicBlockRef uh = rk_block(r, "row.unroll"), ub = rk_block(r, "row.unroll.body"),
                              ud = rk_block(r, "row.unroll.done");
            LLVMBuildBr(b, uh);
            LLVMPositionBuilderAtEnd(b, uh);
            LLVMValueRef c0 = LLVMBuildLoad2(b, l->i64, cvar, "");
            LLVMValueRef cu = LLVMBuildAdd(b, c0, jit_em_i64(l, (int64_t)RP_UNROLL * l->W), "");
            LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLE, cu, ie, ""), ub, ud);
            LLVMPositionBuilderAtEnd(b, ub);
            r->mask = NULL;
            LLVMValueRef c0o = jit_em_opaque(l, c0);
            for (int u = 0; u < RP_UNROLL; u++) {
                rk_use_set(r, u);
                r->vpos = LLVMBuildAdd(b, c0o, jit_em_i64(l, (int64_t)u * l->W), "");
                r->prefetch = p == r->plan->prefetch;
                bodies(r, p);
                r->prefetch = false;
            }
            rk_use_set(r, 0);
            if (kvar)
                flush_blocks(r, p, RP_UNROLL);
            LLVMBuildStore(b, jit_em_opaque(l, cu), cvar);
            LLVMBuildBr(b, uh);
            LLVMPositionBuilderAtEnd(b, ud);
        }
        LLVMBasicBlockRef head = rk_block(r, "row.vec"), body = rk_block(r, "row.vec.body"),
                          tchk = rk_block(r, "row.tail.check"), tail = rk_block(r, "row.tail"),
                          done = rk_block(r, "row.done");
        LLVMBuildBr(b, head);
        LLVMPositionBuilderAtEnd(b, head);
        LLVMValueRef c = LLVMBuildLoad2(b, l->i64, cvar, "");
        LLVMValueRef cn = LLVMBuildAdd(b, c, jit_em_i64(l, l->W), "");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLE, cn, ie, ""), body, tchk);
        LLVMPositionBuilderAtEnd(b, body);
        r->vpos = jit_em_opaque(l, c); /* as lower.c's vector body */
        r->mask = NULL;
        r->prefetch = p == r->plan->prefetch;
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
        rk_loop_close(r, &ls);
        r->mask = NULL;
    }
    rk_fold_sets(r, p);
}

/* Finish the reductions whose operand has phase p: lanes combined (rows) or not (cols),
 * then the mean's division and the result dtype. */
void
rk_finish_reduces(rk *r, int p)
{
    const jit_kdesc *d = r->d;
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        if (!rp_reduces_in(d, r->ph, i, p))
            continue;
        LLVMTypeRef ast = rk_acc_scalar(r, in), at = jit_em_vec(l, ast);
        LLVMValueRef a = LLVMBuildLoad2(b, at, r->acc[i], "");
        LLVMValueRef ai = rp_is_arg((ir_op)in->op) ? LLVMBuildLoad2(b, jit_em_vec(l, l->i64), r->acci[i], "") : NULL;
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
                rk_combine(r, in, &av, &ax, bv, bx);
                a = av;
                ai = ax;
            }
            LLVMValueRef zero = LLVMConstInt(l->i32, 0, 0);
            a = jit_em_splat(l, LLVMBuildExtractElement(b, a, zero, ""));
            if (ai)
                ai = jit_em_splat(l, LLVMBuildExtractElement(b, ai, zero, ""));
        }
        kiln_dtype t = (kiln_dtype)in->dtype, ot = rp_operand_dtype(d, in);
        LLVMTypeRef rt = jit_em_vec(l, jit_em_scalar_type(l, t));
        LLVMValueRef v;
        if (ai) {
            v = t == KILN_DTYPE_I64 ? ai : LLVMBuildTrunc(b, ai, rt, "");
        } else {
            v = a;
            bool fl = ir_dtype_is_float(ot);
            const rp_algebra *alg = rp_algebra_of((ir_op)in->op);
            if (fl && alg->combine == RP_ADD) {
                LLVMValueRef cnt = jit_em_splat(l, LLVMBuildSIToFP(b, r->count, l->f64, ""));
                LLVMValueRef empty = LLVMBuildICmp(b, LLVMIntEQ, r->count, jit_em_i64(l, 0), "");
                if (alg->mean) {
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

void
rk_store_partial(rk *r, LLVMValueRef base)
{
    const jit_kdesc *d = r->d;
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    size_t off = 0;
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        if (in->kind != JIT_REDUCE)
            continue;
        LLVMTypeRef at = jit_em_vec(l, rk_acc_scalar(r, in));
        LLVMValueRef o = jit_em_i64(l, (int64_t)off);
        LLVMValueRef p = LLVMBuildGEP2(b, l->i8, base, &o, 1, "");
        LLVMSetAlignment(LLVMBuildStore(b, LLVMBuildLoad2(b, at, r->acc[i], ""), p), 8);
        if (rp_is_arg((ir_op)in->op)) {
            LLVMTypeRef it = jit_em_vec(l, l->i64);
            size_t vb = rp_acc_bytes(l->W, d, in) - (size_t)l->W * 8;
            LLVMValueRef o2 = jit_em_i64(l, (int64_t)(off + vb));
            LLVMValueRef p2 = LLVMBuildGEP2(b, l->i8, base, &o2, 1, "");
            LLVMSetAlignment(LLVMBuildStore(b, LLVMBuildLoad2(b, it, r->acci[i], ""), p2), 8);
        }
        off += rp_acc_bytes(l->W, d, in);
    }
}

/* Accumulators := the pieces at `base`, combined in piece order. */
void
rk_load_partials(rk *r, LLVMValueRef base, LLVMValueRef npieces)
{
    const jit_kdesc *d = r->d;
    jit_em *l = r->l;
    LLVMBuilderRef b = l->b;
    rk_init_accs(r, 0);
    cloop lq;
    rk_loop_open(r, &lq, jit_em_i64(l, 0), npieces, "pieces", false);
    LLVMValueRef pb = LLVMBuildMul(b, lq.i, jit_em_i64(l, (int64_t)r->partial_bytes), "");
    pb = LLVMBuildGEP2(b, l->i8, base, &pb, 1, "");
    size_t off = 0;
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        if (in->kind != JIT_REDUCE)
            continue;
        LLVMTypeRef at = jit_em_vec(l, rk_acc_scalar(r, in)), it = jit_em_vec(l, l->i64);
        LLVMValueRef o = jit_em_i64(l, (int64_t)off);
        LLVMValueRef x = LLVMBuildLoad2(b, at, LLVMBuildGEP2(b, l->i8, pb, &o, 1, ""), "");
        LLVMSetAlignment(x, 8);
        LLVMValueRef a = LLVMBuildLoad2(b, at, r->acc[i], "");
        if (rp_is_arg((ir_op)in->op)) {
            size_t vb = rp_acc_bytes(l->W, d, in) - (size_t)l->W * 8;
            LLVMValueRef o2 = jit_em_i64(l, (int64_t)(off + vb));
            LLVMValueRef xi = LLVMBuildLoad2(b, it, LLVMBuildGEP2(b, l->i8, pb, &o2, 1, ""), "");
            LLVMSetAlignment(xi, 8);
            LLVMValueRef ai = LLVMBuildLoad2(b, it, r->acci[i], "");
            rk_combine(r, in, &a, &ai, x, xi);
            LLVMBuildStore(b, ai, r->acci[i]);
        } else {
            rk_combine(r, in, &a, NULL, x, NULL);
        }
        LLVMBuildStore(b, a, r->acc[i]);
        off += rp_acc_bytes(l->W, d, in);
    }
    rk_loop_close(r, &lq);
}

/* Row-wise stores, after the last phase. */
void
rk_row_stores(rk *r)
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
