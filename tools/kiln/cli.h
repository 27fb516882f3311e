/* cli.h — what the kiln command's files share: the subcommands, exit codes, messages, and
 * helpers for loading graphs, making inputs and summarising values.
 *
 * The command is a client of the public API: this header, cli.c, main.c and the run, dump
 * and cache subcommands use kiln.h only, as any program linking libkiln could.  bench and
 * check read graphs' nodes and the JIT's internals through bench.h, the one internal
 * header of the command. */
#ifndef KILN_CLI_H
#define KILN_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "kiln.h"

/* Exit codes of every subcommand. */
enum {
    CLI_OK = 0,    /* success */
    CLI_FAIL = 1,  /* the work failed: unreadable file, bad graph, kiln error */
    CLI_USAGE = 2, /* the command line is wrong: unknown command or option, missing argument */
};

/* A subcommand: argv[0] is its name; returns an exit code. */
typedef struct cli_command {
    const char *name;
    const char *summary; /* one line for `kiln --help` */
    int (*run)(int argc, char **argv);
    void (*help)(FILE *f);
} cli_command;

int cmd_dump(int argc, char **argv);
void cmd_dump_help(FILE *f);
int cmd_run(int argc, char **argv);
void cmd_run_help(FILE *f);
int cmd_cache(int argc, char **argv);
void cmd_cache_help(FILE *f);

/* The command's own errors ("run: missing input: ...", "model.kiln: cannot open: ..."):
 * format the message, keep it with `status` for cli_fail, and clear the thread's kiln
 * error (the command's message is now the latest).  Returns status.  Not thread-safe: the
 * command reports from its main thread. */
kiln_status cli_error(kiln_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The message of the latest error: the command's (cli_error), unless a kiln call failed
 * after it; "" when there is none. */
const char *cli_errmsg(void);
/* Print "kiln: <cli_errmsg()>" (or the status's description when the message is empty) to
 * stderr and forget the command's error; returns CLI_FAIL. */
int cli_fail(void);
/* Print "kiln CMD: <message>" and a pointer to CMD's --help to stderr; returns CLI_USAGE. */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Is argv[i] one of the help flags? */
bool cli_is_help(const char *arg);
/* Match option `name` ("--in") in argv[*i]: "--in VALUE" (consumes argv[*i + 1]) or
 * "--in=VALUE".  Returns 1 with *value set, 0 when argv[*i] is another argument, and -1
 * (usage error printed) when the value is missing. */
int cli_option(const char *cmd, int argc, char **argv, int *i, const char *name,
               const char **value);

/* Free bufs[0..n) and then bufs (NULL: nothing): a command's input or output buffers. */
void cli_free_buffers(void **bufs, int n);

/* Read a whole file ("-" is stdin) into a NUL-terminated buffer (free it).
 * KILN_ERR_IO / KILN_ERR_NOMEM with "<path>: <problem>" messages (cli_error). */
kiln_status cli_read_file(const char *path, char **text, size_t *len);
/* Read, parse and verify a graph file; parse errors read "file.kiln:3:14: ...". */
kiln_status cli_load_graph(const char *path, kiln_graph **graph);

/* Deterministic inputs: floats uniform in [-1, 1) (exact in f32), ints in [-100, 100],
 * bools 0/1, from a splitmix64 stream in *state. */
void cli_fill_random(kiln_dtype dtype, void *data, size_t count, uint64_t *state);

/* One line about a value: name, type, min/max/mean (NaN count for floats) and the first
 * few elements. */
void cli_print_summary(FILE *f, const kiln_value_info *info, const void *data);
/* "fused", "eager" or "interp" into *mode; -1 for anything else. */
int cli_parse_mode(const char *s, kiln_mode *mode);
/* --code: "auto" (the plan decides by size), "full" or "compact" into *code
 * (KILN_CODE_AUTO, _FULL, _COMPACT); -1 for anything else. */
int cli_parse_code(const char *s, kiln_code *code);
/* "f32[4,3]" for a dtype and shape (the text format's spelling); CLI_TYPE_STR_MAX bytes
 * hold any. */
#define CLI_TYPE_STR_MAX 256
char *cli_type_str_of(kiln_dtype dtype, int rank, const int64_t *dims, char *buf, size_t n);
/* ... for a boundary value. */
char *cli_type_str(const kiln_value_info *info, char *buf, size_t n);
/* Is dtype a float (f32, f64)?  Element i of a buffer of dtype as a double, and as an
 * integer (bools 0/1); storing a double into element i, converted as a C cast does. */
bool cli_dtype_is_float(kiln_dtype dtype);
double cli_load_f64(kiln_dtype dtype, const void *data, size_t i);
int64_t cli_load_i64(kiln_dtype dtype, const void *data, size_t i);
/* Clock c (CLOCK_MONOTONIC, CLOCK_PROCESS_CPUTIME_ID, ...) in milliseconds. */
double cli_clock_ms(clockid_t c);

#endif
