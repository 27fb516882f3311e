/* contract.c — running a CONTRACTION step (matmul): packing and blocking.
 *
 *   pack:   A into panels of mr rows (k x mr elements each, row p holding A[i..i+mr, p]) and
 *           B into panels of nr columns (k x nr, row p holding B[p, j..j+nr]), zero beyond M
 *           and N, read through the operands' strides: slices, permutes (a transposed W),
 *           expands and reshapes of an operand are folded here, never materialised.  An
 *           operand the same for every batch element is packed once; a constant B when the
 *           plan is built (jit_contract_prepack), not on every run.
 *   block:  tasks of one batch element x a block of rows x a block of columns, on the
 *           thread pool; a block of rows is as tall as lets its panels (rows x a slice of
 *           k) share the L2 cache with one panel of B.  K is never split across threads:
 *           a long k is cut into slices that one task runs in order, its partial sums kept
 *           in the temporaries between them, so each element's sum runs in one order and
 *           results do not depend on the thread count.
 *   kernel: lower_contract.c's macro-kernel runs one task's tiles and epilogue.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "planner.h"

/* Work below this many multiply-adds stays on the caller's thread. */
#define SMALL_MACS ((int64_t)1 << 18)

/* Tasks 0 .. n-1 of fn: on the thread pool, or every one on the caller's thread when the
 * step chose one thread (SMALL_MACS). */
static void
run_tasks(jit_task_fn fn, void *ctx, int64_t n, int threads)
{
    if (threads > 1) {
        jit_pool_run(fn, ctx, n);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        fn(ctx, i);
}

typedef struct cgeom {
    int mr, nrv, nr;
    size_t es;
    int64_t mp, np;       /* M and N rounded up to whole panels */
    int64_t acount, bcount; /* distinct packed A and B matrices */
    int64_t kc, nslices;  /* k blocking: slices of kc (the last shorter) */
} cgeom;

static int64_t l2_bytes(void);

static kiln_dtype
mm_dtype(const jit_step *s)
{
    for (int32_t i = 0; i < s->desc.ninst; i++)
        if (s->desc.inst[i].kind == JIT_OP && s->desc.inst[i].op == IR_OP_MATMUL)
            return (kiln_dtype)s->desc.inst[i].dtype;
    IR_ASSERT(!"contraction without a matmul");
    return KILN_DTYPE_F32;
}

static void
geom(const jit_step *s, cgeom *g)
{
    kiln_dtype t = mm_dtype(s);
    /* the register tile the kernel was emitted with: its schedule's */
    IR_ASSERT(s->desc.kind == JIT_KERNEL_CONTRACTION && s->desc.sched.mr >= 1);
    g->mr = s->desc.sched.mr;
    g->nrv = s->desc.sched.nrv;
    g->nr = s->desc.sched.nr;
    g->es = kiln_dtype_size(t);
    g->mp = (s->mm_m + g->mr - 1) / g->mr * g->mr;
    g->np = (s->mm_n + g->nr - 1) / g->nr * g->nr;
    g->acount = s->mm_shared[0] ? 1 : s->mm_batch;
    g->bcount = s->mm_shared[1] ? 1 : s->mm_batch;
    /* k in slices short enough that a block of at least 64 rows of A fits half the L2 */
    int64_t kmax = l2_bytes() / 2 / (64 * (int64_t)g->es);
    g->nslices = s->mm_k > kmax ? (s->mm_k + kmax - 1) / kmax : 1;
    g->kc = (s->mm_k + g->nslices - 1) / g->nslices;
}

/* The partial sums of a k-blocked contraction: [batch][mp][np] of the dtype. */
static size_t
bytes_c(const jit_step *s, const cgeom *g)
{
    if (g->nslices <= 1)
        return 0;
    return ((size_t)s->mm_batch * (size_t)g->mp * (size_t)g->np * g->es + 63) & ~(size_t)63;
}

static size_t
bytes_a(const jit_step *s, const cgeom *g)
{
    return ((size_t)g->acount * (size_t)g->mp * (size_t)s->mm_k * g->es + 63) & ~(size_t)63;
}

static size_t
bytes_b(const jit_step *s, const cgeom *g)
{
    return ((size_t)g->bcount * (size_t)g->np * (size_t)s->mm_k * g->es + 63) & ~(size_t)63;
}

size_t
jit_contract_temp_bytes(const jit_step *s)
{
    cgeom g;
    geom(s, &g);
    return bytes_a(s, &g) + (s->mm_bpacked ? 0 : bytes_b(s, &g)) + bytes_c(s, &g);
}

/* Element offset of operand x's matrix for batch element `batch` (row-major over the
 * space's batch dims). */
static int64_t
batch_offset(const jit_step *s, int x, int64_t batch)
{
    int64_t off = s->mm_off[x];
    for (int d = s->desc.rank - 3; d >= 0; d--) {
        off += batch % s->dims[d] * s->mm_st[x][d];
        batch /= s->dims[d];
    }
    return off;
}

/* Pack panel q of matrix src (rows x cols of `w`-wide panels, element (r, p) at
 * r * sr + p * sp): dst[p * w + i] = src[q*w + i, p] for p < k, zero for rows past n.
 * For A: rows = M, sr = A's row stride, sp = its K stride; for B the transpose view. */
#define DEF_PACK(T)                                                                             \
    static void pack_##T(T *dst, const T *src, int64_t q, int w, int64_t n, int64_t k,          \
                         int64_t sr, int64_t sp)                                                \
    {                                                                                           \
        int64_t r0 = q * w;                                                                     \
        int valid = n - r0 < w ? (int)(n - r0) : w;                                             \
        if (sr == 1 && valid == w) {                                                            \
            for (int64_t p = 0; p < k; p++)                                                     \
                memcpy(dst + p * w, src + r0 + p * sp, sizeof(T) * (size_t)w);                  \
            return;                                                                             \
        }                                                                                       \
        for (int i = 0; i < w; i++) {                                                           \
            if (i >= valid) {                                                                   \
                for (int64_t p = 0; p < k; p++)                                                 \
                    dst[p * w + i] = 0;                                                         \
                continue;                                                                       \
            }                                                                                   \
            const T *row = src + (r0 + i) * sr;                                                 \
            for (int64_t p = 0; p < k; p++)                                                     \
                dst[p * w + i] = row[p * sp];                                                   \
        }                                                                                       \
    }
