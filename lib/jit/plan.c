/* plan.c — the fusion planner: from a verified graph to steps over buffers.
 *
 *   simplify (simplify.c) ──► classify every node:
 *        BUF    materialised: inputs, constants, reference steps, stored kernel values
 *        FULL   a splat constant, folded into the kernels that read it
 *        ELEM   an elementwise op the JIT compiles
 *        VIEW   expand / permute / slice / reshape of a buffer: index arithmetic
 *               (base, offset, strides) folded into the loads that read it
 *   ──► clusters: an ELEM joins the cluster of an ELEM operand of the same shape unless
 *       that could create a cycle between steps; in eager mode every op is alone
 *   ──► a value is stored only when something outside its cluster reads it or it is an
 *       output; views and fulls are materialised only for outputs and reference steps
 *   ──► steps in dependency order, temporaries packed by lifetime, kernels compiled
 *       (or found in the cache) from their size-free descriptions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit.h"

enum { C_BUF, C_FULL, C_ELEM, C_VIEW };

static bool is_indexing(ir_op op);

/* Ops per fused kernel: each adds one instruction and at most three loads or constants,
 * so a cluster this size stays within JIT_MAX_INST; a longer chain continues in a new
 * kernel. */
#define MAX_CLUSTER_OPS (JIT_MAX_INST / 4)

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
    char why[160];    /* why it is stored / a boundary */
} nodeinfo;

enum { R_SPACE, R_ROW };

typedef struct cluster {
    int32_t *members; /* ELEM nodes in order (a copy cluster has none) */
    int32_t nmembers, capmembers;
    int32_t root_copy; /* for a copy cluster: the VIEW/FULL node it materialises; else -1 */
    ir_shape shape;    /* the iteration space (a reduction: the shape it reduces) */
    bool reduce;       /* a reduction kernel */
    bool indexing;     /* has a pad, concat, gather or arange (elementwise kernels only) */
    uint32_t axes;     /* reduce: the reduced axes of `shape` */
    ir_shape keep1, keep0; /* reduce: the reduced shape with (keepdim) and without */
} cluster;

typedef struct planner {
    const kiln_graph *g;
    kiln_mode mode;
    nodeinfo *ni;
    cluster *cl;
    int32_t ncl, capcl;
    int32_t *users_n;  /* number of users per node */
    int32_t **users;
    int32_t *out_of;   /* first output index naming each node, -1 */
} planner;

static bool
is_view_op(ir_op op)
{
    return op == IR_OP_EXPAND || op == IR_OP_PERMUTE || op == IR_OP_SLICE || op == IR_OP_RESHAPE;
}

bool
jit_op_is_lowerable(const kiln_graph *g, const ir_node *nd)
{
    (void)g;
    switch (ir_ops[nd->op].kind) {
    case IR_KIND_REDUCE:
        return true;
    case IR_KIND_UNARY: case IR_KIND_BINARY: case IR_KIND_TERNARY: case IR_KIND_CAST:
        /* every one: lower_op's switch has no default, and vector math covers every
         * transcendental op (an op it lacked would fail lower_op's build) */
        return true;
    case IR_KIND_SOURCE:
        return nd->op == IR_OP_ARANGE;
    case IR_KIND_MOVE: /* views are index arithmetic on loads; these are loads too */
        return nd->op == IR_OP_PAD || nd->op == IR_OP_CONCAT || nd->op == IR_OP_GATHER;
    case IR_KIND_MATMUL:
        return false;
    }
    return false;
}

static bool
view_is_contiguous(const view *v, const ir_shape *s)
{
    int64_t st[IR_MAX_RANK];
    ir_shape_strides(s, st);
    for (int i = 0; i < s->rank; i++)
        if (s->dims[i] != 1 && st[i] != v->strides[i])
            return false;
    return true;
}

/* The view of VIEW node n given `src`, the view its operand is read through. */
static bool
make_view(planner *p, int32_t n, const view *src)
{
    const ir_node *nd = &p->g->nodes[n];
    const ir_node *x = &p->g->nodes[nd->in[0]];
    view *v = &p->ni[n].v;
    const ir_shape *xs = &x->type.shape, *ys = &nd->type.shape;
    v->base = src->base;
    v->offset = src->offset;
    memset(v->strides, 0, sizeof v->strides);
    switch (nd->op) {
    case IR_OP_RESHAPE:
        if (!view_is_contiguous(src, xs))
            return false;
        ir_shape_strides(ys, v->strides);
        return true;
    case IR_OP_EXPAND:
        for (int i = 0; i < ys->rank; i++) {
            int j = xs->rank - ys->rank + i;
            v->strides[i] = j >= 0 && xs->dims[j] == ys->dims[i] ? src->strides[j] : 0;
        }
        return true;
    case IR_OP_PERMUTE:
        for (int i = 0; i < ys->rank; i++)
            v->strides[i] = src->strides[nd->at.perm[i]];
        return true;
    case IR_OP_SLICE:
        for (int i = 0; i < ys->rank; i++) {
            int64_t first, count;
            ir_slice_axis(xs->dims[i], nd->at.begin[i], nd->at.stop[i], nd->at.step[i], &first,
                          &count);
            if (count > 0)
                v->offset += first * src->strides[i];
            /* With one element or none the stride is never used, and a huge step would
             * overflow; with two or more |step| < the axis size, so the product is small. */
            v->strides[i] = count > 1 ? src->strides[i] * nd->at.step[i] : 0;
        }
        return true;
    default:
        return false;
    }
}

static int32_t
new_cluster(planner *p, const ir_shape *shape, int32_t root_copy)
{
    if (p->ncl == p->capcl) {
        int32_t n = p->capcl ? 2 * p->capcl : 16;
        cluster *c = ir_realloc(p->cl, sizeof *c * (size_t)n);
        if (!c)
            return -1;
        p->cl = c;
        p->capcl = n;
    }
    cluster *c = &p->cl[p->ncl];
    memset(c, 0, sizeof *c);
    c->shape = *shape;
    c->root_copy = root_copy;
    return p->ncl++;
}

static bool
cluster_add(planner *p, int32_t c, int32_t n)
{
    cluster *cl = &p->cl[c];
    if (cl->nmembers == cl->capmembers) {
        int32_t m = cl->capmembers ? 2 * cl->capmembers : 8;
        int32_t *a = ir_realloc(cl->members, sizeof(int32_t) * (size_t)m);
        if (!a)
            return false;
        cl->members = a;
        cl->capmembers = m;
    }
    cl->members[cl->nmembers++] = n;
    p->ni[n].cluster = c;
    return true;
}

/* A node's lastdep from its operands (after settling changed theirs). */
static void
refresh_lastdep(planner *p, int32_t n)
{
    const ir_node *nd = &p->g->nodes[n];
    for (int k = 0; k < nd->nin; k++)
        if (p->ni[nd->in[k]].lastdep > p->ni[n].lastdep)
            p->ni[n].lastdep = p->ni[nd->in[k]].lastdep;
}

/* Give a pending ELEM node a cluster of its own (its first user could not take it). */
static kiln_status
settle(planner *p, int32_t n)
{
    nodeinfo *ni = &p->ni[n];
    if (!ni->pending)
        return KILN_OK;
    int32_t c = new_cluster(p, &p->g->nodes[n].type.shape, -1);
    if (c < 0 || !cluster_add(p, c, n))
        return ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory planning");
    p->cl[c].indexing = is_indexing(p->g->nodes[n].op);
    ni->pending = false;
    if (c > ni->lastdep)
        ni->lastdep = c;
    return KILN_OK;
}

/* Materialise VIEW or FULL node n with a copy kernel of its own (once). */
static kiln_status
materialise(planner *p, int32_t n, const char *why)
{
    nodeinfo *ni = &p->ni[n];
    if (ni->stored || ni->cls == C_BUF)
        return KILN_OK;
    int32_t c = new_cluster(p, &p->g->nodes[n].type.shape, n);
    if (c < 0)
        return ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory planning");
    ni->stored = true;
    ni->cluster = c;
    int32_t dep = ni->lastdep > c ? ni->lastdep : c;
    ni->lastdep = dep;
    snprintf(ni->why, sizeof ni->why, "%s", why);
    return KILN_OK;
}

/* ---- reduction clusters --------------------------------------------------------------- */

/* Ops computed as loads with their own index arithmetic, in elementwise kernels only:
 * their operands are read from buffers, never from the kernel computing them. */
