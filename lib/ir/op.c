/* op.c — the tables generated from ops.def. */
#include <string.h>

#include "ir.h"

const ir_op_info ir_ops[IR_OP_COUNT] = {
#define OP(E, name, arity, kind, trule, attrs, calc, ulp_f32, ulp_f64, meaning)                    \
    [IR_OP_##E] = {#name,          arity,   IR_KIND_##kind, IR_T_##trule, attrs,                   \
                   IR_CALC_##calc, ulp_f32, ulp_f64,        meaning},
#include "ops.def"
#undef OP
};

/* The computed and ULP columns, checked row by row: a VMATH op has a bound for both float
 * dtypes and is a unary or binary function (vmath.c's functions take one or two operands),
 * of floats only except pow (integer pow is exact: emit.c); a REASSOC op is a reduction or
 * a contraction; no other row has a bound. */
#define OP(E, name, arity, kind, trule, attrs, calc, ulp_f32, ulp_f64, meaning)                    \
    _Static_assert(IR_CALC_##calc == IR_CALC_VMATH                                                 \
                       ? ulp_f32 > 0 && ulp_f64 > 0 && (arity == 1 || arity == 2) &&               \
                             (IR_T_##trule == IR_T_FLOAT || IR_OP_##E == IR_OP_POW)                \
                       : ulp_f32 == 0 && ulp_f64 == 0,                                             \
                   "ops.def: the computed or ULP columns of " #name);                              \
    _Static_assert(IR_CALC_##calc != IR_CALC_REASSOC || IR_KIND_##kind == IR_KIND_REDUCE ||        \
                       IR_KIND_##kind == IR_KIND_MATMUL,                                           \
                   "ops.def: " #name " is REASSOC but neither a reduction nor a contraction");
#include "ops.def"
#undef OP

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

bool
ir_op_is_vmath(ir_op op)
{
    return ir_ops[op].calc == IR_CALC_VMATH;
}

double
ir_op_ulp_bound(ir_op op, kiln_dtype t)
{
    return t == KILN_DTYPE_F32 ? ir_ops[op].ulp_f32 : t == KILN_DTYPE_F64 ? ir_ops[op].ulp_f64 : 0;
}
