/* scope.c — capture scopes: begin registers the scope's client with the router, end
 * checks the boundaries and unregisters it on every path.
 *
 * Scopes and tensors are value handles checked against a per-process key: a handle from
 * a finished scope is recognised by its serial (never reused) and refused with
 * KILN_ERR_SCOPE_CLOSED; a garbage handle fails its check word (KILN_ERR_MISUSE).
 * Nothing is ever dereferenced through a handle. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "capture.h"

static _Atomic uint64_t next_serial = 1;
static const uint64_t key = 0x6b696c6e2d736370ull; /* "kiln-scp" */

static uint64_t
mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static uint64_t
scope_check(uint64_t serial)
{
    return mix(serial ^ key);
}

uint32_t
cap_tensor_check(uint64_t scope, uint32_t node)
{
    return (uint32_t)mix(scope_check(scope) + node);
}

kiln_tensor
cap_tensor_make(const cap_scope *s, int32_t node)
{
    kiln_tensor t = {s->serial, (uint32_t)node, cap_tensor_check(s->serial, (uint32_t)node)};
    return t;
}

void
cap_scope_fail_locked(cap_scope *s)
{
    if (s->err)
        return;
    s->err = kiln_errcode() ? kiln_errcode() : KILN_ERR_INTERNAL;
    s->errmsg = ir_strdup(kiln_errmsg()); /* NULL on OOM: the code alone is kept */
}

static void
operand_name(char *buf, size_t n, int argi)
{
    if (argi > 0)
        snprintf(buf, n, "operand %d", argi);
    else
        snprintf(buf, n, "tensor");
}

kiln_status
cap_tensor_resolve_locked(const char *api, kiln_tensor t, int argi, cap_scope **scope)
{
    /* the operand's name only for a message: this runs for every operand of every op */
    char what[32];
#define WHAT() (operand_name(what, sizeof what, argi), what)
    *scope = NULL;
    if (t.scope == 0) {
        /* Sticky failure: the op that produced this null tensor already set the error. */
        if (kiln_errcode() != KILN_OK)
            return kiln_errcode();
        return ir_error(KILN_ERR_MISUSE, "%s: invalid handle: %s is the null tensor", api, WHAT());
    }
    if (t.check != cap_tensor_check(t.scope, t.node))
        return ir_error(KILN_ERR_MISUSE, "%s: invalid handle: %s is not a kiln tensor", api,
                        WHAT());
    cap_scope *s = cap_scope_find_locked(t.scope);
    if (!s)
        return ir_error(KILN_ERR_SCOPE_CLOSED,
                        "%s: capture scope is already complete: %s was recorded in scope %llu, "
                        "which has ended",
                        api, WHAT(), (unsigned long long)t.scope);
    if ((int64_t)t.node >= s->graph->nnodes)
        return ir_error(KILN_ERR_MISUSE, "%s: invalid handle: %s is not a kiln tensor", api,
                        WHAT());
    *scope = s;
    return KILN_OK;
#undef WHAT
}

/* The live scope named by handle h, or an error naming `api`. */
static kiln_status
scope_resolve_locked(const char *api, kiln_scope h, cap_scope **scope)
{
    *scope = NULL;
    if (h.serial == 0)
        return ir_error(KILN_ERR_MISUSE, "%s: invalid handle: the null scope", api);
    if (h.check != scope_check(h.serial))
        return ir_error(KILN_ERR_MISUSE, "%s: invalid handle: not a kiln scope", api);
    cap_scope *s = cap_scope_find_locked(h.serial);
    if (!s)
        return ir_error(KILN_ERR_SCOPE_CLOSED,
                        "%s: capture scope is already complete: scope %llu has ended", api,
                        (unsigned long long)h.serial);
    *scope = s;
    return KILN_OK;
}

static void
scope_free(cap_scope *s)
{
    if (!s)
        return;
    kiln_graph_free(s->graph);
    ir_free(s->errmsg);
    ir_free(s);
}

/* The nodes of the last graph a scope completed: a new scope reserves room for as many
 * (up to RESERVE_MAX), since a client captures the same step again and again; growing the
 * node array by doubling copied a decoder step's 147 nodes of 592 bytes about twice over
 * (142 KB of memcpy a step). */
