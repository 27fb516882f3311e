/* kdesc.c — the serialised form of a kernel description: the key of the kernel cache in
 * memory (cache.c) and, with the host and versions, of the disk cache (disk.c).
 *
 * Every field is written explicitly, little-endian, at a fixed width, in the order below —
 * never the bytes of a C struct, whose padding, field order and enum sizes are the
 * compiler's.  A change in what a description holds (a new field, a new kind's payload)
 * changes jit_kdesc_serialise and bumps JIT_KDESC_FORMAT, so entries written by an older
 * kiln are misses, never wrong hits.  So does a change in what a compiled kernel expects
 * at run time for the same description (the jit_raux or jit_caux layout, a contraction's
 * register tile rule, the packed panels' layout): the code is keyed, not just the text.
 * And so does a change in the code a description lowers to that changes its results or
 * its speed (format 2: f32 sums in blocks, unmasked costly passes, prefetching; format 3:
 * f32 gelu's corrected quotient; format 4: rows kernels' bare vmaxps/vminps; format 5:
 * prefetching the next row's stores; format 6: the shorter f32 exp; format 7: a split
 * blockable columns kernel's last partial vector reduced whole; format 8: vector bodies'
 * positions through an opaque copy; format 9: the tier; format 10: the small code
 * model; format 11: the SKINNY kind's form and tile rows; format 12: a SKINNY rows call
 * takes up to JIT_SKINNY_YBYTES of running sums, not 1024 columns: an older kernel given
 * the wider calls would overflow its stack array; format 13: scalar parameters, `full`
 * values and arange's start and step read at run time instead of written into the code;
 * format 14: a reduction's schedule in the key, so that a change in how schedules are made
 * changes the keys by itself; format 15: every kind's schedule, jit_ksched, and the
 * reduction's prefetching, unrolling, column blocks and streaming; format 16: JIT_ST_RANGE
 * stores, a range of the space stored at run-time bounds taken from the last parameters,
 * and store classes on CONTRACTION and SKINNY descriptions; format 17: a ranged store's
 * vectors with no lane in the range branched around; format 18: jit_raux.ext, ranged loads
 * (a concat) in reduction kernels; format 19: a SKINNY kernel prefetches B ahead,
 * sched.pf_bytes; format 20: a SKINNY rows kernel sums K in pieces, jit_saux.part to mode;
 * format 21: a SKINNY rows step's kernel is its epilogue alone, its k loop a core of its
 * own, bform JIT_SKINNY_CORE),
 * so an upgrade never keeps running the old code from the disk.
 * A SKINNY description adds how B is read and the rows of its tile; every kind its schedule
 * (jit_ksched: the lanes, the elementwise peeling, the register tiles, the unrolling).
 *
 *   format 21 (20: the same fields, a rows kernel with its k loop; 19: an older
 *   jit_saux; 18, 17 and 16: without sched.pf_bytes; 15: also no JIT_ST_RANGE store
 *   class; 14: also without jit_ksched and the reduction schedule's fields after spill;
 *   13: without the schedule; 11 and 12: also without nparams, and with an arange's start
 *   and step in a u8 value2[8] after value; 9 and 10: also without bform and tile_m; 1 to
 *   8: without the tier):
 *     i32 kind, rank, nred, lanes_kept, ninst, nloads, nstores, nparams
 *     ninst x { u8 kind, op, dtype, cls; i32 slot; i32 a[0..3); u8 value[8] }
 *     nstores x i32 store index
 *     u8 has_store_cls; then nstores x u8 store class when set
 *     u8 tier
 *     i32 bform, tile_m
 *     i32 sched.lanes, peel, peel_min, mr, nrv, nr, kunroll, tile_n, kblock, cols, pf_bytes
 *     u8 has_schedule (REDUCTION: jit_kdesc.rsched); then i32 nphases, defer; u8 ahead;
 *       u64 srow, partial; ninst x { u8 uni; i32 phase, spill }; i32 prefetch;
 *       u8 prefetch_stores, col_blocks, streams; (nphases + 1) x u8 unroll
 */
