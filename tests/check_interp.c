/* check_interp.c — the reference interpreter against hand-computed values.
 *
 * Graphs are built with the ir_graph_* API (no parser).  Expected values are literals
 * worked out by hand, or computed here from first principles (index arithmetic, C
 * integer arithmetic), or for transcendental functions taken from a table computed with
 * mpmath at 60 digits and rounded once to f64 and once to f32 (the generator is quoted in
 * the comment above the table).  Tolerances, stated per check:
 *   exact (bit-exact for floats, so -0.0 and +0.0 differ; any NaN matches any NaN) for ints,
 *   bools, movement, correctly rounded float ops (+ - * / sqrt fmod, casts) and hand
 *   literals that are exactly representable;
 *   transcendental f32: <= 1 ulp from the correctly rounded f32 value;
 *   transcendental f64: <= 2 ulp from the correctly rounded f64 value (composite formulas
 *   sigmoid/silu/rsqrt: <= 4 ulp; gelu and gelu_erf lose digits to cancellation in
 *   1 + tanh/erf for x < 0: relative 1e-12).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "support.h"

#define F32 KILN_DTYPE_F32
#define F64 KILN_DTYPE_F64
#define I32 KILN_DTYPE_I32
#define I64 KILN_DTYPE_I64
#define BOOL KILN_DTYPE_BOOL

/* ---- graph builder --------------------------------------------------------------- */

/* A type from a dtype and a dims list "2,3" ("" is rank 0). */
static ir_type
ty(kiln_dtype dt, const char *dims)
{
    ir_type t = {dt, {0, {0}}};
    const char *p = dims;
    while (*p) {
        char *end;
        ck_assert_int_lt(t.shape.rank, IR_MAX_RANK);
        t.shape.dims[t.shape.rank++] = strtoll(p, &end, 10);
        ck_assert_msg(end != p, "bad dims \"%s\"", dims);
        p = *end == ',' ? end + 1 : end;
    }
    return t;
}

static kiln_graph *
gnew(void)
{
    kiln_graph *g = ir_graph_new("t");
    ck_assert_msg(g != NULL, "%s", kiln_errmsg());
    return g;
}

static int32_t
gin(kiln_graph *g, const char *name, kiln_dtype dt, const char *dims)
{
    ir_type t = ty(dt, dims);
    int32_t id = ir_graph_add_input(g, name, &t);
    ck_assert_msg(id >= 0, "add input %s: %s", name, kiln_errmsg());
    return id;
}

static int32_t
gnode(kiln_graph *g, ir_op op, int nin, const int32_t *in, const ir_attrs *at,
      const ir_type *given)
{
    int32_t id = ir_graph_add_node(g, "test", op, nin, in, at, given, NULL);
    ck_assert_msg(id >= 0, "add %s: %s", ir_ops[op].name, kiln_errmsg());
    return id;
}

#define N1(g, op, a, at) gnode((g), (op), 1, (const int32_t[]){(a)}, (at), NULL)
#define N2(g, op, a, b, at) gnode((g), (op), 2, (const int32_t[]){(a), (b)}, (at), NULL)
#define N3(g, op, a, b, c) gnode((g), (op), 3, (const int32_t[]){(a), (b), (c)}, NULL, NULL)
#define ATTRS(...) (&(ir_attrs){__VA_ARGS__})

/* A source node (full, arange, constant) of the given type. */
static int32_t
gsrc(kiln_graph *g, ir_op op, const ir_attrs *at, kiln_dtype dt, const char *dims)
{
    ir_type t = ty(dt, dims);
    return gnode(g, op, 0, NULL, at, &t);
}

static void
gout(kiln_graph *g, const char *name, int32_t id)
{
    ck_assert_msg(ir_graph_add_output(g, name, id) == KILN_OK, "%s", kiln_errmsg());
}

/* Verify, interpret (must succeed) and free the graph. */
static void
grun(kiln_graph *g, const void *const *ins, void *const *outs)
{
    ck_assert_msg(ir_graph_verify(g) == KILN_OK, "verify: %s", kiln_errmsg());
    kiln_status st = kiln_graph_interpret(g, ins, outs);
    ck_assert_msg(st == KILN_OK, "interpret: %s", kiln_errmsg());
    kiln_graph_free(g);
}

/* out = op(x), x an input of type dt[dims]. */
static void
run1(ir_op op, const ir_attrs *at, kiln_dtype dt, const char *dims, const void *x, void *out)
{
    kiln_graph *g = gnew();
    int32_t a = gin(g, "x", dt, dims);
    gout(g, "y", N1(g, op, a, at));
    grun(g, (const void *[]){x}, (void *[]){out});
}

/* out = op(a, b), both of dtype dt. */
static void
run2(ir_op op, kiln_dtype dt, const char *da, const void *a, const char *db, const void *b,
     void *out)
{
    kiln_graph *g = gnew();
    int32_t x = gin(g, "a", dt, da), y = gin(g, "b", dt, db);
    gout(g, "y", N2(g, op, x, y, NULL));
    grun(g, (const void *[]){a, b}, (void *[]){out});
}

/* out = op(a, b, c); a of dtype ta (bool for where), b and c of dtype t. */
static void
run3(ir_op op, kiln_dtype ta, const char *da, const void *a, kiln_dtype t, const char *db,
     const void *b, const char *dc, const void *c, void *out)
{
    kiln_graph *g = gnew();
    int32_t x = gin(g, "a", ta, da), y = gin(g, "b", t, db), z = gin(g, "c", t, dc);
    gout(g, "y", N3(g, op, x, y, z));
    grun(g, (const void *[]){a, b, c}, (void *[]){out});
}

/* ---- comparisons ------------------------------------------------------------------ */

/* Floats in an integer order where adjacent floats differ by 1 (-0 and +0 both map to 0). */
static int64_t
ord32(float f)
{
    int32_t i;
    memcpy(&i, &f, 4);
    return i >= 0 ? (int64_t)i : (int64_t)INT32_MIN - i;
}

static int64_t
ord64(double d)
{
    int64_t i;
    memcpy(&i, &d, 8);
    /* -(i - INT64_MIN) without overflow: the magnitude bits, negated. */
    return i >= 0 ? i : -(int64_t)((uint64_t)i & ~((uint64_t)1 << 63));
}

/* ulps == 0: bit-exact (any NaN matches any NaN). */
static bool
close32(float got, float want, int ulps)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got);
    if (ulps == 0)
        return memcmp(&got, &want, 4) == 0;
    int64_t d = ord32(got) - ord32(want);
    return (d < 0 ? -d : d) <= ulps;
}

static bool
close64(double got, double want, int ulps)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got);
    if (ulps == 0)
        return memcmp(&got, &want, 8) == 0;
    if (isinf(want) || isinf(got))
        return got == want;
    int64_t d = ord64(got) - ord64(want);
    return (d < 0 ? -d : d) <= ulps;
}

static void
expect_f32(const char *what, const float *got, const float *want, size_t n, int ulps)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(close32(got[i], want[i], ulps), "%s[%zu]: got %a (%.9g), want %a (%.9g)",
                      what, i, (double)got[i], (double)got[i], (double)want[i],
                      (double)want[i]);
}

static void
expect_f64(const char *what, const double *got, const double *want, size_t n, int ulps)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(close64(got[i], want[i], ulps), "%s[%zu]: got %a (%.17g), want %a (%.17g)",
                      what, i, got[i], got[i], want[i], want[i]);
}

static void
expect_i32(const char *what, const int32_t *got, const int32_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s[%zu]: got %d, want %d", what, i, (int)got[i],
                      (int)want[i]);
}

static void
expect_i64(const char *what, const int64_t *got, const int64_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s[%zu]: got %lld, want %lld", what, i,
                      (long long)got[i], (long long)want[i]);
}

static void
expect_u8(const char *what, const uint8_t *got, const uint8_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s[%zu]: got %d, want %d", what, i, got[i], want[i]);
}

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
/* Check a whole expected array literal against a result buffer. */
#define EXPECT_F32(what, got, ulps, ...)                                                     \
    do {                                                                                     \
        const float want_[] = {__VA_ARGS__};                                                 \
        expect_f32(what, got, want_, NELEM(want_), ulps);                                    \
    } while (0)
#define EXPECT_F64(what, got, ulps, ...)                                                     \
    do {                                                                                     \
        const double want_[] = {__VA_ARGS__};                                                \
        expect_f64(what, got, want_, NELEM(want_), ulps);                                    \
    } while (0)
#define EXPECT_I32(what, got, ...)                                                           \
    do {                                                                                     \
        const int32_t want_[] = {__VA_ARGS__};                                               \
        expect_i32(what, got, want_, NELEM(want_));                                          \
    } while (0)
#define EXPECT_I64(what, got, ...)                                                           \
    do {                                                                                     \
        const int64_t want_[] = {__VA_ARGS__};                                               \
        expect_i64(what, got, want_, NELEM(want_));                                          \
    } while (0)
#define EXPECT_U8(what, got, ...)                                                            \
    do {                                                                                     \
        const uint8_t want_[] = {__VA_ARGS__};                                               \
        expect_u8(what, got, want_, NELEM(want_));                                           \
    } while (0)

static float
f32_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static double
f64_bits(uint64_t u)
{
    double d;
    memcpy(&d, &u, 8);
    return d;
}

