"""Structured tangents and cotangents: every op that keeps a structure keeps it, with the numbers of
the dense computation, and the SVD's pullback costs the same in every spelling of a truncation."""

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py import SliceConfig
from tenferro_py.ops.structural import reshaped_box
from tenferro_py.structure import Embedded, Product, Structured, dense
from tenferro_py.tape import ancestors


@pytest.fixture
def s(rt, eng):
    """An open session (the fixtures' runtime and engine)."""
    with rt.session(eng) as session:
        yield session


def const(s, x):
    return s.constant_from(tf.Tensor(np.asarray(x)))


def block_in_zeros(s, rng, shape, box):
    """An Embedded of a random block at ``box`` and the dense array it stands for."""
    block = rng.standard_normal([hi - lo for lo, hi in box])
    full = np.zeros(shape)
    full[tuple(slice(lo, hi) for lo, hi in box)] = block
    return Embedded(const(s, block), shape, tuple(lo for lo, _ in box)), full


def value(s, x):
    return dense(s, x).value().to_numpy()


def check(s, got, want, kind):
    """``got`` kept the structure ``kind`` and stands for ``want``."""
    assert type(got) is kind, f"expected {kind.__name__}, got {type(got).__name__}"
    np.testing.assert_allclose(value(s, got), want, rtol=1e-14, atol=1e-14)


# --- a block inside zeros ------------------------------------------------------------------


def test_block_survives_transpose_conj_neg_scale(s, rng):
    e, full = block_in_zeros(s, rng, (5, 6, 3), ((1, 3), (0, 6), (2, 3)))
    check(s, s.transpose(e, (2, 0, 1)), full.transpose(2, 0, 1), Embedded)
    check(s, s.conj(e), full, Embedded)
    check(s, s.neg(e), -full, Embedded)
    check(s, s.scale_real(e, 2.5), 2.5 * full, Embedded)


def test_block_survives_slice_and_slice_of_slice(s, rng):
    e, full = block_in_zeros(s, rng, (8, 6), ((0, 8), (0, 3)))
    once = s.slice(e, SliceConfig([2, 1], [7, 6]))
    check(s, once, full[2:7, 1:6], Embedded)
    check(s, s.slice(once, SliceConfig([1, 0], [4, 4])), full[2:7, 1:6][1:4, 0:4], Embedded)
    inside = s.slice(e, SliceConfig([0, 0], [8, 2]))  # all of it inside the block: a plain tensor
    assert not isinstance(inside, Structured)
    np.testing.assert_allclose(value(s, inside), full[:, :2])
    outside = s.slice(e, SliceConfig([0, 4], [8, 6]))  # none of it: zeros, still known to be
    check(s, outside, np.zeros((8, 2)), Embedded)


def test_block_survives_a_reshape_that_keeps_it_a_box(s, rng):
    # U's first k columns of a D² × K matrix, reshaped to (D, D, K), column-major: still a box
    e, full = block_in_zeros(s, rng, (16, 8), ((0, 16), (0, 3)))
    check(s, s.reshape(e, (4, 4, 8)), full.reshape((4, 4, 8), order="F"), Embedded)
    check(s, s.reshape(s.reshape(e, (4, 4, 8)), (16, 8)), full, Embedded)
    # row-major (NumPy's), the mirror image: the first k rows of a K × D² matrix to (K, D, D)
    e, full = block_in_zeros(s, rng, (8, 16), ((0, 3), (0, 16)))
    check(s, s.reshape(e, (8, 4, 4), "C"), full.reshape((8, 4, 4)), Embedded)
    check(s, s.reshape(s.reshape(e, (8, 4, 4), "C"), (8, 16), "C"), full, Embedded)
    # rows 1:3 of a (4, 6) reshaped to (2, 2, 6) are no box of the new shape: dense, same numbers
    e, full = block_in_zeros(s, rng, (4, 6), ((1, 3), (0, 6)))
    got = s.reshape(e, (2, 2, 6))
    assert not isinstance(got, Structured)
    np.testing.assert_allclose(value(s, got), full.reshape((2, 2, 6), order="F"))


