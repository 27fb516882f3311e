/* check_parse.c — the text format: printer, parser, DOT.
 *
 * Oracles: round trips are checked against the graph before printing (structural
 * equality, hash, names, constant bytes); scalar spellings against values worked out by
 * hand (the shortest decimal that reads back to the same float); error positions against
 * line:column computed here from a marker in the text (code points, 1-based); bit-exact
 * constants against the bit patterns the test put in. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "randgraph.h"
#include "support.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static uint64_t
base_seed(void)
{
    return ts_base_seed(0x6b696c6eull);
}

static char *
print_str(const kiln_graph *g)
{
    char *s = kiln_graph_to_string(g);
    ck_assert_msg(s != NULL, "kiln_graph_to_string failed: %s", kiln_errmsg());
    return s;
}

static char *
dot_str(const kiln_graph *g)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert(f != NULL);
    kiln_status st = kiln_graph_print_dot(g, f);
    ck_assert(fclose(f) == 0);
    ck_assert_msg(st == KILN_OK, "print_dot: %s", kiln_errmsg());
    return buf;
}

static bool
str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Two graphs are the same graph with the same names. */
static void
assert_same_graph(const kiln_graph *a, const kiln_graph *b, const char *what)
{
    ck_assert_msg(ir_graph_equal(a, b), "%s: graphs differ after the round trip", what);
    ck_assert_msg(ir_graph_hash(a, false) == ir_graph_hash(b, false), "%s: hash differs", what);
    ck_assert_msg(ir_graph_hash(a, true) == ir_graph_hash(b, true), "%s: generic hash differs",
                  what);
    ck_assert_msg(kiln_graph_equal(a, b) == 1, "%s: kiln_graph_equal", what);
    ck_assert_msg(strcmp(a->name, b->name) == 0, "%s: graph name '%s' vs '%s'", what, a->name,
                  b->name);
    for (int32_t i = 0; i < a->nnodes; i++)
        ck_assert_msg(str_eq(a->nodes[i].name, b->nodes[i].name), "%s: node %d name", what,
                      (int)i);
    for (int32_t i = 0; i < a->noutputs; i++)
        ck_assert_msg(strcmp(a->outputs[i].name, b->outputs[i].name) == 0,
                      "%s: output %d name '%s' vs '%s'", what, (int)i, a->outputs[i].name,
                      b->outputs[i].name);
}

/* print(g), parse it, print again: the texts and the graphs must agree.  Returns the
 * first text (caller frees). */
static char *
check_roundtrip(const kiln_graph *g, const char *what)
{
    char *s1 = print_str(g);
    kiln_graph *g2 = NULL;
    kiln_status st = ir_parse(s1, strlen(s1), what, &g2);
    ck_assert_msg(st == KILN_OK, "%s: printed text does not parse: %s\n%s", what, kiln_errmsg(),
                  s1);
    char *s2 = print_str(g2);
    ck_assert_msg(strcmp(s1, s2) == 0, "%s: print(parse(print(g))) != print(g)\n--- first\n%s--- second\n%s",
                  what, s1, s2);
    assert_same_graph(g, g2, what);
    free(s2);
    kiln_graph_free(g2);
    return s1;
}

/* Every .kiln file of a source directory, as malloc'd relative paths; NULL-terminated. */
static char **
list_kiln(const char *reldir, int *count)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", KILN_SOURCE_DIR, reldir);
    DIR *d = opendir(path);
    ck_assert_msg(d != NULL, "cannot open %s", path);
    char **v = calloc(256, sizeof *v);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".kiln") == 0 && n < 255) {
            v[n] = malloc(strlen(reldir) + l + 2);
            sprintf(v[n], "%s/%s", reldir, e->d_name);
            n++;
        }
    }
    closedir(d);
    *count = n;
    return v;
}

static void
free_list(char **v)
{
    for (int i = 0; v[i]; i++)
        free(v[i]);
    free(v);
}

static kiln_graph *
parse_file(const char *rel, char **text_out)
{
    size_t len;
    char *text = ts_read_source_file(rel, &len);
    kiln_graph *g = NULL;
    kiln_status st = ir_parse(text, len, rel, &g);
    ck_assert_msg(st == KILN_OK, "%s: %s", rel, kiln_errmsg());
    if (text_out)
        *text_out = text;
    else
        free(text);
    return g;
}

/* ---- golden and bench files -------------------------------------------------------------- */

START_TEST(test_golden_roundtrip)
{
    bool seen[IR_OP_COUNT] = {false};
    int ngolden, nbench;
    char **golden = list_kiln("tests/golden", &ngolden);
    char **bench = list_kiln("bench", &nbench);
    ck_assert_msg(ngolden >= 8, "only %d golden files", ngolden);
    for (int i = 0; i < ngolden; i++) {
        kiln_graph *g = parse_file(golden[i], NULL);
        for (int32_t k = 0; k < g->nnodes; k++)
            seen[g->nodes[k].op] = true;
        free(check_roundtrip(g, golden[i]));
        kiln_graph_free(g);
    }
    for (int op = 0; op < IR_OP_COUNT; op++)
        ck_assert_msg(seen[op], "no golden file uses op %s", ir_ops[op].name);

    /* Every workload of shared/bench-suite.md, at its default size. */
    static const struct {
        const char *file;
        const char *in0;
        const char *type0;
    } wl[] = {
        {"bench/chain.kiln", "x", "f32[16777216]"},   {"bench/gelu.kiln", "x", "f32[16777216]"},
        {"bench/softmax.kiln", "x", "f32[4096,1024]"}, {"bench/layernorm.kiln", "x", "f32[4096,1024]"},
        {"bench/bcast.kiln", "x", "f32[4096,1024]"},   {"bench/l2norm.kiln", "x", "f32[16777216]"},
        {"bench/small.kiln", "x", "f32[1024]"},        {"bench/mlp.kiln", "x", "f32[256,1024]"},
    };
    ck_assert_int_ge(nbench, 8);
    for (size_t i = 0; i < sizeof wl / sizeof wl[0]; i++) {
        kiln_graph *g = parse_file(wl[i].file, NULL);
        char tb[IR_TYPE_STR_MAX];
        const ir_node *x = &g->nodes[g->inputs[0]];
        ck_assert_str_eq(x->name, wl[i].in0);
        ck_assert_str_eq(ir_type_str(&x->type, tb, sizeof tb), wl[i].type0);
        ck_assert_int_eq(g->noutputs, 1);
        kiln_graph_free(g);
    }
    for (int i = 0; i < nbench; i++) {
        kiln_graph *g = parse_file(bench[i], NULL);
        free(check_roundtrip(g, bench[i]));
        kiln_graph_free(g);
    }
    free_list(golden);
    free_list(bench);
}
END_TEST

/* The printed form of a hand-written file: every type and attribute explicit. */
START_TEST(test_canonical_form)
{
    const char *text = "graph t(x: f32[2,3]) -> (s: f32[2,1] = r, x: f32[2,3]) {\n"
                       "  r = reduce_sum(x, axes=[-1], keepdim=true) # a comment\n"
                       "  %5 = slice(x, step=[1,-1])\n"
                       "  n = neg(%5)\n"
                       "}\n";
    kiln_graph *g = ts_parse(text);
    char *s = print_str(g);
    ck_assert_str_eq(s, "graph t(x: f32[2,3]) -> (s: f32[2,1] = r, x: f32[2,3]) {\n"
                        "  r = reduce_sum(x, axes=[1], keepdim=true) : f32[2,1]\n"
                        "  %2 = slice(x, start=[0,2], stop=[2,-4], step=[1,-1]) : f32[2,3]\n"
                        "  n = neg(%2) : f32[2,3]\n"
                        "}\n");
    /* The label is text only: the node is unnamed. */
    ck_assert_ptr_null(g->nodes[2].name);
    free(s);
    kiln_graph_free(g);
}
END_TEST

/* Names the API allows but the text must quote: they survive the round trip exactly. */
START_TEST(test_api_names)
{
    kiln_graph *g = ir_graph_new("");
    ir_type t = {KILN_DTYPE_F32, {1, {2}}};
    int32_t a = ir_graph_add_input(g, "a\xff b", &t);
    int32_t b = ir_graph_add_input(g, "%0", &t);
    ck_assert(a >= 0 && b >= 0);
    int32_t in[2] = {a, b};
    int32_t c = ir_graph_add_node(g, "test", IR_OP_ADD, 2, in, NULL, NULL, "q\"\\\n\t");
    int32_t d = ir_graph_add_node(g, "test", IR_OP_NEG, 1, &c, NULL, NULL, NULL);
    int32_t e = ir_graph_add_node(g, "test", IR_OP_ABS, 1, &d, NULL, NULL, "caf\xc3\xa9");
    ck_assert(c >= 0 && d >= 0 && e >= 0);
    ck_assert_int_eq(ir_graph_add_output(g, "x y", d), KILN_OK);
    ck_assert_int_eq(ir_graph_add_output(g, "caf\xc3\xa9", e), KILN_OK);
    ck_assert_int_eq(ir_graph_add_output(g, "in", a), KILN_OK);
    char *s = check_roundtrip(g, "api names");
    ck_assert_str_eq(s, "graph \"\"(\"a\\xff b\": f32[2], \"%0\": f32[2]) -> (\"x y\": f32[2] = %3, "
                        "\"caf\\xc3\\xa9\": f32[2] = \"caf\\xc3\\xa9\", in: f32[2] = \"a\\xff b\") {\n"
                        "  \"q\\\"\\\\\\x0a\\x09\" = add(\"a\\xff b\", \"%0\") : f32[2]\n"
                        "  %3 = neg(\"q\\\"\\\\\\x0a\\x09\") : f32[2]\n"
                        "  \"caf\\xc3\\xa9\" = abs(%3) : f32[2]\n"
                        "}\n");
    free(s);
    /* DOT keeps valid UTF-8, escapes what is not and every control byte. */
    char *dot = dot_str(g);
    ck_assert(strstr(dot, "label=\"a\\\\xff b\\ninput") != NULL);
    ck_assert(strstr(dot, "label=\"caf\xc3\xa9\\nabs") != NULL);
    ck_assert(strstr(dot, "label=\"q\\\"\\\\\\\\x0a\\\\x09\\nadd") != NULL);
    ck_assert(strstr(dot, "digraph \"\" {") != NULL);
    free(dot);
    kiln_graph_free(g);
}
END_TEST

