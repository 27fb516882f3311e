/* skinny.c — the SKINNY kernel kind's facts that need no LLVM: whether a contraction step
 * reads B in place (the cost model), its schedule (the kind's `schedule` hook: the register
 * tile of each form, the rows of B a step of k reads, the columns a rows-form call takes)
 * and the rows a tile may have.  The planner (describe.c), the runner
 * (contract.c) and the lowering (lower_skinny.c) all take them from here, so the three
 * cannot disagree, and no planner file calls into an LLVM one for them.
 */
#include <stdio.h>

#include "jit.h"

/* The cost model.  Packing B costs a read and a write of B, and the packed kernel then reads
 * the packed copy once per block of rows (once, for the few rows of a skinny matmul): about
 * three passes over B, two of them at run time even for a constant B's kernel's callers
 * (the copy is made once, but it doubles the weight's memory).  Reading B in place costs one
 * pass over B per register tile of rows, per batch element that uses B.  So packing buys
 * reuse only when B would be read more than once: more rows than one tile holds, or one B
 * shared by several batch elements (x [b, 1, k] @ W).  Reading in place also needs B
 * contiguous along N (rows form) or along K with A contiguous along K (dots form), and no
 * conversion that packing would compute (a cast or scale of an operand folded into it). */
bool
jit_skinny_choose(const jit_step *s, kiln_dtype t, int *bform, int *tile_m, char *why, size_t n)
{
    int R = s->desc.rank;
    int maxm = jit_skinny_max_rows(t);
    int64_t bst_k = s->mm_st[1][R - 2], bst_n = s->mm_st[1][R - 1], ast_k = s->mm_st[0][R - 1];
    int64_t uses = s->mm_shared[1] ? s->mm_batch : 1; /* batch elements reading one B */
    for (int x = 0; x < 2; x++)
        if (s->mm_src[x] != (uint8_t)t || s->mm_scale[x] != 1) {
            if (n)
                snprintf(why, n, "packing computes a cast or scale of %s", x ? "B" : "A");
            return false;
        }
    if (s->mm_m > maxm || uses > 1) {
        if (n)
            snprintf(why, n, "packing B once buys reuse: in place, each element of B would be read "
                 "%lld times (%lld rows, tiles of at most %d, %lld batch elements sharing B)",
                 (long long)(((s->mm_m + maxm - 1) / maxm) * uses), (long long)s->mm_m, maxm,
                 (long long)uses);
        return false;
    }
    if (bst_n == 1 && s->mm_n > 1) {
        *bform = JIT_SKINNY_ROWS;
    } else if (bst_k == 1 && (ast_k == 1 || s->mm_k <= 1)) {
        *bform = JIT_SKINNY_DOTS;
    } else if (bst_n == 1) {
        *bform = JIT_SKINNY_ROWS;
    } else {
        if (n)
            snprintf(why, n, "B is contiguous along neither N nor K (A along K): packing gathers it");
        return false;
    }
    int m = 1;
    while (m < s->mm_m)
        m *= 2;
    *tile_m = m;
    if (n)
        snprintf(why, n, "B read in place, once (%lld row%s, one tile of %d: packing would buy no "
             "reuse)", (long long)s->mm_m, s->mm_m == 1 ? "" : "s", m);
    return true;
}

void
jit_skinny_tile(kiln_dtype t, int tile_m, int bform, int *n)
{
    int bits = jit_host_info()->vector_bits;
    int regs = bits == 512 ? 32 : 16;
    int per = kiln_dtype_size(t) == 8 ? 2 : 1; /* registers per jit vector */
    if (bform == JIT_SKINNY_ROWS) {
        *n = per == 2 ? 1 : 2; /* vectors per row: tile_m * nv accumulators, nv loads of B */
        return;
    }
    /* columns per group: tile_m * nc accumulators within half the registers, and the nc
     * vectors of B and tile_m of A beside them */
    int nc = regs / 2 / per / tile_m;
    int cap = regs / 4 / per;
    nc = nc < cap ? nc : cap;
    *n = nc < 1 ? 1 : nc;
}

/* Rows form: rows of B per step of the k loop, the streams in flight: 8 ran faster than 4 or
 * 16, and prefetching the next block as well slower (docs/benchmarking.md, "Skinny
 * contraction: rows of B per step, columns per call, blocks per thread"). */
#define ROWS_KBLOCK 8

/* Both forms prefetch B, into L2, this many bytes ahead of their loads: the rows form the
 * row this many bytes of the call's columns ahead (at least one row), the dots form the
 * column this many bytes of B ahead (at least the next group).  A thread's columns of a
 * narrow B are a short run of each row (1.5 KiB of a 768-column one on two threads), too
 * short for the hardware's stream prefetcher to run ahead of the loads; wide ones lose
 * nothing (gemv: 1.9-2.4 ms without, 1.5-2.1 with).  Decode ran 3.1-4.1 ms without,
 * 2.5-2.9 with 12-32 KiB (prefetching into L1 instead: 2.8-3.4); attention's q @ k^T
 * (dots) 77-99 us without, 55-70 with (docs/benchmarking.md, "Skinny contraction:
 * prefetching B"). */
