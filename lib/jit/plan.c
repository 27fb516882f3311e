/* plan.c — the fusion planner's driver: from a verified graph to steps over buffers.
 *
 *   simplify (simplify.c)  dead code, common subexpressions, folding
 *   fuse (fuse.c)          clusters of ops that become one kernel each
 *   schedule (schedule.c)  step order, buffers (outputs in place, packed temporaries)
 *   describe (describe.c)  every kernel's size-free description, slots and sizes
 *   compile (here)         every description found in the kernel cache or compiled by
 *                          LLVM, once all of them exist
 *   run (run.c)            the steps on the thread pool
 *
 * A plan built from scratch is kept, with the planner's state after schedule, as the
 * model of the same graph's plans at other sizes (resize.c: jit_plan_resized replays
 * simplify, fuse and schedule from it, then describes and compiles as here, but for the
 * steps whose descriptions read nothing that changed: those are the model's).
 *
 * `kiln dump --plan` (jit_plan_dump) prints the steps and why each boundary is there.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner.h"

static void
step_free(jit_step *s)
{
    free(s->explain);
    switch (s->kind) {
    case JIT_STEP_KERNEL: /* (its arrays are the plan's arena's) */
        jit_reduce_schedule_free(&s->desc);
        jit_kernel_release(s->kernel);
        jit_kernel_release(s->core);
        free(s->mm_bpacked);
        break;
    case JIT_STEP_REF:
        kiln_graph_free(s->sub);
        ir_free(s->in);
        break;
    case JIT_STEP_COPY:
        break;
    }
}

jit_plan *
jit_plan_retain(jit_plan *p)
{
    atomic_fetch_add(&p->refs, 1);
    return p;
}

void
jit_plan_free(jit_plan *p)
{
    if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    for (int i = 0; i < p->nsteps; i++)
        step_free(&p->steps[i]);
    ir_free(p->steps);
    ir_arena_free(&p->arena);
    jit_plan_free(p->base);
    kiln_graph_free(p->g);
    free(p->simplify_log);
    ir_free(p);
}

/* The kernel steps that have no kernel yet. */
static bool
needs_kernel(const jit_step *s)
{
    return s->kind == JIT_STEP_KERNEL && !s->kernel;
}

/* ... and the rows-form SKINNY steps that have no core (their k loop: jit_skinny_core). */
static bool
needs_core(const jit_step *s)
{
    return s->kind == JIT_STEP_KERNEL && s->desc.kind == JIT_KERNEL_SKINNY &&
           s->desc.bform == JIT_SKINNY_ROWS && !s->core;
}

static kiln_status
compile_kernels(jit_plan *plan, unsigned flags)
{
    int n = 0;
    for (int32_t i = 0; i < plan->nsteps; i++)
        n += needs_kernel(&plan->steps[i]) + needs_core(&plan->steps[i]);
    if (!n)
        return KILN_OK;
    const jit_kdesc **d = ir_calloc((size_t)n, sizeof *d);
    jit_kernel **k = ir_calloc((size_t)n, sizeof *k);
    bool *hit = ir_calloc((size_t)n, sizeof *hit);
    kiln_status st = KILN_OK;
    if (!d || !k || !hit) {
        st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
        goto done;
    }
    for (int32_t i = 0, j = 0; i < plan->nsteps; i++) {
        if (needs_kernel(&plan->steps[i]))
            d[j++] = &plan->steps[i].desc;
        if (needs_core(&plan->steps[i]))
            d[j++] = plan->steps[i].core_desc;
    }
    if ((st = jit_kernels_get(n, d, plan, flags, k, hit)))
        goto done;
    for (int32_t i = 0, j = 0; i < plan->nsteps; i++) {
        jit_step *s = &plan->steps[i];
        if (needs_kernel(s)) {
            s->kernel = k[j];
            plan->nkernels++;
            plan->nhits += hit[j++];
        }
        if (needs_core(s)) {
            s->core = k[j];
            plan->nkernels++;
            plan->nhits += hit[j++];
        }
    }
done:
    ir_free(d);
    ir_free(k);
    ir_free(hit);
    return st;
}

