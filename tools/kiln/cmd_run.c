/* cmd_run.c — `kiln run FILE.kiln --in NAME=FILE.npy ... [--out NAME=FILE.npy ...]
 * [--mode fused|eager|interp] [--stats]`: run a graph on inputs read from .npy files and write or summarise its
 * outputs.  Every input must be given, with exactly the declared dtype and shape: kiln
 * never converts silently. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "npy.h"

void
cmd_run_help(FILE *f)
{
    fputs("usage: kiln run FILE.kiln --in NAME=FILE.npy ... [--out NAME=FILE.npy ...]\n"
          "                [--mode fused|eager|interp] [--stats]\n"
          "\n"
          "Run the graph in FILE.kiln ('-' reads standard input).  Each graph input NAME is\n"
          "read from a NumPy .npy file whose dtype and shape must equal the declared type\n"
          "exactly (f32 '<f4', f64 '<f8', i32 '<i4', i64 '<i8', bool '|b1'; C order;\n"
          "format 1.0, 2.0 or 3.0).  Outputs named by --out are written as .npy files;\n"
          "the others are summarised on standard output.\n"
          "\n"
          "options:\n"
          "  --in NAME=FILE.npy   value of input NAME (one per input, all required)\n"
          "  --out NAME=FILE.npy  write output NAME to a file (format 1.0, as np.save)\n"
          "  --mode MODE          fused: compiled fused kernels (the default); eager: one\n"
          "                       compiled kernel per op; interp: the reference interpreter\n"
          "  --stats              after the run, print to stderr where the process's time\n"
          "                       went: CPU time before kiln run started (loading libLLVM\n"
          "                       and its static constructors), LLVM and LLJIT start-up,\n"
          "                       LLVM compiles, modules loaded from the disk cache\n"
          "  -h, --help           show this help\n"
          "\n"
          "exit status: 0 ran, 1 failed (bad graph or .npy file, missing input, type\n"
          "mismatch, kiln error), 2 usage error\n",
          f);
}

typedef struct binding {
    const char *name; /* NAME of NAME=FILE, pointing into argv (not NUL-terminated) */
    size_t namelen;
    const char *path;
    bool used;
} binding;

/* Split NAME=FILE; usage error when either side is empty or a name repeats. */
static int
add_binding(const char *opt, const char *arg, binding *b, int *n)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || eq[1] == '\0')
        return cli_usage("run", "%s wants NAME=FILE.npy, got '%s'", opt, arg);
    size_t len = (size_t)(eq - arg);
    for (int i = 0; i < *n; i++)
        if (b[i].namelen == len && memcmp(b[i].name, arg, len) == 0)
            return cli_usage("run", "%s %.*s is given twice", opt, (int)len, arg);
    b[*n] = (binding){.name = arg, .namelen = len, .path = eq + 1};
    ++*n;
    return CLI_OK;
}

static binding *
find_binding(binding *b, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strlen(name) == b[i].namelen && memcmp(b[i].name, name, b[i].namelen) == 0)
            return &b[i];
    return NULL;
}

/* "x, y, z" for the inputs (outputs) of g, into buf. */
static const char *
list_names(const kiln_graph *g, bool outputs, char *buf, size_t n)
{
    size_t k = 0;
    int count = outputs ? kiln_graph_num_outputs(g) : kiln_graph_num_inputs(g);
    buf[0] = '\0';
    for (int i = 0; i < count && k < n; i++) {
        kiln_value_info info = KILN_VALUE_INFO_INIT;
        if (outputs ? kiln_graph_output(g, i, &info) : kiln_graph_input(g, i, &info))
            break;
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", info.name);
    }
    return count ? buf : "none";
}

/* The .npy file bound to input i must hold exactly its declared type. */
static kiln_status
load_input(const kiln_graph *g, int i, const binding *b, npy_array *arr)
{
    kiln_value_info info = KILN_VALUE_INFO_INIT;
    kiln_status st = kiln_graph_input(g, i, &info);
    if (st || (st = npy_read_file(b->path, arr)))
        return st;
    bool same = arr->type.dtype == info.dtype && arr->type.shape.rank == info.rank;
    for (int d = 0; same && d < info.rank; d++)
        same = arr->type.shape.dims[d] == info.dims[d];
    if (same)
        return KILN_OK;
    char want[CLI_TYPE_STR_MAX], got[CLI_TYPE_STR_MAX];
    return cli_error(arr->type.dtype != info.dtype ? KILN_ERR_DTYPE : KILN_ERR_SHAPE,
                     "run: input '%s' does not match the graph: expected %s, got %s from %s",
                     info.name, cli_type_str(&info, want, sizeof want),
                     cli_type_str_of(arr->type.dtype, arr->type.shape.rank,
                                     arr->type.shape.dims, got, sizeof got),
                     b->path);
}

