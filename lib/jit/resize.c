/* resize.c — plans at new sizes: a graph equal to one already planned but for its sizes
 * (the same generic hash: a decoder whose caches grow by a row every step) is planned
 * from that plan's model, not from scratch.
 *
 *   model    a plan built from scratch, kept with the planner's state after fuse and
 *            schedule (plan.c's keep_model): simplify's map, every node's class, cluster
 *            and role, the clusters, the order of the steps;
 *   check    (same_but_sizes) the new graph has the model's structure (ops, wiring,
 *            dtypes, ranks, every attribute but sizes), and its sizes equal 0, 1 and each
 *            other exactly where the model's do: every dim of every node, every slice
 *            bound, pad width and reshape target, as one pattern.  Simplify's merges
 *            (equal types and attributes) and fuse's fits (equal shapes; a value of one
 *            element) are decided by that pattern alone, so they hold;
 *   replay   simplify done again from its map (no hashing, no folding; a matmul made a
 *            mul, its contracted dim 1, is one again: a size of 1 stays 1);
 *            jit_fuse_resize: cluster shapes and views at the new sizes, and fuse's other
 *            decisions from sizes checked again (a view no strides express, a reshape of a
 *            contiguous value, an output view of a whole value, rows too long for the
 *            caches: fuse.c's SZ_* and long_rows);
 *            jit_schedule_place: every buffer placed at the new sizes;
 *            describe: a kernel step whose description read nothing that differs from
 *            the model's (the model's record of what each description read, describe.c's
 *            jit_describe_record and jit_describe_same: the nodes' dims, sized attributes
 *            and nodeinfo) is the model's step, its arrays shared; every other step
 *            described from scratch (describe takes all of its decisions from sizes
 *            itself: load classes, streaming stores, skinny or packed and its tile), a
 *            reduction's schedule copied from the model's step when the rest of its
 *            description is equal (jit_kernel_schedule_like), and a step whose
 *            description equals the model's takes the model's kernel without a kernel
 *            cache lookup.
 *   When the check or a decision fails the graph is planned from scratch, and that plan is
 *   kept as a model too (at most JIT_RESIZE_MODELS of one graph; the most recent is tried
 *   first).  KILN_TEST_RESIZE=verify plans every such graph from scratch too and compares
 *   the two plans field by field (tests: a difference is an internal error); =off makes no
 *   plan from a model.
 *
 * What is not replayed: a graph with a matmul of a concat (simplify splits it at some
 * sizes) keeps no model. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "planner.h"

/* ---- the check ------------------------------------------------------------------------ */

/* A one-to-one map between the model's size values and the new graph's, with 0 and 1 each
 * mapped to itself: the sizes are equal where the model's are exactly when one exists.  A
 * graph has few distinct sizes (a decoder step: some 20 among 600 dims and bounds), so
 * the maps start on the stack and grow only past half of VMAP_SMALL. */
#define VMAP_SMALL 64

typedef struct vmap {
    int64_t *k, *v; /* open addressing, keys k, values v */
    bool *used;
    size_t cap, n;
    int64_t sk[VMAP_SMALL], sv[VMAP_SMALL];
    bool su[VMAP_SMALL];
} vmap;

static void
vmap_init(vmap *m)
{
    m->k = m->sk;
    m->v = m->sv;
    m->used = m->su;
    m->cap = VMAP_SMALL;
    m->n = 0;
    memset(m->su, 0, sizeof m->su);
}

static void
vmap_free(vmap *m)
{
    if (m->k != m->sk) {
        ir_free(m->k);
        ir_free(m->v);
        ir_free(m->used);
    }
}

static size_t
vmap_slot(const vmap *m, int64_t x)
{
    return (size_t)((uint64_t)x * 0x9e3779b97f4a7c15ull >> 20) & (m->cap - 1);
}

