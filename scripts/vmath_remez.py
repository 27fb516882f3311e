#!/usr/bin/env python3
"""vmath_remez.py — derives the polynomial coefficients and constants of lib/jit/vmath.c.

Everything is computed here from first principles in decimal arithmetic (no mpmath, no numpy):
reference functions by their series (or a continued fraction for erfc), minimax polynomials by
the Remez exchange, weighted by the error the polynomial adds to the *final* function, and
rounded to the target precision one coefficient at a time (lowest power first), refitting the
rest after each rounding so that rounding costs little accuracy.  The erfc polynomial G is
and f32 erf's polynomial in a - 2.375 are fitted the same way but with (weighted) least
squares at Chebyshev nodes (their monomial bases are not Haar systems on an interval
containing 0 once the constant term is fixed).

    python3 scripts/vmath_remez.py --write lib/jit/vmath_coef.inc   # all tables (~1 minute)
    python3 scripts/vmath_remez.py --check lib/jit/vmath_coef.inc   # all, compared
    KILN_QUICK=1 python3 scripts/vmath_remez.py --check lib/jit/vmath_coef.inc   # the cheap ones
    python3 scripts/vmath_remez.py exp_q_f32 ...   # some tables, to stdout
    python3 scripts/vmath_remez.py constants       # the split constants and 2/pi's bits

Output: C (hex floats), the include lib/jit/vmath.c reads; on stderr the error of each
candidate degree and the CPU time each table took.
"""
import difflib
import math
import os
import sys
import time
from decimal import Decimal as D, getcontext, localcontext
from fractions import Fraction

getcontext().prec = 90

# ---- reference functions -----------------------------------------------------------------

_pi = {}


def pi():
    p = getcontext().prec
    if p not in _pi:
        with localcontext() as c:
            c.prec = p + 10

            def atan_inv(n):  # atan(1/n)
                x = D(1) / n
                x2, s, t, k = x * x, x, x, 1
                while True:
                    t = -t * x2
                    k += 2
                    if abs(t / k) < D(10) ** -(c.prec + 2):
                        return s
                    s += t / k

            v = 16 * atan_inv(5) - 4 * atan_inv(239)  # Machin
        _pi[p] = +v
    return _pi[p]


def eps():
    return D(10) ** -(getcontext().prec + 3)


def expm1(x):
    x = D(x)
    if abs(x) > D("0.5"):
        return x.exp() - 1
    s, t, k = D(0), D(1), 0
    while True:
        k += 1
        t = t * x / k
        if abs(t) < eps() * (abs(s) + eps()):
            return s
        s += t


def atanh(s):
    s = D(s)
    s2, t, r, k = s * s, s, s, 1
    while True:
        t *= s2
        k += 2
        if abs(t / k) < eps() * abs(r):
            return r
        r += t / k


def log1p(x):
    x = D(x)
    return (1 + x).ln() if abs(x) > D("0.5") else 2 * atanh(x / (2 + x))


def sin(x):
    x = D(x)
    x2, t, s, k = x * x, x, x, 1
    while True:
        t = -t * x2 / ((k + 1) * (k + 2))
        k += 2
        if abs(t) < eps() * (abs(s) + eps()):
            return s
        s += t


def cos(x):
    x = D(x)
    x2, t, s, k = x * x, D(1), D(1), 0
    while True:
        t = -t * x2 / ((k + 1) * (k + 2))
        k += 2
        if abs(t) < eps():
            return s
        s += t


def atan(x):
    x = D(x)
    if abs(x) > D("0.5"):
        return 2 * atan(x / (1 + (1 + x * x).sqrt()))
    x2, t, s, k = x * x, x, x, 1
    while True:
        t = -t * x2
        k += 2
        if abs(t / k) < eps() * (abs(s) + eps()):
            return s
        s += t / k


def tanh(x):
    x = D(x)
    if x == 0:
        return D(0)
    e = expm1(2 * x)
    return e / (e + 2)


def erf(x):
    """erf(x) = 2/sqrt(pi) e^-x^2 sum 2^n x^(2n+1) / (1 3 5 ... (2n+1)): all terms positive."""
    x = D(x)
    x2, t, s, k = x * x, x, x, 1
    while True:
        t = t * 2 * x2 / (k + 2)
        k += 2
        if t < eps() * s:
            break
        s += t
    return 2 / pi().sqrt() * (-x2).exp() * s


def erfcx(a):
    """e^(a^2) erfc(a) for a >= 0: series below 3, continued fraction above."""
    a = D(a)
    if a < 3:
        with localcontext() as c:
            c.prec += 30
            v = (1 - erf(a)) * (a * a).exp()
        return +v
    f = a
    for k in range(int(200 + 2000 / float(a) ** 2), 0, -1):
        f = a + (D(k) / 2) / f
    return 1 / (pi().sqrt() * f)


