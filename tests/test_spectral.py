"""SVD and eigh where spectral rules usually break: exactly repeated and zero values, extreme
scales, inf and NaN input, and complex Hermitian eigh.

What the rules promise (docs/spectral.md), tested here against central
differences:

* At exactly repeated values, and at zero ones, the JVP and VJP are the true derivative of
  every gauge-invariant loss along the *kept part* of the direction: dA minus, in
  C = Uᴴ dA V, the off-diagonal Hermitian part inside each block of repeated nonzero values,
  everything but the real diagonal inside each block of zero values, and (rectangular) the
  part of dA outside span(U) times the right vectors of zero values (likewise for wide).
  Directions that keep every multiplicity are their own kept part, so there the derivative is
  exact; elsewhere the removed part is what no rule reading (U, s, V) and their cotangents
  can get right (test_no_rule_through_the_factors_can_split_a_degeneracy).
* f(c·A) for c from 1e-150 to 1e150 (float64), 1e-15 to 1e15 (float32): the same derivatives,
  scaled as f is.
* svd and eigh of a matrix holding inf or NaN raise LinalgError, on any engine.
* eigh of complex Hermitian matrices, with real eigenvalues and the SVD's phase gauge.
"""

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py import SliceConfig
from tenferro_py.testing import check_grads

# These tests characterise the rules along directions that split repeated values and at cuts
# inside multiplets, where the rules warn; tests/test_split.py tests the warnings themselves.
pytestmark = pytest.mark.filterwarnings("ignore::tenferro_py.DegenerateDerivativeWarning")

TOL = 1e-9  # values closer than TOL·s₁ count as equal; zero below TOL·s₁


# --- helpers ------------------------------------------------------------------------------


def cj(s, x):
    return s.conj(x) if x.dtype.kind == "c" else x


def lift(s, x, like):
    """A real tensor x in like's dtype."""
    return s.complex(x, s.zeros(x.shape, x.dtype)) if like.dtype.kind == "c" else x


def orthonormal(rng, n, dtype):
    x = rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if dtype == complex else 0)
    q, _ = np.linalg.qr(x)
    return q


def with_spectrum(rng, m, n, values, dtype=float):
    """Q₁[:, :K] diag(values) Q₂[:, :K]ᴴ, random unitary Q's (K = len(values) = min(m, n))."""
    k = len(values)
    return orthonormal(rng, m, dtype)[:, :k] @ np.diag(values) @ orthonormal(rng, n, dtype)[:, :k].conj().T


def hermitian_with_spectrum(rng, values, dtype=float):
    q = orthonormal(rng, len(values), dtype)
    a = q @ np.diag(values) @ q.conj().T
    return (a + a.conj().T) / 2


def blocks(values):
    """[start, stop) ranges of equal values (to TOL of the largest |value|)."""
    scale = max(np.abs(values).max(), np.finfo(float).tiny)
    out, i = [], 0
    while i < len(values):
        j = i + 1
        while j < len(values) and abs(values[j] - values[i]) <= TOL * scale:
            j += 1
        out.append((i, j))
        i = j
    return out


def svd_factors(a):
    """The library's own factors (the basis its rules work in)."""
    rt = tf.EagerRuntime()
    u, sv, vt = rt.with_eager_session(tf.CpuEngine.serial(), lambda s: s.svd(rt.constant_from(tf.Tensor(a))))
    return u.value().to_numpy(), sv.value().to_numpy(), vt.value().to_numpy()


def svd_kept_part(a, d):
    """dA without what splits a repeated value, or moves a zero one (see the module docstring)."""
    u, sv, vt = svd_factors(a)
    m, n = a.shape
    v = vt.conj().T
    c = u.conj().T @ d @ v
    removed = np.zeros_like(c)
    zero = sv <= TOL * max(sv[0], np.finfo(float).tiny)
    for i, j in blocks(sv):
        b = c[i:j, i:j]
        if zero[i]:
            removed[i:j, i:j] = b - np.diag(np.diag(b).real)
        else:
            h = (b + b.conj().T) / 2
            removed[i:j, i:j] = h - np.diag(np.diag(h))
    kept = d - u @ removed @ vt
    if m > len(sv):
        kept -= (d - u @ (u.conj().T @ d)) @ v[:, zero] @ v[:, zero].conj().T
    if n > len(sv):
        kept -= u[:, zero] @ u[:, zero].conj().T @ (d - (d @ v) @ vt)
    return kept


