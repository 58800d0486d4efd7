"""SVD: forward against LAPACK/NumPy, gauge-invariant losses by check_grads,
degenerate spectra (repeated and zero singular values), derivative_eps, and the
truncated (sliced) VJP against the same loss written densely with a 0/1 mask.
"""

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py import SliceConfig
from tenferro_py.testing import check_grads

# These tests characterise the rules along directions that split repeated values and at cuts
# inside multiplets, where the rules warn; tests/test_split.py tests the warnings themselves.
pytestmark = pytest.mark.filterwarnings("ignore::tenferro_py.DegenerateDerivativeWarning")

SHAPES = [(3, 3), (4, 4), (5, 3), (4, 2), (3, 5), (2, 4)]  # square, tall, wide


def well_separated(rng, shape, gap=0.2):
    """A Gaussian matrix whose singular values are >= gap apart and >= gap."""
    while True:
        a = rng.standard_normal(shape)
        sv = np.linalg.svd(a, compute_uv=False)
        if sv[-1] >= gap and np.all(-np.diff(sv) >= gap):
            return a


def orthogonal(rng, n):
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.sign(np.diag(r))


def with_spectrum(rng, m, n, sv):
    """Q1[:, :K] diag(sv) Q2[:, :K]ᵀ with random orthogonal Q's."""
    k = len(sv)
    return orthogonal(rng, m)[:, :k] @ np.diag(sv) @ orthogonal(rng, n)[:, :k].T


def leading(s, x, axis, k):
    """The first k entries of x along axis, by a slice."""
    limits = list(x.shape)
    limits[axis] = k
    return s.slice(x, SliceConfig([0] * x.ndim, limits))


# --- gauge-invariant losses: f(session, a) -------------------------------------


def singular_values(s, a):
    return s.svd(a)[1]


def sum_s(s, a):
    return s.reduce_sum(s.svd(a)[1])


def sum_s2(s, a):
    sv = s.svd(a)[1]
    return s.reduce_sum(s.mul(sv, sv))


def frobenius(s, a):
    sv = s.svd(a)[1]
    return s.sqrt(s.reduce_sum(s.mul(sv, sv)))


def log_s(s, a):
    return s.log(s.svd(a)[1])


def reconstruction(s, a):
    u, sv, vt = s.svd(a)
    return s.einsum([u, sv, vt], "ai,i,ib->ab")


def sqrt_reconstruction(s, a):
    u, sv, vt = s.svd(a)
    return s.einsum([u, s.sqrt(sv), vt], "ai,i,ib->ab")


def u_projector(k):
    def f(s, a):
        u = s.svd(a)[0]
        uk = s.slice(u, SliceConfig([0, 0], [u.shape[0], k]))
        return s.einsum([uk, uk], "ak,bk->ab")

    return f


def v_projector(k):
    def f(s, a):
        vt = s.svd(a)[2]
        vk = s.slice(vt, SliceConfig([0, 0], [k, vt.shape[1]]))
        return s.einsum([vk, vk], "ka,kb->ab")

    return f


def truncated_reconstruction(k):
    """U_k S_k V_kᵀ, the best rank-k approximation."""

    def f(s, a):
        u, sv, vt = s.svd(a)
        return s.einsum([leading(s, u, 1, k), leading(s, sv, 0, k), leading(s, vt, 0, k)], "ai,i,ib->ab")

    return f


def reshape_then_slice(k):
    """As tenferro users write it: reshape the factors to a concrete shape, then slice."""

    def f(s, a):
        u, sv, vt = s.svd(a)
        m, n = a.shape
        kk = min(m, n)
        u = s.reshape(u, [m, kk])
        vt = s.reshape(vt, [kk, n])
        sv = s.reshape(sv, [kk])
        uk = s.slice(u, SliceConfig([0, 0], [m, k]))
        sk = s.sqrt(s.slice(sv, SliceConfig([0], [k])))
        vk = s.slice(vt, SliceConfig([0, 0], [k, n]))
        left = s.einsum([uk, sk], "ai,i->ai")
        right = s.einsum([sk, vk], "i,ib->ib")
        return s.einsum([left, right], "ai,ib->ab")

    return f


def _ks(shape):
    kk = min(shape)
    return sorted({1, max(1, kk - 1)})


