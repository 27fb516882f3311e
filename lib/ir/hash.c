/* hash.c — structural hash and equality of graphs.
 *
 * Value, input, output and graph names are not structure: two graphs built the same way
 * hash equal whatever they call their values.  The op, operand wiring, dtypes, shapes,
 * attributes and constant bytes are.  The *generic* key drops sizes (keeping rank and
 * which dims are 1, i.e. the broadcast pattern) so that kernels taking sizes as arguments
 * can be shared between graphs that differ only in sizes. */
#include <string.h>

#include "ir.h"

/* (a permutation's axes a byte each in one word; which dims are 1 a bit each in bits 24-31
 * of a node's first word) */
_Static_assert(IR_MAX_RANK <= 8, "hash.c packs per-axis facts into one word");

static uint64_t
mix(uint64_t h, uint64_t v)
{
    /* splitmix64's finaliser over the running state. */
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

static uint64_t
mix_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    h = mix(h, n);
    for (; n >= 8; n -= 8, b += 8) {
        uint64_t v;
        memcpy(&v, b, 8);
        h = mix(h, v);
    }
    uint64_t tail = 0;
    memcpy(&tail, b, n);
    return mix(h, tail);
}

uint64_t
ir_hash_bytes(uint64_t seed, const void *p, size_t n)
{
    return mix_bytes(seed, p, n);
}

/* Which dims of s are 1, a bit each. */
static uint64_t
ones_of(const ir_shape *s)
{
    uint64_t b = 0;
    for (int i = 0; i < s->rank && i < IR_MAX_RANK; i++) /* (the bound for GCC's -Warray-bounds) */
        b |= (uint64_t)(s->dims[i] == 1) << i;
    return b;
}

/* A shape: its rank and which dims are 1 in one word, then (not generic) its dims. */
static uint64_t
mix_shape(uint64_t h, const ir_shape *s, bool generic)
{
    h = mix(h, (uint64_t)s->rank | ones_of(s) << 8);
    for (int i = 0; i < s->rank && !generic; i++)
        h = mix(h, (uint64_t)s->dims[i]);
    return h;
}

static uint64_t
mix_i64s(uint64_t h, const int64_t *v, int n)
{
    for (int i = 0; i < n; i++)
        h = mix(h, (uint64_t)v[i]);
    return h;
}

static uint64_t
hash_node(uint64_t h, const ir_node *nd, bool generic)
{
    unsigned m = ir_ops[nd->op].attrs;
    const ir_attrs *a = nd->at;
    const int r = IR_MAX_RANK; /* list attributes: every slot (unused ones are zero) */
    /* each mix waits for the one before (a chain of multiplies), so fields share words:
     * op, dtype, rank, which dims are 1 and the operand count in one, operands two to a
     * word, a permutation in one (a capture's graph hashed at its scope end: a node cost
     * a dozen mixes, now three or four) */
    const ir_shape *sh = &nd->type.shape;
    h = mix(h, (uint64_t)nd->op | (uint64_t)nd->type.dtype << 8 | (uint64_t)sh->rank << 16 |
                   ones_of(sh) << 24 | (uint64_t)(uint32_t)nd->nin << 32);
    for (int i = 0; i < sh->rank && !generic; i++)
        h = mix(h, (uint64_t)sh->dims[i]);
    for (int i = 0; i < nd->nin; i += 2)
        h = mix(h, (uint64_t)(uint32_t)nd->in[i] |
                       (i + 1 < nd->nin ? (uint64_t)(uint32_t)nd->in[i + 1] << 32 : 0));
    if (m & IR_A_DATA)
        h = mix_bytes(h, a->data, ir_type_bytes(&nd->type));
    if (m & IR_A_VALUE)
        h = mix_bytes(h, a->value.bytes, sizeof a->value.bytes);
    /* START is arange's scalar start and slice's list begin. */
    if ((m & IR_A_START) && nd->op == IR_OP_ARANGE)
        h = mix_bytes(h, a->start.bytes, sizeof a->start.bytes);
    if ((m & IR_A_START) && nd->op == IR_OP_SLICE && !generic)
        h = mix_i64s(h, a->begin, r);
    if ((m & IR_A_STOP) && !generic)
        h = mix_i64s(h, a->stop, r);
    if (m & IR_A_STEP)
        h = mix_i64s(h, a->step, r);
    if (m & IR_A_DELTA)
        h = mix_bytes(h, a->delta.bytes, sizeof a->delta.bytes);
    if ((m & IR_A_LOW) && !generic)
        h = mix_i64s(h, a->low, r);
    if ((m & IR_A_HIGH) && !generic)
        h = mix_i64s(h, a->high, r);
    if (m & IR_A_TO)
        h = mix(h, (uint64_t)a->to);
    if (m & IR_A_SHAPE)
        h = mix_shape(h, &a->shape, generic);
    if (m & IR_A_PERM) {
        uint64_t w = 0; /* (IR_MAX_RANK axes below 256, a byte each) */
        for (int i = 0; i < IR_MAX_RANK; i++)
            w |= (uint64_t)(uint8_t)a->perm[i] << (8 * i);
        h = mix(h, w);
    }
    if (m & IR_A_AXIS)
        h = mix(h, (uint64_t)a->axis);
    if (m & IR_A_AXES)
        h = mix(h, a->axes);
    if (m & IR_A_KEEPDIM)
        h = mix(h, a->keepdim);
    return h;
}