#include <string.h>

#include "reduce_plan.h"

bool
jit_buf_put(jit_buf *b, const void *p, size_t n)
{
    if (b->failed)
        return false;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *q = ir_realloc(b->data, cap);
        if (!q) {
            b->failed = true;
            return false;
        }
        b->data = q;
        b->cap = cap;
    }
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return true;
}

void
jit_buf_u8(jit_buf *b, unsigned v)
{
    unsigned char c = (unsigned char)v;
    jit_buf_put(b, &c, 1);
}

/* v in n little-endian bytes */
static void
put_le(jit_buf *b, uint64_t v, int n)
{
    unsigned char c[8];
    for (int i = 0; i < n; i++)
        c[i] = (unsigned char)(v >> (8 * i));
    jit_buf_put(b, c, (size_t)n);
}

void
jit_buf_u32(jit_buf *b, uint32_t v)
{
    put_le(b, v, 4);
}

void
jit_buf_u64(jit_buf *b, uint64_t v)
{
    put_le(b, v, 8);
}

void
jit_buf_str(jit_buf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    jit_buf_u32(b, (uint32_t)n);
    jit_buf_put(b, s, n);
}

void
jit_buf_free(jit_buf *b)
{
    ir_free(b->data);
    memset(b, 0, sizeof *b);
}

void
jit_kdesc_serialise(const jit_kdesc *d, jit_buf *b)
{
    jit_buf_u32(b, (uint32_t)d->kind);
    jit_buf_u32(b, (uint32_t)d->rank);
    jit_buf_u32(b, (uint32_t)d->nred);
    jit_buf_u32(b, (uint32_t)d->lanes_kept);
    jit_buf_u32(b, (uint32_t)d->ninst);
    jit_buf_u32(b, (uint32_t)d->nloads);
    jit_buf_u32(b, (uint32_t)d->nstores);
    jit_buf_u32(b, (uint32_t)d->nparams);
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        jit_buf_u8(b, in->kind);
        jit_buf_u8(b, in->op);
        jit_buf_u8(b, in->dtype);
        jit_buf_u8(b, in->cls);
        jit_buf_u32(b, (uint32_t)in->slot);
        for (int k = 0; k < 3; k++)
            jit_buf_u32(b, (uint32_t)in->a[k]);
        jit_buf_put(b, in->value.bytes, sizeof in->value.bytes);
    }
    for (int32_t k = 0; k < d->nstores; k++)
        jit_buf_u32(b, (uint32_t)d->stores[k]);
    jit_buf_u8(b, d->store_cls != NULL);
    if (d->store_cls)
        jit_buf_put(b, d->store_cls, (size_t)d->nstores);
    jit_buf_u8(b, (unsigned)d->tier);
    jit_buf_u32(b, (uint32_t)d->bform);
    jit_buf_u32(b, (uint32_t)d->tile_m);
    const jit_ksched *k = &d->sched;
    const int32_t sched[] = {k->lanes, k->peel, k->peel_min, k->mr,     k->nrv,
                             k->nr,    k->kunroll, k->tile_n, k->kblock, k->cols, k->pf_bytes};
    for (size_t i = 0; i < sizeof sched / sizeof sched[0]; i++)
        jit_buf_u32(b, (uint32_t)sched[i]);
    const rplan *a = d->rsched;
    jit_buf_u8(b, a != NULL);
    if (!a)
        return;
    jit_buf_u32(b, (uint32_t)a->nphases);
    jit_buf_u32(b, (uint32_t)a->defer);
    jit_buf_u8(b, a->ahead);
    jit_buf_u64(b, (uint64_t)a->srow);
    jit_buf_u64(b, (uint64_t)a->partial);
    for (int32_t i = 0; i < d->ninst; i++) {
        jit_buf_u8(b, a->uni[i]);
        jit_buf_u32(b, (uint32_t)a->ph[i]);
        jit_buf_u32(b, (uint32_t)a->spill[i]);
    }
    jit_buf_u32(b, (uint32_t)a->prefetch);
    jit_buf_u8(b, a->prefetch_stores);
    jit_buf_u8(b, a->col_blocks);
    jit_buf_u8(b, a->streams);
    for (int p = 0; p <= a->nphases; p++) /* nphases + 1 of them, as serialised */
        jit_buf_u8(b, a->unroll[p]);
}

