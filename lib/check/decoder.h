/* decoder.h — one decoder step of a GPT-2-shaped model, captured through the public tensor
 * API (kiln.h only): the client that issue 13 serves, generating one token at a time.
 *
 * Inputs, in order: x [1, D] (the new token's row), then per layer: ln1g, ln1b [D],
 * wqkv [D, 3D], bqkv [3D], wo [D, D], bo [D], ln2g, ln2b [D], w1 [D, F], b1 [F],
 * w2 [F, D], b2 [D] (every weight an input, bound per run), kp, vp [H, T, D/H] (the K/V
 * caches of the T earlier tokens).  Outputs: y [1, D] (the next row), then per layer kn,
 * vn [H, 1, D/H] (the new K/V rows the caller appends to its caches).  Pre-norm attention
 * (softmax((q @ k^T) / 8) @ v over the cache and the new row, without concatenating the
 * caches: the scores of kp and kn are concatenated, and p's two parts multiply vp and vn)
 * and a gelu MLP, each with a residual add: bench/decode.kiln is the same graph at
 * D = 768, H = 12, F = 3072, L = 2, T = 512.  Shared by `kiln bench` (decode at sizes that
 * change every step) and the tests; kiln.h only. */
#ifndef KILN_CHECK_DECODER_H
#define KILN_CHECK_DECODER_H

#include "kiln.h"

typedef struct ck_decoder {
    int layers;
    int64_t d, heads, ff;
} ck_decoder;

/* Capture the step with caches of t rows on `device` and end the scope into a program
 * (options as kiln_scope_end's).  The error of the failing call, the scope aborted. */
kiln_status ck_decoder_capture(kiln_device *device, const ck_decoder *dec, int64_t t,
                               const kiln_options *options, kiln_program **out);

/* The number of inputs and outputs of the step. */
int ck_decoder_num_inputs(const ck_decoder *dec);
int ck_decoder_num_outputs(const ck_decoder *dec);

/* Fill n floats with the benchmarks' inputs: uniform in [-0.1, 0.1), from the LCG state
 * *seed (advanced), so weights and caches stay finite through every step. */
void ck_decoder_fill(float *v, size_t n, uint64_t *seed);

#endif /* KILN_CHECK_DECODER_H */