static bool
is_indexing(ir_op op)
{
    return op == IR_OP_PAD || op == IR_OP_CONCAT || op == IR_OP_GATHER || op == IR_OP_ARANGE;
}

static bool
is_reduce(const ir_node *nd)
{
    return ir_ops[nd->op].kind == IR_KIND_REDUCE;
}

static int64_t
numel(const ir_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= s->dims[i];
    return n;
}

/* Make cluster c a reduction of its shape over `axes`. */
static void
make_reduce(cluster *c, uint32_t axes)
{
    c->reduce = true;
    c->axes = axes;
    c->keep1 = c->shape;
    c->keep0.rank = 0;
    for (int i = 0; i < c->shape.rank; i++) {
        if (axes & (1u << i))
            c->keep1.dims[i] = 1;
        else
            c->keep0.dims[c->keep0.rank++] = c->shape.dims[i];
    }
}

/* An in-cluster row value of shape s read by a space-shaped op: it must broadcast one value
 * per row. */
static bool
row_broadcasts(const cluster *c, const ir_shape *s)
{
    return ir_shape_equal(s, &c->keep1) || (numel(s) == 1 && numel(&c->keep1) == 1);
}

/* Can node n be computed in cluster c, and in which role?  Operands already in c must be
 * usable from there: a space-shaped op reads row values only through a keepdim shape. */
static bool
fits(planner *p, int32_t c, int32_t n, uint8_t *role)
{
    const cluster *cl = &p->cl[c];
    const ir_node *nd = &p->g->nodes[n];
    if (cl->root_copy >= 0)
        return false;
    if (is_reduce(nd)) {
        const ir_shape *xs = &p->g->nodes[nd->in[0]].type.shape;
        int32_t x = nd->in[0];
        bool x_in = p->ni[x].cls == C_ELEM && p->ni[x].cluster == c;
        if (!ir_shape_equal(xs, &cl->shape) || (x_in && cl->reduce && p->ni[x].role != R_SPACE))
            return false;
        if ((cl->reduce && cl->axes != nd->at.axes) || cl->indexing)
            return false;
        *role = R_ROW;
        return true;
    }
    if (!cl->reduce) {
        *role = R_SPACE;
        return ir_shape_equal(&nd->type.shape, &cl->shape);
    }
    if (is_indexing(nd->op))
        return false;
    /* all reduced axes of size 1: a row value and a space value look alike; keep apart */
    if (ir_shape_equal(&cl->shape, &cl->keep1))
        return false;
    uint8_t r;
    if (ir_shape_equal(&nd->type.shape, &cl->shape))
        r = R_SPACE;
    else if (ir_shape_equal(&nd->type.shape, &cl->keep1) || ir_shape_equal(&nd->type.shape, &cl->keep0))
        r = R_ROW;
    else
        return false;
    for (int k = 0; k < nd->nin; k++) {
        int32_t w = nd->in[k];
        if (!(p->ni[w].cls == C_ELEM && p->ni[w].cluster == c))
            continue;
        if (r == R_ROW && p->ni[w].role != R_ROW)
            return false;
        if (r == R_SPACE && p->ni[w].role == R_ROW &&
            !row_broadcasts(cl, &p->g->nodes[w].type.shape))
            return false;
    }
    *role = r;
    return true;
}

/* ---- classification and clustering --------------------------------------------------- */

static kiln_status
classify(planner *p)
{
    const kiln_graph *g = p->g;
    bool eager = p->mode == KILN_MODE_EAGER;
    for (int32_t n = 0; n < g->nnodes; n++) {
        const ir_node *nd = &g->nodes[n];
        nodeinfo *ni = &p->ni[n];
        ni->cluster = -1;
        ni->lastdep = -1;
        ni->step = -1;
        ni->last_use = -1;
        for (int k = 0; k < nd->nin; k++)
            if (p->ni[nd->in[k]].lastdep > ni->lastdep)
                ni->lastdep = p->ni[nd->in[k]].lastdep;
        if (nd->op == IR_OP_FULL) {
            ni->cls = C_FULL;
            continue;
        }
        if (nd->op == IR_OP_INPUT || nd->op == IR_OP_CONSTANT) {
            ni->cls = C_BUF;
            ni->v.base = n;
            ir_shape_strides(&nd->type.shape, ni->v.strides);
            continue;
        }
        if (is_view_op(nd->op)) {
            int32_t x = nd->in[0];
            int xc = p->ni[x].cls;
            kiln_status sst = settle(p, x);
            if (sst)
                return sst;
            refresh_lastdep(p, n);
            if (xc == C_ELEM) {
                p->ni[x].stored = true;
                snprintf(p->ni[x].why, sizeof p->ni[x].why, "read through %s %%%d (a view needs a buffer)",
                         ir_ops[nd->op].name, (int)n);
            }
            if (xc == C_FULL) {
                kiln_status st = materialise(p, x, "a view of it is taken");
                if (st)
                    return st;
                xc = C_BUF;
            }
            /* A materialised operand is read from its own buffer.  Its own view stays as
             * it is: a stored view's copy kernel still reads through it. */
            view src = p->ni[x].v;
            if (xc == C_ELEM || p->ni[x].stored) {
                src.base = x;
                src.offset = 0;
                ir_shape_strides(&g->nodes[x].type.shape, src.strides);
            }
            ni->cls = C_VIEW;
            if (!make_view(p, n, &src)) {
                /* reshape of a non-contiguous view: copy the operand first */
                kiln_status st = materialise(p, x, "reshaped while not contiguous");
                if (st)
                    return st;
                src.base = x;
                src.offset = 0;
                ir_shape_strides(&g->nodes[x].type.shape, src.strides);
                IR_ASSERT(make_view(p, n, &src));
            }
            if (p->ni[x].lastdep > ni->lastdep)
                ni->lastdep = p->ni[x].lastdep; /* the copy just made */
            if (eager) {
                kiln_status st = materialise(p, n, "eager mode: one kernel per op");
                if (st)
                    return st;
            }
            continue;
        }
        if (!jit_op_is_lowerable(g, nd)) {
            ni->cls = C_BUF; /* a reference step */
            ni->v.base = n;
            ir_shape_strides(&nd->type.shape, ni->v.strides);
            for (int k = 0; k < nd->nin; k++) {
                int32_t x = nd->in[k];
                char why[160];
                snprintf(why, sizeof why, "read by %s %%%d (reference step)", ir_ops[nd->op].name,
                         (int)n);
                kiln_status sst = settle(p, x);
                if (sst)
                    return sst;
                refresh_lastdep(p, n);
                if (p->ni[x].cls == C_ELEM && !p->ni[x].stored) {
                    p->ni[x].stored = true;
                    snprintf(p->ni[x].why, sizeof p->ni[x].why, "%s", why);
                } else if (p->ni[x].cls == C_VIEW || p->ni[x].cls == C_FULL) {
                    kiln_status st = materialise(p, x, why);
                    if (st)
                        return st;
                }
            }
            /* the reference step runs after everything it reads */
            continue;
        }
        if (is_indexing(nd->op)) {
            /* read through loads of buffers (a view is fine): operands computed in a
             * kernel are stored, splats materialised */
            for (int k = 0; k < nd->nin; k++) {
                int32_t x = nd->in[k];
                char why[160];
                snprintf(why, sizeof why, "read by %s %%%d (an indexed load)", ir_ops[nd->op].name, (int)n);
                kiln_status sst = settle(p, x);
                if (sst)
                    return sst;
                refresh_lastdep(p, n);
                if (p->ni[x].cls == C_ELEM && !p->ni[x].stored) {
                    p->ni[x].stored = true;
                    snprintf(p->ni[x].why, sizeof p->ni[x].why, "%s", why);
                } else if (p->ni[x].cls == C_FULL) {
                    kiln_status st = materialise(p, x, why);
                    if (st)
                        return st;
                    refresh_lastdep(p, n);
                }
            }
            ni->cls = C_ELEM;
            if (!eager) {
                ni->pending = true; /* its first user places it */
                continue;
            }
            int32_t c = new_cluster(p, &nd->type.shape, -1);
            if (c < 0 || !cluster_add(p, c, n))
                return ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory planning");
            p->cl[c].indexing = true;
            if (c > ni->lastdep)
                ni->lastdep = c;
            continue;
        }
        /* ELEM or a reduction: join an operand's cluster when safe */
        ni->cls = C_ELEM;
        int32_t join = -1;
        uint8_t role = R_SPACE;
        bool red = is_reduce(nd);
        bool leaf = !eager && !red;
        int nscan = red ? 1 : nd->nin;
        for (int k = 0; k < nd->nin; k++)
            if (p->ni[nd->in[k]].cls == C_ELEM)
                leaf = false;
        if (leaf) {
            ni->pending = true; /* reads only buffers and splats: its first user places it */
            continue;
        }
        if (!eager) {
            for (int k = 0; k < nscan && join < 0; k++) {
                int32_t u = nd->in[k];
                if (p->ni[u].cls != C_ELEM || p->ni[u].cluster < 0 ||
                    p->cl[p->ni[u].cluster].root_copy >= 0 ||
                    p->cl[p->ni[u].cluster].nmembers >= MAX_CLUSTER_OPS ||
                    !fits(p, p->ni[u].cluster, n, &role))
                    continue;
                int32_t c = p->ni[u].cluster;
                bool safe = true;
                for (int m = 0; m < nd->nin && safe; m++) {
                    int32_t w = nd->in[m];
                    if (p->ni[w].cls == C_ELEM && p->ni[w].cluster == c)
                        continue;
                    /* w must not depend on cluster c (else c -> w -> c would be a cycle) */
                    if (p->ni[w].lastdep >= c)
                        safe = false;
                }
                if (safe)
                    join = c;
            }
        }
        if (join < 0) {
            join = new_cluster(p, red ? &g->nodes[nd->in[0]].type.shape : &nd->type.shape, -1);
            if (join < 0)
                return ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory planning");
            role = red ? R_ROW : R_SPACE;
        }
        if (red && !p->cl[join].reduce)
            make_reduce(&p->cl[join], nd->at.axes);
        ni->role = role;
        /* pending operands that fit are computed in this kernel (the safety check above saw
         * their lastdep, and a new cluster is newer than all of them); others get kernels of
         * their own */
        for (int k = 0; k < nd->nin; k++) {
            int32_t u = nd->in[k];
            uint8_t urole;
            if (!p->ni[u].pending)
                continue;
            if (p->ni[u].lastdep < join && fits(p, join, u, &urole) &&
                (red ? urole == R_SPACE
                     : urole == role ||
                           (urole == R_ROW && row_broadcasts(&p->cl[join], &g->nodes[u].type.shape)))) {
                if (!cluster_add(p, join, u))
                    return ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory planning");
                p->ni[u].pending = false;
                p->ni[u].lastdep = join;
                p->ni[u].role = urole;
                if (is_indexing(g->nodes[u].op))
                    p->cl[join].indexing = true;
            } else {
                kiln_status sst = settle(p, u);
                if (sst)
                    return sst;
            }
        }
        if (!cluster_add(p, join, n))
            return ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory planning");
        if (join > ni->lastdep)
            ni->lastdep = join;
        /* operands in other clusters are stored by them */
        for (int k = 0; k < nd->nin; k++) {
            int32_t u = nd->in[k];
            if (p->ni[u].cls == C_ELEM && p->ni[u].cluster != join && !p->ni[u].stored) {
                p->ni[u].stored = true;
                snprintf(p->ni[u].why, sizeof p->ni[u].why, "%s %%%d is in another kernel (%s)",
                         ir_ops[nd->op].name, (int)n,
                         eager ? "eager mode: one kernel per op"
                               : p->cl[p->ni[u].cluster].nmembers < MAX_CLUSTER_OPS &&
                                         !fits(p, p->ni[u].cluster, n, &role)
                                     ? "it does not fit that kernel's iteration space"
                               : p->cl[p->ni[u].cluster].nmembers >= MAX_CLUSTER_OPS
                                     ? "its kernel is full"
                                     : "fusing would create a cycle");
            }
        }
    }
    /* leaves nobody took get kernels of their own; outputs are stored */
    for (int32_t n = 0; n < g->nnodes; n++) {
        kiln_status sst = settle(p, n);
        if (sst)
            return sst;
    }
    for (int32_t i = 0; i < g->noutputs; i++) {
        int32_t n = g->outputs[i].node;
        nodeinfo *ni = &p->ni[n];
        if (ni->cls == C_ELEM && !ni->stored) {
            ni->stored = true;
            snprintf(ni->why, sizeof ni->why, "graph output '%s'", g->outputs[i].name);
        } else if (ni->cls == C_VIEW || ni->cls == C_FULL) {
            char why[160];
            snprintf(why, sizeof why, "graph output '%s'", g->outputs[i].name);
            kiln_status st = materialise(p, n, why);
            if (st)
                return st;
        }
    }
    return KILN_OK;
}

