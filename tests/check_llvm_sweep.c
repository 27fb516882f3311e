/*
 * check_llvm_sweep.c — every unary op fused after every other, in f32 and f64, so that no
 * pattern the optimiser meets on valid input can take the process down (issue 10: f32
 * gelu_erf fused after abs hit "Instruction Combining did not reach a fixpoint", a fatal
 * error in LLVM 19, and killed the host).
 *
 * First stages F: each float unary op, and four expressions the optimiser can prove
 * non-negative or bounded (mul(x, x), clamp(x, 0.25, 1), max(x, 0.25), add(abs(x), 1)).
 * For each dtype and F, through the public API only (kiln_graph_parse,
 * kiln_program_compile, kiln_program_run):
 *   - one graph computes a = F(x) and o_g = g(a) for every unary op g, fused.  `a` is
 *     checked against the reference, and each o_g against g applied to the fused `a`, so
 *     the error of F is not counted twice: exact ops bit for bit against KILN_MODE_INTERP
 *     (any NaN for NaN), vector-math ops within their ULP bound (ir_op_ulp_bound)
 *     against the long double reference of lib/check/refmath.c;
 *   - then, after the first stages the issue found fatal (abs, sqrt, relu and the four
 *     expressions), each pair on its own, `o = g(F(x))` with nothing else in the kernel
 *     (the shape that crashed), fused, must give the same bits as the batched graph's o_g.
 * With the old pipeline the batched graph of abs already dies (checked by hand when this
 * test was written: "LLVM fatal error while optimising module 'kiln_kernel_2'").
 * Inputs: special values (zeros, ±1, ties, subnormals, extremes, ±inf, NaN, switch points
 * of the vector math) and random values over many binades, in a length that leaves a
 * scalar tail after the vector body.
 *
 * The fatal-error handler: a child process (this binary, --fatal-child) compiles the
 * crashing pair with a pipeline swapped in through the test hook jit_engine_test_passes
 * and must die with a message that names the module and the step, not LLVM's bare "LLVM
 * ERROR".  The pipeline is the old one (bare `instcombine`, which verifies its fixpoint)
 * with instcombine allowed no iteration at all: LLVM then raises issue 10's fatal error,
 * "did not reach a fixpoint", on any function instcombine changes.  (The issue's own
 * trigger, f32 gelu_erf widened to the f64 code after abs, is gone since f32 gelu_erf
 * became f32 code; no pair of unary ops trips the bare pipeline any more.)
 */
#include <check.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jit.h"
#include "llvm.h"
#include "refmath.h"
#include "support.h"

extern char **environ;

#define MAXU 40 /* unary ops */
#define NFIRST (MAXU + 4)

/* ---- the ops ------------------------------------------------------------------------- */

static ir_op unary[MAXU];
static int nunary;

/* The float unary ops of the op table (result the operand's dtype). */
static void
collect_unary(void)
{
    if (nunary)
        return;
    for (int op = 0; op < IR_OP_COUNT; op++) {
        const ir_op_info *o = &ir_ops[op];
        if (o->kind == IR_KIND_UNARY && (o->trule == IR_T_FLOAT || o->trule == IR_T_NUM)) {
            ck_assert_int_lt(nunary, MAXU);
            unary[nunary++] = (ir_op)op;
        }
    }
    ck_assert_int_ge(nunary, 20);
}

/* First stage k as graph text computing `a` from x (k < nunary: a unary op). */
static void
first_stage(int k, char *buf, size_t n, const char *dt)
{
    switch (k - nunary) {
    case 0: snprintf(buf, n, "  a = mul(x, x)\n"); break;
    case 1:
        snprintf(buf, n,
                 "  lo = full(value=0.25) : %s[]\n  hi = full(value=1) : %s[]\n"
                 "  a = clamp(x, lo, hi)\n",
                 dt, dt);
        break;
    case 2: snprintf(buf, n, "  c = full(value=0.25) : %s[]\n  a = max(x, c)\n", dt); break;
    case 3:
        snprintf(buf, n, "  ax = abs(x)\n  one = full(value=1) : %s[]\n  a = add(ax, one)\n", dt);
        break;
    default: snprintf(buf, n, "  a = %s(x)\n", ir_ops[unary[k]].name); break;
    }
}

