/* ksched.c — kernel schedules, without LLVM: jit_kernel_schedule, run once per description
 * in the describe pass, fills d->sched with the lanes and calls its kind's `schedule` hook
 * (kinds.def); the elementwise and contraction hooks are here (the reduction's is
 * reduce_plan.c's, the skinny contraction's skinny.c's).  The emitters emit what the
 * schedule says, the runners split work by it, kdesc.c writes it into the cache key and
 * `kiln dump --plan` prints it. */
#include <stdio.h>
#include <string.h>

#include "jit.h"

kiln_status
jit_kernel_schedule_like(jit_kdesc *d, const jit_kdesc *like)
{
    /* a reduction's schedule is the costly one (rplan_make: a tenth of describing a
     * decoder step's kernels); the others are a few fields, made again */
    if (like && d->kind == JIT_KERNEL_REDUCTION && like->kind == JIT_KERNEL_REDUCTION &&
        like->rsched && jit_kdesc_payload_equal(d, like))
        return jit_reduce_schedule_copy(d, like);
    return jit_kernel_schedule(d);
}

kiln_status
jit_kernel_schedule(jit_kdesc *d)
{
    memset(&d->sched, 0, sizeof d->sched);
    d->sched.lanes = jit_host_info()->vector_bits / 32;
    switch ((jit_kernel_kind)d->kind) { /* every kind, no default (-Werror=switch) */
#define KIND(E, name, schedule, lower, run, dump)                                              \
    case JIT_KERNEL_##E: return schedule(d);
#include "kinds.def"
#undef KIND
    }
    return ir_error(KILN_ERR_INTERNAL, "kiln: internal error: kernel kind %d", (int)d->kind);
}

void
jit_kernel_schedule_dump(const jit_kdesc *d, FILE *f)
{
    switch ((jit_kernel_kind)d->kind) { /* every kind, no default (-Werror=switch) */
#define KIND(E, name, schedule, lower, run, dump)                                              \
    case JIT_KERNEL_##E: dump(d, f); return;
#include "kinds.def"
#undef KIND
    }
}

/* ---- ELEMENTWISE ----------------------------------------------------------------------------
 * The vector body stores whole aligned vectors: rows are peeled, a masked head first, to the
 * alignment of one store (lower.c).  A kernel with streaming stores peels to the first
 * streaming store, every row segment.  Without streaming stores, row segments of at least
 * PEEL_MIN_VECTORS vectors are peeled to the first store's alignment all the same: a
 * 64-byte store that crosses a cache line costs (malloc's large blocks start 16 bytes past
 * a page, so every output is misaligned), and when the loads are misaligned alike, as
 * malloc makes them, they end up aligned too.  Short segments are not: the head and the
 * tail are two masked iterations a row, which cost more than the aligned stores save
 * (docs/benchmarking.md, "Elementwise: peeling rows to an aligned store").
 *
 * A streaming store streams when its element size is the peeled store's (then its buffer's
 * alignment, checked per call, can match); another is made an ordinary store here. */
#define PEEL_MIN_VECTORS 256

kiln_status
jit_elementwise_schedule(jit_kdesc *d)
{
    int k0 = -1;
    for (int32_t k = 0; d->store_cls && k < d->nstores; k++) {
        if (d->store_cls[k] != JIT_ST_STREAM)
            continue;
        size_t es = kiln_dtype_size((kiln_dtype)d->inst[d->stores[k]].dtype);
        if (k0 < 0)
            k0 = k;
        else if (kiln_dtype_size((kiln_dtype)d->inst[d->stores[k0]].dtype) != es)
            d->store_cls[k] = JIT_ST_SPACE;
    }
    d->sched.peel = k0 >= 0 ? k0 : d->nstores > 0 ? 0 : -1;
    d->sched.peel_min = k0 >= 0 ? 0 : PEEL_MIN_VECTORS;
    return KILN_OK;
}

void
jit_elementwise_dump(const jit_kdesc *d, FILE *f)
{
    const jit_ksched *k = &d->sched;
    fprintf(f, "      schedule: %d lanes", (int)k->lanes);
    if (d->tier == JIT_TIER_COMPACT)
        fprintf(f, "; compact: every vector under a mask, nothing peeled or streamed");
    else if (k->peel >= 0 && k->peel_min == 0)
        fprintf(f, "; rows peeled to streaming store %d's alignment", (int)k->peel);
    else if (k->peel >= 0)
        fprintf(f, "; rows of at least %d vectors peeled to store %d's alignment",
                (int)k->peel_min, (int)k->peel);
    fputc('\n', f);
}

/* ---- CONTRACTION ------------------------------------------------------------------------- */

/* The register tile of a contraction of dtype t on this host: mr rows x nrv vectors of jit
 * lanes (vector bits / 32 lanes of t), chosen from the register count and width. */
static void
contract_tile(kiln_dtype t, int *mr, int *nrv, int *nr)
{
    int bits = jit_host_info()->vector_bits;
    int regs = bits == 512 ? 32 : 16; /* AVX-512 has 32 vector registers, AVX2 and SSE 16 */
    int lanes = bits / 32;            /* a jit vector: vector bits / 32 lanes of any dtype */
    /* A jit vector of an 8-byte dtype spans two registers: one per row then. */
    int per = kiln_dtype_size(t) == 8 ? 2 : 1;
    *nrv = per == 2 ? 1 : 2;
    /* accumulators take all but four registers (the B vectors and A's broadcast) */
    *mr = (regs - 4) / (*nrv * per);
    *nr = *nrv * lanes;
}

kiln_dtype
jit_matmul_dtype(const jit_kdesc *d)
{
    for (int32_t i = 0; i < d->ninst; i++)
        if (d->inst[i].kind == JIT_OP && d->inst[i].op == IR_OP_MATMUL)
            return (kiln_dtype)d->inst[i].dtype;
    IR_ASSERT(!"contraction without a matmul");
    return KILN_DTYPE_F32;
}

/* The register tile, and the k loop not unrolled: unrolled, it ran no faster and compiled
 * slower (docs/benchmarking.md, "Contraction: the k loop not unrolled"). */
kiln_status
jit_contract_schedule(jit_kdesc *d)
{
    int mr, nrv, nr;
    contract_tile(jit_matmul_dtype(d), &mr, &nrv, &nr);
    d->sched.mr = mr;
    d->sched.nrv = nrv;
    d->sched.nr = nr;
    d->sched.kunroll = 1;
    return KILN_OK;
}

void
jit_contract_dump(const jit_kdesc *d, FILE *f)
{
    const jit_ksched *k = &d->sched;
    fprintf(f, "      schedule: %d lanes; register tile %d rows x %d vectors; k loop ", (int)k->lanes,
            (int)k->mr, (int)k->nrv);
    if (k->kunroll > 1)
        fprintf(f, "unrolled %d times\n", (int)k->kunroll);
    else
        fprintf(f, "not unrolled\n");
}
