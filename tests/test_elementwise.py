"""Elementwise ops: forward values against NumPy, derivatives by check_grads.

check_grads compares the JVP and the VJP with central differences in float64,
runs the dot-product test <vjp(w), v> = <w, jvp(v)>, and repeats all of it on
the first derivatives (order 2).
"""

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py.testing import check_grads

SHAPES = [(), (4,), (2, 3), (2, 1, 3)]

BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
}

UNARY = {
    "neg": np.negative,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
}

# Inputs of log, sqrt and div's denominator stay away from 0.
POSITIVE = {"log", "sqrt"}


def _inputs(rng, shape, positive):
    if positive:
        return rng.uniform(0.5, 2.0, size=shape)
    return rng.standard_normal(shape)


def _const(rt, a):
    return rt.constant_from(tf.Tensor(np.array(a)))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_forward_matches_numpy(rt, run, rng, name, shape):
    a = rng.standard_normal(shape)
    b = rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    y = run(lambda s: getattr(s, name)(rt.variable_from(tf.Tensor(a)), _const(rt, b)))
    assert y.shape == shape
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y.value().to_numpy(), BINARY[name](a, b))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_grads(rng, name, shape):
    a = rng.standard_normal(shape)
    b = rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    check_grads(lambda s, x, y: getattr(s, name)(x, y), [a, b], modes=("fwd", "rev"), order=2)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_grads_one_operand_constant(rng, name, shape):
    """Symbolic zero tangents/cotangents for one side: only the tracked side is differentiated."""
    a = rng.standard_normal(shape)
    b = rng.uniform(0.5, 2.0, size=shape)

    def lhs(s, x):
        return getattr(s, name)(x, s.constant_from(tf.Tensor(b)))

    def rhs(s, y):
        return getattr(s, name)(s.constant_from(tf.Tensor(a)), y)

    check_grads(lhs, [a], modes=("fwd", "rev"), order=2)
    check_grads(rhs, [b], modes=("fwd", "rev"), order=2)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_forward_matches_numpy(rt, run, rng, name, shape):
    a = _inputs(rng, shape, name in POSITIVE)
    y = run(lambda s: getattr(s, name)(rt.variable_from(tf.Tensor(a))))
    assert y.shape == shape
    np.testing.assert_array_equal(y.value().to_numpy(), UNARY[name](a))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_grads(rng, name, shape):
    a = _inputs(rng, shape, name in POSITIVE)
    check_grads(lambda s, x: getattr(s, name)(x), [a], modes=("fwd", "rev"), order=2)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("alpha", [2.5, -0.75, 3])
def test_scale_real(rt, run, rng, shape, alpha):
    a = rng.standard_normal(shape)
    y = run(lambda s: s.scale_real(rt.variable_from(tf.Tensor(a)), alpha))
    assert y.shape == shape
    np.testing.assert_array_equal(y.value().to_numpy(), alpha * a)
    check_grads(lambda s, x: s.scale_real(x, alpha), [a], modes=("fwd", "rev"), order=2)


def test_analytic_first_derivatives(rt, eng, rng):
    """The rules' values themselves, not only their consistency with differences."""
    a = rng.uniform(0.5, 2.0, size=(3, 2))
    b = rng.uniform(0.5, 2.0, size=(3, 2))
    x = rt.variable_from(tf.Tensor(a))
    y = rt.variable_from(tf.Tensor(b))
    ones = tf.Tensor(np.ones((3, 2)))
    cases = {
        "add": ((np.ones_like(a)), np.ones_like(b)),
        "sub": (np.ones_like(a), -np.ones_like(b)),
        "mul": (b, a),
        "div": (1 / b, -a / b**2),
    }
    for name, (ga, gb) in cases.items():
        out = rt.with_eager_session(eng, lambda s: getattr(s, name)(x, y))
        gx, gy = rt.vjp(eng, out, [x, y], ones)
        np.testing.assert_allclose(gx.value().to_numpy(), ga, rtol=1e-15, err_msg=name)
        np.testing.assert_allclose(gy.value().to_numpy(), gb, rtol=1e-15, err_msg=name)
    unary = {"neg": -np.ones_like(a), "exp": np.exp(a), "log": 1 / a, "sqrt": 0.5 / np.sqrt(a)}
    for name, want in unary.items():
        out = rt.with_eager_session(eng, lambda s: getattr(s, name)(x))
        np.testing.assert_allclose(rt.vjp(eng, out, x, ones).value().to_numpy(), want, rtol=1e-15, err_msg=name)
        np.testing.assert_allclose(rt.jvp(eng, out, x, ones).value().to_numpy(), want, rtol=1e-15, err_msg=name)


def test_float32_stays_float32(rt, run, rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.uniform(0.5, 2.0, size=(2, 3)).astype(np.float32)
    x = rt.variable_from(tf.Tensor(a))
    y = rt.constant_from(tf.Tensor(b))
    for name in ("add", "sub", "mul", "div"):
        out = run(lambda s: getattr(s, name)(x, y))
        assert out.dtype == np.float32, name
        np.testing.assert_array_equal(out.value().to_numpy(), BINARY[name](a, b))
    out = run(lambda s: s.scale_real(x, 0.1))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out.value().to_numpy(), a * np.float32(0.1))
