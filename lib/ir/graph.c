/* graph.c — building graphs (for the parser and for capture) and the public graph API. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* Every graph ever handed out, whether the caller or the library owns it: a graph made
 * inside the library may reach the caller (kiln_scope_end_graph, kiln_program_graph). */
static ir_handle_set live_graphs = IR_HANDLE_SET_INIT;

kiln_graph *
ir_graph_new(const char *name)
{
    kiln_graph *g = ir_calloc(1, sizeof *g);
    if (!g || !ir_handle_add(&live_graphs, g)) {
        ir_free(g);
        ir_error(KILN_ERR_NOMEM, "kiln: out of memory creating a graph");
        return NULL;
    }
    g->name = ir_arena_strdup(&g->arena, name ? name : "main");
    if (!g->name) {
        kiln_graph_free(g);
        return NULL;
    }
    return g;
}

bool
ir_graph_is_valid(const kiln_graph *g)
{
    return g && ir_handle_is_live(&live_graphs, g);
}

kiln_status
kiln_graph_free(kiln_graph *g)
{
    if (!g)
        return KILN_OK;
    if (!ir_handle_is_live(&live_graphs, g))
        return ir_error(KILN_ERR_MISUSE,
                        "kiln_graph_free: invalid handle: not a live kiln_graph (freed or "
                        "foreign)");
    /* a shared graph: the last owner frees it (the others only drop their share) */
    if (atomic_fetch_sub(&g->shares, 1) > 0)
        return KILN_OK;
    if (!ir_handle_remove(&live_graphs, g))
        return ir_error(KILN_ERR_MISUSE,
                        "kiln_graph_free: invalid handle: not a live kiln_graph (freed or "
                        "foreign)");
    kiln_graph *base = g->base;
    ir_arena_free(&g->arena);
    ir_free(g->names);
    ir_free(g->nodes);
    ir_free(g->inputs);
    ir_free(g->outputs);
    ir_handle_retire(&live_graphs, g);
    return base ? kiln_graph_free(base) : KILN_OK;
}

/* Grow *arr (of element size `size`) so it holds at least `need` elements. */
static bool
grow(void **arr, int32_t *cap, int32_t need, size_t size)
{
    if (need <= *cap)
        return true;
    if (need > INT32_MAX / 2) {
        ir_error(KILN_ERR_OVERFLOW, "kiln: graph too large: %d entries", (int)need);
        return false;
    }
    int32_t n = *cap ? *cap : 16;
    while (n < need)
        n *= 2;
    void *p = ir_realloc(*arr, (size_t)n * size);
    if (!p) {
        ir_error(KILN_ERR_NOMEM, "kiln: out of memory growing a graph");
        return false;
    }
    *arr = p;
    *cap = n;
    return true;
}

bool
ir_graph_reserve(kiln_graph *g, int32_t nodes)
{
    /* exactly: a copy of a graph of n nodes needs no more, and a block rounded up to a
     * power of two may cross malloc's mmap threshold (128 KiB: 1092 nodes of 120 bytes)
     * where n alone does not, to be mapped and faulted in again by every copy */
    if (nodes <= g->capnodes)
        return true;
    if (nodes > IR_MAX_NODES) {
        ir_error(KILN_ERR_OVERFLOW, "kiln: graph too large: %d nodes", (int)nodes);
        return false;
    }
    ir_node *p = ir_realloc(g->nodes, (size_t)nodes * sizeof(ir_node));
    if (!p) {
        ir_error(KILN_ERR_NOMEM, "kiln: out of memory growing a graph");
        return false;
    }
    g->nodes = p;
    g->capnodes = nodes;
    return true;
}

/* ---- the index of names (ir_graph_find) ---------------------------------------------------- */

