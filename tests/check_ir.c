/* check_ir.c — the IR core: type rules (verify.c), shapes and overflow (shape.c), hashing
 * and equality (hash.c), cast rules (dtype.c), errors (err.c), arena and allocation
 * failure (arena.c, alloc.c).  Graphs are built through the internal builder so that every
 * rule is reached without the parser.  Expected values come from the op table's spec or an
 * independent emulation in this file, never from the code under test. */
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

/* ---- helpers ------------------------------------------------------------------------- */

#define NDIMS(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* A type with at least one dim: TY(KILN_DTYPE_F32, 4, 3); rank 0: TY0(KILN_DTYPE_F32). */
#define TY(d, ...) mk_type((d), NDIMS(__VA_ARGS__), (int64_t[]){__VA_ARGS__})
#define TY0(d) mk_type((d), 0, NULL)
#define F32 KILN_DTYPE_F32
#define F64 KILN_DTYPE_F64
#define I32 KILN_DTYPE_I32
#define I64 KILN_DTYPE_I64
#define BOOL KILN_DTYPE_BOOL

static ir_type
mk_type(kiln_dtype d, int rank, const int64_t *dims)
{
    ir_type t;
    memset(&t, 0, sizeof t);
    t.dtype = d;
    t.shape.rank = rank;
    for (int i = 0; i < rank; i++)
        t.shape.dims[i] = dims[i];
    return t;
}

static ir_shape
mk_shape(int rank, const int64_t *dims)
{
    return mk_type(F32, rank, dims).shape;
}
#define SH(...) mk_shape(NDIMS(__VA_ARGS__), (int64_t[]){__VA_ARGS__})

static kiln_graph *
new_graph(void)
{
    kiln_graph *g = ir_graph_new("t");
    ck_assert_msg(g != NULL, "%s", kiln_errmsg());
    return g;
}

/* Declare an input, failing the test if that fails. */
static int32_t
input(kiln_graph *g, const char *name, ir_type t)
{
    int32_t id = ir_graph_add_input(g, name, &t);
    ck_assert_msg(id >= 0, "input %s: %s", name, kiln_errmsg());
    return id;
}

static ir_attrs
no_attrs(void)
{
    ir_attrs at;
    memset(&at, 0, sizeof at);
    return at;
}

/* Add a node that must be accepted; returns its id. */
static int32_t
add_ok(kiln_graph *g, ir_op op, int nin, const int32_t *in, const ir_attrs *at)
{
    int32_t id = ir_graph_add_node(g, "test", op, nin, in, at, NULL, NULL);
    ck_assert_msg(id >= 0, "%s rejected: %s", ir_ops[op].name, kiln_errmsg());
    return id;
}

/* Add a node that must be rejected with `code` and a message containing `needle`. */
static void
add_fails(kiln_graph *g, ir_op op, int nin, const int32_t *in, const ir_attrs *at, kiln_status code,
          const char *needle)
{
    kiln_clear_error();
    int32_t before = g->nnodes;
    int32_t id = ir_graph_add_node(g, "test", op, nin, in, at, NULL, NULL);
    ck_assert_msg(id == -1, "%s accepted (node %d)", ir_ops[op].name, (int)id);
    ck_assert_int_eq(g->nnodes, before);
    ts_assert_error(code, needle);
}

static void
assert_shape(const ir_type *t, kiln_dtype d, ir_shape want)
{
    char b1[IR_TYPE_STR_MAX], b2[IR_TYPE_STR_MAX];
    ir_type w = {d, want};
    ck_assert_msg(ir_type_equal(t, &w), "got %s, want %s", ir_type_str(t, b1, sizeof b1),
                  ir_type_str(&w, b2, sizeof b2));
}

/* (A function, so that g->nodes is read after the call that may move it.) */
static const ir_type *
tyof(const kiln_graph *g, int32_t id)
{
    return &g->nodes[id].type;
}

#define UN(g, op, a) add_ok((g), (op), 1, (int32_t[]){(a)}, NULL)
#define BIN(g, op, a, b) add_ok((g), (op), 2, (int32_t[]){(a), (b)}, NULL)

/* ---- binary broadcasting and shape mismatch ------------------------------------------ */

START_TEST(binary_shape_mismatch)
{
    kiln_graph *g = new_graph();
    int32_t a = input(g, "a", TY(F32, 4, 3));
    int32_t b = input(g, "b", TY(F32, 4, 2));
    add_fails(g, IR_OP_ADD, 2, (int32_t[]){a, b}, NULL, KILN_ERR_SHAPE,
              "test: shape mismatch: [4,3] vs [4,2]");
    kiln_graph_free(g);
}
END_TEST

START_TEST(binary_broadcast_shapes)
{
    kiln_graph *g = new_graph();
    int32_t a = input(g, "a", TY(F32, 4, 1, 3));
    int32_t b = input(g, "b", TY(F32, 5, 1));
    int32_t c = input(g, "c", TY0(F32));
    int32_t z = input(g, "z", TY(F32, 0, 1));
    int32_t w = input(g, "w", TY(F32, 7, 1, 1, 1));
    int32_t o = input(g, "o", TY(F32, 1, 5));
    assert_shape(tyof(g, BIN(g, IR_OP_ADD, a, b)), F32, SH(4, 5, 3));
    assert_shape(tyof(g, BIN(g, IR_OP_MUL, b, a)), F32, SH(4, 5, 3));
    assert_shape(tyof(g, BIN(g, IR_OP_SUB, a, c)), F32, SH(4, 1, 3));
    assert_shape(tyof(g, BIN(g, IR_OP_SUB, c, c)), F32, mk_shape(0, NULL));
    /* zero-size dims: 0 broadcasts against 1, and 1 against 0 */
    assert_shape(tyof(g, BIN(g, IR_OP_ADD, z, o)), F32, SH(0, 5));
    assert_shape(tyof(g, BIN(g, IR_OP_ADD, o, z)), F32, SH(0, 5));
    assert_shape(tyof(g, BIN(g, IR_OP_ADD, a, z)), F32, SH(4, 0, 3));
    /* 0 is not 1: a zero-size dim does not broadcast against 5 */
    add_fails(g, IR_OP_ADD, 2, (int32_t[]){z, b}, NULL, KILN_ERR_SHAPE,
              "test: shape mismatch: [0,1] vs [5,1]");
    assert_shape(tyof(g, BIN(g, IR_OP_ADD, w, a)), F32, SH(7, 4, 1, 3));
    kiln_graph_free(g);
}
END_TEST

/* ---- dtype rules ----------------------------------------------------------------------- */

/* The dtype classes as the op table's header states them (independent of verify.c). */
static bool
spec_accepts(ir_trule r, kiln_dtype t)
{
    bool is_float = t == F32 || t == F64, is_int = t == I32 || t == I64;
    switch (r) {
    case IR_T_ANY:
    case IR_T_EQ:
        return true;
    case IR_T_NUM:
    case IR_T_CMP:
        return is_float || is_int;
    case IR_T_FLOAT:
    case IR_T_FTEST:
        return is_float;
    case IR_T_LOGIC:
        return t == BOOL || is_int;
    default:
        return false;
    }
}

static kiln_dtype
spec_result(ir_trule r, kiln_dtype t)
{
    return r == IR_T_FTEST || r == IR_T_CMP || r == IR_T_EQ ? BOOL : t;
}

/* Every unary and binary op against every dtype: accepted exactly when its class says so,
 * with the class's result dtype, and rejected with a message naming the op. */
START_TEST(dtype_rules_all_ops)
{
    int checked = 0;
    for (int op = 0; op < IR_OP_COUNT; op++) {
        ir_kind k = ir_ops[op].kind;
        if (k != IR_KIND_UNARY && k != IR_KIND_BINARY)
            continue;
        ir_trule r = ir_ops[op].trule;
        ck_assert_msg(r != IR_T_SPECIAL, "%s has no dtype class", ir_ops[op].name);
        for (int d = 0; d < KILN_DTYPE_COUNT; d++) {
            kiln_graph *g = new_graph();
            int32_t a = input(g, "a", TY((kiln_dtype)d, 2, 3));
            int32_t b = input(g, "b", TY((kiln_dtype)d, 3));
            int32_t in[2] = {a, b};
            int n = k == IR_KIND_UNARY ? 1 : 2;
            kiln_clear_error();
            int32_t id = ir_graph_add_node(g, "test", (ir_op)op, n, in, NULL, NULL, NULL);
            if (spec_accepts(r, (kiln_dtype)d)) {
                ck_assert_msg(id >= 0, "%s(%s) rejected: %s", ir_ops[op].name,
                              kiln_dtype_name((kiln_dtype)d), kiln_errmsg());
                assert_shape(tyof(g, id), spec_result(r, (kiln_dtype)d), SH(2, 3));
            } else {
                ck_assert_msg(id < 0, "%s(%s) accepted", ir_ops[op].name,
                              kiln_dtype_name((kiln_dtype)d));
                char want[128];
                snprintf(want, sizeof want, "test: dtype mismatch: %s needs ", ir_ops[op].name);
                ts_assert_error(KILN_ERR_DTYPE, want);
                snprintf(want, sizeof want, ", got %s", kiln_dtype_name((kiln_dtype)d));
                ts_assert_error(KILN_ERR_DTYPE, want);
            }
            kiln_graph_free(g);
            checked++;
        }
    }
    ck_assert_int_ge(checked, 5 * 40);
}
END_TEST

