"""Every misuse is a clear exception: the library's class, the fitting built-in
class (ValueError / TypeError, see errors.py), and a message naming the op and
what was got.
"""

import math

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py import SliceConfig


def T(a, dtype=np.float64):
    return tf.Tensor(np.array(a, dtype=dtype))


def expect(exc_info, cls, builtin, *fragments):
    """The raised exception is cls and builtin, and its message holds every fragment."""
    err = exc_info.value
    assert type(err) is cls, f"{type(err).__name__} is not {cls.__name__}"
    assert isinstance(err, tf.TenferroError)
    if builtin is not None:
        assert isinstance(err, builtin)
    msg = str(err)
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in {msg!r}"


def test_error_classes_subclass_builtins():
    for cls in (tf.ShapeMismatch, tf.InvalidArgument, tf.NonScalarGrad, tf.NotReachable, tf.RuntimeMismatch):
        assert issubclass(cls, ValueError) and issubclass(cls, tf.TenferroError)
    assert issubclass(tf.DTypeMismatch, TypeError)
    assert issubclass(tf.Unsupported, NotImplementedError)
    err = tf.ShapeMismatch("someop", "this", "that")
    assert (err.op, err.expected, err.got) == ("someop", "this", "that")
    assert str(err) == "someop: expected this, got that"


# --- Tensor ------------------------------------------------------------------------


def test_from_vec_col_major_length_mismatch():
    with pytest.raises(ValueError) as info:
        tf.Tensor.from_vec_col_major([2, 3], [1.0, 2, 3, 4, 5])
    expect(info, tf.ShapeMismatch, ValueError, "Tensor.from_vec_col_major", "6 elements", "5 elements")
    with pytest.raises(tf.ShapeMismatch) as info:
        tf.Tensor.from_vec_col_major([2, 2], np.arange(7.0))
    expect(info, tf.ShapeMismatch, ValueError, "from_vec_col_major", "7 elements")


def test_from_vec_col_major_bad_shape_and_dtype():
    with pytest.raises(tf.InvalidArgument) as info:
        tf.Tensor.from_vec_col_major([2, -1], [1.0, 2.0])
    expect(info, tf.InvalidArgument, ValueError, "from_vec_col_major", "-1")
    with pytest.raises(TypeError) as info:
        tf.Tensor.from_vec_col_major([2], np.array([1.0, 2.0], dtype=np.float16))
    expect(info, tf.DTypeMismatch, TypeError, "from_vec_col_major", "float16")
    assert tf.Tensor.from_vec_col_major([2], [1 + 1j, 2.0]).dtype == np.complex128


@pytest.mark.parametrize(
    "make, cls, fragments",
    [
        (lambda: tf.Tensor([[1.0, 2.0], [3.0]]), tf.InvalidArgument, ("Tensor", "rectangular numeric data", "list")),
        (lambda: tf.Tensor([1.0, "x"]), tf.DTypeMismatch, ("Tensor", "<U32")),
        (lambda: tf.Tensor(object()), tf.DTypeMismatch, ("Tensor", "object")),
        (lambda: tf.Tensor.from_numpy([[1.0], [2.0, 3.0]]), tf.InvalidArgument, ("Tensor.from_numpy", "rectangular")),
        (lambda: tf.Tensor.scalar("abc"), tf.InvalidArgument, ("Tensor.scalar", "a real or complex number", "'abc'")),
        (lambda: tf.Tensor.scalar(None), tf.InvalidArgument, ("Tensor.scalar", "None")),
        (lambda: tf.Tensor.scalar(True), tf.InvalidArgument, ("Tensor.scalar", "True")),
        (lambda: tf.Tensor.scalar(1 + 2j, np.float64), tf.DTypeMismatch, ("Tensor.scalar", "a real number", "(1+2j)")),
        (lambda: tf.Tensor.scalar(1.0, np.int32), tf.DTypeMismatch, ("Tensor.scalar", "int32")),
        (lambda: tf.Tensor.scalar(1.0, "not a dtype"), tf.DTypeMismatch, ("Tensor.scalar", "'not a dtype'")),
        (lambda: tf.Tensor.from_vec_col_major([2**40, 2**40], [1.0]), tf.ShapeMismatch,
         ("Tensor.from_vec_col_major", "1208925819614629174706176 elements", "got 1 elements")),
        (lambda: tf.Tensor.from_vec_col_major([2**62, 4], np.ones(8)), tf.ShapeMismatch,
         ("Tensor.from_vec_col_major", str(2**64), "got 8 elements")),
        (lambda: tf.Tensor.from_vec_col_major([2], [[1.0], [2.0, 3.0]]), tf.InvalidArgument,
         ("Tensor.from_vec_col_major", "rectangular")),
    ],
)
def test_constructors_raise_library_errors(make, cls, fragments):
    with pytest.raises(tf.TenferroError) as info:
        make()
    expect(info, cls, None, *fragments)


