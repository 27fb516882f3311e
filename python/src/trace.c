/* trace.c — kiln.Trace (a capture scope on a device of its own) and kiln.Tensor, the
 * stand-in for an array while a function is traced.
 *
 * A trace owns its device, so traces on several threads, or one nested in another (a
 * jitted function calling another with arrays), never contend for a device.  The device
 * is freed when the last object referring to the trace goes: a Tensor that escapes its
 * trace keeps a live device, never a dangling pointer, and kiln reports its use
 * (KILN_ERR_SCOPE_CLOSED, KILN_ERR_FOREIGN_TENSOR) through kiln.Error's classes.
 *
 * Operators follow NumPy where kiln's op differs: `/` on integers divides in f64, `//`
 * and `%` round toward -inf (kiln.div and kiln.rem truncate, as C does).  kiln does not
 * promote dtypes: both operands of an op have one dtype, and a Python scalar takes the
 * dtype of the tensor it meets (a float with an integer tensor is refused). */
#include "pykiln.h"

#include <math.h>
#include <string.h>

static _Thread_local kp_trace *current;

kp_trace *
kp_trace_current(void)
{
    return current;
}

kp_trace *
kp_trace_set_current(kp_trace *tr)
{
    kp_trace *prev = current;
    current = tr;
    return prev;
}

/* ---- kiln.Trace ------------------------------------------------------------------------- */
kp_trace *
kp_trace_new(void)
{
    kp_trace *tr = PyObject_New(kp_trace, &kp_trace_type);
    if (!tr)
        return NULL;
    tr->open = 0;
    tr->entered = 0;
    tr->prev = NULL;
    tr->ninputs = 0;
    tr->dev = kiln_device_new();
    if (!tr->dev) {
        Py_DECREF(tr);
        return (kp_trace *)kp_raise();
    }
    tr->scope = kiln_scope_begin(tr->dev);
    if (kiln_scope_is_null(tr->scope)) {
        kp_raise();
        Py_DECREF(tr);
        return NULL;
    }
    tr->open = 1;
    return tr;
}

void
kp_trace_abort(kp_trace *tr)
{
    if (tr->open) {
        tr->open = 0;
        kiln_scope_abort(tr->scope);
    }
}

static void
trace_dealloc(kp_trace *tr)
{
    kp_trace_abort(tr);
    if (tr->dev)
        kiln_device_free(tr->dev);
    PyObject_Free(tr);
}

PyObject *
kp_tensor_wrap(kp_trace *tr, kiln_tensor t)
{
    if (kiln_tensor_is_null(t))
        return kp_raise();
    kp_tensor *o = PyObject_New(kp_tensor, &kp_tensor_type);
    if (!o)
        return NULL;
    o->t = t;
    o->trace = tr;
    Py_INCREF(tr);
    return (PyObject *)o;
}

PyObject *
kp_trace_input(kp_trace *tr, const char *name, kiln_dtype dt, int rank, const int64_t *dims)
{
    kiln_tensor t = kiln_input(tr->dev, name, dt, rank, dims);
    if (!kiln_tensor_is_null(t))
        tr->ninputs++;
    return kp_tensor_wrap(tr, t);
}

int
kp_collect_outputs(PyObject *res, kiln_tensor *outs, int cap, int *n, int *single)
{
    *single = 0;
    *n = 0;
    if (kp_tensor_check(res)) {
        *single = 1;
        outs[0] = ((kp_tensor *)res)->t;
        *n = 1;
        return 0;
    }
    if (PyTuple_Check(res) || PyList_Check(res)) {
        Py_ssize_t k = PySequence_Fast_GET_SIZE(res);
        if (k == 0 || k > cap) {
            PyErr_Format(PyExc_ValueError,
                         "kiln: a traced function returns 1 to %d tensors, not %zd", cap, k);
            return -1;
        }
        for (Py_ssize_t i = 0; i < k; i++) {
            PyObject *o = PySequence_Fast_ITEMS(res)[i];
            if (!kp_tensor_check(o)) {
                PyErr_Format(PyExc_TypeError,
                             "kiln: a traced function must return kiln Tensors (computed "
                             "from its arguments); output %zd is %s",
                             i, Py_TYPE(o)->tp_name);
                return -1;
            }
            outs[i] = ((kp_tensor *)o)->t;
        }
        *n = (int)k;
        return 0;
    }
    PyErr_Format(PyExc_TypeError,
                 "kiln: a traced function must return a kiln Tensor or a tuple of them, not %s",
                 Py_TYPE(res)->tp_name);
    return -1;
}

