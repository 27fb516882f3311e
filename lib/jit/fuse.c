/* fuse.c — the first pass of the planner: from a simplified graph to clusters.
 *
 *   classify every node:
 *        BUF    materialised: inputs, constants, reference steps, stored kernel values
 *        FULL   a splat constant, folded into the kernels that read it
 *        ELEM   an op the JIT computes in a kernel (elementwise, reduction, pad, concat,
 *               gather, arange)
 *        VIEW   expand / permute / slice / reshape of a buffer: index arithmetic
 *               (base, offset, strides) folded into the loads that read it
 *   clusters: an op joins the cluster of an operand when it fits that kernel's iteration
 *       space (fits()) and no cycle between steps could follow; in eager mode every op is
 *       alone.  A reduction turns an elementwise cluster of the shape it reduces into a
 *       reduction cluster; ops of its result over the same rows join it.
 *   a value is stored only when something outside its cluster reads it or it is an
 *   output; views and fulls are materialised only for outputs, reference steps and
 *   indexed loads.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner.h"

/* Why a value is stored or a boundary is where it is (planner.why): written only for a
 * plan that is explained (JIT_F_EXPLAIN, for dumps).  Formatting them cost a tenth of a
 * plan built for new sizes (a decoder step: 90 of 690 thousand instructions).  why is a
 * buffer of JIT_WHY_LEN, or NULL: nothing to write. */
static void say(const planner *p, char *why, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void
say(const planner *p, char *why, const char *fmt, ...)
{
    if (!(p->flags & JIT_F_EXPLAIN) || !why)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, JIT_WHY_LEN, fmt, ap);
    va_end(ap);
}

/* Node x's why, or NULL in a plan that is not explained. */
static char *
why_of(const planner *p, int32_t x)
{
    return p->why ? p->why[x] : NULL;
}

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
        return true; /* a contraction kernel (lower_contract.c) */
    }
    return false;
}

bool
jit_view_is_contiguous(const view *v, const ir_shape *s)
{
    int64_t st[IR_MAX_RANK];
    ir_shape_strides(s, st);
    for (int i = 0; i < s->rank; i++)
        if (s->dims[i] != 1 && st[i] != v->strides[i])
            return false;
    return true;
}

/* Strides for reading shape ys through the strides xst of shape xs (same element count)
 * without a copy, when every group of axes that reshape merges or splits is contiguous
 * within itself (NumPy's rule for views of reshapes).  False when a copy is needed. */
static bool
reshape_strides(const ir_shape *xs, const int64_t *xst, const ir_shape *ys, int64_t *yst)
{
    int64_t od[IR_MAX_RANK], os[IR_MAX_RANK];
    int on = 0;
    int64_t count = 1;
    for (int i = 0; i < xs->rank; i++)
        count *= xs->dims[i];
    for (int i = 0; i < ys->rank; i++)
        yst[i] = 0;
    if (count == 0)
        return true; /* nothing is read */
    for (int i = 0; i < xs->rank; i++)
        if (xs->dims[i] != 1) {
            od[on] = xs->dims[i];
            os[on++] = xst[i];
        }
    int oi = 0, oj = 1, ni = 0, nj = 1;
    while (ni < ys->rank && oi < on) {
        int64_t np = ys->dims[ni], op = od[oi];
        while (np != op) {
            if (np < op) {
                if (nj >= ys->rank)
                    return false;
                np *= ys->dims[nj++];
            } else {
                if (oj >= on)
                    return false;
                op *= od[oj++];
            }
        }
        for (int ok = oi; ok < oj - 1; ok++)
            if (os[ok] != od[ok + 1] * os[ok + 1])
                return false;
        yst[nj - 1] = os[oj - 1];
        for (int nk = nj - 1; nk > ni; nk--)
            yst[nk - 1] = yst[nk] * ys->dims[nk];
        ni = nj++;
        oi = oj++;
    }
    return true; /* the remaining axes have size 1: any stride */
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
        /* contiguous: the row-major strides; else a view when the axes allow one */
        if (jit_view_is_contiguous(src, xs)) {
            ir_shape_strides(ys, v->strides);
            return true;
        }
        return reshape_strides(xs, src->strides, ys, v->strides);
    case IR_OP_EXPAND:
        for (int i = 0; i < ys->rank; i++) {
            int j = xs->rank - ys->rank + i;
            v->strides[i] = j >= 0 && xs->dims[j] == ys->dims[i] ? src->strides[j] : 0;
        }
        return true;
    case IR_OP_PERMUTE:
        for (int i = 0; i < ys->rank; i++)
            v->strides[i] = src->strides[nd->at->perm[i]];
        return true;
    case IR_OP_SLICE:
        for (int i = 0; i < ys->rank; i++) {
            int64_t first, count;
            ir_slice_axis(xs->dims[i], nd->at->begin[i], nd->at->stop[i], nd->at->step[i], &first,
                          &count);
            if (count > 0)
                v->offset += first * src->strides[i];
            /* With one element or none the stride is never used, and a huge step would
             * overflow; with two or more |step| < the axis size, so the product is small. */
            v->strides[i] = count > 1 ? src->strides[i] * nd->at->step[i] : 0;
        }
        return true;
    default:
        return false;
    }
}