def test_item_of_non_scalar():
    with pytest.raises(tf.ShapeMismatch) as info:
        T([1.0, 2.0]).item()
    expect(info, tf.ShapeMismatch, ValueError, "item", "[2]")


# --- elementwise: shapes and dtypes --------------------------------------------------


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary_shape_mismatch(rt, run, op):
    a, b = rt.constant_from(T(np.ones((2, 3)))), rt.constant_from(T(np.ones((3, 2))))
    with pytest.raises(ValueError) as info:
        run(lambda s: getattr(s, op)(a, b))
    expect(info, tf.ShapeMismatch, ValueError, op, "[2, 3]", "[3, 2]")


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary_dtype_mismatch(rt, run, op):
    a = rt.variable_from(T(np.ones(3)))
    b = rt.constant_from(T(np.ones(3), np.float32))
    with pytest.raises(TypeError) as info:
        run(lambda s: getattr(s, op)(a, b))
    expect(info, tf.DTypeMismatch, TypeError, op, "float32", "float64")


@pytest.mark.parametrize("alpha", ["2", None, 1j, True])
def test_scale_real_bad_alpha(rt, run, alpha):
    x = rt.variable_from(T([1.0]))
    with pytest.raises(tf.InvalidArgument) as info:
        run(lambda s: s.scale_real(x, alpha))
    expect(info, tf.InvalidArgument, ValueError, "scale_real", repr(alpha))


def test_op_on_non_tensor(rt, run):
    with pytest.raises(tf.InvalidArgument) as info:
        run(lambda s: s.exp(np.ones(3)))
    expect(info, tf.InvalidArgument, ValueError, "exp", "ndarray")


# --- shape ops ----------------------------------------------------------------------


@pytest.mark.parametrize("axes,got", [((2,), "[2]"), ((0, 0), "[0, 0]"), ((1, 5), "[1, 5]")])
def test_reduce_sum_bad_axes(rt, run, axes, got):
    x = rt.variable_from(T(np.ones((2, 3))))
    with pytest.raises(ValueError) as info:
        run(lambda s: s.reduce_sum(x, axes))
    expect(info, tf.InvalidArgument, ValueError, "reduce_sum", got)


@pytest.mark.parametrize(
    "perm,got",
    [((0, 3, 1), "[0, 3, 1]"), ((0, 0, 1), "[0, 0, 1]"), ((1, 0), "[1, 0]"), ((2, 0, 1, 3), "[2, 0, 1, 3]")],
)
def test_transpose_bad_perm(rt, run, perm, got):
    """Out of range, repeated, too short, too long."""
    x = rt.variable_from(T(np.ones((2, 3, 4))))
    with pytest.raises(ValueError) as info:
        run(lambda s: s.transpose(x, perm))
    expect(info, tf.InvalidArgument, ValueError, "transpose", got)


