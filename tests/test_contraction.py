"""The pairwise kernels and the intermediates' layouts (tenferro_py.contraction): values against
np.einsum for operands of any strides, batch indices as batched GEMM, derivatives by check_grads,
and what is copied, counted: a layout that copies nothing is a fact on any machine."""

import numpy as np
import pytest

import tenferro_py.numpy as tnp
from tenferro_py import contraction
from tenferro_py.testing import check_grads


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


def build(inputs, output, shapes):
    """The kernel of one einsum step."""
    return contraction.kind(inputs, output)(inputs, output, shapes)


PAIRS = [
    ("wdbl,buwr->ruld", [(3, 4, 2, 5), (2, 3, 3, 4)]),  # TRG's: interleaved free indices
    ("buwr,ruld->wdbl", [(2, 3, 3, 4), (4, 3, 5, 2)]),
    ("ab,ac->bc", [(6, 1), (6, 4)]),  # a size-1 axis
    ("ij,jk->ki", [(3, 5), (5, 7)]),  # the output transposed
    ("abc,cb->a", [(2, 3, 4), (4, 3)]),
    ("bij,bjk->bik", [(3, 2, 4), (3, 4, 5)]),  # a batch index
    ("ijb,bkj->kbi", [(2, 4, 3), (3, 5, 4)]),  # batch index inside and last
    ("pajq,qkap->pqjk", [(2, 3, 4, 2), (2, 5, 3, 2)]),  # two batch indices, apart
    ("ab,cb->abc", [(2, 3), (4, 3)]),  # a batch index and no sum
    ("ij,jk->ik", [(0, 3), (3, 2)]),  # zero-size
    ("ij,jk->ik", [(2, 0), (0, 3)]),  # an empty sum
]


