"""kiln from Python: JIT-compiled tensor graphs over NumPy arrays.

    import numpy as np, kiln

    @kiln.jit
    def softmax(x):
        e = kiln.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    y = softmax(np.random.rand(4096, 1024).astype(np.float32))

The extension module kiln._kiln is a client of kiln.h; docs/python.md documents the API.
"""
import builtins as _builtins
import functools as _functools
import inspect as _inspect

from . import _kiln
from ._kiln import *  # noqa: F401,F403  (the types, exceptions and one function per op)
from ._kiln import Jit, OPS, Error  # noqa: F401

__version__ = _kiln.kiln_version


def jit(fn=None, *, static_argnums=(), mode="fused", cache=True, tiered=False):
    """Compile `fn` with kiln, once per signature of its arguments.

    The first call with a new signature (each array's dtype, rank and sizes; the values of
    the static arguments) traces `fn` with kiln.Tensor stand-ins for the arrays and
    compiles the graph; later calls with that signature run the compiled program directly.
    static_argnums: positions of arguments that are not arrays (traced as constants;
    Python and NumPy scalars, None and str are static without being listed).
    mode: "fused" (default), "eager" (one kernel per op) or "interp" (the reference
    interpreter).  cache=False compiles with KILN_NO_CACHE: every kernel from scratch,
    neither using nor filling kiln's kernel caches (for measuring compile time).
    tiered=True compiles with KILN_TIERED: new kernels run from quickly generated code
    (about half the compile time, slower loops) until their full code, made on a
    background thread, replaces it; the same results.  kiln.sync() waits for it.
    """
    if fn is None:
        return lambda f: jit(f, static_argnums=static_argnums, mode=mode, cache=cache,
                             tiered=tiered)
    j = Jit(fn, static_argnums, mode, cache, tiered)
    _functools.update_wrapper(j, fn)
    return j


def _bind(fn, args, kwargs):
    """Keyword arguments of a jitted call, made positional (the C call path's slow case)."""
    sig = _inspect.signature(fn)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    if bound.kwargs:
        raise TypeError("kiln.jit: keyword-only parameters are not supported: "
                        + ", ".join(bound.kwargs))
    return tuple(bound.args)


def transpose(x, axes=None):
    """numpy.transpose: kiln.permute with the axes reversed by default."""
    if axes is None:
        return x.T if isinstance(x, Tensor) else permute(x, tuple(reversed(range(x.ndim))))
    return permute(x, axes)


# NumPy's names for some of the table's ops.
concatenate = concat  # noqa: F405
broadcast_to = expand  # noqa: F405
take = gather  # noqa: F405
maximum = max  # noqa: F405  (elementwise, as numpy.maximum: kiln.reduce_max reduces)
minimum = min  # noqa: F405
logical_not = not_  # noqa: F405


# `from kiln import *` leaves Python's builtins alone (kiln.max, kiln.abs, kiln.input,
# kiln.slice... are kiln's ops: use them as kiln.max).
__all__ = sorted(n for n in globals() if not n.startswith("_") and not hasattr(_builtins, n))
