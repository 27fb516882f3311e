/* lower.c — the ELEMENTWISE kernel kind: one LLVM function per description (see jit.h for
 * the signature; module.c puts the kernels of every kind into modules and compiles them).
 *
 *   rows:  the iteration space is walked row by row (the last dim is the row); a row's
 *          load offsets come from its outer indices and the run-time strides;
 *   body:  W lanes at a time (W = vector bits / 32: 16 with AVX-512, 8 with AVX2);
 *   tail:  the same instructions once more under a lane mask (masked loads and stores),
 *          so the tail computes exactly the function the body does;
 *   head:  that masked block first runs over the lanes before the schedule's peeled
 *          store's next 64-byte boundary, so the body stores whole aligned vectors
 *          (segments of at least the schedule's peel_min vectors; see ksched.c).  A kernel
 *          with streaming stores (JIT_ST_STREAM) peels to the first streaming store and
 *          always, and its body stores carry
 *          !nontemporal (vmovntps); another streaming store whose buffer is not aligned
 *          alike stores ordinarily (a run-time check per call), and the kernel fences
 *          before it returns.
 *
 * The numerics of each instruction are emit.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>

#include "emit.h"

typedef jit_em L;

/* ---- the kernel function ------------------------------------------------------------------ */

typedef struct kstate {
    LLVMValueRef *ptr;    /* per load/store slot: base pointer */
    LLVMValueRef *off;    /* per load: element offset of the current row */
    LLVMValueRef *istride; /* per load: inner stride */
    LLVMValueRef out_base; /* element index of the row start in the stored buffers */
    LLVMValueRef *val;    /* per instruction */
    LLVMValueRef *rowok;  /* per ranged load: the row is inside its box (i1) */
    LLVMValueRef *ext;    /* per load: lo, hi of the last dim (ranged) or the gather axis */
    LLVMValueRef *nt_ok;  /* per store: i1, its body stores may stream (NULL: ordinary) */
    unsigned *nt_align;   /* per streaming store: the alignment its body stores have */
    int peel;             /* the store whose alignment rows are peeled to, or -1 */
    LLVMValueRef peel_ok; /* i1: its buffer is aligned to its element size */
    unsigned peel_align;  /* bytes */
} kstate;

/* A ranged or indexed load (see jit.h). */
static LLVMValueRef
special_load(L *l, const jit_kinst *in, kstate *s, LLVMValueRef c, LLVMValueRef mask)
{
    LLVMBuilderRef b = l->b;
    kiln_dtype t = (kiln_dtype)in->dtype;
    int j = in->slot;
    LLVMValueRef lanes = LLVMBuildAdd(b, jit_em_splat(l, c), jit_em_lane_ids(l), "");
    LLVMValueRef m = mask ? mask : jit_em_all_true(l);
    if (in->cls & JIT_RANGED) {
        LLVMValueRef lo = s->ext[2 * j], hi = s->ext[2 * j + 1];
        LLVMValueRef in_box = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, lanes, jit_em_splat(l, lo), ""),
                                           LLVMBuildICmp(b, LLVMIntSLT, lanes, jit_em_splat(l, hi), ""), "");
        in_box = LLVMBuildAnd(b, in_box, jit_em_splat(l, s->rowok[j]), "");
        m = LLVMBuildAnd(b, m, in_box, "");
        int cls = JIT_CLS(in->cls) == JIT_CONTIG ? JIT_CONTIG : JIT_STRIDED;
        LLVMValueRef v = jit_em_load(l, t, cls, s->ptr[j], s->off[j], c, s->istride[j], m);
        return LLVMBuildSelect(b, in_box, v, s->val[in->a[0]], "");
    }
    /* indexed: lane element off + (c + lane) * stride + idx * axis_stride, 0 <= idx < n */
    LLVMValueRef idx = s->val[in->a[0]];
    LLVMTypeRef vi = jit_em_vec(l, l->i64);
    if (LLVMGetIntTypeWidth(LLVMGetElementType(LLVMTypeOf(idx))) != 64)
        idx = LLVMBuildSExt(b, idx, vi, "");
    LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, idx, LLVMConstNull(vi), ""),
                                   LLVMBuildICmp(b, LLVMIntSLT, idx, jit_em_splat(l, s->ext[2 * j + 1]), ""), "");
    m = LLVMBuildAnd(b, m, ok, "");
    LLVMValueRef e = LLVMBuildAdd(b, jit_em_splat(l, s->off[j]),
                                  LLVMBuildMul(b, lanes, jit_em_splat(l, s->istride[j]), ""), "");
    e = LLVMBuildAdd(b, e, LLVMBuildMul(b, idx, jit_em_splat(l, s->ext[2 * j]), ""), "");
    LLVMTypeRef mt = jit_em_mem_type(l, t), vmt = jit_em_vec(l, mt);
    LLVMValueRef ps = LLVMBuildGEP2(b, mt, s->ptr[j], &e, 1, "");
    LLVMTypeRef over[2] = {vmt, LLVMTypeOf(ps)};
    LLVMValueRef args[4] = {ps, LLVMConstInt(l->i32, (unsigned)kiln_dtype_size(t), 0), m,
                            LLVMConstNull(vmt)};
    LLVMValueRef v = jit_em_intr(l, "llvm.masked.gather", over, 2, args, 4);
    if (t == KILN_DTYPE_BOOL)
        v = LLVMBuildICmp(b, LLVMIntNE, v, LLVMConstNull(vmt), "");
    return v;
}

