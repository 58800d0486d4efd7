"""eigh: forward against LAPACK, gauge-invariant losses by check_grads (order 2), the
symmetric-part semantics, repeated eigenvalues, derivative_eps, values of known
gradients, and errors.
"""

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py import SliceConfig
from tenferro_py.linalg import eigh_p
from tenferro_py.testing import check_grads

# These tests characterise the rules along directions that split repeated values and at cuts
# inside multiplets, where the rules warn; tests/test_split.py tests the warnings themselves.
pytestmark = pytest.mark.filterwarnings("ignore::tenferro_py.DegenerateDerivativeWarning")

SIZES = [2, 3, 5]


def orthogonal(rng, n):
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.sign(np.diag(r))


def with_spectrum(rng, w):
    """Q diag(w) Qᵀ with a random orthogonal Q, exactly symmetric."""
    q = orthogonal(rng, len(w))
    a = q @ np.diag(w) @ q.T
    return (a + a.T) / 2


def separated(rng, n, gap=0.3):
    """A symmetric matrix whose eigenvalues are >= gap apart."""
    return with_spectrum(rng, np.cumsum(gap + rng.random(n)) - n / 2)


# --- gauge-invariant losses: f(session, a) --------------------------------------------


def eigenvalues(s, a):
    return s.eigh(a)[0]


def sum_w2(s, a):
    w = s.eigh(a)[0]
    return s.reduce_sum(s.mul(w, w))


def reconstruction(s, a):
    """V diag(w) Vᵀ: the symmetric part of a."""
    w, v = s.eigh(a)
    return s.einsum([v, w, v], "ai,i,bi->ab")


def matrix_exp(s, a):
    """V exp(w) Vᵀ."""
    w, v = s.eigh(a)
    return s.einsum([v, s.exp(w), v], "ai,i,bi->ab")


def top_projector(k):
    """The projector onto the eigenvectors of the k largest eigenvalues (the last k columns)."""

    def f(s, a):
        w, v = s.eigh(a)
        n = w.shape[0]
        vk = s.slice(v, SliceConfig([0, n - k], [n, n]))
        return s.einsum([vk, vk], "ak,bk->ab")

    f.__name__ = f"top_projector({k})"
    return f


LOSSES = [eigenvalues, sum_w2, reconstruction, matrix_exp, top_projector(1)]


# --- forward ------------------------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
def test_forward_is_lapack_eigh(rt, run, rng, n):
    a = separated(rng, n)
    w, v = run(lambda s: s.eigh(rt.variable_from(tf.Tensor(a))))
    assert (w.shape, v.shape) == ((n,), (n, n))
    w_ref, v_ref = np.linalg.eigh(a)
    W, V = w.value().to_numpy(), v.value().to_numpy()
    np.testing.assert_array_equal(W, w_ref)  # a symmetric input is passed to LAPACK unchanged
    np.testing.assert_array_equal(V, v_ref)
    assert np.all(np.diff(W) > 0)
    np.testing.assert_allclose(V @ np.diag(W) @ V.T, a, atol=1e-13)
    np.testing.assert_allclose(V.T @ V, np.eye(n), atol=1e-13)


def test_forward_reads_the_symmetric_part(run, rng):
    a = rng.standard_normal((4, 4))
    w, _ = run(lambda s: s.eigh(tf.Tensor(a)))
    np.testing.assert_array_equal(w.value().to_numpy(), np.linalg.eigh((a + a.T) / 2)[0])


def test_float32(run, rng):
    w, v = run(lambda s: s.eigh(tf.Tensor(separated(rng, 3).astype(np.float32))))
    assert w.dtype == v.dtype == np.float32


def test_cost_is_cubic():
    aval = tf.tensor.Aval((10, 10), np.dtype(np.float64))
    assert eigh_p.flops((aval,), eigh_p.abstract(aval, derivative_eps=None), {}) == 9000.0


# --- derivatives, separated spectra -------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("loss", LOSSES, ids=lambda f: f.__name__)
def test_grads_gauge_invariant(rng, n, loss):
    check_grads(loss, [separated(rng, n)], modes=("fwd", "rev"), order=2)


@pytest.mark.parametrize("n", [3, 5])
def test_grads_projectors(rng, n):
    for k in range(2, n):
        check_grads(top_projector(k), [separated(rng, n)], modes=("fwd", "rev"), order=2)


@pytest.mark.parametrize("n", [3, 4])
def test_grads_of_a_nonsymmetric_input_are_those_of_its_symmetric_part(rng, n):
    """Directions off the symmetric matrices: the op is eigh((A + Aᵀ)/2), smooth in all of A."""
    a = rng.standard_normal((n, n))
    for loss in (eigenvalues, matrix_exp, top_projector(1)):
        check_grads(loss, [a], modes=("fwd", "rev"), order=2)


def test_gradient_values(rt, eng, rng):
    """d(Σ w²)/dA = 2A, d(w_max)/dA = v vᵀ; the VJP is symmetric."""
    a = separated(rng, 4)
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: sum_w2(s, x))
    np.testing.assert_allclose(rt.grad(eng, y, x).value().to_numpy(), 2 * a, atol=1e-13)
    top = rt.with_eager_session(eng, lambda s: s.slice(s.eigh(x)[0], SliceConfig([3], [4])))
    v = np.linalg.eigh(a)[1][:, 3]
    g = rt.vjp(eng, top, x, tf.Tensor(np.ones(1))).value().to_numpy()
    np.testing.assert_allclose(g, np.outer(v, v), atol=1e-14)
    y = rt.with_eager_session(eng, lambda s: matrix_exp(s, x))
    g = rt.vjp(eng, y, x, tf.Tensor(rng.standard_normal((4, 4)))).value().to_numpy()
    np.testing.assert_allclose(g, g.T, rtol=0, atol=1e-15)


