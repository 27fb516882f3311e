/* cmd_check.c — `kiln check`: compiled results against the reference interpreter.
 *
 *   kiln check FILE.kiln ...   runs each graph fused and eager on seeded random inputs and
 *                              on special values (0, -0, ±inf, NaN, subnormals, huge,
 *                              tiny), reports the max error per output and where it
 *                              occurred, and fails where an element is beyond its bound;
 *   kiln check --ulp FUNC      sweeps one function over special values and a dense sample
 *                              (or all 2^32 f32 inputs with --exhaustive) and prints its max
 *                              error in ULPs of the dtype against the exact value (refmath.h):
 *                              the tool behind docs/accuracy.md.
 *
 * The bound of a graph is per element (errbound.h): the interpreter's value of every node
 * and how far a correct kernel may be from it, propagated through the graph as a forward
 * error analysis does, with sums and matmul bounded relative to their sums of magnitudes,
 * so that cancellation after a reduction does not read as a huge relative error.  Graphs
 * of exact ops only (arithmetic, comparisons, casts, movement) get 0: bit for bit.
 * Definitions: docs/accuracy.md. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "errbound.h"
#include "jit.h"
#include "refmath.h"

void
cmd_check_help(FILE *f)
{
    fprintf(f,
            "usage: kiln check FILE.kiln ... [--seeds N]\n"
            "       kiln check --ulp FUNC [--dtype f32|f64] [--samples N | --exhaustive]\n"
            "\n"
            "Compare kiln's compiled kernels (fused and eager) with the reference interpreter.\n"
            "\n"
            "  FILE.kiln        graphs to check on random inputs (N seeds, default 3) and on\n"
            "                   special values; prints the max error per output and mode, and\n"
            "                   fails where an element is beyond its bound, which is\n"
            "                   propagated through the graph (sums relative to their\n"
            "                   magnitudes)\n"
            "  --ulp FUNC       sweep one function (exp, tanh, log, ..., pow, atan2) over\n"
            "                   special values and a dense sample of inputs and print its max\n"
            "                   error in ULPs of the dtype against the exact value; special\n"
            "                   values whose result is 0, 1 or inf must come out exact\n"
            "  --dtype T        with --ulp: f32 (default) or f64\n"
            "  --samples N      with --ulp: inputs besides the special values (default 2^24)\n"
            "  --exhaustive     with --ulp and f32: every one of the 2^32 inputs (minutes)\n"
            "  -h, --help       this text\n"
            "\n"
            "Exit code 1 when an error exceeds its bound (docs/accuracy.md).\n");
}

static const float specials32[] = {
    0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.4e-45f, -1.4e-45f, 1.1754942e-38f, 1.17549435e-38f,
    -1.17549435e-38f, FLT_MAX, -FLT_MAX, 1e-30f, -1e-30f, 1e30f, -1e30f, 1.0f, -1.0f, 0.5f,
    -0.5f, 2.0f, 3.0f, 88.7f, -87.3f, 89.0f, -104.0f, 1e-8f, 20.0f, -20.0f, 0.1f,
};

/* Fill float inputs with the special values (cycled, with a different phase per input so
 * binary ops see mixed pairs); other dtypes get random values. */
static void
fill_special(kiln_dtype t, void *data, size_t n, int phase, uint64_t *state)
{
    size_t ns = sizeof specials32 / sizeof specials32[0];
    if (!ir_dtype_is_float(t)) {
        cli_fill_random(t, data, n, state);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float v = specials32[(i + (size_t)phase * 7 + (i / ns) * (size_t)phase) % ns];
        if (t == KILN_DTYPE_F32)
            ((float *)data)[i] = v;
        else
            ((double *)data)[i] = (double)v;
    }
}

static void
print_value(FILE *f, kiln_dtype t, const void *p, size_t i)
{
    if (ir_dtype_is_float(t))
        fprintf(f, "%.9g", ir_load_f64(t, p, i));
    else
        fprintf(f, "%lld", (long long)ir_load_i64(t, p, i));
}