static uint32_t
name_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static void
names_put(int32_t *slots, int32_t cap, const kiln_graph *g, int32_t id)
{
    const char *nm = g->nodes[id].name;
    uint32_t m = (uint32_t)cap - 1, i = name_hash(nm, strlen(nm)) & m;
    while (slots[i])
        i = (i + 1) & m;
    slots[i] = id + 1;
}

/* The node named name[0..n) (-1: none) and the slot where the lookup ended: that node's,
 * or the empty slot where the name would go. */
static int32_t
names_lookup(const kiln_graph *g, const char *name, size_t n, uint32_t *slot)
{
    uint32_t m = (uint32_t)g->capnames - 1, i = name_hash(name, n) & m;
    for (; g->names[i]; i = (i + 1) & m) {
        const char *nm = g->nodes[g->names[i] - 1].name;
        if (strncmp(nm, name, n) == 0 && nm[n] == '\0') {
            *slot = i;
            return g->names[i] - 1;
        }
    }
    *slot = i;
    return -1;
}

/* Room in the index for one more name (rebuilt twice as large when half full); false with
 * the error set on failure, the index unchanged. */
static bool
names_reserve(kiln_graph *g)
{
    if ((g->nnames + 1) * 2 <= g->capnames)
        return true;
    int32_t cap = g->capnames ? g->capnames * 2 : 64;
    int32_t *slots = cap <= (1 << 26) ? ir_calloc((size_t)cap, sizeof *slots) : NULL;
    if (!slots) {
        ir_error(KILN_ERR_NOMEM, "kiln: out of memory growing a graph");
        return false;
    }
    for (int32_t i = 0; i < g->capnames; i++)
        if (g->names[i])
            names_put(slots, cap, g, g->names[i] - 1);
    ir_free(g->names);
    g->names = slots;
    g->capnames = cap;
    return true;
}

/* The index's slots `from` with node x renumbered map[x], into `to` (the same array or
 * another of cap slots): a name keeps its slot whatever its node's id. */
static void
names_renumber(int32_t *to, const int32_t *from, int32_t cap, const int32_t *map)
{
    for (int32_t i = 0; i < cap; i++)
        to[i] = from[i] ? map[from[i] - 1] + 1 : 0;
}

/* Index node id's name (names_reserve made room). */
static void
names_add(kiln_graph *g, int32_t id)
{
    names_put(g->names, g->capnames, g, id);
    g->nnames++;
}

/* The node slot for a new node, its bytes as they are, or NULL (error set). */
static ir_node *
node_slot(kiln_graph *g, const char *api)
{
    if (g->nnodes >= IR_MAX_NODES) {
        ir_error(KILN_ERR_OVERFLOW, "%s: graph too large: more than %d nodes", api, IR_MAX_NODES);
        return NULL;
    }
    if (!grow((void **)&g->nodes, &g->capnodes, g->nnodes + 1, sizeof(ir_node)))
        return NULL;
    return &g->nodes[g->nnodes];
}

const ir_attrs ir_no_attrs;

/* Node attributes *at of op, stored for a node of g: the shared zeros when the op has no
 * attributes, else a copy in g's arena (NULL: out of memory, error set). */
static const ir_attrs *
store_attrs(kiln_graph *g, ir_op op, const ir_attrs *at)
{
    if (!ir_ops[op].attrs)
        return &ir_no_attrs;
    ir_attrs *a = ir_arena_alloc(&g->arena, sizeof *a, _Alignof(ir_attrs));
    if (a) /* (memcpy: padding bytes too, which describe.c's memcmp reads) */
        memcpy(a, at, sizeof *a);
    return a;
}

/* The node slot for a new node, zeroed but for its attributes (&ir_no_attrs), or NULL
 * (error set). */
static ir_node *
new_node(kiln_graph *g, const char *api)
{
    ir_node *nd = node_slot(g, api);
    if (nd)
        *nd = (ir_node){.at = &ir_no_attrs};
    return nd;
}