/* Emit every instruction and store for lanes starting at column c; mask NULL = all. */
static void
emit_body(L *l, const jit_kdesc *d, kstate *s, LLVMValueRef c, LLVMValueRef mask)
{
    l->lin = LLVMBuildAdd(l->b, s->out_base, c, "");
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        if (in->kind == JIT_LOAD && (in->cls & (JIT_RANGED | JIT_INDEXED)))
            s->val[i] = special_load(l, in, s, c, mask);
        else if (in->kind == JIT_LOAD)
            s->val[i] = jit_em_load(l, (kiln_dtype)in->dtype, in->cls, s->ptr[in->slot],
                                    s->off[in->slot], c, s->istride[in->slot], mask);
        else
            s->val[i] = jit_em_inst(l, d, in, s->val);
    }
    for (int32_t k = 0; k < d->nstores; k++) {
        kiln_dtype t = (kiln_dtype)d->inst[d->stores[k]].dtype;
        LLVMValueRef v = s->val[d->stores[k]], base = s->ptr[d->nloads + k];
        if (mask || !s->nt_ok[k]) { /* a ranged store is never streaming: nt_ok NULL */
            jit_em_store_space(l, d, k, v, base, s->out_base, c, mask);
            continue;
        }
        /* streaming where this call's buffers allow it, else an ordinary store */
        jit_em_store_stream_if(l, t, v, base, s->out_base, c, s->nt_align[k], s->nt_ok[k]);
    }
    l->lin = NULL;
}

/* The streaming stores of d: nt_ok[k] (whether store k's body may stream in this call)
 * and nt_align[k], from the schedule's peeled store k0 (jit_elementwise_schedule, which
 * also makes sure every streaming store has k0's element size), whose rows are peeled to
 * its alignment A0 = min(W * size, 64) bytes.  Store k streams when its buffer lies a
 * multiple of its alignment from k0's (then every body store of it is aligned too); k0
 * streams when its buffer is aligned to its element size (kiln never assumes more of a
 * caller's buffer).  Returns k0, or -1 when nothing streams; without streaming stores the
 * rows are peeled to the schedule's store all the same, in segments of at least its
 * peel_min vectors. */
