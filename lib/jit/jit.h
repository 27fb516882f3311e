/* jit.h — lib/jit's internal interface.  Only lib/jit includes <llvm-c/...>; nothing here
 * names an LLVM type. */
#ifndef KILN_JIT_H
#define KILN_JIT_H

#include "ir.h"

/* The host CPU as LLVM sees it, detected once at first use (thread-safe).  Kernels are
 * compiled for exactly this CPU name and feature string. */
typedef struct jit_host {
    const char *cpu;      /* e.g. "znver4" */
    const char *features; /* LLVM feature string, "+avx2,+avx512f,..." */
    const char *triple;   /* e.g. "x86_64-pc-linux-gnu" */
    int vector_bits;      /* widest usable vector register: 512, 256 or 128 */
    const char *llvm_version;
    /* The last-level data cache: bytes, and where the figure came from ("sysfs" for
     * /sys/devices/system/cpu/cpu0/cache, "sysconf", or "default" when neither says). */
    size_t llc_bytes;
    const char *llc_source;
} jit_host;

IR_HIDDEN const jit_host *jit_host_info(void);

/* ---- kernels ---------------------------------------------------------------------------
 * A kernel has a kind; each kind has its own size-free description (jit_kdesc, the
 * kernel cache key: its bytes are hashed and compared, so every field is fixed-size and
 * unused fields are zero), its own lowering file and its own rule for splitting work:
 *
 *   ELEMENTWISE (lower.c)         the elements of the output, row-major; threads take
 *                                 contiguous, vector-aligned chunks.
 *   REDUCTION (lower_reduce.c)    kept dims x reduced dims; threads take kept elements
 *                                 (rows); a long reduction is split into a number of pieces
 *                                 fixed by its length, combined in order.
 *   CONTRACTION                   (reserved for matmul: M x N tiles over K)
 *
 * Sizes and strides are run-time arguments:
 *
 *   void kernel(void *const *ptrs, const int64_t *strides, const int64_t *dims,
 *               int64_t begin, int64_t end, const void *aux);
 *
 * (aux: a jit_raux for reductions, the ext array of an elementwise kernel, or NULL).
 *
 * ELEMENTWISE computes the elements [begin, end) (row-major linear indices) of an
 * iteration space of `rank` dims.  ptrs[0..nloads) are the loaded buffers (already
 * offset), ptrs[nloads..) the stored ones (contiguous, row-major over the iteration
 * space).  strides[j*rank+d] is load j's element stride along dim d (0 where it
 * broadcasts); aux is the ext array of ranged and indexed loads (or NULL).
 *
 * REDUCTION: the iteration space is the kept dims (outer, rank - nred of them, at least
 * one) then the reduced dims (nred >= 1).  [begin, end) are kept elements (row-major over
 * the kept dims); every slot, loads and stores, has strides over all rank dims.  The
 * instruction list is the elementwise one plus JIT_REDUCE (a reduction over the reduced
 * dims of its operand); an instruction that depends on a reduction's result is computed in
 * a later pass over the same row (see lower_reduce.c). */
typedef enum jit_kernel_kind {
    JIT_KERNEL_ELEMENTWISE,
    JIT_KERNEL_REDUCTION,
    JIT_KERNEL_CONTRACTION,
} jit_kernel_kind;

typedef enum jit_kind {
    JIT_LOAD,   /* value of load slot `slot` */
    JIT_SPLAT,  /* the scalar `value` in every lane */
    JIT_OP,     /* ir op `op` of instructions a[0..nin) */
    JIT_REDUCE, /* REDUCTION: reduce op `op` of a[0] over the reduced dims, per kept element */
} jit_kind;

typedef enum jit_load_class {
    JIT_CONTIG,  /* stride 1 along the vector dim: vector load */
    JIT_BCAST,   /* stride 0 along the vector dim: one scalar, splat */
    JIT_STRIDED, /* any other stride: gather (scatter for stores) */
} jit_load_class;
/* REDUCTION: flag on a load's cls: stride 0 along every reduced dim (one value per kept
 * element, so it is loaded once per row). */
#define JIT_ROWWISE 0x10
/* ELEMENTWISE: a load valid only inside a box of the iteration space, lo[d] <= i_d < hi[d]
 * (pad, concat); elsewhere the value of instruction a[0].  The box is a run-time argument:
 * aux points at int64 ext[(slot * rank + d) * 2 + {0, 1}]. */
#define JIT_RANGED 0x20
/* ELEMENTWISE: a gather (take): the element at offset + idx * ext[slot*rank*2] where idx is
 * instruction a[0], valid when 0 <= idx < ext[slot*rank*2 + 1], else 0. */
#define JIT_INDEXED 0x40
#define JIT_CLS(c) ((c) & 0xf)

/* REDUCTION store classes: a value per element of the space, or one per kept element
 * (a reduced shape: the reductions' results and what is computed from them).
 * ELEMENTWISE: store_cls is NULL (every store ordinary) or per store JIT_ST_SPACE or
 * JIT_ST_STREAM: non-temporal stores of full vectors at aligned addresses (the kernel
 * peels its rows to the first streaming store's alignment and fences before returning);
 * it is part of the description, so a streaming kernel is never mistaken in the cache for
 * an ordinary one. */
