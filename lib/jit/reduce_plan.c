/* reduce_plan.c — a REDUCTION kernel's schedule, computed from its description without LLVM
 * (reduce_plan.h): phases, row-wise values, spills, the partials of split rows, and the
 * passes that move between rows (lower_reduce.c's header explains the algorithm). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce_plan.h"

static const rp_algebra algebra[IR_OP_COUNT] = {
    [IR_OP_REDUCE_SUM] = {.reduce = true, .combine = RP_ADD, .wide = true},
    [IR_OP_REDUCE_MEAN] = {.reduce = true, .combine = RP_ADD, .wide = true, .mean = true},
    [IR_OP_REDUCE_PROD] = {.reduce = true, .combine = RP_MUL, .wide = true},
    [IR_OP_REDUCE_MAX] = {.reduce = true, .combine = RP_MAX},
    [IR_OP_REDUCE_MIN] = {.reduce = true, .combine = RP_MIN},
    [IR_OP_ARGMAX] = {.reduce = true, .combine = RP_ARGMAX},
    [IR_OP_ARGMIN] = {.reduce = true, .combine = RP_ARGMIN},
};
/* Every reduce op of ops.def has a row: the count of its REDUCE rows is the table's. */
#define OP(E, name, arity, kind, trule, attrs, calc, ulp_f32, ulp_f64, meaning)                    \
    +(IR_KIND_##kind == IR_KIND_REDUCE)
enum { REDUCE_OPS = 0
#include "ops.def"
};
#undef OP
_Static_assert(REDUCE_OPS == 7, "a reduce op of ops.def without a row in reduce_plan.c's algebra");

const rp_algebra *
rp_algebra_of(ir_op op)
{
    IR_ASSERT((unsigned)op < IR_OP_COUNT && algebra[op].reduce);
    return &algebra[op];
}

bool
rp_is_arg(ir_op op)
{
    rp_combine c = rp_algebra_of(op)->combine;
    return c == RP_ARGMAX || c == RP_ARGMIN;
}

kiln_dtype
rp_operand_dtype(const jit_kdesc *d, const jit_kinst *in)
{
    return (kiln_dtype)d->inst[in->a[0]].dtype;
}

size_t
rp_acc_bytes(int W, const jit_kdesc *d, const jit_kinst *in)
{
    kiln_dtype t = (kiln_dtype)d->inst[in->a[0]].dtype;
    size_t s = ir_dtype_is_float(t) && rp_algebra_of((ir_op)in->op)->wide ? 8 : kiln_dtype_size(t);
    return (size_t)W * (s + (rp_is_arg((ir_op)in->op) ? 8 : 0));
}

/* Rows kernels take a float max or min with the bare vmaxps/vminps, the NaNs and the zeros'
 * signs tracked apart (lower_reduce_acc.c's fast extremes). */
bool
rp_fast_extreme(const jit_kdesc *d, const jit_kinst *in)
{
    rp_combine c = rp_algebra_of((ir_op)in->op)->combine;
    return !d->lanes_kept && (c == RP_MAX || c == RP_MIN) && ir_dtype_is_float(rp_operand_dtype(d, in));
}

bool
rp_blocked_sum(const jit_kdesc *d, const jit_kinst *in)
{
    return rp_algebra_of((ir_op)in->op)->combine == RP_ADD && rp_operand_dtype(d, in) == KILN_DTYPE_F32;
}

/* ---- spilling ---------------------------------------------------------------------------- */

/* What recomputing instruction i costs (its cone down to loads and row-wise values), in
 * rough vector-op units: vector math 20, divisions and square roots 4, the rest 1. */
int
rp_recompute_cost(const jit_kdesc *d, const bool *uni, int32_t i, int depth)
{
    const jit_kinst *in = &d->inst[i];
    if (uni[i] || in->kind != JIT_OP || depth > 64)
        return 0;
    int c;
    switch ((ir_op)in->op) {
    case IR_OP_DIV: case IR_OP_REM: case IR_OP_SQRT: case IR_OP_RSQRT: case IR_OP_RECIP:
        c = 4;
        break;
    default:
        c = ir_op_is_vmath((ir_op)in->op) ? 20 : 1;
        break;
    }
    for (int k = 0; k < ir_ops[in->op].arity && c < 1000; k++)
        c += rp_recompute_cost(d, uni, in->a[k], depth + 1);
    return c;
}

/* Phases and row-wise flags of every instruction (see the top of the file). */
static int
analyse(const jit_kdesc *d, bool *uni, int *ph)
{
    int nphases = 0;
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        ph[i] = 0;
        switch ((jit_kind)in->kind) {
        case JIT_LOAD: uni[i] = (in->cls & JIT_ROWWISE) != 0; break;
        case JIT_SPLAT:
        case JIT_PARAM: uni[i] = true; break;
        case JIT_OP:
            uni[i] = true;
            for (int k = 0; k < ir_ops[in->op].arity; k++) {
                uni[i] &= uni[in->a[k]];
                if (ph[in->a[k]] > ph[i])
                    ph[i] = ph[in->a[k]];
            }
            break;
        case JIT_REDUCE:
            uni[i] = true;
            ph[i] = ph[in->a[0]] + 1;
            break;
        }
        if (ph[i] > nphases)
            nphases = ph[i];
    }
    return nphases;
}

