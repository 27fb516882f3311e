/* module.c — kiln._kiln: exceptions, dtypes, kiln.Graph, kiln.Program, and running a
 * program (or the interpreter) on NumPy arrays.
 *
 * Data: an input that is a C-contiguous, aligned, native-order NumPy array of the
 * declared dtype and shape is passed by pointer.  Any other array (or an object NumPy can
 * view: the buffer protocol, __array_interface__) of the declared dtype is copied once
 * into a contiguous array.  A different dtype, an object array or a shape mismatch is
 * refused (kiln.DtypeError / kiln.ShapeError): nothing is converted silently.  Outputs are
 * new arrays, or the caller's `out=` arrays (C-contiguous, writeable, exact dtype and
 * shape, not overlapping an input: kernels write in parallel). */
#define KP_IMPORT_ARRAY
#include "pykiln.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- exceptions ------------------------------------------------------------------------ */
PyObject *kp_Error;
static PyObject *err_class[KILN_STATUS_COUNT];

PyObject *
kp_raise(void)
{
    kiln_status c = kiln_errcode();
    const char *msg = kiln_errmsg();
    if ((int)c <= 0 || c >= KILN_STATUS_COUNT)
        c = KILN_ERR_INTERNAL;
    PyErr_SetString(err_class[c], msg && *msg ? msg : kiln_status_str(c));
    return NULL;
}

PyObject *
kp_raise_code(kiln_status code, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if ((int)code <= 0 || code >= KILN_STATUS_COUNT)
        code = KILN_ERR_INTERNAL;
    PyErr_SetString(err_class[code], buf);
    return NULL;
}

PyObject *
kp_error_class(kiln_status code)
{
    if ((int)code <= 0 || code >= KILN_STATUS_COUNT)
        code = KILN_ERR_INTERNAL;
    return err_class[code];
}

/* "ERR_SCOPE_CLOSED" -> "ScopeClosedError". */
static void
class_name(const char *status, char *out, size_t cap)
{
    size_t k = 0;
    const char *s = strncmp(status, "ERR_", 4) == 0 ? status + 4 : status;
    if (strcmp(s, "NOMEM") == 0)
        s = "OUT_OF_MEMORY";
    int up = 1;
    for (; *s && k + 6 < cap; s++) {
        if (*s == '_') {
            up = 1;
            continue;
        }
        out[k++] = up ? *s : (char)(*s - 'A' + 'a');
        up = 0;
    }
    memcpy(out + k, "Error", 6);
}

static int
add_exceptions(PyObject *m)
{
    kp_Error = PyErr_NewExceptionWithDoc(
        "kiln.Error",
        "Base class of kiln's errors: one subclass per kiln_status code; the message is "
        "kiln's (\"<api>: <problem>: <detail>\") and the class attribute `code` the "
        "status value.",
        NULL, NULL);
    if (!kp_Error || PyModule_AddObjectRef(m, "Error", kp_Error) < 0)
        return -1;
    static const struct {
        const char *name;
        int value;
    } codes[] = {
#define KILN_X_(name, value, text) {#name, value},
        KILN_STATUS_LIST(KILN_X_)
#undef KILN_X_
    };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        int v = codes[i].value;
        if (v == KILN_OK)
            continue;
        char cls[64], full[80];
        class_name(codes[i].name, cls, sizeof cls);
        snprintf(full, sizeof full, "kiln.%s", cls);
        /* Also the standard class a Python user would catch for the same mistake. */
        PyObject *std = v == KILN_ERR_NOMEM ? PyExc_MemoryError
                        : v == KILN_ERR_DTYPE ? PyExc_TypeError
                        : (v == KILN_ERR_SHAPE || v == KILN_ERR_INVALID_ARG) ? PyExc_ValueError
                                                                             : NULL;
        PyObject *bases = std ? PyTuple_Pack(2, kp_Error, std) : PyTuple_Pack(1, kp_Error);
        if (!bases)
            return -1;
        PyObject *c = PyErr_NewExceptionWithDoc(full, kiln_status_str((kiln_status)v), bases,
                                                NULL);
        Py_DECREF(bases);
        if (!c)
            return -1;
        PyObject *code = PyLong_FromLong(v);
        if (!code || PyObject_SetAttrString(c, "code", code) < 0) {
            Py_XDECREF(code);
            Py_DECREF(c);
            return -1;
        }
        Py_DECREF(code);
        err_class[v] = c;
        if (PyModule_AddObjectRef(m, cls, c) < 0)
            return -1;
    }
    err_class[KILN_OK] = kp_Error;
    return 0;
}