int32_t
ir_graph_add_input(kiln_graph *g, const char *name, const ir_type *type)
{
    const char *api = "kiln_input";
    if (!name || !*name)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: missing name: an input needs a name", api), -1;
    if (!type)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: missing type: input '%s' needs a type", api,
                        name), -1;
    if (!ir_dtype_is_valid((int)type->dtype))
        return ir_error(KILN_ERR_DTYPE, "%s: bad dtype: %d", api, (int)type->dtype), -1;
    if (ir_shape_check(api, type->dtype, &type->shape))
        return -1;
    if (!grow((void **)&g->inputs, &g->capinputs, g->ninputs + 1, sizeof(int32_t)) ||
        !names_reserve(g))
        return -1;
    /* Inputs share one namespace with the named nodes (the verifier's rule); the lookup
     * leaves the slot the name goes to (one hash of the name, not two). */
    size_t len = strlen(name);
    uint32_t slot;
    if (names_lookup(g, name, len, &slot) >= 0)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: duplicate input: '%s' is declared twice",
                        api, name), -1;
    ir_node *nd = new_node(g, api);
    if (!nd)
        return -1;
    const char *nm = ir_arena_strndup(&g->arena, name, len);
    if (!nm)
        return -1;
    nd->op = IR_OP_INPUT;
    nd->type = *type;
    nd->name = nm;
    nd->index = g->ninputs;
    g->inputs[g->ninputs++] = g->nnodes;
    g->names[slot] = g->nnodes + 1;
    g->nnames++;
    return g->nnodes++;
}

/* Keep only the attributes the op has, so hashing and equality see no stale fields. */
static void
clean_attrs(ir_op op, const ir_attrs *src, ir_attrs *dst)
{
    unsigned m = ir_ops[op].attrs;
    memset(dst, 0, sizeof *dst);
    if (!src)
        return;
    if (m & IR_A_VALUE) dst->value = src->value;
    /* START is the scalar `start` of arange and the list `begin` of slice. */
    if ((m & IR_A_START) && op == IR_OP_ARANGE) dst->start = src->start;
    if ((m & IR_A_START) && op == IR_OP_SLICE)
        memcpy(dst->begin, src->begin, sizeof dst->begin);
    if (m & IR_A_STOP) memcpy(dst->stop, src->stop, sizeof dst->stop);
    if (m & IR_A_STEP) memcpy(dst->step, src->step, sizeof dst->step);
    if (m & IR_A_DELTA) dst->delta = src->delta;
    if (m & IR_A_LOW) memcpy(dst->low, src->low, sizeof dst->low);
    if (m & IR_A_HIGH) memcpy(dst->high, src->high, sizeof dst->high);
    if (m & IR_A_TO) dst->to = src->to;
    if (m & IR_A_SHAPE) dst->shape = src->shape;
    if (m & IR_A_PERM) memcpy(dst->perm, src->perm, sizeof dst->perm);
    if (m & IR_A_AXIS) dst->axis = src->axis;
    if (m & IR_A_AXES) dst->axes = src->axes;
    if (m & IR_A_KEEPDIM) dst->keepdim = src->keepdim;
    if (m & IR_A_DATA) dst->data = src->data;
}

/* A scalar attribute in dtype t: only its first kiln_dtype_size(t) bytes mean anything and
 * a bool is 0 or 1 (the cast rule x != 0). */
static void
normalize_scalar(kiln_dtype t, ir_scalar *s)
{
    size_t n = kiln_dtype_size(t);
    memset(s->bytes + n, 0, sizeof s->bytes - n);
    if (t == KILN_DTYPE_BOOL)
        s->bytes[0] = s->bytes[0] != 0;
}

/* After the type rule accepted the node: zero what the op's rank leaves unused, so that
 * hashing and equality see exactly what the printer writes. */
