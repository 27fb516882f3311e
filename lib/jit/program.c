/* program.c — programs: what kiln_scope_end hands back.
 *
 * A program owns the captured graph and holds a compiled form: for FUSED and EAGER a
 * jit_plan (kernels + schedule + buffer plan), for INTERP the reference interpreter.
 * Compiled forms are cached (a jit_lru, lru.c) by the graph's structure (keyed by its
 * generic hash, equal by ir_graph_equal), the mode and the options that change the code
 * (kiln_options.stores and .code): capturing the same graph again takes a reference to
 * the cached form (no planning, no LLVM work),
 * and a thread capturing a graph another thread is compiling waits for it;
 * a graph differing only in sizes is planned from the plan of another of its sizes
 * (resize.c), or from scratch, and finds its kernels in that plan, the kernel cache
 * (cache.c) or, a new process, the disk cache (disk.c).  The cache keeps at most
 * PLAN_GROUP_LIMIT plans of one generic graph. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "llvm.h"

#define PLAN_CACHE_LIMIT 256
/* Plans of one generic graph (equal but for sizes) kept at most: a client whose sizes
 * change every step (a decoder's caches grow by a row) plans each step anew and never
 * meets those sizes again.  Without this bound its plans filled the cache, each new memory
 * (about 60 page faults a step, 2 layers of a decoder: docs/benchmarking.md), and evicted
 * every other graph's; with it the client recycles the memory of its last few.  Eight
 * keep a client that cycles through a few bucketed sizes. */
#define PLAN_GROUP_LIMIT 8

/* A compiled form, shared by every program of an equal graph and mode. */
typedef struct compiled {
    jit_lru_entry *entry; /* NULL: not cached (dumps, KILN_NO_CACHE), freed at refs 0 */
    _Atomic int refs;     /* uncached only */
    jit_plan *plan;
    unsigned flags;       /* the plan's JIT_F_* (to explain it again for a dump) */
} compiled;

/* The cache key: the graph (for equality checks: a share of the first program's, which
 * outlives that program) and the mode. */
typedef struct plan_key {
    kiln_mode mode;
    unsigned flags; /* the JIT_F_PLAN bits it is planned with */
    kiln_graph *graph;
    uint64_t sizes; /* input_sizes(graph): compared before the graphs */
} plan_key;

/* The inputs' dims mixed into one word.  Graphs of one generic hash (the plans of a
 * decoder step at its other cache lengths: a group of up to PLAN_GROUP_LIMIT) differ
 * mostly in their inputs' sizes, so a lookup that misses compares this word with each
 * of them instead of walking their nodes to the first differing type. */
static uint64_t
input_sizes(const kiln_graph *g)
{
    uint64_t h = 0;
    for (int32_t i = 0; i < g->ninputs; i++) {
        const ir_shape *s = &g->nodes[g->inputs[i]].type.shape;
        for (int d = 0; d < s->rank; d++)
            h = (h ^ (uint64_t)s->dims[d]) * 0x100000001b3ull;
    }
    return h;
}

static _Atomic uint64_t uncached_compiles;

static bool
key_equal(const void *a, const void *b)
{
    const plan_key *x = a, *y = b;
    return x->mode == y->mode && x->flags == y->flags && x->sizes == y->sizes &&
           ir_graph_equal(x->graph, y->graph);
}

static void
key_free(void *k)
{
    plan_key *pk = k;
    kiln_graph_free(pk->graph);
    ir_free(pk);
}

static void
compiled_destroy(void *v)
{
    compiled *c = v;
    jit_plan_free(c->plan);
    ir_free(c);
}

static const jit_lru_ops plan_ops = {key_equal, key_free, compiled_destroy};
/* Plans are counted, not weighed: their kernels' code is weighed in the kernel cache. */
static jit_lru plans =
    JIT_LRU_INIT_GROUPED(&plan_ops, PLAN_CACHE_LIMIT, SIZE_MAX, PLAN_GROUP_LIMIT);

/* A held input's packed form for one contraction step (kiln_program_hold_input). */
typedef struct held_b {
    void *packed;
    size_t bytes;
    const void *src; /* the input pointer it was packed from */
    bool valid;
} held_b;

