/* pool.c — the thread pool that runs kernel chunks on all cores.
 *
 * KILN_NUM_THREADS sets the size (default: online cores).  One job runs at a time (a
 * mutex serialises callers); the caller works on chunks too, so a pool of N threads has
 * N-1 workers.  Chunks are claimed from an atomic counter, so which thread computes a
 * chunk varies but every chunk computes the same elements the same way: results do not
 * depend on the thread count.
 *
 * Waiting spins before it sleeps.  A worker that finished a job watches for the next one
 * for up to SPIN_MS before it sleeps on the condition variable, and the caller watches for
 * the workers' last chunks the same way.  A decoder step is some twenty short jobs in a
 * row; woken through the condition variable each time, a worker started its share tens of
 * microseconds late (docs/benchmarking.md, "The pool: spinning before sleeping").  A pool
 * of more threads than online cores (KILN_NUM_THREADS) never spins: a spinning thread
 * would take a core from one still working on a chunk. */
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
static double spin_ms; /* SPIN_MS, or 0 when the threads outnumber the cores */

/* How long a waiting thread spins before it sleeps, in ms: a few jobs' gaps in a decoder
 * step, short enough that an idle pool gives its cores back at once for a person's eye. */
#define SPIN_MS 0.2

/* One job: lives on the caller's stack; the caller returns only when every chunk is
 * done and no worker still holds a pointer to it. */
typedef struct pjob {
    jit_task_fn fn;
    void *ctx;
    int64_t nchunks;
    _Atomic int64_t next;
    _Atomic int64_t finished;
    _Atomic int active; /* workers inside work(); joined under lock */
} pjob;

static pjob *current;               /* guarded by lock */
static uint64_t generation;         /* guarded by lock */
static _Atomic uint64_t published;  /* generation, for the spinning workers */

static void
relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spins until ready(arg) or spin_ms passed; true if ready. */
static bool
spin_until(bool (*ready)(void *), void *arg)
{
    double start = 0;
    for (unsigned i = 0;; i++) {
        if (ready(arg))
            return true;
        if (!spin_ms)
            return false;
        if ((i & 63) == 63) {
            double t = jit_now_ms();
            if (!start)
                start = t;
            else if (t - start > spin_ms)
                return false;
        }
        relax();
    }
}

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

static bool
new_job(void *seen)
{
    return atomic_load_explicit(&published, memory_order_acquire) != *(uint64_t *)seen;
}

static void *
worker(void *arg)
{
    (void)arg;
    uint64_t seen = 0;
    for (;;) {
        bool spun = spin_until(new_job, &seen);
        pthread_mutex_lock(&lock);
        while (!spun && generation == seen)
            pthread_cond_wait(&wake, &lock);
        seen = generation;
        pjob *j = current;
        if (!j) { /* the job ended before this thread came: watch for the next one */
            pthread_mutex_unlock(&lock);
            continue;
        }
        atomic_fetch_add(&j->active, 1);
        pthread_mutex_unlock(&lock);
        work(j);
        pthread_mutex_lock(&lock);
        if (atomic_fetch_sub(&j->active, 1) == 1)
            pthread_cond_broadcast(&done);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

static void
start(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN), n = cores;
    if (ir_config_get()->num_threads > 0)
        n = ir_config_get()->num_threads;
    if (n < 1)
        n = 1;
    nthreads = (int)n;
    spin_ms = n <= cores ? SPIN_MS : 0;
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

static bool
job_done(void *arg)
{
    pjob *j = arg;
    return atomic_load(&j->finished) == j->nchunks && atomic_load(&j->active) == 0;
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
    atomic_init(&j.active, 0);
    pthread_mutex_lock(&job_lock);
    pthread_mutex_lock(&lock);
    current = &j;
    generation++;
    atomic_store_explicit(&published, generation, memory_order_release);
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
    work(&j);
    spin_until(job_done, &j);
    pthread_mutex_lock(&lock);
    while (atomic_load(&j.finished) < nchunks || atomic_load(&j.active) > 0)
        pthread_cond_wait(&done, &lock);
    current = NULL;
    pthread_mutex_unlock(&lock);
    pthread_mutex_unlock(&job_lock);
}
