/* alloc.c — every allocation of the library goes through here, so tests can make the
 * Nth one fail (SQLite-style OOM loops) and check that nothing leaks or crashes. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static _Atomic long fail_after = -1; /* -1: never fail */

void
ir_test_fail_alloc_after(long n)
{
    atomic_store(&fail_after, n);
}

static bool
should_fail(void)
{
    long n = atomic_load(&fail_after);
    while (n >= 0) {
        if (n == 0)
            return true;
        if (atomic_compare_exchange_weak(&fail_after, &n, n - 1))
            return false;
    }
    return false;
}

void *
ir_malloc(size_t size)
{
    if (should_fail())
        return NULL;
    return malloc(size ? size : 1);
}

void *
ir_calloc(size_t n, size_t size)
{
    if (should_fail())
        return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}

void *
ir_realloc(void *p, size_t size)
{
    if (should_fail())
        return NULL;
    return realloc(p, size ? size : 1);
}

void
ir_free(void *p)
{
    free(p);
}

char *
ir_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = ir_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}
