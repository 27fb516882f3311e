/* planner.h — the planner's passes share these (lib/jit only).
 *
 *   fuse.c      classify every node, cluster them into kernels, decide what is stored
 *   schedule.c  order the steps, place every stored value (caller's outputs, one packed
 *               block of temporaries)
 *   describe.c  one size-free kernel description (jit_kdesc) per kernel step, its slots
 *               and run-time strides, and why its boundary is where it is
 *   plan.c      the driver: simplify, the passes above, then every kernel compiled (or
 *               found in the cache) once all descriptions exist
 *   resize.c    plans at new sizes: a graph equal to one planned but for sizes, planned
 *               from that plan's model (its fuse and schedule replayed, sizes checked)
 *   run.c       running a plan's steps on the thread pool
 *   contract.c  running contraction (matmul) steps: packing, blocking; skinny ones (B read
 *               in place)
 *   skinny.c    the SKINNY kind's facts without LLVM: the cost model that chooses it, its
 *               tiles, the columns of a call
 */
#ifndef KILN_JIT_PLANNER_H
#define KILN_JIT_PLANNER_H

#include <stdatomic.h>
#include <stdio.h>

#include "jit.h"

enum { C_BUF, C_FULL, C_ELEM, C_VIEW };


/* Bounds on one fused kernel (fuse.c's room()): an op that would take a kernel past one
 * goes to another, and the values that kernel reads are stored and loaded again.  Both
 * measured with tests/bench/compile_time.c (docs/benchmarking.md, "Wide graphs"):
 *   KERNEL_MAX_OPS   ops: each adds one instruction and at most three loads or constants,
 *                    so a kernel stays within JIT_MAX_INST.  LLVM's time per op is flat in
 *                    a chain up to here (5,000 random binary ops in kernels of 1024, 256 and
 *                    64 ops: 395, 466 and 970 ms).
 *   KERNEL_MAX_LIVE  values computed in the kernel and still needed once the op being added
 *                    is computed: read by a later op, or stored (a kernel stores its values
 *                    after computing all of them, so each is held in a register, or spilled,
 *                    to the end of the body).  LLVM's cost per such value grows past about
 *                    32: one kernel of K independent stored ops took 19, 25, 36, 59 and 113
 *                    ms of CPU for K = 16, 32, 48, 64, 96 (0.4-0.7 ms per value up to 48,
 *                    1.5 beyond).  A wide graph's 5,000 ops in kernels of up to 1024 ops and
 *                    hundreds of such values compiled in 11.8 s; bounded, in 6.0 s.  (32 is
 *                    also AVX-512's count of vector registers.) */
#define KERNEL_MAX_OPS (JIT_MAX_INST / 4)
#define KERNEL_MAX_LIVE 32

typedef struct view {
    int32_t base;     /* materialised node */
    int64_t offset;   /* elements */
    int64_t strides[IR_MAX_RANK]; /* over the node's own shape */
} view;

typedef struct nodeinfo {
    int cls;
    int32_t cluster;  /* ELEM (and materialised VIEW/FULL): its cluster; else -1 */
    int32_t lastdep;  /* highest cluster id this value depends on, -1 none */
    bool stored;      /* written to memory by its cluster */
    bool pending;     /* ELEM that reads only buffers and splats: clustered by its first
                       * user, so leaves like `x * 0.5` fuse into the kernel that needs them */
    int32_t step;     /* step that produces the buffer (BUF from REF, stored values) */
    view v;           /* VIEW, and BUF (identity) */
    jit_loc loc;      /* where a materialised value lives */
    bool has_loc;
    int32_t last_use; /* last step index reading the buffer */
    uint8_t role;     /* in a reduction cluster: R_SPACE (shape of the space) or R_ROW */
    int32_t alias;    /* an output view that is the whole buffer of node alias - 1 (0: none) */
    bool ranged;      /* an output view that is one contiguous range of its base's value
                       * (elements v.offset.. of v.base), stored straight into the output by
                       * the kernel that computes the base (a JIT_ST_RANGE store of its
                       * cluster, `cluster`): no copy step */
    int32_t folded;   /* a matmul operand computed while packing (a cast to a float dtype or
                       * a product with a scalar full) of node folded - 1 (0: none) */
    int32_t last_reader; /* the highest node reading it; INT32_MAX for an output */
    uint8_t sizes;    /* SZ_*: what fuse decided from this node's sizes (jit_fuse_resize) */
} nodeinfo;

/* Why a node is stored or a boundary is where it is: planner.why[node], only in a plan
 * that is explained (JIT_F_EXPLAIN); nodeinfo was half these bytes, copied for every plan
 * made at new sizes. */
#define JIT_WHY_LEN 160
typedef char jit_why[JIT_WHY_LEN];

enum { R_SPACE, R_ROW };