/* Check one graph; returns CLI_OK, or CLI_FAIL when beyond the bound or on error. */
static int
check_graph(const char *name, const kiln_graph *g, int seeds)
{
    int rc = CLI_OK;
    int ni = g->ninputs, no = g->noutputs;
    void **in = calloc((size_t)ni + 1, sizeof *in), **out = calloc((size_t)no + 1, sizeof *out);
    eb_output *ref = calloc((size_t)no + 1, sizeof *ref);
    kiln_program *progs[2] = {NULL, NULL};
    static const char *const mode_names[2] = {"fused", "eager"};
    if (!in || !ref || !out)
        goto oom;
    for (int i = 0; i < ni; i++)
        if (!(in[i] = malloc(ir_type_bytes(&g->nodes[g->inputs[i]].type) + 1)))
            goto oom;
    for (int i = 0; i < no; i++)
        if (!(out[i] = malloc(ir_type_bytes(&g->nodes[g->outputs[i].node].type) + 1)))
            goto oom;
    for (int m = 0; m < 2; m++) {
        kiln_options o = KILN_OPTIONS_INIT;
        o.mode = m == 0 ? KILN_MODE_FUSED : KILN_MODE_EAGER;
        if (kiln_program_compile(g, &o, &progs[m])) {
            fprintf(stderr, "kiln check: %s: %s\n", name, cli_errmsg());
            rc = CLI_FAIL;
            goto done;
        }
    }
    printf("%s: bound per element, propagated through the graph\n", name);
    for (int s = 0; s <= seeds; s++) {
        uint64_t state = 0x636865636b + (uint64_t)s;
        bool special = s == seeds;
        for (int i = 0; i < ni; i++) {
            const ir_type *t = &g->nodes[g->inputs[i]].type;
            if (special)
                fill_special(t->dtype, in[i], ir_shape_count(&t->shape), i, &state);
            else
                cli_fill_random(t->dtype, in[i], ir_shape_count(&t->shape), &state);
        }
        if (eb_reference(g, (const void *const *)in, ref)) {
            fprintf(stderr, "kiln check: %s: reference: %s\n", name, cli_errmsg());
            rc = CLI_FAIL;
            goto done;
        }
        for (int m = 0; m < 2; m++) {
            if (kiln_program_run(progs[m], (const void *const *)in, out)) {
                fprintf(stderr, "kiln check: %s: %s: %s\n", name, mode_names[m], cli_errmsg());
                rc = CLI_FAIL;
                goto done;
            }
            for (int k = 0; k < no; k++) {
                const ir_type *t = &g->nodes[g->outputs[k].node].type;
                size_t n = ir_shape_count(&t->shape);
                eb_cmp e = eb_compare(t->dtype, out[k], &ref[k], n);
                printf("  %-7s %-6s %-10s max %-9.4g ulp  %8.3g of the bound", special ? "special" : "random",
                       mode_names[m], g->outputs[k].name, e.ulp, e.ratio);
                if ((e.ulp > 0 || e.ratio > 0) && n > 0) {
                    printf("  worst at [%zu]: got ", e.worst);
                    print_value(stdout, t->dtype, out[k], e.worst);
                    printf(" want ");
                    print_value(stdout, t->dtype, ref[k].ref, e.worst);
                    printf(" ± %.3g", ref[k].bound ? ref[k].bound[e.worst] : 0.0);
                }
                printf("%s\n", e.pass ? "" : "  <-- FAIL: beyond the bound");
                if (!e.pass)
                    rc = CLI_FAIL;
            }
        }
        eb_free(g, ref);
    }
    goto done;
oom:
    ir_error(KILN_ERR_NOMEM, "kiln check: out of memory");
    rc = cli_fail();
done:
    kiln_program_free(progs[0]);
    kiln_program_free(progs[1]);
    if (ref)
        eb_free(g, ref);
    cli_free_buffers(in, ni);
    cli_free_buffers(out, no);
    free(ref);
    return rc;
}