# ---- Remez exchange --------------------------------------------------------------------------


def solve(A, b):
    n = len(A)
    M = [row[:] + [bb] for row, bb in zip(A, b)]
    for i in range(n):
        p = max(range(i, n), key=lambda r: abs(M[r][i]))
        M[i], M[p] = M[p], M[i]
        for r in range(i + 1, n):
            f = M[r][i] / M[i][i]
            if f != 0:
                for c in range(i, n + 1):
                    M[r][c] -= f * M[i][c]
    x = [D(0)] * n
    for i in range(n - 1, -1, -1):
        x[i] = (M[i][n] - sum(M[i][j] * x[j] for j in range(i + 1, n))) / M[i][i]
    return x


def pw(v, k):
    return v ** k if k else D(1)


def peval(c, powers, v):
    return sum(ck * pw(v, pk) for ck, pk in zip(c, powers))


def remez(g, w, a, b, powers, grid=800, iters=40, vmin=None):
    """Minimise max over [a,b] of |w(v) (sum c_k v^p_k - g(v))|; returns (coeffs, max error)."""
    a, b, n = D(a), D(b), len(powers)
    G = sorted(set((a + b) / 2 - (b - a) / 2 * D(math.cos(math.pi * i / grid)) for i in range(grid + 1)))
    vm = (b - a) * D("1e-4") if vmin is None else D(vmin)
    G = [v for v in G if abs(v) > vm or (vmin is None and (v == a or v == b))]
    gv = [g(v) for v in G]
    wv = [w(v) for v in G]
    ref = [(a + b) / 2 - (b - a) / 2 * D(math.cos(math.pi * i / n)) for i in range(n + 1)]
    ref = sorted(set(min(G, key=lambda gp: abs(gp - r)) for r in ref))
    best = None
    for _ in range(iters):
        A = [[pw(v, pk) for pk in powers] + [D((-1) ** i) / w(v)] for i, v in enumerate(ref)]
        sol = solve(A, [g(v) for v in ref])
        c = sol[:n]
        err = [wv[i] * (peval(c, powers, G[i]) - gv[i]) for i in range(len(G))]
        segs, cur = [], None
        for i, e in enumerate(err):  # extrema of alternating sign
            if cur is None or (e >= 0) != cur[0]:
                cur = [e >= 0, i]
                segs.append(cur)
            elif abs(e) > abs(err[cur[1]]):
                cur[1] = i
        idx = [s[1] for s in segs]
        while len(idx) > n + 1:
            idx.pop(0 if abs(err[idx[0]]) < abs(err[idx[-1]]) else -1)
        maxerr = max(abs(e) for e in err)
        if best is None or maxerr < best[1]:
            best = (c, maxerr)
        if len(idx) < n + 1:
            break
        ref = [G[i] for i in idx]
        if maxerr <= min(abs(err[i]) for i in idx) * D("1.0005"):
            break
    return best


def round_bin(d, bits):
    """d rounded to the nearest binary float of `bits` significant bits (exact Decimal)."""
    d = D(d)
    if d == 0:
        return D(0)
    a = abs(d)
    e = int(math.floor(float(a.ln() / D(2).ln())))
    while D(2) ** e > a:
        e -= 1
    while D(2) ** (e + 1) <= a:
        e += 1
    scale = D(2) ** (bits - 1 - e)
    return (1 if d > 0 else -1) * (a * scale).to_integral_value() / scale


def remez_rounded(g, w, a, b, powers, bits, grid=800):
    """Round the lowest-power coefficient, refit (g - c0)/v with weight w |v|, and so on."""
    assert powers == list(range(powers[0], powers[0] + len(powers)))
    memo = {}

    def g_m(v):
        if v not in memo:
            memo[v] = g(v)
        return memo[v]

    def nz(v):
        return v if v != 0 else D("1e-12")

    p0 = powers[0]
    cur_g = (lambda v: g_m(nz(v)) / nz(v) ** p0) if p0 else g_m
    cur_w = (lambda v: w(v) * abs(nz(v)) ** p0) if p0 else w
    fixed, n = [], len(powers)
    for k in range(n):
        c, _ = remez(cur_g, cur_w, a, b, list(range(n - k)), grid=grid,
                     vmin=None if k == 0 else (D(b) - D(a)) * D("0.01"))
        ck = round_bin(c[0], bits)
        fixed.append(ck)
        cur_g = (lambda v, pg=cur_g, ck=ck: (pg(nz(v)) - ck) / nz(v))
        cur_w = (lambda v, pw_=cur_w: pw_(nz(v)) * abs(nz(v)))
    return fixed