static uint32_t
bits32(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint64_t
bits64(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

static ir_scalar
scalar_bytes(const void *p, size_t n)
{
    ir_scalar s = {{0}};
    memcpy(s.bytes, p, n);
    return s;
}

#define NANF ((float)NAN)
#define INFF ((float)INFINITY)

/* ---- sources ---------------------------------------------------------------------- */

START_TEST(test_full)
{
    /* Every dtype; the value's bytes are copied exactly (NaN payload, -0.0). */
    float nanp = f32_bits(0x7fc00123u), mz = -0.0f;
    double d = -2.5;
    int32_t i = INT32_MIN;
    int64_t l = INT64_MAX;
    uint8_t b = 1;
    kiln_graph *g = gnew();
    gout(g, "a", gsrc(g, IR_OP_FULL, ATTRS(.value = scalar_bytes(&nanp, 4)), F32, "3"));
    gout(g, "b", gsrc(g, IR_OP_FULL, ATTRS(.value = scalar_bytes(&mz, 4)), F32, "2,1"));
    gout(g, "c", gsrc(g, IR_OP_FULL, ATTRS(.value = scalar_bytes(&d, 8)), F64, ""));
    gout(g, "d", gsrc(g, IR_OP_FULL, ATTRS(.value = scalar_bytes(&i, 4)), I32, "2"));
    gout(g, "e", gsrc(g, IR_OP_FULL, ATTRS(.value = scalar_bytes(&l, 8)), I64, "2"));
    gout(g, "f", gsrc(g, IR_OP_FULL, ATTRS(.value = scalar_bytes(&b, 1)), BOOL, "3"));
    gout(g, "z", gsrc(g, IR_OP_FULL, ATTRS(.value = scalar_bytes(&d, 8)), F64, "4,0"));
    float fa[3], fb[2];
    double fc;
    int32_t fd[2];
    int64_t fe[2];
    uint8_t ff[3];
    grun(g, NULL, (void *[]){fa, fb, &fc, fd, fe, ff, NULL});
    for (int k = 0; k < 3; k++)
        ck_assert_uint_eq(bits32(fa[k]), 0x7fc00123u);
    ck_assert_uint_eq(bits32(fb[0]), 0x80000000u);
    ck_assert_uint_eq(bits32(fb[1]), 0x80000000u);
    ck_assert(fc == -2.5);
    EXPECT_I32("full i32", fd, INT32_MIN, INT32_MIN);
    EXPECT_I64("full i64", fe, INT64_MAX, INT64_MAX);
    EXPECT_U8("full bool", ff, 1, 1, 1);
}
END_TEST

START_TEST(test_constant)
{
    double d[4] = {1.5, -0.0, f64_bits(0x7ff0000000000001ull), INFINITY};
    uint8_t b[3] = {1, 0, 1};
    int64_t l[2] = {INT64_MIN, 7};
    kiln_graph *g = gnew();
    gout(g, "d", gsrc(g, IR_OP_CONSTANT, ATTRS(.data = d), F64, "2,2"));
    gout(g, "b", gsrc(g, IR_OP_CONSTANT, ATTRS(.data = b), BOOL, "3"));
    gout(g, "l", gsrc(g, IR_OP_CONSTANT, ATTRS(.data = l), I64, "2"));
    gout(g, "e", gsrc(g, IR_OP_CONSTANT, ATTRS(.data = NULL), F32, "0,3"));
    int32_t i[3] = {INT32_MIN, -1, 5};
    float f[2] = {-0.0f, f32_bits(0x7f800001u)};
    gout(g, "i", gsrc(g, IR_OP_CONSTANT, ATTRS(.data = i), I32, "3,1"));
    gout(g, "f", gsrc(g, IR_OP_CONSTANT, ATTRS(.data = f), F32, "2"));
    double od[4];
    uint8_t ob[3];
    int64_t ol[2];
    int32_t oi[3];
    float of[2];
    grun(g, NULL, (void *[]){od, ob, ol, NULL, oi, of});
    EXPECT_I32("constant i32", oi, INT32_MIN, -1, 5);
    ck_assert_uint_eq(bits32(of[0]), 0x80000000u);
    ck_assert_uint_eq(bits32(of[1]), 0x7f800001u);
    for (int k = 0; k < 4; k++) /* bit-exact, signalling-NaN payload included */
        ck_assert_uint_eq(bits64(od[k]), bits64(d[k]));
    EXPECT_U8("constant bool", ob, 1, 0, 1);
    EXPECT_I64("constant i64", ol, INT64_MIN, 7);
}
END_TEST

START_TEST(test_arange)
{
    kiln_graph *g = gnew();
    /* f32: element i = start + i*delta in f64, rounded once: 1 + 2^-24 is a tie that
     * rounds to 1, 1 + 2*2^-24 is exact.  (Accumulating in f32 would give 1, 1, 1.) */
    gout(g, "a", gsrc(g, IR_OP_ARANGE,
                      ATTRS(.start = ir_scalar_from_f64(F32, 1.0),
                            .delta = ir_scalar_from_f64(F32, 0x1p-24)),
                      F32, "3"));
    gout(g, "b", gsrc(g, IR_OP_ARANGE,
                      ATTRS(.start = ir_scalar_from_f64(F64, 0.5),
                            .delta = ir_scalar_from_f64(F64, -0.25)),
                      F64, "4"));
    /* ints wrap */
    gout(g, "c", gsrc(g, IR_OP_ARANGE,
                      ATTRS(.start = ir_scalar_from_i64(I32, INT32_MAX - 1),
                            .delta = ir_scalar_from_i64(I32, 1)),
                      I32, "3"));
    gout(g, "d", gsrc(g, IR_OP_ARANGE,
                      ATTRS(.start = ir_scalar_from_i64(I64, INT64_MIN + 5),
                            .delta = ir_scalar_from_i64(I64, -3)),
                      I64, "3"));
    gout(g, "e", gsrc(g, IR_OP_ARANGE,
                      ATTRS(.start = ir_scalar_from_i64(I32, 10),
                            .delta = ir_scalar_from_i64(I32, INT32_MIN)),
                      I32, "3"));
    gout(g, "f", gsrc(g, IR_OP_ARANGE,
                      ATTRS(.start = ir_scalar_from_i64(I64, 0),
                            .delta = ir_scalar_from_i64(I64, 1)),
                      I64, "0"));
    float a[3];
    double b[4];
    int32_t c[3], e[3];
    int64_t d[3];
    grun(g, NULL, (void *[]){a, b, c, d, e, NULL});
    EXPECT_F32("arange f32", a, 0, 1.0f, 1.0f, 1.0f + 0x1p-23f);
    EXPECT_F64("arange f64", b, 0, 0.5, 0.25, 0.0, -0.25);
    EXPECT_I32("arange i32", c, INT32_MAX - 1, INT32_MAX, INT32_MIN);
    EXPECT_I64("arange i64", d, INT64_MIN + 5, INT64_MIN + 2, INT64_MAX);
    /* 10, 10 - 2^31, 10 - 2^32 = 10 (mod 2^32) */
    EXPECT_I32("arange i32 big delta", e, 10, 10 + INT32_MIN, 10);
}
END_TEST

/* ---- unary ------------------------------------------------------------------------- */

START_TEST(test_neg_abs_sign_relu_float)
{
    const float x[] = {1.5f, -2.5f, 0.0f, -0.0f, INFF, -INFF, NANF};
    float y[7];
    run1(IR_OP_NEG, NULL, F32, "7", x, y);
    EXPECT_F32("neg f32", y, 0, -1.5f, 2.5f, -0.0f, 0.0f, -INFF, INFF, NANF);
    run1(IR_OP_ABS, NULL, F32, "7", x, y);
    EXPECT_F32("abs f32", y, 0, 1.5f, 2.5f, 0.0f, 0.0f, INFF, INFF, NANF);
    run1(IR_OP_SIGN, NULL, F32, "7", x, y);
    EXPECT_F32("sign f32", y, 0, 1.0f, -1.0f, 0.0f, -0.0f, 1.0f, -1.0f, NANF);
    run1(IR_OP_RELU, NULL, F32, "7", x, y);
    EXPECT_F32("relu f32", y, 0, 1.5f, 0.0f, 0.0f, 0.0f, INFF, 0.0f, NANF);

    const double xd[] = {1e300, -3.25, 0.0, -0.0, -INFINITY, NAN, -1e-310};
    double yd[7];
    run1(IR_OP_NEG, NULL, F64, "7", xd, yd);
    EXPECT_F64("neg f64", yd, 0, -1e300, 3.25, -0.0, 0.0, INFINITY, NAN, 1e-310);
    run1(IR_OP_ABS, NULL, F64, "7", xd, yd);
    EXPECT_F64("abs f64", yd, 0, 1e300, 3.25, 0.0, 0.0, INFINITY, NAN, 1e-310);
    run1(IR_OP_SIGN, NULL, F64, "7", xd, yd);
    EXPECT_F64("sign f64", yd, 0, 1.0, -1.0, 0.0, -0.0, -1.0, NAN, -1.0);
    run1(IR_OP_RELU, NULL, F64, "7", xd, yd);
    EXPECT_F64("relu f64", yd, 0, 1e300, 0.0, 0.0, 0.0, 0.0, NAN, 0.0);
}
END_TEST

START_TEST(test_neg_abs_sign_relu_int)
{
    const int32_t x[] = {INT32_MIN, -5, 0, 7, INT32_MAX};
    int32_t y[5];
    run1(IR_OP_NEG, NULL, I32, "5", x, y);
    EXPECT_I32("neg i32", y, INT32_MIN, 5, 0, -7, -INT32_MAX);
    run1(IR_OP_ABS, NULL, I32, "5", x, y);
    EXPECT_I32("abs i32", y, INT32_MIN, 5, 0, 7, INT32_MAX);
    run1(IR_OP_SIGN, NULL, I32, "5", x, y);
    EXPECT_I32("sign i32", y, -1, -1, 0, 1, 1);
    run1(IR_OP_RELU, NULL, I32, "5", x, y);
    EXPECT_I32("relu i32", y, 0, 0, 0, 7, INT32_MAX);

    const int64_t xl[] = {INT64_MIN, -((int64_t)1 << 40), 0, 9, INT64_MAX};
    int64_t yl[5];
    run1(IR_OP_NEG, NULL, I64, "5", xl, yl);
    EXPECT_I64("neg i64", yl, INT64_MIN, (int64_t)1 << 40, 0, -9, -INT64_MAX);
    run1(IR_OP_ABS, NULL, I64, "5", xl, yl);
    EXPECT_I64("abs i64", yl, INT64_MIN, (int64_t)1 << 40, 0, 9, INT64_MAX);
    run1(IR_OP_SIGN, NULL, I64, "5", xl, yl);
    EXPECT_I64("sign i64", yl, -1, -1, 0, 1, 1);
    run1(IR_OP_RELU, NULL, I64, "5", xl, yl);
    EXPECT_I64("relu i64", yl, 0, 0, 0, 9, INT64_MAX);
}
END_TEST

/* Transcendental and composite unary ops at ordinary points.  Expected values from mpmath
 * (60 digits), generated by:
 *   C1 = mpf(0.7978845608028654); C2 = mpf(0.044715)
 *   gelu = x/2*(1+tanh(C1*(x+C2*x**3))); gelu_erf = x/2*(1+erf(x/sqrt(2)))
 *   silu = x/(1+exp(-x)); sigmoid = 1/(1+exp(-x)); rsqrt = 1/sqrt(x); recip = 1/x
 *   print(op, x, float(v), f32(v))  with f32(v) = float(+v) under mp.workprec(24)
 * (the constants of gelu are the doubles ops.def writes, so the table checks the formula
 * as specified, evaluated exactly). */
static const struct {
    ir_op op;
    double x, f64;
    float f32;
} unary_table[] = {
    {IR_OP_EXP, 0.5, 1.6487212707001282, 1.64872122f},
    {IR_OP_EXP, -1.5, 0.22313016014842982, 0.223130167f},
    {IR_OP_EXP, 2.25, 9.487735836358526, 9.48773575f},
    {IR_OP_EXP, 0.0078125, 1.007843097206448, 1.00784314f},
    {IR_OP_EXP, -3.75, 0.023517745856009107, 0.0235177465f},
    {IR_OP_EXP, 10.0, 22026.465794806718, 22026.4648f},
    {IR_OP_EXP2, 0.5, 1.4142135623730951, 1.41421354f},
    {IR_OP_EXP2, -1.5, 0.3535533905932738, 0.353553385f},
    {IR_OP_EXP2, 2.25, 4.756828460010884, 4.75682831f},
    {IR_OP_EXP2, 0.0078125, 1.0054299011128027, 1.00542986f},
    {IR_OP_EXP2, -3.75, 0.07432544468767006, 0.0743254423f},
    {IR_OP_EXP2, 10.0, 1024.0, 1024.0f},
    {IR_OP_EXPM1, 0.5, 0.6487212707001282, 0.648721278f},
    {IR_OP_EXPM1, -1.5, -0.7768698398515702, -0.776869833f},
    {IR_OP_EXPM1, 2.25, 8.487735836358526, 8.48773575f},
    {IR_OP_EXPM1, 0.0078125, 0.007843097206447977, 0.00784309767f},
    {IR_OP_EXPM1, -3.75, -0.9764822541439909, -0.976482272f},
    {IR_OP_EXPM1, 10.0, 22025.465794806718, 22025.4648f},
    {IR_OP_LOG, 0.5, -0.6931471805599453, -0.693147182f},
    {IR_OP_LOG, 1.5, 0.4054651081081644, 0.405465096f},
    {IR_OP_LOG, 2.25, 0.8109302162163288, 0.810930192f},
    {IR_OP_LOG, 0.0078125, -4.852030263919617, -4.85203028f},
    {IR_OP_LOG, 3.75, 1.3217558399823195, 1.32175589f},
    {IR_OP_LOG, 10.0, 2.302585092994046, 2.30258512f},
    {IR_OP_LOG2, 0.5, -1.0, -1.0f},
    {IR_OP_LOG2, 1.5, 0.5849625007211562, 0.584962487f},
    {IR_OP_LOG2, 2.25, 1.1699250014423124, 1.16992497f},
    {IR_OP_LOG2, 0.0078125, -7.0, -7.0f},
    {IR_OP_LOG2, 3.75, 1.9068905956085185, 1.90689063f},
    {IR_OP_LOG2, 10.0, 3.321928094887362, 3.32192802f},
    {IR_OP_LOG1P, 0.5, 0.4054651081081644, 0.405465096f},
    {IR_OP_LOG1P, 1.5, 0.9162907318741551, 0.91629076f},
    {IR_OP_LOG1P, 2.25, 1.1786549963416462, 1.17865503f},
    {IR_OP_LOG1P, 0.0078125, 0.007782140442054949, 0.00778214028f},
    {IR_OP_LOG1P, 3.75, 1.55814461804655, 1.55814457f},
    {IR_OP_LOG1P, 10.0, 2.3978952727983707, 2.39789534f},
    {IR_OP_LOG1P, -0.5, -0.6931471805599453, -0.693147182f},
    {IR_OP_SQRT, 0.5, 0.7071067811865476, 0.707106769f},
    {IR_OP_SQRT, 1.5, 1.224744871391589, 1.22474492f},
    {IR_OP_SQRT, 2.25, 1.5, 1.5f},
    {IR_OP_SQRT, 0.0078125, 0.08838834764831845, 0.0883883461f},
    {IR_OP_SQRT, 3.75, 1.9364916731037085, 1.93649173f},
    {IR_OP_SQRT, 10.0, 3.1622776601683795, 3.1622777f},
    {IR_OP_RSQRT, 0.5, 1.4142135623730951, 1.41421354f},
    {IR_OP_RSQRT, 1.5, 0.816496580927726, 0.816496611f},
    {IR_OP_RSQRT, 2.25, 0.6666666666666666, 0.666666687f},
    {IR_OP_RSQRT, 0.0078125, 11.313708498984761, 11.3137083f},
    {IR_OP_RSQRT, 3.75, 0.5163977794943223, 0.516397774f},
    {IR_OP_RSQRT, 10.0, 0.31622776601683794, 0.316227764f},
    {IR_OP_RECIP, 0.5, 2.0, 2.0f},
    {IR_OP_RECIP, -1.5, -0.6666666666666666, -0.666666687f},
    {IR_OP_RECIP, 2.25, 0.4444444444444444, 0.444444448f},
    {IR_OP_RECIP, 0.0078125, 128.0, 128.0f},
    {IR_OP_RECIP, -3.75, -0.26666666666666666, -0.266666681f},
    {IR_OP_RECIP, 10.0, 0.1, 0.100000001f},
    {IR_OP_SIN, 0.5, 0.479425538604203, 0.47942555f},
    {IR_OP_SIN, -1.5, -0.9974949866040544, -0.997494996f},
    {IR_OP_SIN, 2.25, 0.7780731968879212, 0.778073192f},
    {IR_OP_SIN, 0.0078125, 0.0078124205273828315, 0.00781242037f},
    {IR_OP_SIN, -3.75, 0.5715613187423437, 0.571561337f},
    {IR_OP_SIN, 10.0, -0.5440211108893698, -0.54402113f},
    {IR_OP_COS, 0.5, 0.8775825618903728, 0.87758255f},
    {IR_OP_COS, -1.5, 0.0707372016677029, 0.070737198f},
    {IR_OP_COS, 2.25, -0.6281736227227391, -0.628173649f},
    {IR_OP_COS, 0.0078125, 0.9999694825770951, 0.999969482f},
    {IR_OP_COS, -3.75, -0.8205593573395608, -0.820559382f},
    {IR_OP_COS, 10.0, -0.8390715290764524, -0.839071512f},
    {IR_OP_TAN, 0.5, 0.5463024898437905, 0.546302497f},
    {IR_OP_TAN, -1.5, -14.101419947171719, -14.1014204f},
    {IR_OP_TAN, 2.25, -1.2386276162240966, -1.23862767f},
    {IR_OP_TAN, 0.0078125, 0.007812658949600008, 0.00781265926f},
    {IR_OP_TAN, -3.75, -0.6965508511114601, -0.696550846f},
    {IR_OP_TAN, 10.0, 0.6483608274590866, 0.648360848f},
    {IR_OP_TANH, 0.5, 0.46211715726000974, 0.462117165f},
    {IR_OP_TANH, -1.5, -0.9051482536448664, -0.905148268f},
    {IR_OP_TANH, 2.25, 0.9780261147388136, 0.978026092f},
    {IR_OP_TANH, 0.0078125, 0.007812341058161014, 0.00781234121f},
    {IR_OP_TANH, -3.75, -0.9988944427261528, -0.998894453f},
    {IR_OP_TANH, 10.0, 0.9999999958776927, 1.0f},
    {IR_OP_SIGMOID, 0.5, 0.6224593312018546, 0.622459352f},
    {IR_OP_SIGMOID, -1.5, 0.18242552380635635, 0.182425529f},
    {IR_OP_SIGMOID, 2.25, 0.9046505351008906, 0.904650509f},
    {IR_OP_SIGMOID, 0.0078125, 0.5019531150659532, 0.501953125f},
    {IR_OP_SIGMOID, -3.75, 0.022977369910025615, 0.0229773708f},
    {IR_OP_SIGMOID, 10.0, 0.9999546021312976, 0.999954581f},
    {IR_OP_ERF, 0.5, 0.5204998778130465, 0.520499885f},
    {IR_OP_ERF, -1.5, -0.9661051464753108, -0.966105163f},
    {IR_OP_ERF, 2.25, 0.9985372834133188, 0.998537302f},
    {IR_OP_ERF, 0.0078125, 0.008815282895179188, 0.00881528296f},
    {IR_OP_ERF, -3.75, -0.9999998862727434, -0.999999881f},
    {IR_OP_ERF, 10.0, 1.0, 1.0f},
    {IR_OP_GELU, 0.5, 0.34571400982514394, 0.345714003f},
    {IR_OP_GELU, -1.5, -0.10042842301976707, -0.100428425f},
    {IR_OP_GELU, 2.25, 2.2227986701027116, 2.22279859f},
    {IR_OP_GELU, 0.0078125, 0.003930599255499402, 0.00393059943f},
    {IR_OP_GELU, -3.75, -0.00021925207244165732, -0.000219252077f},
    {IR_OP_GELU, 10.0, 10.0, 10.0f},
    {IR_OP_GELU_ERF, 0.5, 0.34573123063700656, 0.345731229f},
    {IR_OP_GELU_ERF, -1.5, -0.1002108019032871, -0.100210801f},
    {IR_OP_GELU_ERF, 2.25, 2.2224949365261493, 2.22249484f},
    {IR_OP_GELU_ERF, 0.0078125, 0.003930599256725333, 0.00393059943f},
    {IR_OP_GELU_ERF, -3.75, -0.0003315648195030145, -0.000331564806f},
    {IR_OP_GELU_ERF, 10.0, 10.0, 10.0f},
    {IR_OP_SILU, 0.5, 0.3112296656009273, 0.311229676f},
    {IR_OP_SILU, -1.5, -0.2736382857095345, -0.273638278f},
    {IR_OP_SILU, 2.25, 2.035463703977004, 2.03546381f},
    {IR_OP_SILU, 0.0078125, 0.003921508711452759, 0.00392150879f},
    {IR_OP_SILU, -3.75, -0.08616513716259605, -0.0861651376f},
    {IR_OP_SILU, 10.0, 9.999546021312975, 9.99954605f},
};

START_TEST(test_unary_table)
{
    for (size_t i = 0; i < NELEM(unary_table); i++) {
        ir_op op = unary_table[i].op;
        double xd = unary_table[i].x, yd;
        float xf = (float)xd, yf;
        char what[64];
        snprintf(what, sizeof what, "%s(%g)", ir_ops[op].name, xd);
        run1(op, NULL, F32, "", &xf, &yf);
        expect_f32(what, &yf, &unary_table[i].f32, 1, 1);
        run1(op, NULL, F64, "", &xd, &yd);
        if (op == IR_OP_GELU || op == IR_OP_GELU_ERF) {
            double want = unary_table[i].f64;
            ck_assert_msg(fabs(yd - want) <= 1e-12 * fabs(want), "%s f64: got %.17g want %.17g",
                          what, yd, want);
        } else {
            int ulps = op == IR_OP_SIGMOID || op == IR_OP_SILU || op == IR_OP_RSQRT ? 4 : 2;
            expect_f64(what, &yd, &unary_table[i].f64, 1, ulps);
        }
    }
}
END_TEST

/* IEEE special values, exact, for f32 and f64 alike. */
static const struct {
    ir_op op;
    double x, y;
} unary_special[] = {
    {IR_OP_EXP, -INFINITY, 0.0}, {IR_OP_EXP, INFINITY, INFINITY}, {IR_OP_EXP, NAN, NAN},
    {IR_OP_EXP, -0.0, 1.0}, {IR_OP_EXP, -1000.0, 0.0},
    {IR_OP_EXP2, -1.0, 0.5}, {IR_OP_EXP2, 10.0, 1024.0}, {IR_OP_EXP2, -INFINITY, 0.0},
    {IR_OP_EXPM1, -0.0, -0.0}, {IR_OP_EXPM1, 0.0, 0.0}, {IR_OP_EXPM1, -INFINITY, -1.0},
    {IR_OP_LOG, 0.0, -INFINITY}, {IR_OP_LOG, -0.0, -INFINITY}, {IR_OP_LOG, -1.0, NAN},
    {IR_OP_LOG, 1.0, 0.0}, {IR_OP_LOG, INFINITY, INFINITY},
    {IR_OP_LOG2, 8.0, 3.0}, {IR_OP_LOG2, 0.25, -2.0}, {IR_OP_LOG2, 0.0, -INFINITY},
    {IR_OP_LOG2, -1.0, NAN},
    {IR_OP_LOG1P, -1.0, -INFINITY}, {IR_OP_LOG1P, -0.0, -0.0}, {IR_OP_LOG1P, -2.0, NAN},
    {IR_OP_SQRT, -0.0, -0.0}, {IR_OP_SQRT, -1.0, NAN}, {IR_OP_SQRT, INFINITY, INFINITY},
    {IR_OP_SQRT, 6.25, 2.5},
    {IR_OP_RSQRT, 0.0, INFINITY}, {IR_OP_RSQRT, -0.0, -INFINITY}, {IR_OP_RSQRT, 4.0, 0.5},
    {IR_OP_RSQRT, INFINITY, 0.0}, {IR_OP_RSQRT, -1.0, NAN},
    {IR_OP_RECIP, 0.0, INFINITY}, {IR_OP_RECIP, -0.0, -INFINITY}, {IR_OP_RECIP, 4.0, 0.25},
    {IR_OP_RECIP, -INFINITY, -0.0},
    {IR_OP_SIN, -0.0, -0.0}, {IR_OP_SIN, INFINITY, NAN}, {IR_OP_COS, 0.0, 1.0},
    {IR_OP_COS, -INFINITY, NAN}, {IR_OP_TAN, -0.0, -0.0},
    {IR_OP_TANH, INFINITY, 1.0}, {IR_OP_TANH, -INFINITY, -1.0}, {IR_OP_TANH, -0.0, -0.0},
    {IR_OP_SIGMOID, 0.0, 0.5}, {IR_OP_SIGMOID, INFINITY, 1.0}, {IR_OP_SIGMOID, -INFINITY, 0.0},
    {IR_OP_SIGMOID, -1000.0, 0.0}, {IR_OP_SIGMOID, NAN, NAN},
    {IR_OP_ERF, INFINITY, 1.0}, {IR_OP_ERF, -INFINITY, -1.0}, {IR_OP_ERF, -0.0, -0.0},
    /* The composite formulas evaluated literally: at -inf they are -inf * 0 = NaN. */
    {IR_OP_GELU, 0.0, 0.0}, {IR_OP_GELU, INFINITY, INFINITY}, {IR_OP_GELU, -INFINITY, NAN},
    {IR_OP_GELU, NAN, NAN},
    {IR_OP_GELU_ERF, 0.0, 0.0}, {IR_OP_GELU_ERF, INFINITY, INFINITY},
    {IR_OP_GELU_ERF, -INFINITY, NAN},
    {IR_OP_SILU, 0.0, 0.0}, {IR_OP_SILU, INFINITY, INFINITY}, {IR_OP_SILU, -INFINITY, NAN},
    {IR_OP_SILU, -1000.0, -0.0},
};

START_TEST(test_unary_special)
{
    for (size_t i = 0; i < NELEM(unary_special); i++) {
        ir_op op = unary_special[i].op;
        double xd = unary_special[i].x, yd, want = unary_special[i].y;
        float xf = (float)xd, yf, wantf = (float)want;
        char what[64];
        snprintf(what, sizeof what, "%s(%g)", ir_ops[op].name, xd);
        run1(op, NULL, F32, "", &xf, &yf);
        expect_f32(what, &yf, &wantf, 1, 0);
        run1(op, NULL, F64, "", &xd, &yd);
        expect_f64(what, &yd, &want, 1, 0);
    }
}
END_TEST

START_TEST(test_rounding_ops)
{
    /* 0x1.fffffep-2f is the float just below 0.5 (round(x + 0.5) gets it wrong);
     * 2^23 + 1 is an odd integer. */
    const float x[] = {-2.5f, -1.5f, -0.5f, -0.4f, 0.5f, 1.5f, 2.5f, 2.7f, -2.7f,
                       0x1.fffffep-2f, 8388609.0f, INFF, -INFF, NANF, -0.0f};
    float y[15];
    run1(IR_OP_FLOOR, NULL, F32, "15", x, y);
    EXPECT_F32("floor", y, 0, -3, -2, -1, -1, 0, 1, 2, 2, -3, 0, 8388609.0f, INFF, -INFF, NANF,
               -0.0f);
    run1(IR_OP_CEIL, NULL, F32, "15", x, y);
    EXPECT_F32("ceil", y, 0, -2, -1, -0.0f, -0.0f, 1, 2, 3, 3, -2, 1, 8388609.0f, INFF, -INFF,
               NANF, -0.0f);
    run1(IR_OP_ROUND, NULL, F32, "15", x, y);
    EXPECT_F32("round", y, 0, -2, -2, -0.0f, -0.0f, 0, 2, 2, 3, -3, 0, 8388609.0f, INFF, -INFF,
               NANF, -0.0f);
    run1(IR_OP_TRUNC, NULL, F32, "15", x, y);
    EXPECT_F32("trunc", y, 0, -2, -1, -0.0f, -0.0f, 0, 1, 2, 2, -2, 0, 8388609.0f, INFF, -INFF,
               NANF, -0.0f);

    const double xd[] = {0.49999999999999994, 4503599627370497.0, 3.5, -3.5, 1e300, -0.5};
    double yd[6];
    run1(IR_OP_ROUND, NULL, F64, "6", xd, yd);
    EXPECT_F64("round f64", yd, 0, 0.0, 4503599627370497.0, 4.0, -4.0, 1e300, -0.0);
    run1(IR_OP_FLOOR, NULL, F64, "6", xd, yd);
    EXPECT_F64("floor f64", yd, 0, 0.0, 4503599627370497.0, 3.0, -4.0, 1e300, -1.0);
    run1(IR_OP_CEIL, NULL, F64, "6", xd, yd);
    EXPECT_F64("ceil f64", yd, 0, 1.0, 4503599627370497.0, 4.0, -3.0, 1e300, -0.0);
    run1(IR_OP_TRUNC, NULL, F64, "6", xd, yd);
    EXPECT_F64("trunc f64", yd, 0, 0.0, 4503599627370497.0, 3.0, -3.0, 1e300, -0.0);
}
END_TEST

START_TEST(test_not_isnan_isinf)
{
    const uint8_t b[] = {0, 1};
    uint8_t yb[2];
    run1(IR_OP_NOT, NULL, BOOL, "2", b, yb);
    EXPECT_U8("not bool", yb, 1, 0);
    const int32_t i[] = {0, -1, 5, INT32_MIN};
    int32_t yi[4];
    run1(IR_OP_NOT, NULL, I32, "4", i, yi);
    EXPECT_I32("not i32", yi, -1, 0, -6, INT32_MAX);
    const int64_t l[] = {0, INT64_MAX, 0x0f0f0f0f0f0f0f0fll};
    int64_t yl[3];
    run1(IR_OP_NOT, NULL, I64, "3", l, yl);
    EXPECT_I64("not i64", yl, -1, INT64_MIN, (int64_t)0xf0f0f0f0f0f0f0f0ull);

    const float x[] = {NANF, -NANF, INFF, -INFF, 0.0f, FLT_MAX, FLT_TRUE_MIN};
    uint8_t y[7];
    run1(IR_OP_ISNAN, NULL, F32, "7", x, y);
    EXPECT_U8("isnan f32", y, 1, 1, 0, 0, 0, 0, 0);
    run1(IR_OP_ISINF, NULL, F32, "7", x, y);
    EXPECT_U8("isinf f32", y, 0, 0, 1, 1, 0, 0, 0);
    const double xd[] = {NAN, INFINITY, -INFINITY, DBL_MAX, -0.0};
    run1(IR_OP_ISNAN, NULL, F64, "5", xd, y);
    EXPECT_U8("isnan f64", y, 1, 0, 0, 0, 0);
    run1(IR_OP_ISINF, NULL, F64, "5", xd, y);
    EXPECT_U8("isinf f64", y, 0, 1, 1, 0, 0);
}
END_TEST

/* ---- binary ------------------------------------------------------------------------ */

START_TEST(test_arith_f32)
{
    /* 16777216 + 1 is a tie in f32 (rounds to even: 16777216); in f64 it is exact. */
    const float a[] = {1.5f, INFF, -0.0f, -0.0f, 16777216.0f, 3e38f, NANF};
    const float b[] = {2.25f, -INFF, -0.0f, 0.0f, 1.0f, 3e38f, 1.0f};
    float y[7];
    run2(IR_OP_ADD, F32, "7", a, "7", b, y);
    EXPECT_F32("add f32", y, 0, 3.75f, NANF, -0.0f, 0.0f, 16777216.0f, INFF, NANF);
    run2(IR_OP_SUB, F32, "7", a, "7", b, y);
    EXPECT_F32("sub f32", y, 0, -0.75f, INFF, 0.0f, -0.0f, 16777215.0f, 0.0f, NANF);
    run2(IR_OP_MUL, F32, "7", a, "7", b, y);
    EXPECT_F32("mul f32", y, 0, 3.375f, -INFF, 0.0f, -0.0f, 16777216.0f, INFF, NANF);
    run2(IR_OP_DIV, F32, "7", a, "7", b, y);
    EXPECT_F32("div f32", y, 0, (float)(1.5 / 2.25), NANF, NANF, NANF, 16777216.0f, 1.0f, NANF);
    const float c[] = {1.0f, -1.0f, 0.0f, 7.5f, 1.0f, INFF};
    const float d[] = {0.0f, 0.0f, 0.0f, 2.5f, -0.0f, 0.0f};
    run2(IR_OP_DIV, F32, "6", c, "6", d, y);
    EXPECT_F32("div f32 by zero", y, 0, INFF, -INFF, NANF, 3.0f, -INFF, INFF);
}
END_TEST

START_TEST(test_arith_f64)
{
    const double a[] = {16777216.0, 0.1, 1e308, -0.0, 5.0};
    const double b[] = {1.0, 0.2, 10.0, 0.0, 0.0};
    double y[5];
    run2(IR_OP_ADD, F64, "5", a, "5", b, y);
    /* 0.1 + 0.2 = 0.30000000000000004 in binary64 */
    EXPECT_F64("add f64", y, 0, 16777217.0, 0.30000000000000004, 1e308,
               0.0, 5.0);
    run2(IR_OP_MUL, F64, "5", a, "5", b, y);
    EXPECT_F64("mul f64", y, 0, 16777216.0, 0.020000000000000004, INFINITY, -0.0, 0.0);
    run2(IR_OP_SUB, F64, "5", a, "5", b, y);
    EXPECT_F64("sub f64", y, 0, 16777215.0, -0.1, 1e308, -0.0, 5.0);
    run2(IR_OP_DIV, F64, "5", a, "5", b, y);
    EXPECT_F64("div f64", y, 0, 16777216.0, 0.5, 1e307, NAN, INFINITY);
}
END_TEST

START_TEST(test_rem_pow_float)
{
    /* rem is C fmod: the sign of a, exact. */
    const float a[] = {5.5f, -5.5f, 5.5f, 1.0f, INFF, 3.0f, -0.0f, -7.0f};
    const float b[] = {2.0f, 2.0f, -2.0f, 0.0f, 2.0f, INFF, 1.0f, 7.0f};
    float y[8];
    run2(IR_OP_REM, F32, "8", a, "8", b, y);
    EXPECT_F32("rem f32", y, 0, 1.5f, -1.5f, 1.5f, NANF, NANF, 3.0f, -0.0f, -0.0f);
    double ad[8], bd[8], yd[8];
    for (int i = 0; i < 8; i++)
        ad[i] = a[i], bd[i] = b[i];
    run2(IR_OP_REM, F64, "8", ad, "8", bd, yd);
    EXPECT_F64("rem f64", yd, 0, 1.5, -1.5, 1.5, NAN, NAN, 3.0, -0.0, -0.0);

    /* pow is C pow: exact cases and its special values. */
    const double pa[] = {2.0, 2.25, -2.0, 0.0, NAN, 1.0, -2.0, -8.0, 0.0};
    const double pb[] = {10.0, 0.5, 0.5, -1.0, 0.0, NAN, 3.0, 1.0 / 3.0, 0.0};
    double py[9];
    run2(IR_OP_POW, F64, "9", pa, "9", pb, py);
    EXPECT_F64("pow f64", py, 0, 1024.0, 1.5, NAN, INFINITY, 1.0, 1.0, -8.0, NAN, 1.0);
    float pf[9], qf[9], yf[9];
    for (int i = 0; i < 9; i++)
        pf[i] = (float)pa[i], qf[i] = (float)pb[i];
    run2(IR_OP_POW, F32, "9", pf, "9", qf, yf);
    EXPECT_F32("pow f32", yf, 0, 1024.0f, 1.5f, NANF, INFF, 1.0f, 1.0f, -8.0f, NANF, 1.0f);
}
END_TEST

/* atan2 and non-trivial pow from mpmath (same generator as unary_table):
 *   print(op, a, b, float(v), f32(v)) for v = atan2(a, b) or power(a, b) */
static const struct {
    ir_op op;
    double a, b, f64;
    float f32;
} binary_table[] = {
    {IR_OP_ATAN2, 1.0, 1.0, 0.7853981633974483, 0.785398185f},
    {IR_OP_ATAN2, 1.0, -1.0, 2.356194490192345, 2.3561945f},
    {IR_OP_ATAN2, -2.5, 0.5, -1.373400766945016, -1.37340081f},
    {IR_OP_ATAN2, 0.5, -3.0, 2.976443976175166, 2.97644401f},
    {IR_OP_POW, 1.5, 2.5, 2.7556759606310752, 2.75567603f},
    {IR_OP_POW, 10.0, -1.5, 0.03162277660168379, 0.0316227749f},
    {IR_OP_POW, 0.5, 0.0078125, 0.9945994234836332, 0.994599402f},
    {IR_OP_POW, 2.25, 3.75, 20.92591432604223, 20.9259148f},
};

START_TEST(test_binary_table)
{
    for (size_t i = 0; i < NELEM(binary_table); i++) {
        ir_op op = binary_table[i].op;
        double a = binary_table[i].a, b = binary_table[i].b, yd;
        float af = (float)a, bf = (float)b, yf;
        char what[64];
        snprintf(what, sizeof what, "%s(%g, %g)", ir_ops[op].name, a, b);
        run2(op, F32, "", &af, "", &bf, &yf);
        expect_f32(what, &yf, &binary_table[i].f32, 1, 1);
        run2(op, F64, "", &a, "", &b, &yd);
        expect_f64(what, &yd, &binary_table[i].f64, 1, 2);
    }
    /* atan2 special values, exact: atan2(±0, -1) = ±pi, atan2(-0, +0) = -0. */
    const double sa[] = {0.0, -0.0, -0.0, 1.0, NAN};
    const double sb[] = {-1.0, -1.0, 0.0, 0.0, 1.0};
    double sy[5];
    run2(IR_OP_ATAN2, F64, "5", sa, "5", sb, sy);
    EXPECT_F64("atan2 f64", sy, 0, 3.141592653589793, -3.141592653589793, -0.0,
               1.5707963267948966, NAN);
}
END_TEST

START_TEST(test_max_min)
{
    const float a[] = {NANF, 1.0f, -0.0f, 0.0f, -INFF, 2.0f, NANF};
    const float b[] = {1.0f, NANF, 0.0f, -0.0f, 3.0f, 1.0f, NANF};
    float y[7];
    run2(IR_OP_MAX, F32, "7", a, "7", b, y);
    EXPECT_F32("max f32", y, 0, NANF, NANF, 0.0f, 0.0f, 3.0f, 2.0f, NANF);
    run2(IR_OP_MIN, F32, "7", a, "7", b, y);
    EXPECT_F32("min f32", y, 0, NANF, NANF, -0.0f, -0.0f, -INFF, 1.0f, NANF);
    double ad[7], bd[7], yd[7];
    for (int i = 0; i < 7; i++)
        ad[i] = a[i], bd[i] = b[i];
    run2(IR_OP_MAX, F64, "7", ad, "7", bd, yd);
    EXPECT_F64("max f64", yd, 0, NAN, NAN, 0.0, 0.0, 3.0, 2.0, NAN);
    run2(IR_OP_MIN, F64, "7", ad, "7", bd, yd);
    EXPECT_F64("min f64", yd, 0, NAN, NAN, -0.0, -0.0, -INFINITY, 1.0, NAN);

    const int32_t ia[] = {INT32_MIN, 5, -3};
    const int32_t ib[] = {INT32_MAX, 5, -4};
    int32_t iy[3];
    run2(IR_OP_MAX, I32, "3", ia, "3", ib, iy);
    EXPECT_I32("max i32", iy, INT32_MAX, 5, -3);
    run2(IR_OP_MIN, I32, "3", ia, "3", ib, iy);
    EXPECT_I32("min i32", iy, INT32_MIN, 5, -4);
    /* 2^53 + 1 vs 2^53: equal as doubles, must not be compared as doubles */
    const int64_t la[] = {INT64_MIN, 9007199254740993ll};
    const int64_t lb[] = {INT64_MAX, 9007199254740992ll};
    int64_t ly[2];
    run2(IR_OP_MAX, I64, "2", la, "2", lb, ly);
    EXPECT_I64("max i64", ly, INT64_MAX, 9007199254740993ll);
    run2(IR_OP_MIN, I64, "2", la, "2", lb, ly);
    EXPECT_I64("min i64", ly, INT64_MIN, 9007199254740992ll);
}
END_TEST

START_TEST(test_int_arith_i32)
{
    const int32_t a[] = {INT32_MAX, INT32_MIN, 65536, 46341, -3, 7, -7, 7, -7, 5, INT32_MIN, 0};
    const int32_t b[] = {1, 1, 65536, 46341, 7, 2, 2, -2, -2, 0, -1, 0};
    int32_t y[12];
    run2(IR_OP_ADD, I32, "12", a, "12", b, y);
    EXPECT_I32("add i32", y, INT32_MIN, INT32_MIN + 1, 131072, 92682, 4, 9, -5, 5, -9, 5,
               INT32_MAX, 0);
    run2(IR_OP_SUB, I32, "12", a, "12", b, y);
    EXPECT_I32("sub i32", y, INT32_MAX - 1, INT32_MAX, 0, 0, -10, 5, -9, 9, -5, 5, INT32_MIN + 1,
               0);
    /* 46341^2 = 2147488281 = 2^31 + 4633, wraps to -2147479015 */
    run2(IR_OP_MUL, I32, "12", a, "12", b, y);
    EXPECT_I32("mul i32", y, INT32_MAX, INT32_MIN, 0, -2147479015, -21, 14, -14, -14, 14, 0,
               INT32_MIN, 0);
    run2(IR_OP_DIV, I32, "12", a, "12", b, y);
    EXPECT_I32("div i32", y, INT32_MAX, INT32_MIN, 1, 1, 0, 3, -3, -3, 3, 0, INT32_MIN, 0);
    run2(IR_OP_REM, I32, "12", a, "12", b, y);
    EXPECT_I32("rem i32", y, 0, 0, 0, 0, -3, 1, -1, 1, -1, 0, 0, 0);
}
END_TEST

START_TEST(test_int_arith_i64)
{
    const int64_t a[] = {INT64_MAX, INT64_MIN, (int64_t)1 << 32, 3037000500ll, -7, 5,
                         INT64_MIN, INT64_MIN, 0};
    const int64_t b[] = {1, -1, (int64_t)1 << 32, 3037000500ll, 2, 0, -1, 1, 0};
    int64_t y[9];
    run2(IR_OP_ADD, I64, "9", a, "9", b, y);
    EXPECT_I64("add i64", y, INT64_MIN, INT64_MAX, (int64_t)1 << 33, 6074001000ll, -5, 5,
               INT64_MAX, INT64_MIN + 1, 0);
    run2(IR_OP_SUB, I64, "9", a, "9", b, y);
    EXPECT_I64("sub i64", y, INT64_MAX - 1, INT64_MIN + 1, 0, 0, -9, 5, INT64_MIN + 1, INT64_MAX,
               0);
    /* 3037000500^2 = 9223372037000250000 = 2^63 + 145224192, wraps */
    run2(IR_OP_MUL, I64, "9", a, "9", b, y);
    EXPECT_I64("mul i64", y, INT64_MAX, INT64_MIN, 0, -9223372036709301616ll, -14, 0, INT64_MIN,
               INT64_MIN, 0);
    run2(IR_OP_DIV, I64, "9", a, "9", b, y);
    EXPECT_I64("div i64", y, INT64_MAX, INT64_MIN, 1, 1, -3, 0, INT64_MIN, INT64_MIN, 0);
    run2(IR_OP_REM, I64, "9", a, "9", b, y);
    EXPECT_I64("rem i64", y, 0, 0, 0, 0, -1, 0, 0, 0, 0);
}
END_TEST

START_TEST(test_int_pow)
{
    const int32_t a[] = {2, 2, 3, -2, 2, 1, -1, -1, 0, 0, 7, 2, -3, 5};
    const int32_t b[] = {10, 31, 20, 3, -1, -5, -3, -4, 0, -1, 0, 32, 2, INT32_MIN};
    int32_t y[14];
    run2(IR_OP_POW, I32, "14", a, "14", b, y);
    /* 3^20 = 3486784401 = 2^32 - 808182895; 2^31 and 2^32 wrap */
    EXPECT_I32("pow i32", y, 1024, INT32_MIN, -808182895, -8, 0, 1, -1, 1, 1, 0, 1, 0, 9, 0);
    const int64_t la[] = {3, 2, 2, -1, 10};
    const int64_t lb[] = {40, 63, 64, INT64_MIN, 18};
    int64_t ly[5];
    run2(IR_OP_POW, I64, "5", la, "5", lb, ly);
    /* 3^40 = 12157665459056928801 = 2^64 - 6289078614652622815 */
    EXPECT_I64("pow i64", ly, -6289078614652622815ll, INT64_MIN, 0, 1, 1000000000000000000ll);
}
END_TEST

START_TEST(test_compare)
{
    const float a[] = {1.0f, 2.0f, NANF, 1.0f, -0.0f, INFF, 3.0f, NANF};
    const float b[] = {2.0f, 2.0f, 1.0f, NANF, 0.0f, INFF, 2.0f, NANF};
    uint8_t y[8];
    run2(IR_OP_EQ, F32, "8", a, "8", b, y);
    EXPECT_U8("eq f32", y, 0, 1, 0, 0, 1, 1, 0, 0);
    run2(IR_OP_NE, F32, "8", a, "8", b, y);
    EXPECT_U8("ne f32", y, 1, 0, 1, 1, 0, 0, 1, 1);
    run2(IR_OP_LT, F32, "8", a, "8", b, y);
    EXPECT_U8("lt f32", y, 1, 0, 0, 0, 0, 0, 0, 0);
    run2(IR_OP_LE, F32, "8", a, "8", b, y);
    EXPECT_U8("le f32", y, 1, 1, 0, 0, 1, 1, 0, 0);
    run2(IR_OP_GT, F32, "8", a, "8", b, y);
    EXPECT_U8("gt f32", y, 0, 0, 0, 0, 0, 0, 1, 0);
    run2(IR_OP_GE, F32, "8", a, "8", b, y);
    EXPECT_U8("ge f32", y, 0, 1, 0, 0, 1, 1, 1, 0);

    const double ad[] = {NAN, 0.1, -INFINITY};
    const double bd[] = {NAN, 0.1, 1.0};
    run2(IR_OP_EQ, F64, "3", ad, "3", bd, y);
    EXPECT_U8("eq f64", y, 0, 1, 0);
    run2(IR_OP_NE, F64, "3", ad, "3", bd, y);
    EXPECT_U8("ne f64", y, 1, 0, 1);
    run2(IR_OP_LT, F64, "3", ad, "3", bd, y);
    EXPECT_U8("lt f64", y, 0, 0, 1);
    run2(IR_OP_GE, F64, "3", ad, "3", bd, y);
    EXPECT_U8("ge f64", y, 0, 1, 0);

    const int64_t la[] = {INT64_MIN, 5, 5, -1, 9007199254740993ll};
    const int64_t lb[] = {INT64_MAX, 5, 4, 0, 9007199254740992ll};
    run2(IR_OP_EQ, I64, "5", la, "5", lb, y);
    EXPECT_U8("eq i64", y, 0, 1, 0, 0, 0);
    run2(IR_OP_NE, I64, "5", la, "5", lb, y);
    EXPECT_U8("ne i64", y, 1, 0, 1, 1, 1);
    run2(IR_OP_LT, I64, "5", la, "5", lb, y);
    EXPECT_U8("lt i64", y, 1, 0, 0, 1, 0);
    run2(IR_OP_LE, I64, "5", la, "5", lb, y);
    EXPECT_U8("le i64", y, 1, 1, 0, 1, 0);
    run2(IR_OP_GT, I64, "5", la, "5", lb, y);
    EXPECT_U8("gt i64", y, 0, 0, 1, 0, 1);
    run2(IR_OP_GE, I64, "5", la, "5", lb, y);
    EXPECT_U8("ge i64", y, 0, 1, 1, 0, 1);

    run2(IR_OP_LE, F64, "3", ad, "3", bd, y);
    EXPECT_U8("le f64", y, 0, 1, 1);
    run2(IR_OP_GT, F64, "3", ad, "3", bd, y);
    EXPECT_U8("gt f64", y, 0, 0, 0);

    const int32_t ia[] = {INT32_MIN, 3, INT32_MAX};
    const int32_t ib[] = {-1, 3, INT32_MIN};
    run2(IR_OP_EQ, I32, "3", ia, "3", ib, y);
    EXPECT_U8("eq i32", y, 0, 1, 0);
    run2(IR_OP_NE, I32, "3", ia, "3", ib, y);
    EXPECT_U8("ne i32", y, 1, 0, 1);
    run2(IR_OP_LT, I32, "3", ia, "3", ib, y);
    EXPECT_U8("lt i32", y, 1, 0, 0);
    run2(IR_OP_LE, I32, "3", ia, "3", ib, y);
    EXPECT_U8("le i32", y, 1, 1, 0);
    run2(IR_OP_GT, I32, "3", ia, "3", ib, y);
    EXPECT_U8("gt i32", y, 0, 0, 1);
    run2(IR_OP_GE, I32, "3", ia, "3", ib, y);
    EXPECT_U8("ge i32", y, 0, 1, 1);

    const uint8_t ba[] = {0, 0, 1, 1}, bb[] = {0, 1, 0, 1};
    run2(IR_OP_EQ, BOOL, "4", ba, "4", bb, y);
    EXPECT_U8("eq bool", y, 1, 0, 0, 1);
    run2(IR_OP_NE, BOOL, "4", ba, "4", bb, y);
    EXPECT_U8("ne bool", y, 0, 1, 1, 0);
}
END_TEST

START_TEST(test_logic)
{
    const uint8_t a[] = {0, 0, 1, 1}, b[] = {0, 1, 0, 1};
    uint8_t y[4];
    run2(IR_OP_AND, BOOL, "4", a, "4", b, y);
    EXPECT_U8("and bool", y, 0, 0, 0, 1);
    run2(IR_OP_OR, BOOL, "4", a, "4", b, y);
    EXPECT_U8("or bool", y, 0, 1, 1, 1);
    run2(IR_OP_XOR, BOOL, "4", a, "4", b, y);
    EXPECT_U8("xor bool", y, 0, 1, 1, 0);
    const int32_t ia[] = {0x0F0F, -1, INT32_MIN}, ib[] = {0x00FF, INT32_MIN, -1};
    int32_t iy[3];
    run2(IR_OP_AND, I32, "3", ia, "3", ib, iy);
    EXPECT_I32("and i32", iy, 0x000F, INT32_MIN, INT32_MIN);
    run2(IR_OP_OR, I32, "3", ia, "3", ib, iy);
    EXPECT_I32("or i32", iy, 0x0FFF, -1, -1);
    run2(IR_OP_XOR, I32, "3", ia, "3", ib, iy);
    EXPECT_I32("xor i32", iy, 0x0FF0, INT32_MAX, INT32_MAX);
    const int64_t la[] = {(int64_t)0x123456789abcdef0ull, -1};
    const int64_t lb[] = {(int64_t)0xff00ff00ff00ff00ull, INT64_MIN};
    int64_t ly[2];
    run2(IR_OP_AND, I64, "2", la, "2", lb, ly);
    EXPECT_I64("and i64", ly, 0x120056009a00de00ll, INT64_MIN);
    run2(IR_OP_OR, I64, "2", la, "2", lb, ly);
    EXPECT_I64("or i64", ly, (int64_t)0xff34ff78ffbcfff0ull, -1);
    run2(IR_OP_XOR, I64, "2", la, "2", lb, ly);
    EXPECT_I64("xor i64", ly, (int64_t)0xed34a97865bc21f0ull, INT64_MAX);
}
END_TEST

/* ---- broadcasting ---------------------------------------------------------------- */

START_TEST(test_broadcast)
{
    /* [2,1,3] + [4,1] -> [2,4,3]: out[i][j][k] = a[i][0][k] + b[j][0] */
    float a[6], b[4], y[24];
    for (int i = 0; i < 6; i++)
        a[i] = (float)(100 * i);
    for (int j = 0; j < 4; j++)
        b[j] = (float)j;
    run2(IR_OP_ADD, F32, "2,1,3", a, "4,1", b, y);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++)
                ck_assert_msg(y[(i * 4 + j) * 3 + k] == a[i * 3 + k] + b[j], "at %d,%d,%d", i,
                              j, k);

    /* rank 0 with rank 2, both orders */
    const int32_t s = 10, m[] = {1, 2, 3, 4, 5, 6};
    int32_t iy[6];
    run2(IR_OP_SUB, I32, "", &s, "2,3", m, iy);
    EXPECT_I32("scalar - [2,3]", iy, 9, 8, 7, 6, 5, 4);
    run2(IR_OP_SUB, I32, "2,3", m, "", &s, iy);
    EXPECT_I32("[2,3] - scalar", iy, -9, -8, -7, -6, -5, -4);
    /* [3] against [2,1]: a row vector and a column */
    const int64_t row[] = {1, 2, 3}, col[] = {10, 20};
    int64_t ly[6];
    run2(IR_OP_MUL, I64, "3", row, "2,1", col, ly);
    EXPECT_I64("[3] * [2,1]", ly, 10, 20, 30, 20, 40, 60);
    /* size-1 on both sides: [1,3] vs [2,1] */
    run2(IR_OP_ADD, I64, "1,3", row, "2,1", col, ly);
    EXPECT_I64("[1,3] + [2,1]", ly, 11, 12, 13, 21, 22, 23);
    /* comparison broadcast, result bool */
    uint8_t by[6];
    const double lim = 2.0, dv[] = {1, 2, 3, 4, 5, 6};
    run2(IR_OP_LT, F64, "2,3", dv, "1", &lim, by);
    EXPECT_U8("[2,3] < [1]", by, 1, 0, 0, 0, 0, 0);
}
END_TEST

START_TEST(test_broadcast_zero_size)
{
    /* [0,3] + [1,3] -> [0,3]; [2,0] + [1] -> [2,0]; [0] with []: nothing to compute, and a
     * zero-size input or output may be NULL. */
    const float row[] = {1, 2, 3}, one = 1;
    kiln_graph *g = gnew();
    int32_t a = gin(g, "a", F32, "0,3"), b = gin(g, "b", F32, "1,3");
    int32_t c = gin(g, "c", F32, "2,0"), d = gin(g, "d", F32, "1");
    gout(g, "x", N2(g, IR_OP_ADD, a, b, NULL));
    gout(g, "y", N2(g, IR_OP_MUL, c, d, NULL));
    gout(g, "z", N1(g, IR_OP_EXP, a, NULL));
    int32_t s = N1(g, IR_OP_REDUCE_SUM, a, ATTRS(.axes = 2u)); /* [0] */
    gout(g, "w", N2(g, IR_OP_ADD, s, d, NULL));                 /* [0] + [1] */
    /* and a non-empty result computed from an empty operand: sum over the empty axis */
    gout(g, "v", N1(g, IR_OP_REDUCE_SUM, a, ATTRS(.axes = 1u << 0))); /* [3] */
    float v[3] = {9, 9, 9};
    grun(g, (const void *[]){NULL, row, NULL, &one}, (void *[]){NULL, NULL, NULL, NULL, v});
    EXPECT_F32("sum over empty axis", v, 0, 0.0f, 0.0f, 0.0f);
}
END_TEST

/* ---- ternary ---------------------------------------------------------------------- */

START_TEST(test_where)
{
    const uint8_t c[] = {1, 0, 1};
    const float a[] = {1, 2, 3}, b[] = {-1, -2, NANF};
    float y[3];
    run3(IR_OP_WHERE, BOOL, "3", c, F32, "3", a, "3", b, y);
    EXPECT_F32("where f32", y, 0, 1, -2, 3);
    /* the unselected NaN does not matter; the selected one is copied bit for bit */
    const uint8_t c2[] = {0, 0, 1};
    run3(IR_OP_WHERE, BOOL, "3", c2, F32, "3", a, "3", b, y);
    EXPECT_F32("where f32 NaN", y, 0, -1, -2, 3);
    /* broadcast: cond [2,1], a [1,3], b [] -> [2,3] */
    const uint8_t cc[] = {1, 0};
    const int64_t ra[] = {1, 2, 3}, sb = INT64_MIN;
    int64_t ly[6];
    run3(IR_OP_WHERE, BOOL, "2,1", cc, I64, "1,3", ra, "", &sb, ly);
    EXPECT_I64("where broadcast", ly, 1, 2, 3, INT64_MIN, INT64_MIN, INT64_MIN);
    /* bool data, cond broadcast as a scalar */
    const uint8_t t = 0, ba[] = {1, 1}, bb[] = {0, 1};
    uint8_t by[2];
    run3(IR_OP_WHERE, BOOL, "", &t, BOOL, "2", ba, "2", bb, by);
    EXPECT_U8("where bool", by, 0, 1);
    const double nz = -0.0, one = 1.0;
    const uint8_t tt[] = {1, 0};
    double dy[2];
    run3(IR_OP_WHERE, BOOL, "2", tt, F64, "", &nz, "", &one, dy);
    EXPECT_F64("where f64", dy, 0, -0.0, 1.0);
}
END_TEST

START_TEST(test_clamp)
{
    /* NaN in any operand gives NaN; lo > hi gives hi (min(max(x, lo), hi)); zeros */
    const float x[] = {NANF, 5, -5, 1.5f, 5, -0.0f, 0.0f};
    const float lo[] = {0, NANF, 0, 0, 3, 0.0f, -1};
    const float hi[] = {1, 1, NANF, 2, 2, 1, -0.0f};
    float y[7];
    run3(IR_OP_CLAMP, F32, "7", x, F32, "7", lo, "7", hi, y);
    EXPECT_F32("clamp f32", y, 0, NANF, NANF, NANF, 1.5f, 2, 0.0f, -0.0f);
    double xd[7], lod[7], hid[7], yd[7];
    for (int i = 0; i < 7; i++)
        xd[i] = x[i], lod[i] = lo[i], hid[i] = hi[i];
    run3(IR_OP_CLAMP, F64, "7", xd, F64, "7", lod, "7", hid, yd);
    EXPECT_F64("clamp f64", yd, 0, NAN, NAN, NAN, 1.5, 2, 0.0, -0.0);
    /* ints, bounds broadcast as scalars */
    const int32_t xi[] = {INT32_MIN, 5, 100, INT32_MAX}, l = 0, h = 10;
    int32_t yi[4];
    run3(IR_OP_CLAMP, I32, "4", xi, I32, "", &l, "", &h, yi);
    EXPECT_I32("clamp i32", yi, 0, 5, 10, 10);
    const int64_t xl[] = {INT64_MIN, 7, INT64_MAX}, ll[] = {-3, 8, 0}, hl = 5;
    int64_t yl[3];
    run3(IR_OP_CLAMP, I64, "3", xl, I64, "3", ll, "", &hl, yl);
    EXPECT_I64("clamp i64", yl, -3, 5, 5);
}
END_TEST

START_TEST(test_bool_nonzero_byte)
{
    /* A bool byte other than 0 or 1 reads as true wherever a bool is read as a value. */
    const uint8_t c[] = {2, 0};
    const int32_t a[] = {1, 2}, b[] = {-1, -2};
    int32_t y[2];
    run3(IR_OP_WHERE, BOOL, "2", c, I32, "2", a, "2", b, y);
    EXPECT_I32("where byte 2", y, 1, -2);
    uint8_t n[2];
    run1(IR_OP_NOT, NULL, BOOL, "2", c, n);
    EXPECT_U8("not byte 2", n, 0, 1);
    float f[2];
    run1(IR_OP_CAST, ATTRS(.to = F32), BOOL, "2", c, f);
    EXPECT_F32("cast byte 2", f, 0, 1.0f, 0.0f);
    const uint8_t one[] = {1, 1};
    run2(IR_OP_EQ, BOOL, "2", c, "2", one, n);
    EXPECT_U8("eq byte 2", n, 1, 0);
}
END_TEST

/* ---- cast -------------------------------------------------------------------------- */

static void
cast(kiln_dtype from, const char *dims, const void *x, kiln_dtype to, void *y)
{
    run1(IR_OP_CAST, ATTRS(.to = to), from, dims, x, y);
}

START_TEST(test_cast_float_to_int)
{
    /* truncate toward zero, saturate, NaN -> 0; 0x1.fffffep+30 = 2147483520 is the
     * largest float below 2^31 */
    const float x[] = {3.7f, -3.7f, 2147483648.0f, -2147483904.0f, NANF, INFF, -INFF, -0.0f,
                       0x1.fffffep+30f, -2147483648.0f};
    int32_t y[10];
    cast(F32, "10", x, I32, y);
    EXPECT_I32("f32->i32", y, 3, -3, INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN, 0,
               2147483520, INT32_MIN);
    int64_t ly[10];
    cast(F32, "10", x, I64, ly);
    EXPECT_I64("f32->i64", ly, 3, -3, 2147483648ll, -2147483904ll, 0, INT64_MAX, INT64_MIN, 0,
               2147483520, -2147483648ll);
    /* 2^63 saturates; 0x1.fffffffffffffp+62 is the largest double below 2^63 */
    const double xd[] = {9223372036854775808.0, -9.3e18, 1e300, NAN, -2.5, 0x1.fffffffffffffp+62,
                         3e9, -3e9, 2147483647.9, -2147483648.9};
    int64_t l2[10];
    cast(F64, "10", xd, I64, l2);
    EXPECT_I64("f64->i64", l2, INT64_MAX, INT64_MIN, INT64_MAX, 0, -2, 9223372036854774784ll,
               3000000000ll, -3000000000ll, 2147483647, -2147483648ll);
    int32_t i2[10];
    cast(F64, "10", xd, I32, i2);
    EXPECT_I32("f64->i32", i2, INT32_MAX, INT32_MIN, INT32_MAX, 0, -2, INT32_MAX, INT32_MAX,
               INT32_MIN, INT32_MAX, INT32_MIN);
}
END_TEST

START_TEST(test_cast_int_and_bool)
{
    /* int -> int wraps (i64 -> i32 keeps the low 32 bits), i32 -> i64 sign-extends */
    const int64_t l[] = {4294967301ll, 2147483648ll, -1, -4294967297ll, INT64_MIN};
    int32_t i[5];
    cast(I64, "5", l, I32, i);
    EXPECT_I32("i64->i32", i, 5, INT32_MIN, -1, -1, 0);
    const int32_t si[] = {-1, INT32_MIN, 256};
    int64_t sl[3];
    cast(I32, "3", si, I64, sl);
    EXPECT_I64("i32->i64", sl, -1, -2147483648ll, 256);
    /* -> bool is x != 0 (NaN -> true; 256 is true, not its low byte) */
    uint8_t b[5];
    const float f[] = {0.0f, -0.0f, NANF, 0.5f, -INFF};
    cast(F32, "5", f, BOOL, b);
    EXPECT_U8("f32->bool", b, 0, 0, 1, 1, 1);
    const double d[] = {1e-320, 0.0};
    cast(F64, "2", d, BOOL, b);
    EXPECT_U8("f64->bool", b, 1, 0);
    cast(I32, "3", si, BOOL, b);
    EXPECT_U8("i32->bool", b, 1, 1, 1);
    const int64_t lb[] = {0, 1, INT64_MIN, (int64_t)1 << 40};
    cast(I64, "4", lb, BOOL, b);
    EXPECT_U8("i64->bool", b, 0, 1, 1, 1);
    /* bool -> x is 0 or 1 */
    const uint8_t bb[] = {0, 1};
    float bf[2];
    double bd[2];
    int32_t bi[2];
    int64_t bl[2];
    uint8_t b2[2];
    cast(BOOL, "2", bb, F32, bf);
    EXPECT_F32("bool->f32", bf, 0, 0.0f, 1.0f);
    cast(BOOL, "2", bb, F64, bd);
    EXPECT_F64("bool->f64", bd, 0, 0.0, 1.0);
    cast(BOOL, "2", bb, I32, bi);
    EXPECT_I32("bool->i32", bi, 0, 1);
    cast(BOOL, "2", bb, I64, bl);
    EXPECT_I64("bool->i64", bl, 0, 1);
    cast(BOOL, "2", bb, BOOL, b2);
    EXPECT_U8("bool->bool", b2, 0, 1);
}
END_TEST

START_TEST(test_cast_float_rounding)
{
    /* f64 -> f32 rounds to nearest even: 1 + 2^-24 is a tie (-> 1), 1 + 3*2^-24 is a tie
     * (-> 1 + 2^-22); overflow to inf, underflow to 0, -0 and NaN kept. */
    const double d[] = {1.0 + 0x1p-24, 1.0 + 3 * 0x1p-24, 1e39, -1e39, 1e-46, -0.0, NAN, 0.1};
    float f[8];
    cast(F64, "8", d, F32, f);
    EXPECT_F32("f64->f32", f, 0, 1.0f, 1.0f + 0x1p-22f, INFF, -INFF, 0.0f, -0.0f, NANF, 0.1f);
    /* f32 -> f64 is exact */
    const float e[] = {0.1f, -0.0f, FLT_TRUE_MIN};
    double g[3];
    cast(F32, "3", e, F64, g);
    EXPECT_F64("f32->f64", g, 0, (double)0.1f, -0.0, 0x1p-149);
    /* int -> float rounds to nearest even */
    const int32_t i[] = {16777217, 16777219, INT32_MIN};
    float fi[3];
    cast(I32, "3", i, F32, fi);
    EXPECT_F32("i32->f32", fi, 0, 16777216.0f, 16777220.0f, -2147483648.0f);
    const int64_t l[] = {9007199254740993ll, INT64_MAX, INT64_MIN};
    double dl[3];
    float fl[3];
    cast(I64, "3", l, F64, dl);
    EXPECT_F64("i64->f64", dl, 0, 9007199254740992.0, 9223372036854775808.0,
               -9223372036854775808.0);
    cast(I64, "3", l, F32, fl);
    EXPECT_F32("i64->f32", fl, 0, 9007199254740992.0f, 9223372036854775808.0f,
               -9223372036854775808.0f);
    const int32_t ei[] = {INT32_MIN, INT32_MAX};
    double ed[2];
    cast(I32, "2", ei, F64, ed);
    EXPECT_F64("i32->f64", ed, 0, -2147483648.0, 2147483647.0);
    const double nd = f64_bits(0x7ff8dead0000beefull);
    double snd;
    cast(F64, "", &nd, F64, &snd);
    ck_assert_uint_eq(bits64(snd), 0x7ff8dead0000beefull);
    const int64_t big = INT64_MIN;
    int64_t sbig;
    cast(I64, "", &big, I64, &sbig);
    ck_assert_int_eq(sbig, INT64_MIN);
    /* same-dtype cast is a bit copy */
    const float nanp = f32_bits(0xffc0beefu);
    float same;
    cast(F32, "", &nanp, F32, &same);
    ck_assert_uint_eq(bits32(same), 0xffc0beefu);
}
END_TEST

/* ---- movement ---------------------------------------------------------------------- */

START_TEST(test_reshape)
{
    const float x[] = {1, 2, 3, 4, 5, 6};
    float y[6];
    run1(IR_OP_RESHAPE, ATTRS(.shape = ty(F32, "3,1,2").shape), F32, "2,3", x, y);
    EXPECT_F32("reshape", y, 0, 1, 2, 3, 4, 5, 6);
    const int64_t s = -7;
    int64_t ys;
    run1(IR_OP_RESHAPE, ATTRS(.shape = ty(I64, "1,1").shape), I64, "", &s, &ys);
    ck_assert_int_eq(ys, -7);
}
END_TEST

START_TEST(test_permute)
{
    /* rank 3: x [2,3,4] = 0..23, perm [2,0,1] -> [4,2,3], out[i][j][k] = x[j][k][i] */
    int32_t x[24], y[24];
    for (int i = 0; i < 24; i++)
        x[i] = i;
    run1(IR_OP_PERMUTE, ATTRS(.perm = {2, 0, 1}), I32, "2,3,4", x, y);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++)
                ck_assert_int_eq(y[(i * 2 + j) * 3 + k], x[(j * 3 + k) * 4 + i]);
    /* the first few by hand: out[0][0][*] = x[0][*][0] = 0, 4, 8; out[0][1][0] = x[1][0][0] */
    EXPECT_I32("permute 201", y, 0, 4, 8, 12, 16, 20, 1, 5, 9);
    /* perm [1,2,0] -> [3,4,2], out[i][j][k] = x[k][i][j] */
    run1(IR_OP_PERMUTE, ATTRS(.perm = {1, 2, 0}), I32, "2,3,4", x, y);
    EXPECT_I32("permute 120", y, 0, 12, 1, 13, 2, 14, 3, 15, 4, 16);
    /* transpose of bools */
    const uint8_t b[] = {1, 0, 0, 0, 1, 1};
    uint8_t bt[6];
    run1(IR_OP_PERMUTE, ATTRS(.perm = {1, 0}), BOOL, "2,3", b, bt);
    EXPECT_U8("transpose bool", bt, 1, 0, 0, 1, 0, 1);
}
END_TEST

