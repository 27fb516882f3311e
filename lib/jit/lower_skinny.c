/* lower_skinny.c — the SKINNY kernel kind: a matmul whose rows per batch element fit one
 * register tile (a decoder's one-row x @ W), with B read in place, once, and no packing
 * (skinny.c's jit_skinny_choose says when; jit.h the arguments).  One call computes every
 * row of one batch element over a block of columns [j0, j1); threads take blocks of columns
 * or runs of batch elements, or (rows form, a B of one batch element large enough:
 * jit_skinny_pieces) pieces of K, whose count depends on the sizes alone, never on the
 * threads.
 *
 * The schedule (skinny.c's jit_skinny_schedule, d->sched) gives the tile, nv or nc, the rows
 * PB of B per step of k and the columns C of a call.
 *
 *   rows form (B's N stride 1: a row-major weight), two kernels a step:
 *     the core (JIT_SKINNY_CORE: one description, so one kernel, for every rows step of a
 *     dtype and tile, whatever its epilogue):
 *       for each block of PB rows of B (k):      PB streams of contiguous reads
 *         for each nv-vector group of columns:
 *           acc[r][v] = sums so far (a stack array of tile_m x C)
 *           PB steps: nv vector loads of B, tile_m broadcasts of A, tile_m * nv FMAs
 *           the sums back to the stack array
 *       then the rest of k one row at a time, then the raw sums to jit_saux.part;
 *     the step's kernel (JIT_SKINNY_ROWS, k unused): for each vector of a row, the np
 *       sums of it at part (K whole: one; in pieces: the pieces', in piece order) added to
 *       -0.0, then the epilogue.
 *     The k loop is most of a rows kernel's code: compiled once for all the rows steps of
 *     a decoder (four epilogues), its cold compile fell from 42 to 29 ms
 *     (docs/benchmarking.md, "Skinny contraction: one core for every epilogue").
 *     Each step also prefetches, into L2, the same columns of the row of B that lies
 *     sched.pf_bytes of the call's columns ahead.
 *     Each element's sum starts from -0.0 (+0.0 when k = 0) and takes one FMA per step of
 *     k, in order: with K whole, the same operations as the CONTRACTION kernel's, then
 *     -0.0 + sum, which is sum, so the same bits; in pieces, each piece's sum so, then the
 *     pieces' sums added in order.
 *   dots form (B's K stride 1, and A's: an x @ permute(W), an LM head, attention's q @ k^T):
 *     for each W columns:                         one vector of results per row
 *       for each group of nc columns:
 *         acc[r][c] = -0.0 (lanes along k); W-lane steps of FMAs over k, the last one
 *         under a mask of the lanes inside k (the others keep their sums)
 *         each accumulator summed across its lanes in a fixed tree, into a stack tile
 *       the epilogue over the tile's rows.
 *     Each load of B also prefetches, into L2, the same k of the column sched.pf_bytes of B
 *     ahead (at least the next group's).
 *     The lane sums run in a different order than the rows form's, fixed by the code: the
 *     results do not depend on the block of columns or the thread that computes them.
 *
 * Rows of the tile past the batch element's rows read A's last row (valid memory) and are
 * never stored; columns past j1 are masked in B's loads and in the stores. */
#include <llvm-c/Core.h>

#include "emit.h"

typedef jit_em L;

#define MAX_ACC 64 /* accumulators of one tile at most */

typedef struct sk {
    L *l;
    LLVMValueRef fn;
    LLVMTypeRef st, vt;
    kiln_dtype t;
    bool fl;
    unsigned es;
    int tm;       /* tile rows */
    int64_t cols; /* rows form: columns of a call at most, the stack array's row (0: dots) */
    LLVMValueRef pfb; /* rows form: B's columns of the call, as many rows ahead as are
                       * prefetched (NULL: none); indexed as the loads index B */
} sk;

static LLVMValueRef
mul_add(sk *k, LLVMValueRef x, LLVMValueRef y, LLVMValueRef acc)
{
    if (k->fl) {
        LLVMValueRef args[3] = {x, y, acc};
        LLVMTypeRef vt = k->vt;
        return jit_em_intr(k->l, "llvm.fma", &vt, 1, args, 3);
    }
    return LLVMBuildAdd(k->l->b, acc, LLVMBuildMul(k->l->b, x, y, ""), "");
}

