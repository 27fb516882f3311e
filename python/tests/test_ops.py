"""Every op of the table (lib/ir/ops.def) through kiln.jit, fused and eager, against NumPy
in float64 under oracle.py's tolerances, over kiln's dtypes and broadcasting.  The table
is read from ops.def itself: a row without a case here fails test_every_row_is_tested."""
import math
import zlib
import pathlib
import re

import numpy as np
import pytest

import kiln
from oracle import assert_close, op_ulps, sum_allowed

OPS_DEF = pathlib.Path(__file__).resolve().parents[2] / "lib" / "ir" / "ops.def"
ROWS = [(m.group(1).lower(), m.group(2)) for m in
        re.finditer(r"^OP\((\w+),\s*(\w+),\s*-?\d+,\s*(\w+)", OPS_DEF.read_text(), re.M)]
MODES = ["fused", "eager"]
F = [np.float32, np.float64]
NUM = F + [np.int32, np.int64]
LOGIC = [np.bool_, np.int32, np.int64]
ALL = [np.float32, np.float64, np.int32, np.int64, np.bool_]
KEYWORDS = {"not": "not_", "and": "and_", "or": "or_"}


def pyname(name):
    return KEYWORDS.get(name, name)


def data(dtype, shape, lo=-3.0, hi=3.0, seed=0, grid=None):
    rng = np.random.default_rng(zlib.crc32(repr((np.dtype(dtype).str, shape, lo, hi, seed)).encode()))
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind == "i":
        return rng.integers(int(math.floor(lo)), int(math.ceil(hi)) + 1, size=shape).astype(dt)
    x = rng.uniform(lo, hi, size=shape)
    if grid:
        x = np.round(x / grid) * grid
    return x.astype(dt)


def run(fn, mode, *args, **kw):
    return kiln.jit(fn, mode=mode, **kw)(*args)


def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


erf = np.vectorize(math.erf, otypes=[np.float64])

# name: (reference on float64 / exact ints, dtypes, input range, extra absolute allowance)
UNARY = {
    "neg": (np.negative, NUM, (-5, 5)),
    "abs": (np.abs, NUM, (-5, 5)),
    "sign": (np.sign, NUM, (-2, 2)),
    "exp": (np.exp, F, (-20, 20)),
    "exp2": (np.exp2, F, (-20, 20)),
    "expm1": (np.expm1, F, (-3, 3)),
    "log": (np.log, F, (0.01, 100)),
    "log2": (np.log2, F, (0.01, 100)),
    "log1p": (np.log1p, F, (-0.9, 10)),
    "sqrt": (np.sqrt, F, (0, 100)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), F, (0.01, 100)),
    "recip": (lambda x: 1 / x, F, (0.1, 10)),
    "sin": (np.sin, F, (-6, 6)),
    "cos": (np.cos, F, (-6, 6)),
    "tan": (np.tan, F, (-1.2, 1.2)),
    "tanh": (np.tanh, F, (-5, 5)),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), F, (-10, 10)),
    "erf": (erf, F, (-3, 3)),
    "relu": (lambda x: np.maximum(x, 0), NUM, (-3, 3)),
    "gelu": (gelu, F, (-5, 5)),
    "gelu_erf": (lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2))), F, (-5, 5)),
    "silu": (lambda x: x / (1 + np.exp(-x)), F, (-10, 10)),
    "floor": (np.floor, F, (-5, 5)),
    "ceil": (np.ceil, F, (-5, 5)),
    "round": (np.round, F, (-5, 5)),
    "trunc": (np.trunc, F, (-5, 5)),
    "not": (lambda x: np.logical_not(x) if x.dtype == np.bool_ else np.invert(x), LOGIC, (-9, 9)),
    "isnan": (np.isnan, F, (-1, 1)),
    "isinf": (np.isinf, F, (-1, 1)),
}


def int_div(a, b):
    return np.trunc(a.astype(np.float64) / b).astype(a.dtype)


def logic(fb, fi):
    return lambda a, b: fb(a, b) if a.dtype == np.bool_ else fi(a, b)


