/* lru.c — the one in-memory cache of lib/jit: compiled kernels (cache.c) and compiled
 * programs (program.c) are both kept in a jit_lru.
 *
 *   lookup:   a fixed table of JIT_LRU_BUCKETS hash chains (the caller supplies the hash
 *             and an equality over its keys);
 *   sharing:  entries are reference counted: every holder has a reference, and the cache
 *             one more while the entry is cached; eviction only takes entries no one else
 *             holds, least recently used first, down to a count and a byte limit;
 *   groups:   a cache may keep at most max_per_group cached entries of one group (the
 *             caller's: the program cache's is the generic hash, so a client whose sizes
 *             change every step keeps a few of its plans, recycling their memory, instead
 *             of filling the cache with plans it never uses again and evicting the others');
 *             a fill evicts the group's least recently used entries no one holds;
 *   single flight: a miss inserts a *pending* entry for its key before the caller starts
 *             compiling, so a second thread that wants the same key waits for the first
 *             (jit_lru_get with wait) or is told the key is busy (without wait) instead of
 *             compiling it again.  The filler publishes the value (jit_lru_fill) or gives up
 *             (jit_lru_abandon: a waiter then becomes the filler and reports its own error).
 *
 * A caller that holds pending entries must not wait for another key (two threads each
 * holding one key and waiting for the other's would deadlock): cache.c takes what it can
 * without waiting, fills its own misses, and only then waits for the busy keys. */
#include <stdlib.h>
#include <string.h>

#include "jit.h"

enum { PENDING, READY };

struct jit_lru_entry {
    jit_lru_entry *hnext;       /* hash chain */
    jit_lru_entry *prev, *next; /* LRU list of ready, cached entries, most recent first */
    uint64_t hash;
    uint64_t group; /* with `grouped`: the caller's group (jit_lru_fill_group) */
    bool grouped;
    void *key, *value;
    size_t bytes;
    int refs; /* holders + 1 while cached */
    int state;
    bool cached;
};

static jit_lru_entry **
chain(jit_lru *c, uint64_t h)
{
    return &c->bucket[h % JIT_LRU_BUCKETS];
}

static void
unhash(jit_lru *c, jit_lru_entry *e)
{
    for (jit_lru_entry **pp = chain(c, e->hash); *pp; pp = &(*pp)->hnext)
        if (*pp == e) {
            *pp = e->hnext;
            break;
        }
    e->hnext = NULL;
}

static void
list_unlink(jit_lru *c, jit_lru_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void
list_push_front(jit_lru *c, jit_lru_entry *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head)
        c->head->prev = e;
    c->head = e;
    if (!c->tail)
        c->tail = e;
}

static void
destroy(const jit_lru *c, jit_lru_entry *e)
{
    if (e->value)
        c->ops->free_value(e->value);
    c->ops->free_key(e->key);
    ir_free(e);
}

/* Take cached entries no one else holds out of the cache, oldest first, until at most
 * `count` entries and `bytes` bytes remain; lock held.  Returns them (linked by next) for
 * destruction outside the lock. */
static jit_lru_entry *
evict_locked(jit_lru *c, int count, size_t bytes)
{
    jit_lru_entry *dead = NULL;
    for (jit_lru_entry *e = c->tail; e && (c->entries > count || c->bytes > bytes);) {
        jit_lru_entry *prev = e->prev;
        if (e->refs == 1) {
            list_unlink(c, e);
            unhash(c, e);
            e->cached = false;
            c->entries--;
            c->bytes -= e->bytes;
            c->evictions++;
            e->next = dead;
            dead = e;
        }
        e = prev;
    }
    return dead;
}

static void
destroy_list(const jit_lru *c, jit_lru_entry *e)
{
    while (e) {
        jit_lru_entry *next = e->next;
        destroy(c, e);
        e = next;
    }
}

