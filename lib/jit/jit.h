/* jit.h — lib/jit's internal interface.  Only lib/jit includes <llvm-c/...>; nothing here
 * names an LLVM type. */
#ifndef KILN_JIT_H
#define KILN_JIT_H

#include <pthread.h>

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
 * A kernel has a kind (one row of kinds.def); each kind has its own size-free description (jit_kdesc, the
 * kernel cache key once serialised by jit_kdesc_serialise, which must write every field
 * a new kind adds; unused fields are zero), its own lowering file and its own rule for
 * splitting work:
 *
 *   ELEMENTWISE (lower.c)         the elements of the output, row-major; threads take
 *                                 contiguous, vector-aligned chunks.
 *   REDUCTION (lower_reduce.c)    kept dims x reduced dims; threads take kept elements
 *                                 (rows); a long reduction is split into a number of pieces
 *                                 fixed by its length, combined in order.
 *   CONTRACTION (lower_contract.c) matmul: [batch.., M, N] of sums over K.  The operands are
 *                                 packed (contract.c) into panels of the register tile;
 *                                 threads take blocks of M x N of one batch element, never
 *                                 a split of K, so every element's sum runs in one order.
 *   SKINNY (lower_skinny.c)       matmul with few rows per batch element (a decoder's one-row
 *                                 x @ W): B read in place, once, no packing; rows form
 *                                 (B's N stride 1: vectors along N) or dots form (B's K
 *                                 stride 1, an x @ permute(W): dot products along K); threads
 *                                 take blocks of columns, never a split of K.
 *
 * Sizes and strides are run-time arguments:
 *
 *   void kernel(void *const *ptrs, const int64_t *strides, const int64_t *dims,
 *               int64_t begin, int64_t end, const void *aux);
 *
 * (aux: a jit_raux for reductions, a jit_caux for contractions, the ext array of an
 * elementwise kernel, or NULL).
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
 * a later pass over the same row (see lower_reduce.c).
 *
 * CONTRACTION: the iteration space is [batch.., M, N] (rank >= 2; a 1-D operand's missing
 * axis is a dim of size 1).  One instruction is JIT_OP with op IR_OP_MATMUL and no
 * operands: the sum over K of the tile being computed; the others are its epilogue
 * (elementwise ops of it, loads with strides over the space as in ELEMENTWISE).  Stores are
 * contiguous, row-major over the space.  [begin, end) is unused: aux (a jit_caux) names
 * one batch element, a block of rows and columns, and the packed panels covering them.
 *
 * SKINNY: the space, instructions and stores of a CONTRACTION; aux (a jit_saux) names one
 * batch element, every row of it (at most the description's tile_m) and a block of columns,
 * and A and B in place with their strides. */
typedef enum jit_kernel_kind {
#define KIND(E, name, schedule, lower, run, dump) JIT_KERNEL_##E,
#include "kinds.def"
#undef KIND
} jit_kernel_kind;

typedef enum jit_kind {
    JIT_LOAD,   /* value of load slot `slot` */
    JIT_SPLAT,  /* the scalar `value` in every lane */
    JIT_PARAM,  /* the scalar run-time argument `slot` in every lane (see jit_kdesc.nparams) */
    JIT_OP,     /* ir op `op` of instructions a[0..nin); ARANGE: of a[0] (start) and a[1]
                 * (delta), each a JIT_SPLAT or JIT_PARAM */
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
 * aux points at int64 ext[(slot * rank + d) * 2 + {0, 1}].  REDUCTION ("rows" kernels
 * only: a concat along the last axis, which they reduce): the box of the vector dim, the
 * others whole; jit_raux.ext is the same array. */
#define JIT_RANGED 0x20
/* ELEMENTWISE: a gather (take): the element at offset + idx * ext[slot*rank*2] where idx is
 * instruction a[0], valid when 0 <= idx < ext[slot*rank*2 + 1], else 0. */
#define JIT_INDEXED 0x40
#define JIT_CLS(c) ((c) & 0xf)

/* REDUCTION store classes: a value per element of the space, or one per kept element
 * (a reduced shape: the reductions' results and what is computed from them); in "rows"
 * kernels a value per element of the space may be JIT_ST_STREAM.
 * ELEMENTWISE: store_cls is NULL (every store ordinary) or per store JIT_ST_SPACE,
 * JIT_ST_STREAM or JIT_ST_RANGE.  JIT_ST_STREAM: non-temporal stores of full vectors at
 * aligned addresses (the kernel peels its rows to the first streaming store's alignment,
 * rows kernels in a pass that reduces nothing, and fences before returning); it is part of
 * the description, so a streaming kernel is never mistaken in the cache for an ordinary one.
 * CONTRACTION, SKINNY: store_cls is NULL or per store JIT_ST_SPACE or JIT_ST_RANGE.
 * JIT_ST_RANGE (ELEMENTWISE, CONTRACTION, SKINNY): only the elements [lo, hi) of the space
 * (row-major linear indices) are stored, element i at i - lo of the slot's buffer (a graph
 * output that is one contiguous range of a computed value: fuse.c's ranged outputs); lo and
 * hi are run-time arguments, the last parameters (jit_kdesc_range_param), so the kernel does
 * not depend on where the range lies. */
typedef enum jit_store_class {
    JIT_ST_SPACE,
    JIT_ST_SPACE_SCATTER,
    JIT_ST_ROW,
    JIT_ST_STREAM,
    JIT_ST_RANGE,
} jit_store_class;

typedef struct jit_kinst {
    uint8_t kind;  /* jit_kind */
    uint8_t op;    /* ir_op (JIT_OP, JIT_REDUCE) */
    uint8_t dtype; /* result dtype */
    uint8_t cls;   /* jit_load_class [| JIT_ROWWISE] (JIT_LOAD) */
    int32_t slot;  /* JIT_LOAD: the load slot; JIT_PARAM: the parameter */
    int32_t a[3];  /* JIT_OP operands: indices of earlier instructions */
    ir_scalar value; /* JIT_SPLAT */
} jit_kinst;

#define JIT_MAX_INST 4096
/* Parameters per kernel (jit_kdesc.nparams); a kernel with more scalars keeps the rest as
 * constants in its code (JIT_SPLAT). */
#define JIT_MAX_PARAMS 32

/* f32 sums and means in reduction kernels (rows) add this many elements per lane in f32,
 * then carry the block's sum in f64 (lower_reduce.c; the bound in docs/semantics.md). */
#define JIT_SUM_BLOCK 8

/* How a kernel is compiled (part of its description, so of the cache keys).  FULL: vector
 * math inlined, the vector body once unmasked and once more under a lane mask for the
 * head and the tail, LLVM's optimising code generator.  COMPACT (ELEMENTWISE only, for
 * plans too large to compile that way in reasonable time; the planner decides, see
 * plan.c): vector math called out of line (one copy per module), one vector body under a
 * lane mask for every iteration (no streaming stores), LLVM's fast code generator
 * (-O0: fast instruction selection and register allocation).  Same results, bit for
 * bit; slower code (docs/jit.md, "Compact code"). */
typedef enum jit_tier {
    JIT_TIER_FULL,
    JIT_TIER_COMPACT,
} jit_tier;

struct rplan; /* reduce_plan.h */

/* How a kernel is computed, beyond what it computes: its schedule, decided once, without
 * LLVM, by its kind's `schedule` hook (kinds.def) in the describe pass
 * (jit_kernel_schedule), written into the cache key (kdesc.c), and emitted as it says: the
 * lowering files make no such decision of their own.  Zero where a kind has no use for a
 * field.  (A REDUCTION's schedule, larger and per instruction, is its rsched.) */
typedef struct jit_ksched {
    int32_t lanes; /* every kind: lanes of a jit vector, W (the host's vector bits / 32) */
    /* ELEMENTWISE (FULL tier; a COMPACT kernel peels and streams nothing): the store whose
     * rows are peeled to its alignment, so that the vector body stores aligned vectors (the
     * first streaming store, else store 0; -1: no store), and the shortest row segment, in
     * vectors, that is peeled (0: every segment, as for a streaming store; ksched.c's
     * PEEL_MIN_VECTORS says why not shorter ones otherwise) */
    int32_t peel, peel_min;
    /* CONTRACTION: the register tile, mr rows x nrv vectors (nr = nrv * lanes columns,
     * from the host's registers: ksched.c), and the steps of k per iteration of the k loop */
    int32_t mr, nrv, nr, kunroll;
    /* SKINNY: the register tile's vectors per row (rows form) or columns per group (dots
     * form: jit_skinny_tile), the rows of B per step of the rows form's k loop, the
     * columns a rows-form call takes at most (jit_skinny_cols), and how far ahead either
     * form prefetches B into L2, in bytes (rows: of the call's columns; 0: it does not) */
    int32_t tile_n, kblock, cols, pf_bytes;
} jit_ksched;

typedef struct jit_kdesc {
    int32_t kind;       /* jit_kernel_kind */
    int32_t rank;       /* >= 1 (REDUCTION: >= 2) */
    int32_t nred;       /* REDUCTION: the last nred dims are reduced */
    int32_t lanes_kept; /* REDUCTION: 1 = vector lanes along the last kept dim ("columns"),
                         * 0 = along the last reduced dim ("rows") */
    int32_t ninst, nloads, nstores;
    /* Scalars the kernel takes as run-time arguments, not as constants in its code: the
     * graph's `full` values, pad fills and arange starts and steps (describe.c).  So graphs
     * that differ only in such a value share one kernel.  Parameter j (at most
     * JIT_MAX_PARAMS) is read once, at the kernel's entry, from ptrs[nloads + nstores + j]:
     * 8 bytes holding an f32 or f64 of the instruction's dtype, or (integers and bool) an
     * int64 of its value.  After the instructions' parameters, two int64 per JIT_ST_RANGE
     * store, in store order: its range [lo, hi) (jit_kdesc_range_param). */
    int32_t nparams;
    jit_kinst *inst;    /* ninst */
    int32_t *stores;    /* nstores instruction indices, stored in this order */
    uint8_t *store_cls; /* nstores jit_store_class: REDUCTION; ELEMENTWISE (or NULL) */
    int32_t tier;       /* jit_tier */
    /* SKINNY: how B is read (jit_skinny_form) and the rows of the register tile (a power of
     * two, at least the rows of A per batch element); 0 for other kinds */
    int32_t bform, tile_m;
    jit_ksched sched; /* how it is computed (jit_kernel_schedule) */
    /* REDUCTION: its schedule (reduce_plan.h: each instruction's phase and whether it is
     * row-wise, the values spilled to scratch rows, a piece's accumulator bytes, the passes
     * run one row behind or ahead), made once, without LLVM, by jit_reduce_schedule in the
     * describe pass; the lowering emits it and `kiln dump --plan` prints it; serialised into
     * the key (kdesc.c), so a change in how schedules are made changes the keys.  Owned
     * (jit_reduce_schedule_free); NULL for other kinds. */
    struct rplan *rsched;
    /* REDUCTION: the scratch its runner provides, from rsched (jit_reduce_schedule). */
    size_t partial_bytes, spill_bytes;
} jit_kdesc;

typedef enum jit_skinny_form {
    /* B [K, N] with N stride 1: acc[r] += A[r, p] * B[p, j..j+W].  The step's own kernel is
     * the epilogue on the sums; the sums are its core's */
    JIT_SKINNY_ROWS,
    JIT_SKINNY_DOTS, /* B's K stride 1 (and A's): acc[r][j] += A[r, p..p+W] * B[p..p+W, j] */
    /* a rows step's core (jit_step.core): the k loop alone, its raw sums to jit_saux.part;
     * one description, so one kernel, for every rows step of a dtype, tile and schedule,
     * whatever its epilogue (jit_skinny_core) */
    JIT_SKINNY_CORE,
} jit_skinny_form;

/* CONTRACTION run-time arguments: rows [i0, i1) x columns [j0, j1) of batch element
 * `batch` (row-major over the batch dims).  a: the packed panels of A covering the rows
 * (i0 a multiple of the tile's mr; panel q holds rows i0 + q*mr.. as k x mr elements,
 * zero beyond M); b: those of B covering the columns (k x nr each, zero beyond N). */
typedef struct jit_caux {
    const void *a, *b;
    int64_t k, batch, i0, i1, j0, j1;
    /* k blocking: this call sums k = [p0, p0 + k) of panels kstride long (a and b point
     * at row p0 of the first panels); with JIT_K_ACCUMULATE it continues the sums in c
     * (tile element (i, j) at c[(i - i0) * ldc + j - j0], whole padded tiles), without
     * JIT_K_FINAL it stores them back there instead of running the epilogue. */
    int64_t kstride;
    void *c;
    int64_t ldc, kflags;
} jit_caux;
enum { JIT_K_ACCUMULATE = 1, JIT_K_FINAL = 2 };
/* SKINNY run-time arguments: every row [0, m) of batch element `batch`, columns [j0, j1)
 * (rows form: j1 - j0 <= jit_skinny_cols).  a, b: A's and B's matrices of that batch element,
 * in place; a_m, a_k: A's element strides along M and K; bs: B's stride along K (rows form;
 * along N it is 1) or along N (dots form; along K it is 1, and A's too).
 * Rows form: the core (JIT_SKINNY_CORE) sums a and b's k rows (all of K, or a piece's:
 * jit_skinny_pieces, a and b moved to its first) and stores the raw sums of rows [0, m) at
 * part, row r at part + r * ps; the step's kernel (JIT_SKINNY_ROWS; k unused) adds the
 * np >= 1 sums at part + q * pp + r * ps in order q = 0, 1, ... to -0.0 and runs the
 * epilogue.  part is the call's column j0 of piece 0 (or of its own piece).  The dots
 * form's kernel sums and runs the epilogue; part to np unused. */
typedef struct jit_saux {
    const void *a, *b;
    int64_t k, batch, m, j0, j1, a_m, a_k, bs;
    void *part;
    int64_t ps, pp, np;
} jit_saux;
/* Rows form: the columns one call takes at most (jit_skinny_cols): its running sums live in
 * a stack array of tile_m rows of that many elements, JIT_SKINNY_YBYTES in all.  Each row of
 * B is read in a contiguous segment of that many columns, so the longer the better
 * (docs/benchmarking.md, "Skinny contraction: rows of B per step, columns per call, blocks
 * per thread"). */
#define JIT_SKINNY_YBYTES (32 << 10)
IR_HIDDEN int64_t jit_skinny_cols(kiln_dtype t, int tile_m);
/* (skinny.c) The rows form's tile (rows x vectors), the dots form's (rows x columns) for a
 * tile of tile_m rows of dtype t on this host, and the most rows a tile may have. */
IR_HIDDEN void jit_skinny_tile(kiln_dtype t, int tile_m, int bform, int *nv_or_nc);
IR_HIDDEN int jit_skinny_max_rows(kiln_dtype t);

/* (ksched.c) The schedule of description d (d->sched, and a reduction's rsched): the lanes,
 * then its kind's `schedule` hook (kinds.def); once, in the describe pass, after d's kind
 * and payload are final.  KILN_ERR_NOMEM when out of memory. */
IR_HIDDEN kiln_status jit_kernel_schedule(jit_kdesc *d);
/* (ksched.c) jit_kernel_schedule, or the schedule of `like` (NULL: none) copied when like is
 * a description whose payload equals d's: a plan made at new sizes passes its model's step
 * (resize.c), whose kernels mostly stay the same. */
IR_HIDDEN kiln_status jit_kernel_schedule_like(jit_kdesc *d, const jit_kdesc *like);
/* (ksched.c) The dtype of a CONTRACTION or SKINNY description's matmul instruction. */
IR_HIDDEN kiln_dtype jit_matmul_dtype(const jit_kdesc *d);
/* (ksched.c) For `kiln dump --plan`: description d's schedule, in lines indented by six
 * spaces (its kind's `dump` hook). */
IR_HIDDEN void jit_kernel_schedule_dump(const jit_kdesc *d, FILE *f);
IR_HIDDEN kiln_status jit_elementwise_schedule(jit_kdesc *d);
IR_HIDDEN void jit_elementwise_dump(const jit_kdesc *d, FILE *f);
IR_HIDDEN void jit_contract_dump(const jit_kdesc *d, FILE *f);
IR_HIDDEN void jit_skinny_dump(const jit_kdesc *d, FILE *f);
IR_HIDDEN void jit_reduce_dump(const jit_kdesc *d, FILE *f);
IR_HIDDEN kiln_status jit_contract_schedule(jit_kdesc *d);
IR_HIDDEN kiln_status jit_skinny_schedule(jit_kdesc *d);
/* Constant matmul operands packed so far (contract.c), for kiln_jit_stats. */
IR_HIDDEN uint64_t jit_contract_prepacked(void);

/* REDUCTION run-time arguments.  mode 0: whole rows [begin, end).  mode 1 (a piece of
 * one long row `begin`): reduce sub-rows [sub_begin, sub_end) (the reduced dims but the
 * last) x [in_begin, in_end) (the last), write the accumulators to `partial`.  mode 2:
 * rows [begin, end), accumulators from `npieces` consecutive partials per row (row r's
 * at partial + r * npieces * the partial bytes of jit_reduce_schedule), combined in order. */
typedef struct jit_raux {
    int64_t mode;
    int64_t sub_begin, sub_end, in_begin, in_end;
    int64_t npieces;
    void *partial;
    /* mode 0 and 2, "rows" kernels that spill: per call, room for one row's spilled values
     * (jit_reduce_schedule's spill bytes per reduced element) */
    void *scratch;
    /* the boxes of ranged loads (JIT_RANGED), as an elementwise kernel's aux; NULL: none */
    const int64_t *ext;
} jit_raux;
/* A reduction description's schedule (reduce_plan.c; the kind's `schedule` hook), made once:
 * d->rsched, and from it the scratch its runner provides, d->partial_bytes and
 * d->spill_bytes.  partial_bytes: bytes
 * of one piece's accumulators, 0 when the kernel cannot be split (a reduction reads
 * another's result, or it stores values over the whole space); spill_bytes: bytes per
 * reduced element a "rows" kernel spills (values too costly to recompute in a later pass,
 * an exp for softmax's final pass, written to a scratch row in the pass that first computes
 * them and read back later; two rows' worth when its last pass runs one row behind).  The
 * lowering emits exactly that schedule, so it and the runner cannot disagree.  Nothing for
 * other kinds.  KILN_ERR_NOMEM when out of memory (nothing made). */
IR_HIDDEN kiln_status jit_reduce_schedule(jit_kdesc *d);
IR_HIDDEN void jit_reduce_schedule_free(jit_kdesc *d);
/* d's schedule copied from that of `from`, a scheduled reduction description whose payload
 * equals d's (jit_kdesc_payload_equal): a deep copy, the same as jit_kernel_schedule(d)
 * would make (the schedule is made from the payload alone).  KILN_ERR_NOMEM when out of
 * memory (nothing made). */
IR_HIDDEN kiln_status jit_reduce_schedule_copy(jit_kdesc *d, const jit_kdesc *from);
/* Can the JIT compute this op in a kernel (for these operand dtypes)? */
IR_HIDDEN bool jit_op_is_lowerable(const kiln_graph *g, const ir_node *nd);

/* ---- serialised descriptions (kdesc.c) ------------------------------------------------------
 * A growable byte buffer; a failed allocation sets `failed` and later writes do nothing. */
typedef struct jit_buf {
    unsigned char *data;
    size_t len, cap;
    bool failed;
} jit_buf;
IR_HIDDEN bool jit_buf_put(jit_buf *b, const void *p, size_t n);
IR_HIDDEN void jit_buf_u8(jit_buf *b, unsigned v);
IR_HIDDEN void jit_buf_u32(jit_buf *b, uint32_t v); /* little-endian */
IR_HIDDEN void jit_buf_u64(jit_buf *b, uint64_t v);
IR_HIDDEN void jit_buf_str(jit_buf *b, const char *s); /* u32 length, then the bytes */
IR_HIDDEN void jit_buf_free(jit_buf *b);
/* The version of jit_kdesc_serialise's format: bump it with any change to what it writes. */
#define JIT_KDESC_FORMAT 21
/* Append description d, every field written explicitly (kdesc.c says how): the cache key of
 * a kernel.  A new field of jit_kdesc must be written here. */
IR_HIDDEN void jit_kdesc_serialise(const jit_kdesc *d, jit_buf *b);
/* Do d and e serialise to the same bytes (one kernel)?  Compared field by field. */
IR_HIDDEN bool jit_kdesc_equal(const jit_kdesc *d, const jit_kdesc *e);
/* (kdesc.c) jit_kdesc_equal but for the schedules: what jit_kernel_schedule reads. */
IR_HIDDEN bool jit_kdesc_payload_equal(const jit_kdesc *d, const jit_kdesc *e);
/* Whether store k of d is a JIT_ST_RANGE store, and the index of the parameter holding
 * its lo (hi follows): the ranged stores' pairs are d's last parameters, in store order. */
IR_HIDDEN bool jit_kdesc_store_ranged(const jit_kdesc *d, int32_t k);
IR_HIDDEN int32_t jit_kdesc_range_param(const jit_kdesc *d, int32_t k);

/* ---- the disk cache (disk.c) ------------------------------------------------------------------
 * Object code of whole modules in files, keyed by jit_disk_module_key (disk.c explains the
 * format and the trust rules).  Not for kernels compiled with dumps, perturbed or uncached. */
#define JIT_DISK_FORMAT 1
typedef struct jit_disk {
    char path[4096]; /* the location ("off" when KILN_CACHE_DIR=off) */
    bool on;         /* usable (or, with missing, usable once created) */
    bool missing;    /* jit_disk_open without create: the directory does not exist yet */
    bool marked;     /* it holds kiln's CACHEDIR.TAG: counters are kept, clear may run */
    char why[512];   /* when off: why */
} jit_disk;
/* Resolve the location (KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln, ~/.cache/kiln) and check it
 * can be trusted (owned by the effective user, not writable by group or others) and is
 * kiln's (its CACHEDIR.TAG, or nothing but kiln's files in it); with create, make it
 * (0700) if missing and mark it. */
IR_HIDDEN void jit_disk_open(jit_disk *d, bool create);
/* jit_disk_open(d, true) for a compile; a refused directory is reported once on stderr. */
IR_HIDDEN bool jit_disk_for_compile(jit_disk *d);
/* The key of a module of n kernels: versions, host, pipeline, descriptions. */
IR_HIDDEN void jit_disk_module_key(int n, const jit_kdesc *const *d, jit_buf *key);
/* BLAKE3 of n bytes (32 bytes out). */
IR_HIDDEN void jit_disk_digest(const void *p, size_t n, uint8_t out[32]);
typedef enum jit_disk_result { JIT_DISK_MISS, JIT_DISK_HIT, JIT_DISK_REJECTED } jit_disk_result;
/* The entry for key (digest = jit_disk_digest of it): on HIT, *data (free with ir_free)
 * holds the object at *obj, *len bytes, checked against its content hash and key. */
IR_HIDDEN jit_disk_result jit_disk_load(const jit_disk *d, const uint8_t digest[32],
                                        const jit_buf *key, void **data, const void **obj,
                                        size_t *len);
/* An entry jit_disk_load returned that LLJIT would not link: counted as rejected (the
 * compile that follows rewrites it). */
IR_HIDDEN void jit_disk_unusable(const jit_disk *d);
/* Write the entry atomically (temporary file, rename), then trim to jit_disk_cap().  A
 * failure is counted (write_errors) and the process's first one said on stderr with its
 * errno text; the compile goes on (the cache is an optimisation). */
IR_HIDDEN void jit_disk_store(const jit_disk *d, const uint8_t digest[32], const jit_buf *key,
                              const void *obj, size_t len);
/* KILN_CACHE_SIZE_MB in bytes, 256 MiB when unset or empty, 0 when it is not a whole
 * number of MiB from 1 to 2^40 - 1 (jit_disk_open then turns the cache off). */
IR_HIDDEN uint64_t jit_disk_cap(void);
typedef struct jit_disk_counters {
    uint64_t hits, misses, rejected, writes, write_errors;
    uint64_t scans; /* of the directory (writes' trims, kiln cache, clear, trim) */
} jit_disk_stats;
/* This process's counts. */
IR_HIDDEN void jit_disk_counters(jit_disk_stats *c);

/* ---- the one in-memory cache (lru.c) ------------------------------------------------------
 * A reference-counted map from keys to values with hashed lookup, LRU eviction of entries
 * no one holds (by count and by bytes) and single-flight misses; the kernel cache and the
 * compiled-program cache are each one of these.  Keys and values are the caller's, freed by
 * its ops.  Thread-safe. */
typedef struct jit_lru_entry jit_lru_entry;
typedef struct jit_lru_ops {
    bool (*equal)(const void *key_a, const void *key_b);
    void (*free_key)(void *key);
    void (*free_value)(void *value);
} jit_lru_ops;
#define JIT_LRU_BUCKETS 1024
typedef struct jit_lru {
    const jit_lru_ops *ops;
    int max_entries;
    size_t max_bytes;
    int max_per_group; /* cached entries of one group (jit_lru_fill_group); 0: no limit */
    pthread_mutex_t lock;
    pthread_cond_t changed; /* an entry was filled or abandoned */
    jit_lru_entry *bucket[JIT_LRU_BUCKETS];
    jit_lru_entry *head, *tail; /* cached entries, most recently used first */
    int entries;
    size_t bytes;
    uint64_t hits, misses, waits, evictions;
} jit_lru;
#define JIT_LRU_INIT(ops_, max_entries_, max_bytes_)                                              \
    JIT_LRU_INIT_GROUPED(ops_, max_entries_, max_bytes_, 0)
#define JIT_LRU_INIT_GROUPED(ops_, max_entries_, max_bytes_, max_per_group_)                     \
    {.ops = (ops_), .max_entries = (max_entries_), .max_bytes = (max_bytes_),                    \
     .max_per_group = (max_per_group_), .lock = PTHREAD_MUTEX_INITIALIZER,                       \
     .changed = PTHREAD_COND_INITIALIZER}

typedef enum jit_lru_result {
    JIT_LRU_HIT,   /* *entry is ready and referenced for the caller; the caller keeps key */
    JIT_LRU_MISS,  /* *entry is a new pending entry that owns key: the caller compiles, then
                    * jit_lru_fill (it keeps a reference) or jit_lru_abandon */
    JIT_LRU_BUSY,  /* (without wait) another caller is filling this key; the caller keeps key */
    JIT_LRU_NOMEM, /* the caller keeps key */
} jit_lru_result;
/* Look `key` (hash h) up.  With `wait`, a pending entry is waited for (and taken over if
 * its filler abandons it); a caller must not wait while it holds pending entries. */
IR_HIDDEN jit_lru_result jit_lru_get(jit_lru *c, uint64_t h, void *key, bool wait,
                                     jit_lru_entry **entry);
IR_HIDDEN void jit_lru_fill(jit_lru *c, jit_lru_entry *e, void *value, size_t bytes);
/* jit_lru_fill, the entry in `group` when `grouped`: the cache then keeps at most
 * max_per_group cached entries of that group, evicting its least recently used ones that
 * no one holds. */
IR_HIDDEN void jit_lru_fill_group(jit_lru *c, jit_lru_entry *e, void *value, size_t bytes,
                                  bool grouped, uint64_t group);
IR_HIDDEN void jit_lru_abandon(jit_lru *c, jit_lru_entry *e);
IR_HIDDEN void *jit_lru_value(const jit_lru_entry *e);
IR_HIDDEN uint64_t jit_lru_hash(const jit_lru_entry *e); /* the hash it was looked up by */
IR_HIDDEN void jit_lru_release(jit_lru *c, jit_lru_entry *e);
/* One more reference to e, which the caller holds (released with jit_lru_release). */
IR_HIDDEN void jit_lru_retain(jit_lru *c, jit_lru_entry *e);
/* Evict every entry no one holds. */
IR_HIDDEN void jit_lru_trim(jit_lru *c);
typedef struct jit_lru_stats {
    uint64_t hits, misses, waits, evictions;
    int entries;
    size_t bytes;
} jit_lru_stats;
IR_HIDDEN void jit_lru_stats_get(jit_lru *c, jit_lru_stats *s);

/* A compiled kernel from the cache (shared, reference counted). */
typedef void (*jit_kernel_fn)(void *const *ptrs, const int64_t *strides, const int64_t *dims,
                              int64_t begin, int64_t end, const void *aux);
typedef struct jit_kernel jit_kernel;
/* Compile flags: keep text dumps (past the caches); bypass the caches (cold-compile
 * measurements); leave the disk cache alone (KILN_NO_DISK_CACHE); stream every eligible
 * store whatever its size, or none (KILN_STORES_STREAM, _CACHED; the default decides by
 * size, see describe.c). */
enum {
    JIT_F_DUMPS = 1,
    JIT_F_NOCACHE = 2,
    JIT_F_NODISK = 4,
    JIT_F_STREAM = 8,
    JIT_F_NO_STREAM = 16,
    JIT_F_COMPACT = 32,    /* every elementwise kernel JIT_TIER_COMPACT (KILN_CODE_COMPACT) */
    JIT_F_NO_COMPACT = 64, /* none (KILN_CODE_FULL); neither: by the plan's size (plan.c) */
    JIT_F_EXPLAIN = 128,   /* jit_plan_build: write each step's explanation (for dumps; a
                            * plan built without is explained on demand, jit_plan_dump) */
    JIT_F_NO_KERNELS = 256, /* jit_plan_build: the steps only, no kernel compiled or packed */
    JIT_F_TIERED = 512,     /* kernels not cached compile first as a quick tier, replaced by
                             * full code from the background thread (KILN_TIERED, cache.c) */
};
#define JIT_F_STORES (JIT_F_STREAM | JIT_F_NO_STREAM)
/* The flags that change a plan's code: a compiled program is cached under them. */
#define JIT_F_PLAN (JIT_F_STORES | JIT_F_COMPACT | JIT_F_NO_COMPACT)
/* Find or compile the kernels for the n descriptions d[] (the steps of `plan`): out[i] and
 * hit[i] (found in the in-memory cache).  Every kernel the cache lacks is compiled in one
 * LLVM module, so a plan pays LLVM's per-module cost once, or that module is loaded from
 * the disk cache; a kernel another thread is compiling is waited for, not compiled twice.
 * With JIT_F_DUMPS (past the caches), one module per kernel, so each kernel's dumps are
 * its own.  With JIT_F_TIERED, the background job that makes the full code holds a
 * reference to `plan` (jit_plan_retain) and reads d[] until it ends: d[] must not change
 * meanwhile; a NULL plan compiles full code at once.  Equal descriptions share one kernel.
 * On error nothing is returned and nothing leaks.  Thread-safe (cache.c). */
struct jit_plan;
IR_HIDDEN kiln_status jit_kernels_get(int n, const jit_kdesc *const *d, struct jit_plan *plan,
                                      unsigned flags, jit_kernel **out, bool *hit);
/* Drop every cached kernel no program uses. */
IR_HIDDEN void jit_cache_trim(void);
/* Drop every cached compiled program no program uses (program.c), releasing its kernels to
 * jit_cache_trim, and every free temporaries block.  For tests that check memory returns to
 * a steady state. */
IR_HIDDEN void jit_plan_cache_trim(void);
/* Free describe's working arrays kept between plans (describe.c), for the same tests. */
IR_HIDDEN void jit_describe_trim(void);
/* The temporaries blocks programs run in, one pool for the process (workspace.c): take a
 * block of at least n bytes (64-aligned; *cap its size; NULL when out of memory), give it
 * back after the run; trim frees every free block; the counters: blocks allocated so far
 * and bytes held now. */
IR_HIDDEN void *jit_ws_take(size_t n, size_t *cap);
IR_HIDDEN void jit_ws_give(void *p, size_t cap);
IR_HIDDEN void jit_ws_trim(void);
IR_HIDDEN void jit_ws_counters(uint64_t *allocs, uint64_t *bytes);
IR_HIDDEN jit_kernel_fn jit_kernel_entry(const jit_kernel *k);
IR_HIDDEN void jit_kernel_release(jit_kernel *k);
/* One more holder of k (a plan made at new sizes taking its kernel from another plan). */
IR_HIDDEN jit_kernel *jit_kernel_retain(jit_kernel *k);
/* Text dumps captured when the kernel was compiled (NULL if not requested then). */
IR_HIDDEN const char *jit_kernel_dump(const jit_kernel *k, int what /* 0 llvm, 1 opt, 2 asm */);
typedef struct jit_cache_stats {
    uint64_t compiles, hits;         /* kernels compiled by LLVM / found in memory */
    uint64_t entries, bytes;         /* cached now, and their object code */
    uint64_t evictions, waits;       /* see kiln_stats */
    uint64_t tierups;                /* first tiers replaced by full code (KILN_TIERED) */
} jit_cache_stats;
IR_HIDDEN void jit_cache_counters(jit_cache_stats *s);

/* The background thread (background.c): jobs run one at a time, in order, off the
 * caller's thread.  run does the work and frees the job; cancel (at exit, for a job not
 * started) frees it undone.  Where no thread can be made, or the process is exiting,
 * submit runs the job on the calling thread.  wait returns once every job submitted
 * before it has finished. */
typedef struct jit_job {
    void (*run)(struct jit_job *);
    void (*cancel)(struct jit_job *);
    struct jit_job *next;
} jit_job;
IR_HIDDEN void jit_background_submit(jit_job *j);
IR_HIDDEN void jit_background_wait(void);
/* Tests: while held, the thread starts no job (so a test can run the first tier for sure);
 * wait must not be called while held. */
IR_HIDDEN void jit_background_hold(bool on);

/* Compiling modules (module.c), in three steps so that modules are code-generated in
 * parallel and only linking is serialised:
 *   jit_module_lower: n descriptions become one new LLVM module (an LLVM context of its
 *     own), function i named names[i] (kept: they must live until jit_module_link); with
 *     dumps, its IR and assembly are captured; with want_obj, a copy of its object code;
 *     with quick, a first tier (KILN_TIERED, cache.c): optimised as full code is, then
 *     generated by LLVM's fast code generator (-O0: about half the time, slower loops);
 *   jit_modules_generate: optimise and generate the object code of each module, on the
 *     thread pool (each module on one thread, with a target machine of its own); errors
 *     are kept in the modules; jit_module_generate: one module, on the calling thread;
 *   jit_module_link: the module's error, or its object added to the JIT and the n
 *     functions looked up; *code frees them all (jit_lower_free_code); dumps (char *[3]),
 *     *obj (malloc'd, or NULL when out of memory) and *obj_len become the caller's.  Frees
 *     the module, also on error.
 * jit_module_free frees a module that is not linked. */
typedef struct jit_module jit_module;
IR_HIDDEN kiln_status jit_module_lower(int n, const jit_kdesc *const *d, const char *const *names,
                                       bool dumps, bool want_obj, bool quick, jit_module **out);
IR_HIDDEN void jit_modules_generate(int n, jit_module *const *m);
IR_HIDDEN void jit_module_generate(jit_module *m);
IR_HIDDEN kiln_status jit_module_link(jit_module *m, jit_kernel_fn *fn, void **code,
                                      char **dumps /* [3] or NULL */, void **obj, size_t *obj_len);
IR_HIDDEN void jit_module_free(jit_module *m);
/* Add an object made by jit_module_link (from the disk cache) to the JIT and look up its
 * n functions (engine.c); `name` names it in messages.  *code as jit_lower_compile's.  Starts
 * LLVM and LLJIT if they are not yet, but optimises and generates nothing. */
IR_HIDDEN kiln_status jit_object_load(const void *obj, size_t len, const char *name, int n,
                                      const char *const *names, void **addrs, void **code);
/* The optimisation pipeline compiled code is made with (part of the disk cache's key). */
IR_HIDDEN const char *jit_engine_passes(void);
IR_HIDDEN void jit_lower_free_code(void *code);

/* The monotonic clock, in ms (engine.c). */
IR_HIDDEN double jit_now_ms(void);

/* ---- thread pool (pool.c) ---------------------------------------------------------------- */
/* Run fn(ctx, i) for i in [0, nchunks) on the pool (the caller takes part); returns when
 * all are done.  nchunks == 1 runs on the caller's thread. */
typedef void (*jit_task_fn)(void *ctx, int64_t chunk);
IR_HIDDEN void jit_pool_run(jit_task_fn fn, void *ctx, int64_t nchunks);
/* The pool size; 1 on a thread that set jit_pool_single. */
IR_HIDDEN int jit_pool_threads(void);
/* On this thread, from now on: run every job on the calling thread alone (true), or on the
 * whole pool again (false).  For measuring one core (kiln bench's "_1t" workloads). */
IR_HIDDEN void jit_pool_single(bool on);

/* The FMA peak of the pool (peak.c): GFLOP/s of a kiln-compiled loop of independent f32
 * vector FMA chains, run in chunks_per_thread chunks per thread (about 15 us each). */
IR_HIDDEN kiln_status jit_fma_peak(int chunks_per_thread, double *gflops);

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

/* A run's buffers (jit_plan_run's arguments), for a kernel step's runner (kinds.def's `run`:
 * run(step, its slots' pointers then its parameters, args)); bpacked: the step's held
 * packed B, or NULL. */
typedef struct jit_run_args {
    const void *const *inputs;
    void *const *outputs;
    void *temp;
    const void *bpacked;
} jit_run_args;

/* Where location l is in this run. */
static inline void *
jit_loc_resolve(const jit_loc *l, const jit_run_args *a)
{
    switch (l->kind) {
    case JIT_LOC_INPUT: return (void *)a->inputs[l->index];
    case JIT_LOC_OUTPUT: return a->outputs[l->index];
    case JIT_LOC_CONST: return (void *)l->cdata;
    case JIT_LOC_TEMP: return (char *)a->temp + l->offset;
    }
    return NULL;
}

/* A kernel's iteration space has at most one dim more than a graph's rank: a reduction of
 * every axis of a rank-IR_MAX_RANK value puts a kept dim of size 1 in front of them
 * (describe.c's kb_space).  Every array over a kernel's space dims is this long. */
#define JIT_MAX_SPACE (IR_MAX_RANK + 1)

typedef enum jit_step_kind { JIT_STEP_KERNEL, JIT_STEP_REF, JIT_STEP_COPY } jit_step_kind;

/* A step: one of three kinds, each with its own fields (an anonymous union: the fields of
 * one kind are named directly, and only the step's kind's may be read). */
typedef struct jit_step {
    jit_step_kind kind;
    char *explain; /* what the step computes and why its boundary is there */
    union {
        struct { /* KERNEL: a description (with its schedule) and where it runs */
            jit_kdesc desc;
            jit_kernel *kernel;
            int nslots;
            jit_loc *slot;       /* loads then stores (nloads + nstores) */
            ir_scalar *params;   /* desc.nparams run-time scalars, as jit_kdesc says (owned);
                                  * the runner passes them after the slots */
            int64_t *slot_off;   /* element offset into each slot's buffer */
            int64_t *strides;    /* nloads * rank (REDUCTION: (nloads + nstores) * rank) */
            int64_t *ext;        /* ELEMENTWISE (and REDUCTION with ranged loads): nloads *
                                  * rank * 2, boxes and gather axes (or NULL) */
            int64_t dims[JIT_MAX_SPACE];
            int64_t total;       /* elements of the iteration space */
            size_t bytes_per_elem; /* bytes moved per element (for chunking) */
            /* REDUCTION: kept elements, reduced elements per row and the size of the last
             * reduced dim (its scratch: desc.partial_bytes and desc.spill_bytes) */
            int64_t rows, rlen, rinner;
            /* CONTRACTION and SKINNY: operands A [.., M, K] and B [.., K, N] read through
             * views: mm_st[x] holds R strides, the space's batch dims (0 where x broadcasts)
             * then x's two matrix dims; shared: x is the same matrix for every batch element
             * (packed once).  A constant B is packed when the plan is built (mm_bpacked,
             * owned); the others into the temporaries block at mm_pack_off on every run. */
            jit_loc mm_loc[2];
            int64_t mm_off[2];
            int64_t mm_st[2][IR_MAX_RANK];
            int64_t mm_m, mm_n, mm_k, mm_batch;
            bool mm_shared[2];
            /* packing converts: an operand that is a cast (from mm_src[x], a kiln_dtype) or
             * a product with a scalar (mm_scale[x], else 1) of the buffer it reads */
            uint8_t mm_src[2];
            double mm_scale[2];
            void *mm_bpacked;
            size_t mm_pack_off;
            /* SKINNY rows: the k loop's description (bform JIT_SKINNY_CORE, in the plan's
             * arena) and kernel; NULL for other steps */
            const jit_kdesc *core_desc;
            jit_kernel *core;
        };
        struct { /* REF: one op run by the reference interpreter */
            kiln_graph *sub;     /* one-op graph: inputs = operands */
            int nin;
            jit_loc *in;
            jit_loc out;
        };
        struct { /* COPY: a memmove of `bytes` from `from` + from_off to `to` */
            jit_loc from, to;
            size_t bytes, from_off;
        };
    };
} jit_step;

/* (skinny.c) Whether contraction step s (of dtype t, described) reads B in place (a
 * SKINNY step), and with what form and tile rows; why (n bytes, for the plan dump; n = 0:
 * not written) either way.  No LLVM. */
IR_HIDDEN bool jit_skinny_choose(const jit_step *s, kiln_dtype t, int *bform, int *tile_m,
                                 char *why, size_t n);
/* (skinny.c) The pieces K of rows-form SKINNY step s is summed in (1: whole), from its
 * sizes alone, never the thread count, so results are the same on any; *rows: the rows of
 * B of each (the last fewer). */
IR_HIDDEN int64_t jit_skinny_pieces(const jit_step *s, int64_t *rows);
/* (skinny.c) The core of rows-form SKINNY description d (the k loop: jit_skinny_form) into
 * *core, its instruction into *inst; the same for every d of one dtype, tile and schedule. */
IR_HIDDEN void jit_skinny_core(const jit_kdesc *d, jit_kinst *inst, jit_kdesc *core);

typedef struct jit_plan {
    _Atomic int refs; /* owners: its program cache entry, a model kept (resize.c) */
    kiln_graph *g; /* the simplified graph the steps compute (owned) */
    int nsteps;
    jit_step *steps;
    size_t temp_bytes;
    char *simplify_log;
    ir_arena arena;      /* the kernel steps' arrays (descriptions, slots, strides, ...) */
    /* a plan made at new sizes: its model's plan, held, whose arrays the steps taken from
     * the model share (plan.c's step_like); else NULL */
    struct jit_plan *base;
    int nkernels, nhits; /* kernels compiled for this plan / found in the cache */
    bool compact;        /* its elementwise kernels are JIT_TIER_COMPACT (plan.c) */
    bool explained;      /* built with JIT_F_EXPLAIN: every step has its explanation */
} jit_plan;

/* A plan built from scratch kept, with the planner's state, as the model of plans of the
 * same graph at other sizes (resize.c; planner.h). */
typedef struct jit_plan_model jit_plan_model;
/* Build and compile the plan of verified graph `g` in `mode` (FUSED or EAGER).  With keep,
 * *keep is its model (NULL when the graph's plans cannot be made from one: see resize.c),
 * the caller's to keep (jit_resize_keep) or release. */
IR_HIDDEN kiln_status jit_plan_build(const kiln_graph *g, kiln_mode mode, unsigned flags,
                                     jit_plan **out, jit_plan_model **keep);
/* One more owner of p; jit_plan_free frees it when the last owner does. */
IR_HIDDEN jit_plan *jit_plan_retain(jit_plan *p);
IR_HIDDEN void jit_plan_free(jit_plan *p);

/* Plans at new sizes (resize.c).  jit_resize_find: the plan of g (mode, flags) made from a
 * model kept for a graph equal to g but for sizes, when the decisions that planning takes
 * from sizes come out the same at g's (*out NULL when none does: plan g from scratch);
 * ghash: g's generic hash mixed with the mode (program.c's).  jit_resize_keep keeps model
 * m of a graph of that hash (taking the caller's reference; at most JIT_RESIZE_MODELS of
 * one graph, the oldest dropped).  jit_resize_trim drops every model; jit_resize_count:
 * plans made so.  Thread-safe. */
#define JIT_RESIZE_MODELS 4
IR_HIDDEN kiln_status jit_resize_find(const kiln_graph *g, uint64_t ghash, kiln_mode mode,
                                      unsigned flags, jit_plan **out);
IR_HIDDEN void jit_resize_keep(jit_plan_model *m, uint64_t ghash);
IR_HIDDEN void jit_plan_model_release(jit_plan_model *m);
IR_HIDDEN void jit_resize_trim(void);
IR_HIDDEN uint64_t jit_resize_count(void);
/* Run: inputs/outputs as in kiln_program_run; temp is temp_bytes of 64-aligned memory. */
IR_HIDDEN kiln_status jit_plan_run(const jit_plan *p, const void *const *inputs,
                                   void *const *outputs, void *temp, const void *const *bpacked);
/* Held inputs (kiln_program_hold_input): a CONTRACTION step whose B is an input can take B
 * packed once by the program instead of on every run.  Bytes of step s's packed B (0: the
 * step packs no B of an input); pack it from b into dst; bpacked[i] of jit_plan_run is step
 * i's (NULL array or entry: pack as usual). */
IR_HIDDEN size_t jit_contract_b_bytes(const jit_step *s);
IR_HIDDEN void jit_contract_pack_b(const jit_step *s, const void *b, void *dst);
/* The plan's dump (`kiln dump --plan`).  A plan built without JIT_F_EXPLAIN is explained by
 * planning g0 (the graph it was built from, in `mode` with `flags`) again with it, without
 * compiling: the same steps, deterministically. */
IR_HIDDEN kiln_status jit_plan_dump(const jit_plan *p, const kiln_graph *g0, kiln_mode mode,
                                    unsigned flags, FILE *f);
/* For the text dumps: *ex NULL when p's steps carry their explanations, else a plan built
 * again with them (the same steps, no kernels; free it). */
IR_HIDDEN kiln_status jit_plan_explained(const jit_plan *p, const kiln_graph *g0, kiln_mode mode,
                                         unsigned flags, jit_plan **ex);

/* Simplification (simplify.c): dead code, common subexpressions, folding of elementwise
 * ops on `full` operands.  Returns a new verified graph; *log says what it did. */
/* With `rec`, what a plan made again at new sizes needs to do the same without simplifying
 * (resize.c): map[i] the new id of node i of g (n0 of them), orig[j] the node of g that new
 * node j copies, or folds into a `full` (n1 of them); map NULL when the simplification must
 * not be replayed (a matmul of a concat, split at some sizes).  log NULL: no log. */
typedef struct jit_simplify_rec {
    int32_t n0, n1;
    int32_t *map, *orig;
} jit_simplify_rec;
IR_HIDDEN kiln_status jit_simplify(const kiln_graph *g, kiln_graph **out, char **log,
                                   jit_simplify_rec *rec);
IR_HIDDEN void jit_simplify_rec_free(jit_simplify_rec *r);

#endif /* KILN_JIT_H */