/* Does instruction i accumulate in pass p (a reduction whose operand has phase p)? */
bool
rp_reduces_in(const jit_kdesc *d, const int *ph, int32_t i, int p)
{
    return d->inst[i].kind == JIT_REDUCE && ph[d->inst[i].a[0]] == p;
}

/* Is store k one over the space, made in pass p? */
bool
rp_space_store_in(const jit_kdesc *d, const int *ph, int32_t k, int p)
{
    return d->store_cls[k] != JIT_ST_ROW && ph[d->stores[k]] == p;
}

/* Is all the work over the space in the first pass: every reduction reads it and every
 * store over the space is made in it (what can be split into pieces of a row)? */
bool
rp_first_pass_only(const jit_kdesc *d, const int *ph)
{
    for (int32_t i = 0; i < d->ninst; i++)
        if (d->inst[i].kind == JIT_REDUCE && !rp_reduces_in(d, ph, i, 0))
            return false;
    for (int32_t k = 0; k < d->nstores; k++)
        if (d->store_cls[k] != JIT_ST_ROW && !rp_space_store_in(d, ph, k, 0))
            return false;
    return true;
}

/* Does pass p have work: a reduction to accumulate or a store over the space? */
bool
rp_pass_needed_d(const jit_kdesc *d, const int *ph, int p)
{
    for (int32_t i = 0; i < d->ninst; i++)
        if (rp_reduces_in(d, ph, i, p))
            return true;
    for (int32_t k = 0; k < d->nstores; k++)
        if (rp_space_store_in(d, ph, k, p))
            return true;
    return false;
}

/* Mark in need[] what pass p computes, from its roots down to loads, row-wise values and
 * (below pass p) spilled values. */
static void
mark_need(const jit_kdesc *d, const bool *uni, const int *spill, const int *ph, int p,
          int32_t i, bool *need)
{
    if (uni[i] || need[i])
        return;
    need[i] = true;
    if (spill && spill[i] && ph[i] < p)
        return;
    const jit_kinst *in = &d->inst[i];
    if (in->kind == JIT_OP)
        for (int k = 0; k < ir_ops[in->op].arity; k++)
            mark_need(d, uni, spill, ph, p, in->a[k], need);
}

void
rp_pass_needs(const jit_kdesc *d, const bool *uni, const int *spill, const int *ph, int p, bool *need)
{
    memset(need, 0, sizeof(bool) * (size_t)d->ninst);
    for (int32_t i = 0; i < d->ninst; i++)
        if (rp_reduces_in(d, ph, i, p))
            mark_need(d, uni, spill, ph, p, d->inst[i].a[0], need);
    for (int32_t k = 0; k < d->nstores; k++)
        if (rp_space_store_in(d, ph, k, p))
            mark_need(d, uni, spill, ph, p, d->stores[k], need);
}

/* Choose the spilled values: spill[i] = 1 + the byte offset, per reduced element, of i's
 * scratch row (rows one after another in instruction order; 0: recomputed); *bytes, the
 * bytes per element.  KILN_ERR_NOMEM when out of memory (never a plan without its spills:
 * the runner would provide no scratch for the code that spills). */