static int
stream_setup(L *l, const jit_kdesc *d, kstate *s)
{
    LLVMBuilderRef b = l->b;
    int pk = d->sched.peel;
    int k0 = pk >= 0 && d->store_cls && d->store_cls[pk] == JIT_ST_STREAM ? pk : -1;
    s->peel = pk;
    for (int32_t k = 0; k < d->nstores; k++) {
        s->nt_ok[k] = NULL;
        if (k0 < 0 || d->store_cls[k] != JIT_ST_STREAM)
            continue;
        kiln_dtype t = (kiln_dtype)d->inst[d->stores[k]].dtype;
        size_t es = kiln_dtype_size(t), a = jit_em_stream_align(l, t);
        LLVMValueRef ok;
        if (k == k0) {
            ok = jit_em_elem_aligned(l, s->ptr[d->nloads + k], (int64_t)es);
        } else {
            LLVMValueRef p = LLVMBuildPtrToInt(b, s->ptr[d->nloads + k], l->i64, "");
            LLVMValueRef p0 = LLVMBuildPtrToInt(b, s->ptr[d->nloads + k0], l->i64, "");
            LLVMValueRef rel = LLVMBuildAnd(b, LLVMBuildSub(b, p, p0, ""),
                                            jit_em_i64(l, (int64_t)a - 1), "");
            ok = LLVMBuildAnd(b, s->nt_ok[k0],
                              LLVMBuildICmp(b, LLVMIntEQ, rel, jit_em_i64(l, 0), ""), "");
        }
        s->nt_ok[k] = ok;
        s->nt_align[k] = (unsigned)a;
    }
    if (k0 >= 0) {
        s->peel_ok = s->nt_ok[k0];
        s->peel_align = s->nt_align[k0];
    } else if (pk >= 0) {
        kiln_dtype t = (kiln_dtype)d->inst[d->stores[pk]].dtype;
        s->peel_ok = jit_em_elem_aligned(l, s->ptr[d->nloads + pk], (int64_t)kiln_dtype_size(t));
        s->peel_align = jit_em_stream_align(l, t);
    }
    return k0;
}

/* The blocks and row values of build_kernel's loop over one row segment. */
typedef struct rowloop {
    LLVMBasicBlockRef row, vhead, vbody, tailchk, masked, rownext;
    LLVMValueRef col, cend, head; /* the segment [col, cend); head: lanes peeled first */
} rowloop;

/* tail.check and `masked`: the lanes left of the segment after column c (cend - c) run
 * the instructions under a mask, and so do n0 lanes from column c0 when `masked` is entered
 * from block `from`; after the tail comes the next row, otherwise vec.head again, at
 * column mc + mn.  Returns that column; *end is the block it comes from. */
static LLVMValueRef
masked_block(L *l, const jit_kdesc *d, kstate *s, const rowloop *r, LLVMValueRef c,
             LLVMBasicBlockRef from, LLVMValueRef c0, LLVMValueRef n0, LLVMBasicBlockRef *end)
{
    LLVMBuilderRef b = l->b;
    LLVMPositionBuilderAtEnd(b, r->tailchk);
    LLVMValueRef rest = LLVMBuildSub(b, r->cend, c, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, rest, jit_em_i64(l, 0), ""), r->masked,
                    r->rownext);
    LLVMPositionBuilderAtEnd(b, r->masked);
    LLVMValueRef mc = LLVMBuildPhi(b, l->i64, "mc");
    LLVMValueRef mn = LLVMBuildPhi(b, l->i64, "mn");
    LLVMValueRef again = LLVMBuildPhi(b, l->i1, "again"); /* not the tail: vec.head next */
    LLVMValueRef mcin[2] = {c0, c}, mnin[2] = {n0, rest},
                 ain[2] = {LLVMConstInt(l->i1, 1, 0), LLVMConstInt(l->i1, 0, 0)};
    LLVMBasicBlockRef mbb[2] = {from, r->tailchk};
    LLVMAddIncoming(mc, mcin, mbb, 2);
    LLVMAddIncoming(mn, mnin, mbb, 2);
    LLVMAddIncoming(again, ain, mbb, 2);
    emit_body(l, d, s, mc, jit_em_first_lanes(l, mn));
    *end = LLVMGetInsertBlock(b);
    LLVMValueRef after = LLVMBuildAdd(b, mc, mn, "");
    LLVMBuildCondBr(b, again, r->vhead, r->rownext);
    return after;
}

/* Compact kernels: `masked` for every vector of the segment, W lanes while c + W <= cend,
 * then the tail. */