/* ---- steps ---------------------------------------------------------------------------- */

/* The node whose buffer a load of n (from cluster c) reads, and its view. */
static const view *
load_source(planner *p, int32_t n, int32_t c, view *tmp)
{
    nodeinfo *ni = &p->ni[n];
    bool own = ni->cls == C_ELEM || (ni->cls == C_VIEW && ni->stored &&
                                     p->mode == KILN_MODE_EAGER && ni->cluster != c);
    if (own || ni->cls == C_BUF || ni->cls == C_FULL /* materialised for an indexed load */) {
        tmp->base = n;
        tmp->offset = 0;
        ir_shape_strides(&p->g->nodes[n].type.shape, tmp->strides);
        return tmp;
    }
    return &ni->v; /* a view over its base */
}

/* The step that produces node n's buffer (-1: an input or a constant). */
static int32_t
producer(planner *p, int32_t n, int32_t *cluster_step, int32_t *ref_step)
{
    nodeinfo *ni = &p->ni[n];
    if (ni->cls == C_BUF)
        return p->g->nodes[n].op == IR_OP_INPUT || p->g->nodes[n].op == IR_OP_CONSTANT ? -1 : ref_step[n];
    return cluster_step[ni->cluster];
}

typedef struct ivec {
    int32_t *v;
    int32_t n, cap;
} ivec;

static bool
ivec_push(ivec *a, int32_t x)
{
    if (a->n == a->cap) {
        int32_t m = a->cap ? 2 * a->cap : 16;
        int32_t *v = ir_realloc(a->v, sizeof(int32_t) * (size_t)m);
        if (!v) {
            ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory planning");
            return false;
        }
        a->v = v;
        a->cap = m;
    }
    a->v[a->n++] = x;
    return true;
}

/* Buffers (node ids) read by a step: a cluster (c >= 0) or the reference step of node r. */
static bool
step_reads(planner *p, int32_t c, int32_t r, ivec *out)
{
    const kiln_graph *g = p->g;
    view tmp;
    out->n = 0;
    if (r >= 0) {
        const ir_node *nd = &g->nodes[r];
        for (int k = 0; k < nd->nin; k++) {
            int32_t x = nd->in[k];
            if (!ivec_push(out, p->ni[x].cls == C_VIEW && !p->ni[x].stored ? p->ni[x].v.base : x))
                return false;
        }
        return true;
    }
    cluster *cl = &p->cl[c];
    if (cl->root_copy >= 0) {
        int32_t x = cl->root_copy;
        if (p->ni[x].cls == C_VIEW)
            return ivec_push(out, p->ni[x].v.base);
        return true; /* a full: nothing read */
    }
    for (int32_t i = 0; i < cl->nmembers; i++) {
        const ir_node *nd = &g->nodes[cl->members[i]];
        for (int k = 0; k < nd->nin; k++) {
            int32_t x = nd->in[k];
            if ((p->ni[x].cls == C_ELEM && p->ni[x].cluster == c) ||
                (p->ni[x].cls == C_FULL && !is_indexing(nd->op)))
                continue;
            if (!ivec_push(out, load_source(p, x, c, &tmp)->base))
                return false;
        }
    }
    return true;
}

/* ---- kernel descriptions ---------------------------------------------------------------- */

typedef struct kbuild {
    planner *p;
    int32_t c;
    int R;
    int64_t dims[IR_MAX_RANK];
    /* reduction kernels: kept dims then reduced dims; pos[i] = iteration dim of axis i of
     * the reduced shape (-1: none, a reduced axis of a space of no kept axes) */
    bool red;
    int nk, vdim;
    int pos[IR_MAX_RANK];
    jit_kinst *inst;
    int32_t ninst, capinst;
    int32_t *memo; /* node -> inst + 1 (0: none) */
    ivec touched;
    /* loads */
    ivec load_node; /* base node per slot */
    int64_t *load_ext;  /* slot * R * 2: boxes of ranged loads, gather axes */
    int64_t *load_off;
    int64_t *load_strides; /* slot * R */
    int32_t capload;
} kbuild;

