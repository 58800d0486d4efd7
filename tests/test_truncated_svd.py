"""The truncated SVD by a block Krylov method (svd(x, k=k, method="krylov")): its triplets against
LAPACK's, its determinism, its fallback, its exact derivatives (check_grads to order 2, real and
complex; against the full SVD's derivative of the same truncated loss, on TRG too) and its errors."""

import numpy as np
import pytest
from conftest import derivatives

import tenferro_py as tf
from tenferro_py import krylov
from tenferro_py.models import trg
from tenferro_py.testing import check_grads


def with_spectrum(rng, m, n, values, dtype=float):
    def unitary(size):
        x = rng.standard_normal((size, size)) + (1j * rng.standard_normal((size, size)) if dtype == complex else 0)
        return np.linalg.qr(x)[0]

    k = len(values)
    return unitary(m)[:, :k] @ np.diag(values) @ unitary(n)[:, :k].conj().T


def decaying(n, multiplet_at=None, size=1):
    """A TRG-like decaying spectrum, with a multiplet of ``size`` equal values from index ``multiplet_at``."""
    values = np.exp(-np.arange(n) ** 0.7)
    if multiplet_at is not None:
        values[multiplet_at:multiplet_at + size] = values[multiplet_at]
    return np.sort(values)[::-1]


def geometric(n):
    """Values down to ~1e-6 of the largest, none at rounding level: the full SVD's own second
    derivative is accurate there (with values at rounding level it is noise: see docs/truncated.md)."""
    return np.exp(-0.08 * np.arange(n))


def run(a, k, method):
    rt = tf.EagerRuntime()
    out = rt.with_eager_session(tf.CpuEngine.serial(), lambda s: s.svd(rt.constant_from(tf.Tensor(a)), k=k,
                                                                        method=method))
    return [x.value().to_numpy() for x in out]


SHAPES = [(200, 160), (160, 200), (180, 180)]


@pytest.mark.parametrize("dtype", [float, complex], ids=["real", "complex"])
@pytest.mark.parametrize("shape", SHAPES)
def test_triplets_are_lapacks(rng, shape, dtype):
    m, n = shape
    a = with_spectrum(rng, m, n, decaying(min(m, n)), dtype)
    k = 10
    assert krylov._krylov(a, k, krylov.TOLERANCE) is not None  # the Krylov path, not the fallback
    u, s, vt = run(a, k, "krylov")
    full = np.linalg.svd(a, compute_uv=False)
    np.testing.assert_allclose(s, full[:k], rtol=0, atol=1e-14 * full[0])
    np.testing.assert_allclose(u.conj().T @ u, np.eye(k), atol=1e-13)
    np.testing.assert_allclose(vt @ vt.conj().T, np.eye(k), atol=1e-13)
    np.testing.assert_allclose(a @ vt.conj().T, u * s, atol=1e-13 * full[0])
    np.testing.assert_allclose(a.conj().T @ u, vt.conj().T * s, atol=1e-12 * full[0])


@pytest.mark.parametrize("where", ["top", "cut", "across the cut"])
def test_exact_multiplets_are_found(rng, where):
    """A single-vector Krylov method sees one vector per distinct value; the block one sees them all."""
    at = {"top": 0, "cut": 8, "across the cut": 9}[where]
    values = decaying(160, at, 4)
    a = with_spectrum(rng, 180, 160, values)
    u, s, vt = run(a, 12, "krylov")
    np.testing.assert_allclose(s, values[:12], rtol=0, atol=1e-14)


def test_the_same_bits_every_run_and_at_every_width(rng):
    a = with_spectrum(rng, 180, 160, decaying(160))
    first = run(a, 10, "krylov")
    for _ in range(2):
        assert all(np.array_equal(x, y) for x, y in zip(first, run(a, 10, "krylov")))
    rt = tf.EagerRuntime()
    wide = tf.CpuEngine(tf.Pool.builder().threads(2).build())
    out = rt.with_eager_session(wide, lambda s: s.svd(rt.constant_from(tf.Tensor(a)), k=10, method="krylov"))
    assert all(np.array_equal(x.value().to_numpy(), y) for x, y in zip(out, first))


@pytest.mark.parametrize("shape, k", [((40, 30), 4), ((200, 160), 60), ((12, 12), 5)])
def test_small_or_wide_cuts_fall_back_to_the_full_svd(rng, shape, k):
    """Below KRYLOV_FROM rows or above KRYLOV_UP_TO of them the full SVD is faster: the same numbers."""
    a = with_spectrum(rng, *shape, decaying(min(shape)))
    for x, y in zip(run(a, k, "krylov"), run(a, k, "full")):
        np.testing.assert_allclose(x, y, atol=1e-14)


# --- derivatives ----------------------------------------------------------------------------------


def sqrt_reconstruction(k, method):
    def f(s, a):
        u, sv, vt = s.svd(a, k=k, method=method)
        root = s.sqrt(sv)
        root = s.complex(root, s.zeros(root.shape, root.dtype)) if u.dtype.kind == "c" else root
        return s.einsum([u, root, vt], "ai,i,ib->ab")

    return f