static void
normalize_attrs(const kiln_graph *g, ir_op op, const int32_t *in, const ir_type *t,
                ir_attrs *at)
{
    int rank = ir_ops[op].kind == IR_KIND_SOURCE ? 0 : g->nodes[in[0]].type.shape.rank;
    unsigned m = ir_ops[op].attrs;
    /* (only the op's own lists: they share storage, ir.h) */
    for (int i = rank; i < IR_MAX_RANK; i++) {
        if (m & IR_A_STOP)
            at->begin[i] = at->stop[i] = at->step[i] = 0;
        if (m & IR_A_LOW)
            at->low[i] = at->high[i] = 0;
        if (m & IR_A_PERM)
            at->perm[i] = 0;
    }
    if (m & IR_A_SHAPE)
        for (int i = at->shape.rank; i < IR_MAX_RANK; i++)
            at->shape.dims[i] = 0;
    if (m & IR_A_VALUE)
        normalize_scalar(t->dtype, &at->value);
    if (op == IR_OP_ARANGE) {
        normalize_scalar(t->dtype, &at->start);
        normalize_scalar(t->dtype, &at->delta);
    }
}

int32_t
ir_graph_add_node(kiln_graph *g, const char *api, ir_op op, int nin, const int32_t *in,
                  const ir_attrs *attrs, const ir_type *given, const char *name)
{
    if ((int)op < 0 || op >= IR_OP_COUNT || op == IR_OP_INPUT)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: bad op: %d", api, (int)op), -1;
    if (nin < 0 || nin > (1 << 16))
        return ir_error(KILN_ERR_INVALID_ARG, "%s: bad operand count: %d", api, nin), -1;
    if (name && !*name)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: bad name: a value name is empty", api), -1;
    ir_attrs at;
    bool has = ir_ops[op].attrs != 0; /* (most ops: nothing to clean or store) */
    if (has)
        clean_attrs(op, attrs, &at);
    ir_type t;
    if (ir_infer(g, api, op, nin, in, has ? &at : &ir_no_attrs, given, &t))
        return -1;
    if (has)
        normalize_attrs(g, op, in, &t, &at);
    ir_node *nd = new_node(g, api);
    if (!nd)
        return -1;
    int32_t *ins = NULL;
    if (nin > 0) {
        ins = ir_arena_alloc(&g->arena, sizeof(int32_t) * (size_t)nin, sizeof(int32_t));
        if (!ins)
            return -1;
        memcpy(ins, in, sizeof(int32_t) * (size_t)nin);
    }
    if (name && (!names_reserve(g) || !(name = ir_arena_strdup(&g->arena, name))))
        return -1;
    if (op == IR_OP_CONSTANT) {
        size_t bytes = ir_type_bytes(&t);
        void *data = ir_arena_alloc(&g->arena, bytes, 64);
        if (!data)
            return -1;
        if (bytes)
            memcpy(data, at.data, bytes);
        if (t.dtype == KILN_DTYPE_BOOL)
            for (size_t i = 0; i < bytes; i++)
                ((unsigned char *)data)[i] = ((unsigned char *)data)[i] != 0;
        at.data = data;
    }
    const ir_attrs *stored = store_attrs(g, op, &at);
    if (!stored)
        return -1;
    nd->op = op;
    nd->type = t;
    nd->nin = nin;
    nd->in = ins;
    nd->name = name;
    nd->at = stored;
    if (name)
        names_add(g, g->nnodes);
    return g->nnodes++;
}

