/* check_abi.c — the versioned public structs and the return conventions (docs/abi.md),
 * seen as a client sees them: through kiln.h only.
 *
 * A program compiled against an older kiln.h has smaller structs.  Each test here declares
 * such an older layout locally ("v1": `size` and the first fields only), places it in a
 * buffer with poisoned guard bytes behind it, and checks that the library fills the fields
 * the old layout has, with the values a current caller gets, and writes nothing past them
 * (before structs carried their size, kiln_jit_stats overwrote 120 bytes of such a
 * caller's memory).  The other way round, a newer caller's larger kiln_options is read as
 * far as this library knows and refused when it sets a field past that; a size of 0 (a
 * zeroed struct) or one too small for the first field is KILN_ERR_INVALID_ARG, with
 * nothing written. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "kiln.h"
#include "support.h"

enum { GUARD = 256, POISON = 0xa5 };

/* A block holding an old-layout struct of `size` bytes and GUARD poisoned bytes after it;
 * the struct's own bytes after its size field are poisoned too (the library must fill or
 * leave them, never read them as input). */
static unsigned char *
block(size_t size)
{
    unsigned char *b = malloc(size + GUARD);
    ck_assert_ptr_nonnull(b);
    memset(b, POISON, size + GUARD);
    memcpy(b, &size, sizeof size);
    return b;
}

/* Nothing of the block past `from` (up to size + GUARD) was written. */
static void
assert_untouched(const unsigned char *b, size_t from, size_t to, const char *what)
{
    for (size_t i = from; i < to; i++)
        ck_assert_msg(b[i] == POISON, "%s: byte %zu (of %zu) written: 0x%02x", what, i, to,
                      b[i]);
}

static kiln_graph *
graph(void)
{
    static const char text[] = "graph g(x: f32[64]) -> (y: f32[64]) {\n  y = exp(x)\n}\n";
    kiln_graph *g = NULL;
    ck_assert_int_eq(kiln_graph_parse(text, sizeof text - 1, &g), KILN_OK);
    return g;
}

/* Compile something so the counters are not all 0. */
static void
compile_one(void)
{
    kiln_graph *g = graph();
    kiln_program *p = NULL;
    kiln_options o = KILN_OPTIONS_INIT;
    o.flags = KILN_NO_CACHE;
    ck_assert_int_eq(kiln_program_compile(g, &o, &p), KILN_OK);
    ck_assert_int_eq(kiln_program_free(p), KILN_OK);
    ck_assert_int_eq(kiln_graph_free(g), KILN_OK);
}

/* kiln_stats as its first version would have it: three counters. */
typedef struct stats_v1 {
    size_t size;
    uint64_t kernel_compiles, kernel_hits, plan_hits;
} stats_v1;

START_TEST(test_stats_old_layout)
{
    compile_one();
    unsigned char *b = block(sizeof(stats_v1));
    ck_assert_int_eq(kiln_jit_stats((kiln_stats *)(void *)b), KILN_OK);
    kiln_stats now = KILN_STATS_INIT;
    ck_assert_int_eq(kiln_jit_stats(&now), KILN_OK);
    stats_v1 v;
    memcpy(&v, b, sizeof v);
    ck_assert_uint_eq(v.size, sizeof(stats_v1)); /* the size field is the caller's */
    ck_assert_uint_ge(v.kernel_compiles, 1);
    ck_assert_uint_eq(v.kernel_compiles, now.kernel_compiles);
    ck_assert_uint_eq(v.kernel_hits, now.kernel_hits);
    ck_assert_uint_eq(v.plan_hits, now.plan_hits);
    ck_assert_uint_lt(sizeof(stats_v1), sizeof(kiln_stats));
    assert_untouched(b, sizeof(stats_v1), sizeof(stats_v1) + GUARD, "kiln_jit_stats, v1 layout");
    free(b);

    /* a size that ends inside a field: the bytes up to it, no further */
    size_t odd = offsetof(kiln_stats, kernel_hits) + 3;
    b = block(odd);
    ck_assert_int_eq(kiln_jit_stats((kiln_stats *)(void *)b), KILN_OK);
    assert_untouched(b, odd, odd + GUARD, "kiln_jit_stats, size inside a field");
    free(b);
}
END_TEST

/* A newer caller's struct, larger than the library's: the library fills its own fields and
 * leaves the rest as the caller set it. */
