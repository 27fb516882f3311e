/* cmd_dump.c — `kiln dump FILE.kiln [--dot]`: parse, verify and print a graph again, in the
 * text format or as Graphviz DOT.  What it prints parses back to the same graph. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

void
cmd_dump_help(FILE *f)
{
    fputs("usage: kiln dump FILE.kiln [--dot]\n"
          "\n"
          "Parse and verify the graph in FILE.kiln ('-' reads standard input) and print it\n"
          "again in kiln's text format (what it prints parses back to the same graph).\n"
          "\n"
          "options:\n"
          "  --dot       print a Graphviz digraph instead (render with: dot -Tsvg)\n"
          "  -h, --help  show this help\n"
          "\n"
          "exit status: 0 printed, 1 the file cannot be read, parsed or verified, 2 usage error\n",
          f);
}

int
cmd_dump(int argc, char **argv)
{
    const char *path = NULL;
    bool dot = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            cmd_dump_help(stdout);
            return CLI_OK;
        } else if (strcmp(a, "--dot") == 0) {
            dot = true;
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

    kiln_graph *g;
    if (cli_load_graph(path, &g))
        return cli_fail();
    kiln_status st = dot ? kiln_graph_print_dot(g, stdout) : kiln_graph_print(g, stdout);
    kiln_graph_free(g);
    if (st)
        return cli_fail();
    if (fflush(stdout) != 0) {
        ir_error(KILN_ERR_IO, "dump: cannot write the output: %s", strerror(errno));
        return cli_fail();
    }
    return CLI_OK;
}