@pytest.mark.parametrize(("subscripts", "shapes"), PAIRS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_pairwise_kernel_any_strides(rng, subscripts, shapes, dtype):
    """Every layout the kernel picks gives np.einsum's values, C-ordered, in the operands' dtype."""
    lhs, out = subscripts.split("->")
    kernel = build(tuple(lhs.split(",")), out, tuple(map(tuple, shapes)))
    tol = 1e-5 if dtype is np.float32 else 1e-12
    for x in strided_views(rng, shapes[0], dtype):
        for y in strided_views(rng, shapes[1], dtype):
            got = kernel(x, y)
            assert got.dtype == x.dtype and got.shape == np.einsum(subscripts, x, y).shape
            assert got.flags["C_CONTIGUOUS"] or isinstance(kernel, contraction.BroadcastProduct)
            np.testing.assert_allclose(got, np.einsum(subscripts, x, y), rtol=tol, atol=tol)


def test_batch_indices_are_one_gemm_per_batch_without_copies(rng):
    """A batch index is looped over by matmul, one GEMM each: no numpy.einsum, nothing copied."""
    x, y = rng.standard_normal((5, 3, 4)), rng.standard_normal((4, 5, 6))
    kernel = build(("bij", "jbk"), "bik", (x.shape, y.shape))
    assert isinstance(kernel, contraction.MatrixProduct)
    with contraction.counting() as count:
        got = kernel(x, y)
    np.testing.assert_allclose(got, np.einsum("bij,jbk->bik", x, y), rtol=1e-13)
    assert (count.gemms, count.copied, count.flops) == (5, 0, 2 * 5 * 3 * 4 * 6)


def test_transposed_operands_are_read_in_place(rng):
    """Transposes fold into GEMM's flags: xᵀ·y and x·yᵀ copy nothing."""
    x, y, z = rng.standard_normal((4, 3)), rng.standard_normal((4, 5)), rng.standard_normal((5, 4))
    for subscripts, a, b in [("ji,jk->ik", x, y), ("ij,kj->ik", x.T, z), ("ij,jk->ik", x.T, y)]:
        lhs, out = subscripts.split("->")
        kernel = build(tuple(lhs.split(",")), out, (a.shape, b.shape))
        with contraction.counting() as count:
            got = kernel(a, b)
        np.testing.assert_allclose(got, np.einsum(subscripts, a, b), rtol=1e-13)
        assert count.copied == 0


def test_permutation_is_a_c_ordered_copy(rng):
    x = rng.standard_normal((2, 3, 4))
    kernel = build(("abc",), "cab", (x.shape,))
    got = kernel(x)
    assert got.flags["C_CONTIGUOUS"] and not np.shares_memory(got, x)
    np.testing.assert_array_equal(got, x.transpose(2, 0, 1))
    assert build(("",), "", ((),))(np.float64(2.0)).shape == ()
    assert contraction.kind(("ii",), "i") is None  # a diagonal: numpy.einsum's


HOTRG_UPDATE = "acx,aruk,cskd,rsy->xyud"


def _hotrg_operands(rng, n):
    return [rng.standard_normal(s) for s in [(n, n, n), (n, n, n, n), (n, n, n, n), (n, n, n)]]


def test_hotrg_update_value_and_gradient_copies(rng):
    """Nine GEMM calls, and of the n⁵-element arrays 6 n⁵ copied in all (the intermediates read as
    matrices, each cotangent reordered at most once for both of its contractions); the rest is
    n⁴-sized: T2 ('cskd', its summed index inside) read or written three times, the result and its
    cotangent. (Intermediates made in the order their consumer reads would copy 4 n⁵, but would
    change the order of the sums, and the examples' last bits.)"""
    n = 8
    xs = _hotrg_operands(rng, n)
    w = rng.standard_normal((n,) * 4)
    f = tnp.value_and_grad(lambda *ys: tnp.sum(tnp.einsum(HOTRG_UPDATE, *ys) * w), argnums=(0, 1, 2, 3))
    with contraction.counting() as count:
        value, grads = f(*xs)
    assert count.gemms == 9 and count.flops == 3 * 2 * n**7 + 6 * 2 * n**6
    assert count.copied <= 6 * n**5 + 3 * (n**4 + n**3) + 2 * n**4
    np.testing.assert_allclose(value, np.sum(np.einsum(HOTRG_UPDATE, *xs) * w), rtol=1e-12)
    np.testing.assert_allclose(grads[1], np.einsum("xyud,acx,cskd,rsy->aruk", w, xs[0], xs[2], xs[3]), rtol=1e-11)


@pytest.mark.parametrize(
    ("subscripts", "shapes"),
    [
        (HOTRG_UPDATE, [(2, 3, 2), (2, 3, 2, 2), (3, 2, 2, 3), (3, 2, 2)]),
        ("bij,bjk,bkl->bil", [(2, 3, 2), (2, 2, 4), (2, 4, 3)]),  # batched chain
        ("abc,bcd,dea,ef->f", [(2, 3, 2), (3, 2, 3), (3, 2, 2), (2, 3)]),
    ],
)
def test_pairwise_paths_differentiate(rng, subscripts, shapes):
    arrays = [rng.standard_normal(s) for s in shapes]
    check_grads(lambda s, *xs: s.einsum(list(xs), subscripts), arrays, modes=("fwd", "rev"), order=2)
    complex_arrays = [a + 1j * rng.standard_normal(a.shape) for a in arrays]
    check_grads(lambda s, *xs: s.einsum(list(xs), subscripts), complex_arrays, modes=("rev",), order=1)


def test_cotangent_order(rng):
    """The cotangent is reordered once when both contractions would otherwise copy it."""
    assert contraction.cotangent_order(("ydrck", "xurck"), "xyud", ((2,) * 5, (2,) * 5)) == "ydxu"
    assert contraction.cotangent_order(("ij", "jk"), "ik", ((2, 3), (3, 4))) is None  # already (i | k)
    assert contraction.cotangent_order(("ij", "ij"), "ij", ((2, 3), (2, 3))) is None  # no sum: not a GEMM


def test_top_level_reverse_sweep_holds_no_cotangent_past_its_use(rng):
    """tnp.value_and_grad and a top-level pullback sweep unrecorded: nothing will differentiate the
    gradient there, so a chain of k products of 1 MiB arrays peaks near what its forward holds
    (the argument, the factor, the k products, x·x: k + 3 arrays) plus a few live cotangents, not
    near twice that (every cotangent kept by the graph of a recorded sweep: 2k + 7)."""
    import tracemalloc

    k, n = 12, 362  # 362² doubles: 1 MiB each
    m = rng.standard_normal((n, n)) / np.sqrt(n)

    def chain(x):
        factor = tnp.asarray(m)  # one constant (each lift of NumPy data would be a copy)
        for _ in range(k):
            x = tnp.einsum("ij,jk->ik", x, factor)
        return tnp.sum(x * x)

    x0 = rng.standard_normal((n, n))
    for run in (lambda: tnp.value_and_grad(chain)(x0), lambda: tnp.vjp(chain, x0)[1](1.0)):
        tracemalloc.start()
        try:
            run()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < (k + 8) * x0.nbytes, f"peak {peak / x0.nbytes:.1f} arrays of the chain's size"