/* ---- dtypes and modes ------------------------------------------------------------------ */
int
kp_dtype_of_descr(const PyArray_Descr *d)
{
    if (!PyArray_ISNBO(d->byteorder))
        return -1;
    npy_intp size = PyDataType_ELSIZE(d);
    switch (d->kind) {
    case 'f':
        return size == 4 ? KILN_DTYPE_F32 : size == 8 ? KILN_DTYPE_F64 : -1;
    case 'i':
        return size == 4 ? KILN_DTYPE_I32 : size == 8 ? KILN_DTYPE_I64 : -1;
    case 'b':
        return size == 1 ? KILN_DTYPE_BOOL : -1;
    default:
        return -1;
    }
}

int
kp_npy_type(kiln_dtype t)
{
    switch (t) {
    case KILN_DTYPE_F32: return NPY_FLOAT32;
    case KILN_DTYPE_F64: return NPY_FLOAT64;
    case KILN_DTYPE_I32: return NPY_INT32;
    case KILN_DTYPE_I64: return NPY_INT64;
    case KILN_DTYPE_BOOL: return NPY_BOOL;
    case KILN_DTYPE_COUNT: break;
    }
    return NPY_NOTYPE;
}

PyObject *
kp_np_dtype(kiln_dtype t)
{
    return (PyObject *)PyArray_DescrFromType(kp_npy_type(t));
}

int
kp_dtype_arg(PyObject *o)
{
    if (PyUnicode_Check(o)) {
        const char *s = PyUnicode_AsUTF8(o);
        if (!s)
            return -1;
        for (int t = 0; t < KILN_DTYPE_COUNT; t++)
            if (strcmp(s, kiln_dtype_name((kiln_dtype)t)) == 0)
                return t;
    }
    PyArray_Descr *d = NULL;
    if (!PyArray_DescrConverter2(o, &d) || !d) {
        if (!PyErr_Occurred())
            kp_raise_code(KILN_ERR_DTYPE, "kiln: not a dtype: %R", o);
        return -1;
    }
    int t = kp_dtype_of_descr(d);
    if (t < 0) {
        PyErr_Format(err_class[KILN_ERR_DTYPE],
                     "kiln: unsupported dtype %R (kiln has f32, f64, i32, i64 and bool)", d);
    }
    Py_DECREF(d);
    return t;
}

int
kp_mode_arg(PyObject *o)
{
    if (!o || o == Py_None)
        return KILN_MODE_FUSED;
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    if (s && strcmp(s, "fused") == 0)
        return KILN_MODE_FUSED;
    if (s && strcmp(s, "eager") == 0)
        return KILN_MODE_EAGER;
    if (s && strcmp(s, "interp") == 0)
        return KILN_MODE_INTERP;
    if (!PyErr_Occurred())
        PyErr_Format(PyExc_ValueError,
                     "kiln: mode must be \"fused\", \"eager\" or \"interp\", not %R", o);
    return -1;
}

static const char *
mode_name(kiln_mode m)
{
    switch (m) {
    case KILN_MODE_FUSED: return "fused";
    case KILN_MODE_EAGER: return "eager";
    case KILN_MODE_INTERP: return "interp";
    case KILN_MODE_COUNT: break;
    }
    return "?";
}

/* ---- boundaries ------------------------------------------------------------------------ */
static int
io_fill(const kiln_value_info *v, kp_io *io)
{
    io->name = v->name;
    io->dtype = v->dtype;
    io->rank = v->rank;
    for (int d = 0; d < v->rank; d++)
        io->dims[d] = (npy_intp)v->dims[d];
    io->bytes = v->bytes;
    return 0;
}

/* The inputs and outputs of g as kp_io arrays (PyMem). */
static int
io_of_graph(const kiln_graph *g, int *nin, kp_io **in, int *nout, kp_io **out)
{
    *in = *out = NULL;
    *nin = kiln_graph_num_inputs(g);
    *nout = kiln_graph_num_outputs(g);
    if (*nin < 0 || *nout < 0) {
        kp_raise();
        return -1;
    }
    *in = PyMem_Calloc((size_t)*nin + 1, sizeof(kp_io));
    *out = PyMem_Calloc((size_t)*nout + 1, sizeof(kp_io));
    if (!*in || !*out)
        goto nomem;
    for (int i = 0; i < *nin; i++) {
        kiln_value_info v = KILN_VALUE_INFO_INIT;
        if (kiln_graph_input(g, i, &v) != KILN_OK)
            goto fail;
        io_fill(&v, &(*in)[i]);
    }
    for (int i = 0; i < *nout; i++) {
        kiln_value_info v = KILN_VALUE_INFO_INIT;
        if (kiln_graph_output(g, i, &v) != KILN_OK)
            goto fail;
        io_fill(&v, &(*out)[i]);
    }
    return 0;
nomem:
    PyErr_NoMemory();
    goto out;
fail:
    kp_raise();
out:
    PyMem_Free(*in);
    PyMem_Free(*out);
    *in = *out = NULL;
    return -1;
}

