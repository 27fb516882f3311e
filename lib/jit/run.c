/* run.c — running a plan: each step in order; kernel steps in chunks on the thread pool
 * (elementwise: chunks of a multiple of 64 elements whose edges fall on cache-line
 * boundaries of the first stored buffer; reductions: rows, or pieces of long rows whose
 * number depends on the row length alone). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner.h"

/* ---- running ------------------------------------------------------------------------------- */

/* Work below this many bytes stays on the caller's thread: waking workers costs more. */
#define SMALL_BYTES ((size_t)1 << 18)
#define MAX_SLOTS_ON_STACK 64

typedef struct krun {
    jit_kernel_fn fn;
    void *const *ptrs;
    const int64_t *strides, *dims;
    int64_t total, chunk;
    /* elementwise: elements [from, total); chunk i is [from + i*chunk - shift, .. + chunk) */
    int64_t from, shift;
    const int64_t *ext; /* elementwise: ranged and indexed loads */
    /* reductions */
    jit_raux aux;
    int64_t nsub, per;      /* pieces: sub-rows, or elements of the last dim, per piece */
    char *partial;
    size_t pbytes;
    char *scratch;   /* reductions that spill: one row's room per chunk */
    size_t sbytes;
} krun;

static void
run_chunk(void *ctx, int64_t i)
{
    const krun *r = ctx;
    int64_t begin = r->from + i * r->chunk - r->shift;
    int64_t end = begin + r->chunk < r->total ? begin + r->chunk : r->total;
    if (begin < r->from)
        begin = r->from;
    if (r->scratch) {
        jit_raux a = r->aux;
        a.scratch = r->scratch + (size_t)i * r->sbytes;
        r->fn(r->ptrs, r->strides, r->dims, begin, end, &a);
        return;
    }
    r->fn(r->ptrs, r->strides, r->dims, begin, end, r->ext ? (const void *)r->ext : (const void *)&r->aux);
}

/* One piece of one long row: task i is row i / npieces, piece i % npieces. */
static void
run_piece(void *ctx, int64_t i)
{
    const krun *r = ctx;
    int64_t np = r->aux.npieces, row = i / np, q = i % np;
    jit_raux a = r->aux;
    a.mode = 1;
    a.partial = r->partial + (size_t)i * r->pbytes;
    if (r->nsub > 1) {
        a.sub_begin = q * r->per;
        a.sub_end = a.sub_begin + r->per < r->nsub ? a.sub_begin + r->per : r->nsub;
        a.in_begin = 0;
        a.in_end = r->dims[r->aux.in_end]; /* in_end carries the index of the last dim */
    } else {
        int64_t inner = r->dims[r->aux.in_end];
        a.sub_begin = 0;
        a.sub_end = 1;
        a.in_begin = q * r->per;
        a.in_end = a.in_begin + r->per < inner ? a.in_begin + r->per : inner;
    }
    r->fn(r->ptrs, r->strides, r->dims, row, row + 1, &a);
}

/* A reduction is split into pieces when its rows are at least this long; the number of
 * pieces depends on the length alone, so results do not depend on the thread count. */
#define SPLIT_MIN ((int64_t)1 << 17)
#define PIECE_LEN ((int64_t)1 << 16)
#define MAX_PIECES 64

/* A columns kernel (a sum over axis 0) whose reduced extent is at least COL_SPLIT_MIN and
 * whose work is at least SMALL_BYTES is split along the reduced dims into pieces of
 * COL_PIECE_LEN reduced rows (at most MAX_PIECES; the count depends on the sizes alone),
 * each reducing every kept column over its own rows into partials, then combined in piece
 * order.  Each thread then streams whole contiguous blocks of rows; split by columns
 * instead, two threads each read half of every row, a new page every 2 KiB for colsum's
 * f32[4096,1024], and the rows of a thread slowed by another process held up the run. */
#define COL_SPLIT_MIN ((int64_t)1 << 10)
#define COL_PIECE_LEN ((int64_t)256)