struct kiln_program {
    kiln_graph *graph;
    kiln_mode requested;
    kiln_mode mode;
    compiled *comp;           /* NULL for INTERP */
    /* held inputs: per input whether held; per step its packed B (NULL until an input is
     * held) and the pointers a run passes to jit_plan_run; the lock guards them */
    pthread_mutex_t hold_lock;
    uint8_t *held;
    held_b *hb;
    const void **bp;
    int nheld;
};

/* The live programs: a handle is checked here before anything reads through it. */
static ir_handle_set live_programs = IR_HANDLE_SET_INIT;

static kiln_status
program_check(const kiln_program *p, const char *api)
{
    if (!p)
        return ir_error(KILN_ERR_MISUSE, "%s: invalid handle: program is NULL", api);
    if (!ir_handle_is_live(&live_programs, p))
        return ir_error(KILN_ERR_MISUSE,
                        "%s: invalid handle: not a live kiln_program (freed or foreign)", api);
    return KILN_OK;
}

/* A structural copy of g (for the cache: programs own and free their own graphs). */
static kiln_graph *
graph_clone(const kiln_graph *g)
{
    return ir_graph_rebuild(g, NULL);
}

static void
compiled_release(compiled *c)
{
    if (!c)
        return;
    if (c->entry)
        jit_lru_release(&plans, c->entry);
    else if (atomic_fetch_sub(&c->refs, 1) == 1)
        compiled_destroy(c);
}

static bool
want_dumps(void)
{
    return ir_config_get()->dump[0] != '\0';
}

/* KILN_DUMP=graph,plan,llvm,opt,asm writes those dumps of every compiled program, into
 * KILN_DUMP_DIR/<graph>-<hash>.<what> when KILN_DUMP_DIR is set, else to stderr. */
static void
dump_env(const kiln_program *p)
{
    const char *e = ir_config_get()->dump;
    const char *dir = ir_config_get()->dump_dir;
    for (int v = 0; v < KILN_VIEW_COUNT; v++) {
        const char *w = kiln_view_name((kiln_view)v);
        const char *hit = strstr(e, w);
        size_t n = strlen(w);
        if (!hit || (hit != e && hit[-1] != ',') || (hit[n] != ',' && hit[n] != '\0'))
            continue;
        FILE *f = stderr;
        if (dir && *dir) {
            char path[sizeof ir_config_get()->dump_dir + 256];
            static const char *const modes[] = {"fused", "eager", "interp"};
            snprintf(path, sizeof path, "%s/%s-%016llx-%s.%s", dir, p->graph->name,
                     (unsigned long long)ir_graph_hash(p->graph, false), modes[p->mode], w);
            f = fopen(path, "w");
            if (!f) {
                fprintf(stderr, "kiln: KILN_DUMP: cannot write %s\n", path);
                continue;
            }
        } else {
            fprintf(stderr, "==== kiln dump: %s of graph %s\n", w, p->graph->name);
        }
        kiln_program_dump(p, (kiln_view)v, f);
        if (f != stderr)
            fclose(f);
    }
}

/* Find or build the compiled form of g in mode: one jit_lru lookup (a second thread
 * compiling an equal graph waits for the first), or past the cache with dumps (the cached
 * kernels may have been compiled without keeping their text) or KILN_NO_CACHE. */