def eigh_kept_part(a, d):
    """herm(dA) without the off-diagonal part of Vᴴ herm(dA) V inside blocks of repeated eigenvalues."""
    w, v = np.linalg.eigh(a)
    p = v.conj().T @ ((d + d.conj().T) / 2) @ v
    for i, j in blocks(w):
        b = p[i:j, i:j]
        p[i:j, i:j] = np.diag(np.diag(b))
    return v @ p @ v.conj().T


def rounding_tolerance(values, eps=1e-12, zeros=True):
    """What rounding may leave of the removed part: LAPACK returns equal values δ ≈ 1e-16·s₁ apart
    (and zero singular values as ≈ 1e-17·s₁), where the broadened coefficients are δ/(δ² + ε²) ≈
    δ/ε² ≫ 1, and they meet numerators that are rounding errors of a few ulps: 10 ε_mach times the
    largest such coefficient (up to 5 ε_mach seen with OpenBLAS's generic kernels,
    OPENBLAS_CORETYPE=Prescott, and 2.5 with Haswell's). ``zeros``: whether zero values have
    coefficients of their own (the SVD's)."""
    x = np.asarray(values) / max(np.abs(values).max(), np.finfo(float).tiny)
    near = [abs(p - q) for i, j in blocks(values) for p in x[i:j] for q in x[i:j] if p != q]
    if zeros:
        near += [p for p in x if p <= TOL] + [p + q for p in x for q in x if 0 < p + q <= 2 * TOL]
    return 10 * np.finfo(float).eps * max([1.0] + [t / (t * t + eps * eps) for t in near])


def along(directions, base, f):
    """g(p) = f(base + Σ_k p_k D_k): check_grads of g at p = 0 checks f's derivatives along span(D)."""
    stack = np.stack(directions)

    def g(s, p):
        d = s.einsum([lift(s, p, s.constant_from(tf.Tensor(stack))), s.constant_from(tf.Tensor(stack))], "k,kab->ab")
        return f(s, s.add(s.constant_from(tf.Tensor(base)), d))

    g.__name__ = f.__name__
    return g


def check_along(g, order):
    """check_grads of g at p = 0 (three parameters): each mode alone against central differences at
    the default ε, and both, with their dot-product test (to 1e-10), at ε = 1e-8. At exactly repeated
    values LAPACK's values are δ ≈ 1e-16·s₁ apart, where the broadened 1/δ is δ/(ε s₁)² ≈ 1e8/s₁: it
    multiplies numerators that are rounding errors, so at ε = 1e-12 JVP and VJP agree to ~1e-8
    (order 1) and ~1e-9 (order 2, the Lorentzian's slope 1/(ε s₁)²) only, far below what central
    differences resolve; ε = 1e-8 brings that to rounding."""
    for mode in ("fwd", "rev"):
        check_grads(g, [np.zeros(3)], modes=(mode,), order=order, h=1e-5, rtol=1e-5)
    check_grads(g, [np.zeros(3)], modes=("fwd", "rev"), order=order, h=1e-5, rtol=1e-5,
                context=tf.AdContext(derivative_eps=1e-8))


def random_like(rng, a):
    d = rng.standard_normal(a.shape)
    return d + 1j * rng.standard_normal(a.shape) if np.iscomplexobj(a) else d


# --- gauge-invariant losses -------------------------------------------------------------------


def reconstruction(s, a):
    """U S Vᴴ: A itself."""
    u, sv, vt = s.svd(a)
    return s.einsum([u, lift(s, sv, u), vt], "ai,i,ib->ab")


def pseudo_inverse(s, a):
    """V S⁻¹ Uᴴ."""
    u, sv, vt = s.svd(a)
    inverse = s.div(s.constant_from(tf.Tensor(np.ones(sv.shape, sv.dtype))), sv)
    return s.einsum([cj(s, vt), lift(s, inverse, u), cj(s, u)], "ib,i,ai->ba")