/* Piece i of a split columns kernel: every kept element, reduced rows of piece i. */
static void
run_col_piece(void *ctx, int64_t i)
{
    const krun *r = ctx;
    jit_raux a = r->aux;
    a.mode = 1;
    a.sub_begin = i;
    a.in_begin = i * r->per;
    a.in_end = a.in_begin + r->per < r->nsub ? a.in_begin + r->per : r->nsub;
    r->fn(r->ptrs, r->strides, r->dims, 0, r->total, &a);
}

static kiln_status
run_col_split(const jit_step *s, krun *r, int threads)
{
    int64_t np = (s->rlen + COL_PIECE_LEN - 1) / COL_PIECE_LEN;
    if (np > MAX_PIECES)
        np = MAX_PIECES;
    r->per = (s->rlen + np - 1) / np;
    np = (s->rlen + r->per - 1) / r->per;
    r->nsub = s->rlen; /* the reduced extent, for run_col_piece */
    int64_t kin = s->dims[s->desc.rank - s->desc.nred - 1], W = jit_host_info()->vector_bits / 32;
    int64_t nvec = kin ? s->rows / kin * ((kin + W - 1) / W) : 0;
    size_t total = (size_t)nvec * (size_t)np * s->desc.partial_bytes;
    r->partial = ir_aligned_alloc(64, (total + 63) & ~(size_t)63);
    if (!r->partial)
        return ir_error(KILN_ERR_NOMEM, "kiln_program_run: out of memory (%zu bytes of partial sums)",
                        total);
    r->aux.npieces = np;
    r->aux.partial = r->partial;
    jit_pool_run(run_col_piece, r, np);
    /* combine: whole kept rows per chunk, so vectors of columns start where the pieces' did */
    r->aux.mode = 2;
    int64_t krows = kin ? s->rows / kin : 0;
    int64_t per = threads > 1 ? (krows + 4 * threads - 1) / (4 * threads) : krows;
    r->chunk = (per > 0 ? per : 1) * kin;
    jit_pool_run(run_chunk, r, (r->total + r->chunk - 1) / r->chunk);
    free(r->partial);
    return KILN_OK;
}

/* The state of a run of kernel step s over `total` units (elements, rows). */
static krun
krun_of(const jit_step *s, void *const *ptrs, int64_t total)
{
    krun r = {0};
    r.fn = jit_kernel_entry(s->kernel);
    r.ptrs = ptrs;
    r.strides = s->strides;
    r.dims = s->dims;
    r.total = total;
    return r;
}

kiln_status
jit_run_reduction(const jit_step *s, void *const *ptrs, const jit_run_args *a)
{
    (void)a;
    if (s->rows == 0)
        return KILN_OK;
    krun r = krun_of(s, ptrs, s->rows);
    r.aux.ext = s->ext;
    size_t bytes = (size_t)s->rows * (size_t)s->rlen * (s->bytes_per_elem ? s->bytes_per_elem : 1);
    int threads = bytes < SMALL_BYTES ? 1 : jit_pool_threads();
    if (s->desc.lanes_kept && s->desc.partial_bytes && s->rlen >= COL_SPLIT_MIN && bytes >= SMALL_BYTES)
        return run_col_split(s, &r, threads);
    if (!s->desc.lanes_kept && s->desc.partial_bytes && s->rlen >= SPLIT_MIN) {
        int64_t nsub = s->rinner ? s->rlen / s->rinner : 0;
        int64_t units = nsub > 1 ? nsub : s->rinner;
        int64_t np = (s->rlen + PIECE_LEN - 1) / PIECE_LEN;
        if (np > MAX_PIECES)
            np = MAX_PIECES;
        if (np > units)
            np = units;
        int64_t per = (units + np - 1) / np;
        if (nsub <= 1)
            per = (per + 63) & ~(int64_t)63; /* whole vectors per piece */
        np = (units + per - 1) / per;
        r.nsub = nsub;
        r.per = per;
        r.pbytes = s->desc.partial_bytes;
        r.aux.npieces = np;
        r.aux.in_end = s->desc.rank - 1;
        size_t total = (size_t)s->rows * (size_t)np * r.pbytes;
        r.partial = ir_aligned_alloc(64, (total + 63) & ~(size_t)63);
        if (!r.partial)
            return ir_error(KILN_ERR_NOMEM, "kiln_program_run: out of memory");
        jit_pool_run(run_piece, &r, s->rows * np);
        r.aux = (jit_raux){2, 0, 0, 0, 0, np, r.partial, NULL, s->ext};
        r.chunk = s->rows;
        if (threads > 1 && s->rows > 1)
            r.chunk = (s->rows + 4 * threads - 1) / (4 * threads);
        jit_pool_run(run_chunk, &r, (r.total + r.chunk - 1) / r.chunk);
        free(r.partial);
        return KILN_OK;
    }
    r.chunk = s->rows;
    if (threads > 1) {
        int64_t chunk = (s->rows + 4 * threads - 1) / (4 * threads);
        /* columns kernels: one wide band of columns per thread, so each streams long
         * contiguous runs of every reduced row */
        if (s->desc.lanes_kept)
            chunk = (((s->rows + threads - 1) / threads) + 63) & ~(int64_t)63;
        r.chunk = chunk > 0 ? chunk : 1;
    }
    int64_t nchunks = (r.total + r.chunk - 1) / r.chunk;
    if (s->desc.spill_bytes && s->rlen) {
        r.sbytes = ((size_t)s->rlen * s->desc.spill_bytes + 63) & ~(size_t)63;
        r.scratch = ir_aligned_alloc(64, r.sbytes * (size_t)nchunks);
        if (!r.scratch)
            return ir_error(KILN_ERR_NOMEM, "kiln_program_run: out of memory (%zu bytes of scratch rows)",
                            r.sbytes * (size_t)nchunks);
    }
    jit_pool_run(run_chunk, &r, nchunks);
    free(r.scratch);
    return KILN_OK;
}

