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

struct jit_kernel {
    jit_kernel *prev, *next; /* LRU list, most recent first */
    uint64_t hash;
    size_t keylen;
    unsigned char *key;
    int refs; /* programs + (1 while cached) */
    bool cached;
    jit_kernel_fn fn;
    void *code;
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
kernel_destroy(jit_kernel *k)
{
    jit_lower_free_code(k->code);
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

kiln_status
jit_kernel_get(const jit_kdesc *d, unsigned flags, jit_kernel **out, bool *hit)
{
    bool want_dumps = flags & JIT_F_DUMPS, nocache = flags & JIT_F_NOCACHE;
    /* perturbed test kernels (lower.c) must never be shared through the cache */
    const char *pert = getenv("KILN_TEST_PERTURB");
    nocache = nocache || (pert && *pert);
    size_t len;
    *out = NULL;
    *hit = false;
    unsigned char *key = serialize(d, &len);
    if (!key)
        return ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
    uint64_t h = hash_bytes(key, len);

    pthread_mutex_lock(&lock);
    for (jit_kernel *k = nocache ? NULL : head; k; k = k->next) {
        if (k->hash == h && k->keylen == len && memcmp(k->key, key, len) == 0 &&
            (!want_dumps || k->dumps[2])) {
            k->refs++;
            unlink_entry(k);
            push_front(k);
            pthread_mutex_unlock(&lock);
            ir_free(key);
            atomic_fetch_add(&n_hits, 1);
            *out = k;
            *hit = true;
            return KILN_OK;
        }
    }
    pthread_mutex_unlock(&lock);

    /* Compile outside the cache lock (the engine serialises what must be). */
    jit_kernel *k = ir_calloc(1, sizeof *k);
    if (!k) {
        ir_free(key);
        return ir_error(KILN_ERR_NOMEM, "kiln_jit: out of memory");
    }
    char name[64];
    snprintf(name, sizeof name, "kiln_kernel_%llu",
             (unsigned long long)atomic_fetch_add(&n_serial, 1));
    kiln_status st = jit_lower_compile(d, name, &k->fn, &k->code, want_dumps ? k->dumps : NULL);
    if (st) {
        for (int i = 0; i < 3; i++)
            free(k->dumps[i]);
        ir_free(k);
        ir_free(key);
        return st;
    }
    atomic_fetch_add(&n_compiles, 1);
    k->hash = h;
    k->key = key;
    k->keylen = len;
    if (nocache) {
        k->refs = 1; /* the caller's alone */
        *out = k;
        return KILN_OK;
    }
    k->refs = 2; /* the caller and the cache */
    k->cached = true;
    pthread_mutex_lock(&lock);
    push_front(k);
    count++;
    jit_kernel *dead = evict_locked(CACHE_LIMIT);
    pthread_mutex_unlock(&lock);
    destroy_list(dead);
    *out = k;
    return KILN_OK;
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
