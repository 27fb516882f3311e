/* ops.c — the module's tensor functions: one per row of lib/ir/ops.def.
 *
 * The table is expanded twice, as record.c expands it for the C API: once to define a
 * function per row, once for the method table, whose docstring is the row's meaning.
 * Unary, binary, ternary, reduction and matmul rows are generated and call kiln_<name>
 * (a row without its kiln.h entry point is a compile error here too); the rows whose
 * signatures are not uniform (sources, cast, movement) name a hand-written op_<name>
 * below, so a new row of those kinds without one fails to compile as well.  Python
 * keywords get a trailing underscore: kiln.not_, kiln.and_, kiln.or_. */
#include "pykiln.h"

#include <string.h>

/* ---- shared helpers ------------------------------------------------------------------- */
static int
one_tensor(const char *api, PyObject *x, kiln_tensor *t, kp_trace **tr)
{
    return kp_coerce(api, &x, 1, 0, t, tr);
}

static int
int_list(const char *api, PyObject *seq, int64_t *out, int cap)
{
    if (PyIndex_Check(seq)) {
        Py_ssize_t v = PyNumber_AsSsize_t(seq, PyExc_OverflowError);
        if (v == -1 && PyErr_Occurred())
            return -1;
        out[0] = v;
        return 1;
    }
    PyObject *f = PySequence_Fast(seq, "");
    if (!f) {
        PyErr_Format(PyExc_TypeError, "%s: expected an int or a sequence of ints, not %s", api,
                     Py_TYPE(seq)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    if (n > cap) {
        Py_DECREF(f);
        kp_raise_code(KILN_ERR_SHAPE, "%s: bad rank: %zd (must be 0 to %d)", api, n, cap);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t v = PyNumber_AsSsize_t(PySequence_Fast_ITEMS(f)[i], PyExc_OverflowError);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(f);
            return -1;
        }
        out[i] = v;
    }
    Py_DECREF(f);
    return (int)n;
}

int
kp_axes_arg(const char *api, PyObject *axis, int rank, int *axes)
{
    if (!axis || axis == Py_None) {
        for (int d = 0; d < rank; d++)
            axes[d] = d;
        return rank;
    }
    int64_t v[KILN_MAX_RANK];
    int n = int_list(api, axis, v, KILN_MAX_RANK);
    for (int i = 0; i < n; i++)
        axes[i] = (int)v[i];
    return n;
}

static kiln_tensor
shape_of(kiln_tensor t, int *rank, int64_t *dims)
{
    *rank = kiln_tensor_rank(t);
    for (int d = 0; d < *rank; d++)
        dims[d] = kiln_tensor_dim(t, d);
    return t;
}

PyObject *
kp_reduce(const char *api, kiln_tensor (*fn)(kiln_tensor, int, const int *, int), PyObject *x,
          PyObject *axis, int keepdims)
{
    kiln_tensor t;
    kp_trace *tr;
    if (one_tensor(api, x, &t, &tr))
        return NULL;
    int rank;
    int64_t dims[KILN_MAX_RANK];
    shape_of(t, &rank, dims);
    if (rank < 0)
        return kp_raise();
    int axes[KILN_MAX_RANK];
    if ((fn == kiln_argmax || fn == kiln_argmin) && (!axis || axis == Py_None)) {
        /* NumPy: the index into the flattened array. */
        int64_t n = 1;
        for (int d = 0; d < rank; d++)
            n *= dims[d];
        int zero = 0;
        kiln_tensor r = fn(kiln_reshape(t, 1, &n), 1, &zero, 0);
        if (keepdims) {
            int64_t ones[KILN_MAX_RANK];
            for (int d = 0; d < rank; d++)
                ones[d] = 1;
            r = kiln_reshape(r, rank, ones);
        }
        return kp_tensor_wrap(tr, r);
    }
    int n = kp_axes_arg(api, axis, rank, axes);
    if (n < 0)
        return NULL;
    if (n == 0 && (!axis || axis == Py_None) && kp_tensor_check(x)) {
        /* A rank-0 tensor reduced over all (no) axes is itself, as in NumPy. */
        Py_INCREF(x);
        return x;
    }
    return kp_tensor_wrap(tr, fn(t, n, axes, keepdims));
}

PyObject *
kp_reshape(PyObject *x, PyObject *shape)
{
    const char *api = "kiln.reshape";
    kiln_tensor t;
    kp_trace *tr;
    if (one_tensor(api, x, &t, &tr))
        return NULL;
    int64_t dims[KILN_MAX_RANK], have[KILN_MAX_RANK];
    int rank = int_list(api, shape, dims, KILN_MAX_RANK), hrank;
    if (rank < 0)
        return NULL;
    shape_of(t, &hrank, have);
    if (hrank < 0)
        return kp_raise();
    int64_t count = 1, known = 1;
    int infer = -1;
    for (int d = 0; d < hrank; d++)
        count *= have[d];
    for (int d = 0; d < rank; d++) {
        if (dims[d] == -1) {
            if (infer >= 0) {
                kp_raise_code(KILN_ERR_SHAPE, "%s: shape error: more than one -1", api);
                return NULL;
            }
            infer = d;
        } else {
            known *= dims[d];
        }
    }
    if (infer >= 0) {
        if (known == 0 || count % known) {
            kp_raise_code(KILN_ERR_SHAPE,
                          "%s: shape error: cannot infer -1: %lld elements into a multiple "
                          "of %lld",
                          api, (long long)count, (long long)known);
            return NULL;
        }
        dims[infer] = count / known;
    }
    return kp_tensor_wrap(tr, kiln_reshape(t, rank, dims));
}

PyObject *
kp_permute(PyObject *x, PyObject *perm)
{
    const char *api = "kiln.permute";
    kiln_tensor t;
    kp_trace *tr;
    if (one_tensor(api, x, &t, &tr))
        return NULL;
    int64_t p[KILN_MAX_RANK];
    int n = int_list(api, perm, p, KILN_MAX_RANK);
    if (n < 0)
        return NULL;
    int rank = kiln_tensor_rank(t);
    int pi[KILN_MAX_RANK];
    for (int i = 0; i < n; i++)
        pi[i] = (int)(p[i] < 0 ? p[i] + rank : p[i]);
    return kp_tensor_wrap(tr, kiln_permute(t, n, pi));
}

/* ---- generated: unary, binary, ternary, reduction and matmul rows ----------------------- */
static PyObject *
unary(const char *api, kiln_tensor (*fn)(kiln_tensor), PyObject *x)
{
    kiln_tensor t;
    kp_trace *tr;
    if (one_tensor(api, x, &t, &tr))
        return NULL;
    return kp_tensor_wrap(tr, fn(t));
}

static PyObject *
nary(const char *api, PyObject *const *args, Py_ssize_t nargs, int n, int value_from,
     kiln_tensor *ts, kp_trace **tr)
{
    if (nargs != n) {
        PyErr_Format(PyExc_TypeError, "%s takes %d arguments (%zd given)", api, n, nargs);
        return NULL;
    }
    if (kp_coerce(api, args, n, value_from, ts, tr))
        return NULL;
    return Py_None;
}

/* The operand a ternary's scalars take their dtype from: where(cond, a, b) from a or b. */
#define VALUE_FROM_where 1
#define VALUE_FROM_clamp 0
#define SIG_where "(cond, a, b)"
#define SIG_clamp "(x, lo, hi)"

#define DEF_SOURCE(E, name)
#define DEF_CAST(E, name)
#define DEF_MOVE(E, name)
#define DEF_UNARY(E, name)                                                                   \
    static PyObject *op_##name(PyObject *m, PyObject *x)                                     \
    {                                                                                        \
        (void)m;                                                                             \
        return unary("kiln." #name, kiln_##name, x);                                  \
    }
#define DEF_BINARY(E, name)                                                                  \
    static PyObject *op_##name(PyObject *m, PyObject *const *args, Py_ssize_t nargs)         \
    {                                                                                        \
        (void)m;                                                                             \
        kiln_tensor ts[2];                                                                   \
        kp_trace *tr;                                                                        \
        if (!nary("kiln." #name, args, nargs, 2, 0, ts, &tr))                                \
            return NULL;                                                                     \
        return kp_tensor_wrap(tr, kiln_##name(ts[0], ts[1]));                                \
    }
#define DEF_MATMUL(E, name) DEF_BINARY(E, name)
#define DEF_TERNARY(E, name)                                                                 \
    static PyObject *op_##name(PyObject *m, PyObject *const *args, Py_ssize_t nargs)         \
    {                                                                                        \
        (void)m;                                                                             \
        kiln_tensor ts[3];                                                                   \
        kp_trace *tr;                                                                        \
        if (!nary("kiln." #name, args, nargs, 3, VALUE_FROM_##name, ts, &tr))                \
            return NULL;                                                                     \
        return kp_tensor_wrap(tr, kiln_##name(ts[0], ts[1], ts[2]));                         \
    }
#define DEF_REDUCE(E, name)                                                                  \
    static PyObject *op_##name(PyObject *m, PyObject *args, PyObject *kw)                    \
    {                                                                                        \
        (void)m;                                                                             \
        static char *kwlist[] = {"x", "axis", "keepdims", NULL};                             \
        PyObject *x, *axis = Py_None;                                                        \
        int keepdims = 0;                                                                    \
        if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Op:" #name, kwlist, &x, &axis,         \
                                         &keepdims))                                         \
            return NULL;                                                                     \
        return kp_reduce("kiln." #name, kiln_##name, x, axis, keepdims);                     \
    }

/* ---- hand-written: sources, cast, movement ---------------------------------------------- */
static kp_trace *
need_trace(const char *api)
{
    kp_trace *tr = kp_trace_current();
    if (!tr) {
        PyErr_Format(PyExc_TypeError,
                     "%s: only inside a traced function (@kiln.jit) or a kiln.trace() block",
                     api);
        return NULL;
    }
    if (!tr->open) {
        kp_raise_code(KILN_ERR_SCOPE_CLOSED, "%s: capture scope is already complete", api);
        return NULL;
    }
    return tr;
}

static int
dtype_or_default(PyObject *dtype, PyObject *value, int *dt)
{
    if (dtype && dtype != Py_None) {
        *dt = kp_dtype_arg(dtype);
        return *dt < 0 ? -1 : 0;
    }
    *dt = (PyBool_Check(value) || PyArray_IsScalar(value, Bool)) ? KILN_DTYPE_BOOL
          : (PyLong_Check(value) || PyArray_IsScalar(value, Integer)) ? KILN_DTYPE_I64
                                                                     : KILN_DTYPE_F64;
    return 0;
}

#define SIG_input "(name, shape, dtype='f32')"
static PyObject *
op_input(PyObject *m, PyObject *args, PyObject *kw)
{
    (void)m;
    static char *kwlist[] = {"name", "shape", "dtype", NULL};
    const char *name;
    PyObject *shape, *dtype = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO|O:input", kwlist, &name, &shape, &dtype))
        return NULL;
    kp_trace *tr = need_trace("kiln.input");
    if (!tr)
        return NULL;
    int dt = KILN_DTYPE_F32;
    if (dtype && (dt = kp_dtype_arg(dtype)) < 0)
        return NULL;
    int64_t dims[KILN_MAX_RANK];
    int rank = int_list("kiln.input", shape, dims, KILN_MAX_RANK);
    if (rank < 0)
        return NULL;
    return kp_trace_input(tr, name, (kiln_dtype)dt, rank, dims);
}

#define SIG_constant "(array, dtype=None)"
static PyObject *
op_constant(PyObject *m, PyObject *args, PyObject *kw)
{
    (void)m;
    static char *kwlist[] = {"array", "dtype", NULL};
    PyObject *obj, *dtype = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:constant", kwlist, &obj, &dtype))
        return NULL;
    kp_trace *tr = need_trace("kiln.constant");
    if (!tr)
        return NULL;
    PyArray_Descr *d = NULL;
    if (dtype && dtype != Py_None) {
        int dt = kp_dtype_arg(dtype);
        if (dt < 0)
            return NULL;
        d = PyArray_DescrFromType(kp_npy_type((kiln_dtype)dt));
    }
    PyObject *a = PyArray_FromAny(obj, d, 0, 0, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, NULL);
    if (!a)
        return NULL;
    kiln_tensor t;
    kp_trace *tr2;
    PyObject *objs[1] = {a};
    int rc = kp_coerce("kiln.constant", objs, 1, 1, &t, &tr2);
    Py_DECREF(a);
    return rc ? NULL : kp_tensor_wrap(tr, t);
}

#define SIG_full "(shape, value, dtype=None)"
static PyObject *
op_full(PyObject *m, PyObject *args, PyObject *kw)
{
    (void)m;
    static char *kwlist[] = {"shape", "value", "dtype", NULL};
    PyObject *shape, *value, *dtype = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:full", kwlist, &shape, &value, &dtype))
        return NULL;
    kp_trace *tr = need_trace("kiln.full");
    if (!tr)
        return NULL;
    int dt;
    if (dtype_or_default(dtype, value, &dt))
        return NULL;
    int64_t dims[KILN_MAX_RANK];
    int rank = int_list("kiln.full", shape, dims, KILN_MAX_RANK);
    if (rank < 0)
        return NULL;
    double v = PyFloat_AsDouble(value);
    if (v == -1.0 && PyErr_Occurred())
        return NULL;
    return kp_tensor_wrap(tr, kiln_full(tr->dev, (kiln_dtype)dt, rank, dims, v));
}

#define SIG_arange "(n, start=0, delta=1, dtype=None)"
static PyObject *
op_arange(PyObject *m, PyObject *args, PyObject *kw)
{
    (void)m;
    static char *kwlist[] = {"n", "start", "delta", "dtype", NULL};
    Py_ssize_t n;
    PyObject *start = NULL, *delta = NULL, *dtype = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "n|OOO:arange", kwlist, &n, &start, &delta,
                                     &dtype))
        return NULL;
    kp_trace *tr = need_trace("kiln.arange");
    if (!tr)
        return NULL;
    int dt;
    PyObject *probe = start && PyFloat_Check(start) ? start : delta ? delta : start;
    if (dtype_or_default(dtype, probe ? probe : Py_False, &dt))
        return NULL;
    if (!dtype && (!probe || PyBool_Check(probe)))
        dt = KILN_DTYPE_I64;
    if (!dtype && start && PyFloat_Check(start))
        dt = KILN_DTYPE_F64;
    double s = start ? PyFloat_AsDouble(start) : 0.0, d = delta ? PyFloat_AsDouble(delta) : 1.0;
    if (PyErr_Occurred())
        return NULL;
    return kp_tensor_wrap(tr, kiln_arange(tr->dev, (kiln_dtype)dt, n, s, d));
}

#define SIG_cast "(x, dtype)"
static PyObject *
op_cast(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    (void)m;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "kiln.cast(x, dtype)");
        return NULL;
    }
    kiln_tensor t;
    kp_trace *tr;
    if (one_tensor("kiln.cast", args[0], &t, &tr))
        return NULL;
    int dt = kp_dtype_arg(args[1]);
    if (dt < 0)
        return NULL;
    return kp_tensor_wrap(tr, kiln_cast(t, (kiln_dtype)dt));
}

#define SIG_reshape "(x, shape)"
static PyObject *
op_reshape(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    (void)m;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "kiln.reshape(x, shape)");
        return NULL;
    }
    return kp_reshape(args[0], args[1]);
}

#define SIG_permute "(x, perm)"
static PyObject *
op_permute(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    (void)m;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "kiln.permute(x, perm)");
        return NULL;
    }
    return kp_permute(args[0], args[1]);
}

#define SIG_expand "(x, shape)"
static PyObject *
op_expand(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    (void)m;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "kiln.expand(x, shape)");
        return NULL;
    }
    kiln_tensor t;
    kp_trace *tr;
    if (one_tensor("kiln.expand", args[0], &t, &tr))
        return NULL;
    int64_t dims[KILN_MAX_RANK];
    int rank = int_list("kiln.expand", args[1], dims, KILN_MAX_RANK);
    if (rank < 0)
        return NULL;
    return kp_tensor_wrap(tr, kiln_expand(t, rank, dims));
}