/* Elementwise chunks.  With one thread (or less than SMALL_BYTES of work) one chunk.
 * Otherwise chunks of a multiple of 64 elements (at least MIN_CHUNK), CHUNKS_PER_THREAD
 * per thread, claimed from the pool's counter, so a thread slowed by another process
 * takes fewer of them; when the last chunk finishes, the other threads have been idle for
 * at most one chunk's time (docs/benchmarking.md, "Elementwise: chunks per thread").  The
 * edges fall where the first stored
 * buffer crosses a cache line, so no two threads write one line and a peeled kernel's
 * aligned body covers the whole chunk. */
#define CHUNKS_PER_THREAD 32
#define MIN_CHUNK 8192

static void
split_elementwise(const jit_step *s, void *const *ptrs, krun *r)
{
    int64_t count = r->total - r->from;
    size_t bytes = (size_t)count * (s->bytes_per_elem ? s->bytes_per_elem : 1);
    int threads = bytes < SMALL_BYTES ? 1 : jit_pool_threads();
    r->chunk = count;
    r->shift = 0;
    if (threads <= 1)
        return;
    int64_t chunk = (count + CHUNKS_PER_THREAD * threads - 1) / (CHUNKS_PER_THREAD * threads);
    chunk = (chunk + 63) & ~(int64_t)63;
    if (chunk < MIN_CHUNK)
        chunk = MIN_CHUNK;
    r->chunk = chunk;
    if (s->desc.nstores > 0) {
        uintptr_t p = (uintptr_t)ptrs[s->desc.nloads];
        int64_t es = (int64_t)kiln_dtype_size((kiln_dtype)s->desc.inst[s->desc.stores[0]].dtype);
        if (jit_kdesc_store_ranged(&s->desc, 0)) /* its element 0 is the space's lo-th */
            p -= (uintptr_t)(ir_scalar_i64(KILN_DTYPE_I64, &s->params[jit_kdesc_range_param(&s->desc, 0)]) * es);
        if (p % (uintptr_t)es == 0) { /* from - shift: a line's first element */
            int64_t line = 64 / es, a0 = (int64_t)((64 - p % 64) % 64) / es;
            r->shift = ((r->from - a0) % line + line) % line;
        }
    }
}

