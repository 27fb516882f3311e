/* decoder.c — see decoder.h. */
#include "decoder.h"

/* The inputs' names per layer (at most 16 layers), written once: formatting them every
 * step was 0.03 M instructions of a 2-layer step's capture, the client's own work, not
 * kiln's, in the per-step overhead measured (a client names its inputs once). */
#define L16(n)                                                                                \
    {n "0", n "1", n "2", n "3", n "4", n "5", n "6", n "7",                                  \
     n "8", n "9", n "10", n "11", n "12", n "13", n "14", n "15"}
enum { LN1G, LN1B, WQKV, BQKV, WO, BO, LN2G, LN2B, W1, B1, W2, B2, KP, VP, NNAMES };
static const char *const names[NNAMES][16] = {
    L16("ln1g"), L16("ln1b"), L16("wqkv"), L16("bqkv"), L16("wo"), L16("bo"), L16("ln2g"),
    L16("ln2b"), L16("w1"), L16("b1"), L16("w2"), L16("b2"), L16("kp"), L16("vp"),
};

static kiln_tensor
input(kiln_device *dev, int which, int layer, int rank, const int64_t *dims)
{
    return kiln_input(dev, names[which][layer], KILN_DTYPE_F32, rank, dims);
}

/* (x - mean) * rsqrt(var + 1e-5) * g + b over the last axis of x [1, D] */
static kiln_tensor
layernorm(kiln_device *dev, kiln_tensor x, kiln_tensor g, kiln_tensor b)
{
    int ax[1] = {1};
    kiln_tensor m = kiln_reduce_mean(x, 1, ax, 1);
    kiln_tensor c = kiln_sub(x, m);
    kiln_tensor v = kiln_reduce_mean(kiln_mul(c, c), 1, ax, 1);
    kiln_tensor r = kiln_rsqrt(kiln_add(v, kiln_scalar(dev, KILN_DTYPE_F32, 1e-5)));
    return kiln_add(kiln_mul(kiln_mul(c, r), g), b);
}

/* Columns [c0, c0 + D) of qkv [1, 3D] as heads [H, 1, D/H] */
static kiln_tensor
heads(kiln_tensor qkv, int64_t c0, const ck_decoder *dec)
{
    int64_t start[2] = {0, c0}, stop[2] = {1, c0 + dec->d};
    int64_t hd[3] = {1, dec->heads, dec->d / dec->heads};
    int perm[3] = {1, 0, 2};
    return kiln_permute(kiln_reshape(kiln_slice(qkv, start, stop, NULL), 3, hd), 3, perm);
}

int
ck_decoder_num_inputs(const ck_decoder *dec)
{
    return 1 + 14 * dec->layers;
}

int
ck_decoder_num_outputs(const ck_decoder *dec)
{
    return 1 + 2 * dec->layers;
}

void
ck_decoder_fill(float *v, size_t n, uint64_t *seed)
{
    uint64_t s = *seed;
    for (size_t e = 0; e < n; e++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v[e] = (float)((double)(s >> 40) * 0x1p-24 * 0.2 - 0.1);
    }
    *seed = s;
}

kiln_status
ck_decoder_capture(kiln_device *dev, const ck_decoder *dec, int64_t t, const kiln_options *options,
                   kiln_program **out)
{
    *out = NULL;
    kiln_scope s = kiln_scope_begin(dev);
    if (kiln_errcode())
        return kiln_errcode();
    int64_t D = dec->d, H = dec->heads, dh = D / H, F = dec->ff;
    int64_t row[2] = {1, D}, vd[1] = {D}, v3[1] = {3 * D}, vf[1] = {F};
    int64_t dd3[2] = {D, 3 * D}, ddd[2] = {D, D}, ddf[2] = {D, F}, dfd[2] = {F, D};
    int64_t cache[3] = {H, t, dh}, flat[2] = {1, D};
    int tperm[3] = {0, 2, 1}, hperm[3] = {1, 0, 2};
    kiln_tensor outs[1 + 2 * 16];
    int nout = 0;
    kiln_tensor x = kiln_input(dev, "x", KILN_DTYPE_F32, 2, row);
    for (int l = 0; l < dec->layers && l < 16; l++) {
        kiln_tensor ln1g = input(dev, LN1G, l, 1, vd), ln1b = input(dev, LN1B, l, 1, vd);
        kiln_tensor wqkv = input(dev, WQKV, l, 2, dd3), bqkv = input(dev, BQKV, l, 1, v3);
        kiln_tensor wo = input(dev, WO, l, 2, ddd), bo = input(dev, BO, l, 1, vd);
        kiln_tensor ln2g = input(dev, LN2G, l, 1, vd), ln2b = input(dev, LN2B, l, 1, vd);
        kiln_tensor w1 = input(dev, W1, l, 2, ddf), b1 = input(dev, B1, l, 1, vf);
        kiln_tensor w2 = input(dev, W2, l, 2, dfd), b2 = input(dev, B2, l, 1, vd);
        kiln_tensor kp = input(dev, KP, l, 3, cache), vp = input(dev, VP, l, 3, cache);

        kiln_tensor qkv = kiln_add(kiln_matmul(layernorm(dev, x, ln1g, ln1b), wqkv), bqkv);
        kiln_tensor q = heads(qkv, 0, dec), kn = heads(qkv, D, dec), vn = heads(qkv, 2 * D, dec);
        /* attention over the cache and the new row without concatenating the caches (the
         * pattern of docs/jit.md, "A K/V cache"): the scores of both, concatenated (a
         * row per head), one softmax, then the two halves of p times their values */
        kiln_tensor sp = kiln_matmul(q, kiln_permute(kp, 3, tperm));
        kiln_tensor sn = kiln_matmul(q, kiln_permute(kn, 3, tperm));
        kiln_tensor s2[2] = {sp, sn};
        kiln_tensor sc = kiln_mul(kiln_concat(2, s2, 2), kiln_scalar(dev, KILN_DTYPE_F32, 0.125));
        int ax[1] = {2};
        kiln_tensor e = kiln_exp(kiln_sub(sc, kiln_reduce_max(sc, 1, ax, 1)));
        kiln_tensor p = kiln_div(e, kiln_reduce_sum(e, 1, ax, 1));
        int64_t z3[3] = {0, 0, 0}, past[3] = {H, 1, t}, at[3] = {0, 0, t}, end[3] = {H, 1, t + 1};
        kiln_tensor pv = kiln_add(kiln_matmul(kiln_slice(p, z3, past, NULL), vp),
                                  kiln_matmul(kiln_slice(p, at, end, NULL), vn));
        kiln_tensor o = kiln_reshape(kiln_permute(pv, 3, hperm), 2, flat);
        kiln_tensor x2 = kiln_add(x, kiln_add(kiln_matmul(o, wo), bo));
        kiln_tensor h = kiln_gelu(kiln_add(kiln_matmul(layernorm(dev, x2, ln2g, ln2b), w1), b1));
        x = kiln_add(x2, kiln_add(kiln_matmul(h, w2), b2));
        outs[1 + 2 * l] = kn;
        outs[2 + 2 * l] = vn;
        nout += 2;
    }
    outs[0] = x;
    nout++;
    /* a failed op is sticky: scope_end reports the first error (and aborts the scope) */
    return kiln_scope_end(s, nout, outs, options, out);
}
