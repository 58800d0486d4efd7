"""Shape ops: forward values against NumPy references, derivatives by check_grads.

Semantics checked: reshape is column-major (NumPy order="F"); transpose's output
axis i is input axis perm[i]; broadcast_in_dim is StableHLO's (input axis i goes
to output axis dims[i], size 1 expands, dims need not be sorted); slice takes
starts (inclusive), limits (exclusive) and strides; reduce_sum removes the
reduced axes (None = all); pad is slice's transpose.
"""

import itertools

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py import SliceConfig
from tenferro_py.testing import check_grads


def _forward(rt, run, a, f):
    x = rt.variable_from(tf.Tensor(a))
    y = run(lambda s: f(s, x))
    return y, y.value().to_numpy()


# --- broadcast_in_dim ------------------------------------------------------------


def broadcast_reference(x, shape, dims):
    """StableHLO broadcast_in_dim, element by element."""
    out = np.empty(shape)
    for idx in itertools.product(*(range(n) for n in shape)):
        src = tuple(0 if x.shape[i] == 1 else idx[d] for i, d in enumerate(dims))
        out[idx] = x[src]
    return out


BROADCASTS = [
    ((3,), (2, 3), (1,)),
    ((3,), (3, 2), (0,)),
    ((2, 3), (3, 4, 2), (2, 0)),  # unsorted dims: a transpose as well
    ((2, 3), (2, 4, 3), (0, 2)),
    ((1, 3), (4, 3), (0, 1)),  # size-1 expansion
    ((3, 1), (2, 4, 3), (2, 1)),  # size-1 expansion with unsorted dims
    ((1, 1), (2, 3), (1, 0)),
    ((), (2, 3), ()),  # scalar
    ((2, 3), (2, 3), (0, 1)),  # identity
    ((2, 3, 2), (2, 2, 3), (1, 2, 0)),  # a pure permutation
]


@pytest.mark.parametrize("xshape,shape,dims", BROADCASTS)
def test_broadcast_in_dim_forward(rt, run, rng, xshape, shape, dims):
    a = rng.standard_normal(xshape)
    y, got = _forward(rt, run, a, lambda s, x: s.broadcast_in_dim(x, shape, dims))
    assert y.shape == shape
    np.testing.assert_array_equal(got, broadcast_reference(a, shape, dims))


@pytest.mark.parametrize("xshape,shape,dims", BROADCASTS)
def test_broadcast_in_dim_grads(rng, xshape, shape, dims):
    a = rng.standard_normal(xshape)
    check_grads(lambda s, x: s.broadcast_in_dim(x, shape, dims), [a], modes=("fwd", "rev"), order=2)


def test_broadcast_in_dim_vjp_sums_expanded_axes(rt, eng, rng):
    a = rng.standard_normal((3, 1))
    w = rng.standard_normal((2, 4, 3))
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: s.broadcast_in_dim(x, (2, 4, 3), (2, 1)))
    g = rt.vjp(eng, y, x, tf.Tensor(w)).value().to_numpy()
    np.testing.assert_allclose(g, w.sum(axis=(0, 1))[:, None], rtol=1e-14)


@pytest.mark.parametrize(
    "xshape,shape,dims",
    [((5,), (5, 0), (0,)), ((5,), (0, 5), (1,)), ((5,), (5, 0, 3), (0,)), ((1, 3), (0, 3), (0, 1)),
     ((2, 0), (2, 4, 0), (0, 2))],
)
def test_broadcast_to_an_empty_axis_differentiates_to_zeros(rt, eng, rng, xshape, shape, dims):
    """Nothing of x reaches the output: the VJP is zeros of x's shape, the JVP an empty tensor."""
    x = rt.variable_from(tf.Tensor(rng.standard_normal(xshape)))
    y = rt.with_eager_session(eng, lambda s: s.broadcast_in_dim(x, shape, dims))
    assert y.shape == shape
    g = rt.vjp(eng, y, x, tf.Tensor(np.zeros(shape))).value().to_numpy()
    np.testing.assert_array_equal(g, np.zeros(xshape))
    total = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.broadcast_in_dim(x, shape, dims)))
    np.testing.assert_array_equal(rt.grad(eng, total, x).value().to_numpy(), np.zeros(xshape))
    assert rt.jvp(eng, y, x, tf.Tensor(np.ones(xshape))).shape == shape


