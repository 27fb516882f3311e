/* pool.c — the thread pool that runs kernel chunks on all cores.
 *
 * KILN_NUM_THREADS sets the size (default: online cores).  One job runs at a time (a
 * mutex serialises callers); the caller works on chunks too, so a pool of N threads has
 * N-1 workers.  Chunks are claimed from an atomic counter, so which thread computes a
 * chunk varies but every chunk computes the same elements the same way: results do not
 * depend on the thread count. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "jit.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER; /* one job at a time */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static int nthreads = 1;

/* One job: lives on the caller's stack; the caller returns only when every chunk is
 * done and no worker still holds a pointer to it. */
typedef struct pjob {
    jit_task_fn fn;
    void *ctx;
    int64_t nchunks;
    _Atomic int64_t next;
    _Atomic int64_t finished;
    int active; /* workers inside work(), guarded by lock */
} pjob;

static pjob *current;       /* guarded by lock */
static uint64_t generation; /* guarded by lock */

static void
work(pjob *j)
{
    for (;;) {
        int64_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->nchunks)
            break;
        j->fn(j->ctx, i);
        if (atomic_fetch_add(&j->finished, 1) + 1 == j->nchunks) {
            pthread_mutex_lock(&lock);
            pthread_cond_broadcast(&done);
            pthread_mutex_unlock(&lock);
        }
    }
}

static void *
worker(void *arg)
{
    (void)arg;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (generation == seen || !current)
            pthread_cond_wait(&wake, &lock);
        seen = generation;
        pjob *j = current;
        j->active++;
        pthread_mutex_unlock(&lock);
        work(j);
        pthread_mutex_lock(&lock);
        if (--j->active == 0)
            pthread_cond_broadcast(&done);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

static void
start(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (ir_config_get()->num_threads > 0)
        n = ir_config_get()->num_threads;
    if (n < 1)
        n = 1;
    nthreads = (int)n;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (int i = 1; i < nthreads; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, worker, NULL) != 0) {
            nthreads = i; /* run with the threads we got */
            break;
        }
    }
    pthread_attr_destroy(&attr);
}

static _Thread_local bool single;

void
jit_pool_single(bool on)
{
    single = on;
}

int
jit_pool_threads(void)
{
    pthread_once(&once, start);
    return single ? 1 : nthreads;
}

void
jit_pool_run(jit_task_fn fn, void *ctx, int64_t nchunks)
{
    if (nchunks <= 0)
        return;
    if (nchunks == 1 || jit_pool_threads() == 1) {
        for (int64_t i = 0; i < nchunks; i++)
            fn(ctx, i);
        return;
    }
    pjob j = {.fn = fn, .ctx = ctx, .nchunks = nchunks};
    atomic_init(&j.next, 0);
    atomic_init(&j.finished, 0);
    pthread_mutex_lock(&job_lock);
    pthread_mutex_lock(&lock);
    current = &j;
    generation++;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
    work(&j);
    pthread_mutex_lock(&lock);
    while (atomic_load(&j.finished) < nchunks || j.active > 0)
        pthread_cond_wait(&done, &lock);
    current = NULL;
    pthread_mutex_unlock(&lock);
    pthread_mutex_unlock(&job_lock);
}