@pytest.mark.parametrize(
    "shape,dims,got",
    [
        ((2, 3), (0, 2), "[0, 2]"),  # out of range
        ((3, 3), (1, 1), "[1, 1]"),  # repeated
        ((2, 3, 4), (1,), "[1]"),  # one dim for a rank-2 input
        ((2, 3, 4), (0, 1, 2), "[0, 1, 2]"),  # too many dims
    ],
)
def test_broadcast_in_dim_bad_dims(rt, run, shape, dims, got):
    x = rt.variable_from(T(np.ones((2, 3))))
    with pytest.raises(ValueError) as info:
        run(lambda s: s.broadcast_in_dim(x, shape, dims))
    expect(info, tf.InvalidArgument, ValueError, "broadcast_in_dim", got)


def test_broadcast_in_dim_size_mismatch(rt, run):
    x = rt.variable_from(T(np.ones((2, 3))))
    with pytest.raises(ValueError) as info:
        run(lambda s: s.broadcast_in_dim(x, (2, 4), (0, 1)))
    expect(info, tf.ShapeMismatch, ValueError, "broadcast_in_dim", "size 3")


@pytest.mark.parametrize("shape,got", [((4, 2), "[4, 2]"), ((7,), "[7]"), ((), "[]")])
def test_reshape_bad_size(rt, run, shape, got):
    x = rt.variable_from(T(np.ones((2, 3))))
    with pytest.raises(ValueError) as info:
        run(lambda s: s.reshape(x, shape))
    expect(info, tf.ShapeMismatch, ValueError, "reshape", "6 elements", got)


def test_reshape_negative_dim(rt, run):
    x = rt.variable_from(T(np.ones((2, 3))))
    with pytest.raises(tf.InvalidArgument) as info:
        run(lambda s: s.reshape(x, (-1, 3)))
    expect(info, tf.InvalidArgument, ValueError, "reshape", "-1")


@pytest.mark.parametrize(
    "cfg,got",
    [
        (SliceConfig([0, 0], [5, 3]), "limit 5"),  # limit past the end
        (SliceConfig([3, 0], [2, 3]), "start 3, limit 2"),  # start after limit
        (SliceConfig([0, 0], [4, 3], [1, 0]), "stride 0"),
        (SliceConfig([0, 0], [4, 3], [-1, 1]), "-1"),
        (SliceConfig([-1, 0], [4, 3]), "-1"),
        (SliceConfig([0], [4]), "[0]"),  # one start for two axes
        (SliceConfig([0, 0], [4, 3], [1]), "[1]"),  # one stride for two axes
    ],
)
def test_slice_bad_bounds_and_strides(rt, run, cfg, got):
    x = rt.variable_from(T(np.ones((4, 3))))
    with pytest.raises(ValueError) as info:
        run(lambda s: s.slice(x, cfg))
    expect(info, tf.InvalidArgument, ValueError, "slice", got)


def test_slice_needs_slice_config(rt, run):
    x = rt.variable_from(T(np.ones(4)))
    with pytest.raises(tf.InvalidArgument) as info:
        run(lambda s: s.slice(x, ([0], [2])))
    expect(info, tf.InvalidArgument, ValueError, "slice", "tuple")


def test_pad_out_of_bounds(rt, run):
    x = rt.variable_from(T(np.ones(3)))
    with pytest.raises(tf.InvalidArgument) as info:
        run(lambda s: s.pad(x, (4,), (2,)))
    expect(info, tf.InvalidArgument, ValueError, "pad", "out of bounds")


# --- einsum ------------------------------------------------------------------------------


@pytest.fixture
def mats(rt):
    return rt.variable_from(T(np.ones((2, 3)))), rt.variable_from(T(np.ones((3, 4))))