# --- forward -------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_forward_is_thin_svd(rt, run, rng, shape):
    a = rng.standard_normal(shape)
    m, n = shape
    k = min(m, n)
    u, sv, vt = run(lambda s: s.svd(rt.variable_from(tf.Tensor(a))))
    assert (u.shape, sv.shape, vt.shape) == ((m, k), (k,), (k, n))
    U, S, Vt = u.value().to_numpy(), sv.value().to_numpy(), vt.value().to_numpy()
    np.testing.assert_allclose(S, np.linalg.svd(a, compute_uv=False), rtol=1e-13)
    assert np.all(np.diff(S) <= 0)
    np.testing.assert_allclose(U @ np.diag(S) @ Vt, a, atol=1e-13)
    np.testing.assert_allclose(U.T @ U, np.eye(k), atol=1e-13)
    np.testing.assert_allclose(Vt @ Vt.T, np.eye(k), atol=1e-13)


def test_forward_of_constant_is_untracked(rt, run, rng):
    u, sv, vt = run(lambda s: s.svd(rt.constant_from(tf.Tensor(rng.standard_normal((3, 2))))))
    assert not (u.is_tracked or sv.is_tracked or vt.is_tracked)


# --- derivatives of gauge-invariant losses, well-separated spectra ---------------------

BASIC = {
    "s": singular_values,
    "sum_s": sum_s,
    "sum_s2": sum_s2,
    "frobenius": frobenius,
    "log_s": log_s,
    "reconstruction": reconstruction,
    "sqrt_reconstruction": sqrt_reconstruction,
}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("loss", sorted(BASIC))
def test_grads_gauge_invariant(rng, shape, loss):
    a = well_separated(rng, shape)
    check_grads(BASIC[loss], [a], modes=("fwd", "rev"), order=2)


@pytest.mark.parametrize("shape", SHAPES)
def test_grads_projectors(rng, shape):
    a = well_separated(rng, shape)
    for k in _ks(shape):
        check_grads(u_projector(k), [a], modes=("fwd", "rev"), order=2)
        check_grads(v_projector(k), [a], modes=("fwd", "rev"), order=2)


@pytest.mark.parametrize("shape", SHAPES)
def test_grads_truncated_reconstruction(rng, shape):
    a = well_separated(rng, shape)
    for k in _ks(shape):
        check_grads(truncated_reconstruction(k), [a], modes=("fwd", "rev"), order=2)


@pytest.mark.parametrize("shape", SHAPES)
def test_grads_reshape_then_slice(rng, shape):
    a = well_separated(rng, shape)
    for k in _ks(shape):
        check_grads(reshape_then_slice(k), [a], modes=("fwd", "rev"), order=2)


def test_reshape_then_slice_equals_direct_slice(rt, eng, rng):
    a = well_separated(rng, (5, 3))
    x = rt.variable_from(tf.Tensor(a))

    def direct(s, a):
        u, sv, vt = s.svd(a)
        uk, sk, vk = leading(s, u, 1, 2), s.sqrt(leading(s, sv, 0, 2)), leading(s, vt, 0, 2)
        return s.einsum([s.einsum([uk, sk], "ai,i->ai"), s.einsum([sk, vk], "i,ib->ib")], "ai,ib->ab")

    y1 = rt.with_eager_session(eng, lambda s: reshape_then_slice(2)(s, x))
    y2 = rt.with_eager_session(eng, lambda s: direct(s, x))
    np.testing.assert_array_equal(y1.value().to_numpy(), y2.value().to_numpy())
    w = tf.Tensor(rng.standard_normal((5, 3)))
    # Equal up to rounding: the reshape's VJP makes the sliced cotangent dense first.
    np.testing.assert_allclose(
        rt.vjp(eng, y1, x, w).value().to_numpy(), rt.vjp(eng, y2, x, w).value().to_numpy(), rtol=0, atol=1e-14
    )


def test_grad_of_sum_s_is_polar_factor(rt, eng, rng):
    """d(Σ s)/dA = U Vᵀ, d(Σ s²)/dA = 2A: the rules' values, not only their consistency."""
    for shape in [(4, 4), (5, 3), (3, 5)]:
        a = well_separated(rng, shape)
        U, _, Vt = np.linalg.svd(a, full_matrices=False)
        x = rt.variable_from(tf.Tensor(a))
        y = rt.with_eager_session(eng, lambda s: sum_s(s, x))
        np.testing.assert_allclose(rt.grad(eng, y, x).value().to_numpy(), U @ Vt, atol=1e-13)
        y2 = rt.with_eager_session(eng, lambda s: sum_s2(s, x))
        np.testing.assert_allclose(rt.grad(eng, y2, x).value().to_numpy(), 2 * a, atol=1e-13)