static PyObject *
trace_enter(kp_trace *tr, PyObject *unused)
{
    (void)unused;
    if (tr->entered) {
        PyErr_SetString(PyExc_RuntimeError, "kiln.Trace: already entered");
        return NULL;
    }
    tr->entered = 1;
    tr->prev = kp_trace_set_current(tr);
    Py_INCREF(tr);
    return (PyObject *)tr;
}

static PyObject *
trace_exit(kp_trace *tr, PyObject *args)
{
    if (tr->entered) {
        tr->entered = 0;
        kp_trace_set_current(tr->prev);
        tr->prev = NULL;
    }
    /* An exception discards the scope; a normal exit leaves it open for compile(). */
    if (PyTuple_GET_SIZE(args) > 0 && PyTuple_GET_ITEM(args, 0) != Py_None)
        kp_trace_abort(tr);
    Py_RETURN_FALSE;
}

static PyObject *
trace_end(kp_trace *tr, PyObject *args, PyObject *kw, int graph)
{
    static char *kwlist[] = {"outputs", "mode", "dumps", "name", NULL};
    PyObject *outputs, *mode = NULL;
    int dumps = 0;
    const char *name = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Opz", kwlist, &outputs, &mode, &dumps, &name))
        return NULL;
    int md = kp_mode_arg(mode);
    if (md < 0)
        return NULL;
    kiln_tensor outs[64];
    int n, single;
    if (kp_collect_outputs(outputs, outs, 64, &n, &single))
        return NULL;
    kp_opts o = {(kiln_mode)md, dumps ? KILN_KEEP_DUMPS : 0u, name};
    kiln_status st;
    kiln_program *p = NULL;
    kiln_graph *g = NULL;
    tr->open = 0;
    Py_BEGIN_ALLOW_THREADS
    if (graph)
        st = kp_scope_end_graph(tr->scope, n, outs, &o, &g);
    else
        st = kp_scope_end(tr->scope, n, outs, &o, &p);
    Py_END_ALLOW_THREADS
    if (st != KILN_OK)
        return kp_raise();
    return graph ? kp_graph_wrap(g, NULL) : kp_program_wrap(p);
}

static PyObject *
trace_compile(kp_trace *tr, PyObject *args, PyObject *kw)
{
    return trace_end(tr, args, kw, 0);
}

static PyObject *
trace_graph(kp_trace *tr, PyObject *args, PyObject *kw)
{
    return trace_end(tr, args, kw, 1);
}

static PyObject *
trace_abort_m(kp_trace *tr, PyObject *unused)
{
    (void)unused;
    kp_trace_abort(tr);
    Py_RETURN_NONE;
}

static PyObject *
trace_is_open(kp_trace *tr, void *c)
{
    (void)c;
    return PyBool_FromLong(tr->open);
}

static PyMethodDef trace_methods[] = {
    {"__enter__", (PyCFunction)trace_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)trace_exit, METH_VARARGS, NULL},
    {"compile", (PyCFunction)(void (*)(void))trace_compile, METH_VARARGS | METH_KEYWORDS,
     "compile(outputs, mode='fused', dumps=False, name=None)\n--\n\nEnd the scope: outputs "
     "(a Tensor or a tuple) become the graph's outputs; returns a kiln.Program."},
    {"graph", (PyCFunction)(void (*)(void))trace_graph, METH_VARARGS | METH_KEYWORDS,
     "graph(outputs, name=None)\n--\n\nEnd the scope without compiling; returns a kiln.Graph."},
    {"abort", (PyCFunction)trace_abort_m, METH_NOARGS,
     "abort()\n--\n\nDiscard the scope (its tensors become stale)."},
    {0},
};

static PyGetSetDef trace_getset[] = {
    {"open", (getter)trace_is_open, NULL, "the scope is still recording", NULL},
    {0},
};

PyTypeObject kp_trace_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kiln.Trace",
    .tp_basicsize = sizeof(kp_trace),
    .tp_dealloc = (destructor)trace_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A capture scope on a device of its own (kiln.trace()).",
    .tp_methods = trace_methods,
    .tp_getset = trace_getset,
};

/* ---- operands ------------------------------------------------------------------------- */
enum { SC_NONE, SC_BOOL, SC_INT, SC_FLOAT };

static int
scalar_kind(PyObject *o)
{
    if (PyBool_Check(o) || PyArray_IsScalar(o, Bool))
        return SC_BOOL;
    if (PyLong_Check(o) || PyArray_IsScalar(o, Integer))
        return SC_INT;
    if (PyFloat_Check(o) || PyArray_IsScalar(o, Floating))
        return SC_FLOAT;
    return SC_NONE;
}

static int
is_float(kiln_dtype t)
{
    return t == KILN_DTYPE_F32 || t == KILN_DTYPE_F64;
}

