/* lower_contract.c — the CONTRACTION kernel kind (matmul): one LLVM function per
 * description (see jit.h), the macro-kernel over one block of rows and columns:
 *
 *   for each nr-column panel of B (j):         the panel (k x nr) stays in L1/L2
 *     for each mr-row panel of A (i):          the A block (rows x k) stays in L2
 *       tile:  mr x nrv accumulator vectors in registers; per step of k, nrv vector loads
 *              of B and mr broadcasts of A, mr * nrv FMAs (ints: multiply and add,
 *              wrapping); the k loop unrolled d->sched.kunroll times (the tile and the
 *              unrolling are the schedule's: ksched.c's jit_contract_schedule);
 *       epilogue: the tile goes to a stack array, then a loop over the vectors of its valid
 *              rows computes the epilogue instructions (emit.c's, as in an elementwise
 *              kernel) and stores the results, under the mask of the lanes inside the
 *              block (all but at the right edge): one copy of the epilogue's code.
 *
 * Every element's sum runs over k in order 0..K-1 with one FMA per step, whatever tile,
 * block or thread computes it: results do not depend on the blocking or thread count.
 * The panels are packed by contract.c, zero beyond M and N, so the tile loop never
 * reads outside them. */
#include <string.h>

#include <llvm-c/Core.h>

#include "emit.h"

typedef jit_em L;

#define MAX_TILE 64 /* mr * nrv accumulators at most */

typedef struct cstate {
    LLVMTypeRef st, vt; /* scalar and vector type of the accumulators */
    bool fl;
    int mr, nrv, nr;
    unsigned valign, es;
} cstate;

/* acc[r][v] += a[p][r] * b[p][v] for one step p of k. */
static void
kstep(L *l, const cstate *cs, LLVMValueRef ap, LLVMValueRef bp, LLVMValueRef p, LLVMValueRef *acc)
{
    LLVMBuilderRef b = l->b;
    LLVMValueRef bv[8];
    LLVMValueRef pb = LLVMBuildMul(b, p, jit_em_i64(l, cs->nr), "");
    for (int v = 0; v < cs->nrv; v++) {
        LLVMValueRef idx = LLVMBuildAdd(b, pb, jit_em_i64(l, (int64_t)v * l->W), "");
        bv[v] = LLVMBuildLoad2(b, cs->vt, LLVMBuildGEP2(b, cs->st, bp, &idx, 1, ""), "");
        LLVMSetAlignment(bv[v], cs->valign);
    }
    LLVMValueRef pa = LLVMBuildMul(b, p, jit_em_i64(l, cs->mr), "");
    for (int r = 0; r < cs->mr; r++) {
        LLVMValueRef idx = LLVMBuildAdd(b, pa, jit_em_i64(l, r), "");
        LLVMValueRef x = LLVMBuildLoad2(b, cs->st, LLVMBuildGEP2(b, cs->st, ap, &idx, 1, ""), "");
        LLVMValueRef xs = jit_em_splat(l, x);
        for (int v = 0; v < cs->nrv; v++) {
            LLVMValueRef *a = &acc[r * cs->nrv + v];
            if (cs->fl) {
                LLVMValueRef args[3] = {xs, bv[v], *a};
                LLVMTypeRef vt = cs->vt;
                *a = jit_em_intr(l, "llvm.fma", &vt, 1, args, 3);
            } else {
                *a = LLVMBuildAdd(b, *a, LLVMBuildMul(b, xs, bv[v], ""), "");
            }
        }
    }
}

