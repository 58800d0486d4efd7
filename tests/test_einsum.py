"""einsum: forward values against np.einsum, VJP/JVP by check_grads, the plan cache.

Covered: 1 to 4 operands, traces ("xyxy->", "ii->"), diagonals ("ii->i"),
NumPy's implicit output ("ij,jk"), an index summed inside one operand only
("ij->i"), outer products, scalar outputs, repeated indices next to other
operands; NumPy's ellipsis and size-1 broadcasting, any letters as indices (more
than 52 of them), int and bool data, and the errors of misspelled subscripts.
tests/test_einsum_numpy.py runs opt_einsum's list of expressions.
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
    # ellipsis: broadcast axes aligned right, missing leading ones, size 1 against n
    ("...ij,...jk->...ik", [(5, 2, 3), (3, 4)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 4)]),
    ("...ij,...jk", [(2, 1, 2, 3), (3, 3, 4)]),  # implicit: broadcast axes first
    ("i...->...", [(3, 2, 4)]),
    ("...ij->...ji", [(2, 3, 4)]),
    ("b...a", [(2, 3, 4)]),  # implicit: "...ab"
    ("a...a->...a", [(2, 3, 2)]),
    ("...a,...b", [(2, 3), (3,)]),
    ("...,...", [(2, 3), (3,)]),
    ("...,...", [(), ()]),
    ("...i->i", [(3,)]),  # an ellipsis of no axes
    ("...ij,...jk,...kl->...il", [(2, 1, 2, 3), (3, 3, 2), (1, 2, 2)]),
    # size-1 broadcasting, as numpy.einsum: an index of size 1 in one operand, n in another
    ("ij,jk->ik", [(2, 1), (3, 4)]),
    ("ij,jk", [(2, 1), (3, 4)]),
    ("ij,ij->ij", [(1, 3), (2, 3)]),
    ("i,i->", [(1,), (3,)]),
    ("ii,i->i", [(1, 1), (3,)]),  # a broadcast diagonal
    ("ab,ba", [(1, 3), (3, 1)]),
    ("ij,jk,kl->il", [(2, 1), (3, 4), (4, 2)]),
    ("i,i,i->i", [(1,), (3,), (1,)]),
    ("ij,jk->ik", [(2, 0), (1, 4)]),  # 1 against 0: an empty sum
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


def test_ascii_subscripts_parse_as_written():
    """The common path keeps the caller's letters: plans and steps are keyed on them as before."""
    assert tf.einsum.parse("ij,jk->ik", [(2, 3), (3, 4)]) == (("ij", "jk"), "ik")
    assert tf.einsum.parse("war,abu,bgl,gwd->ruld", [(2, 2, 3)] * 4) == (("war", "abu", "bgl", "gwd"), "ruld")


def test_broadcast_axis_vjp_sums_over_the_broadcast(rt, eng, rng):
    a, b = rng.standard_normal((2, 1)), rng.standard_normal((3, 4))
    x, y = rt.variable_from(tf.Tensor(a)), rt.variable_from(tf.Tensor(b))
    out = rt.with_eager_session(eng, lambda s: s.einsum([x, y], "ij,jk->ik"))
    np.testing.assert_allclose(out.value().to_numpy(), np.einsum("ij,jk->ik", a, b), rtol=1e-14)
    w = rng.standard_normal((2, 4))
    ga, gb = (g.value().to_numpy() for g in rt.vjp(eng, out, [x, y], tf.Tensor(w)))
    np.testing.assert_allclose(ga, (w @ b.sum(axis=0))[:, None], rtol=1e-13)
    np.testing.assert_allclose(gb, np.broadcast_to(a.T @ w, (3, 4)), rtol=1e-13)


