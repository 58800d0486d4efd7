"""pinv: NumPy's values and cutoff in every dtype and shape, the constant-rank rules to order 2
(real and complex, stacks), exact at repeated singular values (JAX's testPinvGradIssue2792) and
at deficient rank along paths that keep it (PyTorch's linalg.pinv_singular), tnp.linalg.pinv,
and errors."""

import numpy as np
import pytest
from conftest import random

import tenferro_py as tf
import tenferro_py.numpy as tnp
from tenferro_py.testing import check_grads

FLOATS = [np.float64, np.float32, np.complex128, np.complex64]
ORDER2 = dict(modes=("fwd", "rev"), order=2)


def tol(dtype):
    return 5e-5 if np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.complex64)) else 1e-12


def with_singular_values(rng, m, n, values, dtype=np.float64):
    """Q₁ diag(values) Q₂ᴴ of shape (m, n)."""
    q1 = np.linalg.qr(random(rng, (m, m), dtype))[0][:, : len(values)]
    q2 = np.linalg.qr(random(rng, (n, n), dtype))[0][:, : len(values)]
    return ((q1 * np.asarray(values)) @ q2.conj().T).astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (4, 4), (2, 4, 3), (0, 3), (3, 0), (2, 0, 0)])
def test_pinv_is_numpys(run, rng, shape, dtype):
    a = random(rng, shape, dtype)
    got = run(lambda s: s.pinv(tf.Tensor(a))).value().to_numpy()
    want = np.linalg.pinv(a, rtol=None)
    assert got.shape == want.shape == shape[:-2] + (shape[-1], shape[-2]) and got.dtype == a.dtype
    np.testing.assert_allclose(got, want, rtol=10 * tol(dtype), atol=10 * tol(dtype))


def test_the_cutoff_is_numpys(run, rng):
    a = with_singular_values(rng, 5, 4, [1.0, 1e-3, 1e-8, 1e-14])
    for rtol in (None, 1e-10, 1e-5, 1e-2, 0.0):
        got = run(lambda s: s.pinv(tf.Tensor(a), rtol=rtol)).value().to_numpy()
        want = np.linalg.pinv(a, rtol=rtol) if rtol is not None else np.linalg.pinv(a, rtol=None)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())
    # a value at the cutoff is dropped (≤, NumPy's), one just above it kept
    edge = np.diag([1.0, 1e-3])
    kept = run(lambda s: s.pinv(tf.Tensor(edge), rtol=1e-3 * (1 - 1e-12))).value().to_numpy()
    dropped = run(lambda s: s.pinv(tf.Tensor(edge), rtol=1e-3)).value().to_numpy()
    assert kept[1, 1] == pytest.approx(1e3) and dropped[1, 1] == 0


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (3, 3), (2, 3, 4)])
@pytest.mark.parametrize("complex_", [False, True])
def test_pinv_grads(rng, shape, complex_):
    check_grads(lambda s, a: s.pinv(a), [random(rng, shape, np.complex128 if complex_ else np.float64)], **ORDER2)


@pytest.mark.parametrize("complex_", [False, True])
def test_grads_exact_at_repeated_singular_values(rng, complex_):
    """pinv through the SVD's factors cannot be exact here (its coupling of equal values is broadened away)."""
    dtype = np.complex128 if complex_ else np.float64
    repeated = with_singular_values(rng, 4, 4, [2, 2, 2, 1], dtype)
    for a in (np.eye(3, dtype=dtype), 2.5 * np.eye(3, 2, dtype=dtype), repeated):
        check_grads(lambda s, x: s.pinv(x), [a], **ORDER2)


def jacobian(rt, eng, f, x):
    """The Jacobian of f at x (float64), column by column by forward mode."""
    xv = rt.variable_from(tf.Tensor(x))
    y = rt.with_eager_session(eng, lambda s: f(s, xv))
    columns = []
    for index in np.ndindex(*x.shape):
        e = np.zeros(x.shape)
        e[index] = 1
        columns.append(rt.jvp(eng, y, xv, tf.Tensor(e)).value().to_numpy())
    return np.moveaxis(np.array(columns).reshape(x.shape + y.shape), list(range(x.ndim)), list(range(-x.ndim, 0)))


def test_jax_pinv_grad_issue_2792(rt, eng):
    """JAX's testPinvGradIssue2792: a rank-1 path, and the Jacobian at I."""

    def f(s, p):
        """pinv([[0, 0], [−p, 1]] / (1 + p²))."""
        one = s.constant_from(tf.Tensor(np.ones(1)))
        entries = s.concatenate([s.zeros((1,)), s.neg(s.reshape(p, (1,))), s.zeros((1,)), one], 0)
        scale = s.div(one, s.add(one, s.reshape(s.mul(p, p), (1,))))
        return s.pinv(s.reshape(s.mul(entries, s.broadcast_in_dim(s.reshape(scale, ()), (4,), ())), (2, 2)))

    np.testing.assert_allclose(jacobian(rt, eng, f, np.array(2.0)), [[0.0, -1.0], [0.0, 0.0]], atol=1e-12)
    expected = -np.einsum("ik,jl->ijkl", np.eye(2), np.eye(2))
    np.testing.assert_allclose(jacobian(rt, eng, lambda s, a: s.pinv(a), np.eye(2)), expected, atol=1e-12)