def test_einsum_wrong_operand_count(run, mats):
    a, b = mats
    with pytest.raises(ValueError) as info:
        run(lambda s: s.einsum([a], "ij,jk->ik"))
    expect(info, tf.InvalidArgument, ValueError, "einsum", "2 operands", "got 1")
    with pytest.raises(tf.InvalidArgument) as info:
        run(lambda s: s.einsum([a, b, a], "ij,jk->ik"))
    expect(info, tf.InvalidArgument, ValueError, "einsum", "got 3")


def test_einsum_rank_mismatch(run, mats):
    a, b = mats
    with pytest.raises(ValueError) as info:
        run(lambda s: s.einsum([a, b], "ijk,jk->i"))
    expect(info, tf.ShapeMismatch, ValueError, "einsum", "'ijk'", "[2, 3]")


def test_einsum_inconsistent_index_sizes(run, mats):
    a, b = mats
    with pytest.raises(ValueError) as info:
        run(lambda s: s.einsum([a, b], "ij,kj->ik"))  # j is 3 in a, 4 in b
    expect(info, tf.ShapeMismatch, ValueError, "einsum", "'j'", "4")
    with pytest.raises(tf.ShapeMismatch) as info:
        run(lambda s: s.einsum([a], "ii->i"))  # a diagonal of a 2×3 matrix
    expect(info, tf.ShapeMismatch, ValueError, "einsum", "'i'", "3")


@pytest.mark.parametrize("subscripts,got", [("ij,jk->iz", "'iz'"), ("ij,jk->ii", "'ii'")])
def test_einsum_bad_output(run, mats, subscripts, got):
    a, b = mats
    with pytest.raises(ValueError) as info:
        run(lambda s: s.einsum([a, b], subscripts))
    expect(info, tf.InvalidArgument, ValueError, "einsum", got)


@pytest.mark.parametrize(
    "subscripts,got",
    [
        (".j,jk->k", "'.j'"),  # a dot that is not part of an ellipsis
        ("i1,1k->ik", "i1"),  # digits
        ("i_,_k->ik", "i_"),  # other characters
        ("ij,jk->ik->ik", "->"),  # two arrows
    ],
)
def test_einsum_bad_subscripts(run, mats, subscripts, got):
    a, b = mats
    with pytest.raises(ValueError) as info:
        run(lambda s: s.einsum([a, b], subscripts))
    expect(info, tf.InvalidArgument, ValueError, "einsum", got)


def test_einsum_non_str_subscripts_and_empty_operands(run, mats):
    a, b = mats
    with pytest.raises(tf.InvalidArgument) as info:
        run(lambda s: s.einsum([a, b], ["ij", "jk"]))
    expect(info, tf.InvalidArgument, ValueError, "einsum", "['ij', 'jk']")
    with pytest.raises(tf.InvalidArgument) as info:
        run(lambda s: s.einsum([], "->"))
    expect(info, tf.InvalidArgument, ValueError, "einsum", "[]")


def test_einsum_dtype_mismatch(rt, run):
    a = rt.variable_from(T(np.ones((2, 3))))
    b = rt.constant_from(T(np.ones((3, 4)), np.float32))
    with pytest.raises(TypeError) as info:
        run(lambda s: s.einsum([a, b], "ij,jk->ik"))
    expect(info, tf.DTypeMismatch, TypeError, "einsum", "float32", "float64")


# --- svd ------------------------------------------------------------------------------


def test_svd_of_non_matrix(rt, run):
    x = rt.variable_from(T(np.ones(4)))
    with pytest.raises(ValueError) as info:
        run(lambda s: s.svd(x))
    expect(info, tf.ShapeMismatch, ValueError, "svd", "[4]")


@pytest.mark.parametrize("eps", [0, -1, math.nan, math.inf, -math.inf, "x", True])
def test_bad_derivative_eps_on_builder(eps):
    with pytest.raises(ValueError) as info:
        tf.AdContext.builder().with_derivative_eps(eps)
    expect(info, tf.InvalidArgument, ValueError, "with_derivative_eps", "derivative_eps", repr(eps))
    with pytest.raises(tf.InvalidArgument) as info:
        tf.AdContext(derivative_eps=eps)
    expect(info, tf.InvalidArgument, ValueError, "AdContext", repr(eps))