typedef enum jit_store_class {
    JIT_ST_SPACE,
    JIT_ST_SPACE_SCATTER,
    JIT_ST_ROW,
    JIT_ST_STREAM,
} jit_store_class;

typedef struct jit_kinst {
    uint8_t kind;  /* jit_kind */
    uint8_t op;    /* ir_op (JIT_OP, JIT_REDUCE) */
    uint8_t dtype; /* result dtype */
    uint8_t cls;   /* jit_load_class [| JIT_ROWWISE] (JIT_LOAD) */
    int32_t slot;  /* JIT_LOAD */
    int32_t a[3];  /* JIT_OP operands: indices of earlier instructions */
    ir_scalar value; /* JIT_SPLAT; ARANGE: start */
    ir_scalar value2; /* ARANGE (a JIT_OP of the linear index): delta */
} jit_kinst;

#define JIT_MAX_INST 4096
typedef struct jit_kdesc {
    int32_t kind;       /* jit_kernel_kind */
    int32_t rank;       /* >= 1 (REDUCTION: >= 2) */
    int32_t nred;       /* REDUCTION: the last nred dims are reduced */
    int32_t lanes_kept; /* REDUCTION: 1 = vector lanes along the last kept dim ("columns"),
                         * 0 = along the last reduced dim ("rows") */
    int32_t ninst, nloads, nstores;
    jit_kinst *inst;    /* ninst */
    int32_t *stores;    /* nstores instruction indices, stored in this order */
    uint8_t *store_cls; /* nstores jit_store_class: REDUCTION; ELEMENTWISE (or NULL) */
} jit_kdesc;

/* REDUCTION run-time arguments.  mode 0: whole rows [begin, end).  mode 1 (a piece of
 * one long row `begin`): reduce sub-rows [sub_begin, sub_end) (the reduced dims but the
 * last) x [in_begin, in_end) (the last), write the accumulators to `partial`.  mode 2:
 * rows [begin, end), accumulators from `npieces` consecutive partials per row (row r's
 * at partial + r * npieces * jit_reduce_partial_bytes), combined in order. */
typedef struct jit_raux {
    int64_t mode;
    int64_t sub_begin, sub_end, in_begin, in_end;
    int64_t npieces;
    void *partial;
    /* mode 0 and 2, "rows" kernels that spill: per call, room for one row's spilled values
     * (jit_reduce_spill_bytes per reduced element) */
    void *scratch;
} jit_raux;
/* Bytes per reduced element a "rows" kernel spills: values too costly to recompute in a
 * later pass (an exp for softmax's final pass) are written to a scratch row in the pass
 * that first computes them and read back later. */
IR_HIDDEN size_t jit_reduce_spill_bytes(const jit_kdesc *d);
/* Bytes of one piece's accumulators; 0 when the kernel cannot be split (a reduction
 * reads another's result, or it stores values over the whole space). */
IR_HIDDEN size_t jit_reduce_partial_bytes(const jit_kdesc *d);

/* Can the JIT compute this op in a kernel (for these operand dtypes)? */
IR_HIDDEN bool jit_op_is_lowerable(const kiln_graph *g, const ir_node *nd);
/* Does vmath provide this (transcendental) op? (lower.c) */
IR_HIDDEN bool jit_math_available(ir_op op);
/* The documented max error in ULP of a vector-math op for a float dtype (0: exact). */
IR_HIDDEN double jit_math_ulp_bound(ir_op op, kiln_dtype dtype);

/* A compiled kernel from the cache (shared, reference counted). */
typedef void (*jit_kernel_fn)(void *const *ptrs, const int64_t *strides, const int64_t *dims,
                              int64_t begin, int64_t end, const void *aux);
typedef struct jit_kernel jit_kernel;
/* Compile flags: keep text dumps; bypass the caches (cold-compile measurements); stream
 * every eligible store whatever its size, or none (KILN_STREAM, KILN_NO_STREAM; the
 * default decides by size, see describe.c). */
enum { JIT_F_DUMPS = 1, JIT_F_NOCACHE = 2, JIT_F_STREAM = 4, JIT_F_NO_STREAM = 8 };
#define JIT_F_STORES (JIT_F_STREAM | JIT_F_NO_STREAM)
/* Find or compile the kernels for the n descriptions d[] (a plan's): out[i] and hit[i]
 * (LLVM work avoided).  Every kernel the cache lacks is compiled in one LLVM module, so a
 * plan pays LLVM's per-module cost once (with JIT_F_DUMPS, one module per kernel, so each
 * kernel's dumps are its own).  Equal descriptions share one kernel.  On error nothing is
 * returned and nothing leaks. */
IR_HIDDEN kiln_status jit_kernels_get(int n, const jit_kdesc *const *d, unsigned flags,
                                      jit_kernel **out, bool *hit);
/* Drop every cached kernel no program uses. */
IR_HIDDEN void jit_cache_trim(void);
/* Drop every cached compiled program no program uses (program.c), releasing its kernels to
 * jit_cache_trim.  For tests that check memory returns to a steady state. */