static int
nfirst(void)
{
    return nunary + 4;
}

/* The first stages after which each pair is also compiled alone: those the issue found
 * fatal before gelu_erf (results the optimiser can prove non-negative or bounded). */
static bool
alone(int k)
{
    if (k >= nunary)
        return true;
    ir_op op = unary[k];
    return op == IR_OP_ABS || op == IR_OP_SQRT || op == IR_OP_RELU;
}

/* ---- inputs ------------------------------------------------------------------------------ */

static const double specials[] = {
    0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5, 2.0, 3.0, -7.0, 7.0, 0.1, 1.0 / 3, 100.0,
    0.25, 0.75, 1.25, -0.75, 1e-8, -1e-8, 1e-30, 1e10, -1e10, 1e30, -1e30, 1e300, -1e300,
    16777216.0, 9007199254740993.0, 88.7, -87.3, 89.0, -104.0, 709.7, -745.0, -708.4, 20.0,
    -20.0, -10.77, -38.5, 1.5707963267948966, 3.141592653589793, 6381956970095103.0 * 0x1p797,
    0.625, -0.625, 0.85, 0x1p-126, 0x1p-149, -0x1p-149, 0x1p-1022, 0x1p-1074, 3.4028234663852886e38,
    -3.4028234663852886e38, 1.7976931348623157e308, -1.7976931348623157e308, INFINITY, -INFINITY,
    NAN, -NAN,
};

#define NSPECIAL (sizeof specials / sizeof specials[0])
#define NRANDOM 320
#define N (NSPECIAL + NRANDOM + 3) /* not a multiple of the vector width: a scalar tail */

static uint64_t
rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void
fill_inputs(kiln_dtype t, void *x)
{
    uint64_t s = 0x7377656570ull + (uint64_t)t;
    for (size_t i = 0; i < N; i++) {
        double v;
        if (i < NSPECIAL) {
            v = specials[i];
        } else {
            uint64_t r = rnd(&s);
            double u = (double)(r >> 11) * 0x1p-53;
            if (i % 3 == 0) /* uniform where the functions bend */
                v = -10 + 20 * u;
            else /* log-uniform over 2^-40 .. 2^40, either sign */
                v = ldexp(1.0 + u, (int)(rnd(&s) % 81) - 40) * (r & 1 ? -1 : 1);
        }
        ir_store_f64(t, x, i, v); /* f32: rounded once */
    }
}

/* ---- compile and run ------------------------------------------------------------------------ */

static kiln_graph *
parse(const char *text)
{
    kiln_graph *g = NULL;
    ck_assert_msg(kiln_graph_parse(text, strlen(text), &g) == KILN_OK, "%s\n%s", kiln_errmsg(),
                  text);
    return g;
}

/* Compile g in `mode` and run it; the program is freed. */
static void
run_graph(const kiln_graph *g, kiln_mode mode, const void *const *in, void *const *out,
          const char *ctx)
{
    kiln_options o = KILN_OPTIONS_INIT;
    o.mode = mode;
    kiln_program *p = NULL;
    ck_assert_msg(kiln_program_compile(g, &o, &p) == KILN_OK, "%s: compile: %s", ctx,
                  kiln_errmsg());
    ck_assert_msg(kiln_program_run(p, in, out) == KILN_OK, "%s: run: %s", ctx, kiln_errmsg());
    kiln_program_free(p);
}