@pytest.mark.parametrize("eps", [0, -1, math.nan, math.inf, -math.inf, "x", True])
def test_bad_derivative_eps_per_call(rt, run, eps):
    x = rt.variable_from(T(np.eye(2)))
    with pytest.raises(ValueError) as info:
        run(lambda s: s.svd(x, derivative_eps=eps))
    expect(info, tf.InvalidArgument, ValueError, "svd", "derivative_eps", repr(eps))


# --- transforms: seeds, cotangents, tangents, wrt ------------------------------------


@pytest.fixture
def graph(rt, eng):
    """x (2, 3) variable, y = exp(x) (2, 3), z = Σ y scalar."""
    x = rt.variable_from(T(np.ones((2, 3))))
    y = rt.with_eager_session(eng, lambda s: s.exp(x))
    z = rt.with_eager_session(eng, lambda s: s.reduce_sum(y))
    return x, y, z


@pytest.mark.parametrize("fn", ["vjp", "vjp_optional"])
def test_cotangent_wrong_shape(rt, eng, graph, fn):
    x, y, _ = graph
    with pytest.raises(ValueError) as info:
        getattr(rt, fn)(eng, y, x, T(np.ones((3, 2))))
    expect(info, tf.ShapeMismatch, ValueError, fn, "cotangent", "[2, 3]", "[3, 2]")


@pytest.mark.parametrize("fn", ["vjp", "vjp_optional"])
def test_cotangent_wrong_dtype(rt, eng, graph, fn):
    x, y, _ = graph
    with pytest.raises(TypeError) as info:
        getattr(rt, fn)(eng, y, x, T(np.ones((2, 3)), np.float32))
    expect(info, tf.DTypeMismatch, TypeError, fn, "cotangent", "float32")


@pytest.mark.parametrize("fn", ["jvp", "jvp_optional"])
def test_tangent_wrong_shape_and_dtype(rt, eng, graph, fn):
    x, y, _ = graph
    with pytest.raises(ValueError) as info:
        getattr(rt, fn)(eng, y, x, T(np.ones(6)))
    expect(info, tf.ShapeMismatch, ValueError, fn, "tangent", "[2, 3]", "[6]")
    with pytest.raises(TypeError) as info:
        getattr(rt, fn)(eng, y, x, T(np.ones((2, 3)), np.float32))
    expect(info, tf.DTypeMismatch, TypeError, fn, "tangent", "float32")


def test_tangent_count_mismatch(rt, eng, graph):
    x, y, _ = graph
    with pytest.raises(tf.InvalidArgument) as info:
        rt.jvp(eng, y, [x, x], [T(np.ones((2, 3)))])
    expect(info, tf.InvalidArgument, ValueError, "jvp", "2 tangents", "1")


def test_seed_wrong_shape_and_dtype(rt, eng, graph):
    x, y, z = graph
    with pytest.raises(ValueError) as info:
        y.backward_with(T(np.ones(3)))
    expect(info, tf.ShapeMismatch, ValueError, "backward_with", "seed", "[2, 3]", "[3]")
    with pytest.raises(TypeError) as info:
        y.backward_with(T(np.ones((2, 3)), np.float32))
    expect(info, tf.DTypeMismatch, TypeError, "backward_with", "seed", "float32")
    with pytest.raises(tf.ShapeMismatch) as info:
        z.backward_with(T([1.0]))
    expect(info, tf.ShapeMismatch, ValueError, "backward_with", "[1]")
    assert x.grad() is None  # nothing was accumulated by the failed calls


