/* cache.c — compiled kernels keyed by their description.  A description holds no sizes,
 * so a graph captured again, or captured with other sizes but the same dtypes, ranks and
 * broadcast pattern, finds its kernels here and does no LLVM work.  The host CPU is
 * fixed for the life of the process, so it needs no place in the key.
 *
 * Entries are reference counted (programs hold them); the cache keeps at most
 * CACHE_LIMIT entries, evicting the least recently used ones that no program holds. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit.h"

#define CACHE_LIMIT 1024

/* The machine code of one module, shared by the kernels compiled in it: freed when the
 * last of them goes. */
typedef struct code_obj {
    void *code;
    _Atomic int refs;
} code_obj;

struct jit_kernel {
    jit_kernel *prev, *next; /* LRU list, most recent first */
    uint64_t hash;
    size_t keylen;
    unsigned char *key;
    int refs; /* programs + (1 while cached) */
    bool cached;
    jit_kernel_fn fn;
    code_obj *code;
    char *dumps[3];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static jit_kernel *head, *tail;
static int count;
static _Atomic uint64_t n_compiles, n_hits, n_serial;

/* The description's bytes (every field fixed-size, unused ones zero). */
static unsigned char *
serialize(const jit_kdesc *d, size_t *len)
{
    int32_t h[7] = {d->kind, d->rank, d->nred, d->lanes_kept, d->ninst, d->nloads, d->nstores};
    size_t ncls = d->store_cls ? (size_t)d->nstores : 0;
    size_t n = sizeof h + sizeof(jit_kinst) * (size_t)d->ninst +
               sizeof(int32_t) * (size_t)d->nstores + ncls;
    unsigned char *p = ir_malloc(n);
    if (!p)
        return NULL;
    unsigned char *q = p;
    memcpy(q, h, sizeof h);
    q += sizeof h;
    memcpy(q, d->inst, sizeof(jit_kinst) * (size_t)d->ninst);
    q += sizeof(jit_kinst) * (size_t)d->ninst;
    memcpy(q, d->stores, sizeof(int32_t) * (size_t)d->nstores);
    q += sizeof(int32_t) * (size_t)d->nstores;
    if (ncls)
        memcpy(q, d->store_cls, ncls);
    *len = n;
    return p;
}

static uint64_t
hash_bytes(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void
unlink_entry(jit_kernel *k)
{
    if (k->prev)
        k->prev->next = k->next;
    else
        head = k->next;
    if (k->next)
        k->next->prev = k->prev;
    else
        tail = k->prev;
    k->prev = k->next = NULL;
}

static void
push_front(jit_kernel *k)
{
    k->next = head;
    k->prev = NULL;
    if (head)
        head->prev = k;
    head = k;
    if (!tail)
        tail = k;
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
kernel_destroy(jit_kernel *k)
{
    code_release(k->code);
    for (int i = 0; i < 3; i++)
        free(k->dumps[i]);
    ir_free(k->key);
    ir_free(k);
}

/* Evict unreferenced entries, oldest first, down to `limit`.  Called with lock held;
 * returns the evicted entries for destruction outside the lock. */
static jit_kernel *
evict_locked(int limit)
{
    jit_kernel *dead = NULL;
    for (jit_kernel *k = tail; k && count > limit;) {
        jit_kernel *prev = k->prev;
        if (k->refs == 1) {
            unlink_entry(k);
            k->cached = false;
            k->refs = 0;
            count--;
            k->next = dead;
            dead = k;
        }
        k = prev;
    }
    return dead;
}

static void
destroy_list(jit_kernel *k)
{
    while (k) {
        jit_kernel *next = k->next;
        kernel_destroy(k);
        k = next;
    }
}

/* A cached kernel with this key, referenced for the caller; NULL if none. */
static jit_kernel *
lookup(const unsigned char *key, size_t len, uint64_t h, bool want_dumps)
{
    pthread_mutex_lock(&lock);
    for (jit_kernel *k = head; k; k = k->next) {
        if (k->hash == h && k->keylen == len && memcmp(k->key, key, len) == 0 &&
            (!want_dumps || k->dumps[2])) {
            k->refs++;
            unlink_entry(k);
            push_front(k);
            pthread_mutex_unlock(&lock);
            return k;
        }
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* Compile kernels ks[0..n) (keys set) from d[] in one module; on success each has its fn
 * and a reference to the shared code. */
static kiln_status
compile_batch(int n, const jit_kdesc *const *d, jit_kernel **ks, bool want_dumps)
{
    char (*names)[64] = ir_calloc((size_t)n, sizeof *names);
    const char **np = ir_calloc((size_t)n, sizeof *np);
    jit_kernel_fn *fns = ir_calloc((size_t)n, sizeof *fns);
    code_obj *co = ir_calloc(1, sizeof *co);
    kiln_status st = KILN_OK;
    if (!names || !np || !fns || !co) {
        st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
        goto done;
    }
    /* A process-wide serial, not the content: the same kernel may be compiled again
     * (KILN_NO_CACHE, or after eviction) while its old code lives, and one LLJIT must never
     * see a name twice. */
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "kiln_kernel_%llu",
                 (unsigned long long)atomic_fetch_add(&n_serial, 1));
        np[i] = names[i];
    }
    st = jit_lower_compile(n, d, np, fns, &co->code, want_dumps ? ks[0]->dumps : NULL);
    if (st)
        goto done;
    atomic_store(&co->refs, n);
    for (int i = 0; i < n; i++) {
        ks[i]->fn = fns[i];
        ks[i]->code = co;
    }
    co = NULL;
    atomic_fetch_add(&n_compiles, (uint64_t)n);
done:
    ir_free(co);
    ir_free(names);
    ir_free(np);
    ir_free(fns);
    return st;
}

kiln_status
jit_kernels_get(int n, const jit_kdesc *const *d, unsigned flags, jit_kernel **out, bool *hit)
{
    bool want_dumps = flags & JIT_F_DUMPS, nocache = flags & JIT_F_NOCACHE;
    /* perturbed test kernels (lower.c) must never be shared through the cache */
    const char *pert = getenv("KILN_TEST_PERTURB");
    nocache = nocache || (pert && *pert);
    kiln_status st = KILN_OK;
    jit_kernel **fresh = ir_calloc((size_t)n + 1, sizeof *fresh);
    const jit_kdesc **fd = ir_calloc((size_t)n + 1, sizeof *fd);
    int nfresh = 0;
    for (int i = 0; i < n; i++) {
        out[i] = NULL;
        hit[i] = false;
    }
    if (!fresh || !fd) {
        st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        size_t len;
        unsigned char *key = serialize(d[i], &len);
        if (!key) {
            st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
            goto fail;
        }
        uint64_t h = hash_bytes(key, len);
        jit_kernel *k = nocache ? NULL : lookup(key, len, h, want_dumps);
        if (k) {
            ir_free(key);
            atomic_fetch_add(&n_hits, 1);
            out[i] = k;
            hit[i] = true;
            continue;
        }
        /* an equal description earlier in this batch: share its kernel */
        for (int j = 0; j < nfresh && !k; j++)
            if (fresh[j]->hash == h && fresh[j]->keylen == len && memcmp(fresh[j]->key, key, len) == 0)
                k = fresh[j];
        if (k) {
            ir_free(key);
            k->refs++;
            out[i] = k;
            hit[i] = true;
            continue;
        }
        k = ir_calloc(1, sizeof *k);
        if (!k) {
            ir_free(key);
            st = ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
            goto fail;
        }
        k->hash = h;
        k->key = key;
        k->keylen = len;
        k->refs = 1; /* the caller's */
        out[i] = k;
        fresh[nfresh] = k;
        fd[nfresh++] = d[i];
    }
    /* Compile outside the cache lock (the engine serialises what must be): all at once,
     * or with dumps one module per kernel. */
    if (want_dumps) {
        for (int j = 0; j < nfresh && !st; j++)
            st = compile_batch(1, &fd[j], &fresh[j], true);
    } else if (nfresh) {
        st = compile_batch(nfresh, fd, fresh, false);
    }
    if (st)
        goto fail;
    if (!nocache && nfresh) {
        pthread_mutex_lock(&lock);
        for (int j = 0; j < nfresh; j++) {
            fresh[j]->refs++; /* and the cache's */
            fresh[j]->cached = true;
            push_front(fresh[j]);
            count++;
        }
        jit_kernel *dead = evict_locked(CACHE_LIMIT);
        pthread_mutex_unlock(&lock);
        destroy_list(dead);
    }
    ir_free(fresh);
    ir_free(fd);
    return KILN_OK;
fail:
    for (int i = 0; i < n; i++) {
        jit_kernel_release(out[i]);
        out[i] = NULL;
        hit[i] = false;
    }
    ir_free(fresh);
    ir_free(fd);
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
    pthread_mutex_lock(&lock);
    bool destroy = --k->refs == 0;
    pthread_mutex_unlock(&lock);
    if (destroy)
        kernel_destroy(k);
}

void
jit_cache_trim(void)
{
    pthread_mutex_lock(&lock);
    jit_kernel *dead = evict_locked(0);
    pthread_mutex_unlock(&lock);
    destroy_list(dead);
}

void
jit_cache_counters(uint64_t *compiles, uint64_t *hits)
{
    *compiles = atomic_load(&n_compiles);
    *hits = atomic_load(&n_hits);
}