@pytest.mark.parametrize("old, new, box, want", [
    ((16, 8), (4, 4, 8), ((0, 16), (0, 3)), ((0, 4), (0, 4), (0, 3))),
    ((4, 4, 8), (16, 8), ((0, 4), (0, 4), (2, 5)), ((0, 16), (2, 5))),
    ((6, 4), (6, 2, 2), ((0, 6), (0, 2)), ((0, 6), (0, 2), (0, 1))),  # splits on a boundary: j = j0 + 2 j1
    ((6, 4), (6, 2, 2), ((0, 6), (1, 3)), None),  # it does not
    ((4, 6), (2, 2, 6), ((1, 3), (0, 6)), None),  # partial on a fast axis that merges
    ((5,), (5, 1), ((1, 4),), ((1, 4), (0, 1))),
    ((1, 5), (5,), ((0, 1), (1, 4)), ((1, 4),)),
    ((3, 4), (12,), ((0, 3), (0, 0)), None),  # an empty block: left to the dense path
])
def test_reshaped_box(old, new, box, want):
    assert reshaped_box(box, old, new) == want


def test_block_survives_reduce_sum(s, rng):
    e, full = block_in_zeros(s, rng, (5, 6, 3), ((1, 4), (0, 6), (0, 2)))
    check(s, s.reduce_sum(e, (1,)), full.sum(1), Embedded)
    whole = s.reduce_sum(e, (0, 2))  # the kept axis is whole: a plain tensor
    assert not isinstance(whole, Structured)
    np.testing.assert_allclose(value(s, whole), full.sum((0, 2)))


def test_sum_of_two_blocks_is_a_block_over_both(s, rng):
    a, fa = block_in_zeros(s, rng, (6, 8), ((0, 6), (0, 2)))
    b, fb = block_in_zeros(s, rng, (6, 8), ((0, 6), (1, 4)))
    check(s, s.add(a, b), fa + fb, Embedded)
    check(s, s.sub(a, b), fa - fb, Embedded)
    check(s, s.add(a, a), 2 * fa, Embedded)
    assert s.accumulate(None, a) is a and s.accumulate(a, None) is a


def test_block_times_or_over_anything_is_a_block(s, rng):
    e, full = block_in_zeros(s, rng, (6, 5), ((2, 5), (1, 3)))
    other = rng.standard_normal((6, 5)) + 3.0
    check(s, s.mul(e, const(s, other)), full * other, Embedded)
    check(s, s.mul(const(s, other), e), full * other, Embedded)
    check(s, s.div(e, const(s, other)), full / other, Embedded)
    row = s.broadcast_in_dim(const(s, rng.standard_normal(5)), (6, 5), (1,))
    check(s, s.mul(e, row), full * row.value().to_numpy(), Embedded)
    # where the other factor is infinite outside the block, the block's zeros stay exact zeros
    check(s, s.mul(e, const(s, np.where(full == 0, np.inf, 1.0))), full, Embedded)


def test_einsum_with_a_block_contracts_only_the_block(s, rng):
    e, full = block_in_zeros(s, rng, (7, 9), ((0, 7), (0, 3)))
    u = rng.standard_normal((7, 4))
    check(s, s.einsum([const(s, u), e], "ai,aj->ij"), u.T @ full, Embedded)  # j stays partial
    w = rng.standard_normal((9, 2))
    got = s.einsum([e, const(s, w)], "aj,jb->ab")  # j contracted: a plain tensor
    assert not isinstance(got, Structured)
    np.testing.assert_allclose(value(s, got), full @ w, rtol=1e-14)


# --- a matrix kept as two factors -------------------------------------------------------------


def test_product_survives_transpose_slice_conj_neg_scale_and_einsum(s, rng):
    left, right = rng.standard_normal((6, 4)), rng.standard_normal((4, 5))
    p, full = Product(const(s, left), const(s, right)), left @ right
    check(s, s.transpose(p, (1, 0)), full.T, Product)
    check(s, s.slice(p, SliceConfig([1, 0], [6, 5], [2, 2])), full[1:6:2, 0:5:2], Product)
    check(s, s.conj(p), full, Product)
    check(s, s.neg(p), -full, Product)
    check(s, s.scale_real(p, -0.5), -0.5 * full, Product)
    thin = rng.standard_normal((5, 2))
    np.testing.assert_allclose(value(s, s.einsum([p, const(s, thin)], "ab,bc->ac")), full @ thin, rtol=1e-13)
    got = s.mul(p, const(s, np.ones((6, 5))))  # an op that does not keep it: made dense
    assert not isinstance(got, Structured)
    np.testing.assert_allclose(value(s, got), full, rtol=1e-14)


