/* jit.c — kiln.jit: a Python function traced once per signature, then a C call path.
 *
 * Signature: for each argument, an array's (kiln dtype, rank, sizes), or "static": an
 * argument listed in static_argnums, a Python scalar, None, a str, or an object NumPy can
 * only make an object array of (self of a method, a config object); the function sees it
 * as it is, and it is compared by type and == (identity for most objects).  Anything
 * else NumPy converts (NumPy scalars, lists, buffer-protocol objects) is an array.
 *
 * A program has fixed sizes (kiln_program_run takes buffers "sizes as declared"), so
 * sizes are part of the signature: a new size re-traces the function (tens of
 * microseconds: python/bench.py) and kiln_scope_end compiles the new graph, which finds
 * every kernel in kiln's kernel cache (keyed by the size-free kiln_graph_generic_hash): no
 * LLVM work.  The traced function may read x.shape, so the sizes are needed to trace it
 * anyway.
 *
 * A function may return a tensor twice; a scope's outputs are distinct, so the entry maps
 * returned positions onto the program's outputs (outmap).
 *
 * The cache per function holds JIT_CACHE_MAX programs, most recently used first; a hit
 * moves its entry to the front, a miss beyond the limit drops the last.  The hit path
 * allocates nothing but the outputs: the signature is compared in a stack buffer, the
 * arrays are passed by pointer, and the GIL is released while the program runs.  All of
 * it runs under the GIL, so threads share one cache; a program is kept alive (a reference)
 * while it runs. */
#include "pykiln.h"

#include <string.h>

#define JIT_CACHE_MAX 64
#define KEY_SMALL 160

enum { TAG_ARRAY = 1, TAG_STATIC = 2 };

typedef struct jit_entry {
    int64_t *key; /* PyMem */
    int nkey;
    PyObject *statics; /* tuple of the static arguments, in order */
    kp_program *prog;
    int single; /* the function returned one tensor, not a tuple */
    int nret;   /* with outmap: the tuple's length */
    int *outmap; /* PyMem, or NULL: returned tensor i is the program's output outmap[i]
                  * (a function returning one tensor twice: kiln's outputs are distinct) */
} jit_entry;

typedef struct kp_jit {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *fn;
    PyObject *dict;
    PyObject *weakrefs;
    kiln_mode mode;
    unsigned flags; /* KILN_NO_CACHE for jit(cache=False), KILN_TIERED for tiered=True */
    uint64_t static_mask;
    int nentries;
    jit_entry entries[JIT_CACHE_MAX];
    unsigned long long traces, calls;
} kp_jit;

static void
entry_clear(jit_entry *e)
{
    PyMem_Free(e->key);
    PyMem_Free(e->outmap);
    Py_XDECREF(e->statics);
    Py_XDECREF(e->prog);
    memset(e, 0, sizeof *e);
}

/* Python scalars, None and str are static.  NumPy scalars (np.float32(2)) have a dtype:
 * they are 0-d arrays. */
static int
is_auto_static(PyObject *o)
{
    return o == Py_None || PyBool_Check(o) || PyLong_Check(o) || PyFloat_Check(o) ||
           PyUnicode_Check(o);
}

/* One call's signature: key (tags, dtypes, ranks, sizes) and its arrays. */
typedef struct sig {
    int64_t small[KEY_SMALL];
    int64_t *key;
    int nkey, cap;
    PyObject *arrays_small[16];
    PyObject **arrays; /* array arguments (borrowed, or held when converted) */
    unsigned char held_small[16], *held;
    int narrays;
    int nstatic;
} sig;

static void
sig_free(sig *s)
{
    for (int i = 0; i < s->narrays; i++)
        if (s->held[i])
            Py_DECREF(s->arrays[i]);
    if (s->key != s->small)
        PyMem_Free(s->key);
    if (s->arrays != s->arrays_small) {
        PyMem_Free(s->arrays);
        PyMem_Free(s->held);
    }
}