static kiln_status
compile(const char *api, const kiln_graph *g, kiln_mode mode, unsigned flags, compiled **out)
{
    *out = NULL;
    jit_lru_entry *e = NULL;
    if (!(flags & (JIT_F_DUMPS | JIT_F_NOCACHE))) {
        plan_key *k = ir_calloc(1, sizeof *k);
        if (k) {
            k->mode = mode;
            k->flags = flags & JIT_F_PLAN;
            k->graph = ir_graph_share(g); /* the program's: complete, immutable */
            k->sizes = input_sizes(g);
        }
        if (!k) {
            ir_free(k);
            return ir_error(KILN_ERR_NOMEM, "%s: out of memory", api);
        }
        /* the generic hash: a graph's size variants share a hash chain (at most
         * PLAN_GROUP_LIMIT of them are cached; telling them apart is ir_graph_equal's
         * first differing size), and the hash is also the group */
        uint64_t h = ir_graph_hash(g, true) ^ ((uint64_t)mode * 0x9e3779b97f4a7c15ull);
        jit_lru_result r = jit_lru_get(&plans, h, k, true, &e);
        if (r != JIT_LRU_MISS)
            key_free(k);
        if (r == JIT_LRU_NOMEM)
            return ir_error(KILN_ERR_NOMEM, "%s: out of memory", api);
        if (r == JIT_LRU_HIT) {
            *out = jit_lru_value(e);
            return KILN_OK;
        }
    } else {
        atomic_fetch_add(&uncached_compiles, 1);
    }
    compiled *c = ir_calloc(1, sizeof *c);
    /* a program compiled for dumps explains its steps now; the others when dumped */
    if (c)
        c->flags = flags | (flags & JIT_F_DUMPS ? JIT_F_EXPLAIN : 0);
    kiln_status st = c ? KILN_OK : ir_error(KILN_ERR_NOMEM, "%s: out of memory", api);
    /* a graph equal to one planned before but for sizes: its plan made from that one's
     * (resize.c); else from scratch, kept as the model of its other sizes */
    jit_plan_model *model = NULL;
    if (!st && e)
        st = jit_resize_find(g, jit_lru_hash(e), mode, c->flags, &c->plan);
    if (!st && !c->plan)
        st = jit_plan_build(g, mode, c->flags, &c->plan, e ? &model : NULL);
    if (model)
        jit_resize_keep(model, jit_lru_hash(e));
    if (st) {
        ir_free(c);
        if (e)
            jit_lru_abandon(&plans, e);
        return st;
    }
    if (e) {
        c->entry = e;
        jit_lru_fill_group(&plans, e, c, 0, true, jit_lru_hash(e));
    } else {
        atomic_store(&c->refs, 1);
    }
    *out = c;
    return KILN_OK;
}

void
jit_plan_cache_trim(void)
{
    jit_lru_trim(&plans);
    jit_resize_trim();
    jit_ws_trim();
    jit_describe_trim();
}

/* Compile `g` (taking ownership) into a program. */
static kiln_status
program_new(const char *api, kiln_graph *g, const kiln_options *options, kiln_program **out)
{
    kiln_options opt;
    kiln_status ost = ir_options_read(api, options, &opt);
    if (ost) {
        kiln_graph_free(g);
        return ost;
    }
    const kiln_options *o = &opt;
    kiln_mode mode = o->mode;
    unsigned of = o->flags;
    kiln_program *p = ir_calloc(1, sizeof *p);
    if (!p || !ir_handle_add(&live_programs, p)) {
        ir_free(p);
        kiln_graph_free(g);
        return ir_error(KILN_ERR_NOMEM, "%s: out of memory", api);
    }
    p->graph = g;
    p->requested = mode;
    p->mode = mode;
    pthread_mutex_init(&p->hold_lock, NULL);
    if (mode != KILN_MODE_INTERP) {
        const char *pert = ir_config_get()->test_perturb; /* test-only, see lower.c */
        unsigned flags = (want_dumps() || (of & KILN_KEEP_DUMPS) ? JIT_F_DUMPS : 0) |
                         ((of & KILN_NO_CACHE) || (pert && *pert) ? JIT_F_NOCACHE : 0) |
                         (of & KILN_NO_DISK_CACHE ? JIT_F_NODISK : 0) |
                         (o->stores == KILN_STORES_STREAM ? JIT_F_STREAM : 0) |
                         (o->stores == KILN_STORES_CACHED ? JIT_F_NO_STREAM : 0) |
                         (o->code == KILN_CODE_COMPACT ? JIT_F_COMPACT : 0) |
                         (o->code == KILN_CODE_FULL ? JIT_F_NO_COMPACT : 0) |
                         (of & KILN_TIERED ? JIT_F_TIERED : 0);
        kiln_status st = compile(api, g, mode, flags, &p->comp);
        if (st) {
            kiln_program_free(p);
            return st;
        }
    }
    if (want_dumps())
        dump_env(p);
    *out = p;
    return KILN_OK;
}