START_TEST(test_stats_newer_layout)
{
    compile_one();
    size_t size = sizeof(kiln_stats) + 64;
    unsigned char *b = block(size);
    ck_assert_int_eq(kiln_jit_stats((kiln_stats *)(void *)b), KILN_OK);
    kiln_stats got;
    memcpy(&got, b, sizeof got);
    ck_assert_uint_eq(got.size, size);
    ck_assert_uint_ge(got.kernel_compiles, 1);
    ck_assert_int_ge(got.threads, 1);
    assert_untouched(b, sizeof(kiln_stats), size + GUARD, "kiln_jit_stats, newer layout");
    free(b);
}
END_TEST

/* Size 0 (a zeroed struct, or a caller that forgot) and a size too small for the first
 * field: KILN_ERR_INVALID_ARG, nothing written. */
START_TEST(test_size_too_small)
{
    static const size_t sizes[] = {0, sizeof(size_t), sizeof(size_t) + 7};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        unsigned char *b = block(sizeof(kiln_cache_info));
        memcpy(b, &sizes[k], sizeof sizes[k]);
        ck_assert_int_eq(kiln_jit_stats((kiln_stats *)(void *)b), KILN_ERR_INVALID_ARG);
        ts_assert_error(KILN_ERR_INVALID_ARG, "kiln_jit_stats: invalid argument: kiln_stats.size is");
        ck_assert_int_eq(kiln_cache_info_get((kiln_cache_info *)(void *)b), KILN_ERR_INVALID_ARG);
        ts_assert_error(KILN_ERR_INVALID_ARG,
                        "kiln_cache_info_get: invalid argument: kiln_cache_info.size is");
        ck_assert_int_eq(kiln_host_info_get((kiln_host_info *)(void *)b), KILN_ERR_INVALID_ARG);
        ts_assert_error(KILN_ERR_INVALID_ARG,
                        "kiln_host_info_get: invalid argument: kiln_host_info.size is");
        kiln_graph *g = graph();
        ck_assert_int_eq(kiln_graph_input(g, 0, (kiln_value_info *)(void *)b),
                         KILN_ERR_INVALID_ARG);
        ts_assert_error(KILN_ERR_INVALID_ARG,
                        "kiln_graph_input: invalid argument: kiln_value_info.size is");
        ck_assert_int_eq(kiln_graph_output(g, 0, (kiln_value_info *)(void *)b),
                         KILN_ERR_INVALID_ARG);
        kiln_graph_free(g);
        assert_untouched(b, sizeof(size_t), sizeof(kiln_cache_info) + GUARD, "size too small");
        free(b);
    }
    ck_assert_int_eq(kiln_jit_stats(NULL), KILN_ERR_INVALID_ARG);
    ck_assert_int_eq(kiln_cache_info_get(NULL), KILN_ERR_INVALID_ARG);
    ck_assert_int_eq(kiln_host_info_get(NULL), KILN_ERR_INVALID_ARG);
}
END_TEST

/* kiln_value_info's first version: size and name. */
typedef struct value_info_v1 {
    size_t size;
    const char *name;
} value_info_v1;

START_TEST(test_value_info_old_layout)
{
    kiln_graph *g = graph();
    unsigned char *b = block(sizeof(value_info_v1));
    ck_assert_int_eq(kiln_graph_output(g, 0, (kiln_value_info *)(void *)b), KILN_OK);
    value_info_v1 v;
    memcpy(&v, b, sizeof v);
    ck_assert_str_eq(v.name, "y");
    assert_untouched(b, sizeof(value_info_v1), sizeof(value_info_v1) + GUARD,
                     "kiln_graph_output, v1 layout");
    free(b);
    kiln_value_info full = KILN_VALUE_INFO_INIT;
    ck_assert_int_eq(kiln_graph_input(g, 0, &full), KILN_OK);
    ck_assert_str_eq(full.name, "x");
    ck_assert_int_eq(full.rank, 1);
    ck_assert_int_eq(full.dims[0], 64);
    ck_assert_uint_eq(full.bytes, 256);
    kiln_graph_free(g);
}
END_TEST

/* kiln_cache_info's first version: size and path. */
typedef struct cache_info_v1 {
    size_t size;
    char path[4096];
} cache_info_v1;