/* Capture may declare an input after other nodes.  The text lists inputs first, so the
 * parsed graph is renumbered; labels follow the parse order, so the text still round-trips. */
START_TEST(test_interleaved_inputs)
{
    kiln_graph *g = ir_graph_new("cap");
    ir_type t = {KILN_DTYPE_F32, {1, {3}}};
    ir_attrs fa;
    memset(&fa, 0, sizeof fa);
    fa.value = ir_scalar_from_f64(KILN_DTYPE_F32, 2.0);
    int32_t f = ir_graph_add_node(g, "test", IR_OP_FULL, 0, NULL, &fa, &t, NULL); /* 0 */
    int32_t x = ir_graph_add_input(g, "x", &t);                                 /* 1 */
    int32_t in[2] = {f, x};
    int32_t a = ir_graph_add_node(g, "test", IR_OP_MUL, 2, in, NULL, NULL, NULL); /* 2 */
    int32_t y = ir_graph_add_input(g, "y", &t);                                 /* 3 */
    int32_t in2[2] = {a, y};
    int32_t b = ir_graph_add_node(g, "test", IR_OP_ADD, 2, in2, NULL, NULL, NULL); /* 4 */
    ck_assert(f == 0 && x == 1 && a == 2 && y == 3 && b == 4);
    ck_assert_int_eq(ir_graph_add_output(g, "out0", b), KILN_OK);
    const char *want = "graph cap(x: f32[3], y: f32[3]) -> (out0: f32[3] = %4) {\n"
                       "  %2 = full(value=2) : f32[3]\n"
                       "  %3 = mul(%2, x) : f32[3]\n"
                       "  %4 = add(%3, y) : f32[3]\n"
                       "}\n";
    char *s1 = print_str(g);
    ck_assert_str_eq(s1, want);
    kiln_graph *g2 = ts_parse(s1);
    char *s2 = print_str(g2);
    ck_assert_str_eq(s2, want);
    /* Same computation, renumbered: node 2 of the parsed graph is the full. */
    ck_assert_int_eq(g2->nodes[2].op, IR_OP_FULL);
    ck_assert_int_eq(g2->outputs[0].node, 4);
    char *dot = dot_str(g);
    ck_assert(strstr(dot, "n0 [label=\"%2\\nfull") != NULL);
    free(dot);
    free(s1);
    free(s2);
    kiln_graph_free(g2);
    kiln_graph_free(g);
}
END_TEST

/* ---- random graphs -------------------------------------------------------------------------- */

START_TEST(test_random_roundtrip)
{
    uint64_t base = base_seed();
    bool seen[IR_OP_COUNT] = {false};
    int b64 = 0, quoted = 0, labels = 0, nanbits = 0, negzero = 0, zerodim = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        uint64_t seed = base + i;
        char what[96];
        snprintf(what, sizeof what, "random graph seed %" PRIu64 " (KILN_TEST_SEED=%" PRIu64 ")",
                 seed, seed);
        kiln_graph *g = ts_random_graph(seed, NULL);
        ck_assert_msg(g != NULL, "%s: generator failed: %s", what, kiln_errmsg());
        for (int32_t k = 0; k < g->nnodes; k++)
            seen[g->nodes[k].op] = true;
        char *s = check_roundtrip(g, what);
        b64 += strstr(s, "b64\"") != NULL;
        quoted += strchr(s, '"') != NULL;
        labels += strstr(s, " %") != NULL;
        nanbits += strstr(s, "nan:0x") != NULL;
        negzero += strstr(s, "-0,") != NULL || strstr(s, "-0]") != NULL ||
                   strstr(s, "=-0,") != NULL || strstr(s, "=-0)") != NULL;
        zerodim += strstr(s, "[0") != NULL || strstr(s, ",0]") != NULL || strstr(s, ",0,") != NULL;
        free(s);
        kiln_graph_free(g);
    }
    /* The generator reaches every op and every feature the format has. */
    for (int op = 0; op < IR_OP_COUNT; op++)
        ck_assert_msg(seen[op], "1000 random graphs never used op %s", ir_ops[op].name);
    ck_assert_int_gt(b64, 0);
    ck_assert_int_gt(quoted, 0);
    ck_assert_int_gt(labels, 0);
    ck_assert_int_gt(nanbits, 0);
    ck_assert_int_gt(negzero, 0);
    ck_assert_int_gt(zerodim, 0);
}
END_TEST

/* The element cap holds for every value, also where the fuzzer's options make empty
 * values common: with a zero dim in the base shape, an input broadcast against it once
 * had 23 million elements, and a reduction over the empty axis could have had more. */
START_TEST(test_random_cap)
{
    uint64_t base = base_seed();
    for (uint64_t i = 0; i < 1500; i++) {
        ts_randgraph_opts o;
        ts_randgraph_defaults(&o);
        o.max_rank = 8;
        o.max_dim = 40;
        o.max_elems = 4096;
        o.zero_dim_pct = 15;
        o.full_reduce_pct = 30;
        o.reduce_consumer_pct = 50;
        o.max_nodes = 24;
        uint64_t seed = base + 300000 + i;
        kiln_graph *g = ts_random_graph(seed, &o);
        ck_assert_msg(g != NULL, "seed %" PRIu64 ": %s", seed, kiln_errmsg());
        for (int32_t k = 0; k < g->nnodes; k++)
            ck_assert_msg(ir_shape_count(&g->nodes[k].type.shape) <= 4096,
                          "seed %" PRIu64 ": node %d has %lld elements", seed, (int)k,
                          (long long)ir_shape_count(&g->nodes[k].type.shape));
        kiln_graph_free(g);
    }
}
END_TEST

