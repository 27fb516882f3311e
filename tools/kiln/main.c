/* main.c — the kiln command: subcommand dispatch, --help, --version, and the default job
 * that runs when kiln is given no arguments.
 *
 * The default job is one function, default_job(): the benchmark suite (`kiln bench`).
 * `kiln examples` runs small built-in graphs, compiled and interpreted, and prints them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

static int cmd_examples(int argc, char **argv);
static void cmd_examples_help(FILE *f);

static const cli_command commands[] = {
    {"dump", "parse, verify and print a .kiln graph (text or --dot)", cmd_dump, cmd_dump_help},
    {"run", "run a .kiln graph on .npy inputs, write .npy outputs", cmd_run, cmd_run_help},
    {"bench", "benchmark fused against eager and the bandwidth (the default job)", cmd_bench,
     cmd_bench_help},
    {"check", "compare compiled kernels with the reference interpreter", cmd_check,
     cmd_check_help},
    {"examples", "run small built-in graphs through the JIT and print them", cmd_examples,
     cmd_examples_help},
    {"cache", "the persistent kernel cache: where, how big, hits; clear, trim", cmd_cache,
     cmd_cache_help},
};
#define NCOMMANDS (int)(sizeof commands / sizeof commands[0])

/* ---- the default job ------------------------------------------------------------------ */

/* The examples are the `small` and `softmax` workloads of the benchmark suite at sizes
 * whose results fit on a screen. */
static const struct example {
    const char *name;
    const char *text;
} examples[] = {
    {"chain", "# the `chain` workload: out = max(x*y + z, 0) * 0.5 + x\n"
              "graph chain(x: f32[1024], y: f32[1024], z: f32[1024]) -> (out: f32[1024]) {\n"
              "  a = mul(x, y)\n"
              "  b = add(a, z)\n"
              "  zero = full(value=0) : f32[]\n"
              "  c = max(b, zero)\n"
              "  half = full(value=0.5) : f32[]\n"
              "  d = mul(c, half)\n"
              "  out = add(d, x)\n"
              "}\n"},
    {"softmax", "# softmax over the last axis, the row maximum subtracted first\n"
                "graph softmax(x: f32[4,16]) -> (y: f32[4,16]) {\n"
                "  m = reduce_max(x, axes=[1], keepdim=true)\n"
                "  d = sub(x, m)\n"
                "  e = exp(d)\n"
                "  s = reduce_sum(e, axes=[1], keepdim=true)\n"
                "  y = div(e, s)\n"
                "}\n"},
};

/* Parse, verify and interpret one example on seeded random inputs; print graph and result. */
static kiln_status
run_example(const struct example *ex, uint64_t seed)
{
    char src[64];
    snprintf(src, sizeof src, "<builtin:%s>", ex->name);
    kiln_graph *g;
    kiln_status st = kiln_graph_parse_named(ex->text, strlen(ex->text), src, &g);
    if (st)
        return st;
    int ni = kiln_graph_num_inputs(g), no = kiln_graph_num_outputs(g);
    void **in = calloc((size_t)ni + 1, sizeof *in), **out = calloc((size_t)no + 1, sizeof *out);
    if (!in || !out) {
        st = cli_error(KILN_ERR_NOMEM, "examples: out of memory");
        goto done;
    }
    printf("== %s ==\n", ex->name);
    if ((st = kiln_graph_print(g, stdout)))
        goto done;
    printf("inputs (uniform in [-1, 1), seed %#llx):\n", (unsigned long long)seed);
    uint64_t state = seed;
    for (int i = 0; i < ni; i++) {
        kiln_value_info info = KILN_VALUE_INFO_INIT;
        if ((st = kiln_graph_input(g, i, &info)))
            goto done;
        if (!(in[i] = malloc(info.bytes + 1))) {
            st = cli_error(KILN_ERR_NOMEM, "examples: out of memory");
            goto done;
        }
        cli_fill_random(info.dtype, in[i], info.count, &state);
        cli_print_summary(stdout, &info, in[i]);
    }
    for (int i = 0; i < no; i++) {
        kiln_value_info info = KILN_VALUE_INFO_INIT;
        if ((st = kiln_graph_output(g, i, &info)))
            goto done;
        if (!(out[i] = malloc(info.bytes + 1))) {
            st = cli_error(KILN_ERR_NOMEM, "examples: out of memory");
            goto done;
        }
    }
    kiln_program *p;
    if ((st = kiln_program_compile(g, NULL, &p)))
        goto done;
    st = kiln_program_run(p, (const void *const *)in, out);
    kiln_program_free(p);
    if (st)
        goto done;
    printf("result (compiled, fused):\n");
    for (int i = 0; i < no; i++) {
        kiln_value_info info = KILN_VALUE_INFO_INIT;
        if ((st = kiln_graph_output(g, i, &info)))
            goto done;
        cli_print_summary(stdout, &info, out[i]);
    }
    printf("\n");
done:
    cli_free_buffers(in, ni);
    cli_free_buffers(out, no);
    kiln_graph_free(g);
    return st;
}