DEF_PACK(uint32_t)
DEF_PACK(uint64_t)

/* Element si of src (dtype st) as dtype dt, times scale (a folded cast or scale: each
 * conversion rounds once, as the op it replaces does). */
static void
cvt(kiln_dtype dt, void *dst, size_t di, kiln_dtype st, const char *src, int64_t si, double scale)
{
    float f;
    double d;
    int32_t i4;
    int64_t i8;
    switch (st) {
    case KILN_DTYPE_F32: memcpy(&f, src + si * 4, 4); d = f; break;
    case KILN_DTYPE_F64: memcpy(&d, src + si * 8, 8); f = (float)d; break;
    case KILN_DTYPE_I32: memcpy(&i4, src + si * 4, 4); d = i4; f = (float)i4; break;
    case KILN_DTYPE_I64: memcpy(&i8, src + si * 8, 8); d = (double)i8; f = (float)i8; break;
    default: IR_ASSERT(!"cvt: dtype"); return;
    }
    if (scale != 1) { /* a product in the operand's own dtype: exact in double, rounded once */
        d *= scale;
        f = (float)d;
    }
    if (dt == KILN_DTYPE_F32)
        memcpy((char *)dst + di * 4, &f, 4);
    else
        memcpy((char *)dst + di * 8, &d, 8);
}

/* Pack panel q of operand x (0: A, 1: B) of batch element `batch` into dst. */
static void
pack_panel(const jit_step *s, const cgeom *g, int x, const char *base, int64_t batch, int64_t q,
           void *dst)
{
    int R = s->desc.rank;
    int64_t rows_st = x == 0 ? s->mm_st[0][R - 2] : s->mm_st[1][R - 1]; /* along M or N */
    int64_t k_st = x == 0 ? s->mm_st[0][R - 1] : s->mm_st[1][R - 2];
    int w = x == 0 ? g->mr : g->nr;
    int64_t n = x == 0 ? s->mm_m : s->mm_n;
    kiln_dtype dt = mm_dtype(s), st = (kiln_dtype)s->mm_src[x];
    if (st != dt || s->mm_scale[x] != 1) {
        const char *src = base + batch_offset(s, x, batch) * (int64_t)kiln_dtype_size(st);
        int64_t r0 = q * w, k = s->mm_k;
        for (int i = 0; i < w; i++)
            for (int64_t p = 0; p < k; p++) {
                size_t di = (size_t)(p * w + i);
                if (r0 + i < n)
                    cvt(dt, dst, di, st, src, (r0 + i) * rows_st + p * k_st, s->mm_scale[x]);
                else
                    memset((char *)dst + di * g->es, 0, g->es);
            }
        return;
    }
    const char *src = base + batch_offset(s, x, batch) * (int64_t)g->es;
    if (g->es == 4)
        pack_uint32_t(dst, (const uint32_t *)(const void *)src, q, w, n, s->mm_k, rows_st, k_st);
    else
        pack_uint64_t(dst, (const uint64_t *)(const void *)src, q, w, n, s->mm_k, rows_st, k_st);
}