START_TEST(test_expand)
{
    /* [2,1] -> [2,2,3]: new axis on the left, size-1 axis repeated */
    const double x[] = {1, 2};
    double y[12];
    run1(IR_OP_EXPAND, ATTRS(.shape = ty(F64, "2,2,3").shape), F64, "2,1", x, y);
    EXPECT_F64("expand", y, 0, 1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2);
    /* rank 0 -> [3] */
    const int64_t s = INT64_MIN;
    int64_t ys[3];
    run1(IR_OP_EXPAND, ATTRS(.shape = ty(I64, "3").shape), I64, "", &s, ys);
    EXPECT_I64("expand scalar", ys, INT64_MIN, INT64_MIN, INT64_MIN);
    /* [1,3] -> [0,3] */
    const float r[] = {1, 2, 3};
    run1(IR_OP_EXPAND, ATTRS(.shape = ty(F32, "0,3").shape), F32, "1,3", r, NULL);
    /* same shape: a copy */
    float yr[3];
    run1(IR_OP_EXPAND, ATTRS(.shape = ty(F32, "1,3").shape), F32, "1,3", r, yr);
    EXPECT_F32("expand same", yr, 0, 1, 2, 3);
}
END_TEST

/* x[start:stop:step] of x = 0..9 (i32 [10]) into y; returns the element count. */
static size_t
slice10(int64_t start, int64_t stop, int64_t step, int32_t *y)
{
    int32_t x[10];
    for (int i = 0; i < 10; i++)
        x[i] = i;
    kiln_graph *g = gnew();
    int32_t a = gin(g, "x", I32, "10");
    int32_t s = N1(g, IR_OP_SLICE, a, ATTRS(.begin = {start}, .stop = {stop}, .step = {step}));
    size_t n = (size_t)g->nodes[s].type.shape.dims[0];
    gout(g, "y", s);
    grun(g, (const void *[]){x}, (void *[]){y});
    return n;
}