static int32_t
kb_push(kbuild *k, const jit_kinst *in)
{
    if (k->ninst >= JIT_MAX_INST) {
        ir_error(KILN_ERR_UNSUPPORTED, "kiln_jit: unsupported: kernel with more than %d instructions",
                 JIT_MAX_INST);
        return -1;
    }
    if (k->ninst == k->capinst) {
        int32_t m = k->capinst ? 2 * k->capinst : 32;
        jit_kinst *a = ir_realloc(k->inst, sizeof *a * (size_t)m);
        if (!a) {
            ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
            return -1;
        }
        k->inst = a;
        k->capinst = m;
    }
    k->inst[k->ninst] = *in;
    return k->ninst++;
}

/* Iteration-space strides of a value with element strides `vs` over shape `xs`, read by a
 * node of shape `cs` in context ctx (0: an op over the space, 1: a row op). */
static void
map_strides(kbuild *k, const ir_shape *xs, const int64_t *vs, const ir_shape *cs, int ctx,
            int64_t *st)
{
    for (int d = 0; d < k->R; d++)
        st[d] = 0;
    if (!k->red) {
        for (int d = 0; d < k->R; d++) {
            int j = xs->rank - k->R + d;
            st[d] = j >= 0 && xs->dims[j] != 1 && k->dims[d] != 1 ? vs[j] : 0;
        }
        return;
    }
    const cluster *cl = &k->p->cl[k->c];
    for (int i = 0; i < cs->rank; i++) {
        int j = xs->rank - cs->rank + i;
        if (j < 0 || xs->dims[j] == 1)
            continue;
        int d;
        if (ctx == 0) {
            d = k->pos[i];
        } else if (cs->rank == cl->keep1.rank && ir_shape_equal(cs, &cl->keep1)) {
            d = cl->axes & (1u << i) ? -1 : k->pos[i];
        } else {
            /* keep0: its axes are the kept axes in order */
            d = i;
        }
        if (d >= 0)
            st[d] += vs[j];
    }
}

/* A new load slot reading view v (offset moved by off_adj elements) with iteration strides
 * st and, for ranged and indexed loads, ext (R pairs). */
static int32_t
kb_slot(kbuild *k, const view *v, int64_t off_adj, const int64_t *st, const int64_t *ext)
{
    int32_t slot = k->load_node.n;
    if (slot == k->capload) {
        int32_t m = k->capload ? 2 * k->capload : 8;
        int64_t *o = ir_realloc(k->load_off, sizeof(int64_t) * (size_t)m);
        if (o)
            k->load_off = o;
        int64_t *ss = o ? ir_realloc(k->load_strides, sizeof(int64_t) * (size_t)m * (size_t)k->R) : NULL;
        if (ss)
            k->load_strides = ss;
        int64_t *ex = ss ? ir_realloc(k->load_ext, sizeof(int64_t) * (size_t)m * (size_t)k->R * 2) : NULL;
        if (!o || !ss || !ex) {
            ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
            return -1;
        }
        k->load_ext = ex;
        k->capload = m;
    }
    if (!ivec_push(&k->load_node, v->base)) {
        ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
        return -1;
    }
    k->load_off[slot] = v->offset + off_adj;
    memcpy(k->load_strides + (size_t)slot * (size_t)k->R, st, sizeof(int64_t) * (size_t)k->R);
    for (int d = 0; d < k->R; d++) {
        k->load_ext[((size_t)slot * (size_t)k->R + (size_t)d) * 2] = ext ? ext[2 * d] : 0;
        k->load_ext[((size_t)slot * (size_t)k->R + (size_t)d) * 2 + 1] = ext ? ext[2 * d + 1] : 0;
    }
    return slot;
}

static uint8_t
load_class(int64_t inner)
{
    return inner == 1 ? JIT_CONTIG : inner == 0 ? JIT_BCAST : JIT_STRIDED;
}

/* A load of node n into the iteration space, read by a node of shape cs in context ctx. */
static int32_t
kb_load(kbuild *k, int32_t n, const ir_shape *cs, int ctx)
{
    planner *p = k->p;
    const ir_node *nd = &p->g->nodes[n];
    view tmp;
    const view *v = load_source(p, n, k->c, &tmp);
    int64_t st[IR_MAX_RANK];
    map_strides(k, &nd->type.shape, v->strides, cs, ctx, st);
    int32_t slot = kb_slot(k, v, 0, st, NULL);
    if (slot < 0)
        return -1;
    jit_kinst in = {0};
    in.kind = JIT_LOAD;
    in.dtype = (uint8_t)nd->type.dtype;
    in.slot = slot;
    in.cls = load_class(st[k->vdim]);
    if (k->red) {
        bool rowwise = true;
        for (int d = k->nk; d < k->R; d++)
            rowwise &= st[d] == 0;
        if (rowwise)
            in.cls |= JIT_ROWWISE;
    }
    return kb_push(k, &in);
}

/* A ranged load of operand x of n, shifted by shift[] along each axis of n (same rank),
 * valid in the box [shift, shift + x's dims); elsewhere instruction `other`. */
static int32_t
kb_ranged(kbuild *k, int32_t n, int32_t x, const int64_t *shift, int32_t other)
{
    planner *p = k->p;
    const ir_shape *ns = &p->g->nodes[n].type.shape, *xs = &p->g->nodes[x].type.shape;
    view tmp;
    const view *v = load_source(p, x, k->c, &tmp);
    int64_t st[IR_MAX_RANK] = {0}, ext[2 * IR_MAX_RANK], adj = 0;
    int lead = k->R - ns->rank;
    for (int d = 0; d < k->R; d++) {
        ext[2 * d] = 0;
        ext[2 * d + 1] = 1;
    }
    for (int i = 0; i < ns->rank; i++) {
        st[lead + i] = v->strides[i];
        adj -= shift[i] * v->strides[i];
        ext[2 * (lead + i)] = shift[i];
        ext[2 * (lead + i) + 1] = shift[i] + xs->dims[i];
    }
    int32_t slot = kb_slot(k, v, adj, st, ext);
    if (slot < 0)
        return -1;
    jit_kinst in = {0};
    in.kind = JIT_LOAD;
    in.dtype = (uint8_t)p->g->nodes[x].type.dtype;
    in.slot = slot;
    in.cls = (uint8_t)(load_class(st[k->vdim]) | JIT_RANGED);
    in.a[0] = other;
    return kb_push(k, &in);
}

/* pad, concat, gather, arange as instructions of an elementwise kernel. */
static int32_t
kb_indexing(kbuild *k, int32_t n)
{
    planner *p = k->p;
    const ir_node *nd = &p->g->nodes[n];
    const ir_shape *ns = &nd->type.shape;
    jit_kinst in = {0};
    in.dtype = (uint8_t)nd->type.dtype;
    int64_t shift[IR_MAX_RANK] = {0};
    switch (nd->op) {
    case IR_OP_ARANGE:
        in.kind = JIT_OP;
        in.op = IR_OP_ARANGE;
        in.value = nd->at.start;
        in.value2 = nd->at.delta;
        return kb_push(k, &in);
    case IR_OP_PAD: {
        in.kind = JIT_SPLAT;
        in.value = nd->at.value;
        int32_t fill = kb_push(k, &in);
        if (fill < 0)
            return -1;
        for (int i = 0; i < ns->rank; i++)
            shift[i] = nd->at.low[i];
        return kb_ranged(k, n, nd->in[0], shift, fill);
    }
    case IR_OP_CONCAT: {
        in.kind = JIT_SPLAT; /* zero of the dtype: every element is covered by an operand */
        int32_t v = kb_push(k, &in);
        for (int m = 0; m < nd->nin && v >= 0; m++) {
            v = kb_ranged(k, n, nd->in[m], shift, v);
            shift[nd->at.axis] += p->g->nodes[nd->in[m]].type.shape.dims[nd->at.axis];
        }
        return v;
    }
    case IR_OP_GATHER: {
        /* out = x[:axis] + idx + x[axis+1:]: idx over dims [axis, axis + ri) */
        int32_t x = nd->in[0], ix = nd->in[1];
        const ir_shape *is = &p->g->nodes[ix].type.shape, *xs = &p->g->nodes[x].type.shape;
        int ax = nd->at.axis, ri = is->rank, lead = k->R - ns->rank;
        view t1, t2;
        const view *vi = load_source(p, ix, k->c, &t1);
        int64_t st[IR_MAX_RANK] = {0};
        for (int i = 0; i < ri; i++)
            st[lead + ax + i] = is->dims[i] != 1 ? vi->strides[i] : 0;
        int32_t islot = kb_slot(k, vi, 0, st, NULL);
        if (islot < 0)
            return -1;
        jit_kinst li = {0};
        li.kind = JIT_LOAD;
        li.dtype = (uint8_t)p->g->nodes[ix].type.dtype;
        li.slot = islot;
        li.cls = load_class(st[k->vdim]);
        int32_t idx = kb_push(k, &li);
        if (idx < 0)
            return -1;
        const view *vx = load_source(p, x, k->c, &t2);
        int64_t sx[IR_MAX_RANK] = {0}, ext[2 * IR_MAX_RANK] = {0};
        for (int i = 0; i < xs->rank; i++) {
            if (i < ax)
                sx[lead + i] = vx->strides[i];
            else if (i > ax)
                sx[lead + i - 1 + ri] = vx->strides[i];
        }
        ext[0] = vx->strides[ax];
        ext[1] = xs->dims[ax];
        int32_t slot = kb_slot(k, vx, 0, sx, ext);
        if (slot < 0)
            return -1;
        in.kind = JIT_LOAD;
        in.slot = slot;
        in.cls = (uint8_t)(load_class(sx[k->vdim]) | JIT_INDEXED);
        in.a[0] = idx;
        return kb_push(k, &in);
    }
    default:
        IR_ASSERT(!"kb_indexing: not an indexing op");
        return -1;
    }
}

