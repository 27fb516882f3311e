/* check_api.c — the public header against the op table (lib/ir/ops.def), and the public
 * functions the kiln command needs beside the tensor API (a parse that names its source,
 * the host description, dropping the in-memory caches).
 *
 * Every op of the table has its kiln_<name> entry point in kiln.h: the table below is built
 * from ops.def, so an op added to the table without a declaration in kiln.h fails this
 * file's build, and one without a definition fails its link.  The other way round, every
 * tensor operation kiln.h declares must name an op of the table (or be one of the few
 * documented helpers), so a declaration left behind by a removed or renamed op fails here
 * instead of in a user's link. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "ir.h"
#include "kiln.h"
#include "support.h"

typedef void (*any_fn)(void);

/* kiln_<name> for every op, in table order. */
static const any_fn op_entry[IR_OP_COUNT] = {
#define OP(E, name, arity, kind, trule, attrs, calc, ulp_f32, ulp_f64, meaning) (any_fn)kiln_##name,
#include "ops.def"
#undef OP
};

START_TEST(test_every_op_has_an_entry_point)
{
    for (int op = 0; op < IR_OP_COUNT; op++)
        ck_assert_msg(op_entry[op] != NULL, "kiln_%s is missing", ir_ops[op].name);
}
END_TEST

/* Tensor operations of kiln.h that are helpers, not ops of the table. */
static bool
is_helper(const char *name)
{
    static const char *const helpers[] = {"scalar", "scalar_like"};
    for (size_t i = 0; i < sizeof helpers / sizeof helpers[0]; i++)
        if (strcmp(name, helpers[i]) == 0)
            return true;
    return false;
}

START_TEST(test_header_declares_only_table_ops)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/include/kiln.h", KILN_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char line[1024];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        /* `KILN_API kiln_tensor kiln_NAME(` and the KILN_UNARY_(NAME) family of macros */
        static const char *const marks[] = {"KILN_API kiln_tensor kiln_", "KILN_UNARY_(",
                                            "KILN_BINARY_(", "KILN_REDUCE_("};
        for (size_t m = 0; m < 4; m++) {
            for (const char *p = strstr(line, marks[m]); p; p = strstr(p, marks[m])) {
                p += strlen(marks[m]);
                char name[64];
                size_t n = 0;
                while ((isalnum((unsigned char)p[n]) || p[n] == '_') && n + 1 < sizeof name) {
                    name[n] = p[n];
                    n++;
                }
                name[n] = 0;
                if (n == 0 || strcmp(name, "name") == 0) /* the macros' own definitions */
                    continue;
                found++;
                ck_assert_msg(is_helper(name) || ir_op_from_name(name, n) >= 0,
                              "kiln.h declares kiln_%s, which is no op of ops.def", name);
            }
        }
    }
    fclose(f);
    /* every op but the sources is declared through these forms; a parse that found few
     * of them is a broken test, not a clean header */
    ck_assert_int_ge(found, IR_OP_COUNT - 4);
}
END_TEST

/* kiln_graph_parse_named: the source's name in the message, the graph the same as
 * kiln_graph_parse's, the argument errors of kiln_graph_parse. */
START_TEST(test_parse_named)
{
    static const char good[] = "graph g(x: f32[4]) -> (y: f32[4]) {\n  y = exp(x)\n}\n";
    static const char bad[] = "graph g(x: f32[4]) -> (y: f32[4]) {\n  y = exp(x\n}\n";
    kiln_graph *a = NULL, *b = NULL;
    ck_assert_int_eq(kiln_graph_parse_named(good, sizeof good - 1, "model.kiln", &a), KILN_OK);
    ck_assert_int_eq(kiln_graph_parse(good, sizeof good - 1, &b), KILN_OK);
    ck_assert_int_eq(kiln_graph_equal(a, b), 1);
    ck_assert_int_eq(kiln_graph_free(a), KILN_OK);
    ck_assert_int_eq(kiln_graph_free(b), KILN_OK);

    a = (kiln_graph *)&b; /* set to NULL on failure */
    ck_assert_int_eq(kiln_graph_parse_named(bad, sizeof bad - 1, "model.kiln", &a),
                     KILN_ERR_PARSE);
    ck_assert_ptr_null(a);
    ck_assert_int_eq(kiln_errcode(), KILN_ERR_PARSE);
    ck_assert_str_eq(kiln_errmsg(), "kiln_graph_parse: parse error: model.kiln:3:1: "
                                    "expected ')', got '}'");
    ck_assert_int_eq(kiln_graph_parse_named(bad, sizeof bad - 1, NULL, &a), KILN_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(kiln_errmsg(), ": <input>:3:1: "));
    ck_assert_int_eq(kiln_graph_parse(bad, sizeof bad - 1, &a), KILN_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(kiln_errmsg(), ": <input>:3:1: "));

    ck_assert_int_eq(kiln_graph_parse_named(NULL, 0, "m", &a), KILN_ERR_INVALID_ARG);
    ck_assert_str_eq(kiln_errmsg(), "kiln_graph_parse: invalid argument: text is NULL");
    ck_assert_int_eq(kiln_graph_parse_named(good, sizeof good - 1, "m", NULL),
                     KILN_ERR_INVALID_ARG);
    ck_assert_str_eq(kiln_errmsg(), "kiln_graph_parse: invalid argument: out is NULL");
}
END_TEST