/* Eager mode: a reshape of a contiguous value moves nothing, so it stays a view. */
static bool
reshape_is_free(const planner *p, int32_t n)
{
    const ir_node *nd = &p->g->nodes[n];
    return nd->op == IR_OP_RESHAPE && jit_view_is_contiguous(&p->ni[n].v, &nd->type.shape);
}

/* View node n reads the whole of its base, in its order: an output it is may alias the
 * base's buffer. */
static bool
view_is_whole(const planner *p, int32_t n)
{
    const view *v = &p->ni[n].v;
    const ir_shape *s = &p->g->nodes[n].type.shape;
    return v->offset == 0 && jit_view_is_contiguous(v, s) &&
           ir_shape_count(&p->g->nodes[v->base].type.shape) == ir_shape_count(s);
}

/* Output view n is one contiguous range of a value that an elementwise or contraction
 * kernel computes, over that kernel's whole iteration space (not whole: that is an alias),
 * so the kernel can store the range straight into the output (a JIT_ST_RANGE store):
 * a slice of rows, or of columns where the rows above are 1, with permutes and reshapes that
 * move only dims of size 1 (a decoder's new K/V rows, slices of the qkv matmul's row).
 * Other output views stay copies (describe.c's contiguous_copy, or a copy kernel): of an
 * input or a constant (no kernel computes them), of a reference step's result, of a value a
 * reduction kernel computes (its stores go through its passes with strides per slot; a
 * range there is not done), of a view that is not one range (a column slice of several
 * rows, a transpose), and every view in eager mode (one kernel per op). */
static bool
range_of_value(const planner *p, int32_t n)
{
    const nodeinfo *ni = &p->ni[n];
    if (p->mode == KILN_MODE_EAGER || ni->cls != C_VIEW || (ni->sizes & SZ_VIEW_WHOLE))
        return false;
    int32_t b = ni->v.base;
    const nodeinfo *bi = &p->ni[b];
    if (bi->cls != C_ELEM || bi->cluster < 0)
        return false;
    const cluster *cl = &p->cl[bi->cluster];
    const ir_shape *ns = &p->g->nodes[n].type.shape;
    return !cl->reduce && cl->root_copy < 0 &&
           ir_shape_count(&p->g->nodes[b].type.shape) == ir_shape_count(&cl->shape) &&
           jit_view_is_contiguous(&ni->v, ns);
}

/* Values stored only for output views now stored as ranges (JIT_ST_RANGE) by their own
 * kernel need not be stored whole: a value is needed whole when it is an output itself, or
 * something reads it other than through views that end in ranged outputs and nothing else
 * (a reader of a ranged output reads it through its view of the value), or an op of its own
 * kernel (those read it in registers). */
static kiln_status
drop_unread(planner *p)
{
    const kiln_graph *g = p->g;
    bool *read = ir_calloc((size_t)g->nnodes + 1, 2);
    if (!read)
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory planning");
    bool *ranged = read + g->nnodes; /* some ranged output is a view of it */
    for (int32_t i = 0; i < g->noutputs; i++) {
        int32_t n = g->outputs[i].node;
        if (p->ni[n].ranged)
            ranged[p->ni[n].v.base] = true;
        else
            read[n] = true;
    }
    for (int32_t n = g->nnodes - 1; n >= 0; n--) {
        const ir_node *nd = &g->nodes[n];
        const nodeinfo *ni = &p->ni[n];
        bool through = ni->cls == C_VIEW && (!ni->stored || ni->ranged);
        for (int k = 0; k < nd->nin; k++) {
            const nodeinfo *u = &p->ni[nd->in[k]];
            bool same = ni->cls == C_ELEM && u->cls == C_ELEM && ni->cluster >= 0 &&
                        u->cluster == ni->cluster;
            read[nd->in[k]] |= through ? read[n] : !same;
        }
    }
    for (int32_t n = 0; n < g->nnodes; n++) {
        nodeinfo *ni = &p->ni[n];
        if (ranged[n] && !read[n] && ni->cls == C_ELEM && ni->stored)
            ni->stored = false;
    }
    ir_free(read);
    return KILN_OK;
}