/* A rank-0 tensor of dtype dt holding the scalar o. */
static kiln_tensor
make_scalar(const char *api, kp_trace *tr, PyObject *o, int kind, kiln_dtype dt, int *err)
{
    kiln_tensor none = {0, 0, 0};
    if (kind == SC_FLOAT || is_float(dt)) {
        double v = PyFloat_AsDouble(o);
        if (v == -1.0 && PyErr_Occurred()) {
            *err = 1;
            return none;
        }
        return kiln_scalar(tr->dev, dt, v);
    }
    PyObject *ix = PyNumber_Index(o);
    if (!ix) {
        *err = 1;
        return none;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(ix, &overflow);
    Py_DECREF(ix);
    if (overflow || (v == -1 && PyErr_Occurred()) ||
        (dt == KILN_DTYPE_I32 && (v < INT32_MIN || v > INT32_MAX))) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_OverflowError, "%s: %R does not fit %s", api, o,
                         kiln_dtype_name(dt));
        *err = 1;
        return none;
    }
    if (dt == KILN_DTYPE_I64 && (v > (1LL << 53) || v < -(1LL << 53))) {
        int64_t x = v;
        return kiln_constant(tr->dev, dt, 0, NULL, &x);
    }
    return kiln_scalar(tr->dev, dt, (double)v);
}

static PyObject *
closed_error(const char *api)
{
    return kp_raise_code(KILN_ERR_SCOPE_CLOSED,
                         "%s: capture scope is already complete: a tensor was used after its "
                         "trace ended",
                         api);
}

int
kp_coerce(const char *api, PyObject *const *objs, int n, int value_from, kiln_tensor *out,
          kp_trace **trace)
{
    kp_trace *tr = NULL;
    kp_tensor *like = NULL;
    for (int i = 0; i < n; i++) {
        if (kp_tensor_check(objs[i])) {
            kp_tensor *t = (kp_tensor *)objs[i];
            if (!tr)
                tr = t->trace;
            if (!like && i >= value_from)
                like = t;
        }
    }
    if (!tr)
        tr = kp_trace_current();
    if (!tr) {
        PyErr_Format(PyExc_TypeError,
                     "%s: needs a kiln Tensor: call it inside a @kiln.jit function (or a "
                     "kiln.trace() block)",
                     api);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        PyObject *o = objs[i];
        if (kp_tensor_check(o)) {
            out[i] = ((kp_tensor *)o)->t;
            continue;
        }
        if (!tr->open) {
            closed_error(api);
            return -1;
        }
        int kind = scalar_kind(o);
        int err = 0;
        if (kind != SC_NONE) {
            kiln_dtype dt;
            if (like && i >= value_from) {
                dt = kiln_tensor_dtype(like->t);
                if ((int)dt < 0) {
                    kp_raise();
                    return -1;
                }
                if ((kind == SC_FLOAT && !is_float(dt)) ||
                    (kind == SC_INT && dt == KILN_DTYPE_BOOL)) {
                    kp_raise_code(KILN_ERR_DTYPE,
                                  "%s: dtype error: a Python %s with a %s tensor (kiln does not "
                                  "promote: use .astype())",
                                  api, kind == SC_FLOAT ? "float" : "int", kiln_dtype_name(dt));
                    return -1;
                }
            } else {
                dt = kind == SC_BOOL  ? KILN_DTYPE_BOOL
                     : kind == SC_INT ? KILN_DTYPE_I64
                                      : KILN_DTYPE_F64;
            }
            out[i] = make_scalar(api, tr, o, kind, dt, &err);
            if (err)
                return -1;
        } else {
            /* An array captured from the enclosing scope: a constant of its dtype. */
            PyArrayObject *a = (PyArrayObject *)PyArray_FromAny(
                o, NULL, 0, 0, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, NULL);
            if (!a)
                return -1;
            int dt = kp_dtype_of_descr(PyArray_DESCR(a));
            if (dt < 0 || PyArray_NDIM(a) > KILN_MAX_RANK) {
                if (dt < 0)
                    PyErr_Format(kp_error_class(KILN_ERR_DTYPE),
                                 "%s: dtype error: cannot use a %R array in a trace (kiln has "
                                 "f32, f64, i32, i64 and bool)",
                                 api, (PyObject *)PyArray_DESCR(a));
                else
                    kp_raise_code(KILN_ERR_SHAPE, "%s: rank %d is above kiln's %d", api,
                                  PyArray_NDIM(a), KILN_MAX_RANK);
                Py_DECREF(a);
                return -1;
            }
            int64_t dims[KILN_MAX_RANK];
            for (int d = 0; d < PyArray_NDIM(a); d++)
                dims[d] = PyArray_DIM(a, d);
            out[i] = kiln_constant(tr->dev, (kiln_dtype)dt, PyArray_NDIM(a), dims,
                                   PyArray_DATA(a));
            Py_DECREF(a);
        }
        if (kiln_tensor_is_null(out[i])) {
            kp_raise();
            return -1;
        }
    }
    *trace = tr;
    return 0;
}