/* The outcomes of fuse's decisions that depend on sizes other than through which dims are
 * 1 or equal (nodeinfo.sizes), so that a plan made again at new sizes (resize.c) can check
 * them: a VIEW node read its operand's own buffer (not its view), no strides express it (a
 * copy kernel), it is a reshape of a contiguous value (free in eager mode), it reads the
 * whole of its base in order (an output may alias the base), it is one contiguous range of
 * a value a kernel computes (an output may be stored by that kernel: fuse.c's
 * range_of_value). */
enum { SZ_VIEW_OWN = 1, SZ_VIEW_COPY = 2, SZ_RESHAPE_FREE = 4, SZ_VIEW_WHOLE = 8, SZ_VIEW_RANGE = 16 };

typedef struct cluster {
    int32_t *members; /* ELEM nodes in order (a copy cluster has none) */
    int32_t nmembers, capmembers;
    int32_t root_copy; /* for a copy cluster: the VIEW/FULL node it materialises; else -1 */
    int32_t copy_from; /* a reshape's copy: the view walked in its own shape; else -1 */
    ir_shape shape;    /* the iteration space (a reduction: the shape it reduces) */
    int32_t shape_node; /* the node whose shape `shape` is */
    bool reduce;       /* a reduction kernel */
    bool indexing;     /* has a pad, concat, gather or arange (elementwise kernels; a
                        * reduction kernel only a concat along its reduced last axis) */
    bool contract;     /* a contraction kernel: members[0] is the matmul */
    bool epilogue;     /* contract: elementwise ops of the result may join (no 1-D operand) */
    uint32_t axes;     /* reduce: the reduced axes of `shape` */
    ir_shape keep1, keep0; /* reduce: the reduced shape with (keepdim) and without */
    bool long_rows;    /* reduce: rows too long for the caches (fuse.c's long_rows) */
} cluster;

typedef struct ivec {
    int32_t *v;
    int32_t n, cap;
} ivec;

typedef struct jit_kscratch jit_kscratch;

typedef struct planner {
    const kiln_graph *g;
    kiln_mode mode;
    unsigned flags;    /* JIT_F_* (describe.c reads JIT_F_STORES) */
    nodeinfo *ni;
    jit_why *why;      /* per node, JIT_F_EXPLAIN only (else NULL) */
    /* a plan made at new sizes: its model's description of the step being described (a
     * schedule to copy when the payload is equal: jit_kernel_schedule_like), else NULL */
    const jit_kdesc *like;
    ir_arena *arena;   /* the plan's, for its steps' arrays (describe.c) */
    /* a plan built to be kept as a model: what each step's description read (describe.c's
     * jit_describe_record), the nodes of step i at reads.v[reads_at.v[i]..reads_at.v[i+1]);
     * else NULL */
    ivec *reads, *reads_at;
    /* a plan made at new sizes: its model (resize.c), whose steps' descriptions are taken
     * as they are where what they read is unchanged (jit_describe_same); else NULL */
    const struct jit_plan_model *model;
    uint8_t *changed;  /* per node: differs from the model's (describe.c; jit_describe_free) */
    jit_kscratch *kscratch; /* describe's working arrays (describe.c; jit_describe_free) */
    cluster *cl;
    int32_t ncl, capcl;
    int32_t *users_n;  /* number of users per node */
    int32_t **users;
    int32_t *out_of;   /* first output index naming each node, -1 */
} planner;

/* Append x; false (with the error set) when out of memory (schedule.c). */
IR_HIDDEN bool jit_ivec_push(ivec *a, int32_t x);

/* fuse.c */
IR_HIDDEN kiln_status jit_fuse(planner *p);
/* The clusters and classes of p (fuse's, made at other sizes of a graph equal but for
 * sizes, whose dims equal 0, 1 and each other where p->g's do) at p->g's sizes: cluster
 * shapes and views computed again; false when a decision fuse took from sizes (SZ_*, long
 * rows) would differ here, and the plan must be made from scratch. */
IR_HIDDEN bool jit_fuse_resize(planner *p);
IR_HIDDEN bool jit_op_is_indexing(ir_op op);
IR_HIDDEN bool jit_node_is_reduce(const ir_node *nd);
/* Whether a view's strides are shape s's row-major ones (dims of size 1 aside): its
 * elements one contiguous range of its base, in order. */
IR_HIDDEN bool jit_view_is_contiguous(const view *v, const ir_shape *s);

/* schedule.c: what a step reads.  The node whose buffer a load of n (from cluster c) reads,
 * and its view; the buffers (node ids) read by a step: a cluster (c >= 0) or the reference
 * step of node r. */
IR_HIDDEN const view *jit_load_source(planner *p, int32_t n, int32_t c, view *tmp);
IR_HIDDEN bool jit_step_reads(planner *p, int32_t c, int32_t r, ivec *out);

/* schedule.c: steps are clusters 0..ncl-1 then reference steps; order[i] is the i-th step
 * to run, refnode[s] the node of reference step s (-1 for a cluster). */
