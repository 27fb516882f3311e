/* abi.c — the only file of the extension that touches kiln's public structs that may grow
 * (kiln_options, kiln_stats, kiln_cache_info; docs/abi.md).  Each starts from its
 * KILN_*_INIT (the size of the struct this file was compiled with, the rest zero) and is
 * filled field by field here.  The rest of the extension passes kp_opts and Python dicts
 * around. */
#include "pykiln.h"

#include <string.h>

static void
make_options(const kp_opts *o, kiln_options *k)
{
    *k = (kiln_options)KILN_OPTIONS_INIT;
    k->mode = o->mode;
    k->flags = o->flags;
    k->graph_name = o->name;
}

kiln_status
kp_scope_end(kiln_scope s, int n, const kiln_tensor *outs, const kp_opts *o, kiln_program **p)
{
    kiln_options k;
    make_options(o, &k);
    return kiln_scope_end(s, n, outs, &k, p);
}

kiln_status
kp_scope_end_graph(kiln_scope s, int n, const kiln_tensor *outs, const kp_opts *o,
                   kiln_graph **g)
{
    kiln_options k;
    make_options(o, &k);
    return kiln_scope_end_graph(s, n, outs, &k, g);
}

kiln_status
kp_program_compile(const kiln_graph *g, const kp_opts *o, kiln_program **p)
{
    kiln_options k;
    make_options(o, &k);
    return kiln_program_compile(g, &k, p);
}

static int
put(PyObject *d, const char *key, PyObject *v)
{
    if (!v)
        return -1;
    int r = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return r;
}

#define PUT_U(d, s, f) put(d, #f, PyLong_FromUnsignedLongLong((unsigned long long)(s).f))
#define PUT_D(d, s, f) put(d, #f, PyFloat_FromDouble((s).f))
#define PUT_I(d, s, f) put(d, #f, PyLong_FromLong((long)(s).f))

/* kiln.stats(): kiln_jit_stats as a dict of its counters. */
PyObject *
kp_stats(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    kiln_stats s = KILN_STATS_INIT;
    kiln_jit_stats(&s);
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    if (PUT_U(d, s, kernel_compiles) || PUT_U(d, s, kernel_hits) || PUT_U(d, s, plan_hits) ||
        PUT_U(d, s, plan_misses) || PUT_D(d, s, compile_ms) || PUT_D(d, s, startup_ms) ||
        PUT_I(d, s, threads) || PUT_U(d, s, weights_packed) || PUT_U(d, s, kernel_entries) ||
        PUT_U(d, s, kernel_bytes) || PUT_U(d, s, kernel_evictions) ||
        PUT_U(d, s, kernel_waits) || PUT_U(d, s, disk_hits) || PUT_U(d, s, disk_misses) ||
        PUT_U(d, s, disk_rejected) || PUT_U(d, s, disk_writes) ||
        PUT_U(d, s, disk_write_errors) || PUT_D(d, s, disk_load_ms) || PUT_D(d, s, lljit_ms) ||
        PUT_D(d, s, optimise_ms) || PUT_D(d, s, codegen_ms) || PUT_D(d, s, link_ms) ||
        PUT_U(d, s, workspace_allocs) || PUT_U(d, s, workspace_bytes) ||
        PUT_U(d, s, held_packs) || PUT_U(d, s, kernel_tierups) ||
        PUT_U(d, s, plans_resized)) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* kiln.cache_info(): kiln_cache_info_get as a dict. */
PyObject *
kp_cache_info(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    kiln_cache_info c = KILN_CACHE_INFO_INIT;
    if (kiln_cache_info_get(&c) != KILN_OK)
        return kp_raise();
    c.path[sizeof c.path - 1] = 0;
    c.reason[sizeof c.reason - 1] = 0;
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    if (put(d, "path", PyUnicode_DecodeFSDefault(c.path)) ||
        put(d, "enabled", PyBool_FromLong(c.enabled)) ||
        put(d, "reason", PyUnicode_DecodeUTF8(c.reason, (Py_ssize_t)strlen(c.reason), "replace")) ||
        PUT_U(d, c, entries) || PUT_U(d, c, bytes) || PUT_U(d, c, max_bytes) ||
        PUT_U(d, c, hits) || PUT_U(d, c, misses) || PUT_U(d, c, rejected) ||
        PUT_U(d, c, writes) || PUT_U(d, c, temp_files) || PUT_U(d, c, temp_bytes)) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}