static _Atomic uint64_t prepacked;

uint64_t
jit_contract_prepacked(void)
{
    return atomic_load(&prepacked);
}

size_t
jit_contract_b_bytes(const jit_step *s)
{
    cgeom g;
    geom(s, &g);
    return bytes_b(s, &g);
}

void
jit_contract_pack_b(const jit_step *s, const void *b, void *dst)
{
    cgeom g;
    geom(s, &g);
    int64_t panels = g.np / g.nr;
    for (int64_t x = 0; x < g.bcount; x++)
        for (int64_t q = 0; q < panels; q++)
            pack_panel(s, &g, 1, b, x, q,
                       (char *)dst + ((size_t)(x * g.np + q * g.nr) * (size_t)s->mm_k) * g.es);
}

kiln_status
jit_contract_prepack(jit_step *s)
{
    size_t n = jit_contract_b_bytes(s);
    s->mm_bpacked = ir_aligned_alloc(64, n ? n : 64);
    if (!s->mm_bpacked)
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory packing a constant matmul operand (%zu bytes)", n);
    jit_contract_pack_b(s, s->mm_loc[1].cdata, s->mm_bpacked);
    atomic_fetch_add(&prepacked, 1);
    return KILN_OK;
}

typedef struct crun {
    const jit_step *s;
    cgeom g;
    jit_kernel_fn fn;
    void *const *ptrs;
    const char *abase, *bbase;
    char *apack, *bpack, *cpart;
    bool pack_b;
    int64_t apanels, bpanels; /* per packed matrix */
    int64_t mblocks, nblocks; /* the panels of A and of B, shared out evenly */
} crun;

/* Packing task i: A's panels first, then B's. */
static void
pack_task(void *ctx, int64_t i)
{
    const crun *r = ctx;
    const jit_step *s = r->s;
    size_t k = (size_t)s->mm_k;
    int64_t na = r->g.acount * r->apanels;
    if (i < na) {
        int64_t b = i / r->apanels, q = i % r->apanels;
        pack_panel(s, &r->g, 0, r->abase, b, q,
                   r->apack + (size_t)(b * r->g.mp + q * r->g.mr) * k * r->g.es);
        return;
    }
    i -= na;
    int64_t b = i / r->bpanels, q = i % r->bpanels;
    pack_panel(s, &r->g, 1, r->bbase, b, q, r->bpack + (size_t)(b * r->g.np + q * r->g.nr) * k * r->g.es);
}

/* Task i: batch element, then block of columns, then block of rows. */
static void
block_task(void *ctx, int64_t i)
{
    const crun *r = ctx;
    const jit_step *s = r->s;
    int64_t mb = i % r->mblocks, nb = i / r->mblocks % r->nblocks, batch = i / r->mblocks / r->nblocks;
    jit_caux a;
    a.batch = batch;
    a.i0 = mb * r->apanels / r->mblocks * r->g.mr;
    a.i1 = (mb + 1) * r->apanels / r->mblocks * r->g.mr;
    a.i1 = a.i1 < s->mm_m ? a.i1 : s->mm_m;
    a.j0 = nb * r->bpanels / r->nblocks * r->g.nr;
    a.j1 = (nb + 1) * r->bpanels / r->nblocks * r->g.nr;
    a.j1 = a.j1 < s->mm_n ? a.j1 : s->mm_n;
    size_t k = (size_t)s->mm_k;
    int64_t ab = s->mm_shared[0] ? 0 : batch, bb = s->mm_shared[1] ? 0 : batch;
    const char *pa = r->apack + (size_t)(ab * r->g.mp + a.i0) * k * r->g.es;
    const char *pb = r->bpack + (size_t)(bb * r->g.np + a.j0) * k * r->g.es;
    a.kstride = s->mm_k;
    a.ldc = r->g.np;
    a.c = r->cpart ? r->cpart + ((size_t)(batch * r->g.mp + a.i0) * (size_t)r->g.np + (size_t)a.j0) * r->g.es
                   : NULL;
    /* the slices of k in order: every element's sum still runs k = 0..K-1 */
    for (int64_t sl = 0; sl < r->g.nslices; sl++) {
        int64_t p0 = sl * r->g.kc;
        a.k = s->mm_k - p0 < r->g.kc ? s->mm_k - p0 : r->g.kc;
        a.a = pa + (size_t)(p0 * r->g.mr) * r->g.es;
        a.b = pb + (size_t)(p0 * r->g.nr) * r->g.es;
        a.kflags = (sl > 0 ? JIT_K_ACCUMULATE : 0) | (sl + 1 == r->g.nslices ? JIT_K_FINAL : 0);
        r->fn(r->ptrs, s->strides, s->dims, 0, 0, &a);
    }
}