static kiln_status
choose_spills(const jit_kdesc *d, const bool *uni, const int *ph, int nphases, int *spill,
              size_t *bytes_out)
{
    size_t bytes = 0;
    *bytes_out = 0;
    if (d->kind != JIT_KERNEL_REDUCTION || d->lanes_kept || nphases < 2)
        return KILN_OK;
    bool *first = ir_calloc((size_t)d->ninst + 1, sizeof(bool));
    bool *later = ir_calloc((size_t)d->ninst + 1, sizeof(bool));
    bool *need = ir_calloc((size_t)d->ninst + 1, sizeof(bool));
    kiln_status st = KILN_OK;
    if (!first || !later || !need) {
        st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory analysing a kernel");
    } else {
        for (int p = 0; p <= nphases; p++) {
            rp_pass_needs(d, uni, NULL, ph, p, need);
            for (int32_t i = 0; i < d->ninst; i++) {
                if (need[i] && ph[i] == p)
                    first[i] = true;
                if (need[i] && ph[i] < p)
                    later[i] = true;
            }
        }
        for (int32_t i = 0; i < d->ninst; i++)
            if (first[i] && later[i] && rp_recompute_cost(d, uni, i, 0) >= 6) {
                spill[i] = (int)bytes + 1;
                bytes += kiln_dtype_size((kiln_dtype)d->inst[i].dtype);
            }
    }
    ir_free(first);
    ir_free(later);
    ir_free(need);
    *bytes_out = bytes;
    return st;
}

/* Rows kernels whose last pass only stores (softmax's e / s) and whose pass before it
 * computes vector math (softmax's exp and sum) run the last pass one row behind: row t's
 * last pass L goes into the loop of row t + 1's pass L - 1, the body of that pass first,
 * then the deferred one's, at each position; the last row's after the rows loop.  The two
 * then overlap in the core (softmax: the division of one row beside the exp of the next;
 * the divider idles in one, the FMA pipes in the other) instead of running one after the
 * other.  The results are the same bits: every element gets the same
 * operations, only the order of independent rows' work changes.  Spilled values live in two
 * scratch rows, used by alternate rows (row t's pass L - 1 writes one while row t - 1's
 * deferred pass reads the other).  The first row of a call runs the deferred body on itself
 * with zero row values and the other scratch row, a harmless result its own deferred pass
 * overwrites later (outputs never overlap inputs or each other, kiln.h).  Conditions: rows,
 * L >= 2, L - 1 is a pass with vector math, L reduces nothing and reads no spilled value of
 * a pass before L - 1, no streaming stores (their heads and fences are per pass) and no
 * pieces of long rows (partial_bytes 0).  Returns L, 0 when not deferred.  `need`: room for
 * ninst flags (no allocation here: the runner's scratch size and the lowering must agree). */
static int
defer_of(const jit_kdesc *d, const bool *uni, const int *ph, const int *spill, int nphases,
         size_t partial_bytes, bool *need)
{
    if (d->kind != JIT_KERNEL_REDUCTION || d->lanes_kept || partial_bytes)
        return 0;
    for (int32_t k = 0; k < d->nstores; k++)
        if (d->store_cls[k] == JIT_ST_STREAM)
            return 0;
    int L = 0;
    for (int p = nphases; p >= 1 && !L; p--)
        if (rp_pass_needed_d(d, ph, p))
            L = p;
    if (L < 2 || !rp_pass_needed_d(d, ph, L - 1))
        return 0;
    /* only behind a pass with vector math: layernorm's cheap passes (a sum of squares, then
     * the normalisation) ran slower merged (docs/benchmarking.md, "Rows kernels: a pass one
     * row behind or ahead"), the rows of x, y,
     * gamma and beta of two rows then all in use and all 4 KiB apart, in the same sets of
     * L1, where softmax's exp pass took the division of the row before for nothing */
    int cost = 0;
    for (int32_t i = 0; i < d->ninst; i++)
        if (rp_reduces_in(d, ph, i, L - 1))
            cost += rp_recompute_cost(d, uni, d->inst[i].a[0], 0);
    for (int32_t k = 0; k < d->nstores; k++)
        if (rp_space_store_in(d, ph, k, L - 1))
            cost += rp_recompute_cost(d, uni, d->stores[k], 0);
    if (cost < 20)
        return 0;
    rp_pass_needs(d, uni, spill, ph, L, need);
    bool ok = true;
    for (int32_t i = 0; i < d->ninst; i++)
        ok = ok && !rp_reduces_in(d, ph, i, L) && !(need[i] && spill[i] && ph[i] < L - 1);
    return ok ? L : 0;
}