/* Twice the room, every pair placed again; false when out of memory (m unchanged). */
static bool
vmap_grow(vmap *m)
{
    size_t cap = 2 * m->cap;
    int64_t *k = ir_malloc(sizeof(int64_t) * cap), *v = ir_malloc(sizeof(int64_t) * cap);
    bool *used = ir_calloc(cap, 1);
    if (!k || !v || !used) {
        ir_free(k);
        ir_free(v);
        ir_free(used);
        return false;
    }
    vmap o = *m; /* (its arrays: the stack ones are o's copies, read before m is left) */
    if (m->k == m->sk) {
        o.k = o.sk;
        o.v = o.sv;
        o.used = o.su;
    }
    m->k = k;
    m->v = v;
    m->used = used;
    m->cap = cap;
    for (size_t i = 0; i < o.cap; i++) {
        if (!o.used[i])
            continue;
        size_t j = vmap_slot(m, o.k[i]);
        while (used[j])
            j = (j + 1) & (cap - 1);
        used[j] = true;
        k[j] = o.k[i];
        v[j] = o.v[i];
    }
    if (o.k != o.sk) {
        ir_free(o.k);
        ir_free(o.v);
        ir_free(o.used);
    }
    return true;
}

/* The slot of key x in m, or the free slot where it would go. */
static size_t
vmap_find(const vmap *m, int64_t x)
{
    size_t i = vmap_slot(m, x);
    while (m->used[i] && m->k[i] != x)
        i = (i + 1) & (m->cap - 1);
    return i;
}

/* x -> y, x not in m; false when out of memory */
static bool
vmap_add(vmap *m, int64_t x, int64_t y)
{
    if (2 * (m->n + 1) > m->cap && !vmap_grow(m))
        return false;
    size_t i = vmap_find(m, x);
    m->used[i] = true;
    m->k[i] = x;
    m->v[i] = y;
    m->n++;
    return true;
}

typedef struct pattern {
    vmap fwd, back; /* x -> y and y -> x: each pair is in both or in neither */
    bool nomem;
} pattern;

/* x (the model's) and y (the new graph's) are one pair of the map: a pair seen before
 * (one lookup: the other map holds it too), or two values neither map holds yet. */
static bool
same_value(pattern *p, int64_t x, int64_t y)
{
    size_t i = vmap_find(&p->fwd, x);
    if (p->fwd.used[i])
        return p->fwd.v[i] == y;
    if (p->back.used[vmap_find(&p->back, y)])
        return false; /* y is another value's */
    if (!vmap_add(&p->fwd, x, y) || !vmap_add(&p->back, y, x)) {
        p->nomem = true;
        return false;
    }
    return true;
}

static bool
same_values(pattern *p, const int64_t *x, const int64_t *y, int n)
{
    for (int i = 0; i < n; i++)
        if (!same_value(p, x[i], y[i]))
            return false;
    return true;
}

/* The attributes of a and b (same op) other than sizes are equal, and their sizes follow
 * the pattern. */
static bool
same_node(pattern *p, const ir_node *a, const ir_node *b)
{
    if (a->op != b->op || a->type.dtype != b->type.dtype || a->type.shape.rank != b->type.shape.rank ||
        a->nin != b->nin || (a->nin && memcmp(a->in, b->in, sizeof(int32_t) * (size_t)a->nin) != 0))
        return false;
    if (!same_values(p, a->type.shape.dims, b->type.shape.dims, a->type.shape.rank))
        return false;
    if (a->op == IR_OP_INPUT)
        return a->index == b->index;
    unsigned m = ir_ops[a->op].attrs;
    const ir_attrs *x = a->at, *y = b->at;
    const int r = IR_MAX_RANK; /* list attributes: every slot (unused ones are zero) */
    if ((m & IR_A_VALUE) && memcmp(&x->value, &y->value, sizeof x->value) != 0)
        return false;
    if ((m & IR_A_START) && a->op == IR_OP_ARANGE && memcmp(&x->start, &y->start, sizeof x->start) != 0)
        return false;
    if ((m & IR_A_START) && a->op == IR_OP_SLICE && !same_values(p, x->begin, y->begin, r))
        return false;
    if ((m & IR_A_STOP) && !same_values(p, x->stop, y->stop, r))
        return false;
    if ((m & IR_A_STEP) && memcmp(x->step, y->step, sizeof x->step) != 0)
        return false;
    if ((m & IR_A_DELTA) && memcmp(&x->delta, &y->delta, sizeof x->delta) != 0)
        return false;
    if ((m & IR_A_LOW) && !same_values(p, x->low, y->low, r))
        return false;
    if ((m & IR_A_HIGH) && !same_values(p, x->high, y->high, r))
        return false;
    if ((m & IR_A_TO) && x->to != y->to)
        return false;
    if ((m & IR_A_SHAPE) && (x->shape.rank != y->shape.rank ||
                             !same_values(p, x->shape.dims, y->shape.dims, x->shape.rank)))
        return false;
    if ((m & IR_A_PERM) && memcmp(x->perm, y->perm, sizeof x->perm) != 0)
        return false;
    if ((m & IR_A_AXIS) && x->axis != y->axis)
        return false;
    if ((m & IR_A_AXES) && x->axes != y->axes)
        return false;
    if ((m & IR_A_KEEPDIM) && x->keepdim != y->keepdim)
        return false;
    return true;
}

