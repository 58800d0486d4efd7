"""Arrays that cross: Tensor and tnp arrays give NumPy's array protocol and DLPack without a copy (their
buffers are immutable, shared read-only) and take DLPack producers' values (a copy into a Tensor, a
view outside a session); values only: a tracked array refuses, and no derivative crosses."""

import numpy as np
import pytest

import tenferro_py as tf
import tenferro_py.numpy as tnp
from tenferro_py.errors import TrackedConversion


def buffer_of(t):
    """The tensor's own (read-only) buffer, as the array protocol gives it."""
    return np.asarray(t)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.complex64])
def test_the_array_protocol_shares_the_tensors_buffer_read_only(rng, dtype):
    t = tf.Tensor(rng.standard_normal((3, 4)).astype(dtype))
    a = np.asarray(t)
    assert a.dtype == dtype and not a.flags.writeable
    assert np.shares_memory(a, np.asarray(t))
    with pytest.raises(ValueError, match="read-only"):
        a[0, 0] = 1
    copied = np.array(t, copy=True)
    assert copied.flags.writeable and not np.shares_memory(copied, a)
    np.testing.assert_array_equal(copied, a)


def test_a_cast_is_a_copy_and_refused_where_no_copy_is_allowed(rng):
    t = tf.Tensor(rng.standard_normal(3))
    assert np.asarray(t, dtype=np.complex128).dtype == np.complex128
    with pytest.raises(ValueError, match="needs a copy"):
        np.asarray(t, dtype=np.float32, copy=False)


def test_dlpack_to_numpy_shares_the_buffer_read_only_in_either_layout(rng):
    for t in (tf.Tensor(rng.standard_normal((2, 3))), tf.Tensor.from_vec_col_major([2, 3], np.arange(6.0))):
        a = np.from_dlpack(t)
        assert np.shares_memory(a, buffer_of(t)) and not a.flags.writeable
        np.testing.assert_array_equal(a, t.to_numpy())
    assert tf.Tensor(np.ones(2)).__dlpack_device__() == (1, 0)  # the host


def test_a_consumer_of_an_older_dlpack_gets_a_copy(rng):
    """DLPack before 1.0 cannot say read-only: NumPy refuses to export a read-only buffer then, so
    the value goes as a copy (as copy=None allows), never as a writable alias of an immutable buffer."""
    t = tf.Tensor(rng.standard_normal(4))
    capsule = t.__dlpack__()  # no max_version: an old consumer
    assert capsule is not None
    with pytest.raises(BufferError):
        t.__dlpack__(copy=False)


def test_a_tensor_takes_a_copy_of_a_producers_data(rng):
    source = rng.standard_normal((2, 3))
    want = source.copy()
    t = tf.Tensor.from_dlpack(source)
    source[0, 0] = 99.0  # the producer writes to its buffer: the tensor keeps its value
    np.testing.assert_array_equal(t.to_numpy(), want)


def test_tnp_arrays_give_their_value_without_a_copy_and_refuse_when_tracked(rng):
    x = rng.standard_normal((2, 2))
    with tnp.session():
        y = tnp.asarray(x) * 2
        a, b = np.asarray(y), np.from_dlpack(y)
        assert np.shares_memory(a, b) and not a.flags.writeable
        np.testing.assert_array_equal(b, 2 * x)

    def f(z):
        with pytest.raises(TrackedConversion, match="__dlpack__"):
            np.from_dlpack(z)
        np.testing.assert_array_equal(np.from_dlpack(tnp.stop_gradient(z)), x)
        return tnp.sum(z)

    tnp.grad(f)(x)


def test_tnp_from_dlpack_is_a_view_outside_a_session_and_a_constant_inside(rng):
    source = rng.standard_normal(3)
    outside = tnp.from_dlpack(source)
    assert type(outside) is np.ndarray and np.shares_memory(outside, source)

    def f(x):
        c = tnp.from_dlpack(source)
        assert isinstance(c, tnp.ndarray) and not c.tensor.is_tracked
        return tnp.sum(x * c)

    np.testing.assert_array_equal(tnp.grad(f)(np.ones(3)), source)


def test_pytorch_shares_and_gives_values(rng):
    torch = pytest.importorskip("torch")
    t = tf.Tensor(rng.standard_normal((2, 3)))
    shared = torch.from_dlpack(t)
    assert shared.data_ptr() == buffer_of(t).ctypes.data
    np.testing.assert_array_equal(shared.numpy(), t.to_numpy())
    with tnp.session():
        y = tnp.asarray(t.to_numpy()) + 1
        assert torch.from_dlpack(y).sum().item() == pytest.approx(float(np.sum(t.to_numpy() + 1)))
    source = torch.arange(6, dtype=torch.float64).reshape(2, 3) * (1 + 2j)
    np.testing.assert_array_equal(tf.Tensor.from_dlpack(source).to_numpy(), source.numpy())
    assert np.shares_memory(tnp.from_dlpack(source), source.numpy())
    assert not shared.requires_grad


def test_jax_takes_and_gives_values(rng):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    t = tf.Tensor(rng.standard_normal((3, 2)))
    np.testing.assert_array_equal(np.asarray(jax.numpy.from_dlpack(t)), t.to_numpy())
    with tnp.session():
        y = tnp.asarray(t.to_numpy()) * 3
        np.testing.assert_array_equal(np.asarray(jax.numpy.from_dlpack(y)), 3 * t.to_numpy())
        np.testing.assert_array_equal(np.asarray(jax.numpy.asarray(y)), 3 * t.to_numpy())
    source = jax.numpy.arange(4.0)
    np.testing.assert_array_equal(tf.Tensor.from_dlpack(source).to_numpy(), np.arange(4.0))
    view = tnp.from_dlpack(source)
    assert view.ctypes.data == source.unsafe_buffer_pointer()