static _Atomic int32_t recent_nodes;
#define RESERVE_MAX 4096

kiln_scope
kiln_scope_begin(kiln_device *d)
{
    const char *api = "kiln_scope_begin";
    kiln_scope h = {0, 0};
    cap_scope *s = ir_calloc(1, sizeof *s);
    kiln_graph *g = ir_graph_new("captured");
    int32_t hint = atomic_load(&recent_nodes);
    if (g && hint > 0 && !ir_graph_reserve(g, hint)) {
        kiln_graph_free(g);
        g = NULL;
    }
    if (!s || !g) {
        ir_free(s);
        kiln_graph_free(g);
        ir_error(KILN_ERR_NOMEM, "%s: out of memory", api);
        return h;
    }
    s->graph = g;
    cap_lock();
    kiln_status st = cap_device_check(d, api);
    if (!st) {
        s->device = d->id;
        s->serial = atomic_fetch_add(&next_serial, 1);
        st = cap_router_register_locked(&cap_capture_channel, d->id, s, api);
    }
    cap_unlock();
    if (st) {
        scope_free(s);
        return h;
    }
    h.serial = s->serial;
    h.check = scope_check(s->serial);
    return h;
}

/* Add `t` as an output of s named `name` (NULL: unnamed until name_defaults). */
static kiln_status
add_output_locked(const char *api, cap_scope *s, const char *name, kiln_tensor t, int i)
{
    if (t.scope == 0) {
        if (s->err)
            return KILN_ERR_BOUNDARY; /* the caller reports the scope's first error */
        return ir_error(KILN_ERR_BOUNDARY,
                        "%s: bad output: output %d is the null tensor (no error was recorded "
                        "in this scope; was it created by a failed call in another scope?)",
                        api, i);
    }
    if (t.check != cap_tensor_check(t.scope, t.node))
        return ir_error(KILN_ERR_MISUSE, "%s: invalid handle: output %d is not a kiln tensor",
                        api, i);
    if (t.scope != s->serial)
        return ir_error(cap_scope_find_locked(t.scope) ? KILN_ERR_FOREIGN_TENSOR
                                                       : KILN_ERR_BOUNDARY,
                        "%s: bad output: output %d was not produced in this scope (scope %llu; "
                        "it belongs to scope %llu%s)",
                        api, i, (unsigned long long)s->serial, (unsigned long long)t.scope,
                        cap_scope_find_locked(t.scope) ? "" : ", which has ended");
    kiln_graph *g = s->graph;
    for (int32_t k = 0; k < g->noutputs; k++) {
        if (g->outputs[k].node != (int32_t)t.node)
            continue;
        if (!g->outputs[k].name)
            return ir_error(KILN_ERR_BOUNDARY,
                            "%s: duplicate output: output %d is the same tensor as output %d",
                            api, i, (int)k);
        return ir_error(KILN_ERR_BOUNDARY,
                        "%s: duplicate output: output %d is the same tensor as output '%s'", api,
                        i, g->outputs[k].name);
    }
    if (name && !*name)
        return ir_error(KILN_ERR_BOUNDARY, "%s: bad output: output %d has an empty name", api,
                        i);
    kiln_status st = ir_graph_add_output(g, name, (int32_t)t.node);
    if (st == KILN_ERR_BOUNDARY) /* re-word ir's message for this API */
        return ir_error(KILN_ERR_BOUNDARY, "%s: duplicate output: name '%s' is used twice", api,
                        name);
    return st;
}

static bool
output_named(const kiln_graph *g, const char *name)
{
    for (int32_t k = 0; k < g->noutputs; k++)
        if (g->outputs[k].name && strcmp(g->outputs[k].name, name) == 0)
            return true;
    return false;
}

/* "out<k>" (k >= 0) into buf (at least 24 bytes): written by hand, as snprintf was a
 * twentieth of a decoder step's scope end. */
