/* lower_reduce.c — the REDUCTION kernel kind: one LLVM function per description (its
 * other files: reduce_emit.h).
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

#include "reduce_emit.h"

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
    rk_fold_sets(r, 0);
    r->uval = r->nuv;
    rk_finish_reduces(r, 0);
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
        LLVMBasicBlockRef fromp = rk_block(r, "from.pieces"), pass0 = rk_block(r, "pass0"),
                          after = rk_block(r, "after.pass0"), wr = rk_block(r, "write.piece"),
                          fin = rk_block(r, "finish");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, mode, jit_em_i64(l, 2), ""), fromp, pass0);
        LLVMPositionBuilderAtEnd(b, fromp);
        LLVMValueRef rb = LLVMBuildMul(b, LLVMBuildMul(b, row, npieces, ""),
                                       jit_em_i64(l, (int64_t)r->partial_bytes), "");
        rk_load_partials(r, LLVMBuildGEP2(b, l->i8, partial, &rb, 1, ""), npieces);
        LLVMBuildBr(b, after);
        LLVMPositionBuilderAtEnd(b, pass0);
        rk_row_values(r, 0);
        rk_init_accs(r, 0);
        rk_emit_pass(r, 0, sb, se, ib, ie);
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, mode, jit_em_i64(l, 1), ""), wr, after);
        LLVMPositionBuilderAtEnd(b, wr);
        rk_store_partial(r, partial);
        LLVMBuildBr(b, fin);
        LLVMPositionBuilderAtEnd(b, after);
        rk_row_values(r, 0); /* again: the pieces path skipped them */
        rk_finish_reduces(r, 0);
        first = 1;
        for (int p = first; p <= r->nphases; p++)
            rk_row_values(r, p);
        rk_row_stores(r);
        LLVMBuildBr(b, fin);
        LLVMPositionBuilderAtEnd(b, fin);
        return;
    }
    for (int p = 0; p <= r->nphases; p++) {
        rk_row_values(r, p);
        if (r->defer && p == r->defer) /* in the next row's pass p - 1, or after the last row */
            continue;
        if (r->ahead && p == 0) { /* computed by the row before (or before the rows loop) */
            for (int32_t i = 0; i < r->d->ninst; i++)
                if (r->avar[i])
                    r->uval[i] = LLVMBuildLoad2(r->l->b, LLVMGetAllocatedType(r->avar[i]),
                                                r->avar[i], "");
            continue;
        }
        if (rk_pass_needed(r, p)) {
            if (r->defer && p == r->defer - 1)
                load_prev(r, r->pkb, r->puv, &r->psb);
            if (r->ahead && p == 1)
                rk_init_accs(r, 0);
            rk_init_accs(r, p);
            rk_emit_pass(r, p, sb, se, ib, ie);
            if (r->ahead && p == 1)
                finish_ahead(r);
            rk_finish_reduces(r, p);
        }
    }
    rk_row_stores(r);
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
 * columns kernel is a blockable one (the schedule's col_blocks: partial_of asks the
 * same), whose blocks take every full vector of columns: its tiles are only its last
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
    LLVMBasicBlockRef whole = rk_block(r, "tile.whole"), skip = rk_block(r, "tile.skip");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, r->mode, jit_em_i64(l, 1), ""), skip, whole);
    LLVMPositionBuilderAtEnd(b, whole);
    size_t pb = r->partial_bytes;
    r->partial_bytes = 0;
    emit_row(r, r->mode, sb, se, ib, ie, r->np, r->partial, krow);
    r->partial_bytes = pb;
    LLVMBuildBr(b, skip);
    LLVMPositionBuilderAtEnd(b, skip);
}

/* Columns kernels whose schedule says col_blocks (their reductions all read the first pass
 * and they store nothing over the space) reduce a block of up to RP_COL_BLOCK vectors of
 * columns at once: the reduced dims outside, the vectors inside, the accumulators in an
 * array in L1.  A reduced row's block is one contiguous run of memory, so a column sum
 * streams its input in order instead of walking one page per row for each vector of
 * columns. */