/* Each op required once per seed, and the JIT options. */
START_TEST(test_random_options)
{
    uint64_t base = base_seed();
    for (int op = 0; op < IR_OP_COUNT; op++) {
        if (op == IR_OP_INPUT)
            continue;
        for (uint64_t i = 0; i < 4; i++) {
            ts_randgraph_opts o;
            ts_randgraph_defaults(&o);
            o.require_op = op;
            o.max_nodes = 3;
            uint64_t seed = base + 7919 * (uint64_t)op + i;
            kiln_graph *g = ts_random_graph(seed, &o);
            ck_assert_msg(g != NULL, "seed %" PRIu64 " require %s: %s", seed, ir_ops[op].name,
                          kiln_errmsg());
            bool has = false;
            for (int32_t k = 0; k < g->nnodes; k++)
                has |= g->nodes[k].op == (ir_op)op;
            ck_assert_msg(has, "seed %" PRIu64 ": required op %s missing", seed, ir_ops[op].name);
            free(check_roundtrip(g, ir_ops[op].name));
            kiln_graph_free(g);
        }
    }
    for (uint64_t i = 0; i < 200; i++) {
        ts_randgraph_opts o;
        ts_randgraph_jit_defaults(&o);
        uint64_t seed = base + 100000 + i;
        kiln_graph *g = ts_random_graph(seed, &o);
        ck_assert_msg(g != NULL, "jit seed %" PRIu64 ": %s", seed, kiln_errmsg());
        for (int32_t k = 0; k < g->nnodes; k++) {
            const ir_node *nd = &g->nodes[k];
            ir_kind kind = ir_ops[nd->op].kind;
            /* Only inputs, operand sources and elementwise/movement ops. */
            ck_assert_msg(nd->op == IR_OP_INPUT || nd->op == IR_OP_FULL ||
                              nd->op == IR_OP_CONSTANT || nd->op == IR_OP_ARANGE ||
                              ir_op_is_elementwise(nd->op) || kind == IR_KIND_MOVE,
                          "jit seed %" PRIu64 ": op %s", seed, ir_ops[nd->op].name);
            ck_assert_msg(ir_shape_count(&nd->type.shape) <= 64, "jit seed %" PRIu64 ": size",
                          seed);
            ck_assert(nd->type.shape.rank <= 3 || nd->op == IR_OP_GATHER ||
                      nd->op == IR_OP_EXPAND || nd->op == IR_OP_RESHAPE);
            if (nd->name)
                for (const char *c = nd->name; *c; c++)
                    ck_assert(*c == '_' || (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z'));
        }
        free(check_roundtrip(g, "jit options"));
        kiln_graph_free(g);
    }
    /* Same seed, same graph. */
    kiln_graph *a = ts_random_graph(base, NULL), *b = ts_random_graph(base, NULL);
    char *sa = print_str(a), *sb = print_str(b);
    ck_assert_str_eq(sa, sb);
    free(sa);
    free(sb);
    kiln_graph_free(a);
    kiln_graph_free(b);
}
END_TEST

/* ---- scalars and constants, bit-exact ---------------------------------------------------- */

START_TEST(test_print_scalar)
{
    static const struct {
        uint32_t bits;
        const char *text;
    } f32s[] = {
        {0x3dcccccd, "0.1"},          {0x3eaaaaab, "0.33333334"},
        {0x80000000, "-0"},           {0x00000000, "0"},
        {0x7f7fffff, "3.4028235e+38"}, {0x00000001, "1e-45"},
        {0x00800000, "1.1754944e-38"}, {0x4b800000, "16777216"},
        {0x7f800000, "inf"},          {0xff800000, "-inf"},
        {0x7fc00000, "nan"},          {0x7fc00001, "nan:0x7fc00001"},
        {0xffc00000, "nan:0xffc00000"}, {0x7f800001, "nan:0x7f800001"},
        {0x3f800000, "1"},            {0xc0490fdb, "-3.1415927"},
    };
    char buf[64];
    for (size_t i = 0; i < sizeof f32s / sizeof f32s[0]; i++) {
        int n = ir_print_scalar(buf, sizeof buf, KILN_DTYPE_F32, &f32s[i].bits);
        ck_assert_msg(strcmp(buf, f32s[i].text) == 0, "f32 0x%08x: got %s, want %s",
                      f32s[i].bits, buf, f32s[i].text);
        ck_assert_int_eq(n, (int)strlen(f32s[i].text));
    }
    static const struct {
        uint64_t bits;
        const char *text;
    } f64s[] = {
        {0x3fb999999999999aull, "0.1"},
        {0x3fd5555555555555ull, "0.3333333333333333"},
        {0x7fefffffffffffffull, "1.7976931348623157e+308"},
        {0x0000000000000001ull, "5e-324"},
        {0x4202a05f20000000ull, "1e+10"},
        {0x8000000000000000ull, "-0"},
        {0x7ff8000000000000ull, "nan"},
        {0xfff8000000000000ull, "nan:0xfff8000000000000"},
        {0x7ff0000000000001ull, "nan:0x7ff0000000000001"},
        {0xfff0000000000000ull, "-inf"},
    };
    for (size_t i = 0; i < sizeof f64s / sizeof f64s[0]; i++) {
        ir_print_scalar(buf, sizeof buf, KILN_DTYPE_F64, &f64s[i].bits);
        ck_assert_msg(strcmp(buf, f64s[i].text) == 0, "f64 0x%016" PRIx64 ": got %s, want %s",
                      f64s[i].bits, buf, f64s[i].text);
    }
    int64_t l = INT64_MIN;
    ir_print_scalar(buf, sizeof buf, KILN_DTYPE_I64, &l);
    ck_assert_str_eq(buf, "-9223372036854775808");
    int32_t w = INT32_MAX;
    ir_print_scalar(buf, sizeof buf, KILN_DTYPE_I32, &w);
    ck_assert_str_eq(buf, "2147483647");
    uint8_t b = 1;
    ir_print_scalar(buf, sizeof buf, KILN_DTYPE_BOOL, &b);
    ck_assert_str_eq(buf, "true");
    /* A short buffer truncates like snprintf and reports the full length. */
    float third = 1.0f / 3.0f;
    char tiny[4];
    ck_assert_int_eq(ir_print_scalar(tiny, sizeof tiny, KILN_DTYPE_F32, &third), 10);
    ck_assert_str_eq(tiny, "0.3");
}
END_TEST

static const uint32_t f32_bits[] = {
    0x00000000, 0x80000000, 0x7fc00000, 0x7fc00001, 0xffc00000, 0xffffffff, 0x7f800001,
    0x7fbfffff, 0x7f800000, 0xff800000, 0x00000001, 0x80000001, 0x007fffff, 0x00800000,
    0x7f7fffff, 0xff7fffff, 0x3dcccccd, 0x4b800001, 0x33800000, 0x3f7fffff,
};
static const uint64_t f64_bits[] = {
    0x0000000000000000ull, 0x8000000000000000ull, 0x7ff8000000000000ull,
    0x7ff8000000000001ull, 0xfff8000000000000ull, 0xffffffffffffffffull,
    0x7ff0000000000001ull, 0x7ff7ffffffffffffull, 0x7ff0000000000000ull,
    0xfff0000000000000ull, 0x0000000000000001ull, 0x800fffffffffffffull,
    0x0010000000000000ull, 0x7fefffffffffffffull, 0xffefffffffffffffull,
    0x3fb999999999999aull, 0x3ca0000000000000ull, 0x3fefffffffffffffull,
};

/* Constants of `count` elements cycling through `bits` (size bytes each), printed and
 * parsed back: the bytes must be identical. */
static void
check_constant_bits(kiln_dtype t, const void *bits, size_t nbits, size_t count)
{
    size_t size = kiln_dtype_size(t);
    unsigned char *data = malloc(count * size);
    for (size_t i = 0; i < count; i++)
        memcpy(data + i * size, (const char *)bits + (i % nbits) * size, size);
    kiln_graph *g = ir_graph_new("bits");
    ir_type ty = {t, {1, {(int64_t)count}}};
    ir_attrs at;
    memset(&at, 0, sizeof at);
    at.data = data;
    int32_t id = ir_graph_add_node(g, "test", IR_OP_CONSTANT, 0, NULL, &at, &ty, "c");
    ck_assert_int_ge(id, 0);
    /* The same patterns as fill values. */
    for (size_t i = 0; i < nbits; i++) {
        ir_attrs fa;
        memset(&fa, 0, sizeof fa);
        memcpy(fa.value.bytes, (const char *)bits + i * size, size);
        ir_type st = {t, {0, {0}}};
        ck_assert_int_ge(ir_graph_add_node(g, "test", IR_OP_FULL, 0, NULL, &fa, &st, NULL), 0);
    }
    ck_assert_int_eq(ir_graph_add_output(g, "c", id), KILN_OK);
    char *s = print_str(g);
    ck_assert_msg((strstr(s, "b64\"") != NULL) == (count > 64), "form for %zu elements:\n%s",
                  count, s);
    kiln_graph *g2 = NULL;
    ck_assert_msg(ir_parse(s, strlen(s), NULL, &g2) == KILN_OK, "%s\n%s", kiln_errmsg(), s);
    ck_assert_msg(memcmp(g2->nodes[0].at->data, data, count * size) == 0,
                  "%s constant bytes changed:\n%s", kiln_dtype_name(t), s);
    for (size_t i = 0; i < nbits; i++)
        ck_assert_msg(memcmp(g2->nodes[1 + i].at->value.bytes, (const char *)bits + i * size,
                             size) == 0,
                      "%s full value %zu changed:\n%s", kiln_dtype_name(t), i, s);
    free(s);
    kiln_graph_free(g2);
    kiln_graph_free(g);
    free(data);
}

START_TEST(test_constants_bitexact)
{
    size_t n32 = sizeof f32_bits / sizeof f32_bits[0], n64 = sizeof f64_bits / sizeof f64_bits[0];
    static const int32_t i32s[] = {INT32_MIN, INT32_MAX, 0, -1, 1};
    static const int64_t i64s[] = {INT64_MIN, INT64_MAX, 0, -1, 1, INT64_MIN + 1};
    static const uint8_t bools[] = {0, 1, 1, 0};
    for (int big = 0; big < 2; big++) {
        check_constant_bits(KILN_DTYPE_F32, f32_bits, n32, big ? 100 : n32);
        check_constant_bits(KILN_DTYPE_F64, f64_bits, n64, big ? 65 : n64);
        check_constant_bits(KILN_DTYPE_I32, i32s, 5, big ? 70 : 5);
        check_constant_bits(KILN_DTYPE_I64, i64s, 6, big ? 99 : 6);
        check_constant_bits(KILN_DTYPE_BOOL, bools, 4, big ? 67 : 4);
    }
    /* Exactly 64 elements is still a list; 65 is base64 (checked inside). */
    check_constant_bits(KILN_DTYPE_F32, f32_bits, n32, 64);
    check_constant_bits(KILN_DTYPE_F32, f32_bits, n32, 65);
    /* Base64 lengths of every remainder mod 3 (padding "==", "=", none). */
    for (size_t c = 66; c <= 68; c++)
        check_constant_bits(KILN_DTYPE_BOOL, bools, 4, c);

    /* Literals as written: hex floats, strtod forms, extremes read to the right bits. */
    kiln_graph *g = ts_parse(
        "graph l() -> () {\n"
        "  a = constant(data=[0x1p-149, 1.401298464324817e-45, 3.4028235e38, -0.0, 1e-46]) : f32[5]\n"
        "  b = constant(data=[0x1.fffffffffffffp+1023, 4.9406564584124654e-324, .5, 2e-324]) : f64[4]\n"
        "  c = arange(start=-9223372036854775808, delta=9223372036854775807) : i64[2]\n"
        "}\n");
    const uint32_t want32[] = {0x00000001, 0x00000001, 0x7f7fffff, 0x80000000, 0x00000000};
    const uint64_t want64[] = {0x7fefffffffffffffull, 1, 0x3fe0000000000000ull, 0};
    ck_assert(memcmp(g->nodes[0].at->data, want32, sizeof want32) == 0);
    ck_assert(memcmp(g->nodes[1].at->data, want64, sizeof want64) == 0);
    int64_t s, d;
    memcpy(&s, g->nodes[2].at->start.bytes, 8);
    memcpy(&d, g->nodes[2].at->delta.bytes, 8);
    ck_assert(s == INT64_MIN && d == INT64_MAX);
    kiln_graph_free(g);
}
END_TEST

/* ---- defaults and normalisation ------------------------------------------------------------ */

START_TEST(test_defaults)
{
    kiln_graph *g = ts_parse(
        "graph d(x: f32[2,3,5], v: i32[4]) -> () {\n"
        "  r = reduce_max(x, axes=[-1, 0])\n"               /* 2 */
        "  s = slice(v)\n"                                  /* 3 */
        "  t = slice(v, step=[-2])\n"                       /* 4 */
        "  u = slice(x, start=[1,-1,0], step=[1,-1,3])\n"   /* 5 */
        "  p = pad(v, low=[1], high=[0])\n"                 /* 6 */
        "  a = arange() : f32[3]\n"                         /* 7 */
        "  c = concat(x, x, axis=-3)\n"                     /* 8 */
        "  gi = gather(x, v, axis=-2)\n"                    /* 9 */
        "}\n");
    const ir_node *n = g->nodes;
    ck_assert_uint_eq(n[2].at->axes, (1u << 0) | (1u << 2));
    ck_assert(!n[2].at->keepdim);
    ck_assert_int_eq(n[2].type.shape.rank, 1);
    /* slice(v): start 0, stop 4, step 1 -> all 4 elements. */
    ck_assert(n[3].at->begin[0] == 0 && n[3].at->stop[0] == 4 && n[3].at->step[0] == 1);
    ck_assert_int_eq(n[3].type.shape.dims[0], 4);
    /* slice(v, step=-2): Python v[::-2] of 4 elements is v[3], v[1]. */
    ck_assert(n[4].at->begin[0] == 3 && n[4].at->stop[0] == -5 && n[4].at->step[0] == -2);
    ck_assert_int_eq(n[4].type.shape.dims[0], 2);
    /* x[1:, -1::-1, 0::3] of [2,3,5]: sizes 1, 3, 2. */
    ck_assert(n[5].at->stop[0] == 2 && n[5].at->stop[1] == -4 && n[5].at->stop[2] == 5);
    ck_assert(n[5].type.shape.dims[0] == 1 && n[5].type.shape.dims[1] == 3 &&
              n[5].type.shape.dims[2] == 2);
    int32_t zero = 0;
    ck_assert(memcmp(n[6].at->value.bytes, &zero, 4) == 0);
    float f0, f1;
    memcpy(&f0, n[7].at->start.bytes, 4);
    memcpy(&f1, n[7].at->delta.bytes, 4);
    ck_assert(f0 == 0.0f && f1 == 1.0f);
    ck_assert_int_eq(n[8].at->axis, 0);
    ck_assert_int_eq(n[9].at->axis, 1);
    kiln_graph_free(g);
}
END_TEST

/* ---- errors --------------------------------------------------------------------------------- */

/* The line:col (code points, 1-based) of byte offset `off` in text. */
static void
line_col(const char *text, size_t off, size_t *line, size_t *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '\n') {
            (*line)++;
            *col = 1;
        } else if ((c & 0xc0) != 0x80) {
            (*col)++;
        }
    }
}