/* A new cluster over the shape of node shape_node (kept: a plan made again at new sizes
 * takes the shape from there, jit_fuse_resize). */
static int32_t
new_cluster(planner *p, int32_t shape_node, int32_t root_copy)
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
    c->shape = p->g->nodes[shape_node].type.shape;
    c->shape_node = shape_node;
    c->root_copy = root_copy;
    c->copy_from = -1;
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
    int32_t c = new_cluster(p, n, -1);
    if (c < 0 || !cluster_add(p, c, n))
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory planning");
    p->cl[c].indexing = jit_op_is_indexing(p->g->nodes[n].op);
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
    int32_t c = new_cluster(p, n, n);
    if (c < 0)
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory planning");
    ni->stored = true;
    ni->cluster = c;
    int32_t dep = ni->lastdep > c ? ni->lastdep : c;
    ni->lastdep = dep;
    say(p, why_of(p, n), "%s", why);
    return KILN_OK;
}

/* Node n reads its operands from memory (a reference step; pad, concat, gather's indexed
 * loads): operands computed in a kernel are stored, splats materialised, and views too
 * unless n reads them through their strides.  n's dependencies include the copy kernels
 * made here. */
static kiln_status
operands_in_memory(planner *p, int32_t n, const char *what, bool views)
{
    const ir_node *nd = &p->g->nodes[n];
    for (int k = 0; k < nd->nin; k++) {
        int32_t x = nd->in[k];
        if (p->ni[x].folded) { /* computed while packing, from a buffer or a view */
            refresh_lastdep(p, n);
            continue;
        }
        char why[JIT_WHY_LEN] = "";
        say(p, why, "read by %s %%%d (%s)", ir_ops[nd->op].name, (int)n, what);
        kiln_status st = settle(p, x);
        if (st)
            return st;
        if (p->ni[x].cls == C_ELEM && !p->ni[x].stored) {
            p->ni[x].stored = true;
            say(p, why_of(p, x), "%s", why);
        } else if (p->ni[x].cls == C_FULL || (views && p->ni[x].cls == C_VIEW)) {
            if ((st = materialise(p, x, why)))
                return st;
        }
        refresh_lastdep(p, n);
    }
    return KILN_OK;
}

/* Does no node but n read x? */
static bool
read_by_only(const kiln_graph *g, int32_t x, int32_t n)
{
    for (int32_t u = x + 1; u < g->nnodes; u++)
        for (int k = 0; k < g->nodes[u].nin; k++)
            if (g->nodes[u].in[k] == x && u != n)
                return false;
    return true;
}

/* Operand x of matmul n folds into packing when it is a cast to a float dtype, or a float
 * product with a scalar full, of a buffer or a view (same shape), read by n alone and not
 * an output: packing converts or scales each element as the op would (fused mode only).
 * Returns the node packing reads instead, or -1. */
static int32_t
pack_fold(planner *p, int32_t n, int32_t x)
{
    const kiln_graph *g = p->g;
    const ir_node *xd = &g->nodes[x];
    if (p->mode == KILN_MODE_EAGER || !p->ni[x].pending || !ir_dtype_is_float(xd->type.dtype))
        return -1;
    int32_t src = -1;
    if (xd->op == IR_OP_CAST) {
        src = xd->in[0];
        if (g->nodes[src].type.dtype == KILN_DTYPE_BOOL)
            return -1;
    } else if (xd->op == IR_OP_MUL) {
        for (int k = 0; k < 2; k++)
            if (p->ni[xd->in[k]].cls == C_FULL && ir_shape_count(&g->nodes[xd->in[k]].type.shape) == 1 &&
                p->ni[xd->in[1 - k]].cls != C_FULL)
                src = xd->in[1 - k];
    }
    if (src < 0 || (p->ni[src].cls != C_BUF && p->ni[src].cls != C_VIEW) ||
        !ir_shape_equal(&g->nodes[src].type.shape, &xd->type.shape))
        return -1;
    for (int32_t i = 0; i < g->noutputs; i++)
        if (g->outputs[i].node == x)
            return -1;
    return read_by_only(g, x, n) ? src : -1;
}

/* ---- reduction clusters --------------------------------------------------------------- */

/* Ops computed as loads with their own index arithmetic, in elementwise kernels only:
 * their operands are read from buffers, never from the kernel computing them. */
bool
jit_op_is_indexing(ir_op op)
{
    return op == IR_OP_PAD || op == IR_OP_CONCAT || op == IR_OP_GATHER || op == IR_OP_ARANGE;
}

