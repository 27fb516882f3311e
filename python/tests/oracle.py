"""The tests' notion of "right": a compiled result against NumPy in float64 (or exact
integers), within a stated tolerance.  The C tests hold kernels to the bound `kiln check`
propagates from the reference interpreter's values (tests/support/oracle.h, lib/check),
which this extension does not link; NumPy is the oracle here, and these rules its bounds.

For a float output of dtype t, element-wise:
    |got - want| <= ulps * ulp_t(max(|got|, |want|)) + abs_
with NaN matching NaN and an infinity only itself.  `want` is NumPy's float64 value, so a
correctly rounded f32 result is within 0.5 ULP; the ULP counts for transcendental ops are
vmath's bounds (lib/jit/vmath.c, the table docs/accuracy.md reads) + 1, as check_jit.c
holds them, and 1 for exactly rounded ops.  Sums: n * 2^-52 * absum (+ 7 * 2^-24 * absum
for f32, whose compiled sums add blocks in f32); a compiled f32 matmul n * 2^-24 * absum."""
import numpy as np

# vmath's bounds, ULP (f32, f64) against the exact result: lib/jit/vmath.c.
VMATH_ULPS = {
    "exp": (1, 1), "exp2": (2, 4), "expm1": (2, 4), "log": (1, 1), "log2": (2, 4),
    "log1p": (2, 4), "tanh": (2, 2), "sigmoid": (2, 2), "silu": (2, 4), "gelu": (3, 3),
    "erf": (2, 2), "gelu_erf": (3, 3), "sin": (4, 4), "cos": (4, 4), "tan": (4, 4),
    "pow": (4, 4), "atan2": (4, 4),
}


def ulp(dtype, x):
    x = np.abs(np.asarray(x, dtype=np.float64))
    if np.dtype(dtype) == np.float32:
        return np.spacing(x.astype(np.float32)).astype(np.float64).clip(min=2.0**-149)
    return np.spacing(x).clip(min=2.0**-1074)


def op_ulps(name, dtype):
    """The ULP bound an op's compiled result is held to against NumPy's float64."""
    b = VMATH_ULPS.get(name)
    if b is None:
        return 1.0
    # +1: the test's reference is not the exact value rounded once (check_jit.c); +1 more
    # for f64, where NumPy's own libm value is itself within an ULP of the exact one.
    return b[0] + 1 if np.dtype(dtype) == np.float32 else b[1] + 2


def assert_close(got, want, dtype=None, ulps=1.0, abs_=0.0, allowed=None, what=""):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    dtype = np.dtype(dtype or got.dtype)
    assert got.dtype == dtype, f"{what}: dtype {got.dtype}, expected {dtype}"
    if dtype.kind in "biu":
        bad = got != want.astype(dtype)
        assert not bad.any(), f"{what}: {bad.sum()} elements differ: got {got[bad][:5]}, want {want.astype(dtype)[bad][:5]}"
        return
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    both_nan = np.isnan(g) & np.isnan(w)
    inf = np.isinf(g) | np.isinf(w)
    with np.errstate(invalid="ignore"):
        err = np.abs(g - w)
    tol = ulps * ulp(dtype, np.maximum(np.abs(g), np.abs(w))) + abs_
    if allowed is not None:
        tol = tol + allowed
    ok = both_nan | np.where(inf, g == w, err <= tol)
    if not ok.all():
        i = np.flatnonzero(~ok.ravel())[:5]
        raise AssertionError(
            f"{what}: {(~ok).sum()} of {ok.size} elements outside the tolerance: "
            f"got {g.ravel()[i]}, want {w.ravel()[i]}, allowed {np.broadcast_to(tol, ok.shape).ravel()[i]}")


def sum_allowed(dtype, n, absum):
    """The bound of a reduction of n terms whose absolute values sum to absum."""
    unit = n * 2.0**-52
    if np.dtype(dtype) == np.float32:
        unit += 7 * 2.0**-24
    return unit * absum
