"""The truncated eigh (eigh(x, k=k, method="krylov")): its pairs against LAPACK's, multiplets, its
determinism, its fallback, its derivatives (check_grads to order 2, real and complex; against the
full eigh's derivative of the same truncated loss; against the exact derivative where kept
eigenvalues are small), extreme scales, the zero matrix, and its errors."""

import numpy as np
import pytest
import scipy.linalg
from conftest import derivatives

import tenferro_py as tf
from tenferro_py import krylov_eigh
from tenferro_py.testing import check_grads


@pytest.fixture
def krylov_from_128(monkeypatch):
    """The Krylov path from n = 128 on (the measured crossover is 512): small, fast test matrices
    that take the same code as large ones."""
    monkeypatch.setattr(krylov_eigh, "KRYLOV_FROM", 128)


def unitary(rng, n, dtype):
    x = rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if dtype == complex else 0)
    return np.linalg.qr(x)[0]


def with_spectrum(rng, values, dtype=float):
    """The Hermitian matrix with eigenvalues ``values`` and random eigenvectors."""
    q = unitary(rng, len(values), dtype)
    h = (q * values) @ q.conj().T
    return (h + h.conj().T) * 0.5


def alternating(values):
    """values with the sign of every third one flipped: an indefinite spectrum, as a CTMRG corner's."""
    return values * np.where(np.arange(len(values)) % 3 == 1, -1.0, 1.0)


def decaying(n):
    return alternating(np.exp(-np.arange(n) ** 0.6))


def separated(n):
    """|λ| from 1 down by e^0.2 a step to ~3e-3, then the rest down to ~1e-5 (a discarded bulk, none at
    rounding level): the Krylov method converges within its budget, and the full eigh's own second
    derivative is accurate, so the two derivatives must agree."""
    i = np.arange(n)
    return alternating(np.exp(np.where(i < 30, -0.2 * i, -6 - 0.03 * (i - 30))))


def largest(a, k):
    """LAPACK's k pairs of largest |λ|, by |λ| descending."""
    w, v = np.linalg.eigh(a)
    order = krylov_eigh.largest_magnitude_order(w)[:k]
    return w[order], v[:, order]


def takes_the_krylov_path(h, k):
    """Whether truncated_eigh(h, k) ends on the Krylov pairs (its Newton step included where it
    takes one), not on the fallback (h Hermitian, of norm near 1)."""
    found = krylov_eigh._krylov(h, k, krylov_eigh.TOLERANCE)
    if found is not None and abs(found[0][k - 1]) < krylov_eigh.REFINE_BELOW * abs(found[0][0]):
        found = krylov_eigh._refined(h, k, *found)
    return found is not None


def run(a, k, method, engine=None):
    rt = tf.EagerRuntime()
    out = rt.with_eager_session(engine or tf.CpuEngine.serial(),
                                lambda s: s.eigh(rt.constant_from(tf.Tensor(a)), k=k, method=method))
    return [x.value().to_numpy() for x in out]


@pytest.mark.parametrize("n, k, dtype", [(200, 10, float), (200, 10, complex), (600, 30, float)],
                         ids=["real", "complex", "real, 600 × 600"])
def test_pairs_are_lapacks(rng, krylov_from_128, n, k, dtype):
    a = with_spectrum(rng, decaying(n), dtype)
    assert takes_the_krylov_path(a, k)
    w, v = run(a, k, "krylov")
    w_full, _ = largest(a, k)
    np.testing.assert_allclose(w, w_full, rtol=0, atol=1e-14)
    np.testing.assert_allclose(v.conj().T @ v, np.eye(k), atol=1e-13)
    np.testing.assert_allclose(a @ v, v * w, rtol=0, atol=1e-13)