/* Instruction of node n read by a node of shape cs in context ctx (0 space, 1 row). */
static int32_t
kb_value(kbuild *k, int32_t n, const ir_shape *cs, int ctx)
{
    planner *p = k->p;
    int32_t *memo = &k->memo[2 * n + ctx];
    if (*memo)
        return *memo - 1;
    const ir_node *nd = &p->g->nodes[n];
    nodeinfo *ni = &p->ni[n];
    int32_t r;
    if (ni->cls == C_FULL) {
        jit_kinst in = {0};
        in.kind = JIT_SPLAT;
        in.dtype = (uint8_t)nd->type.dtype;
        in.value = nd->at.value;
        r = kb_push(k, &in);
    } else if (ni->cls == C_ELEM && ni->cluster == k->c && p->cl[k->c].root_copy < 0 &&
               is_indexing(nd->op)) {
        r = kb_indexing(k, n);
    } else if (ni->cls == C_ELEM && ni->cluster == k->c && p->cl[k->c].root_copy < 0) {
        jit_kinst in = {0};
        in.kind = is_reduce(nd) ? JIT_REDUCE : JIT_OP;
        in.op = (uint8_t)nd->op;
        in.dtype = (uint8_t)nd->type.dtype;
        /* a reduction reads its operand over the space; a row op reads row values */
        int octx = is_reduce(nd) ? 0 : k->red && ni->role == R_ROW ? 1 : 0;
        const ir_shape *ocs = is_reduce(nd) ? &p->g->nodes[nd->in[0]].type.shape : &nd->type.shape;
        for (int i = 0; i < nd->nin; i++) {
            int32_t a = kb_value(k, nd->in[i], ocs, octx);
            if (a < 0)
                return -1;
            in.a[i] = a;
        }
        r = kb_push(k, &in);
        /* an in-cluster value reads the same in both contexts */
        if (r >= 0)
            k->memo[2 * n + (1 - ctx)] = r + 1;
    } else {
        r = kb_load(k, n, cs, ctx);
    }
    if (r < 0)
        return -1;
    *memo = r + 1;
    if (!ivec_push(&k->touched, n)) {
        ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
        return -1;
    }
    return r;
}

/* ---- the plan ------------------------------------------------------------------------------ */

static void
explain_cluster(planner *p, int32_t c, FILE *f)
{
    cluster *cl = &p->cl[c];
    const kiln_graph *g = p->g;
    char tb[IR_TYPE_STR_MAX];
    if (cl->root_copy >= 0) {
        int32_t n = cl->root_copy;
        fprintf(f, "kernel: materialise %s %%%d %s (%s)", ir_ops[g->nodes[n].op].name, (int)n,
                ir_type_str(&g->nodes[n].type, tb, sizeof tb), p->ni[n].why);
        return;
    }
    if (cl->reduce) {
        fprintf(f, "reduction kernel over %s, axes [", ir_shape_str(&cl->shape, tb, sizeof tb));
        for (int i = 0, first = 1; i < cl->shape.rank; i++)
            if (cl->axes & (1u << i)) {
                fprintf(f, "%s%d", first ? "" : ",", i);
                first = 0;
            }
        bool cols = cl->shape.rank > 0 && !(cl->axes & (1u << (cl->shape.rank - 1))) &&
                    cl->shape.dims[cl->shape.rank - 1] > 1;
        fprintf(f, "], lanes along the %s:", cols ? "kept innermost axis" : "reduced axis");
    } else {
        fprintf(f, "kernel over %s:", ir_shape_str(&cl->shape, tb, sizeof tb));
    }
    for (int32_t i = 0; i < cl->nmembers; i++)
        fprintf(f, " %%%d %s", (int)cl->members[i], ir_ops[g->nodes[cl->members[i]].op].name);
    for (int32_t i = 0; i < cl->nmembers; i++) {
        int32_t n = cl->members[i];
        if (p->ni[n].stored)
            fprintf(f, "\n      stores %%%d: %s", (int)n, p->ni[n].why);
    }
}

/* Pack temporaries: buffer b lives from step def[b] to step last[b] inclusive. */
typedef struct tbuf {
    int32_t node, def, last;
    size_t size, offset;
} tbuf;

static size_t
pack(tbuf *b, int32_t n)
{
    size_t top = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t off = 0;
        for (bool moved = true; moved;) {
            moved = false;
            for (int32_t j = 0; j < i; j++) {
                bool overlap_t = !(b[j].last < b[i].def || b[i].last < b[j].def);
                bool overlap_m = off < b[j].offset + b[j].size && b[j].offset < off + b[i].size;
                if (overlap_t && overlap_m) {
                    off = (b[j].offset + b[j].size + 63) & ~(size_t)63;
                    moved = true;
                }
            }
        }
        b[i].offset = off;
        if (off + b[i].size > top)
            top = off + b[i].size;
    }
    return top;
}

static void
step_free(jit_step *s)
{
    free(s->explain);
    ir_free(s->desc.inst);
    ir_free(s->desc.stores);
    ir_free(s->desc.store_cls);
    jit_kernel_release(s->kernel);
    ir_free(s->slot);
    ir_free(s->slot_off);
    ir_free(s->strides);
    ir_free(s->ext);
    kiln_graph_free(s->sub);
    ir_free(s->in);
}

void
jit_plan_free(jit_plan *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nsteps; i++)
        step_free(&p->steps[i]);
    ir_free(p->steps);
    kiln_graph_free(p->g);
    free(p->simplify_log);
    ir_free(p);
}

/* The iteration space of cluster c: its shape, or for a reduction the kept dims then the
 * reduced dims (at least one of each). */
static void
kb_space(kbuild *k, const cluster *cl)
{
    if (!cl->reduce) {
        k->R = cl->shape.rank > 0 ? cl->shape.rank : 1;
        for (int d = 0; d < k->R; d++)
            k->dims[d] = cl->shape.rank > 0 ? cl->shape.dims[d] : 1;
        k->vdim = k->R - 1;
        return;
    }
    const ir_shape *s = &cl->shape;
    int nk = 0, nr = 0;
    for (int i = 0; i < s->rank; i++)
        if (!(cl->axes & (1u << i)))
            nk++;
    k->red = true;
    k->nk = nk > 0 ? nk : 1;
    int r0 = k->nk;
    for (int i = 0; i < IR_MAX_RANK; i++)
        k->dims[i] = 1;
    for (int i = 0, kk = 0; i < s->rank; i++) {
        if (cl->axes & (1u << i)) {
            k->pos[i] = r0 + nr++;
        } else {
            k->pos[i] = kk++;
        }
        k->dims[k->pos[i]] = s->dims[i];
    }
    k->R = r0 + (nr > 0 ? nr : 1);
    /* lanes along the last kept dim when the innermost axis is kept (a column sum) */
    bool cols = s->rank > 0 && !(cl->axes & (1u << (s->rank - 1))) && s->dims[s->rank - 1] > 1;
    k->vdim = cols ? k->nk - 1 : k->R - 1;
}