/* ---- --ulp ------------------------------------------------------------------------------ */

/* The special values each sweep starts with (as pairs of every two for pow and atan2):
 * zeros, ones, infinities, NaN, the subnormal and normal extremes, and where functions
 * switch methods, overflow or underflow. */
static const double ulp_specials[] = {
    0.0, -0.0, 1.0, -1.0, INFINITY, -INFINITY, NAN, 0.5, -0.5, 2.0, -2.0, 3.0, 0.1, 10.0,
    -10.0, 0.625, 0.75, 0.85, 20.0, -20.0, 30.0, -30.0, 88.7, -87.3, 89.0, -104.0, 709.7,
    -708.4, 710.0, -745.2, 1e-8, -1e-8, 1e-30, 1e30, -1e30, 1e300, -1e300, 0x1p-126, 0x1p-149,
    -0x1p-149, 0x1p-1022, 0x1p-1074, -0x1p-1074, 3.4028234663852886e38, 1.7976931348623157e308,
    1.5707963267948966, 3.141592653589793, 6381956970095103.0 * 0x1p797, 0x1p24, 0x1p53,
};
#define NULP_SPECIALS (sizeof ulp_specials / sizeof ulp_specials[0])

static uint64_t
lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s;
}

/* Input k of the sweep into x[i] (and y[i] for binary functions). */
static void
ulp_input(kiln_dtype dt, bool binary, uint64_t k, uint64_t nspec, uint64_t stride, void *x,
          void *y, size_t i, uint64_t *state)
{
    double xv, yv = 1.0;
    if (k < nspec) {
        xv = ulp_specials[binary ? k / NULP_SPECIALS : k];
        yv = binary ? ulp_specials[k % NULP_SPECIALS] : 1.0;
        ir_store_f64(dt, x, i, xv);
        ir_store_f64(dt, y, i, yv);
        return;
    }
    k -= nspec;
    if (dt == KILN_DTYPE_F32) {
        /* every stride-th bit pattern, jittered: dense over all binades, both signs */
        uint32_t bits = (uint32_t)(k * stride + (stride > 1 ? (k * 2654435761u) % stride : 0));
        memcpy((char *)x + 4 * i, &bits, 4);
        uint32_t b2 = (uint32_t)((k * 0x9e3779b97f4a7c15ull) >> 32);
        memcpy((char *)y + 4 * i, &b2, 4);
        return;
    }
    /* f64: random bit patterns, and (odd k) the f32 sweep's patterns widened with random
     * low bits, which covers the ranges the functions are used in as densely */
    uint64_t bits = lcg(state);
    if (k & 1) {
        uint32_t b32 = (uint32_t)((k / 2) * 257 * 16777259u);
        float f;
        memcpy(&f, &b32, 4);
        double d = f;
        uint64_t db;
        memcpy(&db, &d, 8);
        bits = isfinite(d) ? db | (bits & 0x1fffffffull) : db;
    }
    memcpy((char *)x + 8 * i, &bits, 8);
    uint64_t b2 = lcg(state);
    memcpy((char *)y + 8 * i, &b2, 8);
}

/* May the result be anything but exact?  Special inputs whose exact value is 0, ±1 or
 * ±inf must give it exactly, with the sign of zero (docs/accuracy.md, special values). */
static bool
needs_exact(long double exact)
{
    return exact == 0 || fabsl(exact) == 1 || isinf(exact);
}

