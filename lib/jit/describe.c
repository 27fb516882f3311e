/* describe.c — the planner's describe pass: one size-free kernel description per kernel
 * step (the instruction list, loads through views with their strides, stores and their
 * classes), the step's slots and run-time sizes, and the text of `kiln dump --plan`.  No
 * LLVM work happens here: every description of a plan exists before any is compiled. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner.h"

/* ---- kernel descriptions ---------------------------------------------------------------- */

/* n zeroed elements of `size` bytes for a step's arrays (its description's instructions,
 * stores and classes, its slots, offsets, strides, parameters and boxes), from the plan's
 * arena (jit_plan.arena): freed with the plan in one sweep, where a step's arrays were a
 * dozen allocations and frees each; NULL when out of memory. */
static void *
step_array(planner *p, size_t n, size_t size)
{
    return ir_arena_alloc(p->arena, (n ? n : 1) * size, size >= 8 ? 8 : size >= 4 ? 4 : 1);
}

/* describe's working arrays, kept by the planner from one step to the next
 * (planner.kscratch, jit_describe_free): describing a step allocated and freed them a dozen
 * times, most of the allocator's calls in a plan made at new sizes (a decoder step: 480 of
 * them).  A kbuild works on a copy (kb_take) and hands it back, grown or not.  Between
 * plans one set is kept for the next (spare_scratch): a plan made at new sizes every step
 * found them empty and grew each array again from its first element. */
struct jit_kscratch {
    jit_kinst *inst;
    int32_t capinst;
    int32_t *memo; /* node -> inst + 1 (0: none), two per node (contexts) */
    size_t capmemo;
    ivec touched;
    /* loads (room for the widest space: R changes from step to step) */
    ivec load_node;     /* base node per slot */
    int64_t *load_ext;  /* slot * R * 2: boxes of ranged loads, gather axes */
    int64_t *load_off;
    int64_t *load_strides; /* slot * R */
    int32_t capload;
    ivec stores; /* nodes stored, in order */
};

typedef struct kbuild {
    planner *p;
    int32_t c;
    int R;
    int64_t dims[JIT_MAX_SPACE];
    /* reduction kernels: kept dims then reduced dims; pos[i] = iteration dim of axis i of
     * the reduced shape (-1: none, a reduced axis of a space of no kept axes) */
    bool red;
    int nk, vdim;
    int pos[IR_MAX_RANK];
    int32_t ninst;
    jit_kscratch w; /* the working arrays (the planner's, kb_take) */
    /* run-time scalars (jit_kdesc.nparams): their values, and the `full` node each holds
     * (-1: a pad's fill, an arange's start or step) */
    ir_scalar params[JIT_MAX_PARAMS];
    int32_t param_node[JIT_MAX_PARAMS];
    int nparams;
} kbuild;

static int32_t
kb_push(kbuild *k, const jit_kinst *in)
{
    if (k->ninst >= JIT_MAX_INST) {
        ir_error(KILN_ERR_UNSUPPORTED, "kiln: unsupported: kernel with more than %d instructions",
                 JIT_MAX_INST);
        return -1;
    }
    if (k->ninst == k->w.capinst) {
        int32_t m = k->w.capinst ? 2 * k->w.capinst : 32;
        jit_kinst *a = ir_realloc(k->w.inst, sizeof *a * (size_t)m);
        if (!a) {
            ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
            return -1;
        }
        k->w.inst = a;
        k->w.capinst = m;
    }
    k->w.inst[k->ninst] = *in;
    return k->ninst++;
}

/* The scalar v of dtype t in every lane, the value of `full` node n (-1: of no node): a
 * run-time parameter (one per node), so that graphs differing only in such a value share the
 * kernel; a constant in the code once the kernel has JIT_MAX_PARAMS of them. */
static int32_t
kb_scalar(kbuild *k, int32_t n, kiln_dtype t, const ir_scalar *v)
{
    jit_kinst in = {0};
    in.dtype = (uint8_t)t;
    int j = 0;
    while (j < k->nparams && !(n >= 0 && k->param_node[j] == n))
        j++;
    if (j == k->nparams && j < JIT_MAX_PARAMS) {
        k->param_node[j] = n;
        memset(&k->params[j], 0, sizeof k->params[j]);
        if (ir_dtype_is_float(t))
            memcpy(k->params[j].bytes, v->bytes, kiln_dtype_size(t));
        else
            k->params[j] = ir_scalar_from_i64(KILN_DTYPE_I64, ir_scalar_i64(t, v));
        k->nparams++;
    }
    if (j < k->nparams) {
        in.kind = JIT_PARAM;
        in.slot = j;
    } else {
        in.kind = JIT_SPLAT;
        in.value = *v;
    }
    return kb_push(k, &in);
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
    int32_t slot = k->w.load_node.n;
    if (slot == k->w.capload) {
        int32_t m = k->w.capload ? 2 * k->w.capload : 8;
        int64_t *o = ir_realloc(k->w.load_off, sizeof(int64_t) * (size_t)m);
        if (o)
            k->w.load_off = o;
        /* (room for the widest space: the arrays serve every step of a plan, kscratch) */
        int64_t *ss =
            o ? ir_realloc(k->w.load_strides, sizeof(int64_t) * (size_t)m * JIT_MAX_SPACE) : NULL;
        if (ss)
            k->w.load_strides = ss;
        int64_t *ex =
            ss ? ir_realloc(k->w.load_ext, sizeof(int64_t) * (size_t)m * JIT_MAX_SPACE * 2) : NULL;
        if (!o || !ss || !ex) {
            ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
            return -1;
        }
        k->w.load_ext = ex;
        k->w.capload = m;
    }
    if (!jit_ivec_push(&k->w.load_node, v->base)) {
        ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
        return -1;
    }
    k->w.load_off[slot] = v->offset + off_adj;
    memcpy(k->w.load_strides + (size_t)slot * (size_t)k->R, st, sizeof(int64_t) * (size_t)k->R);
    for (int d = 0; d < k->R; d++) {
        k->w.load_ext[((size_t)slot * (size_t)k->R + (size_t)d) * 2] = ext ? ext[2 * d] : 0;
        k->w.load_ext[((size_t)slot * (size_t)k->R + (size_t)d) * 2 + 1] = ext ? ext[2 * d + 1] : 0;
    }
    return slot;
}

