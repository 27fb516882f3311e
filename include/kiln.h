/*
 * kiln.h — the one public header of kiln, a JIT compiler for captured tensor graphs.
 *
 * Conventions (README.md and docs/ have the long form):
 *  - Every handle is opaque.  Each `_new`/`_parse` has a `_free`; `_free(NULL)` is a no-op.
 *  - A kiln_graph, kiln_device or kiln_program pointer is checked against the library's
 *    live objects of its type before anything reads through it: a freed, foreign or
 *    garbage pointer is KILN_ERR_MISUSE ("invalid handle"), and nothing is freed or read.
 *    The check knows only the pointer's value.  A freed object's memory is kept from reuse
 *    until 64 more objects of its type have been freed; after that a new object may get
 *    the same address, and a stale pointer to it then names that new object.
 *  - Fallible functions return a kiln_status (or NULL) and set the calling thread's error:
 *    kiln_errcode() and kiln_errmsg() read it.  Messages have the form
 *    "<api>: <problem>: <detail>" and are owned by the library (valid until the thread's
 *    next failing kiln call).
 *  - Bad input is never fatal: the process keeps running.  Nor is a failure of one of
 *    kiln's own allocations (KILN_ERR_NOMEM; the next call works).  What stays fatal: LLVM
 *    running out of memory during a compile, or while loading modules from the disk cache,
 *    aborts the process (LLVM's allocations, nearly all of a compile's, have no failure
 *    path), as would an LLVM fatal error (a bug).  A host that cannot accept that compiles
 *    in a child process that fills the disk cache, then loads from it (docs/jit.md, "What
 *    stays fatal").
 *  - The environment variables kiln reads (KILN_NUM_THREADS, KILN_CACHE_DIR, KILN_DUMP, ...:
 *    README.md, "Environment") are read once, the first time any is needed.
 *  - Every `_free` returns a kiln_status: KILN_OK (also for NULL, a no-op), or the reason
 *    nothing was freed (KILN_ERR_MISUSE for a freed or foreign pointer; kiln_device_free
 *    also KILN_ERR_SCOPE_ACTIVE).  Ignoring it is safe.
 *  - Every public struct that may grow is versioned: its first field is `size_t size`,
 *    which the caller sets to sizeof the struct it was compiled with (the KILN_*_INIT
 *    macros do, zeroing the rest).  The library reads or writes only the first
 *    min(size, its own sizeof) bytes, so a program built against an older, smaller
 *    layout keeps working with a newer library and the reverse.  docs/abi.md has the rule
 *    in full.  kiln_scope and kiln_tensor are fixed-size value handles, not versioned.
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
/* kiln_graph_parse_named: kiln_graph_parse with `source` naming the text in messages, as a
 * file name does: "kiln_graph_parse: parse error: model.kiln:3:14: expected ')', got '}'"
 * (kiln_graph_parse says "<input>"; so does a NULL source).  The name is not kept.  Errors
 * and ownership as kiln_graph_parse; thread-safe. */
KILN_API kiln_status kiln_graph_parse_named(const char *text, size_t len, const char *source,
                                            kiln_graph **out);

/* kiln_graph_free: frees the graph and its constant data.  NULL is a no-op (KILN_OK); a
 * freed or foreign pointer is KILN_ERR_MISUSE (nothing is freed).  Every function below
 * given such a pointer sets KILN_ERR_MISUSE and returns its failure value (0, -1, NULL or
 * the code). */
KILN_API kiln_status kiln_graph_free(kiln_graph *graph);

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

/* Boundary description.  Strings and arrays belong to the graph.  Versioned (the library
 * writes only the first `size` bytes; a later version may add fields, e.g. strides): set
 * size with KILN_VALUE_INFO_INIT. */
typedef struct kiln_value_info {
    size_t size; /* set by the caller: sizeof(kiln_value_info) */
    const char *name;
    kiln_dtype dtype;
    int rank;
    const int64_t *dims; /* rank entries */
    size_t count;        /* number of elements */
    size_t bytes;        /* count * dtype size */
} kiln_value_info;
#define KILN_VALUE_INFO_INIT {.size = sizeof(kiln_value_info)}

KILN_API const char *kiln_graph_name(const kiln_graph *graph);
KILN_API int kiln_graph_num_inputs(const kiln_graph *graph);
KILN_API int kiln_graph_num_outputs(const kiln_graph *graph);
/* Fill *info for input/output i (0-based): the first info->size bytes (docs/abi.md).
 * KILN_ERR_INVALID_ARG when i is out of range, info is NULL or info->size is smaller than
 * the first field after it (0 included). */
