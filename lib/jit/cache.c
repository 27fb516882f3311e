/* cache.c — compiled kernels keyed by their description.  A description holds no sizes,
 * so a graph captured again, or captured with other sizes but the same dtypes, ranks and
 * broadcast pattern, finds its kernels here and does no LLVM work.  The host CPU is
 * fixed for the life of the process, so it needs no place in the in-memory key.
 *
 *   jit_kernels_get(descriptions of a plan)
 *     1. each description's key (jit_kdesc_serialise) is looked up in the jit_lru without
 *        waiting: hit, miss (a pending entry is now ours), or busy (another thread is
 *        compiling it);
 *     2. our misses become one batch of modules (at most MODULES_MAX, balanced by a
 *        guess of their cost) and one disk cache entry (disk.c) that holds the objects of
 *        all of them: loaded from it when it is there, else every module is lowered,
 *        then all are optimised and code-generated in parallel on the thread pool, then
 *        linked one by one (and the entry written); the kernels are published
 *        (jit_lru_fill) and waiters wake;
 *     3. only then the busy keys are waited for (a thread never waits while it holds
 *        pending keys, so two threads cannot wait for each other).
 *
 * Kernel symbols are named after the batch's content (the BLAKE3 hash of its disk key),
 * so an object from the disk cache defines the names a compile would have.  A cached
 * batch is never in the JIT twice: its kernels stay cached while any of them is held, so
 * a second compile of the same module cannot happen.  Kernels compiled past the cache
 * (KILN_NO_CACHE, dumps, KILN_TEST_PERTURB) get a process-wide serial instead: the same
 * module may then be compiled again while its old code lives, and one LLJIT must never
 * see a name twice.
 *
 * The machine code of a batch is shared by its kernels and freed with the last of them
 * (code_obj).  The cache keeps at most CACHE_ENTRIES kernels and CACHE_BYTES bytes of
 * object code (a batch's size split evenly among its kernels), evicting the least
 * recently used kernels no program holds. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit.h"

#define CACHE_ENTRIES 1024
#define CACHE_BYTES ((size_t)64 << 20)

/* The machine code of one batch of kernels (one disk cache entry): one code object per
 * module. */
typedef struct code_obj {
    void **codes;
    int ncodes;
    size_t bytes; /* object code */
    _Atomic int refs;
} code_obj;

struct jit_kernel {
    jit_lru_entry *entry; /* NULL: not cached, freed when refs reaches 0 */
    _Atomic int refs;     /* uncached kernels only */
    /* the entry point: the first tier's until the background thread stores the full
     * code's (KILN_TIERED); runs read it once per run (jit_kernel_entry) */
    _Atomic(jit_kernel_fn) fn;
    code_obj *code;
    code_obj *full; /* KILN_TIERED: the full code, once made (the first tier's stays in
                     * `code` to the end: a run may still be in it) */
    char *dumps[3];
};

typedef struct kkey {
    size_t len;
    unsigned char bytes[];
} kkey;

static _Atomic uint64_t n_compiles, n_serial, n_tierups;

static bool
key_equal(const void *a, const void *b)
{
    const kkey *x = a, *y = b;
    return x->len == y->len && memcmp(x->bytes, y->bytes, x->len) == 0;
}

static void
code_release(code_obj *c)
{
    if (c && atomic_fetch_sub(&c->refs, 1) == 1) {
        for (int g = 0; g < c->ncodes; g++)
            jit_lower_free_code(c->codes[g]);
        ir_free(c->codes);
        ir_free(c);
    }
}

static void
kernel_destroy(void *v)
{
    jit_kernel *k = v;
    code_release(k->code);
    code_release(k->full);
    for (int i = 0; i < 3; i++)
        free(k->dumps[i]);
    ir_free(k);
}

static const jit_lru_ops kernel_ops = {key_equal, ir_free, kernel_destroy};
static jit_lru cache = JIT_LRU_INIT(&kernel_ops, CACHE_ENTRIES, CACHE_BYTES);

/* The in-memory key of d; NULL when out of memory. */
static kkey *
make_key(const jit_kdesc *d, uint64_t *h)
{
    jit_buf b = {0};
    jit_kdesc_serialise(d, &b);
    kkey *k = b.failed ? NULL : ir_malloc(sizeof *k + b.len);
    if (k) {
        k->len = b.len;
        memcpy(k->bytes, b.data, b.len);
        *h = ir_hash_bytes(0x6b65726e656cull, b.data, b.len);
    }
    jit_buf_free(&b);
    return k;
}