/* ---- kiln.Tensor ------------------------------------------------------------------------ */
static void
tensor_dealloc(kp_tensor *t)
{
    Py_DECREF(t->trace);
    PyObject_Free(t);
}

static PyObject *
binop(const char *api, kiln_tensor (*fn)(kiln_tensor, kiln_tensor), PyObject *a, PyObject *b)
{
    PyObject *objs[2] = {a, b};
    kiln_tensor t[2];
    kp_trace *tr;
    if (kp_coerce(api, objs, 2, 0, t, &tr))
        return NULL;
    return kp_tensor_wrap(tr, fn(t[0], t[1]));
}

static PyObject *
unop(kiln_tensor (*fn)(kiln_tensor), PyObject *a)
{
    kp_tensor *t = (kp_tensor *)a;
    return kp_tensor_wrap(t->trace, fn(t->t));
}

/* (r != 0) & ((r < 0) != (b < 0)): where C's truncating remainder and NumPy's flooring
 * one differ. */
static kiln_tensor
floor_adjust(kiln_tensor r, kiln_tensor b)
{
    kiln_tensor z = kiln_scalar_like(r, 0);
    return kiln_and(kiln_ne(r, z), kiln_ne(kiln_lt(r, z), kiln_lt(b, z)));
}

static kiln_tensor
floor_mod(kiln_tensor a, kiln_tensor b)
{
    kiln_tensor r = kiln_rem(a, b);
    return kiln_where(floor_adjust(r, b), kiln_add(r, b), r);
}

static kiln_tensor
floor_div(kiln_tensor a, kiln_tensor b)
{
    kiln_dtype dt = kiln_tensor_dtype(a);
    if (is_float(dt))
        return kiln_floor(kiln_div(a, b));
    kiln_tensor q = kiln_div(a, b);
    return kiln_sub(q, kiln_cast(floor_adjust(kiln_rem(a, b), b), dt));
}

static PyObject *
t_add(PyObject *a, PyObject *b)
{
    return binop("Tensor.__add__", kiln_add, a, b);
}

static PyObject *
t_sub(PyObject *a, PyObject *b)
{
    return binop("Tensor.__sub__", kiln_sub, a, b);
}

static PyObject *
t_mul(PyObject *a, PyObject *b)
{
    return binop("Tensor.__mul__", kiln_mul, a, b);
}

static PyObject *
t_mod(PyObject *a, PyObject *b)
{
    return binop("Tensor.__mod__", floor_mod, a, b);
}

static PyObject *
t_floordiv(PyObject *a, PyObject *b)
{
    return binop("Tensor.__floordiv__", floor_div, a, b);
}

static PyObject *
t_and(PyObject *a, PyObject *b)
{
    return binop("Tensor.__and__", kiln_and, a, b);
}

static PyObject *
t_or(PyObject *a, PyObject *b)
{
    return binop("Tensor.__or__", kiln_or, a, b);
}

static PyObject *
t_xor(PyObject *a, PyObject *b)
{
    return binop("Tensor.__xor__", kiln_xor, a, b);
}

static PyObject *
t_matmul(PyObject *a, PyObject *b)
{
    return binop("Tensor.__matmul__", kiln_matmul, a, b);
}

static PyObject *
t_neg(PyObject *a)
{
    return unop(kiln_neg, a);
}

static PyObject *
t_abs(PyObject *a)
{
    return unop(kiln_abs, a);
}

static PyObject *
t_invert(PyObject *a)
{
    return unop(kiln_not, a);
}


static PyObject *
t_pos(PyObject *a)
{
    Py_INCREF(a);
    return a;
}

static PyObject *
t_pow(PyObject *a, PyObject *b, PyObject *mod)
{
    if (mod != Py_None) {
        PyErr_SetString(PyExc_TypeError, "kiln.Tensor: pow() with a modulus is not supported");
        return NULL;
    }
    return binop("Tensor.__pow__", kiln_pow, a, b);
}

