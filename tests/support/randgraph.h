/* randgraph.h — seeded random VALID graphs for round-trip, interpreter and JIT tests.
 *
 * ts_random_graph(seed, opts) builds a graph through ir_graph_add_input and
 * ir_graph_add_node only, so every graph it returns has passed the op table's type rules;
 * it is verified before it is returned.  The same seed and options give the same graph on
 * every host (a self-contained xoshiro256** seeded by splitmix64; no libc rand, no floating
 * point in the choices).
 *
 * What a graph contains, by default:
 *  - 1 to 4 inputs, declared first (so node ids match what the parser assigns), with
 *    shapes that are broadcast variants of one base shape (size-1 dims, fewer leading
 *    dims), so binary ops find partners; sometimes a zero-size dim.
 *  - 1 to 12 computing nodes, each op drawn from the enabled ones (every op of ops.def by
 *    default), with dtypes chosen per the op's rule and every attribute kind exercised:
 *    negative/huge slice bounds and negative steps, pads, permutations, reshapes, expands,
 *    concat of 1-3 operands, gathers with out-of-range indices, reductions over axis sets
 *    with and without keepdim, batched and 1-D matmuls.
 *  - Operands come from earlier values when one fits, else from a new full or constant of
 *    the needed type.  So even with `kinds`/`ops` restricted, full and constant nodes can
 *    appear as operands.
 *  - Constants and scalar attributes draw from special values: ±0.0, NaNs with payloads
 *    and sign, subnormals, ±inf, FLT_MAX/DBL_MAX and the smallest normals, INT32/INT64
 *    min and max, plus ordinary numbers.  Constants above 64 elements appear (the
 *    printer's base64 form).
 *  - 1 to 3 outputs, which may repeat a value and may be inputs; value, input, output and
 *    graph names mix identifiers, unnamed values (%N) and names that need quoting.
 *
 * Returns NULL with kiln's error set if building failed (a bug in the generator or in the
 * type rules: report the seed).  Free with kiln_graph_free.
 */
#ifndef KILN_TEST_RANDGRAPH_H
#define KILN_TEST_RANDGRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "ir.h"

typedef struct ts_randgraph_opts {
    int min_nodes, max_nodes;    /* computing (non-input) nodes chosen; default 1..12.
                                  * Operand sources made on the way come on top. */
    int max_inputs;              /* 1..max_inputs inputs; default 4 */
    int max_outputs;             /* 1..max_outputs outputs; default 3 */
    int max_rank;                /* default 4, at most 8 (gather/matmul stay within it) */
    int64_t max_dim;             /* dims drawn from 1..max_dim (and 0, see below); default 5 */
    size_t max_elems;            /* cap on the elements of any value; default 256 */
    int zero_dim_pct;            /* percent chance a drawn dim is 0; default 4, 0 = never */
    unsigned kinds;              /* ops drawn only from these kinds: bits 1u << IR_KIND_*;
                                  * 0 = all kinds */
    const bool *ops;             /* NULL, or IR_OP_COUNT flags further restricting the ops
                                  * drawn (IR_OP_INPUT is never drawn) */
    unsigned dtypes;             /* bits 1u << KILN_DTYPE_*: the dtypes picked freely; an op
                                  * that needs another (where's bool condition, gather's
                                  * indices, argmax's i64 result, a comparison's bool) still
                                  * gets it.  0 = all */
    bool tame_values;            /* constants and scalars finite and in [-8, 8] (ints in
                                  * [-100, 100]); no NaN, inf, -0.0, subnormals or extremes */
    bool plain_names;            /* only identifiers and unnamed values: no quoted names */
    int require_op;              /* an op (ir_op) the graph must contain, even if `kinds`
                                  * or `ops` exclude it; -1 = none (default) */
    int reduce_consumer_pct;     /* percent chance that a reduction gets a consumer that
                                  * broadcasts it back over its operand's rows (x - r,
                                  * x / r, max(x, r), x < r, ...; argmax/argmin results
                                  * cast to x's dtype first; without keepdim through a
                                  * reshape to the keepdim shape), and then, half the
                                  * time, a second reduction over the same axes of that
                                  * consumer (a chain like softmax's max -> sum).  These
                                  * nodes come on top of the drawn ones and ignore
                                  * `kinds`/`ops`.  Default 0 (then no draw is made, so
                                  * graphs of existing seeds do not change). */
    int reduce_other_pct;        /* with reduce_consumer_pct: percent chance that the
                                  * consumer combines the reduction with another value of
                                  * its operand's type (an existing one when there is, such
                                  * as a concat) instead of the operand, and half the time
                                  * a second consumer reads the same two values.  Default
                                  * 0: no draw, as above. */
    int full_reduce_pct;         /* percent chance that a reduction (not argmax/argmin)
                                  * reduces every axis it may, whatever the rank: a kernel
                                  * space of one dim more than the value's (issue 26).
                                  * Default 0: no draw, as above. */
} ts_randgraph_opts;

/* Fill *o with the defaults above.  Call it, then change what a test needs. */
void ts_randgraph_defaults(ts_randgraph_opts *o);

/* Options for a JIT test: elementwise (unary, binary, ternary, cast) and movement ops
 * only, small sizes (max_dim 4, 64 elements, rank 3), tame values, plain names. */
void ts_randgraph_jit_defaults(ts_randgraph_opts *o);

/* A random valid graph for `seed` (opts NULL = defaults).  NULL on failure, error set. */
kiln_graph *ts_random_graph(uint64_t seed, const ts_randgraph_opts *opts);

/* The generator's PRNG, for tests that want matching random inputs: xoshiro256**
 * seeded through splitmix64. */
typedef struct ts_rng {
    uint64_t s[4];
} ts_rng;
void ts_rng_seed(ts_rng *r, uint64_t seed);
/* A suite's base seed: KILN_TEST_SEED (strtoull, any base) when set and not empty, else
 * dflt (each suite has its own). */
uint64_t ts_base_seed(uint64_t dflt);
uint64_t ts_rng_next(ts_rng *r);
uint64_t ts_rng_below(ts_rng *r, uint64_t n); /* uniform in [0, n), n > 0 */

/* Fill `count` elements of dtype t at dst with the generator's value mix (special values
 * unless tame).  Bools are 0 or 1. */
void ts_random_elements(ts_rng *r, kiln_dtype t, void *dst, size_t count, bool tame);

#endif