@pytest.mark.parametrize("where", ["top", "cut", "below the cut", "plus and minus", "eight across the cut"])
def test_exact_multiplets_are_found(rng, krylov_from_128, where):
    """A single-vector Krylov method sees one vector per distinct eigenvalue; the block one sees
    every vector of a multiplet up to the block size (8 here)."""
    values = np.exp(-np.arange(200) ** 0.6)
    at, size = {"top": (0, 4), "cut": (8, 4), "below the cut": (12, 4), "plus and minus": (3, 4),
                "eight across the cut": (5, 8)}[where]
    values[at:at + size] = values[at]
    if where == "plus and minus":
        values[at + 1] *= -1
    else:
        values = alternating(values)
    a = with_spectrum(rng, values)
    assert takes_the_krylov_path(a, 10)
    w, v = run(a, 10, "krylov")
    np.testing.assert_allclose(np.sort(w), np.sort(largest(a, 10)[0]), rtol=0, atol=1e-14)
    np.testing.assert_allclose(a @ v, v * w, rtol=0, atol=1e-13)


def test_the_same_bits_every_run_and_at_every_width(rng, krylov_from_128):
    a = with_spectrum(rng, decaying(200))
    first = run(a, 10, "krylov")
    for _ in range(2):
        assert all(np.array_equal(x, y) for x, y in zip(first, run(a, 10, "krylov")))
    wide = tf.CpuEngine(tf.Pool.builder().threads(2).build())
    assert all(np.array_equal(x, y) for x, y in zip(first, run(a, 10, "krylov", wide)))


@pytest.mark.parametrize("n, k", [(100, 5), (200, 40), (12, 11)])
def test_small_or_wide_cuts_fall_back_to_the_full_eigh(rng, krylov_from_128, n, k):
    """Below KRYLOV_FROM rows or above KRYLOV_UP_TO of them the full eigh is faster: the same bits."""
    a = with_spectrum(rng, decaying(n))
    for x, y in zip(run(a, k, "krylov"), run(a, k, "full")):
        assert np.array_equal(x, y)


def test_no_convergence_within_the_budget_falls_back_to_the_full_eigh(rng, krylov_from_128, monkeypatch):
    a = with_spectrum(rng, decaying(200))
    monkeypatch.setattr(krylov_eigh, "TOLERANCE", 1e-30)  # below rounding: never met
    assert krylov_eigh._krylov(a, 10, krylov_eigh.TOLERANCE) is None
    for x, y in zip(run(a, 10, "krylov"), run(a, 10, "full")):
        assert np.array_equal(x, y)


# --- derivatives ----------------------------------------------------------------------------------


def reconstruction(k, method, derivative_eps=None):
    """V diag(w) Vᴴ of the kept pairs: gauge invariant, and sensitive to the discarded subspace."""
    def f(s, a):
        w, v = s.eigh(a, derivative_eps=derivative_eps, k=k, method=method)
        return s.einsum([v, s.complex(w, s.zeros(w.shape, w.dtype)) if v.dtype.kind == "c" else w, s.conj(v)],
                        "ai,i,bi->ab")

    return f


def projector_and_values(k, method):
    """⟨W, V Vᴴ⟩ + Σ w², for a fixed W."""
    def f(s, a):
        w, v = s.eigh(a, k=k, method=method)
        weight = np.cos(np.arange(a.shape[0] ** 2)).reshape(a.shape)
        p = s.einsum([v, s.conj(v)], "ai,bi->ab")
        return s.add(s.real(s.einsum([tf.Tensor(weight.astype(p.dtype)), p], "ab,ab->")), s.reduce_sum(s.mul(w, w)))

    return f


@pytest.mark.parametrize("dtype", [float, complex], ids=["real", "complex"])
@pytest.mark.parametrize("loss", [reconstruction, projector_and_values], ids=lambda f: f.__name__)
def test_check_grads_to_order_2(rng, krylov_from_128, loss, dtype):
    a = with_spectrum(rng, separated(160), dtype)
    assert takes_the_krylov_path(a, 8)
    check_grads(loss(8, "krylov"), [a], order=2)