static int
sig_build(kp_jit *self, PyObject *const *args, Py_ssize_t n, sig *s)
{
    s->key = s->small;
    s->cap = KEY_SMALL;
    s->nkey = 0;
    s->arrays = s->arrays_small;
    s->held = s->held_small;
    s->narrays = 0;
    s->nstatic = 0;
    if (n > 16) {
        s->arrays = PyMem_Calloc((size_t)n, sizeof *s->arrays);
        s->held = PyMem_Calloc((size_t)n, 1);
        if (!s->arrays || !s->held) {
            PyMem_Free(s->arrays);
            PyMem_Free(s->held);
            s->arrays = s->arrays_small;
            s->held = s->held_small;
            PyErr_NoMemory();
            return -1;
        }
    }
    if ((size_t)n * (KILN_MAX_RANK + 1) > KEY_SMALL) {
        s->cap = (int)n * (KILN_MAX_RANK + 1);
        s->key = PyMem_Malloc(sizeof(int64_t) * (size_t)s->cap);
        if (!s->key) {
            s->key = s->small;
            PyErr_NoMemory();
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = args[i];
        if ((i < 64 && (self->static_mask >> i) & 1) || is_auto_static(a)) {
            s->key[s->nkey++] = TAG_STATIC;
            s->nstatic++;
            continue;
        }
        int held = 0;
        if (!PyArray_Check(a)) {
            a = PyArray_FromAny(a, NULL, 0, 0, 0, NULL);
            if (!a)
                return -1;
            if (PyArray_DESCR((PyArrayObject *)a)->type_num == NPY_OBJECT) {
                /* Not data (an object of the caller's, self of a method): static.  An
                 * ndarray of dtype object is refused below. */
                Py_DECREF(a);
                s->key[s->nkey++] = TAG_STATIC;
                s->nstatic++;
                continue;
            }
            held = 1;
        }
        s->arrays[s->narrays] = a;
        s->held[s->narrays] = (unsigned char)held;
        s->narrays++;
        PyArrayObject *arr = (PyArrayObject *)a;
        int dt = kp_dtype_of_descr(PyArray_DESCR(arr));
        int nd = PyArray_NDIM(arr);
        if (dt < 0) {
            PyErr_Format(kp_error_class(KILN_ERR_DTYPE),
                         "kiln.jit: dtype error: argument %zd is a %R array; kiln takes f32, "
                         "f64, i32, i64 and bool arrays%s",
                         i, (PyObject *)PyArray_DESCR(arr),
                         PyArray_DESCR(arr)->type_num == NPY_OBJECT
                             ? " (an object array: list it in static_argnums if it is not data)"
                             : "");
            return -1;
        }
        if (nd > KILN_MAX_RANK) {
            kp_raise_code(KILN_ERR_SHAPE, "kiln.jit: bad rank: argument %zd has rank %d (kiln "
                                          "takes 0 to %d)",
                          i, nd, KILN_MAX_RANK);
            return -1;
        }
        s->key[s->nkey++] = TAG_ARRAY | (int64_t)dt << 8 | (int64_t)nd << 16;
        for (int d = 0; d < nd; d++)
            s->key[s->nkey++] = PyArray_DIM(arr, d);
    }
    return 0;
}

static int
statics_equal(PyObject *stored, PyObject *const *args, const sig *s)
{
    /* __eq__ may run Python code, and another thread may evict the entry meanwhile. */
    Py_INCREF(stored);
    int r = 1;
    Py_ssize_t k = 0;
    int pos = 0;
    for (int i = 0; i < s->nkey; i++) {
        int64_t tag = s->key[i];
        if (tag == TAG_STATIC) {
            PyObject *a = args[pos], *b = PyTuple_GET_ITEM(stored, k++);
            if (a != b) {
                if (Py_TYPE(a) != Py_TYPE(b)) {
                    r = 0;
                    break;
                }
                int eq = PyObject_RichCompareBool(a, b, Py_EQ);
                if (eq < 0)
                    PyErr_Clear();
                if (eq != 1) {
                    r = 0;
                    break;
                }
            }
        } else {
            i += (int)((tag >> 16) & 0xff);
        }
        pos++;
    }
    Py_DECREF(stored);
    return r;
}

static int
find_entry(kp_jit *self, PyObject *const *args, const sig *s)
{
    for (int e = 0; e < self->nentries; e++) {
        jit_entry *en = &self->entries[e];
        if (en->nkey == s->nkey &&
            memcmp(en->key, s->key, sizeof(int64_t) * (size_t)s->nkey) == 0 &&
            (s->nstatic == 0 || statics_equal(en->statics, args, s)))
            return e;
    }
    return -1;
}

static PyObject *
run_entry(const jit_entry *en, const sig *s)
{
    /* Copies: another thread may reorder or evict entries while the GIL is released. */
    kp_program *p = en->prog;
    int single = en->single, nret = en->nret;
    int *outmap = NULL;
    if (en->outmap) {
        outmap = PyMem_Malloc(sizeof(int) * (size_t)nret);
        if (!outmap)
            return PyErr_NoMemory();
        memcpy(outmap, en->outmap, sizeof(int) * (size_t)nret);
    }
    Py_INCREF(p);
    PyObject *r = kp_program_call(p, (PyObject *const *)s->arrays, s->narrays, NULL);
    int nout = p->nout;
    Py_DECREF(p);
    if (r && outmap) {
        PyObject *t = PyTuple_New(nret);
        for (int i = 0; t && i < nret; i++) {
            PyObject *o = nout == 1 ? r : PyTuple_GET_ITEM(r, outmap[i]);
            Py_INCREF(o);
            PyTuple_SET_ITEM(t, i, o);
        }
        Py_DECREF(r);
        r = t;
    } else if (r && !single && !PyTuple_Check(r)) {
        PyObject *t = PyTuple_Pack(1, r);
        Py_DECREF(r);
        r = t;
    }
    PyMem_Free(outmap);
    return r;
}

/* ---- tracing --------------------------------------------------------------------------- */
static void
ident(const char *in, char *out, size_t cap, const char *fallback)
{
    size_t k = 0;
    if (!in || !*in)
        in = fallback;
    for (; *in && k + 1 < cap; in++) {
        char c = *in;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                 (k > 0 && c >= '0' && c <= '9');
        out[k++] = ok ? c : '_';
    }
    out[k] = 0;
    if (k == 0)
        snprintf(out, cap, "%s", fallback);
}

/* Parameter names of fn, for the graph's inputs (a new reference to a tuple, or NULL). */
static PyObject *
param_names(PyObject *fn, int *offset)
{
    *offset = PyMethod_Check(fn) ? 1 : 0;
    PyObject *code = PyObject_GetAttrString(fn, "__code__");
    if (!code) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *names = PyObject_GetAttrString(code, "co_varnames");
    PyObject *argc = PyObject_GetAttrString(code, "co_argcount");
    Py_DECREF(code);
    PyObject *r = NULL;
    if (names && argc && PyTuple_Check(names)) {
        long n = PyLong_AsLong(argc);
        if (n >= 0 && n <= PyTuple_GET_SIZE(names))
            r = PyTuple_GetSlice(names, 0, n);
    }
    Py_XDECREF(names);
    Py_XDECREF(argc);
    PyErr_Clear();
    return r;
}

/* Trace fn on the arguments' signature.  Compiles a program (graph == NULL) or returns
 * the graph (*graph).  *single: one output. */
static int
trace(kp_jit *self, kiln_mode mode, PyObject *const *args, Py_ssize_t n, const sig *s,
      unsigned flags,
      kiln_program **prog, kiln_graph **graph, int *single, PyObject **statics,
      int **outmap, int *nret)
{
    int rc = -1;
    PyObject *targs = NULL, *res = NULL, *names = NULL;
    char(*used)[64] = NULL; /* the input names given so far */
    kp_trace *tr = kp_trace_new();
    if (!tr)
        return -1;
    targs = PyTuple_New(n);
    if (!targs)
        goto done;
    if (statics) {
        *statics = PyTuple_New(s->nstatic);
        if (!*statics)
            goto done;
    }
    int offset;
    names = param_names(self->fn, &offset);
    used = PyMem_Calloc((size_t)s->narrays + 1, sizeof *used);
    if (!used) {
        PyErr_NoMemory();
        goto done;
    }
    int ai = 0, si = 0, ki = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t tag = s->key[ki++];
        if (tag == TAG_STATIC) {
            Py_INCREF(args[i]);
            PyTuple_SET_ITEM(targs, i, args[i]);
            if (statics) {
                Py_INCREF(args[i]);
                PyTuple_SET_ITEM(*statics, si++, args[i]);
            }
            continue;
        }
        int nd = (int)((tag >> 16) & 0xff);
        kiln_dtype dt = (kiln_dtype)((tag >> 8) & 0xff);
        char name[64], fallback[32];
        snprintf(fallback, sizeof fallback, "arg%zd", i);
        const char *pn = NULL;
        if (names && i + offset < PyTuple_GET_SIZE(names))
            pn = PyUnicode_AsUTF8(PyTuple_GET_ITEM(names, i + offset));
        PyErr_Clear();
        ident(pn, name, sizeof name, fallback);
        /* Input names are unique in a scope: a parameter named like another's fallback
         * (def f(arg1, *rest)), or two names sanitised alike, get the argument's index. */
        for (int j = 0; j < ai; j++)
            if (strcmp(used[j], name) == 0) {
                snprintf(name, sizeof name, "%s_%zd", fallback, i);
                break;
            }
        memcpy(used[ai], name, sizeof name);
        PyObject *t = kp_trace_input(tr, name, dt, nd, &s->key[ki]);
        ki += nd;
        ai++;
        if (!t)
            goto done;
        PyTuple_SET_ITEM(targs, i, t);
    }
    kp_trace *prev = kp_trace_set_current(tr);
    res = PyObject_Call(self->fn, targs, NULL);
    kp_trace_set_current(prev);
    if (!res)
        goto done;
    kiln_tensor outs[64];
    int nout, map[64], nuniq = 0;
    if (kp_collect_outputs(res, outs, 64, &nout, single))
        goto done;
    /* A tensor returned twice is one output of the program, returned twice. */
    for (int i = 0; i < nout; i++) {
        int j = 0;
        while (j < nuniq && memcmp(&outs[j], &outs[i], sizeof outs[i]) != 0)
            j++;
        if (j == nuniq)
            outs[nuniq++] = outs[i];
        map[i] = j;
    }
    if (outmap) {
        *outmap = NULL;
        *nret = nout;
        if (nuniq < nout) {
            *outmap = PyMem_Malloc(sizeof(int) * (size_t)nout);
            if (!*outmap) {
                PyErr_NoMemory();
                goto done;
            }
            memcpy(*outmap, map, sizeof(int) * (size_t)nout);
        }
    }
    nout = nuniq;
    char gname[64];
    PyObject *qn = PyObject_GetAttrString(self->fn, "__name__");
    ident(qn && PyUnicode_Check(qn) ? PyUnicode_AsUTF8(qn) : NULL, gname, sizeof gname,
          "jitted");
    Py_XDECREF(qn);
    PyErr_Clear();
    kp_opts o = {mode, flags, gname};
    kiln_status st;
    tr->open = 0;
    Py_BEGIN_ALLOW_THREADS
    if (graph)
        st = kp_scope_end_graph(tr->scope, nout, outs, &o, graph);
    else
        st = kp_scope_end(tr->scope, nout, outs, &o, prog);
    Py_END_ALLOW_THREADS
    if (st != KILN_OK) {
        kp_raise();
        goto done;
    }
    rc = 0;
done:
    if (rc && outmap && *outmap) {
        PyMem_Free(*outmap);
        *outmap = NULL;
    }
    /* An exception in the traced function (or a bad return value) discards the scope:
     * the device is free and the next call traces afresh. */
    kp_trace_abort(tr);
    if (rc && statics)
        Py_CLEAR(*statics);
    Py_XDECREF(res);
    Py_XDECREF(targs);
    Py_XDECREF(names);
    PyMem_Free(used);
    Py_DECREF(tr);
    return rc;
}