# --- reduce_sum ---------------------------------------------------------------------

REDUCTIONS = [
    ((4,), None),
    ((4,), (0,)),
    ((2, 3), None),
    ((2, 3), (0,)),
    ((2, 3), (1,)),
    ((2, 3), (0, 1)),
    ((2, 3, 4), (0, 2)),
    ((2, 3, 4), (2, 0)),  # unsorted
    ((2, 3, 4), (1,)),
    ((2, 3, 4), ()),  # nothing reduced
    ((2, 3, 4), None),
]


@pytest.mark.parametrize("xshape,axes", REDUCTIONS)
def test_reduce_sum_forward(rt, run, rng, xshape, axes):
    a = rng.standard_normal(xshape)
    y, got = _forward(rt, run, a, lambda s, x: s.reduce_sum(x, axes))
    want = np.sum(a, axis=None if axes is None else tuple(axes))
    assert y.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)


def test_reduce_sum_default_axes_is_all(rt, run, rng):
    a = rng.standard_normal((2, 3))
    y, got = _forward(rt, run, a, lambda s, x: s.reduce_sum(x))
    assert y.shape == ()
    np.testing.assert_allclose(got, a.sum(), rtol=1e-14)


@pytest.mark.parametrize("xshape,axes", REDUCTIONS)
def test_reduce_sum_grads(rng, xshape, axes):
    a = rng.standard_normal(xshape)
    check_grads(lambda s, x: s.reduce_sum(x, axes), [a], modes=("fwd", "rev"), order=2)


# --- transpose ---------------------------------------------------------------------

TRANSPOSES = [
    ((2, 3), (1, 0)),
    ((2, 3), (0, 1)),
    ((2, 3, 4), (2, 0, 1)),
    ((2, 3, 4), (1, 2, 0)),
    ((2, 3, 4, 5), (3, 1, 0, 2)),
]


@pytest.mark.parametrize("xshape,perm", TRANSPOSES)
def test_transpose_forward(rt, run, rng, xshape, perm):
    a = rng.standard_normal(xshape)
    y, got = _forward(rt, run, a, lambda s, x: s.transpose(x, perm))
    assert y.shape == tuple(xshape[p] for p in perm)  # output axis i is input axis perm[i]
    np.testing.assert_array_equal(got, np.transpose(a, perm))
    # One element by hand: out[i0, i1, ...] = a[j] with j[perm[k]] = i_k.
    idx = tuple(n - 1 for n in y.shape)
    src = [0] * len(perm)
    for k, p in enumerate(perm):
        src[p] = idx[k]
    assert got[idx] == a[tuple(src)]


@pytest.mark.parametrize("xshape,perm", TRANSPOSES)
def test_transpose_grads(rng, xshape, perm):
    a = rng.standard_normal(xshape)
    check_grads(lambda s, x: s.transpose(x, perm), [a], modes=("fwd", "rev"), order=2)


# --- reshape (column-major) -----------------------------------------------------

RESHAPES = [
    ((2, 3), (3, 2)),
    ((2, 3), (6,)),
    ((6,), (2, 3)),
    ((2, 3, 4), (6, 4)),
    ((2, 3, 4), (2, 12)),
    ((2, 3, 4), (4, 3, 2)),
    ((1, 1), ()),
    ((), (1, 1, 1)),
]


@pytest.mark.parametrize("xshape,shape", RESHAPES)
def test_reshape_forward_is_column_major(rt, run, rng, xshape, shape):
    a = rng.standard_normal(xshape)
    y, got = _forward(rt, run, a, lambda s, x: s.reshape(x, shape))
    assert y.shape == shape
    np.testing.assert_array_equal(got, np.reshape(a, shape, order="F"))
    # The column-major flat data is unchanged by a reshape.
    np.testing.assert_array_equal(y.value().as_slice(), tf.Tensor.from_numpy(a).as_slice())


def test_reshape_is_not_row_major(rt, run):
    t = tf.Tensor.from_vec_col_major([2, 3], [1.0, 2, 3, 4, 5, 6])  # columns (1,2), (3,4), (5,6)
    y = run(lambda s: s.reshape(rt.variable_from(t), [3, 2]))
    np.testing.assert_array_equal(y.value().to_numpy(), [[1.0, 4], [2, 5], [3, 6]])
    np.testing.assert_array_equal(y.value().as_slice(), [1.0, 2, 3, 4, 5, 6])