#define HDR "graph g(x: f32[4], i: i32[4], b: bool[4], m: f32[2,3]) -> (y: f32[4]) {\n"
#define SRC "graph g() -> () {\n"

typedef struct errcase {
    const char *text;
    kiln_status code;
    const char *at; /* the error points at the first occurrence of this (NULL: the end) */
    int off;        /* ... plus this many bytes */
    const char *needle;
} errcase;

static const errcase errcases[] = {
    /* syntax */
    {"", KILN_ERR_PARSE, NULL, 0, "expected 'graph', got end of input"},
    {"# only a comment\n", KILN_ERR_PARSE, NULL, 0, "expected 'graph', got end of input"},
    {"graph g(", KILN_ERR_PARSE, NULL, 0, "expected an input name, got end of input"},
    {"grap g() -> () {}", KILN_ERR_PARSE, "grap", 0, "expected 'graph', got 'grap'"},
    {"graph g() => () {}", KILN_ERR_PARSE, "=>", 0, "expected '->', got '='"},
    {"graph g(x f32[4]) -> () {}", KILN_ERR_PARSE, "f32", 0, "expected ':', got 'f32'"},
    {"graph g(x: f32[4) -> () {}", KILN_ERR_PARSE, ")", 0, "expected ']', got ')'"},
    {"graph g(x: f32[a]) -> () {}", KILN_ERR_PARSE, "a]", 0, "expected a dimension (an integer), got 'a'"},
    {"graph g(x: [4]) -> () {}", KILN_ERR_PARSE, "[4]", 0, "expected a type (a dtype and dims, e.g. f32[4]), got '['"},
    {"graph g() -> () {\n}\nextra", KILN_ERR_PARSE, "extra", 0, "expected end of input after the graph's '}', got 'extra'"},
    {HDR "  y = neg(x) @\n}", KILN_ERR_PARSE, "@", 0, "expected a statement (NAME = op(...)) or '}', got '@'"},
    {HDR "  y = neg(x)\x01\n}", KILN_ERR_PARSE, "\x01", 0, "got byte 0x01"},
    {HDR "  y = neg(x\n}", KILN_ERR_PARSE, "}", 0, "expected ')', got '}'"},
    {HDR "  y neg(x)\n}", KILN_ERR_PARSE, "neg", 0, "expected '=', got 'neg'"},
    {HDR "  y = 3(x)\n}", KILN_ERR_PARSE, "3(", 0, "expected an op name, got '3'"},
    {HDR "  y = neg(x, 3)\n}", KILN_ERR_PARSE, "3)", 0, "expected an operand or an attribute, got '3'"},
    {HDR "  y = reduce_sum(m, axes=[0], x)\n}", KILN_ERR_PARSE, "x)", 0,
     "expected an attribute (NAME=VALUE; operands come first), got 'x'"},
    {SRC "  f = full(value=1)\n}", KILN_ERR_PARSE, "}", 0,
     "expected ':' and a result type (full needs one), got '}'"},
    {HDR "  y = neg(x) : \n}", KILN_ERR_PARSE, "}", 0, "expected a type"},
    /* names */
    {HDR "  y = add(x, q)\n}", KILN_ERR_PARSE, "q)", 0, "undefined value 'q'"},
    {HDR "  y = add(x, %7)\n}", KILN_ERR_PARSE, "%7", 0, "undefined value '%7'"},
    {HDR "  y = add(y, x)\n}", KILN_ERR_PARSE, "y, x", 0, "undefined value 'y'"},
    {HDR "  x = neg(x)\n}", KILN_ERR_PARSE, "x = neg", 0, "redefinition of 'x' (first defined at 1:9)"},
    {"graph g(x: f32[], x: i32[]) -> () {}", KILN_ERR_PARSE, ", x:", 2, "redefinition of 'x' (first defined at 1:9)"},
    {SRC "  %1 = full(value=1) : f32[]\n  %1 = full(value=2) : f32[]\n}", KILN_ERR_PARSE, "%1 = full(value=2", 0,
     "redefinition of '%1' (first defined at 2:3)"},
    {SRC "  \"a\" = full(value=1) : f32[]\n  a = full(value=2) : f32[]\n}", KILN_ERR_PARSE, "a = full(value=2", 0,
     "redefinition of 'a'"},
    {"graph g(\"\": f32[]) -> () {}", KILN_ERR_PARSE, "\"\"", 0, "expected a name, got an empty string"},
    {SRC "  \"\" = full(value=1) : f32[]\n}", KILN_ERR_PARSE, "\"\"", 0, "expected a name, got an empty string"},
    {"graph \"abc", KILN_ERR_PARSE, NULL, 0, "unterminated string: expected '\"' before end of input"},
    {"graph \"ab\nc\"() -> () {}", KILN_ERR_PARSE, "\nc", 0, "unterminated string"},
    {"graph \"a\\qb\"() -> () {}", KILN_ERR_PARSE, "\\q", 0, "bad escape in string"},
    {"graph \"a\\x00\"() -> () {}", KILN_ERR_PARSE, "\\x00", 0, "bad escape in string"},
    {"graph \"a\\x4\"() -> () {}", KILN_ERR_PARSE, "\\x4", 0, "bad escape in string"},
    {"graph \"a\tb\"() -> () {}", KILN_ERR_PARSE, "\t", 0, "control byte 0x09 in string"},
    /* ops and attributes */
    {HDR "  y = foo(x)\n}", KILN_ERR_PARSE, "foo", 0, "unknown op 'foo'"},
    {HDR "  y = input() : f32[4]\n}", KILN_ERR_PARSE, "input", 0, "an input is declared in the graph header"},
    {HDR "  y = neg(x, bar=1)\n}", KILN_ERR_PARSE, "bar", 0, "unknown attribute 'bar'"},
    {HDR "  y = neg(x, axis=0)\n}", KILN_ERR_PARSE, "axis", 0, "attribute 'axis' is not allowed for neg"},
    {HDR "  s = reduce_sum(x, axes=[0], axes=[0])\n}", KILN_ERR_PARSE, ", axes=[0])", 2, "duplicate attribute 'axes'"},
    {HDR "  y = add(x)\n}", KILN_ERR_PARSE, "add", 0, "add takes 2 operands, got 1"},
    {HDR "  y = neg(x, x)\n}", KILN_ERR_PARSE, "neg", 0, "neg takes 1 operand, got 2"},
    {HDR "  y = concat(axis=0)\n}", KILN_ERR_PARSE, "concat", 0, "concat takes one or more operands, got none"},
    {HDR "  s = reduce_sum(x)\n}", KILN_ERR_PARSE, "reduce_sum", 0, "missing attribute 'axes' for reduce_sum"},
    {HDR "  s = argmax(x, keepdim=true)\n}", KILN_ERR_PARSE, "argmax", 0, "missing attribute 'axes' for argmax"},
    {SRC "  f = full() : f32[]\n}", KILN_ERR_PARSE, "full", 0, "missing attribute 'value' for full"},
    {SRC "  c = constant() : f32[1]\n}", KILN_ERR_PARSE, "constant", 0, "missing attribute 'data' for constant"},
    {HDR "  r = reshape(x)\n}", KILN_ERR_PARSE, "reshape", 0, "missing attribute 'shape' for reshape"},
    {HDR "  r = expand(x)\n}", KILN_ERR_PARSE, "expand", 0, "missing attribute 'shape' for expand"},
    {HDR "  r = permute(m)\n}", KILN_ERR_PARSE, "permute", 0, "missing attribute 'perm' for permute"},
    {HDR "  r = cast(x)\n}", KILN_ERR_PARSE, "cast", 0, "missing attribute 'to' for cast"},
    {HDR "  r = concat(x, x)\n}", KILN_ERR_PARSE, "concat", 0, "missing attribute 'axis' for concat"},
    {HDR "  r = gather(x, i)\n}", KILN_ERR_PARSE, "gather", 0, "missing attribute 'axis' for gather"},
    {HDR "  r = pad(x, high=[1])\n}", KILN_ERR_PARSE, "pad", 0, "missing attribute 'low' for pad"},
    {HDR "  r = pad(x, low=[1])\n}", KILN_ERR_PARSE, "pad", 0, "missing attribute 'high' for pad"},
    {HDR "  s = slice(m, start=[0])\n}", KILN_ERR_PARSE, "[0]", 0, "start: expected 2 entries (one per axis), got 1"},
    {HDR "  s = slice(m, stop=[0,1,2])\n}", KILN_ERR_PARSE, "[0,1,2]", 0, "stop: expected 2 entries (one per axis), got 3"},
    {HDR "  s = slice(x, step=[])\n}", KILN_ERR_PARSE, "[]", 0, "step: expected 1 entry (one per axis), got 0"},
    {HDR "  p = permute(m, perm=[0])\n}", KILN_ERR_PARSE, "[0]", 0, "perm: expected 2 entries (one per axis), got 1"},
    {HDR "  p = pad(m, low=[0], high=[0,0])\n}", KILN_ERR_PARSE, "[0]", 0, "low: expected 2 entries (one per axis), got 1"},
    {HDR "  r = reshape(x, shape=[1,1,1,1,1,1,1,1,7])\n}", KILN_ERR_PARSE, "7]", 0,
     "shape: expected ']' (a list has at most 8 entries), got '7'"},
    {HDR "  s = reduce_sum(x, axes=[[0]])\n}", KILN_ERR_PARSE, "[0]]", 0, "axes: expected an integer, got '['"},
    {HDR "  s = reduce_sum(x, axes=0)\n}", KILN_ERR_PARSE, "0)", 0, "axes: expected a list of integers, got '0'"},
    {HDR "  s = reduce_sum(x, axes=[0], keepdim=maybe)\n}", KILN_ERR_PARSE, "maybe", 0, "keepdim: expected true or false, got 'maybe'"},
    {HDR "  s = reduce_sum(x, axes=[0], keepdim=1)\n}", KILN_ERR_PARSE, "1)", 0, "keepdim: expected true or false, got '1'"},
    {HDR "  c = cast(x, to=f16)\n}", KILN_ERR_PARSE, "f16", 0, "to: unknown dtype 'f16'"},
    {HDR "  c = cast(x, to=[1])\n}", KILN_ERR_PARSE, "[1]", 0, "to: expected a dtype (f32, f64, i32, i64 or bool), got '['"},
    {"graph g(x: f16[2]) -> () {}", KILN_ERR_PARSE, "f16", 0, "unknown dtype 'f16'"},
    /* literals */
    {SRC "  f = full(value=2147483648) : i32[]\n}", KILN_ERR_PARSE, "2147", 0, "value: integer literal out of range for i32: 2147483648"},
    {SRC "  f = full(value=-2147483649) : i32[]\n}", KILN_ERR_PARSE, "-2147", 0, "value: integer literal out of range for i32: -2147483649"},
    {SRC "  f = full(value=9223372036854775808) : i64[]\n}", KILN_ERR_PARSE, "9223", 0, "value: integer literal out of range for i64"},
    {SRC "  f = full(value=-9223372036854775809) : i64[]\n}", KILN_ERR_PARSE, "-9223", 0, "value: integer literal out of range for i64"},
    {SRC "  f = full(value=123456789012345678901234567890) : i64[]\n}", KILN_ERR_PARSE, "1234", 0, "value: integer literal out of range for i64"},
    {HDR "  s = slice(x, start=[99999999999999999999])\n}", KILN_ERR_PARSE, "9999", 0, "start: integer literal out of range for i64"},
    {HDR "  s = concat(x, axis=9223372036854775808)\n}", KILN_ERR_PARSE, "9223", 0, "axis: integer literal out of range for i64"},
    {SRC "  f = full(value=1.5) : i32[]\n}", KILN_ERR_PARSE, "1.5", 0, "value: expected an integer (i32), got '1.5'"},
    {SRC "  f = full(value=0x10) : i64[]\n}", KILN_ERR_PARSE, "0x10", 0, "value: expected an integer (i64), got '0x10'"},
    {SRC "  f = full(value=1) : bool[]\n}", KILN_ERR_PARSE, "1)", 0, "value: expected true or false (a bool), got '1'"},
    {SRC "  f = full(value=true) : f32[]\n}", KILN_ERR_PARSE, "true", 0, "value: expected an f32 literal, got 'true'"},
    {SRC "  f = full(value=1e39) : f32[]\n}", KILN_ERR_PARSE, "1e39", 0, "value: float literal out of range for f32: 1e39"},
    {SRC "  f = full(value=-1e309) : f64[]\n}", KILN_ERR_PARSE, "-1e309", 0, "value: float literal out of range for f64: -1e309"},
    {SRC "  f = full(value=1.5x) : f32[]\n}", KILN_ERR_PARSE, "1.5x", 0, "value: expected an f32 literal, got '1.5x'"},
    {SRC "  f = full(value=infinity) : f64[]\n}", KILN_ERR_PARSE, "infinity", 0, "value: expected an f64 literal, got 'infinity'"},
    {SRC "  f = full(value=-nan) : f32[]\n}", KILN_ERR_PARSE, "-nan", 0, "value: a NaN has no sign in the text"},
    {SRC "  f = full(value=nan:0x7f800000) : f32[]\n}", KILN_ERR_PARSE, "nan:", 0, "value: 'nan:0x7f800000' is not the bit pattern of an f32 NaN"},
    {SRC "  f = full(value=nan:0x7ff80000000000000) : f64[]\n}", KILN_ERR_PARSE, "nan:", 0,
     "value: expected nan:0x<bits> with 1 to 16 hex digits"},
    {SRC "  f = full(value=nan:0x7fc0000g) : f32[]\n}", KILN_ERR_PARSE, "nan:", 0, "value: expected hex digits after nan:0x"},
    {SRC "  f = full(value=[1]) : f32[]\n}", KILN_ERR_PARSE, "[1]", 0, "value: expected a literal, got '['"},
    /* constants */
    {SRC "  c = constant(data=[1,2]) : f32[3]\n}", KILN_ERR_PARSE, "[1,2]", 0, "data: 2 elements, the type needs 3"},
    {SRC "  c = constant(data=[1,2,3,4]) : f32[3]\n}", KILN_ERR_PARSE, "[1,2", 0, "data: 4 elements, the type needs 3"},
    {SRC "  c = constant(data=[1,2]) : f32[1000000,1000000]\n}", KILN_ERR_PARSE, "[1,2]", 0,
     "data: 2 elements, the type needs 1000000000000"},
    {SRC "  c = constant(data=[1, x]) : f32[2]\n}", KILN_ERR_PARSE, "x]", 0, "data: expected an f32 literal, got 'x'"},
    {SRC "  c = constant(data=[1 2]) : f32[2]\n}", KILN_ERR_PARSE, "2]", 0, "data: expected ']', got '2'"},
    {SRC "  c = constant(data=3) : f32[]\n}", KILN_ERR_PARSE, "3)", 0, "data: expected constant data (a list of literals or b64\"...\"), got '3'"},
    {SRC "  c = constant(data=b64\"AAAA\") : f32[2]\n}", KILN_ERR_PARSE, "b64", 0, "data: 3 bytes, f32[2] needs 8"},
    {SRC "  c = constant(data=b64\"AA*A\") : bool[3]\n}", KILN_ERR_PARSE, "*", 0, "data: bad base64: expected a base64 character, got '*'"},
    {SRC "  c = constant(data=b64\"A=AA\") : bool[3]\n}", KILN_ERR_PARSE, "=AA", 0, "data: bad base64: expected a base64 character, got '='"},
    {SRC "  c = constant(data=b64\"AAA\") : bool[2]\n}", KILN_ERR_PARSE, "b64", 0, "data: bad base64: length 3 is not a multiple of 4"},
    {SRC "  c = constant(data=b64\"AB==\") : bool[1]\n}", KILN_ERR_PARSE, "b64", 0, "data: bad base64: non-zero bits in the padded last group"},
    {SRC "  c = constant(data=b64\"AAAC\") : bool[3]\n}", KILN_ERR_PARSE, "b64", 0, "data: bool constant element 2 is byte 0x02, not 0 or 1"},
    {SRC "  c = constant(data=b64\"\\x41\") : bool[3]\n}", KILN_ERR_PARSE, "\\x41", 0, "data: bad base64: expected a base64 character, got '\\'"},
    /* types and sizes */
    {"graph g(x: f32[1000000000,1000000000]) -> () {}", KILN_ERR_OVERFLOW, "f32", 0, "type: tensor too large"},
    {"graph g(x: f32[99999999999999999999]) -> () {}", KILN_ERR_OVERFLOW, "9999", 0,
     "dimension: tensor too large: 99999999999999999999 exceeds 2^48"},
    {"graph g(x: f32[0,99999999999999999999]) -> () {}", KILN_ERR_OVERFLOW, "9999", 0, "tensor too large"},
    {"graph g(x: f32[-1]) -> () {}", KILN_ERR_SHAPE, "f32", 0, "type: negative dimension"},
    {"graph g(x: f32[1,1,1,1,1,1,1,1,1]) -> () {}", KILN_ERR_SHAPE, "1]", 0, "type: bad rank: more than 8 dimensions"},
    {HDR "  r = reshape(x, shape=[281474976710656,2])\n}", KILN_ERR_OVERFLOW, "reshape", 0, "reshape: tensor too large"},
    {HDR "  r = expand(x, shape=[99999999999999999999,4])\n}", KILN_ERR_OVERFLOW, "9999", 0, "tensor too large"},
    {HDR "  r = pad(x, low=[281474976710657], high=[0])\n}", KILN_ERR_OVERFLOW, "pad", 0, "pad: tensor too large"},
    /* type rules, reported at the op with the api "<src>:L:C: op" */
    {HDR "  y = neg(x) : f32[5]\n}", KILN_ERR_VERIFY, "neg", 0, "neg: type mismatch: neg gives f32[4], stated f32[5]"},
    {HDR "  y = add(x, i)\n}", KILN_ERR_DTYPE, "add", 0, "add: dtype mismatch"},
    {HDR "  y = add(x, m)\n}", KILN_ERR_SHAPE, "add", 0, "add: shape mismatch"},
    {HDR "  y = exp(i)\n}", KILN_ERR_DTYPE, "exp", 0, "exp: dtype mismatch: exp needs a float dtype"},
    {HDR "  s = reduce_mean(i, axes=[0])\n}", KILN_ERR_DTYPE, "reduce_mean", 0, "dtype mismatch"},
    {HDR "  p = permute(m, perm=[0,0])\n}", KILN_ERR_SHAPE, "permute", 0, "permute: bad perm"},
    {HDR "  p = permute(m, perm=[0,99])\n}", KILN_ERR_SHAPE, "permute", 0, "permute: bad perm"},
    {HDR "  s = slice(x, step=[0])\n}", KILN_ERR_SHAPE, "slice", 0, "slice: bad slice: step of axis 0 is 0"},
    {HDR "  s = reduce_sum(m, axes=[2])\n}", KILN_ERR_SHAPE, "[2]", 0, "reduce_sum: bad axis: axis 2 is out of range for rank 2"},
    {HDR "  s = reduce_sum(m, axes=[-3])\n}", KILN_ERR_SHAPE, "[-3]", 0, "bad axis: axis -3 is out of range for rank 2"},
    {HDR "  s = reduce_sum(m, axes=[1,-1])\n}", KILN_ERR_SHAPE, "[1,-1]", 0, "reduce_sum: bad axes: axis 1 is listed twice"},
    {HDR "  s = concat(x, axis=1)\n}", KILN_ERR_SHAPE, "1)", 0, "concat: bad axis: axis 1 is out of range for rank 1"},
    {HDR "  s = gather(x, i, axis=-2)\n}", KILN_ERR_SHAPE, "-2)", 0, "gather: bad axis: axis -2 is out of range for rank 1"},
    {HDR "  s = argmax(m, axes=[0,1])\n}", KILN_ERR_SHAPE, "argmax", 0, "argmax: bad axes: argmax reduces exactly one axis"},
    {SRC "  a = arange() : bool[3]\n}", KILN_ERR_DTYPE, "arange", 0, "arange: dtype mismatch"},
    /* outputs */
    {"graph g() -> (y: f32[]) {\n}", KILN_ERR_PARSE, "y:", 0, "undefined value 'y'"},
    {"graph g(x: f32[]) -> (y: f32[] = %1) {\n}", KILN_ERR_PARSE, "%1", 0, "undefined value '%1'"},
    {"graph g(x: f32[4]) -> (x: f32[3]) {\n}", KILN_ERR_VERIFY, "x: f32[3]", 0,
     "output 'x': type mismatch: the value is f32[4], stated f32[3]"},
    {"graph g(x: f32[4]) -> (o: f32[4] = x, o: f32[4] = x) {\n}", KILN_ERR_PARSE, ", o:", 2, "duplicate output 'o'"},
    {"graph g(x: f32[4]) -> (o: f32[4] = 3) {\n}", KILN_ERR_PARSE, "3)", 0, "expected a value name, got '3'"},
    {"graph g(x: f32[4]) -> (%1: f32[4]) {\n}", KILN_ERR_PARSE, "%1", 0, "expected an output name, got '%1'"},
    /* encoding; columns count code points */
    {SRC "# caf\xff\n}", KILN_ERR_PARSE, "\xff", 0, "invalid UTF-8: byte 0xff"},
    {SRC "# \xc3\xa9\xe2\x82\n}", KILN_ERR_PARSE, "\xe2", 0, "invalid UTF-8: truncated sequence starting with byte 0xe2"},
    {SRC "  \xc0\x80\n}", KILN_ERR_PARSE, "\xc0", 0, "invalid UTF-8: bad sequence starting with byte 0xc0"},
    {SRC "  \xed\xa0\x80\n}", KILN_ERR_PARSE, "\xed", 0, "invalid UTF-8: bad sequence"},
    {SRC "  \xf4\x90\x80\x80\n}", KILN_ERR_PARSE, "\xf4", 0, "invalid UTF-8: bad sequence"},
    {SRC "  x = neg(\xe2\x82\xac)\n}", KILN_ERR_PARSE, "\xe2", 0, "expected an operand or an attribute, got '\xe2\x82\xac'"},
    {SRC "  \"\xc3\xa9\xc3\xa9\" = foo()\n}", KILN_ERR_PARSE, "foo", 0, "unknown op 'foo'"},
};