static kiln_status
build_kernel_step(planner *p, int32_t c, jit_step *s, unsigned flags, int *nkernels, int *nhits)
{
    cluster *cl = &p->cl[c];
    kbuild k = {0};
    kiln_status st = KILN_OK;
    k.p = p;
    k.c = c;
    kb_space(&k, cl);
    k.memo = ir_calloc(2 * (size_t)p->g->nnodes, sizeof(int32_t));
    ivec stores = {0};
    if (!k.memo) {
        st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
        goto done;
    }
    if (cl->root_copy >= 0) {
        int32_t r = kb_value(&k, cl->root_copy, &p->g->nodes[cl->root_copy].type.shape, 0);
        if (r < 0 || !ivec_push(&stores, cl->root_copy)) {
            st = kiln_errcode() ? kiln_errcode() : KILN_ERR_NOMEM;
            goto done;
        }
    } else {
        for (int32_t i = 0; i < cl->nmembers; i++) {
            int32_t n = cl->members[i];
            int ctx = k.red && p->ni[n].role == R_ROW ? 1 : 0;
            if (kb_value(&k, n, &p->g->nodes[n].type.shape, ctx) < 0) {
                st = kiln_errcode();
                goto done;
            }
            if (p->ni[n].stored && !ivec_push(&stores, n)) {
                st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
                goto done;
            }
        }
    }
    s->kind = JIT_STEP_KERNEL;
    s->desc.kind = k.red ? JIT_KERNEL_REDUCTION : JIT_KERNEL_ELEMENTWISE;
    s->desc.rank = k.R;
    s->desc.nred = k.red ? k.R - k.nk : 0;
    s->desc.lanes_kept = k.red && k.vdim < k.nk;
    s->desc.ninst = k.ninst;
    s->desc.nloads = k.load_node.n;
    s->desc.nstores = stores.n;
    s->desc.inst = k.inst;
    k.inst = NULL;
    s->desc.stores = ir_malloc(sizeof(int32_t) * (size_t)(stores.n ? stores.n : 1));
    s->desc.store_cls = k.red ? ir_calloc((size_t)(stores.n ? stores.n : 1), 1) : NULL;
    s->nslots = k.load_node.n + stores.n;
    s->slot = ir_calloc((size_t)s->nslots, sizeof(jit_loc));
    s->slot_off = ir_calloc((size_t)s->nslots, sizeof(int64_t));
    /* reductions: strides for every slot; elementwise: for the loads */
    size_t nst = (size_t)(k.red ? s->nslots : k.load_node.n);
    s->strides = ir_calloc((nst ? nst : 1) * (size_t)k.R, sizeof(int64_t));
    if (!s->desc.stores || !s->slot || !s->slot_off || !s->strides || (k.red && !s->desc.store_cls)) {
        st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
        goto done;
    }
    s->total = 1;
    for (int d = 0; d < k.R; d++) {
        s->dims[d] = k.dims[d];
        s->total *= k.dims[d];
    }
    s->bytes_per_elem = 0;
    if (cl->indexing && k.load_node.n) {
        size_t ne = (size_t)k.load_node.n * (size_t)k.R * 2;
        s->ext = ir_malloc(sizeof(int64_t) * ne);
        if (!s->ext) {
            st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
            goto done;
        }
        memcpy(s->ext, k.load_ext, sizeof(int64_t) * ne);
    }
    for (int32_t j = 0; j < k.load_node.n; j++) {
        int32_t b = k.load_node.v[j];
        s->slot[j] = p->ni[b].loc;
        s->slot_off[j] = k.load_off[j];
        memcpy(s->strides + (size_t)j * (size_t)k.R, k.load_strides + (size_t)j * (size_t)k.R,
               sizeof(int64_t) * (size_t)k.R);
    }
    for (int32_t i = 0; i < k.ninst && s->desc.inst; i++) {
        const jit_kinst *in = &s->desc.inst[i];
        if (in->kind == JIT_LOAD && (in->cls & 0xf) != JIT_BCAST)
            s->bytes_per_elem += kiln_dtype_size((kiln_dtype)in->dtype);
    }
    for (int32_t i = 0; i < stores.n; i++) {
        int32_t n = stores.v[i];
        const ir_shape *ns = &p->g->nodes[n].type.shape;
        s->desc.stores[i] = k.memo[2 * n + (k.red && p->ni[n].role == R_ROW ? 1 : 0)] - 1;
        s->slot[k.load_node.n + i] = p->ni[n].loc;
        s->bytes_per_elem += kiln_dtype_size(p->g->nodes[n].type.dtype);
        if (k.red) {
            /* the stored buffer is row-major over the node's own shape */
            int64_t own[IR_MAX_RANK], *sst = s->strides + (size_t)(k.load_node.n + i) * (size_t)k.R;
            ir_shape_strides(ns, own);
            if (p->ni[n].role == R_ROW) {
                map_strides(&k, ns, own, ns, 1, sst);
                s->desc.store_cls[i] = JIT_ST_ROW;
            } else {
                map_strides(&k, ns, own, ns, 0, sst);
                s->desc.store_cls[i] = sst[k.vdim] == 1 ? JIT_ST_SPACE : JIT_ST_SPACE_SCATTER;
            }
        }
    }
    if (k.red) {
        s->rows = 1;
        for (int d = 0; d < k.nk; d++)
            s->rows *= k.dims[d];
        s->rlen = 1;
        for (int d = k.nk; d < k.R; d++)
            s->rlen *= k.dims[d];
        s->rinner = k.dims[k.R - 1];
        s->partial_bytes = jit_reduce_partial_bytes(&s->desc);
    }
    bool hit;
    st = jit_kernel_get(&s->desc, flags, &s->kernel, &hit);
    if (!st) {
        (*nkernels)++;
        *nhits += hit;
    }
done:
    ir_free(k.inst);
    ir_free(k.memo);
    ir_free(k.touched.v);
    ir_free(k.load_node.v);
    ir_free(k.load_off);
    ir_free(k.load_strides);
    ir_free(k.load_ext);
    ir_free(stores.v);
    return st;
}

static kiln_status
build_ref_step(planner *p, int32_t r, jit_step *s)
{
    const ir_node *nd = &p->g->nodes[r];
    s->kind = JIT_STEP_REF;
    s->sub = ir_graph_new(ir_ops[nd->op].name);
    s->nin = nd->nin;
    s->in = ir_calloc((size_t)(nd->nin ? nd->nin : 1), sizeof(jit_loc));
    int32_t *ids = ir_calloc((size_t)(nd->nin ? nd->nin : 1), sizeof(int32_t));
    kiln_status st = KILN_OK;
    if (!s->sub || !s->in || !ids) {
        st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
        goto done;
    }
    for (int k = 0; k < nd->nin; k++) {
        char name[32];
        int32_t x = nd->in[k];
        snprintf(name, sizeof name, "x%d", k);
        if ((ids[k] = ir_graph_add_input(s->sub, name, &p->g->nodes[x].type)) < 0) {
            st = kiln_errcode();
            goto done;
        }
        /* operands of reference steps are materialised and contiguous */
        int32_t b = p->ni[x].cls == C_VIEW && !p->ni[x].stored ? p->ni[x].v.base : x;
        s->in[k] = p->ni[b].loc;
    }
    int32_t id = ir_graph_add_node(s->sub, "kiln_jit", nd->op, nd->nin, ids, &nd->at, &nd->type, NULL);
    if (id < 0 || (st = ir_graph_add_output(s->sub, "out", id))) {
        st = kiln_errcode();
        goto done;
    }
    s->out = p->ni[r].loc;
done:
    ir_free(ids);
    return st;
}