/* Is g the model's graph but for sizes, with the same pattern of sizes?  Constants are
 * compared by value only where simplify merges them: two of one type were merged at the
 * model's sizes exactly when their bytes are equal at g's. */
static bool
same_but_sizes(const jit_plan_model *m, const kiln_graph *g, bool *nomem)
{
    const kiln_graph *g0 = m->g0;
    *nomem = false;
    if (g->nnodes != g0->nnodes || g->ninputs != g0->ninputs || g->noutputs != g0->noutputs)
        return false;
    for (int32_t i = 0; i < g->noutputs; i++)
        if (g->outputs[i].node != g0->outputs[i].node)
            return false;
    pattern p;
    vmap_init(&p.fwd);
    vmap_init(&p.back);
    p.nomem = false;
    bool ok = same_value(&p, 0, 0) && same_value(&p, 1, 1);
    int32_t nconst = 0;
    for (int32_t i = 0; ok && i < g->nnodes; i++) {
        ok = same_node(&p, &g0->nodes[i], &g->nodes[i]);
        nconst += g->nodes[i].op == IR_OP_CONSTANT;
    }
    for (int32_t i = 0; ok && nconst > 1 && i < g->nnodes; i++) {
        const ir_node *a = &g->nodes[i];
        if (a->op != IR_OP_CONSTANT || m->sr.map[i] < 0)
            continue;
        for (int32_t j = i + 1; ok && j < g->nnodes; j++) {
            const ir_node *b = &g->nodes[j];
            if (b->op != IR_OP_CONSTANT || m->sr.map[j] < 0 || !ir_type_equal(&a->type, &b->type))
                continue;
            size_t bytes = ir_type_bytes(&a->type);
            bool eq = bytes == 0 || memcmp(a->at->data, b->at->data, bytes) == 0;
            ok = eq == (m->sr.map[i] == m->sr.map[j]);
        }
    }
    *nomem = p.nomem;
    vmap_free(&p.fwd);
    vmap_free(&p.back);
    return ok && !p.nomem;
}

/* ---- the replay ----------------------------------------------------------------------- */

/* Simplify's result for g when the model's only dropped and merged nodes and made matmuls
 * of K = 1 muls (a decoder step: the same scalar constant in each layer): g derived
 * (ir_graph_derive: its nodes' arrays shared) with the model's map, each matmul made a mul
 * again (K still 1) and its type checked by the rule.  *done false when the model's did
 * more (folded a node, dropped a named one): the caller copies node by node. */
static kiln_graph *
derive_again(const jit_plan_model *m, const kiln_graph *g, bool *done)
{
    const kiln_graph *ms = m->plan->g;
    const int32_t *map = m->sr.map, *orig = m->sr.orig;
    *done = false;
    for (int32_t j = 0; j < m->sr.n1; j++)
        if (ms->nodes[j].op != g->nodes[orig[j]].op &&
            !(ms->nodes[j].op == IR_OP_MUL && g->nodes[orig[j]].op == IR_OP_MATMUL))
            return NULL;
    for (int32_t i = 0; i < g->nnodes; i++)
        if (map[i] < 0 && g->nodes[i].name)
            return NULL;
    *done = true;
    kiln_graph *ng = ir_graph_derive(g, m->sr.n1, orig, map);
    for (int32_t j = 0; ng && j < ng->nnodes; j++) {
        ir_node *nd = &ng->nodes[j];
        ir_type t;
        if (ms->nodes[j].op == nd->op)
            continue;
        if (ir_infer(ng, "kiln_jit", IR_OP_MUL, nd->nin, nd->in, &ir_no_attrs, &nd->type, &t)) {
            kiln_graph_free(ng);
            return NULL;
        }
        nd->op = IR_OP_MUL;
    }
    return ng;
}

