/*
 * check_oom.c — allocation failures during compile and run (issue 26), as SQLite tests
 * them: the library's fail-the-Nth-allocation hook (lib/ir/alloc.c) makes exactly one of
 * kiln's own allocations fail, the first, then the second, and so on, until a call with
 * the failure armed makes no allocation past it.  LLVM's allocations are not kiln's (an
 * allocation failure inside LLVM is fatal, include/kiln.h says so).
 *
 * At every failure point:
 *  - the call returns KILN_ERR_NOMEM with an "out of memory" message, or succeeds, and
 *    then its results are right: every output within the bound `kiln check` propagates
 *    through the graph (lib/check/errbound.h) from the reference interpreter's values,
 *    exact where no inexact op feeds it;
 *  - nothing crashes or aborts (the suite runs with CK_FORK=no: a crash fails it);
 *  - the next call in the same process, with nothing failing, compiles and runs right
 *    (a failure must not leave a bad plan or kernel in a cache).
 * The in-memory caches are emptied before each failing call, so every call plans, lowers
 * and compiles from scratch (the disk cache is off: KILN_CACHE_DIR=off).
 *
 * Test-only hooks used: ir_test_fail_alloc_once, ir_test_fail_pending (lib/ir/ir.h),
 * jit_plan_cache_trim and jit_cache_trim (lib/jit/jit.h).
 *
 * Compiles (the in-memory caches emptied before each): softmax (a rows reduction that
 * spills its exp to a scratch row: issue 26, defect 3), a column sum (blocks of columns:
 * defect 4), a contraction with an epilogue, concat/gather/pad, fused and eager; and the
 * same compiles served from the disk cache (a private directory).  Runs (a fresh program
 * each, its compile not failing): rows reductions with scratch rows and with pieces over
 * the threads, a split column sum, contractions (packing), indexed loads.
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jit.h"
#include "oracle.h"
#include "randgraph.h"
#include "support.h"

/* Forget every compiled program and kernel of this process (as a new process would). */
static void
drop_memory_caches(void)
{
    jit_plan_cache_trim();
    jit_cache_trim();
}

/* A graph under test: its inputs (random, tame) and per output the tolerance. */
typedef struct oom_graph {
    kiln_graph *g;
    ts_bufs in, want; /* want: the interpreter's outputs */
    ts_bounds b;
    ts_tol tols[TS_MAXIO];
} oom_graph;

static void
oom_graph_init(oom_graph *o, const char *text, uint64_t seed)
{
    memset(o, 0, sizeof *o);
    o->g = ts_parse(text);
    ts_bufs_for_inputs(o->g, &o->in);
    ts_rng r;
    ts_rng_seed(&r, ts_base_seed(seed));
    for (int k = 0; k < o->in.n; k++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_input(o->g, k, &vi);
        ts_random_elements(&r, vi.dtype, o->in.buf[k], vi.count, true);
    }
    bool inexact[TS_MAXIO];
    int nout = kiln_graph_num_outputs(o->g);
    ck_assert_int_le(nout, TS_MAXIO);
    ts_outputs_inexact(o->g, inexact);
    char *err = ts_run_mode(o->g, KILN_MODE_INTERP, &o->in, &o->want, 0);
    ck_assert_msg(err == NULL, "interpreter: %s", err);
    ts_bounds_for(o->g, &o->in, inexact, &o->b);
    for (int k = 0; k < nout; k++)
        o->tols[k] = inexact[k] ? (ts_tol){.kind = TS_TOL_BOUND, .bound = o->b.bound[k]}
                                : (ts_tol){.kind = TS_TOL_EXACT};
}

static void
oom_graph_free(oom_graph *o)
{
    ts_bounds_free(&o->b);
    ts_bufs_free(&o->in);
    ts_bufs_free(&o->want);
    kiln_graph_free(o->g);
}

/* Run program p on o's inputs and compare with the interpreter; NULL or a report. */
static char *
run_and_compare(const oom_graph *o, kiln_program *p, kiln_status *run_st)
{
    char *rep = NULL;
    size_t replen = 0;
    FILE *f = open_memstream(&rep, &replen);
    ck_assert_ptr_nonnull(f);
    int nout = kiln_graph_num_outputs(o->g);
    ts_bufs got = {0};
    got.n = nout;
    kiln_value_info info[TS_MAXIO];
    for (int i = 0; i < nout; i++) {
        info[i] = (kiln_value_info)KILN_VALUE_INFO_INIT;
        kiln_graph_output(o->g, i, &info[i]);
        got.buf[i] = malloc(info[i].bytes + 1);
        ck_assert_ptr_nonnull(got.buf[i]);
        memset(got.buf[i], 0xa5, info[i].bytes + 1);
    }
    size_t bad = 0;
    *run_st = kiln_program_run(p, (const void *const *)o->in.buf, got.buf);
    if (*run_st == KILN_OK)
        for (int i = 0; i < nout; i++)
            bad += ts_compare(f, info[i].name, info[i].dtype, info[i].count, got.buf[i],
                              o->want.buf[i], &o->tols[i]);
    fclose(f);
    ts_bufs_free(&got);
    if (!bad) {
        free(rep);
        return NULL;
    }
    return rep;
}

