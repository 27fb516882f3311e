/* verify.c — the type and shape rule of every op (one switch over the op table's kinds
 * and rules), used when a node is recorded and again by the whole-graph verifier.
 * Every message has the form "<api>: <problem>: <detail>"; the caller's `api` names the
 * context (a capture API function, a parser position, or "node N (op)"). */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define TS(t, b) ir_type_str((t), (b), sizeof(b))
#define SS(s, b) ir_shape_str((s), (b), sizeof(b))

static bool
dtype_ok(ir_trule r, kiln_dtype t)
{
    switch (r) {
    case IR_T_ANY:
    case IR_T_EQ:
        return true;
    case IR_T_NUM:
    case IR_T_CMP:
        return t != KILN_DTYPE_BOOL;
    case IR_T_FLOAT:
    case IR_T_FTEST:
        return ir_dtype_is_float(t);
    case IR_T_LOGIC:
        return t == KILN_DTYPE_BOOL || ir_dtype_is_int(t);
    case IR_T_SPECIAL:
        return true;
    }
    return false;
}

static const char *
rule_text(ir_trule r)
{
    switch (r) {
    case IR_T_NUM:
    case IR_T_CMP:
        return "a numeric dtype (f32, f64, i32, i64)";
    case IR_T_FLOAT:
    case IR_T_FTEST:
        return "a float dtype (f32, f64)";
    case IR_T_LOGIC:
        return "bool, i32 or i64";
    default:
        return "any dtype";
    }
}

static kiln_dtype
result_dtype(ir_trule r, kiln_dtype t)
{
    return r == IR_T_FTEST || r == IR_T_CMP || r == IR_T_EQ ? KILN_DTYPE_BOOL : t;
}

static kiln_status
check_dtype(const char *api, ir_op op, kiln_dtype t)
{
    if (!dtype_ok(ir_ops[op].trule, t))
        return ir_error(KILN_ERR_DTYPE, "%s: dtype mismatch: %s needs %s, got %s", api,
                        ir_ops[op].name, rule_text(ir_ops[op].trule), kiln_dtype_name(t));
    return KILN_OK;
}

static kiln_status
infer_source(const char *api, ir_op op, const ir_attrs *at, const ir_type *given, ir_type *out)
{
    char b[IR_TYPE_STR_MAX];
    if (!given)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: missing type: %s needs a result type", api,
                        ir_ops[op].name);
    if (!ir_dtype_is_valid((int)given->dtype))
        return ir_error(KILN_ERR_DTYPE, "%s: bad dtype: %d", api, (int)given->dtype);
    kiln_status st = ir_shape_check(api, given->dtype, &given->shape);
    if (st)
        return st;
    if (op == IR_OP_ARANGE) {
        if (given->shape.rank != 1)
            return ir_error(KILN_ERR_SHAPE, "%s: bad shape: arange is rank 1, got %s", api,
                            TS(given, b));
        if (given->dtype == KILN_DTYPE_BOOL)
            return ir_error(KILN_ERR_DTYPE, "%s: dtype mismatch: arange needs %s, got bool",
                            api, rule_text(IR_T_NUM));
    }
    if (op == IR_OP_CONSTANT && !at->data && ir_type_bytes(given) > 0)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: missing data: constant %s has no data", api,
                        TS(given, b));
    *out = *given;
    return KILN_OK;
}