int32_t
ir_graph_copy_node(kiln_graph *g, const kiln_graph *from, int32_t n, const int32_t *in)
{
    const ir_node *src = &from->nodes[n];
    for (int k = 0; k < src->nin; k++)
        if (!ir_type_equal(&g->nodes[in[k]].type, &from->nodes[src->in[k]].type))
            return ir_graph_add_node(g, "kiln", src->op, src->nin, in, src->at, &src->type,
                                     src->name);
    if ((src->op == IR_OP_INPUT &&
         !grow((void **)&g->inputs, &g->capinputs, g->ninputs + 1, sizeof(int32_t))) ||
        (src->name && !names_reserve(g)))
        return -1;
    ir_node *nd = node_slot(g, "kiln"); /* (every byte copied from src) */
    if (!nd)
        return -1;
    *nd = *src;
    if (src->nin > 0) {
        int32_t *ins =
            ir_arena_alloc(&g->arena, sizeof(int32_t) * (size_t)src->nin, sizeof(int32_t));
        if (!ins)
            return -1;
        memcpy(ins, in, sizeof(int32_t) * (size_t)src->nin);
        nd->in = ins;
    }
    if (src->name && !(nd->name = ir_arena_strdup(&g->arena, src->name)))
        return -1;
    if (src->op == IR_OP_CONSTANT) { /* its data too, in g's arena */
        size_t bytes = ir_type_bytes(&src->type);
        void *data = ir_arena_alloc(&g->arena, bytes, 64);
        if (!data)
            return -1;
        if (bytes)
            memcpy(data, src->at->data, bytes);
        ir_attrs at;
        memcpy(&at, src->at, sizeof at);
        at.data = data;
        nd->at = store_attrs(g, src->op, &at);
    } else {
        nd->at = store_attrs(g, src->op, src->at);
    }
    if (!nd->at)
        return -1;
    if (src->op == IR_OP_INPUT) { /* the next input of g (nothing above failed) */
        nd->index = g->ninputs;
        g->inputs[g->ninputs++] = g->nnodes;
    }
    if (nd->name)
        names_add(g, g->nnodes);
    return g->nnodes++;
}

bool
ir_graph_inputs_first(kiln_graph *g)
{
    IR_ASSERT(!g->base); /* (its operand lists are rewritten where they are: its own) */
    size_t n = (size_t)g->nnodes;
    ir_node *nodes = ir_malloc(sizeof(ir_node) * (n + 1));
    int32_t *map = ir_malloc(sizeof(int32_t) * (n + 1));
    if (!nodes || !map) {
        ir_free(nodes);
        ir_free(map);
        ir_error(KILN_ERR_NOMEM, "kiln: out of memory renumbering a graph");
        return false;
    }
    int32_t k = 0;
    for (int32_t i = 0; i < g->ninputs; i++)
        map[g->inputs[i]] = k++;
    for (int32_t i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op != IR_OP_INPUT)
            map[i] = k++;
    for (int32_t i = 0; i < g->nnodes; i++) {
        ir_node *nd = &nodes[map[i]];
        *nd = g->nodes[i];
        /* operand lists live in g's arena, one per node: rewritten where they are */
        int32_t *in = (int32_t *)(uintptr_t)nd->in;
        for (int j = 0; j < nd->nin; j++)
            in[j] = map[in[j]];
    }
    for (int32_t i = 0; i < g->ninputs; i++)
        g->inputs[i] = i;
    for (int32_t i = 0; i < g->noutputs; i++)
        g->outputs[i].node = map[g->outputs[i].node];
    names_renumber(g->names, g->names, g->capnames, map);
    ir_free(g->nodes);
    g->nodes = nodes;
    g->capnodes = (int32_t)n + 1;
    ir_free(map);
    return true;
}