/* A load instruction of dtype t reading view v (offset moved by off_adj elements) through
 * iteration strides st: its class from the vector dim's stride, row-wise in a reduction
 * kernel when constant over the reduced dims; flags JIT_RANGED or JIT_INDEXED with ext
 * and their operand a0. */
static int32_t
kb_load_view(kbuild *k, const view *v, int64_t off_adj, const int64_t *st, const int64_t *ext,
             kiln_dtype t, uint8_t flags, int32_t a0)
{
    int32_t slot = kb_slot(k, v, off_adj, st, ext);
    if (slot < 0)
        return -1;
    int64_t inner = st[k->vdim];
    jit_kinst in = {0};
    in.kind = JIT_LOAD;
    in.dtype = (uint8_t)t;
    in.slot = slot;
    in.cls = (uint8_t)((inner == 1 ? JIT_CONTIG : inner == 0 ? JIT_BCAST : JIT_STRIDED) | flags);
    in.a[0] = a0;
    if (k->red && !(flags & JIT_RANGED)) { /* (a ranged load is masked lane by lane) */
        bool rowwise = true;
        for (int d = k->nk; d < k->R; d++)
            rowwise &= st[d] == 0;
        if (rowwise)
            in.cls |= JIT_ROWWISE;
    }
    return kb_push(k, &in);
}

/* A load of node n into the iteration space, read by a node of shape cs in context ctx. */
static int32_t
kb_load(kbuild *k, int32_t n, const ir_shape *cs, int ctx)
{
    planner *p = k->p;
    const ir_node *nd = &p->g->nodes[n];
    view tmp;
    const view *v = jit_load_source(p, n, k->c, &tmp);
    int64_t st[JIT_MAX_SPACE];
    map_strides(k, &nd->type.shape, v->strides, cs, ctx, st);
    return kb_load_view(k, v, 0, st, NULL, nd->type.dtype, 0, 0);
}

/* A ranged load of operand x of n, shifted by shift[] along each axis of n (same rank),
 * valid in the box [shift, shift + x's dims); elsewhere instruction `other`.  In a
 * reduction kernel n is over its whole space (fuse.c's reduce_reads), axis i at space dim
 * k->pos[i]. */