static LLVMValueRef
vload(sk *k, LLVMValueRef base, LLVMValueRef idx, unsigned align)
{
    LLVMValueRef v = LLVMBuildLoad2(k->l->b, k->vt, LLVMBuildGEP2(k->l->b, k->st, base, &idx, 1, ""), "");
    LLVMSetAlignment(v, align);
    return v;
}

static void
vstore(sk *k, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx, unsigned align)
{
    LLVMValueRef s = LLVMBuildStore(k->l->b, v, LLVMBuildGEP2(k->l->b, k->st, base, &idx, 1, ""));
    LLVMSetAlignment(s, align);
}

/* Prefetch base[idx] (elements) into L2: read, locality 1 (prefetcht2 on x86), data.  A
 * prefetch never faults, past B's end too. */
static void
prefetch_l2(sk *k, LLVMValueRef base, LLVMValueRef idx)
{
    L *l = k->l;
    LLVMValueRef args[4] = {LLVMBuildGEP2(l->b, k->st, base, &idx, 1, ""), LLVMConstInt(l->i32, 0, 0),
                            LLVMConstInt(l->i32, 1, 0), LLVMConstInt(l->i32, 1, 0)};
    LLVMTypeRef pt = l->ptr;
    jit_em_intr(l, "llvm.prefetch", &pt, 1, args, 4);
}

/* How far ahead, in elements of B, a prefetch reaches: max(least, pf_bytes / (n * es))
 * units of `stride` elements each (rows form: rows of n columns; dots form: columns of n
 * = k elements); n * es = 0 is taken as 1, never a division by 0. */
static LLVMValueRef
prefetch_ahead(sk *k, int32_t pf_bytes, LLVMValueRef n, int64_t least, LLVMValueRef stride)
{
    L *l = k->l;
    LLVMBuilderRef b = l->b;
    LLVMValueRef ub = LLVMBuildMul(b, n, jit_em_i64(l, k->es), "");
    ub = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, ub, jit_em_i64(l, 0), ""), ub,
                         jit_em_i64(l, 1), "");
    LLVMValueRef u = LLVMBuildUDiv(b, jit_em_i64(l, pf_bytes), ub, "");
    u = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, u, jit_em_i64(l, least), ""),
                        jit_em_i64(l, least), u, "");
    return LLVMBuildMul(b, u, stride, "");
}

/* Rows form, steps p0 .. p0 + np - 1 of k over the column group at c (nv vectors, masks
 * mk[v]): the sums from the stack array y, np FMAs each, back to y. */
static void
rows_steps(sk *k, int nv, LLVMValueRef y, LLVMValueRef c, LLVMValueRef *mk, LLVMValueRef p0, int np,
           LLVMValueRef *arow, LLVMValueRef ak, LLVMValueRef bj, LLVMValueRef bs)
{
    L *l = k->l;
    LLVMBuilderRef b = l->b;
    LLVMValueRef acc[MAX_ACC], bv[8];
    unsigned ya = k->es * (unsigned)l->W > 64 ? 64 : k->es * (unsigned)l->W;
    for (int r = 0; r < k->tm; r++)
        for (int v = 0; v < nv; v++) {
            LLVMValueRef idx = LLVMBuildAdd(b, c, jit_em_i64(l, (int64_t)r * k->cols + v * l->W), "");
            acc[r * nv + v] = vload(k, y, idx, ya);
        }
    for (int u = 0; u < np; u++) {
        LLVMValueRef p = LLVMBuildAdd(b, p0, jit_em_i64(l, u), "");
        LLVMValueRef boff = LLVMBuildMul(b, p, bs, "");
        for (int v = 0; v < nv; v++) {
            LLVMValueRef cv = LLVMBuildAdd(b, c, jit_em_i64(l, (int64_t)v * l->W), "");
            bv[v] = jit_em_load(l, k->t, JIT_CONTIG, bj, boff, cv, NULL, mk[v]);
            if (k->pfb && np > 1) /* the load's index: one add, shared after early-cse; not
                                   * in the last rows, taken one at a time */
                prefetch_l2(k, k->pfb, LLVMBuildAdd(b, boff, cv, ""));
        }
        LLVMValueRef aoff = LLVMBuildMul(b, p, ak, "");
        for (int r = 0; r < k->tm; r++) {
            LLVMValueRef x = LLVMBuildLoad2(b, k->st, LLVMBuildGEP2(b, k->st, arow[r], &aoff, 1, ""), "");
            LLVMSetAlignment(x, k->es);
            LLVMValueRef xs = jit_em_splat(l, x);
            for (int v = 0; v < nv; v++)
                acc[r * nv + v] = mul_add(k, xs, bv[v], acc[r * nv + v]);
        }
    }
    for (int r = 0; r < k->tm; r++)
        for (int v = 0; v < nv; v++) {
            LLVMValueRef idx = LLVMBuildAdd(b, c, jit_em_i64(l, (int64_t)r * k->cols + v * l->W), "");
            vstore(k, acc[r * nv + v], y, idx, ya);
        }
}