static void
loop_compact(L *l, const jit_kdesc *d, kstate *s, const rowloop *r)
{
    LLVMBuilderRef b = l->b;
    LLVMValueRef Wc = jit_em_i64(l, l->W);
    LLVMBuildBr(b, r->vhead);
    LLVMPositionBuilderAtEnd(b, r->vhead);
    LLVMValueRef c = LLVMBuildPhi(b, l->i64, "c");
    LLVMValueRef cn = LLVMBuildAdd(b, c, Wc, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLE, cn, r->cend, ""), r->masked, r->tailchk);
    LLVMBasicBlockRef mend;
    LLVMValueRef after = masked_block(l, d, s, r, c, r->vhead, c, Wc, &mend);
    LLVMValueRef cin[2] = {r->col, after};
    LLVMBasicBlockRef cbb[2] = {r->row, mend};
    LLVMAddIncoming(c, cin, cbb, 2);
}

/* Full kernels: the vector body unmasked while c + W <= cend, and `masked`, the same
 * instructions under a mask, for the head (then on to the vector body) and the tail
 * (then the next row).  (One body under a mask for every iteration halves the code, but
 * ran slower on AVX-512: kept two, but for compact kernels; docs/benchmarking.md,
 * "Elementwise: two vector bodies".) */
static void
loop_full(L *l, const jit_kdesc *d, kstate *s, const rowloop *r)
{
    LLVMBuilderRef b = l->b;
    LLVMValueRef Wc = jit_em_i64(l, l->W);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, r->head, jit_em_i64(l, 0), ""), r->masked,
                    r->vhead);
    /* vec.head: phi c; full vectors while c + W <= cend */
    LLVMPositionBuilderAtEnd(b, r->vhead);
    LLVMValueRef c = LLVMBuildPhi(b, l->i64, "c");
    LLVMValueRef cn = LLVMBuildAdd(b, c, Wc, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLE, cn, r->cend, ""), r->vbody, r->tailchk);
    LLVMPositionBuilderAtEnd(b, r->vbody);
    /* the position through jit_em_opaque: loop strength reduction then has no address to
     * rewrite (x86 addresses base + index * 4 for free), which saves it its analysis, at the
     * same code speed (docs/benchmarking.md, "Elementwise: opaque positions") */
    emit_body(l, d, s, jit_em_opaque(l, c), NULL);
    LLVMBasicBlockRef vbody_end = LLVMGetInsertBlock(b);
    /* and the next position too: scalar evolution then sees no induction variable (fewer
     * compile instructions, the same loop) */
    cn = jit_em_opaque(l, cn);
    LLVMBuildBr(b, r->vhead);
    LLVMBasicBlockRef mend;
    LLVMValueRef after = masked_block(l, d, s, r, c, r->row, r->col, r->head, &mend);
    LLVMValueRef cin[3] = {r->col, cn, after};
    LLVMBasicBlockRef cbb[3] = {r->row, vbody_end, mend};
    LLVMAddIncoming(c, cin, cbb, 3);
}

