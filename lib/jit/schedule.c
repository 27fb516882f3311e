/* schedule.c — the planner's schedule pass: the steps in dependency order (Kahn's
 * algorithm, smallest first node first, so the order follows the graph), then a place for
 * every stored value: graph outputs straight in the caller's buffers, the rest in one
 * block of temporaries packed by lifetime. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner.h"

/* The step that produces node n's buffer (-1: an input or a constant). */
static int32_t
producer(planner *p, int32_t n, int32_t *cluster_step, int32_t *ref_step)
{
    nodeinfo *ni = &p->ni[n];
    if (ni->cls == C_BUF)
        return p->g->nodes[n].op == IR_OP_INPUT || p->g->nodes[n].op == IR_OP_CONSTANT ? -1 : ref_step[n];
    return cluster_step[ni->cluster];
}

/* Pack temporaries: buffer b lives from step def[b] to step last[b] inclusive.  Each in
 * turn takes the lowest offset (a multiple of 64: sizes are rounded up to 64 bytes) where it
 * overlaps no earlier buffer that is alive at the same time: the earlier ones, kept sorted
 * by offset, are walked once, those alive with it moving the candidate past them when they
 * collide (no gap below the result fits, since every skipped offset collides), until one
 * starts beyond the candidate's end.  Inserting each placed buffer into that order, rather
 * than sorting the live ones again for every buffer, keeps a plan of thousands of
 * temporaries (a wide graph in eager mode) in a few milliseconds (5,000: 70 ms before). */
typedef struct tbuf {
    int32_t node, def, last;
    size_t size, offset;
} tbuf;

static bool
pack(tbuf *b, int32_t n, size_t *top)
{
    const tbuf **placed = ir_calloc((size_t)n + 1, sizeof *placed); /* by offset */
    if (!placed)
        return false;
    *top = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t off = 0;
        for (int32_t k = 0; k < i && placed[k]->offset < off + b[i].size; k++) {
            const tbuf *o = placed[k];
            if (!(o->last < b[i].def || b[i].last < o->def) && o->offset + o->size > off)
                off = (o->offset + o->size + 63) & ~(size_t)63;
        }
        b[i].offset = off;
        if (off + b[i].size > *top)
            *top = off + b[i].size;
        int32_t lo = 0, hi = i; /* after every placed buffer at an offset <= off */
        while (lo < hi) {
            int32_t mid = lo + (hi - lo) / 2;
            if (placed[mid]->offset <= off)
                lo = mid + 1;
            else
                hi = mid;
        }
        memmove(placed + lo + 1, placed + lo, (size_t)(i - lo) * sizeof *placed);
        placed[lo] = &b[i];
    }
    ir_free(placed);
    return true;
}

void
jit_sched_free(jit_sched *s)
{
    ir_free(s->order);
    ir_free(s->refnode);
    memset(s, 0, sizeof *s);
}