def sqrt_reconstruction(s, a):
    """U √S Vᴴ."""
    u, sv, vt = s.svd(a)
    return s.einsum([u, lift(s, s.sqrt(sv), u), vt], "ai,i,ib->ab")


def sum_of_squares(s, a):
    sv = s.svd(a)[1]
    return s.reduce_sum(s.mul(sv, sv))


def left_projector(k):
    """U_k U_kᴴ, the projector onto the first k left singular vectors."""

    def f(s, a):
        u = s.svd(a)[0]
        uk = s.slice(u, SliceConfig([0, 0], [u.shape[0], k]))
        return s.einsum([uk, cj(s, uk)], "ai,bi->ab")

    f.__name__ = f"left_projector({k})"
    return f


def right_projector(k):
    """V_k V_kᴴ."""

    def f(s, a):
        vt = s.svd(a)[2]
        vk = s.slice(vt, SliceConfig([0, 0], [k, vt.shape[1]]))
        return s.einsum([cj(s, vk), vk], "ia,ib->ab")

    f.__name__ = f"right_projector({k})"
    return f


# (m, n, singular values) or a matrix: repeated, zero, identity and zero matrices.
SPECTRA = {
    "3221": (4, 4, [3.0, 2.0, 2.0, 1.0]),
    "3221-tall": (6, 4, [3.0, 2.0, 2.0, 1.0]),
    "3221-wide": (4, 6, [3.0, 2.0, 2.0, 1.0]),
    "identity": np.eye(3),
    "identity-tall": np.eye(4, 2),
    "110": (3, 3, [1.0, 1.0, 0.0]),
    "110-tall": (5, 3, [1.0, 1.0, 0.0]),
    "110-wide": (3, 4, [1.0, 1.0, 0.0]),
    "3200": (4, 4, [3.0, 2.0, 0.0, 0.0]),
    "zero": np.zeros((3, 3)),
    "zero-tall": np.zeros((4, 2)),
}


def spectrum(rng, name, dtype):
    spec = SPECTRA[name]
    if isinstance(spec, np.ndarray):
        return spec.astype(dtype)
    return with_spectrum(rng, *spec, dtype=dtype)


def losses_for(name):
    """The losses defined (and differentiable) at that spectrum: no 1/s or √s at a zero value;
    projectors onto whole blocks of equal values only."""
    sv = np.array(SPECTRA[name][2]) if not isinstance(SPECTRA[name], np.ndarray) else np.linalg.svd(
        SPECTRA[name], compute_uv=False)
    out = [reconstruction, sum_of_squares]
    if sv[-1] > 0:
        out += [pseudo_inverse, sqrt_reconstruction]
    for i, j in blocks(sv)[:-1]:
        if sv[j] != sv[j - 1] and sv[j - 1] > 0:
            out += [left_projector(j), right_projector(j)]
    return out


def derivatives(f, a, d, w):
    """(JVP along d, VJP of cotangent w) of f at a."""
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: f(s, x))
    return rt.jvp(eng, y, x, tf.Tensor(d)).value().to_numpy(), rt.vjp(eng, y, x, tf.Tensor(w)).value().to_numpy()


def output_like(rng, f, a):
    rt = tf.EagerRuntime()
    y = rt.with_eager_session(tf.CpuEngine.serial(), lambda s: f(s, rt.constant_from(tf.Tensor(a))))
    out = rng.standard_normal(y.shape)
    return out + 1j * rng.standard_normal(y.shape) if y.dtype.kind == "c" else out


# --- exact at repeated and zero singular values ------------------------------------------------


@pytest.mark.parametrize("dtype", [float, complex], ids=["real", "complex"])
@pytest.mark.parametrize("name", sorted(SPECTRA))
def test_svd_exact_along_the_kept_part(rng, name, dtype):
    """Central differences along directions that keep every multiplicity (kept parts of random
    directions): the JVP and VJP are the derivative."""
    a = spectrum(rng, name, dtype)
    directions = [svd_kept_part(a, random_like(rng, a)) for _ in range(3)]
    for f in losses_for(name):
        check_along(along(directions, a, f), order=1)