/* A plan compiles its elementwise kernels compactly (JIT_TIER_COMPACT, jit.h) when their
 * distinct descriptions hold more than COMPACT_MIN_INST instructions in all: LLVM's full
 * pipeline costs about 0.6 ms of CPU per instruction of such kernels (so 0.6 s at this
 * size), compact code about a tenth of that (wide graphs of 1,250 and 5,000 ops:
 * docs/benchmarking.md, "Wide graphs").  Equal descriptions are one kernel, compiled
 * once, so eager mode's thousands of steps of a few distinct kernels stay in full. */
#define COMPACT_MIN_INST 1024

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The steps choose_tier decides for: elementwise kernels. */
static bool
elementwise_kernel(const jit_step *s)
{
    return s->kind == JIT_STEP_KERNEL && s->desc.kind == JIT_KERNEL_ELEMENTWISE;
}

static kiln_status
choose_tier(jit_plan *plan, unsigned flags)
{
    bool compact = flags & JIT_F_COMPACT;
    int n = 0;
    int64_t all = 0; /* instructions of every description, equal ones each time */
    for (int32_t i = 0; i < plan->nsteps; i++)
        if (elementwise_kernel(&plan->steps[i])) {
            n++;
            all += plan->steps[i].desc.ninst;
        }
    /* the distinct ones hold no more: most plans stop here, with no hashing */
    if (!compact && !(flags & JIT_F_NO_COMPACT) && all > COMPACT_MIN_INST) {
        /* (hash, instructions) of each description, sorted: the distinct ones counted once */
        uint64_t *h = ir_calloc(2 * (size_t)n + 2, sizeof *h);
        if (!h)
            return ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
        int k = 0;
        for (int32_t i = 0; i < plan->nsteps; i++) {
            const jit_step *s = &plan->steps[i];
            if (!elementwise_kernel(s))
                continue;
            jit_buf b = {0};
            jit_kdesc_serialise(&s->desc, &b);
            if (b.failed) {
                ir_free(h);
                return ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
            }
            h[2 * k] = ir_hash_bytes(0x74696572ull, b.data, b.len);
            h[2 * k + 1] = (uint64_t)s->desc.ninst;
            k++;
            jit_buf_free(&b);
        }
        qsort(h, (size_t)k, 2 * sizeof *h, cmp_u64);
        uint64_t total = 0;
        for (int j = 0; j < k; j++)
            if (j == 0 || h[2 * j] != h[2 * j - 2])
                total += h[2 * j + 1];
        ir_free(h);
        compact = total > COMPACT_MIN_INST;
    }
    for (int32_t i = 0; compact && i < plan->nsteps; i++)
        if (elementwise_kernel(&plan->steps[i]))
            plan->steps[i].desc.tier = JIT_TIER_COMPACT;
    plan->compact = compact;
    return KILN_OK;
}

/* Step ls of plan `like` (a model's) as step js of plan: its description and sizes as they
 * are, its arrays shared (plan holds like), its reduction schedule its own; kernel, tier
 * and packing made as for any step. */
static kiln_status
step_like(jit_plan *plan, jit_step *js, const jit_plan *like, const jit_step *ls)
{
    *js = *ls;
    js->explain = NULL;
    js->kernel = NULL;
    js->core = NULL;
    js->mm_bpacked = NULL;
    js->mm_pack_off = 0;
    js->desc.tier = JIT_TIER_FULL; /* (as described: choose_tier decides) */
    js->desc.rsched = NULL;
    if (!plan->base)
        plan->base = jit_plan_retain((jit_plan *)like);
    return ls->desc.rsched ? jit_reduce_schedule_copy(&js->desc, &ls->desc) : KILN_OK;
}

/* The steps of a plan from the planner's state after fuse and schedule: every step
 * described in the schedule's order, copies for outputs that live elsewhere, room to pack
 * contraction operands, the tier, the kernels.  `like` (resize.c): a plan of the same graph
 * at other sizes, p->model's; a kernel step whose description read nothing that changed
 * (jit_describe_same) is its step there, one whose description equals its step's there
 * takes that kernel, the others come from the kernel cache.  A plan built to be kept as
 * a model records what each step's description read (p->reads). */
