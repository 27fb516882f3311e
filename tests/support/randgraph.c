/* randgraph.c — seeded random valid graphs (see randgraph.h for what they contain).
 *
 * Every choice goes through the generator's own PRNG and integer arithmetic, so a seed
 * names the same graph everywhere.  Each op has a builder that picks operands satisfying
 * the op's rule from the values made so far, or makes a fresh full/constant of a fitting
 * type, and attributes that are valid by construction; ir_graph_add_node then checks the
 * op table's rule, so a builder that is wrong shows up as a NULL graph, not a bad one. */
#include "randgraph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- PRNG ------------------------------------------------------------------------------ */

static uint64_t
splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t
ts_base_seed(uint64_t dflt)
{
    const char *e = getenv("KILN_TEST_SEED");
    return e && *e ? strtoull(e, NULL, 0) : dflt;
}

void
ts_rng_seed(ts_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static uint64_t
rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t
ts_rng_next(ts_rng *r)
{
    uint64_t *s = r->s;
    uint64_t res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

uint64_t
ts_rng_below(ts_rng *r, uint64_t n)
{
    /* Rejection keeps it uniform. */
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    for (;;) {
        uint64_t v = ts_rng_next(r);
        if (v < lim)
            return v % n;
    }
}

/* ---- values ------------------------------------------------------------------------------ */

static const uint32_t f32_special[] = {
    0x00000000, 0x80000000, /* +0, -0 */
    0x3f800000, 0xbf800000, 0x3f000000, 0x3dcccccd, 0x3eaaaaab, /* 1 -1 0.5 0.1 1/3 */
    0x7fc00000, 0x7fc00001, 0xffc00000, 0x7f800001, 0x7fbfffff, 0xfff00abc, /* NaNs */
    0x7f800000, 0xff800000, /* ±inf */
    0x00000001, 0x007fffff, 0x80000001, 0x00400000, /* subnormals */
    0x00800000, 0x80800000, 0x7f7fffff, 0xff7fffff, /* smallest normal, max */
    0x4b800000, 0x4b800001, /* 2^24, 2^24+2 */
};

static const uint64_t f64_special[] = {
    0x0000000000000000ull, 0x8000000000000000ull,
    0x3ff0000000000000ull, 0xbff0000000000000ull, 0x3fe0000000000000ull,
    0x3fb999999999999aull, 0x3fd5555555555555ull,
    0x7ff8000000000000ull, 0x7ff8000000000001ull, 0xfff8000000000000ull,
    0x7ff0000000000001ull, 0x7ff7ffffffffffffull, 0xfff0deadbeef0000ull,
    0x7ff0000000000000ull, 0xfff0000000000000ull,
    0x0000000000000001ull, 0x000fffffffffffffull, 0x8000000000000001ull,
    0x0010000000000000ull, 0x7fefffffffffffffull, 0xffefffffffffffffull,
    0x4340000000000000ull, 0x4340000000000001ull, /* 2^53, 2^53+2 */
    0x47efffffe0000000ull, /* FLT_MAX as f64 */
};

static const int64_t int_special[] = {
    0, 1, -1, 2, -2, 7, 100, INT32_MIN, INT32_MAX, (int64_t)INT32_MIN - 1,
    (int64_t)INT32_MAX + 1, INT64_MIN, INT64_MAX, INT64_MIN + 1,
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

void
ts_random_elements(ts_rng *r, kiln_dtype t, void *dst, size_t count, bool tame)
{
    for (size_t i = 0; i < count; i++) {
        uint64_t pick = ts_rng_below(r, 8);
        /* Tame: multiples of 1/8 in [-8, 8] (exact in every float dtype), ints in [-100, 100]. */
        int64_t small = (int64_t)ts_rng_below(r, 129) - 64;
        int64_t smallint = (int64_t)ts_rng_below(r, 201) - 100;
        switch (t) {
        case KILN_DTYPE_F32: {
            uint32_t bits;
            if (tame || pick < 3) {
                float v = (float)small / 8.0f;
                memcpy(&bits, &v, 4);
            } else if (pick < 6) {
                bits = f32_special[ts_rng_below(r, NELEM(f32_special))];
            } else {
                bits = (uint32_t)ts_rng_next(r); /* any pattern: NaNs with any payload too */
            }
            memcpy((char *)dst + 4 * i, &bits, 4);
            break;
        }
        case KILN_DTYPE_F64: {
            uint64_t bits;
            if (tame || pick < 3) {
                double v = (double)small / 8.0;
                memcpy(&bits, &v, 8);
            } else if (pick < 6) {
                bits = f64_special[ts_rng_below(r, NELEM(f64_special))];
            } else {
                bits = ts_rng_next(r);
            }
            memcpy((char *)dst + 8 * i, &bits, 8);
            break;
        }
        case KILN_DTYPE_I32:
        case KILN_DTYPE_I64: {
            int64_t v;
            if (tame || pick < 4)
                v = smallint;
            else if (pick < 6)
                v = int_special[ts_rng_below(r, NELEM(int_special))];
            else
                v = (int64_t)ts_rng_next(r);
            if (t == KILN_DTYPE_I32) {
                int32_t w = (int32_t)(uint32_t)(uint64_t)v;
                memcpy((char *)dst + 4 * i, &w, 4);
            } else {
                memcpy((char *)dst + 8 * i, &v, 8);
            }
            break;
        }
        case KILN_DTYPE_BOOL:
            ((uint8_t *)dst)[i] = (uint8_t)(ts_rng_next(r) >> 63);
            break;
        default:
            break;
        }
    }
}

/* ---- options ------------------------------------------------------------------------------ */

void
ts_randgraph_defaults(ts_randgraph_opts *o)
{
    memset(o, 0, sizeof *o);
    o->min_nodes = 1;
    o->max_nodes = 12;
    o->max_inputs = 4;
    o->max_outputs = 3;
    o->max_rank = 4;
    o->max_dim = 5;
    o->max_elems = 256;
    o->zero_dim_pct = 4;
    o->require_op = -1;
}

void
ts_randgraph_jit_defaults(ts_randgraph_opts *o)
{
    ts_randgraph_defaults(o);
    o->kinds = 1u << IR_KIND_UNARY | 1u << IR_KIND_BINARY | 1u << IR_KIND_TERNARY |
               1u << IR_KIND_CAST | 1u << IR_KIND_MOVE;
    o->max_dim = 4;
    o->max_elems = 64;
    o->max_rank = 3;
    o->tame_values = true;
    o->plain_names = true;
}

/* ---- the generator ------------------------------------------------------------------------ */

typedef struct gen {
    ts_rng r;
    ts_randgraph_opts o;
    kiln_graph *g;
    ir_shape base; /* inputs are broadcast variants of it */
} gen;

static uint64_t
below(gen *G, uint64_t n)
{
    return ts_rng_below(&G->r, n);
}

static bool
chance(gen *G, unsigned pct)
{
    return below(G, 100) < pct;
}

static size_t
count_of(const ir_shape *s)
{
    size_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= (size_t)s->dims[i];
    return n;
}

/* The elements s would have with its zero dims 1: what the element cap bounds, so that
 * the values made from an empty one (a reduction over its zero axis, a broadcast partner
 * with a 1 there) stay within the cap too. */
static size_t
span_of(const ir_shape *s)
{
    size_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= s->dims[i] > 1 ? (size_t)s->dims[i] : 1;
    return n;
}

static const ir_type *
type_of(gen *G, int32_t id)
{
    return &G->g->nodes[id].type;
}

static bool
rule_ok(ir_trule rule, kiln_dtype t)
{
    switch (rule) {
    case IR_T_NUM:
    case IR_T_CMP:
        return t != KILN_DTYPE_BOOL;
    case IR_T_FLOAT:
    case IR_T_FTEST:
        return ir_dtype_is_float(t);
    case IR_T_LOGIC:
        return t == KILN_DTYPE_BOOL || ir_dtype_is_int(t);
    default:
        return true;
    }
}

/* A dtype satisfying `rule`, from the allowed ones when one qualifies. */
static kiln_dtype
pick_dtype(gen *G, ir_trule rule)
{
    kiln_dtype c[KILN_DTYPE_COUNT];
    int n = 0;
    for (int pass = 0; pass < 2 && n == 0; pass++)
        for (int t = 0; t < KILN_DTYPE_COUNT; t++)
            if (rule_ok(rule, (kiln_dtype)t) &&
                (pass == 1 || !G->o.dtypes || (G->o.dtypes & (1u << t))))
                c[n++] = (kiln_dtype)t;
    return c[below(G, (uint64_t)n)];
}

static int64_t
rand_dim(gen *G)
{
    if (G->o.zero_dim_pct > 0 && chance(G, (unsigned)G->o.zero_dim_pct))
        return 0;
    return 1 + (int64_t)below(G, (uint64_t)G->o.max_dim);
}

/* Shrink the largest dims until the count fits the cap. */
static void
cap_shape(gen *G, ir_shape *s)
{
    while (span_of(s) > G->o.max_elems) {
        int big = 0;
        for (int i = 1; i < s->rank; i++)
            if (s->dims[i] > s->dims[big])
                big = i;
        s->dims[big] = s->dims[big] / 2 > 0 ? s->dims[big] / 2 : 1;
    }
}

static ir_shape
rand_shape(gen *G, int min_rank, bool nonempty)
{
    ir_shape s = {0, {0}};
    s.rank = min_rank + (int)below(G, (uint64_t)(G->o.max_rank - min_rank + 1));
    for (int i = 0; i < s.rank; i++) {
        s.dims[i] = rand_dim(G);
        if (nonempty && s.dims[i] == 0)
            s.dims[i] = 1;
    }
    cap_shape(G, &s);
    return s;
}

/* A shape that broadcasts with s (size-1 dims, fewer or more leading dims), the broadcast
 * staying within the element cap (span_of: an empty s does not make any partner fit); s
 * itself when the draw would not. */
static ir_shape
bcast_partner(gen *G, const ir_shape *s)
{
    ir_shape b = *s, out;
    for (int i = 0; i < b.rank; i++) {
        if (chance(G, 25))
            b.dims[i] = 1;
        else if (s->dims[i] == 1 && chance(G, 30))
            b.dims[i] = rand_dim(G);
    }
    if (b.rank > 0 && chance(G, 25)) {
        int k = 1 + (int)below(G, (uint64_t)b.rank);
        memmove(b.dims, b.dims + k, sizeof(int64_t) * (size_t)(b.rank - k));
        b.rank -= k;
    } else if (b.rank < G->o.max_rank && chance(G, 15)) {
        int k = 1 + (int)below(G, (uint64_t)(G->o.max_rank - b.rank));
        memmove(b.dims + k, b.dims, sizeof(int64_t) * (size_t)b.rank);
        for (int i = 0; i < k; i++)
            b.dims[i] = rand_dim(G);
        b.rank += k;
    }
    for (int i = b.rank; i < IR_MAX_RANK; i++)
        b.dims[i] = 0;
    if (!ir_broadcast(s, &b, &out) || span_of(&out) > G->o.max_elems)
        return *s;
    return b;
}

/* ---- names ------------------------------------------------------------------------------- */

/* Names the printer must quote: spaces, quotes, backslashes, control and non-ASCII bytes
 * (one not UTF-8), things that look like labels, keywords and numbers. */
static const char *const odd_names[] = {
    "a b", "%", "%1", "x\"q", "back\\slash", "tab\tch", "\xc3\xbcn\xc3\xaf", "9lives",
    "graph", "nan", "true", "inf", "-", "\xe2\x82\xac", "\xff\x01", "new\nline", "b64",
};

static const char *
value_name(gen *G, char *buf, size_t n, const char *prefix, int32_t id)
{
    uint64_t k = below(G, 100);
    if (!G->o.plain_names && k < 10)
        snprintf(buf, n, "%s_%s%d", odd_names[below(G, NELEM(odd_names))], prefix, (int)id);
    else
        snprintf(buf, n, "%s%d", prefix, (int)id);
    return buf;
}

/* ---- adding nodes --------------------------------------------------------------------------- */

static int32_t
add(gen *G, ir_op op, int nin, const int32_t *in, const ir_attrs *at, const ir_type *given)
{
    char buf[64];
    const char *name = NULL;
    int32_t id = G->g->nnodes;
    if (below(G, 100) < 55)
        name = value_name(G, buf, sizeof buf, "v", id);
    ir_attrs zero;
    memset(&zero, 0, sizeof zero);
    return ir_graph_add_node(G->g, "ts_random_graph", op, nin, in, at ? at : &zero, given,
                             name);
}

static ir_scalar
rand_scalar(gen *G, kiln_dtype t)
{
    ir_scalar s;
    memset(&s, 0, sizeof s);
    ts_random_elements(&G->r, t, s.bytes, 1, G->o.tame_values);
    return s;
}

/* A new source of exactly type t: `op` (full, constant, arange), or any fitting one when
 * op is IR_OP_INPUT. */
static int32_t
make_source_op(gen *G, const ir_type *t, ir_op op)
{
    ir_attrs at;
    memset(&at, 0, sizeof at);
    uint64_t k = below(G, 100);
    if (op != IR_OP_INPUT)
        k = op == IR_OP_ARANGE ? 0 : op == IR_OP_FULL ? 10 : 99;
    if (t->shape.rank == 1 && t->dtype != KILN_DTYPE_BOOL && k < 10) {
        at.start = rand_scalar(G, t->dtype);
        at.delta = rand_scalar(G, t->dtype);
        return add(G, IR_OP_ARANGE, 0, NULL, &at, t);
    }
    if (k < 45) {
        at.value = rand_scalar(G, t->dtype);
        return add(G, IR_OP_FULL, 0, NULL, &at, t);
    }
    size_t bytes = ir_type_bytes(t);
    void *data = ir_malloc(bytes ? bytes : 1);
    if (!data) {
        ir_error(KILN_ERR_NOMEM, "ts_random_graph: out of memory");
        return -1;
    }
    ts_random_elements(&G->r, t->dtype, data, count_of(&t->shape), G->o.tame_values);
    at.data = data;
    int32_t id = add(G, IR_OP_CONSTANT, 0, NULL, &at, t);
    ir_free(data);
    return id;
}

static int32_t
make_source(gen *G, const ir_type *t)
{
    return make_source_op(G, t, IR_OP_INPUT);
}

/* An existing value of exactly type t (half the time, when there is one) or a new source. */
static int32_t
get_operand(gen *G, const ir_type *t)
{
    if (chance(G, 50)) {
        int32_t n = G->g->nnodes, start = (int32_t)below(G, (uint64_t)n);
        for (int32_t i = 0; i < n; i++) {
            int32_t id = (start + i) % n;
            if (ir_type_equal(type_of(G, id), t))
                return id;
        }
    }
    return make_source(G, t);
}

/* A first operand: an existing value whose dtype satisfies `rule` with rank >= min_rank
 * (and no zero dim when nonempty), or a new source of a fresh type. */
static int32_t
pick_x(gen *G, ir_trule rule, int min_rank, bool nonempty)
{
    if (chance(G, 65)) {
        int32_t n = G->g->nnodes, start = (int32_t)below(G, (uint64_t)n);
        for (int32_t i = 0; i < n; i++) {
            int32_t id = (start + i) % n;
            const ir_type *t = type_of(G, id);
            if (!rule_ok(rule, t->dtype) || t->shape.rank < min_rank)
                continue;
            if (G->o.dtypes && !(G->o.dtypes & (1u << t->dtype)) && chance(G, 80))
                continue;
            if (nonempty && count_of(&t->shape) == 0)
                continue;
            return id;
        }
    }
    ir_type t;
    t.dtype = pick_dtype(G, rule);
    t.shape = rand_shape(G, min_rank, nonempty);
    return make_source(G, &t);
}

/* ---- one builder per kind of op ------------------------------------------------------------ */

static int32_t
gen_source(gen *G, ir_op op)
{
    ir_type t;
    t.dtype = pick_dtype(G, op == IR_OP_ARANGE ? IR_T_NUM : IR_T_ANY);
    if (op == IR_OP_ARANGE) {
        memset(&t.shape, 0, sizeof t.shape);
        t.shape.rank = 1;
        t.shape.dims[0] = rand_dim(G);
    } else if (op == IR_OP_CONSTANT && G->o.max_elems > 64 && chance(G, 25)) {
        /* Big enough for the printer's base64 form. */
        memset(&t.shape, 0, sizeof t.shape);
        t.shape.rank = 1;
        t.shape.dims[0] = 65 + (int64_t)below(G, G->o.max_elems - 64);
    } else {
        t.shape = rand_shape(G, 0, false);
    }
    return make_source_op(G, &t, op);
}

static int32_t
gen_binary(gen *G, ir_op op)
{
    int32_t a = pick_x(G, ir_ops[op].trule, 0, false);
    if (a < 0)
        return -1;
    ir_type tb = *type_of(G, a);
    tb.shape = bcast_partner(G, &type_of(G, a)->shape);
    int32_t b = get_operand(G, &tb);
    if (b < 0)
        return -1;
    int32_t in[2] = {a, b};
    if (chance(G, 50))
        in[0] = b, in[1] = a;
    return add(G, op, 2, in, NULL, NULL);
}

static int32_t
gen_ternary(gen *G, ir_op op)
{
    bool where = op == IR_OP_WHERE;
    int32_t x = pick_x(G, where ? IR_T_ANY : IR_T_NUM, 0, false);
    if (x < 0)
        return -1;
    const ir_type tx = *type_of(G, x);
    ir_type t1 = tx, t2 = tx;
    t1.shape = bcast_partner(G, &tx.shape);
    t2.shape = bcast_partner(G, &tx.shape);
    ir_shape s1, s2;
    if (!ir_broadcast(&tx.shape, &t1.shape, &s1) || !ir_broadcast(&s1, &t2.shape, &s2) ||
        span_of(&s2) > G->o.max_elems)
        t1.shape = t2.shape = tx.shape;
    int32_t in[3];
    if (where) {
        /* cond is bool; x goes to a random data slot. */
        ir_type tc = t1;
        tc.dtype = KILN_DTYPE_BOOL;
        in[0] = get_operand(G, &tc);
        in[1] = x;
        in[2] = get_operand(G, &t2);
        if (chance(G, 50)) {
            int32_t s = in[1];
            in[1] = in[2];
            in[2] = s;
        }
    } else {
        in[0] = x;
        in[1] = get_operand(G, &t1);
        in[2] = get_operand(G, &t2);
        int k = (int)below(G, 3); /* x in any slot */
        int32_t s = in[0];
        in[0] = in[k];
        in[k] = s;
    }
    if (in[0] < 0 || in[1] < 0 || in[2] < 0)
        return -1;
    return add(G, op, 3, in, NULL, NULL);
}

static int32_t
gen_reshape(gen *G, int32_t x)
{
    const ir_type *t = type_of(G, x);
    size_t c = count_of(&t->shape);
    ir_attrs at;
    memset(&at, 0, sizeof at);
    ir_shape *s = &at.shape;
    if (c == 0) {
        s->rank = 1 + (int)below(G, (uint64_t)G->o.max_rank);
        for (int i = 0; i < s->rank; i++)
            s->dims[i] = (int64_t)below(G, (uint64_t)G->o.max_dim + 1);
        s->dims[below(G, (uint64_t)s->rank)] = 0;
    } else {
        s->rank = c == 1 ? (int)below(G, (uint64_t)G->o.max_rank + 1)
                         : 1 + (int)below(G, (uint64_t)G->o.max_rank);
        for (int i = 0; i < s->rank; i++)
            s->dims[i] = 1;
        /* Spread c's prime factors over the axes. */
        size_t rest = c;
        for (size_t f = 2; rest > 1; f++)
            while (rest % f == 0) {
                s->dims[below(G, (uint64_t)s->rank)] *= (int64_t)f;
                rest /= f;
            }
    }
    return add(G, IR_OP_RESHAPE, 1, &x, &at, NULL);
}

static int32_t
gen_move(gen *G, ir_op op)
{
    int min_rank = op == IR_OP_CONCAT || op == IR_OP_GATHER ? 1 : 0;
    int32_t x = pick_x(G, IR_T_ANY, min_rank, false);
    if (x < 0)
        return -1;
    const ir_type tx = *type_of(G, x);
    int rank = tx.shape.rank;
    ir_attrs at;
    memset(&at, 0, sizeof at);
    switch (op) {
    case IR_OP_RESHAPE:
        return gen_reshape(G, x);
    case IR_OP_PERMUTE:
        for (int i = 0; i < rank; i++)
            at.perm[i] = i;
        for (int i = rank - 1; i > 0; i--) {
            int j = (int)below(G, (uint64_t)i + 1), s = at.perm[i];
            at.perm[i] = at.perm[j];
            at.perm[j] = s;
        }
        return add(G, op, 1, &x, &at, NULL);
    case IR_OP_EXPAND: {
        ir_shape *s = &at.shape;
        int extra = rank < G->o.max_rank && chance(G, 50)
                        ? 1 + (int)below(G, (uint64_t)(G->o.max_rank - rank))
                        : 0;
        s->rank = rank + extra;
        for (int i = 0; i < extra; i++)
            s->dims[i] = rand_dim(G);
        for (int i = 0; i < rank; i++) {
            int64_t d = tx.shape.dims[i];
            s->dims[extra + i] = d == 1 && chance(G, 60) ? rand_dim(G) : d;
        }
        if (span_of(s) > G->o.max_elems) {
            for (int i = 0; i < extra; i++)
                s->dims[i] = 1;
            for (int i = 0; i < rank; i++)
                s->dims[extra + i] = tx.shape.dims[i];
        }
        return add(G, op, 1, &x, &at, NULL);
    }
    case IR_OP_SLICE:
        for (int i = 0; i < rank; i++) {
            int64_t n = tx.shape.dims[i];
            uint64_t k = below(G, 100);
            int64_t step = 1 + (int64_t)below(G, 3);
            if (chance(G, 35))
                step = -step;
            if (k < 4)
                step = chance(G, 50) ? INT64_MAX : INT64_MIN;
            at.step[i] = step;
            at.begin[i] = (int64_t)below(G, (uint64_t)(2 * n + 7)) - n - 3;
            at.stop[i] = (int64_t)below(G, (uint64_t)(2 * n + 7)) - n - 3;
            if (chance(G, 8))
                at.begin[i] = chance(G, 50) ? INT64_MIN : INT64_MAX;
            if (chance(G, 8))
                at.stop[i] = chance(G, 50) ? INT64_MIN : INT64_MAX;
        }
        return add(G, op, 1, &x, &at, NULL);
    case IR_OP_PAD: {
        ir_shape s = tx.shape;
        for (int i = 0; i < rank; i++) {
            at.low[i] = (int64_t)below(G, 3);
            at.high[i] = (int64_t)below(G, 3);
            s.dims[i] += at.low[i] + at.high[i];
        }
        if (span_of(&s) > G->o.max_elems)
            for (int i = 0; i < rank; i++)
                at.low[i] = at.high[i] = 0;
        at.value = rand_scalar(G, tx.dtype);
        return add(G, op, 1, &x, &at, NULL);
    }
    case IR_OP_CONCAT: {
        int32_t in[4] = {x};
        int n = 1 + (int)below(G, 3);
        at.axis = (int)below(G, (uint64_t)rank);
        size_t total = count_of(&tx.shape);
        for (int k = 1; k < n; k++) {
            if (chance(G, 15) && total + span_of(&tx.shape) <= G->o.max_elems) {
                in[k] = x; /* concat(x, x) */
                total += count_of(&tx.shape);
                continue;
            }
            ir_type t = tx;
            t.shape.dims[at.axis] = rand_dim(G);
            if (total + span_of(&t.shape) > G->o.max_elems)
                t.shape.dims[at.axis] = 0;
            total += count_of(&t.shape);
            if ((in[k] = get_operand(G, &t)) < 0)
                return -1;
        }
        return add(G, op, n, in, &at, NULL);
    }
    case IR_OP_GATHER: {
        at.axis = (int)below(G, (uint64_t)rank);
        int64_t n = tx.shape.dims[at.axis];
        ir_type ti;
        ti.dtype = chance(G, 50) ? KILN_DTYPE_I32 : KILN_DTYPE_I64;
        int room = G->o.max_rank - (rank - 1);
        ir_shape idx = {0, {0}};
        if (room > 0) {
            idx.rank = (int)below(G, (uint64_t)(room < 2 ? room : 2) + 1);
            for (int i = 0; i < idx.rank; i++)
                idx.dims[i] = rand_dim(G);
        }
        size_t rest = 1; /* the result's elements per index */
        for (int i = 0; i < rank; i++)
            if (i != at.axis)
                rest *= (size_t)tx.shape.dims[i];
        if (rest * span_of(&idx) > G->o.max_elems)
            idx.rank = 0;
        ti.shape = idx;
        int32_t in[2] = {x, -1};
        if (chance(G, 60)) {
            /* Mostly valid indices, some just outside [0, n). */
            size_t c = count_of(&idx);
            int64_t *v = ir_malloc(sizeof(int64_t) * (c ? c : 1));
            void *data = ir_malloc(8 * (c ? c : 1));
            if (!v || !data) {
                ir_free(v);
                ir_free(data);
                return ir_error(KILN_ERR_NOMEM, "ts_random_graph: out of memory"), -1;
            }
            for (size_t i = 0; i < c; i++) {
                v[i] = (int64_t)below(G, (uint64_t)n + 4) - 2;
                ir_store_i64(ti.dtype, data, i, v[i]);
            }
            ir_attrs ca;
            memset(&ca, 0, sizeof ca);
            ca.data = data;
            in[1] = add(G, IR_OP_CONSTANT, 0, NULL, &ca, &ti);
            ir_free(v);
            ir_free(data);
        } else {
            in[1] = get_operand(G, &ti);
        }
        if (in[1] < 0)
            return -1;
        return add(G, op, 2, in, &at, NULL);
    }
    default:
        return ir_error(KILN_ERR_INTERNAL, "ts_random_graph: no builder for %s",
                        ir_ops[op].name), -1;
    }
}

/* A consumer of reduction r = op(x, axes): r broadcast back over x's shape and combined
 * with x, then maybe a second reduction of the same kind of axes over the result. */
static int32_t
gen_reduce_consumer(gen *G, ir_op op, int32_t x, int32_t r, uint32_t axes)
{
    const ir_type tx = *type_of(G, x);
    int32_t rv = r;
    ir_attrs at;
    memset(&at, 0, sizeof at);
    if (type_of(G, r)->dtype != tx.dtype) { /* argmax/argmin: i64 */
        at.to = tx.dtype;
        if ((rv = add(G, IR_OP_CAST, 1, &rv, &at, NULL)) < 0)
            return -1;
        memset(&at, 0, sizeof at);
    }
    if (type_of(G, rv)->shape.rank != tx.shape.rank) { /* no keepdim: reshape to it */
        at.shape = tx.shape;
        for (int i = 0; i < tx.shape.rank; i++)
            if (axes & (1u << i))
                at.shape.dims[i] = 1;
        if ((rv = add(G, IR_OP_RESHAPE, 1, &rv, &at, NULL)) < 0)
            return -1;
        memset(&at, 0, sizeof at);
    }
    static const ir_op fops[] = {IR_OP_SUB, IR_OP_ADD, IR_OP_MUL, IR_OP_DIV, IR_OP_MAX,
                                 IR_OP_MIN, IR_OP_LT, IR_OP_EQ};
    static const ir_op iops[] = {IR_OP_SUB, IR_OP_ADD, IR_OP_MUL, IR_OP_MAX, IR_OP_MIN,
                                 IR_OP_GE};
    bool fl = ir_dtype_is_float(tx.dtype);
    ir_op cop = fl ? fops[below(G, NELEM(fops))] : iops[below(G, NELEM(iops))];
    int32_t in[2] = {x, rv};
    bool other = G->o.reduce_other_pct > 0 && chance(G, (unsigned)G->o.reduce_other_pct);
    if (other && (in[0] = get_operand(G, &tx)) < 0)
        return -1;
    int32_t y = in[0];
    if (cop != IR_OP_SUB && cop != IR_OP_DIV && chance(G, 30)) {
        in[0] = rv;
        in[1] = y;
    }
    int32_t c = add(G, cop, 2, in, NULL, NULL);
    if (c >= 0 && other && chance(G, 50)) { /* a second reader of both */
        int32_t in2[2] = {y, rv};
        ir_op cop2 = fl ? fops[below(G, NELEM(fops))] : iops[below(G, NELEM(iops))];
        if (add(G, cop2, 2, in2, NULL, NULL) < 0)
            return -1;
    }
    if (c < 0 || !chance(G, 50) || type_of(G, c)->dtype == KILN_DTYPE_BOOL)
        return c;
    /* The chain: the same axes (max -> sum, mean -> variance), another reduction op. */
    static const ir_op rops[] = {IR_OP_REDUCE_SUM, IR_OP_REDUCE_MAX, IR_OP_REDUCE_MIN,
                                 IR_OP_REDUCE_MEAN, IR_OP_ARGMAX};
    ir_op rop = rops[below(G, NELEM(rops))];
    if (rop == IR_OP_REDUCE_MEAN && !fl)
        rop = IR_OP_REDUCE_SUM;
    bool needs = rop == IR_OP_REDUCE_MAX || rop == IR_OP_REDUCE_MIN || rop == IR_OP_ARGMAX;
    uint32_t ax = axes;
    if (rop == IR_OP_ARGMAX || op == IR_OP_ARGMAX || op == IR_OP_ARGMIN) {
        ax = 0; /* one axis (the first reduced one; any non-empty one for arg ops) */
        for (int i = 0; i < tx.shape.rank && !ax; i++)
            if ((axes & (1u << i)) && tx.shape.dims[i] > 0)
                ax = 1u << i;
        if (!ax)
            rop = IR_OP_REDUCE_SUM, ax = axes;
    }
    if (needs)
        for (int i = 0; i < tx.shape.rank; i++)
            if ((ax & (1u << i)) && tx.shape.dims[i] == 0)
                rop = IR_OP_REDUCE_SUM;
    at.axes = ax;
    at.keepdim = chance(G, 50);
    return add(G, rop, 1, &c, &at, NULL);
}

static int32_t
gen_reduce(gen *G, ir_op op)
{
    bool arg = op == IR_OP_ARGMAX || op == IR_OP_ARGMIN;
    bool needs = arg || op == IR_OP_REDUCE_MAX || op == IR_OP_REDUCE_MIN;
    ir_trule rule = op == IR_OP_REDUCE_MEAN ? IR_T_FLOAT : IR_T_NUM;
    int32_t x = pick_x(G, rule, arg ? 1 : 0, false);
    if (x < 0)
        return -1;
    const ir_type *t = type_of(G, x);
    int rank = t->shape.rank;
    /* max/min/argmax/argmin may only reduce non-empty axes. */
    unsigned ok = 0;
    for (int i = 0; i < rank; i++)
        if (!needs || t->shape.dims[i] > 0)
            ok |= 1u << i;
    if (arg && !ok) {
        ir_type f;
        f.dtype = t->dtype;
        f.shape = rand_shape(G, 1, true);
        if ((x = make_source(G, &f)) < 0)
            return -1;
        t = type_of(G, x);
        rank = t->shape.rank;
        ok = (1u << rank) - 1;
    }
    ir_attrs at;
    memset(&at, 0, sizeof at);
    if (arg) {
        int c[IR_MAX_RANK], n = 0;
        for (int i = 0; i < rank; i++)
            if (ok & (1u << i))
                c[n++] = i;
        at.axes = 1u << c[below(G, (uint64_t)n)];
    } else if (G->o.full_reduce_pct > 0 && chance(G, (unsigned)G->o.full_reduce_pct)) {
        at.axes = ok;
    } else {
        for (int i = 0; i < rank; i++)
            if ((ok & (1u << i)) && chance(G, 50))
                at.axes |= 1u << i;
    }
    at.keepdim = chance(G, 50);
    int32_t r = add(G, op, 1, &x, &at, NULL);
    if (r < 0 || G->o.reduce_consumer_pct <= 0 || !chance(G, (unsigned)G->o.reduce_consumer_pct))
        return r;
    return gen_reduce_consumer(G, op, x, r, at.axes);
}

static int32_t
gen_matmul(gen *G)
{
    kiln_dtype dt = pick_dtype(G, IR_T_NUM);
    int64_t m = rand_dim(G), k = rand_dim(G), n = rand_dim(G);
    int64_t ba = rand_dim(G), bb = chance(G, 50) ? ba : 1;
    if (chance(G, 50)) {
        int64_t s = ba;
        ba = bb;
        bb = s;
    }
    int maxr = G->o.max_rank < 3 ? G->o.max_rank : 3;
    int ra = 1 + (int)below(G, (uint64_t)maxr), rb = 1 + (int)below(G, (uint64_t)maxr);
    for (;;) {
        ir_type ta = {dt, {0, {0}}}, tb = {dt, {0, {0}}};
        if (ra == 3)
            ta.shape.dims[ta.shape.rank++] = ba;
        if (ra >= 2)
            ta.shape.dims[ta.shape.rank++] = m;
        ta.shape.dims[ta.shape.rank++] = k;
        if (rb == 3)
            tb.shape.dims[tb.shape.rank++] = bb;
        tb.shape.dims[tb.shape.rank++] = k;
        if (rb >= 2)
            tb.shape.dims[tb.shape.rank++] = n;
        int64_t bo = ra == 3 || rb == 3 ? (ba > bb ? ba : bb) : 1; /* span_of the result */
        size_t out = (size_t)(bo > 1 ? bo : 1) * (size_t)(ra >= 2 && m > 1 ? m : 1) *
                     (size_t)(rb >= 2 && n > 1 ? n : 1);
        if (span_of(&ta.shape) > G->o.max_elems || span_of(&tb.shape) > G->o.max_elems ||
            out > G->o.max_elems) {
            /* Halve the largest size and retry; the batch dims together, so that they
             * still broadcast (equal, or one of them 1) */
            int64_t *big = &m;
            if (k > *big) big = &k;
            if (n > *big) big = &n;
            if ((ba > bb ? ba : bb) > *big) {
                ba = ba > 1 ? ba / 2 : ba;
                bb = bb > 1 ? bb / 2 : bb;
                continue;
            }
            *big /= 2;
            continue;
        }
        int32_t in[2] = {get_operand(G, &ta), -1};
        if (in[0] < 0 || (in[1] = get_operand(G, &tb)) < 0)
            return -1;
        return add(G, IR_OP_MATMUL, 2, in, NULL, NULL);
    }
}

static int32_t
gen_op(gen *G, ir_op op)
{
    switch (ir_ops[op].kind) {
    case IR_KIND_SOURCE:
        return gen_source(G, op);
    case IR_KIND_UNARY: {
        int32_t x = pick_x(G, ir_ops[op].trule, 0, false);
        return x < 0 ? -1 : add(G, op, 1, &x, NULL, NULL);
    }
    case IR_KIND_BINARY:
        return gen_binary(G, op);
    case IR_KIND_TERNARY:
        return gen_ternary(G, op);
    case IR_KIND_CAST: {
        int32_t x = pick_x(G, IR_T_ANY, 0, false);
        ir_attrs at;
        memset(&at, 0, sizeof at);
        at.to = pick_dtype(G, IR_T_ANY);
        return x < 0 ? -1 : add(G, op, 1, &x, &at, NULL);
    }
    case IR_KIND_MOVE:
        return gen_move(G, op);
    case IR_KIND_REDUCE:
        return gen_reduce(G, op);
    case IR_KIND_MATMUL:
        return gen_matmul(G);
    }
    return -1;
}

/* ---- the graph ---------------------------------------------------------------------------- */

static bool
build(gen *G)
{
    const ts_randgraph_opts *o = &G->o;
    ir_op ops[IR_OP_COUNT];
    int nops = 0;
    for (int op = 0; op < IR_OP_COUNT; op++) {
        if (op == IR_OP_INPUT)
            continue;
        if (o->kinds && !(o->kinds & (1u << ir_ops[op].kind)))
            continue;
        if (o->ops && !o->ops[op])
            continue;
        ops[nops++] = (ir_op)op;
    }
    if (nops == 0 && o->require_op < 0)
        return ir_error(KILN_ERR_INVALID_ARG, "ts_random_graph: no op is enabled"), false;

    G->base = rand_shape(G, 0, false);
    int nin = 1 + (int)below(G, (uint64_t)o->max_inputs);
    for (int i = 0; i < nin; i++) {
        char buf[64];
        ir_type t;
        t.dtype = pick_dtype(G, chance(G, 80) ? IR_T_NUM : IR_T_ANY);
        t.shape = i == 0 ? G->base : bcast_partner(G, &G->base);
        if (ir_graph_add_input(G->g, value_name(G, buf, sizeof buf, "in", i), &t) < 0)
            return false;
    }
    int n = o->min_nodes + (int)below(G, (uint64_t)(o->max_nodes - o->min_nodes + 1));
    if (n == 0 && o->require_op >= 0)
        n = 1;
    for (int i = 0; i < n; i++) {
        if (nops == 0 && i > 0)
            break;
        ir_op op = i == 0 && o->require_op >= 0 ? (ir_op)o->require_op
                                                 : ops[below(G, (uint64_t)nops)];
        if (gen_op(G, op) < 0)
            return false;
    }

    int nout = 1 + (int)below(G, (uint64_t)o->max_outputs);
    for (int i = 0; i < nout; i++) {
        int32_t nn = G->g->nnodes;
        int32_t id = chance(G, 70) ? nn - 1 - (int32_t)below(G, nn < 3 ? (uint64_t)nn : 3)
                                   : (int32_t)below(G, (uint64_t)nn);
        const char *vn = G->g->nodes[id].name;
        char buf[64];
        const char *name = vn && chance(G, 50) ? vn : value_name(G, buf, sizeof buf, "out", i);
        bool dup = false;
        for (int32_t j = 0; j < G->g->noutputs; j++)
            dup |= strcmp(G->g->outputs[j].name, name) == 0;
        if (dup)
            name = value_name(G, buf, sizeof buf, "out", i);
        if (ir_graph_add_output(G->g, name, id))
            return false;
    }
    return ir_graph_verify(G->g) == KILN_OK;
}

kiln_graph *
ts_random_graph(uint64_t seed, const ts_randgraph_opts *opts)
{
    gen G;
    memset(&G, 0, sizeof G);
    ts_rng_seed(&G.r, seed);
    if (opts)
        G.o = *opts;
    else
        ts_randgraph_defaults(&G.o);
    if (G.o.max_rank < 1 || G.o.max_rank > IR_MAX_RANK || G.o.max_dim < 1 ||
        G.o.max_elems < 1 || G.o.max_inputs < 1 || G.o.max_outputs < 1 ||
        G.o.min_nodes < 0 || G.o.max_nodes < G.o.min_nodes ||
        G.o.require_op >= IR_OP_COUNT || G.o.require_op == IR_OP_INPUT) {
        ir_error(KILN_ERR_INVALID_ARG, "ts_random_graph: invalid options");
        return NULL;
    }
    char name[64];
    snprintf(name, sizeof name, "rand%llu", (unsigned long long)(seed % 100000));
    if (!G.o.plain_names && chance(&G, 10))
        snprintf(name, sizeof name, "rand graph %llu", (unsigned long long)(seed % 1000));
    G.g = ir_graph_new(name);
    if (!G.g)
        return NULL;
    if (!build(&G)) {
        kiln_graph_free(G.g);
        return NULL;
    }
    return G.g;
}