START_TEST(test_cache_info_old_layout)
{
    unsigned char *b = block(sizeof(cache_info_v1));
    ck_assert_int_eq(kiln_cache_info_get((kiln_cache_info *)(void *)b), KILN_OK);
    kiln_cache_info now = KILN_CACHE_INFO_INIT;
    ck_assert_int_eq(kiln_cache_info_get(&now), KILN_OK);
    ck_assert_str_eq((const char *)b + offsetof(cache_info_v1, path), now.path);
    assert_untouched(b, sizeof(cache_info_v1), sizeof(cache_info_v1) + GUARD,
                     "kiln_cache_info_get, v1 layout");
    free(b);
}
END_TEST

/* kiln_host_info as a first version would have it: size and the CPU's name. */
typedef struct host_info_v1 {
    size_t size;
    const char *cpu;
} host_info_v1;

START_TEST(test_host_info_old_layout)
{
    unsigned char *b = block(sizeof(host_info_v1));
    ck_assert_int_eq(kiln_host_info_get((kiln_host_info *)(void *)b), KILN_OK);
    kiln_host_info now = KILN_HOST_INFO_INIT;
    ck_assert_int_eq(kiln_host_info_get(&now), KILN_OK);
    const char *cpu;
    memcpy(&cpu, b + offsetof(host_info_v1, cpu), sizeof cpu);
    ck_assert_ptr_eq(cpu, now.cpu);
    assert_untouched(b, sizeof(host_info_v1), sizeof(host_info_v1) + GUARD,
                     "kiln_host_info_get, v1 layout");
    free(b);
}
END_TEST

/* kiln_options' first version: size and mode.  The library reads those and takes the
 * defaults for the rest, whatever the caller's memory holds past them. */
typedef struct options_v1 {
    size_t size;
    kiln_mode mode;
} options_v1;

START_TEST(test_options_old_layout)
{
    kiln_graph *g = graph();
    unsigned char *b = block(sizeof(options_v1));
    options_v1 v = {sizeof v, KILN_MODE_EAGER};
    memcpy(b, &v, sizeof v);
    kiln_program *p = NULL;
    /* the poison past the v1 struct would be flags, names and a bad stores value if read */
    ck_assert_int_eq(kiln_program_compile(g, (const kiln_options *)(void *)b, &p), KILN_OK);
    ck_assert_int_eq(kiln_program_mode(p), KILN_MODE_EAGER);
    kiln_program_free(p);
    free(b);
    kiln_graph_free(g);
}
END_TEST

/* A newer caller's larger kiln_options: zero past the library's struct is fine (fields
 * left at their defaults), anything else is a field this library cannot honour. */
START_TEST(test_options_newer_layout)
{
    kiln_graph *g = graph();
    size_t size = sizeof(kiln_options) + 16;
    unsigned char *b = calloc(1, size);
    ck_assert_ptr_nonnull(b);
    kiln_options o = KILN_OPTIONS_INIT;
    o.size = size;
    o.mode = KILN_MODE_INTERP;
    memcpy(b, &o, sizeof o);
    kiln_program *p = NULL;
    ck_assert_int_eq(kiln_program_compile(g, (const kiln_options *)(void *)b, &p), KILN_OK);
    ck_assert_int_eq(kiln_program_mode(p), KILN_MODE_INTERP);
    kiln_program_free(p);
    b[sizeof(kiln_options) + 5] = 1;
    p = (kiln_program *)(void *)b;
    ck_assert_int_eq(kiln_program_compile(g, (const kiln_options *)(void *)b, &p),
                     KILN_ERR_UNSUPPORTED);
    ck_assert_ptr_null(p);
    ts_assert_error(KILN_ERR_UNSUPPORTED, "kiln_program_compile: unsupported: kiln_options.size");
    free(b);
    kiln_graph_free(g);
}
END_TEST

/* A zeroed kiln_options (size 0) is an error, not the defaults (NULL is the defaults); the
 * scope still ends and its device is free again.  Unknown flag bits are an error too. */
