"""Tensor (column-major host data), EagerTensor basics, CpuEngine and Pool."""

import numpy as np
import pytest
from threadpoolctl import threadpool_info

import tenferro_py as tf


# --- Tensor: column-major ----------------------------------------------------------


def test_from_vec_col_major_reads_columns():
    t = tf.Tensor.from_vec_col_major([2, 3], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert t.shape == (2, 3) and t.ndim == 2 and t.size == 6
    assert t.dtype == np.float64
    np.testing.assert_array_equal(t.to_numpy(), [[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]])
    np.testing.assert_array_equal(t.as_slice(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])


@pytest.mark.parametrize("shape", [(4,), (2, 3), (2, 3, 4), (1, 5, 1)])
def test_as_slice_roundtrip(rng, shape):
    data = rng.standard_normal(int(np.prod(shape)))
    t = tf.Tensor.from_vec_col_major(list(shape), data)
    assert t.shape == shape
    np.testing.assert_array_equal(t.as_slice(), data)
    np.testing.assert_array_equal(t.to_numpy(), data.reshape(shape, order="F"))
    # from_numpy keeps NumPy's indexing; as_slice is then its Fortran-order flattening.
    u = tf.Tensor.from_numpy(t.to_numpy())
    np.testing.assert_array_equal(u.as_slice(), data)


def test_rank3_element_by_hand():
    t = tf.Tensor.from_vec_col_major([2, 3, 4], np.arange(24.0))
    a = t.to_numpy()
    for i, j, k in [(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 2, 3), (0, 2, 1)]:
        assert a[i, j, k] == i + 2 * j + 6 * k


def test_scalar_tensor():
    t = tf.Tensor.from_vec_col_major([], [2.5])
    assert t.shape == () and t.item() == 2.5
    s = tf.Tensor.scalar(1.5)
    assert s.shape == () and s.dtype == np.float64 and s.item() == 1.5
    assert tf.Tensor.scalar(1.5, np.float32).dtype == np.float32


def test_scalar_of_a_complex_number():
    z = tf.Tensor.scalar(1 + 2j)
    assert z.dtype == np.complex128 and z.item() == 1 + 2j
    assert tf.Tensor.scalar(np.complex64(1 - 1j)).dtype == np.complex128
    assert tf.Tensor.scalar(1 + 2j, np.complex64).dtype == np.complex64
    assert tf.Tensor.scalar(3, np.complex128).item() == 3 + 0j


# --- Tensor: immutable, and never the caller's memory -------------------------------


def _writes_to_the_source_change_nothing(make):
    for source in (np.ones((2, 3)), np.ones((3, 2)).T, np.asfortranarray(np.ones((2, 3))), np.ones((2, 3))[:, ::1]):
        t = make(source)
        before = t.to_numpy()
        source[0, 0] = 7.0  # the caller's array stays writable, and the tensor does not follow it
        np.testing.assert_array_equal(t.to_numpy(), before)


def test_tensor_holds_a_copy_of_the_callers_array():
    _writes_to_the_source_change_nothing(tf.Tensor)
    _writes_to_the_source_change_nothing(tf.Tensor.from_numpy)
    _writes_to_the_source_change_nothing(lambda a: tf.Tensor.from_vec_col_major(list(a.shape), a.ravel(order="F")))


def test_values_and_gradients_do_not_follow_the_callers_array(rt, eng):
    a = np.arange(4.0).reshape(2, 2)
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.mul(x, x)))
    g = rt.grad(eng, y, x)
    y.backward()
    a[:] = -1.0
    np.testing.assert_array_equal(x.value().to_numpy(), np.arange(4.0).reshape(2, 2))
    np.testing.assert_array_equal(g.value().to_numpy(), 2 * np.arange(4.0).reshape(2, 2))
    np.testing.assert_array_equal(x.grad().to_numpy(), 2 * np.arange(4.0).reshape(2, 2))
    assert y.item() == 14.0


def test_tensor_data_cannot_be_written_through_what_it_hands_out(rt, eng):
    t = tf.Tensor(np.ones(3))
    with pytest.raises(ValueError):
        t.as_slice()[0] = 5.0
    with pytest.raises(ValueError):
        np.asarray(rt.constant_from(t).value().as_slice())[0] = 5.0
    writable = t.to_numpy()
    writable[0] = 5.0  # a copy
    assert t.as_slice()[0] == 1.0


def test_empty_shape_dimension():
    t = tf.Tensor.from_vec_col_major([0, 3], [])
    assert t.shape == (0, 3) and t.size == 0


def test_dtypes():
    assert tf.Tensor.from_vec_col_major([2], [1, 2]).dtype == np.float64  # ints become float64
    assert tf.Tensor.from_vec_col_major([2], np.array([1, 2], np.float32)).dtype == np.float32
    assert tf.Tensor(np.array([True, False])).dtype == np.float64
    assert tf.Tensor(np.array([1j])).dtype == np.complex128
    assert tf.Tensor(np.array([1j], np.complex64)).dtype == np.complex64
    with pytest.raises(tf.DTypeMismatch):
        tf.Tensor(np.array(["a"]))


def test_tensor_is_immutable():
    data = np.array([[1.0, 2.0], [3.0, 4.0]])
    t = tf.Tensor.from_numpy(data)
    data[0, 0] = 99.0  # from_numpy copies
    assert t.to_numpy()[0, 0] == 1.0
    with pytest.raises(ValueError):
        t.as_slice()[0] = 5.0  # read-only view
    view = t.to_numpy()
    view[0, 0] = 7.0  # to_numpy is a writable copy
    assert t.to_numpy()[0, 0] == 1.0
    np.testing.assert_array_equal(np.asarray(t), [[1.0, 2.0], [3.0, 4.0]])