static kiln_status
plan_steps(planner *p, const jit_sched *sc, jit_plan *plan, unsigned flags, const jit_plan *like)
{
    kiln_status st;
    const kiln_graph *g = p->g;
    p->arena = &plan->arena;
    plan->temp_bytes = sc->temp_bytes;
    int32_t ncopies = 0;
    for (int32_t i = 0; i < g->noutputs; i++) {
        const nodeinfo *ni = &p->ni[g->outputs[i].node];
        if (!(ni->loc.kind == JIT_LOC_OUTPUT && ni->loc.index == i))
            ncopies++;
    }
    plan->steps = ir_calloc((size_t)(sc->nsteps + ncopies) + 1, sizeof(jit_step));
    if (!plan->steps || (p->reads && !jit_ivec_push(p->reads_at, 0)))
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
    for (int32_t i = 0; i < sc->nsteps; i++) {
        int32_t s = sc->order[i];
        jit_step *js = &plan->steps[plan->nsteps++];
        char *text = NULL;
        size_t len = 0;
        /* explanations cost a quarter of a plan built for new sizes (a decoder step): only
         * when asked for (dumps); jit_plan_dump asks later */
        FILE *f = flags & JIT_F_EXPLAIN ? open_memstream(&text, &len) : NULL;
        const jit_step *ls = like && like->nsteps > i ? &like->steps[i] : NULL;
        if (sc->refnode[s] < 0 && ls && ls->kind == JIT_STEP_KERNEL && p->model && !f &&
            jit_describe_same(p, i, s)) {
            /* what its description read is as in the model: the model's (describe.c) */
            if ((st = step_like(plan, js, like, ls)))
                return st;
            continue;
        }
        if (sc->refnode[s] >= 0) {
            st = jit_describe_ref(p, sc->refnode[s], js);
            if (f)
                fprintf(f, "reference: %%%d %s (the JIT does not compile %s yet)", (int)sc->refnode[s],
                        ir_ops[g->nodes[sc->refnode[s]].op].name, ir_ops[g->nodes[sc->refnode[s]].op].name);
        } else {
            p->like = ls && ls->kind == JIT_STEP_KERNEL ? &ls->desc : NULL;
            st = jit_describe_kernel(p, s, js);
            p->like = NULL;
            if (f)
                jit_explain_cluster(p, s, js, f);
            if (!st && p->reads && !jit_describe_record(p, s, js))
                st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
        }
        if (f)
            fclose(f);
        js->explain = text;
        if (!st && p->reads && !jit_ivec_push(p->reads_at, p->reads->n))
            st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
        if (st)
            return st;
    }
    for (int32_t i = 0; i < g->noutputs; i++) {
        int32_t n = g->outputs[i].node;
        const nodeinfo *ni = &p->ni[n];
        if (ni->loc.kind == JIT_LOC_OUTPUT && ni->loc.index == i)
            continue;
        jit_step *js = &plan->steps[plan->nsteps++];
        js->kind = JIT_STEP_COPY;
        js->from = ni->loc;
        js->to = (jit_loc){JIT_LOC_OUTPUT, i, 0, NULL};
        js->bytes = ir_type_bytes(&g->nodes[n].type);
        if (flags & JIT_F_EXPLAIN) {
            char buf[160];
            snprintf(buf, sizeof buf, "copy: output '%s' is %%%d, which lives elsewhere",
                     g->outputs[i].name, (int)n);
            js->explain = strdup(buf);
        }
    }
    plan->explained = flags & JIT_F_EXPLAIN;
    if (flags & JIT_F_NO_KERNELS)
        return KILN_OK;

    /* contractions: a constant B is packed now, once; the rest at run time, in room after
     * the temporaries (steps run one at a time, so they share it) */
    size_t pack_at = (plan->temp_bytes + 63) & ~(size_t)63, pack_max = 0;
    for (int32_t i = 0; i < plan->nsteps; i++) {
        jit_step *js = &plan->steps[i];
        if (js->kind != JIT_STEP_KERNEL || js->desc.kind != JIT_KERNEL_CONTRACTION)
            continue;
        if (js->mm_loc[1].kind == JIT_LOC_CONST && js->total > 0 && (st = jit_contract_prepack(js)))
            return st;
        js->mm_pack_off = pack_at;
        size_t n = jit_contract_temp_bytes(js);
        if (n > pack_max)
            pack_max = n;
    }
    if (pack_max)
        plan->temp_bytes = pack_at + pack_max;

    /* compile: every description exists; the kernels the cache lacks become one LLVM
     * module (a plan made at new sizes first takes its model's kernels) */
    if ((st = choose_tier(plan, flags)))
        return st;
    if (like && like->nsteps == plan->nsteps) {
        for (int32_t i = 0; i < plan->nsteps; i++) {
            jit_step *js = &plan->steps[i];
            const jit_step *ls = &like->steps[i];
            /* (a step taken from the model shares its arrays: its description is the
             * model's but for a tier choose_tier changed) */
            bool taken = js->kind == JIT_STEP_KERNEL && ls->kind == JIT_STEP_KERNEL &&
                         js->desc.inst == ls->desc.inst && js->desc.tier == ls->desc.tier;
            if (js->kind == JIT_STEP_KERNEL && ls->kind == JIT_STEP_KERNEL && ls->kernel &&
                (taken || jit_kdesc_equal(&js->desc, &ls->desc))) {
                js->kernel = jit_kernel_retain(ls->kernel);
                plan->nkernels++;
                plan->nhits++;
                if (ls->core) { /* (the same description: the same core) */
                    js->core = jit_kernel_retain(ls->core);
                    plan->nkernels++;
                    plan->nhits++;
                }
            }
        }
    }
    return compile_kernels(plan, flags);
}

