/* refmath.h — exact values of kiln's float functions, and errors in ULPs of a dtype.
 *
 * `kiln check --ulp` and tests/check_llvm_sweep.c measure compiled math against these
 * rather than the reference interpreter: the interpreter evaluates ops.def's formulas in
 * double, which for f64 results is not accurate to an ULP (sigmoid(-709.9): exp(709.9)
 * overflows and the formula gives 0 where the value is 5e-309; gelu's negative tail).
 * Definitions: docs/accuracy.md ("What the numbers mean"). */
#ifndef KILN_REFMATH_H
#define KILN_REFMATH_H

#include <stdbool.h>
#include <stddef.h>

#include "ir.h"

/* Does ref_math know op?  The float functions kiln's vector math compiles (ops.def's VMATH
 * rows: exp ... atan2), and sqrt, rsqrt, recip. */
bool ref_math_has(ir_op op);
/* op(a) or op(a, b) in long double (64-bit significand), with the composite functions in
 * forms free of cancellation: within ~2^-10 ULP of dtype t (f32 or f64) of the exact
 * value, except where glibc's long double function itself is worse (gelu's argument is
 * formed in binary128 for f64, which is slow; in long double for f32).  NaN operands are
 * taken as quiet. */
long double ref_math(ir_op op, kiln_dtype t, long double a, long double b);

/* The ULP of dtype t (f32, f64) at the magnitude of x: 2^(e - p + 1) for |x| in
 * [2^e, 2^(e+1)), the smallest subnormal below the smallest normal, and the ULP of the
 * largest binade at and beyond the largest finite value. */
long double ref_ulp_of(kiln_dtype t, long double x);
/* The error of `got` (a value of dtype t) against the exact value, in ULPs of t at the
 * exact value's magnitude: |got - exact| / ref_ulp_of(t, exact).  0 when equal (the sign
 * of zero is not compared) and for the right infinity where the exact value rounds to
 * infinity in t; INFINITY for NaN against a number and for a finite value against an
 * exact infinity; otherwise an infinite `got` counts as 2^(emax+1). */
double ref_ulp_error(kiln_dtype t, double got, long double exact);
/* Distance between two values of dtype t counted in representable values (adjacent floats
 * are 1 apart, ±0 are 0 apart), exact for f64 too; NaN against NaN is 0, NaN against a
 * number INFINITY. */
double ref_ulp_distance(kiln_dtype t, double a, double b);

#endif