static PyObject *
shape_tuple(int rank, const npy_intp *dims)
{
    PyObject *t = PyTuple_New(rank);
    if (!t)
        return NULL;
    for (int d = 0; d < rank; d++) {
        PyObject *v = PyLong_FromSsize_t(dims[d]);
        if (!v) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, d, v);
    }
    return t;
}

/* [(name, dtype, shape), ...] */
static PyObject *
io_list(const kp_io *io, int n)
{
    PyObject *l = PyList_New(n);
    if (!l)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *shape = shape_tuple(io[i].rank, io[i].dims);
        PyObject *dt = kp_np_dtype(io[i].dtype);
        PyObject *e = shape && dt ? Py_BuildValue("(sOO)", io[i].name, dt, shape) : NULL;
        Py_XDECREF(shape);
        Py_XDECREF(dt);
        if (!e) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, i, e);
    }
    return l;
}

static void
shape_str(int rank, const npy_intp *dims, char *buf, size_t cap)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < rank && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, d ? ",%ld" : "%ld", (long)dims[d]);
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
}

static int
shape_eq(const kp_io *io, int ndim, const npy_intp *dims)
{
    if (ndim != io->rank)
        return 0;
    for (int d = 0; d < ndim; d++)
        if (dims[d] != io->dims[d])
            return 0;
    return 1;
}

static const char *
npy_name(PyArray_Descr *d, char *buf, size_t cap)
{
    PyObject *s = PyObject_Str((PyObject *)d);
    const char *u = s ? PyUnicode_AsUTF8(s) : NULL;
    snprintf(buf, cap, "%s", u ? u : "?");
    Py_XDECREF(s);
    PyErr_Clear();
    return buf;
}

/* Input `i`: a pointer to its elements; *hold gets a new reference to keep alive (or
 * NULL when obj itself is used). */
static int
as_input(const char *api, int i, const kp_io *io, PyObject *obj, const void **ptr,
         PyObject **hold)
{
    PyArrayObject *a;
    *hold = NULL;
    if (PyArray_Check(obj)) {
        a = (PyArrayObject *)obj;
    } else {
        if (obj == Py_None) {
            kp_raise_code(KILN_ERR_INVALID_ARG, "%s: input %d '%s': None is not an array", api,
                          i, io->name);
            return -1;
        }
        /* The buffer protocol, __array_interface__, __array__: a view when NumPy can make
         * one. */
        *hold = PyArray_FromAny(obj, NULL, 0, 0, 0, NULL);
        if (!*hold)
            return -1;
        a = (PyArrayObject *)*hold;
    }
    PyArray_Descr *d = PyArray_DESCR(a);
    int dt = kp_dtype_of_descr(d);
    if (dt != (int)io->dtype) {
        char b[64];
        if (d->type_num == NPY_OBJECT)
            kp_raise_code(KILN_ERR_DTYPE,
                          "%s: dtype error: input %d '%s' is an object array; kiln needs %s",
                          api, i, io->name, kiln_dtype_name(io->dtype));
        else
            kp_raise_code(KILN_ERR_DTYPE, "%s: dtype error: input %d '%s' is %s, expected %s",
                          api, i, io->name, npy_name(d, b, sizeof b),
                          kiln_dtype_name(io->dtype));
        goto fail;
    }
    if (!shape_eq(io, PyArray_NDIM(a), PyArray_DIMS(a))) {
        char got[160], want[160];
        shape_str(PyArray_NDIM(a), PyArray_DIMS(a), got, sizeof got);
        shape_str(io->rank, io->dims, want, sizeof want);
        kp_raise_code(KILN_ERR_SHAPE, "%s: shape mismatch: input %d '%s' is %s, expected %s",
                      api, i, io->name, got, want);
        goto fail;
    }
    if (!PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a)) {
        /* Copied once into a contiguous array of the same dtype. */
        PyObject *c = PyArray_NewCopy(a, NPY_CORDER);
        Py_XDECREF(*hold);
        *hold = c;
        if (!c)
            return -1;
        a = (PyArrayObject *)c;
    }
    *ptr = PyArray_DATA(a);
    return 0;
fail:
    Py_XDECREF(*hold);
    *hold = NULL;
    return -1;
}

static int
overlaps(const void *a, size_t na, const void *b, size_t nb)
{
    const char *x = a, *y = b;
    return na && nb && x < y + nb && y < x + na;
}