START_TEST(test_slice)
{
    int32_t y[10];
    /* Python: x[-1:-11:-1] (x[::-1]) */
    ck_assert_uint_eq(slice10(-1, -11, -1, y), 10);
    EXPECT_I32("x[::-1]", y, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    ck_assert_uint_eq(slice10(8, 2, -2, y), 3);
    EXPECT_I32("x[8:2:-2]", y, 8, 6, 4);
    ck_assert_uint_eq(slice10(-3, 100, 1, y), 3);
    EXPECT_I32("x[-3:100]", y, 7, 8, 9);
    ck_assert_uint_eq(slice10(100, 0, -3, y), 3);
    EXPECT_I32("x[100:0:-3]", y, 9, 6, 3);
    ck_assert_uint_eq(slice10(-100, 3, 1, y), 3);
    EXPECT_I32("x[-100:3]", y, 0, 1, 2);
    ck_assert_uint_eq(slice10(INT64_MIN, INT64_MAX, 4, y), 3);
    EXPECT_I32("x[::4]", y, 0, 4, 8);
    ck_assert_uint_eq(slice10(INT64_MAX, INT64_MIN, INT64_MIN, y), 1);
    EXPECT_I32("x[::-2^63]", y, 9);
    ck_assert_uint_eq(slice10(5, 2, 1, y), 0);
    ck_assert_uint_eq(slice10(2, 5, -1, y), 0);
    ck_assert_uint_eq(slice10(-5, -3, 1, y), 2);
    EXPECT_I32("x[-5:-3]", y, 5, 6);

    /* rank 2: x [3,4] = 0..11, x[::-1, 1:4:2] -> rows 2,1,0 and columns 1,3 */
    float x[12], z[6];
    for (int i = 0; i < 12; i++)
        x[i] = (float)i;
    run1(IR_OP_SLICE, ATTRS(.begin = {-1, 1}, .stop = {INT64_MIN, 4}, .step = {-1, 2}), F32,
         "3,4", x, z);
    EXPECT_F32("x[::-1, 1:4:2]", z, 0, 9, 11, 5, 7, 1, 3);
}
END_TEST

START_TEST(test_concat)
{
    /* three operands along axis 1, one of them empty: [2,1] ++ [2,0] ++ [2,2] */
    const int64_t a[] = {1, 2}, c[] = {3, 4, 5, 6};
    int64_t y[6];
    kiln_graph *g = gnew();
    int32_t ia = gin(g, "a", I64, "2,1"), ib = gin(g, "b", I64, "2,0");
    int32_t ic = gin(g, "c", I64, "2,2");
    gout(g, "y", gnode(g, IR_OP_CONCAT, 3, (const int32_t[]){ia, ib, ic}, ATTRS(.axis = 1), NULL));
    grun(g, (const void *[]){a, NULL, c}, (void *[]){y});
    EXPECT_I64("concat axis 1", y, 1, 3, 4, 2, 5, 6);

    /* three along axis 0, and the same operand twice */
    const float p[] = {1, 2}, q[] = {3, 4, 5, 6};
    float z[8];
    g = gnew();
    int32_t ip = gin(g, "p", F32, "1,2"), iq = gin(g, "q", F32, "2,2");
    gout(g, "z", gnode(g, IR_OP_CONCAT, 3, (const int32_t[]){ip, iq, ip}, ATTRS(.axis = 0), NULL));
    grun(g, (const void *[]){p, q}, (void *[]){z});
    EXPECT_F32("concat axis 0", z, 0, 1, 2, 3, 4, 5, 6, 1, 2);

    /* bools, rank 3, middle axis */
    const uint8_t u[] = {1, 0, 1, 0}, v[] = {1, 0};
    uint8_t w[8];
    g = gnew();
    int32_t iu = gin(g, "u", BOOL, "2,2,1"), iv = gin(g, "v", BOOL, "2,1,1");
    gout(g, "w", gnode(g, IR_OP_CONCAT, 3, (const int32_t[]){iu, iv, iv}, ATTRS(.axis = 1),
                       NULL));
    grun(g, (const void *[]){u, v}, (void *[]){w});
    EXPECT_U8("concat bool", w, 1, 0, 1, 1, 1, 0, 0, 0);
}
END_TEST

START_TEST(test_pad)
{
    const int32_t x[] = {1, 2, 3, 4};
    int32_t y[12];
    run1(IR_OP_PAD, ATTRS(.low = {1, 0}, .high = {0, 2}, .value = ir_scalar_from_i64(I32, 9)),
         I32, "2,2", x, y);
    EXPECT_I32("pad i32", y, 9, 9, 9, 9, 1, 2, 9, 9, 3, 4, 9, 9);
    /* fill value copied bit for bit (-0.0), and an empty operand padded to [3] */
    float mz = -0.0f, fy[3];
    run1(IR_OP_PAD, ATTRS(.low = {2}, .high = {1}, .value = scalar_bytes(&mz, 4)), F32, "0",
         NULL, fy);
    for (int i = 0; i < 3; i++)
        ck_assert_uint_eq(bits32(fy[i]), 0x80000000u);
    /* rank 0: nothing to pad */
    const double d = 2.5;
    double dy;
    run1(IR_OP_PAD, ATTRS(.value = ir_scalar_from_f64(F64, 1.0)), F64, "", &d, &dy);
    ck_assert(dy == 2.5);
    /* bool, padding on both sides of both axes */
    const uint8_t b[] = {1};
    uint8_t by[9];
    run1(IR_OP_PAD, ATTRS(.low = {1, 1}, .high = {1, 1}, .value = ir_scalar_from_i64(BOOL, 0)),
         BOOL, "1,1", b, by);
    EXPECT_U8("pad bool", by, 0, 0, 0, 0, 1, 0, 0, 0, 0);
}
END_TEST

START_TEST(test_gather)
{
    /* take(x, [2,0,-1,3,1], axis=0): out-of-range (-1, 3) rows are 0 */
    const float x[] = {1, 2, 3, 4, 5, 6};
    const int64_t idx[] = {2, 0, -1, 3, 1};
    float y[10];
    kiln_graph *g = gnew();
    int32_t a = gin(g, "x", F32, "3,2"), i = gin(g, "i", I64, "5");
    gout(g, "y", N2(g, IR_OP_GATHER, a, i, ATTRS(.axis = 0)));
    grun(g, (const void *[]){x, idx}, (void *[]){y});
    EXPECT_F32("gather axis 0", y, 0, 5, 6, 1, 2, 0, 0, 0, 0, 3, 4);

    /* axis 1 with i32 indices of shape [2,2]: out [3,2,2] = x[r][idx[s][t]] */
    const int32_t idx2[] = {1, 0, 5, 1};
    float y2[12];
    g = gnew();
    a = gin(g, "x", F32, "3,2");
    i = gin(g, "i", I32, "2,2");
    gout(g, "y", N2(g, IR_OP_GATHER, a, i, ATTRS(.axis = 1)));
    grun(g, (const void *[]){x, idx2}, (void *[]){y2});
    EXPECT_F32("gather axis 1", y2, 0, 2, 1, 0, 2, 4, 3, 0, 4, 6, 5, 0, 6);

    /* bool data: out of range is false; extreme indices */
    const uint8_t b[] = {1, 1};
    const int64_t bi[] = {INT64_MIN, 1, INT64_MAX, 2, 0};
    uint8_t by[5];
    g = gnew();
    a = gin(g, "x", BOOL, "2");
    i = gin(g, "i", I64, "5");
    gout(g, "y", N2(g, IR_OP_GATHER, a, i, ATTRS(.axis = 0)));
    grun(g, (const void *[]){b, bi}, (void *[]){by});
    EXPECT_U8("gather bool", by, 0, 1, 0, 0, 1);

    /* i64 data, scalar index (result drops the axis), and an empty x axis */
    const int64_t l[] = {10, 20, 30, 40, 50, 60};
    const int32_t one = 1;
    int64_t ly[3];
    g = gnew();
    a = gin(g, "x", I64, "2,3");
    i = gin(g, "i", I32, "");
    gout(g, "y", N2(g, IR_OP_GATHER, a, i, ATTRS(.axis = 0)));
    int32_t e = gin(g, "e", I64, "0,3");
    int32_t j = gin(g, "j", I32, "2");
    gout(g, "z", N2(g, IR_OP_GATHER, e, j, ATTRS(.axis = 0)));
    const int32_t jj[] = {0, -1};
    int64_t lz[6] = {1, 1, 1, 1, 1, 1};
    grun(g, (const void *[]){l, &one, NULL, jj}, (void *[]){ly, lz});
    EXPECT_I64("gather scalar index", ly, 40, 50, 60);
    EXPECT_I64("gather from empty", lz, 0, 0, 0, 0, 0, 0);
}
END_TEST

/* ---- reductions -------------------------------------------------------------------- */

/* y = op(x, axes, keepdim) for an input x of type dt[dims]. */
static void
reduce(ir_op op, uint32_t axes, bool keepdim, kiln_dtype dt, const char *dims, const void *x,
       void *y, const char *want_shape)
{
    kiln_graph *g = gnew();
    int32_t a = gin(g, "x", dt, dims);
    int32_t r = N1(g, op, a, ATTRS(.axes = axes, .keepdim = keepdim));
    char buf[IR_TYPE_STR_MAX];
    ck_assert_str_eq(ir_shape_str(&g->nodes[r].type.shape, buf, sizeof buf), want_shape);
    gout(g, "y", r);
    grun(g, (const void *[]){x}, (void *[]){y});
}

START_TEST(test_reduce_sum_axes)
{
    /* x[a][b][c] = 12a + 4b + c, shape [2,3,4] */
    int64_t x[24], y[24];
    float xf[24], yf[24];
    for (int i = 0; i < 24; i++)
        x[i] = i, xf[i] = (float)i;
    /* over {0,2}: 8*4b + sum_a 4*12a + sum_c 2c = 32b + 60 */
    reduce(IR_OP_REDUCE_SUM, 5u, false, I64, "2,3,4", x, y, "[3]");
    EXPECT_I64("sum {0,2}", y, 60, 92, 124);
    reduce(IR_OP_REDUCE_SUM, 5u, true, F32, "2,3,4", xf, yf, "[1,3,1]");
    EXPECT_F32("sum {0,2} keepdim", yf, 0, 60, 92, 124);
    /* over {1}: 36a + 12 + 3c */
    reduce(IR_OP_REDUCE_SUM, 2u, false, I64, "2,3,4", x, y, "[2,4]");
    EXPECT_I64("sum {1}", y, 12, 15, 18, 21, 48, 51, 54, 57);
    reduce(IR_OP_REDUCE_SUM, 2u, true, I64, "2,3,4", x, y, "[2,1,4]");
    EXPECT_I64("sum {1} keepdim", y, 12, 15, 18, 21, 48, 51, 54, 57);
    /* all axes: 0 + 1 + ... + 23 = 276 */
    reduce(IR_OP_REDUCE_SUM, 7u, false, I64, "2,3,4", x, y, "[]");
    EXPECT_I64("sum all", y, 276);
    reduce(IR_OP_REDUCE_SUM, 7u, true, F32, "2,3,4", xf, yf, "[1,1,1]");
    EXPECT_F32("sum all keepdim", yf, 0, 276);
    /* no axes: the identity, -0.0 included */
    const float z[] = {-0.0f, 1.5f};
    reduce(IR_OP_REDUCE_SUM, 0u, false, F32, "2", z, yf, "[2]");
    EXPECT_F32("sum no axes", yf, 0, -0.0f, 1.5f);
    /* max over {1,2}, min over {0,1} */
    reduce(IR_OP_REDUCE_MAX, 6u, false, I64, "2,3,4", x, y, "[2]");
    EXPECT_I64("max {1,2}", y, 11, 23);
    reduce(IR_OP_REDUCE_MIN, 3u, true, F32, "2,3,4", xf, yf, "[1,1,4]");
    EXPECT_F32("min {0,1} keepdim", yf, 0, 0, 1, 2, 3);
    /* mean over {0,2}: (32b + 60) / 8 */
    reduce(IR_OP_REDUCE_MEAN, 5u, false, F32, "2,3,4", xf, yf, "[3]");
    EXPECT_F32("mean {0,2}", yf, 0, 7.5f, 11.5f, 15.5f);
}
END_TEST

START_TEST(test_reduce_order_and_wrap)
{
    /* Row-major order of the reduced elements: 1e16 + 1 (= 1e16, a tie to even) - 1e16 + 1
     * = 1; column order would give 2. */
    const double x[] = {1e16, 1, -1e16, 1};
    double y;
    reduce(IR_OP_REDUCE_SUM, 3u, false, F64, "2,2", x, &y, "[]");
    ck_assert_msg(y == 1.0, "sum order: got %.17g", y);
    /* ints wrap */
    const int32_t i[] = {INT32_MAX, 1, 65536, 65536};
    int32_t yi[2];
    reduce(IR_OP_REDUCE_SUM, 2u, false, I32, "2,2", i, yi, "[2]");
    EXPECT_I32("sum i32 wrap", yi, INT32_MIN, 131072);
    reduce(IR_OP_REDUCE_PROD, 2u, false, I32, "2,2", i, yi, "[2]");
    EXPECT_I32("prod i32 wrap", yi, INT32_MAX, 0);
    const int64_t l[] = {(int64_t)1 << 62, 4, INT64_MAX, 1, 3, -5};
    int64_t yl[2];
    reduce(IR_OP_REDUCE_PROD, 2u, false, I64, "2,3", l, yl, "[2]");
    EXPECT_I64("prod i64 wrap", yl, 0, -15);
    reduce(IR_OP_REDUCE_SUM, 2u, false, I64, "2,3", l, yl, "[2]");
    /* 2^62 + 4 + (2^63 - 1) = 2^63 + 2^62 + 3 = -2^62 + 3 (mod 2^64) */
    EXPECT_I64("sum i64 wrap", yl, -((int64_t)1 << 62) + 3, -1);
    const double pd[] = {-0.0, 5.0, 2.0, 1e300, 1e300, 1e-300};
    double ypd[2];
    reduce(IR_OP_REDUCE_PROD, 2u, false, F64, "2,3", pd, ypd, "[2]");
    /* 1 * -0 * 5 * 2 = -0; 1e300 * 1e300 overflows in f64 (inf * 1e-300 stays inf) */
    EXPECT_F64("prod f64", ypd, 0, -0.0, INFINITY);
    /* prod of floats */
    const float f[] = {2, -0.5f, 3, 1e30f, 1e30f, 1e-30f};
    float yf[2];
    reduce(IR_OP_REDUCE_PROD, 2u, false, F32, "2,3", f, yf, "[2]");
    /* f32 accumulates in f64: 1e30 * 1e30 does not overflow before the * 1e-30 (in f32
     * steps it would be inf); the product in order, rounded once: */
    double p = 1.0 * (double)1e30f;
    p *= (double)1e30f;
    p *= (double)1e-30f;
    ck_assert(isfinite(yf[1]));
    EXPECT_F32("prod f32", yf, 0, -3.0f, (float)p);
}
END_TEST

START_TEST(test_reduce_empty)
{
    /* [2,0] over axis 1: sum 0, prod 1, mean NaN; a zero-size input may be NULL */
    float y[2];
    reduce(IR_OP_REDUCE_SUM, 2u, false, F32, "2,0", NULL, y, "[2]");
    EXPECT_F32("sum empty", y, 0, 0.0f, 0.0f);
    reduce(IR_OP_REDUCE_PROD, 2u, true, F32, "2,0", NULL, y, "[2,1]");
    EXPECT_F32("prod empty", y, 0, 1.0f, 1.0f);
    reduce(IR_OP_REDUCE_MEAN, 2u, false, F32, "2,0", NULL, y, "[2]");
    EXPECT_F32("mean empty", y, 0, NANF, NANF);
    double d[2];
    reduce(IR_OP_REDUCE_MEAN, 2u, false, F64, "2,0", NULL, d, "[2]");
    EXPECT_F64("mean empty f64", d, 0, NAN, NAN);
    int64_t l[3];
    reduce(IR_OP_REDUCE_SUM, 1u, false, I64, "0,3", NULL, l, "[3]");
    EXPECT_I64("sum empty i64", l, 0, 0, 0);
    reduce(IR_OP_REDUCE_PROD, 1u, false, I64, "0,3", NULL, l, "[3]");
    EXPECT_I64("prod empty i64", l, 1, 1, 1);
    /* max over a non-empty axis of an empty tensor: an empty result */
    reduce(IR_OP_REDUCE_MAX, 2u, false, F32, "0,3", NULL, NULL, "[0]");
}
END_TEST

START_TEST(test_reduce_max_min_nan)
{
    const float x[] = {NANF, 1, 1, NANF, 0.0f, -0.0f, -0.0f, 0.0f, -INFF, -INFF};
    float y[5];
    reduce(IR_OP_REDUCE_MAX, 2u, false, F32, "5,2", x, y, "[5]");
    EXPECT_F32("max", y, 0, NANF, NANF, 0.0f, 0.0f, -INFF);
    reduce(IR_OP_REDUCE_MIN, 2u, false, F32, "5,2", x, y, "[5]");
    EXPECT_F32("min", y, 0, NANF, NANF, -0.0f, -0.0f, -INFF);
    double xd[10], yd[5];
    for (int i = 0; i < 10; i++)
        xd[i] = x[i];
    reduce(IR_OP_REDUCE_MAX, 2u, true, F64, "5,2", xd, yd, "[5,1]");
    EXPECT_F64("max f64", yd, 0, NAN, NAN, 0.0, 0.0, -INFINITY);
    reduce(IR_OP_REDUCE_MIN, 2u, true, F64, "5,2", xd, yd, "[5,1]");
    EXPECT_F64("min f64", yd, 0, NAN, NAN, -0.0, -0.0, -INFINITY);
    const int32_t i[] = {INT32_MIN, INT32_MIN, -1, 5};
    int32_t yi[2];
    reduce(IR_OP_REDUCE_MAX, 1u, false, I32, "2,2", i, yi, "[2]");
    EXPECT_I32("max i32", yi, -1, 5);
    reduce(IR_OP_REDUCE_MIN, 1u, false, I32, "2,2", i, yi, "[2]");
    EXPECT_I32("min i32", yi, INT32_MIN, INT32_MIN);
}
END_TEST

START_TEST(test_argmax_argmin)
{
    /* rows: ties (first wins), NaN first, NaN later (the first NaN wins), ±0 (equal) */
    const float x[] = {1, 3, 3, NANF, 5, NANF, 2, NANF, 9, -0.0f, 0.0f, -1, 3, 1, 1};
    int64_t y[5];
    reduce(IR_OP_ARGMAX, 2u, false, F32, "5,3", x, y, "[5]");
    EXPECT_I64("argmax", y, 1, 0, 1, 0, 0);
    reduce(IR_OP_ARGMIN, 2u, false, F32, "5,3", x, y, "[5]");
    EXPECT_I64("argmin", y, 0, 0, 1, 2, 1);
    double xd[15];
    for (int i = 0; i < 15; i++)
        xd[i] = x[i];
    reduce(IR_OP_ARGMAX, 2u, true, F64, "5,3", xd, y, "[5,1]");
    EXPECT_I64("argmax f64", y, 1, 0, 1, 0, 0);
    /* axis 0 with keepdim */
    const int64_t l[] = {1, 5, 7, 5, 7, 0};
    reduce(IR_OP_ARGMAX, 1u, true, I64, "3,2", l, y, "[1,2]");
    EXPECT_I64("argmax axis 0", y, 1, 0);
    reduce(IR_OP_ARGMIN, 1u, false, I64, "3,2", l, y, "[2]");
    EXPECT_I64("argmin axis 0", y, 0, 2);
    const int32_t i[] = {INT32_MIN, INT32_MIN, INT32_MAX, INT32_MAX};
    reduce(IR_OP_ARGMAX, 1u, false, I32, "4", i, y, "[]");
    EXPECT_I64("argmax i32", y, 2);
    reduce(IR_OP_ARGMIN, 1u, false, I32, "4", i, y, "[]");
    EXPECT_I64("argmin i32", y, 0);
    /* the middle axis of a rank 3 tensor: x[a][b][c], argmax over b */
    const int32_t m[] = {0, 9, 5, 1, 5, 9, /* a = 1: */ 2, 2, 2, 2, 3, 1};
    reduce(IR_OP_ARGMAX, 2u, false, I32, "2,3,2", m, y, "[2,2]");
    EXPECT_I64("argmax middle axis", y, 1, 0, 2, 0);
}
END_TEST

/* ---- matmul ----------------------------------------------------------------------- */

static void
matmul(kiln_dtype dt, const char *da, const void *a, const char *db, const void *b, void *y,
       const char *want_shape)
{
    kiln_graph *g = gnew();
    int32_t x = gin(g, "a", dt, da), w = gin(g, "b", dt, db);
    int32_t m = N2(g, IR_OP_MATMUL, x, w, NULL);
    char buf[IR_TYPE_STR_MAX];
    ck_assert_str_eq(ir_shape_str(&g->nodes[m].type.shape, buf, sizeof buf), want_shape);
    gout(g, "y", m);
    grun(g, (const void *[]){a, b}, (void *[]){y});
}

START_TEST(test_matmul_shapes)
{
    const float v[] = {1, 2, 3}, w[] = {4, 5, 6};
    float y[12];
    matmul(F32, "3", v, "3", w, y, "[]");
    EXPECT_F32("1-D @ 1-D", y, 0, 32);
    const float m32[] = {1, 2, 3, 4, 5, 6}, pm[] = {1, -1};
    matmul(F32, "3,2", m32, "2", pm, y, "[3]");
    EXPECT_F32("2-D @ 1-D", y, 0, -1, -1, -1);
    const float r[] = {1, 2};
    matmul(F32, "2", r, "2,3", m32, y, "[3]");
    EXPECT_F32("1-D @ 2-D", y, 0, 9, 12, 15);
    const double a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};
    double yd[4];
    matmul(F64, "2,2", a, "2,2", b, yd, "[2,2]");
    EXPECT_F64("2-D @ 2-D", yd, 0, 19, 22, 43, 50);
    /* k = 0: a sum of nothing, +0 */
    matmul(F32, "2,0", NULL, "0,3", NULL, y, "[2,3]");
    EXPECT_F32("k = 0", y, 0, 0, 0, 0, 0, 0, 0);
    /* a one-term sum is the product itself, sign of zero included */
    const float mz = -0.0f, one = 1.0f;
    matmul(F32, "1,1", &mz, "1,1", &one, y, "[1,1]");
    EXPECT_F32("-0 * 1", y, 0, -0.0f);
    /* 1-D operands in a batch: [2,3] @ [3] -> [2] and [3] @ [2,3,2] -> [2,2] */
    const int64_t la[] = {1, 2, 3, 4, 5, 6}, lv[] = {1, 0, -1};
    int64_t ly[4];
    matmul(I64, "2,3", la, "3", lv, ly, "[2]");
    EXPECT_I64("batch @ 1-D", ly, -2, -2);
    const int64_t lb[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    matmul(I64, "3", lv, "2,3,2", lb, ly, "[2,2]");
    EXPECT_I64("1-D @ batch", ly, -4, -4, -4, -4);
}
END_TEST

START_TEST(test_matmul_batch_broadcast)
{
    /* [2,1,2,3] @ [3,3,4] -> [2,3,2,4]; expected by the definition, in exact integers */
    double a[12], b[36], y[48];
    for (int i = 0; i < 12; i++)
        a[i] = (double)(i % 5 - 2);
    for (int i = 0; i < 36; i++)
        b[i] = (double)((i * 7) % 9 - 4);
    matmul(F64, "2,1,2,3", a, "3,3,4", b, y, "[2,3,2,4]");
    for (int p = 0; p < 2; p++)
        for (int q = 0; q < 3; q++)
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 4; j++) {
                    double s = 0;
                    for (int k = 0; k < 3; k++)
                        s += a[(p * 2 + i) * 3 + k] * b[(q * 3 + k) * 4 + j];
                    ck_assert_msg(y[((p * 3 + q) * 2 + i) * 4 + j] == s, "at %d,%d,%d,%d", p, q,
                                  i, j);
                }
    /* rank mismatch of batch dims: [2,2] @ [3,2,1] -> [3,2,1] */
    const int32_t m[] = {1, 2, 3, 4}, c[] = {1, 0, 0, 1, 2, -1};
    int32_t yi[6];
    matmul(I32, "2,2", m, "3,2,1", c, yi, "[3,2,1]");
    EXPECT_I32("[2,2] @ [3,2,1]", yi, 1, 3, 2, 4, 0, 2);
}
END_TEST