/* Simplify's result for g, from the model's map: the same nodes, at g's sizes. */
static kiln_graph *
simplify_again(const jit_plan_model *m, const kiln_graph *g)
{
    const kiln_graph *ms = m->plan->g;
    const int32_t *map = m->sr.map, *orig = m->sr.orig;
    bool derived;
    kiln_graph *dg = derive_again(m, g, &derived);
    if (derived)
        return dg;
    kiln_graph *ng = ir_graph_new(g->name);
    int32_t small[16], *ins = small;
    if (!ng || !ir_graph_reserve(ng, m->sr.n1))
        goto fail;
    for (int32_t j = 0; j < m->sr.n1; j++) {
        const ir_node *nd = &g->nodes[orig[j]];
        int32_t id;
        if (nd->op == IR_OP_INPUT) {
            id = ir_graph_copy_node(ng, g, orig[j], NULL);
        } else if (ms->nodes[j].op == IR_OP_FULL && nd->op != IR_OP_FULL) {
            ir_attrs at = {0};
            at.value = ms->nodes[j].at->value; /* folded: of `full`s, whatever their sizes */
            id = ir_graph_add_node(ng, "kiln_jit", IR_OP_FULL, 0, NULL, &at, &nd->type, nd->name);
        } else {
            if (nd->nin > 16) {
                if (ins != small)
                    ir_free(ins);
                if (!(ins = ir_malloc(sizeof(int32_t) * (size_t)nd->nin)))
                    goto fail;
            }
            for (int k = 0; k < nd->nin; k++)
                ins[k] = map[nd->in[k]];
            if (ms->nodes[j].op == IR_OP_MUL && nd->op == IR_OP_MATMUL) /* of K = 1 (still 1) */
                id = ir_graph_add_node(ng, "kiln_jit", IR_OP_MUL, 2, ins, NULL, &nd->type, nd->name);
            else
                id = ir_graph_copy_node(ng, g, orig[j], ins);
        }
        if (id != j)
            goto fail;
        if (ng->nodes[j].op != ms->nodes[j].op) {
            ir_error(KILN_ERR_INTERNAL, "kiln: internal error: a node simplified again differs");
            goto fail;
        }
    }
    for (int32_t i = 0; i < g->noutputs; i++)
        if (ir_graph_add_output(ng, g->outputs[i].name, map[g->outputs[i].node]))
            goto fail;
    if (ins != small)
        ir_free(ins);
    return ng;
fail:
    if (ins != small)
        ir_free(ins);
    kiln_graph_free(ng);
    return NULL;
}

static kiln_status
resize(jit_plan_model *m, const kiln_graph *g, unsigned flags, jit_plan **out)
{
    *out = NULL;
    bool nomem;
    if (!same_but_sizes(m, g, &nomem))
        return nomem ? ir_error(KILN_ERR_NOMEM, "kiln: out of memory") : KILN_OK;
    kiln_graph *gs = simplify_again(m, g);
    if (!gs)
        return kiln_errcode() ? kiln_errcode() : ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
    /* the planner's state, copied into the model's spare block (the last plan's, given
     * back below: one plan from this model at a time uses it) or a new one */
    size_t nn = (size_t)gs->nnodes;
    nodeinfo *ni = atomic_exchange(&m->spare, NULL);
    if (!ni)
        ni = ir_malloc(sizeof *ni * nn + sizeof(cluster) * (size_t)m->ncl + 1);
    _Static_assert(sizeof(nodeinfo) % _Alignof(cluster) == 0, "clusters after nodeinfo");
    cluster *cl = ni ? (cluster *)(ni + nn) : NULL;
    kiln_status st = KILN_OK;
    if (!ni) {
        st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
    } else {
        if (nn)
            memcpy(ni, m->ni, sizeof *ni * nn);
        if (m->ncl) /* (members stay the model's) */
            memcpy(cl, m->cl, sizeof *cl * (size_t)m->ncl);
        st = jit_plan_resized(m, gs, ni, cl, flags, out);
    }
    ir_free(atomic_exchange(&m->spare, ni));
    if (!*out)
        kiln_graph_free(gs);
    return st;
}

/* ---- checking a plan against the plan from scratch (KILN_TEST_RESIZE=verify) ------------ */