static void
cmd_examples_help(FILE *f)
{
    fputs("usage: kiln examples\n"
          "\n"
          "Parse, verify, compile (fused) and run the built-in example graphs (chain at\n"
          "f32[1024], softmax at f32[4,16]) on fixed-seed inputs; print each graph, its inputs\n"
          "and its result.\n",
          f);
}

static int
cmd_examples(int argc, char **argv)
{
    if (argc > 1 && cli_is_help(argv[1])) {
        cmd_examples_help(stdout);
        return CLI_OK;
    }
    if (argc > 1)
        return cli_usage("examples", "unexpected argument '%s'", argv[1]);
    printf("kiln %s: built-in examples, parsed, verified, compiled and run\n\n", kiln_version());
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++)
        if (run_example(&examples[i], 0x6b696c6e + i))
            return cli_fail();
    return fflush(stdout) == 0 ? CLI_OK : CLI_FAIL;
}

/* The main job: the benchmark suite. */
static int
default_job(void)
{
    char *args[] = {"bench", NULL};
    return cmd_bench(1, args);
}

/* ---- help and version ----------------------------------------------------------------- */

static void
usage(FILE *f)
{
    fputs("usage: kiln [--help | --version]\n"
          "       kiln COMMAND [ARGS...]\n"
          "\n"
          "kiln compiles captured tensor graphs into fused SIMD kernels.  With no arguments\n"
          "it runs its default job, the benchmark suite ('kiln bench').\n"
          "\n"
          "commands:\n",
          f);
    for (int i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fputs("\n"
          "'kiln COMMAND --help' describes a command.\n"
          "exit status: 0 success, 1 failure, 2 usage error\n",
          f);
}

static void
version(void)
{
    kiln_host_info h = KILN_HOST_INFO_INIT;
    kiln_host_info_get(&h); /* cannot fail: the size is ours */
    printf("kiln %s\n", kiln_version());
    printf("LLVM %s\n", h.llvm_version);
    printf("host: %s (%s, %d-bit vectors)\n", h.cpu, h.triple, h.vector_bits);
}

static const cli_command *
find_command(const char *name)
{
    for (int i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

int
main(int argc, char **argv)
{
    if (argc < 2)
        return default_job();
    const char *a = argv[1];
    if (cli_is_help(a)) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(a, "--version") == 0) {
        version();
        return CLI_OK;
    }
    if (strcmp(a, "help") == 0) {
        const cli_command *c = argc > 2 ? find_command(argv[2]) : NULL;
        if (argc > 2 && !c)
            return cli_usage(NULL, "unknown command '%s'", argv[2]);
        if (c)
            c->help(stdout);
        else
            usage(stdout);
        return CLI_OK;
    }
    if (a[0] == '-')
        return cli_usage(NULL, "unknown option '%s'", a);
    const cli_command *c = find_command(a);
    if (!c)
        return cli_usage(NULL, "unknown command '%s'", a);
    return c->run(argc - 1, argv + 1);
}