START_TEST(test_matmul_int_wrap)
{
    const int32_t a[] = {65536}, b[] = {65536};
    int32_t y[2];
    matmul(I32, "1", a, "1", b, y, "[]");
    EXPECT_I32("i32 product wraps", y, 0);
    const int32_t r[] = {INT32_MAX, 1}, c[] = {1, 1};
    matmul(I32, "1,2", r, "2,1", c, y, "[1,1]");
    EXPECT_I32("i32 sum wraps", y, INT32_MIN);
    const int64_t l[] = {INT64_MAX, INT64_MAX}, w[] = {2, 1};
    int64_t yl;
    matmul(I64, "2", l, "2", w, &yl, "[]");
    /* 3 * (2^63 - 1) mod 2^64 = 2^63 - 3 */
    ck_assert_int_eq(yl, INT64_MAX - 2);
}
END_TEST

/* ---- f32: computed in f64, rounded once -------------------------------------------- */

START_TEST(test_f32_rounds_once)
{
    /* sum 1 + 2^-24 + 2^-24: stepwise in f32 each addition is a tie that rounds back to 1;
     * in f64 the sum is 1 + 2^-23, exactly representable. */
    const float x[] = {1.0f, 0x1p-24f, 0x1p-24f};
    float y;
    float step = (x[0] + x[1]) + x[2];
    ck_assert(step == 1.0f); /* the f32-step answer the interpreter must not give */
    reduce(IR_OP_REDUCE_SUM, 1u, false, F32, "3", x, &y, "[]");
    EXPECT_F32("sum once", &y, 0, 1.0f + 0x1p-23f);
    reduce(IR_OP_REDUCE_MEAN, 1u, false, F32, "3", x, &y, "[]");
    EXPECT_F32("mean once", &y, 0, (float)((1.0 + 0x1p-23) / 3.0));
    const float ones[] = {1, 1, 1};
    matmul(F32, "3", x, "3", ones, &y, "[]");
    EXPECT_F32("matmul once", &y, 0, 1.0f + 0x1p-23f);

    /* gelu: find inputs where evaluating the formula in f32 steps differs from evaluating
     * it in f64 and rounding once, and check the interpreter gives the latter. */
    int found = 0;
    for (int k = -192; k <= 400 && found < 8; k++) { /* x >= -3: see the oracle below */
        float xf = (float)k / 64.0f;
        float t = 0.7978845608028654f * (xf + 0.044715f * (xf * xf * xf));
        float f32step = 0.5f * xf * (1.0f + tanhf(t));
        /* the literal formula in long double: for x >= -3, 1 + tanh(u) >= 2.4e-3, so the
         * cancellation costs under 9 of long double's 64 bits and rounding once to f32 is
         * exact (further out the literal form loses everything; kiln's interpreter uses
         * the equal form x / (1 + e^-2u) there) */
        long double xd = xf;
        float once = (float)(0.5L * xd *
                             (1.0L + tanhl(0.7978845608028654L * (xd + 0.044715L * (xd * xd * xd)))));
        if (f32step == once)
            continue;
        found++;
        float got;
        run1(IR_OP_GELU, NULL, F32, "", &xf, &got);
        ck_assert_msg(bits32(got) == bits32(once), "gelu(%a): got %a, f64-once %a, f32-step %a",
                      (double)xf, (double)got, (double)once, (double)f32step);
    }
    ck_assert_msg(found > 0, "no input distinguishes f32-step gelu from f64-once");
}
END_TEST

