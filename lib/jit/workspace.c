/* workspace.c — the temporaries blocks programs run in, shared by every program of the
 * process.
 *
 * A program's plan needs a block of temp_bytes (plan.c: its stored intermediates, packed
 * panels, partial sums).  Each program used to keep a block of its own, so a program the
 * cache handed out (a client whose shapes change every step compiles a "new" program every
 * step) allocated its block on its first run and faulted in every page of it: a slow first run
 * (docs/benchmarking.md, "Temporaries: one pool of blocks").  Now a run takes a block from
 * this pool and gives it back when it returns: a program runs in memory an earlier program
 * already touched.
 *
 * Invariants: a block is used by one run at a time (a run takes it out of the pool, so
 * concurrent runs, of one program or several, each get their own); a run takes the
 * smallest free block that holds temp_bytes, else allocates one (64-aligned; the next power of
 * two, at least 4 KiB, so that temporaries that grow step by step keep fitting); the pool keeps at most WS_MAX_FREE free blocks, freeing the smallest when
 * a block comes back to a full pool (the large blocks are the costly ones to fault in
 * again).  jit_ws_trim frees every free block (tests that check memory returns to a
 * steady state).  Thread-safe: one mutex, held for a list walk of at most WS_MAX_FREE.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "jit.h"

#define WS_MAX_FREE 8

typedef struct ws_block {
    void *p;
    size_t cap;
} ws_block;

static pthread_mutex_t ws_lock = PTHREAD_MUTEX_INITIALIZER;
static ws_block ws_free[WS_MAX_FREE];
static int ws_nfree;
static _Atomic uint64_t ws_allocs, ws_bytes;

void *
jit_ws_take(size_t n, size_t *cap)
{
    pthread_mutex_lock(&ws_lock);
    int best = -1;
    for (int i = 0; i < ws_nfree; i++)
        if (ws_free[i].cap >= n && (best < 0 || ws_free[i].cap < ws_free[best].cap))
            best = i;
    if (best >= 0) {
        ws_block b = ws_free[best];
        ws_free[best] = ws_free[--ws_nfree];
        pthread_mutex_unlock(&ws_lock);
        *cap = b.cap;
        return b.p;
    }
    pthread_mutex_unlock(&ws_lock);
    /* a power of two (at least 4 KiB): a step whose temporaries grow a little (a cache one
     * row longer) still fits the block the last step used; the pages past what a run writes
     * are never touched, so they cost address space, not memory */
    size_t sz = (size_t)1 << 12;
    while (sz < n && sz <= ((size_t)1 << 46))
        sz <<= 1;
    if (sz < n)
        return NULL;
    void *p = ir_aligned_alloc(64, sz);
    if (!p)
        return NULL;
    atomic_fetch_add(&ws_allocs, 1);
    atomic_fetch_add(&ws_bytes, sz);
    *cap = sz;
    return p;
}

void
jit_ws_give(void *p, size_t cap)
{
    if (!p)
        return;
    pthread_mutex_lock(&ws_lock);
    if (ws_nfree < WS_MAX_FREE) {
        ws_free[ws_nfree++] = (ws_block){p, cap};
        p = NULL;
    } else {
        int small = 0;
        for (int i = 1; i < ws_nfree; i++)
            if (ws_free[i].cap < ws_free[small].cap)
                small = i;
        if (ws_free[small].cap < cap) {
            ws_block out = ws_free[small];
            ws_free[small] = (ws_block){p, cap};
            p = out.p;
            cap = out.cap;
        }
    }
    pthread_mutex_unlock(&ws_lock);
    if (p) {
        ir_free(p);
        atomic_fetch_sub(&ws_bytes, cap);
    }
}

void
jit_ws_trim(void)
{
    pthread_mutex_lock(&ws_lock);
    while (ws_nfree > 0) {
        ws_block b = ws_free[--ws_nfree];
        ir_free(b.p);
        atomic_fetch_sub(&ws_bytes, b.cap);
    }
    pthread_mutex_unlock(&ws_lock);
}

void
jit_ws_counters(uint64_t *allocs, uint64_t *bytes)
{
    *allocs = atomic_load(&ws_allocs);
    *bytes = atomic_load(&ws_bytes);
}