static int
insert(kp_jit *self, const sig *s, kp_program *prog, PyObject *statics, int single,
       int *outmap, int nret)
{
    int64_t *key = PyMem_Malloc(sizeof(int64_t) * (size_t)(s->nkey ? s->nkey : 1));
    if (!key) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(key, s->key, sizeof(int64_t) * (size_t)s->nkey);
    if (self->nentries == JIT_CACHE_MAX)
        entry_clear(&self->entries[--self->nentries]);
    memmove(&self->entries[1], &self->entries[0], sizeof(jit_entry) * (size_t)self->nentries);
    jit_entry *e = &self->entries[0];
    e->key = key;
    e->nkey = s->nkey;
    e->statics = statics;
    e->prog = prog;
    e->single = single;
    e->outmap = outmap;
    e->nret = nret;
    self->nentries++;
    return 0;
}

static int
has_tensor(PyObject *const *args, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (kp_tensor_check(args[i]))
            return 1;
    return 0;
}

static PyObject *
bind_kwargs(kp_jit *self, PyObject *const *args, Py_ssize_t n, PyObject *kwnames)
{
    PyObject *mod = PyImport_ImportModule("kiln");
    PyObject *bind = mod ? PyObject_GetAttrString(mod, "_bind") : NULL;
    Py_XDECREF(mod);
    if (!bind)
        return NULL;
    PyObject *pos = PyTuple_New(n), *kw = PyDict_New();
    PyObject *r = NULL;
    if (pos && kw) {
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_INCREF(args[i]);
            PyTuple_SET_ITEM(pos, i, args[i]);
        }
        int ok = 1;
        for (Py_ssize_t k = 0; ok && k < PyTuple_GET_SIZE(kwnames); k++)
            ok = PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, k), args[n + k]) == 0;
        if (ok)
            r = PyObject_CallFunctionObjArgs(bind, self->fn, pos, kw, NULL);
    }
    Py_XDECREF(pos);
    Py_XDECREF(kw);
    Py_DECREF(bind);
    return r;
}

