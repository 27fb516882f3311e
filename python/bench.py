#!/usr/bin/env python3
"""bench.py — kiln from Python against kiln from C, measured in one process.

    PYTHONPATH=build/python /usr/bin/python3 python/bench.py [--quick] [--json FILE]

1. Call overhead on bench "small" (a 5-op chain over f32[1024]): the C API's own time
   (Program._run_loop: a C loop of kiln_program_run on the same buffers), then per call
   from Python: a kiln.jit function, a Program called with out= and without, and ctypes
   over libkiln.so (when build/libkiln.so is found).  Overhead = Python's time minus the
   C loop's, the Python loop's own cost included.
2. softmax, layernorm and mlp of bench/ written as @kiln.jit functions against the same
   .kiln graph compiled from C (kiln.compile + the C loop), warm caches, same thread pool;
   "same graph" says whether the traced graph hashes equal to bench/'s (kiln_graph_hash).
3. Trace + compile of a new signature, cold (KILN_NO_CACHE on both sides): the C API's
   compile of the parsed graph against kiln.jit tracing the function and compiling it
   (Jit.lower(dumps=False) of a jit(cache=False) function), interleaved; and the trace
   alone (Jit.graph: Python tracing, no compile).

Every time is the best of `repeat` repetitions (min is the least noisy estimate on a
shared machine); ratios are taken within this one run.
"""
import argparse
import ctypes
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("KILN_CACHE_DIR", "off")
# python/kiln here is the package's source, without the built module: use the one on
# PYTHONPATH (build/python) or installed.
_here = pathlib.Path(__file__).resolve().parent
sys.path = [p for p in sys.path if pathlib.Path(p or ".").resolve() != _here]

import numpy as np  # noqa: E402

import kiln  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent


def per_call(f, args, kwargs=None, budget=0.2, repeat=5):
    """Best-of-`repeat` seconds per call of f(*args, **kwargs) in a plain Python loop."""
    kwargs = kwargs or {}
    t0 = time.perf_counter()
    f(*args, **kwargs)
    once = max(time.perf_counter() - t0, 1e-7)
    n = max(1, int(budget / once))
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            f(*args, **kwargs)
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best * 1e-9


def c_loop(program, args, budget=0.2, repeat=5):
    once = program._run_loop(tuple(args), 1)
    n = max(1, int(budget / max(once, 1e-7)))
    return min(program._run_loop(tuple(args), n) for _ in range(repeat))


# ---- the workloads, written as Python -----------------------------------------------------
def small(x, y, z):
    return kiln.max(x * y + z, 0.0) * 0.5 + x


def softmax(x):
    e = kiln.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, gamma, beta):
    mean = x.mean(axis=-1, keepdims=True)
    xc = x - mean
    var = (xc * xc).mean(axis=-1, keepdims=True)
    return xc / kiln.sqrt(var + 1e-5) * gamma + beta


def mlp(x, W, b):
    z = x @ W + b
    inner = z + z * z * z * 0.044715
    p = kiln.tanh(inner * 0.7978845608) + 1.0
    return z * 0.5 * p


WORKLOADS = {"small": small, "softmax": softmax, "layernorm": layernorm, "mlp": mlp}


def inputs_for(graph, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) * (0.05 if len(shape) == 2 and shape[0] == shape[1] else 1)
            for _, dtype, shape in graph.inputs]