def max_error(c, powers, g, w, a, b, grid=3000):
    a, b = D(a), D(b)
    m = D(0)
    for i in range(grid + 1):
        v = (a + b) / 2 - (b - a) / 2 * D(math.cos(math.pi * i / grid))
        m = max(m, abs(w(v) * (peval(c, powers, v) - g(v))))
    return m


def hexf(d):
    """d as the shortest C hex float literal of its double (0x1.62e43p-1, 0x1p-1, 0x0p+0)."""
    h = float(Fraction(d)).hex()
    if h.startswith("-"):
        return "-" + hexf(-D(d))
    mant, exp = h.split("p")
    mant = mant.rstrip("0").rstrip(".")
    return f"{mant}p{exp}" if mant != "0x0" else "0x0p+0"


def c_array(name, dims, rows, comment):
    """A C array definition: the comment, then each row of values (one row: a 1-D array;
    several: a 2-D one, each row in braces) wrapped at 100 columns."""
    lines = [f"/* {comment} */", f"static const double {name}{dims} = {{"]
    for row in rows:
        ind = "   " if len(rows) == 1 else "    {"
        cur = ind
        for v in row:
            if len(cur) + len(v) + 2 > 100:
                lines.append(cur.rstrip())
                cur = "   " if len(rows) == 1 else "    "
            cur += ("" if cur.endswith("{") else " ") + v + ","
        if len(rows) > 1:
            cur = cur[:-1] + "},"
        lines.append(cur.rstrip())
    lines.append("};")
    return "\n".join(lines) + "\n"


def log2_err(err):
    return f"2^{math.log2(float(err)):.1f}" if err > 0 else "0"


def emit(name, c, err):
    return c_array(name, "[]", [[hexf(x) for x in c]], f"{DOC[name]}: {log2_err(err)}")


def fit(name, g, a, b, degrees, bits, target, w=None):
    """Smallest number of coefficients in `degrees` reaching 2^target after rounding."""
    w = w or (lambda v: 1 / g(v))
    for n, p0 in degrees:
        powers = list(range(p0, p0 + n))
        c, e = remez(g, w, a, b, powers)
        cr = remez_rounded(g, w, a, b, powers, bits)
        er = max_error(cr, powers, g, w, a, b)
        lg = math.log2(float(er)) if er > 0 else -999
        print(f"# {name}: n={n} minimax 2^{math.log2(float(e)):.2f} rounded 2^{lg:.2f}", file=sys.stderr)
        if lg <= target:
            break
    return emit(name, cr, er)


# ---- the functions ---------------------------------------------------------------------------

LN2 = D(2).ln()
LOG2E = 1 / LN2
TINY = D("1e-30")


def nzw(v):
    return v if v != 0 else TINY


def qexp(r):  # (e^r - 1 - r)/r^2
    if r == 0:
        return D("0.5")
    if abs(r) < D("1e-6"):
        return D("0.5") + r / 6 + r * r / 24 + r ** 3 / 120
    return (expm1(r) - r) / (r * r)


def q2(r):  # (2^r - 1)/r
    return LN2 if r == 0 else expm1(r * LN2) / r


def qlog(f):  # (log(1+f) - f)/f^2
    if f == 0:
        return D("-0.5")
    if abs(f) < D("1e-6"):
        return D("-0.5") + f / 3 - f * f / 4
    return (log1p(f) - f) / (f * f)


def qlog2(f):  # (log2(1+f) - f log2(e))/f^2
    return qlog(f) * LOG2E


def ttanh(z):  # (tanh(a) - a)/a^3, z = a^2
    if z == 0:
        return D(-1) / 3
    a = z.sqrt()
    if a < D("1e-4"):
        return D(-1) / 3 + 2 * z / 15 - 17 * z * z / 315
    return (tanh(a) - a) / (a * z)


def rlog(z):  # 2(atanh(s)/s - 1), z = s^2
    if z == 0:
        return D(0)
    s = z.sqrt()
    return 2 * (atanh(s) / s - 1)


def wpow(z):  # (rlog(z) - 2z/3)/z^2 = 2/5 + 2z/7 + ...
    s, t, k = D(0), D(1), 0
    while True:
        term = 2 * t / (5 + 2 * k)
        if abs(term) < D(10) ** -60:
            return s
        s += term
        t *= z
        k += 1


def ssin(z):  # (sin r - r)/r^3
    if z == 0:
        return D(-1) / 6
    r = z.sqrt()
    if r < D("1e-4"):
        return D(-1) / 6 + z / 120 - z * z / 5040
    return (sin(r) - r) / (r * z)


