/* reduce_emit.h — the REDUCTION kind's emitter, shared by its files: the state of one
 * kernel being emitted (rk), counted loops, and the functions each file gives the others.
 *   lower_reduce.c       the kernel function, one row (rows) or tile (cols) at a time, the
 *                        last pass one row behind, the columns' blocks; the algorithm
 *   lower_reduce_pass.c  passes over a row: values, bodies, masked tails, streaming,
 *                        finishing the reductions, row-wise stores, partials
 *   lower_reduce_acc.c   the accumulator algebra: identities and combines per reduce op
 *   reduce_plan.c        the schedule (no LLVM; reduce_plan.h)
 * Only lib/jit includes this (it names LLVM types). */
#ifndef KILN_JIT_REDUCE_EMIT_H
#define KILN_JIT_REDUCE_EMIT_H

#include "emit.h"
#include "reduce_plan.h"

typedef struct rk {
    jit_em *l;
    const jit_kdesc *d;
    const rplan *plan; /* d->rsched: the schedule emitted */
    LLVMValueRef fn;
    LLVMBasicBlockRef allocas;
    int R, nk, nslots;
    bool cols;
    int nphases;
    bool *uni;             /* per inst: one value per row */
    int *ph;               /* per inst: phase */
    LLVMValueRef *ptr;     /* per slot */
    LLVMValueRef pstrides; /* the strides argument: slot * R + dim */
    LLVMValueRef *dims;    /* R */
    /* per slot: element offset of the current row (cols: without the last kept dim) */
    LLVMValueRef *kbase;
    LLVMValueRef *cur;        /* per slot: offset of the current position but the vector dim */
    LLVMValueRef *uval;       /* per inst: row-wise values */
    LLVMValueRef *val;        /* per inst: values in the current pass body */
    LLVMValueRef *acc, *acci; /* per inst (JIT_REDUCE): accumulator allocas in use */
    LLVMValueRef *accset[4], *acciset[4]; /* RP_UNROLL independent sets (chains) */
    LLVMValueRef *acc32, *acc32set[4]; /* rows: f32 block accumulators of f32 sums (NULL: none) */
    /* rows: float max/min on the bare instruction (see fast_extreme): per inst, a NaN seen
     * (<W x i1>) and the signed-integer max/min of the bit patterns (NULL: none) */
    LLVMValueRef *accnan, *accnanset[4], *accbits, *accbitsset[4];
    LLVMValueRef count;    /* reduced elements per row */
    LLVMValueRef inner;    /* size of the last reduced dim */
    LLVMValueRef vpos;     /* position of lane 0 along the vector dim */
    LLVMValueRef sub;      /* rows: flattened index of the current sub-row */
    LLVMValueRef rflat;    /* cols: flattened reduced index */
    LLVMValueRef mask;     /* lanes in use (NULL: all) */
    int pass;              /* the pass being emitted */
    LLVMValueRef tilemask; /* cols: the tile's mask */
    size_t partial_bytes;
    int *spill; /* per inst: 1 + scratch row offset (choose_spills; 0: recomputed) */
    LLVMValueRef scratch;
    LLVMValueRef *knext; /* rows: per slot, kbase of the next row (NULL: no prefetching) */
    bool *first_read;    /* per inst: a load the first pass's body reads (prefetched) */
    bool prefetch;       /* the body being emitted prefetches (pass plan->prefetch) */
    /* cols kernels split along the reduced dims (partial_bytes > 0): the mode, this piece's
     * reduced range and index, the piece count, the partials, vectors per kept row */
    LLVMValueRef mode, rb, re, q, np, partial, nvr;
    /* rows: streaming stores (JIT_ST_STREAM): per store, i1, its full vectors in the current
     * sub-row are at addresses aligned for a non-temporal store (NULL: store ordinarily) */
    LLVMValueRef *ntok;
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
    /* rows: per slot of a ranged load (JIT_RANGED, a concat's part), its range [lo, hi)
     * along the vector dim, from jit_raux.ext (NULL: no ranged load) */
    LLVMValueRef *rlo, *rhi;
} rk;

/* f32 sums and means in rows kernels add SUM_BLOCK elements per lane in f32, then that block
 * sum into the lane's f64 accumulator: a conversion and a double add per SUM_BLOCK vectors
 * instead of per vector (docs/benchmarking.md, "Rows kernels: f32 blocks of sums").  Each
 * block adds at most (SUM_BLOCK - 1) f32 roundings to a lane's
 * terms: docs/semantics.md states the bound. */
#define SUM_BLOCK JIT_SUM_BLOCK

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

/* lower_reduce_acc.c */
IR_HIDDEN LLVMTypeRef rk_acc_scalar(rk *r, const jit_kinst *in);
IR_HIDDEN LLVMValueRef rk_bits_identity(rk *r, const jit_kinst *in);
IR_HIDDEN LLVMTypeRef rk_bits_type(rk *r, const jit_kinst *in);
IR_HIDDEN LLVMValueRef rk_block_identity(jit_em *l);
IR_HIDDEN void rk_combine(rk *r, const jit_kinst *in, LLVMValueRef *av, LLVMValueRef *ai,
                          LLVMValueRef bv, LLVMValueRef bi);
IR_HIDDEN void rk_fast_extreme_step(rk *r, const jit_kinst *in, int32_t i, LLVMValueRef v);
IR_HIDDEN LLVMValueRef rk_fast_extreme_value(rk *r, const jit_kinst *in, int32_t i, int u,
                                             LLVMValueRef a);
IR_HIDDEN LLVMValueRef rk_identity(rk *r, const jit_kinst *in);

/* lower_reduce_pass.c */
IR_HIDDEN void rk_add_offsets(rk *r, LLVMValueRef *out, LLVMValueRef *base, LLVMValueRef flat,
                              int from, int to);
IR_HIDDEN LLVMBasicBlockRef rk_block(rk *r, const char *name);
IR_HIDDEN void rk_emit_pass(rk *r, int p, LLVMValueRef sb, LLVMValueRef se, LLVMValueRef ib,
                            LLVMValueRef ie);
IR_HIDDEN void rk_finish_reduces(rk *r, int p);
IR_HIDDEN void rk_fold_sets(rk *r, int p);
IR_HIDDEN void rk_init_accs(rk *r, int p);
IR_HIDDEN void rk_load_partials(rk *r, LLVMValueRef base, LLVMValueRef npieces);
IR_HIDDEN void rk_loop_close(rk *r, cloop *c);
IR_HIDDEN void rk_loop_open(rk *r, cloop *c, LLVMValueRef from, LLVMValueRef to, const char *name,
                            bool lsr);
IR_HIDDEN LLVMValueRef rk_new_alloca(rk *r, LLVMTypeRef t);
IR_HIDDEN void rk_pass_body(rk *r, int p);
IR_HIDDEN bool rk_pass_needed(rk *r, int p);
IR_HIDDEN void rk_row_stores(rk *r);
IR_HIDDEN void rk_row_values(rk *r, int p);
IR_HIDDEN void rk_store_partial(rk *r, LLVMValueRef base);
IR_HIDDEN void rk_use_set(rk *r, int u);
IR_HIDDEN LLVMValueRef rk_zeroed_row_value(rk *r, int32_t i);

#endif /* KILN_JIT_REDUCE_EMIT_H */