@pytest.mark.parametrize("dtype", [float, complex], ids=["real", "complex"])
@pytest.mark.parametrize("name", sorted(SPECTRA))
def test_svd_rule_drops_only_the_splitting_part(rng, name, dtype):
    """Along any direction, the result is that of its kept part: the JVP along dA is the JVP along
    kept(dA), and the VJP has no component along dA − kept(dA)."""
    a = spectrum(rng, name, dtype)
    for f in losses_for(name):
        d = random_like(rng, a)
        w = output_like(rng, f, a)
        jv, g = derivatives(f, a, d, w)
        jv_kept, _ = derivatives(f, a, svd_kept_part(a, d), w)
        assert np.all(np.isfinite(jv)) and np.all(np.isfinite(g))
        tol = rounding_tolerance(svd_factors(a)[1])
        assert np.abs(jv - jv_kept).max() <= tol * max(1.0, np.abs(jv_kept).max()), f.__name__
        removed = d - svd_kept_part(a, d)
        assert abs(np.vdot(g, removed).real) <= tol * np.linalg.norm(g) * np.linalg.norm(d), f.__name__


def _keeping_path_directions(rng, a, count, dtype):
    """Directions U E Vᴴ (full U, V) with E block-diagonal: c·I plus a traceless anti-Hermitian
    part on each pair of equal values, a number on each other value. Along A + t·U E Vᴴ every
    pair stays equal to all orders, so the second derivatives are defined and checked too."""
    u, sv, vt = svd_factors(a)
    out = []
    for _ in range(count):
        e = np.zeros((len(sv), len(sv)), dtype=dtype)
        for i, j in blocks(sv):
            e[i:j, i:j] = rng.standard_normal() * np.eye(j - i)
            if j - i == 2:
                k = rng.standard_normal() * np.array([[0, 1], [-1, 0]])
                if dtype == complex:
                    k = k + 1j * rng.standard_normal() * np.array([[1, 0], [0, -1]])
                e[i:j, i:j] += k
        out.append(u @ e @ vt)
    return out


@pytest.mark.parametrize("dtype", [float, complex], ids=["real", "complex"])
@pytest.mark.parametrize("shape", [(4, 4), (6, 4), (4, 6)])
def test_svd_second_order_along_paths_that_keep_a_pair(rng, shape, dtype):
    a = with_spectrum(rng, *shape, [3.0, 2.0, 2.0, 1.0], dtype=dtype)
    directions = _keeping_path_directions(rng, a, 3, dtype)
    for f in (reconstruction, pseudo_inverse, sqrt_reconstruction, left_projector(3), right_projector(1)):
        check_along(along(directions, a, f), order=2)


def test_no_rule_through_the_factors_can_split_a_degeneracy():
    """Why the kept part is the most any SVD rule can give. At A = I (2×2) with G = [[0, 1], [1, 0]],
    L_g(A) = ⟨G, U g(S) Vᵀ⟩ for g(s) = s and g(s) = s² reach the SVD with the same cotangents
    (Ū = G V g(S), S̄ = g'(S)∘diag(UᵀGV) = 0, V̄ = Gᵀ U g(S)), but dL_g/dA along G is g'(1)·‖G‖²:
    2 and 4. A rule sees the cotangents only; ours gives 0, the derivative along kept(G) = 0."""
    g_matrix = np.array([[0.0, 1.0], [1.0, 0.0]])

    def loss(power):
        def f(s, a):
            u, sv, vt = s.svd(a)
            gs = s.mul(sv, sv) if power == 2 else sv
            return s.einsum([u, gs, vt, s.constant_from(tf.Tensor(g_matrix))], "ai,i,ib,ab->")

        return f

    def cotangents(power):
        rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
        u, sv, vt = (rt.variable_from(tf.Tensor(x)) for x in svd_factors(np.eye(2)))

        def f(s):
            gs = s.mul(sv, sv) if power == 2 else sv
            return s.einsum([u, gs, vt, s.constant_from(tf.Tensor(g_matrix))], "ai,i,ib,ab->")

        y = rt.with_eager_session(eng, f)
        return [rt.grad(eng, y, x).value().to_numpy() for x in (u, sv, vt)]

    for x, y in zip(cotangents(1), cotangents(2)):
        np.testing.assert_array_equal(x, y)
    h = 1e-6
    for power, slope in ((1, 2.0), (2, 4.0)):
        rt = tf.EagerRuntime()
        value = lambda a: rt.with_eager_session(  # noqa: E731
            tf.CpuEngine.serial(), lambda s: loss(power)(s, rt.constant_from(tf.Tensor(a)))).item()
        assert abs((value(np.eye(2) + h * g_matrix) - value(np.eye(2) - h * g_matrix)) / (2 * h) - slope) < 1e-6
        jv, grad = derivatives(loss(power), np.eye(2), g_matrix, np.array(1.0))
        assert jv == 0.0 and np.vdot(grad, g_matrix) == 0.0
        assert np.all(svd_kept_part(np.eye(2), g_matrix) == 0.0)