/* Everything but the schedule (what jit_kernel_schedule reads). */
bool
jit_kdesc_payload_equal(const jit_kdesc *x, const jit_kdesc *y)
{
    if (x->kind != y->kind || x->rank != y->rank || x->nred != y->nred ||
        x->lanes_kept != y->lanes_kept || x->ninst != y->ninst || x->nloads != y->nloads ||
        x->nstores != y->nstores || x->nparams != y->nparams || x->tier != y->tier ||
        x->bform != y->bform || x->tile_m != y->tile_m)
        return false;
    for (int32_t i = 0; i < x->ninst; i++) {
        const jit_kinst *a = &x->inst[i], *b = &y->inst[i];
        if (a->kind != b->kind || a->op != b->op || a->dtype != b->dtype || a->cls != b->cls ||
            a->slot != b->slot || a->a[0] != b->a[0] || a->a[1] != b->a[1] || a->a[2] != b->a[2] ||
            memcmp(a->value.bytes, b->value.bytes, sizeof a->value.bytes) != 0)
            return false;
    }
    if (x->nstores && memcmp(x->stores, y->stores, sizeof(int32_t) * (size_t)x->nstores) != 0)
        return false;
    if ((x->store_cls != NULL) != (y->store_cls != NULL) ||
        (x->store_cls && x->nstores && memcmp(x->store_cls, y->store_cls, (size_t)x->nstores) != 0))
        return false;
    return true;
}

/* The schedules (made from the rest, so equal when the rest is; compared all the same). */
static bool
sched_equal(const jit_kdesc *x, const jit_kdesc *y)
{
    if (memcmp(&x->sched, &y->sched, sizeof x->sched) != 0) /* int32_t fields: no padding */
        return false;
    const rplan *a = x->rsched, *b = y->rsched;
    if ((a != NULL) != (b != NULL))
        return false;
    if (!a)
        return true;
    if (a->nphases != b->nphases || a->defer != b->defer || a->ahead != b->ahead ||
        a->srow != b->srow || a->partial != b->partial || a->prefetch != b->prefetch ||
        a->prefetch_stores != b->prefetch_stores || a->col_blocks != b->col_blocks ||
        a->streams != b->streams)
        return false;
    for (int32_t i = 0; i < x->ninst; i++)
        if (a->uni[i] != b->uni[i] || a->ph[i] != b->ph[i] || a->spill[i] != b->spill[i])
            return false;
    for (int p = 0; p <= a->nphases; p++) /* nphases + 1 of them, as serialised */
        if ((a->unroll && a->unroll[p]) != (b->unroll && b->unroll[p]))
            return false;
    return true;
}

/* What jit_kdesc_serialise writes, compared field by field (no buffers): equal
 * descriptions are one kernel.  A field added to the serialised form is added here. */
bool
jit_kdesc_equal(const jit_kdesc *x, const jit_kdesc *y)
{
    return jit_kdesc_payload_equal(x, y) && sched_equal(x, y);
}

bool
jit_kdesc_store_ranged(const jit_kdesc *d, int32_t k)
{
    return d->store_cls && d->store_cls[k] == JIT_ST_RANGE;
}

int32_t
jit_kdesc_range_param(const jit_kdesc *d, int32_t k)
{
    int32_t before = 0, all = 0;
    for (int32_t i = 0; i < d->nstores; i++)
        if (jit_kdesc_store_ranged(d, i)) {
            before += i < k;
            all++;
        }
    return d->nparams - 2 * all + 2 * before;
}