@pytest.mark.parametrize("fn", ["vjp", "jvp", "grad"])
def test_wrt_not_reaching_output(rt, eng, graph, fn):
    _, y, z = graph
    other = rt.variable_from(T(np.ones((2, 3))))
    direction = T(np.ones((2, 3))) if fn == "jvp" else T(1.0)
    args = (eng, z, other) if fn == "grad" else (eng, z, other, direction)
    with pytest.raises(ValueError) as info:
        getattr(rt, fn)(*args)
    expect(info, tf.NotReachable, ValueError, fn, "does not depend")


@pytest.mark.parametrize("fn", ["vjp", "jvp", "grad"])
def test_constant_as_wrt(rt, eng, graph, fn):
    _, _, z = graph
    c = rt.constant_from(T(np.ones((2, 3))))
    direction = T(np.ones((2, 3))) if fn == "jvp" else T(1.0)
    args = (eng, z, c) if fn == "grad" else (eng, z, c, direction)
    with pytest.raises(ValueError) as info:
        getattr(rt, fn)(*args)
    expect(info, tf.NotReachable, ValueError, fn, "constant")


@pytest.mark.parametrize("fn", ["vjp", "jvp", "grad"])
def test_constant_as_wrt_with_constants_in_graph(rt, eng, fn):
    """Constant operands of other shapes in the graph do not change the answer."""
    x = rt.variable_from(T(np.ones(3)))
    c1 = rt.constant_from(T(np.full(3, 2.0)))
    c2 = rt.constant_from(T(np.full((2, 3), 3.0)))
    z = rt.with_eager_session(eng, lambda s: s.einsum([c2, s.mul(x, c1)], "ij,j->"))
    direction = T(np.ones(3)) if fn == "jvp" else T(1.0)
    args = (eng, z, c1) if fn == "grad" else (eng, z, c1, direction)
    with pytest.raises(ValueError) as info:
        getattr(rt, fn)(*args)
    expect(info, tf.NotReachable, ValueError, fn, "constant")


def test_wrt_list_with_one_unreached(rt, eng, graph):
    x, _, z = graph
    other = rt.variable_from(T(np.ones(2)))
    with pytest.raises(tf.NotReachable) as info:
        rt.grad(eng, z, [x, other])
    expect(info, tf.NotReachable, ValueError, "grad")


def test_empty_wrt_list(rt, eng, graph):
    _, _, z = graph
    with pytest.raises(tf.InvalidArgument) as info:
        rt.grad(eng, z, [])
    expect(info, tf.InvalidArgument, ValueError, "grad", "empty")


def test_backward_of_constant(rt):
    c = rt.constant_from(T(1.0))
    with pytest.raises(tf.NotReachable) as info:
        c.backward()
    expect(info, tf.NotReachable, ValueError, "backward", "constant")


def test_backward_non_scalar(rt, eng, graph):
    x, y, _ = graph
    with pytest.raises(ValueError) as info:
        y.backward()
    expect(info, tf.NonScalarGrad, ValueError, "backward", "[2, 3]")
    assert x.grad() is None


@pytest.mark.parametrize("fn", ["grad", "grad_optional"])
def test_grad_non_scalar(rt, eng, graph, fn):
    x, y, _ = graph
    with pytest.raises(ValueError) as info:
        getattr(rt, fn)(eng, y, x)
    expect(info, tf.NonScalarGrad, ValueError, fn, "[2, 3]")


# --- runtimes never mix -----------------------------------------------------------------