static void
check_error_case(const errcase *c, size_t idx)
{
    kiln_graph *g = (kiln_graph *)1;
    size_t len = strlen(c->text);
    kiln_clear_error();
    kiln_status st = ir_parse(c->text, len, NULL, &g);
    ck_assert_msg(st == c->code, "case %zu: expected %s, got %s: %s\n%s", idx,
                  kiln_status_str(c->code), kiln_status_str(st), kiln_errmsg(), c->text);
    ck_assert_msg(kiln_errcode() == c->code, "case %zu: errcode", idx);
    ck_assert_msg(g == NULL, "case %zu: *out not NULL on error", idx);
    size_t off = len;
    if (c->at) {
        const char *p = strstr(c->text, c->at);
        ck_assert_msg(p != NULL, "case %zu: bad marker", idx);
        off = (size_t)(p - c->text) + (size_t)c->off;
    }
    size_t line, col;
    line_col(c->text, off, &line, &col);
    char pos[160];
    if (c->code == KILN_ERR_PARSE)
        snprintf(pos, sizeof pos, "kiln_graph_parse: parse error: <input>:%zu:%zu: ", line, col);
    else
        snprintf(pos, sizeof pos, "<input>:%zu:%zu: ", line, col);
    ck_assert_msg(strncmp(kiln_errmsg(), pos, strlen(pos)) == 0,
                  "case %zu: message \"%s\" does not start with \"%s\"", idx, kiln_errmsg(), pos);
    ck_assert_msg(strstr(kiln_errmsg(), c->needle) != NULL,
                  "case %zu: message \"%s\" lacks \"%s\"", idx, kiln_errmsg(), c->needle);
}

