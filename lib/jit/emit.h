/* emit.h — the IR-builder helpers every kernel kind shares (emit.c defines them):
 * types, constants, splats, intrinsic calls, and the emission of one elementwise
 * instruction.  The elementwise instruction list (jit_kinst) is the common language of all
 * kernel kinds: the whole of an elementwise kernel, the producers and consumers of a
 * reduction.  Only lib/jit includes this (it names LLVM types). */
#ifndef KILN_JIT_EMIT_H
#define KILN_JIT_EMIT_H

#include <llvm-c/Core.h>

#include "jit.h"

typedef struct jit_em {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    int W; /* lanes per vector: the kernel's schedule's (jit_ksched.lanes; jit_em_init: the
            * host's vector bits / 32) */
    LLVMTypeRef i1, i8, i32, i64, f32, f64, ptr;
    int perturb; /* ir_op whose results are perturbed (KILN_TEST_PERTURB), or -1 */
    LLVMValueRef lin; /* elementwise: linear index of lane 0 (for arange), or NULL */
    /* the kernel being built: its parameters, read and splat at its entry (jit_em_params) */
    LLVMValueRef param[JIT_MAX_PARAMS];
    /* its JIT_ST_RANGE stores' ranges: lo, hi (i64) of store k at [2k], [2k + 1]
     * (jit_em_ranges; NULL when it has none) */
    LLVMValueRef *range;
} jit_em;

IR_HIDDEN void jit_em_init(jit_em *l, LLVMContextRef ctx, LLVMModuleRef mod);
IR_HIDDEN LLVMTypeRef jit_em_scalar_type(jit_em *l, kiln_dtype t);
/* In memory: bool is a byte. */
IR_HIDDEN LLVMTypeRef jit_em_mem_type(jit_em *l, kiln_dtype t);
IR_HIDDEN LLVMTypeRef jit_em_vec(jit_em *l, LLVMTypeRef t);
/* v (an i64) through an empty inline asm: the same register, a value the optimiser and
 * code generator cannot see through (loop strength reduction finds no induction variable
 * users behind it). */
IR_HIDDEN LLVMValueRef jit_em_opaque(jit_em *l, LLVMValueRef v);
/* A counted loop of function fn: iv from `from`, stepping by `step`, while iv + step <= to
 * (whole: every iteration has `step` elements) or else while iv < to; iv is a phi, its
 * step through jit_em_opaque (so loop strength reduction adds no induction variables of
 * its own).  jit_em_loop_begin appends the blocks head (named tag), body and done, and
 * leaves the builder in the body; jit_em_loop_end closes the loop from wherever the
 * builder is and leaves it in done. */
typedef struct jit_em_loop {
    LLVMBasicBlockRef pre, head, body, done;
    LLVMValueRef iv;
    int64_t step;
} jit_em_loop;
IR_HIDDEN void jit_em_loop_begin(jit_em *l, LLVMValueRef fn, jit_em_loop *lp, LLVMValueRef from,
                                 LLVMValueRef to, int64_t step, bool whole, const char *tag);
IR_HIDDEN void jit_em_loop_end(jit_em *l, jit_em_loop *lp);
/* A linear index `flat` over dims[0..top] (dims[top] fastest) split into its indices, from
 * the innermost out (a urem and a udiv each), each added times its stride to every load's
 * offset: off[j] += index_k * strides[j * R + k] for j < nloads, the strides read from the
 * kernel's strides argument pstrides (R dims per load).  With ext (NULL: none), each load's
 * box too: inbox[j] &= ext[(j * R + k) * 2] <= index_k < ext[(j * R + k) * 2 + 1].  The
 * delinearisation of elementwise rows and of contraction batches. */
IR_HIDDEN void jit_em_delinearise(jit_em *l, LLVMValueRef flat, int top, const LLVMValueRef *dims,
                                  int R, int nloads, LLVMValueRef pstrides, LLVMValueRef *off,
                                  const LLVMValueRef *ext, LLVMValueRef *inbox);
IR_HIDDEN LLVMValueRef jit_em_i64(jit_em *l, int64_t v);
/* Element i of a kernel's argument array of 8-byte values (ptrs, strides, dims, aux), as
 * type t (l->ptr or l->i64). */
IR_HIDDEN LLVMValueRef jit_em_arg(jit_em *l, LLVMTypeRef t, LLVMValueRef base, int64_t i,
                                  const char *name);