START_TEST(test_options_errors)
{
    kiln_graph *g = graph();
    kiln_program *p = NULL;
    kiln_options zero;
    memset(&zero, 0, sizeof zero);
    ck_assert_int_eq(kiln_program_compile(g, &zero, &p), KILN_ERR_INVALID_ARG);
    ts_assert_error(KILN_ERR_INVALID_ARG,
                    "kiln_program_compile: invalid argument: kiln_options.size is 0");
    ck_assert_ptr_null(p);
    ck_assert_int_eq(kiln_program_compile(g, NULL, &p), KILN_OK);
    ck_assert_int_eq(kiln_program_mode(p), KILN_MODE_FUSED);
    kiln_program_free(p);
    kiln_options o = KILN_OPTIONS_INIT;
    o.flags = 8; /* once KILN_STREAM, now kiln_options.stores */
    ck_assert_int_eq(kiln_program_compile(g, &o, &p), KILN_ERR_INVALID_ARG);
    ts_assert_error(KILN_ERR_INVALID_ARG, "kiln_program_compile: invalid argument: flags 0x8");
    kiln_graph_free(g);

    kiln_device *dev = kiln_device_new();
    int64_t dims[1] = {4};
    for (int k = 0; k < 2; k++) {
        kiln_scope s = kiln_scope_begin(dev);
        ck_assert(!kiln_scope_is_null(s));
        kiln_tensor x = kiln_input(dev, "x", KILN_DTYPE_F32, 1, dims);
        kiln_tensor y = kiln_neg(x);
        if (k == 0) {
            ck_assert_int_eq(kiln_scope_end(s, 1, &y, &zero, &p), KILN_ERR_INVALID_ARG);
            ts_assert_error(KILN_ERR_INVALID_ARG,
                            "kiln_scope_end: invalid argument: kiln_options.size is 0");
        } else {
            kiln_graph *cg = NULL;
            ck_assert_int_eq(kiln_scope_end_graph(s, 1, &y, &zero, &cg), KILN_ERR_INVALID_ARG);
            ck_assert_ptr_null(cg);
        }
        ck_assert_ptr_null(p);
        ck_assert_int_eq(kiln_scope_end(s, 1, &y, NULL, &p), KILN_ERR_SCOPE_CLOSED);
    }
    ck_assert_int_eq(kiln_device_free(dev), KILN_OK); /* no scope left open */
}
END_TEST

/* Every _free returns a kiln_status: KILN_OK for NULL and for a live object, the reason
 * when nothing was freed. */
START_TEST(test_free_returns_status)
{
    ck_assert_int_eq(kiln_graph_free(NULL), KILN_OK);
    ck_assert_int_eq(kiln_program_free(NULL), KILN_OK);
    ck_assert_int_eq(kiln_device_free(NULL), KILN_OK);
    kiln_graph *g = graph();
    kiln_program *p = NULL;
    ck_assert_int_eq(kiln_program_compile(g, NULL, &p), KILN_OK);
    ck_assert_int_eq(kiln_program_free(p), KILN_OK);
    ck_assert_int_eq(kiln_program_free(p), KILN_ERR_MISUSE);
    ts_assert_error(KILN_ERR_MISUSE, "kiln_program_free: invalid handle");
    ck_assert_int_eq(kiln_graph_free(g), KILN_OK);
    ck_assert_int_eq(kiln_graph_free(g), KILN_ERR_MISUSE);
    ts_assert_error(KILN_ERR_MISUSE, "kiln_graph_free: invalid handle");
    kiln_device *d = kiln_device_new();
    kiln_scope s = kiln_scope_begin(d);
    ck_assert_int_eq(kiln_device_free(d), KILN_ERR_SCOPE_ACTIVE);
    kiln_scope_abort(s);
    ck_assert_int_eq(kiln_device_free(d), KILN_OK);
    ck_assert_int_eq(kiln_device_free(d), KILN_ERR_MISUSE);
}
END_TEST

static Suite *
abi_suite(void)
{
    Suite *s = suite_create("abi");
    TCase *tc = tcase_create("versioned structs");
    tcase_add_test(tc, test_stats_old_layout);
    tcase_add_test(tc, test_stats_newer_layout);
    tcase_add_test(tc, test_size_too_small);
    tcase_add_test(tc, test_value_info_old_layout);
    tcase_add_test(tc, test_cache_info_old_layout);
    tcase_add_test(tc, test_host_info_old_layout);
    tcase_add_test(tc, test_options_old_layout);
    tcase_add_test(tc, test_options_newer_layout);
    tcase_add_test(tc, test_options_errors);
    tcase_add_test(tc, test_free_returns_status);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return ts_run(abi_suite());
}