START_TEST(test_parse_errors)
{
    for (size_t i = 0; i < sizeof errcases / sizeof errcases[0]; i++)
        check_error_case(&errcases[i], i);
}
END_TEST

/* Every error inside an attribute's value names the attribute, and a value of the wrong
 * kind says what the attribute takes: one case per kind (and arange's scalar start), in
 * the first pass and in the second (literals read once the dtype is known), and inside
 * lists.  Errors about the attribute itself, and outside attributes, are unchanged. */
typedef struct attrcase {
    const char *text;
    const char *at; /* the error points at the first occurrence of this */
    const char *detail;
} attrcase;

static const attrcase attrcases[] = {
    /* issue 10 */
    {HDR "  s = reduce_sum(x, axes=true, keepdim=[1])\n}", "true",
     "axes: expected a list of integers, got 'true'"},
    {HDR "  s = reduce_sum(x, axes=[0], keepdim=[1])\n}", "[1]",
     "keepdim: expected true or false, got '['"},
    /* DATA */
    {SRC "  c = constant(data=true) : bool[]\n}", "true",
     "data: expected constant data (a list of literals or b64\"...\"), got 'true'"},
    {SRC "  c = constant(data=[1, [2]]) : f32[2]\n}", "[2]",
     "data: expected a literal, got '['"},
    {SRC "  c = constant(data=[1, 2.5]) : i32[2]\n}", "2.5",
     "data: expected an integer (i32), got '2.5'"},
    /* SCALAR */
    {SRC "  f = full(value=[0]) : f32[]\n}", "[0]", "value: expected a literal, got '['"},
    {SRC "  f = full(value=yes) : bool[]\n}", "yes",
     "value: expected true or false (a bool), got 'yes'"},
    {SRC "  a = arange(start=[0]) : f32[3]\n}", "[0]", "start: expected a literal, got '['"},
    {SRC "  a = arange(delta=x) : f64[3]\n}", "x)", "delta: expected an f64 literal, got 'x'"},
    {HDR "  p = pad(x, low=[1], high=[1], value=1e40)\n}", "1e40",
     "value: float literal out of range for f32: 1e40"},
    /* INTS */
    {HDR "  s = slice(x, start=0)\n}", "0)", "start: expected a list of integers, got '0'"},
    {HDR "  s = reduce_sum(x, axes=)\n}", ")\n", "axes: expected a list of integers, got ')'"},
    {HDR "  s = slice(x, stop=[1.5])\n}", "1.5", "stop: expected an integer, got '1.5'"},
    {HDR "  p = permute(m, perm=[0 1])\n}", "1]", "perm: expected ']', got '1'"},
    {HDR "  p = pad(x, low=[0], high=\"1\")\n}", "\"1\"",
     "high: expected a list of integers, got '\"1\"'"},
    {HDR "  p = pad(m, low=[0,0], high=[0])\n}", "[0])", "high: expected 2 entries (one per axis), got 1"},
    /* DIMS */
    {HDR "  r = reshape(x, shape=4)\n}", "4)",
     "shape: expected a list of dimensions (integers), got '4'"},
    {HDR "  r = expand(x, shape=[2, n])\n}", "n]", "shape: expected a dimension (an integer), got 'n'"},
    /* INT */
    {HDR "  c = concat(x, x, axis=[0])\n}", "[0]", "axis: expected an integer, got '['"},
    {HDR "  g2 = gather(x, i, axis=zero)\n}", "zero", "axis: expected an integer, got 'zero'"},
    /* DTYPE */
    {HDR "  c = cast(x, to=4)\n}", "4)", "to: expected a dtype (f32, f64, i32, i64 or bool), got '4'"},
    {HDR "  c = cast(x, to=float)\n}", "float",
     "to: unknown dtype 'float' (expected f32, f64, i32, i64 or bool)"},
    /* BOOL */
    {HDR "  s = reduce_max(x, axes=[0], keepdim=True)\n}", "True",
     "keepdim: expected true or false, got 'True'"},
    /* not inside a value: no attribute prefix */
    {HDR "  s = reduce_sum(x, axes=[0], axes=[1])\n}", "axes=[1]", "duplicate attribute 'axes'"},
    {HDR "  s = reduce_sum(x, axis=[0])\n}", "axis", "attribute 'axis' is not allowed for reduce_sum"},
    {HDR "  s = reduce_sum(x, keepdim=true)\n}", "reduce_sum",
     "missing attribute 'axes' for reduce_sum"},
    {HDR "  s = reduce_sum(x, axes=[0], 3)\n}", "3)", "expected an attribute (NAME=VALUE; operands come first), got '3'"},
    {"graph g(x: f32[n]) -> () {}", "n]", "expected a dimension (an integer), got 'n'"},
};

START_TEST(test_attribute_errors)
{
    for (size_t i = 0; i < sizeof attrcases / sizeof attrcases[0]; i++) {
        const attrcase *c = &attrcases[i];
        kiln_graph *g = NULL;
        kiln_clear_error();
        ck_assert_msg(kiln_graph_parse(c->text, strlen(c->text), &g) == KILN_ERR_PARSE,
                      "case %zu: %s", i, kiln_errmsg());
        ck_assert(g == NULL);
        const char *p = strstr(c->text, c->at);
        ck_assert_msg(p != NULL, "case %zu: bad marker", i);
        size_t line, col;
        line_col(c->text, (size_t)(p - c->text), &line, &col);
        char want[512];
        snprintf(want, sizeof want, "kiln_graph_parse: parse error: <input>:%zu:%zu: %s", line,
                 col, c->detail);
        ck_assert_msg(strcmp(kiln_errmsg(), want) == 0, "case %zu:\n got  \"%s\"\n want \"%s\"",
                      i, kiln_errmsg(), want);
    }
    /* the issue's text, with its position spelled out */
    const char *text = "graph g(x: f32[4,3]) -> (s: f32[4]) {\n"
                       "  # sum over the rows\n"
                       "  s = reduce_sum(x, axes=true, keepdim=[1])\n"
                       "}\n";
    kiln_graph *g = NULL;
    ck_assert_int_eq(kiln_graph_parse(text, strlen(text), &g), KILN_ERR_PARSE);
    ck_assert_str_eq(kiln_errmsg(), "kiln_graph_parse: parse error: <input>:3:26: axes: expected "
                                    "a list of integers, got 'true'");
}
END_TEST