kiln_status
jit_plan_build(const kiln_graph *g0, kiln_mode mode, unsigned flags, jit_plan **out)
{
    kiln_status st;
    planner pl = {0};
    planner *p = &pl;
    jit_plan *plan = ir_calloc(1, sizeof *plan);
    int32_t *step_of_cluster = NULL, *step_of_ref = NULL, *order = NULL, *indeg = NULL;
    int32_t *key = NULL;
    ivec *deps = NULL, reads = {0};
    tbuf *tb = NULL;
    int32_t nsteps = 0;
    *out = NULL;
    if (!plan)
        return ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
    if ((st = jit_simplify(g0, &plan->g, &plan->simplify_log)))
        goto fail;
    const kiln_graph *g = plan->g;
    p->g = g;
    p->mode = mode;
    p->ni = ir_calloc((size_t)g->nnodes, sizeof *p->ni);
    if (!p->ni) {
        st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
        goto fail;
    }
    if ((st = classify(p)))
        goto fail;

    /* steps: clusters, then reference nodes */
    step_of_cluster = ir_calloc((size_t)p->ncl + 1, sizeof(int32_t));
    step_of_ref = ir_calloc((size_t)g->nnodes + 1, sizeof(int32_t));
    if (!step_of_cluster || !step_of_ref) {
        st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
        goto fail;
    }
    int32_t nref = 0;
    for (int32_t n = 0; n < g->nnodes; n++) {
        step_of_ref[n] = -1;
        if (p->ni[n].cls == C_BUF && g->nodes[n].op != IR_OP_INPUT && g->nodes[n].op != IR_OP_CONSTANT)
            step_of_ref[n] = p->ncl + nref++;
    }
    nsteps = p->ncl + nref;
    order = ir_calloc((size_t)nsteps + 1, sizeof(int32_t));
    indeg = ir_calloc((size_t)nsteps + 1, sizeof(int32_t));
    key = ir_calloc((size_t)nsteps + 1, sizeof(int32_t));
    deps = ir_calloc((size_t)nsteps + 1, sizeof(ivec)); /* deps[s] = steps that wait for s */
    int32_t *refnode = ir_calloc((size_t)nsteps + 1, sizeof(int32_t));
    if (!step_of_cluster || !order || !indeg || !key || !deps || !refnode) {
        ir_free(refnode);
        st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
        goto fail;
    }
    for (int32_t c = 0; c < p->ncl; c++) {
        step_of_cluster[c] = c;
        key[c] = p->cl[c].root_copy >= 0 ? p->cl[c].root_copy : p->cl[c].members[0];
        refnode[c] = -1;
    }
    for (int32_t n = 0; n < g->nnodes; n++)
        if (step_of_ref[n] >= 0) {
            key[step_of_ref[n]] = n;
            refnode[step_of_ref[n]] = n;
        }
    for (int32_t s = 0; s < nsteps; s++) {
        bool ok = refnode[s] >= 0 ? step_reads(p, -1, refnode[s], &reads) : step_reads(p, s, -1, &reads);
        if (!ok) {
            ir_free(refnode);
            st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
            goto fail;
        }
        for (int32_t i = 0; i < reads.n; i++) {
            int32_t src = producer(p, reads.v[i], step_of_cluster, step_of_ref);
            if (src >= 0 && src != s) {
                if (!ivec_push(&deps[src], s)) {
                    ir_free(refnode);
                    st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
                    goto fail;
                }
                indeg[s]++;
            }
        }
    }
    /* Kahn's algorithm, smallest first node first, so the order follows the graph. */
    for (int32_t i = 0; i < nsteps; i++) {
        int32_t best = -1;
        for (int32_t s = 0; s < nsteps; s++)
            if (indeg[s] == 0 && (best < 0 || key[s] < key[best]))
                best = s;
        if (best < 0) {
            ir_free(refnode);
            st = ir_error(KILN_ERR_INTERNAL, "kiln_jit: internal error: fusion plan has a cycle");
            goto fail;
        }
        indeg[best] = -1;
        order[i] = best;
        for (int32_t k = 0; k < deps[best].n; k++)
            indeg[deps[best].v[k]]--;
    }

    /* buffers: outputs write straight into the caller's memory */
    int32_t *pos = indeg; /* reuse: step -> position */
    for (int32_t i = 0; i < nsteps; i++)
        pos[order[i]] = i;
    for (int32_t n = 0; n < g->nnodes; n++) {
        nodeinfo *ni = &p->ni[n];
        const ir_node *nd = &g->nodes[n];
        if (nd->op == IR_OP_INPUT) {
            ni->loc = (jit_loc){JIT_LOC_INPUT, nd->at.index, 0, NULL};
            ni->has_loc = true;
        } else if (nd->op == IR_OP_CONSTANT) {
            ni->loc = (jit_loc){JIT_LOC_CONST, 0, 0, nd->at.data};
            ni->has_loc = true;
        } else if (step_of_ref[n] >= 0 || ni->stored) {
            ni->step = pos[step_of_ref[n] >= 0 ? step_of_ref[n] : ni->cluster];
            ni->last_use = ni->step;
        }
    }
    for (int32_t i = 0; i < nsteps; i++) {
        int32_t s = order[i];
        if (!(refnode[s] >= 0 ? step_reads(p, -1, refnode[s], &reads) : step_reads(p, s, -1, &reads))) {
            ir_free(refnode);
            st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
            goto fail;
        }
        for (int32_t k = 0; k < reads.n; k++)
            if (p->ni[reads.v[k]].last_use < i)
                p->ni[reads.v[k]].last_use = i;
    }
    int32_t ntb = 0;
    tb = ir_calloc((size_t)g->nnodes + 1, sizeof *tb);
    if (!tb) {
        ir_free(refnode);
        st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
        goto fail;
    }
    for (int32_t i = 0; i < g->noutputs; i++) {
        int32_t n = g->outputs[i].node;
        if (!p->ni[n].has_loc && p->ni[n].step >= 0) {
            p->ni[n].loc = (jit_loc){JIT_LOC_OUTPUT, i, 0, NULL};
            p->ni[n].has_loc = true;
        }
    }
    for (int32_t n = 0; n < g->nnodes; n++)
        if (!p->ni[n].has_loc && p->ni[n].step >= 0)
            tb[ntb++] = (tbuf){n, p->ni[n].step, p->ni[n].last_use,
                               (ir_type_bytes(&g->nodes[n].type) + 63) & ~(size_t)63, 0};
    plan->temp_bytes = pack(tb, ntb);
    for (int32_t i = 0; i < ntb; i++) {
        p->ni[tb[i].node].loc = (jit_loc){JIT_LOC_TEMP, 0, tb[i].offset, NULL};
        p->ni[tb[i].node].has_loc = true;
    }

    /* the steps themselves, then copies for outputs that live elsewhere */
    int32_t ncopies = 0;
    for (int32_t i = 0; i < g->noutputs; i++) {
        const nodeinfo *ni = &p->ni[g->outputs[i].node];
        if (!(ni->loc.kind == JIT_LOC_OUTPUT && ni->loc.index == i))
            ncopies++;
    }
    plan->steps = ir_calloc((size_t)(nsteps + ncopies) + 1, sizeof(jit_step));
    if (!plan->steps) {
        ir_free(refnode);
        st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
        goto fail;
    }
    for (int32_t i = 0; i < nsteps; i++) {
        int32_t s = order[i];
        jit_step *js = &plan->steps[plan->nsteps++];
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (refnode[s] >= 0) {
            st = build_ref_step(p, refnode[s], js);
            if (f)
                fprintf(f, "reference: %%%d %s (the JIT does not compile %s yet)", (int)refnode[s],
                        ir_ops[g->nodes[refnode[s]].op].name, ir_ops[g->nodes[refnode[s]].op].name);
        } else {
            st = build_kernel_step(p, s, js, flags, &plan->nkernels, &plan->nhits);
            if (f)
                explain_cluster(p, s, f);
        }
        if (f)
            fclose(f);
        js->explain = text;
        if (st) {
            ir_free(refnode);
            goto fail;
        }
    }
    ir_free(refnode);
    for (int32_t i = 0; i < g->noutputs; i++) {
        int32_t n = g->outputs[i].node;
        const nodeinfo *ni = &p->ni[n];
        if (ni->loc.kind == JIT_LOC_OUTPUT && ni->loc.index == i)
            continue;
        jit_step *js = &plan->steps[plan->nsteps++];
        js->kind = JIT_STEP_COPY;
        js->from = ni->loc;
        js->to = (jit_loc){JIT_LOC_OUTPUT, i, 0, NULL};
        js->bytes = ir_type_bytes(&g->nodes[n].type);
        char buf[160];
        snprintf(buf, sizeof buf, "copy: output '%s' is %%%d, which lives elsewhere",
                 g->outputs[i].name, (int)n);
        js->explain = strdup(buf);
    }
    st = KILN_OK;
    *out = plan;
    plan = NULL;
fail:
    jit_plan_free(plan);
    for (int32_t c = 0; c < p->ncl; c++)
        ir_free(p->cl[c].members);
    ir_free(p->cl);
    ir_free(p->ni);
    ir_free(step_of_cluster);
    ir_free(step_of_ref);
    ir_free(order);
    ir_free(indeg);
    ir_free(key);
    if (deps)
        for (int32_t s = 0; s < nsteps; s++)
            ir_free(deps[s].v);
    ir_free(deps);
    ir_free(reads.v);
    ir_free(tb);
    return st;
}