/* Output `i` from the caller's out= (a new reference in *arr). */
static int
as_output(const char *api, int i, const kp_io *io, PyObject *obj, PyObject **arr)
{
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: out %d must be a NumPy array, not %s", api, i,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyArrayObject *a = (PyArrayObject *)obj;
    if (kp_dtype_of_descr(PyArray_DESCR(a)) != (int)io->dtype) {
        kp_raise_code(KILN_ERR_DTYPE, "%s: dtype error: out %d '%s' must be %s", api, i,
                      io->name, kiln_dtype_name(io->dtype));
        return -1;
    }
    if (!shape_eq(io, PyArray_NDIM(a), PyArray_DIMS(a))) {
        char got[160], want[160];
        shape_str(PyArray_NDIM(a), PyArray_DIMS(a), got, sizeof got);
        shape_str(io->rank, io->dims, want, sizeof want);
        kp_raise_code(KILN_ERR_SHAPE, "%s: shape mismatch: out %d '%s' is %s, expected %s",
                      api, i, io->name, got, want);
        return -1;
    }
    if (!PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a) || !PyArray_ISWRITEABLE(a)) {
        kp_raise_code(KILN_ERR_INVALID_ARG,
                      "%s: invalid argument: out %d '%s' must be C-contiguous, aligned and "
                      "writeable",
                      api, i, io->name);
        return -1;
    }
    Py_INCREF(obj);
    *arr = obj;
    return 0;
}

typedef kiln_status (*runner)(void *ctx, const void *const *in, void *const *out);

static kiln_status
run_program(void *ctx, const void *const *in, void *const *out)
{
    return kiln_program_run(ctx, in, out);
}

static kiln_status
run_interp(void *ctx, const void *const *in, void *const *out)
{
    return kiln_graph_interpret(ctx, in, out);
}

#define KP_SMALL 8

/* Validate the arguments, make the outputs, run with the GIL released. */
static PyObject *
run(const char *api, runner fn, void *ctx, const kp_io *ins, int nin, const kp_io *outs,
    int nout, PyObject *const *args, Py_ssize_t nargs, PyObject *out)
{
    const void *in_small[KP_SMALL];
    void *out_small[KP_SMALL];
    PyObject *hold_small[KP_SMALL], *arr_small[KP_SMALL];
    const void **inp = in_small;
    void **outp = out_small;
    PyObject **hold = hold_small, **arr = arr_small;
    PyObject *result = NULL;
    int ni = 0, no = 0;

    if (nargs != nin) {
        PyErr_Format(PyExc_TypeError, "%s: takes %d input array%s, got %zd", api, nin,
                     nin == 1 ? "" : "s", nargs);
        return NULL;
    }
    if (nin > KP_SMALL || nout > KP_SMALL) {
        inp = PyMem_Calloc((size_t)nin + 1, sizeof *inp);
        hold = PyMem_Calloc((size_t)nin + 1, sizeof *hold);
        outp = PyMem_Calloc((size_t)nout + 1, sizeof *outp);
        arr = PyMem_Calloc((size_t)nout + 1, sizeof *arr);
        if (!inp || !hold || !outp || !arr) {
            PyErr_NoMemory();
            goto done;
        }
    }
    for (; ni < nin; ni++)
        if (as_input(api, ni, &ins[ni], args[ni], &inp[ni], &hold[ni]))
            goto done;
    PyObject *const *outobjs = NULL;
    if (out && out != Py_None) {
        if (PyArray_Check(out) && nout == 1) {
            outobjs = &out;
        } else if ((PyTuple_Check(out) || PyList_Check(out)) &&
                   PySequence_Fast_GET_SIZE(out) == nout) {
            outobjs = PySequence_Fast_ITEMS(out);
        } else {
            PyErr_Format(PyExc_TypeError,
                         "%s: out must be %s of %d array%s", api,
                         nout == 1 ? "an array or a tuple" : "a tuple", nout,
                         nout == 1 ? "" : "s");
            goto done;
        }
    }
    for (; no < nout; no++) {
        if (outobjs) {
            if (as_output(api, no, &outs[no], outobjs[no], &arr[no]))
                goto done;
        } else {
            arr[no] = PyArray_SimpleNew(outs[no].rank, (npy_intp *)outs[no].dims,
                                        kp_npy_type(outs[no].dtype));
            if (!arr[no])
                goto done;
        }
        outp[no] = PyArray_DATA((PyArrayObject *)arr[no]);
    }
    if (outobjs) {
        for (int o = 0; o < nout; o++) {
            for (int i = 0; i < nin; i++)
                if (overlaps(outp[o], outs[o].bytes, inp[i], ins[i].bytes)) {
                    kp_raise_code(KILN_ERR_INVALID_ARG,
                                  "%s: invalid argument: out %d overlaps input %d", api, o, i);
                    goto done;
                }
            for (int p = 0; p < o; p++)
                if (overlaps(outp[o], outs[o].bytes, outp[p], outs[p].bytes)) {
                    kp_raise_code(KILN_ERR_INVALID_ARG,
                                  "%s: invalid argument: out %d overlaps out %d", api, o, p);
                    goto done;
                }
        }
    }
    kiln_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fn(ctx, inp, outp);
    Py_END_ALLOW_THREADS
    if (st != KILN_OK) {
        kp_raise();
        goto done;
    }
    if (nout == 1) {
        result = arr[0];
        arr[0] = NULL;
    } else {
        result = PyTuple_New(nout);
        if (result)
            for (int o = 0; o < nout; o++) {
                PyTuple_SET_ITEM(result, o, arr[o]);
                arr[o] = NULL;
            }
    }
done:
    for (int i = 0; i < ni; i++)
        Py_XDECREF(hold[i]);
    for (int o = 0; o < no; o++)
        Py_XDECREF(arr[o]);
    if (inp != in_small) {
        PyMem_Free(inp);
        PyMem_Free(hold);
        PyMem_Free(outp);
        PyMem_Free(arr);
    }
    return result;
}