KILN_API kiln_status kiln_graph_input(const kiln_graph *graph, int i, kiln_value_info *info);
KILN_API kiln_status kiln_graph_output(const kiln_graph *graph, int i, kiln_value_info *info);

/* kiln_graph_interpret: run the graph with the reference interpreter, kiln's oracle.
 * inputs[i] points at input i's elements (row-major, contiguous, sizes as declared);
 * outputs[i] at room for output i.  f32 math is done in f64 and rounded once.  Slow by
 * design.  Errors: KILN_ERR_INVALID_ARG (NULL buffer with non-zero size), KILN_ERR_NOMEM. */
KILN_API kiln_status kiln_graph_interpret(const kiln_graph *graph, const void *const *inputs,
                                          void *const *outputs);

/* ---------------------------------------------------------------------------------------
 * Capture: devices, scopes, tensors.
 *
 * A capture device records tensor operations instead of running them, and has no client
 * of its own: kiln_scope_begin registers the scope's client with the router for that
 * device and kiln_scope_end (or an abort) removes it.  Any tensor operation that reaches
 * the router for a device with no open scope is refused with KILN_ERR_OUTSIDE_SCOPE.
 *
 * kiln_scope and kiln_tensor are small *value* handles (a scope serial that is never
 * reused, a node id, a check word), not pointers: a handle from a finished scope can be
 * passed to any function and is detected (KILN_ERR_SCOPE_CLOSED), never dereferenced.
 * The all-zero handle is the null handle, returned on failure.
 *
 * Failure inside a scope is sticky: an operation given a null tensor returns a null
 * tensor and keeps the first error, and kiln_scope_end reports the scope's first error
 * (code and message), so nested expressions need one check at the end:
 *
 *     kiln_scope s = kiln_scope_begin(dev);
 *     kiln_tensor x = kiln_input(dev, "x", KILN_DTYPE_F32, 2, dims);
 *     kiln_tensor y = kiln_div(kiln_exp(x), kiln_reduce_sum(kiln_exp(x), 1, axes, 1));
 *     if (kiln_scope_end(s, 1, &y, NULL, &program) != KILN_OK) puts(kiln_errmsg());
 *
 * Thread safety: every function here is thread-safe.  Scopes on different devices may be
 * open at once, on one thread or several; one scope may be used from several threads
 * (operations are serialized).
 * ------------------------------------------------------------------------------------- */
typedef struct kiln_device kiln_device;
typedef struct kiln_program kiln_program;

typedef struct kiln_scope {
    uint64_t serial; /* 0: the null scope */
    uint64_t check;
} kiln_scope;

typedef struct kiln_tensor {
    uint64_t scope; /* serial of the recording scope; 0: the null tensor */
    uint32_t node;
    uint32_t check;
} kiln_tensor;

static inline int
kiln_scope_is_null(kiln_scope s)
{
    return s.serial == 0;
}

static inline int
kiln_tensor_is_null(kiln_tensor t)
{
    return t.scope == 0;
}

/* kiln_device_new: a new capture device with a process-unique id (ids are never reused,
 * so a stale tensor can never alias a newer device).  NULL on KILN_ERR_NOMEM.
 * kiln_device_free: NULL is a no-op (KILN_OK); KILN_ERR_SCOPE_ACTIVE (device kept) while a scope is
 * open on it; KILN_ERR_MISUSE for a freed or foreign pointer. */
KILN_API kiln_device *kiln_device_new(void);
KILN_API kiln_status kiln_device_free(kiln_device *device);
/* The device's id (>= 1), or 0 with KILN_ERR_MISUSE. */
KILN_API uint64_t kiln_device_id(const kiln_device *device);

/* kiln_scope_begin: open a capture scope on `device`: create its client and register it
 * with the router.  Null scope on KILN_ERR_SCOPE_ACTIVE (the device has an open scope),
 * KILN_ERR_MISUSE (bad device), KILN_ERR_NOMEM. */
KILN_API kiln_scope kiln_scope_begin(kiln_device *device);

/* kiln_scope_output: mark `t` as an output of its scope named `name` (NULL: a default
 * name, given when the scope ends: "out<i>" for the output at position i among the
 * outputs, or, if another output has that name, the next free "out<k>" (k > i); a default
 * never collides with a name the caller chose, whichever was given first).  Errors:
 * KILN_ERR_BOUNDARY (null tensor, tensor already an output, a name the caller already
 * gave another output, tensor of a scope that has ended),
 * KILN_ERR_SCOPE_CLOSED (the scope has ended), KILN_ERR_FOREIGN_TENSOR (t belongs to
 * another open scope), KILN_ERR_MISUSE.  A failure here also becomes the scope's first
 * error, reported again by kiln_scope_end; a null tensor in a scope that already failed
 * returns that first error (code and message). */