static int64_t
l2_bytes(void)
{
    static int64_t cached;
    if (!cached) {
        long v = -1;
#ifdef _SC_LEVEL2_CACHE_SIZE
        v = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
        if (v < (1 << 17) || v > (1 << 24))
            v = 1 << 19; /* unknown: 512 KiB */
        cached = v;
    }
    return cached;
}

kiln_status
jit_contract_run(const jit_step *s, void *const *ptrs, const jit_run_args *args)
{
    const void *a = jit_loc_resolve(&s->mm_loc[0], args), *b = jit_loc_resolve(&s->mm_loc[1], args),
               *bpacked = args->bpacked;
    void *temp = args->temp;
    crun r = {0};
    r.s = s;
    geom(s, &r.g);
    r.fn = jit_kernel_entry(s->kernel);
    r.ptrs = ptrs;
    r.abase = a;
    r.bbase = b;
    r.apack = (char *)temp + s->mm_pack_off;
    bpacked = s->mm_bpacked ? s->mm_bpacked : bpacked;
    r.pack_b = !bpacked;
    r.bpack = bpacked ? (char *)(uintptr_t)bpacked : r.apack + bytes_a(s, &r.g);
    r.cpart = bytes_c(s, &r.g) ? r.apack + bytes_a(s, &r.g) + (s->mm_bpacked ? 0 : bytes_b(s, &r.g)) : NULL;
    r.apanels = r.g.mp / r.g.mr;
    r.bpanels = r.g.np / r.g.nr;
    int64_t macs = s->mm_batch * s->mm_m * s->mm_n * (s->mm_k ? s->mm_k : 1);
    int threads = macs < SMALL_MACS ? 1 : jit_pool_threads();

    /* rows per block: the block's panels of A (one slice of k) take at most half the L2 */
    int64_t kb = (r.g.kc ? r.g.kc : 1) * (int64_t)r.g.es;
    int64_t mcp = l2_bytes() / 2 / kb / r.g.mr; /* panels */
    if (mcp < 1)
        mcp = 1;
    r.mblocks = (r.apanels + mcp - 1) / mcp;
    if (r.mblocks < 1)
        r.mblocks = 1;
    /* columns: enough tasks to balance the threads */
    r.nblocks = 1;
    if (threads > 1) {
        int64_t want = 6 * (int64_t)threads, have = s->mm_batch * r.mblocks;
        r.nblocks = have >= want ? 1 : (want + have - 1) / have;
        if (r.nblocks > r.bpanels)
            r.nblocks = r.bpanels > 0 ? r.bpanels : 1;
    }

    int64_t npack = r.g.acount * r.apanels + (r.pack_b ? r.g.bcount * r.bpanels : 0);
    int64_t ntasks = s->mm_batch * r.mblocks * r.nblocks;
    if (npack)
        run_tasks(pack_task, &r, npack, threads);
    run_tasks(block_task, &r, ntasks, threads);
    return KILN_OK;
}

/* ---- skinny contractions: running them (skinny.c chooses them and sizes their tiles) ---- */