/* Rows kernels whose first pass only takes a float max or min of the row (softmax's and
 * logsumexp's) and whose second pass computes vector math run the first pass one row
 * ahead: row t + 1's max goes into the loop of row t's exp pass, after that row's body at
 * each position, so the load-bound max of one row overlaps the FMA-bound exp of the other
 * (docs/benchmarking.md, "Rows kernels: a pass one row behind or ahead").  The first row's
 * max comes from a warm-up iteration of the rows loop (jit_lower_reduce), and the last
 * row's iteration takes its own row's max again (the row after it does not exist), so pass
 * 0 is emitted once, inside pass 1.  Same bits: every row's max is the same operations over
 * the same elements.  Conditions: rows, no pieces, pass 0 reduces only float max/min (no
 * f32 blocks, one accumulator set), the kernel stores nothing over the space and spills
 * nothing, no row-wise load (pass 0's row values are then constants, the same for every
 * row), and pass 1 has vector math (so it runs one vector per iteration).  Softmax is not
 * ahead: with its output rows and scratch rows besides the two rows of x, all 4 KiB apart
 * in the same sets of L1, it ran slower from cold caches, though faster in L2. */
static bool
ahead_of(const jit_kdesc *d, const bool *uni, const int *ph, const int *spill, int nphases,
         size_t partial_bytes)
{
    if (d->kind != JIT_KERNEL_REDUCTION || d->lanes_kept || partial_bytes || nphases < 1 ||
        !rp_pass_needed_d(d, ph, 0) || !rp_pass_needed_d(d, ph, 1))
        return false;
    for (int32_t k = 0; k < d->nstores; k++)
        if (d->store_cls[k] != JIT_ST_ROW)
            return false;
    int cost = 0;
    for (int32_t i = 0; i < d->ninst; i++) {
        const jit_kinst *in = &d->inst[i];
        if (rp_reduces_in(d, ph, i, 0) &&
            ((rp_algebra_of((ir_op)in->op)->combine != RP_MAX &&
              rp_algebra_of((ir_op)in->op)->combine != RP_MIN) ||
             !ir_dtype_is_float((kiln_dtype)d->inst[in->a[0]].dtype)))
            return false;
        if (spill[i] || (in->kind == JIT_LOAD && uni[i]))
            return false;
        if (rp_reduces_in(d, ph, i, 1))
            cost += rp_recompute_cost(d, uni, in->a[0], 0);
    }
    for (int32_t k = 0; k < d->nstores; k++)
        if (rp_space_store_in(d, ph, k, 1))
            cost += rp_recompute_cost(d, uni, d->stores[k], 0);
    return cost >= 20;
}

/* Bytes of one piece's accumulators (jit_reduce_scratch), from the phases. */
static size_t
partial_of(const jit_kdesc *d, const int *ph)
{
    if (d->kind != JIT_KERNEL_REDUCTION)
        return 0;
    int W = d->sched.lanes;
    size_t bytes = 0;
    /* each piece reduces, and stores, its own range of the row */
    bool ok = rp_first_pass_only(d, ph);
    for (int32_t k = 0; d->lanes_kept && k < d->nstores; k++)
        ok &= d->store_cls[k] == JIT_ST_ROW; /* cols: as cols_blockable */
    if (ok)
        for (int32_t i = 0; i < d->ninst; i++)
            if (d->inst[i].kind == JIT_REDUCE)
                bytes += rp_acc_bytes(W, d, &d->inst[i]);
    return bytes;
}

/* Does pass p compute vector math (a reduction's operand or a stored value)? */
bool
rp_pass_has_math(const jit_kdesc *d, const bool *uni, const int *ph, int p)
{
    int cost = 0;
    for (int32_t i = 0; i < d->ninst; i++)
        if (rp_reduces_in(d, ph, i, p))
            cost += rp_recompute_cost(d, uni, d->inst[i].a[0], 0);
    for (int32_t k = 0; k < d->nstores; k++)
        if (rp_space_store_in(d, ph, k, p))
            cost += rp_recompute_cost(d, uni, d->stores[k], 0);
    return cost >= 20;
}

/* Rows kernels with a later pass (pieces of long rows have none): the full vectors of the
 * first later pass prefetch the same position of the next row (lower_reduce_pass.c's
 * prefetch_next_row says why and what): the slots the first pass reads, and, when that pass
 * computes vector math, the next row's stores over the space for writing.  Returns the
 * pass, -1 for none. */
static int
prefetch_of(const jit_kdesc *d, const rplan *a, bool *stores)
{
    *stores = false;
    if (d->lanes_kept || a->partial)
        return -1;
    for (int p = 1; p <= a->nphases; p++)
        if (rp_pass_needed_d(d, a->ph, p)) {
            *stores = rp_pass_has_math(d, a->uni, a->ph, p);
            return p;
        }
    return -1;
}