/* NumPy's true division: integers and bools are divided in f64. */
static PyObject *
t_truediv(PyObject *a, PyObject *b)
{
    PyObject *objs[2] = {a, b}, *tmp[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        if (kp_tensor_check(objs[i])) {
            kp_tensor *t = (kp_tensor *)objs[i];
            kiln_dtype dt = kiln_tensor_dtype(t->t);
            if ((int)dt < 0)
                return kp_raise();
            if (!is_float(dt)) {
                tmp[i] = kp_tensor_wrap(t->trace, kiln_cast(t->t, KILN_DTYPE_F64));
                if (!tmp[i]) {
                    Py_XDECREF(tmp[0]);
                    return NULL;
                }
                objs[i] = tmp[i];
            }
        }
    }
    PyObject *r = binop("Tensor.__truediv__", kiln_div, objs[0], objs[1]);
    Py_XDECREF(tmp[0]);
    Py_XDECREF(tmp[1]);
    return r;
}

static int
t_bool(PyObject *a)
{
    (void)a;
    PyErr_SetString(PyExc_TypeError,
                    "kiln.Tensor: a traced tensor has no truth value (its values are not known "
                    "while tracing): use kiln.where for data-dependent choices");
    return -1;
}

static PyNumberMethods tensor_as_number = {
    .nb_add = t_add,
    .nb_subtract = t_sub,
    .nb_multiply = t_mul,
    .nb_remainder = t_mod,
    .nb_power = t_pow,
    .nb_negative = t_neg,
    .nb_positive = t_pos,
    .nb_absolute = t_abs,
    .nb_bool = t_bool,
    .nb_invert = t_invert,
    .nb_and = t_and,
    .nb_xor = t_xor,
    .nb_or = t_or,
    .nb_floor_divide = t_floordiv,
    .nb_true_divide = t_truediv,
    .nb_matrix_multiply = t_matmul,
};

static PyObject *
tensor_richcompare(PyObject *a, PyObject *b, int op)
{
    switch (op) {
    case Py_LT: return binop("Tensor.__lt__", kiln_lt, a, b);
    case Py_LE: return binop("Tensor.__le__", kiln_le, a, b);
    case Py_EQ: return binop("Tensor.__eq__", kiln_eq, a, b);
    case Py_NE: return binop("Tensor.__ne__", kiln_ne, a, b);
    case Py_GT: return binop("Tensor.__gt__", kiln_gt, a, b);
    case Py_GE: return binop("Tensor.__ge__", kiln_ge, a, b);
    default: Py_RETURN_NOTIMPLEMENTED;
    }
}

/* Shape of a tensor; -1 with the kiln error raised. */
static int
tensor_shape(kp_tensor *t, int64_t *dims)
{
    int rank = kiln_tensor_rank(t->t);
    if (rank < 0) {
        kp_raise();
        return -1;
    }
    for (int d = 0; d < rank; d++)
        dims[d] = kiln_tensor_dim(t->t, d);
    return rank;
}

static PyObject *
tensor_get_shape(kp_tensor *t, void *c)
{
    (void)c;
    int64_t dims[KILN_MAX_RANK];
    int rank = tensor_shape(t, dims);
    if (rank < 0)
        return NULL;
    PyObject *r = PyTuple_New(rank);
    for (int d = 0; r && d < rank; d++) {
        PyObject *v = PyLong_FromLongLong(dims[d]);
        if (!v) {
            Py_CLEAR(r);
            break;
        }
        PyTuple_SET_ITEM(r, d, v);
    }
    return r;
}

static PyObject *
tensor_get_ndim(kp_tensor *t, void *c)
{
    (void)c;
    int rank = kiln_tensor_rank(t->t);
    return rank < 0 ? kp_raise() : PyLong_FromLong(rank);
}

static PyObject *
tensor_get_size(kp_tensor *t, void *c)
{
    (void)c;
    int64_t dims[KILN_MAX_RANK];
    int rank = tensor_shape(t, dims);
    if (rank < 0)
        return NULL;
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    return PyLong_FromLongLong(n);
}

static PyObject *
tensor_get_dtype(kp_tensor *t, void *c)
{
    (void)c;
    kiln_dtype dt = kiln_tensor_dtype(t->t);
    return (int)dt < 0 ? kp_raise() : kp_np_dtype(dt);
}

static PyObject *
tensor_get_T(kp_tensor *t, void *c)
{
    (void)c;
    int rank = kiln_tensor_rank(t->t);
    if (rank < 0)
        return kp_raise();
    int perm[KILN_MAX_RANK];
    for (int d = 0; d < rank; d++)
        perm[d] = rank - 1 - d;
    return kp_tensor_wrap(t->trace, kiln_permute(t->t, rank, perm));
}