KILN_API kiln_status kiln_scope_output(kiln_scope scope, const char *name, kiln_tensor t);

/* Executors: FUSED (default) compiles fused SIMD kernels for the host CPU; EAGER is the
 * same compiler with fusion off (one kernel per op, every intermediate written to memory:
 * the honest baseline for what fusion buys); INTERP runs the reference interpreter.
 * FUSED and EAGER compile every op: reductions are fused with their producers and with
 * the consumers over the same rows, matmul is a register-tiled kernel with its elementwise
 * consumers fused as an epilogue (docs/jit.md); compiled f32 matmul accumulates in f32
 * (error bound in docs/semantics.md). */
typedef enum kiln_mode {
    KILN_MODE_FUSED,
    KILN_MODE_EAGER,
    KILN_MODE_INTERP,
    KILN_MODE_COUNT
} kiln_mode;

/* Stores (kiln_options.stores).  By default (AUTO) an elementwise kernel (or a reduction
 * kernel over rows, such as softmax's or layernorm's) writes a value that no later kernel
 * of the program reads with non-temporal ("streaming") stores when the kernel moves far
 * more bytes than the last-level cache holds (docs/jit.md): the value would be evicted
 * before anyone reads it, and streaming saves reading every output line before writing
 * it.  STREAM: stream such values whatever their size; CACHED: never stream (the caller
 * reads the outputs right away, or measures conventional bandwidth).  Results are the
 * same bits either way. */
typedef enum kiln_stores {
    KILN_STORES_AUTO,
    KILN_STORES_STREAM,
    KILN_STORES_CACHED,
    KILN_STORES_COUNT
} kiln_stores;

/* Code (kiln_options.code).  By default (AUTO) a plan whose elementwise kernels hold more
 * than 1024 distinct instructions (thousands of ops: generated or unrolled graphs)
 * compiles them compactly: vector math called out of line, one masked loop body, LLVM's
 * fast code generator.  That compiles about 10x faster and runs slower (docs/jit.md,
 * "Compact code"); reductions and matmuls are always compiled in full.  COMPACT: compact
 * whatever the size; FULL: never (the best code, however long it takes).  Results are the
 * same bits either way. */
typedef enum kiln_code {
    KILN_CODE_AUTO,
    KILN_CODE_FULL,
    KILN_CODE_COMPACT,
    KILN_CODE_COUNT
} kiln_code;

/* Options for ending a scope or compiling a graph.  NULL means the defaults.  Versioned
 * (docs/abi.md): start from KILN_OPTIONS_INIT (size set, every other field 0: the
 * defaults) and set the fields you need:
 *
 *     kiln_options o = KILN_OPTIONS_INIT;
 *     o.mode = KILN_MODE_EAGER;
 *
 * The library reads the first `size` bytes; fields past them take their defaults.  Errors
 * of the functions that take options: KILN_ERR_INVALID_ARG for a size smaller than the
 * first field after it (a zeroed struct included), a mode, stores or code out of range,
 * or a flag bit this library does not know; KILN_ERR_UNSUPPORTED for a size larger than
 * the library's struct with non-zero bytes past it (a newer header's fields that this
 * library cannot honour). */
typedef struct kiln_options {
    size_t size; /* set by the caller: sizeof(kiln_options) */
    kiln_mode mode;
    /* Names for the outputs passed to kiln_scope_end (NULL, or NULL entries: default names,
     * as for kiln_scope_output). */
    const char *const *output_names;
    /* The program's input order: each kiln_input of the scope exactly once.  0/NULL:
     * declaration order. */
    int ninputs;
    const kiln_tensor *inputs;
    /* The captured graph's name (NULL: "captured"). */
    const char *graph_name;
    /* KILN_KEEP_DUMPS, KILN_NO_CACHE, KILN_NO_DISK_CACHE, KILN_TIERED (below), or 0. */
    unsigned flags;
    kiln_stores stores; /* KILN_STORES_AUTO (0), _STREAM or _CACHED */
    kiln_code code;     /* KILN_CODE_AUTO (0), _FULL or _COMPACT */
} kiln_options;
#define KILN_OPTIONS_INIT {.size = sizeof(kiln_options)}