IR_HIDDEN void jit_plan_cache_trim(void);
IR_HIDDEN jit_kernel_fn jit_kernel_entry(const jit_kernel *k);
IR_HIDDEN void jit_kernel_release(jit_kernel *k);
/* Text dumps captured when the kernel was compiled (NULL if not requested then). */
IR_HIDDEN const char *jit_kernel_dump(const jit_kernel *k, int what /* 0 llvm, 1 opt, 2 asm */);
IR_HIDDEN void jit_cache_counters(uint64_t *compiles, uint64_t *hits);

/* Lowering (lower.c): compile n descriptions into one module, function i named names[i];
 * *code frees them all (jit_lower_free_code). */
IR_HIDDEN kiln_status jit_lower_compile(int n, const jit_kdesc *const *d, const char *const *names,
                                        jit_kernel_fn *fn, void **code, char **dumps /* [3] or NULL */);
IR_HIDDEN void jit_lower_free_code(void *code);

/* ---- thread pool (pool.c) ---------------------------------------------------------------- */
/* Run fn(ctx, i) for i in [0, nchunks) on the pool (the caller takes part); returns when
 * all are done.  nchunks == 1 runs on the caller's thread. */
typedef void (*jit_task_fn)(void *ctx, int64_t chunk);
IR_HIDDEN void jit_pool_run(jit_task_fn fn, void *ctx, int64_t nchunks);
IR_HIDDEN int jit_pool_threads(void);

/* ---- plans (plan.c) ------------------------------------------------------------------------
 * A plan turns a verified graph into steps over buffers:
 *   KERNEL  one compiled kernel over one iteration space (a fused cluster, or one op in
 *           eager mode, or the materialisation of a view);
 *   REF     one op the JIT does not compile yet, run by the reference interpreter;
 *   COPY    a memcpy (an output that is an input, a constant or another output).
 * Every buffer is an input, a constant, an output or a slice of one temporary block. */
typedef enum jit_loc_kind { JIT_LOC_INPUT, JIT_LOC_OUTPUT, JIT_LOC_CONST, JIT_LOC_TEMP } jit_loc_kind;

typedef struct jit_loc {
    jit_loc_kind kind;
    int32_t index;     /* INPUT / OUTPUT: position */
    size_t offset;     /* TEMP: byte offset in the block */
    const void *cdata; /* CONST */
} jit_loc;

typedef enum jit_step_kind { JIT_STEP_KERNEL, JIT_STEP_REF, JIT_STEP_COPY } jit_step_kind;

typedef struct jit_step {
    jit_step_kind kind;
    char *explain; /* what the step computes and why its boundary is there */
    /* KERNEL */
    jit_kdesc desc;
    jit_kernel *kernel;
    int nslots;
    jit_loc *slot;       /* loads then stores */
    int64_t *slot_off;   /* element offset into each slot's buffer */
    int64_t *strides;    /* nloads * rank (REDUCTION: every slot) */
    int64_t *ext;        /* ELEMENTWISE: nloads * rank * 2, boxes and gather axes (or NULL) */
    int64_t dims[IR_MAX_RANK];
    int64_t total;       /* elements of the iteration space */
    size_t bytes_per_elem; /* bytes moved per element (for chunking) */
    /* KERNEL of kind REDUCTION: kept elements, reduced elements per row and the size of
     * the last reduced dim; bytes of one piece's accumulators (0: never split) */
    int64_t rows, rlen, rinner;
    size_t partial_bytes;
    size_t spill_bytes;  /* per reduced element, per chunk of rows (jit_reduce_spill_bytes) */
    /* REF */
    kiln_graph *sub;     /* one-op graph: inputs = operands */
    int nin;
    jit_loc *in;
    jit_loc out;
    /* COPY */
    jit_loc from, to;
    size_t bytes;
} jit_step;

typedef struct jit_plan {
    kiln_graph *g; /* the simplified graph the steps compute (owned) */
    int nsteps;
    jit_step *steps;
    size_t temp_bytes;
    char *simplify_log;
    int nkernels, nhits; /* kernels compiled for this plan / found in the cache */
} jit_plan;

/* Build and compile the plan of verified graph `g` in `mode` (FUSED or EAGER). */
IR_HIDDEN kiln_status jit_plan_build(const kiln_graph *g, kiln_mode mode, unsigned flags,
                                     jit_plan **out);
IR_HIDDEN void jit_plan_free(jit_plan *p);
/* Run: inputs/outputs as in kiln_program_run; temp is temp_bytes of 64-aligned memory. */
IR_HIDDEN kiln_status jit_plan_run(const jit_plan *p, const void *const *inputs,
                                   void *const *outputs, void *temp);
IR_HIDDEN void jit_plan_dump(const jit_plan *p, FILE *f);

/* Simplification (simplify.c): dead code, common subexpressions, folding of elementwise
 * ops on `full` operands.  Returns a new verified graph; *log says what it did. */
IR_HIDDEN kiln_status jit_simplify(const kiln_graph *g, kiln_graph **out, char **log);

#endif /* KILN_JIT_H */