static PyObject *
tensor_repr(kp_tensor *t)
{
    int rank = kiln_tensor_rank(t->t);
    if (rank < 0) {
        kiln_clear_error();
        return PyUnicode_FromString("<kiln.Tensor (its trace has ended)>");
    }
    char buf[256];
    size_t k = (size_t)snprintf(buf, sizeof buf, "<kiln.Tensor %s[",
                                kiln_dtype_name(kiln_tensor_dtype(t->t)));
    for (int d = 0; d < rank && k < sizeof buf; d++)
        k += (size_t)snprintf(buf + k, sizeof buf - k, d ? ",%lld" : "%lld",
                              (long long)kiln_tensor_dim(t->t, d));
    if (k < sizeof buf)
        snprintf(buf + k, sizeof buf - k, "]>");
    return PyUnicode_FromString(buf);
}

/* Basic indexing: ints, slices, None, Ellipsis; a Tensor or integer array of indices
 * alone gathers along axis 0. */
static PyObject *
tensor_subscript(kp_tensor *t, PyObject *key)
{
    const char *api = "Tensor.__getitem__";
    if (kp_tensor_check(key) || PyArray_Check(key) || PyList_Check(key)) {
        PyObject *objs[2] = {(PyObject *)t, key};
        kiln_tensor ts[2];
        kp_trace *tr;
        if (kp_coerce(api, objs, 2, 2, ts, &tr))
            return NULL;
        return kp_tensor_wrap(tr, kiln_gather(ts[0], ts[1], 0));
    }
    PyObject *tup = PyTuple_Check(key) ? (Py_INCREF(key), key) : PyTuple_Pack(1, key);
    if (!tup)
        return NULL;
    PyObject *result = NULL;
    int64_t dims[KILN_MAX_RANK];
    int rank = tensor_shape(t, dims);
    if (rank < 0)
        goto done;
    Py_ssize_t nk = PyTuple_GET_SIZE(tup);
    int consume = 0, ellipsis = 0, newaxes = 0;
    for (Py_ssize_t i = 0; i < nk; i++) {
        PyObject *k = PyTuple_GET_ITEM(tup, i);
        if (k == Py_Ellipsis)
            ellipsis++;
        else if (k == Py_None)
            newaxes++;
        else
            consume++;
    }
    if (newaxes > KILN_MAX_RANK) {
        kp_raise_code(KILN_ERR_SHAPE, "%s: bad rank: %d new axes (kiln's limit is rank %d)",
                      api, newaxes, KILN_MAX_RANK);
        goto done;
    }
    if (ellipsis > 1) {
        PyErr_SetString(PyExc_IndexError, "kiln.Tensor: an index can only have a single ellipsis");
        goto done;
    }
    if (consume > rank) {
        PyErr_Format(PyExc_IndexError, "kiln.Tensor: too many indices: %d for rank %d", consume,
                     rank);
        goto done;
    }
    int64_t start[KILN_MAX_RANK], stop[KILN_MAX_RANK], step[KILN_MAX_RANK];
    int64_t shape[2 * KILN_MAX_RANK];
    int nshape = 0, axis = 0;
    for (int d = 0; d < rank; d++) {
        start[d] = 0;
        stop[d] = dims[d];
        step[d] = 1;
    }
    for (Py_ssize_t i = 0; i < nk; i++) {
        PyObject *k = PyTuple_GET_ITEM(tup, i);
        if (k == Py_Ellipsis) {
            for (int e = 0; e < rank - consume; e++, axis++)
                shape[nshape++] = dims[axis];
        } else if (k == Py_None) {
            shape[nshape++] = 1; /* at most rank + newaxes <= 2 * KILN_MAX_RANK entries */
        } else if (PySlice_Check(k)) {
            Py_ssize_t s0, s1, st;
            if (PySlice_Unpack(k, &s0, &s1, &st) < 0)
                goto done;
            Py_ssize_t len = PySlice_AdjustIndices((Py_ssize_t)dims[axis], &s0, &s1, st);
            start[axis] = s0;
            /* After adjusting, -1 means "before the first element" (negative steps);
             * kiln reads a negative stop from the end, so say it with -(n+1). */
            stop[axis] = s1 < 0 ? -(dims[axis] + 1) : s1;
            step[axis] = st;
            shape[nshape++] = len;
            axis++;
        } else if (PyIndex_Check(k) && !PyBool_Check(k)) {
            Py_ssize_t ix = PyNumber_AsSsize_t(k, PyExc_IndexError);
            if (ix == -1 && PyErr_Occurred())
                goto done;
            if (ix < 0)
                ix += (Py_ssize_t)dims[axis];
            if (ix < 0 || ix >= dims[axis]) {
                PyErr_Format(PyExc_IndexError,
                             "kiln.Tensor: index %zd is out of bounds for axis %d with size %lld",
                             PyNumber_AsSsize_t(k, NULL), axis, (long long)dims[axis]);
                goto done;
            }
            start[axis] = ix;
            stop[axis] = ix + 1;
            step[axis] = 1;
            axis++;
        } else {
            PyErr_Format(PyExc_IndexError,
                         "kiln.Tensor: only integers, slices, None, ... and an index tensor "
                         "are valid indices, not %s",
                         Py_TYPE(k)->tp_name);
            goto done;
        }
    }
    for (; axis < rank; axis++)
        shape[nshape++] = dims[axis];
    if (nshape > KILN_MAX_RANK) {
        kp_raise_code(KILN_ERR_SHAPE, "%s: bad rank: %d (must be 0 to %d)", api, nshape,
                      KILN_MAX_RANK);
        goto done;
    }
    kiln_tensor y = rank ? kiln_slice(t->t, start, stop, step) : t->t;
    int same = kiln_tensor_rank(y) == nshape;
    for (int d = 0; same && d < nshape; d++)
        same = kiln_tensor_dim(y, d) == shape[d];
    if (!same)
        y = kiln_reshape(y, nshape, shape);
    result = kp_tensor_wrap(t->trace, y);
done:
    Py_DECREF(tup);
    return result;
}