typedef struct srun {
    const jit_step *s;
    jit_kernel_fn fn;   /* the step's kernel: a rows step's epilogue, a dots step's whole */
    jit_kernel_fn core; /* a rows step's k loop (jit_step.core); NULL: dots */
    void *const *ptrs;
    const char *a, *b;
    size_t es;
    int64_t chunk, nchunks; /* columns per task, tasks per batch element */
    /* K in pieces (jit_skinny_pieces): npieces of prow rows, each in ncalls calls of the
     * rows kernel's columns; the pieces' sums in part, [piece][row][N] */
    int64_t npieces, prow, ncalls;
    char *part;
    int64_t nruns; /* whole batch elements in runs of consecutive ones (run_task) */
} srun;

/* The common arguments of a call on the batch element's rows. */
static void
saux_init(const srun *r, jit_saux *x, int64_t batch)
{
    const jit_step *s = r->s;
    int R = s->desc.rank;
    x->a = r->a + batch_offset(s, 0, batch) * (int64_t)r->es;
    x->b = r->b + batch_offset(s, 1, batch) * (int64_t)r->es;
    x->k = s->mm_k;
    x->batch = batch;
    x->m = s->mm_m;
    x->a_m = s->mm_st[0][R - 2];
    x->a_k = s->mm_st[0][R - 1];
    x->bs = s->desc.bform == JIT_SKINNY_ROWS ? s->mm_st[1][R - 2] : s->mm_st[1][R - 1];
    x->part = NULL;
    x->ps = x->pp = x->np = 0;
}

static void
skinny_task(void *ctx, int64_t i)
{
    const srun *r = ctx;
    const jit_step *s = r->s;
    int64_t batch = i / r->nchunks, c = i % r->nchunks;
    jit_saux x;
    saux_init(r, &x, batch);
    if (r->part) { /* the pieces' sums combined, the epilogue */
        x.k = 0;
        x.ps = s->mm_n;
        x.pp = s->mm_m * s->mm_n;
        x.np = r->npieces;
    }
    /* a rows kernel takes at most its schedule's columns a call (jit_skinny_cols) */
    int64_t cols = s->desc.bform == JIT_SKINNY_ROWS ? s->desc.sched.cols : r->chunk;
    for (int64_t j = c * r->chunk, end = j + r->chunk < s->mm_n ? j + r->chunk : s->mm_n; j < end;
         j += cols) {
        x.j0 = j;
        x.j1 = end - j < cols ? end : j + cols;
        if (r->part) {
            x.part = r->part + j * (int64_t)r->es;
        } else if (r->core) {
            /* K whole: the core's sums of the call's tile (at most tile_m x cols elements,
             * JIT_SKINNY_YBYTES) here, then the epilogue on them */
            _Alignas(64) unsigned char sums[JIT_SKINNY_YBYTES];
            x.part = sums;
            x.ps = cols;
            r->core(r->ptrs, s->strides, s->dims, 0, 0, &x);
            jit_saux e = x;
            e.k = 0;
            e.np = 1;
            r->fn(r->ptrs, s->strides, s->dims, 0, 0, &e);
            continue;
        }
        r->fn(r->ptrs, s->strides, s->dims, 0, 0, &x);
    }
}

/* Task i of a rows kernel's K in pieces: piece i / ncalls, the call's columns i % ncalls,
 * its raw sums to the piece's rows of part. */
static void
piece_task(void *ctx, int64_t i)
{
    const srun *r = ctx;
    const jit_step *s = r->s;
    int64_t q = i / r->ncalls, cols = s->desc.sched.cols;
    int64_t k0 = q * r->prow, k1 = k0 + r->prow < s->mm_k ? k0 + r->prow : s->mm_k;
    jit_saux x;
    saux_init(r, &x, 0);
    x.a = (const char *)x.a + k0 * x.a_k * (int64_t)r->es;
    x.b = (const char *)x.b + k0 * x.bs * (int64_t)r->es;
    x.k = k1 - k0;
    x.j0 = i % r->ncalls * cols;
    x.j1 = s->mm_n - x.j0 < cols ? s->mm_n : x.j0 + cols;
    x.ps = s->mm_n;
    x.part = r->part + (q * s->mm_m * s->mm_n + x.j0) * (int64_t)r->es;
    r->core(r->ptrs, s->strides, s->dims, 0, 0, &x);
}

/* The combine reads pieces x rows x N sums, far fewer bytes than B: split among the
 * threads only from this many. */
#define COMBINE_SPLIT_BYTES ((size_t)1 << 18)

