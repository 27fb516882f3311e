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
 *    through the graph (tools/kiln/errbound.h) from the reference interpreter's values,
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
 * Graphs: softmax (a rows reduction that spills its exp to a scratch row: issue 26,
 * defect 3); a column sum (blocks of columns: defect 4).
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    ts_bufs in;
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
        kiln_value_info vi;
        kiln_graph_input(o->g, k, &vi);
        ts_random_elements(&r, vi.dtype, o->in.buf[k], vi.count, true);
    }
    bool inexact[TS_MAXIO];
    int nout = kiln_graph_num_outputs(o->g);
    ck_assert_int_le(nout, TS_MAXIO);
    ts_outputs_inexact(o->g, inexact);
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
    ts_bufs got = {0}, want = {0};
    char *err = ts_run_mode(o->g, KILN_MODE_INTERP, &o->in, &want, 0);
    ck_assert_msg(err == NULL, "interpreter: %s", err);
    got.n = nout;
    kiln_value_info info[TS_MAXIO];
    for (int i = 0; i < nout; i++) {
        kiln_graph_output(o->g, i, &info[i]);
        got.buf[i] = malloc(info[i].bytes + 1);
        ck_assert_ptr_nonnull(got.buf[i]);
        memset(got.buf[i], 0xa5, info[i].bytes + 1);
    }
    size_t bad = 0;
    *run_st = kiln_program_run(p, (const void *const *)o->in.buf, got.buf);
    if (*run_st == KILN_OK)
        for (int i = 0; i < nout; i++)
            bad += ts_compare(f, info[i].name, info[i].dtype, info[i].count, got.buf[i], want.buf[i],
                              &o->tols[i]);
    fclose(f);
    ts_bufs_free(&got);
    ts_bufs_free(&want);
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
    kiln_options opt = {.mode = mode};
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
        kiln_options opt = {.mode = mode};
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

static Suite *
oom_suite(void)
{
    Suite *s = suite_create("oom");
    TCase *tc = tcase_create("compile");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_softmax_compile);
    tcase_add_test(tc, test_colsum_compile);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return ts_run(oom_suite());
}