kiln_graph *
ir_graph_derive(const kiln_graph *g, int32_t n, const int32_t *orig, const int32_t *map)
{
    kiln_graph *ng = ir_graph_new(g->name);
    if (!ng)
        return NULL;
    ng->base = ir_graph_share(g);
    bool ok = n >= 0 && n <= g->nnodes && ir_graph_reserve(ng, n);
    ng->inputs = ok && g->ninputs ? ir_malloc(sizeof *ng->inputs * (size_t)g->ninputs) : NULL;
    ng->outputs = ok && g->noutputs ? ir_malloc(sizeof *ng->outputs * (size_t)g->noutputs) : NULL;
    if (!ok || (g->ninputs && !ng->inputs) || (g->noutputs && !ng->outputs))
        goto nomem;
    ng->capinputs = g->ninputs;
    ng->capoutputs = g->noutputs;
    bool renamed = false; /* a named node dropped or merged: the index built again */
    for (int32_t j = 0; j < n; j++) {
        const ir_node *src = &g->nodes[orig[j]];
        ir_node *nd = &ng->nodes[j];
        *nd = *src;
        bool same = true;
        for (int k = 0; k < src->nin && same; k++)
            same = map[src->in[k]] == src->in[k];
        if (!same) { /* (renumbered: an operand list of its own) */
            int32_t *in = ir_arena_alloc(&ng->arena, sizeof(int32_t) * (size_t)src->nin,
                                         sizeof(int32_t));
            if (!in)
                goto nomem;
            for (int k = 0; k < src->nin; k++)
                in[k] = map[src->in[k]];
            nd->in = in;
        }
        if (src->op == IR_OP_INPUT) {
            nd->index = ng->ninputs;
            ng->inputs[ng->ninputs++] = j;
        }
        ng->nnodes++;
    }
    for (int32_t i = 0; i < g->noutputs; i++)
        ng->outputs[ng->noutputs++] = (ir_output){g->outputs[i].name, map[g->outputs[i].node]};
    for (int32_t i = 0; i < g->capnames && !renamed; i++) {
        int32_t x = g->names[i] - 1;
        renamed = x >= 0 && (map[x] < 0 || orig[map[x]] != x);
    }
    if (!renamed && g->capnames) { /* the same slots, renumbered */
        if (!(ng->names = ir_malloc(sizeof *ng->names * (size_t)g->capnames)))
            goto nomem;
        names_renumber(ng->names, g->names, g->capnames, map);
        ng->capnames = g->capnames;
        ng->nnames = g->nnames;
    }
    for (int32_t j = 0; renamed && j < n; j++)
        if (ng->nodes[j].name) {
            if (!names_reserve(ng))
                goto fail;
            names_add(ng, j);
        }
    return ng;
nomem:
    ir_error(KILN_ERR_NOMEM, "kiln: out of memory copying a graph");
fail:
    kiln_graph_free(ng);
    return NULL;
}

kiln_graph *
ir_graph_share(const kiln_graph *g)
{
    kiln_graph *m = (kiln_graph *)g; /* the count is not the graph: sharing does not change it */
    atomic_fetch_add(&m->shares, 1);
    return m;
}

kiln_status
ir_graph_add_output(kiln_graph *g, const char *name, int32_t node)
{
    if (name && !*name)
        return ir_error(KILN_ERR_BOUNDARY, "kiln_scope_end: bad output: an output needs a name");
    if ((node < 0 || node >= g->nnodes) && name)
        return ir_error(KILN_ERR_BOUNDARY, "kiln_scope_end: bad output: '%s' names node %d",
                        name, (int)node);
    if (node < 0 || node >= g->nnodes)
        return ir_error(KILN_ERR_BOUNDARY, "kiln_scope_end: bad output: output %d names node %d",
                        (int)g->noutputs, (int)node);
    for (int32_t i = 0; i < g->noutputs && name; i++)
        if (g->outputs[i].name && strcmp(g->outputs[i].name, name) == 0)
            return ir_error(KILN_ERR_BOUNDARY, "kiln_scope_end: duplicate output: '%s'", name);
    if (!grow((void **)&g->outputs, &g->capoutputs, g->noutputs + 1, sizeof(ir_output)))
        return KILN_ERR_NOMEM;
    const char *nm = name ? ir_arena_strdup(&g->arena, name) : NULL;
    if (name && !nm)
        return KILN_ERR_NOMEM;
    g->outputs[g->noutputs].name = nm;
    g->outputs[g->noutputs].node = node;
    g->noutputs++;
    return KILN_OK;
}