kiln_status
jit_lower_elementwise(L *l, const jit_kdesc *d, const char *name)
{
    LLVMBuilderRef b = l->b;
    LLVMTypeRef params[6] = {l->ptr, l->ptr, l->ptr, l->i64, l->i64, l->ptr};
    LLVMValueRef fn = LLVMAddFunction(l->mod, name,
                                      LLVMFunctionType(LLVMVoidTypeInContext(l->ctx), params, 6, 0));
    LLVMValueRef pptrs = LLVMGetParam(fn, 0), pstrides = LLVMGetParam(fn, 1),
                 pdims = LLVMGetParam(fn, 2), pbegin = LLVMGetParam(fn, 3), pend = LLVMGetParam(fn, 4),
                 pext = LLVMGetParam(fn, 5);
    bool special = false;
    for (int32_t i = 0; i < d->ninst; i++)
        if (d->inst[i].kind == JIT_LOAD && (d->inst[i].cls & (JIT_RANGED | JIT_INDEXED)))
            special = true;
    /* Buffers never alias what they are computed from: loads and stores are distinct
     * allocations (the planner guarantees it), which lets LLVM keep values in registers. */
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(l->ctx, fn, "entry");
    LLVMBasicBlockRef rowhead = LLVMAppendBasicBlockInContext(l->ctx, fn, "row");
    LLVMBasicBlockRef vhead = LLVMAppendBasicBlockInContext(l->ctx, fn, "vec.head");
    bool compact = d->tier == JIT_TIER_COMPACT;
    LLVMBasicBlockRef vbody = compact ? NULL : LLVMAppendBasicBlockInContext(l->ctx, fn, "vec.body");
    LLVMBasicBlockRef tailchk = LLVMAppendBasicBlockInContext(l->ctx, fn, "tail.check");
    LLVMBasicBlockRef masked = LLVMAppendBasicBlockInContext(l->ctx, fn, "masked");
    LLVMBasicBlockRef rownext = LLVMAppendBasicBlockInContext(l->ctx, fn, "row.next");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(l->ctx, fn, "exit");

    int R = d->rank, nslots = d->nloads + d->nstores;
    kstate s;
    LLVMValueRef stack[4 * 64];
    LLVMValueRef *mem = nslots * 3 + d->ninst <= 256 ? stack : ir_calloc((size_t)(nslots * 3 + d->ninst), sizeof(LLVMValueRef));
    LLVMValueRef *dims = ir_calloc((size_t)R, sizeof(LLVMValueRef));
    s.rowok = ir_calloc((size_t)d->nloads + 1, sizeof(LLVMValueRef));
    s.ext = ir_calloc(2 * (size_t)d->nloads + 2, sizeof(LLVMValueRef));
    s.nt_ok = ir_calloc((size_t)d->nstores + 1, sizeof(LLVMValueRef));
    s.nt_align = ir_calloc((size_t)d->nstores + 1, sizeof(unsigned));
    LLVMValueRef *extv = special ? ir_calloc((size_t)d->nloads * (size_t)R * 2 + 1, sizeof(LLVMValueRef)) : NULL;
    if (!mem || !dims || !s.rowok || !s.ext || !s.nt_ok || !s.nt_align || (special && !extv)) {
        if (mem != stack)
            ir_free(mem);
        ir_free(dims);
        ir_free(extv);
        ir_free(s.rowok);
        ir_free(s.ext);
        ir_free(s.nt_ok);
        ir_free(s.nt_align);
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory lowering a kernel");
    }
    s.ptr = mem;
    s.off = mem + nslots;
    s.istride = mem + 2 * nslots;
    s.val = mem + 3 * nslots;

    LLVMPositionBuilderAtEnd(b, entry);
    for (int j = 0; j < nslots; j++) {
        s.ptr[j] = jit_em_arg(l, l->ptr, pptrs, j, "");
    }
    jit_em_params(l, d, pptrs);
    bool ranges_ok = jit_em_ranges(l, d, pptrs, s.ptr);
    for (int k = 0; k < R; k++) {
        dims[k] = jit_em_arg(l, l->i64, pdims, k, "");
    }
    s.peel = -1; /* compact: every iteration is masked, so nothing streams or peels */
    int k0 = compact ? -1 : stream_setup(l, d, &s);
    LLVMValueRef inner = dims[R - 1];
    for (int j = 0; j < d->nloads; j++) {
        s.istride[j] = jit_em_arg(l, l->i64, pstrides, (int64_t)j * R + R - 1, "");
    }
    /* ext[(j*R + d)*2 + {0,1}]: the last dim's pair is loaded once */
    if (special) {
        for (int j = 0; j < d->nloads; j++)
            for (int k = 0; k < 2 * R; k++) {
                extv[j * R * 2 + k] = jit_em_arg(l, l->i64, pext, (int64_t)j * R * 2 + k, "");
            }
        for (int j = 0; j < d->nloads; j++) {
            bool idxd = false;
            for (int32_t i = 0; i < d->ninst; i++)
                if (d->inst[i].kind == JIT_LOAD && d->inst[i].slot == j && (d->inst[i].cls & JIT_INDEXED))
                    idxd = true;
            /* ranged: the last dim's box; indexed: the axis stride and length (pair 0) */
            s.ext[2 * j] = extv[j * R * 2 + (idxd ? 0 : 2 * (R - 1))];
            s.ext[2 * j + 1] = extv[j * R * 2 + (idxd ? 1 : 2 * (R - 1) + 1)];
        }
    }
    LLVMValueRef row0 = LLVMBuildSDiv(b, pbegin, inner, "");
    LLVMValueRef col0 = LLVMBuildSRem(b, pbegin, inner, "");
    LLVMBuildBr(b, rowhead);

    /* row: phi row, col, pos */
    LLVMPositionBuilderAtEnd(b, rowhead);
    LLVMValueRef row = LLVMBuildPhi(b, l->i64, "row");
    LLVMValueRef col = LLVMBuildPhi(b, l->i64, "col");
    LLVMValueRef pos = LLVMBuildPhi(b, l->i64, "pos");
    LLVMValueRef left = LLVMBuildSub(b, pend, pos, "");
    LLVMValueRef room = LLVMBuildSub(b, inner, col, "");
    LLVMValueRef seg = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, left, room, ""), left, room, "seg");
    LLVMValueRef cend = LLVMBuildAdd(b, col, seg, "cend");
    /* outer indices of this row -> per-load offsets */
    for (int j = 0; j < d->nloads; j++) {
        s.off[j] = jit_em_i64(l, 0);
        s.rowok[j] = LLVMConstInt(l->i1, 1, 0);
    }
    jit_em_delinearise(l, row, R - 2, dims, R, d->nloads, pstrides, s.off, extv, s.rowok);
    s.out_base = LLVMBuildMul(b, row, inner, "");
    /* head: the lanes before the peeled store's next aligned address (fewer than W, at
     * most the row's segment; see stream_setup) */
    LLVMValueRef head = jit_em_i64(l, 0);
    if (s.peel >= 0) {
        int64_t es = (int64_t)kiln_dtype_size((kiln_dtype)d->inst[d->stores[s.peel]].dtype);
        LLVMValueRef ok = s.peel_ok;
        if (d->sched.peel_min > 0) /* ordinary stores: only long segments are worth a head */
            ok = LLVMBuildAnd(b, ok,
                              LLVMBuildICmp(b, LLVMIntSGE, seg,
                                            jit_em_i64(l, (int64_t)d->sched.peel_min * l->W), ""), "");
        head = jit_em_head_lanes(l, s.ptr[d->nloads + s.peel], LLVMBuildAdd(b, s.out_base, col, ""),
                                 es, (int64_t)s.peel_align, ok, seg);
    }
    rowloop rl = {rowhead, vhead, vbody, tailchk, masked, rownext, col, cend, head};
    (compact ? loop_compact : loop_full)(l, d, &s, &rl);

    LLVMPositionBuilderAtEnd(b, rownext);
    LLVMValueRef pos2 = LLVMBuildAdd(b, pos, seg, "");
    LLVMValueRef row2 = LLVMBuildAdd(b, row, jit_em_i64(l, 1), "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, pos2, pend, ""), rowhead, exit);
    LLVMValueRef rin[2] = {row0, row2}, colin[2] = {col0, jit_em_i64(l, 0)}, posin[2] = {pbegin, pos2};
    LLVMBasicBlockRef rbb[2] = {entry, rownext};
    LLVMAddIncoming(row, rin, rbb, 2);
    LLVMAddIncoming(col, colin, rbb, 2);
    LLVMAddIncoming(pos, posin, rbb, 2);

    LLVMPositionBuilderAtEnd(b, exit);
    if (k0 >= 0)
        jit_em_stream_fence(l);
    LLVMBuildRetVoid(b);
    ir_free(extv);
    ir_free(s.rowok);
    ir_free(s.ext);
    ir_free(s.nt_ok);
    ir_free(s.nt_align);
    ir_free(dims);
    if (mem != stack)
        ir_free(mem);
    jit_em_ranges_free(l);
    return ranges_ok ? KILN_OK : ir_error(KILN_ERR_NOMEM, "kiln: out of memory lowering a kernel");
}