static void
out_name(char *buf, int64_t k)
{
    char d[20];
    int n = 0;
    do
        d[n++] = (char)('0' + k % 10);
    while ((k /= 10) > 0);
    memcpy(buf, "out", 3);
    for (int i = 0; i < n; i++)
        buf[3 + i] = d[n - 1 - i];
    buf[3 + n] = '\0';
}

/* Name the outputs marked without a name: "out<i>" for the output at position i, or,
 * when the caller chose that name for another output or an earlier default took it, the
 * next free "out<k>" (k > i).  Run once every output is known, so that a default never
 * takes a name the caller chose, whichever was marked first. */
static kiln_status
name_defaults(kiln_graph *g)
{
    for (int32_t i = 0; i < g->noutputs; i++) {
        if (g->outputs[i].name)
            continue;
        char buf[32];
        /* at most noutputs - 1 names are taken, so this ends by k = i + noutputs */
        for (int64_t k = i;; k++) {
            out_name(buf, k);
            if (!output_named(g, buf))
                break;
        }
        if (!(g->outputs[i].name = ir_arena_strdup(&g->arena, buf)))
            return kiln_errcode();
    }
    return KILN_OK;
}

kiln_status
kiln_scope_output(kiln_scope h, const char *name, kiln_tensor t)
{
    const char *api = "kiln_scope_output";
    cap_scope *s;
    cap_lock();
    kiln_status st = scope_resolve_locked(api, h, &s);
    if (!st && (st = add_output_locked(api, s, name, t, s->graph->noutputs)) != KILN_OK) {
        if (t.scope == 0 && s->err) /* sticky: the null tensor comes from the first error */
            st = ir_error(s->err, "%s", s->errmsg ? s->errmsg : kiln_status_str(s->err));
        cap_scope_fail_locked(s);
    }
    cap_unlock();
    return st;
}

/* Renumber the graph so its inputs come first (in their order), as a parsed graph's do:
 * kiln_input may be called after other ops, and structural hashes and the text format's
 * %N labels are over node ids, so a captured graph must equal the same graph printed and
 * parsed back. */
static kiln_status
inputs_first(cap_scope *s)
{
    kiln_graph *g = s->graph;
    bool sorted = true;
    for (int32_t i = 0; i < g->ninputs; i++)
        sorted = sorted && g->inputs[i] == i;
    if (sorted)
        return KILN_OK;
    return ir_graph_inputs_first(g) ? KILN_OK : kiln_errcode();
}

/* Put the graph's inputs in the order the options give. */
static kiln_status
order_inputs(const char *api, cap_scope *s, const kiln_options *o)
{
    kiln_graph *g = s->graph;
    if (o->ninputs == 0)
        return KILN_OK;
    if (o->ninputs != g->ninputs || !o->inputs)
        return ir_error(KILN_ERR_BOUNDARY,
                        "%s: bad input order: %d entries for the scope's %d inputs", api,
                        o->ninputs, (int)g->ninputs);
    int32_t *order = ir_malloc(sizeof(int32_t) * (size_t)g->ninputs);
    if (!order)
        return ir_error(KILN_ERR_NOMEM, "%s: out of memory", api);
    kiln_status st = KILN_OK;
    for (int i = 0; i < o->ninputs && !st; i++) {
        kiln_tensor t = o->inputs[i];
        if (t.scope != s->serial || t.check != cap_tensor_check(t.scope, t.node) ||
            (int64_t)t.node >= g->nnodes) {
            st = ir_error(KILN_ERR_BOUNDARY,
                          "%s: bad input order: entry %d is not a tensor of this scope", api, i);
            break;
        }
        const ir_node *nd = &g->nodes[t.node];
        if (nd->op != IR_OP_INPUT) {
            st = ir_error(KILN_ERR_BOUNDARY,
                          "%s: bad input: entry %d is computed inside the scope (by %s), not "
                          "declared with kiln_input",
                          api, i, ir_ops[nd->op].name);
            break;
        }
        for (int k = 0; k < i; k++)
            if (order[k] == (int32_t)t.node) {
                st = ir_error(KILN_ERR_BOUNDARY,
                              "%s: bad input order: input '%s' is listed twice", api, nd->name);
                break;
            }
        order[i] = (int32_t)t.node;
    }
    if (!st) {
        for (int i = 0; i < o->ninputs; i++) {
            g->inputs[i] = order[i];
            g->nodes[order[i]].index = i;
        }
    }
    ir_free(order);
    return st;
}

