"""run_numpy.py KILN SOURCE_DIR -- `kiln run` against NumPy: small graphs of tests/cli and
the benchmark suite's graphs (bench/*.kiln) at full size.

Inputs are seeded random arrays written by numpy (format versions 1.0, 2.0 and 3.0); kiln's
output files are loaded by numpy and compared with numpy evaluating the same expression.
Tolerances, per output:
  exact    elementwise +, *, max, casts, where, comparisons: kiln computes each f32 op in f64
           and rounds once, which for + and * of f32 operands equals the correctly rounded f32
           result numpy computes, so the bits must agree;
  rtol     reductions and exp (summation order and libm differ): 1e-6 relative (about 8 f32
           ulp) with an absolute floor of 1e-7;
  ulp      the benchmark suite's graphs (bench/*.kiln, full size): numpy replays kiln's
           semantics op by op (each f32 op computed in f64 and rounded once to f32; +, -, *,
           / and sqrt in plain f32 are the same thing), so results agree to a few f32 ulp; the
           bound per graph is stated where it is checked (reductions in another order and
           1-ulp differences amplified by cancellation are what it allows for).
"""
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

kiln, src = sys.argv[1], sys.argv[2]
here = os.path.join(src, "tests", "cli")
tmp = tempfile.mkdtemp(prefix="kiln-numpy-")
atexit.register(shutil.rmtree, tmp, ignore_errors=True)
failures = 0
checks = 0


def fail(msg):
    global failures
    failures += 1
    print("FAIL:", msg)


def save(name, a, version=(1, 0)):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        np.lib.format.write_array(f, np.asanyarray(a), version=version)
    return path