# --- repeated eigenvalues -----------------------------------------------------------------

REPEATED = [1.0, 2.0, 2.0, 3.0]


def _finite_derivatives(f, a, rng):
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: f(s, x))
    g = rt.vjp(eng, y, x, tf.Tensor(rng.standard_normal(y.shape))).value().to_numpy()
    t = rt.jvp(eng, y, x, tf.Tensor(rng.standard_normal(a.shape))).value().to_numpy()
    assert np.all(np.isfinite(g)) and np.all(np.isfinite(t)), f.__name__


@pytest.mark.parametrize("f", [*LOSSES, top_projector(2), top_projector(3)], ids=lambda f: f.__name__)
def test_repeated_eigenvalues_finite(rng, f):
    """Also where the result is ill-defined (top_projector(2) splits the pair): finite, not NaN."""
    _finite_derivatives(f, with_spectrum(rng, REPEATED), rng)


@pytest.mark.parametrize("f", [sum_w2, top_projector(1)], ids=lambda f: f.__name__)
def test_repeated_eigenvalues_smooth_losses_match_differences(rng, f):
    """Losses smooth at the degeneracy: a spectral sum, a projector leaving the pair out."""
    check_grads(f, [with_spectrum(rng, REPEATED)], modes=("fwd", "rev"), order=1)


@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_repeated_eigenvalues_inside_the_kept_block(rng, mode):
    """A projector keeping the pair: right to ~1e-8 only. Rotations inside the pair cancel
    in exact arithmetic, but come as terms F·P with F ≈ d/ε² ~ 1e8 (d the rounding-level
    split of the pair), so the JVP and VJP are each right to ~1e8 · 1e-16."""
    check_grads(top_projector(3), [with_spectrum(rng, REPEATED)], modes=(mode,), order=1)


def test_repeated_eigenvalues_gradient_value(rt, eng, rng):
    a = with_spectrum(rng, REPEATED)
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: sum_w2(s, x))
    np.testing.assert_allclose(rt.grad(eng, y, x).value().to_numpy(), 2 * a, atol=1e-13)


# --- derivative_eps -----------------------------------------------------------------------


def _projector_derivatives(ctx, a, w, v, per_call=None):
    """(VJP for cotangent w, JVP along v) of the projector onto the top 2 eigenvectors."""
    rt, eng = tf.EagerRuntime.with_ad_context(ctx), tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor(a))

    def f(s):
        vecs = s.eigh(x, derivative_eps=per_call)[1]
        vk = s.slice(vecs, SliceConfig([0, 2], [4, 4]))
        return s.einsum([vk, vk], "ak,bk->ab")

    y = rt.with_eager_session(eng, f)
    return rt.vjp(eng, y, x, tf.Tensor(w)).value().to_numpy(), rt.jvp(eng, y, x, tf.Tensor(v)).value().to_numpy()


def _eps_context(eps):
    return tf.AdContext.builder().with_semantic_extension_rules(
        tf.linalg.semantic_ad_rules().merge(tf.einsum.semantic_ad_rules())
    ).with_derivative_eps(eps).build()


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def test_derivative_eps_broadens_a_near_degenerate_cut(rng):
    """The cut between w₂ and w₃ = w₂ + δ: with u = δ/max|w|, the broadened 1/δ is
    (1/max|w|)·u/(u² + ε²), so the ~1/δ derivative shrinks by ε²/(u² + ε²) (½ for ε = u), while
    ε = 1e-12 leaves it exact to ~1e-7."""
    delta = 1e-8
    a = with_spectrum(rng, [1.0, 2.0, 2.0 + delta, 3.0])
    values = np.linalg.eigh(a)[0]
    u = np.diff(values)[1] / np.abs(values).max()
    eps = float(u)
    w, v = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    g0, t0 = _projector_derivatives(tf.AdContext(), a, w, v)
    g8, t8 = _projector_derivatives(_eps_context(eps), a, w, v)
    expected = eps**2 / (u * u + eps**2)
    assert abs(expected - 0.5) < 1e-12
    assert abs(_rel(g8, g0) - expected) < 1e-3
    assert abs(_rel(t8, t0) - expected) < 1e-3
    g8c, t8c = _projector_derivatives(tf.AdContext(), a, w, v, per_call=eps)  # per call = context
    np.testing.assert_array_equal(g8c, g8)
    np.testing.assert_array_equal(t8c, t8)
    g12, t12 = _projector_derivatives(_eps_context(eps), a, w, v, per_call=1e-12)  # per call wins
    np.testing.assert_array_equal(g12, g0)
    np.testing.assert_array_equal(t12, t0)


# --- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 4), (4,), (2, 2, 3), ()])  # (2, 2, 3): a stack of non-square ones
def test_not_a_square_matrix(run, shape):
    with pytest.raises(tf.ShapeMismatch, match=r"^eigh: expected a square matrix"):
        run(lambda s: s.eigh(tf.Tensor(np.ones(shape))))


@pytest.mark.parametrize("eps", [0.0, -1e-12, float("nan"), "1e-12", True, 1e-200, 1e-19, 2.0])
def test_bad_derivative_eps(run, eps):
    with pytest.raises(tf.InvalidArgument, match=r"^eigh: expected derivative_eps"):
        run(lambda s: s.eigh(tf.Tensor(np.eye(2)), derivative_eps=eps))
