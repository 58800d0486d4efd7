"""einsum: forward values against np.einsum, VJP/JVP by check_grads, the plan cache.

Covered: 1 to 4 operands, traces ("xyxy->", "ii->"), diagonals ("ii->i"),
NumPy's implicit output ("ij,jk"), an index summed inside one operand only
("ij->i"), outer products, scalar outputs, repeated indices next to other
operands.
"""

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py.testing import check_grads

# (subscripts, operand shapes); two shape sets per family where it matters.
CASES = [
    # one operand
    ("ij->i", [(3, 4)]),  # index summed inside one operand only
    ("ijk->k", [(2, 3, 4)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ii->i", [(3, 3)]),  # diagonal
    ("ii->i", [(4, 4)]),
    ("ii->", [(3, 3)]),  # trace
    ("xyxy->", [(2, 3, 2, 3)]),  # double trace (TRG's closing)
    ("xyxy->", [(3, 2, 3, 2)]),
    ("iij->j", [(3, 3, 2)]),
    ("iij->ji", [(2, 2, 3)]),
    ("iij->", [(2, 2, 3)]),  # trace and an index only there
    ("iji->j", [(2, 3, 2)]),
    ("iii->i", [(3, 3, 3)]),
    ("ijij->ij", [(2, 3, 2, 3)]),
    ("ij", [(3, 4)]),  # implicit: unchanged
    ("ba", [(3, 4)]),  # implicit: output sorted, so a transpose
    ("ii", [(3, 3)]),  # implicit: trace
    # two operands
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk->ik", [(4, 2), (2, 3)]),
    ("ij,jk", [(2, 3), (3, 4)]),  # implicit = "ik"
    ("ij,jk->ki", [(2, 3), (3, 4)]),
    ("ij,ij->", [(2, 3), (2, 3)]),  # scalar output
    ("i,i", [(5,), (5,)]),  # implicit scalar output
    ("i,j->ij", [(3,), (4,)]),  # outer product
    ("i,j", [(2,), (5,)]),  # implicit outer product
    ("ij,kl->ijkl", [(2, 3), (2, 2)]),
    ("ij,jk->k", [(2, 3), (3, 4)]),  # i only in operand 0, summed away
    ("ij,j->ij", [(2, 3), (3,)]),  # broadcast-like (a column scaling)
    ("iij,jk->k", [(3, 3, 2), (2, 4)]),  # a trace inside a contraction
    ("ab,ab->ab", [(2, 3), (2, 3)]),  # Hadamard
    ("Ab,bC->AC", [(2, 3), (3, 2)]),  # upper-case letters
    ("ii,jj->ij", [(2, 2), (3, 3)]),  # diagonals of two operands, outer product
    ("iij,jkk->ik", [(2, 2, 3), (3, 4, 4)]),
    # three operands
    ("ai,i,ib->ab", [(4, 3), (3,), (3, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ij,jk,ki->", [(3, 4), (4, 2), (2, 3)]),
    ("i,j,k->ijk", [(2,), (3,), (2,)]),
    ("ij,ij,ij->i", [(2, 3), (2, 3), (2, 3)]),
    ("ij,jk,kl", [(2, 3), (3, 2), (2, 4)]),  # implicit
    # four operands
    ("war,abu,bgl,gwd->ruld", [(2, 2, 3), (2, 2, 3), (2, 2, 3), (2, 2, 3)]),  # TRG's contraction
    ("war,abu,bgl,gwd->ruld", [(2, 3, 2), (3, 2, 2), (2, 2, 2), (2, 2, 2)]),
    ("ab,bc,cd,da->", [(2, 3), (3, 4), (4, 2), (2, 2)]),
    ("ab,bc,cd,de", [(2, 3), (3, 2), (2, 3), (3, 2)]),
    ("a,a,a,a->", [(3,), (3,), (3,), (3,)]),
]


def _operands(rng, shapes):
    return [rng.standard_normal(sh) for sh in shapes]


@pytest.mark.parametrize("subscripts,shapes", CASES)
def test_forward_matches_numpy(rt, run, rng, subscripts, shapes):
    arrays = _operands(rng, shapes)
    xs = [rt.variable_from(tf.Tensor(a)) for a in arrays]
    y = run(lambda s: s.einsum(xs, subscripts))
    want = np.einsum(subscripts, *arrays)
    assert y.shape == want.shape
    np.testing.assert_allclose(y.value().to_numpy(), want, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("subscripts,shapes", CASES)
def test_grads(rng, subscripts, shapes):
    arrays = _operands(rng, shapes)
    check_grads(lambda s, *xs: s.einsum(list(xs), subscripts), arrays, modes=("fwd", "rev"), order=2)


def test_implicit_output_follows_numpy(rt, run, rng):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    x, y = rt.constant_from(tf.Tensor(a)), rt.constant_from(tf.Tensor(b))
    implicit = run(lambda s: s.einsum([x, y], "ij,jk"))
    explicit = run(lambda s: s.einsum([x, y], "ij,jk->ik"))
    assert implicit.shape == (2, 4)
    np.testing.assert_array_equal(implicit.value().to_numpy(), explicit.value().to_numpy())
    np.testing.assert_allclose(implicit.value().to_numpy(), a @ b, rtol=1e-14)
    # NumPy's implicit output is in sorted letter order: "ba" is a transpose.
    t = run(lambda s: s.einsum([x], "ba"))
    np.testing.assert_array_equal(t.value().to_numpy(), a.T)


def test_trace_and_diagonal_values(rt, run, rng):
    a = rng.standard_normal((2, 3, 2, 3))
    x = rt.variable_from(tf.Tensor(a))
    tr = run(lambda s: s.einsum([x], "xyxy->"))
    assert tr.shape == ()
    np.testing.assert_allclose(tr.item(), sum(a[i, j, i, j] for i in range(2) for j in range(3)), rtol=1e-14)
    m = rng.standard_normal((4, 4))
    d = run(lambda s: s.einsum([rt.variable_from(tf.Tensor(m))], "ii->i"))
    np.testing.assert_array_equal(d.value().to_numpy(), np.diag(m))


def test_trace_vjp_is_identity_pattern(rt, eng, rng):
    a = rng.standard_normal((2, 3, 2, 3))
    x = rt.variable_from(tf.Tensor(a))
    tr = rt.with_eager_session(eng, lambda s: s.einsum([x], "xyxy->"))
    g = rt.grad(eng, tr, x).value().to_numpy()
    np.testing.assert_array_equal(g, np.einsum("ik,jl->ijkl", np.eye(2), np.eye(3)))
    m = rt.variable_from(tf.Tensor(rng.standard_normal((3, 3))))
    d = rt.with_eager_session(eng, lambda s: s.einsum([m], "ii->i"))
    w = rng.standard_normal(3)
    np.testing.assert_array_equal(rt.vjp(eng, d, m, tf.Tensor(w)).value().to_numpy(), np.diag(w))


def test_vjp_of_each_operand_analytic(rt, eng, rng):
    a, b, c = rng.standard_normal((2, 3)), rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    xs = [rt.variable_from(tf.Tensor(t)) for t in (a, b, c)]
    y = rt.with_eager_session(eng, lambda s: s.einsum(xs, "ij,jk,kl->il"))
    w = rng.standard_normal((2, 2))
    ga, gb, gc = (g.value().to_numpy() for g in rt.vjp(eng, y, xs, tf.Tensor(w)))
    np.testing.assert_allclose(ga, w @ (b @ c).T, rtol=1e-13)
    np.testing.assert_allclose(gb, a.T @ w @ c.T, rtol=1e-13)
    np.testing.assert_allclose(gc, (a @ b).T @ w, rtol=1e-13)


def test_same_tensor_twice(rng):
    """x used as two operands: its cotangent is the sum of both."""
    a = rng.standard_normal((3, 3))
    check_grads(lambda s, x: s.einsum([x, x], "ij,jk->ik"), [a], modes=("fwd", "rev"), order=2)
    check_grads(lambda s, x: s.einsum([x, x, x], "ij,jk,ki->"), [a], modes=("fwd", "rev"), order=2)


def test_mixed_constant_and_variable_operands(rt, eng, rng):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    x = rt.variable_from(tf.Tensor(a))
    c = rt.constant_from(tf.Tensor(b))
    y = rt.with_eager_session(eng, lambda s: s.einsum([x, c], "ij,jk->ik"))
    w = rng.standard_normal((2, 4))
    np.testing.assert_allclose(rt.vjp(eng, y, x, tf.Tensor(w)).value().to_numpy(), w @ b.T, rtol=1e-13)
    v = rng.standard_normal((2, 3))
    np.testing.assert_allclose(rt.jvp(eng, y, x, tf.Tensor(v)).value().to_numpy(), v @ b, rtol=1e-13)
    # A host Tensor is accepted as a constant operand too.
    z = rt.with_eager_session(eng, lambda s: s.einsum([x, tf.Tensor(b)], "ij,jk->ik"))
    np.testing.assert_array_equal(z.value().to_numpy(), y.value().to_numpy())


@pytest.mark.parametrize(
    "subscripts, shapes, other, cache",
    [
        # Two operands: one contraction, planned once per (subscripts, shapes).
        ("ab,bc->ac", [(7, 5), (5, 3)], [(7, 5), (5, 4)], "plan"),
        # More: the pairwise path, planned once per (subscripts, shapes).
        ("ab,bc,cd->ad", [(7, 5), (5, 3), (3, 6)], [(7, 5), (5, 4), (4, 6)], "pairwise_steps"),
    ],
)
def test_plan_cache_hits_on_repeat(rt, run, rng, subscripts, shapes, other, cache):
    # Shapes no other test uses, so the first call is a miss whatever ran before.
    cached = getattr(tf.einsum, cache)
    xs = [rt.constant_from(tf.Tensor(rng.standard_normal(sh))) for sh in shapes]
    before = cached.cache_info()
    first = run(lambda s: s.einsum(xs, subscripts))
    after_first = cached.cache_info()
    assert after_first.misses == before.misses + 1
    second = run(lambda s: s.einsum(xs, subscripts))
    after_second = cached.cache_info()
    assert after_second.hits > after_first.hits
    assert after_second.misses == after_first.misses
    np.testing.assert_array_equal(first.value().to_numpy(), second.value().to_numpy())
    # Other shapes, same subscripts: a new plan.
    ys = [rt.constant_from(tf.Tensor(rng.standard_normal(sh))) for sh in other]
    run(lambda s: s.einsum(ys, subscripts))
    assert cached.cache_info().misses == after_second.misses + 1


def test_many_operands_are_recorded_as_pairwise_contractions(rt, eng, rng):
    xs = [rt.variable_from(tf.Tensor(rng.standard_normal((3, 3)))) for _ in range(4)]
    y = rt.with_eager_session(eng, lambda s: s.einsum(xs, "ab,bc,cd,de->ae"))
    assert len(y._node.inputs) == 2


def test_plan_cache_is_an_lru_cache():
    info = tf.einsum.plan.cache_info()
    assert info.maxsize is not None and info.maxsize > 0
    assert callable(tf.einsum.plan.cache_clear)


def test_float32_einsum(rt, run, rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((3, 2)).astype(np.float32)
    y = run(lambda s: s.einsum([rt.variable_from(tf.Tensor(a)), rt.constant_from(tf.Tensor(b))], "ij,jk->ik"))
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.value().to_numpy(), a @ b, rtol=1e-6)


def test_spaces_in_subscripts_ignored(rt, run, rng):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    xs = [rt.constant_from(tf.Tensor(a)), rt.constant_from(tf.Tensor(b))]
    y = run(lambda s: s.einsum(xs, "ij, jk -> ik"))
    np.testing.assert_allclose(y.value().to_numpy(), a @ b, rtol=1e-14)


def strided_views(rng, shape, dtype):
    """The same values as C-ordered, F-ordered, axis-permuted and sliced-from-bigger arrays."""
    base = rng.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        base = base + 1j * rng.standard_normal(shape).astype(dtype)
    perm = list(range(len(shape)))[::-1]
    permuted = np.ascontiguousarray(base.transpose(perm)).transpose(np.argsort(perm))
    bigger = np.zeros([n + 2 for n in shape], dtype=base.dtype)
    bigger[tuple(slice(1, n + 1) for n in shape)] = base
    return [base, np.asfortranarray(base), permuted, bigger[tuple(slice(1, n + 1) for n in shape)]]


@pytest.mark.parametrize(
    ("subscripts", "shapes"),
    [
        ("wdbl,buwr->ruld", [(3, 4, 2, 5), (2, 3, 3, 4)]),  # TRG's: interleaved free indices
        ("buwr,ruld->wdbl", [(2, 3, 3, 4), (4, 3, 5, 2)]),
        ("ab,ac->bc", [(6, 1), (6, 4)]),  # a size-1 axis
        ("ij,jk->ki", [(3, 5), (5, 7)]),  # the output transposed
        ("abc,cb->a", [(2, 3, 4), (4, 3)]),
    ],
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_pairwise_kernel_any_strides(rng, subscripts, shapes, dtype):
    """The pairwise kernel picks its layout per strides; every layout gives np.einsum's values, in C order."""
    lhs, out = subscripts.split("->")
    a, b = lhs.split(",")
    kernel = tf.einsum.Pairwise(a, b, out, tuple(map(tuple, shapes)))
    tol = 1e-5 if dtype is np.float32 else 1e-12
    for x in strided_views(rng, shapes[0], dtype):
        for y in strided_views(rng, shapes[1], dtype):
            got = kernel(x, y)
            assert got.flags["C_CONTIGUOUS"] and got.dtype == x.dtype
            np.testing.assert_allclose(got, np.einsum(subscripts, x, y), rtol=tol, atol=tol)
    assert len(kernel._layouts) >= 2  # chosen once per pair of strides