# --- the SVD's pullback sees k columns in every spelling ---------------------------------------


def _pullback_width(rt, eng, step, a):
    """The block width the SVD's pullback got: the recorded vjp's svd_pullback node's U block."""
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: step(s, x))
    g = rt.vjp(eng, y, x, tf.Tensor(np.ones(y.shape)))  # recorded: its graph holds the pullback node
    (node,) = [n for n in ancestors([g]) if n.prim.name == "svd_pullback"]
    return node.inputs[3].shape[1]


SPELLINGS = {
    # what examples/ising_trg.py writes: V as the transpose of Vᴴ's first k rows
    "transpose of slice": lambda s, u, sv, vt, k: (
        s.slice(u, SliceConfig([0, 0], [u.shape[0], k])), s.transpose(s.slice(vt, SliceConfig([0, 0], [k, vt.shape[1]])), (1, 0))),
    # what a port of Rust reads: V's first k columns of Vᴴ's transpose
    "slice of transpose": lambda s, u, sv, vt, k: (
        s.slice(u, SliceConfig([0, 0], [u.shape[0], k])), s.slice(s.transpose(vt, (1, 0)), SliceConfig([0, 0], [vt.shape[1], k]))),
    # U reshaped before the slice, as tenferro's symbolic shapes need
    "reshape then slice": lambda s, u, sv, vt, k: (
        s.reshape(s.slice(s.reshape(u, (2, u.shape[0] // 2, u.shape[1])), SliceConfig([0, 0, 0], [2, u.shape[0] // 2, k])),
                  (u.shape[0], k)),
        s.transpose(s.slice(vt, SliceConfig([0, 0], [k, vt.shape[1]])), (1, 0))),
}


def truncated_step(spelling, k):
    """A TRG-like step on a matrix: SVD, U and V kept to k in ``spelling``, weighted by √s, contracted back."""

    def step(s, x):
        u, sv, vt = s.svd(x)
        left, right = SPELLINGS[spelling](s, u, sv, vt, k)
        root = s.sqrt(s.slice(sv, SliceConfig([0], [k])))
        left = s.einsum([left, root], "ai,i->ai")
        right = s.mul(right, s.broadcast_in_dim(root, right.shape, (1,)))
        return s.einsum([left, right, left], "ai,bi,bj->aj")

    return step


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_svd_pullback_works_on_k_columns_in_every_spelling(rt, eng, rng, spelling):
    a = rng.standard_normal((8, 8))
    assert _pullback_width(rt, eng, truncated_step(spelling, 2), a) == 2
    grads = []
    for name in SPELLINGS:  # and every spelling has the same gradient
        x = rt.variable_from(tf.Tensor(a))
        y = rt.with_eager_session(eng, lambda s: truncated_step(name, 2)(s, x))
        grads.append(rt.vjp(eng, y, x, tf.Tensor(np.ones(y.shape))).value().to_numpy())
    for g in grads[1:]:
        np.testing.assert_allclose(g, grads[0], rtol=1e-13, atol=1e-13)


def test_sqrt_of_the_whole_spectrum_then_slice_keeps_exact_zeros_finite(rt, eng, rng):
    """√s taken before the truncation, on a spectrum with exact zeros: the cotangent beyond k is a
    symbolic zero through √'s derivative (infinite there), so the gradient stays finite."""
    q1, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    q2, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    x = rt.variable_from(tf.Tensor(q1 @ np.diag([3.0, 2.0, 0.0, 0.0]) @ q2.T))

    def loss(s):
        u, sv, vt = s.svd(x)
        root = s.slice(s.sqrt(sv), SliceConfig([0], [2]))
        return s.reduce_sum(s.mul(root, root))

    y = rt.with_eager_session(eng, loss)
    g = rt.grad(eng, y, x).value().to_numpy()
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, q1[:, :2] @ q2[:, :2].T, atol=1e-12)  # d(s₁ + s₂)/dA = U₂V₂ᵀ