# --- eigh at repeated eigenvalues --------------------------------------------------------------


def eigh_reconstruction(s, a):
    w, v = s.eigh(a)
    return s.einsum([v, lift(s, w, v), cj(s, v)], "ai,i,bi->ab")


def eigh_exp(s, a):
    w, v = s.eigh(a)
    return s.einsum([v, lift(s, s.exp(w), v), cj(s, v)], "ai,i,bi->ab")


def eigh_top_projector(k):
    def f(s, a):
        w, v = s.eigh(a)
        n = w.shape[0]
        vk = s.slice(v, SliceConfig([0, n - k], [n, n]))
        return s.einsum([vk, cj(s, vk)], "ak,bk->ab")

    f.__name__ = f"eigh_top_projector({k})"
    return f


def eigh_trace_exp(s, a):
    """tr exp(A): a symmetric function of the eigenvalues."""
    return s.reduce_sum(s.exp(s.eigh(a)[0]))


def eigenvalues(s, a):
    return s.eigh(a)[0]


EIGH_SPECTRA = {
    "pair": [-1.0, 2.0, 2.0, 3.0],
    "triple": [1.0, 1.0, 1.0, -2.0],
    "zeros": [0.0, 0.0, 1.0],
    "zero-matrix": [0.0, 0.0, 0.0],
}


@pytest.mark.parametrize("dtype", [float, complex], ids=["real", "complex"])
@pytest.mark.parametrize("name", sorted(EIGH_SPECTRA))
def test_eigh_exact_along_the_kept_part_and_drops_only_the_splitting_part(rng, name, dtype):
    a = hermitian_with_spectrum(rng, EIGH_SPECTRA[name], dtype)
    w = np.linalg.eigh(a)[0]
    # Not the sorted eigenvalues themselves: the kept part may split a repeated value, and they
    # have a kink where two cross.
    losses = [eigh_reconstruction, eigh_exp, eigh_trace_exp]
    losses += [eigh_top_projector(len(w) - i) for i, _ in blocks(w)[1:]]
    directions = [eigh_kept_part(a, random_like(rng, a)) for _ in range(3)]
    for f in losses:
        check_along(along(directions, a, f), order=1)
        d, cot = random_like(rng, a), output_like(rng, f, a)
        jv, g = derivatives(f, a, d, cot)
        jv_kept, _ = derivatives(f, a, eigh_kept_part(a, d), cot)
        tol = rounding_tolerance(w, zeros=False)
        assert np.abs(jv - jv_kept).max() <= tol * max(1.0, np.abs(jv_kept).max()), f.__name__
        removed = (d + d.conj().T) / 2 - eigh_kept_part(a, d)
        assert abs(np.vdot(g, removed).real) <= tol * np.linalg.norm(g) * np.linalg.norm(d), f.__name__


# --- scale: f(c·A) ----------------------------------------------------------------------------