static int32_t
kb_ranged(kbuild *k, int32_t n, int32_t x, const int64_t *shift, int32_t other)
{
    planner *p = k->p;
    const ir_shape *ns = &p->g->nodes[n].type.shape, *xs = &p->g->nodes[x].type.shape;
    view tmp;
    const view *v = jit_load_source(p, x, k->c, &tmp);
    int64_t st[JIT_MAX_SPACE] = {0}, ext[2 * JIT_MAX_SPACE], adj = 0;
    int lead = k->R - ns->rank;
    for (int d = 0; d < k->R; d++) {
        ext[2 * d] = 0;
        ext[2 * d + 1] = 1;
    }
    for (int i = 0; i < ns->rank; i++) {
        int d = k->red ? k->pos[i] : lead + i;
        st[d] = v->strides[i];
        adj -= shift[i] * v->strides[i];
        ext[2 * d] = shift[i];
        ext[2 * d + 1] = shift[i] + xs->dims[i];
    }
    return kb_load_view(k, v, adj, st, ext, p->g->nodes[x].type.dtype, JIT_RANGED, other);
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
        if ((in.a[0] = kb_scalar(k, -1, nd->type.dtype, &nd->at->start)) < 0 ||
            (in.a[1] = kb_scalar(k, -1, nd->type.dtype, &nd->at->delta)) < 0)
            return -1;
        return kb_push(k, &in);
    case IR_OP_PAD: {
        int32_t fill = kb_scalar(k, -1, nd->type.dtype, &nd->at->value);
        if (fill < 0)
            return -1;
        for (int i = 0; i < ns->rank; i++)
            shift[i] = nd->at->low[i];
        return kb_ranged(k, n, nd->in[0], shift, fill);
    }
    case IR_OP_CONCAT: {
        in.kind = JIT_SPLAT; /* zero of the dtype: every element is covered by an operand */
        int32_t v = kb_push(k, &in);
        for (int m = 0; m < nd->nin && v >= 0; m++) {
            v = kb_ranged(k, n, nd->in[m], shift, v);
            shift[nd->at->axis] += p->g->nodes[nd->in[m]].type.shape.dims[nd->at->axis];
        }
        return v;
    }
    case IR_OP_GATHER: {
        /* out = x[:axis] + idx + x[axis+1:]: idx over dims [axis, axis + ri) */
        int32_t x = nd->in[0], ix = nd->in[1];
        const ir_shape *is = &p->g->nodes[ix].type.shape, *xs = &p->g->nodes[x].type.shape;
        int ax = nd->at->axis, ri = is->rank, lead = k->R - ns->rank;
        view t1, t2;
        const view *vi = jit_load_source(p, ix, k->c, &t1);
        int64_t st[JIT_MAX_SPACE] = {0};
        for (int i = 0; i < ri; i++)
            st[lead + ax + i] = is->dims[i] != 1 ? vi->strides[i] : 0;
        int32_t idx = kb_load_view(k, vi, 0, st, NULL, p->g->nodes[ix].type.dtype, 0, 0);
        if (idx < 0)
            return -1;
        const view *vx = jit_load_source(p, x, k->c, &t2);
        int64_t sx[JIT_MAX_SPACE] = {0}, ext[2 * JIT_MAX_SPACE] = {0};
        for (int i = 0; i < xs->rank; i++) {
            if (i < ax)
                sx[lead + i] = vx->strides[i];
            else if (i > ax)
                sx[lead + i - 1 + ri] = vx->strides[i];
        }
        ext[0] = vx->strides[ax];
        ext[1] = xs->dims[ax];
        return kb_load_view(k, vx, 0, sx, ext, nd->type.dtype, JIT_INDEXED, idx);
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
    int32_t *memo = &k->w.memo[2 * n + ctx];
    if (*memo)
        return *memo - 1;
    const ir_node *nd = &p->g->nodes[n];
    nodeinfo *ni = &p->ni[n];
    int32_t r;
    if (ni->cls == C_FULL) {
        r = kb_scalar(k, n, nd->type.dtype, &nd->at->value);
    } else if (ni->cls == C_ELEM && ni->cluster == k->c && nd->op == IR_OP_MATMUL) {
        /* the contraction's sum: its operands are packed, not loaded (describe_matmul) */
        jit_kinst in = {0};
        in.kind = JIT_OP;
        in.op = IR_OP_MATMUL;
        in.dtype = (uint8_t)nd->type.dtype;
        r = kb_push(k, &in);
    } else if (ni->cls == C_ELEM && ni->cluster == k->c && p->cl[k->c].root_copy < 0 &&
               jit_op_is_indexing(nd->op)) {
        r = kb_indexing(k, n);
    } else if (ni->cls == C_ELEM && ni->cluster == k->c && p->cl[k->c].root_copy < 0) {
        jit_kinst in = {0};
        in.kind = jit_node_is_reduce(nd) ? JIT_REDUCE : JIT_OP;
        in.op = (uint8_t)nd->op;
        in.dtype = (uint8_t)nd->type.dtype;
        /* a reduction reads its operand over the space; a row op reads row values */
        int octx = jit_node_is_reduce(nd) ? 0 : k->red && ni->role == R_ROW ? 1 : 0;
        const ir_shape *ocs = jit_node_is_reduce(nd) ? &p->g->nodes[nd->in[0]].type.shape : &nd->type.shape;
        for (int i = 0; i < nd->nin; i++) {
            int32_t a = kb_value(k, nd->in[i], ocs, octx);
            if (a < 0)
                return -1;
            in.a[i] = a;
        }
        r = kb_push(k, &in);
        /* an in-cluster value reads the same in both contexts */
        if (r >= 0)
            k->w.memo[2 * n + (1 - ctx)] = r + 1;
    } else {
        r = kb_load(k, n, cs, ctx);
    }
    if (r < 0)
        return -1;
    *memo = r + 1;
    if (!jit_ivec_push(&k->w.touched, n)) {
        ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
        return -1;
    }
    return r;
}

void
jit_explain_cluster(planner *p, int32_t c, const jit_step *s, FILE *f)
{
    cluster *cl = &p->cl[c];
    const kiln_graph *g = p->g;
    char tb[IR_TYPE_STR_MAX];
    if (cl->root_copy >= 0) {
        int32_t n = cl->root_copy;
        fprintf(f, "%s: materialise %s %%%d %s (%s)",
                s->kind == JIT_STEP_COPY ? "copy (one contiguous range of its base)" : "kernel",
                ir_ops[g->nodes[n].op].name, (int)n,
                ir_type_str(&g->nodes[n].type, tb, sizeof tb), p->why ? p->why[n] : "");
        return;
    }
    if (cl->contract) {
        const ir_node *mm = &g->nodes[cl->members[0]];
        char ta[IR_TYPE_STR_MAX], tbb[IR_TYPE_STR_MAX], why[200];
        int bform, tm;
        /* the choice is the description's (jit_describe_kernel); the cost model again for
         * its reason only; the tiles are the schedule's */
        jit_skinny_choose(s, mm->type.dtype, &bform, &tm, why, sizeof why);
        if (s->desc.kind == JIT_KERNEL_SKINNY) {
            int n = s->desc.sched.tile_n;
            bform = s->desc.bform;
            tm = s->desc.tile_m;
            fprintf(f, "skinny contraction kernel %s @ %s -> %s, %s: %s; %dx%d register tiles",
                    ir_type_str(&g->nodes[mm->in[0]].type, ta, sizeof ta),
                    ir_shape_str(&g->nodes[mm->in[1]].type.shape, tbb, sizeof tbb),
                    ir_shape_str(&cl->shape, tb, sizeof tb),
                    bform == JIT_SKINNY_ROWS ? "rows of B (vectors along N)"
                                             : "dot products along K (B transposed)",
                    why, tm, bform == JIT_SKINNY_ROWS ? n * s->desc.sched.lanes : n);
            int64_t rows, pieces = jit_skinny_pieces(s, &rows);
            if (pieces > 1)
                fprintf(f, "; K in %lld pieces of %lld rows of B (each a contiguous block), their "
                           "sums added in order",
                        (long long)pieces, (long long)rows);
            if (bform == JIT_SKINNY_ROWS)
                fprintf(f,
                        "; the k loop in a core kernel shared by every rows step of %s and "
                        "%d-row tiles, this kernel adds up its sums",
                        kiln_dtype_name(mm->type.dtype), tm);
        } else {
            fprintf(f, "contraction kernel %s @ %s -> %s, %dx%d register tiles",
                    ir_type_str(&g->nodes[mm->in[0]].type, ta, sizeof ta),
                    ir_shape_str(&g->nodes[mm->in[1]].type.shape, tbb, sizeof tbb),
                    ir_shape_str(&cl->shape, tb, sizeof tb), s->desc.sched.mr, s->desc.sched.nr);
            if (s->mm_m <= jit_skinny_max_rows(mm->type.dtype))
                fprintf(f, ", packed: %s", why);
        }
        for (int x = 0; x < 2; x++)
            if (p->ni[mm->in[x]].folded)
                fprintf(f, ", packing computes %%%d %s", (int)mm->in[x], ir_ops[g->nodes[mm->in[x]].op].name);
        fprintf(f, "%s:", cl->nmembers > 1 ? ", the rest an epilogue on the tile" : "");
    } else if (cl->reduce) {
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
            fprintf(f, "\n      stores %%%d: %s", (int)n, p->why ? p->why[n] : "");
    }
    for (int32_t i = 0; i < g->noutputs; i++) {
        int32_t n = g->outputs[i].node, b = p->ni[n].v.base, j = 0;
        while (j < i && g->outputs[j].node != n)
            j++;
        if (p->ni[n].ranged && p->ni[n].cluster == c && j == i)
            fprintf(f, "\n      stores %%%d elements [%lld, %lld) as %%%d %s: %s", (int)b,
                    (long long)p->ni[n].v.offset,
                    (long long)(p->ni[n].v.offset + ir_shape_count(&g->nodes[n].type.shape)),
                    (int)n, ir_ops[g->nodes[n].op].name, p->why ? p->why[n] : "");
    }
}

/* The iteration space of cluster c: its shape, or for a reduction the kept dims then the
 * reduced dims (at least one of each). */
static void
kb_space(kbuild *k, const cluster *cl)
{
    if (cl->contract) {
        /* [batch.., M, N]: a 1-D operand's missing axis is a dim of size 1 */
        const kiln_graph *g = k->p->g;
        const ir_node *mm = &g->nodes[cl->members[0]];
        const ir_shape *os = &mm->type.shape;
        bool a1 = g->nodes[mm->in[0]].type.shape.rank == 1, b1 = g->nodes[mm->in[1]].type.shape.rank == 1;
        int nb = os->rank - (a1 ? 0 : 1) - (b1 ? 0 : 1);
        k->R = nb + 2;
        for (int d = 0; d < nb; d++)
            k->dims[d] = os->dims[d];
        k->dims[nb] = a1 ? 1 : os->dims[nb];
        k->dims[nb + 1] = b1 ? 1 : os->dims[os->rank - 1];
        k->vdim = k->R - 1;
        return;
    }
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
    for (int i = 0; i < JIT_MAX_SPACE; i++)
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

/* The operands of contraction step s (matmul node n, space dims k->dims of rank k->R): where
 * they live and their strides (see jit_step). */
static void
describe_matmul(kbuild *k, int32_t n, jit_step *s)
{
    planner *p = k->p;
    const ir_node *nd = &p->g->nodes[n];
    int R = k->R, nb = R - 2;
    for (int x = 0; x < 2; x++) {
        int32_t opnd = nd->in[x], fold = p->ni[opnd].folded - 1;
        const ir_shape *xs = &p->g->nodes[opnd].type.shape;
        s->mm_src[x] = (uint8_t)p->g->nodes[fold >= 0 ? fold : opnd].type.dtype;
        s->mm_scale[x] = 1;
        if (fold >= 0 && p->g->nodes[opnd].op == IR_OP_MUL) {
            const ir_node *od = &p->g->nodes[opnd];
            int32_t f = od->in[0] == fold ? od->in[1] : od->in[0];
            s->mm_scale[x] = ir_scalar_f64(p->g->nodes[f].type.dtype, &p->g->nodes[f].at->value);
        }
        view tmp;
        const view *v = jit_load_source(p, fold >= 0 ? fold : opnd, k->c, &tmp);
        int64_t *st = s->mm_st[x];
        int xb = xs->rank >= 2 ? xs->rank - 2 : 0;
        bool shared = true;
        for (int d = 0; d < nb; d++) {
            int j = xb - nb + d;
            st[d] = j >= 0 && xs->dims[j] != 1 && k->dims[d] != 1 ? v->strides[j] : 0;
            shared &= st[d] == 0;
        }
        if (xs->rank == 1) { /* A [k] is [1, k]; B [k] is [k, 1] */
            st[R - 2] = x == 0 ? 0 : v->strides[0];
            st[R - 1] = x == 0 ? v->strides[0] : 0;
        } else {
            st[R - 2] = v->strides[xs->rank - 2];
            st[R - 1] = v->strides[xs->rank - 1];
        }
        s->mm_loc[x] = p->ni[v->base].loc;
        s->mm_off[x] = v->offset;
        s->mm_shared[x] = shared;
    }
    const ir_shape *as = &p->g->nodes[nd->in[0]].type.shape;
    s->mm_m = k->dims[R - 2];
    s->mm_n = k->dims[R - 1];
    s->mm_k = as->dims[as->rank - 1];
    s->mm_batch = 1;
    for (int d = 0; d < nb; d++)
        s->mm_batch *= k->dims[d];
}

/* ELEMENTWISE, and REDUCTION "rows" kernels (lanes along the reduced dim: softmax,
 * layernorm): which stores stream (non-temporal stores, JIT_ST_STREAM).  A stored value
 * streams when it goes to a caller's output that no later step of the program reads (in a
 * reduction kernel, a value over the whole space: JIT_ST_SPACE), and (unless
 * JIT_F_STREAM) the kernel moves at least STREAM_LLC_FACTOR times the last-level cache: by
 * the time it returns, its first output lines would have been evicted anyway, and
 * streaming saves the read-for-ownership of every output line.  JIT_F_NO_STREAM: none.
 * An elementwise kernel's store_cls stays NULL when nothing streams. */
#define STREAM_LLC_FACTOR 2

static kiln_status
kb_stream_stores(planner *p, const ivec *loads, const int32_t *nodes, jit_step *s)
{
    bool rows = s->desc.kind == JIT_KERNEL_REDUCTION && !s->desc.lanes_kept;
    if ((s->desc.kind != JIT_KERNEL_ELEMENTWISE && !rows) || (p->flags & JIT_F_NO_STREAM))
        return KILN_OK;
    /* what the kernel moves: every buffer it loads (a broadcast row such as layernorm's
     * gamma counts once, not once per row) and every value it stores */
    double bytes = 0;
    for (int32_t j = 0; j < loads->n; j++)
        bytes += (double)ir_type_bytes(&p->g->nodes[loads->v[j]].type);
    for (int32_t i = 0; i < s->desc.nstores; i++)
        bytes += (double)ir_type_bytes(&p->g->nodes[nodes[i]].type);
    if (!(p->flags & JIT_F_STREAM) &&
        bytes < (double)STREAM_LLC_FACTOR * (double)jit_host_info()->llc_bytes)
        return KILN_OK;
    for (int32_t i = 0; i < s->desc.nstores; i++) {
        const nodeinfo *ni = &p->ni[nodes[i]];
        if (ni->ranged) /* its own masked store (JIT_ST_RANGE), never streaming */
            continue;
        if (ni->loc.kind != JIT_LOC_OUTPUT || ni->last_use > ni->step ||
            (rows && s->desc.store_cls[i] != JIT_ST_SPACE))
            continue;
        if (!s->desc.store_cls && !(s->desc.store_cls = step_array(p, (size_t)s->desc.nstores, 1)))
            return ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
        s->desc.store_cls[i] = JIT_ST_STREAM;
    }
    return KILN_OK;
}

/* The ranged outputs (fuse.c's range_of_value) cluster c stores, each once, appended to
 * stores (their number added to *n). */
static kiln_status
kb_ranged_outputs(planner *p, int32_t c, ivec *stores, int32_t *n)
{
    const kiln_graph *g = p->g;
    for (int32_t i = 0; i < g->noutputs; i++) {
        int32_t x = g->outputs[i].node;
        if (!p->ni[x].ranged || p->ni[x].cluster != c)
            continue;
        bool seen = false;
        for (int32_t j = stores->n - *n; j < stores->n; j++)
            seen |= stores->v[j] == x;
        if (seen)
            continue;
        if (!jit_ivec_push(stores, x))
            return ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
        (*n)++;
    }
    return KILN_OK;
}

/* A copy cluster that materialises a view whose elements are one contiguous range of its
 * base, in order (a slice of rows, a permute or reshape that moves only dims of size 1: a
 * decoder's new K/V rows), becomes a COPY step, a memmove, instead of a kernel: nothing to
 * compile, no launch on the pool. */
static bool
contiguous_copy(planner *p, const cluster *cl, jit_step *s)
{
    if (cl->root_copy < 0 || cl->copy_from >= 0)
        return false;
    int32_t x = cl->root_copy;
    const nodeinfo *ni = &p->ni[x];
    if (ni->cls != C_VIEW || !ni->has_loc || !p->ni[ni->v.base].has_loc)
        return false;
    const ir_type *t = &p->g->nodes[x].type;
    if (!jit_view_is_contiguous(&ni->v, &t->shape))
        return false;
    s->kind = JIT_STEP_COPY;
    s->from = p->ni[ni->v.base].loc;
    s->from_off = (size_t)ni->v.offset * kiln_dtype_size(t->dtype);
    s->to = ni->loc;
    s->bytes = ir_type_bytes(t);
    return true;
}

/* The working arrays of the last plan described, kept for the next one (any thread's: taken
 * and given back by exchange, so one plan at a time uses them); NULL none. */
static _Atomic(jit_kscratch *) spare_scratch;

static void
scratch_free(jit_kscratch *ks)
{
    if (!ks)
        return;
    ir_free(ks->inst);
    ir_free(ks->memo);
    ir_free(ks->touched.v);
    ir_free(ks->load_node.v);
    ir_free(ks->stores.v);
    ir_free(ks->load_ext);
    ir_free(ks->load_off);
    ir_free(ks->load_strides);
    ir_free(ks);
}

void
jit_describe_free(planner *p)
{
    ir_free(p->changed);
    p->changed = NULL;
    if (p->kscratch) /* kept for the next plan: the one kept before is freed */
        scratch_free(atomic_exchange(&spare_scratch, p->kscratch));
    p->kscratch = NULL;
}

void
jit_describe_trim(void)
{
    scratch_free(atomic_exchange(&spare_scratch, NULL));
}

/* k's working arrays from the planner's scratch (emptied), NULL when out of memory. */
static jit_kscratch *
kb_take(planner *p, kbuild *k)
{
    jit_kscratch *ks = p->kscratch;
    size_t nmemo = 2 * (size_t)p->g->nnodes + 1;
    if (!ks) {
        ks = atomic_exchange(&spare_scratch, NULL); /* (the last plan's, grown) */
        if (!ks && !(ks = ir_calloc(1, sizeof *ks)))
            return NULL;
        p->kscratch = ks; /* (jit_describe_free's, whatever happens next) */
        if (ks->capmemo < nmemo) {
            int32_t *m = ir_realloc(ks->memo, sizeof(int32_t) * nmemo);
            if (!m)
                return NULL;
            ks->memo = m;
            ks->capmemo = nmemo;
        }
    }
    memset(ks->memo, 0, sizeof(int32_t) * nmemo);
    k->w = *ks;
    k->w.touched.n = k->w.load_node.n = k->w.stores.n = 0;
    return ks;
}

kiln_status
jit_describe_kernel(planner *p, int32_t c, jit_step *s)
{
    cluster *cl = &p->cl[c];
    if (contiguous_copy(p, cl, s))
        return KILN_OK;
    kbuild k = {0};
    kiln_status st = KILN_OK;
    k.p = p;
    k.c = c;
    kb_space(&k, cl);
    jit_kscratch *ks = kb_take(p, &k);
    ivec *stores = &k.w.stores;
    if (!ks)
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
    int32_t nranged = 0; /* the last stores: ranged outputs (JIT_ST_RANGE) */
    if (cl->root_copy >= 0) {
        int32_t src = cl->copy_from >= 0 ? cl->copy_from : cl->root_copy;
        int32_t r = kb_value(&k, src, &p->g->nodes[src].type.shape, 0);
        if (r >= 0)
            k.w.memo[2 * cl->root_copy] = r + 1; /* the value stored as the root */
        if (r < 0 || !jit_ivec_push(stores, cl->root_copy)) {
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
            if (p->ni[n].stored && !jit_ivec_push(stores, n)) {
                st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
                goto done;
            }
        }
        if ((st = kb_ranged_outputs(p, c, stores, &nranged)))
            goto done;
    }
    s->kind = JIT_STEP_KERNEL;
    s->desc.kind = cl->contract ? JIT_KERNEL_CONTRACTION
                   : k.red      ? JIT_KERNEL_REDUCTION
                                : JIT_KERNEL_ELEMENTWISE;
    if (cl->contract)
        describe_matmul(&k, cl->members[0], s);
    s->desc.rank = k.R;
    s->desc.nred = k.red ? k.R - k.nk : 0;
    s->desc.lanes_kept = k.red && k.vdim < k.nk;
    s->desc.ninst = k.ninst;
    s->desc.nloads = k.w.load_node.n;
    s->desc.nstores = stores->n;
    s->desc.nparams = k.nparams + 2 * nranged; /* then each range's lo and hi */
    s->desc.inst = step_array(p, (size_t)k.ninst, sizeof(jit_kinst));
    if (s->desc.inst && k.ninst)
        memcpy(s->desc.inst, k.w.inst, sizeof(jit_kinst) * (size_t)k.ninst);
    s->desc.stores = step_array(p, (size_t)stores->n, sizeof(int32_t));
    s->desc.store_cls = k.red || nranged ? step_array(p, (size_t)stores->n, 1) : NULL;
    s->nslots = k.w.load_node.n + stores->n;
    s->slot = step_array(p, (size_t)s->nslots, sizeof(jit_loc));
    s->slot_off = step_array(p, (size_t)s->nslots, sizeof(int64_t));
    /* reductions: strides for every slot; elementwise: for the loads */
    size_t nst = (size_t)(k.red ? s->nslots : k.w.load_node.n);
    s->strides = step_array(p, (nst ? nst : 1) * (size_t)k.R, sizeof(int64_t));
    s->params = s->desc.nparams ? step_array(p, (size_t)s->desc.nparams, sizeof(ir_scalar)) : NULL;
    if (!s->desc.inst || !s->desc.stores || !s->slot || !s->slot_off || !s->strides ||
        ((k.red || nranged) && !s->desc.store_cls) || (s->desc.nparams && !s->params)) {
        st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
        goto done;
    }
    if (k.nparams)
        memcpy(s->params, k.params, sizeof(ir_scalar) * (size_t)k.nparams);
    s->total = 1;
    for (int d = 0; d < k.R; d++) {
        s->dims[d] = k.dims[d];
        s->total *= k.dims[d];
    }
    s->bytes_per_elem = 0;
    if (cl->indexing && k.w.load_node.n) {
        size_t ne = (size_t)k.w.load_node.n * (size_t)k.R * 2;
        s->ext = step_array(p, ne, sizeof(int64_t));
        if (!s->ext) {
            st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
            goto done;
        }
        memcpy(s->ext, k.w.load_ext, sizeof(int64_t) * ne);
    }
    for (int32_t j = 0; j < k.w.load_node.n; j++) {
        int32_t b = k.w.load_node.v[j];
        s->slot[j] = p->ni[b].loc;
        s->slot_off[j] = k.w.load_off[j];
        memcpy(s->strides + (size_t)j * (size_t)k.R, k.w.load_strides + (size_t)j * (size_t)k.R,
               sizeof(int64_t) * (size_t)k.R);
    }
    for (int32_t i = 0; i < k.ninst && s->desc.inst; i++) {
        const jit_kinst *in = &s->desc.inst[i];
        if (in->kind == JIT_LOAD && (in->cls & 0xf) != JIT_BCAST)
            s->bytes_per_elem += kiln_dtype_size((kiln_dtype)in->dtype);
    }
    for (int32_t i = 0; i < stores->n; i++) {
        int32_t n = stores->v[i];
        const ir_shape *ns = &p->g->nodes[n].type.shape;
        s->slot[k.w.load_node.n + i] = p->ni[n].loc;
        if (p->ni[n].ranged) {
            /* elements [lo, hi) of its base's value, whose instruction is stored */
            int32_t j = k.nparams + 2 * (i - (stores->n - nranged));
            int64_t lo = p->ni[n].v.offset;
            s->desc.stores[i] = k.w.memo[2 * p->ni[n].v.base] - 1;
            s->desc.store_cls[i] = JIT_ST_RANGE;
            s->params[j] = ir_scalar_from_i64(KILN_DTYPE_I64, lo);
            s->params[j + 1] = ir_scalar_from_i64(KILN_DTYPE_I64, lo + ir_shape_count(ns));
            continue;
        }
        s->desc.stores[i] = k.w.memo[2 * n + (k.red && p->ni[n].role == R_ROW ? 1 : 0)] - 1;
        s->bytes_per_elem += kiln_dtype_size(p->g->nodes[n].type.dtype);
        if (k.red) {
            /* the stored buffer is row-major over the node's own shape */
            int64_t own[IR_MAX_RANK];
            int64_t *sst = s->strides + (size_t)(k.w.load_node.n + i) * (size_t)k.R;
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
        if ((st = kb_stream_stores(p, &k.w.load_node, stores->v, s)))
            goto done;
        s->rows = 1;
        for (int d = 0; d < k.nk; d++)
            s->rows *= k.dims[d];
        s->rlen = 1;
        for (int d = k.nk; d < k.R; d++)
            s->rlen *= k.dims[d];
        s->rinner = k.dims[k.R - 1];
    } else {
        st = kb_stream_stores(p, &k.w.load_node, stores->v, s);
    }
    if (cl->contract && !st) {
        /* few rows: B read in place (skinny.c's cost model; jit_explain_cluster says why) */
        int bform, tm;
        if (jit_skinny_choose(s, p->g->nodes[cl->members[0]].type.dtype, &bform, &tm, NULL, 0)) {
            s->desc.kind = JIT_KERNEL_SKINNY;
            s->desc.bform = bform;
            s->desc.tile_m = tm;
        }
    }
    if (!st) /* how it is computed, once its kind and payload are final (ksched.c) */
        st = jit_kernel_schedule_like(&s->desc, p->like);
    if (!st && s->desc.kind == JIT_KERNEL_SKINNY && s->desc.bform == JIT_SKINNY_ROWS) {
        /* the k loop: a kernel of its own, shared by every rows step alike (skinny.c) */
        jit_kdesc *cd = step_array(p, 1, sizeof *cd);
        jit_kinst *ci = step_array(p, 1, sizeof *ci);
        if (cd && ci) {
            jit_skinny_core(&s->desc, ci, cd);
            s->core_desc = cd;
        } else {
            st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
        }
    }
done:
    *ks = k.w; /* (grown or not) back to the planner */
    return st;
}

kiln_status
jit_describe_ref(planner *p, int32_t r, jit_step *s)
{
    const ir_node *nd = &p->g->nodes[r];
    s->kind = JIT_STEP_REF;
    s->sub = ir_graph_new(ir_ops[nd->op].name);
    s->nin = nd->nin;
    s->in = ir_calloc((size_t)(nd->nin ? nd->nin : 1), sizeof(jit_loc));
    int32_t *ids = ir_calloc((size_t)(nd->nin ? nd->nin : 1), sizeof(int32_t));
    kiln_status st = KILN_OK;
    if (!s->sub || !s->in || !ids) {
        st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
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
    int32_t id = ir_graph_add_node(s->sub, "kiln_jit", nd->op, nd->nin, ids, nd->at, &nd->type, NULL);
    if (id < 0 || (st = ir_graph_add_output(s->sub, "out", id))) {
        st = kiln_errcode();
        goto done;
    }
    s->out = p->ni[r].loc;
done:
    ir_free(ids);
    return st;
}

/* ---- descriptions taken from a model (plans at new sizes) ------------------------------ */

static bool
rec_push(planner *p, int32_t x)
{
    return x < 0 || x >= p->g->nnodes || jit_ivec_push(p->reads, x);
}

static int
cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

bool
jit_describe_record(planner *p, int32_t c, const jit_step *s)
{
    const kiln_graph *g = p->g;
    const cluster *cl = &p->cl[c];
    ivec *r = p->reads;
    int32_t from = r->n;
    bool ok = rec_push(p, cl->root_copy) && rec_push(p, cl->copy_from);
    /* (kb_ranged_outputs reads every output's `ranged` and `cluster`: changed_nodes
     * compares those of all outputs; the ones it stores are read further) */
    for (int32_t i = 0; ok && i < g->noutputs; i++) {
        int32_t x = g->outputs[i].node;
        if (p->ni[x].ranged && p->ni[x].cluster == c)
            ok = rec_push(p, x);
    }
    for (int32_t i = 0; ok && i < cl->nmembers; i++)
        ok = rec_push(p, cl->members[i]);
    if (s->kind == JIT_STEP_KERNEL && p->kscratch) { /* (a COPY step made no kbuild) */
        const jit_kscratch *ks = p->kscratch;
        const ivec *l[3] = {&ks->touched, &ks->load_node, &ks->stores};
        for (int j = 0; ok && j < 3; j++)
            for (int32_t i = 0; ok && i < l[j]->n; i++)
                ok = rec_push(p, l[j]->v[i]);
    }
    int32_t end = r->n;
    for (int32_t i = from; ok && i < end; i++) {
        const ir_node *nd = &g->nodes[r->v[i]];
        for (int a = 0; ok && a < nd->nin; a++) {
            const ir_node *od = &g->nodes[nd->in[a]];
            ok = rec_push(p, nd->in[a]);
            for (int b = 0; ok && b < od->nin; b++)
                ok = rec_push(p, od->in[b]);
        }
    }
    end = r->n;
    for (int32_t i = from; ok && i < end; i++) /* (jit_load_source: a view's base) */
        if (p->ni[r->v[i]].cls == C_VIEW)
            ok = rec_push(p, p->ni[r->v[i]].v.base);
    if (!ok)
        return false;
    /* each once */
    qsort(r->v + from, (size_t)(r->n - from), sizeof(int32_t), cmp_i32);
    int32_t n = from;
    for (int32_t i = from; i < r->n; i++)
        if (n == from || r->v[i] != r->v[n - 1])
            r->v[n++] = r->v[i];
    r->n = n;
    return true;
}

/* Per node of p->g, whether its dims, sized attributes or nodeinfo differ from the
 * model's: NULL when out of memory.  (Ops, wiring, dtypes, ranks and every attribute but
 * sizes are the model's: resize.c's check.  Nodeinfo by its bytes: p's is a copy of the
 * model's changed field by field, so a difference in bytes that is none in value only
 * costs a reuse.) */
static const uint8_t *
changed_nodes(planner *p)
{
    if (p->changed)
        return p->changed;
    const jit_plan_model *m = p->model;
    const kiln_graph *g = p->g, *mg = m->plan->g;
    uint8_t *ch = ir_malloc((size_t)g->nnodes + 1);
    if (!ch)
        return NULL;
    /* which outputs a kernel stores as ranges (every description reads it) */
    bool outs = true;
    for (int32_t i = 0; i < g->noutputs; i++) {
        int32_t x = g->outputs[i].node;
        outs &= p->ni[x].ranged == m->ni[x].ranged && p->ni[x].cluster == m->ni[x].cluster;
    }
    for (int32_t x = 0; x < g->nnodes; x++) {
        const ir_node *a = &g->nodes[x], *b = &mg->nodes[x];
        ch[x] = memcmp(a->type.shape.dims, b->type.shape.dims,
                       sizeof(int64_t) * (size_t)a->type.shape.rank) != 0 ||
                ((ir_ops[a->op].attrs & (IR_A_START | IR_A_STOP | IR_A_LOW | IR_A_HIGH | IR_A_SHAPE)) &&
                 memcmp(a->at, b->at, sizeof *a->at) != 0) ||
                memcmp(&p->ni[x], &m->ni[x], sizeof(nodeinfo)) != 0 || !outs;
    }
    return p->changed = ch;
}

/* Clusters a and b (of one plan at two sizes) are equal field by field: their shapes' dims
 * beyond the rank are whatever the node types they were copied from held, and those are
 * not the type. */
static bool
cluster_equal(const cluster *a, const cluster *b)
{
    return a->members == b->members && a->nmembers == b->nmembers &&
           a->root_copy == b->root_copy && a->copy_from == b->copy_from &&
           ir_shape_equal(&a->shape, &b->shape) && a->shape_node == b->shape_node &&
           a->reduce == b->reduce && a->indexing == b->indexing && a->contract == b->contract &&
           a->epilogue == b->epilogue && a->axes == b->axes && ir_shape_equal(&a->keep1, &b->keep1) &&
           ir_shape_equal(&a->keep0, &b->keep0) && a->long_rows == b->long_rows;
}

bool
jit_describe_same(planner *p, int32_t i, int32_t c)
{
    const jit_plan_model *m = p->model;
    if (i + 1 >= m->reads_at.n || c >= m->ncl || !cluster_equal(&p->cl[c], &m->cl[c]))
        return false;
    const uint8_t *ch = changed_nodes(p);
    if (!ch)
        return false; /* (described instead) */
    for (int32_t j = m->reads_at.v[i]; j < m->reads_at.v[i + 1]; j++)
        if (ch[m->reads.v[j]])
            return false;
    return true;
}