# (subscripts in any letters, the same in ASCII for numpy.einsum, shapes)
UNICODE_CASES = [
    ("αβ,βγ->αγ", "ab,bc->ac", [(2, 3), (3, 4)]),
    ("βα", "ba", [(2, 3)]),  # implicit output sorted: α before β, a transpose
    ("aβ,βb", "ac,cb", [(2, 3), (3, 4)]),  # ASCII and Greek together
    ("aα,αb", "ac,cb", [(2, 3), (3, 4)]),  # α must not become a or b
    ("甲乙,乙丙->丙甲", "ab,bc->ca", [(2, 3), (3, 2)]),
    ("жж->", "aa->", [(3, 3)]),
    ("...αβ,...βγ", "...ab,...bc", [(2, 1, 2, 3), (3, 3, 2)]),
    ("Δx,xΔ,Δ->Δ", "ax,xa,a->a", [(2, 3), (3, 2), (2,)]),
]


@pytest.mark.parametrize("subscripts,ascii_subscripts,shapes", UNICODE_CASES)
def test_any_letters_as_indices(run, rng, subscripts, ascii_subscripts, shapes):
    arrays = _operands(rng, shapes)
    y = run(lambda s: s.einsum([tf.Tensor(a) for a in arrays], subscripts))
    want = np.einsum(ascii_subscripts, *arrays)
    assert y.shape == want.shape
    np.testing.assert_allclose(y.value().to_numpy(), want, rtol=1e-13, atol=1e-13)
    check_grads(lambda s, *xs: s.einsum(list(xs), subscripts), arrays, modes=("fwd", "rev"), order=2)


def letters(count):
    """``count`` distinct letters: A-Z, a-z, then the other letters by code point."""
    return [c for c in map(chr, range(0x20, 0x3000)) if c.isalpha()][:count]


def test_more_than_52_indices(run, rng):
    """A chain of 60 matrices (61 indices: every ASCII letter, then others) against NumPy's chained product."""
    idx = letters(61)
    subscripts = ",".join(idx[i] + idx[i + 1] for i in range(60)) + "->" + idx[0] + idx[60]
    mats = [rng.standard_normal((2, 2)) / 1.5 for _ in range(60)]
    y = run(lambda s: s.einsum([tf.Tensor(m) for m in mats], subscripts))
    np.testing.assert_allclose(y.value().to_numpy(), np.linalg.multi_dot(mats), rtol=1e-12)
    check_grads(lambda s, *xs: s.einsum(list(xs), subscripts), mats, modes=("fwd", "rev"), order=1)
    # 60 vectors, each summed but the first and the last: steps numpy.einsum computes, in symbols
    # beyond a-z, A-Z.
    vectors = [rng.standard_normal(2) for _ in range(60)]
    subscripts = ",".join(idx[:60]) + "->" + idx[0] + idx[59]
    y = run(lambda s: s.einsum([tf.Tensor(v) for v in vectors], subscripts))
    want = np.outer(vectors[0], vectors[59]) * np.prod([v.sum() for v in vectors[1:59]])
    np.testing.assert_allclose(y.value().to_numpy(), want, rtol=1e-12)
    check_grads(lambda s, *xs: s.einsum(list(xs), subscripts), vectors, modes=("fwd", "rev"), order=1)


def test_more_than_52_indices_in_one_numpy_step_is_an_error(run):
    with pytest.raises(tf.InvalidArgument) as info:
        run(lambda s: s.einsum([tf.Tensor(np.ones((1,) * 53))], "".join(letters(53)) + "->"))
    assert str(info.value).startswith("einsum: expected at most 52 distinct indices") and "got 53" in str(info.value)


