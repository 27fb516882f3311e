/* simplify.c — before planning: dead-code elimination (nodes no output needs), common
 * subexpressions (same op, operands and attributes), folding of elementwise ops whose
 * operands are all `full` (the result is a `full` computed by the reference interpreter,
 * so folding never changes a value), a matmul whose contracted dim is 1 made the
 * broadcast mul it is (k1_matmul: an elementwise op, fused where its reader is, not a
 * contraction kernel of its own), and a skinny matmul of a concatenated B split into one
 * matmul per part (split_concat_matmul), so that no concat is copied on its way to a
 * matmul that reads B in place. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit.h"

static bool
same_attrs(const ir_attrs *a, const ir_attrs *b)
{
    return memcmp(&a->value, &b->value, sizeof a->value) == 0 &&
           memcmp(&a->start, &b->start, sizeof a->start) == 0 &&
           memcmp(&a->delta, &b->delta, sizeof a->delta) == 0 &&
           memcmp(a->begin, b->begin, sizeof a->begin) == 0 &&
           memcmp(a->stop, b->stop, sizeof a->stop) == 0 &&
           memcmp(a->step, b->step, sizeof a->step) == 0 &&
           memcmp(a->low, b->low, sizeof a->low) == 0 &&
           memcmp(a->high, b->high, sizeof a->high) == 0 && a->to == b->to &&
           ir_shape_equal(&a->shape, &b->shape) &&
           memcmp(a->perm, b->perm, sizeof a->perm) == 0 && a->axis == b->axis &&
           a->axes == b->axes && a->keepdim == b->keepdim;
}

static uint64_t
node_key(ir_op op, int nin, const int32_t *in)
{
    uint64_t h = 0x9e3779b97f4a7c15ull * ((uint64_t)op + 1);
    for (int i = 0; i < nin; i++)
        h = (h ^ (uint64_t)in[i]) * 0x100000001b3ull;
    return h;
}

/* Evaluate elementwise `op` on rank-0 `full` operands: the folded scalar. */
static kiln_status
fold(const kiln_graph *ng, const ir_node *old, const int32_t *in, ir_scalar *value)
{
    kiln_graph *t = ir_graph_new("fold");
    if (!t)
        return KILN_ERR_NOMEM;
    int32_t ids[3];
    kiln_status st = KILN_OK;
    for (int i = 0; i < old->nin && !st; i++) {
        const ir_node *src = &ng->nodes[in[i]];
        ir_type ty = {src->type.dtype, {0, {0}}};
        ids[i] = ir_graph_add_node(t, "fold", IR_OP_FULL, 0, NULL, src->at, &ty, NULL);
        if (ids[i] < 0)
            st = kiln_errcode();
    }
    int32_t r = st ? -1 : ir_graph_add_node(t, "fold", old->op, old->nin, ids, old->at, NULL, NULL);
    if (r < 0 || ir_graph_add_output(t, "r", r)) {
        kiln_graph_free(t);
        return kiln_errcode();
    }
    memset(value, 0, sizeof *value);
    void *outs[1] = {value->bytes};
    st = ir_interpret(t, NULL, outs);
    kiln_graph_free(t);
    return st;
}

/* Is node nd of g (operands in[] of ng) a matmul whose contracted dim is 1?  Then
 * a[..., M, 1] @ b[..., 1, N] is mul(a, b), NumPy's broadcast giving [..., M, N] with the
 * batch axes broadcast as matmul broadcasts them, and every element is one product, the
 * same value bit for bit: the reference's sum starts from its first product and rounds
 * once (an f32 product is exact in double), and a compiled matmul's accumulator starts
 * from -0.0 (-0.0 + x is x, a zero product's sign included); ints wrap alike.  Both
 * operands of rank 2 or more (a 1-D operand's added axis is dropped from the result).
 * Decided by sizes equal to 1 alone, which a plan at new sizes keeps (resize.c). */
static bool
k1_matmul(const kiln_graph *ng, const ir_node *nd, const int32_t *in)
{
    if (nd->op != IR_OP_MATMUL)
        return false;
    const ir_shape *a = &ng->nodes[in[0]].type.shape, *b = &ng->nodes[in[1]].type.shape;
    return a->rank >= 2 && b->rank >= 2 && a->dims[a->rank - 1] == 1;
}