static kiln_status
infer_reduce(const char *api, ir_op op, const ir_type *x, const ir_attrs *at, ir_type *out)
{
    char b[IR_TYPE_STR_MAX];
    int rank = x->shape.rank;
    if (rank < 32 && (at->axes >> rank) != 0)
        return ir_error(KILN_ERR_SHAPE, "%s: bad axes: %s of %s reduces an axis >= rank %d",
                        api, ir_ops[op].name, TS(x, b), rank);
    bool arg = op == IR_OP_ARGMAX || op == IR_OP_ARGMIN;
    if (arg) {
        if (x->dtype == KILN_DTYPE_BOOL)
            return ir_error(KILN_ERR_DTYPE, "%s: dtype mismatch: %s needs %s, got bool", api,
                            ir_ops[op].name, rule_text(IR_T_NUM));
        if (at->axes == 0 || (at->axes & (at->axes - 1)) != 0)
            return ir_error(KILN_ERR_SHAPE, "%s: bad axes: %s reduces exactly one axis", api,
                            ir_ops[op].name);
    } else {
        kiln_status st = check_dtype(api, op, x->dtype);
        if (st)
            return st;
    }
    bool needs_elements = arg || op == IR_OP_REDUCE_MAX || op == IR_OP_REDUCE_MIN;
    out->dtype = arg ? KILN_DTYPE_I64 : x->dtype;
    out->shape.rank = 0;
    for (int i = 0; i < rank; i++) {
        if (at->axes & (1u << i)) {
            if (needs_elements && x->shape.dims[i] == 0)
                return ir_error(KILN_ERR_SHAPE,
                                "%s: empty reduction: %s over axis %d of %s, which has size 0",
                                api, ir_ops[op].name, i, TS(x, b));
            if (at->keepdim)
                out->shape.dims[out->shape.rank++] = 1;
        } else {
            out->shape.dims[out->shape.rank++] = x->shape.dims[i];
        }
    }
    return KILN_OK;
}

static kiln_status
infer_matmul(const char *api, const ir_type *a, const ir_type *b, ir_type *out)
{
    char ba[IR_TYPE_STR_MAX], bb[IR_TYPE_STR_MAX];
    if (a->dtype != b->dtype)
        return ir_error(KILN_ERR_DTYPE, "%s: dtype mismatch: %s vs %s", api, TS(a, ba),
                        TS(b, bb));
    if (!dtype_ok(IR_T_NUM, a->dtype))
        return ir_error(KILN_ERR_DTYPE, "%s: dtype mismatch: matmul needs %s, got %s", api,
                        rule_text(IR_T_NUM), kiln_dtype_name(a->dtype));
    if (a->shape.rank < 1 || b->shape.rank < 1)
        return ir_error(KILN_ERR_SHAPE, "%s: shape mismatch: matmul needs rank >= 1, got %s @ %s",
                        api, TS(a, ba), TS(b, bb));
    /* Promote 1-D operands: a [k] -> [1,k], b [k] -> [k,1]; drop those axes after. */
    ir_shape sa = a->shape, sb = b->shape;
    bool a1 = sa.rank == 1, b1 = sb.rank == 1;
    if (a1) { sa.rank = 2; sa.dims[1] = sa.dims[0]; sa.dims[0] = 1; }
    if (b1) { sb.rank = 2; sb.dims[1] = 1; }
    int64_t m = sa.dims[sa.rank - 2], k = sa.dims[sa.rank - 1];
    int64_t k2 = sb.dims[sb.rank - 2], n = sb.dims[sb.rank - 1];
    if (k != k2)
        return ir_error(KILN_ERR_SHAPE,
                        "%s: shape mismatch: matmul contracts %lld with %lld: %s @ %s", api,
                        (long long)k, (long long)k2, TS(a, ba), TS(b, bb));
    ir_shape batch_a = {sa.rank - 2, {0}}, batch_b = {sb.rank - 2, {0}}, batch;
    memcpy(batch_a.dims, sa.dims, sizeof(int64_t) * (size_t)batch_a.rank);
    memcpy(batch_b.dims, sb.dims, sizeof(int64_t) * (size_t)batch_b.rank);
    if (!ir_broadcast(&batch_a, &batch_b, &batch))
        return ir_error(KILN_ERR_SHAPE,
                        "%s: shape mismatch: matmul batch dimensions do not broadcast: %s @ %s",
                        api, TS(a, ba), TS(b, bb));
    out->dtype = a->dtype;
    out->shape = batch;
    if (!a1)
        out->shape.dims[out->shape.rank++] = m;
    if (!b1)
        out->shape.dims[out->shape.rank++] = n;
    return KILN_OK;
}