static bool
same_value(kiln_dtype t, const void *a, const void *b, size_t i)
{
    double x = ir_load_f64(t, a, i), y = ir_load_f64(t, b, i);
    if (isnan(x) || isnan(y))
        return isnan(x) && isnan(y);
    size_t es = kiln_dtype_size(t);
    return memcmp((const char *)a + i * es, (const char *)b + i * es, es) == 0;
}

/* Check output `got` of op applied to `arg` against `exact_ref` (the interpreter's) or,
 * for vector-math ops, the long double reference within the op's ULP bound.  Returns the
 * number of mismatches; the first is described in msg unless msg holds one already. */
static size_t
check_output(kiln_dtype t, ir_op op, bool vm, const void *arg, const void *got,
             const void *exact_ref, char *msg, size_t msgn, const char *ctx)
{
    size_t bad = 0;
    double bound = vm ? ir_op_ulp_bound(op, t) : 0;
    for (size_t i = 0; i < N; i++) {
        bool ok;
        double err = 0;
        if (vm) {
            long double r = ref_math(op, t, ir_load_f64(t, arg, i), 0);
            err = ref_ulp_error(t, ir_load_f64(t, got, i), r);
            ok = err <= bound;
        } else {
            ok = same_value(t, got, exact_ref, i);
        }
        if (!ok && bad++ == 0 && !msg[0])
            snprintf(msg, msgn, "%s: %s(%a) = %a, want %a (%.3g ulp, bound %g)", ctx,
                     ir_ops[op].name, ir_load_f64(t, arg, i), ir_load_f64(t, got, i),
                     vm ? (double)ref_math(op, t, ir_load_f64(t, arg, i), 0)
                        : ir_load_f64(t, exact_ref, i),
                     err, bound);
    }
    return bad;
}