/* Is pass p of a rows kernel a cheap reduction pass (worth RP_UNROLL independent
 * accumulators)?  Not when its reductions are all fast max/min: their chains are one
 * instruction long, so one set keeps up and the four-vector loop would only cost compile
 * time (docs/benchmarking.md, "Rows kernels: bare vmaxps/vminps"). */
static bool
unroll_of(const jit_kdesc *d, const rplan *a, int p)
{
    bool red = false, slow = false;
    int cost = 0;
    if (d->lanes_kept)
        return false;
    for (int32_t i = 0; i < d->ninst; i++)
        if (rp_reduces_in(d, a->ph, i, p)) {
            red = true;
            slow |= !rp_fast_extreme(d, &d->inst[i]);
            cost += rp_recompute_cost(d, a->uni, d->inst[i].a[0], 0);
        }
    if (!slow)
        return false;
    for (int32_t k = 0; k < d->nstores; k++)
        if (rp_space_store_in(d, a->ph, k, p))
            cost += 8;
    return red && cost < 16;
}

/* Columns kernels whose reductions all read the first pass and that store nothing over the
 * space reduce blocks of RP_COL_BLOCK vectors of columns at once (lower_reduce.c's
 * emit_block). */
static bool
col_blocks_of(const jit_kdesc *d, const rplan *a)
{
    if (!d->lanes_kept || !rp_first_pass_only(d, a->ph))
        return false;
    for (int32_t k = 0; k < d->nstores; k++)
        if (d->store_cls[k] != JIT_ST_ROW)
            return false;
    return true;
}

void
rplan_free(rplan *a)
{
    ir_free(a->uni);
    ir_free(a->ph);
    ir_free(a->spill);
    ir_free(a->unroll);
    memset(a, 0, sizeof *a);
}

/* KILN_ERR_NOMEM (with *a freed) when out of memory. */
kiln_status
rplan_make(const jit_kdesc *d, rplan *a)
{
    memset(a, 0, sizeof *a);
    size_t ni = (size_t)d->ninst + 1;
    a->uni = ir_calloc(ni, sizeof(bool));
    a->ph = ir_calloc(ni, sizeof(int));
    a->spill = ir_calloc(ni, sizeof(int));
    bool *need = ir_calloc(ni, sizeof(bool));
    if (!a->uni || !a->ph || !a->spill || !need) {
        ir_free(need);
        rplan_free(a);
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory analysing a kernel");
    }
    a->nphases = analyse(d, a->uni, a->ph);
    kiln_status st = choose_spills(d, a->uni, a->ph, a->nphases, a->spill, &a->srow);
    if (st) {
        ir_free(need);
        rplan_free(a);
        return st;
    }
    a->partial = partial_of(d, a->ph);
    a->defer = defer_of(d, a->uni, a->ph, a->spill, a->nphases, a->partial, need);
    a->ahead = ahead_of(d, a->uni, a->ph, a->spill, a->nphases, a->partial);
    ir_free(need);
    a->unroll = ir_calloc((size_t)a->nphases + 1, sizeof(bool));
    if (!a->unroll) {
        rplan_free(a);
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory analysing a kernel");
    }
    for (int p = 0; p <= a->nphases; p++)
        a->unroll[p] = unroll_of(d, a, p);
    a->prefetch = prefetch_of(d, a, &a->prefetch_stores);
    a->col_blocks = col_blocks_of(d, a);
    for (int32_t k = 0; k < d->nstores; k++)
        a->streams = a->streams || (!d->lanes_kept && d->store_cls[k] == JIT_ST_STREAM);
    return KILN_OK;
}

/* A copy of src (a plan of a description of ninst instructions) into a; KILN_ERR_NOMEM
 * (nothing made) when out of memory. */
static kiln_status
rplan_clone(const rplan *src, int32_t ninst, rplan *a)
{
    *a = *src;
    size_t ni = (size_t)ninst + 1, np = (size_t)src->nphases + 1;
    a->uni = ir_malloc(ni * sizeof(bool));
    a->ph = ir_malloc(ni * sizeof(int));
    a->spill = ir_malloc(ni * sizeof(int));
    a->unroll = ir_malloc(np * sizeof(bool));
    if (!a->uni || !a->ph || !a->spill || !a->unroll) {
        rplan_free(a);
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory analysing a kernel");
    }
    memcpy(a->uni, src->uni, ni * sizeof(bool));
    memcpy(a->ph, src->ph, ni * sizeof(int));
    memcpy(a->spill, src->spill, ni * sizeof(int));
    memcpy(a->unroll, src->unroll, np * sizeof(bool));
    return KILN_OK;
}