uint64_t
ir_graph_hash(const kiln_graph *g, bool generic)
{
    uint64_t h = mix(0x6b696c6e, generic);
    h = mix(h, (uint64_t)g->ninputs);
    h = mix(h, (uint64_t)g->nnodes);
    for (int32_t i = 0; i < g->nnodes; i++)
        h = hash_node(h, &g->nodes[i], generic);
    h = mix(h, (uint64_t)g->noutputs);
    for (int32_t i = 0; i < g->noutputs; i++)
        h = mix(h, (uint64_t)g->outputs[i].node);
    return h;
}

static bool
i64s_equal(const int64_t *a, const int64_t *b)
{
    return memcmp(a, b, sizeof(int64_t) * IR_MAX_RANK) == 0;
}

/* Field by field over the op's mask: a whole-struct memcmp would also compare padding
 * bytes, which struct copies do not promise to keep zero.  add_node zeroes unused list
 * slots and scalar bytes, so comparing every slot is exact. */
static bool
attrs_equal(const ir_node *x, const ir_node *y)
{
    unsigned m = ir_ops[x->op].attrs;
    const ir_attrs *a = x->at, *b = y->at;
    if ((m & IR_A_DATA) && memcmp(a->data, b->data, ir_type_bytes(&x->type)) != 0)
        return false;
    if ((m & IR_A_VALUE) && memcmp(&a->value, &b->value, sizeof a->value) != 0)
        return false;
    if ((m & IR_A_START) && x->op == IR_OP_ARANGE &&
        memcmp(&a->start, &b->start, sizeof a->start) != 0)
        return false;
    if ((m & IR_A_START) && x->op == IR_OP_SLICE && !i64s_equal(a->begin, b->begin))
        return false;
    if ((m & IR_A_STOP) && !i64s_equal(a->stop, b->stop))
        return false;
    if ((m & IR_A_STEP) && !i64s_equal(a->step, b->step))
        return false;
    if ((m & IR_A_DELTA) && memcmp(&a->delta, &b->delta, sizeof a->delta) != 0)
        return false;
    if ((m & IR_A_LOW) && !i64s_equal(a->low, b->low))
        return false;
    if ((m & IR_A_HIGH) && !i64s_equal(a->high, b->high))
        return false;
    if ((m & IR_A_TO) && a->to != b->to)
        return false;
    if ((m & IR_A_SHAPE) && !ir_shape_equal(&a->shape, &b->shape))
        return false;
    if ((m & IR_A_PERM) && memcmp(a->perm, b->perm, sizeof a->perm) != 0)
        return false;
    if ((m & IR_A_AXIS) && a->axis != b->axis)
        return false;
    if ((m & IR_A_AXES) && a->axes != b->axes)
        return false;
    if ((m & IR_A_KEEPDIM) && a->keepdim != b->keepdim)
        return false;
    return true;
}

bool
ir_graph_equal(const kiln_graph *a, const kiln_graph *b)
{
    if (a->nnodes != b->nnodes || a->ninputs != b->ninputs || a->noutputs != b->noutputs)
        return false;
    for (int32_t i = 0; i < a->nnodes; i++) {
        const ir_node *x = &a->nodes[i], *y = &b->nodes[i];
        if (x->op != y->op || !ir_type_equal(&x->type, &y->type) || x->nin != y->nin)
            return false;
        if (x->nin && memcmp(x->in, y->in, sizeof(int32_t) * (size_t)x->nin) != 0)
            return false;
        if (x->op != IR_OP_INPUT && !attrs_equal(x, y))
            return false;
        if (x->op == IR_OP_INPUT && x->index != y->index)
            return false;
    }
    for (int32_t i = 0; i < a->noutputs; i++)
        if (a->outputs[i].node != b->outputs[i].node)
            return false;
    return true;
}