/* Rows form: a pass of steps over every column group, p from p0 while p + np <= K. */
static LLVMValueRef
rows_pass(sk *k, int nv, LLVMValueRef y, LLVMValueRef ncols, LLVMValueRef p0, LLVMValueRef K, int np,
          LLVMValueRef *arow, LLVMValueRef ak, LLVMValueRef bj, LLVMValueRef bs, const char *tag)
{
    L *l = k->l;
    jit_em_loop kp, cg;
    jit_em_loop_begin(l, k->fn, &kp, p0, K, np, true, tag);
    jit_em_loop_begin(l, k->fn, &cg, jit_em_i64(l, 0), ncols, (int64_t)nv * l->W, false, "cols");
    LLVMValueRef mk[8];
    for (int v = 0; v < nv; v++) {
        LLVMValueRef rest = LLVMBuildSub(l->b, ncols, LLVMBuildAdd(l->b, cg.iv, jit_em_i64(l, (int64_t)v * l->W), ""), "");
        mk[v] = jit_em_first_lanes(l, jit_em_clamp_lanes(l, rest));
    }
    rows_steps(k, nv, y, cg.iv, mk, kp.iv, np, arow, ak, bj, bs);
    jit_em_loop_end(l, &cg);
    jit_em_loop_end(l, &kp);
    return kp.iv;
}

/* The lanes of v summed in a fixed tree: halves added until one lane is left. */
static LLVMValueRef
lane_sum(sk *k, LLVMValueRef v)
{
    L *l = k->l;
    LLVMBuilderRef b = l->b;
    for (int w = l->W; w > 1; w /= 2) {
        LLVMValueRef lo[64], hi[64];
        for (int i = 0; i < w / 2; i++) {
            lo[i] = LLVMConstInt(l->i32, (unsigned long long)i, 0);
            hi[i] = LLVMConstInt(l->i32, (unsigned long long)(i + w / 2), 0);
        }
        LLVMValueRef pv = LLVMGetPoison(LLVMTypeOf(v));
        LLVMValueRef a = LLVMBuildShuffleVector(b, v, pv, LLVMConstVector(lo, (unsigned)(w / 2)), "");
        LLVMValueRef c = LLVMBuildShuffleVector(b, v, pv, LLVMConstVector(hi, (unsigned)(w / 2)), "");
        v = k->fl ? LLVMBuildFAdd(b, a, c, "") : LLVMBuildAdd(b, a, c, "");
    }
    return LLVMBuildExtractElement(b, v, LLVMConstInt(l->i32, 0, 0), "");
}

