/* cmd_dump.c — `kiln dump FILE.kiln [--dot] [--plan] [--llvm] [--opt] [--asm]
 * [--mode fused|eager] [--code auto|full|compact]`: parse, verify and print a graph again,
 * in the text format or as Graphviz DOT; with the compiler views, compile it and print what
 * the JIT made of it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

void
cmd_dump_help(FILE *f)
{
    fputs("usage: kiln dump FILE.kiln [--dot] [--plan] [--llvm] [--opt] [--asm]\n"
          "                 [--mode fused|eager] [--code auto|full|compact]\n"
          "\n"
          "Parse and verify the graph in FILE.kiln ('-' reads standard input) and print it\n"
          "again in kiln's text format (what it prints parses back to the same graph).\n"
          "\n"
          "options:\n"
          "  --dot       print a Graphviz digraph instead (render with: dot -Tsvg)\n"
          "  --plan      compile and print the fusion plan: which op went into which kernel\n"
          "              and why each stored value is stored\n"
          "  --llvm      compile and print each kernel's LLVM IR before optimisation\n"
          "  --opt       ... after optimisation (look for <16 x float> on AVX-512)\n"
          "  --asm       ... and the host assembly (zmm registers on AVX-512)\n"
          "  --mode M    compile fused (default) or eager (one kernel per op)\n"
          "  --code C    auto (default: compact code for plans of more than 1024 distinct\n"
          "              elementwise instructions), full or compact (vector math called\n"
          "              out of line, one masked loop body, LLVM's fast code generator)\n"
          "  -h, --help  show this help\n"
          "\n"
          "With compiler views the graph text is not printed unless --graph is given too.\n"
          "exit status: 0 printed, 1 the file cannot be read, parsed, verified or compiled,\n"
          "2 usage error\n",
          f);
}

int
cmd_dump(int argc, char **argv)
{
    const char *path = NULL, *mode = "fused", *code = "auto", *v;
    bool dot = false, graph = false;
    /* the compiler views, in the order they print */
    static const kiln_view views[] = {KILN_VIEW_PLAN, KILN_VIEW_LLVM, KILN_VIEW_OPT,
                                      KILN_VIEW_ASM};
    bool want[4] = {false, false, false, false}, any = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m;
        bool view = false;
        for (int k = 0; k < 4; k++)
            if (a[0] == '-' && a[1] == '-' && strcmp(a + 2, kiln_view_name(views[k])) == 0)
                want[k] = any = view = true;
        if (view)
            continue;
        if (cli_is_help(a)) {
            cmd_dump_help(stdout);
            return CLI_OK;
        } else if (strcmp(a, "--dot") == 0) {
            dot = true;
        } else if (strcmp(a, "--graph") == 0) {
            graph = true;
        } else if ((m = cli_option("dump", argc, argv, &i, "--mode", &v)) != 0) {
            if (m < 0)
                return CLI_USAGE;
            mode = v;
        } else if ((m = cli_option("dump", argc, argv, &i, "--code", &v)) != 0) {
            if (m < 0)
                return CLI_USAGE;
            code = v;
        } else if (a[0] == '-' && a[1] != '\0') {
            return cli_usage("dump", "unknown option '%s'", a);
        } else if (path) {
            return cli_usage("dump", "one graph file at a time (got '%s' and '%s')", path, a);
        } else {
            path = a;
        }
    }
    if (!path)
        return cli_usage("dump", "missing the graph file (FILE.kiln, or '-' for stdin)");
    kiln_mode km;
    if (cli_parse_mode(mode, &km) || km == KILN_MODE_INTERP)
        return cli_usage("dump", "--mode is fused or eager, not '%s'", mode);
    kiln_code kc;
    if (cli_parse_code(code, &kc))
        return cli_usage("dump", "--code is auto, full or compact, not '%s'", code);

    kiln_graph *g;
    if (cli_load_graph(path, &g))
        return cli_fail();
    kiln_status st = KILN_OK;
    if (dot)
        st = kiln_graph_print_dot(g, stdout);
    else if (graph || !any)
        st = kiln_graph_print(g, stdout);
    if (!st && any) {
        kiln_options o = KILN_OPTIONS_INIT;
        o.mode = km;
        o.code = kc;
        o.flags = want[1] || want[2] || want[3] ? KILN_KEEP_DUMPS : 0;
        kiln_program *p = NULL; /* stays NULL if compiling fails */
        st = kiln_program_compile(g, &o, &p);
        for (int k = 0; k < 4 && !st; k++)
            if (want[k])
                st = kiln_program_dump(p, views[k], stdout);
        kiln_program_free(p);
    }
    kiln_graph_free(g);
    if (st)
        return cli_fail();
    if (fflush(stdout) != 0) {
        cli_error(KILN_ERR_IO, "dump: cannot write the output: %s", strerror(errno));
        return cli_fail();
    }
    return CLI_OK;
}