/* Rows kernel r->s with K in r->npieces pieces of whole rows on `threads` threads: every
 * piece's raw sums, then their combine and the epilogue in blocks of columns. */
static kiln_status
skinny_pieces_run(srun *r, int threads)
{
    const jit_step *s = r->s;
    r->ncalls = (s->mm_n + s->desc.sched.cols - 1) / s->desc.sched.cols;
    size_t pbytes = (size_t)(r->npieces * s->mm_m * s->mm_n) * r->es;
    r->part = ir_aligned_alloc(64, pbytes);
    if (!r->part)
        return ir_error(KILN_ERR_NOMEM,
                        "kiln_program_run: out of memory (%zu bytes of a matmul's partial sums)",
                        pbytes);
    run_tasks(piece_task, r, r->npieces * r->ncalls, threads);
    int64_t line = 64 / (int64_t)r->es, per = s->desc.sched.cols;
    if (pbytes < COMBINE_SPLIT_BYTES)
        threads = 1;
    if (threads > 1) {
        int64_t c = (s->mm_n + threads - 1) / threads;
        c = (c + line - 1) / line * line;
        per = c < per ? c : per;
    }
    r->chunk = per;
    r->nchunks = (s->mm_n + per - 1) / per;
    run_tasks(skinny_task, r, r->nchunks, threads);
    free(r->part);
    return KILN_OK;
}

/* A batched step's tasks when it has more batch elements than threads: this many runs of
 * consecutive elements a thread (dynamic, so a thread slowed by another process takes
 * fewer), each element whole. */
#define RUNS_PER_THREAD 2

/* Task t: the batch elements of run t of r->nruns, in order, each whole. */
static void
run_task(void *ctx, int64_t t)
{
    const srun *r = ctx;
    int64_t nb = r->s->mm_batch;
    for (int64_t b = t * nb / r->nruns, end = (t + 1) * nb / r->nruns; b < end; b++)
        skinny_task(ctx, b);
}

kiln_status
jit_skinny_run(const jit_step *s, void *const *ptrs, const jit_run_args *args)
{
    const void *a = jit_loc_resolve(&s->mm_loc[0], args), *b = jit_loc_resolve(&s->mm_loc[1], args);
    srun r;
    r.s = s;
    r.fn = jit_kernel_entry(s->kernel);
    r.core = s->desc.bform == JIT_SKINNY_ROWS ? jit_kernel_entry(s->core) : NULL;
    r.ptrs = ptrs;
    r.a = a;
    r.b = b;
    r.es = kiln_dtype_size(mm_dtype(s));
    r.part = NULL;
    int64_t macs = s->mm_batch * s->mm_m * s->mm_n * (s->mm_k ? s->mm_k : 1);
    int threads = macs < SMALL_MACS ? 1 : jit_pool_threads();
    r.npieces = jit_skinny_pieces(s, &r.prow);
    if (r.npieces > 1)
        return skinny_pieces_run(&r, threads);
    /* otherwise columns in blocks of whole cache lines of the output (16 f32), one per
     * thread: each streams its own columns of B, in segments of rows as long as can be
     * (docs/benchmarking.md, "Skinny contraction: rows of B per step, columns per call,
     * blocks per thread") */
    int64_t line = 64 / (int64_t)r.es;
    int64_t want = threads > 1 ? (int64_t)threads : 1;
    int64_t per = want > s->mm_batch ? (want + s->mm_batch - 1) / s->mm_batch : 1;
    int64_t chunk = (s->mm_n + per - 1) / per;
    chunk = (chunk + line - 1) / line * line;
    r.chunk = chunk > 0 ? chunk : 1;
    r.nchunks = (s->mm_n + r.chunk - 1) / r.chunk;
    /* more batch elements than threads (attention's heads): runs of consecutive elements,
     * so that a task streams one stretch of B and the prefetch ahead of each element's
     * last loads reaches into the next one's, which the same task reads next
     * (docs/benchmarking.md, "Skinny contraction: runs of batch elements") */
    if (threads > 1 && r.nchunks == 1 && s->mm_batch > threads) {
        r.nruns = s->mm_batch < RUNS_PER_THREAD * threads ? s->mm_batch : RUNS_PER_THREAD * threads;
        run_tasks(run_task, &r, r.nruns, threads);
        return KILN_OK;
    }
    run_tasks(skinny_task, &r, s->mm_batch * r.nchunks, threads);
    return KILN_OK;
}