/* (a constant's data lives in each plan's own graph: not its address) */
static bool
loc_equal(const jit_loc *a, const jit_loc *b)
{
    return a->kind == b->kind && a->index == b->index && a->offset == b->offset &&
           (a->kind == JIT_LOC_CONST || a->cdata == b->cdata);
}

static bool
i64s_equal(const int64_t *a, const int64_t *b, size_t n)
{
    return n == 0 || (a && b && memcmp(a, b, sizeof(int64_t) * n) == 0) || (!a && !b);
}

/* The first field in which step a differs from b, or NULL. */
static const char *
step_differs(const jit_step *a, const jit_step *b)
{
    if (a->kind != b->kind)
        return "kind";
    switch (a->kind) {
    case JIT_STEP_COPY:
        if (!loc_equal(&a->from, &b->from) || !loc_equal(&a->to, &b->to))
            return "copy locations";
        return a->bytes != b->bytes ? "copy bytes" : NULL;
    case JIT_STEP_REF:
        if (a->nin != b->nin || !loc_equal(&a->out, &b->out) || !ir_graph_equal(a->sub, b->sub))
            return "reference step";
        for (int k = 0; k < a->nin; k++)
            if (!loc_equal(&a->in[k], &b->in[k]))
                return "reference step operand";
        return NULL;
    case JIT_STEP_KERNEL:
        break;
    }
    if (!jit_kdesc_equal(&a->desc, &b->desc))
        return "description";
    if (a->desc.partial_bytes != b->desc.partial_bytes || a->desc.spill_bytes != b->desc.spill_bytes)
        return "scratch";
    if (a->nslots != b->nslots)
        return "slots";
    for (int k = 0; k < a->nslots; k++)
        if (!loc_equal(&a->slot[k], &b->slot[k]))
            return "slot location";
    int R = a->desc.rank;
    size_t nst = (size_t)(a->desc.kind == JIT_KERNEL_REDUCTION ? a->nslots : a->desc.nloads);
    if (!i64s_equal(a->slot_off, b->slot_off, (size_t)a->nslots))
        return "slot offsets";
    if (!i64s_equal(a->strides, b->strides, nst * (size_t)R))
        return "strides";
    if ((a->ext != NULL) != (b->ext != NULL) ||
        (a->ext && !i64s_equal(a->ext, b->ext, (size_t)a->desc.nloads * (size_t)R * 2)))
        return "boxes";
    if (a->desc.nparams && memcmp(a->params, b->params, sizeof(ir_scalar) * (size_t)a->desc.nparams))
        return "parameters";
    if (!i64s_equal(a->dims, b->dims, (size_t)R) || a->total != b->total)
        return "dims";
    if (a->bytes_per_elem != b->bytes_per_elem || a->rows != b->rows || a->rlen != b->rlen ||
        a->rinner != b->rinner)
        return "rows";
    if (a->desc.kind == JIT_KERNEL_CONTRACTION || a->desc.kind == JIT_KERNEL_SKINNY) {
        for (int x = 0; x < 2; x++)
            if (!loc_equal(&a->mm_loc[x], &b->mm_loc[x]) || a->mm_off[x] != b->mm_off[x] ||
                !i64s_equal(a->mm_st[x], b->mm_st[x], (size_t)R) || a->mm_shared[x] != b->mm_shared[x] ||
                a->mm_src[x] != b->mm_src[x] || a->mm_scale[x] != b->mm_scale[x])
                return "matmul operand";
        if (a->mm_m != b->mm_m || a->mm_n != b->mm_n || a->mm_k != b->mm_k ||
            a->mm_batch != b->mm_batch || a->mm_pack_off != b->mm_pack_off ||
            (a->mm_bpacked != NULL) != (b->mm_bpacked != NULL))
            return "matmul";
    }
    return NULL;
}

static kiln_status
verify(const jit_plan *a, const kiln_graph *g, kiln_mode mode, unsigned flags)
{
    jit_plan *b;
    kiln_status st = jit_plan_build(g, mode, flags, &b, NULL);
    if (st)
        return st;
    const char *why = NULL;
    int at = -1;
    if (a->nsteps != b->nsteps)
        why = "the number of steps";
    else if (a->temp_bytes != b->temp_bytes)
        why = "the temporaries' bytes";
    else if (a->compact != b->compact)
        why = "the tier";
    for (int i = 0; !why && i < a->nsteps; i++)
        if ((why = step_differs(&a->steps[i], &b->steps[i])))
            at = i;
    jit_plan_free(b);
    if (why)
        return ir_error(KILN_ERR_INTERNAL, "kiln: internal error: the plan of graph '%s' made at "
                        "new sizes from a model differs from its plan from scratch: step %d, %s",
                        g->name, at, why);
    return KILN_OK;
}