def run(graph, ins, outs, expect_rc=0, needle=None, mode="interp"):
    """kiln run graph --in k=v ... --out k=tmp/k.npy [--mode]; returns {name: array} and
    stdout.  The reference interpreter (the default here) computes each f32 op in f64 and
    rounds once, which is what the numpy replays below do; the JIT's agreement with the
    interpreter is check_jit's and `kiln check`'s business (its vector math differs by a
    few ulp, which cancellation can amplify)."""
    global checks
    checks += 1
    cmd = [kiln, "run", os.path.join(here, graph), "--mode", mode]
    for k, v in ins.items():
        cmd += ["--in", "%s=%s" % (k, v)]
    paths = {k: os.path.join(tmp, "out_%s.npy" % k) for k in outs}
    for k, p in paths.items():
        cmd += ["--out", "%s=%s" % (k, p)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != expect_rc:
        fail("%s -> exit %d, want %d\n%s%s" % (" ".join(cmd), r.returncode, expect_rc,
                                               r.stdout, r.stderr))
        return None, r.stdout
    if needle is not None and needle not in r.stderr:
        fail("%s: stderr lacks %r: %s" % (" ".join(cmd), needle, r.stderr))
    if expect_rc != 0:
        return None, r.stdout
    return {k: np.load(p) for k, p in paths.items()}, r.stdout


def compare(what, got, want, exact=True):
    global checks
    checks += 1
    if got.dtype != want.dtype or got.shape != want.shape:
        fail("%s: got %s%s, want %s%s" % (what, got.dtype, got.shape, want.dtype, want.shape))
        return
    if exact:
        ok = got.tobytes() == want.tobytes()
    else:
        ok = np.allclose(got, want, rtol=1e-6, atol=1e-7)
    if not ok:
        fail("%s differs:\n got  %s\n want %s" % (what, got, want))


rng = np.random.default_rng(20240601)

# chain: out = max(x*y + z, 0) * 0.5 + x, f32[16], exact.
x, y, z = (rng.standard_normal(16).astype(np.float32) for _ in range(3))
want = np.maximum(x * y + z, np.float32(0)) * np.float32(0.5) + x
for version in ((1, 0), (2, 0), (3, 0)):
    ins = {"x": save("x.npy", x, version), "y": save("y.npy", y, version),
           "z": save("z.npy", z, version)}
    got, _ = run("chain.kiln", ins, ["out"])
    if got:
        compare("chain out (inputs in .npy %d.0)" % version[0], got["out"], want)
print("chain: kiln run chain.kiln == numpy np.maximum(x*y+z, 0)*0.5 + x")
# The JIT: chain's ops are exact in kiln's kernels, so fused and eager agree bit for bit.
for mode in ("fused", "eager"):
    got, _ = run("chain.kiln", ins, ["out"], mode=mode)
    if "out" in got:
        compare("chain --mode " + mode, got["out"], np.maximum(x * y + z, np.float32(0)) * np.float32(0.5) + x)
print("chain: kiln run --mode fused and --mode eager == numpy as well")
print("  x[:4] =", x[:4], " out[:4] =", want[:4])

# mixed: every dtype across the boundary, rank 0, broadcasting.
a = (rng.standard_normal((2, 3)) * 10).astype(np.float32)
k = rng.integers(-50, 50, size=3).astype(np.int32)
m = rng.integers(0, 2, size=(2, 3)).astype(bool)
ins = {"a": save("a.npy", a), "k": save("k.npy", k), "m": save("m.npy", m)}
got, _ = run("mixed.kiln", ins, ["s", "c", "w", "g", "t"])
if got:
    compare("mixed s = a.sum(1)", got["s"], a.astype(np.float64).sum(1).astype(np.float32),
            exact=False)
    compare("mixed c = int32(a) + k", got["c"], a.astype(np.int32) + k)
    compare("mixed w = where(m, a, 0)", got["w"], np.where(m, a, np.float32(0)))
    compare("mixed g = a > 0", got["g"], a > 0)
    compare("mixed t = max(float64(a))", got["t"], np.array(a.astype(np.float64).max()))
# Outputs without --out go to stdout as a summary.
got, out = run("mixed.kiln", ins, ["s"])
checks += 1
if "  t: f64[]  min" not in out or "  c: i32[2,3]" not in out or "  s:" in out:
    fail("mixed: stdout summary is wrong:\n" + out)

# softmax over rows of f32[8,32], against numpy in f64.
xs = (rng.standard_normal((8, 32)) * 3).astype(np.float32)
got, _ = run("softmax.kiln", {"x": save("xs.npy", xs)}, ["y"])
if got:
    x64 = xs.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    compare("softmax", got["y"], (e / e.sum(axis=1, keepdims=True)).astype(np.float32),
            exact=False)

# Inputs numpy can write but kiln must refuse, each with its reason.
run("chain.kiln", {"x": save("xf.npy", x.astype(np.float64)), "y": save("y.npy", y),
                   "z": save("z.npy", z)}, ["out"], 1,
    "input 'x' does not match the graph: expected f32[16], got f64[16]")
run("chain.kiln", {"x": save("xb.npy", x.astype(">f4")), "y": save("y.npy", y),
                   "z": save("z.npy", z)}, ["out"], 1, "unsupported dtype: '>f4': big-endian")
run("mixed.kiln", {"a": save("af.npy", np.asfortranarray(a)), "k": save("k.npy", k),
                   "m": save("m.npy", m)}, ["s"], 1, "fortran_order is True")
run("mixed.kiln", {"a": save("a.npy", a), "k": save("k8.npy", k.astype(np.int64)),
                   "m": save("m.npy", m)}, ["s"], 1, "expected i32[3], got i64[3]")
run("mixed.kiln", {"a": save("a.npy", a), "k": save("k.npy", k),
                   "m": save("mu.npy", m.astype(np.uint8))}, ["s"], 1,
    "unsupported dtype: '|u1'")
run("chain.kiln", {"x": save("xo.npy", np.array([1, "a"], dtype=object)),
                   "y": save("y.npy", y), "z": save("z.npy", z)}, ["out"], 1,
    "unsupported dtype: '|O': object arrays")

# ---- the benchmark suite's graphs, at full size, against numpy ---------------------------
def r32(v):
    """Round f64 values once to f32: kiln's rule for every f32 op."""
    return np.asarray(v, np.float64).astype(np.float32)


def f64(a):
    return a.astype(np.float64)


def gelu_tanh(x):
    # bench "gelu" written out op by op; only tanh needs the f64-then-round replay.
    x3 = x * x * x
    u = (x + x3 * np.float32(0.044715)) * np.float32(0.7978845608)
    th = r32(np.tanh(f64(u)))
    return (x * np.float32(0.5)) * (th + np.float32(1))


def softmax_ref(x):
    d = x - x.max(axis=1, keepdims=True)
    e = r32(np.exp(f64(d)))
    return e / r32(f64(e).sum(axis=1, keepdims=True))


def layernorm_ref(x, gamma, beta):
    xc = x - r32(f64(x).mean(axis=1, keepdims=True))
    var = r32(f64(xc * xc).mean(axis=1, keepdims=True))
    return xc / np.sqrt(var + np.float32(1e-5)) * gamma + beta


def l2norm_ref(x):
    return np.sqrt(r32(f64(x * x).sum()))


def mlp_ref(x, W, b):
    return gelu_tanh(r32(f64(x) @ f64(W)) + b)


def chain_ref(x, y, z):
    return np.maximum(x * y + z, np.float32(0)) * np.float32(0.5) + x


# name: (reference, max ulp, inputs scale)
bench = {
    "small": (chain_ref, 0, 1.0),
    "chain": (chain_ref, 0, 1.0),
    "bcast": (lambda x, r, c: x * r + c, 0, 1.0),
    "gelu": (gelu_tanh, 1, 3.0),
    "softmax": (softmax_ref, 1, 3.0),
    "layernorm": (layernorm_ref, 2, 1.0),
    "l2norm": (l2norm_ref, 1, 1.0),
    "mlp": (mlp_ref, 2, 1.0 / 32),
}


def ulp_diff(got, want):
    """Distance in f32 ulps (0 for equal values, including both NaN)."""
    def key(a):
        i = a.astype(np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    d = np.abs(key(got) - key(want))
    return np.where(np.isnan(got) & np.isnan(want), 0, d)


def boundary(path):
    """([(name, dtype, shape)] of the inputs, [names] of the outputs) from `kiln dump`."""
    r = subprocess.run([kiln, "dump", path], capture_output=True, text=True, check=True)
    head = next(l for l in r.stdout.splitlines() if l.startswith("graph "))
    ins, outs = head.split("->", 1)
    values = r"(\w+): (\w+)\[([0-9,]*)\]"
    return ([(n, t, tuple(int(d) for d in dims.split(",") if d))
             for n, t, dims in re.findall(values, ins)],
            [n for n, _, _ in re.findall(values, outs)])


for name, (ref, max_ulp, scale) in bench.items():
    path = os.path.join(src, "bench", name + ".kiln")
    if not os.path.exists(path):
        print("bench/%s.kiln: absent, not compared" % name)
        continue
    params, outs = boundary(path)
    arrays, ins = [], {}
    for n, t, shape in params:
        a = (rng.standard_normal(shape) * scale).astype(np.float32)
        arrays.append(a)
        ins[n] = save("bench_%s.npy" % n, a)
    got, _ = run(path, ins, outs[:1])
    if not got:
        continue
    want = ref(*arrays)
    checks += 1
    g = got[outs[0]]
    if g.dtype != want.dtype or g.shape != want.shape:
        fail("bench %s: got %s%s, want %s%s" % (name, g.dtype, g.shape, want.dtype, want.shape))
        continue
    d = ulp_diff(g, want)
    worst = int(d.max()) if d.size else 0
    print("bench/%s.kiln: %d elements, max %d ulp from numpy (bound %d)" %
          (name, g.size, worst, max_ulp))
    if worst > max_ulp:
        i = np.unravel_index(int(d.argmax()), d.shape)
        fail("bench %s: %s: kiln %r, numpy %r (%d ulp > %d)" %
             (name, i, g[i], want[i], worst, max_ulp))
    for f in ins.values():
        os.remove(f)

print("%d checks, %d failures" % (checks, failures))
sys.exit(1 if failures else 0)