def ccos(z):  # (cos r - 1 + z/2)/z^2
    if z == 0:
        return D(1) / 24
    r = z.sqrt()
    if r < D("1e-3"):
        return D(1) / 24 - z / 720 + z * z / 40320
    return (cos(r) - 1 + z / 2) / (z * z)


def patan(z):  # (atan u - u)/u^3
    if z == 0:
        return D(-1) / 3
    u = z.sqrt()
    if u < D("1e-4"):
        return D(-1) / 3 + z / 5 - z * z / 7
    return (atan(u) - u) / (u * z)


def perf(z):  # erf(a)/a
    if z == 0:
        return 2 / pi().sqrt()
    a = z.sqrt()
    return erf(a) / a


def phiq(z):  # (Phi(x) - 1/2)/x, z = x^2
    if z == 0:
        return 1 / (2 * pi()).sqrt()
    x = z.sqrt()
    return erf(x / D(2).sqrt()) / (2 * x)


def erf_c0_split():
    """2/sqrt(pi) as two floats hi + lo (hi rounded to 24 bits, lo the rest rounded)."""
    c0 = 2 / pi().sqrt()
    hi = round_bin(c0, 24)
    return hi, round_bin(c0 - hi, 24)


def perf1_f32(z):  # (erf(a)/a - (hi + lo))/z, z = a^2, with 2/sqrt(pi) = hi + lo as f32 splits it
    hi, lo = erf_c0_split()
    if z == 0:
        return -2 / (3 * pi().sqrt())
    return (perf(z) - hi - lo) / z


ERF_BIG_C = D("2.375")  # erf(a) = P(a - C) for 0.875 <= a <= 4 (a - C by Fast2Sum)


def erf_big(t):
    return erf(t + ERF_BIG_C)


GELU_M_K = D(3)  # f32 gelu_erf: Phi(-u) = e^(-u^2/2) w P(w), w = 1/(u + K), u = |x| >= 3/4


def gelu_m(w):  # P(w) = erfcx(u/sqrt2) / (2w)
    u = 1 / w - GELU_M_K
    return erfcx(u / D(2).sqrt()) / (2 * w)


# weights: the relative error the polynomial's error causes in the final function
def w_expm1(r): return nzw(r * r / expm1(r)) if r != 0 else TINY
def w_exp2(r): return nzw(abs(r) / (2 ** r)) if r != 0 else TINY
def w_log(f): return nzw(f * f / abs(log1p(f))) if f != 0 else TINY
def w_log2(f): return nzw(f * f / abs(log1p(f) * LOG2E)) if f != 0 else TINY
def w_tanh(z): return nzw(z * z.sqrt() / tanh(z.sqrt())) if z != 0 else TINY
def w_log_r(z): return z.sqrt() / (2 * atanh(z.sqrt())) if z != 0 else D("0.5")
def w_pow_w(z): return nzw(z * z / 2)
def w_sin(z): return nzw(z * z.sqrt() / sin(z.sqrt())) if z != 0 else TINY
def w_cos(z): return nzw(z * z / cos(z.sqrt()))
def w_atan(z): return nzw(z * z.sqrt() / atan(z.sqrt())) if z != 0 else TINY
def w_perf1(z): return nzw(z / perf(z))  # erf(a) = a (c0 + z P1(z))
def w_phi(z): return z.sqrt() / (D("0.5") - z.sqrt() * phiq(z)) if z != 0 else TINY  # x / Phi(-x)