static void
sweep(kiln_dtype t, int k)
{
    const char *dt = kiln_dtype_name(t);
    size_t es = kiln_dtype_size(t), bytes = N * es;
    char stage[256], *text = malloc(16384), ctx[128];
    void *x = malloc(bytes), *a = malloc(bytes), *ra = malloc(bytes), *o[MAXU], *r[MAXU],
         *po = malloc(bytes);
    ck_assert(text && x && a && ra && po);
    for (int j = 0; j < nunary; j++) {
        o[j] = malloc(bytes);
        r[j] = malloc(bytes);
        ck_assert(o[j] && r[j]);
    }
    fill_inputs(t, x);
    first_stage(k, stage, sizeof stage, dt);

    /* the batched graph: a = F(x), o_j = g_j(a) */
    int len = snprintf(text, 16384, "graph sweep(x: %s[%zu]) -> (a: %s[%zu]", dt, (size_t)N, dt,
                       (size_t)N);
    for (int j = 0; j < nunary; j++)
        len += snprintf(text + len, 16384 - (size_t)len, ", o%d: %s[%zu]", j, dt, (size_t)N);
    len += snprintf(text + len, 16384 - (size_t)len, ") {\n%s", stage);
    for (int j = 0; j < nunary; j++)
        len += snprintf(text + len, 16384 - (size_t)len, "  o%d = %s(a)\n", j,
                        ir_ops[unary[j]].name);
    snprintf(text + len, 16384 - (size_t)len, "}\n");
    kiln_graph *g = parse(text);
    void *outs[MAXU + 1] = {a};
    for (int j = 0; j < nunary; j++)
        outs[j + 1] = o[j];
    const void *in[1] = {x};
    snprintf(ctx, sizeof ctx, "%s, first stage %d", dt, k);
    run_graph(g, KILN_MODE_FUSED, in, outs, ctx);

    /* the reference of `a`: the interpreter, or for a vector-math op the exact value */
    void *routs[MAXU + 1] = {ra};
    for (int j = 0; j < nunary; j++)
        routs[j + 1] = r[j]; /* overwritten below */
    run_graph(g, KILN_MODE_INTERP, in, routs, ctx);
    char msg[512] = "";
    size_t bad = 0;
    if (k < nunary) {
        ir_op f = unary[k];
        bad += check_output(t, f, ir_op_is_vmath(f), x, a, ra, msg, sizeof msg, "first stage");
    } else {
        for (size_t i = 0; i < N; i++)
            if (!same_value(t, a, ra, i) && bad++ == 0)
                snprintf(msg, sizeof msg, "first stage: %sat x=%a: %a, want %a", stage,
                         ir_load_f64(t, x, i), ir_load_f64(t, a, i), ir_load_f64(t, ra, i));
    }
    kiln_graph_free(g);

    /* the second stages against g_j applied to the fused `a` */
    len = snprintf(text, 16384, "graph second(a: %s[%zu]) -> (", dt, (size_t)N);
    for (int j = 0; j < nunary; j++)
        len += snprintf(text + len, 16384 - (size_t)len, "%so%d: %s[%zu]", j ? ", " : "", j, dt,
                        (size_t)N);
    len += snprintf(text + len, 16384 - (size_t)len, ") {\n");
    for (int j = 0; j < nunary; j++)
        len += snprintf(text + len, 16384 - (size_t)len, "  o%d = %s(a)\n", j,
                        ir_ops[unary[j]].name);
    snprintf(text + len, 16384 - (size_t)len, "}\n");
    g = parse(text);
    const void *ain[1] = {a};
    run_graph(g, KILN_MODE_INTERP, ain, routs + 1, ctx);
    kiln_graph_free(g);
    for (int j = 0; j < nunary; j++) {
        char c2[160];
        snprintf(c2, sizeof c2, "%s: second stage %s", ctx, ir_ops[unary[j]].name);
        bad += check_output(t, unary[j], ir_op_is_vmath(unary[j]), a, o[j], r[j],
                            msg, sizeof msg, c2);
    }
    ck_assert_msg(bad == 0, "%zu mismatches; first: %s", bad, msg);

    /* each pair alone in its kernel, the shape that crashed: the same bits as in the
     * batched graph (all pairs alone would take 1,500 compiles: too slow for a test;
     * KILN_QUICK: every fifth second stage) */
    for (int j = 0; alone(k) && j < nunary; j += ts_quick() ? 5 : 1) {
        snprintf(text, 16384, "graph pair(x: %s[%zu]) -> (o: %s[%zu]) {\n%s  o = %s(a)\n}\n", dt,
                 (size_t)N, dt, (size_t)N, stage, ir_ops[unary[j]].name);
        g = parse(text);
        void *pout[1] = {po};
        run_graph(g, KILN_MODE_FUSED, in, pout, text);
        for (size_t i = 0; i < N; i++)
            ck_assert_msg(same_value(t, po, o[j], i),
                          "%s alone: x=%a gives %a, in the batched graph %a\n%s", dt,
                          ir_load_f64(t, x, i), ir_load_f64(t, po, i), ir_load_f64(t, o[j], i),
                          text);
        kiln_graph_free(g);
    }
    for (int j = 0; j < nunary; j++) {
        free(o[j]);
        free(r[j]);
    }
    free(text);
    free(x);
    free(a);
    free(ra);
    free(po);
}

START_TEST(test_sweep_f32)
{
    collect_unary();
    for (int k = 0; k < nfirst(); k++)
        sweep(KILN_DTYPE_F32, k);
}
END_TEST

START_TEST(test_sweep_f64)
{
    collect_unary();
    for (int k = 0; k < nfirst(); k++)
        sweep(KILN_DTYPE_F64, k);
}
END_TEST

/* ---- the fatal-error handler -------------------------------------------------------------- */

static const char crash_text[] = "graph g(x: f32[4]) -> (o: f32[4]) {\n"
                                 "  a = abs(x)\n"
                                 "  o = gelu_erf(a)\n"
                                 "}\n";