bool
jit_node_is_reduce(const ir_node *nd)
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

/* Few rows, each far longer than the caches: passes over a row would run on one thread
 * and read it from memory each time.  Such a kernel keeps to one pass (its reductions and
 * what they read), which the runner splits into pieces over all threads; the ops that
 * read its results over the space become kernels of their own.  Decided by the shape
 * alone, so results never depend on the thread count. */
static bool
long_rows(const cluster *c)
{
    return numel(&c->keep1) < 64 && numel(&c->shape) >= ((int64_t)1 << 20) * numel(&c->keep1);
}

/* Can a reduction kernel over shape s, reducing `axes`, compute node nd, an indexing op
 * over its whole space?  A concat along the last axis, which it reduces: its "rows" kernel
 * reads each part with a load ranged along the vector dim (masked to the part's range;
 * lower_reduce_pass.c), so the concat is read in place, never stored.  Decided by the axes
 * alone (no size), so a plan at new sizes keeps it. */
static bool
reduce_reads(const ir_shape *s, uint32_t axes, const ir_node *nd)
{
    int last = s->rank - 1;
    return nd->op == IR_OP_CONCAT && last >= 0 && nd->at->axis == last &&
           (axes & (1u << last)) && ir_shape_equal(&nd->type.shape, s);
}

/* Can every indexing op of cluster c be computed by a reduction of c over `axes`? */
static bool
reduce_reads_all(const planner *p, const cluster *cl, uint32_t axes)
{
    for (int32_t i = 0; i < cl->nmembers; i++) {
        const ir_node *m = &p->g->nodes[cl->members[i]];
        if (jit_op_is_indexing(m->op) && !reduce_reads(&cl->shape, axes, m))
            return false;
    }
    return true;
}

/* Can node n be computed in cluster c, and in which role?  Operands already in c must be
 * usable from there: a space-shaped op reads row values only through a keepdim shape. */
static bool
fits(planner *p, int32_t c, int32_t n, uint8_t *role)
{
    const cluster *cl = &p->cl[c];
    const ir_node *nd = &p->g->nodes[n];
    if (cl->root_copy >= 0 || nd->op == IR_OP_MATMUL)
        return false;
    if (cl->contract) {
        /* the epilogue: elementwise ops over the result's shape, on the accumulator tile */
        *role = R_SPACE;
        return cl->epilogue && !jit_node_is_reduce(nd) && !jit_op_is_indexing(nd->op) &&
               ir_shape_equal(&nd->type.shape, &cl->shape);
    }
    if (jit_node_is_reduce(nd)) {
        const ir_shape *xs = &p->g->nodes[nd->in[0]].type.shape;
        int32_t x = nd->in[0];
        bool x_in = p->ni[x].cls == C_ELEM && p->ni[x].cluster == c;
        if (!ir_shape_equal(xs, &cl->shape) || (x_in && cl->reduce && p->ni[x].role != R_SPACE))
            return false;
        if ((cl->reduce && cl->axes != nd->at->axes) ||
            (cl->indexing && !reduce_reads_all(p, cl, nd->at->axes)))
            return false;
        *role = R_ROW;
        return true;
    }
    if (!cl->reduce) {
        *role = R_SPACE;
        return ir_shape_equal(&nd->type.shape, &cl->shape);
    }
    if (jit_op_is_indexing(nd->op) && !reduce_reads(&cl->shape, cl->axes, nd))
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
            (!row_broadcasts(cl, &p->g->nodes[w].type.shape) || long_rows(cl)))
            return false;
    }
    *role = r;
    return true;
}

/* ---- bounds on one kernel ------------------------------------------------------------ */

/* Values of cluster c still needed once node n is computed: its members that a later node
 * reads, and its outputs. */
static int32_t
live_after(const planner *p, int32_t c, int32_t n)
{
    const cluster *cl = &p->cl[c];
    int32_t live = 0;
    for (int32_t i = 0; i < cl->nmembers; i++)
        live += p->ni[cl->members[i]].stored || p->ni[cl->members[i]].last_reader > n;
    return live;
}

enum { ROOM_OK, ROOM_OPS, ROOM_LIVE };

/* Has cluster c room for node n and the pending operands that would be computed with it,
 * within KERNEL_MAX_OPS and KERNEL_MAX_LIVE? */