kiln_status
kiln_scope_end(kiln_scope scope, int noutputs, const kiln_tensor *outputs,
               const kiln_options *options, kiln_program **program)
{
    const char *api = "kiln_scope_end";
    kiln_graph *g;
    if (program)
        *program = NULL;
    if (!program) {
        /* Still end the scope so the device is released. */
        kiln_scope_abort(scope);
        return ir_error(KILN_ERR_INVALID_ARG, "%s: invalid argument: program is NULL", api);
    }
    kiln_status st = cap_scope_finish(api, scope, noutputs, outputs, options, &g);
    if (st)
        return st;
    return program_new(api, g, options, program);
}

kiln_status
kiln_program_compile(const kiln_graph *graph, const kiln_options *options, kiln_program **program)
{
    const char *api = "kiln_program_compile";
    if (!graph)
        return ir_error(KILN_ERR_MISUSE, "%s: invalid handle: graph is NULL", api);
    if (!ir_graph_is_valid(graph))
        return ir_error(KILN_ERR_MISUSE,
                        "%s: invalid handle: not a live kiln_graph (freed or foreign)", api);
    if (!program)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: invalid argument: program is NULL", api);
    *program = NULL;
    kiln_graph *g = graph_clone(graph);
    if (!g)
        return kiln_errcode() ? kiln_errcode() : ir_error(KILN_ERR_NOMEM, "%s: out of memory", api);
    return program_new(api, g, options, program);
}

kiln_status
kiln_capture_scope(kiln_device *device, kiln_capture_fn fn, void *user,
                   const kiln_options *options, kiln_program **program)
{
    const char *api = "kiln_capture_scope";
    if (program)
        *program = NULL;
    if (!fn || !program)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: invalid argument: %s is NULL", api,
                        fn ? "program" : "fn");
    kiln_scope s = kiln_scope_begin(device);
    if (kiln_scope_is_null(s))
        return kiln_errcode();
    kiln_status st = fn(s, user);
    if (st) {
        /* The callback failed: release the device, keep the callback's error.  The message
         * is the scope's first error if one was recorded (sticky, as kiln_scope_end would
         * report it), else the thread's if it matches the code; if the thread's error is
         * unrelated (the callback returned a code without a kiln error), say so rather
         * than show a stale message. */
        bool have = false;
        char msg[2048];
        cap_lock();
        cap_scope *cs = cap_scope_find_locked(s.serial);
        if (cs && cs->err) {
            snprintf(msg, sizeof msg, "%s", cs->errmsg ? cs->errmsg : kiln_status_str(cs->err));
            have = true;
        }
        cap_unlock();
        if (!have && kiln_errcode() == st) {
            snprintf(msg, sizeof msg, "%s", kiln_errmsg());
            have = true;
        }
        kiln_scope_abort(s);
        if (have)
            ir_error(st, "%s", msg);
        else
            ir_error(st, "%s: callback failed: %s", api, kiln_status_str(st));
        return st;
    }
    return kiln_scope_end(s, 0, NULL, options, program);
}

static kiln_status held_prepare(kiln_program *p, const void *const *inputs);