SQRT_HALF_M1 = "-0.29289323"  # [sqrt(1/2) - 1, sqrt(2) - 1], a little wider for f32 rounding
SQRT2_M1 = "0.41421357"
Z_LOG = "0.0294373"  # s^2 for s = f/(2+f) on that interval
FITS = {
    # name: (target g, a, b, [(n, lowest power)], bits, goal, weight)
    "exp_q_f32": (qexp, "-0.34658", "0.34658", [(5, 0), (6, 0)], 24, -27, w_expm1),
    "exp2_q_f32": (q2, "-0.5", "0.5", [(5, 0), (6, 0), (7, 0)], 24, -27, w_exp2),
    "log_q_f32": (qlog, SQRT_HALF_M1, SQRT2_M1, [(9, 0), (10, 0)], 24, -27, w_log),
    "log2_q_f32": (qlog2, SQRT_HALF_M1, SQRT2_M1, [(9, 0), (10, 0)], 24, -27, w_log2),
    "expm1_q01_f32": (qexp, "0", "0.69325", [(6, 0)], 24, -31, w_expm1),
    "exp_q_f64": (qexp, "-0.34658", "0.34658", [(11, 0), (12, 0)], 53, -56, w_expm1),
    "exp2_q_f64": (q2, "-0.5", "0.5", [(11, 0), (12, 0), (13, 0)], 53, -56, w_exp2),
    "log_r_f64": (rlog, "0", Z_LOG, [(6, 1), (7, 1), (8, 1)], 53, -56, w_log_r),
    "pow_w_f64": (wpow, "0", Z_LOG, [(6, 0), (7, 0)], 53, -66, w_pow_w),
    "tanh_t_f64": (ttanh, "0", "0.390625", [(11, 0), (12, 0)], 53, -56, w_tanh),
    "sin_s_f64": (ssin, "0", "0.6180", [(6, 0), (7, 0), (8, 0)], 53, -56, w_sin),
    "cos_c_f64": (ccos, "0", "0.6180", [(6, 0), (7, 0), (8, 0)], 53, -56, w_cos),
    "atan_p_f64": (patan, "0", "0.1715782", [(11, 0), (12, 0), (13, 0)], 53, -56, w_atan),
    "erf_p_f32": (perf1_f32, "0", "0.765625", [(5, 0), (6, 0), (7, 0)], 24, -28, w_perf1),
    "phi_q_f32": (phiq, "0", "0.5625", [(5, 0), (6, 0), (7, 0)], 24, -28, w_phi),
    "gelu_m_f32": (gelu_m, "0.0555", "0.26667", [(9, 0), (10, 0), (11, 0)], 24, -28, None),
    "phi_q_f64": (phiq, "0", "0.5625", [(10, 0), (11, 0)], 53, -57, w_phi),
    "erf_p_f64": (perf, "0", "0.7225", [(11, 0), (12, 0)], 53, -56, None),
}


def cheb_nodes(lo, hi, nodes):
    """Chebyshev nodes of [lo, hi] (the interval's interior)."""
    return [(lo + hi) / 2 + (hi - lo) / 2 * D(math.cos(math.pi * (i + 0.5) / nodes))
            for i in range(nodes)]


def seq_lsq(pts, gv, n, bits, fixed=(), relative=False):
    """The n coefficients of sum c_k v^k fitted to gv[v] over pts by least squares (relative
    error, or absolute), rounded to `bits` one at a time from the lowest power and the rest
    refitted after each; the lowest ones given in `fixed`."""
    fixed = list(fixed)
    for k in range(len(fixed), n):
        rows, rhs = [], []
        for v in pts:
            wv = 1 / gv[v] if relative else 1
            rows.append([wv * pw(v, p) for p in range(k, n)])
            rhs.append(wv * (gv[v] - sum(c * pw(v, j) for j, c in enumerate(fixed))))
        m = n - k
        AtA = [[sum(r[i] * r[j] for r in rows) for j in range(m)] for i in range(m)]
        Atb = [sum(r[i] * b for r, b in zip(rows, rhs)) for i in range(m)]
        fixed.append(round_bin(solve(AtA, Atb)[0], bits))
    return fixed


def fit_erfc_g(K=D(4), amax=D("28.5"), n=25, nodes=1500):
    """G(y) = (1 + 2a) erfcx(a), a = K (1+y)/(1-y), by sequential weighted least squares."""
    getcontext().prec = 60
    pts = cheb_nodes(D(-1), (amax - K) / (amax + K), nodes)
    gv = {}
    for y in pts:
        a = K * (1 + y) / (1 - y)
        gv[y] = (1 + 2 * a) * erfcx(a)
    getcontext().prec = 80
    fixed = seq_lsq(pts[::2], gv, n, 53, relative=True)
    err = max(abs(peval(fixed, list(range(n)), y) - gv[y]) / gv[y] for y in pts)
    return f"#define ERFC_K {float(K)!r}\n" + emit("erfc_g_f64", fixed, err)


def fit_erf_big(n=16, nodes=1200):
    """erf(a) = P(a - C) on [0.875, 4] to absolute accuracy, the constant term erf(C) in two
    floats; the other coefficients by sequential least squares at Chebyshev nodes, rounded to
    f32 from the lowest power (Remez's refit divides by t, which crosses 0 here)."""
    getcontext().prec = 50
    pts = cheb_nodes(D("-1.5"), D("1.625"), nodes)
    gv = {t: erf_big(t) for t in pts}
    c0 = erf(ERF_BIG_C)
    c0h = round_bin(c0, 24)
    c0l = round_bin(c0 - c0h, 24)
    fixed = seq_lsq(pts[::2], gv, n, 24, fixed=[c0h + c0l])
    err = max(abs(peval(fixed, list(range(n)), t) - gv[t]) for t in pts)
    return f"#define ERF_BIG_C {float(ERF_BIG_C)!r}\n" + emit("erf_big_f32", [c0h, c0l] + fixed[1:], err)


TANH_PW_CLAMP = D("9.5")  # tanh rounds to 1 in f32 beyond 9.0109