/* Compile o's graph in `mode` with nothing failing, run it and compare. */
static void
check_works(const oom_graph *o, kiln_mode mode, const char *ctx)
{
    kiln_options opt = KILN_OPTIONS_INIT;
    opt.mode = mode;
    kiln_program *p = NULL;
    kiln_status st = kiln_program_compile(o->g, &opt, &p);
    ck_assert_msg(st == KILN_OK, "%s: the next compile failed: %s", ctx, kiln_errmsg());
    kiln_status rst;
    char *rep = run_and_compare(o, p, &rst);
    ck_assert_msg(rst == KILN_OK, "%s: the next run failed: %s", ctx, kiln_errmsg());
    ck_assert_msg(rep == NULL, "%s: the next run differs:\n%s", ctx, rep);
    kiln_program_free(p);
}

/* A failed call's status and message. */
static void
assert_nomem(kiln_status st, const char *ctx, long n)
{
    ck_assert_msg(st == KILN_ERR_NOMEM, "%s, allocation %ld failing: %s: %s", ctx, n,
                  kiln_status_str(st), kiln_errmsg());
    ck_assert_msg(strstr(kiln_errmsg(), "out of memory") != NULL, "%s, allocation %ld: %s", ctx, n,
                  kiln_errmsg());
}

/* Compile (and run what compiled) with allocation n failing, for every n; returns the
 * number of failure points.  min_failures: the sweep must have reached that many. */
static long
sweep_compile(const char *text, kiln_mode mode, uint64_t seed, long min_failures)
{
    oom_graph o;
    oom_graph_init(&o, text, seed);
    char ctx[96];
    snprintf(ctx, sizeof ctx, "graph %s, %s compile", kiln_graph_name(o.g),
             mode == KILN_MODE_FUSED ? "fused" : "eager");
    long n, nomem = 0, ok = 0;
    for (n = 0; n < 1000000; n++) {
        drop_memory_caches();
        kiln_clear_error();
        kiln_options opt = KILN_OPTIONS_INIT;
        opt.mode = mode;
        kiln_program *p = NULL;
        ir_test_fail_alloc_once(n);
        kiln_status st = kiln_program_compile(o.g, &opt, &p);
        bool fired = !ir_test_fail_pending();
        ir_test_fail_alloc_after(-1);
        if (st == KILN_OK) {
            ck_assert_ptr_nonnull(p);
            kiln_status rst;
            char *rep = run_and_compare(&o, p, &rst);
            ck_assert_msg(rst == KILN_OK, "%s, allocation %ld failed: compiled, then the run "
                          "failed: %s", ctx, n, kiln_errmsg());
            ck_assert_msg(rep == NULL, "%s, allocation %ld failed: compiled, results differ:\n%s",
                          ctx, n, rep);
            ok += fired;
        } else {
            ck_assert_ptr_null(p);
            assert_nomem(st, ctx, n);
            nomem++;
        }
        kiln_program_free(p);
        if (!fired)
            break;
        check_works(&o, mode, ctx);
    }
    fprintf(stderr, "check_oom: %s: %ld allocations, %ld failures gave KILN_ERR_NOMEM, %ld a "
            "correct program\n", ctx, n, nomem, ok);
    ck_assert_msg(n >= min_failures, "%s: only %ld allocations", ctx, n);
    oom_graph_free(&o);
    return n;
}

/* Run a program of o's graph with allocation n failing, for every n (a fresh program each
 * time, planned anew with nothing failing, its kernels from the in-memory cache: a
 * compiled program keeps what its first run allocated). */
