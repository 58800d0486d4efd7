"""Where the spectral rules meet their limits: the truncated Krylov SVD's derivative at small kept
values (against the exact derivative, built from known factors), zero-size factorisations,
subnormal and huge matrices, and the full SVD's second derivative of a truncated loss when many
values lie at rounding level (exact along the directions docs/spectral.md names, bounded along the rest)."""

import numpy as np
import pytest

import tenferro_py as tf
import tenferro_py.numpy as tnp
from tenferro_py import krylov
from tenferro_py.testing import check_grads

# These tests characterise the rules along directions that split repeated values and at cuts
# inside multiplets, where the rules warn; tests/test_split.py tests the warnings themselves.
pytestmark = pytest.mark.filterwarnings("ignore::tenferro_py.DegenerateDerivativeWarning")


def factors(rng, m, n, values):
    """(A, Q₁, Q₂) with A = Q₁ diag(values) Q₂ᵀ (values padded with zeros), Q₁, Q₂ orthogonal."""
    q1, q2 = (np.linalg.qr(rng.standard_normal((size, size)))[0] for size in (m, n))
    padded = np.zeros(min(m, n))
    padded[: len(values)] = values
    return (q1[:, : len(padded)] * padded) @ q2[:, : len(padded)].T, q1, q2, padded


def exact_truncated_gradient(w, q1, q2, values, k):
    """The exact gradient of ⟨W, U_k S_k V_kᵀ⟩ at A = Q₁ diag(values) Q₂ᵀ (tall A): in the singular
    basis, W̃ = Q₁ᵀ W Q₂ on the kept rows, and for each kept i and discarded j the rotation of the
    kept space, t_ji = (s_j W̃_ij + s_i W̃_ji)/(s_i² − s_j²), entering as s_i t_ji at (j, i) and
    s_j t_ji at (i, j)."""
    (m, n), wt = w.shape, q1.T @ w @ q2
    kept, rest = values[:k], np.zeros(m - k)
    rest[: n - k] = values[k:]
    across = np.zeros((k, m - k))  # W̃_ij, zero beyond the n columns
    across[:, : n - k] = wt[:k, k:]
    t = (across.T * rest[:, None] + wt[k:, :k] * kept) / (kept**2 - rest[:, None] ** 2)
    middle = np.zeros((m, n))
    middle[:k] = wt[:k]
    middle[k:, :k] += t * kept
    middle[:k, k:] += (t * rest[:, None])[: n - k].T
    return q1 @ middle @ q2.T


def truncated_gradient(a, w, k, method):
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: s.einsum([tf.Tensor(w), *s.svd(x, k=k, method=method)], "ab,ai,i,ib->"))
    return rt.grad(eng, y, x).value().to_numpy()


def relative(x, reference):
    return np.abs(x - reference).max() / np.abs(reference).max()


def takes_the_krylov_path(a, k):
    return krylov._krylov(a * (1 / krylov.power_of_two_near(np.abs(a).max())), k, krylov.TOLERANCE) is not None


# --- the truncated SVD's derivative at small kept values ---------------------------------------


@pytest.mark.parametrize("m, n, k", [(60, 40, 39), (300, 200, 10)])
def test_the_issues_case_small_kept_values_and_a_narrow_cut(rng, m, n, k):
    """s₁…s_k = geomspace(1, 1e-8), s_{k+1} = 0.9e-8: both methods within the full SVD's own
    rounding (~1e-16/gap) of the exact gradient (before, the Krylov one was off by 0.4)."""
    a, q1, q2, values = factors(rng, m, n, np.r_[np.geomspace(1, 1e-8, k), 0.9e-8])
    w = rng.standard_normal((m, n))
    exact = exact_truncated_gradient(w, q1, q2, values, k)
    full, fast = truncated_gradient(a, w, k, "full"), truncated_gradient(a, w, k, "krylov")
    assert relative(full, exact) < 2e-6
    assert relative(fast, exact) < 2e-6
    assert relative(fast, full) < 2e-6


def test_the_iteration_resolves_its_cut_or_gives_way_to_the_full_svd(rng, monkeypatch):
    """s_{k+1} = 0.3 s_k. At s_k = 1e-3 the residuals resolve the cut: the Krylov path, the full SVD's
    gradient to 1e-10. At s_k = 1e-5, 1e-10 × the gap is below the residual floor: the full SVD at
    once (the iteration alone would converge, to a gradient ~ρ/gap ≈ 3e-9 off), the same gradient."""
    m, n, k = 300, 200, 10
    for cut, krylov_path in ((1e-3, True), (1e-5, False)):
        values = np.r_[np.geomspace(1, cut, k), 0.3 * cut * np.geomspace(1, 1e-2, n - k)]
        a, q1, q2, values = factors(rng, m, n, values)
        w = rng.standard_normal((m, n))
        assert takes_the_krylov_path(a, k) == krylov_path
        full, fast = truncated_gradient(a, w, k, "full"), truncated_gradient(a, w, k, "krylov")
        assert relative(fast, full) < 1e-10
        assert relative(fast, exact_truncated_gradient(w, q1, q2, values, k)) < 1e-9
    monkeypatch.setattr(krylov, "CUT_RESOLUTION", 1.0)
    assert takes_the_krylov_path(a, k)


