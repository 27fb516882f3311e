/* background.c — one thread for work that must not delay the caller: today the full code
 * of kernels whose first tier was compiled quickly (cache.c, KILN_TIERED).
 *
 * Jobs run one at a time, in the order they were submitted, on a thread of their own (not
 * the thread pool, which runs programs: a program's run never waits behind a compile).
 * The thread starts with the first job and then waits for more.  jit_background_wait
 * returns once every job submitted before it has finished (kiln_jit_sync).  The thread runs
 * at the lowest priority (nice 19, Linux's per-thread niceness): the code it makes only
 * replaces code that already works, so the program's own runs, which the first tier serves
 * meanwhile, come first, and it uses the cores they leave idle.  (A 12-layer decoder's first
 * five steps after a tiered compile, both cores busy, four runs each alternated at load 2-3:
 * the first run 18.5-25.2 ms at nice 19 against 20.7-29.3 ms at nice 0; the full code still
 * arrived within the five steps.)
 *
 * At exit: the handler (atexit, registered when the thread starts, so after LLVM's own
 * static objects were made, and so run before they are destroyed) lets the running job
 * finish, cancels the jobs not started (their kernels keep their first tier), and joins
 * the thread: LLVM must not be generating code while the process tears LLVM down. */
#define _GNU_SOURCE /* syscall */
#include <pthread.h>
#include <stdlib.h>
#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "jit.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER; /* a job queued, or stopping */
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER; /* a job finished */
static jit_job *head, *tail;
static uint64_t submitted, finished;
static bool started, stopping, held;
static pthread_t thread;

static void *
worker(void *arg)
{
    (void)arg;
#ifdef __linux__
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19); /* this thread only; best effort */
#endif
    pthread_mutex_lock(&lock);
    for (;;) {
        while ((!head || held) && !stopping)
            pthread_cond_wait(&wake, &lock);
        if (stopping)
            break;
        jit_job *j = head;
        head = j->next;
        if (!head)
            tail = NULL;
        pthread_mutex_unlock(&lock);
        j->run(j);
        pthread_mutex_lock(&lock);
        finished++;
        pthread_cond_broadcast(&idle);
    }
    /* cancel what did not start */
    while (head) {
        jit_job *j = head;
        head = j->next;
        pthread_mutex_unlock(&lock);
        j->cancel(j);
        pthread_mutex_lock(&lock);
        finished++;
    }
    tail = NULL;
    pthread_cond_broadcast(&idle);
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void
at_exit(void)
{
    pthread_mutex_lock(&lock);
    stopping = true;
    bool join = started;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
    if (join)
        pthread_join(thread, NULL);
}

void
jit_background_submit(jit_job *j)
{
    j->next = NULL;
    pthread_mutex_lock(&lock);
    static bool tried;
    if (!tried) {
        /* the handler first: a thread that could not be joined at exit must not start */
        tried = true;
        started = atexit(at_exit) == 0 && pthread_create(&thread, NULL, worker, NULL) == 0;
    }
    if (!started || stopping) {
        /* no thread (none could be made, or the process is exiting): run it here */
        pthread_mutex_unlock(&lock);
        j->run(j);
        return;
    }
    if (tail)
        tail->next = j;
    else
        head = j;
    tail = j;
    submitted++;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
}

void
jit_background_hold(bool on)
{
    pthread_mutex_lock(&lock);
    held = on;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
}

void
jit_background_wait(void)
{
    pthread_mutex_lock(&lock);
    uint64_t target = submitted;
    while (finished < target && !stopping)
        pthread_cond_wait(&idle, &lock);
    pthread_mutex_unlock(&lock);
}
