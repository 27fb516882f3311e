/* alloc.c — every allocation of the library goes through here, so tests can make the
 * Nth one fail (SQLite-style OOM loops) and check that nothing leaks or crashes. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static _Atomic long fail_after = -1; /* -1: never fail */
static _Atomic bool fail_once;      /* the failure disarms the hook */

void
ir_test_fail_alloc_after(long n)
{
    atomic_store(&fail_once, false);
    atomic_store(&fail_after, n);
}

void
ir_test_fail_alloc_once(long n)
{
    atomic_store(&fail_once, true);
    atomic_store(&fail_after, n);
}

bool
ir_test_fail_pending(void)
{
    return atomic_load(&fail_after) >= 0;
}

static bool
should_fail(void)
{
    long n = atomic_load(&fail_after);
    while (n >= 0) {
        if (n == 0)
            return !atomic_load(&fail_once) || atomic_compare_exchange_strong(&fail_after, &n, -1);
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

void *
ir_aligned_alloc(size_t align, size_t size)
{
    if (should_fail())
        return NULL;
    return aligned_alloc(align, size ? (size + align - 1) / align * align : align);
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