static long
sweep_run(const char *text, kiln_mode mode, uint64_t seed, long min_failures)
{
    oom_graph o;
    oom_graph_init(&o, text, seed);
    char ctx[96];
    snprintf(ctx, sizeof ctx, "graph %s, %s run", kiln_graph_name(o.g),
             mode == KILN_MODE_FUSED ? "fused" : "eager");
    long n, nomem = 0, ok = 0;
    for (n = 0; n < 1000000; n++) {
        kiln_options opt = KILN_OPTIONS_INIT;
        opt.mode = mode;
        kiln_program *p = NULL;
        jit_plan_cache_trim();
        ck_assert_msg(kiln_program_compile(o.g, &opt, &p) == KILN_OK, "%s: %s", ctx, kiln_errmsg());
        kiln_clear_error();
        ir_test_fail_alloc_once(n);
        kiln_status rst;
        char *rep = run_and_compare(&o, p, &rst);
        bool fired = !ir_test_fail_pending();
        ir_test_fail_alloc_after(-1);
        if (rst == KILN_OK) {
            ck_assert_msg(rep == NULL, "%s, allocation %ld failed: results differ:\n%s", ctx, n, rep);
            ok += fired;
        } else {
            assert_nomem(rst, ctx, n);
            nomem++;
            free(rep);
        }
        /* the next run of the same program works */
        rep = run_and_compare(&o, p, &rst);
        ck_assert_msg(rst == KILN_OK, "%s, after allocation %ld failed: the next run failed: %s",
                      ctx, n, kiln_errmsg());
        ck_assert_msg(rep == NULL, "%s, after allocation %ld failed: the next run differs:\n%s",
                      ctx, n, rep);
        kiln_program_free(p);
        if (!fired)
            break;
    }
    fprintf(stderr, "check_oom: %s: %ld allocations, %ld failures gave KILN_ERR_NOMEM, %ld a "
            "correct result\n", ctx, n, nomem, ok);
    ck_assert_msg(n >= min_failures, "%s: only %ld allocations", ctx, n);
    oom_graph_free(&o);
    return n;
}

/* ---- graphs ------------------------------------------------------------------------------ */

static const char softmax_text[] =
    "graph softmax(x: f32[37,300]) -> (y: f32[37,300]) {\n"
    "  m = reduce_max(x, axes=[1], keepdim=true)\n"
    "  d = sub(x, m)\n"
    "  e = exp(d)\n"
    "  s = reduce_sum(e, axes=[1], keepdim=true)\n"
    "  y = div(e, s)\n"
    "}\n";

/* Softmax's kernel spills e to a scratch row in its sum pass and reads it back in the
 * division's; a failed allocation while choosing the spills compiled to KILN_OK with no
 * scratch, and the kernel wrote through a NULL pointer (issue 26, defect 3). */
START_TEST(test_softmax_compile)
{
    sweep_compile(softmax_text, KILN_MODE_FUSED, 0x6f6f6d01, 50);
}
END_TEST

static const char colsum_text[] =
    "graph colsum(x: f32[300,257]) -> (out: f32[257]) {\n"
    "  out = reduce_sum(x, axes=[0])\n"
    "}\n";

/* A column sum reduces blocks of vectors of columns (emit_block), which asserted that its
 * two allocations succeeded: a failure aborted the process (issue 26, defect 4). */
START_TEST(test_colsum_compile)
{
    sweep_compile(colsum_text, KILN_MODE_FUSED, 0x6f6f6d02, 50);
}
END_TEST

/* Runs: softmax rows big enough for the pool (a scratch row per chunk), a long row split
 * into pieces over the threads (partial sums), a column sum split along its rows. */
static const char softmax_big_text[] =
    "graph softmax_big(x: f32[512,1024]) -> (y: f32[512,1024]) {\n"
    "  m = reduce_max(x, axes=[1], keepdim=true)\n"
    "  d = sub(x, m)\n"
    "  e = exp(d)\n"
    "  s = reduce_sum(e, axes=[1], keepdim=true)\n"
    "  y = div(e, s)\n"
    "}\n";
static const char long_row_text[] =
    "graph long_row(x: f32[2,300000]) -> (s: f32[2,1]) {\n"
    "  s = reduce_sum(x, axes=[1], keepdim=true)\n"
    "}\n";
static const char colsum_big_text[] =
    "graph colsum_big(x: f32[4096,256]) -> (out: f32[256]) {\n"
    "  out = reduce_sum(x, axes=[0])\n"
    "}\n";

START_TEST(test_reduction_runs)
{
    sweep_run(softmax_text, KILN_MODE_FUSED, 0x6f6f6d11, 1);
    sweep_run(softmax_big_text, KILN_MODE_FUSED, 0x6f6f6d12, 1);
    sweep_run(softmax_big_text, KILN_MODE_EAGER, 0x6f6f6d13, 1);
    sweep_run(long_row_text, KILN_MODE_FUSED, 0x6f6f6d14, 1);
    sweep_run(colsum_big_text, KILN_MODE_FUSED, 0x6f6f6d15, 1);
}
END_TEST

/* A contraction with an epilogue (bias and relu on the accumulator tile), and one with a
 * constant B (packed when the plan is built). */