/* What resize.c keeps of a plan built from scratch to make the plans of the same graph at
 * other sizes: the planner's state after fuse and schedule (moved out of p and sc). */
static kiln_status
keep_model(const kiln_graph *g0, kiln_mode mode, unsigned flags, jit_plan *plan, planner *p,
           jit_sched *sc, jit_simplify_rec *sr, jit_plan_model **keep)
{
    jit_plan_model *m = ir_calloc(1, sizeof *m);
    if (!m)
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
    atomic_store(&m->refs, 1);
    m->g0 = ir_graph_share(g0);
    m->mode = mode;
    m->flags = flags & JIT_F_PLAN;
    m->sr = *sr;
    memset(sr, 0, sizeof *sr);
    m->ni = p->ni;
    p->ni = NULL;
    m->cl = p->cl;
    m->ncl = p->ncl;
    p->cl = NULL;
    p->ncl = 0;
    m->sc = *sc;
    memset(sc, 0, sizeof *sc);
    m->reads = *p->reads;
    m->reads_at = *p->reads_at;
    memset(p->reads, 0, sizeof *p->reads);
    memset(p->reads_at, 0, sizeof *p->reads_at);
    m->plan = jit_plan_retain(plan);
    *keep = m;
    return KILN_OK;
}

kiln_status
jit_plan_build(const kiln_graph *g0, kiln_mode mode, unsigned flags, jit_plan **out,
               jit_plan_model **keep)
{
    kiln_status st;
    planner pl = {0};
    planner *p = &pl;
    jit_sched sc = {0};
    jit_simplify_rec sr = {0};
    ivec reads = {0}, reads_at = {0};
    jit_plan *plan = ir_calloc(1, sizeof *plan);
    *out = NULL;
    if (keep)
        *keep = NULL;
    if (!plan)
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
    atomic_store(&plan->refs, 1);
    if ((st = jit_simplify(g0, &plan->g, flags & JIT_F_EXPLAIN ? &plan->simplify_log : NULL,
                           keep ? &sr : NULL)))
        goto fail;
    const kiln_graph *g = plan->g;
    p->g = g;
    p->mode = mode;
    p->flags = flags;
    p->ni = ir_calloc((size_t)g->nnodes, sizeof *p->ni);
    if (keep && sr.map && !(flags & (JIT_F_EXPLAIN | JIT_F_NO_KERNELS))) {
        p->reads = &reads; /* (a plan to be kept as a model) */
        p->reads_at = &reads_at;
    }
    if (flags & JIT_F_EXPLAIN)
        p->why = ir_calloc((size_t)g->nnodes + 1, sizeof *p->why);
    if (!p->ni || ((flags & JIT_F_EXPLAIN) && !p->why)) {
        st = ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
        goto fail;
    }
    if ((st = jit_fuse(p)) || (st = jit_schedule(p, &sc)) || (st = plan_steps(p, &sc, plan, flags, NULL)))
        goto fail;
    if (keep && sr.map && !(flags & (JIT_F_EXPLAIN | JIT_F_NO_KERNELS)) &&
        (st = keep_model(g0, mode, flags, plan, p, &sc, &sr, keep)))
        goto fail;
    *out = plan;
    plan = NULL;
fail:
    jit_plan_free(plan);
    jit_sched_free(&sc);
    jit_simplify_rec_free(&sr);
    for (int32_t c = 0; c < p->ncl; c++)
        ir_free(p->cl[c].members);
    ir_free(p->cl);
    ir_free(p->ni);
    ir_free(p->why);
    ir_free(reads.v);
    ir_free(reads_at.v);
    jit_describe_free(p);
    return st;
}