kiln_status
kiln_program_run(kiln_program *p, const void *const *inputs, void *const *outputs)
{
    const char *api = "kiln_program_run";
    kiln_status st = program_check(p, api);
    if (st)
        return st;
    const kiln_graph *g = p->graph;
    for (int32_t i = 0; i < g->ninputs; i++)
        if ((!inputs || !inputs[i]) && ir_type_bytes(&g->nodes[g->inputs[i]].type) > 0)
            return ir_error(KILN_ERR_INVALID_ARG, "%s: invalid argument: input %d ('%s') is NULL",
                            api, (int)i, g->nodes[g->inputs[i]].name);
    for (int32_t i = 0; i < g->noutputs; i++)
        if ((!outputs || !outputs[i]) && ir_type_bytes(&g->nodes[g->outputs[i].node].type) > 0)
            return ir_error(KILN_ERR_INVALID_ARG,
                            "%s: invalid argument: output %d ('%s') is NULL", api, (int)i,
                            g->outputs[i].name);
    if (!p->comp)
        return ir_interpret(g, inputs, outputs);
    const jit_plan *plan = p->comp->plan;
    /* The temporaries come from the process's pool of blocks (workspace.c), already
     * touched by earlier runs of this or any other program; a concurrent run gets a block
     * of its own. */
    void *temp = NULL;
    size_t cap = 0;
    if (plan->temp_bytes && !(temp = jit_ws_take(plan->temp_bytes, &cap)))
        return ir_error(KILN_ERR_NOMEM, "%s: out of memory: %zu bytes of temporaries", api,
                        plan->temp_bytes);
    const void *const *bp = NULL;
    if (p->nheld) {
        pthread_mutex_lock(&p->hold_lock);
        st = held_prepare(p, inputs);
        pthread_mutex_unlock(&p->hold_lock);
        bp = p->bp;
    }
    /* A plan of 0 bytes of temporaries may still place zero-size values (an empty
     * operand's packing) at offset 0 of its block: give it an empty one, not NULL, which
     * the runner would offset (undefined behaviour, even by 0). */
    static _Alignas(64) unsigned char no_temporaries[64];
    if (!st)
        st = jit_plan_run(plan, inputs, outputs, temp ? temp : no_temporaries, bp);
    jit_ws_give(temp, cap);
    return st;
}

kiln_status
kiln_program_free(kiln_program *p)
{
    if (!p)
        return KILN_OK;
    if (!ir_handle_remove(&live_programs, p))
        return ir_error(KILN_ERR_MISUSE, "kiln_program_free: invalid handle: not a live "
                                         "kiln_program (freed or foreign)");
    if (p->hb)
        for (int i = 0; i < p->comp->plan->nsteps; i++)
            ir_free(p->hb[i].packed);
    ir_free(p->hb);
    ir_free(p->bp);
    ir_free(p->held);
    pthread_mutex_destroy(&p->hold_lock);
    compiled_release(p->comp);
    kiln_graph_free(p->graph);
    ir_handle_retire(&live_programs, p);
    return KILN_OK;
}

/* The input whose B step s packs on every run (-1: none: not a packed contraction, or B is
 * a constant, packed when the plan was built, or not an input). */
static int
step_b_input(const jit_step *s)
{
    if (s->kind != JIT_STEP_KERNEL || s->desc.kind != JIT_KERNEL_CONTRACTION || s->mm_bpacked ||
        s->mm_loc[1].kind != JIT_LOC_INPUT || s->total == 0)
        return -1;
    return s->mm_loc[1].index;
}

/* A live program and one of its inputs, or the error naming api. */
static kiln_status
input_check(const kiln_program *p, int input, const char *api)
{
    kiln_status st = program_check(p, api);
    if (st)
        return st;
    if (input < 0 || input >= p->graph->ninputs)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: invalid argument: input %d (the program has %d)",
                        api, input, (int)p->graph->ninputs);
    return KILN_OK;
}

kiln_status
kiln_program_hold_input(kiln_program *p, int input, int hold)
{
    const char *api = "kiln_program_hold_input";
    kiln_status st = input_check(p, input, api);
    if (st)
        return st;
    if (!p->comp)
        return KILN_OK; /* the interpreter derives nothing from its inputs */
    const jit_plan *plan = p->comp->plan;
    pthread_mutex_lock(&p->hold_lock);
    if (!p->held) {
        p->held = ir_calloc((size_t)p->graph->ninputs, 1);
        p->hb = ir_calloc((size_t)plan->nsteps + 1, sizeof *p->hb);
        p->bp = ir_calloc((size_t)plan->nsteps + 1, sizeof *p->bp);
        if (!p->held || !p->hb || !p->bp) {
            ir_free(p->held);
            ir_free(p->hb);
            ir_free(p->bp);
            p->held = NULL;
            p->hb = NULL;
            p->bp = NULL;
            pthread_mutex_unlock(&p->hold_lock);
            return ir_error(KILN_ERR_NOMEM, "%s: out of memory", api);
        }
    }
    hold = hold != 0;
    if (p->held[input] != hold)
        p->nheld += hold ? 1 : -1;
    p->held[input] = (uint8_t)hold;
    for (int i = 0; i < plan->nsteps; i++)
        if (step_b_input(&plan->steps[i]) == input) {
            p->hb[i].valid = false;
            if (!hold) { /* released: the copy goes */
                ir_free(p->hb[i].packed);
                p->hb[i] = (held_b){0};
            }
        }
    pthread_mutex_unlock(&p->hold_lock);
    return KILN_OK;
}