kiln_status
jit_lower_skinny(L *l, const jit_kdesc *d, const char *name)
{
    LLVMBuilderRef b = l->b;
    int mi = -1;
    for (int32_t i = 0; i < d->ninst; i++)
        if (d->inst[i].kind == JIT_OP && d->inst[i].op == IR_OP_MATMUL)
            mi = i;
    IR_ASSERT(mi >= 0 && d->rank >= 2 && d->tile_m >= 1);
    kiln_dtype t = (kiln_dtype)d->inst[mi].dtype;
    sk k = {0};
    k.l = l;
    k.t = t;
    k.st = jit_em_scalar_type(l, t);
    k.vt = jit_em_vec(l, k.st);
    k.fl = ir_dtype_is_float(t);
    k.es = (unsigned)kiln_dtype_size(t);
    k.tm = d->tile_m;
    int n = d->sched.tile_n;
    IR_ASSERT(n >= 1 && k.tm * n <= MAX_ACC && n <= 8);
    unsigned va = k.es * (unsigned)l->W > 64 ? 64 : k.es * (unsigned)l->W;
    int R = d->rank, nslots = d->nloads + d->nstores;

    LLVMTypeRef params[6] = {l->ptr, l->ptr, l->ptr, l->i64, l->i64, l->ptr};
    k.fn = LLVMAddFunction(l->mod, name, LLVMFunctionType(LLVMVoidTypeInContext(l->ctx), params, 6, 0));
    LLVMValueRef pptrs = LLVMGetParam(k.fn, 0), pstrides = LLVMGetParam(k.fn, 1),
                 pdims = LLVMGetParam(k.fn, 2), paux = LLVMGetParam(k.fn, 5);
    size_t nvals = (size_t)nslots * 4 + (size_t)d->ninst + 1;
    LLVMValueRef *mem = ir_calloc(nvals, sizeof(LLVMValueRef));
    if (!mem)
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory lowering a kernel");
    LLVMValueRef *ptr = mem, *off = mem + nslots, *sm = mem + 2 * nslots, *istride = mem + 3 * nslots,
                 *val = mem + 4 * nslots;

    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(l->ctx, k.fn, "entry");
    LLVMPositionBuilderAtEnd(b, entry);
    /* the core: the running sums of every row over the block's columns; dots form: one
     * vector of results per row; a rows step's epilogue: none */
    k.cols = d->sched.cols;
    int64_t yn = d->bform == JIT_SKINNY_CORE   ? (int64_t)k.tm * k.cols
                 : d->bform == JIT_SKINNY_DOTS ? (int64_t)k.tm * l->W
                                               : 1;
    LLVMValueRef y = LLVMBuildArrayAlloca(b, k.st, jit_em_i64(l, yn), "y");
    LLVMSetAlignment(y, 64);
    for (int j = 0; j < nslots; j++)
        ptr[j] = jit_em_arg(l, l->ptr, pptrs, j, "");
    jit_em_params(l, d, pptrs);
    bool ranges_ok = jit_em_ranges(l, d, pptrs, ptr);
    /* jit_saux, 8-byte fields: a, b, then k, batch, m, j0, j1, a_m, a_k, bs */
    LLVMValueRef A = jit_em_arg(l, l->ptr, paux, 0, "a"), B = jit_em_arg(l, l->ptr, paux, 1, "b");
    LLVMValueRef K = jit_em_arg(l, l->i64, paux, 2, "k"), batch = jit_em_arg(l, l->i64, paux, 3, "batch"),
                 M = jit_em_arg(l, l->i64, paux, 4, "m"), J0 = jit_em_arg(l, l->i64, paux, 5, "j0"),
                 J1 = jit_em_arg(l, l->i64, paux, 6, "j1"), AM = jit_em_arg(l, l->i64, paux, 7, "a_m"),
                 AK = jit_em_arg(l, l->i64, paux, 8, "a_k"), BS = jit_em_arg(l, l->i64, paux, 9, "bs");
    /* then part, ps, pp, np: the rows form's sums (the core's store, the epilogue's loads) */
    LLVMValueRef dims[IR_MAX_RANK] = {0};
    for (int q = 0; q < R; q++)
        dims[q] = jit_em_arg(l, l->i64, pdims, q, "");
    LLVMValueRef N = dims[R - 1];
    jit_contract_load_strides(l, d, pstrides, dims, batch, off, sm, istride);
    LLVMValueRef obatch = LLVMBuildMul(b, batch, LLVMBuildMul(b, dims[R - 2], N, ""), "");
    /* A's rows; tile rows past m read row m - 1 */
    LLVMValueRef arow[MAX_ACC], mlast = LLVMBuildSub(b, M, jit_em_i64(l, 1), "");
    for (int r = 0; r < k.tm; r++) {
        LLVMValueRef rr = jit_em_i64(l, r);
        rr = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, rr, mlast, ""), rr, mlast, "");
        LLVMValueRef o = LLVMBuildMul(b, rr, AM, "");
        arow[r] = LLVMBuildGEP2(b, k.st, A, &o, 1, "");
    }
    /* floats start from -0.0 (a sum of products that are all -0.0 is -0.0), +0.0 when k = 0 */
    LLVMValueRef init = LLVMConstNull(k.vt);
    if (k.fl)
        init = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, K, jit_em_i64(l, 0), ""),
                               jit_em_splat(l, LLVMConstReal(k.st, -0.0)), init, "");
    LLVMValueRef ncols = LLVMBuildSub(b, J1, J0, "ncols");

    LLVMValueRef nvec = LLVMBuildUDiv(b, LLVMBuildAdd(b, ncols, jit_em_i64(l, l->W - 1), ""),
                                      jit_em_i64(l, l->W), "");
    if (d->bform == JIT_SKINNY_CORE) {
        /* the k loop: the sums of every row of the tile over the call's columns (rounded up
         * to vectors) in the stack array, from init; then stored raw to part */
        LLVMValueRef bj = LLVMBuildGEP2(b, k.st, B, &J0, 1, "");
        if (d->sched.pf_bytes > 0) { /* at least one row of the call's columns ahead */
            LLVMValueRef po = prefetch_ahead(&k, d->sched.pf_bytes, ncols, 1, BS);
            k.pfb = LLVMBuildGEP2(b, k.st, bj, &po, 1, "pfb");
        }
        LLVMValueRef part = jit_em_arg(l, l->ptr, paux, 10, "part"),
                     ps = jit_em_arg(l, l->i64, paux, 11, "ps");
        jit_em_loop c0;
        jit_em_loop_begin(l, k.fn, &c0, jit_em_i64(l, 0), ncols, l->W, false, "init");
        for (int r = 0; r < k.tm; r++)
            vstore(&k, init, y, LLVMBuildAdd(b, c0.iv, jit_em_i64(l, (int64_t)r * k.cols), ""), va);
        jit_em_loop_end(l, &c0);
        LLVMValueRef p = rows_pass(&k, n, y, ncols, jit_em_i64(l, 0), K, d->sched.kblock, arow, AK, bj, BS, "k");
        rows_pass(&k, n, y, ncols, p, K, 1, arow, AK, bj, BS, "k.rest");
        jit_em_loop q;
        jit_em_loop_begin(l, k.fn, &q, jit_em_i64(l, 0), LLVMBuildMul(b, M, nvec, ""), 1, false,
                          "store");
        LLVMValueRef row = LLVMBuildUDiv(b, q.iv, nvec, "row");
        LLVMValueRef c = LLVMBuildMul(b, LLVMBuildURem(b, q.iv, nvec, ""), jit_em_i64(l, l->W), "");
        LLVMValueRef accv = vload(&k, y, LLVMBuildAdd(b, LLVMBuildMul(b, row, jit_em_i64(l, k.cols), ""), c, ""), va);
        LLVMValueRef mask = jit_em_first_lanes(l, jit_em_clamp_lanes(l, LLVMBuildSub(b, ncols, c, "")));
        jit_em_store(l, t, JIT_CONTIG, accv, part, LLVMBuildMul(b, row, ps, ""), c, NULL, mask);
        jit_em_loop_end(l, &q);
    } else if (d->bform == JIT_SKINNY_ROWS) {
        /* the epilogue, one vector of a row per iteration: the np pieces' sums of it (the
         * core's) added in order to -0.0 (x + -0.0 is x; integers from 0) */
        LLVMValueRef part = jit_em_arg(l, l->ptr, paux, 10, "part"),
                     ps = jit_em_arg(l, l->i64, paux, 11, "ps"),
                     pp = jit_em_arg(l, l->i64, paux, 12, "pp"),
                     np = jit_em_arg(l, l->i64, paux, 13, "np");
        LLVMValueRef zero = k.fl ? jit_em_splat(l, LLVMConstReal(k.st, -0.0)) : LLVMConstNull(k.vt);
        jit_em_loop q;
        jit_em_loop_begin(l, k.fn, &q, jit_em_i64(l, 0), LLVMBuildMul(b, M, nvec, ""), 1, false,
                          "epi");
        LLVMValueRef row = LLVMBuildUDiv(b, q.iv, nvec, "row");
        LLVMValueRef c = LLVMBuildMul(b, LLVMBuildURem(b, q.iv, nvec, ""), jit_em_i64(l, l->W), "");
        LLVMValueRef mask =
            jit_em_first_lanes(l, jit_em_clamp_lanes(l, LLVMBuildSub(b, ncols, c, "")));
        LLVMValueRef prow = LLVMBuildMul(b, row, ps, "");
        jit_em_loop pq;
        jit_em_loop_begin(l, k.fn, &pq, jit_em_i64(l, 0), np, 1, false, "piece");
        LLVMPositionBuilderBefore(b, LLVMGetFirstInstruction(pq.head));
        LLVMValueRef acc = LLVMBuildPhi(b, k.vt, "acc");
        LLVMPositionBuilderAtEnd(b, pq.body);
        LLVMValueRef poff = LLVMBuildAdd(b, LLVMBuildMul(b, pq.iv, pp, ""), prow, "");
        LLVMValueRef pv = jit_em_load(l, t, JIT_CONTIG, part, poff, c, NULL, mask);
        LLVMValueRef sum = k.fl ? LLVMBuildFAdd(b, acc, pv, "") : LLVMBuildAdd(b, acc, pv, "");
        LLVMBasicBlockRef pend = LLVMGetInsertBlock(b);
        jit_em_loop_end(l, &pq);
        {
            LLVMValueRef in[2] = {zero, sum};
            LLVMBasicBlockRef bb[2] = {pq.pre, pend};
            LLVMAddIncoming(acc, in, bb, 2);
        }
        LLVMValueRef obase = LLVMBuildAdd(b, obatch, LLVMBuildMul(b, row, N, ""), "");
        jit_contract_epilogue(l, d, mi, acc, ptr, off, sm, istride, row, obase,
                              LLVMBuildAdd(b, J0, c, ""), mask, val);
        jit_em_loop_end(l, &q);
    } else {
        int nc = n;
        /* the same k of the column sched.pf_bytes of B ahead, at least the next group's */
        LLVMValueRef pfcols =
            d->sched.pf_bytes > 0 ? prefetch_ahead(&k, d->sched.pf_bytes, K, nc, BS) : NULL;
        jit_em_loop c0, g, kp;
        jit_em_loop_begin(l, k.fn, &c0, J0, J1, l->W, false, "cols");
        jit_em_loop_begin(l, k.fn, &g, jit_em_i64(l, 0), jit_em_i64(l, l->W), nc, false, "group");
        /* the group's columns of B, clamped to the block's last (computed, not stored) */
        LLVMValueRef bcol[8], pcol[8], jl = LLVMBuildSub(b, J1, jit_em_i64(l, 1), "");
        for (int cc = 0; cc < nc; cc++) {
            LLVMValueRef j = LLVMBuildAdd(b, LLVMBuildAdd(b, c0.iv, g.iv, ""), jit_em_i64(l, cc), "");
            j = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, j, jl, ""), j, jl, "");
            LLVMValueRef o = LLVMBuildMul(b, j, BS, "");
            bcol[cc] = LLVMBuildGEP2(b, k.st, B, &o, 1, "");
            if (pfcols)
                pcol[cc] = LLVMBuildGEP2(b, k.st, bcol[cc], &pfcols, 1, "");
        }
        LLVMValueRef acc[MAX_ACC], phi[MAX_ACC], av[MAX_ACC], bv[8];
        int na = k.tm * nc;
        for (int q = 0; q < na; q++)
            acc[q] = init;
        /* whole vectors of k */
        jit_em_loop_begin(l, k.fn, &kp, jit_em_i64(l, 0), K, l->W, true, "k");
        LLVMPositionBuilderAtEnd(b, kp.head);
        LLVMPositionBuilderBefore(b, LLVMGetFirstInstruction(kp.head));
        for (int q = 0; q < na; q++)
            phi[q] = LLVMBuildPhi(b, k.vt, "acc");
        LLVMPositionBuilderAtEnd(b, kp.body);
        LLVMValueRef cur[MAX_ACC];
        for (int r = 0; r < k.tm; r++)
            av[r] = vload(&k, arow[r], kp.iv, k.es);
        for (int cc = 0; cc < nc; cc++) {
            bv[cc] = vload(&k, bcol[cc], kp.iv, k.es);
            if (pfcols)
                prefetch_l2(&k, pcol[cc], kp.iv);
        }
        for (int r = 0; r < k.tm; r++)
            for (int cc = 0; cc < nc; cc++)
                cur[r * nc + cc] = mul_add(&k, av[r], bv[cc], phi[r * nc + cc]);
        LLVMBasicBlockRef kbody_end = LLVMGetInsertBlock(b);
        jit_em_loop_end(l, &kp);
        for (int q = 0; q < na; q++) {
            LLVMValueRef in[2] = {acc[q], cur[q]};
            LLVMBasicBlockRef bb[2] = {kp.pre, kbody_end};
            LLVMAddIncoming(phi[q], in, bb, 2);
            acc[q] = phi[q];
        }
        /* the last part of a vector of k, under a mask; lanes past k keep their sums */
        LLVMValueRef rest = LLVMBuildSub(b, K, kp.iv, "");
        LLVMBasicBlockRef tail = LLVMAppendBasicBlockInContext(l->ctx, k.fn, "k.tail");
        LLVMBasicBlockRef sums = LLVMAppendBasicBlockInContext(l->ctx, k.fn, "sums");
        LLVMBasicBlockRef from = LLVMGetInsertBlock(b);
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, rest, jit_em_i64(l, 0), ""), tail, sums);
        LLVMPositionBuilderAtEnd(b, tail);
        LLVMValueRef mask = jit_em_first_lanes(l, jit_em_clamp_lanes(l, rest)), tacc[MAX_ACC];
        for (int r = 0; r < k.tm; r++)
            av[r] = jit_em_load(l, t, JIT_CONTIG, arow[r], kp.iv, jit_em_i64(l, 0), NULL, mask);
        for (int cc = 0; cc < nc; cc++)
            bv[cc] = jit_em_load(l, t, JIT_CONTIG, bcol[cc], kp.iv, jit_em_i64(l, 0), NULL, mask);
        for (int r = 0; r < k.tm; r++)
            for (int cc = 0; cc < nc; cc++) {
                int q = r * nc + cc;
                tacc[q] = LLVMBuildSelect(b, mask, mul_add(&k, av[r], bv[cc], acc[q]), acc[q], "");
            }
        LLVMBuildBr(b, sums);
        LLVMPositionBuilderAtEnd(b, sums);
        for (int q = 0; q < na; q++) {
            LLVMValueRef ph = LLVMBuildPhi(b, k.vt, "");
            LLVMValueRef in[2] = {acc[q], tacc[q]};
            LLVMBasicBlockRef bb[2] = {from, tail};
            LLVMAddIncoming(ph, in, bb, 2);
            acc[q] = ph;
        }
        for (int r = 0; r < k.tm; r++)
            for (int cc = 0; cc < nc; cc++) {
                LLVMValueRef s = lane_sum(&k, acc[r * nc + cc]);
                LLVMValueRef idx = LLVMBuildAdd(b, g.iv, jit_em_i64(l, (int64_t)r * l->W + cc), "");
                LLVMValueRef stp = LLVMBuildStore(b, s, LLVMBuildGEP2(b, k.st, y, &idx, 1, ""));
                LLVMSetAlignment(stp, k.es);
            }
        jit_em_loop_end(l, &g);
        /* the epilogue of the W columns, row by row */
        LLVMValueRef cmask = jit_em_first_lanes(l, jit_em_clamp_lanes(l, LLVMBuildSub(b, J1, c0.iv, "")));
        jit_em_loop rl;
        jit_em_loop_begin(l, k.fn, &rl, jit_em_i64(l, 0), M, 1, false, "epi");
        LLVMValueRef accv = vload(&k, y, LLVMBuildMul(b, rl.iv, jit_em_i64(l, l->W), ""), va);
        LLVMValueRef obase = LLVMBuildAdd(b, obatch, LLVMBuildMul(b, rl.iv, N, ""), "");
        jit_contract_epilogue(l, d, mi, accv, ptr, off, sm, istride, rl.iv, obase, c0.iv, cmask, val);
        jit_em_loop_end(l, &rl);
        jit_em_loop_end(l, &c0);
    }
    LLVMBuildRetVoid(b);
    ir_free(mem);
    jit_em_ranges_free(l);
    return ranges_ok ? KILN_OK : ir_error(KILN_ERR_NOMEM, "kiln: out of memory lowering a kernel");
}