static Py_ssize_t
tensor_length(kp_tensor *t)
{
    int rank = kiln_tensor_rank(t->t);
    if (rank < 0) {
        kp_raise();
        return -1;
    }
    if (rank == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of a 0-d tensor");
        return -1;
    }
    return (Py_ssize_t)kiln_tensor_dim(t->t, 0);
}

static PyMappingMethods tensor_as_mapping = {
    .mp_length = (lenfunc)tensor_length,
    .mp_subscript = (binaryfunc)tensor_subscript,
};

/* ---- methods -------------------------------------------------------------------------- */
static PyObject *
shape_args(PyObject *args)
{
    if (PyTuple_GET_SIZE(args) == 1 && !PyIndex_Check(PyTuple_GET_ITEM(args, 0))) {
        PyObject *s = PyTuple_GET_ITEM(args, 0);
        Py_INCREF(s);
        return s;
    }
    Py_INCREF(args);
    return args;
}

static PyObject *
tm_reshape(kp_tensor *t, PyObject *args)
{
    PyObject *s = shape_args(args);
    PyObject *r = kp_reshape((PyObject *)t, s);
    Py_DECREF(s);
    return r;
}

static PyObject *
tm_flatten(kp_tensor *t, PyObject *unused)
{
    (void)unused;
    PyObject *s = Py_BuildValue("(i)", -1);
    if (!s)
        return NULL;
    PyObject *r = kp_reshape((PyObject *)t, s);
    Py_DECREF(s);
    return r;
}

static PyObject *
tm_transpose(kp_tensor *t, PyObject *args)
{
    if (PyTuple_GET_SIZE(args) == 0 ||
        (PyTuple_GET_SIZE(args) == 1 && PyTuple_GET_ITEM(args, 0) == Py_None))
        return tensor_get_T(t, NULL);
    PyObject *s = shape_args(args);
    PyObject *r = kp_permute((PyObject *)t, s);
    Py_DECREF(s);
    return r;
}

static PyObject *
tm_astype(kp_tensor *t, PyObject *dtype)
{
    int dt = kp_dtype_arg(dtype);
    if (dt < 0)
        return NULL;
    return kp_tensor_wrap(t->trace, kiln_cast(t->t, (kiln_dtype)dt));
}

static PyObject *
tm_clip(kp_tensor *t, PyObject *args)
{
    PyObject *lo, *hi;
    if (!PyArg_ParseTuple(args, "OO:clip", &lo, &hi))
        return NULL;
    PyObject *objs[3] = {(PyObject *)t, lo, hi};
    kiln_tensor ts[3];
    kp_trace *tr;
    if (kp_coerce("Tensor.clip", objs, 3, 0, ts, &tr))
        return NULL;
    return kp_tensor_wrap(tr, kiln_clamp(ts[0], ts[1], ts[2]));
}

static PyObject *
tm_array(kp_tensor *t, PyObject *args)
{
    (void)t;
    (void)args;
    PyErr_SetString(PyExc_TypeError,
                    "kiln.Tensor: a traced tensor has no values yet; it cannot become a NumPy "
                    "array (use kiln functions and operators inside a traced function)");
    return NULL;
}

typedef kiln_tensor (*reduce_fn)(kiln_tensor, int, const int *, int);