/* ---- kiln.Graph ------------------------------------------------------------------------ */
typedef struct kp_graph {
    PyObject_HEAD
    kiln_graph *g;
    PyObject *owner; /* NULL: g is ours */
} kp_graph;

PyObject *
kp_graph_wrap(kiln_graph *g, PyObject *owner)
{
    kp_graph *o = PyObject_New(kp_graph, &kp_graph_type);
    if (!o) {
        if (!owner)
            kiln_graph_free(g);
        return NULL;
    }
    o->g = g;
    o->owner = owner;
    Py_XINCREF(owner);
    return (PyObject *)o;
}

static void
graph_dealloc(kp_graph *self)
{
    if (self->owner)
        Py_DECREF(self->owner);
    else
        kiln_graph_free(self->g);
    PyObject_Free(self);
}

static PyObject *
graph_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)type;
    static char *kwlist[] = {"text", NULL};
    const char *text;
    Py_ssize_t len;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s#:Graph", kwlist, &text, &len))
        return NULL;
    kiln_graph *g = NULL;
    kiln_status st;
    Py_BEGIN_ALLOW_THREADS
    st = kiln_graph_parse(text, (size_t)len, &g);
    Py_END_ALLOW_THREADS
    if (st != KILN_OK)
        return kp_raise();
    return kp_graph_wrap(g, NULL);
}

static PyObject *
graph_parse(PyObject *cls, PyObject *args, PyObject *kw)
{
    return graph_new((PyTypeObject *)cls, args, kw);
}

static PyObject *
graph_str(kp_graph *self)
{
    char *s = kiln_graph_to_string(self->g);
    if (!s)
        return kp_raise();
    PyObject *r = PyUnicode_FromString(s);
    free(s);
    return r;
}

static PyObject *
graph_dot(kp_graph *self, PyObject *unused)
{
    (void)unused;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return PyErr_NoMemory();
    kiln_status st = kiln_graph_print_dot(self->g, f);
    fclose(f);
    PyObject *r = st == KILN_OK ? PyUnicode_FromStringAndSize(buf, (Py_ssize_t)len) : kp_raise();
    free(buf);
    return r;
}

static PyObject *
graph_io(kp_graph *self, int outputs)
{
    int nin, nout;
    kp_io *in, *out;
    if (io_of_graph(self->g, &nin, &in, &nout, &out))
        return NULL;
    PyObject *r = outputs ? io_list(out, nout) : io_list(in, nin);
    PyMem_Free(in);
    PyMem_Free(out);
    return r;
}

static PyObject *
graph_inputs(kp_graph *self, void *c)
{
    (void)c;
    return graph_io(self, 0);
}

static PyObject *
graph_outputs(kp_graph *self, void *c)
{
    (void)c;
    return graph_io(self, 1);
}

static PyObject *
graph_name(kp_graph *self, void *c)
{
    (void)c;
    const char *n = kiln_graph_name(self->g);
    return n ? PyUnicode_FromString(n) : kp_raise();
}

static PyObject *
graph_hash_get(kp_graph *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(kiln_graph_hash(self->g));
}

static PyObject *
graph_generic_hash_get(kp_graph *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(kiln_graph_generic_hash(self->g));
}

static PyObject *
graph_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || !PyObject_TypeCheck(b, &kp_graph_type) ||
        !PyObject_TypeCheck(a, &kp_graph_type))
        Py_RETURN_NOTIMPLEMENTED;
    int eq = kiln_graph_equal(((kp_graph *)a)->g, ((kp_graph *)b)->g) == 1;
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static Py_hash_t
graph_tp_hash(kp_graph *self)
{
    Py_hash_t h = (Py_hash_t)kiln_graph_hash(self->g);
    return h == -1 ? -2 : h;
}

static PyObject *
graph_interpret(kp_graph *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *out = NULL;
    if (kwnames && PyTuple_GET_SIZE(kwnames)) {
        if (PyTuple_GET_SIZE(kwnames) != 1 ||
            PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "out") != 0) {
            PyErr_SetString(PyExc_TypeError, "Graph.interpret: the only keyword is out=");
            return NULL;
        }
        out = args[nargs];
    }
    int nin, nout;
    kp_io *in, *outs;
    if (io_of_graph(self->g, &nin, &in, &nout, &outs))
        return NULL;
    PyObject *r = run("Graph.interpret", run_interp, self->g, in, nin, outs, nout, args, nargs,
                      out);
    PyMem_Free(in);
    PyMem_Free(outs);
    return r;
}

