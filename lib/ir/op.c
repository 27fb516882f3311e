/* op.c — the tables generated from ops.def. */
#include <string.h>

#include "ir.h"

const ir_op_info ir_ops[IR_OP_COUNT] = {
#define OP(E, name, arity, kind, trule, attrs, meaning)                                      \
    [IR_OP_##E] = {#name, arity, IR_KIND_##kind, IR_T_##trule, attrs, meaning},
#include "ops.def"
#undef OP
};

const char *const ir_attr_names[IR_ATTR_COUNT] = {
#define ATTR(E, name, kind) [IR_ATTR_##E##_BIT] = #name,
    IR_ATTR_LIST(ATTR)
#undef ATTR
};

int
ir_op_from_name(const char *s, size_t n)
{
    for (int op = 0; op < IR_OP_COUNT; op++)
        if (strlen(ir_ops[op].name) == n && memcmp(ir_ops[op].name, s, n) == 0)
            return op;
    return -1;
}

bool
ir_op_is_elementwise(ir_op op)
{
    ir_kind k = ir_ops[op].kind;
    return k == IR_KIND_UNARY || k == IR_KIND_BINARY || k == IR_KIND_TERNARY ||
           k == IR_KIND_CAST;
}