/* A matmul whose rows per batch element fit a skinny kernel's tile (skinny.c: B read in
 * place, once) and whose B is a concat along K or N of its parts (through one permute, as
 * q @ permute(concat(k_past, k_new)) in a decoder's attention): the matmul of each part in
 * place of the concat, which would be stored (a view needs a buffer) and read again.
 *   along N: concat(a @ b_0, a @ b_1, ...) over the last axis;
 *   along K: a[..., k_0 : k_0 + K_0] @ b_0 + a[..., k_1 : ...] @ b_1 + ..., in part order
 *   (the sum over K in parts; within the propagated bound, and exact where the whole is).
 * Adds the nodes to ng and returns the result's id; -1 when the rule does not apply (or on
 * error, with *st set).  x, y: the matmul's operands in ng. */
static int32_t
split_concat_matmul(kiln_graph *ng, const ir_node *mm, int32_t x, int32_t y, kiln_status *st)
{
    const ir_node *a = &ng->nodes[x], *b = &ng->nodes[y];
    int ra = a->type.shape.rank, rb = b->type.shape.rank;
    if (ra < 2 || rb < 2 || a->type.shape.dims[ra - 2] > jit_skinny_max_rows(mm->type.dtype))
        return -1;
    const ir_node *perm = NULL, *cat = b;
    if (b->op == IR_OP_PERMUTE) {
        perm = b;
        cat = &ng->nodes[b->in[0]];
    }
    if (cat->op != IR_OP_CONCAT || cat->nin < 2)
        return -1;
    int ax = cat->at->axis; /* its axis in B */
    if (perm)
        for (int j = 0; j < rb; j++)
            if (perm->at->perm[j] == cat->at->axis)
                ax = j;
    if (ax != rb - 1 && ax != rb - 2)
        return -1;
    int32_t cat_id = perm ? perm->in[0] : y, nparts = cat->nin;
    ir_attrs pat = perm ? *perm->at : (ir_attrs){0};
    int32_t acc = -1, parts[IR_MAX_RANK > 16 ? IR_MAX_RANK : 16];
    if (nparts > (int32_t)(sizeof parts / sizeof parts[0]))
        return -1;
    int64_t k0 = 0;
    for (int32_t q = 0; q < nparts; q++) {
        int32_t part = ng->nodes[cat_id].in[q];
        int64_t ext = ng->nodes[part].type.shape.dims[ng->nodes[cat_id].at->axis];
        if (perm)
            part = ir_graph_add_node(ng, "kiln_jit", IR_OP_PERMUTE, 1, &part, &pat, NULL, NULL);
        if (part < 0)
            goto fail;
        int32_t ops[2] = {x, part};
        if (ax == rb - 2) {
            /* a's K range of this part */
            const ir_shape *as = &ng->nodes[x].type.shape;
            ir_attrs sl = {0};
            for (int i = 0; i < ra; i++) {
                sl.begin[i] = 0;
                sl.stop[i] = as->dims[i];
                sl.step[i] = 1;
            }
            sl.begin[ra - 1] = k0;
            sl.stop[ra - 1] = k0 + ext;
            ops[0] = ir_graph_add_node(ng, "kiln_jit", IR_OP_SLICE, 1, &x, &sl, NULL, NULL);
            if (ops[0] < 0)
                goto fail;
        }
        k0 += ext;
        int32_t m = ir_graph_add_node(ng, "kiln_jit", IR_OP_MATMUL, 2, ops, NULL, NULL, NULL);
        if (m < 0)
            goto fail;
        if (ax == rb - 1) {
            parts[q] = m;
        } else if (acc < 0) {
            acc = m;
        } else {
            int32_t s[2] = {acc, m};
            if ((acc = ir_graph_add_node(ng, "kiln_jit", IR_OP_ADD, 2, s, NULL, NULL, NULL)) < 0)
                goto fail;
        }
    }
    if (ax == rb - 1) {
        ir_attrs ca = {0};
        ca.axis = mm->type.shape.rank - 1;
        acc = ir_graph_add_node(ng, "kiln_jit", IR_OP_CONCAT, nparts, parts, &ca, NULL, NULL);
        if (acc < 0)
            goto fail;
    }
    if (!ir_type_equal(&ng->nodes[acc].type, &mm->type)) {
        *st = ir_error(KILN_ERR_INTERNAL, "kiln: internal error: a split matmul's type");
        return -1;
    }
    return acc;
fail:
    *st = kiln_errcode();
    return -1;
}