/* KILN_KEEP_DUMPS: keep the llvm, opt and asm views for kiln_program_dump. */
#define KILN_KEEP_DUMPS 1u
/* KILN_NO_CACHE: compile from scratch, neither using nor filling the caches, in memory or
 * on disk (for measuring cold compile time). */
#define KILN_NO_CACHE 2u
/* KILN_NO_DISK_CACHE: neither read nor write the persistent kernel cache (as
 * KILN_CACHE_DIR=off does for the whole process); the in-memory caches still apply. */
#define KILN_NO_DISK_CACHE 4u
/* KILN_TIERED: for a client that wants its first result soon (a model's first step): the
 * kernels a compile must make (in neither cache) are generated first by LLVM's fast code
 * generator, in about half the time, and run from that code until the full code, made on
 * a background thread at the lowest priority, replaces it (kiln_jit_sync waits for that).
 * Results are the same bits from either code (a NaN's payload aside); the first code's
 * loops are slower (docs/jit.md, "Tiered compile").  Only the full code goes to the disk
 * cache.  Ignored with KILN_NO_CACHE or KILN_KEEP_DUMPS. */
#define KILN_TIERED 128u /* bits 8-64 are retired: docs/abi.md */

/* kiln_scope_end: finish the scope.  The `noutputs` tensors in `outputs` become outputs
 * after any marked with kiln_scope_output.  Boundaries are checked, the client is
 * unregistered on every path (success or error: the device is free again), and the
 * completed graph is compiled into *program (caller frees with kiln_program_free).
 * Errors: the scope's first recorded error if any op failed (its own code and message);
 * KILN_ERR_BOUNDARY (no outputs; a null or duplicate output; a duplicate name; an output
 * from a scope that has ended; a bad input order list, or an entry of it that is computed
 * inside the scope rather than declared with kiln_input); KILN_ERR_FOREIGN_TENSOR (an
 * output recorded in another open scope); KILN_ERR_SCOPE_CLOSED (the scope already
 * ended); KILN_ERR_MISUSE (garbage handle); KILN_ERR_INVALID_ARG; KILN_ERR_NOMEM; compile
 * errors.  *program is NULL on any error.  Ending a scope a second time is
 * KILN_ERR_SCOPE_CLOSED and changes nothing. */
KILN_API kiln_status kiln_scope_end(kiln_scope scope, int noutputs, const kiln_tensor *outputs,
                                    const kiln_options *options, kiln_program **program);

/* kiln_scope_end_graph: like kiln_scope_end but returns the captured graph without
 * compiling (for export and dumps); caller frees with kiln_graph_free. */
KILN_API kiln_status kiln_scope_end_graph(kiln_scope scope, int noutputs,
                                          const kiln_tensor *outputs, const kiln_options *options,
                                          kiln_graph **graph);

/* kiln_scope_abort: discard an open scope and release its device.  Tensors of the scope
 * become stale.  KILN_ERR_SCOPE_CLOSED if it already ended. */
KILN_API kiln_status kiln_scope_abort(kiln_scope scope);

/* kiln_capture_scope: begin a scope on `device`, call fn(scope, user) — which records
 * operations and marks outputs with kiln_scope_output — and end it, so a scope can never
 * be left open.  If fn returns an error the scope is aborted (device released) and that
 * error is returned (with the scope's first error message if one was recorded). */
typedef kiln_status (*kiln_capture_fn)(kiln_scope scope, void *user);
KILN_API kiln_status kiln_capture_scope(kiln_device *device, kiln_capture_fn fn, void *user,
                                        const kiln_options *options, kiln_program **program);

/* ---- creating tensors: through the router, inside an open scope of `device` ----------
 * Each returns the null tensor and sets the error on failure: KILN_ERR_OUTSIDE_SCOPE (the
 * device has no open scope), KILN_ERR_MISUSE, KILN_ERR_SHAPE / ERR_DTYPE / ERR_OVERFLOW,
 * KILN_ERR_INVALID_ARG. */

/* A graph input named `name` (unique in the scope). */
KILN_API kiln_tensor kiln_input(kiln_device *device, const char *name, kiln_dtype dtype, int rank,
                                const int64_t *dims);
/* A constant: `data` (row-major, count*size bytes) is copied into the graph. */
KILN_API kiln_tensor kiln_constant(kiln_device *device, kiln_dtype dtype, int rank,
                                   const int64_t *dims, const void *data);