jit_lru_result
jit_lru_get(jit_lru *c, uint64_t h, void *key, bool wait, jit_lru_entry **out)
{
    *out = NULL;
    pthread_mutex_lock(&c->lock);
    bool waited = false;
    for (;;) {
        jit_lru_entry *e = *chain(c, h);
        while (e && !(e->hash == h && c->ops->equal(e->key, key)))
            e = e->hnext;
        if (e && e->state == READY) {
            e->refs++;
            list_unlink(c, e);
            list_push_front(c, e);
            c->hits++;
            pthread_mutex_unlock(&c->lock);
            *out = e;
            return JIT_LRU_HIT;
        }
        if (e && !wait) {
            pthread_mutex_unlock(&c->lock);
            return JIT_LRU_BUSY;
        }
        if (e) {
            /* another thread is compiling this key: wait for its fill or abandon */
            if (!waited)
                c->waits++;
            waited = true;
            pthread_cond_wait(&c->changed, &c->lock);
            continue;
        }
        e = ir_calloc(1, sizeof *e);
        if (!e) {
            pthread_mutex_unlock(&c->lock);
            return JIT_LRU_NOMEM;
        }
        e->hash = h;
        e->key = key;
        e->refs = 1; /* the filler's */
        e->state = PENDING;
        e->hnext = *chain(c, h);
        *chain(c, h) = e;
        c->misses++;
        pthread_mutex_unlock(&c->lock);
        *out = e;
        return JIT_LRU_MISS;
    }
}

/* Take the least recently used cached entries of e's group that no one holds out of the
 * cache until at most max_per_group remain; lock held.  Appends them to *dead. */
static void
evict_group_locked(jit_lru *c, const jit_lru_entry *e, jit_lru_entry **dead)
{
    int n = 0;
    for (jit_lru_entry *x = c->head; x; x = x->next)
        n += x->grouped && x->group == e->group;
    for (jit_lru_entry *x = c->tail; x && n > c->max_per_group;) {
        jit_lru_entry *prev = x->prev;
        if (x->grouped && x->group == e->group && x->refs == 1) {
            list_unlink(c, x);
            unhash(c, x);
            x->cached = false;
            c->entries--;
            c->bytes -= x->bytes;
            c->evictions++;
            x->next = *dead;
            *dead = x;
            n--;
        }
        x = prev;
    }
}

void
jit_lru_fill(jit_lru *c, jit_lru_entry *e, void *value, size_t bytes)
{
    jit_lru_fill_group(c, e, value, bytes, false, 0);
}

void
jit_lru_fill_group(jit_lru *c, jit_lru_entry *e, void *value, size_t bytes, bool grouped,
                   uint64_t group)
{
    pthread_mutex_lock(&c->lock);
    e->grouped = grouped && c->max_per_group > 0;
    e->group = group;
    e->value = value;
    e->bytes = bytes;
    e->state = READY;
    e->cached = true;
    e->refs++; /* the cache's */
    list_push_front(c, e);
    c->entries++;
    c->bytes += bytes;
    jit_lru_entry *dead = evict_locked(c, c->max_entries, c->max_bytes);
    if (e->grouped)
        evict_group_locked(c, e, &dead);
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
    destroy_list(c, dead);
}

void
jit_lru_abandon(jit_lru *c, jit_lru_entry *e)
{
    pthread_mutex_lock(&c->lock);
    unhash(c, e);
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
    destroy(c, e);
}

uint64_t
jit_lru_hash(const jit_lru_entry *e)
{
    return e->hash;
}

void *
jit_lru_value(const jit_lru_entry *e)
{
    return e->value;
}

void
jit_lru_retain(jit_lru *c, jit_lru_entry *e)
{
    pthread_mutex_lock(&c->lock);
    e->refs++;
    pthread_mutex_unlock(&c->lock);
}

void
jit_lru_release(jit_lru *c, jit_lru_entry *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&c->lock);
    bool last = --e->refs == 0;
    /* an entry held past the limits when it was filled may go now */
    jit_lru_entry *dead = e->refs == 1 && e->cached && (c->entries > c->max_entries || c->bytes > c->max_bytes)
                              ? evict_locked(c, c->max_entries, c->max_bytes)
                              : NULL;
    pthread_mutex_unlock(&c->lock);
    if (last)
        destroy(c, e);
    destroy_list(c, dead);
}

void
jit_lru_trim(jit_lru *c)
{
    pthread_mutex_lock(&c->lock);
    jit_lru_entry *dead = evict_locked(c, 0, 0);
    pthread_mutex_unlock(&c->lock);
    destroy_list(c, dead);
}

void
jit_lru_stats_get(jit_lru *c, jit_lru_stats *s)
{
    pthread_mutex_lock(&c->lock);
    s->hits = c->hits;
    s->misses = c->misses;
    s->waits = c->waits;
    s->evictions = c->evictions;
    s->entries = c->entries;
    s->bytes = c->bytes;
    pthread_mutex_unlock(&c->lock);
}