@pytest.mark.parametrize("m, n, k, bound", [(60, 40, 39, 1e-3), (300, 200, 10, 5e-3)])
def test_kept_values_below_1e_10_are_solved_not_zeroed(rng, m, n, k, bound):
    """s_k = 3e-11 · s₁ (a 50 % gap): both methods within their broadening and rounding of the
    exact gradient (full 2e-4 and 7e-4, Krylov 1e-4 and 3e-6); the Krylov rule's columns were
    zero below 1e-10 · s₁ (off by 0.14 and 0.4)."""
    values = np.r_[np.geomspace(1, 3e-11, k), 1.5e-11 * np.geomspace(1, 1e-2, n - k)]
    a, q1, q2, values = factors(rng, m, n, values)
    w = rng.standard_normal((m, n))
    exact = exact_truncated_gradient(w, q1, q2, values, k)
    assert relative(truncated_gradient(a, w, k, "full"), exact) < bound
    assert relative(truncated_gradient(a, w, k, "krylov"), exact) < bound


def test_kept_values_at_rounding_level(rng):
    """Rank 6, k = 10: the four kept values at rounding level are numerically zero for the solve;
    the gradient is the full rule's (which differs only by its noise there, ~1e-6; it was 0.6)."""
    a = rng.standard_normal((300, 6)) @ rng.standard_normal((6, 200))
    w = rng.standard_normal((300, 200))
    full, fast = truncated_gradient(a, w, 10, "full"), truncated_gradient(a, w, 10, "krylov")
    assert np.isfinite(fast).all()
    assert relative(fast, full) < 1e-4


# --- zero-size factorisations -------------------------------------------------------------------


FACTORISATIONS = {
    "svd": (lambda s, x: s.svd(x), 3, False),
    "svd k=0": (lambda s, x: s.svd(x, k=0), 3, False),
    "svd krylov k=0": (lambda s, x: s.svd(x, k=0, method="krylov"), 3, False),
    "qr": (lambda s, x: s.qr(x), 2, False),
    "eigh": (lambda s, x: s.eigh(x), 2, True),
}


EMPTY = [(name, shape) for name, (_, _, square) in FACTORISATIONS.items()
         for shape in [(3, 0), (0, 3), (0, 0), (2, 3, 0), (2, 0, 0), (0, 2, 2)]
         if (shape[-1] == shape[-2] or not square) and (len(shape) == 2 or "k=0" not in name)]


@pytest.mark.parametrize("dtype", [float, complex], ids=["real", "complex"])
@pytest.mark.parametrize("name, shape", EMPTY, ids=str)
def test_zero_size_factorisations_differentiate(name, shape, dtype):
    """k = min(m, n) = 0 (and empty stacks): every output's JVP and VJP are empty arrays of its
    shapes, to second order (the rules raised on values[0:1] and an empty reduce_max)."""
    f, outputs, _ = FACTORISATIONS[name]
    a = np.zeros(shape, dtype)
    for i in range(outputs):
        check_grads(lambda s, x: f(s, x)[i], [a], order=2)
        rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
        x = rt.variable_from(tf.Tensor(a))
        y = rt.with_eager_session(eng, lambda s: f(s, x)[i])
        assert rt.jvp(eng, y, x, tf.Tensor(a)).shape == y.shape
        assert rt.vjp(eng, y, x, tf.Tensor(np.zeros(y.shape, y.dtype))).shape == a.shape


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 3)], ids=str)
def test_numpys_full_svd_of_an_empty_matrix(shape):
    """tnp.linalg.svd's default (full_matrices=True) of an empty matrix: NumPy's factors (identities
    for the complement, which an empty matrix has no entry to move), inside a transform too."""
    x = np.zeros(shape)
    for i, want in enumerate(np.linalg.svd(x)):
        got, tangent = tnp.jvp(lambda y: tnp.linalg.svd(y)[i], (x,), (x,))
        np.testing.assert_array_equal(np.asarray(got), want)
        assert np.asarray(tangent).shape == want.shape


@pytest.mark.parametrize("ord_", [2, -2])
def test_the_spectral_norm_of_an_empty_matrix_is_a_clear_error(ord_):
    with pytest.raises(tf.ShapeMismatch, match=r"^norm: expected a matrix with at least one row and column"):
        tnp.grad(lambda x: tnp.linalg.norm(x, ord_))(np.zeros((0, 3)))


# --- any scale: subnormal and huge matrices ----------------------------------------------------