/* Every element `value` converted to dtype by the cast rules. */
KILN_API kiln_tensor kiln_full(kiln_device *device, kiln_dtype dtype, int rank,
                               const int64_t *dims, double value);
/* Rank-0 full. */
KILN_API kiln_tensor kiln_scalar(kiln_device *device, kiln_dtype dtype, double value);
/* Rank-0 full of like's dtype in like's scope (for `x * 0.5`). */
KILN_API kiln_tensor kiln_scalar_like(kiln_tensor like, double value);
/* [n]: start + i*delta (n >= 0; dtype not bool). */
KILN_API kiln_tensor kiln_arange(kiln_device *device, kiln_dtype dtype, int64_t n, double start,
                                 double delta);

/* ---- operations: one per op of the op table (docs/semantics.md has the meanings) ----
 * Operands must belong to one open scope: KILN_ERR_SCOPE_CLOSED for a tensor whose scope
 * ended, KILN_ERR_FOREIGN_TENSOR for tensors of different scopes, KILN_ERR_MISUSE for a
 * garbage handle; shape and dtype errors name the op and the shapes. */
#define KILN_UNARY_(name) KILN_API kiln_tensor kiln_##name(kiln_tensor x);
#define KILN_BINARY_(name) KILN_API kiln_tensor kiln_##name(kiln_tensor a, kiln_tensor b);
KILN_UNARY_(neg) KILN_UNARY_(abs) KILN_UNARY_(sign) KILN_UNARY_(exp) KILN_UNARY_(exp2)
KILN_UNARY_(expm1) KILN_UNARY_(log) KILN_UNARY_(log2) KILN_UNARY_(log1p) KILN_UNARY_(sqrt)
KILN_UNARY_(rsqrt) KILN_UNARY_(recip) KILN_UNARY_(sin) KILN_UNARY_(cos) KILN_UNARY_(tan)
KILN_UNARY_(tanh) KILN_UNARY_(sigmoid) KILN_UNARY_(erf) KILN_UNARY_(relu) KILN_UNARY_(gelu)
KILN_UNARY_(gelu_erf) KILN_UNARY_(silu) KILN_UNARY_(floor) KILN_UNARY_(ceil) KILN_UNARY_(round)
KILN_UNARY_(trunc) KILN_UNARY_(not) KILN_UNARY_(isnan) KILN_UNARY_(isinf)
KILN_BINARY_(add) KILN_BINARY_(sub) KILN_BINARY_(mul) KILN_BINARY_(div) KILN_BINARY_(rem)
KILN_BINARY_(pow) KILN_BINARY_(max) KILN_BINARY_(min) KILN_BINARY_(atan2) KILN_BINARY_(eq)
KILN_BINARY_(ne) KILN_BINARY_(lt) KILN_BINARY_(le) KILN_BINARY_(gt) KILN_BINARY_(ge)
KILN_BINARY_(and) KILN_BINARY_(or) KILN_BINARY_(xor) KILN_BINARY_(matmul)
#undef KILN_UNARY_
#undef KILN_BINARY_

KILN_API kiln_tensor kiln_where(kiln_tensor cond, kiln_tensor a, kiln_tensor b);
KILN_API kiln_tensor kiln_clamp(kiln_tensor x, kiln_tensor lo, kiln_tensor hi);
KILN_API kiln_tensor kiln_cast(kiln_tensor x, kiln_dtype to);

/* Movement.  Lists have one entry per axis of x unless stated. */
KILN_API kiln_tensor kiln_reshape(kiln_tensor x, int rank, const int64_t *dims);
KILN_API kiln_tensor kiln_permute(kiln_tensor x, int rank, const int *perm);
KILN_API kiln_tensor kiln_expand(kiln_tensor x, int rank, const int64_t *dims);
/* Python x[start:stop:step] per axis; a NULL list means the default for every axis
 * (start 0 or the end for negative steps, stop past the end, step 1). */
KILN_API kiln_tensor kiln_slice(kiln_tensor x, const int64_t *start, const int64_t *stop,
                                const int64_t *step);
KILN_API kiln_tensor kiln_concat(int n, const kiln_tensor *xs, int axis);
KILN_API kiln_tensor kiln_pad(kiln_tensor x, const int64_t *low, const int64_t *high,
                              double value);
KILN_API kiln_tensor kiln_gather(kiln_tensor x, kiln_tensor indices, int axis);

/* Reductions over `naxes` axes (negative axes count from the end); keepdim non-zero keeps
 * them as size 1.  argmax/argmin take exactly one axis. */
