"""The lower layer: kiln.Graph, kiln.compile, kiln.Program, data passing and errors."""
import threading

import numpy as np
import pytest

import kiln
from oracle import assert_close

SOFTMAX = """graph softmax(x: f32[4,6]) -> (y: f32[4,6]) {
  m = reduce_max(x, axes=[1], keepdim=true)
  d = sub(x, m)
  e = exp(d)
  s = reduce_sum(e, axes=[1], keepdim=true)
  y = div(e, s)
}
"""


def softmax64(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def x46(seed=0):
    return np.random.default_rng(seed).standard_normal((4, 6)).astype(np.float32)


def test_graph_parse_print_dot():
    g = kiln.Graph(SOFTMAX)
    assert g.name == "softmax"
    assert g.inputs == [("x", np.dtype(np.float32), (4, 6))]
    assert g.outputs == [("y", np.dtype(np.float32), (4, 6))]
    text = str(g)
    g2 = kiln.Graph.parse(text)
    assert str(g2) == text and g2 == g and g.hash == g2.hash
    assert kiln.Graph(SOFTMAX.replace("4,6", "8,6").replace("f32[4,1]", "f32[8,1]")).generic_hash == g.generic_hash
    dot = g.dot()
    assert dot.startswith("digraph") and "reduce_max" in dot
    assert "softmax" in repr(g)


def test_graph_parse_error():
    with pytest.raises(kiln.ParseError) as e:
        kiln.Graph("graph g(x: f32[4]) -> (y: f32[4]) {\n  y = frobnicate(x)\n}\n")
    assert isinstance(e.value, kiln.Error)
    assert "2:" in str(e.value)  # kiln's message names line:column
    assert e.value.code == kiln.ParseError.code == 6


@pytest.mark.parametrize("mode", ["fused", "eager", "interp"])
def test_compile_and_run(mode):
    g = kiln.Graph(SOFTMAX)
    p = kiln.compile(g, mode=mode)
    assert p.mode == mode
    x = x46()
    assert_close(p(x), softmax64(x), np.float32, ulps=4)
    assert_close(g.interpret(x), softmax64(x), np.float32, ulps=2)
    assert str(p.graph) == str(g)
    assert p.inputs == g.inputs and p.outputs == g.outputs


def test_out_argument():
    p = kiln.compile(kiln.Graph(SOFTMAX))
    x = x46()
    out = np.empty((4, 6), np.float32)
    r = p(x, out=out)
    assert r is out
    assert_close(out, softmax64(x), np.float32, ulps=4)
    r = p(x, out=(out,))
    assert r is out
    with pytest.raises(kiln.InvalidArgError, match="overlaps"):
        p(x, out=x)
    with pytest.raises(kiln.DtypeError):
        p(x, out=np.empty((4, 6), np.float64))
    with pytest.raises(kiln.ShapeError):
        p(x, out=np.empty((4, 7), np.float32))
    with pytest.raises(kiln.InvalidArgError, match="C-contiguous"):
        p(x, out=np.empty((6, 4), np.float32).T)
    with pytest.raises(TypeError):
        p(x, out=[1, 2])
    with pytest.raises(TypeError):
        p(x, out2=out)


def test_dumps():
    g = kiln.Graph(SOFTMAX)
    p = kiln.compile(g, dumps=True)
    assert "kernel" in p.dump("plan")
    assert p.dump("graph") == str(g)
    assert "define" in p.dump("llvm") and "define" in p.dump("opt")
    assert len(p.dump("asm")) > 100
    with pytest.raises(kiln.InvalidArgError):
        p.dump("nonsense")
    # without dumps=True kiln says the IR was not kept
    assert "not captured" in kiln.compile(g).dump("llvm")


def test_bad_inputs():
    p = kiln.compile(kiln.Graph(SOFTMAX))
    x = x46()
    with pytest.raises(kiln.DtypeError, match="float64, expected f32"):
        p(x.astype(np.float64))
    with pytest.raises(TypeError):  # DtypeError is a TypeError too
        p(x.astype(np.int32))
    with pytest.raises(kiln.DtypeError, match="object array"):
        p(np.empty((4, 6), dtype=object))
    with pytest.raises(kiln.ShapeError, match=r"\[4,5\], expected \[4,6\]"):
        p(np.zeros((4, 5), np.float32))
    with pytest.raises(ValueError):  # ShapeError is a ValueError too
        p(np.float32(1.0))
    with pytest.raises(kiln.InvalidArgError, match="None"):
        p(None)
    with pytest.raises(TypeError, match="takes 1 input"):
        p()
    with pytest.raises(TypeError, match="takes 1 input"):
        p(x, x)
    with pytest.raises(kiln.DtypeError):
        p(x.astype(">f4"))  # non-native byte order: refused, never misread


def test_layouts_are_copied_once_or_passed_by_pointer():
    p = kiln.compile(kiln.Graph(SOFTMAX))
    big = np.random.default_rng(1).standard_normal((8, 12)).astype(np.float32)
    for x in (big[::2, ::2], np.asfortranarray(big[:4, :6]), big[:4, 6:]):
        assert not x.flags.c_contiguous
        assert_close(p(x), softmax64(x), np.float32, ulps=4)
    # buffer protocol and __array_interface__ (views: no copy)
    x = x46(2)
    assert_close(p(memoryview(x)), softmax64(x), np.float32, ulps=4)

    class Iface:
        def __init__(self, a):
            self.__array_interface__ = a.__array_interface__
            self.keep = a
    assert_close(p(Iface(x)), softmax64(x), np.float32, ulps=4)
    # a list is converted by NumPy (to f64 here, so refused for an f32 input)
    with pytest.raises(kiln.DtypeError):
        p(x.tolist())
    # an unaligned array is copied
    raw = np.zeros(4 * 6 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(4, 6)
    raw[...] = x
    assert not raw.flags.aligned
    assert_close(p(raw), softmax64(x), np.float32, ulps=4)


def test_zero_d_and_all_dtypes():
    g = kiln.Graph("graph g(a: f64[], b: i64[3], c: bool[3]) -> (y: i64[3], z: f64[]) {\n"
                   "  y = where(c, b, b)\n  z = add(a, a)\n}\n")
    p = kiln.compile(g)
    y, z = p(np.float64(1.5), np.arange(3), np.array([True, False, True]))
    assert z.shape == () and z == 3.0
    assert y.tolist() == [0, 1, 2]


def test_exceptions_one_class_per_status():
    names = [n for n in dir(kiln) if n.endswith("Error") and n != "Error"]
    codes = sorted(getattr(kiln, n).code for n in names)
    assert codes == list(range(1, len(codes) + 1)), "one class per kiln_status code"
    for n in names:
        assert issubclass(getattr(kiln, n), kiln.Error)
    assert issubclass(kiln.OutOfMemoryError, MemoryError)
    assert kiln.ScopeClosedError.code == 12 and kiln.ForeignTensorError.code == 13


def test_stats_and_cache_info():
    s = kiln.stats()
    for k in ("kernel_compiles", "kernel_hits", "plan_hits", "plan_misses", "compile_ms", "threads"):
        assert k in s
    before = kiln.stats()["kernel_compiles"]
    kiln.compile(kiln.Graph(SOFTMAX.replace("exp(d)", "exp2(d)")), cache=False)
    assert kiln.stats()["kernel_compiles"] > before
    info = kiln.cache_info()
    assert info["enabled"] is False and info["path"] == "off"


def test_program_threads_and_gil():
    p = kiln.compile(kiln.Graph(SOFTMAX))
    xs = [x46(s) for s in range(8)]
    errors = []

    def work(x):
        try:
            for _ in range(200):
                assert_close(p(x), softmax64(x), np.float32, ulps=4)
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    ts = [threading.Thread(target=work, args=(x,)) for x in xs]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