/* In the child: compile the issue's graph with a pipeline that is fatal for it. */
static int
fatal_child(void)
{
    struct rlimit no_core = {0, 0}; /* it aborts on purpose */
    setrlimit(RLIMIT_CORE, &no_core);
    jit_engine_test_passes(
        "always-inline,function(early-cse,instcombine<max-iterations=0>,simplifycfg)");
    kiln_graph *g = NULL;
    if (kiln_graph_parse(crash_text, strlen(crash_text), &g))
        return 3;
    kiln_options o = KILN_OPTIONS_INIT;
    o.flags = KILN_NO_CACHE;
    kiln_program *p = NULL;
    kiln_status st = kiln_program_compile(g, &o, &p);
    fprintf(stderr, "fatal-child: compiled without a fatal error (status %d)\n", (int)st);
    kiln_program_free(p);
    kiln_graph_free(g);
    return 0;
}

START_TEST(test_fatal_handler_names_module)
{
    char path[] = "/tmp/kiln_fatal_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd, 2);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    ck_assert(n > 0);
    self[n] = '\0';
    char *argv[] = {self, "--fatal-child", NULL};
    /* the child dies on purpose: no leak report */
    size_t ne = 0;
    while (environ[ne])
        ne++;
    char **envp = calloc(ne + 2, sizeof *envp);
    ck_assert_ptr_nonnull(envp);
    size_t k = 0;
    for (size_t i = 0; i < ne; i++)
        if (strncmp(environ[i], "ASAN_OPTIONS=", 13) != 0)
            envp[k++] = environ[i];
    envp[k] = "ASAN_OPTIONS=detect_leaks=0";
    pid_t pid;
    ck_assert_int_eq(posix_spawn(&pid, self, &fa, NULL, argv, envp), 0);
    posix_spawn_file_actions_destroy(&fa);
    free(envp);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    char out[4096] = "";
    lseek(fd, 0, SEEK_SET);
    ssize_t m = read(fd, out, sizeof out - 1);
    out[m > 0 ? m : 0] = '\0';
    close(fd);
    unlink(path);
    ck_assert_msg(!(WIFEXITED(status) && WEXITSTATUS(status) == 0),
                  "the fatal pipeline did not fail; pick another fatal case:\n%s", out);
    ck_assert_msg(strstr(out, "LLVM fatal error while optimising module 'kiln_"),
                  "the handler's message is missing:\n%s", out);
    ck_assert_msg(strstr(out, "did not reach a fixpoint"), "LLVM's reason is missing:\n%s", out);
}
END_TEST

/* The fixed pipeline compiles and runs the issue's graph. */
START_TEST(test_issue_graph)
{
    kiln_graph *g = parse(crash_text);
    float x[4] = {1, -2, 3, -4}, got[4], want[4];
    const void *in[1] = {x};
    void *out[1] = {got}, *ref[1] = {want};
    run_graph(g, KILN_MODE_FUSED, in, out, "issue graph");
    run_graph(g, KILN_MODE_INTERP, in, ref, "issue graph");
    for (int i = 0; i < 4; i++)
        ck_assert_msg(ref_ulp_error(KILN_DTYPE_F32, got[i], ref_math(IR_OP_GELU_ERF, KILN_DTYPE_F32, fabsl(x[i]), 0)) <=
                          ir_op_ulp_bound(IR_OP_GELU_ERF, KILN_DTYPE_F32),
                      "gelu_erf(|%g|) = %a, interpreter %a", x[i], got[i], want[i]);
    kiln_graph_free(g);
}
END_TEST

static Suite *
sweep_suite(void)
{
    Suite *s = suite_create("llvm_sweep");
    TCase *tc = tcase_create("pairs");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_issue_graph);
    tcase_add_test(tc, test_fatal_handler_names_module);
    tcase_add_test(tc, test_sweep_f32);
    tcase_add_test(tc, test_sweep_f64);
    suite_add_tcase(s, tc);
    return s;
}

int
main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--fatal-child") == 0)
        return fatal_child();
    return ts_run(sweep_suite());
}