#define KILN_REDUCE_(name)                                                                   \
    KILN_API kiln_tensor kiln_##name(kiln_tensor x, int naxes, const int *axes, int keepdim);
KILN_REDUCE_(reduce_sum) KILN_REDUCE_(reduce_mean) KILN_REDUCE_(reduce_max)
KILN_REDUCE_(reduce_min) KILN_REDUCE_(reduce_prod) KILN_REDUCE_(argmax) KILN_REDUCE_(argmin)
#undef KILN_REDUCE_

/* Tensor accessors: -1 (dtype: -1 cast to kiln_dtype) with the error set for a null,
 * stale or garbage tensor or an axis out of range. */
KILN_API kiln_dtype kiln_tensor_dtype(kiln_tensor t);
KILN_API int kiln_tensor_rank(kiln_tensor t);
KILN_API int64_t kiln_tensor_dim(kiln_tensor t, int axis);

/* ---- programs ------------------------------------------------------------------------ */
/* kiln_program_run: inputs[i] points at input i (program input order, row-major,
 * contiguous, sizes as declared); outputs[i] at room for output i.  Output buffers must not
 * overlap each other or the inputs (kernels read and write in parallel).  A program may be
 * run from several threads at once.  Errors: KILN_ERR_MISUSE, KILN_ERR_INVALID_ARG,
 * KILN_ERR_NOMEM. */
KILN_API kiln_status kiln_program_run(kiln_program *program, const void *const *inputs,
                                      void *const *outputs);
/* NULL is a no-op (KILN_OK); a freed or foreign pointer is KILN_ERR_MISUSE (nothing is
 * freed). */
KILN_API kiln_status kiln_program_free(kiln_program *program);

/* kiln_program_hold_input: declare that input `input` of the program does not change from
 * run to run (hold non-zero), or no longer (0).  A weight bound per run that a matmul with
 * many rows reads (a prefill step's x @ W) is packed into the kernel's panel layout on
 * every run; while W is held, the program packs it on the first run and keeps that copy,
 * so later runs skip the work.  The copy is remade when a run passes another pointer for
 * the input, or after kiln_program_input_changed (call it after writing new data at the
 * same pointer).  Not calling it after such a write gives results computed from the old
 * data where the copy was used (never a memory error: the copy is the program's own).
 * Releasing frees the copies.  A matmul that reads B in place (few rows) keeps nothing;
 * holding costs nothing there.  Concurrent runs of the program must pass the same pointer
 * for a held input, and neither function may run while a run of the program is in flight.
 * Errors: KILN_ERR_MISUSE, KILN_ERR_INVALID_ARG (input out of range), KILN_ERR_NOMEM
 * (kiln_program_run: no room for a copy). */
KILN_API kiln_status kiln_program_hold_input(kiln_program *program, int input, int hold);
KILN_API kiln_status kiln_program_input_changed(kiln_program *program, int input);
/* The captured graph (owned by the program; print it with kiln_graph_print — kiln dump
 * and kiln run accept what it prints).  NULL with KILN_ERR_MISUSE for a bad handle. */
KILN_API const kiln_graph *kiln_program_graph(const kiln_program *program);
/* The executor the program really uses; -1 (cast) with KILN_ERR_MISUSE for a bad handle. */
KILN_API kiln_mode kiln_program_mode(const kiln_program *program);

/* kiln_program_compile: compile a graph (parsed, or from kiln_scope_end_graph) into a
 * program; the graph is copied, the caller keeps it.  Errors as kiln_scope_end.  LLVM
 * running out of memory here aborts the process (see the top of this file). */
KILN_API kiln_status kiln_program_compile(const kiln_graph *graph, const kiln_options *options,
                                          kiln_program **program);

/* What kiln_program_dump shows: GRAPH (text format), PLAN (which op went into which kernel
 * and why each boundary was drawn), LLVM (IR before optimisation), OPT (after), ASM (host
 * assembly).  kiln_view_name gives "graph", "plan", "llvm", "opt", "asm" (the names
 * KILN_DUMP and kiln dump use); NULL for a value outside the list. */
typedef enum kiln_view {
    KILN_VIEW_GRAPH,
    KILN_VIEW_PLAN,
    KILN_VIEW_LLVM,
    KILN_VIEW_OPT,
    KILN_VIEW_ASM,
    KILN_VIEW_COUNT
} kiln_view;
KILN_API const char *kiln_view_name(kiln_view view);