static int
run_graph(const kiln_graph *g, kiln_mode mode, binding *ins, int nin, binding *outs, int nout)
{
    int ni = kiln_graph_num_inputs(g), no = kiln_graph_num_outputs(g);
    char names[1024];
    int rc = CLI_FAIL;
    /* + 1: calloc(0) may return NULL */
    npy_array *arrs = calloc((size_t)ni + 1, sizeof *arrs);
    const void **inptr = calloc((size_t)ni + 1, sizeof *inptr);
    void **outptr = calloc((size_t)no + 1, sizeof *outptr);
    if (!arrs || !inptr || !outptr) {
        cli_error(KILN_ERR_NOMEM, "run: out of memory");
        goto done;
    }

    /* Check every name on the command line before reading any file. */
    for (int k = 0; k < nin; k++) {
        bool known = false;
        for (int i = 0; i < ni && !known; i++) {
            kiln_value_info info = KILN_VALUE_INFO_INIT;
            known = !kiln_graph_input(g, i, &info) && strlen(info.name) == ins[k].namelen &&
                    memcmp(info.name, ins[k].name, ins[k].namelen) == 0;
        }
        if (!known) {
            cli_error(KILN_ERR_INVALID_ARG,
                      "run: unknown input: graph '%s' has no input '%.*s' "
                      "(its inputs: %s)",
                      kiln_graph_name(g), (int)ins[k].namelen, ins[k].name,
                      list_names(g, false, names, sizeof names));
            goto done;
        }
    }
    for (int k = 0; k < nout; k++) {
        bool known = false;
        for (int i = 0; i < no && !known; i++) {
            kiln_value_info info = KILN_VALUE_INFO_INIT;
            known = !kiln_graph_output(g, i, &info) && strlen(info.name) == outs[k].namelen &&
                    memcmp(info.name, outs[k].name, outs[k].namelen) == 0;
        }
        if (!known) {
            cli_error(KILN_ERR_INVALID_ARG,
                      "run: unknown output: graph '%s' has no output "
                      "'%.*s' (its outputs: %s)",
                      kiln_graph_name(g), (int)outs[k].namelen, outs[k].name,
                      list_names(g, true, names, sizeof names));
            goto done;
        }
    }
    size_t k = 0;
    names[0] = '\0';
    for (int i = 0; i < ni; i++) {
        kiln_value_info info = KILN_VALUE_INFO_INIT;
        char tb[CLI_TYPE_STR_MAX];
        if (kiln_graph_input(g, i, &info))
            goto done;
        if (!find_binding(ins, nin, info.name) && k < sizeof names)
            k += (size_t)snprintf(names + k, sizeof names - k, "%s--in %s=FILE.npy (%s)",
                                  k ? ", " : "", info.name, cli_type_str(&info, tb, sizeof tb));
    }
    if (k) {
        cli_error(KILN_ERR_INVALID_ARG, "run: missing input: every input needs a file: %s",
                  names);
        goto done;
    }

    for (int i = 0; i < ni; i++) {
        kiln_value_info info = KILN_VALUE_INFO_INIT;
        if (kiln_graph_input(g, i, &info) ||
            load_input(g, i, find_binding(ins, nin, info.name), &arrs[i]))
            goto done;
        inptr[i] = arrs[i].data;
    }
    for (int i = 0; i < no; i++) {
        kiln_value_info info = KILN_VALUE_INFO_INIT;
        if (kiln_graph_output(g, i, &info))
            goto done;
        if (!(outptr[i] = malloc(info.bytes + 1))) {
            cli_error(KILN_ERR_NOMEM, "run: out of memory: output '%s' needs %zu bytes",
                      info.name, info.bytes);
            goto done;
        }
    }
    kiln_options opts = KILN_OPTIONS_INIT;
    opts.mode = mode;
    kiln_program *prog;
    if (kiln_program_compile(g, &opts, &prog))
        goto done;
    kiln_status st = kiln_program_run(prog, inptr, outptr);
    kiln_program_free(prog);
    if (st)
        goto done;

    for (int i = 0; i < no; i++) {
        kiln_value_info info = KILN_VALUE_INFO_INIT;
        if (kiln_graph_output(g, i, &info))
            goto done;
        binding *b = find_binding(outs, nout, info.name);
        if (!b) {
            cli_print_summary(stdout, &info, outptr[i]);
            continue;
        }
        npy_type t = {.dtype = info.dtype, .shape = {.rank = info.rank}};
        memcpy(t.shape.dims, info.dims, (size_t)info.rank * sizeof *info.dims);
        if (npy_write_file(b->path, &t, outptr[i]))
            goto done;
    }
    rc = fflush(stdout) == 0 ? CLI_OK : CLI_FAIL;
    if (rc)
        cli_error(KILN_ERR_IO, "run: cannot write to standard output");
done:
    for (int i = 0; arrs && i < ni; i++)
        npy_array_free(&arrs[i]);
    cli_free_buffers(outptr, no);
    free(arrs);
    free(inptr);
    return rc ? cli_fail() : CLI_OK;
}

