/* errbound.h — `kiln check`'s bound: how far a correct compiled kernel may be from the
 * reference interpreter, element by element.
 *
 * The graph is walked in order with the interpreter's value of every node and a bound on
 * the distance between a correct kernel's value and it, propagated the way a forward
 * error analysis does: through elementwise ops by their derivatives (or their values at
 * the ends of the interval), through reductions and matmul relative to the sum of
 * magnitudes (gamma_n = n*u/(1 - n*u) times sum |x| or sum |a*b|, for any summation
 * order), plus each op's own error in kernel and interpreter.  An elementwise ULP bound
 * cannot hold after a sum that cancels; an absolute bound propagated this way can.
 * The model, op by op: docs/accuracy.md ("kiln check: the bound of a graph"). */
#ifndef KILN_ERRBOUND_H
#define KILN_ERRBOUND_H

#include <stdbool.h>

#include "ir.h"

typedef struct eb_output {
    void *ref;     /* the interpreter's values, in the output's dtype */
    double *bound; /* per element, >= 0, INFINITY where anything goes; NULL: all 0 (exact) */
} eb_output;

/* Run graph g on `inputs` through the interpreter node by node, and fill outs[i] (one per
 * graph output) with the reference values and their bounds; free with eb_free.  Values
 * no later node reads are freed as the walk goes.  Errors: KILN_ERR_NOMEM and the
 * interpreter's. */
kiln_status eb_reference(const kiln_graph *g, const void *const *inputs, eb_output *outs);
void eb_free(const kiln_graph *g, eb_output *outs);

/* Does `got` pass against `ref` (element i of two buffers of dtype t) with this bound?
 * NaN passes only against NaN (any payload) unless the bound is infinite; infinities
 * count as 2^(emax+1) (so an overflow next to the largest finite value is a small error);
 * a zero bound needs the same value.  *ratio: |got - ref| / bound (0 when equal, INFINITY
 * when beyond a zero bound). */
bool eb_within(kiln_dtype t, const void *got, const void *ref, size_t i, double bound,
               double *ratio);

/* One output of a compiled run against its reference and bounds: the verdict `kiln check`
 * and `kiln bench` give, and what they print with it. */
typedef struct eb_cmp {
    bool pass;    /* every element within its bound (eb_within) */
    double ratio; /* the largest |got - ref| / bound; INFINITY beyond a zero bound or for NaN
                   * against a number; > 1 whenever !pass */
    double ulp;   /* floats: the largest distance in representable values (ref_ulp_distance);
                   * ints and bools: how many elements differ */
    size_t worst; /* the element with the largest ratio (the first failing one if any), or
                   * with the largest ulp when every ratio is 0 */
} eb_cmp;

/* Compare n elements of dtype t of `got` with ref (its values and bounds). */
eb_cmp eb_compare(kiln_dtype t, const void *got, const eb_output *ref, size_t n);

#endif