int32_t
ir_graph_find(const kiln_graph *g, const char *name, size_t n)
{
    /* through the index of names: every input of a graph is checked against the named
     * nodes before it, which a walk over the nodes made quadratic in the graph's size */
    uint32_t slot;
    return g->capnames ? names_lookup(g, name, n, &slot) : -1;
}

/* ---- public API ------------------------------------------------------------------------ */

static bool
check_graph(const kiln_graph *g, const char *api)
{
    if (ir_graph_is_valid(g))
        return true;
    ir_error(KILN_ERR_MISUSE, "%s: invalid handle: %s", api,
             g ? "not a live kiln_graph (freed or foreign)" : "graph is NULL");
    return false;
}

kiln_status
kiln_graph_print(const kiln_graph *g, FILE *f)
{
    if (!check_graph(g, "kiln_graph_print"))
        return KILN_ERR_MISUSE;
    return ir_graph_print(g, f);
}

kiln_status
kiln_graph_print_dot(const kiln_graph *g, FILE *f)
{
    if (!check_graph(g, "kiln_graph_print_dot"))
        return KILN_ERR_MISUSE;
    return ir_graph_print_dot(g, f);
}

char *
kiln_graph_to_string(const kiln_graph *g)
{
    if (!check_graph(g, "kiln_graph_to_string"))
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        ir_error(KILN_ERR_NOMEM, "kiln_graph_to_string: out of memory");
        return NULL;
    }
    kiln_status st = ir_graph_print(g, f);
    if (fclose(f) != 0 && !st)
        st = ir_error(KILN_ERR_NOMEM, "kiln_graph_to_string: out of memory");
    if (st) {
        free(buf);
        return NULL;
    }
    return buf;
}

uint64_t
kiln_graph_hash(const kiln_graph *g)
{
    return check_graph(g, "kiln_graph_hash") ? ir_graph_hash(g, false) : 0;
}

uint64_t
kiln_graph_generic_hash(const kiln_graph *g)
{
    return check_graph(g, "kiln_graph_generic_hash") ? ir_graph_hash(g, true) : 0;
}

int
kiln_graph_equal(const kiln_graph *a, const kiln_graph *b)
{
    if (!check_graph(a, "kiln_graph_equal") || !check_graph(b, "kiln_graph_equal"))
        return 0;
    return ir_graph_equal(a, b);
}

const char *
kiln_graph_name(const kiln_graph *g)
{
    return check_graph(g, "kiln_graph_name") ? g->name : NULL;
}

int
kiln_graph_num_inputs(const kiln_graph *g)
{
    return check_graph(g, "kiln_graph_num_inputs") ? g->ninputs : -1;
}

int
kiln_graph_num_outputs(const kiln_graph *g)
{
    return check_graph(g, "kiln_graph_num_outputs") ? g->noutputs : -1;
}

/* Fill the caller's versioned *info (abi.c) with node nd's description. */
static kiln_status
fill_info(const char *api, const ir_node *nd, const char *name, kiln_value_info *info)
{
    kiln_value_info v = {.size = sizeof v};
    v.name = name;
    v.dtype = nd->type.dtype;
    v.rank = nd->type.shape.rank;
    v.dims = nd->type.shape.dims;
    v.count = ir_shape_count(&nd->type.shape);
    v.bytes = ir_type_bytes(&nd->type);
    return ir_abi_out(api, "kiln_value_info", info, &v, sizeof v,
                      offsetof(kiln_value_info, name) + sizeof v.name);
}

kiln_status
kiln_graph_input(const kiln_graph *g, int i, kiln_value_info *info)
{
    if (!check_graph(g, "kiln_graph_input"))
        return KILN_ERR_MISUSE;
    if (i < 0 || i >= g->ninputs)
        return ir_error(KILN_ERR_INVALID_ARG, "kiln_graph_input: invalid argument: input %d of %d",
                        i, (int)g->ninputs);
    const ir_node *nd = &g->nodes[g->inputs[i]];
    return fill_info("kiln_graph_input", nd, nd->name, info);
}