CMP = NUM
# name: (reference, dtypes, a range, b range)
BINARY = {
    "add": (np.add, NUM, (-9, 9), (-9, 9)),
    "sub": (np.subtract, NUM, (-9, 9), (-9, 9)),
    "mul": (np.multiply, NUM, (-9, 9), (-9, 9)),
    "div": (lambda a, b: a / b if a.dtype.kind == "f" else int_div(a, b), NUM, (-50, 50), (1, 7)),
    "rem": (np.fmod, NUM, (-50, 50), (1, 7)),
    "pow": (np.power, NUM, (0, 3), (0, 4)),
    "max": (np.maximum, NUM, (-9, 9), (-9, 9)),
    "min": (np.minimum, NUM, (-9, 9), (-9, 9)),
    "atan2": (np.arctan2, F, (-3, 3), (-3, 3)),
    "eq": (np.equal, NUM + [np.bool_], (-2, 2), (-2, 2)),
    "ne": (np.not_equal, NUM + [np.bool_], (-2, 2), (-2, 2)),
    "lt": (np.less, CMP, (-2, 2), (-2, 2)),
    "le": (np.less_equal, CMP, (-2, 2), (-2, 2)),
    "gt": (np.greater, CMP, (-2, 2), (-2, 2)),
    "ge": (np.greater_equal, CMP, (-2, 2), (-2, 2)),
    "and": (logic(np.logical_and, np.bitwise_and), LOGIC, (-9, 9), (-9, 9)),
    "or": (logic(np.logical_or, np.bitwise_or), LOGIC, (-9, 9), (-9, 9)),
    "xor": (logic(np.logical_xor, np.bitwise_xor), LOGIC, (-9, 9), (-9, 9)),
}


def unary_cases():
    for name, (ref, dts, rng) in UNARY.items():
        for dt in dts:
            for mode in MODES:
                yield pytest.param(name, dt, mode, id=f"{name}-{np.dtype(dt).name}-{mode}")


@pytest.mark.parametrize("name,dtype,mode", list(unary_cases()))
def test_unary(name, dtype, mode):
    ref, _, (lo, hi) = UNARY[name]
    x = data(dtype, (3, 67), lo, hi, grid=0.25 if name in ("round", "floor", "ceil", "trunc") else None)
    if name in ("isnan", "isinf") or (np.dtype(dtype).kind == "f" and name in ("neg", "abs", "relu", "floor")):
        x.ravel()[:4] = [np.nan, np.inf, -np.inf, -0.0]
    fn = getattr(kiln, pyname(name))
    got = run(lambda x: fn(x), mode, x)
    want = ref(x.astype(np.float64) if np.dtype(dtype).kind == "f" else x)
    out_dtype = np.bool_ if name in ("isnan", "isinf") else dtype
    abs_ = 1e-15 if name in ("gelu", "gelu_erf") and dtype == np.float64 else 0.0
    assert_close(got, want, out_dtype, ulps=op_ulps(name, dtype), abs_=abs_, what=f"{name} {mode}")


def binary_cases():
    for name, (ref, dts, _, _) in BINARY.items():
        for dt in dts:
            for mode in MODES:
                yield pytest.param(name, dt, mode, id=f"{name}-{np.dtype(dt).name}-{mode}")


@pytest.mark.parametrize("name,dtype,mode", list(binary_cases()))
def test_binary(name, dtype, mode):
    ref, _, ra, rb = BINARY[name]
    # (3,1,17) with (4,17): NumPy broadcasting to (3,4,17)
    a = data(dtype, (3, 1, 17), *ra, seed=1, grid=0.5 if name in ("eq", "ne", "lt", "le", "gt", "ge") else None)
    b = data(dtype, (4, 17), *rb, seed=2, grid=0.5 if name in ("eq", "ne", "lt", "le", "gt", "ge") else None)
    fn = getattr(kiln, pyname(name))
    got = run(lambda a, b: fn(a, b), mode, a, b)
    f64 = np.dtype(dtype).kind == "f"
    want = ref(a.astype(np.float64), b.astype(np.float64)) if f64 else ref(a, b)
    out_dtype = np.bool_ if name in ("eq", "ne", "lt", "le", "gt", "ge") else dtype
    assert_close(got, want, out_dtype, ulps=op_ulps(name, dtype), what=f"{name} {mode}")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", NUM)