static PyObject *
jit_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    kp_jit *self = (kp_jit *)obj;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (kwnames && PyTuple_GET_SIZE(kwnames)) {
        PyObject *bound = bind_kwargs(self, args, n, kwnames);
        if (!bound)
            return NULL;
        PyObject *r = jit_vectorcall(obj, &PyTuple_GET_ITEM(bound, 0),
                                     (size_t)PyTuple_GET_SIZE(bound), NULL);
        Py_DECREF(bound);
        return r;
    }
    /* Called from inside another trace with its tensors: inline the function. */
    if (has_tensor(args, n))
        return PyObject_Vectorcall(self->fn, args, (size_t)n, NULL);
    self->calls++;
    sig s;
    PyObject *r = NULL;
    if (sig_build(self, args, n, &s))
        goto done;
    int e = find_entry(self, args, &s);
    if (e > 0) {
        jit_entry hit = self->entries[e];
        memmove(&self->entries[1], &self->entries[0], sizeof(jit_entry) * (size_t)e);
        self->entries[0] = hit;
        e = 0;
    }
    if (e < 0) {
        kp_program *prog = NULL;
        PyObject *statics = NULL;
        int single, nret = 0, *outmap = NULL;
        kiln_program *p = NULL;
        if (trace(self, self->mode, args, n, &s, self->flags, &p, NULL, &single, &statics,
                  &outmap, &nret))
            goto done;
        self->traces++;
        prog = (kp_program *)kp_program_wrap(p);
        if (!prog) {
            Py_DECREF(statics);
            PyMem_Free(outmap);
            goto done;
        }
        /* Another thread may have traced the same signature while the GIL was released. */
        e = find_entry(self, args, &s);
        if (e >= 0 || insert(self, &s, prog, statics, single, outmap, nret)) {
            Py_DECREF(prog);
            Py_DECREF(statics);
            PyMem_Free(outmap);
            if (e < 0)
                goto done;
        } else {
            e = 0;
        }
    }
    r = run_entry(&self->entries[e], &s);
