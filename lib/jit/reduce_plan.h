/* reduce_plan.h — the schedule of a REDUCTION kernel, from its description alone, with no
 * LLVM (reduce_plan.c): each instruction's phase and whether it is row-wise, the values
 * spilled to scratch rows, the bytes of a piece's accumulators, and the passes that run one
 * row behind or ahead.  The describe pass makes it once (jit_reduce_schedule: the
 * description's rsched), the runner's scratch is sized from it, the lowering emits it
 * (lower_reduce.c) and the dump prints it (jit_reduce_dump), so none can disagree.  The
 * algorithm is in lower_reduce.c's header. */
#ifndef KILN_JIT_REDUCE_PLAN_H
#define KILN_JIT_REDUCE_PLAN_H

#include "jit.h"

/* The accumulator algebra of a reduce op: one row per reduce op of ops.def in reduce_plan.c's
 * table (a reduce op added there without a row fails the build), read by the lowering for
 * the accumulator's type, identity and combine, and by the schedule for its size. */
typedef enum rp_combine {
    RP_ADD,    /* identity -0.0 (a sum of one element is that element, -0.0 included), 0 */
    RP_MUL,    /* identity 1 */
    RP_MAX,    /* -inf, INT_MIN; llvm.maximum (NaN wins, -0 < +0), smax */
    RP_MIN,    /* +inf, INT_MAX; llvm.minimum, smin */
    RP_ARGMAX, /* (value, index) pairs, index -1 empty: the first largest, the first NaN */
    RP_ARGMIN, /* the first smallest, the first NaN */
} rp_combine;
typedef struct rp_algebra {
    bool reduce;        /* a row of the table: the op is a reduction */
    rp_combine combine;
    bool wide;          /* float operands accumulate in f64 (integers in their own type) */
    bool mean;          /* finished as the sum over the count (NaN when empty) */
} rp_algebra;
/* Row `op` of the table; IR_ASSERT that op is a reduction. */
IR_HIDDEN const rp_algebra *rp_algebra_of(ir_op op);

/* What the lowering and the runner's and the dump's questions about a description all
 * start from, computed in one place so that they cannot disagree (the runner sizes the
 * scratch rows the lowering spills into): phases, row-wise flags, spills, the pieces'
 * bytes and the passes that move between rows. */
typedef struct rplan {
    bool *uni;  /* per inst: one value per row */
    int *ph;    /* per inst: phase */
    int *spill; /* per inst: choose_spills */
    int nphases;
    size_t srow;    /* bytes per reduced element of one scratch row */
    size_t partial; /* partial_of */
    int defer;      /* defer_of */
    bool ahead;     /* ahead_of */
    /* rows: the pass whose full vectors prefetch the next row (prefetch_of; -1: none), and
     * whether it prefetches the next row's stores over the space too (a pass with vector
     * math) or only its loads */
    int prefetch;
    bool prefetch_stores;
    bool *unroll;    /* rows, per phase: pass p runs RP_UNROLL vectors an iteration on
                      * independent accumulators (unroll_of) */
    bool col_blocks; /* cols: reduced in blocks of RP_COL_BLOCK vectors (col_blocks_of) */
    bool streams;    /* rows: a store streams (JIT_ST_STREAM): fence before returning */
} rplan;

/* Full vectors per iteration of a pass that unrolls (rplan.unroll): independent accumulators
 * break the latency chain of the combine (llvm.maximum is several instructions long),
 * combined in a fixed tree at the end of the pass. */
#define RP_UNROLL 4
/* Columns kernels whose reductions all read the first pass and that store nothing over the
 * space (rplan.col_blocks) reduce a block of up to RP_COL_BLOCK vectors of columns at once. */
#define RP_COL_BLOCK 64

IR_HIDDEN size_t rp_acc_bytes(int W, const jit_kdesc *d, const jit_kinst *in);
IR_HIDDEN bool rp_blocked_sum(const jit_kdesc *d, const jit_kinst *in);
IR_HIDDEN bool rp_fast_extreme(const jit_kdesc *d, const jit_kinst *in);
IR_HIDDEN bool rp_first_pass_only(const jit_kdesc *d, const int *ph);
IR_HIDDEN bool rp_pass_has_math(const jit_kdesc *d, const bool *uni, const int *ph, int p);
IR_HIDDEN bool rp_is_arg(ir_op op);
IR_HIDDEN kiln_dtype rp_operand_dtype(const jit_kdesc *d, const jit_kinst *in);
IR_HIDDEN bool rp_pass_needed_d(const jit_kdesc *d, const int *ph, int p);
IR_HIDDEN void rp_pass_needs(const jit_kdesc *d, const bool *uni, const int *spill, const int *ph,
                             int p, bool *need);
IR_HIDDEN int rp_recompute_cost(const jit_kdesc *d, const bool *uni, int32_t i, int depth);
IR_HIDDEN bool rp_reduces_in(const jit_kdesc *d, const int *ph, int32_t i, int p);
IR_HIDDEN void rplan_free(rplan *a);
IR_HIDDEN kiln_status rplan_make(const jit_kdesc *d, rplan *a);
IR_HIDDEN void rplan_scratch(const rplan *a, size_t *partial, size_t *spill);
IR_HIDDEN bool rp_space_store_in(const jit_kdesc *d, const int *ph, int32_t k, int p);

#endif /* KILN_JIT_REDUCE_PLAN_H */