static int
room(const planner *p, int32_t c, int32_t n)
{
    const ir_node *nd = &p->g->nodes[n];
    int32_t ops = 1, live = p->ni[n].last_reader > n;
    for (int k = 0; k < nd->nin; k++) {
        int32_t u = nd->in[k];
        bool again = false;
        for (int j = 0; j < k; j++)
            again |= nd->in[j] == u;
        if (p->ni[u].pending && !again) {
            ops++;
            live += p->ni[u].last_reader > n;
        }
    }
    if (p->cl[c].nmembers + ops > KERNEL_MAX_OPS)
        return ROOM_OPS;
    if (live_after(p, c, n) + live > KERNEL_MAX_LIVE)
        return ROOM_LIVE;
    return ROOM_OK;
}

/* Would node n in cluster c keep the steps acyclic: no operand of n outside c depends on c
 * (else c -> operand -> c)? */
static bool
joins_acyclic(const planner *p, int32_t c, int32_t n)
{
    const ir_node *nd = &p->g->nodes[n];
    for (int k = 0; k < nd->nin; k++) {
        int32_t w = nd->in[k];
        if (!(p->ni[w].cls == C_ELEM && p->ni[w].cluster == c) && p->ni[w].lastdep >= c)
            return false;
    }
    return true;
}

/* Cluster c gained a dependency on the newer cluster d (a node joined it with an operand
 * settled in d): whatever already depends on c now depends on d too, or a later join could
 * take a reader of c into d and close a cycle (c -> d -> c), which joins_acyclic judges by
 * lastdep alone.  Raises to d the lastdep of c's members and, to a fixpoint over nodes
 * 0..upto, of every reader of a raised node and every member of a cluster holding one (a
 * kernel runs whole). */
static void
raise_lastdep(planner *p, int32_t c, int32_t d, int32_t upto)
{
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t m = 0; m <= upto; m++) {
            nodeinfo *mi = &p->ni[m];
            if (mi->lastdep >= d)
                continue;
            bool raise = mi->cls == C_ELEM && mi->cluster == c;
            const ir_node *nd = &p->g->nodes[m];
            for (int k = 0; k < nd->nin && !raise; k++)
                raise = p->ni[nd->in[k]].lastdep >= d;
            if (!raise && mi->cls == C_ELEM && mi->cluster >= 0) {
                const cluster *cl = &p->cl[mi->cluster];
                for (int32_t i = 0; i < cl->nmembers && !raise; i++)
                    raise = p->ni[cl->members[i]].lastdep >= d;
            }
            if (raise) {
                mi->lastdep = d;
                changed = true;
            }
        }
    }
}

/* Why operand u of node n, computed in another kernel than n, is stored there. */
static void
boundary_why(planner *p, int32_t u, int32_t n, bool eager, char *buf, size_t len)
{
    IR_ASSERT(p->ni[u].cluster >= 0);
    int32_t c = p->ni[u].cluster;
    const cluster *cl = &p->cl[c];
    uint8_t role;
    const char *why = "fusing would create a cycle";
    char lim[96];
    int r = room(p, c, n);
    if (eager)
        why = "eager mode: one kernel per op";
    else if (!fits(p, c, n, &role))
        why = cl->reduce && long_rows(cl)
                  ? "rows too long for the caches: one pass per kernel, split over the threads"
                  : "it does not fit that kernel's iteration space";
    else if (r == ROOM_OPS) {
        snprintf(lim, sizeof lim, "kernel size limit: %d ops", KERNEL_MAX_OPS);
        why = lim;
    } else if (r == ROOM_LIVE) {
        snprintf(lim, sizeof lim, "kernel size limit: %d computed values still needed",
                 KERNEL_MAX_LIVE);
        why = lim;
    }
    snprintf(buf, len, "%s %%%d is in another kernel (%s)", ir_ops[p->g->nodes[n].op].name,
             (int)n, why);
}

/* Operands of node n (in cluster join) computed in other clusters are stored by them. */
static void
store_operands(planner *p, int32_t n, int32_t join, bool eager)
{
    const ir_node *nd = &p->g->nodes[n];
    for (int k = 0; k < nd->nin; k++) {
        nodeinfo *u = &p->ni[nd->in[k]];
        if (u->cls == C_ELEM && u->cluster >= 0 && u->cluster != join && !u->stored) {
            u->stored = true;
            if (p->why)
                boundary_why(p, nd->in[k], n, eager, p->why[nd->in[k]], JIT_WHY_LEN);
        }
    }
}

