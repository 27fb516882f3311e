/* arena.c — a bump arena per graph (QBE-style pool): nodes, names and constant data are
 * carved from chunks and freed in one sweep with the graph. */
#include <stdint.h>
#include <string.h>

#include "ir.h"

#define CHUNK_SIZE ((size_t)16 << 10)

struct ir_chunk {
    ir_chunk *next;
    size_t used, size;
    _Alignas(64) unsigned char mem[];
};

void *
ir_arena_alloc(ir_arena *a, size_t size, size_t align)
{
    IR_ASSERT(align && align <= 64 && (align & (align - 1)) == 0);
    ir_chunk *c = a->head;
    if (c) {
        size_t off = (c->used + align - 1) & ~(align - 1);
        if (off <= c->size && size <= c->size - off) {
            c->used = off + size;
            return memset(c->mem + off, 0, size);
        }
    }
    /* A big request gets a chunk of its own behind the current one, so the current
     * chunk's free tail stays usable. */
    size_t want = size > CHUNK_SIZE / 4 ? size : CHUNK_SIZE;
    if (want > SIZE_MAX - sizeof(ir_chunk)) {
        ir_error(KILN_ERR_NOMEM, "kiln: out of memory: arena request of %zu bytes", size);
        return NULL;
    }
    ir_chunk *n = ir_malloc(sizeof(ir_chunk) + want);
    if (!n) {
        ir_error(KILN_ERR_NOMEM, "kiln: out of memory: arena request of %zu bytes", size);
        return NULL;
    }
    n->size = want;
    n->used = size;
    if (want != CHUNK_SIZE && c) {
        n->next = c->next;
        c->next = n;
    } else {
        n->next = c;
        a->head = n;
    }
    return memset(n->mem, 0, size);
}

char *
ir_arena_strndup(ir_arena *a, const char *s, size_t n)
{
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