/* A per-axis list with None entries (None, or a shorter list: the default). */
static int
axis_list(const char *api, PyObject *o, int rank, int64_t *out, int *given)
{
    for (int d = 0; d < rank; d++)
        given[d] = 0;
    if (!o || o == Py_None)
        return 0;
    PyObject *f = PySequence_Fast(o, "");
    if (!f) {
        PyErr_Format(PyExc_TypeError, "%s: expected a sequence with one entry per axis", api);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    if (n > rank) {
        Py_DECREF(f);
        PyErr_Format(PyExc_ValueError, "%s: %zd entries for rank %d", api, n, rank);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PySequence_Fast_ITEMS(f)[i];
        if (v == Py_None)
            continue;
        Py_ssize_t x = PyNumber_AsSsize_t(v, PyExc_OverflowError);
        if (x == -1 && PyErr_Occurred()) {
            Py_DECREF(f);
            return -1;
        }
        out[i] = x;
        given[i] = 1;
    }
    Py_DECREF(f);
    return 0;
}

#define SIG_slice "(x, start=None, stop=None, step=None)"
static PyObject *
op_slice(PyObject *m, PyObject *args, PyObject *kw)
{
    (void)m;
    static char *kwlist[] = {"x", "start", "stop", "step", NULL};
    PyObject *x, *start = NULL, *stop = NULL, *step = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOO:slice", kwlist, &x, &start, &stop, &step))
        return NULL;
    kiln_tensor t;
    kp_trace *tr;
    if (one_tensor("kiln.slice", x, &t, &tr))
        return NULL;
    int rank;
    int64_t dims[KILN_MAX_RANK], s0[KILN_MAX_RANK], s1[KILN_MAX_RANK], st[KILN_MAX_RANK];
    int g0[KILN_MAX_RANK], g1[KILN_MAX_RANK], gs[KILN_MAX_RANK];
    shape_of(t, &rank, dims);
    if (rank < 0)
        return kp_raise();
    if (axis_list("kiln.slice", step, rank, st, gs) ||
        axis_list("kiln.slice", start, rank, s0, g0) ||
        axis_list("kiln.slice", stop, rank, s1, g1))
        return NULL;
    for (int d = 0; d < rank; d++) {
        if (!gs[d])
            st[d] = 1;
        /* Python's defaults: from the first (last, stepping back) element to past the end
         * (before the start). */
        if (!g0[d])
            s0[d] = st[d] > 0 ? 0 : dims[d];
        if (!g1[d])
            s1[d] = st[d] > 0 ? dims[d] : -(dims[d] + 1);
    }
    return kp_tensor_wrap(tr, kiln_slice(t, s0, s1, st));
}

#define SIG_concat "(xs, axis=0)"
static PyObject *
op_concat(PyObject *m, PyObject *args, PyObject *kw)
{
    (void)m;
    static char *kwlist[] = {"xs", "axis", NULL};
    PyObject *xs;
    int axis = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|i:concat", kwlist, &xs, &axis))
        return NULL;
    PyObject *f = PySequence_Fast(xs, "kiln.concat: expected a sequence of tensors");
    if (!f)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    PyObject *r = NULL;
    kiln_tensor *ts = PyMem_Calloc((size_t)n + 1, sizeof *ts);
    kp_trace *tr;
    if (!ts)
        r = PyErr_NoMemory();
    else if (n > INT32_MAX)
        PyErr_SetString(PyExc_OverflowError, "kiln.concat: too many operands");
    else if (kp_coerce("kiln.concat", PySequence_Fast_ITEMS(f), (int)n, 0, ts, &tr) == 0)
        r = kp_tensor_wrap(tr, kiln_concat((int)n, ts, axis));
    PyMem_Free(ts);
    Py_DECREF(f);
    return r;
}

#define SIG_pad "(x, low, high, value=0.0)"
static PyObject *
op_pad(PyObject *m, PyObject *args, PyObject *kw)
{
    (void)m;
    static char *kwlist[] = {"x", "low", "high", "value", NULL};
    PyObject *x, *low, *high;
    double value = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|d:pad", kwlist, &x, &low, &high, &value))
        return NULL;
    kiln_tensor t;
    kp_trace *tr;
    if (one_tensor("kiln.pad", x, &t, &tr))
        return NULL;
    int64_t lo[KILN_MAX_RANK], hi[KILN_MAX_RANK];
    int rank = kiln_tensor_rank(t);
    if (rank < 0)
        return kp_raise();
    int nl = int_list("kiln.pad", low, lo, KILN_MAX_RANK);
    int nh = nl < 0 ? -1 : int_list("kiln.pad", high, hi, KILN_MAX_RANK);
    if (nh < 0)
        return NULL;
    if (nl != rank || nh != rank) {
        kp_raise_code(KILN_ERR_SHAPE, "kiln.pad: shape error: low and high need %d entries",
                      rank);
        return NULL;
    }
    return kp_tensor_wrap(tr, kiln_pad(t, lo, hi, value));
}

#define SIG_gather "(x, indices, axis=0)"
static PyObject *
op_gather(PyObject *m, PyObject *args, PyObject *kw)
{
    (void)m;
    static char *kwlist[] = {"x", "indices", "axis", NULL};
    PyObject *objs[2];
    int axis = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|i:gather", kwlist, &objs[0], &objs[1],
                                     &axis))
        return NULL;
    kiln_tensor ts[2];
    kp_trace *tr;
    if (kp_coerce("kiln.gather", objs, 2, 2, ts, &tr))
        return NULL;
    return kp_tensor_wrap(tr, kiln_gather(ts[0], ts[1], axis));
}

