"""jax_decode.py — the decoder step of torch_decode.py (lib/check/decoder.c's math) under
jax.jit (XLA's CPU backend, f32), for the comparison in docs/benchmarking.md.

    python jax_decode.py [--layers L] [--t0 T] [--steps N] [--mode exact|padded]

exact: the caches sliced to the t rows of the step, as kiln's and torch's clients do; every
new t is a new shape, so XLA compiles the step again at every step (the figure to read is
the per-step time with that compile in it).  padded: the way a JAX client avoids that, one
cache of t0 + steps rows for every step and the rows not yet written masked out of the
softmax (a score of -inf): one compile, every step reading the whole padded cache.
Prints the first step (the compile) and the median of the later steps, in ms.  Run it in a
fresh process.  Not a test; JAX is never a dependency of kiln (install it in a scratch
virtualenv: `python3 -m venv /tmp/jv && /tmp/jv/bin/pip install jax`)."""
import argparse
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--layers", type=int, default=12)
p.add_argument("--t0", type=int, default=512)
p.add_argument("--steps", type=int, default=21)
p.add_argument("--mode", choices=("exact", "padded"), default="padded")
a = p.parse_args()
D, H, F = 768, 12, 3072
hd = D // H
rng = np.random.default_rng(1)
T = a.t0 + a.steps


def w(*shape):
    return jnp.asarray((rng.random(shape, dtype=np.float32) * 0.2 - 0.1).astype(np.float32))


names = ("ln1g", "ln1b", "wqkv", "bqkv", "wo", "bo", "ln2g", "ln2b", "w1", "b1", "w2", "b2")
shapes = ((D,), (D,), (D, 3 * D), (3 * D,), (D, D), (D,), (D,), (D,), (D, F), (F,), (F, D), (D,))
layers = [{n: w(*s) for n, s in zip(names, shapes)} for _ in range(a.layers)]
caches = [(w(H, T, hd), w(H, T, hd)) for _ in range(a.layers)]  # rows >= t0 are written later
x0 = w(1, D)


def layernorm(x, gm, bt):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * gm + bt


def layer(x, L, kp, vp, t):
    """kp, vp: [H, rows, hd]; rows >= t (padded mode) are masked out."""
    h = layernorm(x, L["ln1g"], L["ln1b"])
    qkv = h @ L["wqkv"] + L["bqkv"]
    q, k, v = jnp.split(qkv, 3, axis=-1)
    q = q.reshape(1, H, hd).transpose(1, 0, 2)
    kn = k.reshape(1, H, hd).transpose(1, 0, 2)
    vn = v.reshape(1, H, hd).transpose(1, 0, 2)
    sp = q @ kp.transpose(0, 2, 1)  # [H, 1, rows]
    if t is not None:
        sp = jnp.where(jnp.arange(kp.shape[1]) < t, sp, -jnp.inf)
    s = jnp.concatenate([sp, q @ kn.transpose(0, 2, 1)], axis=-1) / 8.0
    pr = jax.nn.softmax(s, axis=-1)
    o = pr[..., :-1] @ vp + pr[..., -1:] @ vn
    x = x + o.transpose(1, 0, 2).reshape(1, D) @ L["wo"] + L["bo"]
    h = layernorm(x, L["ln2g"], L["ln2b"])
    u = h @ L["w1"] + L["b1"]
    u = 0.5 * u * (1 + jnp.tanh(0.7978845608 * (u + 0.044715 * u ** 3)))
    return x + u @ L["w2"] + L["b2"], kn, vn


@partial(jax.jit, static_argnums=3)
def step_exact(x, layers, caches, t):
    outs = []
    for L, (kp, vp) in zip(layers, caches):
        x, kn, vn = layer(x, L, kp[:, :t], vp[:, :t], None)
        outs.append((kn, vn))
    return x, outs


@jax.jit
def step_padded(x, layers, caches, t):
    outs = []
    for L, (kp, vp) in zip(layers, caches):
        x, kn, vn = layer(x, L, kp, vp, t)
        outs.append((kn, vn))
    return x, outs


times = []
for i in range(a.steps):
    t = a.t0 + i
    t0 = time.perf_counter()
    if a.mode == "exact":
        y, kv = step_exact(x0, layers, caches, t)
    else:
        y, kv = step_padded(x0, layers, caches, jnp.int32(t))
    y.block_until_ready()
    times.append((time.perf_counter() - t0) * 1e3)
    # the new rows into the caches (outside the timing, as in torch_decode.py)
    caches = [(kp.at[:, t].set(kn[:, 0]), vp.at[:, t].set(vn[:, 0])) for (kp, vp), (kn, vn) in zip(caches, kv)]
later = sorted(times[1:])
print(f"jax {jax.__version__} jax.jit ({a.mode} caches) f32, {a.layers} layers, D {D}, caches of "
      f"{a.t0} rows, {jax.devices()[0].platform}")
print(f"first step {times[0]:.1f} ms; steps 2-{a.steps} median {later[len(later) // 2]:.2f} ms")