static PyObject *kp_compile(PyObject *m, PyObject *args, PyObject *kw);

static PyObject *
graph_compile(kp_graph *self, PyObject *args, PyObject *kw)
{
    PyObject *full = PyTuple_New(PyTuple_GET_SIZE(args) + 1);
    if (!full)
        return NULL;
    Py_INCREF(self);
    PyTuple_SET_ITEM(full, 0, (PyObject *)self);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
        Py_INCREF(PyTuple_GET_ITEM(args, i));
        PyTuple_SET_ITEM(full, i + 1, PyTuple_GET_ITEM(args, i));
    }
    PyObject *r = kp_compile(NULL, full, kw);
    Py_DECREF(full);
    return r;
}

static PyObject *
graph_repr(kp_graph *self)
{
    return PyUnicode_FromFormat("<kiln.Graph %s: %d inputs, %d outputs>",
                                kiln_graph_name(self->g), kiln_graph_num_inputs(self->g),
                                kiln_graph_num_outputs(self->g));
}

static PyMethodDef graph_methods[] = {
    {"parse", (PyCFunction)(void (*)(void))graph_parse, METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "parse(text)\n--\n\nParse and verify a graph in kiln's text format (same as Graph(text))."},
    {"dot", (PyCFunction)graph_dot, METH_NOARGS, "dot()\n--\n\nThe graph as Graphviz DOT text."},
    {"interpret", (PyCFunction)(void (*)(void))graph_interpret, METH_FASTCALL | METH_KEYWORDS,
     "interpret(*arrays, out=None)\n--\n\nRun the reference interpreter (kiln's oracle)."},
    {"compile", (PyCFunction)(void (*)(void))graph_compile, METH_VARARGS | METH_KEYWORDS,
     "compile(mode='fused', dumps=False, cache=True)\n--\n\nkiln.compile(self, ...)."},
    {0},
};

static PyGetSetDef graph_getset[] = {
    {"name", (getter)graph_name, NULL, "the graph's name", NULL},
    {"inputs", (getter)graph_inputs, NULL, "[(name, dtype, shape)] of the inputs", NULL},
    {"outputs", (getter)graph_outputs, NULL, "[(name, dtype, shape)] of the outputs", NULL},
    {"hash", (getter)graph_hash_get, NULL, "kiln_graph_hash: structural hash", NULL},
    {"generic_hash", (getter)graph_generic_hash_get, NULL,
     "kiln_graph_generic_hash: the hash without sizes (what keys size-free kernels)", NULL},
    {0},
};

PyTypeObject kp_graph_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kiln.Graph",
    .tp_basicsize = sizeof(kp_graph),
    .tp_dealloc = (destructor)graph_dealloc,
    .tp_repr = (reprfunc)graph_repr,
    .tp_str = (reprfunc)graph_str,
    .tp_hash = (hashfunc)graph_tp_hash,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Graph(text)\n--\n\nA verified kiln graph, parsed from the text format "
              "(docs/format.md).  str(g) prints it, g.dot() gives Graphviz.",
    .tp_richcompare = graph_richcompare,
    .tp_methods = graph_methods,
    .tp_getset = graph_getset,
    .tp_new = graph_new,
};

/* ---- kiln.Program ---------------------------------------------------------------------- */
static PyObject *program_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                    PyObject *kwnames);

PyObject *
kp_program_wrap(kiln_program *p)
{
    kp_program *o = PyObject_New(kp_program, &kp_program_type);
    if (!o) {
        kiln_program_free(p);
        return NULL;
    }
    o->vectorcall = program_vectorcall;
    o->p = p;
    o->in = o->out = NULL;
    if (io_of_graph(kiln_program_graph(p), &o->nin, &o->in, &o->nout, &o->out)) {
        Py_DECREF(o);
        return NULL;
    }
    return (PyObject *)o;
}

static void
program_dealloc(kp_program *self)
{
    kiln_program_free(self->p);
    PyMem_Free(self->in);
    PyMem_Free(self->out);
    PyObject_Free(self);
}

PyObject *
kp_program_call(kp_program *self, PyObject *const *args, Py_ssize_t nargs, PyObject *out)
{
    return run("kiln.Program", run_program, self->p, self->in, self->nin, self->out,
               self->nout, args, nargs, out);
}

static PyObject *
program_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    PyObject *out = NULL;
    if (kwnames && PyTuple_GET_SIZE(kwnames)) {
        if (PyTuple_GET_SIZE(kwnames) != 1 ||
            PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "out") != 0) {
            PyErr_SetString(PyExc_TypeError, "kiln.Program: the only keyword is out=");
            return NULL;
        }
        out = args[n];
    }
    return kp_program_call((kp_program *)self, args, n, out);
}

