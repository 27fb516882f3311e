/* support.h — helpers shared by the Check suites. */
#ifndef KILN_TEST_SUPPORT_H
#define KILN_TEST_SUPPORT_H
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "ir.h"

/* Parse `text` into a graph, failing the test with kiln's message if it does not parse. */
kiln_graph *ts_parse(const char *text);
/* Read a whole file (tests/golden/...) relative to the source tree; NUL-terminated. */
char *ts_read_source_file(const char *relpath, size_t *len);
/* Run a Check suite with CK_NORMAL output; returns the process exit code. */
int ts_run(Suite *s);
/* KILN_QUICK=1 (set by `scripts/test.sh --quick`, the edit loop's tier): the slow sweeps
 * run a fraction of their cases.  The full run (CI, plain scripts/test.sh) leaves it unset.
 * ts_quick_n: n, or n / div (at least 1) under KILN_QUICK. */
int ts_quick(void);
int ts_quick_n(int n, int div);

/* Assert that the thread's error is `code` and its message contains `needle`. */
#define ts_assert_error(code, needle)                                                        \
    do {                                                                                     \
        ck_assert_msg(kiln_errcode() == (code), "expected %s, got %s: %s",                   \
                      kiln_status_str(code), kiln_status_str(kiln_errcode()), kiln_errmsg()); \
        ck_assert_msg(strstr(kiln_errmsg(), (needle)) != NULL,                               \
                      "message \"%s\" lacks \"%s\"", kiln_errmsg(), (needle));               \
    } while (0)
#endif