/* --stats: where a short-lived process's time goes (docs/benchmarking.md, "Start-up"). */
static void
print_stats(double cpu_before, double wall0)
{
    kiln_stats s = KILN_STATS_INIT;
    kiln_jit_stats(&s);
    fprintf(stderr,
            "kiln run: CPU time before kiln run started (loading, libLLVM's static "
            "constructors): %.1f ms\n"
            "kiln run: in kiln run: %.1f ms wall; LLVM start-up %.2f ms (of it LLJIT %.2f ms); "
            "LLVM compiles %.2f ms (%llu kernels; optimise %.2f, codegen %.2f, link %.2f ms); "
            "disk cache: %llu modules loaded in %.2f ms, %llu misses, %llu written\n",
            cpu_before, cli_clock_ms(CLOCK_MONOTONIC) - wall0, s.startup_ms, s.lljit_ms,
            s.compile_ms, (unsigned long long)s.kernel_compiles, s.optimise_ms, s.codegen_ms,
            s.link_ms, (unsigned long long)s.disk_hits,
            s.disk_load_ms, (unsigned long long)s.disk_misses, (unsigned long long)s.disk_writes);
}

int
cmd_run(int argc, char **argv)
{
    double cpu_before = cli_clock_ms(CLOCK_PROCESS_CPUTIME_ID),
           wall0 = cli_clock_ms(CLOCK_MONOTONIC);
    const char *path = NULL, *mode = "fused", *v;
    int nin = 0, nout = 0, rc = CLI_USAGE;
    bool stats = false;
    /* Each binding takes at least one argument, so argc bounds both lists. */
    binding *ins = calloc((size_t)argc, sizeof *ins);
    binding *outs = calloc((size_t)argc, sizeof *outs);
    if (!ins || !outs) {
        cli_error(KILN_ERR_NOMEM, "run: out of memory");
        rc = cli_fail();
        goto done;
    }
    for (int i = 1; i < argc; i++) {
        int m;
        if (cli_is_help(argv[i])) {
            cmd_run_help(stdout);
            rc = CLI_OK;
            goto done;
        } else if ((m = cli_option("run", argc, argv, &i, "--in", &v)) != 0) {
            if (m < 0 || add_binding("--in", v, ins, &nin))
                goto done;
        } else if ((m = cli_option("run", argc, argv, &i, "--out", &v)) != 0) {
            if (m < 0 || add_binding("--out", v, outs, &nout))
                goto done;
        } else if ((m = cli_option("run", argc, argv, &i, "--mode", &v)) != 0) {
            if (m < 0)
                goto done;
            mode = v;
        } else if (strcmp(argv[i], "--stats") == 0) {
            stats = true;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            cli_usage("run", "unknown option '%s'", argv[i]);
            goto done;
        } else if (path) {
            cli_usage("run", "one graph file at a time (got '%s' and '%s')", path, argv[i]);
            goto done;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        cli_usage("run", "missing the graph file (FILE.kiln, or '-' for stdin)");
        goto done;
    }
    kiln_mode km;
    if (cli_parse_mode(mode, &km)) {
        cli_usage("run", "unknown mode '%s' (modes: fused, eager, interp)", mode);
        goto done;
    }

    kiln_graph *g;
    if (cli_load_graph(path, &g)) {
        rc = cli_fail();
        goto done;
    }
    rc = run_graph(g, km, ins, nin, outs, nout);
    kiln_graph_free(g);
    if (stats && rc == CLI_OK)
        print_stats(cpu_before, wall0);
done:
    free(ins);
    free(outs);
    return rc;
}