def _scaled_derivatives(f, a, c, d, w, dtype):
    """JVP along c·d and VJP of w of f at c·a, in ``dtype``."""
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor((c * a).astype(dtype)))
    y = rt.with_eager_session(eng, lambda s: f(s, x))
    jv = rt.jvp(eng, y, x, tf.Tensor((c * d).astype(dtype))).value().to_numpy()
    g = rt.vjp(eng, y, x, tf.Tensor(w.astype(y.dtype))).value().to_numpy()
    return y.value().to_numpy(), jv, g


SCALES = {
    np.float64: [1e-150, 1e-75, 1e-6, 1.0, 1e75, 1e150],
    np.float32: [1e-15, 1e-6, 1.0, 1e6, 1e15],
    np.complex128: [1e-150, 1.0, 1e150],
    np.complex64: [1e-15, 1.0, 1e15],
}


def representable(reference, factor, dtype):
    """Whether reference·factor lies well inside the dtype's normal range."""
    largest = np.abs(reference).max()
    if largest == 0:
        return True
    info = np.finfo(dtype)
    return np.log10(info.tiny) + 3 < np.log10(largest) + np.log10(factor) < np.log10(info.max) - 3


# (f, p, svd or eigh) with f(cA) = c^p f(A).
SCALE_LOSSES = [
    (lambda s, a: s.svd(a)[1], 1, "svd"),
    (reconstruction, 1, "svd"),
    (pseudo_inverse, -1, "svd"),
    (left_projector(1), 0, "svd"),
    (right_projector(2), 0, "svd"),
    (left_projector(3), 0, "svd"),
    (eigenvalues, 1, "eigh"),
    (eigh_reconstruction, 1, "eigh"),
    (eigh_top_projector(1), 0, "eigh"),
    (eigh_top_projector(2), 0, "eigh"),
]


@pytest.mark.parametrize("dtype", sorted(SCALES, key=str), ids=lambda t: np.dtype(t).name)
def test_derivatives_follow_the_scale(rng, dtype):
    """f(c·A) = c^p f(A): the JVP along c·dA is c^p times that along dA at A, and the VJP c^(p−1)
    times it, for c across the dtype's range (no s² anywhere, and ε relative to the spectrum's
    scale). The spectra hold a near-degenerate pair (gap 1e-3) and a small value (1e-5 of the
    largest; 1e-2 in single precision, where 1/s² of 1e-5 at c = 1e-15 would overflow)."""
    kind = np.dtype(dtype).kind
    wide = np.complex128 if kind == "c" else np.float64
    small = 1e-5 if wide == np.dtype(dtype) else 1e-2
    matrix = with_spectrum(rng, 5, 4, [2.0, 1.001, 1.0, small], dtype=complex if kind == "c" else float)
    hermitian = hermitian_with_spectrum(rng, [-2.0, 1.0, 1.001, small], dtype=complex if kind == "c" else float)
    tol = 1e-10 if wide == np.dtype(dtype) else 2e-3
    for f, power, op in SCALE_LOSSES:
        a = matrix if op == "svd" else hermitian
        d = random_like(rng, a)
        w = output_like(rng, f, a)
        _, ref_jv, ref_g = _scaled_derivatives(f, a, 1.0, d, w, wide)
        for c in SCALES[dtype]:
            if not (representable(ref_jv, float(c) ** power, dtype) and representable(ref_g, float(c) ** (power - 1), dtype)):
                continue  # the derivative itself is out of the dtype's range (1/s² of pinv at c = 1e-150)
            _, jv, g = _scaled_derivatives(f, a, c, d, w, dtype)
            assert np.all(np.isfinite(jv)) and np.all(np.isfinite(g)), (c, f.__name__)
            # In units of the reference, so nothing of order c^p over- or underflows here.
            np.testing.assert_allclose(jv / c**power, ref_jv, rtol=0, atol=tol * np.abs(ref_jv).max(),
                                       err_msg=f"{f.__name__} JVP at c = {c:g}")
            np.testing.assert_allclose(g * c ** (1 - power), ref_g, rtol=0, atol=tol * np.abs(ref_g).max(),
                                       err_msg=f"{f.__name__} VJP at c = {c:g}")


# --- complex Hermitian eigh ---------------------------------------------------------------------