kiln_status
jit_plan_resized(const jit_plan_model *m, const kiln_graph *gs, nodeinfo *ni, cluster *cl,
                 unsigned flags, jit_plan **out)
{
    planner pl = {0};
    planner *p = &pl;
    p->g = gs;
    p->mode = m->mode;
    p->flags = flags;
    p->ni = ni;
    p->cl = cl;
    p->ncl = m->ncl;
    p->model = m;
    jit_sched sc = m->sc;
    kiln_status st;
    *out = NULL;
    if (!jit_fuse_resize(p))
        return KILN_OK;
    if ((st = jit_schedule_place(p, &sc)))
        return st;
    jit_plan *plan = ir_calloc(1, sizeof *plan);
    if (!plan)
        return ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
    atomic_store(&plan->refs, 1);
    plan->g = (kiln_graph *)gs;
    st = plan_steps(p, &sc, plan, flags, m->plan);
    jit_describe_free(p);
    if (st) {
        plan->g = NULL; /* the caller's */
        jit_plan_free(plan);
        return st;
    }
    *out = plan;
    return KILN_OK;
}

static const char *
loc_str(const jit_loc *l, char *buf, size_t n)
{
    switch (l->kind) {
    case JIT_LOC_INPUT: snprintf(buf, n, "input %d", (int)l->index); break;
    case JIT_LOC_OUTPUT: snprintf(buf, n, "output %d", (int)l->index); break;
    case JIT_LOC_CONST: snprintf(buf, n, "constant"); break;
    case JIT_LOC_TEMP: snprintf(buf, n, "temp+%zu", l->offset); break;
    }
    return buf;
}

/* Parameter j of kernel step s: its dtype and value. */
static const char *
param_str(const jit_step *s, int j, char *buf, size_t n)
{
    kiln_dtype t = KILN_DTYPE_I64;
    for (int32_t i = 0; i < s->desc.ninst; i++)
        if (s->desc.inst[i].kind == JIT_PARAM && s->desc.inst[i].slot == j)
            t = (kiln_dtype)s->desc.inst[i].dtype;
    if (ir_dtype_is_float(t))
        snprintf(buf, n, "%s %.*g", kiln_dtype_name(t), t == KILN_DTYPE_F32 ? 9 : 17,
                 ir_scalar_f64(t, &s->params[j]));
    else
        snprintf(buf, n, "%s %lld", kiln_dtype_name(t),
                 (long long)ir_scalar_i64(KILN_DTYPE_I64, &s->params[j]));
    return buf;
}