#define PF_BYTES (24 << 10)

/* Rows form, K in pieces: a thread that takes a block of columns of a narrow B reads a short
 * run of each row (1.5 KiB of a 768-column one on two threads), and such strided runs
 * streamed at 25-32 GB/s where the read probe reached 45-53 (a 3072 x 768 f32 weight:
 * 0.27-0.33 ms against 0.21-0.23 read in pieces of whole rows; docs/benchmarking.md,
 * "Skinny contraction: K in pieces").  So a B of at least two pieces' bytes is summed in
 * pieces of whole rows, each a contiguous block of B, every column of it: raw sums per
 * piece, then added in piece order with the epilogue.  The count depends on the sizes
 * alone, a power of two so that it divides among 2, 4, 8 or 16 threads.  The pieces' sums
 * are pieces / K of B's bytes, written and read again: at least PIECE_ROWS rows a piece
 * keeps them within 1/64 (decode: 16 pieces of a K of 768 left 8 us of combining in a
 * step of 1.9 ms; 8 pieces ran 1% faster). */
#define PIECE_BYTES ((int64_t)256 << 10)
#define PIECE_ROWS 64
#define MAX_PIECES 16

int64_t
jit_skinny_pieces(const jit_step *s, int64_t *rows)
{
    *rows = s->mm_k;
    if (s->desc.bform != JIT_SKINNY_ROWS || s->mm_batch != 1 || s->mm_k < 2 * PIECE_ROWS)
        return 1;
    int64_t es = (int64_t)kiln_dtype_size(jit_matmul_dtype(&s->desc));
    int64_t bytes = s->mm_k * s->mm_n * es, p = 1;
    while (p < MAX_PIECES && bytes / (2 * p) >= PIECE_BYTES && s->mm_k / (2 * p) >= PIECE_ROWS)
        p *= 2;
    if (p == 1)
        return 1;
    int64_t per = (s->mm_k + p - 1) / p;
    per = (per + ROWS_KBLOCK - 1) / ROWS_KBLOCK * ROWS_KBLOCK;
    *rows = per;
    return (s->mm_k + per - 1) / per;
}

void
jit_skinny_core(const jit_kdesc *d, jit_kinst *inst, jit_kdesc *core)
{
    *inst = (jit_kinst){.kind = JIT_OP, .op = IR_OP_MATMUL, .dtype = (uint8_t)jit_matmul_dtype(d)};
    *core = (jit_kdesc){.kind = JIT_KERNEL_SKINNY,
                        .rank = 2,
                        .ninst = 1,
                        .inst = inst,
                        .tier = d->tier,
                        .bform = JIT_SKINNY_CORE,
                        .tile_m = d->tile_m,
                        .sched = d->sched};
}

kiln_status
jit_skinny_schedule(jit_kdesc *d)
{
    kiln_dtype t = jit_matmul_dtype(d);
    int n;
    jit_skinny_tile(t, d->tile_m, d->bform, &n);
    d->sched.tile_n = n;
    d->sched.kblock = d->bform == JIT_SKINNY_ROWS ? ROWS_KBLOCK : 0;
    d->sched.cols = d->bform == JIT_SKINNY_ROWS ? (int32_t)jit_skinny_cols(t, d->tile_m) : 0;
    d->sched.pf_bytes = PF_BYTES;
    return KILN_OK;
}

void
jit_skinny_dump(const jit_kdesc *d, FILE *f)
{
    const jit_ksched *k = &d->sched;
    if (d->bform == JIT_SKINNY_ROWS)
        fprintf(f, "      schedule: %d lanes; register tile %d rows x %d vectors; %d rows of B a "
                   "step of k; at most %d columns a call; B prefetched into L2 %d bytes of the "
                   "call's columns ahead\n",
                (int)k->lanes, (int)d->tile_m, (int)k->tile_n, (int)k->kblock, (int)k->cols,
                (int)k->pf_bytes);
    else
        fprintf(f, "      schedule: %d lanes; register tile %d rows x %d columns, lanes along "
                   "k; B prefetched into L2 %d bytes ahead\n",
                (int)k->lanes, (int)d->tile_m, (int)k->tile_n, (int)k->pf_bytes);
}

int64_t
jit_skinny_cols(kiln_dtype t, int tile_m)
{
    int64_t w = jit_host_info()->vector_bits / 32;
    int64_t c = JIT_SKINNY_YBYTES / ((int64_t)tile_m * (int64_t)kiln_dtype_size(t)) / w * w;
    return c > w ? c : w;
}

int
jit_skinny_max_rows(kiln_dtype t)
{
    int bits = jit_host_info()->vector_bits;
    int regs = bits == 512 ? 32 : 16;
    int per = kiln_dtype_size(t) == 8 ? 2 : 1;
    int m = (regs - 8) / (2 * per);
    int p = 1;
    while (p * 2 <= m)
        p *= 2;
    return p;
}