kiln_status
jit_schedule(planner *p, jit_sched *sc)
{
    kiln_status st = KILN_OK;
    const kiln_graph *g = p->g;
    int32_t *step_of_cluster = NULL, *step_of_ref = NULL, *order = NULL, *indeg = NULL;
    int32_t *key = NULL, *refnode = NULL;
    ivec *deps = NULL, reads = {0};
    int32_t nsteps = 0;
    memset(sc, 0, sizeof *sc);
    /* steps: clusters, then reference nodes */
    step_of_cluster = ir_calloc((size_t)p->ncl + 1, sizeof(int32_t));
    step_of_ref = ir_calloc((size_t)g->nnodes + 1, sizeof(int32_t));
    if (!step_of_cluster || !step_of_ref) {
        st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
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
    refnode = ir_calloc((size_t)nsteps + 1, sizeof(int32_t));
    if (!step_of_cluster || !order || !indeg || !key || !deps || !refnode) {
        st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
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
        bool ok = refnode[s] >= 0 ? jit_step_reads(p, -1, refnode[s], &reads) : jit_step_reads(p, s, -1, &reads);
        if (!ok) {
            st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
            goto fail;
        }
        for (int32_t i = 0; i < reads.n; i++) {
            int32_t src = producer(p, reads.v[i], step_of_cluster, step_of_ref);
            if (src >= 0 && src != s) {
                if (!jit_ivec_push(&deps[src], s)) {
                            st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
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
            st = ir_error(KILN_ERR_INTERNAL, "kiln: internal error: fusion plan has a cycle");
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
        if (nd->op != IR_OP_INPUT && nd->op != IR_OP_CONSTANT && (step_of_ref[n] >= 0 || ni->stored)) {
            ni->step = pos[step_of_ref[n] >= 0 ? step_of_ref[n] : ni->cluster];
            ni->last_use = ni->step;
        }
    }
    for (int32_t i = 0; i < nsteps; i++) {
        int32_t s = order[i];
        if (!(refnode[s] >= 0 ? jit_step_reads(p, -1, refnode[s], &reads) : jit_step_reads(p, s, -1, &reads))) {
            st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
            goto fail;
        }
        for (int32_t k = 0; k < reads.n; k++)
            if (p->ni[reads.v[k]].last_use < i)
                p->ni[reads.v[k]].last_use = i;
    }
    if ((st = jit_schedule_place(p, sc)))
        goto fail;
    sc->nsteps = nsteps;
    sc->order = order;
    sc->refnode = refnode;
    order = refnode = NULL;
fail:
    ir_free(step_of_cluster);
    ir_free(step_of_ref);
    ir_free(order);
    ir_free(refnode);
    ir_free(indeg);
    ir_free(key);
    if (deps)
        for (int32_t s = 0; s < nsteps; s++)
            ir_free(deps[s].v);
    ir_free(deps);
    ir_free(reads.v);
    return st;
}

kiln_status
jit_schedule_place(planner *p, jit_sched *sc)
{
    const kiln_graph *g = p->g;
    for (int32_t n = 0; n < g->nnodes; n++) {
        nodeinfo *ni = &p->ni[n];
        const ir_node *nd = &g->nodes[n];
        ni->has_loc = nd->op == IR_OP_INPUT || nd->op == IR_OP_CONSTANT;
        if (nd->op == IR_OP_INPUT)
            ni->loc = (jit_loc){JIT_LOC_INPUT, nd->index, 0, NULL};
        else if (nd->op == IR_OP_CONSTANT)
            ni->loc = (jit_loc){JIT_LOC_CONST, 0, 0, nd->at->data};
    }
    int32_t ntb = 0;
    tbuf *tb = ir_calloc((size_t)g->nnodes + 1, sizeof *tb);
    if (!tb)
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
    for (int32_t i = 0; i < g->noutputs; i++) {
        int32_t n = g->outputs[i].node;
        if (p->ni[n].alias)
            n = p->ni[n].alias - 1;
        if (!p->ni[n].has_loc && p->ni[n].step >= 0) {
            p->ni[n].loc = (jit_loc){JIT_LOC_OUTPUT, i, 0, NULL};
            p->ni[n].has_loc = true;
        }
    }
    for (int32_t n = 0; n < g->nnodes; n++)
        if (!p->ni[n].has_loc && p->ni[n].step >= 0)
            tb[ntb++] = (tbuf){n, p->ni[n].step, p->ni[n].last_use,
                               (ir_type_bytes(&g->nodes[n].type) + 63) & ~(size_t)63, 0};
    if (!pack(tb, ntb, &sc->temp_bytes)) {
        ir_free(tb);
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
    }
    for (int32_t i = 0; i < ntb; i++) {
        p->ni[tb[i].node].loc = (jit_loc){JIT_LOC_TEMP, 0, tb[i].offset, NULL};
        p->ni[tb[i].node].has_loc = true;
    }

    for (int32_t i = 0; i < g->noutputs; i++) {
        nodeinfo *ni = &p->ni[g->outputs[i].node];
        if (ni->alias) {
            ni->loc = p->ni[ni->alias - 1].loc;
            ni->has_loc = true;
        }
    }
    ir_free(tb);
    return KILN_OK;
}

/* ---- what a step reads (fuse.c's classes and views; describe.c uses them too) ---------- */

/* The node whose buffer a load of n (from cluster c) reads, and its view. */
const view *
jit_load_source(planner *p, int32_t n, int32_t c, view *tmp)
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

/* Buffers (node ids) read by a step: a cluster (c >= 0) or the reference step of node r. */
bool
jit_step_reads(planner *p, int32_t c, int32_t r, ivec *out)
{
    const kiln_graph *g = p->g;
    view tmp;
    out->n = 0;
    if (r >= 0) {
        const ir_node *nd = &g->nodes[r];
        for (int k = 0; k < nd->nin; k++) {
            int32_t x = nd->in[k];
            if (!jit_ivec_push(out, p->ni[x].cls == C_VIEW && !p->ni[x].stored ? p->ni[x].v.base : x))
                return false;
        }
        return true;
    }
    cluster *cl = &p->cl[c];
    if (cl->copy_from >= 0)
        return jit_ivec_push(out, p->ni[cl->copy_from].v.base);
    if (cl->root_copy >= 0) {
        int32_t x = cl->root_copy;
        if (p->ni[x].cls == C_VIEW)
            return jit_ivec_push(out, p->ni[x].v.base);
        return true; /* a full: nothing read */
    }
    for (int32_t i = 0; i < cl->nmembers; i++) {
        const ir_node *nd = &g->nodes[cl->members[i]];
        for (int k = 0; k < nd->nin; k++) {
            int32_t x = nd->in[k];
            if (p->ni[x].folded)
                x = p->ni[x].folded - 1; /* packing reads it */
            /* a full is a splat in the instructions, but indexed loads and matmul's packing
             * read the buffer it was materialised in */
            if ((p->ni[x].cls == C_ELEM && p->ni[x].cluster == c) ||
                (p->ni[x].cls == C_FULL && !jit_op_is_indexing(nd->op) && nd->op != IR_OP_MATMUL))
                continue;
            if (!jit_ivec_push(out, jit_load_source(p, x, c, &tmp)->base))
                return false;
        }
    }
    return true;
}

bool
jit_ivec_push(ivec *a, int32_t x)
{
    if (a->n == a->cap) {
        int32_t m = a->cap ? 2 * a->cap : 16;
        int32_t *v = ir_realloc(a->v, sizeof(int32_t) * (size_t)m);
        if (!v) {
            ir_error(KILN_ERR_NOMEM, "kiln: out of memory planning");
            return false;
        }
        a->v = v;
        a->cap = m;
    }
    a->v[a->n++] = x;
    return true;
}