@pytest.mark.parametrize("xshape,shape", RESHAPES)
def test_reshape_grads(rng, xshape, shape):
    a = rng.standard_normal(xshape)
    check_grads(lambda s, x: s.reshape(x, shape), [a], modes=("fwd", "rev"), order=2)


@pytest.mark.parametrize("xshape,shape", RESHAPES)
def test_row_major_reshape_is_numpys(rt, run, rng, xshape, shape):
    a = rng.standard_normal(xshape)
    y, got = _forward(rt, run, a, lambda s, x: s.reshape(x, shape, "C"))
    np.testing.assert_array_equal(got, np.reshape(a, shape))
    check_grads(lambda s, x: s.reshape(x, shape, "C"), [a], modes=("fwd", "rev"), order=2)


def test_reshape_order_is_checked(run):
    with pytest.raises(tf.InvalidArgument, match=r"^reshape: expected order 'F' \(column-major\) or 'C'"):
        run(lambda s: s.reshape(tf.Tensor(np.ones(4)), (2, 2), "A"))


# --- slice --------------------------------------------------------------------------

SLICES = [
    ((5,), [1], [4], None),
    ((5,), [0], [5], [2]),
    ((5, 6), [1, 0], [5, 6], [2, 3]),
    ((5, 6), [0, 2], [3, 6], None),
    ((4, 5, 3), [1, 0, 2], [4, 5, 3], [1, 2, 1]),
    ((4, 5, 3), [0, 1, 0], [4, 4, 3], [3, 2, 2]),
    ((4, 3), [0, 0], [4, 3], [1, 1]),  # the whole tensor
]


@pytest.mark.parametrize("xshape,starts,limits,strides", SLICES)
def test_slice_forward(rt, run, rng, xshape, starts, limits, strides):
    a = rng.standard_normal(xshape)
    cfg = SliceConfig(starts, limits, strides)
    y, got = _forward(rt, run, a, lambda s, x: s.slice(x, cfg))
    steps = strides or [1] * len(xshape)
    want = a[tuple(slice(b, e, d) for b, e, d in zip(starts, limits, steps))]
    assert y.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_slice_limits_are_exclusive(rt, run):
    t = tf.Tensor.from_numpy(np.arange(10.0))
    y = run(lambda s: s.slice(rt.variable_from(t), SliceConfig([2], [7], [2])))
    np.testing.assert_array_equal(y.value().to_numpy(), [2.0, 4.0, 6.0])


@pytest.mark.parametrize("xshape,starts,limits,strides", SLICES)
def test_slice_grads(rng, xshape, starts, limits, strides):
    a = rng.standard_normal(xshape)
    cfg = SliceConfig(starts, limits, strides)
    check_grads(lambda s, x: s.slice(x, cfg), [a], modes=("fwd", "rev"), order=2)


@pytest.mark.parametrize("xshape,starts,limits,strides", SLICES)
def test_slice_vjp_is_zero_padding(rt, eng, rng, xshape, starts, limits, strides):
    a = rng.standard_normal(xshape)
    x = rt.variable_from(tf.Tensor(a))
    cfg = SliceConfig(starts, limits, strides)
    y = rt.with_eager_session(eng, lambda s: s.slice(x, cfg))
    w = rng.standard_normal(y.shape)
    g = rt.vjp(eng, y, x, tf.Tensor(w)).value().to_numpy()
    steps = strides or [1] * len(xshape)
    want = np.zeros(xshape)
    want[tuple(slice(b, e, d) for b, e, d in zip(starts, limits, steps))] = w
    np.testing.assert_array_equal(g, want)


def test_slice_then_op_grads(rng):
    """A slice's (embedded) cotangent flowing into ordinary ops and summed with another."""
    a = rng.standard_normal((4, 5))

    def f(s, x):
        top = s.slice(x, SliceConfig([0, 0], [2, 5]))
        also = s.slice(x, SliceConfig([0, 0], [2, 5]))
        other = s.slice(x, SliceConfig([1, 0], [3, 5]))
        return s.add(s.mul(s.exp(top), also), s.mul(other, other))

    check_grads(f, [a], modes=("fwd", "rev"), order=2)