#define OP(E, name, arity, kind, trule, attrs, calc, ulp_f32, ulp_f64, meaning) DEF_##kind(E, name)
#include "ops.def"
#undef OP

/* ---- the method table -------------------------------------------------------------------- */
#define KW_(f) (PyCFunction)(void (*)(void))(f)
#define ENTRY_UNARY(name, meaning)                                                           \
    {#name, (PyCFunction)op_##name, METH_O, #name "(x)\n--\n\n" meaning},
#define ENTRY_BINARY(name, meaning)                                                          \
    {#name, KW_(op_##name), METH_FASTCALL, #name "(a, b)\n--\n\n" meaning},
#define ENTRY_MATMUL(name, meaning) ENTRY_BINARY(name, meaning)
#define ENTRY_TERNARY(name, meaning)                                                         \
    {#name, KW_(op_##name), METH_FASTCALL, #name SIG_##name "\n--\n\n" meaning},
#define ENTRY_REDUCE(name, meaning)                                                          \
    {#name, KW_(op_##name), METH_VARARGS | METH_KEYWORDS,                                    \
     #name "(x, axis=None, keepdims=False)\n--\n\n" meaning},
#define ENTRY_KW(name, meaning)                                                              \
    {#name, KW_(op_##name), METH_VARARGS | METH_KEYWORDS, #name SIG_##name "\n--\n\n" meaning},
#define ENTRY_FAST(name, meaning)                                                            \
    {#name, KW_(op_##name), METH_FASTCALL, #name SIG_##name "\n--\n\n" meaning},
#define ENTRY_SOURCE(name, meaning) ENTRY_KW(name, meaning)
#define ENTRY_CAST(name, meaning) ENTRY_FAST(name, meaning)
/* Movement rows: reshape, permute and expand take (x, list); the others keywords. */
#define MOVE_reshape ENTRY_FAST
#define MOVE_permute ENTRY_FAST
#define MOVE_expand ENTRY_FAST
#define MOVE_slice ENTRY_KW
#define MOVE_concat ENTRY_KW
#define MOVE_pad ENTRY_KW
#define MOVE_gather ENTRY_KW
#define ENTRY_MOVE(name, meaning) MOVE_##name(name, meaning)

static PyMethodDef op_methods[] = {
#define OP(E, name, arity, kind, trule, attrs, calc, ulp_f32, ulp_f64, meaning)                    \
    ENTRY_##kind(name, meaning)
#include "ops.def"
#undef OP
    {0},
};

/* Python keywords among the op names: exposed as name_. */
static const char *const keywords[][2] = {{"not", "not_"}, {"and", "and_"}, {"or", "or_"},
                                          {"in", "in_"},   {"is", "is_"},   {"if", "if_"}};

int
kp_ops_add(PyObject *m)
{
    for (PyMethodDef *d = op_methods; d->ml_name; d++)
        for (size_t k = 0; k < sizeof keywords / sizeof keywords[0]; k++)
            if (strcmp(d->ml_name, keywords[k][0]) == 0)
                d->ml_name = keywords[k][1];
    if (PyModule_AddFunctions(m, op_methods) < 0)
        return -1;
    /* The names of the table's rows, in order, for tests and introspection. */
    static const char *const rows[] = {
#define OP(E, name, arity, kind, trule, attrs, calc, ulp_f32, ulp_f64, meaning) #name,
#include "ops.def"
#undef OP
    };
    size_t n = sizeof rows / sizeof rows[0];
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    if (!t)
        return -1;
    for (size_t i = 0; i < n; i++) {
        PyObject *s = PyUnicode_FromString(op_methods[i].ml_name);
        if (!s) {
            Py_DECREF(t);
            return -1;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, s);
    }
    if (PyModule_AddObjectRef(m, "OPS", t) < 0) {
        Py_DECREF(t);
        return -1;
    }
    Py_DECREF(t);
    return 0;
}