START_TEST(test_parse_errors_special)
{
    kiln_graph *g = NULL;
    /* A NUL byte inside the given length. */
    const char nul[] = "graph g() -> () {\n  \0 }";
    ck_assert_int_eq(ir_parse(nul, sizeof nul - 1, NULL, &g), KILN_ERR_PARSE);
    ts_assert_error(KILN_ERR_PARSE, "parse error: <input>:2:3: NUL byte in the text");
    ck_assert_ptr_null(g);
    /* The text need not be NUL-terminated: parsing stops at len. */
    const char *ok = "graph g(x: f32[2]) -> (x: f32[2]) {}GARBAGE";
    ck_assert_int_eq(kiln_graph_parse(ok, strlen(ok) - 7, &g), KILN_OK);
    kiln_graph_free(g);
    /* The source name appears in messages. */
    ck_assert_int_eq(ir_parse("graph g(", 8, "dir/file.kiln", &g), KILN_ERR_PARSE);
    ts_assert_error(KILN_ERR_PARSE, "kiln_graph_parse: parse error: dir/file.kiln:1:9: expected");
    /* Public API argument checks. */
    ck_assert_int_eq(kiln_graph_parse(NULL, 0, &g), KILN_ERR_INVALID_ARG);
    ts_assert_error(KILN_ERR_INVALID_ARG, "kiln_graph_parse: invalid argument");
    ck_assert_int_eq(kiln_graph_parse("graph", 5, NULL), KILN_ERR_INVALID_ARG);
    /* Absurd nesting is a plain error (the grammar has one list level; nothing recurses). */
    size_t n = 200000;
    const char *pre = "graph g(x: f32[4]) -> () {\n  s = reduce_sum(x, axes=";
    char *deep = malloc(strlen(pre) + n + 1);
    strcpy(deep, pre);
    memset(deep + strlen(pre), '[', n);
    deep[strlen(pre) + n] = '\0';
    ck_assert_int_eq(ir_parse(deep, strlen(deep), NULL, &g), KILN_ERR_PARSE);
    ts_assert_error(KILN_ERR_PARSE, "<input>:2:27: axes: expected an integer, got '['");
    memset(deep, '(', strlen(deep));
    ck_assert_int_eq(ir_parse(deep, strlen(deep), NULL, &g), KILN_ERR_PARSE);
    ts_assert_error(KILN_ERR_PARSE, "<input>:1:1: expected 'graph', got '('");
    free(deep);
    /* A long token is quoted cut short, on a character boundary. */
    char longname[200];
    snprintf(longname, sizeof longname, "graph g() -> () {\n  x = %s()\n}",
             "\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3"
             "\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"");
    ck_assert_int_eq(ir_parse(longname, strlen(longname), NULL, &g), KILN_ERR_PARSE);
    ts_assert_error(KILN_ERR_PARSE, "expected an op name, got '\"\xc3\xa9");
    ck_assert(strstr(kiln_errmsg(), "...'") != NULL);
    /* Many statements and operands: linear, no recursion. */
    size_t cap = 64 << 20, k = 0;
    char *big = malloc(cap);
    k += (size_t)sprintf(big + k, "graph big(x: f32[2]) -> (v49999: f32[2]) {\n  v0 = neg(x)\n");
    for (int i = 1; i < 50000; i++)
        k += (size_t)sprintf(big + k, "  v%d = add(v%d, x)\n", i, i - 1);
    k += (size_t)sprintf(big + k, "}\n");
    ck_assert_int_eq(ir_parse(big, k, NULL, &g), KILN_OK);
    ck_assert_int_eq(g->nnodes, 50001);
    kiln_graph_free(g);
    k = (size_t)sprintf(big, "graph cat(x: f32[1]) -> (c: f32[20000]) {\n  c = concat(x");
    for (int i = 1; i < 20000; i++)
        k += (size_t)sprintf(big + k, ", x");
    k += (size_t)sprintf(big + k, ", axis=0)\n}\n");
    ck_assert_int_eq(ir_parse(big, k, NULL, &g), KILN_OK);
    ck_assert_int_eq(g->nodes[1].nin, 20000);
    kiln_graph_free(g);
    free(big);
}
END_TEST

/* ---- robustness: truncation, mutation, allocation failure ------------------------------- */

/* Parse text[0..len): either a graph that round-trips, or an error with a message. */
static void
parse_any(const char *text, size_t len, const char *what, uint64_t detail)
{
    kiln_graph *g = NULL;
    kiln_clear_error();
    kiln_status st = ir_parse(text, len, NULL, &g);
    if (st == KILN_OK) {
        ck_assert_msg(g != NULL, "%s %" PRIu64 ": OK without a graph", what, detail);
        char *s = check_roundtrip(g, what);
        free(s);
        kiln_graph_free(g);
        return;
    }
    ck_assert_msg(g == NULL, "%s %" PRIu64 ": graph on error", what, detail);
    ck_assert_msg(kiln_errcode() == st, "%s %" PRIu64 ": errcode %d vs %d", what, detail,
                  (int)kiln_errcode(), (int)st);
    ck_assert_msg(st != KILN_ERR_INTERNAL && st != KILN_ERR_NOMEM && st != KILN_ERR_INVALID_ARG,
                  "%s %" PRIu64 ": unexpected %s: %s", what, detail, kiln_status_str(st),
                  kiln_errmsg());
    const char *m = kiln_errmsg();
    ck_assert_msg(strstr(m, "<input>:") != NULL, "%s %" PRIu64 ": no position in \"%s\"", what,
                  detail, m);
    if (st == KILN_ERR_PARSE)
        ck_assert_msg(strncmp(m, "kiln_graph_parse: parse error: <input>:", 39) == 0,
                      "%s %" PRIu64 ": \"%s\"", what, detail, m);
}

typedef struct corpus {
    char *text[64];
    size_t len[64];
    int n;
} corpus;

static void
load_corpus(corpus *c)
{
    memset(c, 0, sizeof *c);
    int ng, nb;
    char **golden = list_kiln("tests/golden", &ng), **bench = list_kiln("bench", &nb);
    for (int i = 0; i < ng; i++)
        c->text[c->n] = ts_read_source_file(golden[i], &c->len[c->n]), c->n++;
    for (int i = 0; i < nb && i < 2; i++)
        c->text[c->n] = ts_read_source_file(bench[i], &c->len[c->n]), c->n++;
    for (uint64_t s = 0; s < 6; s++) {
        ts_randgraph_opts o;
        ts_randgraph_defaults(&o);
        o.max_elems = 80;
        kiln_graph *g = ts_random_graph(base_seed() + 555 + s, &o);
        ck_assert(g != NULL);
        c->text[c->n] = print_str(g);
        c->len[c->n] = strlen(c->text[c->n]);
        c->n++;
        kiln_graph_free(g);
    }
    free_list(golden);
    free_list(bench);
}

static void
free_corpus(corpus *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->text[i]);
}

START_TEST(test_truncation)
{
    corpus c;
    load_corpus(&c);
    for (int i = 0; i < c.n; i++) {
        /* A copy of exactly k bytes, so ASan sees any read past len. */
        for (size_t k = 0; k < c.len[i]; k++) {
            char *t = malloc(k ? k : 1);
            memcpy(t, c.text[i], k);
            parse_any(t, k, "truncated text", k);
            free(t);
        }
    }
    free_corpus(&c);
}
END_TEST

START_TEST(test_mutation)
{
    static const char *const dict[] = {
        "[", "]", "(", ")", "{", "}", ",", ":", "=", "->", "%1", "\"", "\\", "-", "#",
        "1e999", "nan:0x", "nan:0x7fc00001", "b64\"", "b64\"AAAA\"", "axes=[0]", "f32[",
        "99999999999999999999", "-9223372036854775808", "\xff", "\xc3\xa9", "\xe2\x82",
        "0x1p-149", "inf", "-0", "true", "keepdim=true", "i64[]", "%0", "x", "\n", "\t",
        "graph", "concat(", "axis=-1", "[[[[[[[[", "0,0,0,0,0,0,0,0,0", "\x00",
    };
    corpus c;
    load_corpus(&c);
    ts_rng r;
    uint64_t seed = base_seed() ^ 0x6d757461ull;
    ts_rng_seed(&r, seed);
    for (uint64_t it = 0; it < 6000; it++) {
        int which = (int)ts_rng_below(&r, (uint64_t)c.n);
        size_t len = c.len[which];
        char *t = malloc(len * 2 + 256);
        memcpy(t, c.text[which], len);
        int nmut = 1 + (int)ts_rng_below(&r, 3);
        for (int m = 0; m < nmut; m++) {
            size_t at = len ? (size_t)ts_rng_below(&r, len) : 0;
            switch (ts_rng_below(&r, 5)) {
            case 0: /* any byte */
                if (len)
                    t[at] = (char)ts_rng_below(&r, 256);
                break;
            case 1: { /* a token from the dictionary */
                const char *d = dict[ts_rng_below(&r, sizeof dict / sizeof dict[0])];
                size_t dl = d[0] ? strlen(d) : 1;
                if (len + dl > len * 2 + 200)
                    break;
                memmove(t + at + dl, t + at, len - at);
                memcpy(t + at, d, dl);
                len += dl;
                break;
            }
            case 2: { /* delete a span */
                size_t n = (size_t)ts_rng_below(&r, 16) + 1;
                if (at + n > len)
                    n = len - at;
                memmove(t + at, t + at + n, len - at - n);
                len -= n;
                break;
            }
            case 3: { /* duplicate a span */
                size_t n = (size_t)ts_rng_below(&r, 24) + 1;
                if (at + n > len)
                    n = len - at;
                if (len + n > len * 2 + 200)
                    break;
                memmove(t + at + n, t + at, len - at);
                len += n;
                break;
            }
            case 4: /* a digit, to bend numbers and dims */
                if (len)
                    t[at] = (char)('0' + ts_rng_below(&r, 10));
                break;
            }
        }
        char *exact = malloc(len ? len : 1);
        memcpy(exact, t, len);
        free(t);
        char what[80];
        snprintf(what, sizeof what, "mutation (KILN_TEST_SEED=%" PRIu64 ") iteration", base_seed());
        parse_any(exact, len, what, it);
        free(exact);
    }
    free_corpus(&c);
}
END_TEST