static const char matmul_text[] =
    "graph mm(a: f32[33,40], b: f32[40,29], bias: f32[29]) -> (y: f32[33,29]) {\n"
    "  m = matmul(a, b)\n"
    "  s = add(m, bias)\n"
    "  z = full(value=0x0p+0) : f32[33,29]\n"
    "  y = max(s, z)\n"
    "}\n";
static const char matmul_batched_text[] =
    "graph mmb(a: f32[3,70,50], b: f32[3,50,40]) -> (y: f32[3,70,40]) {\n"
    "  m = matmul(a, b)\n"
    "  y = tanh(m)\n"
    "}\n";

/* A skinny rows matmul whose K is summed in pieces: the pieces' sums allocated per run. */
static const char matmul_pieces_text[] =
    "graph mmp(a: f32[1,2000], b: f32[2000,100], bias: f32[100]) -> (y: f32[1,100]) {\n"
    "  m = matmul(a, b)\n"
    "  y = add(m, bias)\n"
    "}\n";

START_TEST(test_contraction)
{
    sweep_compile(matmul_text, KILN_MODE_FUSED, 0x6f6f6d21, 50);
    sweep_compile(matmul_text, KILN_MODE_EAGER, 0x6f6f6d22, 50);
    sweep_run(matmul_text, KILN_MODE_FUSED, 0x6f6f6d23, 1);
    sweep_run(matmul_batched_text, KILN_MODE_FUSED, 0x6f6f6d24, 1);
    sweep_run(matmul_pieces_text, KILN_MODE_FUSED, 0x6f6f6d25, 1);
}
END_TEST

/* Indexed loads: concat and gather (and pad) read through their own index arithmetic. */
static const char concat_gather_text[] =
    "graph cg(a: f32[4,3], b: f32[4,5], t: f32[10,8], i: i64[4]) -> (y: f32[4,8], z: f32[4,10]) {\n"
    "  c = concat(a, b, axis=1)\n"
    "  g = gather(t, i, axis=0)\n"
    "  y = add(c, g)\n"
    "  z = pad(y, low=[0,1], high=[0,1], value=0x1p+0)\n"
    "}\n";

START_TEST(test_concat_gather)
{
    sweep_compile(concat_gather_text, KILN_MODE_FUSED, 0x6f6f6d31, 50);
    sweep_compile(concat_gather_text, KILN_MODE_EAGER, 0x6f6f6d32, 50);
    sweep_run(concat_gather_text, KILN_MODE_FUSED, 0x6f6f6d33, 0);
}
END_TEST

/* A program from the disk cache: every compile of the sweep loads softmax's and the
 * contraction's modules from a private directory (no LLVM code generation when nothing
 * fails); a failure may cost the load (a compile from scratch, a rewrite), never the
 * result. */
START_TEST(test_from_disk_cache)
{
    char dir[] = "/tmp/kiln_oom_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(setenv("KILN_CACHE_DIR", dir, 1), 0);
    ir_config_reload(); /* the library reads the environment once */
    static const char *const texts[] = {softmax_text, matmul_text, concat_gather_text};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        /* fill the cache, then sweep compiles that load from it */
        oom_graph o;
        oom_graph_init(&o, texts[k], 0x6f6f6d41);
        drop_memory_caches();
        check_works(&o, KILN_MODE_FUSED, "filling the disk cache");
        oom_graph_free(&o);
        kiln_stats s0 = KILN_STATS_INIT;
        kiln_jit_stats(&s0);
        sweep_compile(texts[k], KILN_MODE_FUSED, 0x6f6f6d42, 10);
        kiln_stats s1 = KILN_STATS_INIT;
        kiln_jit_stats(&s1);
        ck_assert_uint_gt(s1.disk_hits, s0.disk_hits);
    }
    drop_memory_caches();
    uint64_t removed;
    ck_assert_int_eq(kiln_cache_clear(&removed), KILN_OK);
    ck_assert_int_eq(setenv("KILN_CACHE_DIR", "off", 1), 0);
    ir_config_reload();
    char path[64];
    snprintf(path, sizeof path, "%s/CACHEDIR.TAG", dir);
    unlink(path);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

static Suite *
oom_suite(void)
{
    Suite *s = suite_create("oom");
    TCase *tc = tcase_create("compile");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_softmax_compile);
    tcase_add_test(tc, test_colsum_compile);
    tcase_add_test(tc, test_contraction);
    tcase_add_test(tc, test_concat_gather);
    tcase_add_test(tc, test_from_disk_cache);
    suite_add_tcase(s, tc);
    tc = tcase_create("run");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_reduction_runs);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return ts_run(oom_suite());
}