/* Point accumulator set 0 at element v of the block arrays. */
static void
block_accs(rk *r, LLVMValueRef *arr, LLVMValueRef *arri, LLVMValueRef v)
{
    const jit_kdesc *d = r->d;
    jit_em *l = r->l;
    for (int32_t i = 0; i < d->ninst; i++) {
        if (d->inst[i].kind != JIT_REDUCE)
            continue;
        LLVMTypeRef at = jit_em_vec(l, rk_acc_scalar(r, &d->inst[i]));
        r->accset[0][i] = LLVMBuildGEP2(l->b, at, arr[i], &v, 1, "");
        if (arri[i])
            r->acciset[0][i] = LLVMBuildGEP2(l->b, jit_em_vec(l, l->i64), arri[i], &v, 1, "");
    }
    rk_use_set(r, 0);
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
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory lowering a kernel");
    }
    r->accset[0] = cur_set;
    r->acciset[0] = cur_seti;
    r->tilemask = NULL;
    r->mask = NULL;
    /* split kernels: mode 2 takes the accumulators from the pieces, mode 1 writes them */
    LLVMBasicBlockRef from = NULL, fin = NULL, wr = NULL, done = NULL;
    if (r->partial_bytes) {
        from = rk_block(r, "block.from.pieces");
        fin = rk_block(r, "block.finish.pieces");
        wr = rk_block(r, "block.write.pieces");
        done = rk_block(r, "block.done.pieces");
        LLVMBasicBlockRef own = rk_block(r, "block.reduce");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, r->mode, jit_em_i64(l, 2), ""), from, own);
        LLVMPositionBuilderAtEnd(b, from);
        cloop lp;
        rk_loop_open(r, &lp, jit_em_i64(l, 0), nv, "block.pieces", false);
        block_accs(r, arr, arri, lp.i);
        rk_load_partials(r, piece_partial(r, LLVMBuildAdd(b, vi0, lp.i, ""), jit_em_i64(l, 0)), r->np);
        rk_loop_close(r, &lp);
        LLVMBuildBr(b, fin);
        LLVMPositionBuilderAtEnd(b, own);
    }
    cloop lv;
    rk_loop_open(r, &lv, jit_em_i64(l, 0), nv, "block.init", false);
    block_accs(r, arr, arri, lv.i);
    rk_init_accs(r, 0);
    rk_loop_close(r, &lv);
    cloop lr;
    rk_loop_open(r, &lr, r->rb, r->re, "block.pass", true);
    r->rflat = lr.i;
    rk_add_offsets(r, r->cur, r->kbase, lr.i, r->nk, r->R);
    cloop lv2;
    rk_loop_open(r, &lv2, jit_em_i64(l, 0), nv, "block.vec", true);
    r->vpos = LLVMBuildAdd(b, c, LLVMBuildMul(b, lv2.i, jit_em_i64(l, l->W), ""), "");
    block_accs(r, arr, arri, lv2.i);
    rk_row_values(r, 0);
    rk_pass_body(r, 0);
    rk_loop_close(r, &lv2);
    rk_loop_close(r, &lr);
    if (r->partial_bytes) {
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, r->mode, jit_em_i64(l, 1), ""), wr, fin);
        LLVMPositionBuilderAtEnd(b, wr);
        cloop lw;
        rk_loop_open(r, &lw, jit_em_i64(l, 0), nv, "block.write", false);
        block_accs(r, arr, arri, lw.i);
        rk_store_partial(r, piece_partial(r, LLVMBuildAdd(b, vi0, lw.i, ""), r->q));
        rk_loop_close(r, &lw);
        LLVMBuildBr(b, done);
        LLVMPositionBuilderAtEnd(b, fin);
    }
    cloop lf;
    rk_loop_open(r, &lf, jit_em_i64(l, 0), nv, "block.finish", false);
    r->vpos = LLVMBuildAdd(b, c, LLVMBuildMul(b, lf.i, jit_em_i64(l, l->W), ""), "");
    block_accs(r, arr, arri, lf.i);
    rk_row_values(r, 0);
    rk_finish_reduces(r, 0);
    for (int p = 1; p <= r->nphases; p++)
        rk_row_values(r, p);
    rk_row_stores(r);
    rk_loop_close(r, &lf);
    if (r->partial_bytes) {
        LLVMBuildBr(b, done);
        LLVMPositionBuilderAtEnd(b, done);
    }
    r->accset[0] = saved;
    r->acciset[0] = savedi;
    rk_use_set(r, 0);
    ir_free(cur_set);
    ir_free(cur_seti);
    return KILN_OK;
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
    /* the schedule the describe pass made (jit_reduce_schedule), from which the runner's
     * scratch was sized too: code spilling into rows it does not provide cannot happen */
    const rplan *plan = d->rsched;
    if (!plan)
        return ir_error(KILN_ERR_INTERNAL, "kiln: internal error: reduction kernel %s has no "
                                           "schedule", name);
    kiln_status st = KILN_OK;
    r.plan = plan;
    r.uni = plan->uni;
    r.ph = plan->ph;
    r.spill = plan->spill;
    r.nphases = plan->nphases;
    r.partial_bytes = plan->partial;
    r.defer = plan->defer;
    r.ahead = plan->ahead;
    size_t srow = plan->srow;
    r.ptr = ir_calloc(ns, sizeof(LLVMValueRef));
    r.dims = ir_calloc((size_t)r.R, sizeof(LLVMValueRef));
    r.kbase = ir_calloc(ns, sizeof(LLVMValueRef));
    r.cur = ir_calloc(ns, sizeof(LLVMValueRef));
    r.uval = ir_calloc(ni, sizeof(LLVMValueRef));
    r.val = ir_calloc(ni, sizeof(LLVMValueRef));
    bool sets_ok = true;
    for (int u = 0; u < RP_UNROLL; u++) {
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
    r.ntok = plan->streams ? ir_calloc((size_t)d->nstores + 1, sizeof(LLVMValueRef)) : NULL;
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
        (plan->streams && !r.ntok) || (r.ahead && (!r.avar || !r.nuv || !r.nkb || !r.ncur)) ||
        (r.defer && (!r.pkvar || !r.pkb || !r.pcur || !r.puvar || !r.puv))) {
        st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory lowering a kernel");
        goto done;
    }
    /* prefetching (the schedule's pass): the next row's offsets, what pass 0 reads */
    if (plan->prefetch > 0) {
        r.knext = ir_calloc(ns, sizeof(LLVMValueRef));
        r.first_read = ir_calloc(ni, sizeof(bool));
        if (!r.knext || !r.first_read) {
            st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory lowering a kernel");
            goto done;
        }
        rp_pass_needs(d, r.uni, r.spill, r.ph, 0, r.first_read);
    }

    LLVMTypeRef params[6] = {l->ptr, l->ptr, l->ptr, l->i64, l->i64, l->ptr};
    r.fn = LLVMAddFunction(l->mod, name, LLVMFunctionType(LLVMVoidTypeInContext(l->ctx), params, 6, 0));
    LLVMValueRef pptrs = LLVMGetParam(r.fn, 0), pstrides = LLVMGetParam(r.fn, 1),
                 pdims = LLVMGetParam(r.fn, 2), pbegin = LLVMGetParam(r.fn, 3),
                 pend = LLVMGetParam(r.fn, 4), paux = LLVMGetParam(r.fn, 5);
    r.pstrides = pstrides;
    r.allocas = rk_block(&r, "allocas");
    LLVMBasicBlockRef entry = rk_block(&r, "entry");
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
    /* ranged loads (a concat's parts, rows only): each slot's range along the vector dim */
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        if (in->kind != JIT_LOAD || !(in->cls & JIT_RANGED))
            continue;
        IR_ASSERT(!r.cols);
        if (!r.rlo) {
            r.rlo = ir_calloc(ns, sizeof(LLVMValueRef));
            r.rhi = ir_calloc(ns, sizeof(LLVMValueRef));
            if (!r.rlo || !r.rhi) {
                st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory lowering a kernel");
                goto done;
            }
        }
        LLVMValueRef ext = jit_em_arg(l, l->ptr, paux, 8, "");
        int64_t at = ((int64_t)in->slot * r.R + r.R - 1) * 2;
        r.rlo[in->slot] = jit_em_arg(l, l->i64, ext, at, "");
        r.rhi[in->slot] = jit_em_arg(l, l->i64, ext, at + 1, "");
    }
    for (int u = 0; u < RP_UNROLL; u++)
        for (int32_t i = 0; i < d->ninst; i++)
            if (d->inst[i].kind == JIT_REDUCE) {
                r.accset[u][i] = rk_new_alloca(&r, jit_em_vec(l, rk_acc_scalar(&r, &d->inst[i])));
                if (r.acc32set[u] && rp_blocked_sum(d, &d->inst[i]))
                    r.acc32set[u][i] = rk_new_alloca(&r, jit_em_vec(l, l->f32));
                if (rp_is_arg((ir_op)d->inst[i].op))
                    r.acciset[u][i] = rk_new_alloca(&r, jit_em_vec(l, l->i64));
                if (rp_fast_extreme(r.d, &d->inst[i])) {
                    r.accnanset[u][i] =
                        rk_new_alloca(&r, jit_em_vec(l, l->i1));
                    r.accbitsset[u][i] = rk_new_alloca(&r, jit_em_vec(l, rk_bits_type(&r, &d->inst[i])));
                }
            }
    rk_use_set(&r, 0);

    if (!r.cols) {
        LLVMValueRef *zero = ir_calloc((size_t)r.nslots + 1, sizeof(LLVMValueRef));
        if (!zero) {
            st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory lowering a kernel");
            goto done;
        }
        for (int j = 0; j < r.nslots; j++)
            zero[j] = jit_em_i64(l, 0);
        if (r.defer) {
            /* the "previous row" of the first: the first row itself, zero row values */
            rk_add_offsets(&r, r.pkb, zero, pbegin, 0, r.nk);
            for (int j = 0; j < r.nslots; j++) {
                r.pkvar[j] = rk_new_alloca(&r, l->i64);
                LLVMBuildStore(b, r.pkb[j], r.pkvar[j]);
            }
            for (int32_t i = 0; i < d->ninst; i++)
                if (carried(&r, i))
                    r.puvar[i] = rk_zeroed_row_value(&r, i);
            /* scratch row t & 1 for row t: the first row's "previous" is the other */
            r.psvar = rk_new_alloca(&r, l->ptr);
            LLVMBuildStore(b, scratch_row(&r, srow, LLVMBuildXor(b, pbegin, jit_em_i64(l, 1), "")),
                           r.psvar);
        }
        if (r.ahead) /* the rows' pass 0 results, zero before the warm-up row below */
            for (int32_t i = 0; i < d->ninst; i++)
                if (rp_reduces_in(d, r.ph, i, 0))
                    r.avar[i] = rk_zeroed_row_value(&r, i);
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
        rk_loop_open(&r, &lt, from, pend, "rows", false);
        row = lt.i;
        if (r.ahead) { /* the warm-up's row is the first; the row ahead is the next, or
                        * this one again for the last */
            LLVMValueRef warm = LLVMBuildICmp(b, LLVMIntSLT, lt.i, pbegin, "");
            row = LLVMBuildSelect(b, warm, pbegin, lt.i, "");
            LLVMValueRef nx = LLVMBuildAdd(b, lt.i, jit_em_i64(l, 1), "");
            LLVMValueRef last = LLVMBuildICmp(b, LLVMIntSGE, nx, pend, "");
            rk_add_offsets(&r, r.nkb, zero, LLVMBuildSelect(b, last, row, nx, ""), 0, r.nk);
        }
        rk_add_offsets(&r, r.kbase, zero, row, 0, r.nk);
        if (r.defer)
            r.sbase = scratch_row(&r, srow, lt.i);
        /* the row to prefetch: the next, or with pass 0 one row ahead the one after it
         * (pass 0 reads the next itself; docs/benchmarking.md, "Rows kernels: prefetching
         * the next row") */
        if (r.knext)
            rk_add_offsets(&r, r.knext, zero, LLVMBuildAdd(b, row, jit_em_i64(l, r.ahead ? 2 : 1), ""),
                        0, r.nk);
        ir_free(zero);
        r.vpos = jit_em_i64(l, 0);
        emit_row(&r, mode, sb, se, ib, ie, npieces, partial, row);
        rk_loop_close(&r, &lt);
        if (r.defer) {
            /* the last row's deferred pass, when there was a row */
            LLVMBasicBlockRef last = rk_block(&r, "row.last"), fin = rk_block(&r, "row.last.done");
            LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, pbegin, pend, ""), last, fin);
            LLVMPositionBuilderAtEnd(b, last);
            load_prev(&r, r.kbase, r.uval, &r.sbase);
            int L = r.defer;
            r.defer = 0; /* a pass of its own now */
            rk_emit_pass(&r, L, sb, se, ib, ie);
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
        LLVMValueRef pos = rk_new_alloca(&r, l->i64);
        LLVMBuildStore(b, pbegin, pos);
        LLVMBasicBlockRef rowh = rk_block(&r, "krow"), rowb = rk_block(&r, "krow.body"),
                          exit = rk_block(&r, "exit");
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
            st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory lowering a kernel");
            goto done;
        }
        for (int j = 0; j < r.nslots; j++)
            zero[j] = jit_em_i64(l, 0);
        rk_add_offsets(&r, r.kbase, zero, krow, 0, r.nk - 1);
        ir_free(zero);
        /* tiles of W columns (after blocks of them, when the kernel allows) */
        LLVMValueRef cvar = rk_new_alloca(&r, l->i64);
        LLVMBuildStore(b, col, cvar);
        if (r.plan->col_blocks) {
            LLVMValueRef *arr = ir_calloc(ni, sizeof(LLVMValueRef));
            LLVMValueRef *arri = ir_calloc(ni, sizeof(LLVMValueRef));
            if (!arr || !arri) {
                ir_free(arr);
                ir_free(arri);
                st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory lowering a kernel");
                goto done;
            }
            for (int32_t i = 0; i < d->ninst; i++)
                if (d->inst[i].kind == JIT_REDUCE) {
                    LLVMTypeRef at = jit_em_vec(l, rk_acc_scalar(&r, &d->inst[i]));
                    arr[i] = rk_new_alloca(&r, LLVMArrayType2(at, RP_COL_BLOCK));
                    if (rp_is_arg((ir_op)d->inst[i].op))
                        arri[i] = rk_new_alloca(&r, LLVMArrayType2(jit_em_vec(l, l->i64), RP_COL_BLOCK));
                }
            LLVMBasicBlockRef bh = rk_block(&r, "block"), bb = rk_block(&r, "block.body"),
                              bd = rk_block(&r, "block.done");
            LLVMBuildBr(b, bh);
            LLVMPositionBuilderAtEnd(b, bh);
            LLVMValueRef c0 = LLVMBuildLoad2(b, l->i64, cvar, "");
            LLVMValueRef nvec = LLVMBuildSDiv(b, LLVMBuildSub(b, cend, c0, ""), jit_em_i64(l, l->W), "");
            LLVMValueRef big = LLVMBuildICmp(b, LLVMIntSGT, nvec, jit_em_i64(l, RP_COL_BLOCK), "");
            nvec = LLVMBuildSelect(b, big, jit_em_i64(l, RP_COL_BLOCK), nvec, "");
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
        LLVMBasicBlockRef th = rk_block(&r, "tile"), tc = rk_block(&r, "tile.tail.check"),
                          tt = rk_block(&r, "tile.tail"), tn = rk_block(&r, "krow.next");
        LLVMBuildBr(b, th);
        LLVMPositionBuilderAtEnd(b, th);
        LLVMValueRef c = LLVMBuildLoad2(b, l->i64, cvar, "");
        if (!r.plan->col_blocks) {
            LLVMBasicBlockRef tb = rk_block(&r, "tile.body");
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
    if (plan->streams) /* the pool's join then publishes what the non-temporal stores wrote */
        jit_em_stream_fence(l);
    LLVMBuildRetVoid(b);
done:
    ir_free(r.rlo);
    ir_free(r.rhi);
    ir_free(r.ptr);
    ir_free(r.dims);
    ir_free(r.kbase);
    ir_free(r.ntok);
    ir_free(r.cur);
    ir_free(r.uval);
    ir_free(r.val);
    for (int u = 0; u < RP_UNROLL; u++) {
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