/* ---- the models kept ------------------------------------------------------------------ */

/* Models by their graph's generic hash, mode and flags: MODEL_BUCKETS buckets of the most
 * recent JIT_RESIZE_MODELS each (a bucket shared by two graphs keeps the latest of both). */
#define MODEL_BUCKETS 64

static pthread_mutex_t models_lock = PTHREAD_MUTEX_INITIALIZER;
static jit_plan_model *models[MODEL_BUCKETS][JIT_RESIZE_MODELS];
static uint64_t model_hash[MODEL_BUCKETS][JIT_RESIZE_MODELS];
static _Atomic uint64_t resized;

static uint64_t
key_of(uint64_t ghash, unsigned flags)
{
    return ghash ^ ((uint64_t)(flags & JIT_F_PLAN) << 40);
}

void
jit_plan_model_release(jit_plan_model *m)
{
    if (!m || atomic_fetch_sub(&m->refs, 1) != 1)
        return;
    kiln_graph_free(m->g0);
    jit_simplify_rec_free(&m->sr);
    for (int32_t c = 0; c < m->ncl; c++)
        ir_free(m->cl[c].members);
    ir_free(m->cl);
    ir_free(m->ni);
    jit_sched_free(&m->sc);
    ir_free(m->reads.v);
    ir_free(m->reads_at.v);
    ir_free(atomic_load(&m->spare));
    jit_plan_free(m->plan);
    ir_free(m);
}

kiln_status
jit_resize_find(const kiln_graph *g, uint64_t ghash, kiln_mode mode, unsigned flags,
                jit_plan **out)
{
    *out = NULL;
    int test = ir_config_get()->test_resize;
    if (test < 0)
        return KILN_OK;
    uint64_t h = key_of(ghash, flags);
    jit_plan_model *cand[JIT_RESIZE_MODELS];
    int n = 0;
    pthread_mutex_lock(&models_lock);
    for (int i = 0; i < JIT_RESIZE_MODELS; i++) {
        jit_plan_model *m = models[h % MODEL_BUCKETS][i];
        if (m && model_hash[h % MODEL_BUCKETS][i] == h && m->mode == mode &&
            m->flags == (flags & JIT_F_PLAN)) {
            atomic_fetch_add(&m->refs, 1);
            cand[n++] = m;
        }
    }
    pthread_mutex_unlock(&models_lock);
    kiln_status st = KILN_OK;
    for (int i = 0; i < n; i++) {
        if (!*out && !st)
            st = resize(cand[i], g, flags, out);
        jit_plan_model_release(cand[i]);
    }
    if (!st && *out && test > 0)
        st = verify(*out, g, mode, flags);
    if (st) {
        jit_plan_free(*out);
        *out = NULL;
        return st;
    }
    if (*out)
        atomic_fetch_add(&resized, 1);
    return KILN_OK;
}

void
jit_resize_keep(jit_plan_model *m, uint64_t ghash)
{
    uint64_t h = key_of(ghash, m->flags);
    jit_plan_model *old;
    pthread_mutex_lock(&models_lock);
    jit_plan_model **b = models[h % MODEL_BUCKETS];
    uint64_t *bh = model_hash[h % MODEL_BUCKETS];
    old = b[JIT_RESIZE_MODELS - 1];
    memmove(b + 1, b, sizeof *b * (JIT_RESIZE_MODELS - 1));
    memmove(bh + 1, bh, sizeof *bh * (JIT_RESIZE_MODELS - 1));
    b[0] = m;
    bh[0] = h;
    pthread_mutex_unlock(&models_lock);
    jit_plan_model_release(old);
}

void
jit_resize_trim(void)
{
    jit_plan_model *all[MODEL_BUCKETS * JIT_RESIZE_MODELS];
    pthread_mutex_lock(&models_lock);
    memcpy(all, models, sizeof all);
    memset(models, 0, sizeof models);
    pthread_mutex_unlock(&models_lock);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        jit_plan_model_release(all[i]);
}

uint64_t
jit_resize_count(void)
{
    return atomic_load(&resized);
}