static int
check_ulp(const char *func, kiln_dtype dt, bool exhaustive, uint64_t samples)
{
    int op = ir_op_from_name(func, strlen(func));
    if (op < 0 || !ir_op_is_elementwise((ir_op)op) ||
        (ir_ops[op].trule != IR_T_FLOAT && op != IR_OP_POW))
        return cli_usage("check", "--ulp needs a float function (exp, tanh, pow, ...), not '%s'",
                         func);
    bool binary = ir_ops[op].arity == 2;
    /* vector-math functions against the exact value, within their bound; every other op
     * must round as the interpreter does, so it is measured against it (bound 0) */
    bool vm = ir_op_is_vmath((ir_op)op) && ref_math_has((ir_op)op);
    const size_t chunk = (size_t)1 << 22;
    const char *tn = kiln_dtype_name(dt);
    char text[512];
    if (binary)
        snprintf(text, sizeof text,
                 "graph ulp(x: %s[%zu], y: %s[%zu]) -> (r: %s[%zu]) {\n  r = %s(x, y)\n}\n", tn,
                 chunk, tn, chunk, tn, chunk, func);
    else
        snprintf(text, sizeof text, "graph ulp(x: %s[%zu]) -> (r: %s[%zu]) {\n  r = %s(x)\n}\n",
                 tn, chunk, tn, chunk, func);
    kiln_graph *g;
    kiln_program *p;
    if (kiln_graph_parse(text, strlen(text), &g))
        return cli_fail();
    if (kiln_program_compile(g, NULL, &p)) {
        kiln_graph_free(g);
        return cli_fail();
    }
    size_t es = kiln_dtype_size(dt);
    void *x = malloc(chunk * es), *y = malloc(chunk * es), *got = malloc(chunk * es),
         *want = malloc(chunk * es);
    int rc = CLI_OK;
    if (!x || !y || !got || !want) {
        ir_error(KILN_ERR_NOMEM, "kiln check: out of memory");
        rc = cli_fail();
        goto done;
    }
    double max = 0, wx = 0, wy = 0, bad_x = 0, bad_y = 0, bad_got = 0;
    long double bad_want = 0;
    uint64_t inexact = 0;
    bool progress = isatty(2) && exhaustive; /* long runs show progress on a terminal */
    uint64_t state = 0x756c70;
    uint64_t nspec = binary ? NULP_SPECIALS * NULP_SPECIALS : NULP_SPECIALS;
    uint64_t sweep = exhaustive && dt == KILN_DTYPE_F32 ? (uint64_t)1 << 32 : samples;
    uint64_t stride = dt == KILN_DTYPE_F32 ? (((uint64_t)1 << 32) + sweep - 1) / sweep : 0;
    uint64_t total = nspec + sweep;
    for (uint64_t base = 0; base < total; base += chunk) {
        size_t n = total - base < chunk ? (size_t)(total - base) : chunk;
        for (size_t i = 0; i < chunk; i++) /* past n: repeats of the last input */
            ulp_input(dt, binary, base + (i < n ? i : n - 1), nspec, stride, x, y, i, &state);
        const void *ins[2] = {x, y};
        void *outs[1] = {got}, *refs[1] = {want};
        if (kiln_program_run(p, ins, outs) || (!vm && kiln_graph_interpret(g, ins, refs))) {
            rc = cli_fail();
            goto done;
        }
        for (size_t i = 0; i < n; i++) {
            double xv = ir_load_f64(dt, x, i), yv = binary ? ir_load_f64(dt, y, i) : 0;
            double gv = ir_load_f64(dt, got, i), e;
            if (vm) {
                long double exact = ref_math((ir_op)op, dt, xv, yv);
                e = ref_ulp_error(dt, gv, exact);
                if (base + i < nspec && !isnan(exact) && needs_exact(exact) &&
                    !((long double)gv == exact && !signbit(gv) == !signbit(exact)) &&
                    inexact++ == 0) {
                    bad_x = xv;
                    bad_y = yv;
                    bad_got = gv;
                    bad_want = exact;
                }
            } else {
                e = ref_ulp_distance(dt, gv, ir_load_f64(dt, want, i));
            }
            if (e > max) {
                max = e;
                wx = xv;
                wy = yv;
            }
        }
        if (total > chunk && progress)
            fprintf(stderr, "\rkiln check: %s: %.0f%%", func,
                    100.0 * (double)(base + n) / (double)total);
    }
    if (total > chunk && progress)
        fprintf(stderr, "\n");
    double bound = vm ? ir_op_ulp_bound((ir_op)op, dt) : 0;
    printf("%s %s: %llu inputs, max error %.4g ulp", func, tn, (unsigned long long)total, max);
    if (max > 0) {
        printf(" at x = %.17g", wx);
        if (binary)
            printf(", y = %.17g", wy);
    }
    printf(" (bound %g, %s)\n", bound,
           vm ? "vector math, against the exact value"
              : "an exact op: must equal the reference interpreter");
    if (inexact) {
        printf("  %llu special inputs with an exact result (0, 1, inf) not exact; first: "
               "%s(%.17g%s", (unsigned long long)inexact, func, bad_x, binary ? ", " : "");
        if (binary)
            printf("%.17g", bad_y);
        printf(") = %.17g, want %.17Lg\n", bad_got, bad_want);
    }
    if (max > bound || inexact)
        rc = CLI_FAIL;
done:
    free(x);
    free(y);
    free(got);
    free(want);
    kiln_program_free(p);
    kiln_graph_free(g);
    return rc;
}