IR_HIDDEN LLVMValueRef jit_em_intr(jit_em *l, const char *name, LLVMTypeRef *over, int nover,
                                   LLVMValueRef *args, int nargs);
IR_HIDDEN LLVMValueRef jit_em_intr2(jit_em *l, const char *name, LLVMValueRef x, LLVMValueRef y);
IR_HIDDEN LLVMValueRef jit_em_splat(jit_em *l, LLVMValueRef scalar);
/* The scalar `s` of dtype t in every lane (bit-exact: NaN payloads, -0.0). */
IR_HIDDEN LLVMValueRef jit_em_const_vec(jit_em *l, kiln_dtype t, const ir_scalar *s);
IR_HIDDEN LLVMValueRef jit_em_lane_ids(jit_em *l);
/* The first `rest` lanes (0 <= rest <= W, an i64), compared in i32 lanes: legal vector
 * types keep LLVM's code generation cheap. */
IR_HIDDEN LLVMValueRef jit_em_first_lanes(jit_em *l, LLVMValueRef rest);
/* llvm.maximum (max) or llvm.minimum of floats a and b: NaN wins, whichever its kind, and
 * -0 < +0.  LLVM 19's x86 lowering, when it knows one operand is never a NaN (an integer
 * converted, a constant), tests the other for a quiet NaN or +0 only, so a signalling NaN
 * lost to the number; both operands are quieted first (a NaN gets its quiet bit, every other
 * value is unchanged; folded away where LLVM knows an operand is never a NaN). */
IR_HIDDEN LLVMValueRef jit_em_fextreme(jit_em *l, bool max, LLVMValueRef a, LLVMValueRef b);
/* The lanes of a vector that `rest` (an i64: elements left, any value) leaves: clamp(rest,
 * 0, W), for jit_em_first_lanes. */
IR_HIDDEN LLVMValueRef jit_em_clamp_lanes(jit_em *l, LLVMValueRef rest);
IR_HIDDEN LLVMValueRef jit_em_all_true(jit_em *l);
/* At the entry of a kernel of description d, with the builder in its entry block: read its
 * parameters (d->nparams scalars at ptrs[nloads + nstores + j], pptrs the kernel's first
 * argument), each splat to W lanes there, into l->param for jit_em_inst (uses anywhere in
 * the kernel are dominated).  Every kind's lowering calls it. */
IR_HIDDEN void jit_em_params(jit_em *l, const jit_kdesc *d, LLVMValueRef pptrs);
/* Instruction `in` (JIT_SPLAT, JIT_PARAM or JIT_OP) of d, operands from val[]. */
IR_HIDDEN LLVMValueRef jit_em_inst(jit_em *l, const jit_kdesc *d, const jit_kinst *in,
                                   LLVMValueRef *val);
/* A load of W lanes of slot memory `base`: lane i reads element off + (c + i) * istride
 * (by class: one vector, one scalar splat, a gather); mask NULL = all lanes. */
IR_HIDDEN LLVMValueRef jit_em_load(jit_em *l, kiln_dtype t, int cls, LLVMValueRef base,
                                   LLVMValueRef off, LLVMValueRef c, LLVMValueRef istride,
                                   LLVMValueRef mask);
/* The matching store (cls JIT_CONTIG: one vector; JIT_STRIDED: a scatter). */
IR_HIDDEN void jit_em_store(jit_em *l, kiln_dtype t, int cls, LLVMValueRef v, LLVMValueRef base,
                            LLVMValueRef off, LLVMValueRef c, LLVMValueRef istride,
                            LLVMValueRef mask);
/* At the entry of a kernel of description d, after its slot pointers ptr[] are read:
 * every JIT_ST_RANGE store's range read from its parameters into l->range, and its slot
 * pointer ptr[d->nloads + k] moved back by lo elements, so that element i of the space is
 * at index i of it as for every store.  false when out of memory; jit_em_ranges_free once
 * the kernel is built. */
IR_HIDDEN bool jit_em_ranges(jit_em *l, const jit_kdesc *d, LLVMValueRef pptrs, LLVMValueRef *ptr);
IR_HIDDEN void jit_em_ranges_free(jit_em *l);
/* Store k of d: value v, lane i to element off + c + i of `base` (a vector, under mask:
 * NULL = all); a JIT_ST_RANGE store stores only the lanes whose element is in its range. */
IR_HIDDEN void jit_em_store_space(jit_em *l, const jit_kdesc *d, int32_t k, LLVMValueRef v,
                                  LLVMValueRef base, LLVMValueRef off, LLVMValueRef c,
                                  LLVMValueRef mask);