/* kiln_host_info_get: the facts kiln --version prints, filled and plausible. */
START_TEST(test_host_info)
{
    kiln_host_info h = KILN_HOST_INFO_INIT;
    ck_assert_int_eq(kiln_host_info_get(&h), KILN_OK);
    ck_assert_uint_eq(h.size, sizeof h);
    ck_assert_ptr_nonnull(h.cpu);
    ck_assert_ptr_nonnull(h.features);
    ck_assert_ptr_nonnull(h.triple);
    ck_assert_ptr_nonnull(h.llvm_version);
    ck_assert_msg(strncmp(h.llvm_version, "19.", 3) == 0, "LLVM %s", h.llvm_version);
    ck_assert_msg(h.vector_bits == 128 || h.vector_bits == 256 || h.vector_bits == 512,
                  "vector_bits %d", h.vector_bits);
    ck_assert_uint_gt(h.llc_bytes, 0);
    ck_assert_ptr_nonnull(h.llc_source);
    ck_assert_msg(strcmp(h.llc_source, "sysfs") == 0 || strcmp(h.llc_source, "sysconf") == 0 ||
                      strcmp(h.llc_source, "default") == 0,
                  "llc_source %s", h.llc_source);
    /* detected once: a second call gives the same strings */
    kiln_host_info again = KILN_HOST_INFO_INIT;
    ck_assert_int_eq(kiln_host_info_get(&again), KILN_OK);
    ck_assert_ptr_eq(again.cpu, h.cpu);
    ck_assert_int_eq(again.vector_bits, h.vector_bits);
}
END_TEST

/* kiln_jit_cache_drop: what no program holds is gone (the next compile does the work
 * again, from the disk cache or LLVM); a live program keeps running. */
START_TEST(test_cache_drop)
{
    static const char text[] = "graph g(x: f32[100]) -> (y: f32[100]) {\n  y = exp(x)\n}\n";
    kiln_graph *g = NULL;
    ck_assert_int_eq(kiln_graph_parse(text, sizeof text - 1, &g), KILN_OK);
    kiln_program *p = NULL, *live = NULL;
    ck_assert_int_eq(kiln_program_compile(g, NULL, &p), KILN_OK);
    ck_assert_int_eq(kiln_program_free(p), KILN_OK);
    kiln_stats a = KILN_STATS_INIT, b = KILN_STATS_INIT, c = KILN_STATS_INIT;
    ck_assert_int_eq(kiln_jit_stats(&a), KILN_OK);
    ck_assert_uint_gt(a.kernel_entries, 0);

    kiln_jit_cache_drop();
    ck_assert_int_eq(kiln_jit_stats(&b), KILN_OK);
    ck_assert_uint_eq(b.kernel_entries, 0);
    ck_assert_uint_eq(b.kernel_bytes, 0);
    ck_assert_uint_eq(b.workspace_bytes, 0);

    /* compiled again: neither the program nor its kernel is found in memory */
    ck_assert_int_eq(kiln_program_compile(g, NULL, &live), KILN_OK);
    ck_assert_int_eq(kiln_jit_stats(&c), KILN_OK);
    ck_assert_uint_eq(c.plan_hits, b.plan_hits);
    ck_assert_uint_eq(c.kernel_hits, b.kernel_hits);
    ck_assert_uint_gt(c.kernel_compiles + c.disk_hits, b.kernel_compiles + b.disk_hits);

    /* a program held across a drop keeps its code */
    kiln_jit_cache_drop();
    float x[100], y[100];
    for (int i = 0; i < 100; i++)
        x[i] = (float)i / 50 - 1;
    const void *in[1] = {x};
    void *out[1] = {y};
    ck_assert_int_eq(kiln_program_run(live, in, out), KILN_OK);
    for (int i = 0; i < 100; i++)
        ck_assert_msg(fabs(y[i] - exp(x[i])) <= 1e-6 * exp(x[i]), "y[%d] = %g", i, y[i]);
    ck_assert_int_eq(kiln_program_free(live), KILN_OK);
    ck_assert_int_eq(kiln_graph_free(g), KILN_OK);
}
END_TEST

static Suite *
api_suite(void)
{
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("header");
    tcase_add_test(tc, test_every_op_has_an_entry_point);
    tcase_add_test(tc, test_header_declares_only_table_ops);
    suite_add_tcase(s, tc);
    tc = tcase_create("functions");
    tcase_add_test(tc, test_parse_named);
    tcase_add_test(tc, test_host_info);
    tcase_add_test(tc, test_cache_drop);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return ts_run(api_suite());
}