/* ---- running ------------------------------------------------------------------------------- */

/* Work below this many bytes stays on the caller's thread: waking workers costs more. */
#define SMALL_BYTES ((size_t)1 << 18)
#define MAX_SLOTS_ON_STACK 64

typedef struct krun {
    jit_kernel_fn fn;
    void *const *ptrs;
    const int64_t *strides, *dims;
    int64_t total, chunk;
    const int64_t *ext; /* elementwise: ranged and indexed loads */
    /* reductions */
    jit_raux aux;
    int64_t nsub, per;      /* pieces: sub-rows, or elements of the last dim, per piece */
    char *partial;
    size_t pbytes;
} krun;

static void
run_chunk(void *ctx, int64_t i)
{
    const krun *r = ctx;
    int64_t begin = i * r->chunk;
    int64_t end = begin + r->chunk < r->total ? begin + r->chunk : r->total;
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

static kiln_status
run_reduction(const jit_step *s, void *const *ptrs)
{
    krun r = {0};
    r.fn = jit_kernel_entry(s->kernel);
    r.ptrs = ptrs;
    r.strides = s->strides;
    r.dims = s->dims;
    r.total = s->rows;
    size_t bytes = (size_t)s->rows * (size_t)s->rlen * (s->bytes_per_elem ? s->bytes_per_elem : 1);
    int threads = bytes < SMALL_BYTES ? 1 : jit_pool_threads();
    if (s->partial_bytes && s->rlen >= SPLIT_MIN) {
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
        r.pbytes = s->partial_bytes;
        r.aux.npieces = np;
        r.aux.in_end = s->desc.rank - 1;
        size_t total = (size_t)s->rows * (size_t)np * r.pbytes;
        r.partial = aligned_alloc(64, (total + 63) & ~(size_t)63);
        if (!r.partial)
            return ir_error(KILN_ERR_NOMEM, "kiln_program_run: out of memory");
        jit_pool_run(run_piece, &r, s->rows * np);
        r.aux = (jit_raux){2, 0, 0, 0, 0, np, r.partial};
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
        if (s->desc.lanes_kept)
            chunk = (chunk + 63) & ~(int64_t)63;
        r.chunk = chunk > 0 ? chunk : 1;
    }
    jit_pool_run(run_chunk, &r, (r.total + r.chunk - 1) / r.chunk);
    return KILN_OK;
}

static void *
resolve(const jit_loc *l, const void *const *inputs, void *const *outputs, void *temp)
{
    switch (l->kind) {
    case JIT_LOC_INPUT: return (void *)inputs[l->index];
    case JIT_LOC_OUTPUT: return outputs[l->index];
    case JIT_LOC_CONST: return (void *)l->cdata;
    case JIT_LOC_TEMP: return (char *)temp + l->offset;
    }
    return NULL;
}

kiln_status
jit_plan_run(const jit_plan *p, const void *const *inputs, void *const *outputs, void *temp)
{
    for (int i = 0; i < p->nsteps; i++) {
        const jit_step *s = &p->steps[i];
        if (s->kind == JIT_STEP_COPY) {
            if (s->bytes)
                memcpy(resolve(&s->to, inputs, outputs, temp),
                       resolve(&s->from, inputs, outputs, temp), s->bytes);
            continue;
        }
        if (s->kind == JIT_STEP_REF) {
            const void *ins_small[8];
            const void **ins = s->nin <= 8 ? ins_small : ir_malloc(sizeof(void *) * (size_t)s->nin);
            if (!ins)
                return ir_error(KILN_ERR_NOMEM, "kiln_program_run: out of memory");
            for (int k = 0; k < s->nin; k++)
                ins[k] = resolve(&s->in[k], inputs, outputs, temp);
            void *out[1] = {resolve(&s->out, inputs, outputs, temp)};
            kiln_status st = ir_interpret(s->sub, ins, out);
            if (ins != ins_small)
                ir_free(ins);
            if (st)
                return st;
            continue;
        }
        if (s->total == 0 && s->desc.kind != JIT_KERNEL_REDUCTION)
            continue;
        void *ptr_small[MAX_SLOTS_ON_STACK];
        void **ptrs = s->nslots <= MAX_SLOTS_ON_STACK ? ptr_small
                                                       : ir_malloc(sizeof(void *) * (size_t)s->nslots);
        if (!ptrs)
            return ir_error(KILN_ERR_NOMEM, "kiln_program_run: out of memory");
        for (int k = 0; k < s->nslots; k++)
            ptrs[k] = resolve(&s->slot[k], inputs, outputs, temp);
        /* load offsets are in elements of the load's dtype */
        for (int32_t j = 0; j < s->desc.ninst; j++) {
            const jit_kinst *in = &s->desc.inst[j];
            if (in->kind == JIT_LOAD && s->slot_off[in->slot])
                ptrs[in->slot] = (char *)ptrs[in->slot] +
                                 s->slot_off[in->slot] * (int64_t)kiln_dtype_size((kiln_dtype)in->dtype);
        }
        if (s->desc.kind == JIT_KERNEL_REDUCTION) {
            kiln_status st = s->rows > 0 ? run_reduction(s, ptrs) : KILN_OK;
            if (ptrs != ptr_small)
                ir_free(ptrs);
            if (st)
                return st;
            continue;
        }
        krun r = {0};
        r.fn = jit_kernel_entry(s->kernel);
        r.ptrs = ptrs;
        r.strides = s->strides;
        r.dims = s->dims;
        r.total = r.chunk = s->total;
        r.ext = s->ext;
        size_t bytes = (size_t)s->total * (s->bytes_per_elem ? s->bytes_per_elem : 1);
        int threads = bytes < SMALL_BYTES ? 1 : jit_pool_threads();
        if (threads > 1) {
            /* Several chunks per thread to even out load; chunk edges on 64-element
             * boundaries so vector bodies stay aligned with rows. */
            int64_t chunk = (s->total + 4 * threads - 1) / (4 * threads);
            chunk = (chunk + 63) & ~(int64_t)63;
            if (chunk < 4096)
                chunk = 4096;
            r.chunk = chunk;
        }
        jit_pool_run(run_chunk, &r, (r.total + r.chunk - 1) / r.chunk);
        if (ptrs != ptr_small)
            ir_free(ptrs);
    }
    return KILN_OK;
}

static const char *
loc_str(const jit_loc *l, char *buf, size_t n)
{
    switch (l->kind) {
    case JIT_LOC_INPUT: snprintf(buf, n, "input %d", (int)l->index); break;
    case JIT_LOC_OUTPUT: snprintf(buf, n, "output %d", (int)l->index); break;
    case JIT_LOC_CONST: snprintf(buf, n, "constant"); break;
    case JIT_LOC_TEMP: snprintf(buf, n, "temp+%zu", l->offset); break;
    }
    return buf;
}

void
jit_plan_dump(const jit_plan *p, FILE *f)
{
    char b1[64];
    fprintf(f, "plan: %d steps, %d kernels (%d from the cache), %zu bytes of temporaries\n",
            p->nsteps, p->nkernels, p->nhits, p->temp_bytes);
    if (p->simplify_log)
        fputs(p->simplify_log, f);
    for (int i = 0; i < p->nsteps; i++) {
        const jit_step *s = &p->steps[i];
        fprintf(f, "step %d: %s\n", i, s->explain ? s->explain : "");
        if (s->kind == JIT_STEP_KERNEL) {
            fprintf(f, "      %lld elements, rank %d, %d loads, %d stores, %d instructions\n",
                    (long long)s->total, (int)s->desc.rank, (int)s->desc.nloads,
                    (int)s->desc.nstores, (int)s->desc.ninst);
            for (int k = 0; k < s->nslots; k++)
                fprintf(f, "      %s %d: %s\n", k < s->desc.nloads ? "load " : "store",
                        k < s->desc.nloads ? k : k - s->desc.nloads, loc_str(&s->slot[k], b1, sizeof b1));
        }
    }
}