/* A full vector of W lanes stored contiguously at element off + c of `base` with LLVM's
 * !nontemporal metadata (vmovntps on x86): the address must be a multiple of `align`, the
 * vector's natural alignment (an under-aligned non-temporal store is split into scalar
 * ones). */
IR_HIDDEN void jit_em_store_stream(jit_em *l, kiln_dtype t, LLVMValueRef v, LLVMValueRef base,
                                   LLVMValueRef off, LLVMValueRef c, unsigned align);
/* The same store non-temporal where `ok` (i1) holds at run time (the address then aligned
 * to `align`), else an ordinary one (jit_em_store of JIT_CONTIG, unmasked): a branch
 * between the two, the builder after it. */
IR_HIDDEN void jit_em_store_stream_if(jit_em *l, kiln_dtype t, LLVMValueRef v, LLVMValueRef base,
                                      LLVMValueRef off, LLVMValueRef c, unsigned align,
                                      LLVMValueRef ok);
/* The alignment of a streaming store's vectors of dtype t: the vector's size, at most a
 * cache line. */
IR_HIDDEN unsigned jit_em_stream_align(const jit_em *l, kiln_dtype t);
/* i1: ptr is a multiple of es, an element's size (kiln assumes no more of a caller's
 * buffer; only then can a row be peeled to a wider alignment). */
IR_HIDDEN LLVMValueRef jit_em_elem_aligned(jit_em *l, LLVMValueRef ptr, int64_t es);
/* The bytes from element idx (of es bytes each) of buffer ptr up to the next address that is
 * a multiple of a (a power of two): 0 when that element is aligned already. */
IR_HIDDEN LLVMValueRef jit_em_align_gap(jit_em *l, LLVMValueRef ptr, LLVMValueRef idx, int64_t es,
                                        int64_t a);
/* A row's head, peeled under a mask so that the stores after it are aligned to a: gap / es
 * lanes where `ok` (i1) holds, else none, and at most len (the row's lanes). */
IR_HIDDEN LLVMValueRef jit_em_head_lanes(jit_em *l, LLVMValueRef ptr, LLVMValueRef idx, int64_t es,
                                         int64_t a, LLVMValueRef ok, LLVMValueRef len);
/* Order the non-temporal stores before whatever follows (sfence on x86): emitted before a
 * streaming kernel returns, so the pool's join publishes its results. */
IR_HIDDEN void jit_em_stream_fence(jit_em *l);

/* The emitter of each kind (kinds.def's `lower`).  Elementwise kernels (lower.c). */
IR_HIDDEN kiln_status jit_lower_elementwise(jit_em *l, const jit_kdesc *d, const char *name);
/* Reduction kernels (lower_reduce.c). */
IR_HIDDEN kiln_status jit_lower_reduce(jit_em *l, const jit_kdesc *d, const char *name);
/* Contraction kernels (lower_contract.c). */
IR_HIDDEN kiln_status jit_lower_contract(jit_em *l, const jit_kdesc *d, const char *name);
/* What CONTRACTION and SKINNY kernels share: per load of d, the offset of batch element
 * `batch` (off), the stride along the rows (sm) and along the columns (istride), from the
 * kernel's strides argument; and the epilogue of one vector of results accv of row `row`
 * at column c (every instruction but the matmul's, index mi; then the stores at obase + c,
 * under mask; val: ninst values of scratch). */
IR_HIDDEN void jit_contract_load_strides(jit_em *l, const jit_kdesc *d, LLVMValueRef pstrides,
                                         const LLVMValueRef *dims, LLVMValueRef batch,
                                         LLVMValueRef *off, LLVMValueRef *sm, LLVMValueRef *istride);
IR_HIDDEN void jit_contract_epilogue(jit_em *l, const jit_kdesc *d, int mi, LLVMValueRef accv,
                                     LLVMValueRef *ptr, LLVMValueRef *off, LLVMValueRef *sm,
                                     LLVMValueRef *istride, LLVMValueRef row, LLVMValueRef obase,
                                     LLVMValueRef c, LLVMValueRef mask, LLVMValueRef *val);
/* Skinny contraction kernels (lower_skinny.c). */
IR_HIDDEN kiln_status jit_lower_skinny(jit_em *l, const jit_kdesc *d, const char *name);

#endif /* KILN_JIT_EMIT_H */