int
cmd_check(int argc, char **argv)
{
    const char *func = NULL;
    kiln_dtype dt = KILN_DTYPE_F32;
    bool exhaustive = false;
    int seeds = 3, rc = CLI_OK, nfiles = 0;
    uint64_t samples = (uint64_t)1 << 24;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int m;
        if (cli_is_help(argv[i])) {
            cmd_check_help(stdout);
            return CLI_OK;
        }
        if ((m = cli_option("check", argc, argv, &i, "--ulp", &func)) != 0) {
            if (m < 0)
                return CLI_USAGE;
        } else if ((m = cli_option("check", argc, argv, &i, "--dtype", &v)) != 0) {
            if (m < 0)
                return CLI_USAGE;
            int t = ir_dtype_from_name(v, strlen(v));
            if (t != KILN_DTYPE_F32 && t != KILN_DTYPE_F64)
                return cli_usage("check", "--dtype is f32 or f64, not '%s'", v);
            dt = (kiln_dtype)t;
        } else if ((m = cli_option("check", argc, argv, &i, "--seeds", &v)) != 0) {
            if (m < 0 || (seeds = atoi(v)) < 1)
                return m < 0 ? CLI_USAGE : cli_usage("check", "--seeds needs a number >= 1");
        } else if ((m = cli_option("check", argc, argv, &i, "--samples", &v)) != 0) {
            char *end;
            unsigned long long k = m > 0 ? strtoull(v, &end, 10) : 0;
            if (m < 0 || k < 1 || *end || k > ((uint64_t)1 << 40))
                return m < 0 ? CLI_USAGE : cli_usage("check", "--samples needs a number from 1 to 2^40");
            samples = k;
        } else if (!strcmp(argv[i], "--exhaustive")) {
            exhaustive = true;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return cli_usage("check", "unknown option '%s'", argv[i]);
        } else {
            nfiles++;
        }
    }
    if (func)
        return nfiles ? cli_usage("check", "--ulp takes no graph files")
                      : check_ulp(func, dt, exhaustive, samples);
    if (!nfiles)
        return cli_usage("check", "give graph files or --ulp FUNC");
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            if ((!strcmp(argv[i], "--seeds") || !strcmp(argv[i], "--dtype") ||
                 !strcmp(argv[i], "--samples")) && i + 1 < argc)
                i++;
            continue;
        }
        kiln_graph *g;
        if (cli_load_graph(argv[i], &g)) {
            rc = cli_fail();
            continue;
        }
        if (check_graph(argv[i], g, seeds) != CLI_OK)
            rc = CLI_FAIL;
        kiln_graph_free(g);
    }
    return rc;
}