/* A loop over k in steps of `step` while p + step <= k, carrying the accumulators. */
static LLVMValueRef
kloop(L *l, LLVMValueRef fn, const cstate *cs, LLVMValueRef ap, LLVMValueRef bp, LLVMValueRef k,
      LLVMValueRef p0, int step, LLVMValueRef *acc, const char *tag)
{
    LLVMBuilderRef b = l->b;
    int n = cs->mr * cs->nrv;
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
    LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(l->ctx, fn, tag);
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(l->ctx, fn, "k.body");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(l->ctx, fn, "k.done");
    LLVMBuildBr(b, head);
    LLVMPositionBuilderAtEnd(b, head);
    LLVMValueRef p = LLVMBuildPhi(b, l->i64, "p");
    LLVMValueRef phi[MAX_TILE], cur[MAX_TILE];
    for (int i = 0; i < n; i++) {
        phi[i] = LLVMBuildPhi(b, cs->vt, "acc");
        cur[i] = phi[i];
    }
    LLVMValueRef pn = LLVMBuildAdd(b, p, jit_em_i64(l, step), "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLE, pn, k, ""), body, done);
    LLVMPositionBuilderAtEnd(b, body);
    for (int u = 0; u < step; u++)
        kstep(l, cs, ap, bp, LLVMBuildAdd(b, p, jit_em_i64(l, u), ""), cur);
    LLVMBasicBlockRef body_end = LLVMGetInsertBlock(b);
    LLVMBuildBr(b, head);
    LLVMBasicBlockRef bb[2] = {pre, body_end};
    LLVMValueRef pin[2] = {p0, pn};
    LLVMAddIncoming(p, pin, bb, 2);
    for (int i = 0; i < n; i++) {
        LLVMValueRef in[2] = {acc[i], cur[i]};
        LLVMAddIncoming(phi[i], in, bb, 2);
        acc[i] = phi[i];
    }
    LLVMPositionBuilderAtEnd(b, done);
    return p;
}

/* The latch of a loop over panels, in block `at`: index idx (from idx0, entered from `pre`)
 * steps by `step`, panel pointer ptr (from ptr0) by `elems` elements; back to `head`. */
static void
panel_next(L *l, const cstate *cs, LLVMBasicBlockRef at, LLVMBasicBlockRef head, LLVMValueRef idx,
           LLVMValueRef ptr, int step, LLVMValueRef elems, LLVMBasicBlockRef pre, LLVMValueRef idx0,
           LLVMValueRef ptr0)
{
    LLVMBuilderRef b = l->b;
    LLVMPositionBuilderAtEnd(b, at);
    LLVMValueRef in[2] = {idx0, jit_em_opaque(l, LLVMBuildAdd(b, idx, jit_em_i64(l, step), ""))};
    LLVMValueRef pin[2] = {ptr0, jit_em_opaque(l, LLVMBuildGEP2(b, cs->st, ptr, &elems, 1, ""))};
    LLVMBuildBr(b, head);
    LLVMBasicBlockRef bb[2] = {pre, at};
    LLVMAddIncoming(idx, in, bb, 2);
    LLVMAddIncoming(ptr, pin, bb, 2);
}

/* A loop in block `at` over the tile's rows, then on to `next`: dir 0 fills the stack
 * array `tile` with `fill` (NULL: from the partial sums in c), dir 1 copies it to c. */
static void
tile_rows(L *l, const cstate *cs, LLVMValueRef fn, LLVMBasicBlockRef at, LLVMBasicBlockRef next,
          LLVMValueRef tile, LLVMValueRef c, LLVMValueRef cti, LLVMValueRef ldc, LLVMValueRef fill,
          int dir)
{
    LLVMBuilderRef b = l->b;
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(l->ctx, fn, "tile.row");
    LLVMPositionBuilderAtEnd(b, at);
    LLVMBuildBr(b, body);
    LLVMPositionBuilderAtEnd(b, body);
    LLVMValueRef r = LLVMBuildPhi(b, l->i64, "r");
    LLVMValueRef crow = LLVMBuildAdd(b, cti, LLVMBuildMul(b, r, ldc, ""), "");
    for (int v = 0; v < cs->nrv; v++) {
        LLVMValueRef q = LLVMBuildAdd(b, LLVMBuildMul(b, r, jit_em_i64(l, cs->nrv), ""), jit_em_i64(l, v), "");
        LLVMValueRef tp = LLVMBuildGEP2(b, cs->vt, tile, &q, 1, "");
        LLVMValueRef ci = LLVMBuildAdd(b, crow, jit_em_i64(l, (int64_t)v * l->W), "");
        unsigned ca = cs->es; /* c holds whole tiles at element alignment */
        LLVMValueRef x, st;
        if (dir == 0 && fill) {
            st = LLVMBuildStore(b, fill, tp);
            LLVMSetAlignment(st, cs->valign);
            continue;
        }
        LLVMValueRef cp = fill ? NULL : LLVMBuildGEP2(b, cs->st, c, &ci, 1, "");
        if (dir == 0) {
            x = LLVMBuildLoad2(b, cs->vt, cp, "");
            LLVMSetAlignment(x, ca);
            st = LLVMBuildStore(b, x, tp);
            LLVMSetAlignment(st, cs->valign);
        } else {
            x = LLVMBuildLoad2(b, cs->vt, tp, "");
            LLVMSetAlignment(x, cs->valign);
            st = LLVMBuildStore(b, x, cp);
            LLVMSetAlignment(st, ca);
        }
    }
    LLVMValueRef r2 = jit_em_opaque(l, LLVMBuildAdd(b, r, jit_em_i64(l, 1), ""));
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, r2, jit_em_i64(l, cs->mr), ""), body, next);
    LLVMValueRef in[2] = {jit_em_i64(l, 0), r2};
    LLVMBasicBlockRef bb[2] = {at, body};
    LLVMAddIncoming(r, in, bb, 2);
}