kiln_status
jit_run_elementwise(const jit_step *s, void *const *ptrs, const jit_run_args *a)
{
    (void)a;
    krun r = krun_of(s, ptrs, s->total);
    r.ext = s->ext;
    /* every store a range (the value stored whole nowhere: fuse.c's drop_unread): only the
     * elements some range holds are computed */
    bool ranged = s->desc.nstores > 0;
    for (int32_t k = 0; k < s->desc.nstores && ranged; k++)
        ranged = jit_kdesc_store_ranged(&s->desc, k);
    if (ranged) {
        r.from = s->total;
        r.total = 0;
        for (int32_t k = 0; k < s->desc.nstores; k++) {
            int32_t j = jit_kdesc_range_param(&s->desc, k);
            int64_t lo = ir_scalar_i64(KILN_DTYPE_I64, &s->params[j]),
                    hi = ir_scalar_i64(KILN_DTYPE_I64, &s->params[j + 1]);
            r.from = lo < r.from ? lo : r.from;
            r.total = hi > r.total ? hi : r.total;
        }
        if (r.from >= r.total)
            return KILN_OK;
    }
    split_elementwise(s, ptrs, &r);
    jit_pool_run(run_chunk, &r, (r.total - r.from + r.shift + r.chunk - 1) / r.chunk);
    return KILN_OK;
}

kiln_status
jit_plan_run(const jit_plan *p, const void *const *inputs, void *const *outputs, void *temp,
             const void *const *bpacked)
{
    jit_run_args args = {.inputs = inputs, .outputs = outputs, .temp = temp};
    for (int i = 0; i < p->nsteps; i++) {
        const jit_step *s = &p->steps[i];
        if (s->kind == JIT_STEP_COPY) {
            if (s->bytes)
                memmove(jit_loc_resolve(&s->to, &args),
                        (const char *)jit_loc_resolve(&s->from, &args) + s->from_off, s->bytes);
            continue;
        }
        if (s->kind == JIT_STEP_REF) {
            const void *ins_small[8];
            const void **ins = s->nin <= 8 ? ins_small : ir_malloc(sizeof(void *) * (size_t)s->nin);
            if (!ins)
                return ir_error(KILN_ERR_NOMEM, "kiln_program_run: out of memory");
            for (int k = 0; k < s->nin; k++)
                ins[k] = jit_loc_resolve(&s->in[k], &args);
            void *out[1] = {jit_loc_resolve(&s->out, &args)};
            kiln_status st = ir_interpret(s->sub, ins, out);
            if (ins != ins_small)
                ir_free(ins);
            if (st)
                return st;
            continue;
        }
        if (s->total == 0 && s->desc.kind != JIT_KERNEL_REDUCTION)
            continue;
        /* the slots, then the parameters (jit_kdesc.nparams) */
        int nptrs = s->nslots + s->desc.nparams;
        void *ptr_small[MAX_SLOTS_ON_STACK];
        void **ptrs = nptrs <= MAX_SLOTS_ON_STACK ? ptr_small : ir_malloc(sizeof(void *) * (size_t)nptrs);
        if (!ptrs)
            return ir_error(KILN_ERR_NOMEM, "kiln_program_run: out of memory");
        for (int k = 0; k < s->nslots; k++)
            ptrs[k] = jit_loc_resolve(&s->slot[k], &args);
        for (int j = 0; j < s->desc.nparams; j++)
            ptrs[s->nslots + j] = (void *)&s->params[j];
        /* load offsets are in elements of the load's dtype */
        for (int32_t j = 0; j < s->desc.ninst; j++) {
            const jit_kinst *in = &s->desc.inst[j];
            if (in->kind == JIT_LOAD && s->slot_off[in->slot])
                ptrs[in->slot] = (char *)ptrs[in->slot] +
                                 s->slot_off[in->slot] * (int64_t)kiln_dtype_size((kiln_dtype)in->dtype);
        }
        args.bpacked = bpacked ? bpacked[i] : NULL;
        kiln_status st = KILN_OK;
        switch ((jit_kernel_kind)s->desc.kind) { /* every kind, no default (-Werror=switch) */
#define KIND(E, name, schedule, lower, run, dump)                                              \
    case JIT_KERNEL_##E: st = run(s, ptrs, &args); break;
#include "kinds.def"
#undef KIND
        }
        if (ptrs != ptr_small)
            ir_free(ptrs);
        if (st)
            return st;
    }
    return KILN_OK;
}