/* Is node n an op on a contraction's result that is better computed by the reduction
 * kernel reading it than in the contraction's epilogue?  It is when n would be that
 * epilogue's only op (a cheap arithmetic op of the matmul's result and scalar splats,
 * same dtype), the matmul's result is read by n alone, n is not an output, the first
 * node reading n reduces it, and every node reading n can compute it in that kernel.  The
 * bytes moved are the same either way (the contraction stores its result instead of n,
 * the reduction kernel loads that and computes n again in each pass that reads it: one
 * vector op), and the contraction kernel stays plain, the one kernel every plain matmul
 * of its ranks and dtypes shares: attention's (q @ k) * scale and p @ v compile one
 * contraction kernel, not two (docs/jit.md, "Contraction kernels").  Returns the matmul's
 * node, or -1. */
static int32_t
defer_epilogue(const planner *p, int32_t n)
{
    const kiln_graph *g = p->g;
    const ir_node *nd = &g->nodes[n];
    if (nd->op != IR_OP_MUL && nd->op != IR_OP_DIV && nd->op != IR_OP_ADD && nd->op != IR_OP_SUB &&
        nd->op != IR_OP_NEG)
        return -1;
    int32_t x = -1;
    for (int k = 0; k < nd->nin; k++) {
        int32_t u = nd->in[k];
        if (p->ni[u].cls == C_FULL && ir_shape_count(&g->nodes[u].type.shape) == 1)
            continue;
        if (x >= 0 || p->ni[u].cls != C_ELEM || p->ni[u].cluster < 0)
            return -1;
        x = u;
    }
    if (x < 0 || p->ni[x].last_reader != n || p->ni[n].last_reader == INT32_MAX)
        return -1;
    const cluster *c = &p->cl[p->ni[x].cluster];
    if (!c->contract || !c->epilogue || c->nmembers != 1 ||
        !ir_shape_equal(&nd->type.shape, &c->shape) || nd->type.dtype != g->nodes[x].type.dtype ||
        !read_by_only(g, x, n))
        return -1;
    /* the first reader reduces n, and every reader can take n into that kernel: a
     * reduction of n or an elementwise op of n's shape (a matmul or a view of n would have
     * the reduction kernel store n, a store more than the epilogue's) */
    bool first = true;
    for (int32_t u = n + 1; u < g->nnodes; u++) {
        const ir_node *ud = &g->nodes[u];
        for (int k = 0; k < ud->nin; k++) {
            if (ud->in[k] != n)
                continue;
            bool red = jit_node_is_reduce(ud) && k == 0;
            if (first && !red)
                return -1;
            first = false;
            if (!red && !(ir_op_is_elementwise(ud->op) &&
                          ir_shape_equal(&ud->type.shape, &nd->type.shape)))
                return -1;
        }
    }
    return first ? -1 : x;
}

/* ---- classification and clustering --------------------------------------------------- */