# --- degenerate spectra ---------------------------------------------------------------


def _finite_derivatives(f, a, rng):
    """VJP and JVP of f at a, for a random cotangent and tangent: both finite."""
    rt = tf.EagerRuntime()
    eng = tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: f(s, x))
    g = rt.vjp(eng, y, x, tf.Tensor(rng.standard_normal(y.shape))).value().to_numpy()
    t = rt.jvp(eng, y, x, tf.Tensor(rng.standard_normal(a.shape))).value().to_numpy()
    assert np.all(np.isfinite(g)), f"{f.__name__}: VJP not finite"
    assert np.all(np.isfinite(t)), f"{f.__name__}: JVP not finite"
    return g, t


def repeated(rng):
    return with_spectrum(rng, 4, 4, [3.0, 2.0, 2.0, 1.0])


RANK_DEFICIENT = {
    "tall": (5, 3, [3.0, 2.0, 0.0]),
    "wide": (3, 5, [3.0, 2.0, 0.0]),
    "square": (4, 4, [3.0, 2.0, 1.0, 0.0]),
    "square_two_zeros": (4, 4, [3.0, 2.0, 0.0, 0.0]),
}


def test_repeated_singular_values_are_repeated(rng):
    sv = np.linalg.svd(repeated(rng), compute_uv=False)
    np.testing.assert_allclose(sv, [3, 2, 2, 1], atol=1e-14)


@pytest.mark.parametrize(
    "f",
    [singular_values, sum_s, sum_s2, frobenius, reconstruction, sqrt_reconstruction,
     u_projector(1), u_projector(2), u_projector(3), v_projector(2), truncated_reconstruction(2)],
)
def test_repeated_singular_values_finite(rng, f):
    _finite_derivatives(f, repeated(rng), rng)


@pytest.mark.parametrize("f", [sum_s, sum_s2, frobenius, u_projector(1), v_projector(1), truncated_reconstruction(1)])
def test_repeated_singular_values_smooth_losses_match_differences(rng, f):
    """Losses smooth at the degeneracy (the kept subspace is separated from the rest)."""
    check_grads(f, [repeated(rng)], modes=("fwd", "rev"), order=1)


def test_repeated_singular_values_gradient_values(rt, eng, rng):
    a = repeated(rng)
    U, _, Vt = np.linalg.svd(a)
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: sum_s(s, x))
    np.testing.assert_allclose(rt.grad(eng, y, x).value().to_numpy(), U @ Vt, atol=1e-13)
    y2 = rt.with_eager_session(eng, lambda s: sum_s2(s, x))
    np.testing.assert_allclose(rt.grad(eng, y2, x).value().to_numpy(), 2 * a, atol=1e-13)


@pytest.mark.parametrize("case", sorted(RANK_DEFICIENT))
@pytest.mark.parametrize("f", [singular_values, sum_s2, frobenius, reconstruction, u_projector(2), v_projector(2)])
def test_zero_singular_values_finite(rng, case, f):
    m, n, sv = RANK_DEFICIENT[case]
    a = with_spectrum(rng, m, n, sv)
    assert np.linalg.svd(a, compute_uv=False)[-1] < 1e-14
    _finite_derivatives(f, a, rng)


@pytest.mark.parametrize("case", sorted(RANK_DEFICIENT))
@pytest.mark.parametrize("f", [sum_s2, frobenius, u_projector(2), v_projector(2), truncated_reconstruction(2)])
def test_zero_singular_values_smooth_losses_match_differences(rng, case, f):
    """‖A‖-type losses, and rank-2 quantities of a rank-2 matrix (separated from the zeros)."""
    m, n, sv = RANK_DEFICIENT[case]
    check_grads(f, [with_spectrum(rng, m, n, sv)], modes=("fwd", "rev"), order=1)


def test_single_zero_singular_value_square_second_order(rng):
    """One zero singular value of a square matrix: no degenerate pair, everything smooth."""
    a = with_spectrum(rng, 4, 4, [3.0, 2.0, 1.0, 0.0])
    for f in (sum_s2, frobenius, reconstruction):
        check_grads(f, [a], modes=("fwd", "rev"), order=2)


# --- derivative_eps ------------------------------------------------------------------