/* ---- memory: aliasing, lifetimes, allocation failure ---------------------------------- */

START_TEST(test_output_aliasing)
{
    /* an output that is an input, two outputs naming one node, an output naming a
     * constant, and an output naming an operand of a later node */
    const float c[] = {7, 8, 9};
    kiln_graph *g = gnew();
    int32_t x = gin(g, "x", F32, "3");
    int32_t y = N1(g, IR_OP_NEG, x, NULL);
    int32_t k = gsrc(g, IR_OP_CONSTANT, ATTRS(.data = (void *)c), F32, "3");
    int32_t z = N2(g, IR_OP_ADD, y, k, NULL);
    gout(g, "xo", x);
    gout(g, "y1", y);
    gout(g, "y2", y);
    gout(g, "k", k);
    gout(g, "z", z);
    const float xin[] = {1, -2, 0};
    float xo[3], y1[3], y2[3], ko[3], zo[3];
    grun(g, (const void *[]){xin}, (void *[]){xo, y1, y2, ko, zo});
    EXPECT_F32("xo", xo, 0, 1, -2, 0);
    EXPECT_F32("y1", y1, 0, -1, 2, -0.0f);
    EXPECT_F32("y2", y2, 0, -1, 2, -0.0f);
    EXPECT_F32("k", ko, 0, 7, 8, 9);
    EXPECT_F32("z", zo, 0, 6, 10, 9);
}
END_TEST