def test_runtimes_mixed_in_op(eng):
    rt1, rt2 = tf.EagerRuntime(), tf.EagerRuntime()
    a = rt1.variable_from(T(np.ones(3)))
    b = rt2.variable_from(T(np.ones(3)))
    with pytest.raises(ValueError) as info:
        rt1.with_eager_session(eng, lambda s: s.add(a, b))
    expect(info, tf.RuntimeMismatch, ValueError, "add", "another EagerRuntime")
    with pytest.raises(tf.RuntimeMismatch) as info:
        rt2.with_eager_session(eng, lambda s: s.exp(a))
    expect(info, tf.RuntimeMismatch, ValueError, "exp")
    with pytest.raises(tf.RuntimeMismatch) as info:
        rt1.with_eager_session(eng, lambda s: s.einsum([a, b], "i,i->"))
    expect(info, tf.RuntimeMismatch, ValueError, "einsum")
    with pytest.raises(tf.RuntimeMismatch) as info:
        rt2.with_eager_session(eng, lambda s: s.svd(rt1.variable_from(T(np.eye(2)))))
    expect(info, tf.RuntimeMismatch, ValueError, "svd")
    with pytest.raises(tf.RuntimeMismatch) as info:
        rt2.with_eager_session(eng, lambda s: s.reduce_sum(a))
    expect(info, tf.RuntimeMismatch, ValueError, "reduce_sum")


def test_runtimes_mixed_in_transforms(eng):
    rt1, rt2 = tf.EagerRuntime(), tf.EagerRuntime()
    x1 = rt1.variable_from(T(np.ones(3)))
    y1 = rt1.with_eager_session(eng, lambda s: s.reduce_sum(s.exp(x1)))
    x2 = rt2.variable_from(T(np.ones(3)))
    with pytest.raises(ValueError) as info:
        rt2.vjp(eng, y1, x2, T(1.0))  # output of another runtime
    expect(info, tf.RuntimeMismatch, ValueError, "vjp", "another EagerRuntime")
    with pytest.raises(tf.RuntimeMismatch) as info:
        rt1.vjp(eng, y1, x2, T(1.0))  # wrt of another runtime
    expect(info, tf.RuntimeMismatch, ValueError, "vjp")
    with pytest.raises(tf.RuntimeMismatch) as info:
        rt1.vjp(eng, y1, x1, rt2.constant_from(T(1.0)))  # cotangent of another runtime
    expect(info, tf.RuntimeMismatch, ValueError, "vjp")
    with pytest.raises(tf.RuntimeMismatch) as info:
        rt1.jvp(eng, y1, x1, rt2.constant_from(T(np.ones(3))))
    expect(info, tf.RuntimeMismatch, ValueError, "jvp")
    with pytest.raises(tf.RuntimeMismatch) as info:
        rt2.grad(eng, y1, x1)
    expect(info, tf.RuntimeMismatch, ValueError, "grad")
    with pytest.raises(tf.RuntimeMismatch) as info:
        y1.backward_with(rt2.constant_from(T(1.0)))
    expect(info, tf.RuntimeMismatch, ValueError, "backward_with")
    with pytest.raises(tf.RuntimeMismatch) as info:
        rt2.variable_from(y1)
    expect(info, tf.RuntimeMismatch, ValueError, "variable_from")


# --- engines and pools ------------------------------------------------------------


@pytest.mark.parametrize("n", [0, -1, 1.5, "2", True, None])
def test_bad_thread_count(n):
    with pytest.raises(ValueError) as info:
        tf.Pool.builder().threads(n).build()
    expect(info, tf.InvalidArgument, ValueError, "Pool.threads", repr(n))


def test_engine_needs_pool_and_session_needs_engine(rt):
    with pytest.raises(tf.InvalidArgument) as info:
        tf.CpuEngine(2)
    expect(info, tf.InvalidArgument, ValueError, "CpuEngine", "2")
    with pytest.raises(tf.InvalidArgument) as info:
        rt.with_eager_session("cpu", lambda s: None)
    expect(info, tf.InvalidArgument, ValueError, "EagerRuntime", "str")


def test_runtime_needs_ad_context():
    with pytest.raises(tf.InvalidArgument) as info:
        tf.EagerRuntime.with_ad_context("default")
    expect(info, tf.InvalidArgument, ValueError, "EagerRuntime", "str")


# --- sessions used after they end ------------------------------------------------------


