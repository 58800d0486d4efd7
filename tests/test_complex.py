"""complex128 in every op and rule, JAX's convention; check_grads runs along real and imaginary directions."""

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py import SliceConfig
from tenferro_py.testing import check_grads

SC = SliceConfig


def z(rng, *shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def lifted(s, x):
    return s.complex(x, s.zeros(x.shape, x.dtype))


OPS = {
    "add": (lambda s, a, b: s.mul(s.add(a, b), a), 2),
    "sub": (lambda s, a, b: s.mul(s.sub(a, b), b), 2),
    "mul": (lambda s, a, b: s.mul(a, b), 2),
    "div": (lambda s, a, b: s.div(a, s.add(b, s.constant_from(tf.Tensor(np.full(b.shape, 4.0 + 0j))))), 2),
    "neg": (lambda s, a: s.neg(s.mul(a, a)), 1),
    "exp": (lambda s, a: s.exp(a), 1),
    "log": (lambda s, a: s.log(a), 1),
    "sqrt": (lambda s, a: s.sqrt(a), 1),
    "scale_real": (lambda s, a: s.scale_real(s.mul(a, a), -1.5), 1),
    "conj": (lambda s, a: s.mul(s.conj(a), s.exp(a)), 1),
    "real": (lambda s, a: s.mul(s.real(a), s.real(s.mul(a, a))), 1),
    "imag": (lambda s, a: s.mul(s.imag(a), s.imag(s.mul(a, a))), 1),
    "abs": (lambda s, a: s.abs(a), 1),
    "broadcast_in_dim": (lambda s, a: s.mul(s.broadcast_in_dim(a, (3, 2, 4), (0, 1)), s.broadcast_in_dim(a, (3, 2, 4), (0, 1))), 1),
    "reduce_sum": (lambda s, a: s.reduce_sum(s.mul(a, a), [1]), 1),
    "transpose": (lambda s, a: s.mul(s.transpose(a, (1, 0)), s.transpose(a, (1, 0))), 1),
    "reshape": (lambda s, a: s.reshape(s.mul(a, a), (2, 3)), 1),
    "slice": (lambda s, a: s.slice(s.mul(a, a), SC([1, 0], [3, 2], [1, 1])), 1),
    "pad": (lambda s, a: s.pad(s.mul(a, a), (5, 4), (1, 1)), 1),
    "einsum": (lambda s, a, b: s.einsum([a, b], "ij,kj->ik"), 2),
    "einsum_trace": (lambda s, a: s.einsum([s.reshape(s.mul(a, a), (3, 2, 3, 2)), s.reshape(a, (3, 2, 3, 2))], "xyxy,xyab->ab"), 1),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_op_along_real_and_imaginary_directions(rng, name):
    f, arity = OPS[name]
    shape = (3, 2) if name not in ("einsum_trace",) else (6, 6)
    args = [z(rng, *shape) for _ in range(arity)]
    if name in ("log", "sqrt"):
        args = [a + 4.0 for a in args]  # away from the branch cut
    check_grads(f, args, modes=("fwd", "rev"), order=2)


def test_holomorphic_jvp_and_conjugated_vjp(rt, eng):
    """JVP f'(z)·dz, VJP ȳ·conj(f'(z)), gradient of a real loss ∂L/∂Re + i ∂L/∂Im."""
    z0 = np.array([0.3 + 0.4j, -1.0 + 2.0j])
    x = rt.variable_from(tf.Tensor(z0))
    y = rt.with_eager_session(eng, lambda s: s.exp(x))
    dz = np.array([1.0 + 0j, 1j])
    np.testing.assert_allclose(rt.jvp(eng, y, x, tf.Tensor(dz)).value().to_numpy(), np.exp(z0) * dz)
    ybar = np.array([1.0 + 1j, 2.0 + 0j])
    np.testing.assert_allclose(rt.vjp(eng, y, x, tf.Tensor(ybar)).value().to_numpy(), ybar * np.conj(np.exp(z0)))
    loss = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.mul(s.abs(x), s.abs(x))))  # |z|²
    np.testing.assert_allclose(rt.grad(eng, loss, x).value().to_numpy(), 2 * z0)  # ∂/∂Re + i ∂/∂Im of x² + y²