@pytest.mark.parametrize("dtype", [float, complex], ids=["real", "complex"])
def test_check_grads_to_order_2_through_the_broadened_solve(rng, krylov_from_128, dtype):
    """derivative_eps = 5e-9 puts the kept |λ| below 0.45 on the broadened solve ((λ − H)² + η², whose
    r(δ) differs from 1/δ by more than rounding there) and the others on the plain one."""
    a = with_spectrum(rng, separated(160), dtype)
    assert takes_the_krylov_path(a, 8)
    squared = krylov_eigh.squared_columns(largest(a, 8)[0], 5e-9)
    assert any(squared) and not all(squared)

    check_grads(reconstruction(8, "krylov", derivative_eps=5e-9), [a], order=2)


@pytest.mark.parametrize("dtype", [float, complex], ids=["real", "complex"])
def test_derivatives_are_the_full_eighs_of_the_same_truncated_loss(rng, krylov_from_128, dtype):
    """The discarded subspace's share is in: the same JVP, VJP and second derivative as slicing the
    full eigh."""
    a = with_spectrum(rng, separated(200), dtype)
    w, d = rng.standard_normal((200, 200)), rng.standard_normal((200, 200))
    results = {method: derivatives(reconstruction(12, method), a, w, d) for method in ("full", "krylov")}
    for full, fast in zip(results["full"], results["krylov"]):
        np.testing.assert_allclose(fast, full, rtol=0, atol=1e-10 * np.abs(full).max())


@pytest.mark.parametrize("dtype", [float, complex], ids=["real", "complex"])
def test_an_exact_multiplet_among_the_kept_gets_the_full_eighs_derivative(rng, krylov_from_128, dtype):
    """An exact triplet inside the kept space (each method picks its own basis of it): along a
    direction that keeps it a triplet, the JVP and the VJP of V diag(w) Vᴴ are the full eigh's.
    (With ε = 1e-8: the broadened 1/δ's slope 1/ε² at the triplet's rounding-level splitting δ
    makes either method's derivative move by about (u/ε)² relative, 5e-8 at ε = 1e-12.)"""
    values = separated(200)
    values[3:6] = values[3]
    q = unitary(rng, 200, dtype)
    a = (q * values) @ q.conj().T
    a = (a + a.conj().T) * 0.5
    assert takes_the_krylov_path(a, 12)
    m = rng.standard_normal((200, 200)) + (1j * rng.standard_normal((200, 200)) if dtype == complex else 0)
    m[3:6, 3:6] = 0.7 * np.eye(3)  # the triplet moves as one
    direction = q @ ((m + m.conj().T) * 0.5) @ q.conj().T
    weight = rng.standard_normal((200, 200)).astype(a.dtype)
    results = {}
    for method in ("full", "krylov"):
        rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
        x = rt.variable_from(tf.Tensor(a))
        y = rt.with_eager_session(eng, lambda s: reconstruction(12, method, derivative_eps=1e-8)(s, x))
        gradient = rt.vjp(eng, y, x, tf.Tensor(weight)).value().to_numpy()
        results[method] = [rt.jvp(eng, y, x, tf.Tensor(direction)).value().to_numpy(),
                           np.real(np.sum(np.conj(gradient) * direction))]
    (jvp_full, vjp_full), (jvp_fast, vjp_fast) = results["full"], results["krylov"]
    np.testing.assert_allclose(jvp_fast, jvp_full, rtol=0, atol=1e-10 * np.abs(jvp_full).max())
    assert abs(vjp_fast - vjp_full) <= 1e-10 * abs(vjp_full)


def hadamard_problem(rng, smallest, k, dtype):
    """(H, Q, λ) with H = Q diag(λ) Qᴴ exactly in floating point: Q a Hadamard matrix / 16 (times
    phases i^m for a complex one), λ multiples of 2⁻⁴⁵ below 1, so that every sum in the product is
    exact. Kept |λ| from 1 down to ``smallest`` (geometric, indefinite), the discarded ones from
    0.45·smallest down (geometric)."""
    n = 256
    q = scipy.linalg.hadamard(n) / 16.0
    if dtype == complex:
        q = q * (1j ** rng.integers(0, 4, n))[:, None]
    values = alternating(np.concatenate([np.geomspace(1.0, smallest, k), 0.45 * smallest * 0.6 ** np.arange(n - k)]))
    values = np.round(values * 2.0 ** 45) / 2.0 ** 45
    h = (q * values) @ q.conj().T
    assert np.array_equal(h, h.conj().T)
    return h, q, values