def hermitian(s, x):
    """(x + xᴴ)/2: check_grads' random directions made Hermitian before eigh sees them."""
    return s.scale_real(s.add(x, s.transpose(cj(s, x), (1, 0))), 0.5)


def eigenvector_moduli(s, a):
    """|V_ij|²: invariant under each eigenvector's phase."""
    v = s.eigh(a)[1]
    return s.real(s.mul(v, s.conj(v)))


HERMITIAN_LOSSES = [eigenvalues, eigh_reconstruction, eigh_exp, eigh_top_projector(2), eigenvector_moduli]


@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("f", HERMITIAN_LOSSES, ids=lambda f: f.__name__)
def test_complex_hermitian_eigh_grads(rng, n, f):
    """Order 2, both modes, along real and imaginary Hermitian directions."""
    a = hermitian_with_spectrum(rng, np.cumsum(0.3 + rng.random(n)) - n / 2, complex)
    check_grads(lambda s, x: f(s, hermitian(s, x)), [a], modes=("fwd", "rev"), order=2)


def test_complex_hermitian_eigh_forward(rt, run, rng):
    for dtype, tol in ((np.complex128, 1e-13), (np.complex64, 1e-5)):
        a = hermitian_with_spectrum(rng, [-1.0, 0.5, 2.0, 3.0], complex).astype(dtype)
        w, v = run(lambda s: s.eigh(rt.variable_from(tf.Tensor(a))))
        assert w.dtype == np.dtype(dtype).type(0).real.dtype and v.dtype == dtype
        W, V = w.value().to_numpy(), v.value().to_numpy()
        np.testing.assert_allclose(W, [-1.0, 0.5, 2.0, 3.0], atol=tol * 10)
        np.testing.assert_allclose(V @ np.diag(W) @ V.conj().T, a, atol=tol * 10)
        np.testing.assert_allclose(V.conj().T @ V, np.eye(4), atol=tol * 10)


@pytest.mark.parametrize("f", HERMITIAN_LOSSES, ids=lambda f: f.__name__)
def test_complex64_eigh_derivatives_agree_with_complex128(rng, f):
    a = hermitian_with_spectrum(rng, [-1.0, 0.5, 2.0, 3.0], complex)
    d = random_like(rng, a)
    d = (d + d.conj().T) / 2
    w = output_like(rng, f, a)
    _, jv64, g64 = _scaled_derivatives(f, a, 1.0, d, w, np.complex64)
    _, jv, g = _scaled_derivatives(f, a, 1.0, d, w, np.complex128)
    assert jv64.dtype in (np.complex64, np.float32) and g64.dtype == np.complex64
    np.testing.assert_allclose(jv64, jv, rtol=0, atol=1e-5 * np.abs(jv).max())
    np.testing.assert_allclose(g64, g, rtol=0, atol=1e-5 * np.abs(g).max())


@pytest.mark.parametrize("op", ["svd", "eigh"])
def test_eigenvector_phases_do_not_move(rt, eng, rng, op):
    """The phase gauge: Im diag(Vᴴ dV) = 0 for eigh's V and the SVD's V (the SVD's phase sits in U,
    as in JAX). A loss that reads a phase gets the derivative in that gauge, the same in both modes."""
    a = hermitian_with_spectrum(rng, [-1.0, 0.5, 2.0], complex) if op == "eigh" else with_spectrum(
        rng, 3, 3, [3.0, 2.0, 1.0], complex)
    x = rt.variable_from(tf.Tensor(a))
    v = rt.with_eager_session(eng, lambda s: s.eigh(x)[1] if op == "eigh" else s.transpose(s.conj(s.svd(x)[2]), (1, 0)))
    d = random_like(rng, a)
    dv = rt.jvp(eng, v, x, tf.Tensor(d)).value().to_numpy()
    np.testing.assert_allclose(np.diag(v.value().to_numpy().conj().T @ dv).imag, 0, atol=1e-14)
    phase_reading = lambda s: s.reduce_sum(s.imag(s.slice(v, SliceConfig([0, 0], [1, 3]))))  # noqa: E731
    y = rt.with_eager_session(eng, phase_reading)
    g = rt.vjp(eng, y, x, tf.Tensor(np.array(1.0))).value().to_numpy()
    jv = rt.jvp(eng, y, x, tf.Tensor(d)).item()
    d_seen = (d + d.conj().T) / 2 if op == "eigh" else d  # eigh reads the Hermitian part
    assert abs(np.vdot(g, d_seen).real - jv) < 1e-12