kiln_status
jit_plan_explained(const jit_plan *p, const kiln_graph *g0, kiln_mode mode, unsigned flags,
                   jit_plan **ex)
{
    *ex = NULL;
    if (p->explained)
        return KILN_OK;
    kiln_status st = jit_plan_build(g0, mode, (flags & JIT_F_PLAN) | JIT_F_EXPLAIN | JIT_F_NO_KERNELS, ex, NULL);
    if (!st && (*ex)->nsteps != p->nsteps) { /* cannot happen: planning is deterministic */
        int n = (*ex)->nsteps;
        jit_plan_free(*ex);
        *ex = NULL;
        return ir_error(KILN_ERR_INTERNAL, "kiln_program_dump: internal error: the plan "
                                           "explained has %d steps, not %d", n, p->nsteps);
    }
    return st;
}

kiln_status
jit_plan_dump(const jit_plan *p, const kiln_graph *g0, kiln_mode mode, unsigned flags, FILE *f)
{
    jit_plan *ex;
    kiln_status st = jit_plan_explained(p, g0, mode, flags, &ex);
    if (st)
        return st;
    char b1[64];
    fprintf(f, "plan: %d steps, %d kernels (%d from the cache), %zu bytes of temporaries\n",
            p->nsteps, p->nkernels, p->nhits, p->temp_bytes);
    if (p->compact)
        fprintf(f, "compact code: elementwise kernels with out-of-line vector math, one masked "
                   "body, LLVM's fast code generator (more than %d distinct instructions, or "
                   "KILN_CODE_COMPACT)\n", COMPACT_MIN_INST);
    const char *log = ex ? ex->simplify_log : p->simplify_log;
    if (log)
        fputs(log, f);
    for (int i = 0; i < p->nsteps; i++) {
        const jit_step *s = &p->steps[i];
        const char *why = ex ? ex->steps[i].explain : s->explain;
        fprintf(f, "step %d: %s\n", i, why ? why : "");
        if (s->kind == JIT_STEP_COPY) {
            char b2[64];
            fprintf(f, "      %zu bytes of %s", s->bytes, loc_str(&s->from, b1, sizeof b1));
            if (s->from_off)
                fprintf(f, " from its byte %zu", s->from_off);
            fprintf(f, " to %s\n", loc_str(&s->to, b2, sizeof b2));
        }
        if (s->kind == JIT_STEP_KERNEL) {
            fprintf(f, "      %lld elements, rank %d, %d loads, %d stores, %d instructions\n",
                    (long long)s->total, (int)s->desc.rank, (int)s->desc.nloads,
                    (int)s->desc.nstores, (int)s->desc.ninst);
            jit_kernel_schedule_dump(&s->desc, f);
            for (int k = 0; k < s->nslots; k++) {
                int j = k - s->desc.nloads;
                bool nt = j >= 0 && s->desc.store_cls && s->desc.store_cls[j] == JIT_ST_STREAM;
                fprintf(f, "      %s %d: %s%s", j < 0 ? "load " : "store", j < 0 ? k : j,
                        loc_str(&s->slot[k], b1, sizeof b1),
                        nt ? ", streaming (non-temporal stores: no later step reads it)" : "");
                if (j >= 0 && jit_kdesc_store_ranged(&s->desc, j)) {
                    int r = jit_kdesc_range_param(&s->desc, j);
                    fprintf(f, ", elements [%lld, %lld) of the space only (params %d, %d)",
                            (long long)ir_scalar_i64(KILN_DTYPE_I64, &s->params[r]),
                            (long long)ir_scalar_i64(KILN_DTYPE_I64, &s->params[r + 1]), r, r + 1);
                }
                fputc('\n', f);
            }
            for (int j = 0; j < s->desc.nparams; j++)
                fprintf(f, "      param %d: %s (a run-time argument, not compiled in)\n", j,
                        param_str(s, j, b1, sizeof b1));
        }
    }
    jit_plan_free(ex);
    return KILN_OK;
}