def exact_derivatives(q, values, k, weight, direction, eps=1e-12):
    """The JVP along D and the VJP of W of V diag(w) Vᴴ from the exact Q and λ, by the eigh rule:
    Q (F ∘ Qᴴ herm(X) Q) Qᴴ, with r(δ) = δ/(δ² + ε²) the rule's broadened reciprocal (|λ₁| = 1) and
    F_ab = δ_ab [b kept] + [b kept] λ_b r(λ_b − λ_a) + [a kept] λ_a r(λ_a − λ_b)."""
    gap = values[None, :] - values[:, None]
    r = gap / (gap * gap + eps * eps)
    kept = np.arange(len(values)) < k
    f = np.where(kept[None, :], values[None, :] * r, 0.0) - np.where(kept[:, None], values[:, None] * r, 0.0)
    np.fill_diagonal(f, kept)

    def apply(x):
        x = q.conj().T @ x @ q
        return q @ (f * (x + x.conj().T) * 0.5) @ q.conj().T

    return apply(direction), apply(weight)


@pytest.mark.parametrize("dtype", [float, complex], ids=["real", "complex"])
@pytest.mark.parametrize("smallest", [1e-4, 1e-6, 1e-10])
def test_small_kept_eigenvalues_keep_their_accuracy(rng, krylov_from_128, smallest, dtype):
    """Kept |λ| down to 1e-10·|λ₁|: the JVP and VJP of V diag(w) Vᴴ against the exact ones (of the rule
    broadened with ε = 1e-12, from the exact eigenpairs). Rounding of H alone (backward error
    u·|λ₁|) moves them by about u·|λ₁|/|λ_k| relative, which the full eigh's reach too (0.4–1.5 of
    it, measured); the Krylov pairs' residual tolerance, 13u·|λ₁|, alone would cost 2–5 of it
    (their Newton step removes that), and a solve that squared H, as (λ² − H²) does, u·|λ₁|²/|λ_k|²."""
    k = 12
    h, q, values = hadamard_problem(rng, smallest, k, dtype)
    assert takes_the_krylov_path(h, k)
    weight, direction = (with_spectrum(rng, rng.standard_normal(256), dtype) for _ in range(2))
    jvp_exact, vjp_exact = exact_derivatives(q, values, k, weight, direction)
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor(h))
    y = rt.with_eager_session(eng, lambda s: reconstruction(k, "krylov")(s, x))
    jvp = rt.jvp(eng, y, x, tf.Tensor(direction)).value().to_numpy()
    vjp = rt.vjp(eng, y, x, tf.Tensor(weight)).value().to_numpy()
    bound = 2 * np.finfo(float).eps / smallest
    np.testing.assert_allclose(jvp, jvp_exact, rtol=0, atol=bound * np.abs(jvp_exact).max())
    np.testing.assert_allclose(vjp, vjp_exact, rtol=0, atol=bound * np.abs(vjp_exact).max())


@pytest.mark.parametrize("scale", [1e-300, 1e300, 0.0], ids=["tiny", "huge", "zero"])
def test_any_scale(rng, krylov_from_128, scale):
    """At 1e±300 the truncated eigh iterates on h/c (c a power of two) and solves on rescaled values:
    the full eigh's value and gradient (which the scale leaves unchanged), finite and without
    overflow or NaN on the way; at 0 (the fallback) the gradient is finite."""
    unit = with_spectrum(rng, separated(200))
    assert takes_the_krylov_path(unit, 12)
    a = scale * unit
    w = rng.standard_normal((200, 200))
    results = {}
    for method in ("full", "krylov"):
        rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
        x = rt.variable_from(tf.Tensor(a))
        with np.errstate(over="raise", divide="raise", invalid="raise"):
            y = rt.with_eager_session(eng, lambda s: s.einsum([tf.Tensor(w), reconstruction(12, method)(s, x)],
                                                               "ab,ab->"))
            results[method] = y.value().item(), rt.grad(eng, y, x).value().to_numpy()
    (value_full, grad_full), (value_fast, grad_fast) = results["full"], results["krylov"]
    assert np.isfinite(grad_fast).all()
    if scale:
        assert abs(value_fast - value_full) <= 1e-12 * abs(value_full)
        np.testing.assert_allclose(grad_fast, grad_full, rtol=0, atol=1e-10 * np.abs(grad_full).max())