def test_abs_at_zero_is_finite(rt, eng):
    x = rt.variable_from(tf.Tensor(np.array([0j, 3 + 4j])))
    y = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.abs(x)))
    g = rt.grad(eng, y, x).value().to_numpy()
    assert g[0] == 0  # sign(0) = 0
    np.testing.assert_allclose(g[1], 0.6 + 0.8j, rtol=1e-15)


def test_complex_builds_from_real_parts_and_splits_back(rng):
    check_grads(lambda s, a, b: s.exp(s.complex(a, b)), [rng.standard_normal(3), rng.standard_normal(3)])
    check_grads(lambda s, a: s.complex(s.real(s.exp(a)), s.imag(s.log(a))), [z(rng, 3) + 3.0])


def test_dtypes_of_complex_parts(rt, run):
    x = rt.constant_from(tf.Tensor(np.array([1 + 2j], np.complex64)))
    assert run(lambda s: s.real(x)).dtype == np.float32
    assert run(lambda s: s.abs(x)).dtype == np.float32
    r = rt.constant_from(tf.Tensor(np.array([1.0], np.float32)))
    assert run(lambda s: s.complex(r, r)).dtype == np.complex64
    assert run(lambda s: s.imag(r)).value().to_numpy().tolist() == [0.0]


def test_mixing_real_and_complex_is_a_dtype_error(rt, run):
    a = rt.constant_from(tf.Tensor(np.ones(2)))
    b = rt.constant_from(tf.Tensor(np.ones(2) + 0j))
    with pytest.raises(tf.DTypeMismatch, match="mul"):
        run(lambda s: s.mul(a, b))
    with pytest.raises(tf.DTypeMismatch, match="complex"):
        run(lambda s: s.complex(b, b))


# --- SVD ----------------------------------------------------------------------------------

SHAPES = [(4, 4), (5, 3), (3, 5)]


def _svd_losses(k):
    def singular_values(s, a):
        return s.svd(a)[1]

    def reconstruction(s, a):
        u, sv, vt = s.svd(a)
        return s.einsum([u, lifted(s, s.sqrt(sv)), vt], "ai,i,ib->ab")

    def projector_u(s, a):
        u = s.slice(s.svd(a)[0], SC([0, 0], [a.shape[0], k]))
        return s.einsum([u, s.conj(u)], "ai,bi->ab")

    def projector_v(s, a):
        vt = s.slice(s.svd(a)[2], SC([0, 0], [k, a.shape[1]]))
        return s.einsum([s.conj(vt), vt], "ia,ib->ab")

    def truncated(s, a):
        u, sv, vt = s.svd(a)
        m, n = a.shape
        uk, vk = s.slice(u, SC([0, 0], [m, k])), s.slice(vt, SC([0, 0], [k, n]))
        return s.einsum([uk, lifted(s, s.sqrt(s.slice(sv, SC([0], [k])))), vk], "ai,i,ib->ab")

    return [singular_values, reconstruction, projector_u, projector_v, truncated]


@pytest.mark.parametrize("shape", SHAPES)
def test_complex_svd_phase_invariant_losses(rng, shape):
    a = z(rng, *shape)
    for loss in _svd_losses(2):
        check_grads(loss, [a], modes=("fwd", "rev"), order=2)


def test_complex_svd_singular_values_are_real_and_repeated_ones_finite(rt, eng, rng):
    q1, _ = np.linalg.qr(z(rng, 4, 4))
    q2, _ = np.linalg.qr(z(rng, 4, 4))
    a = rt.variable_from(tf.Tensor(q1 @ np.diag([3.0, 2.0, 2.0, 0.0]) @ q2.conj().T))

    def loss(s):
        u, sv, vt = s.svd(a)
        return s.reduce_sum(s.mul(sv, sv))

    y = rt.with_eager_session(eng, loss)
    assert y.dtype == np.float64
    g = rt.grad(eng, y, a).value().to_numpy()
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, 2 * a.value().to_numpy(), atol=1e-12)  # d‖A‖²/dA* convention: 2A