kiln_status
jit_reduce_schedule_copy(jit_kdesc *d, const jit_kdesc *from)
{
    IR_ASSERT(d->kind == JIT_KERNEL_REDUCTION && from->rsched && d->ninst == from->ninst);
    rplan *a = ir_malloc(sizeof *a);
    if (!a)
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory analysing a kernel");
    kiln_status st = rplan_clone(from->rsched, d->ninst, a);
    if (st) {
        ir_free(a);
        return st;
    }
    jit_reduce_schedule_free(d);
    d->sched = from->sched;
    d->rsched = a;
    d->partial_bytes = from->partial_bytes;
    d->spill_bytes = from->spill_bytes;
    return KILN_OK;
}

/* The scratch of plan a: one piece's accumulators, and the spill bytes per reduced element
 * (deferred: two scratch rows). */
void
rplan_scratch(const rplan *a, size_t *partial, size_t *spill)
{
    *partial = a->partial;
    *spill = a->defer ? 2 * a->srow : a->srow;
}

kiln_status
jit_reduce_schedule(jit_kdesc *d)
{
    d->partial_bytes = d->spill_bytes = 0;
    if (d->kind != JIT_KERNEL_REDUCTION)
        return KILN_OK;
    rplan *a = ir_malloc(sizeof *a);
    if (!a)
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory analysing a kernel");
    kiln_status st = rplan_make(d, a);
    if (st) {
        ir_free(a);
        return st;
    }
    jit_reduce_schedule_free(d);
    d->rsched = a;
    rplan_scratch(a, &d->partial_bytes, &d->spill_bytes);
    return KILN_OK;
}

void
jit_reduce_schedule_free(jit_kdesc *d)
{
    if (d->rsched) {
        rplan_free(d->rsched);
        ir_free(d->rsched);
        d->rsched = NULL;
    }
}

/* The passes a "rows" kernel makes over each row and what moves between rows; a long row's
 * pieces; then the schedule's line: the lanes, prefetching, unrolled passes, column blocks,
 * streaming. */
void
jit_reduce_dump(const jit_kdesc *d, FILE *f)
{
    const rplan *a = d->rsched;
    if (!a)
        return;
    int passes = 0, spilled = 0;
    for (int p = 0; p <= a->nphases; p++)
        passes += rp_pass_needed_d(d, a->ph, p);
    for (int32_t i = 0; i < d->ninst; i++)
        spilled += a->spill[i] != 0;
    if (!d->lanes_kept && passes > 1) {
        fprintf(f, "      %d passes over each row", passes);
        if (a->ahead)
            fprintf(f, "; pass 0 runs one row ahead, in the previous row's pass 1");
        if (a->defer)
            fprintf(f, "; pass %d runs one row behind, in the next row's pass %d", a->defer,
                    a->defer - 1);
        if (spilled)
            fprintf(f, "; %d value%s kept in a scratch row for a later pass", spilled,
                    spilled > 1 ? "s" : "");
        fputc('\n', f);
    }
    if (d->partial_bytes)
        fprintf(f, "      a long row is reduced in pieces on several threads (%zu bytes of "
                   "accumulators a piece), combined in order\n",
                d->partial_bytes);
    fprintf(f, "      schedule: %d lanes along the %s", (int)d->sched.lanes,
            d->lanes_kept ? "kept innermost axis" : "reduced axis");
    if (a->prefetch > 0)
        fprintf(f, "; pass %d prefetches the next row's %s", a->prefetch,
                a->prefetch_stores ? "loads and stores" : "loads");
    for (int p = 0, n = 0; p <= a->nphases; p++) {
        if (!a->unroll[p])
            continue;
        if (n++)
            fprintf(f, ",%d", p);
        else
            fprintf(f, "; unrolled (%d vectors an iteration) in pass %d", RP_UNROLL, p);
    }
    if (a->col_blocks)
        fprintf(f, "; columns in blocks of %d vectors", RP_COL_BLOCK);
    if (a->streams)
        fprintf(f, "; streaming stores, fenced");
    fputc('\n', f);
}
