/* bench.h — the benchmark suite embedded in the kiln binary (generated bench_suite.c),
 * and what `kiln bench` and `kiln check` share.  Those two, and only those, may reach past
 * kiln.h: they read graphs' nodes (ir.h), the JIT's host, pool and caches (jit.h), the
 * capture module's replay of a graph (capture.h: bench's re-capture time) and the oracle
 * (lib/check); the other subcommands use kiln.h only (cli.h; tests/cli/public_api.sh
 * checks their objects). */
#ifndef KILN_BENCH_H
#define KILN_BENCH_H

#include <stddef.h>
#include <stdio.h>

#include "cli.h"

typedef struct bench_workload {
    const char *name;
    const char *text; /* the .kiln file */
    size_t len;
} bench_workload;

extern const bench_workload bench_suite[];
extern const int bench_suite_count;

int cmd_bench(int argc, char **argv);
void cmd_bench_help(FILE *f);
int cmd_check(int argc, char **argv);
void cmd_check_help(FILE *f);


#endif
