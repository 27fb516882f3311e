/* oracle.h — running a graph compiled and in the reference interpreter, and comparing the
 * outputs under a stated tolerance.  Public API only (kiln.h), plus two helpers that read
 * a graph's nodes (ts_outputs_inexact; ts_bounds_for, through lib/check/errbound.c).
 *
 * Every output buffer is filled with a poison byte before a run and followed by a guard
 * area, so an element a program never writes, or a write past an output's end, is caught.
 * The reference is always the interpreter (a KILN_MODE_INTERP program), which computes f32
 * in f64 and rounds once.
 */
#ifndef KILN_TEST_ORACLE_H
#define KILN_TEST_ORACLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln.h"

#define TS_MAXIO 16
#define TS_GUARD 64

/* How one output is compared.
 *  EXACT  integer and bool elements byte for byte; floats too, except that a NaN matches
 *         any NaN (payloads are not specified): -0.0 vs +0.0 differ;
 *  BOUND  element i within bound[i] as `kiln check` compares (eb_within,
 *         lib/check/errbound.h): a forward error bound propagated through the graph from
 *         the reference interpreter's values (ts_bounds_for).  It applies to integer and
 *         bool elements too (an argmax or a comparison after an inexact sum), and an
 *         INFINITY bound passes anything, NaN included (no bound survives there); a NULL
 *         bound is 0 everywhere, which is EXACT but for ±0 (like `kiln check`, BOUND
 *         takes -0.0 and +0.0 as equal; zero_sign narrows that);
 *  SKIP   not compared. */
typedef enum ts_tol_kind {
    TS_TOL_EXACT,
    TS_TOL_BOUND,
    TS_TOL_SKIP,
} ts_tol_kind;

typedef struct ts_tol {
    ts_tol_kind kind;
    const double *bound; /* BOUND: one per output element; NULL: all 0 */
    bool zero_sign;      /* BOUND: where bound[i] is 0 and both are ±0, the signs must
                          * match too (a zero bound says the result is exact, and for a
                          * sum of ±0s, a product with a zero factor or a matmul with
                          * K = 0 so is the sign of its zero, in any order; the bound,
                          * a distance, cannot say so) */
    bool nonfinite;      /* BOUND: where the reference is ±inf or NaN, the result must be the
                          * same infinity, or a NaN, whatever the bound: for inputs whose
                          * finite values no order of the sums can overflow, an infinity or
                          * NaN among them decides the result in any order (the bound there
                          * is infinite: the magnitudes it is made of are) */
} ts_tol;

/* Buffers for a graph's inputs or outputs, in order. */
typedef struct ts_bufs {
    int n;
    void *buf[TS_MAXIO];
} ts_bufs;

/* One malloc'd buffer of exactly its size per input of g (NULL for a zero-size input). */
void ts_bufs_for_inputs(const kiln_graph *g, ts_bufs *b);
void ts_bufs_free(ts_bufs *b);

/* The spacing of dtype t (f32 or f64) at |x|: the distance to the next value away from
 * zero (the smallest subnormal at 0; the spacing below the largest finite value beyond
 * it). */
double ts_ulp(kiln_dtype t, double x);

/* Element i of a float buffer as a double. */
double ts_load_float(kiln_dtype t, const void *p, size_t i);

/* Compare `count` elements of dtype t under tol; describes up to 6 differences (prefixed
 * by `what`) on f and returns how many differ. */
size_t ts_compare(FILE *f, const char *what, kiln_dtype t, size_t count, const void *got,
                  const void *want, const ts_tol *tol);

/* Compile g in `mode` and run it on `in`.  On success out->buf[i] holds output i (malloc'd
 * with a guard area; free with ts_bufs_free) and NULL is returned; otherwise a malloc'd
 * report (compile or run error, or an unwritten/overwritten guard byte).  `poison` is the
 * byte the outputs are filled with before the run. */
char *ts_run_mode(const kiln_graph *g, kiln_mode mode, const ts_bufs *in, ts_bufs *out,
                  unsigned char poison);

/* Run g in INTERP (the oracle) and in each of the `nmodes` modes, comparing output i by
 * tols[i] (tols NULL: all EXACT).  NULL when all match; else a malloc'd report naming the
 * mode, output and elements, with the graph's text and the failing program's plan.
 * With KILN_TEST_TRACE set, each graph is printed to stderr before it runs (to name the
 * graph a crash happened in). */
char *ts_check_modes(const kiln_graph *g, const ts_bufs *in, const ts_tol *tols, int nmodes,
                     const kiln_mode *modes);

/* FUSED and EAGER against INTERP; on a mismatch, prints the report to stderr (after
 * `ctx`) and fails the current Check test. */
void ts_check_fused_eager(const kiln_graph *g, const ts_bufs *in, const ts_tol *tols,
                          const char *ctx);

/* Per-element bounds of some of a graph's outputs: errbound's eb_reference (the bound
 * `kiln check` holds kernels to) run on the same inputs. */
typedef struct ts_bounds {
    int n;                   /* the graph's outputs */
    double *bound[TS_MAXIO]; /* per output: its bound (NULL: 0), for outputs not asked for
                              * always NULL */
    size_t finite;           /* elements of the outputs asked for with a finite bound */
    size_t infinite;         /* ... and with none (INFINITY: not compared under BOUND) */
} ts_bounds;

/* The bounds of g's outputs i with which[i] set, on inputs `in`; fails the test if the
 * reference cannot run.  Free with ts_bounds_free. */
void ts_bounds_for(const kiln_graph *g, const ts_bufs *in, const bool *which, ts_bounds *b);
void ts_bounds_free(ts_bounds *b);

/* The plan dump of p (malloc'd text), and how many of its lines are reference steps
 * (lines that say "reference:"). */
char *ts_plan_text(const kiln_program *p);
/* Occurrences of `word` in text, not overlapping. */
int ts_count(const char *text, const char *word);
int ts_plan_reference_steps(const char *plan);

/* Per output of g, whether its value depends on a float op whose compiled result may
 * legitimately differ from the reference's bits: one not computed EXACT (ops.def's
 * computed column: vector math, exp ... atan2 and pow of floats; the REASSOC sums,
 * products and matmul).  Returns how many are. */
int ts_outputs_inexact(const kiln_graph *g, bool *inexact);

/* Run this executable (/proc/self/exe) with argv[1..] = args (NULL-terminated) and the
 * environment plus `setenv` ("NAME=value"; replaces NAME, and drops KILN_DUMP*); waits for
 * it.  Returns its exit status (0..255), or -1 if it did not exit normally. */
int ts_spawn_self(const char *const *args, const char *setenv);

/* A whole file, malloc'd and NUL-terminated; NULL if it cannot be read. */
char *ts_slurp(const char *path, size_t *len);
/* Run this binary as `--threads-child PATH` with KILN_NUM_THREADS = 1, 2 and 4; each child
 * writes its int32 thread count then its results to PATH.  Asserts every child succeeded
 * with its thread count and the three results are the same bytes; bytes[k] (malloc'd,
 * the caller frees) and len[k] are child k's file.  tag names the temporary directory. */
void ts_threads_children(const char *tag, char **bytes, size_t *len);

/* Element i of a buffer of dtype t as text for failure messages: floats with their bit
 * pattern, integers in decimal, bools as 0 or 1. */
void ts_elem_str(kiln_dtype t, const void *p, size_t i, char *buf, size_t n);

#endif