static kiln_status
infer_move(const char *api, ir_op op, const kiln_graph *g, int nin, const int32_t *in,
           const ir_attrs *at, ir_type *out)
{
    char b1[IR_TYPE_STR_MAX], b2[IR_TYPE_STR_MAX];
    const ir_type *x = &g->nodes[in[0]].type;
    int rank = x->shape.rank;
    out->dtype = x->dtype;
    switch (op) {
    case IR_OP_RESHAPE: {
        kiln_status st = ir_shape_check(api, x->dtype, &at->shape);
        if (st)
            return st;
        if (ir_shape_count(&at->shape) != ir_shape_count(&x->shape))
            return ir_error(KILN_ERR_SHAPE,
                            "%s: shape mismatch: reshape %s to %s changes the element count",
                            api, TS(x, b1), SS(&at->shape, b2));
        out->shape = at->shape;
        return KILN_OK;
    }
    case IR_OP_EXPAND: {
        kiln_status st = ir_shape_check(api, x->dtype, &at->shape);
        if (st)
            return st;
        const ir_shape *t = &at->shape;
        bool ok = t->rank >= rank;
        for (int i = 0; ok && i < rank; i++) {
            int64_t d = x->shape.dims[i], e = t->dims[t->rank - rank + i];
            ok = d == e || d == 1;
        }
        if (!ok)
            return ir_error(KILN_ERR_SHAPE, "%s: shape mismatch: cannot expand %s to %s", api,
                            TS(x, b1), SS(t, b2));
        out->shape = *t;
        return KILN_OK;
    }
    case IR_OP_PERMUTE: {
        unsigned seen = 0;
        for (int i = 0; i < rank; i++) {
            int p = at->perm[i];
            if (p < 0 || p >= rank || (seen & (1u << p)))
                return ir_error(KILN_ERR_SHAPE,
                                "%s: bad perm: not a permutation of the %d axes of %s", api,
                                rank, TS(x, b1));
            seen |= 1u << p;
            out->shape.dims[i] = x->shape.dims[p];
        }
        out->shape.rank = rank;
        return KILN_OK;
    }
    case IR_OP_SLICE:
        out->shape.rank = rank;
        for (int i = 0; i < rank; i++) {
            if (at->step[i] == 0)
                return ir_error(KILN_ERR_SHAPE, "%s: bad slice: step of axis %d is 0", api, i);
            int64_t first;
            ir_slice_axis(x->shape.dims[i], at->begin[i], at->stop[i], at->step[i], &first,
                          &out->shape.dims[i]);
        }
        return KILN_OK;
    case IR_OP_PAD:
        out->shape.rank = rank;
        for (int i = 0; i < rank; i++) {
            if (at->low[i] < 0 || at->high[i] < 0)
                return ir_error(KILN_ERR_SHAPE, "%s: bad pad: negative padding on axis %d", api,
                                i);
            if (at->low[i] > (int64_t)IR_MAX_BYTES || at->high[i] > (int64_t)IR_MAX_BYTES)
                return ir_error(KILN_ERR_OVERFLOW, "%s: tensor too large: padding of axis %d",
                                api, i);
            out->shape.dims[i] = x->shape.dims[i] + at->low[i] + at->high[i];
        }
        return ir_shape_check(api, out->dtype, &out->shape);
    case IR_OP_CONCAT: {
        int axis = at->axis;
        if (rank == 0 || axis < 0 || axis >= rank)
            return ir_error(KILN_ERR_SHAPE, "%s: bad axis: concat axis %d of rank %d", api, axis,
                            rank);
        out->shape = x->shape;
        for (int k = 1; k < nin; k++) {
            const ir_type *y = &g->nodes[in[k]].type;
            if (y->dtype != x->dtype)
                return ir_error(KILN_ERR_DTYPE, "%s: dtype mismatch: concat of %s and %s", api,
                                TS(x, b1), TS(y, b2));
            bool ok = y->shape.rank == rank;
            for (int i = 0; ok && i < rank; i++)
                ok = i == axis || y->shape.dims[i] == x->shape.dims[i];
            if (!ok)
                return ir_error(KILN_ERR_SHAPE,
                                "%s: shape mismatch: concat along axis %d of %s and %s", api,
                                axis, TS(x, b1), TS(y, b2));
            out->shape.dims[axis] += y->shape.dims[axis];
            if (out->shape.dims[axis] > (int64_t)IR_MAX_BYTES)
                return ir_error(KILN_ERR_OVERFLOW, "%s: tensor too large: concat axis %d", api,
                                axis);
        }
        return ir_shape_check(api, out->dtype, &out->shape);
    }
    case IR_OP_GATHER: {
        const ir_type *idx = &g->nodes[in[1]].type;
        int axis = at->axis;
        if (!ir_dtype_is_int(idx->dtype))
            return ir_error(KILN_ERR_DTYPE, "%s: dtype mismatch: gather indices must be i32 or i64, got %s",
                            api, TS(idx, b1));
        if (rank == 0 || axis < 0 || axis >= rank)
            return ir_error(KILN_ERR_SHAPE, "%s: bad axis: gather axis %d of rank %d", api, axis,
                            rank);
        if (rank - 1 + idx->shape.rank > IR_MAX_RANK)
            return ir_error(KILN_ERR_SHAPE, "%s: bad rank: gather of %s with indices %s has rank > %d",
                            api, TS(x, b1), TS(idx, b2), IR_MAX_RANK);
        int r = 0;
        for (int i = 0; i < axis; i++)
            out->shape.dims[r++] = x->shape.dims[i];
        for (int i = 0; i < idx->shape.rank; i++)
            out->shape.dims[r++] = idx->shape.dims[i];
        for (int i = axis + 1; i < rank; i++)
            out->shape.dims[r++] = x->shape.dims[i];
        out->shape.rank = r;
        return ir_shape_check(api, out->dtype, &out->shape);
    }
    default:
        IR_ASSERT(!"not a movement op");
    }
}