def eps_context(eps):
    return (
        tf.AdContext.builder()
        .with_semantic_extension_rules(tf.linalg.semantic_ad_rules())
        .with_semantic_extension_rules(tf.einsum.semantic_ad_rules())
        .with_derivative_eps(eps)
        .build()
    )


def _projector_derivatives(ctx, a, w, v, per_call=None):
    """(VJP of ⟨·⟩ with cotangent w, JVP along v) of U_2 U_2ᵀ at a in a runtime of ctx."""
    rt = tf.EagerRuntime.with_ad_context(ctx)
    eng = tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor(a))

    def f(s):
        u = s.svd(x, derivative_eps=per_call)[0] if per_call is not None else s.svd(x)[0]
        uk = s.slice(u, SliceConfig([0, 0], [u.shape[0], 2]))
        return s.einsum([uk, uk], "ak,bk->ab")

    y = rt.with_eager_session(eng, f)
    return (
        rt.vjp(eng, y, x, tf.Tensor(w)).value().to_numpy(),
        rt.jvp(eng, y, x, tf.Tensor(v)).value().to_numpy(),
    )


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def test_context_eps_values():
    assert tf.AdContext().derivative_eps == 1e-12
    assert eps_context(1e-8).derivative_eps == 1e-8
    assert tf.AdContext.builder().build().derivative_eps == 1e-12


def test_derivative_eps_changes_near_degenerate(rng):
    """s2 − s3 = 1e-8: the projector on the top 2 singular vectors feels the broadened 1/(s3 − s2),
    (1/s₁)·u/(u² + ε²) with u = (s3 − s2)/s₁.

    That term dominates the derivative (it is ~1/δ; the 1/(s2 + s3) one is ~1/4), so the whole
    derivative shrinks by ε²/(u² + ε²): 1/17 for ε = u/4, while ε = 1e-12 leaves it at ~1e-7 of it.
    """
    delta = 1e-8
    a = with_spectrum(rng, 4, 4, [3.0, 2.0 + delta, 2.0, 1.0])
    w, v = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    sv = np.linalg.svd(a, compute_uv=False)
    u = (sv[1] - sv[2]) / sv[0]
    eps = float(u / 4)
    g0, t0 = _projector_derivatives(tf.AdContext(), a, w, v)
    g8, t8 = _projector_derivatives(eps_context(eps), a, w, v)
    assert np.all(np.isfinite(g8)) and np.all(np.isfinite(t8))
    expected = eps**2 / (u * u + eps**2)
    assert abs(expected - 1 / 17) < 1e-12
    assert abs(_rel(g8, g0) - expected) < 1e-3
    assert abs(_rel(t8, t0) - expected) < 1e-3
    # Per call: the same ε gives the same numbers as the context's.
    g8c, t8c = _projector_derivatives(tf.AdContext(), a, w, v, per_call=eps)
    np.testing.assert_array_equal(g8c, g8)
    np.testing.assert_array_equal(t8c, t8)
    # Per call overrides the context: ε = 1e-12 in a 1e-8 context is the default.
    g12, t12 = _projector_derivatives(eps_context(eps), a, w, v, per_call=1e-12)
    np.testing.assert_array_equal(g12, g0)
    np.testing.assert_array_equal(t12, t0)


@pytest.mark.parametrize("eps", [1e-8, 1e-3])
def test_derivative_eps_negligible_when_well_separated(rng, eps):
    """Relative change of at most ~ε²/gap² (gap = min |s_i − s_j| / s₁), plus rounding."""
    a = with_spectrum(rng, 4, 4, [3.0, 2.0, 1.5, 1.0])
    gap = 0.5 / 3.0
    w, v = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    g0, t0 = _projector_derivatives(tf.AdContext(), a, w, v)
    g, t = _projector_derivatives(eps_context(eps), a, w, v)
    bound = 2 * eps**2 / gap**2 + 1e-14
    assert _rel(g, g0) <= bound
    assert _rel(t, t0) <= bound
    gc, tc = _projector_derivatives(tf.AdContext(), a, w, v, per_call=eps)
    assert _rel(gc, g0) <= bound
    assert _rel(tc, t0) <= bound
    if eps == 1e-3:  # large enough to be seen above rounding
        assert _rel(g, g0) > 1e-10