START_TEST(test_alloc_failure)
{
    static const char *const files[] = {"tests/golden/names.kiln", "tests/golden/sources.kiln",
                                        "tests/golden/movement.kiln", "bench/layernorm.kiln"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        size_t len;
        char *text = ts_read_source_file(files[f], &len);
        kiln_graph *ref = NULL;
        ck_assert_int_eq(ir_parse(text, len, NULL, &ref), KILN_OK);
        char *want = print_str(ref);
        bool done = false;
        long n;
        for (n = 0; n < 100000 && !done; n++) {
            kiln_graph *g = NULL;
            ir_test_fail_alloc_after(n);
            kiln_status st = ir_parse(text, len, NULL, &g);
            ir_test_fail_alloc_after(-1);
            if (st == KILN_OK) {
                char *got = print_str(g);
                ck_assert_str_eq(got, want);
                free(got);
                kiln_graph_free(g);
                done = true;
            } else {
                ck_assert_msg(st == KILN_ERR_NOMEM, "%s, allocation %ld: %s: %s", files[f], n,
                              kiln_status_str(st), kiln_errmsg());
                ck_assert_msg(strstr(kiln_errmsg(), "out of memory") != NULL, "%s", kiln_errmsg());
                ck_assert_ptr_null(g);
            }
        }
        ck_assert_msg(done && n > 5, "%s: %ld allocations", files[f], n);
        free(want);
        kiln_graph_free(ref);
        free(text);
    }
}
END_TEST

/* ---- DOT and I/O errors -------------------------------------------------------------------- */

/* A name DOT shows as written (no escaping needed). */
static bool
is_plain(const char *s)
{
    for (; *s; s++)
        if (!(*s == '_' || (*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') ||
              (*s >= 'A' && *s <= 'Z')))
            return false;
    return true;
}

static void
check_dot(const kiln_graph *g, const char *what)
{
    char *d = dot_str(g);
    ck_assert_msg(strncmp(d, "digraph \"", 9) == 0, "%s: %s", what, d);
    size_t len = strlen(d);
    ck_assert(len >= 2 && strcmp(d + len - 2, "}\n") == 0);
    int inputs = 0, outputs = 0;
    for (int32_t id = 0; id < g->nnodes; id++) {
        const ir_node *nd = &g->nodes[id];
        char key[128];
        snprintf(key, sizeof key, "  n%d [label=\"", (int)id);
        const char *p = strstr(d, key);
        ck_assert_msg(p != NULL, "%s: node %d missing", what, (int)id);
        const char *eol = strchr(p, '\n');
        char line[4096];
        size_t ll = (size_t)(eol - p) < sizeof line - 1 ? (size_t)(eol - p) : sizeof line - 1;
        memcpy(line, p, ll);
        line[ll] = '\0';
        char opk[64];
        snprintf(opk, sizeof opk, "\\n%s\\n", ir_ops[nd->op].name);
        ck_assert_msg(strstr(line, opk) != NULL, "%s: node %d lacks its op: %s", what, (int)id, line);
        char tb[IR_TYPE_STR_MAX];
        ck_assert_msg(strstr(line, ir_type_str(&nd->type, tb, sizeof tb)) != NULL,
                      "%s: node %d lacks its type: %s", what, (int)id, line);
        if (nd->name && is_plain(nd->name)) {
            char nk[256];
            snprintf(nk, sizeof nk, "label=\"%s\\n", nd->name);
            ck_assert_msg(strstr(line, nk) != NULL, "%s: node %d lacks its name: %s", what,
                          (int)id, line);
        }
        inputs += strstr(line, "shape=invhouse") != NULL;
        outputs += strstr(line, "peripheries=2") != NULL;
        ck_assert_msg((strstr(line, "shape=invhouse") != NULL) == (nd->op == IR_OP_INPUT),
                      "%s: node %d input marking", what, (int)id);
        for (int k = 0; k < nd->nin; k++) {
            char ek[64];
            snprintf(ek, sizeof ek, "  n%d -> n%d", (int)nd->in[k], (int)id);
            ck_assert_msg(strstr(d, ek) != NULL, "%s: edge %s missing", what, ek);
        }
    }
    ck_assert_int_eq(inputs, g->ninputs);
    int distinct = 0;
    for (int32_t i = 0; i < g->noutputs; i++) {
        bool first = true;
        for (int32_t j = 0; j < i; j++)
            first &= g->outputs[j].node != g->outputs[i].node;
        distinct += first;
    }
    ck_assert_int_eq(outputs, distinct);
    free(d);
}

START_TEST(test_dot)
{
    int ng;
    char **golden = list_kiln("tests/golden", &ng);
    for (int i = 0; i < ng; i++) {
        kiln_graph *g = parse_file(golden[i], NULL);
        check_dot(g, golden[i]);
        kiln_graph_free(g);
    }
    free_list(golden);
    for (uint64_t s = 0; s < 100; s++) {
        kiln_graph *g = ts_random_graph(base_seed() + 9000 + s, NULL);
        ck_assert(g != NULL);
        check_dot(g, "random graph");
        kiln_graph_free(g);
    }
    /* Exact output for a small graph: names, ops, types, edges in operand order. */
    kiln_graph *g = ts_parse("graph \"d\\\"q\"(a: f32[2]) -> (o: f32[2] = %1, p: f32[2] = %1) {\n"
                             "  %1 = sub(a, a)\n}\n");
    char *d = dot_str(g);
    ck_assert_str_eq(d, "digraph \"d\\\"q\" {\n"
                        "  node [fontname=\"monospace\", shape=box, style=rounded];\n"
                        "  n0 [label=\"a\\ninput\\nf32[2]\", shape=invhouse, style=filled, fillcolor=\"#cfe2ff\"];\n"
                        "  n1 [label=\"%1\\nsub\\nf32[2]\\n-> o, p\", peripheries=2, color=\"#b00000\"];\n"
                        "  n0 -> n1 [label=\"0\"];\n"
                        "  n0 -> n1 [label=\"1\"];\n"
                        "}\n");
    free(d);
    kiln_graph_free(g);
}
END_TEST

START_TEST(test_io_errors)
{
    kiln_graph *g = parse_file("tests/golden/unary.kiln", NULL);
    /* A stream opened for reading: every write fails at once. */
    FILE *r = fopen("/dev/null", "r");
    ck_assert(r != NULL);
    ck_assert_int_eq(kiln_graph_print(g, r), KILN_ERR_IO);
    ts_assert_error(KILN_ERR_IO, "kiln_graph_print: i/o error");
    clearerr(r);
    ck_assert_int_eq(kiln_graph_print_dot(g, r), KILN_ERR_IO);
    ts_assert_error(KILN_ERR_IO, "kiln_graph_print_dot: i/o error");
    fclose(r);
    /* A full device: the writes are buffered and fail on the flush. */
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        ck_assert_int_eq(kiln_graph_print(g, full), KILN_ERR_IO);
        ts_assert_error(KILN_ERR_IO, "kiln_graph_print: i/o error");
        fclose(full);
    }
    ck_assert_int_eq(kiln_graph_print(NULL, stdout), KILN_ERR_MISUSE);
    kiln_graph_free(g);
}
END_TEST

/* docs/format.md's op table is generated from ops.def: every row must still match it. */
START_TEST(test_docs_match_op_table)
{
    char *doc = ts_read_source_file("docs/format.md", NULL);
    for (int op = 0; op < IR_OP_COUNT; op++) {
        char row[64];
        snprintf(row, sizeof row, "| `%s` | ", ir_ops[op].name);
        const char *p = strstr(doc, row);
        ck_assert_msg(p != NULL, "docs/format.md has no row for %s", ir_ops[op].name);
        /* The meaning as a table cell: '|' escaped. */
        char cell[512];
        size_t k = 0;
        for (const char *m = ir_ops[op].meaning; *m && k + 2 < sizeof cell; m++) {
            if (*m == '|')
                cell[k++] = '\\';
            cell[k++] = *m;
        }
        cell[k] = '\0';
        const char *eol = strchr(p, '\n');
        char line[1024];
        size_t ll = (size_t)(eol - p) < sizeof line - 1 ? (size_t)(eol - p) : sizeof line - 1;
        memcpy(line, p, ll);
        line[ll] = '\0';
        ck_assert_msg(strstr(line, cell) != NULL, "docs/format.md row of %s does not match ops.def:\n%s\nwant: %s",
                      ir_ops[op].name, line, cell);
        const char *arity = ir_ops[op].arity < 0 ? "| one or more |" : NULL;
        char ar[32];
        if (!arity) {
            snprintf(ar, sizeof ar, "| %d |", ir_ops[op].arity);
            arity = ar;
        }
        ck_assert_msg(strstr(line, arity) != NULL, "docs row of %s: arity", ir_ops[op].name);
        /* Every attribute the op has is named in its row. */
        for (int b = 0; b < IR_ATTR_COUNT; b++)
            if (ir_ops[op].attrs & (1u << b)) {
                char an[32];
                snprintf(an, sizeof an, "`%s=", ir_attr_names[b]);
                ck_assert_msg(strstr(line, an) != NULL, "docs row of %s lacks %s", ir_ops[op].name, an);
            }
    }
    /* The printer's attribute order, as documented. */
    char order[256] = "";
    for (int b = 0; b < IR_ATTR_COUNT; b++) {
        strcat(order, ir_attr_names[b]);
        strcat(order, b + 1 < IR_ATTR_COUNT ? " " : "");
    }
    ck_assert_msg(strstr(doc, order) != NULL, "docs/format.md lacks the attribute order '%s'", order);
    free(doc);
}
END_TEST

static Suite *
parse_suite(void)
{
    Suite *s = suite_create("parse");
    TCase *t = tcase_create("format");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_golden_roundtrip);
    tcase_add_test(t, test_canonical_form);
    tcase_add_test(t, test_api_names);
    tcase_add_test(t, test_interleaved_inputs);
    tcase_add_test(t, test_random_roundtrip);
    tcase_add_test(t, test_random_options);
    tcase_add_test(t, test_random_cap);
    tcase_add_test(t, test_print_scalar);
    tcase_add_test(t, test_constants_bitexact);
    tcase_add_test(t, test_defaults);
    tcase_add_test(t, test_parse_errors);
    tcase_add_test(t, test_parse_errors_special);
    tcase_add_test(t, test_attribute_errors);
    tcase_add_test(t, test_truncation);
    tcase_add_test(t, test_mutation);
    tcase_add_test(t, test_alloc_failure);
    tcase_add_test(t, test_dot);
    tcase_add_test(t, test_io_errors);
    tcase_add_test(t, test_docs_match_op_table);
    suite_add_tcase(s, t);
    return s;
}

int
main(void)
{
    return ts_run(parse_suite());
}