/* The epilogue of tile row `row` (an absolute row index), vector v of the tile: every
 * instruction, then the stores; mask NULL = all lanes.  (SKINNY kernels share it.) */
void
jit_contract_epilogue(L *l, const jit_kdesc *d, int mi, LLVMValueRef accv, LLVMValueRef *ptr,
                      LLVMValueRef *off, LLVMValueRef *sm, LLVMValueRef *istride, LLVMValueRef row,
                      LLVMValueRef obase, LLVMValueRef c, LLVMValueRef mask, LLVMValueRef *val)
{
    LLVMBuilderRef b = l->b;
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        if (i == mi) {
            val[i] = accv;
        } else if (in->kind == JIT_LOAD) {
            LLVMValueRef o = LLVMBuildAdd(b, off[in->slot], LLVMBuildMul(b, row, sm[in->slot], ""), "");
            val[i] = jit_em_load(l, (kiln_dtype)in->dtype, JIT_CLS(in->cls), ptr[in->slot], o, c,
                                 istride[in->slot], mask);
        } else {
            val[i] = jit_em_inst(l, d, in, val);
        }
    }
    for (int32_t k = 0; k < d->nstores; k++)
        jit_em_store_space(l, d, k, val[d->stores[k]], ptr[d->nloads + k], obase, c, mask);
}

void
jit_contract_load_strides(L *l, const jit_kdesc *d, LLVMValueRef pstrides, const LLVMValueRef *dims,
                          LLVMValueRef batch, LLVMValueRef *off, LLVMValueRef *sm,
                          LLVMValueRef *istride)
{
    int R = d->rank;
    /* per load: the batch element's offset, the row stride and the column stride */
    for (int j = 0; j < d->nloads; j++) {
        sm[j] = jit_em_arg(l, l->i64, pstrides, (int64_t)j * R + R - 2, "");
        istride[j] = jit_em_arg(l, l->i64, pstrides, (int64_t)j * R + R - 1, "");
        off[j] = jit_em_i64(l, 0);
    }
    jit_em_delinearise(l, batch, R - 3, dims, R, d->nloads, pstrides, off, NULL, NULL);
}