/* kiln_program_dump: write one view of the program to `stream`.  LLVM/OPT/ASM need the
 * program compiled with KILN_KEEP_DUMPS or the KILN_DUMP environment variable.
 * KILN_DUMP=graph,plan,llvm,opt,asm dumps every compiled program to stderr, or into
 * files in KILN_DUMP_DIR.  Errors: KILN_ERR_INVALID_ARG (a view outside the list, NULL
 * stream), KILN_ERR_IO, KILN_ERR_MISUSE. */
KILN_API kiln_status kiln_program_dump(const kiln_program *program, kiln_view view,
                                       FILE *stream);

/* Process-wide JIT counters, for tests ("a cache hit does no LLVM work") and benchmarks.
 * Thread-safe; a snapshot (counters move while other threads compile).  Versioned
 * (docs/abi.md): declare it with KILN_STATS_INIT; kiln_jit_stats writes the first `size`
 * bytes (never the size field itself). */
typedef struct kiln_stats {
    size_t size;              /* set by the caller: sizeof(kiln_stats) */
    uint64_t kernel_compiles; /* kernels compiled by LLVM (optimised and code-generated) */
    uint64_t kernel_hits;     /* kernels found in the in-memory kernel cache (or in the
                               * plan of another size: plans_resized) */
    uint64_t plan_hits;       /* programs whose whole compiled form was cached */
    uint64_t plan_misses;
    double compile_ms;        /* time spent in LLVM (optimise + codegen + link; summed over
                               * the threads that generated a plan's modules in parallel) */
    double startup_ms;        /* one-time LLVM/LLJIT start-up (0 until something needs LLVM) */
    int threads;              /* thread pool size (KILN_NUM_THREADS or online cores) */
    uint64_t weights_packed;  /* constant matmul operands packed for the kernels: once per
                               * compiled program, never per run */
    /* the in-memory kernel cache: kernels cached now, their machine code in bytes, kernels
     * evicted (least recently used, held by no program), and lookups that waited for
     * another thread compiling the same kernel instead of compiling it twice */
    uint64_t kernel_entries, kernel_bytes, kernel_evictions, kernel_waits;
    /* the disk cache (kiln_cache_info): modules loaded from it (no LLVM code generation),
     * modules not found, entries rejected (truncated, corrupt, another version: ignored and
     * rewritten; also counted as misses), entries written, writes that failed */
    uint64_t disk_hits, disk_misses, disk_rejected, disk_writes, disk_write_errors;
    double disk_load_ms;      /* time spent adding objects from the disk cache to the JIT */
    double lljit_ms;          /* of startup_ms: creating the LLJIT instance */
    /* of compile_ms: optimising the IR, generating machine code, adding the object to the
     * JIT and looking up its kernels */
    double optimise_ms, codegen_ms, link_ms;
    /* the temporaries blocks programs run in, one pool for the process (docs/jit.md,
     * "Running"): blocks allocated so far, and bytes held now (in use or free) */
    uint64_t workspace_allocs, workspace_bytes;
    /* held inputs (kiln_program_hold_input): packed forms made from them so far */
    uint64_t held_packs;
    /* KILN_TIERED: kernels whose first code was replaced by their full code so far */
    uint64_t kernel_tierups;
    /* programs whose plan was made from the plan of the same graph at other sizes, not
     * from scratch (docs/jit.md, "Plans at new sizes") */
    uint64_t plans_resized;
} kiln_stats;
#define KILN_STATS_INIT {.size = sizeof(kiln_stats)}
/* Errors: KILN_ERR_INVALID_ARG (stats NULL, or stats->size smaller than the first field
 * after it: 0 included); nothing is written then. */
KILN_API kiln_status kiln_jit_stats(kiln_stats *stats);

/* kiln_jit_sync: wait until the background thread has made the full code of every kernel
 * compiled with KILN_TIERED before the call (a benchmark's runs, a test that wants the
 * final code).  Never needed for correctness: programs run either code. */
KILN_API void kiln_jit_sync(void);

/* kiln_jit_cache_drop: empty the in-memory caches as far as nothing holds them: compiled
 * programs and kernels no live program uses are freed (their machine code with them), and
 * the free temporaries blocks programs run in.  Live programs keep working.  The next
 * compile of a dropped graph loads from the disk cache or compiles again (what a new
 * process pays: `kiln bench` measures it so).  Not needed for correctness; also returns a
 * long-lived process's memory after a burst of compiles.  Thread-safe. */
KILN_API void kiln_jit_cache_drop(void);