kiln_status
kiln_graph_output(const kiln_graph *g, int i, kiln_value_info *info)
{
    if (!check_graph(g, "kiln_graph_output"))
        return KILN_ERR_MISUSE;
    if (i < 0 || i >= g->noutputs)
        return ir_error(KILN_ERR_INVALID_ARG,
                        "kiln_graph_output: invalid argument: output %d of %d", i,
                        (int)g->noutputs);
    return fill_info("kiln_graph_output", &g->nodes[g->outputs[i].node], g->outputs[i].name,
                     info);
}

kiln_status
kiln_graph_interpret(const kiln_graph *g, const void *const *inputs, void *const *outputs)
{
    if (!check_graph(g, "kiln_graph_interpret"))
        return KILN_ERR_MISUSE;
    for (int32_t i = 0; i < g->ninputs; i++)
        if ((!inputs || !inputs[i]) && ir_type_bytes(&g->nodes[g->inputs[i]].type) > 0)
            return ir_error(KILN_ERR_INVALID_ARG,
                            "kiln_graph_interpret: invalid argument: input %d ('%s') is NULL",
                            (int)i, g->nodes[g->inputs[i]].name);
    for (int32_t i = 0; i < g->noutputs; i++)
        if ((!outputs || !outputs[i]) &&
            ir_type_bytes(&g->nodes[g->outputs[i].node].type) > 0)
            return ir_error(KILN_ERR_INVALID_ARG,
                            "kiln_graph_interpret: invalid argument: output %d ('%s') is NULL",
                            (int)i, g->outputs[i].name);
    return ir_interpret(g, inputs, outputs);
}

kiln_graph *
ir_graph_rebuild(const kiln_graph *g, const ir_type *input_types)
{
    kiln_graph *ng = ir_graph_new(g->name);
    int32_t *map = ir_malloc(sizeof(int32_t) * ((size_t)g->nnodes + 1));
    int32_t small[8], *in = small;
    if (!ng || !map || !ir_graph_reserve(ng, g->nnodes)) {
        ir_error(KILN_ERR_NOMEM, "kiln: out of memory copying a graph");
        goto fail;
    }
    for (int32_t i = 0; i < g->ninputs; i++) {
        const ir_node *nd = &g->nodes[g->inputs[i]];
        const ir_type *t = input_types ? &input_types[i] : &nd->type;
        if ((map[g->inputs[i]] = ir_graph_add_input(ng, nd->name, t)) < 0)
            goto fail;
    }
    for (int32_t n = 0; n < g->nnodes; n++) {
        const ir_node *nd = &g->nodes[n];
        if (nd->op == IR_OP_INPUT)
            continue;
        if (nd->nin > 8 && !(in = ir_malloc(sizeof(int32_t) * (size_t)nd->nin))) {
            ir_error(KILN_ERR_NOMEM, "kiln: out of memory copying a graph");
            goto fail;
        }
        for (int k = 0; k < nd->nin; k++)
            in[k] = map[nd->in[k]];
        /* With new input types the rule infers every type again; sources keep theirs.
         * Without, each node is copied as it is. */
        const ir_type *given = ir_ops[nd->op].kind == IR_KIND_SOURCE ? &nd->type : NULL;
        map[n] = !input_types ? ir_graph_copy_node(ng, g, n, in)
                              : ir_graph_add_node(ng, "kiln", nd->op, nd->nin, in, nd->at,
                                                  given, nd->name);
        if (in != small)
            ir_free(in);
        in = small;
        if (map[n] < 0)
            goto fail;
    }
    for (int32_t i = 0; i < g->noutputs; i++)
        if (ir_graph_add_output(ng, g->outputs[i].name, map[g->outputs[i].node]))
            goto fail;
    ir_free(map);
    return ng;
fail:
    ir_free(map);
    kiln_graph_free(ng);
    return NULL;
}