kiln_status
jit_lower_contract(L *l, const jit_kdesc *d, const char *name)
{
    LLVMBuilderRef b = l->b;
    int mi = -1;
    for (int32_t i = 0; i < d->ninst; i++)
        if (d->inst[i].kind == JIT_OP && d->inst[i].op == IR_OP_MATMUL)
            mi = i;
    IR_ASSERT(mi >= 0 && d->rank >= 2);
    kiln_dtype t = (kiln_dtype)d->inst[mi].dtype;
    cstate cs;
    cs.mr = d->sched.mr;
    cs.nrv = d->sched.nrv;
    cs.nr = d->sched.nr;
    IR_ASSERT(cs.mr >= 1 && cs.nrv >= 1 && cs.mr * cs.nrv <= MAX_TILE && d->sched.kunroll >= 1);
    cs.st = jit_em_scalar_type(l, t);
    cs.vt = jit_em_vec(l, cs.st);
    cs.fl = ir_dtype_is_float(t);
    cs.es = (unsigned)kiln_dtype_size(t);
    cs.valign = (unsigned)(l->W * (int)kiln_dtype_size(t));
    if (cs.valign > 64)
        cs.valign = 64;
    int R = d->rank, nslots = d->nloads + d->nstores;

    LLVMTypeRef params[6] = {l->ptr, l->ptr, l->ptr, l->i64, l->i64, l->ptr};
    LLVMValueRef fn = LLVMAddFunction(l->mod, name,
                                      LLVMFunctionType(LLVMVoidTypeInContext(l->ctx), params, 6, 0));
    LLVMValueRef pptrs = LLVMGetParam(fn, 0), pstrides = LLVMGetParam(fn, 1),
                 pdims = LLVMGetParam(fn, 2), paux = LLVMGetParam(fn, 5);
    size_t nv = (size_t)nslots * 4 + (size_t)d->ninst + 1;
    LLVMValueRef *mem = ir_calloc(nv, sizeof(LLVMValueRef));
    if (!mem)
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory lowering a kernel");
    LLVMValueRef *ptr = mem, *off = mem + nslots, *sm = mem + 2 * nslots, *istride = mem + 3 * nslots,
                 *val = mem + 4 * nslots;

    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(l->ctx, fn, "entry");
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef tile = LLVMBuildArrayAlloca(b, cs.vt, jit_em_i64(l, cs.mr * cs.nrv), "tile");
    LLVMSetAlignment(tile, cs.valign);
    for (int j = 0; j < nslots; j++) {
        ptr[j] = jit_em_arg(l, l->ptr, pptrs, j, "");
    }
    jit_em_params(l, d, pptrs);
    bool ranges_ok = jit_em_ranges(l, d, pptrs, ptr);
    /* jit_caux, 8-byte fields: a, b, then k, batch, i0, i1, j0, j1, kstride, then c, then
     * ldc, kflags */
    LLVMValueRef ap0 = jit_em_arg(l, l->ptr, paux, 0, "a"), bp0 = jit_em_arg(l, l->ptr, paux, 1, "b");
    LLVMValueRef cbuf = jit_em_arg(l, l->ptr, paux, 9, "c"), ax[10];
    for (int f = 0; f < 10; f++)
        if (f != 7) /* c */
            ax[f] = jit_em_arg(l, l->i64, paux, 2 + f, "");
    LLVMValueRef K = ax[0], batch = ax[1], I0 = ax[2], I1 = ax[3], J0 = ax[4], J1 = ax[5];
    LLVMValueRef KS = ax[6], LDC = ax[8], KF = ax[9];
    LLVMValueRef accumulate = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, KF, jit_em_i64(l, JIT_K_ACCUMULATE), ""),
                                            jit_em_i64(l, 0), "");
    LLVMValueRef final = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, KF, jit_em_i64(l, JIT_K_FINAL), ""),
                                       jit_em_i64(l, 0), "");
    LLVMValueRef dims[IR_MAX_RANK] = {0};
    for (int k = 0; k < R; k++) {
        dims[k] = jit_em_arg(l, l->i64, pdims, k, "");
    }
    LLVMValueRef N = dims[R - 1];
    jit_contract_load_strides(l, d, pstrides, dims, batch, off, sm, istride);
    /* first output element of the batch element: batch * M * N */
    LLVMValueRef obatch = LLVMBuildMul(b, batch, LLVMBuildMul(b, dims[R - 2], N, ""), "");
    LLVMValueRef apanel = LLVMBuildMul(b, KS, jit_em_i64(l, cs.mr), ""); /* elements */
    LLVMValueRef bpanel = LLVMBuildMul(b, KS, jit_em_i64(l, cs.nr), "");

    LLVMBasicBlockRef jhead = LLVMAppendBasicBlockInContext(l->ctx, fn, "j");
    LLVMBasicBlockRef ipre = LLVMAppendBasicBlockInContext(l->ctx, fn, "i.pre");
    LLVMBasicBlockRef ihead = LLVMAppendBasicBlockInContext(l->ctx, fn, "i");
    LLVMBasicBlockRef tilebb = LLVMAppendBasicBlockInContext(l->ctx, fn, "tile");
    LLVMBasicBlockRef jnext = LLVMAppendBasicBlockInContext(l->ctx, fn, "j.next");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(l->ctx, fn, "exit");
    LLVMBuildBr(b, jhead);

    /* j: phi j, bp */
    LLVMPositionBuilderAtEnd(b, jhead);
    LLVMValueRef j = LLVMBuildPhi(b, l->i64, "j");
    LLVMValueRef bp = LLVMBuildPhi(b, l->ptr, "bp");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, j, J1, ""), ipre, exit);
    LLVMPositionBuilderAtEnd(b, ipre);
    LLVMBuildBr(b, ihead);

    /* i: phi i, ap */
    LLVMPositionBuilderAtEnd(b, ihead);
    LLVMValueRef i = LLVMBuildPhi(b, l->i64, "i");
    LLVMValueRef ap = LLVMBuildPhi(b, l->ptr, "ap");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, i, I1, ""), tilebb, jnext);

    /* the tile */
    LLVMPositionBuilderAtEnd(b, tilebb);
    /* floats start from -0.0, so a sum of products that are all -0.0 is -0.0 (the
     * reference starts from the first product); +0.0 when k = 0 */
    LLVMValueRef acc[MAX_TILE], zero = LLVMConstNull(cs.vt);
    if (cs.fl) {
        LLVMValueRef nz = jit_em_splat(l, LLVMConstReal(cs.st, -0.0));
        zero = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, K, jit_em_i64(l, 0), ""), nz, zero, "");
    }
    /* the tile starts in the stack array: zero, or for a later slice of k the sums so far
     * from c (tile element (r, v) at c[(i - i0 + r) * ldc + j - j0 + v * W]); loops, so
     * the k loop's 28 accumulators are the only unrolled code */
    int ntile = cs.mr * cs.nrv;
    LLVMValueRef cti = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildSub(b, i, I0, ""), LDC, ""),
                                    LLVMBuildSub(b, j, J0, ""), "");
    LLVMBasicBlockRef tk = LLVMAppendBasicBlockInContext(l->ctx, fn, "tile.k");
    LLVMBasicBlockRef tzero = LLVMAppendBasicBlockInContext(l->ctx, fn, "tile.zero");
    LLVMBasicBlockRef tload = LLVMAppendBasicBlockInContext(l->ctx, fn, "tile.load");
    LLVMBuildCondBr(b, accumulate, tload, tzero);
    tile_rows(l, &cs, fn, tzero, tk, tile, cbuf, cti, LDC, zero, 0);
    tile_rows(l, &cs, fn, tload, tk, tile, cbuf, cti, LDC, NULL, 0);
    LLVMPositionBuilderAtEnd(b, tk);
    for (int q = 0; q < ntile; q++) {
        LLVMValueRef idx = jit_em_i64(l, q);
        acc[q] = LLVMBuildLoad2(b, cs.vt, LLVMBuildGEP2(b, cs.vt, tile, &idx, 1, ""), "");
        LLVMSetAlignment(acc[q], cs.valign);
    }
    LLVMValueRef p = kloop(l, fn, &cs, ap, bp, K, jit_em_i64(l, 0), d->sched.kunroll, acc, "k.main");
    if (d->sched.kunroll > 1)
        kloop(l, fn, &cs, ap, bp, K, p, 1, acc, "k.rest");
    for (int q = 0; q < ntile; q++) {
        LLVMValueRef idx = jit_em_i64(l, q);
        LLVMValueRef s = LLVMBuildStore(b, acc[q], LLVMBuildGEP2(b, cs.vt, tile, &idx, 1, ""));
        LLVMSetAlignment(s, cs.valign);
    }
    /* not the last slice: the sums go back to c, no epilogue */
    LLVMBasicBlockRef tpart = LLVMAppendBasicBlockInContext(l->ctx, fn, "tile.partial");
    LLVMBasicBlockRef tfinal = LLVMAppendBasicBlockInContext(l->ctx, fn, "tile.final");
    LLVMBuildCondBr(b, final, tfinal, tpart);
    LLVMPositionBuilderAtEnd(b, tfinal);
    /* rows of this tile inside the block */
    LLVMValueRef left = LLVMBuildSub(b, I1, i, "");
    LLVMValueRef mrc = jit_em_i64(l, cs.mr);
    LLVMValueRef rows = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, left, mrc, ""), left, mrc, "rows");
    /* the epilogue: one vector of the tile per iteration, q = r * nrv + v over the valid
     * rows, under the mask of the lanes left of the block (all of them but at the right
     * edge); one copy of the epilogue's code keeps compile time down */
    LLVMValueRef nq = LLVMBuildMul(b, rows, jit_em_i64(l, cs.nrv), "");
    jit_em_loop eq;
    jit_em_loop_begin(l, fn, &eq, jit_em_i64(l, 0), nq, 1, false, "epi");
    LLVMBasicBlockRef inext = eq.done; /* also where a partial k slice goes */
    tile_rows(l, &cs, fn, tpart, inext, tile, cbuf, cti, LDC, NULL, 1);
    LLVMPositionBuilderAtEnd(b, eq.body);
    LLVMValueRef q = eq.iv;
    LLVMValueRef nrvc = jit_em_i64(l, cs.nrv);
    LLVMValueRef row = LLVMBuildAdd(b, i, LLVMBuildUDiv(b, q, nrvc, ""), "row");
    LLVMValueRef c = LLVMBuildAdd(b, j, LLVMBuildMul(b, LLVMBuildURem(b, q, nrvc, ""), jit_em_i64(l, l->W), ""), "c");
    LLVMValueRef obase = LLVMBuildAdd(b, obatch, LLVMBuildMul(b, row, N, ""), "");
    LLVMValueRef accv = LLVMBuildLoad2(b, cs.vt, LLVMBuildGEP2(b, cs.vt, tile, &q, 1, ""), "");
    LLVMSetAlignment(accv, cs.valign);
    /* lanes left in this vector */
    LLVMValueRef restv = jit_em_clamp_lanes(l, LLVMBuildSub(b, J1, c, ""));
    jit_contract_epilogue(l, d, mi, accv, ptr, off, sm, istride, row, obase, c,
                          jit_em_first_lanes(l, restv), val);
    jit_em_loop_end(l, &eq);

    panel_next(l, &cs, inext, ihead, i, ap, cs.mr, apanel, ipre, I0, ap0); /* next panel of A */
    panel_next(l, &cs, jnext, jhead, j, bp, cs.nr, bpanel, entry, J0, bp0); /* next panel of B */

    LLVMPositionBuilderAtEnd(b, exit);
    LLVMBuildRetVoid(b);
    ir_free(mem);
    jit_em_ranges_free(l);
    return ranges_ok ? KILN_OK : ir_error(KILN_ERR_NOMEM, "kiln: out of memory lowering a kernel");
}
