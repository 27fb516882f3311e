/* handle.c — sets of live handles, so that kiln.h's promise of KILN_ERR_MISUSE for a
 * freed or foreign kiln_graph, kiln_device or kiln_program holds without reading the
 * memory the pointer names: membership is decided by the pointer's value alone.
 *
 * A set is an open-addressing hash table of pointers with linear probing.  Lookups are
 * the hot path (kiln_program_run checks its program on every call, possibly from many
 * threads at once), so they take no lock and write nothing: a load of the table, a
 * multiply and, almost always, one probe.  Writers (add, remove, retire) hold the set's
 * mutex.  What makes lock-free lookups safe:
 *
 *  - A slot goes EMPTY -> pointer -> DELETED -> pointer -> DELETED ...; it never becomes
 *    EMPTY again, and a live pointer never moves within a table.  An insert takes the
 *    first EMPTY or DELETED slot from the pointer's home slot, so every slot between the
 *    two held a live pointer then and is not EMPTY now: a probe for a live pointer cannot
 *    stop early.  Probes stop at an EMPTY slot or after PROBE_LIMIT slots; an insert that
 *    finds no free slot within the limit grows the table.
 *  - A table is replaced (grown) only by a writer, which fills the new one completely
 *    before publishing it; the old one is never written again and never freed, so a
 *    lookup that loaded it just before the switch reads valid memory and finds every
 *    pointer that was live then.  Tables only grow, so the old ones together are smaller
 *    than the current one.
 *  - A lookup of a pointer the caller got from a kiln_*_new call sees that call's insert:
 *    the caller's own synchronization orders the two (as for any other data).
 *
 * Quarantine.  A pointer carries no generation, so once malloc hands a freed block back
 * as a new object of the same type, a stale pointer to it names that new, live object and
 * no check by value can tell them apart.  To keep that from happening to the usual bug (a
 * handle used or freed again soon after its free), a freed object's block is not given
 * back to malloc at once: it waits in a FIFO of the last IR_HANDLE_QUARANTINE blocks freed
 * from the set.  Only its shell waits there; the object's contents are freed at once. */
#include <stdint.h>

#include "ir.h"

#define EMPTY ((uintptr_t)0)
#define DELETED ((uintptr_t)1) /* no object lives at address 1 */
#define PROBE_LIMIT 64

struct ir_handle_table {
    struct ir_handle_table *older; /* the tables this one replaced (kept, see above) */
    size_t cap;                    /* a power of two */
    _Atomic uintptr_t slots[];
};

/* Fibonacci hashing: the multiply spreads the pointer's middle bits (the low ones are
 * zero by alignment) into the high bits, which pick the slot. */
static size_t
home(uintptr_t p, size_t cap)
{
    uint64_t h = (uint64_t)p * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (cap - 1);
}

/* The slot holding p, or cap when p is not in t.  Safe without the lock. */
static size_t
find(const ir_handle_table *t, uintptr_t p)
{
    size_t i = home(p, t->cap);
    for (int n = 0; n < PROBE_LIMIT; n++, i = (i + 1) & (t->cap - 1)) {
        uintptr_t v = atomic_load_explicit(&t->slots[i], memory_order_relaxed);
        if (v == p)
            return i;
        if (v == EMPTY)
            break;
    }
    return t->cap;
}

/* Put p in the first free slot of its probe sequence; false when there is none within
 * PROBE_LIMIT.  Lock held. */
static bool
place(ir_handle_table *t, uintptr_t p)
{
    size_t i = home(p, t->cap);
    for (int n = 0; n < PROBE_LIMIT; n++, i = (i + 1) & (t->cap - 1)) {
        uintptr_t v = atomic_load_explicit(&t->slots[i], memory_order_relaxed);
        if (v == EMPTY || v == DELETED) {
            atomic_store_explicit(&t->slots[i], p, memory_order_relaxed);
            return true;
        }
    }
    return false;
}

/* A table of at least `cap` slots holding every live pointer of `old` (NULL: none), or
 * NULL when out of memory.  Lock held. */
static ir_handle_table *
rebuild(const ir_handle_table *old, size_t cap)
{
    for (;; cap *= 2) {
        ir_handle_table *t = ir_calloc(1, sizeof *t + cap * sizeof t->slots[0]);
        if (!t)
            return NULL;
        t->cap = cap;
        bool ok = true;
        for (size_t i = 0; ok && old && i < old->cap; i++) {
            uintptr_t v = atomic_load_explicit(&old->slots[i], memory_order_relaxed);
            if (v != EMPTY && v != DELETED)
                ok = place(t, v);
        }
        if (ok)
            return t;
        ir_free(t); /* a cluster longer than the probe limit: spread wider */
    }
}

/* Replace the set's table by one of `cap` or more slots.  Lock held. */
static bool
grow_locked(ir_handle_set *set, ir_handle_table *cur, size_t cap)
{
    ir_handle_table *t = rebuild(cur, cap);
    if (!t)
        return false;
    t->older = cur;
    atomic_store_explicit(&set->table, t, memory_order_release);
    return true;
}

bool
ir_handle_add(ir_handle_set *set, const void *obj)
{
    uintptr_t p = (uintptr_t)obj;
    IR_ASSERT(p != EMPTY && p != DELETED);
    pthread_mutex_lock(&set->lock);
    ir_handle_table *t = atomic_load_explicit(&set->table, memory_order_relaxed);
    /* At most half full of live pointers, so probes stay short. */
    bool ok = true;
    if (!t || 2 * (set->live + 1) > t->cap) {
        ok = grow_locked(set, t, t ? 2 * t->cap : 16);
        t = atomic_load_explicit(&set->table, memory_order_relaxed);
    }
    IR_ASSERT(!ok || find(t, p) == t->cap); /* malloc gave out a block that is still live */
    while (ok && !place(t, p)) {
        ok = grow_locked(set, t, 2 * t->cap);
        t = atomic_load_explicit(&set->table, memory_order_relaxed);
    }
    if (ok)
        set->live++;
    pthread_mutex_unlock(&set->lock);
    return ok;
}

bool
ir_handle_is_live(ir_handle_set *set, const void *obj)
{
    const ir_handle_table *t = atomic_load_explicit(&set->table, memory_order_acquire);
    return t && find(t, (uintptr_t)obj) != t->cap;
}

bool
ir_handle_remove(ir_handle_set *set, const void *obj)
{
    pthread_mutex_lock(&set->lock);
    ir_handle_table *t = atomic_load_explicit(&set->table, memory_order_relaxed);
    size_t i = t ? find(t, (uintptr_t)obj) : 0;
    bool live = t && i != t->cap;
    if (live) {
        atomic_store_explicit(&t->slots[i], DELETED, memory_order_relaxed);
        set->live--;
    }
    pthread_mutex_unlock(&set->lock);
    return live;
}

void
ir_handle_retire(ir_handle_set *set, void *block)
{
    void *evicted = NULL;
    pthread_mutex_lock(&set->lock);
    if (set->nretired == IR_HANDLE_QUARANTINE) {
        evicted = set->retired[set->oldest];
        set->retired[set->oldest] = block;
        set->oldest = (set->oldest + 1) % IR_HANDLE_QUARANTINE;
    } else {
        set->retired[(set->oldest + set->nretired++) % IR_HANDLE_QUARANTINE] = block;
    }
    pthread_mutex_unlock(&set->lock);
    ir_free(evicted);
}
