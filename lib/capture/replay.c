/* replay.c — a graph recorded again through the public tensor API (record.c's functions),
 * node by node, into the open scope of a device: what a client that captures the same
 * graph every step does.  `kiln bench` times it (its re-capture column); check_capture
 * checks that the graph recorded is the one replayed.
 *
 * It sits beside the recorder, not in the tool: it reads the graph's nodes (lib/ir) and
 * calls the capture API, the way dependencies point already (ir <- capture <- jit <-
 * tools).  The per-kind tables come from ops.def, so an op added there with a public
 * tensor function is replayed without a change here. */
#include "capture.h"

typedef kiln_tensor (*unary_fn)(kiln_tensor);
typedef kiln_tensor (*binary_fn)(kiln_tensor, kiln_tensor);
typedef kiln_tensor (*reduce_fn)(kiln_tensor, int, const int *, int);
#define DEF_SOURCE(E, name)
#define DEF_UNARY(E, name) [IR_OP_##E] = kiln_##name,
#define DEF_BINARY(E, name)
#define DEF_TERNARY(E, name)
#define DEF_CAST(E, name)
#define DEF_MOVE(E, name)
#define DEF_REDUCE(E, name)
#define DEF_MATMUL(E, name)
static const unary_fn unary_fns[IR_OP_COUNT] = {
#define OP(E, name, arity, kind, trule, attrs, calc, ulp_f32, ulp_f64, meaning) DEF_##kind(E, name)
#include "ops.def"
#undef OP
};
#undef DEF_UNARY
#undef DEF_BINARY
#undef DEF_REDUCE
#undef DEF_MATMUL
#define DEF_UNARY(E, name)
#define DEF_BINARY(E, name) [IR_OP_##E] = kiln_##name,
#define DEF_REDUCE(E, name)
#define DEF_MATMUL(E, name) [IR_OP_##E] = kiln_##name,
static const binary_fn binary_fns[IR_OP_COUNT] = {
#define OP(E, name, arity, kind, trule, attrs, calc, ulp_f32, ulp_f64, meaning) DEF_##kind(E, name)
#include "ops.def"
#undef OP
};
#undef DEF_BINARY
#undef DEF_REDUCE
#undef DEF_MATMUL
#define DEF_BINARY(E, name)
#define DEF_REDUCE(E, name) [IR_OP_##E] = kiln_##name,
#define DEF_MATMUL(E, name)
static const reduce_fn reduce_fns[IR_OP_COUNT] = {
#define OP(E, name, arity, kind, trule, attrs, calc, ulp_f32, ulp_f64, meaning) DEF_##kind(E, name)
#include "ops.def"
#undef OP
};

/* Record node n of g (operands already in t[]) in the open scope of dev. */
static kiln_tensor
replay_node(kiln_device *dev, const kiln_graph *g, int32_t n, const kiln_tensor *t)
{
    const ir_node *nd = &g->nodes[n];
    const ir_type *ty = &nd->type;
    kiln_tensor a = nd->nin > 0 ? t[nd->in[0]] : (kiln_tensor){0, 0, 0};
    kiln_tensor b = nd->nin > 1 ? t[nd->in[1]] : (kiln_tensor){0, 0, 0};
    switch (ir_ops[nd->op].kind) {
    case IR_KIND_SOURCE:
        if (nd->op == IR_OP_INPUT)
            return kiln_input(dev, nd->name, ty->dtype, ty->shape.rank, ty->shape.dims);
        if (nd->op == IR_OP_FULL)
            return kiln_full(dev, ty->dtype, ty->shape.rank, ty->shape.dims,
                             ir_scalar_f64(ty->dtype, &nd->at->value));
        if (nd->op == IR_OP_CONSTANT)
            return kiln_constant(dev, ty->dtype, ty->shape.rank, ty->shape.dims, nd->at->data);
        return kiln_arange(dev, ty->dtype, ty->shape.dims[0], ir_scalar_f64(ty->dtype, &nd->at->start),
                           ir_scalar_f64(ty->dtype, &nd->at->delta));
    case IR_KIND_UNARY:
        return unary_fns[nd->op](a);
    case IR_KIND_BINARY:
    case IR_KIND_MATMUL:
        return binary_fns[nd->op](a, b);
    case IR_KIND_TERNARY:
        return (nd->op == IR_OP_WHERE ? kiln_where : kiln_clamp)(a, b, t[nd->in[2]]);
    case IR_KIND_CAST:
        return kiln_cast(a, nd->at->to);
    case IR_KIND_REDUCE: {
        int axes[IR_MAX_RANK], na = 0;
        for (int i = 0; i < IR_MAX_RANK; i++)
            if (nd->at->axes & (1u << i))
                axes[na++] = i;
        return reduce_fns[nd->op](a, na, axes, nd->at->keepdim);
    }
    case IR_KIND_MOVE:
        switch (nd->op) {
        case IR_OP_RESHAPE: return kiln_reshape(a, nd->at->shape.rank, nd->at->shape.dims);
        case IR_OP_EXPAND: return kiln_expand(a, nd->at->shape.rank, nd->at->shape.dims);
        case IR_OP_PERMUTE: return kiln_permute(a, ty->shape.rank, nd->at->perm);
        case IR_OP_SLICE: return kiln_slice(a, nd->at->begin, nd->at->stop, nd->at->step);
        case IR_OP_PAD:
            return kiln_pad(a, nd->at->low, nd->at->high, ir_scalar_f64(ty->dtype, &nd->at->value));
        case IR_OP_GATHER: return kiln_gather(a, b, nd->at->axis);
        case IR_OP_CONCAT: {
            kiln_tensor xs[64];
            if (nd->nin > 64)
                break;
            for (int k = 0; k < nd->nin; k++)
                xs[k] = t[nd->in[k]];
            return kiln_concat(nd->nin, xs, nd->at->axis);
        }
        default: break;
        }
        break;
    }
    return (kiln_tensor){0, 0, 0};
}

void
cap_replay(kiln_device *dev, const kiln_graph *g, kiln_tensor *t)
{
    for (int32_t n = 0; n < g->nnodes; n++)
        t[n] = replay_node(dev, g, n, t);
}