def test_derivative_eps_at_exact_zero_singular_value(rng):
    """The rectangular term's 1/s is broadened as (1/s₁)·x/(x² + ε²), x = s/s₁: finite at s = 0, and ε sets its size."""
    a = with_spectrum(rng, 5, 3, [3.0, 2.0, 0.0])
    w = rng.standard_normal((5, 3))
    out = {}
    for eps in (1e-12, 1e-6):
        rt = tf.EagerRuntime(eps_context(eps))
        eng = tf.CpuEngine.serial()
        x = rt.variable_from(tf.Tensor(a))
        u = rt.with_eager_session(eng, lambda s: s.svd(x)[0])
        out[eps] = rt.vjp(eng, u, x, tf.Tensor(w)).value().to_numpy()
        assert np.all(np.isfinite(out[eps]))
    assert _rel(out[1e-6], out[1e-12]) > 1e-3


# --- truncation: sliced VJP against the dense (masked) computation ---------------------


def _sliced_loss(k, W, Wu, Wv, ws):
    """A gauge-invariant loss of the top-k factors, by slicing."""

    def f(s, a):
        u, sv, vt = s.svd(a)
        uk, sk, vk = leading(s, u, 1, k), leading(s, sv, 0, k), leading(s, vt, 0, k)
        c = lambda t: s.constant_from(tf.Tensor(t))
        terms = [
            s.einsum([uk, sk, vk, c(W)], "ai,i,ib,ab->"),
            s.einsum([uk, uk, c(Wu)], "ai,bi,ab->"),
            s.einsum([vk, vk, c(Wv)], "ia,ib,ab->"),
            s.einsum([sk, c(ws[:k])], "i,i->"),
        ]
        return s.add(s.add(terms[0], terms[1]), s.add(terms[2], terms[3]))

    return f


def _masked_loss(k, W, Wu, Wv, ws):
    """The same loss with the factors multiplied by a 0/1 mask instead of sliced."""

    def f(s, a):
        u, sv, vt = s.svd(a)
        kk = sv.shape[0]
        mask = np.zeros(kk)
        mask[:k] = 1.0
        c = lambda t: s.constant_from(tf.Tensor(t))
        um = s.mul(u, c(np.broadcast_to(mask, u.shape)))
        sm = s.mul(sv, c(mask))
        vm = s.mul(vt, c(np.broadcast_to(mask[:, None], vt.shape)))
        wsk = np.zeros(kk)
        wsk[:k] = ws[:k]
        terms = [
            s.einsum([um, sm, vm, c(W)], "ai,i,ib,ab->"),
            s.einsum([um, um, c(Wu)], "ai,bi,ab->"),
            s.einsum([vm, vm, c(Wv)], "ia,ib,ab->"),
            s.einsum([sm, c(wsk)], "i,i->"),
        ]
        return s.add(s.add(terms[0], terms[1]), s.add(terms[2], terms[3]))

    return f


TRUNCATIONS = [((6, 6), 2), ((6, 6), 5), ((7, 4), 2), ((4, 7), 3), ((5, 5), 1)]


@pytest.mark.parametrize("shape,k", TRUNCATIONS)
def test_truncated_vjp_equals_dense(rng, shape, k):
    a = well_separated(rng, shape, gap=0.1)
    m, n = shape
    W, Wu, Wv = rng.standard_normal((m, n)), rng.standard_normal((m, m)), rng.standard_normal((n, n))
    ws = rng.standard_normal(min(m, n))
    rt = tf.EagerRuntime()
    eng = tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor(a))
    y_slice = rt.with_eager_session(eng, lambda s: _sliced_loss(k, W, Wu, Wv, ws)(s, x))
    y_mask = rt.with_eager_session(eng, lambda s: _masked_loss(k, W, Wu, Wv, ws)(s, x))
    np.testing.assert_allclose(y_slice.item(), y_mask.item(), rtol=1e-13)
    g_slice = rt.grad(eng, y_slice, x).value().to_numpy()
    g_mask = rt.grad(eng, y_mask, x).value().to_numpy()
    np.testing.assert_allclose(g_slice, g_mask, rtol=0, atol=1e-12 * max(1.0, np.abs(g_mask).max()))
    check_grads(_sliced_loss(k, W, Wu, Wv, ws), [a], modes=("fwd", "rev"), order=1)


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 5)])
@pytest.mark.parametrize("which", ["u", "s", "vt"])
def test_truncated_vjp_single_factor_equals_dense(rt, eng, rng, which, shape):
    """Only one factor sliced (the others get symbolic-zero cotangents)."""
    a = well_separated(rng, shape, gap=0.1)
    k = 2
    x = rt.variable_from(tf.Tensor(a))
    axis = {"u": 1, "s": 0, "vt": 0}[which]
    idx = {"u": 0, "s": 1, "vt": 2}[which]

    def sliced(s):
        f = s.svd(x)[idx]
        return leading(s, f, axis, k)

    def masked(s):
        f = s.svd(x)[idx]
        mask = np.zeros(f.shape)
        ix = [slice(None)] * f.ndim
        ix[axis] = slice(0, k)
        mask[tuple(ix)] = 1.0
        return s.mul(f, s.constant_from(tf.Tensor(mask)))

    y1 = rt.with_eager_session(eng, sliced)
    y2 = rt.with_eager_session(eng, masked)
    w1 = rng.standard_normal(y1.shape)
    w2 = np.zeros(y2.shape)
    ix = [slice(None)] * w2.ndim
    ix[axis] = slice(0, k)
    w2[tuple(ix)] = w1
    g1 = rt.vjp(eng, y1, x, tf.Tensor(w1)).value().to_numpy()
    g2 = rt.vjp(eng, y2, x, tf.Tensor(w2)).value().to_numpy()
    np.testing.assert_allclose(g1, g2, rtol=0, atol=1e-12 * max(1.0, np.abs(g2).max()))