SCALED = {
    "svd": (lambda s, x: s.svd(x), (6, 4), (0, 1, 0)),
    "svd k=2": (lambda s, x: s.svd(x, k=2), (6, 4), (0, 1, 0)),
    "svd wide": (lambda s, x: s.svd(x), (4, 6), (0, 1, 0)),
    "svd krylov": (lambda s, x: s.svd(x, k=3, method="krylov"), (6, 4), (0, 1, 0)),
    "eigh": (lambda s, x: s.eigh(x), (5, 5), (1, 0)),
    "qr": (lambda s, x: s.qr(x), (6, 4), (0, 1)),
    "qr wide": (lambda s, x: s.qr(x), (4, 6), (0, 1)),
}


def divided(x, c):
    """x / c by parts (NumPy's complex division overflows by a subnormal c)."""
    return x.real / c + (1j * (x.imag / c) if np.iscomplexobj(x) else 0)


def derivatives(f, a, i, degree, cotangent, direction, c):
    """At c·A: the VJP of output i (homogeneous of ``degree`` in A) for the cotangent c^(1−degree)·Ȳ,
    its JVP along c·dA divided by c^degree, and the JVP of that VJP along c·dA: each is c-free."""
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor(a * c))
    y = rt.with_eager_session(eng, lambda s: f(s, x)[i])
    g = rt.vjp(eng, y, x, tf.Tensor(cotangent * c ** (1 - degree)))
    jvp = divided(rt.jvp(eng, y, x, tf.Tensor(direction * c)).value().to_numpy(), c**degree)
    return g.value().to_numpy(), jvp, rt.jvp(eng, g, x, tf.Tensor(direction * c)).value().to_numpy()


@pytest.mark.parametrize("dtype", [float, complex], ids=["real", "complex"])
@pytest.mark.parametrize("name", SCALED)
def test_subnormal_and_huge_matrices_differentiate_as_at_scale_one(rng, name, dtype):
    """At c = 2⁻¹⁰³⁰ (entries ~1e-310, subnormal: the SVD's gradient was NaN, complex QR's forward
    too), 2⁻¹⁰⁰⁰ and 2⁹⁹⁶, the VJP, JVP and second derivative equal those at scale 1, to the ~44
    bits a subnormal entry keeps."""
    f, shape, degrees = SCALED[name]
    a = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if dtype is complex else 0)
    if name == "eigh":
        a = a + a.conj().T
    direction = rng.standard_normal(shape).astype(dtype)
    for i, degree in enumerate(degrees):
        rt = tf.EagerRuntime()
        like = rt.with_eager_session(tf.CpuEngine.serial(), lambda s: f(s, rt.constant_from(tf.Tensor(a)))[i])
        cotangent = rng.standard_normal(like.shape).astype(like.dtype)
        for c in (2.0**-1030, 2.0**-1000, 2.0**996):
            representable = divided(a * c, c)  # A as c·A keeps it
            want = derivatives(f, representable, i, degree, cotangent, direction, 1.0)
            with np.errstate(under="ignore"):
                got = derivatives(f, representable, i, degree, cotangent, direction, c)
            for x, y in zip(got, want):
                np.testing.assert_allclose(x, y, rtol=0, atol=1e-10 * np.abs(y).max())


# --- the full SVD's second derivative of a truncated loss, values at rounding level ------------


def root_reconstruction(k, method):
    def f(s, a):
        u, sv, vt = s.svd(a, k=k, method=method)
        return s.einsum([u, s.sqrt(sv), vt], "ai,i,ib->ab")

    return f


def test_second_derivative_of_a_truncated_loss_through_the_full_svd(rng):
    """s_i = 0.8^i (46 of 170 values below 1e-12 · s₁), U_k √S_k V_kᵀ with k = 12: the Krylov
    second derivative is the central difference's; the full SVD's is right along directions that
    leave the block of values below 1e-8 · s₁ alone, and off by 20–30 % (bounded here by 50 %)
    along one that splits them, whose coupling its broadened rule drops (docs/spectral.md)."""
    m, n, k = 200, 170, 12
    a, q1, q2, values = factors(rng, m, n, 0.8 ** np.arange(n))
    w, d = rng.standard_normal((m, n)), rng.standard_normal((m, n))
    block = q1.T @ d @ q2
    tiny = int(np.argmax(values < 1e-8))
    block[tiny:, tiny:] = 0
    keeping = q1 @ block @ q2.T

    def gradient(point, method):
        rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
        x = rt.variable_from(tf.Tensor(point))
        y = rt.with_eager_session(eng, lambda s: root_reconstruction(k, method)(s, x))
        return rt, eng, x, rt.vjp(eng, y, x, rt.variable_from(tf.Tensor(w)))

    def hvp(method, direction):
        rt, eng, x, g = gradient(a, method)
        return rt.jvp(eng, g, x, tf.Tensor(direction)).value().to_numpy()

    h = 1e-6
    difference = (gradient(a + h * d, "krylov")[3].value().to_numpy()
                  - gradient(a - h * d, "krylov")[3].value().to_numpy()) / (2 * h)
    fast = hvp("krylov", d)
    assert relative(fast, difference) < 1e-5
    assert relative(hvp("full", keeping), hvp("krylov", keeping)) < 1e-6
    assert relative(hvp("full", d), fast) < 0.5