def test_where_clamp(dtype, mode):
    c = data(np.bool_, (3, 1, 17), seed=3)
    a = data(dtype, (4, 17), seed=4)
    b = data(dtype, (17,), seed=5)
    got = run(lambda c, a, b: kiln.where(c, a, b), mode, c, a, b)
    assert_close(got, np.where(c, a, b), dtype, what="where")
    lo = data(dtype, (4, 1), -3, -1, seed=6)
    hi = data(dtype, (17,), 1, 3, seed=7)
    x = data(dtype, (3, 4, 17), -5, 5, seed=8)
    got = run(lambda x, lo, hi: kiln.clamp(x, lo, hi), mode, x, lo, hi)
    assert_close(got, np.clip(x, lo, hi), dtype, what="clamp")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("src", ALL)
def test_cast(src, mode):
    x = data(src, (5, 13), -100, 100, seed=9)
    got = run(lambda x: tuple(kiln.cast(x, d) for d in ALL), mode, x)
    for d, g in zip(ALL, got):
        assert_close(g, x.astype(d), d, ulps=0, what=f"cast {np.dtype(src)} -> {np.dtype(d)}")


@pytest.mark.parametrize("mode", MODES)
def test_movement(mode):
    x = data(np.float32, (3, 4, 5), seed=10)
    y = data(np.float32, (3, 2, 5), seed=11)
    idx = np.array([[0, 2, 1], [1, 1, 0]], dtype=np.int64)

    def f(x, y, idx):
        return (kiln.reshape(x, (5, 12)), kiln.permute(x, (2, 0, 1)),
                kiln.expand(x[:, :1, :], (2, 3, 4, 5)),
                kiln.slice(x, [1, None, None], [None, None, -1], [1, -2, 2]),
                kiln.slice(x, [-2, 1], [None, 4], [1, 2]),
                kiln.concat([x, y, x], axis=1), kiln.concatenate((y, y), axis=-1),
                kiln.pad(x, [1, 0, 2], [0, 2, 1], 7.0), kiln.gather(x, idx, 0),
                kiln.gather(x, idx, 2))
    got = run(f, mode, x, y, idx)
    want = (x.reshape(5, 12), x.transpose(2, 0, 1), np.broadcast_to(x[:, :1, :], (2, 3, 4, 5)),
            x[1:, ::-2, :-1:2], x[-2:, 1:4:2], np.concatenate([x, y, x], axis=1),
            np.concatenate((y, y), axis=-1),
            np.pad(x, [(1, 0), (0, 2), (2, 1)], constant_values=7.0), np.take(x, idx, axis=0),
            np.take(x, idx, axis=2))
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, np.float32, ulps=0, what=f"movement {i}")


@pytest.mark.parametrize("mode", MODES)
def test_sources(mode):
    c = data(np.float64, (3, 4), seed=12)

    def f(x):
        return (x + kiln.constant(c), x * kiln.full((3, 4), 2.5, np.float64),
                kiln.arange(4, 1.0, 0.5, "f64") + x, kiln.arange(6))
    x = data(np.float64, (3, 4), seed=13)
    got = run(f, mode, x)
    want = (x + c, x * 2.5, np.arange(4) * 0.5 + 1.0 + x, np.arange(6))
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, w.dtype, what=f"source {i}")
    # kiln.input: the lower layer's capture scope
    with kiln.trace() as t:
        a = kiln.input("a", (3, 4), "f64")
        b = kiln.input("b", (4,), "f64")
        p = t.compile((a * b, a.sum(axis=1)), mode=mode)
    assert [n for n, _, _ in p.inputs] == ["a", "b"]
    bb = data(np.float64, (4,), seed=14)
    s, r = p(x, bb)
    assert_close(s, x * bb, np.float64, what="input")
    assert_close(r, x.sum(axis=1), np.float64, ulps=2, what="input sum")