@pytest.mark.parametrize(
    "starts,limits,strides",
    [([0, 1], [6, 3], None), ([1, 0], [5, 2], None), ([0, 0], [6, 4], [1, 2]), ([0, 0], [6, 3], [2, 1])],
)
def test_offset_and_strided_slices_of_u_equal_dense(rt, eng, rng, starts, limits, strides):
    """Slices that do not start at column 0, or have strides, fall back correctly."""
    a = well_separated(rng, (6, 4), gap=0.1)
    x = rt.variable_from(tf.Tensor(a))
    steps = strides or [1, 1]
    sel = tuple(slice(b, e, d) for b, e, d in zip(starts, limits, steps))
    W = None

    def sliced(s):
        u, sv, vt = s.svd(x)
        uk = s.slice(u, SliceConfig(starts, limits, strides))
        return s.einsum([uk, uk, s.constant_from(tf.Tensor(W))], "ai,aj,ij->")

    def masked(s):
        u, sv, vt = s.svd(x)
        mask = np.zeros(u.shape)
        mask[sel] = 1.0
        um = s.mul(u, s.constant_from(tf.Tensor(mask)))
        Wd = np.zeros((4, 4))
        cols = np.arange(4)[sel[1]]
        Wd[np.ix_(cols, cols)] = W
        return s.einsum([um, um, s.constant_from(tf.Tensor(Wd))], "ai,aj,ij->")

    nc = len(range(4)[sel[1]])
    W = rng.standard_normal((nc, nc))
    y1 = rt.with_eager_session(eng, sliced)
    y2 = rt.with_eager_session(eng, masked)
    np.testing.assert_allclose(y1.item(), y2.item(), rtol=1e-13)
    g1 = rt.grad(eng, y1, x).value().to_numpy()
    g2 = rt.grad(eng, y2, x).value().to_numpy()
    np.testing.assert_allclose(g1, g2, rtol=0, atol=1e-12 * max(1.0, np.abs(g2).max()))


def test_gesvd_fallback_when_gesdd_does_not_converge(rt, eng, rng, monkeypatch):
    """When gesdd (numpy.linalg.svd) raises LinAlgError, gesvd gives the factors; when both fail, LinalgError."""
    a = rng.standard_normal((5, 3))

    def no_convergence(*args, **kwargs):
        raise np.linalg.LinAlgError("SVD did not converge")

    monkeypatch.setattr(np.linalg, "svd", no_convergence)
    u, s, vt = rt.with_eager_session(eng, lambda ss: ss.svd(ss.constant_from(tf.Tensor(a))))
    np.testing.assert_allclose((u.value().to_numpy() * s.value().to_numpy()) @ vt.value().to_numpy(), a, atol=1e-13)

    import scipy.linalg

    monkeypatch.setattr(scipy.linalg, "svd", no_convergence)
    with pytest.raises(tf.LinalgError, match="svd"):
        rt.with_eager_session(eng, lambda ss: ss.svd(ss.constant_from(tf.Tensor(a))))