kiln_status
jit_fuse(planner *p)
{
    const kiln_graph *g = p->g;
    bool eager = p->mode == KILN_MODE_EAGER;
    for (int32_t n = 0; n < g->nnodes; n++)
        for (int k = 0; k < g->nodes[n].nin; k++)
            p->ni[g->nodes[n].in[k]].last_reader = n; /* nodes are in order: the last wins */
    for (int32_t i = 0; i < g->noutputs; i++)
        p->ni[g->outputs[i].node].last_reader = INT32_MAX;
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
                say(p, why_of(p, x), "read through %s %%%d (a view needs a buffer)",
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
                ni->sizes |= SZ_VIEW_OWN;
            }
            ni->cls = C_VIEW;
            if (!make_view(p, n, &src)) {
                ni->sizes |= SZ_VIEW_COPY;
                /* a reshape that no strides express: one copy kernel walks x's shape
                 * through x's view and writes n's buffer (row-major order is the same),
                 * rather than a copy of x and then a copy of the reshape */
                int32_t c = new_cluster(p, x, n);
                if (c < 0)
                    return ir_error(KILN_ERR_NOMEM, "kiln: out of memory planning");
                p->cl[c].copy_from = x;
                ni->stored = true;
                ni->cluster = c;
                ni->v.base = n;
                ni->v.offset = 0;
                ir_shape_strides(&nd->type.shape, ni->v.strides);
                if (c > ni->lastdep)
                    ni->lastdep = c;
                say(p, why_of(p, n), "a reshape of %s %%%d that no strides express",
                    ir_ops[g->nodes[x].op].name, (int)x);
            }
            if (p->ni[x].lastdep > ni->lastdep)
                ni->lastdep = p->ni[x].lastdep; /* the copy just made */
            if (reshape_is_free(p, n))
                ni->sizes |= SZ_RESHAPE_FREE;
            /* eager mode: one kernel per op, but a reshape of a contiguous value is not an
             * op that moves anything: it stays free */
            if (eager && !(ni->sizes & SZ_RESHAPE_FREE)) {
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
            kiln_status st = operands_in_memory(p, n, "reference step", true);
            if (st)
                return st;
            /* the reference step runs after everything it reads */
            continue;
        }
        if (nd->op == IR_OP_MATMUL) {
            /* a contraction kernel of its own: the operands are read from memory through
             * their views (packing folds slices, permutes, expands and reshapes, and a
             * cast or a scale of a buffer) */
            for (int k = 0; k < nd->nin; k++) {
                int32_t x = nd->in[k], src = pack_fold(p, n, x);
                if (src >= 0) {
                    p->ni[x].pending = false;
                    p->ni[x].folded = src + 1;
                }
            }
            kiln_status st = operands_in_memory(p, n, "a matmul operand", false);
            if (st)
                return st;
            ni->cls = C_ELEM;
            ni->role = R_SPACE;
            int32_t c = new_cluster(p, n, -1);
            if (c < 0 || !cluster_add(p, c, n))
                return ir_error(KILN_ERR_NOMEM, "kiln: out of memory planning");
            p->cl[c].contract = true;
            p->cl[c].epilogue = !eager && g->nodes[nd->in[0]].type.shape.rank >= 2 &&
                                g->nodes[nd->in[1]].type.shape.rank >= 2;
            if (c > ni->lastdep)
                ni->lastdep = c;
            continue;
        }
        if (jit_op_is_indexing(nd->op)) {
            /* read through loads of buffers (a view is fine) */
            kiln_status st = operands_in_memory(p, n, "an indexed load", false);
            if (st)
                return st;
            ni->cls = C_ELEM;
            if (!eager) {
                ni->pending = true; /* its first user places it */
                continue;
            }
            int32_t c = new_cluster(p, n, -1);
            if (c < 0 || !cluster_add(p, c, n))
                return ir_error(KILN_ERR_NOMEM, "kiln: out of memory planning");
            p->cl[c].indexing = true;
            if (c > ni->lastdep)
                ni->lastdep = c;
            continue;
        }
        /* ELEM or a reduction: join an operand's cluster when safe */
        ni->cls = C_ELEM;
        int32_t join = -1;
        uint8_t role = R_SPACE;
        bool red = jit_node_is_reduce(nd);
        bool leaf = !eager && !red;
        int nscan = red ? 1 : nd->nin;
        for (int k = 0; k < nd->nin; k++)
            if (p->ni[nd->in[k]].cls == C_ELEM)
                leaf = false;
        if (leaf) {
            ni->pending = true; /* reads only buffers and splats: its first user places it */
            continue;
        }
        int32_t mm = eager || red ? -1 : defer_epilogue(p, n);
        if (mm >= 0) {
            /* the reduction reading it places it (its first user, as for a leaf); the
             * contraction stores its plain result */
            p->ni[mm].stored = true;
            say(p, why_of(p, mm),
                "read by %s %%%d, computed in the reduction that reads it (the "
                "contraction kernel stays plain)",
                ir_ops[nd->op].name, (int)n);
            ni->pending = true;
            continue;
        }
        if (!eager) {
            for (int k = 0; k < nscan && join < 0; k++) {
                int32_t u = nd->in[k], c = p->ni[u].cluster;
                if (p->ni[u].cls == C_ELEM && c >= 0 && p->cl[c].root_copy < 0 &&
                    fits(p, c, n, &role) && room(p, c, n) == ROOM_OK && joins_acyclic(p, c, n))
                    join = c;
            }
        }
        if (join < 0) {
            join = new_cluster(p, red ? nd->in[0] : n, -1);
            if (join < 0)
                return ir_error(KILN_ERR_NOMEM, "kiln: out of memory planning");
            role = red ? R_ROW : R_SPACE;
        }
        if (red && !p->cl[join].reduce)
            make_reduce(&p->cl[join], nd->at->axes);
        ni->role = role;
        /* operands in other clusters are stored by them; why, judged before the pending
         * operands below join (room() counted them) */
        store_operands(p, n, join, eager);
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
                    return ir_error(KILN_ERR_NOMEM, "kiln: out of memory planning");
                p->ni[u].pending = false;
                p->ni[u].lastdep = join;
                p->ni[u].role = urole;
                if (jit_op_is_indexing(g->nodes[u].op))
                    p->cl[join].indexing = true;
            } else {
                kiln_status sst = settle(p, u);
                if (sst)
                    return sst;
            }
        }
        /* an operand settled just now lives in a newer cluster than join: n depends on it,
         * and whatever later reads n must see that, or a join could close a cycle */
        refresh_lastdep(p, n);
        if (!cluster_add(p, join, n))
            return ir_error(KILN_ERR_NOMEM, "kiln: out of memory planning");
        if (join > ni->lastdep)
            ni->lastdep = join;
        else if (ni->lastdep > join)
            raise_lastdep(p, join, ni->lastdep, n);
        store_operands(p, n, join, eager); /* and those settled in kernels of their own */
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
        if (ni->cls == C_VIEW && view_is_whole(p, n))
            ni->sizes |= SZ_VIEW_WHOLE;
        if (range_of_value(p, n))
            ni->sizes |= SZ_VIEW_RANGE;
        if (ni->cls == C_ELEM && !ni->stored) {
            ni->stored = true;
            say(p, why_of(p, n), "graph output '%s'", g->outputs[i].name);
        } else if (ni->cls == C_VIEW && !ni->stored && (ni->sizes & SZ_VIEW_WHOLE) &&
                   (p->ni[ni->v.base].cls == C_ELEM || p->ni[ni->v.base].cls == C_BUF ||
                    (p->ni[ni->v.base].cls == C_VIEW && p->ni[ni->v.base].stored))) {
            /* a reshape of a whole stored value: the same bytes, no copy kernel; the value
             * is stored straight into the output (or copied from an input) */
            int32_t b = ni->v.base;
            ni->alias = b + 1;
            if (p->ni[b].cls == C_ELEM && !p->ni[b].stored) {
                p->ni[b].stored = true;
                say(p, why_of(p, b), "graph output '%s' (through %s %%%d)",
                    g->outputs[i].name, ir_ops[g->nodes[n].op].name, (int)n);
            }
        } else if (ni->cls == C_VIEW && !ni->stored && (ni->sizes & SZ_VIEW_RANGE)) {
            /* one range of a value a kernel computes: that kernel stores it here */
            int32_t b = ni->v.base;
            ni->stored = true;
            ni->ranged = true;
            ni->cluster = p->ni[b].cluster;
            say(p, why_of(p, n), "graph output '%s', one contiguous range of %s %%%d", g->outputs[i].name,
                ir_ops[g->nodes[b].op].name, (int)b);
        } else if (ni->cls == C_VIEW || ni->cls == C_FULL) {
            char why[JIT_WHY_LEN] = "";
            say(p, why, "graph output '%s'", g->outputs[i].name);
            kiln_status st = materialise(p, n, why);
            if (st)
                return st;
        }
    }
    for (int32_t c = 0; c < p->ncl; c++)
        p->cl[c].long_rows = p->cl[c].reduce && long_rows(&p->cl[c]);
    return drop_unread(p);
}

