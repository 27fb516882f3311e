"""torch_decode.py — the decoder step of tests/support/decoder.c in torch eager (f32), for the
comparison in docs/benchmarking.md ("Serving step by step": the first step of a model).

    python torch_decode.py [--layers L] [--t0 T] [--steps N] [--threads N] [--compile]

The same math as decoder.c: pre-norm attention over the K/V cache of T rows and the new row
(scores of the cache and of the new row concatenated, p's two parts multiplying the cache and
the new row), a gelu (tanh) MLP, residual adds; every weight a tensor made before the first
step, caches one row longer each step.  Prints the first step (torch's own lazy
initialisation included, as kiln's first step includes its compile) and the median of the
later steps, in ms.  Run it in a fresh process: the first step is the point.  Not a test;
torch is never a dependency of kiln (install it in a scratch virtualenv).  --compile runs the
step through torch.compile(dynamic=True) (TorchInductor; it needs a C++ compiler): its first
step is the compile, and one graph serves every cache length."""
import argparse
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--layers", type=int, default=12)
p.add_argument("--t0", type=int, default=512)
p.add_argument("--steps", type=int, default=21)
p.add_argument("--threads", type=int, default=0)
p.add_argument("--compile", action="store_true")
a = p.parse_args()
if a.threads:
    torch.set_num_threads(a.threads)
D, H, F = 768, 12, 3072
hd = D // H
g = torch.Generator().manual_seed(1)


def w(*shape):
    return (torch.rand(*shape, generator=g) * 0.2 - 0.1).float()


layers = []
for _ in range(a.layers):
    layers.append(dict(ln1g=w(D), ln1b=w(D), wqkv=w(D, 3 * D), bqkv=w(3 * D), wo=w(D, D), bo=w(D),
                       ln2g=w(D), ln2b=w(D), w1=w(D, F), b1=w(F), w2=w(F, D), b2=w(D),
                       kp=w(H, a.t0, hd), vp=w(H, a.t0, hd)))
x0 = w(1, D)


def layernorm(x, gm, bt):
    m = x.mean(-1, keepdim=True)
    v = ((x - m) ** 2).mean(-1, keepdim=True)
    return (x - m) * torch.rsqrt(v + 1e-5) * gm + bt


def step(x, t):
    outs = []
    for L in layers:
        h = layernorm(x, L["ln1g"], L["ln1b"])
        qkv = h @ L["wqkv"] + L["bqkv"]
        q, k, v = qkv.split(D, dim=-1)
        q = q.reshape(1, H, hd).permute(1, 0, 2)  # [H, 1, hd]
        kn = k.reshape(1, H, hd).permute(1, 0, 2)
        vn = v.reshape(1, H, hd).permute(1, 0, 2)
        kp, vp = L["kp"][:, :t], L["vp"][:, :t]
        s = torch.cat([q @ kp.transpose(1, 2), q @ kn.transpose(1, 2)], dim=-1) / 8.0
        pr = torch.softmax(s, dim=-1)
        o = pr[..., :t] @ vp + pr[..., t:] @ vn  # [H, 1, hd]
        x = x + o.permute(1, 0, 2).reshape(1, D) @ L["wo"] + L["bo"]
        h = layernorm(x, L["ln2g"], L["ln2b"])
        u = h @ L["w1"] + L["b1"]
        u = 0.5 * u * (1 + torch.tanh(0.7978845608 * (u + 0.044715 * u ** 3)))
        x = x + u @ L["w2"] + L["b2"]
        outs.append((kn, vn))
    return x, outs


# the caches grow: room for every step's row, read as [:, :t]
for L in layers:
    for c in ("kp", "vp"):
        big = torch.empty(H, a.t0 + a.steps, hd)
        big[:, :a.t0] = L[c]
        L[c] = big
run = torch.compile(step, dynamic=True) if a.compile else step
times = []
with torch.no_grad():
    for i in range(a.steps):
        t = a.t0 + i
        t0 = time.perf_counter()
        y, kv = run(x0, t)
        times.append((time.perf_counter() - t0) * 1e3)
        for L, (kn, vn) in zip(layers, kv):
            L["kp"][:, t] = kn[:, 0]
            L["vp"][:, t] = vn[:, 0]
later = sorted(times[1:])
print(f"torch {torch.__version__} {'torch.compile' if a.compile else 'eager'} f32, {a.layers} layers, D {D}, caches of {a.t0} rows, "
      f"{torch.get_num_threads()} threads")
print(f"first step {times[0]:.1f} ms; steps 2-{a.steps} median {later[len(later) // 2]:.2f} ms")