def test_float32_follows_its_rounding(rng, krylov_from_128):
    """The tolerances scale with the dtype's rounding: float32 takes the Krylov path too, and gives
    the full eigh's value and gradient to float32's accuracy."""
    a = with_spectrum(rng, separated(200)).astype(np.float32)
    assert takes_the_krylov_path(a, 10)
    weight = rng.standard_normal((200, 200)).astype(np.float32)
    results = {}
    for method in ("full", "krylov"):
        rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
        x = rt.variable_from(tf.Tensor(a))
        y = rt.with_eager_session(eng, lambda s: s.einsum([tf.Tensor(weight), reconstruction(10, method)(s, x)],
                                                           "ab,ab->"))
        results[method] = y.value().item(), rt.grad(eng, y, x).value().to_numpy()
    (value_full, grad_full), (value_fast, grad_fast) = results["full"], results["krylov"]
    assert grad_fast.dtype == np.float32
    assert abs(value_fast - value_full) <= 1e-5 * abs(value_full)
    np.testing.assert_allclose(grad_fast, grad_full, rtol=0, atol=1e-4 * np.abs(grad_full).max())


# --- errors ---------------------------------------------------------------------------------------


def test_a_solve_that_does_not_converge_is_a_clear_error(rng, krylov_from_128, monkeypatch):
    monkeypatch.setattr(krylov_eigh, "SOLVE_STEPS", 1)
    a = with_spectrum(rng, decaying(200))
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: reconstruction(10, "krylov")(s, x))
    with pytest.raises(tf.LinalgError, match=r"^eigh: expected the discarded subspace's solve to reach a relative "
                                             r"residual of 1e-13 in 1 steps, got"):
        rt.vjp(eng, y, x, tf.Tensor(rng.standard_normal((200, 200))))


@pytest.mark.parametrize("call, cls, message", [
    (lambda s, x: s.eigh(x, k=0, method="krylov"), tf.InvalidArgument, "k in [1, 5]"),
    (lambda s, x: s.eigh(x, k=6), tf.InvalidArgument, "k in [1, 5]"),
    (lambda s, x: s.eigh(x, k=2.0), tf.InvalidArgument, "k: an int"),
    (lambda s, x: s.eigh(x, k=True), tf.InvalidArgument, "k: an int"),
    (lambda s, x: s.eigh(x, method="lanczos"), tf.InvalidArgument, "method 'full' or 'krylov'"),
    (lambda s, x: s.eigh(x, method="krylov"), tf.InvalidArgument, "k (the number of eigenpairs"),
    (lambda s, x: s.eigh(x, k=2, derivative_eps=2.0), tf.InvalidArgument, "derivative_eps"),
    (lambda s, x: s.eigh(s.reshape(x, (1, 5, 5)), k=2), tf.ShapeMismatch, "a matrix (rank 2) for a truncated eigh"),
    (lambda s, x: s.eigh(s.reshape(x, (25, 1)), k=1, method="krylov"), tf.ShapeMismatch, "a square matrix"),
])
def test_errors(call, cls, message):
    rt = tf.EagerRuntime()
    with pytest.raises(cls) as info:
        rt.with_eager_session(tf.CpuEngine.serial(), lambda s: call(s, s.constant_from(tf.Tensor(np.ones((5, 5))))))
    assert str(info.value).startswith("eigh: expected") and message in str(info.value)


def test_inf_or_nan_is_a_clear_error(krylov_from_128):
    a = np.eye(200)
    a[3, 4] = np.nan
    with pytest.raises(tf.LinalgError, match="^eigh: expected a matrix of finite entries"):
        run(a, 5, "krylov")