kiln_status
kiln_program_input_changed(kiln_program *p, int input)
{
    kiln_status st = input_check(p, input, "kiln_program_input_changed");
    if (st)
        return st;
    pthread_mutex_lock(&p->hold_lock);
    for (int i = 0; p->hb && i < p->comp->plan->nsteps; i++)
        if (step_b_input(&p->comp->plan->steps[i]) == input)
            p->hb[i].valid = false;
    pthread_mutex_unlock(&p->hold_lock);
    return KILN_OK;
}

static _Atomic uint64_t held_packs;

/* Under the hold lock: every held input's packed B made (or kept) for this run's pointers;
 * p->bp filled for jit_plan_run. */
static kiln_status
held_prepare(kiln_program *p, const void *const *inputs)
{
    const jit_plan *plan = p->comp->plan;
    for (int i = 0; i < plan->nsteps; i++) {
        const jit_step *s = &plan->steps[i];
        int in = step_b_input(s);
        held_b *h = &p->hb[i];
        p->bp[i] = NULL;
        if (in < 0 || !p->held[in])
            continue;
        if (!h->valid || h->src != inputs[in]) {
            size_t n = jit_contract_b_bytes(s);
            if (h->bytes < n) {
                ir_free(h->packed);
                h->bytes = 0;
                if (!(h->packed = ir_aligned_alloc(64, n ? n : 64)))
                    return ir_error(KILN_ERR_NOMEM, "kiln_program_run: out of memory packing held "
                                                    "input %d (%zu bytes)", in, n);
                h->bytes = n;
            }
            jit_contract_pack_b(s, inputs[in], h->packed);
            h->src = inputs[in];
            h->valid = true;
            atomic_fetch_add(&held_packs, 1);
        }
        p->bp[i] = h->packed;
    }
    return KILN_OK;
}

const kiln_graph *
kiln_program_graph(const kiln_program *p)
{
    return program_check(p, "kiln_program_graph") ? NULL : p->graph;
}

kiln_mode
kiln_program_mode(const kiln_program *p)
{
    return program_check(p, "kiln_program_mode") ? (kiln_mode)-1 : p->mode;
}

static const char *const view_names[KILN_VIEW_COUNT] = {
    [KILN_VIEW_GRAPH] = "graph", [KILN_VIEW_PLAN] = "plan", [KILN_VIEW_LLVM] = "llvm",
    [KILN_VIEW_OPT] = "opt",     [KILN_VIEW_ASM] = "asm",
};

const char *
kiln_view_name(kiln_view view)
{
    return (int)view >= 0 && view < KILN_VIEW_COUNT ? view_names[view] : NULL;
}

