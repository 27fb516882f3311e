/* arena.c — a bump arena per graph (QBE-style pool): nodes, names and constant data are
 * carved from chunks and freed in one sweep with the graph. */
#include <stdint.h>
#include <string.h>

#include "ir.h"

#define CHUNK_SIZE ((size_t)16 << 10)
#define MAX_ALIGN ((size_t)64)

/* Chunks come from ir_malloc, which only guarantees malloc's alignment (16 on x86-64), so
 * alignment is computed on the absolute address of mem rather than declared on the
 * struct (an _Alignas(64) member would make every access to a chunk misaligned). */
struct ir_chunk {
    ir_chunk *next;
    size_t used, size;
    unsigned char mem[];
};

/* Offset in c->mem of the first `align`-aligned byte at or after c->mem + from. */
static size_t
aligned_offset(const ir_chunk *c, size_t from, size_t align)
{
    uintptr_t p = (uintptr_t)(c->mem + from);
    return from + (size_t)((align - (p & (align - 1))) & (align - 1));
}

void *
ir_arena_alloc(ir_arena *a, size_t size, size_t align)
{
    IR_ASSERT(align && align <= MAX_ALIGN && (align & (align - 1)) == 0);
    ir_chunk *c = a->head;
    if (c) {
        size_t off = aligned_offset(c, c->used, align);
        if (off <= c->size && size <= c->size - off) {
            c->used = off + size;
            return memset(c->mem + off, 0, size);
        }
    }
    /* A big request gets a chunk of its own behind the current one, so the current
     * chunk's free tail stays usable.  Either way the chunk has room for the worst-case
     * alignment padding. */
    if (size > SIZE_MAX - sizeof(ir_chunk) - MAX_ALIGN) {
        ir_error(KILN_ERR_NOMEM, "kiln: out of memory: arena request of %zu bytes", size);
        return NULL;
    }
    bool big = size > CHUNK_SIZE / 4;
    size_t want = big ? size + MAX_ALIGN - 1 : CHUNK_SIZE;
    ir_chunk *n = ir_malloc(sizeof(ir_chunk) + want);
    if (!n) {
        ir_error(KILN_ERR_NOMEM, "kiln: out of memory: arena request of %zu bytes", size);
        return NULL;
    }
    n->size = want;
    size_t off = aligned_offset(n, 0, align);
    n->used = off + size;
    if (big && c) {
        n->next = c->next;
        c->next = n;
    } else {
        n->next = c;
        a->head = n;
    }
    return memset(n->mem + off, 0, size);
}

char *
ir_arena_strndup(ir_arena *a, const char *s, size_t n)
{
    if (n == SIZE_MAX) {
        ir_error(KILN_ERR_NOMEM, "kiln: out of memory: string of %zu bytes", n);
        return NULL;
    }
    char *d = ir_arena_alloc(a, n + 1, 1);
    if (d)
        memcpy(d, s, n);
    return d;
}

char *
ir_arena_strdup(ir_arena *a, const char *s)
{
    return ir_arena_strndup(a, s, strlen(s));
}

void
ir_arena_free(ir_arena *a)
{
    ir_chunk *c = a->head;
    while (c) {
        ir_chunk *next = c->next;
        ir_free(c);
        c = next;
    }
    a->head = NULL;
}