# --- inf and NaN ------------------------------------------------------------------------------

FLOATS = [np.float32, np.float64, np.complex64, np.complex128]


def _with_entry(dtype, value, n=3):
    a = np.eye(n, dtype=dtype)
    a[1, 2] = a[2, 1] = value
    return a


@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("width", [1, 2])
@pytest.mark.parametrize("op", ["svd", "eigh"])
def test_non_finite_input_raises(rng, op, width, dtype, value):
    """Every time, on a serial engine and on worker threads, for input given and input computed."""
    rt = tf.EagerRuntime()
    eng = tf.CpuEngine(tf.Pool.builder().threads(width).build())
    bad = rt.variable_from(tf.Tensor(_with_entry(dtype, value)))
    for _ in range(2):
        with pytest.raises(tf.LinalgError, match=rf"^{op}: expected a matrix of finite entries, got inf or NaN"):
            rt.with_eager_session(eng, lambda s: getattr(s, op)(bad))
    huge = rt.variable_from(tf.Tensor(_with_entry(dtype, 100.0)))  # exp(100·k) overflows in float32 and
    with pytest.raises(tf.LinalgError, match=rf"^{op}: "):  # float64 alike, on the worker that runs it
        rt.with_eager_session(eng, lambda s: getattr(s, op)(s.exp(s.scale_real(huge, 8.0))))
    # The engine goes on working after the errors.
    good = rt.variable_from(tf.Tensor(_with_entry(dtype, 0.5)))
    out = rt.with_eager_session(eng, lambda s: getattr(s, op)(good))
    assert np.all(np.isfinite(out[0].value().to_numpy()))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: np.dtype(t).name)
def test_non_finite_input_raises_on_the_gesvd_path(rt, eng, monkeypatch, dtype):
    """Where gesdd is not there to fail (it never converges here), gesvd is not fed NaN either."""

    def no_convergence(*args, **kwargs):
        raise np.linalg.LinAlgError("SVD did not converge")

    monkeypatch.setattr(np.linalg, "svd", no_convergence)
    u, sv, vt = rt.with_eager_session(eng, lambda s: s.svd(s.constant_from(tf.Tensor(_with_entry(dtype, 0.5)))))
    assert np.all(np.isfinite(sv.value().to_numpy()))
    for value in (np.inf, np.nan):
        with pytest.raises(tf.LinalgError, match="^svd: expected a matrix of finite entries"):
            rt.with_eager_session(eng, lambda s: s.svd(s.constant_from(tf.Tensor(_with_entry(dtype, value)))))


@pytest.mark.parametrize("dtype", [float, complex], ids=["real", "complex"])
@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4)])
def test_second_derivatives_at_the_zero_matrix_are_finite(rng, shape, dtype):
    """The scale of a zero spectrum is 1, not the dtype's tiny: 1/scale enters second derivatives."""
    zero = np.zeros(shape, dtype=dtype)
    for f in (reconstruction, sum_of_squares, left_projector(1)):
        rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
        x = rt.variable_from(tf.Tensor(zero))
        y = rt.with_eager_session(eng, lambda s: f(s, x))
        g = rt.vjp(eng, y, x, tf.Tensor(output_like(rng, f, zero)))
        h = rt.jvp(eng, g, x, tf.Tensor(random_like(rng, zero))).value().to_numpy()
        assert np.all(np.isfinite(h)), f.__name__
    if shape[0] == shape[1]:
        rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
        x = rt.variable_from(tf.Tensor(zero))
        y = rt.with_eager_session(eng, lambda s: eigh_reconstruction(s, x))
        g = rt.vjp(eng, y, x, tf.Tensor(output_like(rng, eigh_reconstruction, zero)))
        assert np.all(np.isfinite(rt.jvp(eng, g, x, tf.Tensor(random_like(rng, zero))).value().to_numpy()))
