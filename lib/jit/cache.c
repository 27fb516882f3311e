/* cache.c — compiled kernels keyed by their description.  A description holds no sizes,
 * so a graph captured again, or captured with other sizes but the same dtypes, ranks and
 * broadcast pattern, finds its kernels here and does no LLVM work.  The host CPU is
 * fixed for the life of the process, so it needs no place in the in-memory key.
 *
 *   jit_kernels_get(descriptions of a plan)
 *     1. each description's key (jit_kdesc_serialise) is looked up in the jit_lru without
 *        waiting: hit, miss (a pending entry is now ours), or busy (another thread is
 *        compiling it);
 *     2. our misses become one module: loaded from the disk cache (disk.c) when it has the
 *        module, else lowered, optimised and code-generated once (and written to disk);
 *        the kernels are published (jit_lru_fill) and waiters wake;
 *     3. only then the busy keys are waited for (a thread never waits while it holds
 *        pending keys, so two threads cannot wait for each other).
 *
 * Kernel symbols are named after the module's content (the BLAKE3 hash of its disk key),
 * so an object from the disk cache defines the names a compile would have.  A cached
 * module is never in the JIT twice: its kernels stay cached while any of them is held, so
 * a second compile of the same module cannot happen.  Kernels compiled past the cache
 * (KILN_NO_CACHE, dumps, KILN_TEST_PERTURB) get a process-wide serial instead: the same
 * module may then be compiled again while its old code lives, and one LLJIT must never
 * see a name twice.
 *
 * The machine code of a module is shared by its kernels and freed with the last of them
 * (code_obj).  The cache keeps at most CACHE_ENTRIES kernels and CACHE_BYTES bytes of
 * object code (a module's size split evenly among its kernels), evicting the least
 * recently used kernels no program holds. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit.h"

#define CACHE_ENTRIES 1024
#define CACHE_BYTES ((size_t)64 << 20)

/* The machine code of one module, shared by the kernels compiled in it. */
typedef struct code_obj {
    void *code;
    size_t bytes; /* object code */
    _Atomic int refs;
} code_obj;

struct jit_kernel {
    jit_lru_entry *entry; /* NULL: not cached, freed when refs reaches 0 */
    _Atomic int refs;     /* uncached kernels only */
    jit_kernel_fn fn;
    code_obj *code;
    char *dumps[3];
};

typedef struct kkey {
    size_t len;
    unsigned char bytes[];
} kkey;

static _Atomic uint64_t n_compiles, n_serial;

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
        jit_lower_free_code(c->code);
        ir_free(c);
    }
}

static void
kernel_destroy(void *v)
{
    jit_kernel *k = v;
    code_release(k->code);
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
    return ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
}

/* One module of the n descriptions d[]: from the disk cache or compiled.  On success ks[i]
 * are new kernels (uncached, refs 1) sharing the module's code. */
static kiln_status
build_module(int n, const jit_kdesc *const *d, unsigned flags, jit_kernel **ks)
{
    bool cacheable = !(flags & (JIT_F_DUMPS | JIT_F_NOCACHE));
    char (*names)[64] = ir_calloc((size_t)n, sizeof *names);
    const char **np = ir_calloc((size_t)n, sizeof *np);
    void **addrs = ir_calloc((size_t)n, sizeof *addrs);
    jit_kernel_fn *fns = ir_calloc((size_t)n, sizeof *fns);
    code_obj *co = ir_calloc(1, sizeof *co);
    jit_buf key = {0};
    void *obj = NULL, *data = NULL;
    size_t obj_len = 0;
    kiln_status st = KILN_OK;
    for (int i = 0; i < n; i++)
        ks[i] = NULL;
    if (!names || !np || !addrs || !fns || !co) {
        st = nomem();
        goto done;
    }
    for (int i = 0; i < n; i++)
        if (!(ks[i] = ir_calloc(1, sizeof *ks[i]))) {
            st = nomem();
            goto done;
        }
    uint8_t digest[32];
    char base[48];
    if (cacheable) {
        jit_disk_module_key(n, d, &key);
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
        snprintf(names[i], sizeof names[i], "%s_%d", base, i);
        np[i] = names[i];
    }
    jit_disk disk;
    bool use_disk = cacheable && !(flags & JIT_F_NODISK) && jit_disk_for_compile(&disk);
    const void *cached = NULL;
    bool loaded = false;
    if (use_disk && jit_disk_load(&disk, digest, &key, &data, &cached, &obj_len) == JIT_DISK_HIT) {
        loaded = jit_object_load(cached, obj_len, names[0], n, np, addrs, &co->code) == KILN_OK;
        if (!loaded)
            jit_disk_unusable(&disk); /* passed its checks, did not link: compiled anew */
    }
    if (loaded) {
        for (int i = 0; i < n; i++)
            memcpy(&ks[i]->fn, &addrs[i], sizeof ks[i]->fn); /* object to function, as dlsym */
    } else {
        st = jit_lower_compile(n, d, np, fns, &co->code,
                               flags & JIT_F_DUMPS ? ks[0]->dumps : NULL, use_disk ? &obj : NULL,
                               &obj_len);
        if (st)
            goto done;
        for (int i = 0; i < n; i++)
            ks[i]->fn = fns[i];
        atomic_fetch_add(&n_compiles, (uint64_t)n);
        if (use_disk && obj)
            jit_disk_store(&disk, digest, &key, obj, obj_len);
    }
    co->bytes = obj_len;
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
    ir_free(co);
    ir_free(names);
    ir_free(np);
    ir_free(addrs);
    ir_free(fns);
    ir_free(data);
    free(obj);
    jit_buf_free(&key);
    return st;
}

/* Past the cache: every distinct description compiled (equal ones share a kernel), in
 * one module, or one module per kernel with dumps (so each kernel's dumps are its own). */
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
    if (flags & JIT_F_DUMPS) {
        for (int u = 0; u < nu && !st; u++)
            st = build_module(1, &ud[u], flags, &uk[u]);
    } else {
        st = build_module(nu, ud, flags, uk);
    }
    if (st)
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
jit_kernels_get(int n, const jit_kdesc *const *d, unsigned flags, jit_kernel **out, bool *hit)
{
    /* perturbed test kernels (lower.c) must never be shared through a cache */
    const char *pert = getenv("KILN_TEST_PERTURB");
    if (pert && *pert)
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
    /* 2. our misses, in one module */
    if (np) {
        st = build_module(np, pd, flags, pk);
        if (st)
            goto fail;
        for (int j = 0; j < np; j++) {
            pk[j]->entry = pend[j];
            out[pi[j]] = pk[j];
            jit_lru_fill(&cache, pend[j], pk[j], pk[j]->code->bytes / (size_t)np);
            pend[j] = NULL;
        }
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
        if ((st = build_module(1, &d[i], flags, &k)) != KILN_OK) {
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
    return k->fn;
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
    s->hits = ls.hits;
    s->entries = (uint64_t)ls.entries;
    s->bytes = ls.bytes;
    s->evictions = ls.evictions;
    s->waits = ls.waits;
}
