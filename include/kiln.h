/*
 * kiln.h — the one public header of kiln, a JIT compiler for captured tensor graphs.
 *
 * Conventions (see docs/api.md for the long form):
 *  - Every handle is opaque.  Each `_new`/`_parse` has a `_free`; `_free(NULL)` is a no-op.
 *  - Fallible functions return a kiln_status (or NULL) and set the calling thread's error:
 *    kiln_errcode() and kiln_errmsg() read it.  Messages have the form
 *    "<api>: <problem>: <detail>" and are owned by the library (valid until the thread's
 *    next failing kiln call).
 *  - Bad input is never fatal: the process keeps running.
 */
#ifndef KILN_H
#define KILN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#if defined(KILN_STATIC_DEFINE) || !defined(__GNUC__)
#define KILN_API
#else
#define KILN_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0
#define KILN_VERSION_STRING "0.1.0"

/* kiln_version: the library's version string, e.g. "0.1.0".  Static storage; thread-safe. */
KILN_API const char *kiln_version(void);

/* ---------------------------------------------------------------------------------------
 * Result codes.  One list; the values are stable (append only).
 * ------------------------------------------------------------------------------------- */
#define KILN_STATUS_LIST(X)                                                                  \
    X(OK, 0, "ok")                                                                           \
    X(ERR_NOMEM, 1, "out of memory")                                                         \
    X(ERR_INVALID_ARG, 2, "invalid argument")                                                \
    X(ERR_DTYPE, 3, "dtype error")                                                           \
    X(ERR_SHAPE, 4, "shape error")                                                           \
    X(ERR_OVERFLOW, 5, "size overflow")                                                      \
    X(ERR_PARSE, 6, "parse error")                                                           \
    X(ERR_VERIFY, 7, "graph verification failed")                                            \
    X(ERR_IO, 8, "i/o error")                                                                \
    X(ERR_FORMAT, 9, "bad file format")                                                      \
    X(ERR_UNSUPPORTED, 10, "unsupported")                                                    \
    X(ERR_OUTSIDE_SCOPE, 11, "capture operation outside a scope")                            \
    X(ERR_SCOPE_CLOSED, 12, "capture scope is already complete")                             \
    X(ERR_FOREIGN_TENSOR, 13, "tensor belongs to another scope")                             \
    X(ERR_SCOPE_ACTIVE, 14, "device already has an open scope")                              \
    X(ERR_BOUNDARY, 15, "bad scope boundary")                                                \
    X(ERR_MISUSE, 16, "invalid handle")                                                      \
    X(ERR_COMPILE, 17, "compilation failed")                                                 \
    X(ERR_INTERNAL, 18, "internal error")

typedef enum kiln_status {
#define KILN_X_(name, value, text) KILN_##name = value,
    KILN_STATUS_LIST(KILN_X_)
#undef KILN_X_
        KILN_STATUS_COUNT
} kiln_status;

/* kiln_status_str: a short fixed description of a code ("shape error"); never NULL
 * ("unknown status" for values outside the list).  Thread-safe. */
KILN_API const char *kiln_status_str(kiln_status status);

/* kiln_errcode / kiln_errmsg: the calling thread's last error.  kiln_errmsg is "" when no
 * error was set.  The string belongs to the library and stays valid until the thread's next
 * kiln call that fails or calls kiln_clear_error. */
KILN_API kiln_status kiln_errcode(void);
KILN_API const char *kiln_errmsg(void);
KILN_API void kiln_clear_error(void);

/* An error hook sees every error as it is set (on the failing thread).  One process-wide
 * hook; NULL removes it.  The hook must not call back into kiln.  Thread-safe to install,
 * but installing while other threads fail is racy for those threads' reports. */
typedef void (*kiln_error_hook)(kiln_status status, const char *message, void *user);
KILN_API void kiln_set_error_hook(kiln_error_hook hook, void *user);

/* ---------------------------------------------------------------------------------------
 * Element types.
 * ------------------------------------------------------------------------------------- */
#define KILN_DTYPE_LIST(X)                                                                   \
    X(F32, f32, 4)                                                                           \
    X(F64, f64, 8)                                                                           \
    X(I32, i32, 4)                                                                           \
    X(I64, i64, 8)                                                                           \
    X(BOOL, bool, 1)

typedef enum kiln_dtype {
#define KILN_X_(E, name, size) KILN_DTYPE_##E,
    KILN_DTYPE_LIST(KILN_X_)
#undef KILN_X_
        KILN_DTYPE_COUNT
} kiln_dtype;