def test_from_vec_col_major_does_not_alias_input():
    data = np.arange(4.0)
    t = tf.Tensor.from_vec_col_major([2, 2], data)
    data[0] = 42.0
    assert t.as_slice()[0] == 0.0


# --- EagerTensor ------------------------------------------------------------------


def test_eager_tensor_properties(rt, eng):
    t = tf.Tensor.from_vec_col_major([2, 3], np.arange(6.0))
    x = rt.variable_from(t)
    c = rt.constant_from(t)
    assert x.shape == (2, 3) and x.dtype == np.float64 and x.ndim == 2
    assert x.is_tracked and x.is_leaf
    assert not c.is_tracked and not c.is_leaf
    assert x.runtime is rt and c.runtime is rt
    y = rt.with_eager_session(eng, lambda s: s.exp(x))
    assert y.is_tracked and not y.is_leaf
    assert "variable" in repr(x) and "constant" in repr(c) and "tracked" in repr(y)
    np.testing.assert_array_equal(x.value().as_slice(), np.arange(6.0))
    np.testing.assert_array_equal(c.to_tensor(eng).as_slice(), np.arange(6.0))
    assert rt.with_eager_session(eng, lambda s: s.reduce_sum(x)).item() == 15.0


def test_session_returns_f_result_and_exposes_engine(rt, eng):
    out = rt.with_eager_session(eng, lambda s: (s.engine, s.runtime, 7))
    assert out == (eng, rt, 7)


def test_session_reshape_keeps_column_major_data(rt, eng):
    t = tf.Tensor.from_vec_col_major([2, 3], np.arange(6.0))
    y = rt.with_eager_session(eng, lambda s: s.reshape(rt.variable_from(t), [3, 2]))
    np.testing.assert_array_equal(y.value().as_slice(), np.arange(6.0))
    np.testing.assert_array_equal(y.value().to_numpy(), np.arange(6.0).reshape(3, 2, order="F"))


def test_session_zeros_is_constant(rt, eng):
    z = rt.with_eager_session(eng, lambda s: s.zeros((2, 2)))
    assert not z.is_tracked
    np.testing.assert_array_equal(z.value().to_numpy(), np.zeros((2, 2)))


def test_host_tensor_accepted_as_operand(rt, eng):
    x = rt.variable_from(tf.Tensor.from_vec_col_major([2], [1.0, 2.0]))
    y = rt.with_eager_session(eng, lambda s: s.mul(x, tf.Tensor.from_vec_col_major([2], [3.0, 4.0])))
    np.testing.assert_array_equal(y.value().as_slice(), [3.0, 8.0])
    assert y.is_tracked


# --- CpuEngine and Pool -----------------------------------------------------------------


def test_pool_builder():
    from tenferro_py.engine import available_parallelism

    assert tf.Pool.builder().build().threads == available_parallelism()  # tenferro's default
    p = tf.Pool.builder().threads(3).build()
    assert isinstance(p, tf.Pool) and p.threads == 3
    assert isinstance(tf.Pool.builder(), tf.PoolBuilder)
    assert tf.Pool.builder().threads(4).threads(2).build().threads == 2


def test_cpu_engine_width():
    assert tf.CpuEngine.serial().width == 1
    assert tf.CpuEngine(tf.Pool.builder().threads(2).build()).width == 2


def _blas_threads():
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_serial_engine_runs_blas_on_one_thread(rt):
    before = _blas_threads()
    inside = rt.with_eager_session(tf.CpuEngine.serial(), lambda s: _blas_threads())
    assert inside and all(n == 1 for n in inside)
    assert _blas_threads() == before  # restored after the session


def test_engine_runs_kernels():
    """Width 1 runs a kernel at once; width 2 queues it and its outputs are Pending until read."""
    from tenferro_py.engine import Pending, resolve

    from tenferro_py.rules import Primitive
    from tenferro_py.tensor import Aval

    scalar = (Aval((), np.dtype(np.float64)),)
    add = Primitive("add", None, lambda a, b: (np.add(a, b),))
    costly_add = Primitive("add", None, lambda a, b: (np.add(a, b),), cost=lambda *_: 1e12)
    e = tf.CpuEngine.serial()
    (out,) = e.run(add, [2.0, 3.0], {}, scalar * 2, scalar)
    assert out == 5.0
    assert "width=1" in repr(e)
    wide = tf.CpuEngine(tf.Pool.builder().threads(2).build())
    with wide.active():
        (cheap,) = wide.run(add, [2.0, 3.0], {}, scalar * 2, scalar)  # ready and cheap: run in place
        assert not isinstance(cheap, Pending)
        (first,) = wide.run(costly_add, [2.0, 3.0], {}, scalar * 2, scalar)  # costly: to a worker
        (second,) = wide.run(add, [first, 1.0], {}, scalar * 2, scalar)  # runs once its input is done
        assert isinstance(first, Pending)
    assert resolve(second) == 6.0


def test_wide_engine_raises_kernel_errors_when_the_session_ends():
    def boom():
        raise FloatingPointError("kernel failed")

    from tenferro_py.rules import Primitive
    from tenferro_py.tensor import Aval

    failing = Primitive("boom", None, boom, cost=lambda *_: 1e12)
    wide = tf.CpuEngine(tf.Pool.builder().threads(2).build())
    with pytest.raises(FloatingPointError, match="kernel failed"):
        with wide.active():
            wide.run(failing, [], {}, (), (Aval((), np.dtype(np.float64)),))