def tanh_pieces():
    """f32 tanh on AVX-512: piece 0 is [0, 1/16); then quarter octaves [2^e (1 + k/4),
    2^e (1 + (k+1)/4)) from 1/16 up to [8, 10), each with its centre (a float with few bits:
    a - c is exact by Sterbenz's lemma) -- the pieces the bits of a >> 21 index."""
    ps = [(D(0), D(1) / 16, D(0))]
    lo = D(1) / 16
    while lo < 8:
        for k in range(4):
            a, b = lo * (1 + D(k) / 4), lo * (1 + D(k + 1) / 4)
            ps.append((a, b, (a + b) / 2))
        lo *= 2
    ps.append((D(8), D(10), D(9)))
    return ps


def fit_tanh_pw(n=6, nodes=240):
    """Piece 0: t q(t), q(0) = 1 exactly and q's other coefficients fitted to tanh(t)/t;
    the others: tanh(c + t) with the constant term tanh(c) rounded first, the rest by
    sequential least squares at Chebyshev nodes, relative error (rounded to f32 one at a
    time from the lowest power)."""
    getcontext().prec = 50
    ps = tanh_pieces()
    tabs = [[] for _ in range(n + 1)]  # centre, then coefficients 0..n-1
    worst = D(0)
    for (a, b, c) in ps:
        b = min(b, TANH_PW_CLAMP)
        pts = cheb_nodes(a - c, b - c, nodes)
        if c == 0:
            g = {t: tanh(t) / t for t in pts}
            fixed = [D(1)]
            m = n - 1
        else:
            g = {t: tanh(c + t) for t in pts}
            fixed = [round_bin(tanh(c), 24)]
            m = n
        fixed = seq_lsq(pts, g, m, 24, fixed=fixed, relative=True)
        err = max(abs(peval(fixed, list(range(m)), t) - g[t]) / g[t] for t in pts)
        worst = max(worst, err)
        coef = [D(0)] + fixed if c == 0 else fixed
        tabs[0].append(c)
        for k in range(n):
            tabs[k + 1].append(coef[k])
    values = []
    for t in tabs:
        t = t + [t[-1]] * (32 - len(t))  # pieces 30 and 31 are not indexed
        values.append([hexf(x) for x in t])
    return (f"#define TANH_PW_CLAMP {float(TANH_PW_CLAMP)!r}\n#define TANH_PW_DEG {n - 1}\n" +
            c_array("tanh_pw_f32", "[TANH_PW_DEG + 2][32]", values,
                    f"{DOC['tanh_pw_f32']}: {log2_err(worst)}"))


def constants():
    """The split constants (hi + lo, each rounded to the format), as vmath.c names them."""
    out = []

    def define(name, v, bits, comment=""):
        out.append(f"#define {name} {hexf(round_bin(v, bits))}{comment}")

    def split(name, v, bits, suffix=""):
        hi = round_bin(v, bits)
        define(f"{name}_HI{suffix}", v, bits)
        define(f"{name}_LO{suffix}", v - hi, bits)

    split("LN2", LN2, 24, "_F32")
    split("LN2", LN2, 53, "_F64")
    split("LOG2E", LOG2E, 24, "_F32")
    split("LOG2E", LOG2E, 53, "_F64")
    p1 = round_bin(pi() / 2, 53)
    p2 = round_bin(pi() / 2 - p1, 53)
    define("PIO2_1", pi() / 2, 53, " /* pi/2 = PIO2_1 + PIO2_2 + PIO2_3 + O(2^-160) */")
    define("PIO2_2", pi() / 2 - p1, 53)
    define("PIO2_3", pi() / 2 - p1 - p2, 53)
    define("TWO_OVER_PI", 2 / pi(), 53)
    split("PIO4", pi() / 4, 53)
    split("TWO_THIRDS", D(2) / 3, 53)
    define("SQRT_HALF", D("0.5").sqrt(), 53)
    split("SQRT2", D(2).sqrt(), 53)
    c = 2 * D(0.7978845608028654)  # exact: the doubles of ops.def's formula
    out.append("/* gelu: c = 2 * 0.7978845608028654 (exact in double), split for f32, and c * 0.044715 */")
    split("GELU_C", c, 24, "_F32")
    split("GELU_CK", c * D(0.044715), 24, "_F32")
    split("GELU_CK", c * D(0.044715), 53, "_F64")
    hi, lo = erf_c0_split()
    out.append("/* f32 erf: 2/sqrt(pi) in two floats (erf_p_f32 is fitted against their sum) */")
    out.append(f"#define ERF_C0_HI_F32 {hexf(hi)}")
    out.append(f"#define ERF_C0_LO_F32 {hexf(lo)}")
    with localcontext() as ctx:
        ctx.prec = 520
        bits = format(int(D(2) / pi() * D(2) ** 1344), "x")
    out.append("/* 2/pi, bits 1..1344 after the binary point (Payne-Hanek). */")
    out.append("static const char two_over_pi_hex[] =")
    rows = [bits[i:i + 90] for i in range(0, len(bits), 90)]
    out += [f'    "{r}"' for r in rows[:-1]] + [f'    "{rows[-1]}";']
    return "\n".join(out) + "\n"