/* The host kiln compiles for, as `kiln --version` and `kiln bench` report it.  Detected
 * once, at first use (LLVM's name and features of the CPU, the last-level cache from sysfs
 * or sysconf); detecting starts no JIT.  Versioned (docs/abi.md): declare it with
 * KILN_HOST_INFO_INIT; kiln_host_info_get writes the first `size` bytes (never the size
 * field itself).  The strings are static storage, valid for the life of the process. */
typedef struct kiln_host_info {
    size_t size;              /* set by the caller: sizeof(kiln_host_info) */
    const char *cpu;          /* LLVM's name of the host CPU, e.g. "znver4" */
    const char *features;     /* LLVM's feature string: "+avx2,+avx512f,..." */
    const char *triple;       /* the target triple, e.g. "x86_64-pc-linux-gnu" */
    const char *llvm_version; /* of the LLVM kiln runs with, e.g. "19.1.7" */
    int vector_bits;          /* the widest vectors kernels use: 512, 256 or 128 */
    size_t llc_bytes;         /* the last-level data cache, in bytes */
    const char *llc_source;   /* where that figure came from: "sysfs", "sysconf" or "default"
                               * (neither said; a fixed guess) */
} kiln_host_info;
#define KILN_HOST_INFO_INIT {.size = sizeof(kiln_host_info)}
/* Errors: KILN_ERR_INVALID_ARG (info NULL, or info->size smaller than the first field after
 * it: 0 included); nothing is written then.  Thread-safe. */
KILN_API kiln_status kiln_host_info_get(kiln_host_info *info);

/* ---- the persistent kernel cache ---------------------------------------------------------
 * Compiled modules are kept on disk so a new process skips LLVM code generation: in
 * KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.  KILN_CACHE_DIR=off (or
 * KILN_NO_DISK_CACHE per compile) turns it off.  A directory owned by another user or
 * writable by group or others is refused (the cache is off, and a message says so once on
 * stderr), and so is one kiln did not create unless it is empty or holds only kiln's files:
 * kiln marks its directory with a CACHEDIR.TAG and never writes its counters into, or
 * clears, a directory without it.  Entries are checked (content hash, full key: kiln and LLVM versions, CPU and
 * features) before use; bad ones are ignored and rewritten.  KILN_CACHE_SIZE_MB caps the size
 * (a whole number of MiB, default 256; any other value turns the cache off, saying why),
 * least recently used entries going first.  A compile whose entry cannot be written (a
 * read-only or full file system) still succeeds; the first such failure of a process is
 * said once on stderr with its reason.  docs/jit.md has the details. */
typedef struct kiln_cache_info {
    size_t size;        /* set by the caller: sizeof(kiln_cache_info) (KILN_CACHE_INFO_INIT) */
    char path[4096];    /* the location, or "off" */
    int enabled;        /* 0: off or refused (reason says which) */
    char reason[512];   /* why it is off; "not created yet"; when on, why nothing new can be
                         * stored (not writable, file system full); or "" */
    uint64_t entries;   /* modules stored */
    uint64_t bytes;     /* their size on disk */
    uint64_t max_bytes; /* the cap */
    /* counts added up by every process that used the directory since it was cleared */
    uint64_t hits, misses, rejected, writes;
    /* temporary files of writes in progress or of writers that died (their room counts
     * against the cap; kiln_cache_clear removes those of writers that died) */
    uint64_t temp_files, temp_bytes;
} kiln_cache_info;
#define KILN_CACHE_INFO_INIT {.size = sizeof(kiln_cache_info)}
/* Describe the disk cache (nothing is created): the first info->size bytes (docs/abi.md).
 * Errors: KILN_ERR_INVALID_ARG (NULL, or info->size smaller than the first field after
 * it). */
KILN_API kiln_status kiln_cache_info_get(kiln_cache_info *info);
/* Remove every entry, the temporary files of writers that died and the counts (kiln's
 * files only); *removed (may be NULL) = entries removed.  Errors: KILN_ERR_INVALID_ARG when
 * the cache is off or refused (nothing is touched); KILN_ERR_IO when a file could not be
 * removed (the message names the first and why; the others are removed). */
KILN_API kiln_status kiln_cache_clear(uint64_t *removed);
/* Remove least recently used entries until at most max_bytes remain, temporary files of
 * writes included (0: the cap).  Errors as kiln_cache_clear.  Neither function is needed
 * for correctness. */
KILN_API kiln_status kiln_cache_trim(uint64_t max_bytes, uint64_t *removed);

#ifdef __cplusplus
}
#endif
#endif /* KILN_H */