START_TEST(test_in_place)
{
    /* y = 2x written into x's own buffer, while output "x" returns the input itself:
     * inputs are read in place and outputs written only at the end, inputs first. */
    kiln_graph *g = gnew();
    int32_t x = gin(g, "x", I64, "3");
    int32_t two = gsrc(g, IR_OP_FULL, ATTRS(.value = ir_scalar_from_i64(I64, 2)), I64, "");
    gout(g, "y", N2(g, IR_OP_MUL, x, two, NULL));
    gout(g, "x", x);
    int64_t buf[3] = {1, 2, 3}, orig[3];
    grun(g, (const void *[]){buf}, (void *[]){buf, orig});
    EXPECT_I64("y in x's buffer", buf, 2, 4, 6);
    EXPECT_I64("x returned", orig, 1, 2, 3);
}
END_TEST

START_TEST(test_shared_intermediates)
{
    /* a diamond with a value read twice by one node, a value read by several later nodes,
     * and a dead node; each intermediate is freed after its last reader (ASan checks). */
    kiln_graph *g = gnew();
    int32_t x = gin(g, "x", I32, "3");
    int32_t a = N1(g, IR_OP_ABS, x, NULL);
    int32_t b = N2(g, IR_OP_ADD, a, a, NULL);
    N1(g, IR_OP_NEG, a, NULL); /* dead */
    int32_t c = N2(g, IR_OP_MUL, b, a, NULL);
    int32_t d = N2(g, IR_OP_SUB, c, b, NULL);
    gout(g, "d", d);
    gout(g, "b", b);
    const int32_t xin[] = {-3, 2, 0};
    int32_t dout[3], bout[3];
    grun(g, (const void *[]){xin}, (void *[]){dout, bout});
    /* a = 3,2,0; b = 6,4,0; c = 18,8,0; d = 12,4,0 */
    EXPECT_I32("d", dout, 12, 4, 0);
    EXPECT_I32("b", bout, 6, 4, 0);
}
END_TEST