static PyObject *
reduction(kp_tensor *t, PyObject *args, PyObject *kw, const char *api, reduce_fn fn, int mean)
{
    static char *kwlist[] = {"axis", "keepdims", NULL};
    PyObject *axis = Py_None;
    int keepdims = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Op", kwlist, &axis, &keepdims))
        return NULL;
    if (mean) {
        /* NumPy's mean of integers is f64; kiln's reduce_mean refuses them. */
        kiln_dtype dt = kiln_tensor_dtype(t->t);
        if ((int)dt < 0)
            return kp_raise();
        if (!is_float(dt)) {
            PyObject *c = kp_tensor_wrap(t->trace, kiln_cast(t->t, KILN_DTYPE_F64));
            if (!c)
                return NULL;
            PyObject *r = kp_reduce(api, fn, c, axis, keepdims);
            Py_DECREF(c);
            return r;
        }
    }
    return kp_reduce(api, fn, (PyObject *)t, axis, keepdims);
}

#define REDUCTION(m, fn, mean)                                                               \
    static PyObject *tm_##m(kp_tensor *t, PyObject *args, PyObject *kw)                      \
    {                                                                                        \
        return reduction(t, args, kw, "Tensor." #m, fn, mean);                               \
    }
REDUCTION(sum, kiln_reduce_sum, 0)
REDUCTION(mean, kiln_reduce_mean, 1)
REDUCTION(max, kiln_reduce_max, 0)
REDUCTION(min, kiln_reduce_min, 0)
REDUCTION(prod, kiln_reduce_prod, 0)
REDUCTION(argmax, kiln_argmax, 0)
REDUCTION(argmin, kiln_argmin, 0)
#undef REDUCTION

#define KW (PyCFunction)(void (*)(void))
#define RED_DOC(m) #m "(axis=None, keepdims=False)\n--\n\nAs numpy.ndarray." #m "."
static PyMethodDef tensor_methods[] = {
    {"reshape", (PyCFunction)tm_reshape, METH_VARARGS,
     "reshape(*shape)\n--\n\nSame elements, new shape (one -1 is inferred)."},
    {"flatten", (PyCFunction)tm_flatten, METH_NOARGS, "flatten()\n--\n\nreshape(-1)."},
    {"transpose", (PyCFunction)tm_transpose, METH_VARARGS,
     "transpose(*axes)\n--\n\nPermute the axes (none: reverse them)."},
    {"astype", (PyCFunction)tm_astype, METH_O, "astype(dtype)\n--\n\nkiln.cast(self, dtype)."},
    {"clip", (PyCFunction)tm_clip, METH_VARARGS, "clip(lo, hi)\n--\n\nkiln.clamp(self, lo, hi)."},
    {"sum", KW tm_sum, METH_VARARGS | METH_KEYWORDS, RED_DOC(sum)},
    {"mean", KW tm_mean, METH_VARARGS | METH_KEYWORDS, RED_DOC(mean)},
    {"max", KW tm_max, METH_VARARGS | METH_KEYWORDS, RED_DOC(max)},
    {"min", KW tm_min, METH_VARARGS | METH_KEYWORDS, RED_DOC(min)},
    {"prod", KW tm_prod, METH_VARARGS | METH_KEYWORDS, RED_DOC(prod)},
    {"argmax", KW tm_argmax, METH_VARARGS | METH_KEYWORDS, RED_DOC(argmax)},
    {"argmin", KW tm_argmin, METH_VARARGS | METH_KEYWORDS, RED_DOC(argmin)},
    {"__array__", (PyCFunction)tm_array, METH_VARARGS, NULL},
    {0},
};
#undef KW

static PyGetSetDef tensor_getset[] = {
    {"shape", (getter)tensor_get_shape, NULL, "the shape, a tuple of ints", NULL},
    {"ndim", (getter)tensor_get_ndim, NULL, "the rank", NULL},
    {"size", (getter)tensor_get_size, NULL, "the number of elements", NULL},
    {"dtype", (getter)tensor_get_dtype, NULL, "the dtype, a numpy.dtype", NULL},
    {"T", (getter)tensor_get_T, NULL, "the axes reversed", NULL},
    {0},
};

PyTypeObject kp_tensor_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kiln.Tensor",
    .tp_basicsize = sizeof(kp_tensor),
    .tp_dealloc = (destructor)tensor_dealloc,
    .tp_repr = (reprfunc)tensor_repr,
    .tp_as_number = &tensor_as_number,
    .tp_as_mapping = &tensor_as_mapping,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A value being traced: it stands in for an array inside a @kiln.jit function "
              "and records operations instead of computing them.",
    .tp_richcompare = tensor_richcompare,
    .tp_methods = tensor_methods,
    .tp_getset = tensor_getset,
};
