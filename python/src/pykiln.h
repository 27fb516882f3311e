/* pykiln.h — what the files of the extension module kiln._kiln share.
 *
 * The extension is a client of kiln.h like any other: it includes no internal header.
 * The one table it reads from lib/ is ops.def (op names, kinds and meanings), expanded
 * in ops.c so that every op of the table has a Python function calling its kiln_* entry
 * point: an op added to the table without one is a compile error here, as in record.c.
 *
 *   module.c  exceptions, dtypes, kiln.Graph, kiln.Program, running with NumPy arrays
 *   abi.c     every use of the public structs that may grow (kiln_options, kiln_stats,
 *             kiln_cache_info): adapting to a versioned struct is a change in that file
 *   trace.c   kiln.Trace (a capture scope on its own device) and kiln.Tensor
 *   ops.c     the module functions, one per row of ops.def
 *   jit.c     kiln.jit: signatures, the per-function cache of programs, the fast call
 */
#ifndef KILN_PYKILN_H
#define KILN_PYKILN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL kiln_py_array_api
#ifndef KP_IMPORT_ARRAY
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>
/* NumPy 2's headers hide the descriptor's elsize behind an accessor. */
#ifndef PyDataType_ELSIZE
#define PyDataType_ELSIZE(d) ((d)->elsize)
#endif

#include <stdbool.h>
#include <stdint.h>

#include "kiln.h"

/* ---- errors (module.c) --------------------------------------------------------------- */
extern PyObject *kp_Error;
/* Raise the exception class of the calling thread's kiln error with kiln's message;
 * returns NULL. */
PyObject *kp_raise(void);
/* The exception class of a code (borrowed). */
PyObject *kp_error_class(kiln_status code);
/* Raise the class of `code` with a message of our own; returns NULL. */
PyObject *kp_raise_code(kiln_status code, const char *fmt, ...);

/* ---- dtypes (module.c) --------------------------------------------------------------- */
/* kiln's dtype of a NumPy descriptor, or -1 (object, other kinds, non-native order). */
int kp_dtype_of_descr(const PyArray_Descr *d);
int kp_npy_type(kiln_dtype t);
/* A dtype argument: "f32", "float32", np.float32, np.dtype(...); -1 with an exception. */
int kp_dtype_arg(PyObject *o);
/* np.dtype of a kiln dtype (new reference). */
PyObject *kp_np_dtype(kiln_dtype t);
/* Mode argument "fused" | "eager" | "interp" (or None: fused); -1 with an exception. */
int kp_mode_arg(PyObject *o);

/* ---- graphs and programs (module.c) -------------------------------------------------- */
typedef struct kp_io {
    const char *name; /* owned by the graph */
    kiln_dtype dtype;
    int rank;
    npy_intp dims[KILN_MAX_RANK];
    size_t bytes;
} kp_io;

typedef struct kp_program {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    kiln_program *p;
    int nin, nout;
    kp_io *in, *out; /* PyMem */
} kp_program;

extern PyTypeObject kp_program_type;
extern PyTypeObject kp_graph_type;

/* Wrap a program (ownership moves to the object, freed on failure too). */
PyObject *kp_program_wrap(kiln_program *p);
/* Run with `nargs` array-likes (program input order) and an optional out (NULL or None:
 * new arrays).  One output: the array; several: a tuple. */
PyObject *kp_program_call(kp_program *self, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *out);
/* A Graph object for `g`: owned (freed with the object) when owner is NULL, else borrowed
 * from `owner`, which the object keeps alive. */
PyObject *kp_graph_wrap(kiln_graph *g, PyObject *owner);

/* ---- abi.c ---------------------------------------------------------------------------- */
/* Compile options; `name` may be NULL. */
typedef struct kp_opts {
    kiln_mode mode;
    unsigned flags;
    const char *name;
} kp_opts;
kiln_status kp_scope_end(kiln_scope s, int n, const kiln_tensor *outs, const kp_opts *o,
                         kiln_program **p);
kiln_status kp_scope_end_graph(kiln_scope s, int n, const kiln_tensor *outs,
                               const kp_opts *o, kiln_graph **g);
kiln_status kp_program_compile(const kiln_graph *g, const kp_opts *o, kiln_program **p);
PyObject *kp_stats(PyObject *m, PyObject *unused);
PyObject *kp_cache_info(PyObject *m, PyObject *unused);

/* ---- traces and tensors (trace.c) ---------------------------------------------------- */
typedef struct kp_trace {
    PyObject_HEAD
    kiln_device *dev;
    kiln_scope scope;
    int open;               /* the scope has not ended or been aborted */
    int entered;            /* `with` block active */
    struct kp_trace *prev;  /* the thread's previous current trace while entered */
    int ninputs;
} kp_trace;

typedef struct kp_tensor {
    PyObject_HEAD
    kiln_tensor t;
    kp_trace *trace; /* strong */
} kp_tensor;

extern PyTypeObject kp_trace_type;
extern PyTypeObject kp_tensor_type;
#define kp_tensor_check(o) PyObject_TypeCheck(o, &kp_tensor_type)

/* The calling thread's innermost trace (borrowed), or NULL. */
kp_trace *kp_trace_current(void);
/* Make tr the thread's current trace; returns the previous one (restore with set). */
kp_trace *kp_trace_set_current(kp_trace *tr);
/* A new trace: a device and an open scope on it. */
kp_trace *kp_trace_new(void);
/* Abort the trace's scope if still open (keeps the Python exception state). */
void kp_trace_abort(kp_trace *tr);
/* A Tensor for t, or the kiln error raised when t is the null tensor. */
PyObject *kp_tensor_wrap(kp_trace *tr, kiln_tensor t);
/* A graph input of the trace. */
PyObject *kp_trace_input(kp_trace *tr, const char *name, kiln_dtype dt, int rank,
                         const int64_t *dims);
/* Outputs of a traced function: a Tensor, or a tuple/list of them.  Fills *n and
 * outs[0..n) (at most `cap`), *single = 1 for a bare Tensor. */
int kp_collect_outputs(PyObject *res, kiln_tensor *outs, int cap, int *n, int *single);
/* Python name that is a keyword, e.g. "not" -> "not_". */

/* Operand coercion (trace.c): objs[0..n) to tensors.  Non-tensors become scalars or
 * constants in the trace of the first Tensor operand (or the current trace).  A Python
 * scalar takes the dtype of the first Tensor among objs[value_from..n); with none, NumPy's
 * default (f64, i64, bool).  *trace gets the trace (borrowed). */
int kp_coerce(const char *api, PyObject *const *objs, int n, int value_from, kiln_tensor *out,
              kp_trace **trace);

/* ---- ops.c ---------------------------------------------------------------------------- */
int kp_ops_add(PyObject *m);
/* Axis arguments: None (all axes), an int or a sequence; -1 with an exception. */
int kp_axes_arg(const char *api, PyObject *axis, int rank, int *axes);
PyObject *kp_reduce(const char *api, kiln_tensor (*fn)(kiln_tensor, int, const int *, int),
                    PyObject *x, PyObject *axis, int keepdims);
PyObject *kp_reshape(PyObject *x, PyObject *shape);
PyObject *kp_permute(PyObject *x, PyObject *perm);

/* ---- jit.c ---------------------------------------------------------------------------- */
extern PyTypeObject kp_jit_type;

#endif