kiln_status
kiln_program_dump(const kiln_program *p, kiln_view view, FILE *f)
{
    const char *api = "kiln_program_dump";
    kiln_status st = program_check(p, api);
    if (st)
        return st;
    if (!f)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: invalid argument: stream is NULL", api);
    const jit_plan *plan = p->comp ? p->comp->plan : NULL;
    int which = -1; /* jit_kernel_dump's index of the text views */
    switch (view) {
    case KILN_VIEW_GRAPH:
        return ir_graph_print(p->graph, f);
    case KILN_VIEW_PLAN:
        if (!plan) {
            fprintf(f, "plan: interpreter (mode interp): every node runs in the reference interpreter\n");
            return KILN_OK;
        }
        return jit_plan_dump(plan, p->graph, p->mode, p->comp->flags, f);
    case KILN_VIEW_LLVM: which = 0; break;
    case KILN_VIEW_OPT: which = 1; break;
    case KILN_VIEW_ASM: which = 2; break;
    case KILN_VIEW_COUNT: break;
    }
    if (which < 0)
        return ir_error(KILN_ERR_INVALID_ARG,
                        "%s: invalid argument: view %d (expected a kiln_view: KILN_VIEW_GRAPH, "
                        "_PLAN, _LLVM, _OPT or _ASM)", api, (int)view);
    if (!plan)
        return KILN_OK;
    jit_plan *ex;
    if ((st = jit_plan_explained(plan, p->graph, p->mode, p->comp->flags, &ex)))
        return st;
    for (int i = 0; i < plan->nsteps; i++) {
        const jit_step *s = &plan->steps[i];
        if (s->kind != JIT_STEP_KERNEL)
            continue;
        const char *text = jit_kernel_dump(s->kernel, which);
        const char *why = ex ? ex->steps[i].explain : s->explain;
        fprintf(f, "; ---- step %d: %s\n", i, why ? why : "");
        if (text)
            fputs(text, f);
        else
            fprintf(f, "; (not captured: compile with KILN_DUMP set or kiln dump --%s)\n",
                    view_names[view]);
        if (s->core) { /* a rows step's k loop, a kernel of its own (lower_skinny.c) */
            const char *ct = jit_kernel_dump(s->core, which);
            fprintf(f,
                    "; ---- step %d's core: its k loop, shared by every rows step of its "
                    "dtype and tile\n",
                    i);
            if (ct)
                fputs(ct, f);
            else
                fprintf(f, "; (not captured)\n");
        }
    }
    jit_plan_free(ex);
    return ferror(f) ? ir_error(KILN_ERR_IO, "%s: i/o error", api) : KILN_OK;
}

kiln_status
kiln_jit_stats(kiln_stats *stats)
{
    kiln_stats all = {.size = sizeof all}, *s = &all;
    jit_stats js;
    jit_stats_get(&js);
    jit_cache_stats ks;
    jit_cache_counters(&ks);
    jit_lru_stats ps;
    jit_lru_stats_get(&plans, &ps);
    jit_disk_stats dc;
    jit_disk_counters(&dc);
    s->kernel_compiles = ks.compiles;
    s->kernel_hits = ks.hits;
    s->kernel_entries = ks.entries;
    s->kernel_bytes = ks.bytes;
    s->kernel_evictions = ks.evictions;
    s->kernel_waits = ks.waits;
    s->plan_hits = ps.hits;
    s->plan_misses = ps.misses + atomic_load(&uncached_compiles);
    s->compile_ms = js.compile_ms;
    s->optimise_ms = js.opt_ms;
    s->codegen_ms = js.gen_ms;
    s->link_ms = js.link_ms;
    s->startup_ms = js.startup_ms;
    s->lljit_ms = js.lljit_ms;
    s->disk_load_ms = js.load_ms;
    s->disk_hits = dc.hits;
    s->disk_misses = dc.misses;
    s->disk_rejected = dc.rejected;
    s->disk_writes = dc.writes;
    s->disk_write_errors = dc.write_errors;
    s->threads = jit_pool_threads();
    s->weights_packed = jit_contract_prepacked();
    jit_ws_counters(&s->workspace_allocs, &s->workspace_bytes);
    s->held_packs = atomic_load(&held_packs);
    s->kernel_tierups = ks.tierups;
    s->plans_resized = jit_resize_count();
    return ir_abi_out("kiln_jit_stats", "kiln_stats", stats, &all, sizeof all,
                      offsetof(kiln_stats, kernel_compiles) + sizeof all.kernel_compiles);
}

void
kiln_jit_sync(void)
{
    jit_background_wait();
}

void
kiln_jit_cache_drop(void)
{
    /* programs first: dropping one releases its kernels to the kernel cache's trim */
    jit_plan_cache_trim();
    jit_cache_trim();
}