kiln_status
ir_infer(const kiln_graph *g, const char *api, ir_op op, int nin, const int32_t *in,
         const ir_attrs *at, const ir_type *given, ir_type *out)
{
    char b1[IR_TYPE_STR_MAX], b2[IR_TYPE_STR_MAX], b3[IR_TYPE_STR_MAX];
    const ir_op_info *info = &ir_ops[op];
    kiln_status st = KILN_OK;
    ir_type r = {0};

    if (info->arity >= 0 && nin != info->arity)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: wrong operand count: %s takes %d, got %d", api,
                        info->name, info->arity, nin);
    if (info->arity < 0 && nin < 1)
        return ir_error(KILN_ERR_INVALID_ARG,
                        "%s: wrong operand count: %s takes 1 or more, got %d", api, info->name,
                        nin);
    if (nin > 0 && !in)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: bad operand: %s operands are NULL", api,
                        info->name);
    for (int i = 0; i < nin; i++)
        if (in[i] < 0 || in[i] >= g->nnodes)
            return ir_error(KILN_ERR_INVALID_ARG, "%s: bad operand: %s operand %d is node %d of %d",
                            api, info->name, i, (int)in[i], (int)g->nnodes);
    const ir_type *x = nin > 0 ? &g->nodes[in[0]].type : NULL;

    switch (info->kind) {
    case IR_KIND_SOURCE:
        return infer_source(api, op, at, given, out);
    case IR_KIND_UNARY:
        if ((st = check_dtype(api, op, x->dtype)))
            return st;
        r.dtype = result_dtype(info->trule, x->dtype);
        r.shape = x->shape;
        break;
    case IR_KIND_BINARY: {
        const ir_type *y = &g->nodes[in[1]].type;
        if (x->dtype != y->dtype)
            return ir_error(KILN_ERR_DTYPE, "%s: dtype mismatch: %s vs %s", api, TS(x, b1),
                            TS(y, b2));
        if ((st = check_dtype(api, op, x->dtype)))
            return st;
        if (!ir_broadcast(&x->shape, &y->shape, &r.shape))
            return ir_error(KILN_ERR_SHAPE, "%s: shape mismatch: %s vs %s", api,
                            SS(&x->shape, b1), SS(&y->shape, b2));
        r.dtype = result_dtype(info->trule, x->dtype);
        break;
    }
    case IR_KIND_TERNARY: {
        const ir_type *y = &g->nodes[in[1]].type, *z = &g->nodes[in[2]].type;
        if (op == IR_OP_WHERE) {
            if (x->dtype != KILN_DTYPE_BOOL)
                return ir_error(KILN_ERR_DTYPE, "%s: dtype mismatch: where condition must be bool, got %s",
                                api, TS(x, b1));
            if (y->dtype != z->dtype)
                return ir_error(KILN_ERR_DTYPE, "%s: dtype mismatch: %s vs %s", api, TS(y, b1),
                                TS(z, b2));
        } else {
            if (x->dtype != y->dtype || x->dtype != z->dtype)
                return ir_error(KILN_ERR_DTYPE, "%s: dtype mismatch: %s, %s, %s", api, TS(x, b1),
                                TS(y, b2), TS(z, b3));
            if ((st = check_dtype(api, op, x->dtype)))
                return st;
        }
        ir_shape s;
        if (!ir_broadcast(&x->shape, &y->shape, &s) || !ir_broadcast(&s, &z->shape, &r.shape))
            return ir_error(KILN_ERR_SHAPE, "%s: shape mismatch: %s vs %s vs %s", api,
                            SS(&x->shape, b1), SS(&y->shape, b2), SS(&z->shape, b3));
        r.dtype = y->dtype;
        break;
    }
    case IR_KIND_CAST:
        if (!ir_dtype_is_valid((int)at->to))
            return ir_error(KILN_ERR_DTYPE, "%s: bad dtype: cast to %d", api, (int)at->to);
        r.dtype = at->to;
        r.shape = x->shape;
        break;
    case IR_KIND_MOVE:
        if ((st = infer_move(api, op, g, nin, in, at, &r)))
            return st;
        break;
    case IR_KIND_REDUCE:
        if ((st = infer_reduce(api, op, x, at, &r)))
            return st;
        break;
    case IR_KIND_MATMUL:
        if ((st = infer_matmul(api, x, &g->nodes[in[1]].type, &r)))
            return st;
        break;
    }
    /* Broadcasting, a wider cast target, matmul's batch broadcast or argmax's i64 can make
     * the result larger than every operand: the size limit applies to it too. */
    if ((st = ir_shape_check(api, r.dtype, &r.shape)))
        return st;
    if (given && !ir_type_equal(given, &r))
        return ir_error(KILN_ERR_VERIFY, "%s: type mismatch: %s gives %s, stated %s", api,
                        info->name, TS(&r, b1), TS(given, b2));
    *out = r;
    return KILN_OK;
}