# ---- the include file ------------------------------------------------------------------------

# What each table is; the script adds the largest error the polynomial alone adds to the final
# function (relative unless said otherwise).
DOC = {
    "exp_q_f32": "e^r = 1 + r + r^2 Q(r), |r| <= ln2/2; weighted for expm1 (r + r^2 Q)",
    "exp2_q_f32": "2^r = 1 + r Q(r), |r| <= 1/2",
    "log_q_f32": "log(1+f) = f + f^2 Q(f), f in [sqrt(1/2)-1, sqrt(2)-1]",
    "log2_q_f32": "log2(1+f) = f log2(e) + f^2 Q(f), f in [sqrt(1/2)-1, sqrt(2)-1]",
    "expm1_q01_f32": "e^r - 1 = r + r^2 Q(r), r in [0, ln2] (a little wider for the rounding "
                     "of n), for f32 tanh",
    "exp_q_f64": "e^r = 1 + r + r^2 Q(r), |r| <= ln2/2; weighted for expm1 (r + r^2 Q)",
    "exp2_q_f64": "2^r = 1 + r Q(r), |r| <= 1/2",
    "log_r_f64": "log(1+f) = f - hfsq + s (hfsq + z R(z)), s = f/(2+f), z = s^2 <= 0.0295",
    "pow_w_f64": "pow's log: 2 atanh(s) = 2s + 2/3 s^3 + s^5 W(z), z = s^2",
    "tanh_t_f64": "tanh(a) = a + a^3 T(a^2), a < 0.625",
    "sin_s_f64": "sin(r) = r + r^3 S(r^2), |r| <= pi/4",
    "cos_c_f64": "cos(r) = 1 - r^2/2 + r^4 C(r^2), |r| <= pi/4",
    "atan_p_f64": "atan(u) = u + u^3 P(u^2), |u| <= tan(pi/8)",
    "erf_p_f32": "f32 erf(a) = a (c0 + z P1(z)), z = a^2 < 0.765625, c0 = ERF_C0_HI_F32 + "
                 "ERF_C0_LO_F32",
    "phi_q_f32": "f32 gelu_erf: Phi(x) = 1/2 + x Q(x^2), |x| < 3/4, weighted for x Phi(x) "
                 "with x < 0",
    "gelu_m_f32": "f32 gelu_erf: Phi(-u) = e^(-u^2/2) w P(w), w = 1/(u + GELU_M_K), 3/4 <= u "
                  "<= 15 (the sum of |c_k w^k| is at most 1.16 times the value)",
    "phi_q_f64": "Phi(x) = 1/2 + x Q(x^2), |x| < 3/4, weighted for x Phi(x) with x < 0",
    "erf_p_f64": "erf(a) = a P(a^2), a < 0.85",
    "erfc_g_f64": "erfc(a) = exp(-a^2) G(y) / (1 + 2a), y = (a - ERFC_K)/(a + ERFC_K), "
                  "0 <= a <= 28.5, by least squares at Chebyshev nodes, coefficient by "
                  "coefficient (2^-54 is G's own half ULP)",
    "erf_big_f32": "f32 erf(a) = P(a - ERF_BIG_C) for 0.875 <= a <= 4, the constant term "
                   "erf(ERF_BIG_C) in two parts (the first two entries), then the coefficients "
                   "of t, t^2, ... (least squares at Chebyshev nodes, coefficients rounded one "
                   "at a time from the lowest and the rest refitted), absolute",
    "tanh_pw_f32": "f32 tanh on AVX-512 hosts: 30 pieces of a = |x| indexed by the bits of "
                   "a >> 21 (piece 0: [0, 1/16); then quarter octaves up to [8, 10)), one "
                   "polynomial of degree TANH_PW_DEG in t = a - c each (c its centre, few bits: "
                   "a - c exact by Sterbenz's lemma), the tables looked up with vpermi2ps: "
                   "tanh_pw_f32[0] the centres, tanh_pw_f32[1 + k] the coefficients of t^k. "
                   "Piece 0 is t q(t) with q(0) = 1 exactly; the others' constant terms are "
                   "tanh(c) rounded, which dominates the relative error of the fit (entries "
                   "30 and 31 repeat 29 and are never indexed)",
}