/* Could a matmul of g split over a concat (split_concat_matmul) at some sizes?  Its B is a
 * concat, or a permute of one: the split depends on A's rows, so such a graph's
 * simplification is not replayed at new sizes. */
static bool
may_split(const kiln_graph *g)
{
    for (int32_t i = 0; i < g->nnodes; i++) {
        const ir_node *nd = &g->nodes[i];
        if (nd->op != IR_OP_MATMUL)
            continue;
        const ir_node *b = &g->nodes[nd->in[1]];
        if (b->op == IR_OP_PERMUTE)
            b = &g->nodes[b->in[0]];
        if (b->op == IR_OP_CONCAT)
            return true;
    }
    return false;
}

void
jit_simplify_rec_free(jit_simplify_rec *r)
{
    ir_free(r->map);
    ir_free(r->orig);
    memset(r, 0, sizeof *r);
}

#define LOG(...) (lf ? fprintf(lf, __VA_ARGS__) : 0)

kiln_status
jit_simplify(const kiln_graph *g, kiln_graph **out, char **log, jit_simplify_rec *rec)
{
    kiln_status st = KILN_OK;
    int32_t n = g->nnodes;
    *out = NULL;
    if (log)
        *log = NULL;
    if (rec)
        memset(rec, 0, sizeof *rec);
    bool *live = ir_calloc((size_t)n + 1, sizeof *live);
    int32_t *map = ir_malloc(sizeof(int32_t) * ((size_t)n + 1));
    size_t cap = 64;
    while (cap < 2 * (size_t)n + 2)
        cap *= 2;
    int32_t *tab = ir_malloc(sizeof(int32_t) * cap); /* CSE: new node ids, -1 empty */
    int32_t in[IR_MAX_RANK > 3 ? IR_MAX_RANK : 3];
    int32_t *inbig = NULL;
    char *logbuf = NULL;
    size_t loglen = 0;
    /* the log only for plans explained (dumps): formatting it cost a fifth of simplifying
     * a decoder step */
    FILE *lf = log ? open_memstream(&logbuf, &loglen) : NULL;
    kiln_graph *ng = ir_graph_new(g->name);
    int dead = 0, merged = 0, folded = 0, split = 0, k1 = 0;
    int32_t *orig = rec ? ir_malloc(sizeof(int32_t) * ((size_t)n + 1)) : NULL;
    if (!live || !map || !tab || (log && !lf) || !ng || !ir_graph_reserve(ng, g->nnodes) ||
        (rec && !orig)) {
        st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory simplifying");
        goto done;
    }
    for (size_t i = 0; i < cap; i++)
        tab[i] = -1;
    for (int32_t i = 0; i < n; i++)
        map[i] = -1; /* dead */
    for (int32_t i = 0; i < g->noutputs; i++)
        live[g->outputs[i].node] = true;
    for (int32_t i = n - 1; i >= 0; i--)
        if (live[i] || g->nodes[i].op == IR_OP_INPUT) {
            live[i] = true;
            for (int k = 0; k < g->nodes[i].nin; k++)
                live[g->nodes[i].in[k]] = true;
        }
    for (int32_t i = 0; i < g->ninputs; i++) {
        const ir_node *nd = &g->nodes[g->inputs[i]];
        if ((map[g->inputs[i]] = ir_graph_add_input(ng, nd->name, &nd->type)) < 0) {
            st = kiln_errcode();
            goto done;
        }
        if (orig)
            orig[map[g->inputs[i]]] = g->inputs[i];
    }
    for (int32_t i = 0; i < n; i++) {
        const ir_node *nd = &g->nodes[i];
        if (nd->op == IR_OP_INPUT)
            continue;
        if (!live[i]) {
            dead++;
            LOG("  removed %%%d %s: no output needs it\n", (int)i, ir_ops[nd->op].name);
            continue;
        }
        int32_t *ins = in;
        if (nd->nin > (int)(sizeof in / sizeof in[0])) {
            ir_free(inbig);
            inbig = ir_malloc(sizeof(int32_t) * (size_t)nd->nin);
            if (!inbig) {
                st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory simplifying");
                goto done;
            }
            ins = inbig;
        }
        bool all_full = ir_op_is_elementwise(nd->op) && nd->nin > 0;
        for (int k = 0; k < nd->nin; k++) {
            ins[k] = map[nd->in[k]];
            all_full = all_full && ng->nodes[ins[k]].op == IR_OP_FULL;
        }
        /* a matmul of K = 1 is the mul it is made (below) */
        bool mul1 = k1_matmul(ng, nd, ins);
        ir_op op = mul1 ? IR_OP_MUL : nd->op;
        /* Common subexpressions (constants are compared by value too). */
        uint64_t h = node_key(op, nd->nin, ins);
        size_t slot = (size_t)h & (cap - 1);
        int32_t found = -1;
        for (; tab[slot] >= 0; slot = (slot + 1) & (cap - 1)) {
            const ir_node *c = &ng->nodes[tab[slot]];
            if (c->op == op && c->nin == nd->nin && ir_type_equal(&c->type, &nd->type) &&
                (nd->nin == 0 || memcmp(c->in, ins, sizeof(int32_t) * (size_t)nd->nin) == 0) &&
                same_attrs(c->at, nd->at) &&
                (nd->op != IR_OP_CONSTANT ||
                 memcmp(c->at->data, nd->at->data, ir_type_bytes(&nd->type)) == 0)) {
                found = tab[slot];
                break;
            }
        }
        if (found >= 0) {
            merged++;
            LOG("  merged %%%d %s into %%%d: same op, operands and attributes\n", (int)i,
                    ir_ops[nd->op].name, (int)found);
            map[i] = found;
            continue;
        }
        int32_t id;
        id = nd->op == IR_OP_MATMUL && !mul1 ? split_concat_matmul(ng, nd, ins[0], ins[1], &st)
                                             : -1;
        if (id >= 0) {
            map[i] = id;
            split++;
            LOG("  split %%%d matmul over the parts of the concat it reads as B (one "
                        "matmul each, B read in place)\n", (int)i);
            continue;
        }
        if (st)
            goto done;
        if (all_full) {
            ir_attrs at = {0};
            if ((st = fold(ng, nd, ins, &at.value)))
                goto done;
            id = ir_graph_add_node(ng, "kiln_jit", IR_OP_FULL, 0, NULL, &at, &nd->type, nd->name);
            folded++;
            LOG("  folded %%%d %s of full operands into a full\n", (int)i,
                    ir_ops[nd->op].name);
        } else if (mul1) {
            id = ir_graph_add_node(ng, "kiln_jit", IR_OP_MUL, 2, ins, NULL, NULL, nd->name);
            if (id >= 0 && !ir_type_equal(&ng->nodes[id].type, &nd->type)) {
                st = ir_error(KILN_ERR_INTERNAL, "kiln: internal error: a K = 1 matmul's type");
                goto done;
            }
            k1++;
            LOG("  made %%%d matmul a mul: its contracted dim is 1 (one product per element, "
                    "broadcast)\n", (int)i);
        } else {
            id = ir_graph_copy_node(ng, g, i, ins);
        }
        if (id < 0) {
            st = kiln_errcode();
            goto done;
        }
        map[i] = id;
        if (orig && id < n) /* (after a split, ids may pass n: nothing is kept then) */
            orig[id] = i;
        if (!all_full)
            tab[slot] = id;
    }
    for (int32_t i = 0; i < g->noutputs; i++)
        if ((st = ir_graph_add_output(ng, g->outputs[i].name, map[g->outputs[i].node])))
            goto done;
    LOG("simplify: %d dead, %d merged, %d folded", dead, merged, folded);
    if (k1)
        LOG(", %d matmuls of K = 1 made muls", k1);
    if (split)
        LOG(", %d matmuls split", split);
    LOG("; %d -> %d nodes\n", (int)g->nnodes, (int)ng->nnodes);
    if (split) {
        /* again, for the concats the splits left without a reader */
        kiln_graph *ng2;
        char *log2 = NULL;
        if ((st = jit_simplify(ng, &ng2, log ? &log2 : NULL, NULL)))
            goto done;
        LOG("again, over the split graph (its node numbers):\n");
        if (lf)
            fputs(log2, lf);
        free(log2);
        kiln_graph_free(ng);
        ng = ng2;
    }
    if (rec && !split && !may_split(g)) {
        rec->n0 = g->nnodes;
        rec->n1 = ng->nnodes;
        rec->map = map;
        rec->orig = orig;
        map = orig = NULL;
    }
done:
    if (lf)
        fclose(lf);
    ir_free(live);
    ir_free(map);
    ir_free(orig);
    ir_free(tab);
    ir_free(inbig);
    if (st) {
        kiln_graph_free(ng);
        free(logbuf);
        return st;
    }
    *out = ng;
    if (log)
        *log = logbuf;
    return KILN_OK;
}