static PyObject *
program_dump(kp_program *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"what", NULL};
    const char *what = "plan";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|s:dump", kwlist, &what))
        return NULL;
    int view = 0;
    while (view < KILN_VIEW_COUNT && strcmp(kiln_view_name((kiln_view)view), what) != 0)
        view++;
    if (view == KILN_VIEW_COUNT)
        return kp_raise_code(KILN_ERR_INVALID_ARG,
                             "Program.dump: invalid argument: view '%s' (expected graph, plan, "
                             "llvm, opt or asm)", what);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return PyErr_NoMemory();
    kiln_status st = kiln_program_dump(self->p, (kiln_view)view, f);
    fclose(f);
    PyObject *r = st == KILN_OK ? PyUnicode_FromStringAndSize(buf, (Py_ssize_t)len) : kp_raise();
    free(buf);
    return r;
}

static PyObject *
program_graph(kp_program *self, void *c)
{
    (void)c;
    const kiln_graph *g = kiln_program_graph(self->p);
    if (!g)
        return kp_raise();
    return kp_graph_wrap((kiln_graph *)g, (PyObject *)self);
}

static PyObject *
program_mode(kp_program *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(mode_name(kiln_program_mode(self->p)));
}

static PyObject *
program_inputs(kp_program *self, void *c)
{
    (void)c;
    return io_list(self->in, self->nin);
}

static PyObject *
program_outputs(kp_program *self, void *c)
{
    (void)c;
    return io_list(self->out, self->nout);
}

static PyObject *
program_repr(kp_program *self)
{
    return PyUnicode_FromFormat("<kiln.Program %s (%s): %d inputs, %d outputs>",
                                kiln_graph_name(kiln_program_graph(self->p)),
                                mode_name(kiln_program_mode(self->p)), self->nin, self->nout);
}

/* Program._run_loop(arrays, n): seconds per kiln_program_run over n runs of a C loop on
 * the same buffers, the GIL released: the C API's own time, for python/bench.py. */
static PyObject *
program_run_loop(kp_program *self, PyObject *args)
{
    PyObject *arrays;
    long n;
    if (!PyArg_ParseTuple(args, "O!l:_run_loop", &PyTuple_Type, &arrays, &n))
        return NULL;
    Py_ssize_t nargs = PyTuple_GET_SIZE(arrays);
    if (nargs != self->nin || n < 1) {
        PyErr_SetString(PyExc_ValueError, "_run_loop: one array per input and n >= 1");
        return NULL;
    }
    /* One checked run gives the outputs; then the loop reuses every buffer. */
    PyObject *outs = kp_program_call(self, &PyTuple_GET_ITEM(arrays, 0), nargs, NULL);
    if (!outs)
        return NULL;
    PyObject *result = NULL;
    const void **in = PyMem_Calloc((size_t)self->nin + 1, sizeof *in);
    void **out = PyMem_Calloc((size_t)self->nout + 1, sizeof *out);
    if (!in || !out) {
        PyErr_NoMemory();
        goto done;
    }
    for (int i = 0; i < self->nin; i++) {
        PyObject *a = PyTuple_GET_ITEM(arrays, i);
        if (!PyArray_Check(a) || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)a)) {
            PyErr_SetString(PyExc_TypeError, "_run_loop: C-contiguous arrays only");
            goto done;
        }
        in[i] = PyArray_DATA((PyArrayObject *)a);
    }
    for (int o = 0; o < self->nout; o++)
        out[o] = PyArray_DATA(
            (PyArrayObject *)(self->nout == 1 ? outs : PyTuple_GET_ITEM(outs, o)));
    struct timespec t0, t1;
    kiln_status st = KILN_OK;
    Py_BEGIN_ALLOW_THREADS
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long k = 0; k < n && st == KILN_OK; k++)
        st = kiln_program_run(self->p, in, out);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    Py_END_ALLOW_THREADS
    if (st != KILN_OK) {
        kp_raise();
        goto done;
    }
    result = PyFloat_FromDouble(((double)(t1.tv_sec - t0.tv_sec) +
                                 (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9) / (double)n);
done:
    PyMem_Free(in);
    PyMem_Free(out);
    Py_DECREF(outs);
    return result;
}

static PyMethodDef program_methods[] = {
    {"_run_loop", (PyCFunction)program_run_loop, METH_VARARGS,
     "_run_loop(arrays, n)\n--\n\nSeconds per run of a C loop of n kiln_program_run calls "
     "on the same buffers (for python/bench.py)."},
    {"dump", (PyCFunction)(void (*)(void))program_dump, METH_VARARGS | METH_KEYWORDS,
     "dump(what='plan')\n--\n\nOne view of the program as text: 'graph', 'plan', 'llvm', "
     "'opt' or 'asm' (the last three need the program compiled with dumps=True)."},
    {0},
};