START_TEST(dtype_rule_messages)
{
    kiln_graph *g = new_graph();
    int32_t f = input(g, "f", TY(F32, 2));
    int32_t d = input(g, "d", TY(F64, 2));
    int32_t i = input(g, "i", TY(I32, 2));
    int32_t l = input(g, "l", TY(I64, 2));
    int32_t b = input(g, "b", TY(BOOL, 2));
    /* NUM */
    add_fails(g, IR_OP_NEG, 1, &b, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: neg needs a numeric dtype (f32, f64, i32, i64), got bool");
    add_fails(g, IR_OP_ADD, 2, (int32_t[]){b, b}, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: add needs a numeric dtype (f32, f64, i32, i64), got bool");
    /* FLOAT */
    add_fails(g, IR_OP_EXP, 1, &i, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: exp needs a float dtype (f32, f64), got i32");
    add_fails(g, IR_OP_ATAN2, 2, (int32_t[]){l, l}, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: atan2 needs a float dtype (f32, f64), got i64");
    /* LOGIC */
    add_fails(g, IR_OP_NOT, 1, &f, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: not needs bool, i32 or i64, got f32");
    add_fails(g, IR_OP_XOR, 2, (int32_t[]){d, d}, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: xor needs bool, i32 or i64, got f64");
    /* FTEST */
    add_fails(g, IR_OP_ISNAN, 1, &i, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: isnan needs a float dtype (f32, f64), got i32");
    add_fails(g, IR_OP_ISINF, 1, &b, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: isinf needs a float dtype (f32, f64), got bool");
    /* CMP */
    add_fails(g, IR_OP_LT, 2, (int32_t[]){b, b}, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: lt needs a numeric dtype (f32, f64, i32, i64), got bool");
    /* EQ, and every binary class: operands must share a dtype (no promotion) */
    add_fails(g, IR_OP_EQ, 2, (int32_t[]){f, d}, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: f32[2] vs f64[2]");
    add_fails(g, IR_OP_ADD, 2, (int32_t[]){i, l}, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: i32[2] vs i64[2]");
    add_fails(g, IR_OP_AND, 2, (int32_t[]){b, i}, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: bool[2] vs i32[2]");
    /* results of the bool-producing classes */
    assert_shape(tyof(g, BIN(g, IR_OP_EQ, b, b)), BOOL, SH(2));
    assert_shape(tyof(g, BIN(g, IR_OP_GE, l, l)), BOOL, SH(2));
    assert_shape(tyof(g, UN(g, IR_OP_ISINF, d)), BOOL, SH(2));
    assert_shape(tyof(g, BIN(g, IR_OP_OR, i, i)), I32, SH(2));
    /* a dtype error is reported before a shape error */
    int32_t f3 = input(g, "f3", TY(F32, 3));
    add_fails(g, IR_OP_MUL, 2, (int32_t[]){d, f3}, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: f64[2] vs f32[3]");
    kiln_graph_free(g);
}
END_TEST

START_TEST(where_clamp_rules)
{
    kiln_graph *g = new_graph();
    int32_t c = input(g, "c", TY(BOOL, 4, 1));
    int32_t f = input(g, "f", TY(F32, 3));
    int32_t s = input(g, "s", TY0(F32));
    int32_t d = input(g, "d", TY(F64, 3));
    int32_t f2 = input(g, "f2", TY(F32, 2));
    int32_t b = input(g, "b", TY(BOOL, 3));
    assert_shape(tyof(g, add_ok(g, IR_OP_WHERE, 3, (int32_t[]){c, f, s}, NULL)), F32, SH(4, 3));
    /* where's values may be bool (any dtype) */
    assert_shape(tyof(g, add_ok(g, IR_OP_WHERE, 3, (int32_t[]){b, b, c}, NULL)), BOOL, SH(4, 3));
    add_fails(g, IR_OP_WHERE, 3, (int32_t[]){f, f, f}, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: where condition must be bool, got f32[3]");
    add_fails(g, IR_OP_WHERE, 3, (int32_t[]){c, f, d}, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: f32[3] vs f64[3]");
    add_fails(g, IR_OP_WHERE, 3, (int32_t[]){b, f2, f}, NULL, KILN_ERR_SHAPE,
              "test: shape mismatch: [3] vs [2] vs [3]");
    add_fails(g, IR_OP_WHERE, 3, (int32_t[]){b, f, f2}, NULL, KILN_ERR_SHAPE,
              "test: shape mismatch: [3] vs [3] vs [2]");
    /* clamp: one numeric dtype for all three */
    assert_shape(tyof(g, add_ok(g, IR_OP_CLAMP, 3, (int32_t[]){f, s, s}, NULL)), F32, SH(3));
    add_fails(g, IR_OP_CLAMP, 3, (int32_t[]){f, s, d}, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: f32[3], f32[], f64[3]");
    add_fails(g, IR_OP_CLAMP, 3, (int32_t[]){b, b, b}, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: clamp needs a numeric dtype (f32, f64, i32, i64), got bool");
    add_fails(g, IR_OP_CLAMP, 3, (int32_t[]){f, f2, s}, NULL, KILN_ERR_SHAPE,
              "test: shape mismatch: [3] vs [2] vs []");
    kiln_graph_free(g);
}
END_TEST

START_TEST(cast_rules)
{
    kiln_graph *g = new_graph();
    int32_t x = input(g, "x", TY(F32, 2, 5));
    for (int d = 0; d < KILN_DTYPE_COUNT; d++) {
        ir_attrs at = no_attrs();
        at.to = (kiln_dtype)d;
        assert_shape(tyof(g, add_ok(g, IR_OP_CAST, 1, &x, &at)), (kiln_dtype)d, SH(2, 5));
    }
    ir_attrs at = no_attrs();
    at.to = (kiln_dtype)KILN_DTYPE_COUNT;
    add_fails(g, IR_OP_CAST, 1, &x, &at, KILN_ERR_DTYPE, "test: bad dtype: cast to 5");
    at.to = (kiln_dtype)-1;
    add_fails(g, IR_OP_CAST, 1, &x, &at, KILN_ERR_DTYPE, "test: bad dtype: cast to -1");
    /* a wider target can exceed the size limit although the operand does not: 2^45 f32
     * elements are 2^47 bytes, as f64 2^48 (the limit, allowed); 2^46 i32 -> f64 is 2^49 */
    int32_t big = input(g, "big", TY(I32, (int64_t)1 << 46));
    at.to = F64;
    add_fails(g, IR_OP_CAST, 1, &big, &at, KILN_ERR_OVERFLOW,
              "test: tensor too large: f64 [70368744177664] exceeds 2^48 bytes");
    at.to = BOOL;
    add_ok(g, IR_OP_CAST, 1, &big, &at);
    kiln_graph_free(g);
}
END_TEST

/* ---- movement rules -------------------------------------------------------------------- */

START_TEST(reshape_expand_rules)
{
    kiln_graph *g = new_graph();
    int32_t x = input(g, "x", TY(F32, 4, 3));
    int32_t e = input(g, "e", TY(I32, 0, 3));
    ir_attrs at = no_attrs();
    at.shape = SH(2, 6);
    assert_shape(tyof(g, add_ok(g, IR_OP_RESHAPE, 1, &x, &at)), F32, SH(2, 6));
    at.shape = SH(12, 1, 1);
    assert_shape(tyof(g, add_ok(g, IR_OP_RESHAPE, 1, &x, &at)), F32, SH(12, 1, 1));
    at.shape = SH(5, 2);
    add_fails(g, IR_OP_RESHAPE, 1, &x, &at, KILN_ERR_SHAPE,
              "test: shape mismatch: reshape f32[4,3] to [5,2] changes the element count");
    /* empty to empty of another layout keeps the count 0 */
    at.shape = SH(3, 0, 7);
    assert_shape(tyof(g, add_ok(g, IR_OP_RESHAPE, 1, &e, &at)), I32, SH(3, 0, 7));
    at.shape = SH(1);
    add_fails(g, IR_OP_RESHAPE, 1, &e, &at, KILN_ERR_SHAPE,
              "test: shape mismatch: reshape i32[0,3] to [1] changes the element count");
    at.shape = SH(-2, -6);
    add_fails(g, IR_OP_RESHAPE, 1, &x, &at, KILN_ERR_SHAPE, "test: negative dimension: [-2,-6]");
    at.shape.rank = 9;
    add_fails(g, IR_OP_RESHAPE, 1, &x, &at, KILN_ERR_SHAPE, "test: bad rank: 9 (must be 0 to 8)");
    /* rank 0 <-> [1] */
    int32_t s = input(g, "s", TY0(F64));
    at.shape = SH(1, 1);
    assert_shape(tyof(g, add_ok(g, IR_OP_RESHAPE, 1, &s, &at)), F64, SH(1, 1));

    /* expand: NumPy rules, new axes on the left, only size-1 axes grow */
    int32_t c = input(g, "c", TY(F32, 4, 1));
    at.shape = SH(2, 4, 5);
    assert_shape(tyof(g, add_ok(g, IR_OP_EXPAND, 1, &c, &at)), F32, SH(2, 4, 5));
    at.shape = SH(4, 0);
    assert_shape(tyof(g, add_ok(g, IR_OP_EXPAND, 1, &c, &at)), F32, SH(4, 0));
    at.shape = SH(3, 5);
    add_fails(g, IR_OP_EXPAND, 1, &c, &at, KILN_ERR_SHAPE,
              "test: shape mismatch: cannot expand f32[4,1] to [3,5]");
    at.shape = SH(5);
    add_fails(g, IR_OP_EXPAND, 1, &c, &at, KILN_ERR_SHAPE,
              "test: shape mismatch: cannot expand f32[4,1] to [5]");
    /* expand never shrinks: 4 -> 1 is not allowed */
    at.shape = SH(1, 1);
    add_fails(g, IR_OP_EXPAND, 1, &c, &at, KILN_ERR_SHAPE,
              "test: shape mismatch: cannot expand f32[4,1] to [1,1]");
    at.shape = SH(2, 4, 1);
    assert_shape(tyof(g, add_ok(g, IR_OP_EXPAND, 1, &c, &at)), F32, SH(2, 4, 1));
    at.shape = SH(3);
    assert_shape(tyof(g, add_ok(g, IR_OP_EXPAND, 1, &s, &at)), F64, SH(3));
    kiln_graph_free(g);
}
END_TEST

START_TEST(permute_rules)
{
    kiln_graph *g = new_graph();
    int32_t x = input(g, "x", TY(F32, 2, 3, 5));
    ir_attrs at = no_attrs();
    int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    int64_t dims[3] = {2, 3, 5};
    for (int k = 0; k < 6; k++) {
        memcpy(at.perm, perms[k], sizeof perms[k]);
        int32_t id = add_ok(g, IR_OP_PERMUTE, 1, &x, &at);
        ck_assert_int_eq(g->nodes[id].type.shape.rank, 3);
        for (int i = 0; i < 3; i++)
            ck_assert_int_eq(g->nodes[id].type.shape.dims[i], dims[perms[k][i]]);
    }
    int bad[4][3] = {{0, 0, 1}, {0, 1, 3}, {-1, 0, 1}, {2, 2, 2}};
    for (int k = 0; k < 4; k++) {
        memcpy(at.perm, bad[k], sizeof bad[k]);
        add_fails(g, IR_OP_PERMUTE, 1, &x, &at, KILN_ERR_SHAPE,
                  "test: bad perm: not a permutation of the 3 axes of f32[2,3,5]");
    }
    /* rank 0: the empty permutation */
    int32_t s = input(g, "s", TY0(I64));
    memset(at.perm, 0, sizeof at.perm);
    assert_shape(tyof(g, add_ok(g, IR_OP_PERMUTE, 1, &s, &at)), I64, mk_shape(0, NULL));
    kiln_graph_free(g);
}
END_TEST

START_TEST(pad_concat_rules)
{
    kiln_graph *g = new_graph();
    int32_t x = input(g, "x", TY(F32, 2, 3));
    ir_attrs at = no_attrs();
    at.low[0] = 1, at.high[0] = 2, at.low[1] = 0, at.high[1] = 4;
    assert_shape(tyof(g, add_ok(g, IR_OP_PAD, 1, &x, &at)), F32, SH(5, 7));
    at.low[1] = -1;
    add_fails(g, IR_OP_PAD, 1, &x, &at, KILN_ERR_SHAPE,
              "test: bad pad: negative padding on axis 1");
    at.low[1] = 0, at.high[0] = -3;
    add_fails(g, IR_OP_PAD, 1, &x, &at, KILN_ERR_SHAPE,
              "test: bad pad: negative padding on axis 0");
    /* padding can make an empty tensor non-empty */
    int32_t e = input(g, "e", TY(I32, 0));
    at = no_attrs();
    at.low[0] = 3;
    assert_shape(tyof(g, add_ok(g, IR_OP_PAD, 1, &e, &at)), I32, SH(3));

    /* concat */
    int32_t y = input(g, "y", TY(F32, 2, 4));
    int32_t z = input(g, "z", TY(F32, 7, 3));
    int32_t d = input(g, "d", TY(F64, 2, 3));
    int32_t r3 = input(g, "r3", TY(F32, 2, 3, 1));
    int32_t s = input(g, "s", TY0(F32));
    at = no_attrs();
    at.axis = 1;
    assert_shape(tyof(g, add_ok(g, IR_OP_CONCAT, 3, (int32_t[]){x, y, x}, &at)), F32, SH(2, 10));
    assert_shape(tyof(g, add_ok(g, IR_OP_CONCAT, 1, &y, &at)), F32, SH(2, 4));
    at.axis = 0;
    assert_shape(tyof(g, add_ok(g, IR_OP_CONCAT, 2, (int32_t[]){z, x}, &at)), F32, SH(9, 3));
    add_fails(g, IR_OP_CONCAT, 2, (int32_t[]){x, y}, &at, KILN_ERR_SHAPE,
              "test: shape mismatch: concat along axis 0 of f32[2,3] and f32[2,4]");
    add_fails(g, IR_OP_CONCAT, 2, (int32_t[]){x, r3}, &at, KILN_ERR_SHAPE,
              "test: shape mismatch: concat along axis 0 of f32[2,3] and f32[2,3,1]");
    add_fails(g, IR_OP_CONCAT, 2, (int32_t[]){x, d}, &at, KILN_ERR_DTYPE,
              "test: dtype mismatch: concat of f32[2,3] and f64[2,3]");
    at.axis = 2;
    add_fails(g, IR_OP_CONCAT, 2, (int32_t[]){x, x}, &at, KILN_ERR_SHAPE,
              "test: bad axis: concat axis 2 of rank 2");
    at.axis = -1;
    add_fails(g, IR_OP_CONCAT, 2, (int32_t[]){x, x}, &at, KILN_ERR_SHAPE,
              "test: bad axis: concat axis -1 of rank 2");
    at.axis = 0;
    add_fails(g, IR_OP_CONCAT, 2, (int32_t[]){s, s}, &at, KILN_ERR_SHAPE,
              "test: bad axis: concat axis 0 of rank 0");
    add_fails(g, IR_OP_CONCAT, 0, NULL, &at, KILN_ERR_INVALID_ARG,
              "test: wrong operand count: concat takes 1 or more, got 0");
    kiln_graph_free(g);
}
END_TEST

START_TEST(gather_rules)
{
    kiln_graph *g = new_graph();
    int32_t x = input(g, "x", TY(F32, 4, 5, 6));
    int32_t i = input(g, "i", TY(I32, 2, 7));
    int32_t l = input(g, "l", TY0(I64));
    int32_t f = input(g, "f", TY(F32, 2));
    int32_t b = input(g, "b", TY(BOOL, 2));
    int32_t s = input(g, "s", TY0(F32));
    ir_attrs at = no_attrs();
    at.axis = 1;
    assert_shape(tyof(g, add_ok(g, IR_OP_GATHER, 2, (int32_t[]){x, i}, &at)), F32, SH(4, 2, 7, 6));
    assert_shape(tyof(g, add_ok(g, IR_OP_GATHER, 2, (int32_t[]){x, l}, &at)), F32, SH(4, 6));
    at.axis = 2;
    assert_shape(tyof(g, add_ok(g, IR_OP_GATHER, 2, (int32_t[]){x, i}, &at)), F32, SH(4, 5, 2, 7));
    at.axis = 0;
    assert_shape(tyof(g, add_ok(g, IR_OP_GATHER, 2, (int32_t[]){i, l}, &at)), I32, SH(7));
    add_fails(g, IR_OP_GATHER, 2, (int32_t[]){x, f}, &at, KILN_ERR_DTYPE,
              "test: dtype mismatch: gather indices must be i32 or i64, got f32[2]");
    add_fails(g, IR_OP_GATHER, 2, (int32_t[]){x, b}, &at, KILN_ERR_DTYPE,
              "test: dtype mismatch: gather indices must be i32 or i64, got bool[2]");
    at.axis = 3;
    add_fails(g, IR_OP_GATHER, 2, (int32_t[]){x, i}, &at, KILN_ERR_SHAPE,
              "test: bad axis: gather axis 3 of rank 3");
    at.axis = -1;
    add_fails(g, IR_OP_GATHER, 2, (int32_t[]){x, i}, &at, KILN_ERR_SHAPE,
              "test: bad axis: gather axis -1 of rank 3");
    at.axis = 0;
    add_fails(g, IR_OP_GATHER, 2, (int32_t[]){s, i}, &at, KILN_ERR_SHAPE,
              "test: bad axis: gather axis 0 of rank 0");
    /* the result rank is rank(x) - 1 + rank(idx): 8 is fine, 9 is not */
    int32_t x8 = input(g, "x8", TY(F32, 1, 1, 1, 1, 1, 1, 1, 2));
    int32_t i1 = input(g, "i1", TY(I64, 3));
    int32_t i2 = input(g, "i2", TY(I64, 3, 1));
    at.axis = 7;
    assert_shape(tyof(g, add_ok(g, IR_OP_GATHER, 2, (int32_t[]){x8, i1}, &at)), F32,
                 SH(1, 1, 1, 1, 1, 1, 1, 3));
    add_fails(g, IR_OP_GATHER, 2, (int32_t[]){x8, i2}, &at, KILN_ERR_SHAPE,
              "test: bad rank: gather of f32[1,1,1,1,1,1,1,2] with indices i64[3,1] has rank > 8");
    kiln_graph_free(g);
}
END_TEST

/* ---- slices ---------------------------------------------------------------------------- */

__extension__ typedef __int128 i128;

/* Python slice semantics, written from the language reference: negative bounds count from
 * the end; then bounds are clamped to [0, n] for a positive step and [-1, n-1] for a
 * negative one; then the indices are walked one by one.  (ir_slice_axis computes the
 * count by division instead; the walk is the independent oracle.) */
static void
py_slice(int64_t n, int64_t start, int64_t stop, int64_t step, int64_t *first, int64_t *count)
{
    i128 lo = step > 0 ? 0 : -1, hi = step > 0 ? n : n - 1;
    i128 s = start, t = stop;
    if (s < 0)
        s += n;
    if (t < 0)
        t += n;
    s = s < lo ? lo : s > hi ? hi : s;
    t = t < lo ? lo : t > hi ? hi : t;
    int64_t c = 0;
    for (i128 x = s; step > 0 ? x < t : x > t; x += step)
        c++;
    *count = c;
    *first = c ? (int64_t)s : -1;
}

/* Results of len(range(n)[start:stop:step]) and its first element, computed with CPython
 * 3; None is INT64_MIN/INT64_MAX (whichever end the step's sign makes it). */
START_TEST(slice_python_table)
{
    static const struct {
        int64_t n, start, stop, step, count, first;
    } t[] = {
        {10, 2, 8, 3, 2, 2},
        {10, -15, INT64_MAX, 3, 4, 0},
        {10, INT64_MAX, INT64_MIN, -1, 10, 9},
        {10, INT64_MAX, INT64_MIN, -3, 4, 9},
        {10, 8, 2, -2, 3, 8},
        {10, -1, -11, -1, 10, 9},
        {10, -1, -12, -4, 3, 9},
        {10, 15, -20, -7, 2, 9},
        {10, 3, 3, 1, 0, -1},
        {10, 5, 2, 1, 0, -1},
        {0, INT64_MAX, INT64_MIN, -1, 0, -1},
        {7, INT64_MIN, INT64_MAX, 2, 4, 0},
        {7, INT64_MAX, INT64_MIN, -1, 7, 6},
        {7, INT64_MAX, INT64_MIN, INT64_MIN, 1, 6},
        {7, 0, 7, INT64_MAX, 1, 0},
        {7, INT64_MIN, INT64_MAX, INT64_MIN, 0, -1},
        {1, 0, 1, -1, 0, -1},
        {5, -5, -6, -1, 1, 0},
        {5, 4, -6, -2, 3, 4},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        int64_t first, count;
        ir_slice_axis(t[k].n, t[k].start, t[k].stop, t[k].step, &first, &count);
        ck_assert_msg(count == t[k].count, "case %zu: count %lld, want %lld", k, (long long)count,
                      (long long)t[k].count);
        if (count)
            ck_assert_msg(first == t[k].first, "case %zu: first %lld, want %lld", k,
                          (long long)first, (long long)t[k].first);
        /* the oracle agrees with CPython too */
        int64_t f2, c2;
        py_slice(t[k].n, t[k].start, t[k].stop, t[k].step, &f2, &c2);
        ck_assert_int_eq(c2, t[k].count);
        ck_assert_int_eq(f2, t[k].first);
    }
}
END_TEST

START_TEST(slice_brute_force_grid)
{
    static const int64_t ns[] = {0, 1, 2, 5, 7, 13};
    long cases = 0;
    for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++) {
        int64_t n = ns[in];
        int64_t bounds[64], steps[64];
        int nb = 0, ns2 = 0;
        bounds[nb++] = INT64_MIN, bounds[nb++] = INT64_MAX;
        bounds[nb++] = INT64_MIN + 1, bounds[nb++] = INT64_MAX - 1;
        for (int64_t v = -n - 3; v <= n + 3; v++)
            bounds[nb++] = v;
        steps[ns2++] = INT64_MIN, steps[ns2++] = INT64_MAX, steps[ns2++] = INT64_MIN + 1;
        for (int64_t v = 1; v <= n + 2; v++)
            steps[ns2++] = v, steps[ns2++] = -v;
        for (int a = 0; a < nb; a++)
            for (int b = 0; b < nb; b++)
                for (int c = 0; c < ns2; c++) {
                    int64_t f1, c1, f2, c2;
                    ir_slice_axis(n, bounds[a], bounds[b], steps[c], &f1, &c1);
                    py_slice(n, bounds[a], bounds[b], steps[c], &f2, &c2);
                    ck_assert_msg(c1 == c2 && (c1 == 0 || f1 == f2),
                                  "n=%lld [%lld:%lld:%lld]: got first %lld count %lld, "
                                  "want %lld %lld",
                                  (long long)n, (long long)bounds[a], (long long)bounds[b],
                                  (long long)steps[c], (long long)f1, (long long)c1, (long long)f2,
                                  (long long)c2);
                    ck_assert(c1 >= 0 && c1 <= n);
                    cases++;
                }
    }
    ck_assert_int_gt(cases, 10000);
}
END_TEST

START_TEST(slice_node_shapes)
{
    kiln_graph *g = new_graph();
    int32_t x = input(g, "x", TY(F32, 10, 7, 0));
    ir_attrs at = no_attrs();
    /* [2:8:3, ::-1, ::1] */
    at.begin[0] = 2, at.stop[0] = 8, at.step[0] = 3;
    at.begin[1] = INT64_MAX, at.stop[1] = INT64_MIN, at.step[1] = -1;
    at.begin[2] = INT64_MIN, at.stop[2] = INT64_MAX, at.step[2] = 1;
    assert_shape(tyof(g, add_ok(g, IR_OP_SLICE, 1, &x, &at)), F32, SH(2, 7, 0));
    /* out-of-range bounds clamp: [100:-100:-7, -3:, 5:9] */
    at.begin[0] = 100, at.stop[0] = -100, at.step[0] = -7;
    at.begin[1] = -3, at.stop[1] = INT64_MAX, at.step[1] = 1;
    at.begin[2] = 5, at.stop[2] = 9, at.step[2] = 2;
    assert_shape(tyof(g, add_ok(g, IR_OP_SLICE, 1, &x, &at)), F32, SH(2, 3, 0));
    at.step[1] = 0;
    add_fails(g, IR_OP_SLICE, 1, &x, &at, KILN_ERR_SHAPE, "test: bad slice: step of axis 1 is 0");
    at.step[1] = 1, at.step[2] = 0;
    add_fails(g, IR_OP_SLICE, 1, &x, &at, KILN_ERR_SHAPE, "test: bad slice: step of axis 2 is 0");
    /* a rank-0 slice has no axes and no steps to check */
    int32_t s = input(g, "s", TY0(BOOL));
    assert_shape(tyof(g, add_ok(g, IR_OP_SLICE, 1, &s, NULL)), BOOL, mk_shape(0, NULL));
    kiln_graph_free(g);
}
END_TEST

/* ---- reductions, matmul, sources, arity ------------------------------------------------- */

static ir_attrs
axes_attrs(uint32_t axes, bool keepdim)
{
    ir_attrs at = no_attrs();
    at.axes = axes;
    at.keepdim = keepdim;
    return at;
}

START_TEST(reduce_rules)
{
    kiln_graph *g = new_graph();
    int32_t x = input(g, "x", TY(F32, 2, 3, 5));
    int32_t i = input(g, "i", TY(I32, 2, 3));
    int32_t b = input(g, "b", TY(BOOL, 2, 3));
    int32_t e = input(g, "e", TY(F64, 2, 0, 3));
    int32_t s = input(g, "s", TY0(F32));
    ir_attrs at = axes_attrs(1u << 1, false);
    assert_shape(tyof(g, add_ok(g, IR_OP_REDUCE_SUM, 1, &x, &at)), F32, SH(2, 5));
    at = axes_attrs(5, true);
    assert_shape(tyof(g, add_ok(g, IR_OP_REDUCE_PROD, 1, &x, &at)), F32, SH(1, 3, 1));
    at = axes_attrs(7, false);
    assert_shape(tyof(g, add_ok(g, IR_OP_REDUCE_MEAN, 1, &x, &at)), F32, mk_shape(0, NULL));
    at = axes_attrs(0, false); /* no axes: nothing reduced */
    assert_shape(tyof(g, add_ok(g, IR_OP_REDUCE_MIN, 1, &x, &at)), F32, SH(2, 3, 5));
    assert_shape(tyof(g, add_ok(g, IR_OP_REDUCE_SUM, 1, &s, &at)), F32, mk_shape(0, NULL));
    at = axes_attrs(1u << 2, true);
    assert_shape(tyof(g, add_ok(g, IR_OP_ARGMAX, 1, &x, &at)), I64, SH(2, 3, 1));
    at = axes_attrs(1u << 0, false);
    assert_shape(tyof(g, add_ok(g, IR_OP_ARGMIN, 1, &i, &at)), I64, SH(3));
    assert_shape(tyof(g, add_ok(g, IR_OP_REDUCE_MAX, 1, &i, &at)), I32, SH(3));

    /* axes out of range, including the top bit */
    at = axes_attrs(1u << 3, false);
    add_fails(g, IR_OP_REDUCE_SUM, 1, &x, &at, KILN_ERR_SHAPE,
              "test: bad axes: reduce_sum of f32[2,3,5] reduces an axis >= rank 3");
    at = axes_attrs(1u << 31, false);
    add_fails(g, IR_OP_REDUCE_MAX, 1, &x, &at, KILN_ERR_SHAPE,
              "test: bad axes: reduce_max of f32[2,3,5] reduces an axis >= rank 3");
    at = axes_attrs(1, false);
    add_fails(g, IR_OP_ARGMAX, 1, &s, &at, KILN_ERR_SHAPE,
              "test: bad axes: argmax of f32[] reduces an axis >= rank 0");
    /* argmax/argmin: exactly one axis, numeric */
    at = axes_attrs(0, false);
    add_fails(g, IR_OP_ARGMAX, 1, &x, &at, KILN_ERR_SHAPE,
              "test: bad axes: argmax reduces exactly one axis");
    at = axes_attrs(3, false);
    add_fails(g, IR_OP_ARGMIN, 1, &x, &at, KILN_ERR_SHAPE,
              "test: bad axes: argmin reduces exactly one axis");
    at = axes_attrs(1, false);
    add_fails(g, IR_OP_ARGMIN, 1, &b, &at, KILN_ERR_DTYPE,
              "test: dtype mismatch: argmin needs a numeric dtype (f32, f64, i32, i64), got bool");
    /* dtype classes of the reductions */
    add_fails(g, IR_OP_REDUCE_MEAN, 1, &i, &at, KILN_ERR_DTYPE,
              "test: dtype mismatch: reduce_mean needs a float dtype (f32, f64), got i32");
    add_fails(
        g, IR_OP_REDUCE_SUM, 1, &b, &at, KILN_ERR_DTYPE,
        "test: dtype mismatch: reduce_sum needs a numeric dtype (f32, f64, i32, i64), got bool");
    /* empty axes: max/min/argmax/argmin have no identity, sum/prod/mean do */
    at = axes_attrs(1u << 1, false);
    add_fails(g, IR_OP_REDUCE_MAX, 1, &e, &at, KILN_ERR_SHAPE,
              "test: empty reduction: reduce_max over axis 1 of f64[2,0,3], which has size 0");
    add_fails(g, IR_OP_REDUCE_MIN, 1, &e, &at, KILN_ERR_SHAPE,
              "test: empty reduction: reduce_min over axis 1 of f64[2,0,3]");
    add_fails(g, IR_OP_ARGMAX, 1, &e, &at, KILN_ERR_SHAPE,
              "test: empty reduction: argmax over axis 1 of f64[2,0,3]");
    add_fails(g, IR_OP_ARGMIN, 1, &e, &at, KILN_ERR_SHAPE,
              "test: empty reduction: argmin over axis 1 of f64[2,0,3]");
    assert_shape(tyof(g, add_ok(g, IR_OP_REDUCE_SUM, 1, &e, &at)), F64, SH(2, 3));
    assert_shape(tyof(g, add_ok(g, IR_OP_REDUCE_PROD, 1, &e, &at)), F64, SH(2, 3));
    assert_shape(tyof(g, add_ok(g, IR_OP_REDUCE_MEAN, 1, &e, &at)), F64, SH(2, 3));
    /* reducing a non-empty axis of an empty tensor is fine: the result is empty */
    at = axes_attrs(1u << 2, true);
    assert_shape(tyof(g, add_ok(g, IR_OP_REDUCE_MAX, 1, &e, &at)), F64, SH(2, 0, 1));
    kiln_graph_free(g);
}
END_TEST

START_TEST(matmul_rules)
{
    static const struct {
        int ra;
        int64_t a[4];
        int rb;
        int64_t b[4];
        int rr;
        int64_t r[4];
    } ok[] = {
        {2, {2, 3}, 2, {3, 4}, 2, {2, 4}},
        {1, {3}, 1, {3}, 0, {0}},
        {1, {3}, 2, {3, 4}, 1, {4}},
        {2, {2, 3}, 1, {3}, 1, {2}},
        {4, {5, 1, 2, 3}, 3, {4, 3, 6}, 4, {5, 4, 2, 6}},
        {2, {2, 3}, 3, {7, 3, 4}, 3, {7, 2, 4}},
        {1, {3}, 3, {7, 3, 4}, 2, {7, 4}},
        {3, {7, 2, 3}, 1, {3}, 2, {7, 2}},
        {2, {0, 3}, 2, {3, 0}, 2, {0, 0}},
        {2, {2, 0}, 2, {0, 4}, 2, {2, 4}},
        {3, {1, 2, 3}, 3, {0, 3, 4}, 3, {0, 2, 4}},
    };
    for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
        kiln_graph *g = new_graph();
        int32_t a = input(g, "a", mk_type(I64, ok[k].ra, ok[k].a));
        int32_t b = input(g, "b", mk_type(I64, ok[k].rb, ok[k].b));
        assert_shape(tyof(g, BIN(g, IR_OP_MATMUL, a, b)), I64, mk_shape(ok[k].rr, ok[k].r));
        kiln_graph_free(g);
    }
    kiln_graph *g = new_graph();
    int32_t a = input(g, "a", TY(F32, 2, 3));
    int32_t b = input(g, "b", TY(F32, 4, 5));
    int32_t c = input(g, "c", TY(F32, 2, 2, 3));
    int32_t d = input(g, "d", TY(F32, 3, 3, 4));
    int32_t s = input(g, "s", TY0(F32));
    int32_t v = input(g, "v", TY(F32, 3));
    int32_t w = input(g, "w", TY(F32, 4));
    int32_t bb = input(g, "bb", TY(BOOL, 3, 3));
    int32_t f64 = input(g, "f64", TY(F64, 3, 4));
    add_fails(g, IR_OP_MATMUL, 2, (int32_t[]){a, b}, NULL, KILN_ERR_SHAPE,
              "test: shape mismatch: matmul contracts 3 with 4: f32[2,3] @ f32[4,5]");
    add_fails(g, IR_OP_MATMUL, 2, (int32_t[]){v, w}, NULL, KILN_ERR_SHAPE,
              "test: shape mismatch: matmul contracts 3 with 4: f32[3] @ f32[4]");
    add_fails(g, IR_OP_MATMUL, 2, (int32_t[]){c, d}, NULL, KILN_ERR_SHAPE,
              "test: shape mismatch: matmul batch dimensions do not broadcast: f32[2,2,3] @ "
              "f32[3,3,4]");
    add_fails(g, IR_OP_MATMUL, 2, (int32_t[]){bb, bb}, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: matmul needs a numeric dtype (f32, f64, i32, i64), got bool");
    add_fails(g, IR_OP_MATMUL, 2, (int32_t[]){a, f64}, NULL, KILN_ERR_DTYPE,
              "test: dtype mismatch: f32[2,3] vs f64[3,4]");
    add_fails(g, IR_OP_MATMUL, 2, (int32_t[]){s, v}, NULL, KILN_ERR_SHAPE,
              "test: shape mismatch: matmul needs rank >= 1, got f32[] @ f32[3]");
    add_fails(g, IR_OP_MATMUL, 2, (int32_t[]){v, s}, NULL, KILN_ERR_SHAPE,
              "test: shape mismatch: matmul needs rank >= 1, got f32[3] @ f32[]");
    /* the batch broadcast makes the result larger than either operand: 2^24 x 2^24 f32 */
    int32_t p = input(g, "p", TY(F32, (int64_t)1 << 24, 1, 1, 1));
    int32_t q = input(g, "q", TY(F32, 1, (int64_t)1 << 24, 1, 1));
    add_fails(g, IR_OP_MATMUL, 2, (int32_t[]){p, q}, NULL, KILN_ERR_OVERFLOW,
              "test: tensor too large: f32 [16777216,16777216,1,1] exceeds 2^48 bytes");
    kiln_graph_free(g);
}
END_TEST

static void
add_src_fails(kiln_graph *g, ir_op op, const ir_attrs *at, const ir_type *given, kiln_status code,
              const char *needle)
{
    kiln_clear_error();
    int32_t before = g->nnodes;
    ck_assert_int_eq(ir_graph_add_node(g, "test", op, 0, NULL, at, given, NULL), -1);
    ck_assert_int_eq(g->nnodes, before);
    ts_assert_error(code, needle);
}

START_TEST(source_rules)
{
    kiln_graph *g = new_graph();
    ir_attrs at = no_attrs();
    ir_type t = TY(F32, 2);
    add_src_fails(g, IR_OP_FULL, &at, NULL, KILN_ERR_INVALID_ARG,
                  "test: missing type: full needs a result type");
    add_src_fails(g, IR_OP_CONSTANT, &at, NULL, KILN_ERR_INVALID_ARG,
                  "test: missing type: constant needs a result type");
    add_src_fails(g, IR_OP_ARANGE, &at, NULL, KILN_ERR_INVALID_ARG,
                  "test: missing type: arange needs a result type");
    ir_type bad = t;
    bad.dtype = (kiln_dtype)7;
    add_src_fails(g, IR_OP_FULL, &at, &bad, KILN_ERR_DTYPE, "test: bad dtype: 7");
    ir_type t2 = TY(I32, 2, 3);
    add_src_fails(g, IR_OP_ARANGE, &at, &t2, KILN_ERR_SHAPE,
                  "test: bad shape: arange is rank 1, got i32[2,3]");
    ir_type t0 = TY0(I32);
    add_src_fails(g, IR_OP_ARANGE, &at, &t0, KILN_ERR_SHAPE,
                  "test: bad shape: arange is rank 1, got i32[]");
    ir_type tb = TY(BOOL, 4);
    add_src_fails(
        g, IR_OP_ARANGE, &at, &tb, KILN_ERR_DTYPE,
        "test: dtype mismatch: arange needs a numeric dtype (f32, f64, i32, i64), got bool");
    add_src_fails(g, IR_OP_CONSTANT, &at, &t, KILN_ERR_INVALID_ARG,
                  "test: missing data: constant f32[2] has no data");
    ir_type neg = TY(F32, 2, -1);
    add_src_fails(g, IR_OP_FULL, &at, &neg, KILN_ERR_SHAPE, "test: negative dimension: [2,-1]");
    ir_type huge = TY(F64, (int64_t)1 << 40, (int64_t)1 << 40);
    add_src_fails(g, IR_OP_FULL, &at, &huge, KILN_ERR_OVERFLOW,
                  "test: tensor too large: f64 [1099511627776,1099511627776] exceeds 2^48 bytes");
    /* accepted: an empty constant needs no data; full and arange of any numeric dtype */
    ir_type empty = TY(F32, 0, 4);
    ck_assert_int_ge(ir_graph_add_node(g, "test", IR_OP_CONSTANT, 0, NULL, &at, &empty, NULL), 0);
    ck_assert_int_ge(ir_graph_add_node(g, "test", IR_OP_FULL, 0, NULL, &at, &tb, NULL), 0);
    ir_type ar = TY(I64, 5);
    int32_t id = ir_graph_add_node(g, "test", IR_OP_ARANGE, 0, NULL, &at, &ar, NULL);
    ck_assert_int_ge(id, 0);
    assert_shape(tyof(g, id), I64, SH(5));
    /* sources take no operands */
    int32_t x = input(g, "x", TY(F32, 2));
    kiln_clear_error();
    ck_assert_int_eq(ir_graph_add_node(g, "test", IR_OP_FULL, 1, &x, &at, &t, NULL), -1);
    ts_assert_error(KILN_ERR_INVALID_ARG, "test: wrong operand count: full takes 0, got 1");
    /* inputs are added with ir_graph_add_input only */
    add_src_fails(g, IR_OP_INPUT, &at, &t, KILN_ERR_INVALID_ARG, "test: bad op: 0");
    kiln_graph_free(g);
}
END_TEST

START_TEST(arity_rules)
{
    kiln_graph *g = new_graph();
    int32_t x = input(g, "x", TY(F32, 2));
    int32_t c = input(g, "c", TY(BOOL, 2));
    add_fails(g, IR_OP_ADD, 1, &x, NULL, KILN_ERR_INVALID_ARG,
              "test: wrong operand count: add takes 2, got 1");
    add_fails(g, IR_OP_ADD, 3, (int32_t[]){x, x, x}, NULL, KILN_ERR_INVALID_ARG,
              "test: wrong operand count: add takes 2, got 3");
    add_fails(g, IR_OP_NEG, 2, (int32_t[]){x, x}, NULL, KILN_ERR_INVALID_ARG,
              "test: wrong operand count: neg takes 1, got 2");
    add_fails(g, IR_OP_WHERE, 2, (int32_t[]){c, x}, NULL, KILN_ERR_INVALID_ARG,
              "test: wrong operand count: where takes 3, got 2");
    add_fails(g, IR_OP_MATMUL, 0, NULL, NULL, KILN_ERR_INVALID_ARG,
              "test: wrong operand count: matmul takes 2, got 0");
    add_fails(g, IR_OP_NEG, 1, NULL, NULL, KILN_ERR_INVALID_ARG,
              "test: bad operand: neg operands are NULL");
    add_fails(g, IR_OP_ADD, 2, (int32_t[]){x, 5}, NULL, KILN_ERR_INVALID_ARG,
              "test: bad operand: add operand 1 is node 5 of 2");
    add_fails(g, IR_OP_ADD, 2, (int32_t[]){-1, x}, NULL, KILN_ERR_INVALID_ARG,
              "test: bad operand: add operand 0 is node -1 of 2");
    add_fails(g, IR_OP_NEG, -1, &x, NULL, KILN_ERR_INVALID_ARG, "test: bad operand count: -1");
    add_fails(g, (ir_op)IR_OP_COUNT, 1, &x, NULL, KILN_ERR_INVALID_ARG, "test: bad op: ");
    add_fails(g, (ir_op)-1, 1, &x, NULL, KILN_ERR_INVALID_ARG, "test: bad op: -1");
    kiln_clear_error();
    ck_assert_int_eq(ir_graph_add_node(g, "test", IR_OP_NEG, 1, &x, NULL, NULL, ""), -1);
    ts_assert_error(KILN_ERR_INVALID_ARG, "test: bad name: a value name is empty");
    /* a stated type must equal the inferred one */
    ir_type wrong = TY(F32, 3);
    kiln_clear_error();
    ck_assert_int_eq(ir_graph_add_node(g, "test", IR_OP_NEG, 1, &x, NULL, &wrong, NULL), -1);
    ts_assert_error(KILN_ERR_VERIFY, "test: type mismatch: neg gives f32[2], stated f32[3]");
    wrong = TY(BOOL, 2);
    kiln_clear_error();
    ck_assert_int_eq(ir_graph_add_node(g, "test", IR_OP_NEG, 1, &x, NULL, &wrong, NULL), -1);
    ts_assert_error(KILN_ERR_VERIFY, "test: type mismatch: neg gives f32[2], stated bool[2]");
    ir_type right = TY(F32, 2);
    ck_assert_int_ge(ir_graph_add_node(g, "test", IR_OP_NEG, 1, &x, NULL, &right, "n"), 0);
    ck_assert_int_eq(g->nnodes, 3);
    kiln_graph_free(g);
}
END_TEST

/* ---- whole-graph verifier on hand-corrupted graphs --------------------------------------- */

/* x, y: f32[2]; a = add(x, y); %3 = neg(a); s = reduce_sum(%3, axes=[0]); outputs out = %3,
 * a = a (an output may share its value's name). */
static kiln_graph *
small_graph(void)
{
    kiln_graph *g = new_graph();
    int32_t x = input(g, "x", TY(F32, 2));
    int32_t y = input(g, "y", TY(F32, 2));
    int32_t a = ir_graph_add_node(g, "test", IR_OP_ADD, 2, (int32_t[]){x, y}, NULL, NULL, "a");
    ck_assert_int_eq(a, 2);
    ck_assert_int_eq(UN(g, IR_OP_NEG, a), 3);
    ir_attrs at = axes_attrs(1, false);
    ck_assert_int_eq(
        ir_graph_add_node(g, "test", IR_OP_REDUCE_SUM, 1, (int32_t[]){3}, &at, NULL, "s"), 4);
    ck_assert_int_eq(ir_graph_add_output(g, "out", 3), KILN_OK);
    ck_assert_int_eq(ir_graph_add_output(g, "a", a), KILN_OK);
    ck_assert_int_eq(ir_graph_verify(g), KILN_OK);
    return g;
}

static void
verify_fails(kiln_graph *g, kiln_status code, const char *needle)
{
    kiln_clear_error();
    ck_assert_int_eq(ir_graph_verify(g), code);
    ts_assert_error(code, needle);
}

START_TEST(verify_valid_graph)
{
    kiln_graph *g = small_graph();
    ck_assert_int_eq(g->nnodes, 5);
    ck_assert_int_eq(g->ninputs, 2);
    ck_assert_int_eq(g->noutputs, 2);
    kiln_graph_free(g);
    /* an empty graph is valid */
    g = new_graph();
    ck_assert_int_eq(ir_graph_verify(g), KILN_OK);
    kiln_graph_free(g);
}
END_TEST

START_TEST(verify_corrupt_nodes)
{
    kiln_graph *g = small_graph();
    g->nodes[2].type.shape.dims[0] = 3;
    verify_fails(g, KILN_ERR_VERIFY,
                 "kiln_graph_verify: node 2 'a' (add): type mismatch: add gives f32[2], stated "
                 "f32[3]");
    kiln_graph_free(g);

    g = small_graph();
    g->nodes[3].type.dtype = F64;
    verify_fails(g, KILN_ERR_VERIFY,
                 "kiln_graph_verify: node 3 (neg): type mismatch: neg gives f32[2], stated f64[2]");
    kiln_graph_free(g);

    g = small_graph();
    ((int32_t *)g->nodes[3].in)[0] = 3; /* its own id */
    verify_fails(g, KILN_ERR_VERIFY,
                 "kiln_graph_verify: node 3 (neg): not in topological order: operand 0 is node 3");
    kiln_graph_free(g);

    g = small_graph();
    ((int32_t *)g->nodes[2].in)[1] = 4; /* a later node */
    verify_fails(g, KILN_ERR_VERIFY,
                 "kiln_graph_verify: node 2 'a' (add): not in topological order: operand 1 is "
                 "node 4");
    kiln_graph_free(g);

    g = small_graph();
    ((int32_t *)g->nodes[2].in)[0] = -7;
    verify_fails(g, KILN_ERR_VERIFY,
                 "node 2 'a' (add): not in topological order: operand 0 is "
                 "node -7");
    kiln_graph_free(g);

    g = small_graph();
    g->nodes[4].name = "a";
    verify_fails(g, KILN_ERR_VERIFY,
                 "kiln_graph_verify: node 4 'a' (reduce_sum): duplicate name: 'a' is defined "
                 "twice");
    kiln_graph_free(g);

    g = small_graph();
    g->nodes[3].name = "y"; /* values and inputs share one namespace */
    verify_fails(g, KILN_ERR_VERIFY, "node 3 'y' (neg): duplicate name: 'y' is defined twice");
    kiln_graph_free(g);

    g = small_graph();
    g->nodes[3].name = "";
    verify_fails(g, KILN_ERR_VERIFY, "node 3 '' (neg): bad name: a value name is empty");
    kiln_graph_free(g);

    g = small_graph();
    g->nodes[3].op = (ir_op)999;
    verify_fails(g, KILN_ERR_VERIFY, "kiln_graph_verify: node 3 (?): bad op: 999");
    kiln_graph_free(g);

    g = small_graph();
    g->nodes[3].nin = 2; /* neg with two operands (in[] still has one valid slot) */
    g->nodes[3].in = g->nodes[2].in;
    verify_fails(g, KILN_ERR_INVALID_ARG, "node 3 (neg): wrong operand count: neg takes 1, got 2");
    kiln_graph_free(g);

    g = small_graph();
    g->nodes[3].nin = 1;
    g->nodes[3].in = NULL;
    verify_fails(g, KILN_ERR_VERIFY, "node 3 (neg): bad operands: 1 operands at ");
    kiln_graph_free(g);

    g = small_graph();
    ((ir_attrs *)g->nodes[4].at)->axes = 2; /* reduce_sum over axis 1 of a rank-1 value */
    verify_fails(g, KILN_ERR_SHAPE,
                 "node 4 's' (reduce_sum): bad axes: reduce_sum of f32[2] reduces an axis >= "
                 "rank 1");
    kiln_graph_free(g);

    g = small_graph();
    g->nodes[0].type.shape.dims[0] = -2; /* an input's own type is checked */
    verify_fails(g, KILN_ERR_SHAPE, "node 0 'x' (input): negative dimension: [-2]");
    kiln_graph_free(g);

    g = small_graph();
    g->nodes[1].type.dtype = (kiln_dtype)9;
    verify_fails(g, KILN_ERR_DTYPE, "node 1 'y' (input): bad dtype: 9");
    kiln_graph_free(g);
}
END_TEST

START_TEST(verify_corrupt_boundary)
{
    kiln_graph *g = small_graph();
    g->inputs[1] = 0;
    verify_fails(g, KILN_ERR_VERIFY,
                 "kiln_graph_verify: bad input list: entry 1 names node 0, not input 1");
    kiln_graph_free(g);

    g = small_graph();
    g->inputs[0] = 2; /* an add node, not an input */
    verify_fails(g, KILN_ERR_VERIFY,
                 "kiln_graph_verify: bad input list: entry 0 names node 2, not input 0");
    kiln_graph_free(g);

    g = small_graph();
    g->inputs[1] = 5; /* past the end */
    verify_fails(g, KILN_ERR_VERIFY, "bad input list: entry 1 names node 5, not input 1");
    kiln_graph_free(g);

    g = small_graph();
    g->nodes[1].index = 0;
    verify_fails(g, KILN_ERR_VERIFY, "bad input list: entry 1 names node 1, not input 1");
    kiln_graph_free(g);

    g = small_graph();
    g->ninputs = 1; /* node 1 is an input the list no longer declares */
    verify_fails(g, KILN_ERR_VERIFY,
                 "kiln_graph_verify: node 1 'y' (input): input not declared in the graph's "
                 "inputs");
    kiln_graph_free(g);

    g = small_graph();
    g->nodes[1].name = NULL;
    verify_fails(g, KILN_ERR_VERIFY, "node 1 (input): bad name: an input needs a name");
    kiln_graph_free(g);

    g = small_graph();
    g->outputs[0].node = 5;
    verify_fails(g, KILN_ERR_BOUNDARY, "kiln_graph_verify: bad output: 'out' names node 5");
    kiln_graph_free(g);

    g = small_graph();
    g->outputs[1].node = -1;
    verify_fails(g, KILN_ERR_BOUNDARY, "kiln_graph_verify: bad output: 'a' names node -1");
    kiln_graph_free(g);

    g = small_graph();
    g->outputs[1].name = "out";
    verify_fails(g, KILN_ERR_BOUNDARY, "kiln_graph_verify: duplicate output: 'out'");
    kiln_graph_free(g);

    g = small_graph();
    g->outputs[0].name = "";
    verify_fails(g, KILN_ERR_BOUNDARY, "kiln_graph_verify: bad output: output 0 has no name");
    kiln_graph_free(g);

    g = small_graph();
    g->nnodes = -1;
    verify_fails(g, KILN_ERR_VERIFY,
                 "kiln_graph_verify: bad counts: -1 nodes, 2 inputs, 2 outputs");
    g->nnodes = 5;
    g->noutputs = -3;
    verify_fails(g, KILN_ERR_VERIFY,
                 "kiln_graph_verify: bad counts: 5 nodes, 2 inputs, -3 outputs");
    g->noutputs = 2;
    g->ninputs = 6;
    verify_fails(g, KILN_ERR_VERIFY, "kiln_graph_verify: bad counts: 5 nodes, 6 inputs, 2 outputs");
    g->ninputs = 2;
    ck_assert_int_eq(ir_graph_verify(g), KILN_OK);
    kiln_graph_free(g);
}
END_TEST

/* The index of names (ir_graph_find) past several of its growths: every earlier input and
 * named node still found (a duplicate refused), new names still accepted, and copies of
 * nodes indexed in the graph they are copied into. */
START_TEST(builder_many_names)
{
    kiln_graph *g = new_graph();
    ir_type t = TY(F32, 2);
    char nm[32];
    int32_t prev = -1;
    for (int i = 0; i < 500; i++) {
        snprintf(nm, sizeof nm, "in%d", i);
        int32_t id = input(g, nm, t);
        if (i % 2) { /* a named node after every second input */
            snprintf(nm, sizeof nm, "n%d", i);
            ck_assert_int_ge(ir_graph_add_node(g, "test", IR_OP_ADD, 2, (int32_t[]){prev, id}, NULL, NULL, nm), 0);
        }
        prev = id;
    }
    for (int i = 0; i < 500; i++) {
        snprintf(nm, sizeof nm, "in%d", i);
        int32_t id = ir_graph_find(g, nm, strlen(nm));
        ck_assert_int_ge(id, 0);
        ck_assert_str_eq(g->nodes[id].name, nm);
        ck_assert_int_eq(g->nodes[id].op, IR_OP_INPUT);
        kiln_clear_error();
        ck_assert_int_eq(ir_graph_add_input(g, nm, &t), -1);
        ck_assert_int_eq(kiln_errcode(), KILN_ERR_INVALID_ARG);
        snprintf(nm, sizeof nm, "n%d", i);
        id = ir_graph_find(g, nm, strlen(nm));
        ck_assert_int_eq(id >= 0, i % 2);
        if (id >= 0)
            ck_assert_str_eq(g->nodes[id].name, nm);
    }
    ck_assert_int_lt(ir_graph_find(g, "in500", 5), 0);
    ck_assert_int_lt(ir_graph_find(g, "in5", 2), 0); /* "in" is a prefix, not a name */
    ck_assert_int_ge(ir_graph_add_input(g, "in500", &t), 0);
    /* renumbered in place (inputs first): the index follows the nodes */
    ck_assert(ir_graph_inputs_first(g));
    ck_assert_str_eq(g->nodes[ir_graph_find(g, "n499", 4)].name, "n499");
    ck_assert_int_eq(ir_graph_find(g, "in250", 5), 250);
    ck_assert_int_eq(ir_graph_find(g, "in500", 5), 500);
    kiln_clear_error();
    ck_assert_int_eq(ir_graph_add_input(g, "n7", &t), -1);
    /* a copy (copy_node) indexes the names it copies */
    kiln_graph *c = ir_graph_rebuild(g, NULL);
    ck_assert_ptr_nonnull(c);
    ck_assert_str_eq(c->nodes[ir_graph_find(c, "n301", 4)].name, "n301");
    kiln_clear_error();
    ck_assert_int_eq(ir_graph_add_input(c, "n301", &t), -1);
    ck_assert_int_ge(ir_graph_add_input(c, "n302", &t), 0);
    kiln_graph_free(c);
    kiln_graph_free(g);
}
END_TEST

START_TEST(builder_boundary_errors)
{
    kiln_graph *g = small_graph();
    ir_type t = TY(F32, 2);
    kiln_clear_error();
    ck_assert_int_eq(ir_graph_add_input(g, "x", &t), -1);
    ts_assert_error(KILN_ERR_INVALID_ARG, "kiln_input: duplicate input: 'x' is declared twice");
    /* inputs share the namespace of named nodes */
    ck_assert_int_eq(ir_graph_add_input(g, "s", &t), -1);
    ts_assert_error(KILN_ERR_INVALID_ARG, "kiln_input: duplicate input: 's' is declared twice");
    ck_assert_int_eq(ir_graph_add_input(g, "", &t), -1);
    ts_assert_error(KILN_ERR_INVALID_ARG, "kiln_input: missing name: an input needs a name");
    ck_assert_int_eq(ir_graph_add_input(g, NULL, &t), -1);
    ts_assert_error(KILN_ERR_INVALID_ARG, "kiln_input: missing name");
    ck_assert_int_eq(ir_graph_add_input(g, "w", NULL), -1);
    ts_assert_error(KILN_ERR_INVALID_ARG, "kiln_input: missing type: input 'w' needs a type");
    t.dtype = (kiln_dtype)5;
    ck_assert_int_eq(ir_graph_add_input(g, "w", &t), -1);
    ts_assert_error(KILN_ERR_DTYPE, "kiln_input: bad dtype: 5");
    t = TY(F32, 3);
    t.shape.rank = 9;
    ck_assert_int_eq(ir_graph_add_input(g, "w", &t), -1);
    ts_assert_error(KILN_ERR_SHAPE, "kiln_input: bad rank: 9 (must be 0 to 8)");
    t.shape.rank = -1;
    ck_assert_int_eq(ir_graph_add_input(g, "w", &t), -1);
    ts_assert_error(KILN_ERR_SHAPE, "kiln_input: bad rank: -1 (must be 0 to 8)");
    ck_assert_int_eq(g->ninputs, 2);
    ck_assert_int_eq(g->nnodes, 5);

    ck_assert_int_eq(ir_graph_add_output(g, "out", 2), KILN_ERR_BOUNDARY);
    ts_assert_error(KILN_ERR_BOUNDARY, "duplicate output: 'out'");
    ck_assert_int_eq(ir_graph_add_output(g, "o2", 5), KILN_ERR_BOUNDARY);
    ts_assert_error(KILN_ERR_BOUNDARY, "bad output: 'o2' names node 5");
    ck_assert_int_eq(ir_graph_add_output(g, "o2", -1), KILN_ERR_BOUNDARY);
    ts_assert_error(KILN_ERR_BOUNDARY, "bad output: 'o2' names node -1");
    ck_assert_int_eq(ir_graph_add_output(g, "", 1), KILN_ERR_BOUNDARY);
    ts_assert_error(KILN_ERR_BOUNDARY, "bad output: an output needs a name");
    ck_assert_int_eq(ir_graph_add_output(g, NULL, -1), KILN_ERR_BOUNDARY);
    ts_assert_error(KILN_ERR_BOUNDARY, "bad output: output 2 names node -1");
    ck_assert_int_eq(g->noutputs, 2);
    /* an input may be an output directly, and one node may be two outputs */
    ck_assert_int_eq(ir_graph_add_output(g, "xin", 0), KILN_OK);
    ck_assert_int_eq(ir_graph_add_output(g, "again", 3), KILN_OK);
    ck_assert_int_eq(ir_graph_verify(g), KILN_OK);
    /* an unnamed output (capture names its defaults when the scope ends) is not a graph's */
    ck_assert_int_eq(ir_graph_add_output(g, NULL, 1), KILN_OK);
    ck_assert_int_eq(ir_graph_add_output(g, "xin2", 1), KILN_OK);
    ck_assert_int_eq(ir_graph_verify(g), KILN_ERR_BOUNDARY);
    ts_assert_error(KILN_ERR_BOUNDARY, "kiln_graph_verify: bad output: output 4 has no name");
    kiln_graph_free(g);
}
END_TEST

/* ---- sizes and overflow ---------------------------------------------------------------- */

#define P2(k) ((int64_t)1 << (k))

static void
shape_check_is(kiln_dtype d, ir_shape s, kiln_status want, const char *needle)
{
    kiln_clear_error();
    kiln_status st = ir_shape_check("chk", d, &s);
    char b[IR_TYPE_STR_MAX];
    ck_assert_msg(st == want, "%s: got %s, want %s", ir_shape_str(&s, b, sizeof b),
                  kiln_status_str(st), kiln_status_str(want));
    if (needle)
        ts_assert_error(want, needle);
}

START_TEST(shape_check_limits)
{
    /* the limit is 2^48 bytes inclusive */
    shape_check_is(BOOL, SH(P2(48)), KILN_OK, NULL);
    shape_check_is(BOOL, SH(P2(48) + 1), KILN_ERR_OVERFLOW,
                   "chk: tensor too large: bool [281474976710657] exceeds 2^48 bytes");
    shape_check_is(F32, SH(P2(23), P2(23)), KILN_OK, NULL);
    shape_check_is(F32, SH(P2(23), P2(23) + 1), KILN_ERR_OVERFLOW, NULL);
    shape_check_is(F64, SH(P2(45)), KILN_OK, NULL);
    shape_check_is(F64, SH(P2(45) + 1), KILN_ERR_OVERFLOW, NULL);
    shape_check_is(I64, SH(P2(40), P2(40)), KILN_ERR_OVERFLOW,
                   "chk: tensor too large: i64 [1099511627776,1099511627776] exceeds 2^48 bytes");
    /* products that wrap 64 bits to a small number must still be caught */
    shape_check_is(BOOL, SH(P2(32), P2(32)), KILN_ERR_OVERFLOW, NULL); /* 2^64 -> 0 */
    shape_check_is(BOOL, SH(P2(62), P2(62)), KILN_ERR_OVERFLOW, NULL);
    shape_check_is(BOOL, SH(3, 6148914691236517206), KILN_ERR_OVERFLOW, NULL); /* -> 2 */
    shape_check_is(BOOL, SH(INT64_MAX), KILN_ERR_OVERFLOW, NULL);
    shape_check_is(BOOL, SH(P2(16), P2(16), P2(16), P2(16)), KILN_ERR_OVERFLOW, NULL);
    shape_check_is(BOOL, SH(P2(16), P2(16), P2(16)), KILN_OK, NULL);
    shape_check_is(BOOL, SH(2, 2, 2, 2, 2, 2, 2, P2(41)), KILN_OK, NULL);
    shape_check_is(BOOL, SH(2, 2, 2, 2, 2, 2, 2, P2(42)), KILN_ERR_OVERFLOW, NULL);
    /* an empty tensor's other dims are bounded too */
    shape_check_is(F32, SH(0, P2(46)), KILN_OK, NULL);
    shape_check_is(F32, SH(0, P2(46) + 1), KILN_ERR_OVERFLOW, NULL);
    shape_check_is(F32, SH(P2(40), 0, P2(40)), KILN_ERR_OVERFLOW, NULL);
    shape_check_is(F32, SH(0, 0, 0), KILN_OK, NULL);
    /* negative dims and ranks outside 0..8 */
    shape_check_is(F32, SH(3, -1), KILN_ERR_SHAPE, "chk: negative dimension: [3,-1]");
    shape_check_is(F32, SH(INT64_MIN), KILN_ERR_SHAPE, "chk: negative dimension: [");
    shape_check_is(F32, SH(1, 1, 1, 1, 1, 1, 1, 1), KILN_OK, NULL);
    ir_shape s9 = SH(1, 1, 1, 1, 1, 1, 1, 1);
    s9.rank = 9;
    shape_check_is(F32, s9, KILN_ERR_SHAPE, "chk: bad rank: 9 (must be 0 to 8)");
    s9.rank = -1;
    shape_check_is(F32, s9, KILN_ERR_SHAPE, "chk: bad rank: -1 (must be 0 to 8)");
    s9.rank = 0;
    shape_check_is(F32, s9, KILN_OK, NULL);
    /* the element and byte counts of accepted shapes */
    ir_type t = TY(F64, 3, 0, 5);
    ck_assert_uint_eq(ir_shape_count(&t.shape), 0);
    ck_assert_uint_eq(ir_type_bytes(&t), 0);
    t = TY(I32, 3, 7, 5);
    ck_assert_uint_eq(ir_shape_count(&t.shape), 105);
    ck_assert_uint_eq(ir_type_bytes(&t), 420);
    t = TY0(BOOL);
    ck_assert_uint_eq(ir_shape_count(&t.shape), 1);
    ck_assert_uint_eq(ir_type_bytes(&t), 1);
}
END_TEST

START_TEST(overflow_through_ops)
{
    kiln_graph *g = new_graph();
    ir_type huge = TY(F32, P2(40), P2(40));
    kiln_clear_error();
    ck_assert_int_eq(ir_graph_add_input(g, "h", &huge), -1);
    ts_assert_error(KILN_ERR_OVERFLOW,
                    "kiln_input: tensor too large: f32 [1099511627776,1099511627776] exceeds "
                    "2^48 bytes");
    ir_type neg = TY(F32, -4);
    ck_assert_int_eq(ir_graph_add_input(g, "n", &neg), -1);
    ts_assert_error(KILN_ERR_SHAPE, "kiln_input: negative dimension: [-4]");
    ck_assert_int_eq(g->nnodes, 0);

    int32_t x = input(g, "x", TY(F32, 4));
    int32_t one = input(g, "one", TY(F32, 1));
    ir_attrs at = no_attrs();
    at.shape = SH(P2(40), P2(40));
    add_fails(g, IR_OP_RESHAPE, 1, &x, &at, KILN_ERR_OVERFLOW,
              "test: tensor too large: f32 [1099511627776,1099511627776] exceeds 2^48 bytes");
    add_fails(g, IR_OP_EXPAND, 1, &one, &at, KILN_ERR_OVERFLOW, "test: tensor too large: f32 [");
    at.shape = SH(P2(32), P2(32)); /* 2^64 elements: wraps to 0 if unchecked */
    add_fails(g, IR_OP_EXPAND, 1, &one, &at, KILN_ERR_OVERFLOW, "test: tensor too large");
    /* pad: huge padding is an overflow, never a wrap */
    at = no_attrs();
    at.low[0] = P2(48);
    add_fails(g, IR_OP_PAD, 1, &x, &at, KILN_ERR_OVERFLOW, "test: tensor too large");
    at.low[0] = INT64_MAX;
    at.high[0] = INT64_MAX;
    add_fails(g, IR_OP_PAD, 1, &x, &at, KILN_ERR_OVERFLOW, "test: tensor too large");
    at.low[0] = P2(46), at.high[0] = 0; /* 2^46 + 4 f32 > 2^48 bytes */
    add_fails(g, IR_OP_PAD, 1, &x, &at, KILN_ERR_OVERFLOW,
              "test: tensor too large: f32 [70368744177668] exceeds 2^48 bytes");
    at.low[0] = P2(46) - 4; /* exactly 2^48 bytes */
    assert_shape(tyof(g, add_ok(g, IR_OP_PAD, 1, &x, &at)), F32, SH(P2(46)));
    /* concat of pieces that are each in range */
    int32_t big = input(g, "big", TY(F32, P2(45)));
    at = no_attrs();
    add_fails(g, IR_OP_CONCAT, 3, (int32_t[]){big, big, big}, &at, KILN_ERR_OVERFLOW,
              "test: tensor too large");
    assert_shape(tyof(g, add_ok(g, IR_OP_CONCAT, 2, (int32_t[]){big, big}, &at)), F32, SH(P2(46)));
    int32_t bb = input(g, "bb", TY(BOOL, P2(48)));
    int32_t many[40];
    for (int i = 0; i < 40; i++)
        many[i] = bb;
    add_fails(g, IR_OP_CONCAT, 40, many, &at, KILN_ERR_OVERFLOW, "test: tensor too large");
    /* broadcasting, gather and argmax make results larger than their operands */
    int32_t col = input(g, "col", TY(F32, P2(30), 1));
    int32_t row = input(g, "row", TY(F32, 1, P2(30)));
    add_fails(g, IR_OP_ADD, 2, (int32_t[]){col, row}, NULL, KILN_ERR_OVERFLOW,
              "test: tensor too large: f32 [1073741824,1073741824] exceeds 2^48 bytes");
    int32_t idx = input(g, "idx", TY(I32, P2(30)));
    at.axis = 1;
    add_fails(g, IR_OP_GATHER, 2, (int32_t[]){col, idx}, &at, KILN_ERR_OVERFLOW,
              "test: tensor too large");
    int32_t wide = input(g, "wide", TY(I32, P2(46), 1));
    at = axes_attrs(2, true);
    add_fails(g, IR_OP_ARGMAX, 1, &wide, &at, KILN_ERR_OVERFLOW,
              "test: tensor too large: i64 [70368744177664,1] exceeds 2^48 bytes");
    assert_shape(tyof(g, add_ok(g, IR_OP_REDUCE_MAX, 1, &wide, &at)), I32, SH(P2(46), 1));
    kiln_graph_free(g);
}
END_TEST

/* ---- hash and equality ----------------------------------------------------------------- */

enum {
    V_BASE,
    V_CONST_BYTE,  /* 1.0f -> the next float up */
    V_CONST_ZERO,  /* -0.0f -> +0.0f in the constant */
    V_CONST_NAN,   /* the default quiet NaN -> another NaN payload */
    V_INPUT_DTYPE, /* an unused input f32 -> i32 */
    V_INPUT_SHAPE, /* an unused input [2] -> [3] */
    V_AXES,        /* reduce over axis 1 -> axis 0 of a square value (same result type) */
    V_KEEPDIM,
    V_PERM, /* permute [1,0] -> [0,1] of a square value */
    V_CAST_TO,
    V_SLICE_STOP,  /* stop 3 -> INT64_MAX: the same elements, another attribute */
    V_SLICE_STEP,  /* step 1 -> -1: the same shape */
    V_PAD_VALUE,   /* 0 -> 1 */
    V_PAD_NEGZERO, /* 0 -> -0 */
    V_FULL_VALUE,  /* 2.5 -> 3.5 */
    V_FULL_NAN,    /* NaN payload of a full */
    V_ARANGE_START,
    V_ARANGE_DELTA,
    V_CONCAT_AXIS, /* concat of two [3,3] along axis 0 -> along axis 1 */
    V_OPERAND_ORDER,
    V_OP, /* mul -> sub */
    V_OUTPUT_CHOICE,
    V_OUTPUT_ORDER,
    V_EXPAND_SHAPE,
    V_COUNT
};

static uint32_t
f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float
bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static ir_scalar
scalar_f32(float f)
{
    ir_scalar s;
    memset(&s, 0, sizeof s);
    memcpy(s.bytes, &f, 4);
    return s;
}

static int32_t
named(kiln_graph *g, bool alt, const char *name, ir_op op, int nin, const int32_t *in,
      const ir_attrs *at, const ir_type *given)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s%s", alt ? "other_" : "", name);
    int32_t id = ir_graph_add_node(g, "test", op, nin, in, at, given, alt && nin ? NULL : buf);
    ck_assert_msg(id >= 0, "%s: %s", name, kiln_errmsg());
    return id;
}

/* One graph touching every attribute kind; `v` changes exactly one thing; `alt` renames
 * every input, value, output and the graph. */
static kiln_graph *
hash_graph(int v, bool alt)
{
    kiln_graph *g = ir_graph_new(alt ? "renamed" : "t");
    ck_assert(g != NULL);
    int32_t x = input(g, alt ? "xx" : "x", TY(F32, 4, 3));
    int32_t y = input(g, alt ? "yy" : "y", TY(F32, 4, 3));
    int32_t q = input(g, alt ? "qq" : "q", TY(F32, 3, 3));
    input(g, alt ? "zz" : "z",
          v == V_INPUT_DTYPE   ? TY(I32, 2)
          : v == V_INPUT_SHAPE ? TY(F32, 3)
                               : TY(F32, 2));
    float data[3] = {1.0f, -0.0f, NAN};
    uint32_t nanbits = f32_bits(NAN);
    if (v == V_CONST_BYTE)
        data[0] = nextafterf(1.0f, 2.0f);
    if (v == V_CONST_ZERO)
        data[1] = 0.0f;
    if (v == V_CONST_NAN)
        data[2] = bits_f32(nanbits ^ 1u);
    ir_attrs at = no_attrs();
    at.data = data;
    ir_type tc = TY(F32, 3);
    int32_t c = named(g, alt, "c", IR_OP_CONSTANT, 0, NULL, &at, &tc);
    int32_t s = named(g, alt, "s", IR_OP_ADD, 2,
                      v == V_OPERAND_ORDER ? (int32_t[]){y, x} : (int32_t[]){x, y}, NULL, NULL);
    int32_t sc = named(g, alt, "sc", IR_OP_ADD, 2, (int32_t[]){s, c}, NULL, NULL);
    int32_t m =
        named(g, alt, "m", v == V_OP ? IR_OP_SUB : IR_OP_MUL, 2, (int32_t[]){sc, y}, NULL, NULL);
    at = axes_attrs(v == V_AXES ? 1 : 2, v == V_KEEPDIM);
    int32_t r = named(g, alt, "r", IR_OP_REDUCE_SUM, 1, &q, &at, NULL);
    at = no_attrs();
    at.perm[0] = v == V_PERM ? 0 : 1, at.perm[1] = v == V_PERM ? 1 : 0;
    named(g, alt, "p", IR_OP_PERMUTE, 1, &q, &at, NULL);
    at = no_attrs();
    at.to = v == V_CAST_TO ? I64 : F64;
    named(g, alt, "ct", IR_OP_CAST, 1, &m, &at, NULL);
    at = no_attrs();
    at.begin[0] = 0, at.stop[0] = 4, at.step[0] = v == V_SLICE_STEP ? -1 : 1;
    if (v == V_SLICE_STEP)
        at.begin[0] = INT64_MAX, at.stop[0] = INT64_MIN;
    at.begin[1] = 0, at.stop[1] = v == V_SLICE_STOP ? INT64_MAX : 3, at.step[1] = 2;
    int32_t sl = named(g, alt, "sl", IR_OP_SLICE, 1, &x, &at, NULL);
    at = no_attrs();
    at.low[0] = 1, at.high[1] = 1;
    at.value = scalar_f32(v == V_PAD_VALUE ? 1.0f : v == V_PAD_NEGZERO ? -0.0f : 0.0f);
    int32_t pd = named(g, alt, "pd", IR_OP_PAD, 1, &m, &at, NULL);
    at = no_attrs();
    at.value = scalar_f32(v == V_FULL_VALUE ? 3.5f : 2.5f);
    ir_type t0 = TY0(F32);
    named(g, alt, "f", IR_OP_FULL, 0, NULL, &at, &t0);
    at = no_attrs();
    at.value = scalar_f32(v == V_FULL_NAN ? bits_f32(nanbits | 2u) : NAN);
    named(g, alt, "fn", IR_OP_FULL, 0, NULL, &at, &t0);
    at = no_attrs();
    at.start = scalar_f32(v == V_ARANGE_START ? 1.0f : 0.0f);
    at.delta = scalar_f32(v == V_ARANGE_DELTA ? 0.25f : 0.5f);
    ir_type t5 = TY(F32, 5);
    named(g, alt, "ar", IR_OP_ARANGE, 0, NULL, &at, &t5);
    at = no_attrs();
    at.axis = v == V_CONCAT_AXIS ? 1 : 0;
    named(g, alt, "cat", IR_OP_CONCAT, 2, (int32_t[]){q, q}, &at, NULL);
    at = no_attrs();
    at.shape = v == V_EXPAND_SHAPE ? SH(1, 4, 3) : SH(2, 4, 3);
    named(g, alt, "ex", IR_OP_EXPAND, 1, &x, &at, NULL);
    const char *o1 = alt ? "first" : "o1", *o2 = alt ? "second" : "o2";
    int32_t n1 = r, n2 = v == V_OUTPUT_CHOICE ? sl : pd;
    if (v == V_OUTPUT_ORDER) {
        int32_t t = n1;
        n1 = n2, n2 = t;
    }
    ck_assert_int_eq(ir_graph_add_output(g, o1, n1), KILN_OK);
    ck_assert_int_eq(ir_graph_add_output(g, o2, n2), KILN_OK);
    ck_assert_int_eq(ir_graph_verify(g), KILN_OK);
    return g;
}

START_TEST(hash_names_do_not_matter)
{
    kiln_graph *a = hash_graph(V_BASE, false), *b = hash_graph(V_BASE, true);
    ck_assert_str_ne(a->nodes[0].name, b->nodes[0].name);
    ck_assert_str_ne(a->outputs[0].name, b->outputs[0].name);
    ck_assert_uint_eq(kiln_graph_hash(a), kiln_graph_hash(b));
    ck_assert_uint_eq(kiln_graph_generic_hash(a), kiln_graph_generic_hash(b));
    ck_assert_int_eq(kiln_graph_equal(a, b), 1);
    ck_assert_int_eq(kiln_graph_equal(b, a), 1);
    ck_assert_int_eq(kiln_graph_equal(a, a), 1);
    /* the public hash is the exact (non-generic) internal hash, and deterministic */
    ck_assert_uint_eq(kiln_graph_hash(a), ir_graph_hash(a, false));
    ck_assert_uint_eq(kiln_graph_generic_hash(a), ir_graph_hash(a, true));
    kiln_graph *c = hash_graph(V_BASE, false);
    ck_assert_uint_eq(kiln_graph_hash(a), kiln_graph_hash(c));
    kiln_graph_free(a);
    kiln_graph_free(b);
    kiln_graph_free(c);
}
END_TEST

START_TEST(hash_each_change_differs)
{
    kiln_graph *base = hash_graph(V_BASE, false);
    uint64_t hashes[V_COUNT];
    hashes[V_BASE] = kiln_graph_hash(base);
    for (int v = 1; v < V_COUNT; v++) {
        kiln_graph *g = hash_graph(v, v % 2 == 0);
        hashes[v] = kiln_graph_hash(g);
        ck_assert_msg(hashes[v] != hashes[V_BASE], "variant %d hashes like the base", v);
        ck_assert_msg(!kiln_graph_equal(base, g), "variant %d equals the base", v);
        ck_assert_msg(!kiln_graph_equal(g, base), "variant %d equals the base", v);
        for (int w = 1; w < v; w++)
            ck_assert_msg(hashes[w] != hashes[v], "variants %d and %d collide", w, v);
        kiln_graph_free(g);
    }
    kiln_graph_free(base);
}
END_TEST

/* in0: f32 a_shape, in1: f32 b_shape; out = op(in0, in1), then a slice, pad, reshape of the
 * result whose attributes scale with the sizes. */
static kiln_graph *
generic_graph(ir_op op, ir_type ta, ir_type tb, bool tail)
{
    kiln_graph *g = new_graph();
    int32_t a = input(g, "a", ta);
    int32_t b = input(g, "b", tb);
    int32_t r = BIN(g, op, a, b);
    if (tail) {
        const ir_type *t = tyof(g, r);
        int64_t n0 = t->shape.dims[0], n1 = t->shape.dims[1];
        ir_attrs at = no_attrs();
        at.begin[0] = 1, at.stop[0] = n0, at.step[0] = 1;
        at.begin[1] = 0, at.stop[1] = n1 - 1, at.step[1] = 1;
        r = add_ok(g, IR_OP_SLICE, 1, &r, &at);
        at = no_attrs();
        at.low[0] = n0, at.high[1] = n1;
        r = add_ok(g, IR_OP_PAD, 1, &r, &at);
        t = tyof(g, r);
        at = no_attrs();
        at.shape = SH(t->shape.dims[0] * t->shape.dims[1]);
        r = add_ok(g, IR_OP_RESHAPE, 1, &r, &at);
    }
    ck_assert_int_eq(ir_graph_add_output(g, "out", r), KILN_OK);
    return g;
}

START_TEST(generic_hash)
{
    kiln_graph *base = generic_graph(IR_OP_ADD, TY(F32, 4, 3), TY(F32, 4, 3), true);
    uint64_t gh = kiln_graph_generic_hash(base);
    /* only sizes differ (also in slice bounds, padding and reshape targets) */
    kiln_graph *g = generic_graph(IR_OP_ADD, TY(F32, 9, 7), TY(F32, 9, 7), true);
    ck_assert_uint_eq(kiln_graph_generic_hash(g), gh);
    ck_assert_uint_ne(kiln_graph_hash(g), kiln_graph_hash(base));
    ck_assert_int_eq(kiln_graph_equal(g, base), 0);
    kiln_graph_free(g);
    /* a zero size is a size like any other than 1 */
    g = generic_graph(IR_OP_ADD, TY(F32, 2, 0), TY(F32, 2, 0), false);
    kiln_graph *h = generic_graph(IR_OP_ADD, TY(F32, 5, 6), TY(F32, 5, 6), false);
    ck_assert_uint_eq(kiln_graph_generic_hash(g), kiln_graph_generic_hash(h));
    ck_assert_uint_ne(kiln_graph_hash(g), kiln_graph_hash(h));
    kiln_graph_free(g);
    kiln_graph_free(h);
    /* a dim flipping between 1 and >1 changes the broadcast pattern */
    g = generic_graph(IR_OP_ADD, TY(F32, 4, 1), TY(F32, 4, 3), true);
    ck_assert_uint_ne(kiln_graph_generic_hash(g), gh);
    kiln_graph_free(g);
    g = generic_graph(IR_OP_ADD, TY(F32, 1, 3), TY(F32, 1, 3), false);
    h = generic_graph(IR_OP_ADD, TY(F32, 2, 3), TY(F32, 2, 3), false);
    ck_assert_uint_ne(kiln_graph_generic_hash(g), kiln_graph_generic_hash(h));
    kiln_graph_free(g);
    kiln_graph_free(h);
    /* rank changes */
    g = generic_graph(IR_OP_ADD, TY(F32, 4, 3), TY(F32, 3), true);
    ck_assert_uint_ne(kiln_graph_generic_hash(g), gh);
    kiln_graph_free(g);
    g = generic_graph(IR_OP_ADD, TY(F32, 2, 4, 3), TY(F32, 2, 4, 3), false);
    h = generic_graph(IR_OP_ADD, TY(F32, 4, 3), TY(F32, 4, 3), false);
    ck_assert_uint_ne(kiln_graph_generic_hash(g), kiln_graph_generic_hash(h));
    kiln_graph_free(g);
    /* an op changes */
    g = generic_graph(IR_OP_SUB, TY(F32, 4, 3), TY(F32, 4, 3), true);
    ck_assert_uint_ne(kiln_graph_generic_hash(g), gh);
    kiln_graph_free(g);
    /* a dtype changes */
    g = generic_graph(IR_OP_ADD, TY(F64, 4, 3), TY(F64, 4, 3), false);
    ck_assert_uint_ne(kiln_graph_generic_hash(g), kiln_graph_generic_hash(h));
    kiln_graph_free(g);
    kiln_graph_free(h);
    kiln_graph_free(base);
}
END_TEST

START_TEST(hash_misuse)
{
    kiln_graph *g = generic_graph(IR_OP_ADD, TY(F32, 2), TY(F32, 2), false);
    kiln_clear_error();
    ck_assert_int_eq(kiln_graph_equal(g, NULL), 0);
    ts_assert_error(KILN_ERR_MISUSE, "kiln_graph_equal: invalid handle: graph is NULL");
    ck_assert_uint_eq(kiln_graph_hash(NULL), 0);
    ts_assert_error(KILN_ERR_MISUSE, "kiln_graph_hash: invalid handle");
    ck_assert_uint_eq(kiln_graph_generic_hash(NULL), 0);
    ts_assert_error(KILN_ERR_MISUSE, "kiln_graph_generic_hash: invalid handle");
    /* a struct that is not a live graph is detected (it was never registered) */
    kiln_graph fake;
    memset(&fake, 0, sizeof fake);
    ck_assert_int_eq(kiln_graph_equal(&fake, g), 0);
    ts_assert_error(KILN_ERR_MISUSE, "not a live kiln_graph");
    kiln_graph_free(NULL);
    kiln_graph_free(g);
}
END_TEST

/* ---- cast rules (ir_convert) --------------------------------------------------------------- */

static int64_t
conv_i(kiln_dtype to, kiln_dtype from, const void *src)
{
    unsigned char dst[8] = {0};
    ir_convert(to, dst, 0, from, src, 0);
    switch (to) {
    case I32: {
        int32_t v;
        memcpy(&v, dst, 4);
        return v;
    }
    case I64: {
        int64_t v;
        memcpy(&v, dst, 8);
        return v;
    }
    case BOOL:
        ck_assert_msg(dst[0] <= 1, "bool byte %u", dst[0]);
        return dst[0];
    default:
        ck_abort_msg("not an int target");
    }
    return 0;
}

static double
conv_f(kiln_dtype to, kiln_dtype from, const void *src)
{
    unsigned char dst[8] = {0};
    ir_convert(to, dst, 0, from, src, 0);
    if (to == F32) {
        float v;
        memcpy(&v, dst, 4);
        return v;
    }
    double v;
    memcpy(&v, dst, 8);
    return v;
}

#define FROM_F32(v) (&(float){(v)})
#define FROM_F64(v) (&(double){(v)})
#define FROM_I32(v) (&(int32_t){(v)})
#define FROM_I64(v) (&(int64_t){(v)})
#define FROM_BOOL(v) (&(uint8_t){(v)})

START_TEST(cast_float_to_int)
{
    /* truncation toward zero */
    ck_assert_int_eq(conv_i(I32, F32, FROM_F32(2.9f)), 2);
    ck_assert_int_eq(conv_i(I32, F32, FROM_F32(-2.9f)), -2);
    ck_assert_int_eq(conv_i(I64, F64, FROM_F64(-0.5)), 0);
    ck_assert_int_eq(conv_i(I64, F64, FROM_F64(-0.0)), 0);
    ck_assert_int_eq(conv_i(I32, F64, FROM_F64(2147483647.9)), INT32_MAX);
    ck_assert_int_eq(conv_i(I32, F64, FROM_F64(-2147483648.9)), INT32_MIN);
    ck_assert_int_eq(conv_i(I32, F64, FROM_F64(-2147483647.9)), -2147483647);
    /* the largest double below 2^63 is exact in i64 */
    ck_assert_int_eq(conv_i(I64, F64, FROM_F64(9223372036854774784.0)), 9223372036854774784LL);
    ck_assert_int_eq(conv_i(I64, F64, FROM_F64(-9223372036854775808.0)), INT64_MIN);
    /* saturation */
    ck_assert_int_eq(conv_i(I32, F32, FROM_F32(3e9f)), INT32_MAX);
    ck_assert_int_eq(conv_i(I32, F32, FROM_F32(-3e9f)), INT32_MIN);
    ck_assert_int_eq(conv_i(I32, F64, FROM_F64(2147483648.0)), INT32_MAX);
    ck_assert_int_eq(conv_i(I64, F64, FROM_F64(9223372036854775808.0)), INT64_MAX);
    ck_assert_int_eq(conv_i(I64, F32, FROM_F32(1e19f)), INT64_MAX);
    ck_assert_int_eq(conv_i(I64, F64, FROM_F64(-1e300)), INT64_MIN);
    ck_assert_int_eq(conv_i(I32, F64, FROM_F64(INFINITY)), INT32_MAX);
    ck_assert_int_eq(conv_i(I64, F32, FROM_F32(-INFINITY)), INT64_MIN);
    /* NaN -> 0, whatever its sign or payload */
    ck_assert_int_eq(conv_i(I32, F32, FROM_F32(NAN)), 0);
    ck_assert_int_eq(conv_i(I64, F64, FROM_F64(-NAN)), 0);
    ck_assert_int_eq(conv_i(I64, F32, FROM_F32(bits_f32(0x7f800001u))), 0);
    /* -> bool is x != 0: NaN is true, -0.0 false, tiny values true */
    ck_assert_int_eq(conv_i(BOOL, F32, FROM_F32(NAN)), 1);
    ck_assert_int_eq(conv_i(BOOL, F64, FROM_F64(-0.0)), 0);
    ck_assert_int_eq(conv_i(BOOL, F32, FROM_F32(0.0f)), 0);
    ck_assert_int_eq(conv_i(BOOL, F64, FROM_F64(4.9e-324)), 1);
    ck_assert_int_eq(conv_i(BOOL, F32, FROM_F32(-INFINITY)), 1);
}
END_TEST

START_TEST(cast_int_and_bool)
{
    /* int -> int wraps (two's complement, low bits kept) */
    ck_assert_int_eq(conv_i(I32, I64, FROM_I64(0x180000000LL)), INT32_MIN);
    ck_assert_int_eq(conv_i(I32, I64, FROM_I64(0x100000005LL)), 5);
    ck_assert_int_eq(conv_i(I32, I64, FROM_I64(0xFFFFFFFFLL)), -1);
    ck_assert_int_eq(conv_i(I32, I64, FROM_I64(-1)), -1);
    ck_assert_int_eq(conv_i(I32, I64, FROM_I64(INT64_MIN)), 0);
    ck_assert_int_eq(conv_i(I32, I64, FROM_I64(INT64_MAX)), -1);
    ck_assert_int_eq(conv_i(I64, I32, FROM_I32(-5)), -5);
    ck_assert_int_eq(conv_i(I64, I32, FROM_I32(INT32_MIN)), INT32_MIN);
    /* -> bool is x != 0 on the whole value, not its low byte */
    ck_assert_int_eq(conv_i(BOOL, I32, FROM_I32(256)), 1);
    ck_assert_int_eq(conv_i(BOOL, I64, FROM_I64(0x100000000LL)), 1);
    ck_assert_int_eq(conv_i(BOOL, I64, FROM_I64(INT64_MIN)), 1);
    ck_assert_int_eq(conv_i(BOOL, I32, FROM_I32(0)), 0);
    /* bool -> x is 0 or 1 */
    for (uint8_t b = 0; b <= 1; b++) {
        ck_assert_int_eq(conv_i(I32, BOOL, FROM_BOOL(b)), b);
        ck_assert_int_eq(conv_i(I64, BOOL, FROM_BOOL(b)), b);
        ck_assert_int_eq(conv_i(BOOL, BOOL, FROM_BOOL(b)), b);
        ck_assert(conv_f(F32, BOOL, FROM_BOOL(b)) == (double)b);
        ck_assert(conv_f(F64, BOOL, FROM_BOOL(b)) == (double)b);
    }
    ck_assert(!signbit(conv_f(F32, BOOL, FROM_BOOL(0))));
    /* int -> float: exact where representable, else round to nearest even */
    ck_assert(conv_f(F64, I32, FROM_I32(INT32_MIN)) == -2147483648.0);
    ck_assert(conv_f(F32, I32, FROM_I32(16777217)) == 16777216.0); /* tie, to even */
    ck_assert(conv_f(F32, I32, FROM_I32(16777219)) == 16777220.0); /* tie, to even */
    ck_assert(conv_f(F64, I64, FROM_I64((1LL << 53) + 1)) == 9007199254740992.0);
    ck_assert(conv_f(F64, I64, FROM_I64(INT64_MAX)) == 9223372036854775808.0);
    /* element indices: j and i address the right slots */
    int32_t src[3] = {7, -8, 9};
    int64_t dst[4] = {0, 0, 0, 0};
    ir_convert(I64, dst, 3, I32, src, 1);
    ir_convert(I64, dst, 0, I32, src, 2);
    ck_assert(dst[0] == 9 && dst[1] == 0 && dst[2] == 0 && dst[3] == -8);
}
END_TEST

START_TEST(cast_float_rounding)
{
    /* f64 -> f32 on an exact halfway value: 1 + 2^-24 lies midway between 1 and
     * 1 + 2^-23; ties go to the even significand, 1.  1 + 3*2^-24 lies midway between
     * 1 + 2^-23 (odd) and 1 + 2^-22 (even): up. */
    ck_assert(conv_f(F32, F64, FROM_F64(1.0 + ldexp(1, -24))) == 1.0);
    ck_assert(conv_f(F32, F64, FROM_F64(1.0 + 3 * ldexp(1, -24))) == 1.0 + ldexp(1, -22));
    ck_assert(conv_f(F32, F64, FROM_F64(-(1.0 + ldexp(1, -24)))) == -1.0);
    /* just above the tie rounds up */
    ck_assert(conv_f(F32, F64, FROM_F64(1.0 + ldexp(1, -24) + ldexp(1, -50))) ==
              1.0 + ldexp(1, -23));
    /* overflow to inf, underflow to the smallest subnormal and to zero */
    ck_assert(isinf(conv_f(F32, F64, FROM_F64(1e300))));
    ck_assert(conv_f(F32, F64, FROM_F64(ldexp(1, -149))) == ldexp(1, -149));
    ck_assert(conv_f(F32, F64, FROM_F64(ldexp(1, -151))) == 0.0);
    ck_assert(signbit(conv_f(F32, F64, FROM_F64(-0.0))));
    ck_assert(isnan(conv_f(F32, F64, FROM_F64(NAN))));
    ck_assert(isnan(conv_f(F64, F32, FROM_F32(NAN))));
    ck_assert(conv_f(F64, F32, FROM_F32(0.1f)) == (double)0.1f);

    /* i64 -> f32 must round once.  v = 2^62 + 2^38 + 1.  Floats near 2^62 are 2^39 apart,
     * so the nearest are 2^62 and 2^62 + 2^39, and v is 1 above their midpoint 2^62 + 2^38:
     * the correct result is 2^62 + 2^39.  Through double first (spacing 2^10 there) v would
     * round to 2^62 + 2^38, exactly the midpoint, and the tie would go to the even
     * significand 2^62: a double rounding error. */
    int64_t v = (1LL << 62) + (1LL << 38) + 1;
    ck_assert(conv_f(F32, I64, FROM_I64(v)) == ldexp(1, 62) + ldexp(1, 39));
    ck_assert(conv_f(F32, I64, FROM_I64(-v)) == -(ldexp(1, 62) + ldexp(1, 39)));
    /* and the midpoint itself does go to even */
    ck_assert(conv_f(F32, I64, FROM_I64((1LL << 62) + (1LL << 38))) == ldexp(1, 62));

    /* same dtype: the bits are copied (NaN payloads, -0.0) */
    uint32_t nb = 0x7fc00123u, out = 0;
    ir_convert(F32, &out, 0, F32, &nb, 0);
    ck_assert_uint_eq(out, nb);
    double nz = -0.0, nz2 = 1.0;
    ir_convert(F64, &nz2, 0, F64, &nz, 0);
    ck_assert(nz2 == 0.0 && signbit(nz2));

    /* scalar attributes use the same rules */
    ir_scalar s = ir_scalar_from_f64(I32, -3.99);
    ck_assert_int_eq(ir_scalar_i64(I32, &s), -3);
    s = ir_scalar_from_i64(BOOL, 256);
    ck_assert_int_eq(s.bytes[0], 1);
    ck_assert(ir_scalar_f64(BOOL, &s) == 1.0);
    s = ir_scalar_from_f64(F32, NAN);
    ck_assert(isnan(ir_scalar_f64(F32, &s)));
    ck_assert_int_eq(ir_scalar_i64(F32, &s), 0);
    s = ir_scalar_from_i64(I64, INT64_MIN);
    ck_assert(ir_scalar_i64(I64, &s) == INT64_MIN);
}
END_TEST

START_TEST(dtype_names)
{
    static const struct {
        kiln_dtype t;
        const char *name;
        size_t size;
    } want[] = {
        {F32, "f32", 4}, {F64, "f64", 8}, {I32, "i32", 4}, {I64, "i64", 8}, {BOOL, "bool", 1}};
    ck_assert_int_eq(KILN_DTYPE_COUNT, 5);
    for (int k = 0; k < 5; k++) {
        ck_assert_str_eq(kiln_dtype_name(want[k].t), want[k].name);
        ck_assert_uint_eq(kiln_dtype_size(want[k].t), want[k].size);
        ck_assert_int_eq(ir_dtype_from_name(want[k].name, strlen(want[k].name)), want[k].t);
        ck_assert(ir_dtype_is_valid(want[k].t));
        ck_assert_int_eq(ir_dtype_is_float(want[k].t), want[k].t == F32 || want[k].t == F64);
        ck_assert_int_eq(ir_dtype_is_int(want[k].t), want[k].t == I32 || want[k].t == I64);
    }
    ck_assert_str_eq(kiln_dtype_name((kiln_dtype)5), "?");
    ck_assert_str_eq(kiln_dtype_name((kiln_dtype)-1), "?");
    ck_assert_uint_eq(kiln_dtype_size((kiln_dtype)5), 0);
    ck_assert_uint_eq(kiln_dtype_size((kiln_dtype)-1), 0);
    ck_assert(!ir_dtype_is_valid(5) && !ir_dtype_is_valid(-1));
    ck_assert_int_eq(ir_dtype_from_name("f3", 2), -1);
    ck_assert_int_eq(ir_dtype_from_name("f32x", 4), -1);
    ck_assert_int_eq(ir_dtype_from_name("f32x", 3), F32); /* length-delimited */
    ck_assert_int_eq(ir_dtype_from_name("F32", 3), -1);
    ck_assert_int_eq(ir_dtype_from_name("", 0), -1);
}
END_TEST

START_TEST(status_strings)
{
    static const char *const want[] = {"ok",
                                       "out of memory",
                                       "invalid argument",
                                       "dtype error",
                                       "shape error",
                                       "size overflow",
                                       "parse error",
                                       "graph verification failed",
                                       "i/o error",
                                       "bad file format",
                                       "unsupported",
                                       "capture operation outside a scope",
                                       "capture scope is already complete",
                                       "tensor belongs to another scope",
                                       "device already has an open scope",
                                       "bad scope boundary",
                                       "invalid handle",
                                       "compilation failed",
                                       "internal error"};
    ck_assert_int_eq(KILN_STATUS_COUNT, (int)(sizeof want / sizeof want[0]));
    for (int c = 0; c < KILN_STATUS_COUNT; c++)
        ck_assert_str_eq(kiln_status_str((kiln_status)c), want[c]);
    ck_assert_str_eq(kiln_status_str(KILN_STATUS_COUNT), "unknown status");
    ck_assert_str_eq(kiln_status_str((kiln_status)-1), "unknown status");
    ck_assert_str_eq(kiln_status_str((kiln_status)1000), "unknown status");
    ck_assert_str_eq(kiln_version(), KILN_VERSION_STRING);
}
END_TEST

/* ---- the error API ----------------------------------------------------------------------- */

START_TEST(error_state)
{
    kiln_clear_error();
    ck_assert_int_eq(kiln_errcode(), KILN_OK);
    ck_assert_str_eq(kiln_errmsg(), "");
    ck_assert_int_eq(ir_error(KILN_ERR_SHAPE, "api: problem: %d and %s", 42, "x"), KILN_ERR_SHAPE);
    ck_assert_int_eq(kiln_errcode(), KILN_ERR_SHAPE);
    ck_assert_str_eq(kiln_errmsg(), "api: problem: 42 and x");
    /* wrapping the current message in a new one (source and destination are one buffer) */
    ir_error(KILN_ERR_PARSE, "outer: %s", kiln_errmsg());
    ck_assert_int_eq(kiln_errcode(), KILN_ERR_PARSE);
    ck_assert_str_eq(kiln_errmsg(), "outer: api: problem: 42 and x");
    /* a successful call does not clear the error; kiln_clear_error does */
    kiln_graph *g = new_graph();
    ck_assert_int_eq(kiln_errcode(), KILN_ERR_PARSE);
    kiln_graph_free(g);
    kiln_clear_error();
    ck_assert_int_eq(kiln_errcode(), KILN_OK);
    ck_assert_str_eq(kiln_errmsg(), "");
    /* an over-long message is cut, still terminated */
    char *longs = malloc(10000);
    ck_assert(longs != NULL);
    memset(longs, 'a', 9999);
    longs[9999] = '\0';
    ir_error(KILN_ERR_IO, "x: %s", longs);
    size_t n = strlen(kiln_errmsg());
    ck_assert_uint_gt(n, 1000);
    ck_assert_uint_lt(n, 9999);
    ck_assert(strncmp(kiln_errmsg(), "x: aaaa", 7) == 0);
    free(longs);
    kiln_clear_error();
}
END_TEST

struct hook_log {
    int calls;
    kiln_status last;
    char msg[256];
};

static void
record_hook(kiln_status st, const char *msg, void *user)
{
    struct hook_log *log = user;
    log->calls++;
    log->last = st;
    snprintf(log->msg, sizeof log->msg, "%s", msg);
}

START_TEST(error_hook)
{
    struct hook_log log = {0, KILN_OK, ""};
    kiln_set_error_hook(record_hook, &log);
    ir_error(KILN_ERR_DTYPE, "hooked: %s", "one");
    ck_assert_int_eq(log.calls, 1);
    ck_assert_int_eq(log.last, KILN_ERR_DTYPE);
    ck_assert_str_eq(log.msg, "hooked: one");
    /* errors raised inside the library reach it with their real text */
    kiln_graph *g = new_graph();
    int32_t a = input(g, "a", TY(F32, 4, 3));
    int32_t b = input(g, "b", TY(F32, 4, 2));
    ck_assert_int_eq(
        ir_graph_add_node(g, "kiln_add", IR_OP_ADD, 2, (int32_t[]){a, b}, NULL, NULL, NULL), -1);
    ck_assert_int_eq(log.calls, 2);
    ck_assert_int_eq(log.last, KILN_ERR_SHAPE);
    ck_assert_str_eq(log.msg, "kiln_add: shape mismatch: [4,3] vs [4,2]");
    ck_assert_str_eq(log.msg, kiln_errmsg());
    /* success and kiln_clear_error do not call it */
    add_ok(g, IR_OP_ADD, 2, (int32_t[]){a, a}, NULL);
    kiln_clear_error();
    ck_assert_int_eq(log.calls, 2);
    kiln_graph_free(g);
    /* removed with NULL */
    kiln_set_error_hook(NULL, NULL);
    ir_error(KILN_ERR_IO, "unhooked");
    ck_assert_int_eq(log.calls, 2);
    kiln_clear_error();
}
END_TEST

/* Run `fn(code)` in a child with KILN_ABORT_ON_MISUSE=`env`; returns the wait status. */
static int
in_child(const char *env, void (*fn)(kiln_status), kiln_status code)
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* the abort message goes to stderr: keep the test log clean */
        if (!freopen("/dev/null", "w", stderr))
            _exit(3);
        if (env)
            setenv("KILN_ABORT_ON_MISUSE", env, 1);
        else
            unsetenv("KILN_ABORT_ON_MISUSE");
        ir_config_reload(); /* the library reads the environment once */
        fn(code);
        _exit(kiln_errcode() == code ? 0 : 2);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return status;
}

static void
raise_error(kiln_status code)
{
    ir_error(code, "test: raised: %d", (int)code);
}

static void
free_fake_graph(kiln_status code)
{
    (void)code;
    kiln_graph fake;
    memset(&fake, 0, sizeof fake);
    kiln_graph_free(&fake);
}

static bool
aborted(int status)
{
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

static bool
exited_ok(int status)
{
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

START_TEST(abort_on_misuse)
{
    static const kiln_status misuse[] = {KILN_ERR_MISUSE,       KILN_ERR_OUTSIDE_SCOPE,
                                         KILN_ERR_SCOPE_CLOSED, KILN_ERR_FOREIGN_TENSOR,
                                         KILN_ERR_SCOPE_ACTIVE, KILN_ERR_BOUNDARY};
    for (size_t k = 0; k < sizeof misuse / sizeof misuse[0]; k++) {
        ck_assert_msg(aborted(in_child("1", raise_error, misuse[k])), "%s did not abort",
                      kiln_status_str(misuse[k]));
        /* off by default and with any other value */
        ck_assert(exited_ok(in_child(NULL, raise_error, misuse[k])));
        ck_assert(exited_ok(in_child("0", raise_error, misuse[k])));
    }
    /* bad data is never fatal, even in abort mode */
    for (int c = 1; c < KILN_STATUS_COUNT; c++) {
        bool is_misuse = false;
        for (size_t k = 0; k < sizeof misuse / sizeof misuse[0]; k++)
            is_misuse |= misuse[k] == (kiln_status)c;
        if (!is_misuse)
            ck_assert_msg(exited_ok(in_child("1", raise_error, (kiln_status)c)), "%s aborted",
                          kiln_status_str((kiln_status)c));
    }
    /* a real misuse through the API */
    ck_assert(aborted(in_child("1", free_fake_graph, KILN_ERR_MISUSE)));
    ck_assert(exited_ok(in_child(NULL, free_fake_graph, KILN_ERR_MISUSE)));
}
END_TEST

/* ---- arena and allocation failure ----------------------------------------------------------- */

START_TEST(arena_alignment)
{
    ir_arena a = {NULL};
    unsigned char *ptrs[600];
    size_t sizes[600];
    /* many small requests of mixed sizes and alignments across several chunks */
    for (int k = 0; k < 600; k++) {
        size_t align = (size_t)1 << (k % 7); /* 1 .. 64 */
        size_t size = (size_t)(k * 37 % 300);
        unsigned char *p = ir_arena_alloc(&a, size, align);
        ck_assert_msg(p != NULL, "%s", kiln_errmsg());
        ck_assert_msg(((uintptr_t)p & (align - 1)) == 0, "request %d misaligned", k);
        for (size_t i = 0; i < size; i++)
            ck_assert_msg(p[i] == 0, "request %d not zeroed", k);
        memset(p, k & 0xff, size);
        ptrs[k] = p, sizes[k] = size;
    }
    /* no request overlapped another: every byte still holds its writer's mark */
    for (int k = 0; k < 600; k++)
        for (size_t i = 0; i < sizes[k]; i++)
            ck_assert_msg(ptrs[k][i] == (k & 0xff), "request %d overwritten", k);
    char *s = ir_arena_strdup(&a, "hello");
    ck_assert_str_eq(s, "hello");
    char *t = ir_arena_strndup(&a, "world!", 5);
    ck_assert_str_eq(t, "world");
    ck_assert(ir_arena_alloc(&a, 0, 8) != NULL);
    ir_arena_free(&a);
    ck_assert(a.head == NULL);
    ir_arena_free(&a); /* twice is harmless */
}
END_TEST

START_TEST(arena_big_and_failure)
{
    ir_arena a = {NULL};
    unsigned char *small = ir_arena_alloc(&a, 10, 1);
    ck_assert(small != NULL);
    memset(small, 0x5a, 10);
    /* requests far above the chunk size, at every alignment */
    for (size_t align = 1; align <= 64; align *= 2) {
        size_t size = ((size_t)1 << 20) + align + 3;
        unsigned char *p = ir_arena_alloc(&a, size, align);
        ck_assert(p != NULL);
        ck_assert(((uintptr_t)p & (align - 1)) == 0);
        ck_assert(p[0] == 0 && p[size / 2] == 0 && p[size - 1] == 0);
        memset(p, 0xa5, size); /* ASan catches a short chunk */
        /* small requests keep working after a big one */
        unsigned char *q = ir_arena_alloc(&a, 24, 8);
        ck_assert(q != NULL && ((uintptr_t)q & 7) == 0);
        memset(q, 0x11, 24);
    }
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(small[i], 0x5a);
    /* impossible sizes fail cleanly */
    kiln_clear_error();
    ck_assert(ir_arena_alloc(&a, SIZE_MAX, 8) == NULL);
    ts_assert_error(KILN_ERR_NOMEM, "kiln: out of memory: arena request of ");
    kiln_clear_error();
    /* (sizes that pass the guard are left to malloc, which ASan would abort on) */
    ck_assert(ir_arena_alloc(&a, SIZE_MAX - 64, 1) == NULL);
    ck_assert_int_eq(kiln_errcode(), KILN_ERR_NOMEM);
    kiln_clear_error();
    ck_assert(ir_arena_strndup(&a, "x", SIZE_MAX) == NULL);
    ck_assert_int_eq(kiln_errcode(), KILN_ERR_NOMEM);
    /* a failing chunk allocation */
    ir_test_fail_alloc_after(0);
    kiln_clear_error();
    void *p = ir_arena_alloc(&a, (size_t)1 << 16, 16);
    ir_test_fail_alloc_after(-1);
    ck_assert(p == NULL);
    ts_assert_error(KILN_ERR_NOMEM, "kiln: out of memory: arena request of 65536 bytes");
    /* the fail-after counter counts successes first */
    ir_test_fail_alloc_after(1);
    void *m1 = ir_malloc(8), *m2 = ir_malloc(8), *m3 = ir_calloc(1, 8);
    ir_test_fail_alloc_after(-1);
    ck_assert(m1 != NULL && m2 == NULL && m3 == NULL);
    ir_free(m1);
    void *m4 = ir_realloc(NULL, 0);
    ck_assert(m4 != NULL);
    ir_free(m4);
    char *d = ir_strdup("dup");
    ck_assert_str_eq(d, "dup");
    ir_free(d);
    ir_arena_free(&a);
}
END_TEST

/* Build a 20-node graph with constants (one larger than an arena chunk's small-request
 * limit), outputs, and a final verify.  Returns NULL when a step fails: then that step must
 * have reported KILN_ERR_NOMEM, and the partly built graph must still verify once
 * allocation works again (a failed step leaves the graph as it was). */
static kiln_graph *
build20(int *steps)
{
    static float big[8192]; /* 32 KiB: a chunk of its own */
    static const int32_t small[4] = {1, -2, 3, -4};
    *steps = 0;
    kiln_graph *g = ir_graph_new("twenty");
    if (!g) {
        ck_assert_int_eq(kiln_errcode(), KILN_ERR_NOMEM);
        return NULL;
    }
#define STEP(expr)                                                                                 \
    do {                                                                                           \
        if ((expr) < 0) {                                                                          \
            ck_assert_msg(kiln_errcode() == KILN_ERR_NOMEM, "step %d: %s", *steps, kiln_errmsg()); \
            goto failed;                                                                           \
        }                                                                                          \
        ++*steps;                                                                                  \
    } while (0)
    for (int i = 0; i < 8192; i++)
        big[i] = (float)i * 0.5f;
    ir_type tx = TY(F32, 8192), ti = TY(I32, 4), ts = TY0(F32);
    int32_t id[24];
    char name[32];
    STEP(id[0] = ir_graph_add_input(g, "x", &tx));
    STEP(id[1] = ir_graph_add_input(g, "k", &ti));
    ir_attrs at = no_attrs();
    at.data = big;
    STEP(id[2] = ir_graph_add_node(g, "t", IR_OP_CONSTANT, 0, NULL, &at, &tx, "big"));
    at.data = (void *)small;
    STEP(id[3] = ir_graph_add_node(g, "t", IR_OP_CONSTANT, 0, NULL, &at, &ti, "small"));
    at = no_attrs();
    at.value = scalar_f32(0.25f);
    STEP(id[4] = ir_graph_add_node(g, "t", IR_OP_FULL, 0, NULL, &at, &ts, "quarter"));
    int32_t cur = id[0];
    for (int i = 5; i < 17; i++) {
        snprintf(name, sizeof name, "v%d", i);
        ir_op op = i % 3 == 0 ? IR_OP_ADD : i % 3 == 1 ? IR_OP_MUL : IR_OP_MAX;
        int32_t other = i % 2 ? id[2] : id[4];
        STEP(id[i] = ir_graph_add_node(g, "t", op, 2, (int32_t[]){cur, other}, NULL, NULL,
                                       i % 4 ? name : NULL));
        cur = id[i];
    }
    STEP(id[17] = ir_graph_add_node(g, "t", IR_OP_ADD, 2, (int32_t[]){id[1], id[3]}, NULL, NULL,
                                    "ksum"));
    at = axes_attrs(1, false);
    STEP(id[18] = ir_graph_add_node(g, "t", IR_OP_REDUCE_SUM, 1, &cur, &at, NULL, "total"));
    at = no_attrs();
    at.to = F32;
    STEP(id[19] = ir_graph_add_node(g, "t", IR_OP_CAST, 1, &id[17], &at, NULL, NULL));
    STEP(ir_graph_add_output(g, "total", id[18]) == KILN_OK ? 0 : -1);
    STEP(ir_graph_add_output(g, "kf", id[19]) == KILN_OK ? 0 : -1);
    STEP(ir_graph_verify(g) == KILN_OK ? 0 : -1);
#undef STEP
    return g;
failed:
    ir_test_fail_alloc_after(-1);
    ck_assert_int_eq(ir_graph_verify(g), KILN_OK);
    ck_assert_int_eq(g->nnodes, *steps < 20 ? *steps : 20);
    kiln_graph_free(g);
    return NULL;
}

START_TEST(alloc_failure_loop)
{
    int steps, failures = 0;
    kiln_graph *g = NULL;
    for (long n = 0; n < 10000 && !g; n++) {
        ir_test_fail_alloc_after(n);
        kiln_clear_error();
        g = build20(&steps);
        ir_test_fail_alloc_after(-1);
        if (!g)
            failures++;
    }
    ck_assert_msg(g != NULL, "never succeeded");
    /* at least: the graph, its first arena chunk, the input list, the node array and its
     * growth past 16 nodes, the big constant's own chunk, the output list, verify's name
     * table */
    ck_assert_int_ge(failures, 8);
    ck_assert_int_eq(g->nnodes, 20);
    ck_assert_int_eq(steps, 23);
    const float *data = g->nodes[2].at->data;
    ck_assert(data[8191] == 4095.5f && data[1] == 0.5f);
    ck_assert_uint_eq(((uintptr_t)data) & 63, 0); /* constants are 64-byte aligned */
    /* a graph built with failures along the way equals one built without */
    kiln_graph *h = build20(&steps);
    ck_assert(h != NULL);
    ck_assert_int_eq(kiln_graph_equal(g, h), 1);
    ck_assert_uint_eq(kiln_graph_hash(g), kiln_graph_hash(h));
    kiln_graph_free(h);
    kiln_graph_free(g);
}
END_TEST

/* ir_graph_derive: simplify's result replayed from a map (resize.c) — a merged constant, a
 * dropped node, operand lists shared where the map keeps their ids and renumbered where
 * it does not; the copy computes what g does (the interpreter) and outlives g. */
static kiln_graph *
derive_source(bool name_merged)
{
    kiln_graph *g = new_graph();
    ir_type t = TY(F32, 2);
    int32_t x = input(g, "x", t), y = input(g, "y", t);
    ir_attrs two = {0};
    two.value = ir_scalar_from_f64(KILN_DTYPE_F32, 2.0);
    int32_t c1 = ir_graph_add_node(g, "test", IR_OP_FULL, 0, NULL, &two, &t, NULL);
    int32_t a = ir_graph_add_node(g, "test", IR_OP_ADD, 2, (int32_t[]){x, c1}, NULL, NULL, "a");
    int32_t c2 = ir_graph_add_node(g, "test", IR_OP_FULL, 0, NULL, &two, &t, name_merged ? "c2" : NULL);
    int32_t b = ir_graph_add_node(g, "test", IR_OP_MUL, 2, (int32_t[]){a, c2}, NULL, NULL, "b");
    ck_assert_int_eq(UN(g, IR_OP_NEG, y), 6); /* no output needs it */
    int32_t o = ir_graph_add_node(g, "test", IR_OP_SUB, 2, (int32_t[]){b, x}, NULL, NULL, "o");
    ck_assert_int_eq(o, 7);
    ck_assert_int_eq(ir_graph_add_output(g, "out", o), KILN_OK);
    ck_assert_int_eq(ir_graph_add_output(g, "b", b), KILN_OK);
    ck_assert_int_eq(ir_graph_verify(g), KILN_OK);
    return g;
}

static const int32_t derive_orig[] = {0, 1, 2, 3, 5, 7};
static const int32_t derive_map[] = {0, 1, 2, 3, 2, 4, -1, 5}; /* c2 -> c1; neg dropped */

START_TEST(derive_from_map)
{
    for (int named = 0; named < 2; named++) {
        kiln_graph *g = derive_source(named);
        kiln_graph *d = ir_graph_derive(g, 6, derive_orig, derive_map);
        ck_assert_msg(d != NULL, "%s", kiln_errmsg());
        ck_assert_int_eq(d->nnodes, 6);
        ck_assert_int_eq(d->ninputs, 2);
        ck_assert_int_eq(d->inputs[0], 0);
        ck_assert_int_eq(d->inputs[1], 1);
        ck_assert_int_eq(d->nodes[1].index, 1);
        ck_assert_int_eq(d->nodes[4].op, IR_OP_MUL);
        ck_assert_int_eq(d->nodes[4].in[0], 3);
        ck_assert_int_eq(d->nodes[4].in[1], 2); /* c2, merged into c1 */
        ck_assert_int_eq(d->nodes[5].in[0], 4);
        ck_assert_ptr_eq(d->nodes[3].in, g->nodes[3].in); /* ids kept: g's list */
        ck_assert_ptr_ne(d->nodes[4].in, g->nodes[5].in); /* renumbered: its own */
        ck_assert_ptr_eq(d->nodes[2].at, g->nodes[2].at);
        ck_assert_int_eq(d->noutputs, 2);
        ck_assert_int_eq(d->outputs[0].node, 5);
        ck_assert_int_eq(d->outputs[1].node, 4);
        ck_assert_str_eq(d->outputs[1].name, "b");
        ck_assert_int_eq(ir_graph_find(d, "x", 1), 0);
        ck_assert_int_eq(ir_graph_find(d, "a", 1), 3);
        ck_assert_int_eq(ir_graph_find(d, "b", 1), 4);
        ck_assert_int_eq(ir_graph_find(d, "o", 1), 5);
        ck_assert_int_lt(ir_graph_find(d, "c2", 2), 0); /* merged away: not d's name */
        ck_assert_int_eq(ir_graph_verify(d), KILN_OK);
        float xv[2] = {1.5f, -3.0f}, yv[2] = {7.0f, 0.25f}, want[2][2], got[2][2];
        const void *in[2] = {xv, yv};
        ck_assert_int_eq(kiln_graph_interpret(g, in, (void *[]){want[0], want[1]}), KILN_OK);
        /* g freed first: d holds its share, so its nodes' lists and names stay */
        kiln_graph_free(g);
        ck_assert_int_eq(kiln_graph_interpret(d, in, (void *[]){got[0], got[1]}), KILN_OK);
        ck_assert(memcmp(got, want, sizeof got) == 0);
        ck_assert_float_eq(got[0][0], (1.5f + 2.0f) * 2.0f - 1.5f); /* f32, exact */
        ck_assert_int_eq(kiln_graph_free(d), KILN_OK);
    }
    /* out of memory at each allocation: NULL with the error, nothing leaked (ASan) */
    kiln_graph *g = derive_source(true);
    kiln_graph *d = NULL;
    int failures = 0;
    for (long n = 0; n < 100 && !d; n++) {
        ir_test_fail_alloc_after(n);
        kiln_clear_error();
        d = ir_graph_derive(g, 6, derive_orig, derive_map);
        ir_test_fail_alloc_after(-1);
        if (!d) {
            ck_assert_int_eq(kiln_errcode(), KILN_ERR_NOMEM);
            failures++;
        }
    }
    ck_assert_ptr_nonnull(d);
    ck_assert_int_ge(failures, 4); /* the graph, its nodes, inputs, outputs (and names) */
    kiln_graph_free(d);
    kiln_graph_free(g);
}
END_TEST

/* ---- odds and ends ----------------------------------------------------------------------- */

START_TEST(more_corruptions)
{
    kiln_graph *g = small_graph();
    g->nodes[1].nin = 1;             /* an input with an operand */
    g->nodes[1].in = g->nodes[2].in; /* operand 0 is node 0: in order */
    verify_fails(
        g, KILN_ERR_VERIFY,
        "kiln_graph_verify: node 1 'y' (input): wrong operand count: input takes 0, got 1");
    kiln_graph_free(g);

    g = small_graph();
    g->nodes[3].nin = -1;
    verify_fails(g, KILN_ERR_VERIFY, "node 3 (neg): bad operands: -1 operands");
    kiln_graph_free(g);

    g = small_graph();
    g->nodes[0].type.shape.rank = 9;
    verify_fails(g, KILN_ERR_SHAPE, "node 0 'x' (input): bad rank: 9 (must be 0 to 8)");
    kiln_graph_free(g);

    /* an expand target is checked like any shape */
    g = new_graph();
    int32_t x = input(g, "x", TY(F32, 1));
    ir_attrs at = no_attrs();
    at.shape = SH(3, -1);
    add_fails(g, IR_OP_EXPAND, 1, &x, &at, KILN_ERR_SHAPE, "test: negative dimension: [3,-1]");
    at.shape.rank = 9;
    add_fails(g, IR_OP_EXPAND, 1, &x, &at, KILN_ERR_SHAPE, "test: bad rank: 9");
    /* expanding to rank 8 from rank 1 is fine */
    at.shape = SH(2, 1, 1, 1, 1, 1, 1, 5);
    assert_shape(tyof(g, add_ok(g, IR_OP_EXPAND, 1, &x, &at)), F32, SH(2, 1, 1, 1, 1, 1, 1, 5));
    kiln_graph_free(g);
}
END_TEST

START_TEST(op_table)
{
    for (int op = 0; op < IR_OP_COUNT; op++) {
        const ir_op_info *o = &ir_ops[op];
        ck_assert_msg(o->name && o->meaning && o->meaning[0], "op %d undocumented", op);
        ck_assert_int_eq(ir_op_from_name(o->name, strlen(o->name)), op);
        int want;
        switch (o->kind) {
        case IR_KIND_SOURCE:
            want = 0;
            break;
        case IR_KIND_UNARY:
        case IR_KIND_CAST:
        case IR_KIND_REDUCE:
            want = 1;
            break;
        case IR_KIND_BINARY:
        case IR_KIND_MATMUL:
            want = 2;
            break;
        case IR_KIND_TERNARY:
            want = 3;
            break;
        default:
            want = op == IR_OP_CONCAT ? -1 : op == IR_OP_GATHER ? 2 : 1;
            break;
        }
        ck_assert_msg(o->arity == want, "%s arity %d", o->name, o->arity);
        bool ew = o->kind == IR_KIND_UNARY || o->kind == IR_KIND_BINARY ||
                  o->kind == IR_KIND_TERNARY || o->kind == IR_KIND_CAST;
        ck_assert_int_eq(ir_op_is_elementwise((ir_op)op), ew);
        /* elementwise ops have no attributes except cast's target */
        if (ew)
            ck_assert_uint_eq(o->attrs, op == IR_OP_CAST ? IR_A_TO : 0u);
        if (o->kind == IR_KIND_REDUCE)
            ck_assert_uint_eq(o->attrs, IR_A_AXES | IR_A_KEEPDIM);
    }
    ck_assert_int_eq(ir_op_from_name("add", 3), IR_OP_ADD);
    ck_assert_int_eq(ir_op_from_name("adder", 3), IR_OP_ADD);
    ck_assert_int_eq(ir_op_from_name("ad", 2), -1);
    ck_assert_int_eq(ir_op_from_name("reduce", 6), -1);
    ck_assert_str_eq(ir_attr_names[IR_ATTR_DATA_BIT], "data");
    ck_assert_str_eq(ir_attr_names[IR_ATTR_KEEPDIM_BIT], "keepdim");
    ck_assert_int_eq(IR_ATTR_COUNT, 14);
}
END_TEST

START_TEST(shape_strings)
{
    char b[IR_TYPE_STR_MAX];
    ir_type t = TY(I64, 4, 0, 123456789012LL);
    ck_assert_str_eq(ir_type_str(&t, b, sizeof b), "i64[4,0,123456789012]");
    t = TY0(BOOL);
    ck_assert_str_eq(ir_type_str(&t, b, sizeof b), "bool[]");
    ir_shape s = SH(1, 2, 3, 4, 5, 6, 7, 8);
    ck_assert_str_eq(ir_shape_str(&s, b, sizeof b), "[1,2,3,4,5,6,7,8]");
    /* short buffers are cut and terminated */
    char small[6];
    memset(small, 'x', sizeof small);
    ir_shape_str(&s, small, sizeof small);
    ck_assert_str_eq(small, "[1,2,");
    s = SH(INT64_MIN, INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, INT64_MAX);
    ir_shape_str(&s, b, sizeof b);
    ck_assert_uint_lt(strlen(b), sizeof b);
    ck_assert(strncmp(b, "[-9223372036854775808,9223372036854775807,", 42) == 0);
    /* a corrupt rank is described, not read past */
    s.rank = 99;
    ck_assert_str_eq(ir_shape_str(&s, b, sizeof b), "[<rank 99>]");
    t.dtype = (kiln_dtype)42;
    t.shape = SH(2);
    ck_assert_str_eq(ir_type_str(&t, b, sizeof b), "?[2]");
    /* broadcast strides: size-1 and missing leading axes get stride 0 */
    int64_t st[4];
    ir_shape op = SH(3, 1, 5);
    ir_broadcast_strides(&op, 4, st);
    ck_assert(st[0] == 0 && st[1] == 5 && st[2] == 0 && st[3] == 1);
    op = SH(2, 3);
    ir_broadcast_strides(&op, 2, st);
    ck_assert(st[0] == 3 && st[1] == 1);
}
END_TEST

/* ---- suite ----------------------------------------------------------------------------- */

static Suite *
ir_suite(void)
{
    Suite *s = suite_create("ir");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, binary_shape_mismatch);
    tcase_add_test(tc, binary_broadcast_shapes);
    tcase_add_test(tc, dtype_rules_all_ops);
    tcase_add_test(tc, dtype_rule_messages);
    tcase_add_test(tc, where_clamp_rules);
    tcase_add_test(tc, cast_rules);
    tcase_add_test(tc, reshape_expand_rules);
    tcase_add_test(tc, permute_rules);
    tcase_add_test(tc, pad_concat_rules);
    tcase_add_test(tc, gather_rules);
    tcase_add_test(tc, slice_python_table);
    tcase_add_test(tc, slice_brute_force_grid);
    tcase_add_test(tc, slice_node_shapes);
    tcase_add_test(tc, reduce_rules);
    tcase_add_test(tc, matmul_rules);
    tcase_add_test(tc, source_rules);
    tcase_add_test(tc, arity_rules);
    tcase_add_test(tc, verify_valid_graph);
    tcase_add_test(tc, verify_corrupt_nodes);
    tcase_add_test(tc, verify_corrupt_boundary);
    tcase_add_test(tc, builder_boundary_errors);
    tcase_add_test(tc, builder_many_names);
    tcase_add_test(tc, derive_from_map);
    tcase_add_test(tc, shape_check_limits);
    tcase_add_test(tc, overflow_through_ops);
    tcase_add_test(tc, hash_names_do_not_matter);
    tcase_add_test(tc, hash_each_change_differs);
    tcase_add_test(tc, generic_hash);
    tcase_add_test(tc, hash_misuse);
    tcase_add_test(tc, cast_float_to_int);
    tcase_add_test(tc, cast_int_and_bool);
    tcase_add_test(tc, cast_float_rounding);
    tcase_add_test(tc, dtype_names);
    tcase_add_test(tc, status_strings);
    tcase_add_test(tc, error_state);
    tcase_add_test(tc, error_hook);
    tcase_add_test(tc, abort_on_misuse);
    tcase_add_test(tc, arena_alignment);
    tcase_add_test(tc, arena_big_and_failure);
    tcase_add_test(tc, alloc_failure_loop);
    tcase_add_test(tc, more_corruptions);
    tcase_add_test(tc, op_table);
    tcase_add_test(tc, shape_strings);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return ts_run(ir_suite());
}