done:
    sig_free(&s);
    return r;
}

/* f.lower(*args, mode=None, dumps=True): the program for these arguments, compiled with
 * its dumps kept (not cached here).  f.graph(*args): the traced graph. */
static PyObject *
jit_lower_common(kp_jit *self, PyObject *args, PyObject *kw, int want_graph)
{
    PyObject *mode = kw ? PyDict_GetItemString(kw, "mode") : NULL;
    PyObject *dumps = kw ? PyDict_GetItemString(kw, "dumps") : NULL;
    if (kw && PyDict_Size(kw) > (mode ? 1 : 0) + (dumps ? 1 : 0)) {
        PyErr_SetString(PyExc_TypeError, "lower()/graph(): the keywords are mode= and dumps=");
        return NULL;
    }
    kiln_mode md = self->mode;
    if (mode) {
        int m = kp_mode_arg(mode);
        if (m < 0)
            return NULL;
        md = (kiln_mode)m;
    }
    unsigned flags = self->flags;
    int keep = dumps ? PyObject_IsTrue(dumps) : 1;
    if (keep < 0)
        return NULL;
    if (keep)
        flags |= KILN_KEEP_DUMPS | KILN_NO_DISK_CACHE;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *const *a = &PyTuple_GET_ITEM(args, 0);
    sig s;
    PyObject *r = NULL;
    int single;
    if (sig_build(self, a, n, &s) == 0) {
        if (want_graph) {
            kiln_graph *g = NULL;
            if (trace(self, md, a, n, &s, 0, NULL, &g, &single, NULL, NULL, NULL) == 0)
                r = kp_graph_wrap(g, NULL);
        } else {
            kiln_program *p = NULL;
            if (trace(self, md, a, n, &s, flags, &p, NULL, &single, NULL, NULL, NULL) == 0)
                r = kp_program_wrap(p);
        }
    }
    sig_free(&s);
    return r;
}