static PyGetSetDef program_getset[] = {
    {"graph", (getter)program_graph, NULL, "the program's graph (kiln.Graph)", NULL},
    {"mode", (getter)program_mode, NULL, "the executor: 'fused', 'eager' or 'interp'", NULL},
    {"inputs", (getter)program_inputs, NULL, "[(name, dtype, shape)] of the inputs", NULL},
    {"outputs", (getter)program_outputs, NULL, "[(name, dtype, shape)] of the outputs", NULL},
    {0},
};

PyTypeObject kp_program_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kiln.Program",
    .tp_basicsize = sizeof(kp_program),
    .tp_dealloc = (destructor)program_dealloc,
    .tp_vectorcall_offset = offsetof(kp_program, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = (reprfunc)program_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A compiled program: call it with one array per input (out= optional).  "
              "Made by kiln.compile or Jit.lower.",
    .tp_methods = program_methods,
    .tp_getset = program_getset,
};

/* ---- module functions ------------------------------------------------------------------- */
static PyObject *
kp_compile(PyObject *m, PyObject *args, PyObject *kw)
{
    (void)m;
    static char *kwlist[] = {"graph", "mode", "dumps", "cache", "tiered", NULL};
    PyObject *g, *mode = NULL;
    int dumps = 0, cache = 1, tiered = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|Oppp:compile", kwlist, &kp_graph_type, &g,
                                     &mode, &dumps, &cache, &tiered))
        return NULL;
    int md = kp_mode_arg(mode);
    if (md < 0)
        return NULL;
    kp_opts o = {(kiln_mode)md,
                 (dumps ? KILN_KEEP_DUMPS : 0u) | (cache ? 0u : KILN_NO_CACHE) |
                     (tiered ? KILN_TIERED : 0u),
                 NULL};
    kiln_program *p = NULL;
    kiln_status st;
    Py_BEGIN_ALLOW_THREADS
    st = kp_program_compile(((kp_graph *)g)->g, &o, &p);
    Py_END_ALLOW_THREADS
    if (st != KILN_OK)
        return kp_raise();
    return kp_program_wrap(p);
}

static PyObject *
kp_sync(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    Py_BEGIN_ALLOW_THREADS
    kiln_jit_sync();
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *
kp_trace_fn(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    return (PyObject *)kp_trace_new();
}

static PyMethodDef module_methods[] = {
    {"compile", (PyCFunction)(void (*)(void))kp_compile, METH_VARARGS | METH_KEYWORDS,
     "compile(graph, mode='fused', dumps=False, cache=True, tiered=False)\n--\n\n"
     "Compile a kiln.Graph into a kiln.Program.  mode: 'fused' (fused SIMD kernels), "
     "'eager' (one kernel per op) or 'interp' (the reference interpreter).  dumps=True keeps "
     "the LLVM IR and assembly for Program.dump; cache=False compiles from scratch; "
     "tiered=True (KILN_TIERED) runs new kernels from quickly generated code until their "
     "full code, made on a background thread, replaces it."},
    {"sync", kp_sync, METH_NOARGS,
     "sync()\n--\n\nWait until the full code of every kernel compiled with tiered=True so far "
     "has replaced its first tier (kiln_jit_sync)."},
    {"stats", kp_stats, METH_NOARGS,
     "stats()\n--\n\nkiln's process-wide JIT counters (kiln_jit_stats) as a dict."},
    {"cache_info", kp_cache_info, METH_NOARGS,
     "cache_info()\n--\n\nThe persistent kernel cache (kiln_cache_info_get) as a dict."},
    {"trace", kp_trace_fn, METH_NOARGS,
     "trace()\n--\n\nA new capture scope on a device of its own, used as `with kiln.trace() as "
     "t:`; inside it kiln.input(...) declares inputs and t.compile(outputs) ends it."},
    {0},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kiln._kiln",
    .m_doc = "kiln's C extension: the public API of kiln.h for Python (see kiln/__init__.py).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__kiln(void)
{
    import_array();
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    PyTypeObject *types[] = {&kp_graph_type, &kp_program_type, &kp_trace_type,
                             &kp_tensor_type, &kp_jit_type};
    const char *names[] = {"Graph", "Program", "Trace", "Tensor", "Jit"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (PyType_Ready(types[i]) < 0 ||
            PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) < 0)
            goto fail;
    if (add_exceptions(m) < 0 || kp_ops_add(m) < 0)
        goto fail;
    /* NumPy defers to the Tensor's reflected operators (array + tensor) instead of making
     * an object array. */
    if (PyDict_SetItemString(kp_tensor_type.tp_dict, "__array_ufunc__", Py_None) < 0)
        goto fail;
    PyType_Modified(&kp_tensor_type);
    if (PyModule_AddStringConstant(m, "kiln_version", kiln_version()) < 0 ||
        PyModule_AddIntConstant(m, "MAX_RANK", KILN_MAX_RANK) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