/* ---- whole-graph verifier ------------------------------------------------------------ */

static uint64_t
str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Open-addressing set of names; returns false if `name` was already present. */
static bool
name_insert(const char **tab, size_t cap, const char *name)
{
    size_t i = (size_t)str_hash(name) & (cap - 1);
    while (tab[i]) {
        if (strcmp(tab[i], name) == 0)
            return false;
        i = (i + 1) & (cap - 1);
    }
    tab[i] = name;
    return true;
}

static const char *
node_label(const kiln_graph *g, int32_t id, char *buf, size_t n)
{
    const ir_node *nd = &g->nodes[id];
    /* Called before the op is checked: a corrupt op must not index the table. */
    const char *op = (int)nd->op >= 0 && nd->op < IR_OP_COUNT ? ir_ops[nd->op].name : "?";
    if (nd->name)
        snprintf(buf, n, "kiln_graph_verify: node %d '%s' (%s)", (int)id, nd->name, op);
    else
        snprintf(buf, n, "kiln_graph_verify: node %d (%s)", (int)id, op);
    return buf;
}

kiln_status
ir_graph_verify(const kiln_graph *g)
{
    char api[256];
    kiln_status st = KILN_OK;
    /* The counts size the name table below: a corrupt (negative) count must not make it
     * loop or wrap. */
    if (g->nnodes < 0 || g->nnodes > IR_MAX_NODES || g->ninputs < 0 || g->ninputs > g->nnodes ||
        g->noutputs < 0)
        return ir_error(KILN_ERR_VERIFY,
                        "kiln_graph_verify: bad counts: %d nodes, %d inputs, %d outputs",
                        (int)g->nnodes, (int)g->ninputs, (int)g->noutputs);
    size_t cap = 16;
    while (cap < 2 * ((size_t)g->nnodes + (size_t)g->noutputs) + 2)
        cap *= 2;
    const char **names = ir_calloc(cap, sizeof *names);
    if (!names)
        return ir_error(KILN_ERR_NOMEM, "kiln_graph_verify: out of memory");

    for (int32_t i = 0; i < g->ninputs; i++) {
        int32_t id = g->inputs[i];
        if (id < 0 || id >= g->nnodes || g->nodes[id].op != IR_OP_INPUT ||
            g->nodes[id].index != i) {
            st = ir_error(KILN_ERR_VERIFY,
                          "kiln_graph_verify: bad input list: entry %d names node %d, not input %d",
                          (int)i, (int)id, (int)i);
            goto done;
        }
    }
    /* the node's label only for a message (formatting it for every node cost more than
     * the checks) */
#define LABEL() node_label(g, id, api, sizeof api)
    for (int32_t id = 0; id < g->nnodes; id++) {
        const ir_node *nd = &g->nodes[id];
        if ((int)nd->op < 0 || nd->op >= IR_OP_COUNT) {
            st = ir_error(KILN_ERR_VERIFY, "%s: bad op: %d", LABEL(), (int)nd->op);
            goto done;
        }
        if (nd->nin < 0 || (nd->nin > 0 && !nd->in)) {
            st = ir_error(KILN_ERR_VERIFY, "%s: bad operands: %d operands at %p", LABEL(), nd->nin,
                          (const void *)nd->in);
            goto done;
        }
        for (int k = 0; k < nd->nin; k++)
            if (nd->in[k] < 0 || nd->in[k] >= id) {
                st = ir_error(KILN_ERR_VERIFY,
                              "%s: not in topological order: operand %d is node %d", LABEL(), k,
                              (int)nd->in[k]);
                goto done;
            }
        if (nd->name && !nd->name[0]) {
            st = ir_error(KILN_ERR_VERIFY, "%s: bad name: a value name is empty", LABEL());
            goto done;
        }
        if (nd->name && !name_insert(names, cap, nd->name)) {
            st = ir_error(KILN_ERR_VERIFY, "%s: duplicate name: '%s' is defined twice", LABEL(),
                          nd->name);
            goto done;
        }
        if (nd->op == IR_OP_INPUT) {
            int idx = nd->index;
            if (!nd->name) {
                st = ir_error(KILN_ERR_VERIFY, "%s: bad name: an input needs a name", LABEL());
                goto done;
            }
            if (idx < 0 || idx >= g->ninputs || g->inputs[idx] != id) {
                st = ir_error(KILN_ERR_VERIFY, "%s: input not declared in the graph's inputs",
                              LABEL());
                goto done;
            }
            if (nd->nin != 0) {
                st = ir_error(KILN_ERR_VERIFY, "%s: wrong operand count: input takes 0, got %d",
                              LABEL(), nd->nin);
                goto done;
            }
            if (!ir_dtype_is_valid((int)nd->type.dtype)) {
                st = ir_error(KILN_ERR_DTYPE, "%s: bad dtype: %d", LABEL(), (int)nd->type.dtype);
                goto done;
            }
            if ((st = ir_shape_check("kiln_graph_verify", nd->type.dtype, &nd->type.shape))) {
                kiln_clear_error(); /* again, for the message naming the node */
                st = ir_shape_check(LABEL(), nd->type.dtype, &nd->type.shape);
                goto done;
            }
            continue;
        }
        ir_type t;
        if ((st = ir_infer(g, "kiln_graph_verify", nd->op, nd->nin, nd->in, nd->at, &nd->type, &t))) {
            kiln_clear_error(); /* again, for the message naming the node */
            st = ir_infer(g, LABEL(), nd->op, nd->nin, nd->in, nd->at, &nd->type, &t);
            goto done;
        }
    }
#undef LABEL
    /* Output names live in their own namespace: an output may be named like its value. */
    memset(names, 0, cap * sizeof *names);
    for (int32_t i = 0; i < g->noutputs; i++) {
        const ir_output *o = &g->outputs[i];
        if (o->node < 0 || o->node >= g->nnodes) {
            st = ir_error(KILN_ERR_BOUNDARY, "kiln_graph_verify: bad output: '%s' names node %d",
                          o->name ? o->name : "?", (int)o->node);
            goto done;
        }
        if (!o->name || !o->name[0]) {
            st = ir_error(KILN_ERR_BOUNDARY, "kiln_graph_verify: bad output: output %d has no name",
                          (int)i);
            goto done;
        }
        if (!name_insert(names, cap, o->name)) {
            st = ir_error(KILN_ERR_BOUNDARY, "kiln_graph_verify: duplicate output: '%s'",
                          o->name);
            goto done;
        }
    }
done:
    ir_free(names);
    return st;
}