def test_phase_dependent_loss_follows_the_gauge_of_u(rt, eng, rng):
    """Re U[0,0] depends on the arbitrary phase of the singular vectors: its derivative is
    that of JAX's gauge (the phase sits in U), not a property of A — documented, not a bug."""
    a = rt.variable_from(tf.Tensor(z(rng, 3, 3)))
    y = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.real(s.slice(s.svd(a)[0], SC([0, 0], [1, 1])))))
    assert np.all(np.isfinite(rt.grad(eng, y, a).value().to_numpy()))


# --- the convention, pinned ------------------------------------------------------------------


def _grad(rt, eng, f, z):
    x = rt.variable_from(tf.Tensor.scalar(z))
    return rt.grad(eng, rt.with_eager_session(eng, lambda s: f(s, x)), x).item()


def test_grad_of_a_real_loss_is_d_by_dx_plus_i_d_by_dy(rt, eng):
    """∂L/∂x + i ∂L/∂y = 2 ∂L/∂z̄: PyTorch's and TensorFlow's gradient; jax.grad gives its conjugate
    (JAX's autodiff cookbook: grad(lambda z: abs(z)**2)(3+4j) = 6-8j)."""
    abs2 = lambda s, z: s.real(s.mul(s.conj(z), z))  # noqa: E731
    assert _grad(rt, eng, abs2, 3 + 4j) == 6 + 8j
    assert _grad(rt, eng, lambda s, z: s.abs(z), 3 + 4j) == pytest.approx(0.6 + 0.8j, abs=1e-15)
    assert _grad(rt, eng, lambda s, z: s.real(z), 3 + 4j) == 1.0
    assert _grad(rt, eng, lambda s, z: s.imag(z), 3 + 4j) == 1j
    z = 0.3 - 1.2j  # Re exp(z): its gradient is conj(f'(z)) = conj(exp(z))
    assert _grad(rt, eng, lambda s, x: s.real(s.exp(x)), z) == pytest.approx(np.conj(np.exp(z)), abs=1e-15)


def test_jvp_is_f_prime_times_the_tangent_and_vjp_its_adjoint(rt, eng):
    """For holomorphic f(z) = z² at 1+1j: JVP along ż = f'(z)·ż (2+2j along 1, as JAX and PyTorch);
    VJP of ȳ = conj(f'(z))·ȳ (2−2j for ȳ = 1, as PyTorch's backward; JAX's vjp gives 2+2j, the
    conjugate of ours at conj(ȳ)). TensorFlow's issue 3348 shows the same for x² at 0.1j: −0.2j."""
    x = rt.variable_from(tf.Tensor.scalar(1 + 1j))
    y = rt.with_eager_session(eng, lambda s: s.mul(x, x))
    assert rt.jvp(eng, y, x, tf.Tensor.scalar(1 + 0j)).item() == 2 + 2j
    assert rt.jvp(eng, y, x, tf.Tensor.scalar(1j)).item() == -2 + 2j
    assert rt.vjp(eng, y, x, tf.Tensor.scalar(1 + 0j)).item() == 2 - 2j
    assert rt.vjp(eng, y, x, tf.Tensor.scalar(1j)).item() == 2 + 2j
    w = rt.variable_from(tf.Tensor.scalar(0.1j))
    assert rt.vjp(eng, rt.with_eager_session(eng, lambda s: s.mul(w, w)), w, tf.Tensor.scalar(1 + 0j)).item() == \
        pytest.approx(-0.2j, abs=1e-17)
    # A non-holomorphic f(z) = conj(z): JVP conj(ż), VJP conj(ȳ) (the ∂f/∂z̄ terms).
    c = rt.with_eager_session(eng, lambda s: s.conj(x))
    assert rt.jvp(eng, c, x, tf.Tensor.scalar(2 + 3j)).item() == 2 - 3j
    assert rt.vjp(eng, c, x, tf.Tensor.scalar(2 + 3j)).item() == 2 - 3j