kiln_status
cap_scope_finish(const char *api, kiln_scope h, int noutputs, const kiln_tensor *outputs,
                 const kiln_options *options, kiln_graph **graph)
{
    cap_scope *s;
    *graph = NULL;
    kiln_options opt;
    const kiln_options *o = &opt;
    cap_lock();
    kiln_status st = scope_resolve_locked(api, h, &s);
    if (st) {
        cap_unlock();
        return st;
    }
    /* From here the scope is ours alone: unregistered, so no other thread can reach it,
     * and the device is free again whatever happens next. */
    cap_router_unregister_locked(&cap_capture_channel, s->device);
    st = ir_options_read(api, options, &opt);
    if (!st && (noutputs < 0 || (noutputs > 0 && !outputs)))
        st = ir_error(KILN_ERR_INVALID_ARG, "%s: invalid argument: %d outputs at %p", api,
                      noutputs, (const void *)outputs);
    for (int i = 0; i < noutputs && !st && !s->err; i++) {
        const char *name = o->output_names ? o->output_names[i] : NULL;
        st = add_output_locked(api, s, name, outputs[i], (int)s->graph->noutputs);
    }
    cap_unlock();

    if (s->err) /* sticky: the first failure inside the scope is the one to report */
        st = ir_error(s->err, "%s", s->errmsg ? s->errmsg : kiln_status_str(s->err));
    if (!st && s->graph->noutputs == 0)
        st = ir_error(KILN_ERR_BOUNDARY,
                      "%s: no outputs: mark outputs with kiln_scope_output or pass them to "
                      "kiln_scope_end",
                      api);
    if (!st)
        st = name_defaults(s->graph);
    if (!st)
        st = order_inputs(api, s, o);
    if (!st)
        st = inputs_first(s);
    if (!st && o->graph_name) {
        const char *nm = ir_arena_strdup(&s->graph->arena, o->graph_name);
        if (nm)
            s->graph->name = nm;
        else
            st = KILN_ERR_NOMEM;
    }
    /* Each op was checked as it was recorded (ir_graph_add_node's type rules), so the
     * whole graph is verified again under the tests only (KILN_TEST_VERIFY, set for every
     * Check suite): it was a twelfth of a decoder step's capture and scope end at new sizes.
     * Verifying allocates: running out of memory there is not a capture bug. */
    if (!st && ir_config_get()->test_verify && (st = ir_graph_verify(s->graph)) != KILN_OK &&
        st != KILN_ERR_NOMEM)
        st = ir_error(KILN_ERR_INTERNAL, "%s: internal error: captured graph does not verify: %s",
                      api, kiln_errmsg());
    if (!st) {
        *graph = s->graph;
        s->graph = NULL;
        int32_t n = (*graph)->nnodes;
        atomic_store(&recent_nodes, n < RESERVE_MAX ? n : RESERVE_MAX);
    }
    scope_free(s);
    return st;
}

kiln_status
kiln_scope_end_graph(kiln_scope h, int noutputs, const kiln_tensor *outputs,
                     const kiln_options *options, kiln_graph **graph)
{
    if (!graph) {
        /* Still end the scope so the device is released (as kiln_scope_end does). */
        kiln_scope_abort(h);
        return ir_error(KILN_ERR_INVALID_ARG,
                        "kiln_scope_end_graph: invalid argument: graph is NULL");
    }
    return cap_scope_finish("kiln_scope_end_graph", h, noutputs, outputs, options, graph);
}

kiln_status
kiln_scope_abort(kiln_scope h)
{
    cap_scope *s;
    cap_lock();
    kiln_status st = scope_resolve_locked("kiln_scope_abort", h, &s);
    if (!st)
        cap_router_unregister_locked(&cap_capture_channel, s->device);
    cap_unlock();
    if (!st)
        scope_free(s);
    return st;
}