# --- pad ----------------------------------------------------------------------------

PADS = [
    ((3,), (6,), (1,), None),
    ((2, 3), (5, 7), (1, 0), (2, 3)),
    ((2, 2, 2), (3, 4, 5), (0, 1, 1), (1, 2, 3)),
]


@pytest.mark.parametrize("xshape,shape,starts,strides", PADS)
def test_pad_forward(rt, run, rng, xshape, shape, starts, strides):
    a = rng.standard_normal(xshape)
    y, got = _forward(rt, run, a, lambda s, x: s.pad(x, shape, starts, strides))
    steps = strides or (1,) * len(xshape)
    want = np.zeros(shape)
    want[tuple(slice(b, b + (n - 1) * d + 1, d) for b, n, d in zip(starts, xshape, steps))] = a
    assert y.shape == shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("xshape,shape,starts,strides", PADS)
def test_pad_grads(rng, xshape, shape, starts, strides):
    a = rng.standard_normal(xshape)
    check_grads(lambda s, x: s.pad(x, shape, starts, strides), [a], modes=("fwd", "rev"), order=2)


# --- compositions -----------------------------------------------------------------


def test_shape_ops_chain_grads(rng):
    a = rng.standard_normal((2, 3, 4))

    def f(s, x):
        t = s.transpose(x, (2, 0, 1))  # (4, 2, 3)
        r = s.reshape(t, (8, 3))
        c = s.slice(r, SliceConfig([1, 0], [8, 3], [2, 1]))  # (4, 3)
        b = s.broadcast_in_dim(c, (3, 2, 4), (2, 0))
        return s.reduce_sum(s.mul(b, b), (1,))

    check_grads(f, [a], modes=("fwd", "rev"), order=2)