def gelu_m_table():
    return f"#define GELU_M_K {float(GELU_M_K)!r}\n" + fit("gelu_m_f32", *FITS["gelu_m_f32"])


# The include's parts in order: name -> function returning its C text.
TABLES = {"constants": constants}
TABLES.update({name: (lambda name=name: fit(name, *FITS[name])) for name in FITS})
TABLES.update({"gelu_m_f32": gelu_m_table, "erfc_g_f64": fit_erfc_g,
               "erf_big_f32": fit_erf_big, "tanh_pw_f32": fit_tanh_pw})

# The parts --check regenerates with KILN_QUICK=1 (the quick test tier): each takes at most
# about 2.5 s of CPU, together about 10 s; the others take 2 to 12 s each, all 22 parts 60 to
# 75 s (--check's default, as the CTest test vmath_coef in CI's full tier).
CHEAP = ["constants", "pow_w_f64", "cos_c_f64", "erf_big_f32", "tanh_pw_f32", "sin_s_f64",
         "phi_q_f32", "expm1_q01_f32", "tanh_t_f64"]

HEADER = """/* vmath_coef.inc -- generated by scripts/vmath_remez.py; edit the script, not this file.
 *
 *     python3 scripts/vmath_remez.py --write lib/jit/vmath_coef.inc    (all of it, ~1 minute)
 *
 * The polynomial coefficients (lowest power first) and split constants of lib/jit/vmath.c,
 * which includes this file, each derived in decimal arithmetic from first principles.  The
 * comment before each table: what it approximates and the largest error the polynomial
 * alone adds to the final function.  The CTest test vmath_coef regenerates them all and
 * compares them with these (KILN_QUICK=1: the cheap parts): docs/accuracy.md. */
"""


def wrap_comments(text):
    """Re-wrap the one-line /* ... */ comments of text at 100 columns."""
    import textwrap
    out = []
    for line in text.split("\n"):
        if line.startswith("/* ") and line.endswith(" */") and len(line) > 100:
            body = textwrap.wrap(line[3:-3], 96)
            out.append("/* " + body[0])
            out += [" * " + b for b in body[1:]]
            out[-1] += " */"
        else:
            out.append(line)
    return "\n".join(out)


def generate(names):
    parts = {}
    for name in names:
        getcontext().prec = 90  # each table as if alone (some fits change the precision)
        t0 = time.process_time()
        parts[name] = wrap_comments(TABLES[name]())
        print(f"# {name}: {time.process_time() - t0:.1f} s of CPU", file=sys.stderr, flush=True)
    return parts


def split_include(text):
    """The parts of an include file this script wrote, by name."""
    parts, name = {}, None
    for line in text.split("\n"):
        if line.startswith("/* ==== ") and line.endswith(" ==== */"):
            name = line[8:-8]
            parts[name] = []
        elif name is not None:
            parts[name].append(line)
    return {k: "\n".join(v).strip("\n") for k, v in parts.items()}


def include_text(parts):
    return HEADER + "".join(f"\n/* ==== {name} ==== */\n{parts[name].strip(chr(10))}\n"
                            for name in TABLES)


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", metavar="FILE", help="write every table to FILE (the include)")
    ap.add_argument("--check", metavar="FILE", help="regenerate the named tables (default: all "
                    "of them, the cheap ones with KILN_QUICK=1) and compare them with FILE's")
    ap.add_argument("names", nargs="*", help=f"tables: {', '.join(TABLES)}")
    args = ap.parse_args(argv)
    bad = [n for n in args.names if n not in TABLES]
    if bad:
        ap.error(f"no table {', '.join(bad)}")
    if args.write:
        if args.names:
            ap.error("--write writes every table")
        with open(args.write, "w") as f:
            f.write(include_text(generate(list(TABLES))))
        return 0
    if args.check:
        names = args.names or (CHEAP if os.environ.get("KILN_QUICK") == "1" else list(TABLES))
        with open(args.check) as f:
            have = split_include(f.read())
        new = generate(names)
        diff = [n for n in names if have.get(n) != new[n].strip("\n")]
        for n in diff:
            print(f"vmath_remez: {args.check}: table {n} differs from the script's:", file=sys.stderr)
            sys.stderr.writelines(difflib.unified_diff(
                (have.get(n) or "").splitlines(True), new[n].strip("\n").splitlines(True),
                f"{args.check} ({n})", "scripts/vmath_remez.py"))
            print(file=sys.stderr)
        print(f"vmath_remez: {len(names) - len(diff)} of {len(names)} tables as generated "
              f"({', '.join(names)})")
        return 1 if diff else 0
    names = args.names or list(TABLES)
    parts = generate(names)
    sys.stdout.write("".join(parts[n] for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