typedef struct jit_sched {
    int32_t nsteps;
    int32_t *order, *refnode;
    size_t temp_bytes;
} jit_sched;
IR_HIDDEN kiln_status jit_schedule(planner *p, jit_sched *s);
IR_HIDDEN void jit_sched_free(jit_sched *s);
/* The second half of jit_schedule: a place for every buffer (inputs, constants, outputs in
 * the caller's buffers, temporaries packed by lifetime: sc->temp_bytes), given each stored
 * value's step and last_use.  Alone: a plan made again at new sizes (resize.c). */
IR_HIDDEN kiln_status jit_schedule_place(planner *p, jit_sched *sc);

/* describe.c */
IR_HIDDEN kiln_status jit_describe_kernel(planner *p, int32_t c, jit_step *s);
/* Frees describe's working arrays (p->changed; p->kscratch is kept for the next plan,
 * jit_describe_trim frees it), once the plan's steps are described. */
IR_HIDDEN void jit_describe_free(planner *p);
IR_HIDDEN kiln_status jit_describe_ref(planner *p, int32_t r, jit_step *s);
IR_HIDDEN void jit_explain_cluster(planner *p, int32_t c, const jit_step *s, FILE *f);
/* A plan built to be kept as a model (p->reads): appends what the description of step s
 * (cluster c, just described) read to p->reads, and its end to p->reads_at.  A superset of
 * the nodes whose node (type, attributes) or nodeinfo describe consulted: every node whose
 * value it built, their operands and the operands' operands (views, a concat's parts, a
 * matmul's operands and what packing folds into them), every load's base, the stored
 * nodes (and outputs stored as ranges), and each of these nodes' view base (which outputs
 * are ranges of which cluster, read by every description, jit_describe_same compares for
 * all).  false when out of memory. */
IR_HIDDEN bool jit_describe_record(planner *p, int32_t c, const jit_step *s);
/* A plan made at new sizes from p->model: whether kernel step i (cluster c) of the model's
 * plan describes it here too: its cluster, and every node its description read (the
 * model's record) with its type, attributes and nodeinfo, are equal to the model's. */
IR_HIDDEN bool jit_describe_same(planner *p, int32_t i, int32_t c);

/* Running a kernel step (kinds.def's `run`, jit_run_args in jit.h).  run.c: ELEMENTWISE
 * and REDUCTION steps. */
IR_HIDDEN kiln_status jit_run_elementwise(const jit_step *s, void *const *ptrs, const jit_run_args *a);
IR_HIDDEN kiln_status jit_run_reduction(const jit_step *s, void *const *ptrs, const jit_run_args *a);
/* contract.c: running contraction steps.  Bytes of temporaries a run packs into (at
 * s->mm_pack_off); packing a constant B once (into s->mm_bpacked); running the step (its
 * operands' buffers from s->mm_loc). */
IR_HIDDEN size_t jit_contract_temp_bytes(const jit_step *s);
IR_HIDDEN kiln_status jit_contract_prepack(jit_step *s);
IR_HIDDEN kiln_status jit_contract_run(const jit_step *s, void *const *ptrs, const jit_run_args *a);
/* contract.c: running a SKINNY step. */
IR_HIDDEN kiln_status jit_skinny_run(const jit_step *s, void *const *ptrs, const jit_run_args *a);

/* plan.c, resize.c: a plan built from scratch and the planner's state after fuse and
 * schedule, kept as the model of plans of the same graph at other sizes. */
struct jit_plan_model {
    _Atomic int refs;
    kiln_graph *g0;       /* the graph planned (a share) */
    kiln_mode mode;
    unsigned flags;       /* JIT_F_PLAN bits */
    jit_simplify_rec sr;  /* simplify's map, to do it again without deciding */
    nodeinfo *ni;         /* per node of plan->g */
    cluster *cl;
    int32_t ncl;
    jit_sched sc;         /* the order of the steps */
    ivec reads, reads_at; /* what each step's description read (jit_describe_record) */
    jit_plan *plan;       /* a reference */
    /* room for a copy of ni (one per node of plan->g) then cl, kept for the next plan made
     * from this model (resize.c; taken and given back by exchange); NULL: none */
    _Atomic(nodeinfo *) spare;
};
/* plan.c: the plan of gs (the model's simplified graph at new sizes, which the plan takes
 * on success) from planner state ni and cl (copies of the model's, overwritten), compiled
 * with flags (the model's JIT_F_PLAN bits and the caller's others); *out NULL
 * when a decision fuse took from sizes differs at these (jit_fuse_resize). */
IR_HIDDEN kiln_status jit_plan_resized(const jit_plan_model *m, const kiln_graph *gs,
                                       nodeinfo *ni, cluster *cl, unsigned flags, jit_plan **out);

#endif /* KILN_JIT_PLANNER_H */
