"""tnp's functions by position (sort, take_along_axis, pad, vdot; argmax, argmin, argsort, indices,
which have no derivative), the swapaxes method and autoray's linalg.expm: values as NumPy's, derivatives by
check_grads (real and complex, to second order), and bad input named."""

import numpy as np
import pytest

import tenferro_py.numpy as tnp
from tenferro_py.errors import InvalidArgument


@pytest.fixture
def a(rng):
    return rng.standard_normal((3, 4))


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_sort_and_take_along_axis_are_numpys_and_differentiate(rng, a, axis):
    np.testing.assert_array_equal(tnp.value_and_grad(lambda x: tnp.sum(tnp.sort(x, axis)))(a)[0], np.sum(np.sort(a, axis)))
    tnp.check_grads(lambda x: tnp.sort(x, axis), [a])
    order = np.argsort(a, axis=axis)
    with tnp.session():
        np.testing.assert_array_equal(np.asarray(tnp.take_along_axis(tnp.asarray(a), order, axis).tensor.value().to_numpy()),
                                      np.take_along_axis(a, order, axis))
    tnp.check_grads(lambda x: tnp.take_along_axis(x, order, axis), [a + 1j * rng.standard_normal(a.shape)])


def test_take_along_axis_broadcasts_as_numpy(rng):
    a = rng.standard_normal((3, 1, 4))
    idx = rng.integers(0, 4, (3, 5, 2))
    tnp.check_grads(lambda x: tnp.take_along_axis(x, idx, 2), [a])
    with tnp.session():
        got = tnp.take_along_axis(tnp.asarray(a), idx, 2).tensor.value().to_numpy()
    np.testing.assert_array_equal(got, np.take_along_axis(a, idx, 2))


def test_pad_vdot_swapaxes_expm(rng, a):
    widths = ((1, 0), (2, 1))
    tnp.check_grads(lambda x: tnp.pad(x, widths, constant_values=2.5), [a])
    value = tnp.value_and_grad(lambda x: tnp.sum(tnp.pad(x, widths, constant_values=2.5)))(a)[0]
    assert value == pytest.approx(np.sum(np.pad(a, widths, constant_values=2.5)), rel=1e-14)
    b = rng.standard_normal(a.shape) + 1j * rng.standard_normal(a.shape)
    tnp.check_grads(lambda x, y: tnp.vdot(x, y), [b, b[::-1]])
    tnp.check_grads(lambda x: x.swapaxes(0, 1), [a])
    autoray = pytest.importorskip("autoray")
    tnp.check_grads(lambda x: autoray.do("linalg.expm", x), [0.3 * a[:, :3]])  # autoray's name for it


def test_positions_of_values_have_no_derivative_and_are_numpys(a):
    def loss(x):
        assert tnp.argmax(x) == np.argmax(a) and tnp.argmin(x, axis=0).tolist() == np.argmin(a, axis=0).tolist()
        np.testing.assert_array_equal(tnp.argsort(x, axis=1), np.argsort(a, axis=1))
        return tnp.sum(x[np.unravel_index(tnp.argmax(x), x.shape)] * 2.0)

    _, g = tnp.value_and_grad(loss)(a)
    want = np.zeros_like(a)
    want[np.unravel_index(np.argmax(a), a.shape)] = 2.0
    np.testing.assert_array_equal(g, want)
    np.testing.assert_array_equal(tnp.indices((2, 3)), np.indices((2, 3)))


def test_bad_input_is_named(a):
    with pytest.raises(InvalidArgument, match="pad"):
        tnp.grad(lambda x: tnp.sum(tnp.pad(x, 1, mode="reflect")))(a)
    with pytest.raises(InvalidArgument, match="take_along_axis"):
        tnp.grad(lambda x: tnp.sum(tnp.take_along_axis(x, np.zeros(3, int), 0)))(a)


def test_a_pullback_names_a_wrong_shaped_cotangent_as_rt_vjp_does():
    """tnp.vjp's pullback and rt.vjp give one error class for a cotangent of the wrong shape."""
    import tenferro_py as tf

    _, pullback = tnp.vjp(lambda x: x * 2.0, np.ones(3))
    with pytest.raises(tf.ShapeMismatch, match=r"vjp: expected a cotangent of the output's shape \[3\], got \[4\]"):
        pullback(np.ones(4))
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor(np.ones(3)))
    with pytest.raises(tf.ShapeMismatch, match="vjp"):
        rt.vjp(eng, rt.with_eager_session(eng, lambda s: s.scale_real(x, 2.0)), x, tf.Tensor(np.ones(4)))