/* ---- the same clusters at new sizes -------------------------------------------------- */

bool
jit_fuse_resize(planner *p)
{
    const kiln_graph *g = p->g;
    for (int32_t c = 0; c < p->ncl; c++) {
        cluster *cl = &p->cl[c];
        cl->shape = g->nodes[cl->shape_node].type.shape;
        if (cl->reduce) {
            make_reduce(cl, cl->axes);
            if (long_rows(cl) != cl->long_rows)
                return false;
        }
    }
    for (int32_t n = 0; n < g->nnodes; n++) {
        const ir_node *nd = &g->nodes[n];
        nodeinfo *ni = &p->ni[n];
        if (ni->cls == C_BUF) {
            ni->v.base = n;
            ni->v.offset = 0;
            ir_shape_strides(&nd->type.shape, ni->v.strides);
        } else if (ni->cls == C_VIEW) {
            int32_t x = nd->in[0];
            view src = p->ni[x].v;
            if (ni->sizes & SZ_VIEW_OWN) {
                src.base = x;
                src.offset = 0;
                ir_shape_strides(&g->nodes[x].type.shape, src.strides);
            }
            if (make_view(p, n, &src) != !(ni->sizes & SZ_VIEW_COPY))
                return false;
            if (ni->sizes & SZ_VIEW_COPY) {
                ni->v.base = n;
                ni->v.offset = 0;
                ir_shape_strides(&nd->type.shape, ni->v.strides);
            }
            if (reshape_is_free(p, n) != !!(ni->sizes & SZ_RESHAPE_FREE))
                return false;
        }
    }
    for (int32_t i = 0; i < g->noutputs; i++) {
        int32_t n = g->outputs[i].node;
        if (p->ni[n].cls == C_VIEW && view_is_whole(p, n) != !!(p->ni[n].sizes & SZ_VIEW_WHOLE))
            return false;
        if (p->ni[n].cls == C_VIEW && range_of_value(p, n) != !!(p->ni[n].sizes & SZ_VIEW_RANGE))
            return false;
    }
    return true;
}