@pytest.mark.parametrize("width", [1, 2])
def test_a_session_used_after_its_call_returned_raises_at_once(rt, width):
    eng = tf.CpuEngine(tf.Pool.builder().threads(width).build())
    x = rt.variable_from(T(np.eye(3)))
    kept = []
    rt.with_eager_session(eng, lambda s: kept.append(s))
    stale = kept[0]
    for call, op in ((lambda: stale.svd(x), "svd"), (lambda: stale.add(x, x), "add"),
                     (lambda: stale.constant_from(T(1.0)), "constant_from"),
                     (lambda: stale.variable_from(T(1.0)), "variable_from")):
        with pytest.raises(ValueError) as info:
            call()
        expect(info, tf.SessionEnded, ValueError, op, "a session inside its with_eager_session call",
               "one whose call has returned")
    # Nothing was queued by the stale calls: a later session on the same engine runs clean.
    y = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.mul(x, x)))
    assert y.item() == 3.0


def test_a_session_ends_when_its_body_raises(rt, eng):
    kept = []

    def body(s):
        kept.append(s)
        raise KeyError("mine")

    with pytest.raises(KeyError):
        rt.with_eager_session(eng, body)
    with pytest.raises(tf.SessionEnded):
        kept[0].exp(rt.constant_from(T(1.0)))


# --- a user primitive's kernel against its own declaration -----------------------------


def _user_primitive(impl, cost=None):
    rules = tf.RuleSet()
    linear = dict(jvp=lambda s, t, p, o: (t[0],), vjp=lambda s, c, p, o, needs: (c[0],))
    prim = rules.define("mine", lambda x: (x,), impl, cost=cost, **linear)
    return prim, tf.EagerRuntime(tf.AdContext.builder().with_semantic_extension_rules(rules).build())


@pytest.mark.parametrize("width", [1, 2])
@pytest.mark.parametrize(
    "impl, cls, fragments",
    [
        (lambda x: (np.ones(4),), tf.ShapeMismatch, ("mine", "kernel output 0 of shape [3]", "shape [4]")),
        (lambda x: (np.ones((3, 1)),), tf.ShapeMismatch, ("mine", "shape [3, 1]")),
        (lambda x: (x.astype(np.float32),), tf.DTypeMismatch, ("mine", "kernel output 0 of dtype float64", "float32")),
        (lambda x: (x, x), tf.InvalidArgument, ("mine", "a tuple of 1 arrays", "tuple of 2")),
        (lambda x: x, tf.InvalidArgument, ("mine", "a tuple of 1 arrays", "ndarray")),
    ],
)
def test_user_kernel_outputs_are_checked_against_their_abstract_values(width, impl, cls, fragments):
    for cost in (None, lambda *_: 1e12):  # run at once, and (on a wide engine) on a worker
        prim, rt = _user_primitive(impl, cost)
        eng = tf.CpuEngine(tf.Pool.builder().threads(width).build())
        x = rt.variable_from(T(np.ones(3)))
        with pytest.raises(tf.TenferroError) as info:
            rt.with_eager_session(eng, lambda s: s.add(s.bind(prim, x)[0], x))
        expect(info, cls, None, *fragments)


def test_a_kernel_cannot_write_into_the_values_it_reads(eng):
    """Kernel outputs and leaves are read-only: a user kernel that writes into its input fails
    (NumPy's own error, raised in the user's code) instead of changing a value behind the tape."""

    def in_place(x):
        x += 1.0
        return (x,)

    prim, rt = _user_primitive(in_place)
    x = rt.variable_from(T(np.ones(3)))
    y = rt.with_eager_session(eng, lambda s: s.exp(x))
    for operand in (x, y):
        with pytest.raises(ValueError, match="read-only"):
            rt.with_eager_session(eng, lambda s: s.bind(prim, operand))
    np.testing.assert_array_equal(x.value().to_numpy(), np.ones(3))
    np.testing.assert_array_equal(y.value().to_numpy(), np.exp(np.ones(3)))