REDUCE = {
    "reduce_sum": (np.sum, NUM), "reduce_mean": (np.mean, F), "reduce_max": (np.max, NUM),
    "reduce_min": (np.min, NUM), "reduce_prod": (np.prod, NUM),
    "argmax": (np.argmax, NUM), "argmin": (np.argmin, NUM),
}
AXES = [None, 0, -1, (0, 2)]


def reduce_cases():
    for name, (_, dts) in REDUCE.items():
        for dt in dts:
            for mode in MODES:
                yield pytest.param(name, dt, mode, id=f"{name}-{np.dtype(dt).name}-{mode}")


@pytest.mark.parametrize("name,dtype,mode", list(reduce_cases()))
def test_reduce(name, dtype, mode):
    ref, _ = REDUCE[name]
    arg = name.startswith("arg")
    lo, hi = (0.6, 1.5) if name == "reduce_prod" else (-9, 9)
    x = data(dtype, (5, 6, 7), lo, hi, seed=15)
    axes = [a for a in AXES if not (arg and isinstance(a, tuple))]
    fn = getattr(kiln, name)
    got = run(lambda x: tuple(fn(x, axis=a, keepdims=k) for a in axes for k in (False, True)), mode, x)
    i = 0
    for a in axes:
        for k in (False, True):
            x64 = x.astype(np.float64) if np.dtype(dtype).kind == "f" else x
            want = ref(x64, axis=a, keepdims=k)
            n = x.size // np.asarray(want).size
            what = f"{name} axis={a} keepdims={k} {mode}"
            if arg or np.dtype(dtype).kind == "i" or name in ("reduce_max", "reduce_min"):
                assert_close(got[i], want, np.int64 if arg else dtype, what=what)
            elif name == "reduce_prod":
                assert_close(got[i], want, dtype, ulps=2, allowed=n * 2.0**-52 * np.abs(want) * 4
                             + (n * 2.0**-24 * np.abs(want) if dtype == np.float32 else 0), what=what)
            else:
                absum = np.sum(np.abs(x64), axis=a, keepdims=k)
                if name == "reduce_mean":
                    absum = absum / n
                assert_close(got[i], want, dtype, ulps=2, allowed=sum_allowed(dtype, n, absum), what=what)
            i += 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", NUM)
def test_matmul(dtype, mode):
    a = data(dtype, (2, 3, 4, 9), -4, 4, seed=16)
    b = data(dtype, (9, 6), -4, 4, seed=17)
    v = data(dtype, (9,), -4, 4, seed=18)
    got = run(lambda a, b, v: (a @ b, kiln.matmul(v, b), a @ v), mode, a, b, v)
    for g, (p, q) in zip(got, [(a, b), (v, b), (a, v)]):
        if np.dtype(dtype).kind == "f":
            want = p.astype(np.float64) @ q.astype(np.float64)
            absum = np.abs(p.astype(np.float64)) @ np.abs(q.astype(np.float64))
            unit = 2.0**-24 if dtype == np.float32 else 2.0**-52
            assert_close(g, want, dtype, ulps=2, allowed=9 * unit * absum, what="matmul")
        else:
            assert_close(g, p @ q, dtype, what="matmul")


def test_every_row_is_tested():
    tested = (set(UNARY) | set(BINARY) | set(REDUCE) |
              {"where", "clamp", "cast", "reshape", "permute", "expand", "slice", "concat",
               "pad", "gather", "input", "constant", "full", "arange", "matmul"})
    rows = {name for _, name in ROWS}
    assert rows, "no rows read from ops.def"
    assert rows - tested == set(), f"ops without a Python test: {rows - tested}"
    # and each row has its module function, named as the table names it
    assert tuple(pyname(n) for _, n in ROWS) == kiln.OPS
    for n in kiln.OPS:
        assert callable(getattr(kiln, n)), n
    assert kiln.exp.__doc__.endswith("e^x")