static PyObject *
jit_lower(kp_jit *self, PyObject *args, PyObject *kw)
{
    return jit_lower_common(self, args, kw, 0);
}

static PyObject *
jit_graph(kp_jit *self, PyObject *args, PyObject *kw)
{
    return jit_lower_common(self, args, kw, 1);
}

static PyObject *
jit_clear(kp_jit *self, PyObject *unused)
{
    (void)unused;
    while (self->nentries)
        entry_clear(&self->entries[--self->nentries]);
    Py_RETURN_NONE;
}

static PyObject *
jit_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"fn", "static_argnums", "mode", "cache", "tiered", NULL};
    PyObject *fn, *statics = NULL, *mode = NULL;
    int cache = 1, tiered = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOpp:Jit", kwlist, &fn, &statics, &mode,
                                     &cache, &tiered))
        return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "kiln.jit: expected a function");
        return NULL;
    }
    int md = kp_mode_arg(mode);
    if (md < 0)
        return NULL;
    uint64_t mask = 0;
    if (statics && statics != Py_None) {
        PyObject *f = PyIndex_Check(statics) ? PyTuple_Pack(1, statics)
                                              : PySequence_Tuple(statics);
        if (!f)
            return NULL;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(f); i++) {
            Py_ssize_t v = PyNumber_AsSsize_t(PyTuple_GET_ITEM(f, i), PyExc_OverflowError);
            if (v == -1 && PyErr_Occurred()) {
                Py_DECREF(f);
                return NULL;
            }
            if (v < 0 || v >= 64) {
                Py_DECREF(f);
                PyErr_Format(PyExc_ValueError, "kiln.jit: static_argnums must be 0 to 63, not %zd",
                             v);
                return NULL;
            }
            mask |= 1ull << v;
        }
        Py_DECREF(f);
    }
    kp_jit *self = (kp_jit *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->vectorcall = jit_vectorcall;
    Py_INCREF(fn);
    self->fn = fn;
    self->mode = (kiln_mode)md;
    self->flags = (cache ? 0u : KILN_NO_CACHE) | (tiered ? KILN_TIERED : 0u);
    self->static_mask = mask;
    return (PyObject *)self;
}