/* x [4,3] @ w [3,2] -> relu -> divided by (its row sum + 1), with a dead node, an
 * input output and a full: allocations in several places, matmul's scratch included. */
static kiln_graph *
oom_graph(void)
{
    kiln_graph *g = gnew();
    int32_t x = gin(g, "x", F32, "4,3"), w = gin(g, "w", F32, "3,2");
    int32_t h = N2(g, IR_OP_MATMUL, x, w, NULL);
    int32_t r = N1(g, IR_OP_RELU, h, NULL);
    int32_t s = N1(g, IR_OP_REDUCE_SUM, r, ATTRS(.axes = 2u, .keepdim = true));
    int32_t one = gsrc(g, IR_OP_FULL, ATTRS(.value = ir_scalar_from_f64(F32, 1.0)), F32, "");
    int32_t s1 = N2(g, IR_OP_ADD, s, one, NULL);
    N1(g, IR_OP_EXP, h, NULL); /* dead */
    gout(g, "out", N2(g, IR_OP_DIV, r, s1, NULL));
    gout(g, "s", s);
    gout(g, "x", x);
    return g;
}

static const float oom_x[] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1};
static const float oom_w[] = {1, -1, 2, 0, -3, 4};

static void
oom_check(const float *out, const float *s, const float *xo)
{
    /* h = [[1,-1],[2,0],[-3,4],[0,3]]; r = relu(h); s = row sums 1,2,4,3; out = r/(s+1) */
    EXPECT_F32("oom out", out, 0, 0.5f, 0, (float)(2.0 / 3.0), 0, 0, (float)(4.0 / 5.0), 0,
               0.75f);
    EXPECT_F32("oom s", s, 0, 1, 2, 4, 3);
    expect_f32("oom x", xo, oom_x, 12, 0);
}

START_TEST(test_alloc_failure)
{
    kiln_graph *g = oom_graph();
    ck_assert_int_eq(ir_graph_verify(g), KILN_OK);
    float out[8], s[4], xo[12];
    long n;
    for (int i = 0; i < 8; i++)
        out[i] = f32_bits(0xdeadbeefu);
    for (n = 0;; n++) {
        kiln_clear_error();
        ir_test_fail_alloc_after(n);
        kiln_status st = kiln_graph_interpret(g, (const void *[]){oom_x, oom_w},
                                              (void *[]){out, s, xo});
        ir_test_fail_alloc_after(-1);
        if (st == KILN_OK)
            break;
        ck_assert_msg(st == KILN_ERR_NOMEM, "allocation %ld: %s", n, kiln_errmsg());
        /* a failed run writes no output */
        for (int i = 0; i < 8; i++)
            ck_assert_uint_eq(bits32(out[i]), 0xdeadbeefu);
        ts_assert_error(KILN_ERR_NOMEM, "kiln_graph_interpret: out of memory");
        ck_assert_msg(n < 1000, "interpreting never succeeds");
    }
    /* slots, 6 computed buffers (the dead node's too) and matmul's 3 scratch arrays */
    ck_assert_int_ge(n, 10);
    oom_check(out, s, xo);
    /* and a clean run afterwards gives the same */
    memset(out, 0, sizeof out);
    ck_assert_int_eq(kiln_graph_interpret(g, (const void *[]){oom_x, oom_w},
                                          (void *[]){out, s, xo}),
                     KILN_OK);
    oom_check(out, s, xo);
    kiln_graph_free(g);
}
END_TEST

/* ---- benchmark sizes ------------------------------------------------------------------ */

START_TEST(test_softmax_4096x1024)
{
    enum { R = 4096, C = 1024 };
    float *x = malloc(sizeof(float) * R * C), *y = malloc(sizeof(float) * R * C);
    ck_assert(x && y);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            x[i * C + j] = (float)((i * 37 + j * 101) % 1000) / 100.0f - 5.0f;
    kiln_graph *g = gnew();
    int32_t in = gin(g, "x", F32, "4096,1024");
    int32_t m = N1(g, IR_OP_REDUCE_MAX, in, ATTRS(.axes = 2u, .keepdim = true));
    int32_t d = N2(g, IR_OP_SUB, in, m, NULL);
    int32_t e = N1(g, IR_OP_EXP, d, NULL);
    int32_t s = N1(g, IR_OP_REDUCE_SUM, e, ATTRS(.axes = 2u, .keepdim = true));
    gout(g, "y", N2(g, IR_OP_DIV, e, s, NULL));
    grun(g, (const void *[]){x}, (void *[]){y});
    /* Every row sums to 1 (relative 1e-5); a few rows recomputed op by op, each op in
     * double and rounded to f32, must match bit for bit. */
    for (int i = 0; i < R; i++) {
        double t = 0;
        for (int j = 0; j < C; j++)
            t += y[i * C + j];
        ck_assert_msg(fabs(t - 1.0) < 1e-5, "row %d sums to %.9g", i, t);
    }
    static float ev[C];
    for (int i = 0; i < R; i += 1023) {
        const float *row = x + i * C;
        float mx = row[0];
        for (int j = 1; j < C; j++)
            mx = row[j] > mx ? row[j] : mx;
        double sum = 0;
        for (int j = 0; j < C; j++) {
            float dj = (float)((double)row[j] - (double)mx);
            ev[j] = (float)exp((double)dj);
            sum += ev[j];
        }
        float sf = (float)sum;
        for (int j = 0; j < C; j++) {
            float want = (float)((double)ev[j] / (double)sf);
            ck_assert_msg(bits32(y[i * C + j]) == bits32(want), "y[%d][%d] = %a, want %a", i, j,
                          (double)y[i * C + j], (double)want);
        }
    }
    free(x);
    free(y);
}
END_TEST

START_TEST(test_matmul_256x1024x1024)
{
    enum { M = 256, K = 1024, N = 1024 };
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
    float *y = malloc(sizeof(float) * M * N);
    ck_assert(a && b && y);
    /* small integers: every product and partial sum is exact in f32 and f64 */
    for (int i = 0; i < M; i++)
        for (int p = 0; p < K; p++)
            a[i * K + p] = (float)((i * 7 + p * 3) % 11 - 5);
    for (int p = 0; p < K; p++)
        for (int j = 0; j < N; j++)
            b[p * N + j] = (float)((p * 5 + j * 2) % 13 - 6);
    kiln_graph *g = gnew();
    int32_t x = gin(g, "a", F32, "256,1024"), w = gin(g, "b", F32, "1024,1024");
    gout(g, "y", N2(g, IR_OP_MATMUL, x, w, NULL));
    grun(g, (const void *[]){a, b}, (void *[]){y});
    for (int t = 0; t < 4096; t++) {
        int i = (t * 97) % M, j = (t * 389) % N;
        long s = 0;
        for (int p = 0; p < K; p++)
            s += (long)((i * 7 + p * 3) % 11 - 5) * ((p * 5 + j * 2) % 13 - 6);
        ck_assert_msg(y[i * N + j] == (float)s, "y[%d][%d] = %g, want %ld", i, j,
                      (double)y[i * N + j], s);
    }
    free(a);
    free(b);
    free(y);
}
END_TEST

/* ---- suite ----------------------------------------------------------------------------- */

static Suite *
interp_suite(void)
{
    Suite *s = suite_create("interp");
    TCase *tc = tcase_create("sources");
    tcase_add_test(tc, test_full);
    tcase_add_test(tc, test_constant);
    tcase_add_test(tc, test_arange);
    suite_add_tcase(s, tc);

    tc = tcase_create("unary");
    tcase_add_test(tc, test_neg_abs_sign_relu_float);
    tcase_add_test(tc, test_neg_abs_sign_relu_int);
    tcase_add_test(tc, test_unary_table);
    tcase_add_test(tc, test_unary_special);
    tcase_add_test(tc, test_rounding_ops);
    tcase_add_test(tc, test_not_isnan_isinf);
    suite_add_tcase(s, tc);

    tc = tcase_create("binary");
    tcase_add_test(tc, test_arith_f32);
    tcase_add_test(tc, test_arith_f64);
    tcase_add_test(tc, test_rem_pow_float);
    tcase_add_test(tc, test_binary_table);
    tcase_add_test(tc, test_max_min);
    tcase_add_test(tc, test_int_arith_i32);
    tcase_add_test(tc, test_int_arith_i64);
    tcase_add_test(tc, test_int_pow);
    tcase_add_test(tc, test_compare);
    tcase_add_test(tc, test_logic);
    tcase_add_test(tc, test_broadcast);
    tcase_add_test(tc, test_broadcast_zero_size);
    suite_add_tcase(s, tc);

    tc = tcase_create("ternary_cast");
    tcase_add_test(tc, test_where);
    tcase_add_test(tc, test_clamp);
    tcase_add_test(tc, test_bool_nonzero_byte);
    tcase_add_test(tc, test_cast_float_to_int);
    tcase_add_test(tc, test_cast_int_and_bool);
    tcase_add_test(tc, test_cast_float_rounding);
    suite_add_tcase(s, tc);

    tc = tcase_create("movement");
    tcase_add_test(tc, test_reshape);
    tcase_add_test(tc, test_permute);
    tcase_add_test(tc, test_expand);
    tcase_add_test(tc, test_slice);
    tcase_add_test(tc, test_concat);
    tcase_add_test(tc, test_pad);
    tcase_add_test(tc, test_gather);
    suite_add_tcase(s, tc);

    tc = tcase_create("reduce_matmul");
    tcase_add_test(tc, test_reduce_sum_axes);
    tcase_add_test(tc, test_reduce_order_and_wrap);
    tcase_add_test(tc, test_reduce_empty);
    tcase_add_test(tc, test_reduce_max_min_nan);
    tcase_add_test(tc, test_argmax_argmin);
    tcase_add_test(tc, test_matmul_shapes);
    tcase_add_test(tc, test_matmul_batch_broadcast);
    tcase_add_test(tc, test_matmul_int_wrap);
    tcase_add_test(tc, test_f32_rounds_once);
    suite_add_tcase(s, tc);

    tc = tcase_create("memory");
    tcase_add_test(tc, test_output_aliasing);
    tcase_add_test(tc, test_in_place);
    tcase_add_test(tc, test_shared_intermediates);
    tcase_add_test(tc, test_alloc_failure);
    suite_add_tcase(s, tc);

    /* benchmark sizes: seconds, more under sanitizers */
    tc = tcase_create("large");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_softmax_4096x1024);
    tcase_add_test(tc, test_matmul_256x1024x1024);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return ts_run(interp_suite());
}