static kiln_status
nomem(void)
{
    return ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
}

/* A plan's kernels are split into at most this many modules, code-generated in parallel
 * on the thread pool.  A fixed number, not the pool's size, so that the modules (and the
 * disk cache entry that holds their objects) are the same whatever the thread count. */
#define MODULES_MAX 4

/* A rough guess of a kernel's code generation cost, for balancing the modules: the
 * instructions, more for the loops of reductions and contractions. */
static int
kernel_weight(const jit_kdesc *d)
{
    int w = 10 + 3 * d->ninst + (d->kind == JIT_KERNEL_ELEMENTWISE ? 0 : 20);
    return d->tier == JIT_TIER_COMPACT ? (w + 3) / 4 : w; /* the fast code generator */
}

/* Group n descriptions into ng modules: the heaviest first, each to the lightest module
 * so far (ties: the lowest index); grp[i] is d[i]'s module.  A module is generated at one
 * optimisation level, so compact kernels never share one with full ones: when a batch
 * has both, modules [0, gc) take the compact ones and [gc, ng) the rest, gc in proportion
 * to their weights (every module gets at least one kernel: ng <= n). */
static void
group(int n, const jit_kdesc *const *d, int ng, int *grp, int *order, long *load)
{
    long wt[2] = {0, 0};
    int cnt[2] = {0, 0};
    for (int i = 0; i < n; i++) {
        order[i] = i;
        int t = d[i]->tier == JIT_TIER_COMPACT;
        wt[t] += kernel_weight(d[i]);
        cnt[t]++;
    }
    for (int i = 1; i < n; i++) /* insertion sort by weight, descending, stable */
        for (int j = i; j > 0 && kernel_weight(d[order[j]]) > kernel_weight(d[order[j - 1]]); j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int gc = cnt[1] == 0 ? 0 : cnt[0] == 0 ? ng : (int)((ng * wt[1] + (wt[0] + wt[1]) / 2) / (wt[0] + wt[1]));
    if (cnt[1] && cnt[0]) {
        if (gc < 1)
            gc = 1;
        if (gc > cnt[1])
            gc = cnt[1];
        if (gc > ng - 1)
            gc = ng - 1;
        if (ng - gc > cnt[0])
            gc = ng - cnt[0];
    }
    for (int g = 0; g < ng; g++)
        load[g] = 0;
    for (int k = 0; k < n; k++) {
        bool c = d[order[k]]->tier == JIT_TIER_COMPACT;
        int lo = c ? 0 : gc, hi = c ? gc : ng, best = lo;
        for (int g = lo + 1; g < hi; g++)
            if (load[g] < load[best])
                best = g;
        grp[order[k]] = best;
        load[best] += kernel_weight(d[order[k]]);
    }
}

/* A disk entry holds the objects of a batch's modules: OBJS_MAGIC, a u32 count, a u64
 * length per object, then the objects. */
static const char OBJS_MAGIC[8] = "kobjs\1\0";

/* One module of a batch: its kernels (indices into the batch, ascending) and names. */
typedef struct modjob {
    int n;
    int *idx;
    const jit_kdesc **d;
    const char **np;
    jit_module *m; /* lowered, not yet linked */
    void *obj;     /* its object code, for the disk cache */
    size_t obj_len;
} modjob;

/* Load the entry's objects, one per module; false (nothing loaded) if any does not link
 * or the entry is not ng objects. */
static bool
load_objects(const unsigned char *p, size_t len, modjob *jobs, int ng, code_obj *co,
             jit_kernel **ks)
{
    size_t head = sizeof OBJS_MAGIC + 4 + 8 * (size_t)ng;
    uint32_t count;
    if (len < head || memcmp(p, OBJS_MAGIC, sizeof OBJS_MAGIC) != 0)
        return false;
    memcpy(&count, p + sizeof OBJS_MAGIC, 4);
    if (count != (uint32_t)ng)
        return false;
    size_t at = head;
    for (int g = 0; g < ng; g++) {
        uint64_t l;
        memcpy(&l, p + sizeof OBJS_MAGIC + 4 + 8 * (size_t)g, 8);
        if (l > len - at)
            goto fail;
        void **addrs = ir_calloc((size_t)jobs[g].n, sizeof *addrs);
        bool ok = addrs && jit_object_load(p + at, (size_t)l, jobs[g].np[0], jobs[g].n,
                                           jobs[g].np, addrs, &co->codes[g]) == KILN_OK;
        for (int k = 0; ok && k < jobs[g].n; k++) {
            jit_kernel_fn f;
            memcpy(&f, &addrs[k], sizeof f); /* object to function, as dlsym */
            atomic_store_explicit(&ks[jobs[g].idx[k]]->fn, f, memory_order_relaxed);
        }
        ir_free(addrs);
        if (!ok)
            goto fail;
        at += (size_t)l;
    }
    if (at == len)
        return true;
fail:
    for (int g = 0; g < ng; g++) {
        jit_lower_free_code(co->codes[g]);
        co->codes[g] = NULL;
    }
    return false;
}

/* The disk entry of the compiled modules' objects; false when out of memory. */
static bool
pack_objects(const modjob *jobs, int ng, jit_buf *out)
{
    jit_buf_put(out, OBJS_MAGIC, sizeof OBJS_MAGIC);
    uint32_t count = (uint32_t)ng;
    jit_buf_put(out, &count, 4);
    for (int g = 0; g < ng; g++) {
        uint64_t l = jobs[g].obj_len;
        jit_buf_put(out, &l, 8);
    }
    for (int g = 0; g < ng; g++)
        if (!jobs[g].obj || !jit_buf_put(out, jobs[g].obj, jobs[g].obj_len))
            return false;
    return !out->failed;
}

/* Lower every module, generate them in parallel, link them one by one; the first error
 * wins (the other modules are still freed or linked, and freed with the batch). */
static kiln_status
compile_modules(modjob *jobs, int ng, unsigned flags, bool want_obj, bool quick, code_obj *co,
                jit_kernel **ks)
{
    kiln_status st = KILN_OK;
    jit_module **gen = ir_calloc((size_t)ng, sizeof *gen);
    if (!gen)
        return nomem();
    for (int g = 0; g < ng && !st; g++)
        if (!(st = jit_module_lower(jobs[g].n, jobs[g].d, jobs[g].np, flags & JIT_F_DUMPS,
                                    want_obj, quick, &jobs[g].m)))
            gen[g] = jobs[g].m;
    if (!st)
        jit_modules_generate(ng, gen);
    ir_free(gen);
    for (int g = 0; g < ng; g++) {
        jit_module *m = jobs[g].m;
        jobs[g].m = NULL;
        if (!m)
            continue;
        if (st) {
            jit_module_free(m);
            continue;
        }
        jit_kernel_fn fns[16], *fn = jobs[g].n <= 16 ? fns : ir_calloc((size_t)jobs[g].n, sizeof *fn);
        if (!fn) {
            jit_module_free(m);
            st = nomem();
            continue;
        }
        st = jit_module_link(m, fn, &co->codes[g],
                             flags & JIT_F_DUMPS ? ks[jobs[g].idx[0]]->dumps : NULL,
                             want_obj ? &jobs[g].obj : NULL, &jobs[g].obj_len);
        for (int k = 0; !st && k < jobs[g].n; k++)
            atomic_store_explicit(&ks[jobs[g].idx[k]]->fn, fn[k], memory_order_relaxed);
        if (fn != fns)
            ir_free(fn);
    }
    return st;
}

/* ---- KILN_TIERED: a quick first tier now, the full code from the background thread ----
 *
 * A batch that must be compiled (not in memory, not on disk) is lowered twice: the first
 * tier's modules are lowered and generated at once, in parallel, with LLVM's fast code
 * generator after the full optimiser (about half the time; slower loops), and their
 * kernels are published; the full modules go to the background thread (background.c),
 * which lowers, generates and links them one by one, stores each kernel's full entry
 * point in place of the first tier's, and writes the disk cache entry (full code only: a
 * later process loads that).  The descriptions belong to the caller's plan: the job holds
 * a reference to that plan (jit_plan_retain) until it ends, rather than a copy of them (a
 * reduction's description owns its schedule, a tree of arrays; the plan is reference
 * counted already, and a job keeps it for tens of milliseconds), so the caller lowers
 * nothing twice.  Both tiers are the same IR, optimised the same way, so a kernel's
 * results are the same bits before and after (check_cache `test_tiered`).  The first
 * tier's code stays until the kernel is freed: a run may still be in it when the full code
 * arrives. */
typedef struct tierup {
    jit_job job;        /* first: background.c's handle */
    int n, ng;
    modjob *jobs;       /* the full modules' kernels (jobs[g].d: the plan's descriptions) */
    char (*names)[64];  /* the full code's kernel names (jobs[g].np point here) */
    jit_plan *plan;     /* the plan whose descriptions jobs[g].d are: one reference */
    jit_kernel **ks;    /* the batch's kernels, one reference each (jit_kernels_get) */
    bool use_disk;
    jit_disk disk;
    uint8_t digest[32];
    jit_buf key;
} tierup;

static void
modjobs_free(modjob *jobs, int ng)
{
    for (int g = 0; jobs && g < ng; g++) {
        jit_module_free(jobs[g].m);
        ir_free(jobs[g].idx);
        ir_free(jobs[g].d);
        ir_free(jobs[g].np);
        free(jobs[g].obj);
    }
    ir_free(jobs);
}

static void
tierup_free(tierup *t)
{
    for (int i = 0; t->ks && i < t->n; i++)
        jit_kernel_release(t->ks[i]);
    ir_free(t->ks);
    modjobs_free(t->jobs, t->ng);
    ir_free(t->names);
    jit_plan_free(t->plan);
    jit_buf_free(&t->key);
    ir_free(t);
}

static void
tierup_cancel(jit_job *j)
{
    tierup_free((tierup *)j);
}

/* The background thread's job: lower, generate and link the full modules; only when all
 * of them linked are the kernels switched to them (else they keep their first tier, which
 * gives the same results). */
static void
tierup_run(jit_job *j)
{
    tierup *t = (tierup *)j;
    code_obj *co = ir_calloc(1, sizeof *co);
    jit_kernel_fn *fn = ir_calloc((size_t)t->n, sizeof *fn);
    bool ok = co && fn && (co->codes = ir_calloc((size_t)t->ng, sizeof *co->codes));
    for (int g = 0; g < t->ng; g++) {
        modjob *mj = &t->jobs[g];
        jit_module *m = NULL;
        jit_kernel_fn *f = ok ? ir_calloc((size_t)mj->n, sizeof *f) : NULL;
        if (!f || jit_module_lower(mj->n, mj->d, mj->np, false, t->use_disk, false, &m)) {
            ok = false;
            ir_free(f);
            continue;
        }
        jit_module_generate(m);
        ok = jit_module_link(m, f, &co->codes[g], NULL, t->use_disk ? &mj->obj : NULL,
                             &mj->obj_len) == KILN_OK;
        for (int k = 0; ok && k < mj->n; k++)
            fn[mj->idx[k]] = f[k];
        ir_free(f);
    }
    if (ok) {
        co->ncodes = t->ng;
        for (int g = 0; g < t->ng; g++)
            co->bytes += t->jobs[g].obj_len;
        atomic_store(&co->refs, t->n);
        for (int i = 0; i < t->n; i++) {
            t->ks[i]->full = co;
            atomic_store_explicit(&t->ks[i]->fn, fn[i], memory_order_release);
        }
        atomic_fetch_add(&n_tierups, (uint64_t)t->n);
        jit_buf entry = {0};
        if (t->use_disk && pack_objects(t->jobs, t->ng, &entry))
            jit_disk_store(&t->disk, t->digest, &t->key, entry.data, entry.len);
        jit_buf_free(&entry);
    } else if (co) {
        for (int g = 0; co->codes && g < t->ng; g++)
            jit_lower_free_code(co->codes[g]);
        ir_free(co->codes);
        ir_free(co);
    }
    ir_free(fn);
    tierup_free(t);
}

/* The first tier's modules, one pool task each: lowered (a module has an LLVM context of
 * its own, and lowering changes nothing shared), generated and linked (under the JIT's
 * lock, while the other tasks generate), so that no part of it runs on the caller's
 * thread alone.  A task's error (status and message: the message is the worker's) is
 * kept for the caller; the first module's error wins. */
typedef struct quick_ctx {
    modjob *q;
    code_obj *co;
    jit_kernel **ks;
    kiln_status *st;
    char **msg;
} quick_ctx;

static void
quick_one(void *ctx, int64_t gi)
{
    quick_ctx *c = ctx;
    modjob *q = &c->q[gi];
    jit_module *m = NULL;
    jit_kernel_fn fns[16], *fn = q->n <= 16 ? fns : ir_calloc((size_t)q->n, sizeof *fn);
    kiln_status st = fn ? jit_module_lower(q->n, q->d, q->np, false, true, true, &m) : nomem();
    if (!st) {
        jit_module_generate(m);
        st = jit_module_link(m, fn, &c->co->codes[gi], NULL, &q->obj, &q->obj_len);
    }
    for (int k = 0; !st && k < q->n; k++)
        atomic_store_explicit(&c->ks[q->idx[k]]->fn, fn[k], memory_order_relaxed);
    if (fn && fn != fns)
        ir_free(fn);
    if (st) {
        c->st[gi] = st;
        c->msg[gi] = strdup(kiln_errmsg());
    }
}

/* The first tier of a batch into co and ks (as compile_modules does the full code). */
static kiln_status
compile_tiered(modjob *jobs, int ng, int n, const char (*names)[64], code_obj *co,
               jit_kernel **ks)
{
    kiln_status st = KILN_OK;
    /* the first tier under names of its own: one JIT never sees a name twice */
    char (*qn)[64] = ir_calloc((size_t)n, sizeof *qn);
    modjob *q = ir_calloc((size_t)ng, sizeof *q);
    kiln_status *qst = ir_calloc((size_t)ng, sizeof *qst);
    char **msg = ir_calloc((size_t)ng, sizeof *msg);
    if (!qn || !q || !qst || !msg)
        st = nomem();
    for (int g = 0; g < ng && !st; g++) {
        q[g] = (modjob){.n = jobs[g].n, .idx = jobs[g].idx, .d = jobs[g].d};
        if (!(q[g].np = ir_calloc((size_t)jobs[g].n, sizeof *q[g].np))) {
            st = nomem();
            break;
        }
        for (int k = 0; k < jobs[g].n; k++) {
            int i = jobs[g].idx[k];
            snprintf(qn[i], sizeof qn[i], "%.60s_q", names[i]);
            q[g].np[k] = qn[i];
        }
    }
    if (!st) {
        quick_ctx c = {q, co, ks, qst, msg};
        jit_pool_run(quick_one, &c, ng);
        for (int g = 0; g < ng && !st; g++)
            if (qst[g])
                st = msg[g] ? ir_error(qst[g], "%s", msg[g]) : nomem();
    }
    for (int g = 0; q && g < ng; g++) {
        co->bytes += q[g].obj_len; /* the cache weighs the first tier's code */
        ir_free(q[g].np);
        free(q[g].obj);
    }
    for (int g = 0; msg && g < ng; g++)
        free(msg[g]);
    ir_free(q);
    ir_free(qn);
    ir_free(qst);
    ir_free(msg);
    return st;
}

/* The n descriptions d[] as one batch: one disk cache entry, in modules (one per kernel
 * with `each`, else at most MODULES_MAX) whose objects are loaded from that entry, or
 * lowered, code-generated in parallel and linked.  On success ks[i] are new kernels
 * (uncached, refs 1) sharing the batch's code.  With tu (JIT_F_TIERED, cached kernels
 * only; `plan` the plan d[] belong to), a batch that is compiled gets its first tier, and
 * *tu the job that makes its full code (holding a reference to `plan`; its ks[] for the
 * caller to fill and retain before submitting it); *tu stays NULL when the batch came
 * from the disk. */
static kiln_status
build_modules(int n, const jit_kdesc *const *d, unsigned flags, bool each, jit_kernel **ks,
              jit_plan *plan, tierup **tu)
{
    bool cacheable = !(flags & (JIT_F_DUMPS | JIT_F_NOCACHE));
    int ng = each || n < MODULES_MAX ? n : MODULES_MAX;
    modjob *jobs = ir_calloc((size_t)ng, sizeof *jobs);
    char (*names)[64] = ir_calloc((size_t)n, sizeof *names);
    int *grp = ir_calloc((size_t)n, sizeof *grp), *order = ir_calloc((size_t)n, sizeof *order);
    long *load = ir_calloc((size_t)ng, sizeof *load);
    code_obj *co = ir_calloc(1, sizeof *co);
    jit_buf key = {0}, entry = {0};
    void *data = NULL;
    kiln_status st = KILN_OK;
    tierup *t = NULL;
    for (int i = 0; i < n; i++)
        ks[i] = NULL;
    if (tu)
        *tu = NULL;
    if (!jobs || !names || !grp || !order || !load || !co ||
        !(co->codes = ir_calloc((size_t)ng, sizeof *co->codes))) {
        st = nomem();
        goto done;
    }
    co->ncodes = ng;
    group(n, d, ng, grp, order, load);
    for (int i = 0; i < n; i++)
        jobs[grp[i]].n++;
    for (int g = 0; g < ng; g++) {
        size_t k = (size_t)jobs[g].n;
        jobs[g].idx = ir_calloc(k, sizeof *jobs[g].idx);
        jobs[g].d = ir_calloc(k, sizeof *jobs[g].d);
        jobs[g].np = ir_calloc(k, sizeof *jobs[g].np);
        if (!jobs[g].idx || !jobs[g].d || !jobs[g].np) {
            st = nomem();
            goto done;
        }
        jobs[g].n = 0;
    }
    uint8_t digest[32] = {0};
    char base[48];
    if (cacheable) {
        jit_disk_module_key(n, d, &key);
        jit_buf_u32(&key, (uint32_t)ng); /* the objects in the entry */
        if (key.failed) {
            st = nomem();
            goto done;
        }
        jit_disk_digest(key.data, key.len, digest);
        snprintf(base, sizeof base, "kiln_");
        for (int i = 0; i < 8; i++)
            snprintf(base + 5 + 2 * i, 3, "%02x", digest[i]);
    } else {
        snprintf(base, sizeof base, "kiln_u%llu",
                 (unsigned long long)atomic_fetch_add(&n_serial, 1));
    }
    for (int i = 0; i < n; i++) {
        modjob *job = &jobs[grp[i]];
        snprintf(names[i], sizeof names[i], "%s_%d", base, i);
        job->idx[job->n] = i;
        job->np[job->n] = names[i];
        job->d[job->n++] = d[i];
        if (!(ks[i] = ir_calloc(1, sizeof *ks[i]))) {
            st = nomem();
            goto done;
        }
    }

    jit_disk disk;
    bool use_disk = cacheable && !(flags & JIT_F_NODISK) && jit_disk_for_compile(&disk);
    const void *cached = NULL;
    size_t len = 0;
    if (use_disk && jit_disk_load(&disk, digest, &key, &data, &cached, &len) == JIT_DISK_HIT) {
        if (load_objects(cached, len, jobs, ng, co, ks)) {
            co->bytes = len;
            goto publish;
        }
        jit_disk_unusable(&disk); /* passed its checks, did not link: compiled anew */
    }
    bool any_full = false; /* compact code is the first tier's already */
    for (int i = 0; i < n; i++)
        any_full |= d[i]->tier != JIT_TIER_COMPACT;
    if (tu && cacheable && any_full) {
        if (!(t = ir_calloc(1, sizeof *t)) || !(t->ks = ir_calloc((size_t)n, sizeof *t->ks))) {
            st = nomem();
            goto done;
        }
        if ((st = compile_tiered(jobs, ng, n, (const char (*)[64])names, co, ks)))
            goto done;
        atomic_fetch_add(&n_compiles, (uint64_t)n);
        /* the full modules, their names and the disk entry's key go with the job */
        t->job.run = tierup_run;
        t->job.cancel = tierup_cancel;
        t->n = n;
        t->ng = ng;
        t->jobs = jobs;
        t->names = names;
        t->plan = jit_plan_retain(plan);
        t->use_disk = use_disk;
        if (use_disk)
            t->disk = disk;
        memcpy(t->digest, digest, sizeof digest);
        t->key = key;
        jobs = NULL;
        names = NULL;
        key = (jit_buf){0};
        *tu = t;
        t = NULL;
        goto publish;
    }
    if ((st = compile_modules(jobs, ng, flags, use_disk, false, co, ks)))
        goto done;
    atomic_fetch_add(&n_compiles, (uint64_t)n);
    for (int g = 0; g < ng; g++)
        co->bytes += jobs[g].obj_len;
    if (use_disk && pack_objects(jobs, ng, &entry))
        jit_disk_store(&disk, digest, &key, entry.data, entry.len);
publish:
    atomic_store(&co->refs, n);
    for (int i = 0; i < n; i++) {
        ks[i]->code = co;
        atomic_store(&ks[i]->refs, 1);
    }
    co = NULL;
done:
    if (st) {
        for (int i = 0; i < n; i++) {
            if (ks[i])
                for (int j = 0; j < 3; j++)
                    free(ks[i]->dumps[j]);
            ir_free(ks[i]);
            ks[i] = NULL;
        }
    }
    if (co) {
        for (int g = 0; g < co->ncodes; g++)
            jit_lower_free_code(co->codes[g]);
        ir_free(co->codes);
        ir_free(co);
    }
    if (t) {
        ir_free(t->ks);
        ir_free(t);
    }
    modjobs_free(jobs, ng);
    ir_free(names);
    ir_free(grp);
    ir_free(order);
    ir_free(load);
    ir_free(data);
    jit_buf_free(&key);
    jit_buf_free(&entry);
    return st;
}

/* Past the cache: every distinct description compiled (equal ones share a kernel), in
 * one batch, with one module per kernel with dumps (so each kernel's dumps are its own). */
static kiln_status
get_uncached(int n, const jit_kdesc *const *d, unsigned flags, jit_kernel **out)
{
    kiln_status st = KILN_OK;
    kkey **keys = ir_calloc((size_t)n, sizeof *keys);
    const jit_kdesc **ud = ir_calloc((size_t)n, sizeof *ud);
    int *first = ir_calloc((size_t)n, sizeof *first); /* i -> the distinct index */
    jit_kernel **uk = ir_calloc((size_t)n, sizeof *uk);
    int nu = 0;
    if (!keys || !ud || !first || !uk) {
        st = nomem();
        goto done;
    }
    for (int i = 0; i < n; i++) {
        uint64_t h;
        if (!(keys[i] = make_key(d[i], &h))) {
            st = nomem();
            goto done;
        }
        int j = 0;
        while (j < i && !key_equal(keys[j], keys[i]))
            j++;
        first[i] = j < i ? first[j] : nu;
        if (j == i)
            ud[nu++] = d[i];
    }
    if ((st = build_modules(nu, ud, flags, flags & JIT_F_DUMPS, uk, NULL, NULL)))
        goto done;
    /* one reference per user */
    for (int u = 0; u < nu; u++)
        atomic_store(&uk[u]->refs, 0);
    for (int i = 0; i < n; i++) {
        out[i] = uk[first[i]];
        atomic_fetch_add(&out[i]->refs, 1);
    }
done:
    if (st && uk)
        for (int u = 0; u < nu; u++)
            if (uk[u])
                kernel_destroy(uk[u]);
    for (int i = 0; keys && i < n; i++)
        ir_free(keys[i]);
    ir_free(keys);
    ir_free(ud);
    ir_free(first);
    ir_free(uk);
    return st;
}

kiln_status
jit_kernels_get(int n, const jit_kdesc *const *d, jit_plan *plan, unsigned flags,
                jit_kernel **out, bool *hit)
{
    /* perturbed test kernels (lower.c) must never be shared through a cache */
    if (*ir_config_get()->test_perturb)
        flags |= JIT_F_NOCACHE;
    for (int i = 0; i < n; i++) {
        out[i] = NULL;
        hit[i] = false;
    }
    if (flags & (JIT_F_NOCACHE | JIT_F_DUMPS))
        return get_uncached(n, d, flags, out);

    kiln_status st = KILN_OK;
    jit_lru_entry **pend = ir_calloc((size_t)n + 1, sizeof *pend);
    const jit_kdesc **pd = ir_calloc((size_t)n + 1, sizeof *pd);
    jit_kernel **pk = ir_calloc((size_t)n + 1, sizeof *pk);
    int *pi = ir_calloc((size_t)n + 1, sizeof *pi), *busy = ir_calloc((size_t)n + 1, sizeof *busy);
    int np = 0, nbusy = 0;
    if (!pend || !pd || !pk || !pi || !busy) {
        st = nomem();
        goto fail;
    }
    /* 1. what is cached, what is ours to compile, what another thread is compiling */
    for (int i = 0; i < n; i++) {
        uint64_t h;
        kkey *key = make_key(d[i], &h);
        jit_lru_entry *e;
        jit_lru_result r = key ? jit_lru_get(&cache, h, key, false, &e) : JIT_LRU_NOMEM;
        if (r != JIT_LRU_MISS)
            ir_free(key);
        if (r == JIT_LRU_NOMEM) {
            st = nomem();
            goto fail;
        } else if (r == JIT_LRU_HIT) {
            out[i] = jit_lru_value(e);
            hit[i] = true;
        } else if (r == JIT_LRU_MISS) {
            pend[np] = e;
            pd[np] = d[i];
            pi[np++] = i;
        } else {
            busy[nbusy++] = i;
        }
    }
    /* 2. our misses, in modules code-generated in parallel */
    if (np) {
        tierup *tu = NULL;
        st = build_modules(np, pd, flags, false, pk, plan,
                           flags & JIT_F_TIERED && plan ? &tu : NULL);
        if (st)
            goto fail;
        for (int j = 0; j < np; j++) {
            pk[j]->entry = pend[j];
            out[pi[j]] = pk[j];
            jit_lru_fill(&cache, pend[j], pk[j], pk[j]->code->bytes / (size_t)np);
            pend[j] = NULL;
            if (tu) {
                jit_lru_retain(&cache, pk[j]->entry);
                tu->ks[j] = pk[j];
            }
        }
        if (tu)
            jit_background_submit(&tu->job);
        np = 0;
    }
    /* 3. the keys other threads were compiling (or an equal description of this batch) */
    for (int b = 0; b < nbusy; b++) {
        int i = busy[b];
        uint64_t h;
        kkey *key = make_key(d[i], &h);
        jit_lru_entry *e;
        jit_lru_result r = key ? jit_lru_get(&cache, h, key, true, &e) : JIT_LRU_NOMEM;
        if (r != JIT_LRU_MISS)
            ir_free(key);
        if (r == JIT_LRU_NOMEM) {
            st = nomem();
            goto fail;
        }
        if (r == JIT_LRU_HIT) {
            out[i] = jit_lru_value(e);
            hit[i] = true;
            continue;
        }
        /* its compiler gave up: compile it here (and report our own error) */
        jit_kernel *k;
        if ((st = build_modules(1, &d[i], flags, false, &k, NULL, NULL)) != KILN_OK) {
            jit_lru_abandon(&cache, e);
            goto fail;
        }
        k->entry = e;
        out[i] = k;
        jit_lru_fill(&cache, e, k, k->code->bytes);
    }
    ir_free(pend);
    ir_free(pd);
    ir_free(pk);
    ir_free(pi);
    ir_free(busy);
    return KILN_OK;
fail:
    for (int j = 0; j < np; j++)
        if (pend[j])
            jit_lru_abandon(&cache, pend[j]);
    for (int i = 0; i < n; i++) {
        jit_kernel_release(out[i]);
        out[i] = NULL;
        hit[i] = false;
    }
    ir_free(pend);
    ir_free(pd);
    ir_free(pk);
    ir_free(pi);
    ir_free(busy);
    return st;
}

jit_kernel_fn
jit_kernel_entry(const jit_kernel *k)
{
    /* acquire: the full code's stores (its linking) happen before its entry is seen */
    return atomic_load_explicit(&((jit_kernel *)k)->fn, memory_order_acquire);
}

const char *
jit_kernel_dump(const jit_kernel *k, int what)
{
    return what >= 0 && what < 3 ? k->dumps[what] : NULL;
}

void
jit_kernel_release(jit_kernel *k)
{
    if (!k)
        return;
    if (k->entry)
        jit_lru_release(&cache, k->entry);
    else if (atomic_fetch_sub(&k->refs, 1) == 1)
        kernel_destroy(k);
}

/* kernels a plan at new sizes took from its model's plan (resize.c): counted as hits */
static _Atomic uint64_t n_retained;

jit_kernel *
jit_kernel_retain(jit_kernel *k)
{
    atomic_fetch_add(&n_retained, 1);
    if (k->entry)
        jit_lru_retain(&cache, k->entry);
    else
        atomic_fetch_add(&k->refs, 1);
    return k;
}

void
jit_cache_trim(void)
{
    jit_lru_trim(&cache);
}

void
jit_cache_counters(jit_cache_stats *s)
{
    jit_lru_stats ls;
    jit_lru_stats_get(&cache, &ls);
    s->compiles = atomic_load(&n_compiles);
    s->hits = ls.hits + atomic_load(&n_retained);
    s->entries = (uint64_t)ls.entries;
    s->bytes = ls.bytes;
    s->evictions = ls.evictions;
    s->waits = ls.waits;
    s->tierups = atomic_load(&n_tierups);
}