static int
jit_traverse(kp_jit *self, visitproc visit, void *arg)
{
    Py_VISIT(self->fn);
    Py_VISIT(self->dict);
    for (int e = 0; e < self->nentries; e++)
        Py_VISIT(self->entries[e].statics);
    return 0;
}

static int
jit_gc_clear(kp_jit *self)
{
    Py_CLEAR(self->fn);
    Py_CLEAR(self->dict);
    while (self->nentries)
        entry_clear(&self->entries[--self->nentries]);
    return 0;
}

static void
jit_dealloc(kp_jit *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakrefs)
        PyObject_ClearWeakRefs((PyObject *)self);
    jit_gc_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
jit_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (!obj || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

static PyObject *
jit_cache_size(kp_jit *self, void *c)
{
    (void)c;
    return PyLong_FromLong(self->nentries);
}

static PyObject *
jit_trace_count(kp_jit *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(self->traces);
}

static PyObject *
jit_fn(kp_jit *self, void *c)
{
    (void)c;
    Py_INCREF(self->fn);
    return self->fn;
}

static PyObject *
jit_repr(kp_jit *self)
{
    return PyUnicode_FromFormat("<kiln.jit of %R>", self->fn);
}

#define KW (PyCFunction)(void (*)(void))
static PyMethodDef jit_methods[] = {
    {"lower", KW jit_lower, METH_VARARGS | METH_KEYWORDS,
     "lower(*args, mode=None, dumps=True)\n--\n\nTrace for these arguments and compile a "
     "kiln.Program (not cached by the function), with its dumps kept unless dumps=False "
     "(program.dump('llvm'|'opt'|'asm'|'plan'), program.graph)."},
    {"graph", KW jit_graph, METH_VARARGS | METH_KEYWORDS,
     "graph(*args)\n--\n\nTrace for these arguments; the kiln.Graph, not compiled."},
    {"clear_cache", (PyCFunction)jit_clear, METH_NOARGS,
     "clear_cache()\n--\n\nDrop the compiled programs of this function."},
    {0},
};
#undef KW

static PyGetSetDef jit_getset[] = {
    {"cache_size", (getter)jit_cache_size, NULL, "signatures compiled and cached now", NULL},
    {"trace_count", (getter)jit_trace_count, NULL,
     "times a call traced the function (lower() and graph() not counted)", NULL},
    {"fn", (getter)jit_fn, NULL, "the Python function", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {0},
};

PyTypeObject kp_jit_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kiln.Jit",
    .tp_basicsize = sizeof(kp_jit),
    .tp_dealloc = (destructor)jit_dealloc,
    .tp_vectorcall_offset = offsetof(kp_jit, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = (reprfunc)jit_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Jit(fn, static_argnums=(), mode='fused', cache=True, tiered=False)\n--\n\n"
              "A function compiled by kiln "
              "per signature (kiln.jit).",
    .tp_traverse = (traverseproc)jit_traverse,
    .tp_clear = (inquiry)jit_gc_clear,
    .tp_weaklistoffset = offsetof(kp_jit, weakrefs),
    .tp_methods = jit_methods,
    .tp_getset = jit_getset,
    .tp_descr_get = jit_descr_get,
    .tp_dictoffset = offsetof(kp_jit, dict),
    .tp_new = jit_new,
};