def test_int_and_bool_operands(run):
    """Ints and bools are float64 from the Tensor on: a bool einsum counts (NumPy's is a logical
    one, which is the count's ``> 0``)."""
    a, b = np.arange(6).reshape(2, 3), np.arange(12).reshape(3, 4) - 5
    y = run(lambda s: s.einsum([tf.Tensor(a), tf.Tensor(b)], "ij,jk->ik"))
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y.value().to_numpy(), np.einsum("ij,jk->ik", a, b))
    p = np.array([[True, False, True], [False, False, True]])
    q = np.array([[True, False], [True, True], [True, False]])
    counts = run(lambda s: s.einsum([tf.Tensor(p), tf.Tensor(q)], "ij,jk->ik")).value().to_numpy()
    np.testing.assert_array_equal(counts, [[2.0, 0.0], [1.0, 0.0]])
    np.testing.assert_array_equal(counts, np.einsum("ij,jk->ik", p.astype(int), q.astype(int)))
    np.testing.assert_array_equal(counts > 0, np.einsum("ij,jk->ik", p, q))


def test_structured_cotangents_through_ellipsis_and_broadcast(rng):
    """A slice after the einsum hands its VJP a block inside zeros; an SVD's JVP a factored
    matrix: both go through einsums that broadcast."""
    a, b = rng.standard_normal((1, 2, 3)), rng.standard_normal((4, 3, 5))

    def sliced(s, x, y):
        return s.slice(s.einsum([x, y], "...ij,...jk->...ik"), tf.SliceConfig([0, 0, 1], [2, 2, 3]))

    check_grads(sliced, [a, b], modes=("fwd", "rev"), order=2)

    def through_svd(s, x, y):
        u = s.svd(x)[0]
        return s.einsum([u, y], "ai,...i->...a")

    args = [rng.standard_normal((4, 3)), rng.standard_normal((2, 1, 3))]
    check_grads(through_svd, args, modes=("fwd", "rev"), order=2)


@pytest.mark.parametrize(
    "subscripts, shapes, error, fragment",
    [
        (".i", [(2,)], tf.InvalidArgument, "'.' only as part of an ellipsis '...' in operand 0, got '.i'"),
        ("i..->i", [(2,)], tf.InvalidArgument, "'.' only as part of an ellipsis '...' in operand 0, got 'i..'"),
        ("...i...", [(2,)], tf.InvalidArgument, "at most one ellipsis '...' in operand 0, got '...i...'"),
        ("...i->......i", [(2,)], tf.InvalidArgument, "at most one ellipsis '...' in the output"),
        ("...i->i", [(2, 3)], tf.InvalidArgument, "an ellipsis '...' in the output (the ellipses broadcast to rank 1)"),
        ("...ij,...jk->...ik", [(2, 2, 3), (3, 3, 4)], tf.ShapeMismatch,
         "ellipsis axis 0 of one size (2) or 1 in every operand, got 3 in operand 1"),
        ("ij,jk->ik", [(2, 2), (3, 4)], tf.ShapeMismatch, "index 'j' of one size (2) or 1 in every operand, got 3"),
        ("ii->i", [(1, 3)], tf.ShapeMismatch, "index 'i' of one size within operand 0 (1), got 3"),
        ("ijk...", [(2, 3)], tf.ShapeMismatch, "operand 0 of rank at least 3 ('ijk...'), got shape [2, 3]"),
        ("i1,1k->ik", [(2, 2), (2, 2)], tf.InvalidArgument, "letters, with ',', '->', '...' and spaces, got '1' in"),
        ("i%,%k", [(2, 2), (2, 2)], tf.InvalidArgument, "got '%' in 'i%,%k'"),
        ("i\tj", [(2, 2)], tf.InvalidArgument, "got '\\t'"),
        ("αβ,βγ->αδ", [(2, 3), (3, 4)], tf.InvalidArgument, "distinct and appear in the inputs, got 'αδ'"),
    ],
)
def test_subscript_errors(run, subscripts, shapes, error, fragment):
    with pytest.raises(error) as info:
        run(lambda s: s.einsum([tf.Tensor(np.ones(sh)) for sh in shapes], subscripts))
    message = str(info.value)
    assert message.startswith("einsum: expected ") and ", got " in message
    assert fragment in message