def test_float32_shape_ops_keep_dtype(rt, run, rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    x = rt.variable_from(tf.Tensor(a))
    outs = run(
        lambda s: [
            s.reshape(x, (3, 2)),
            s.transpose(x, (1, 0)),
            s.reduce_sum(x, (0,)),
            s.broadcast_in_dim(x, (2, 2, 3), (0, 2)),
            s.slice(x, SliceConfig([0, 1], [2, 3])),
        ]
    )
    assert all(o.dtype == np.float32 for o in outs)


def test_reshape_to_the_same_shape_is_the_tensor_itself(rt, eng, rng):
    """tenferro code reshapes SVD factors to their own (concrete) shape before slicing:
    here that is a no-op, so the slice's sparse cotangent still reaches the SVD rule."""
    x = rt.variable_from(tf.Tensor(rng.standard_normal((4, 3))))
    assert rt.with_eager_session(eng, lambda s: s.reshape(x, (4, 3))) is x


# --- concatenate ----------------------------------------------------------------------


@pytest.mark.parametrize("shapes, axis", [(((2, 3), (4, 3)), 0), (((2, 3), (2, 1), (2, 2)), 1), (((3,),), 0)])
def test_concatenate_forward_and_grads(rt, run, rng, shapes, axis):
    arrays = [rng.standard_normal(shape) for shape in shapes]
    xs = [rt.variable_from(tf.Tensor(a)) for a in arrays]
    y = run(lambda s: s.concatenate(xs, axis))
    np.testing.assert_array_equal(y.value().to_numpy(), np.concatenate(arrays, axis=axis))
    check_grads(lambda s, *zs: s.concatenate(list(zs), axis), arrays, order=2)
    complex_arrays = [a + 1j * rng.standard_normal(a.shape) for a in arrays]
    check_grads(lambda s, *zs: s.concatenate(list(zs), axis), complex_arrays, order=1)


def test_concatenate_errors(rt, run):
    a = rt.constant_from(tf.Tensor(np.ones((2, 3))))
    with pytest.raises(tf.ShapeMismatch, match="concatenate: expected shapes that differ only on axis 0"):
        run(lambda s: s.concatenate([a, rt.constant_from(tf.Tensor(np.ones((2, 2))))], 0))
    with pytest.raises(tf.DTypeMismatch, match="concatenate: expected operands of one dtype"):
        run(lambda s: s.concatenate([a, rt.constant_from(tf.Tensor(np.ones((2, 3), np.float32)))], 0))
    with pytest.raises(tf.InvalidArgument, match="concatenate: expected axis in \\[0, 2\\)"):
        run(lambda s: s.concatenate([a, a], 2))
    with pytest.raises(tf.InvalidArgument, match="concatenate: expected a non-empty list"):
        run(lambda s: s.concatenate([], 0))


# --- rev, take, scatter_add, convert ---------------------------------------------------------


@pytest.mark.parametrize("axes", [(0,), (1,), (0, 2), ()])
def test_rev(rt, run, rng, axes):
    a = rng.standard_normal((2, 3, 4))
    y = run(lambda s: s.rev(rt.constant_from(tf.Tensor(a)), axes))
    np.testing.assert_array_equal(y.value().to_numpy(), np.flip(a, axes))
    check_grads(lambda s, x: s.rev(x, axes), [a], order=2)


@pytest.mark.parametrize("indices, axis", [([0, 2, 2, -1], 1), ([1], 0), ([], 2), ([3, 0, 3, 3], 2)])
def test_take_and_its_transpose_scatter_add(rt, run, rng, indices, axis):
    a = rng.standard_normal((2, 3, 4))
    y = run(lambda s: s.take(rt.constant_from(tf.Tensor(a)), indices, axis))
    np.testing.assert_array_equal(y.value().to_numpy(), np.take(a, indices, axis))
    check_grads(lambda s, x: s.take(x, indices, axis), [a], order=2)
    b = rng.standard_normal(y.shape)
    z = run(lambda s: s.scatter_add(rt.constant_from(tf.Tensor(b)), indices, axis, a.shape[axis]))
    expected = np.zeros(a.shape)
    np.add.at(np.moveaxis(expected, axis, 0), indices, np.moveaxis(b, axis, 0))
    np.testing.assert_array_equal(z.value().to_numpy(), expected)  # repeated indices add up
    check_grads(lambda s, x: s.scatter_add(x, indices, axis, a.shape[axis]), [b], order=2)


@pytest.mark.parametrize("source, target", [(np.float64, np.float32), (np.float32, np.float64),
                                            (np.float64, np.complex128), (np.complex128, np.complex64)])
def test_convert(rt, run, rng, source, target):
    a = rng.standard_normal((2, 3)).astype(source)
    y = run(lambda s: s.convert(rt.constant_from(tf.Tensor(a)), target))
    assert y.dtype == target
    np.testing.assert_array_equal(y.value().to_numpy(), a.astype(target))
    if np.dtype(source).itemsize <= np.dtype(target).itemsize or np.dtype(target).kind == "c":
        x = rt.variable_from(tf.Tensor(a))
        out = rt.with_eager_session(tf.CpuEngine.serial(), lambda s: s.convert(x, target))
        w = (rng.standard_normal((2, 3)) + (1j * rng.standard_normal((2, 3)) if np.dtype(target).kind == "c" else 0))
        g = rt.vjp(tf.CpuEngine.serial(), out, x, tf.Tensor(w.astype(target))).value().to_numpy()
        np.testing.assert_allclose(g, (w.real if np.dtype(source).kind == "f" else w).astype(source), rtol=1e-6)


def test_index_op_errors(run):
    x = tf.Tensor(np.ones((2, 3)))
    with pytest.raises(tf.InvalidArgument, match=r"^take: expected indices in \[-3, 3\) \(axis 1 of size 3\), got \[3\]"):
        run(lambda s: s.take(x, [0, 3], 1))
    with pytest.raises(tf.InvalidArgument, match=r"^take: expected indices: a sequence of ints"):
        run(lambda s: s.take(x, [0.5], 1))
    with pytest.raises(tf.ShapeMismatch, match=r"^scatter_add: expected axis 1 of size 2"):
        run(lambda s: s.scatter_add(x, [0, 1], 1, 4))
    with pytest.raises(tf.DTypeMismatch, match=r"^convert: expected a complex dtype for complex input"):
        run(lambda s: s.convert(tf.Tensor(np.ones(2, np.complex128)), np.float64))
    with pytest.raises(tf.DTypeMismatch, match=r"^convert: expected float64, float32, complex128 or complex64"):
        run(lambda s: s.convert(x, np.int32))