def orthonormal(rng, shape, dtype):
    return np.linalg.qr(random(rng, shape, dtype))[0]


@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("m, n", [(3, 3), (6, 3), (3, 6)])
@pytest.mark.parametrize("k", [0, 1, 2])
@pytest.mark.parametrize("complex_", [False, True])
def test_torch_pinv_singular(rng, batch, m, n, k, complex_):
    """PyTorch's linalg.pinv_singular: pinv(a bᴴ) of rank k, differentiated in the factors (so the rank
    is kept), to order 2."""
    dtype = np.complex128 if complex_ else np.float64
    a, b = orthonormal(rng, batch + (m, k), dtype), orthonormal(rng, batch + (n, k), dtype)

    def f(s, a, b):
        return s.pinv(s.einsum([a, s.conj(b)], "...ik,...jk->...ij"))

    check_grads(f, [a, b], **ORDER2)


def test_torch_pinv_singular_larger(rng):
    a, b = orthonormal(rng, (50, 2), np.float64), orthonormal(rng, (30, 2), np.float64)
    check_grads(lambda s, a, b: s.pinv(s.einsum([a, b], "ik,jk->ij")), [a, b], order=1)


@pytest.mark.parametrize("scale", [1e-150, 1e-30, 1e30, 1e150])
def test_rules_hold_at_any_scale(rng, scale):
    """pinv(cA) = A⁺/c: its JVP and VJP are those at c = 1 times 1/c², with nothing over- or underflowing
    on the way (the rules work at unit scale)."""
    a, d, w = random(rng, (4, 3)), random(rng, (4, 3)), random(rng, (3, 4))

    def derivatives(x):
        rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
        v = rt.variable_from(tf.Tensor(x))
        y = rt.with_eager_session(eng, lambda s: s.pinv(v))
        return (rt.jvp(eng, y, v, tf.Tensor(d)).value().to_numpy(), rt.vjp(eng, y, v, tf.Tensor(w)).value().to_numpy())

    for got, want in zip(derivatives(scale * a), derivatives(a)):
        np.testing.assert_allclose(got * scale**2, want, rtol=0, atol=1e-13 * np.abs(want).max())


def test_zero_size_derivatives_are_zero(rt, eng):
    x = rt.variable_from(tf.Tensor(np.zeros((0, 3))))
    y = rt.with_eager_session(eng, lambda s: s.pinv(x))
    assert y.shape == (3, 0)
    assert rt.jvp(eng, y, x, tf.Tensor(np.zeros((0, 3)))).value().to_numpy().shape == (3, 0)
    assert rt.vjp(eng, y, x, tf.Tensor(np.zeros((3, 0)))).value().to_numpy().shape == (0, 3)


@pytest.mark.parametrize("call, cls, message", [
    (lambda s: s.pinv(tf.Tensor(np.ones(3))), tf.ShapeMismatch, "pinv: expected a matrix"),
    (lambda s: s.pinv(tf.Tensor(np.ones((2, 2))), rtol=-1.0), tf.InvalidArgument, "pinv: expected rtol"),
    (lambda s: s.pinv(tf.Tensor(np.ones((2, 2))), rtol="x"), tf.InvalidArgument, "pinv: expected rtol"),
    (lambda s: s.pinv(tf.Tensor(np.array([[1.0, np.nan], [0, 1]]))), tf.LinalgError,
     "pinv: expected a matrix of finite"),
])
def test_errors(run, call, cls, message):
    with pytest.raises(cls, match=message):
        run(call)


def test_tnp_pinv(rng):
    a = random(rng, (4, 3))
    assert np.array_equal(tnp.linalg.pinv(a), np.linalg.pinv(a))  # NumPy data: NumPy's own
    with tnp.session():
        for kwargs in ({}, {"rcond": 1e-3}, {"rtol": None}, {"rtol": 1e-2}):
            np.testing.assert_allclose(np.asarray(tnp.linalg.pinv(tnp.asarray(a), **kwargs)),
                                       np.linalg.pinv(a, **kwargs), rtol=1e-12, atol=1e-12)
        with pytest.raises(tf.InvalidArgument, match="rcond or rtol"):
            tnp.linalg.pinv(tnp.asarray(a), rcond=1e-3, rtol=1e-3)
    tnp.check_grads(lambda x: tnp.linalg.pinv(x @ x.T), (random(rng, (3, 2)),))  # rank 2 of 3, kept