def projector_and_values(k, method):
    def f(s, a):
        u, sv, vt = s.svd(a, k=k, method=method)
        p = s.einsum([u, s.conj(u)], "ai,bi->ab")
        return s.add(s.real(s.einsum([p], "aa->")), s.reduce_sum(s.mul(sv, sv)))

    return f


@pytest.mark.parametrize("dtype", [float, complex], ids=["real", "complex"])
@pytest.mark.parametrize("loss", [sqrt_reconstruction, projector_and_values], ids=lambda f: f.__name__)
def test_check_grads_to_order_2(rng, loss, dtype):
    a = with_spectrum(rng, 150, 130, geometric(130), dtype)
    check_grads(loss(6, "krylov"), [a], order=2)


@pytest.mark.parametrize("dtype", [float, complex], ids=["real", "complex"])
def test_derivatives_are_the_full_svds_of_the_same_truncated_loss(rng, dtype):
    """The discarded subspace's contribution is in: the same JVP, VJP and second derivative as
    slicing the full SVD."""
    a = with_spectrum(rng, 200, 170, geometric(170), dtype)
    w, d = rng.standard_normal((200, 170)), rng.standard_normal((200, 170))
    results = {method: derivatives(sqrt_reconstruction(12, method), a, w, d) for method in ("full", "krylov")}
    for full, fast in zip(results["full"], results["krylov"]):
        np.testing.assert_allclose(fast, full, rtol=0, atol=1e-10 * np.abs(full).max())


@pytest.mark.parametrize("scale", [1e-300, 1e300, 0.0], ids=["tiny", "huge", "zero"])
def test_any_scale(rng, scale):
    """At 1e±300 the truncated SVD works on A/c (c a power of two) and its solve on rescaled
    values: the same value and gradient as the full SVD's (which the scale leaves unchanged),
    finite and without overflow or NaN on the way; at A = 0 (all k triplets, by the fallback) the
    gradient is finite."""
    a = scale * with_spectrum(rng, 200, 170, geometric(170))
    w = rng.standard_normal((200, 170))
    results = {}
    for method in ("full", "krylov"):
        rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
        x = rt.variable_from(tf.Tensor(a))
        with np.errstate(over="raise", divide="raise", invalid="raise"):
            y = rt.with_eager_session(eng, lambda s: s.einsum([tf.Tensor(w), *s.svd(x, k=12, method=method)],
                                                               "ab,ai,i,ib->"))
            results[method] = y.value().item(), rt.grad(eng, y, x).value().to_numpy()
    (value_full, grad_full), (value_fast, grad_fast) = results["full"], results["krylov"]
    assert np.isfinite(grad_fast).all()
    if scale:
        assert abs(value_fast - value_full) <= 1e-12 * abs(value_full)
        np.testing.assert_allclose(grad_fast, grad_full, rtol=0, atol=1e-10 * np.abs(grad_full).max())


def test_trg_numbers_agree_with_the_full_svd():
    """χ = 16, 20 steps (the Krylov path from the 256 × 256 steps on): lnZ/N to 1e-12, u to 1e-10,
    c_ad to 1e-8, as docs/truncated.md promises."""
    ks = trg.schedule(16, 20)
    for beta in (0.3, 0.5):
        full = trg.value_grad_and_curvature(beta, ks)
        fast = trg.value_grad_and_curvature(beta, ks, svd="krylov")
        assert abs(fast[0] - full[0]) < 1e-12
        assert abs(fast[1] - full[1]) < 1e-10
        assert abs(beta * beta * (fast[2] - full[2])) < 1e-8


# --- errors ---------------------------------------------------------------------------------------


def test_a_solve_that_does_not_converge_is_a_clear_error(rng, monkeypatch):
    monkeypatch.setattr(krylov, "SOLVE_STEPS", 1)
    a = with_spectrum(rng, 180, 160, decaying(160))
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: sqrt_reconstruction(10, "krylov")(s, x))
    with pytest.raises(tf.LinalgError, match=r"^svd: expected the discarded subspace's solve to reach a relative "
                                             r"residual of 1e-13 in 1 steps, got"):
        rt.vjp(eng, y, x, tf.Tensor(rng.standard_normal((180, 160))))


@pytest.mark.parametrize("call, cls, message", [
    (lambda s, x: s.svd(x, k=-1, method="krylov"), tf.InvalidArgument, "k in [0, 5]"),
    (lambda s, x: s.svd(x, k=6), tf.InvalidArgument, "k in [0, 5]"),
    (lambda s, x: s.svd(x, k=2.0), tf.InvalidArgument, "k: an int"),
    (lambda s, x: s.svd(x, method="lanczos"), tf.InvalidArgument, "method 'full' or 'krylov'"),
    (lambda s, x: s.svd(x, method="krylov"), tf.InvalidArgument, "k (the number of leading triplets)"),
    (lambda s, x: s.svd(s.reshape(x, (1, 6, 5)), k=2), tf.ShapeMismatch, "a matrix (rank 2) for a truncated SVD"),
])
def test_errors(call, cls, message):
    rt = tf.EagerRuntime()
    with pytest.raises(cls) as info:
        rt.with_eager_session(tf.CpuEngine.serial(), lambda s: call(s, s.constant_from(tf.Tensor(np.ones((6, 5))))))
    assert str(info.value).startswith("svd: expected") and message in str(info.value)