#define KILN_MAX_RANK 8

/* kiln_dtype_name: "f32", "i64", …; "?" for an invalid value.  kiln_dtype_size: bytes per
 * element (bool is one byte holding 0 or 1); 0 for an invalid value. */
KILN_API const char *kiln_dtype_name(kiln_dtype dtype);
KILN_API size_t kiln_dtype_size(kiln_dtype dtype);

/* ---------------------------------------------------------------------------------------
 * Graphs.  A kiln_graph is a complete, verified tensor graph: named inputs, nodes in
 * topological order, named outputs, constant data owned by the graph.  Graphs are
 * immutable once built; every function below is thread-safe on a shared graph.
 * ------------------------------------------------------------------------------------- */
typedef struct kiln_graph kiln_graph;

/* kiln_graph_parse: parse and verify one graph in the text format (docs/format.md).
 * `len` is the text's length in bytes (the text need not be NUL-terminated).  On success
 * *out owns a new graph (free with kiln_graph_free).  Errors: KILN_ERR_PARSE (the message
 * names line:column and what was expected), KILN_ERR_VERIFY / ERR_SHAPE / ERR_DTYPE /
 * ERR_OVERFLOW (rule broken), KILN_ERR_NOMEM, KILN_ERR_INVALID_ARG (NULL text or out). */
KILN_API kiln_status kiln_graph_parse(const char *text, size_t len, kiln_graph **out);

/* kiln_graph_free: frees the graph and its constant data.  NULL is a no-op. */
KILN_API void kiln_graph_free(kiln_graph *graph);

/* kiln_graph_print: write the graph in the text format; parsing what it writes gives a
 * graph that prints identically.  Returns KILN_ERR_IO if the stream fails. */
KILN_API kiln_status kiln_graph_print(const kiln_graph *graph, FILE *stream);

/* kiln_graph_to_string: the text format in a new NUL-terminated string the caller frees
 * with free().  NULL on failure (KILN_ERR_NOMEM / KILN_ERR_MISUSE). */
KILN_API char *kiln_graph_to_string(const kiln_graph *graph);

/* kiln_graph_print_dot: write the graph as a Graphviz digraph. */
KILN_API kiln_status kiln_graph_print_dot(const kiln_graph *graph, FILE *stream);

/* kiln_graph_hash: structural hash.  Graphs built the same way hash equal whatever their
 * value names; a different op, constant, dtype, shape or attribute changes it.
 * kiln_graph_generic_hash ignores sizes (same ops, dtypes, ranks and broadcast pattern):
 * it keys kernels that take sizes as arguments.  kiln_graph_equal compares structure
 * exactly (1 equal, 0 not). */
KILN_API uint64_t kiln_graph_hash(const kiln_graph *graph);
KILN_API uint64_t kiln_graph_generic_hash(const kiln_graph *graph);
KILN_API int kiln_graph_equal(const kiln_graph *a, const kiln_graph *b);

/* Boundary description.  Strings and arrays belong to the graph. */
typedef struct kiln_value_info {
    const char *name;
    kiln_dtype dtype;
    int rank;
    const int64_t *dims; /* rank entries */
    size_t count;        /* number of elements */
    size_t bytes;        /* count * dtype size */
} kiln_value_info;

KILN_API const char *kiln_graph_name(const kiln_graph *graph);
KILN_API int kiln_graph_num_inputs(const kiln_graph *graph);
KILN_API int kiln_graph_num_outputs(const kiln_graph *graph);
/* Fill *info for input/output i (0-based).  KILN_ERR_INVALID_ARG when i is out of range. */
KILN_API kiln_status kiln_graph_input(const kiln_graph *graph, int i, kiln_value_info *info);
KILN_API kiln_status kiln_graph_output(const kiln_graph *graph, int i, kiln_value_info *info);

/* kiln_graph_interpret: run the graph with the reference interpreter, kiln's oracle.
 * inputs[i] points at input i's elements (row-major, contiguous, sizes as declared);
 * outputs[i] at room for output i.  f32 math is done in f64 and rounded once.  Slow by
 * design.  Errors: KILN_ERR_INVALID_ARG (NULL buffer with non-zero size), KILN_ERR_NOMEM. */
KILN_API kiln_status kiln_graph_interpret(const kiln_graph *graph, const void *const *inputs,
                                          void *const *outputs);

#ifdef __cplusplus
}
#endif
#endif /* KILN_H */