class CtypesKiln:
    """kiln_program_run through ctypes: what a hand-written FFI layer costs."""

    def __init__(self, lib, text):
        self.lib = ctypes.CDLL(str(lib))
        self.lib.kiln_graph_parse.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p]
        self.lib.kiln_program_compile.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.lib.kiln_program_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.lib.kiln_program_run.restype = ctypes.c_int
        g, self.p = ctypes.c_void_p(), ctypes.c_void_p()
        b = text.encode()
        assert self.lib.kiln_graph_parse(b, len(b), ctypes.byref(g)) == 0
        assert self.lib.kiln_program_compile(g, None, ctypes.byref(self.p)) == 0
        self.run = self.lib.kiln_program_run

    def call(self, x, y, z):
        """A ctypes layer as people write it: pointer arrays built, the output allocated."""
        out = np.empty_like(x)
        ins = (ctypes.c_void_p * 3)(x.ctypes.data, y.ctypes.data, z.ctypes.data)
        outs = (ctypes.c_void_p * 1)(out.ctypes.data)
        if self.run(self.p, ins, outs):
            raise RuntimeError("kiln_program_run failed")
        return out

    def prepared(self, x, y, z, out):
        """The floor: pointer arrays made once, only the foreign call per iteration."""
        ins = (ctypes.c_void_p * 3)(x.ctypes.data, y.ctypes.data, z.ctypes.data)
        outs = (ctypes.c_void_p * 1)(out.ctypes.data)
        run, p = self.run, self.p
        return lambda: run(p, ins, outs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short budgets (a smoke run)")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--lib", default=str(ROOT / "build" / "libkiln.so"),
                    help="libkiln.so for the ctypes baseline (skipped if absent)")
    args = ap.parse_args()
    budget, repeat = (0.02, 2) if args.quick else (0.3, 7)
    res = {"kiln": kiln.__version__, "threads": kiln.stats()["threads"], "python": sys.version.split()[0],
           "numpy": np.__version__}
    graphs = {n: kiln.Graph((ROOT / "bench" / f"{n}.kiln").read_text()) for n in WORKLOADS}
    # LLVM's one-time start-up, outside every figure
    kiln.compile(kiln.Graph("graph w(x: f32[4]) -> (y: f32[4]) {\n  y = neg(x)\n}\n"))

    # ---- 3: trace + compile, cold ----------------------------------------------------------
    # Both sides compile with KILN_NO_CACHE (every kernel from scratch), interleaved, the
    # best of `repeat`: the C API from the parsed graph, kiln.jit tracing the function and
    # compiling what it traced (Jit.lower, dumps off).  "trace" is Jit.graph alone.
    print("trace + compile, cold (ms; best of %d)" % repeat)
    print(f"  {'workload':10} {'C compile':>10} {'jit trace+compile':>18} {'extra':>8} {'trace only':>10}")
    tc = {}
    for name, fn in WORKLOADS.items():
        g = graphs[name]
        xs = inputs_for(g)
        f = kiln.jit(fn, cache=False)
        c_ms, j_ms = [], []
        for _ in range(repeat):
            t0 = time.perf_counter()
            kiln.compile(g, cache=False)
            c_ms.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            f.lower(*xs, dumps=False)
            j_ms.append((time.perf_counter() - t0) * 1e3)
        trace_ms = per_call(f.graph, xs, budget=budget / 10, repeat=repeat) * 1e3
        c, j = min(c_ms), min(j_ms)
        tc[name] = dict(c_compile_ms=c, jit_trace_compile_ms=j, extra_ms=j - c, trace_ms=trace_ms)
        print(f"  {name:10} {c:10.2f} {j:18.2f} {j - c:8.2f} {trace_ms:10.3f}")
    res["trace_compile"] = tc

    # ---- 1: call overhead on "small" -------------------------------------------------------
    g = graphs["small"]
    xs = inputs_for(g)
    prog = kiln.compile(g)
    f = kiln.jit(small)
    f(*xs)
    same = f.graph(*xs).hash == g.hash
    out = np.empty_like(xs[0])
    c_s = c_loop(prog, xs, budget, repeat)
    rows = [("C API (kiln_program_run loop)", c_s),
            ("kiln.jit function", per_call(f, xs, budget=budget, repeat=repeat)),
            ("Program(x, y, z)", per_call(prog, xs, budget=budget, repeat=repeat)),
            ("Program(x, y, z, out=o)", per_call(prog, xs, {"out": out}, budget=budget, repeat=repeat))]
    if pathlib.Path(args.lib).exists():
        ck = CtypesKiln(args.lib, (ROOT / "bench" / "small.kiln").read_text())
        rows.append(("ctypes, arrays built per call", per_call(ck.call, xs, budget=budget, repeat=repeat)))
        rows.append(("ctypes, prepared pointers", per_call(ck.prepared(*xs, out), [], budget=budget, repeat=repeat)))
        np.testing.assert_array_equal(ck.call(*xs), f(*xs))
    print(f"\ncall overhead, bench 'small' (f32[1024] chain; same graph as bench/small.kiln: {same})")
    print(f"  {'':34} {'us/call':>8} {'over C':>8}")
    res["small"] = {"same_graph": same}
    for label, t in rows:
        print(f"  {label:34} {t * 1e6:8.3f} {(t - c_s) * 1e6:8.3f}")
        res["small"][label] = {"us": t * 1e6, "over_c_us": (t - c_s) * 1e6}

    # ---- 2: bigger workloads, jit vs C ------------------------------------------------------
    print(f"\njitted vs the same graph from C (warm caches; ms per call; {kiln.stats()['threads']} threads)")
    print(f"  {'workload':10} {'C loop':>8} {'jit':>8} {'jit/C':>7} {'out=':>8} {'out=/C':>7}  same graph")
    big = {}
    for name in ("softmax", "layernorm", "mlp"):
        g = graphs[name]
        xs = inputs_for(g)
        prog = kiln.compile(g)
        f = kiln.jit(WORKLOADS[name])
        got = f(*xs)
        np.testing.assert_allclose(got, prog(*xs), rtol=1e-5, atol=1e-6)
        jp = f.lower(*xs)
        same = f.graph(*xs).hash == g.hash
        out = np.empty_like(got)
        # interleaved, so drift on the shared machine hits both alike
        c_t, j_t, o_t = [], [], []
        for _ in range(3):
            c_t.append(c_loop(prog, xs, budget, max(2, repeat // 2)))
            j_t.append(per_call(f, xs, budget=budget, repeat=max(2, repeat // 2)))
            o_t.append(per_call(jp, xs, {"out": out}, budget=budget, repeat=max(2, repeat // 2)))
        c, j, o = min(c_t), min(j_t), min(o_t)
        big[name] = dict(c_ms=c * 1e3, jit_ms=j * 1e3, jit_out_ms=o * 1e3, same_graph=same)
        print(f"  {name:10} {c * 1e3:8.3f} {j * 1e3:8.3f} {j / c:7.3f} {o * 1e3:8.3f} {o / c:7.3f}  {same}")
    res["workloads"] = big
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
