"""einsum against numpy.einsum on opt_einsum's own test expressions.

The expressions are ported from opt_einsum 3.4.0's tests (MIT license, (c) Daniel Smith):
``tests/test_contract.py``'s ``tests`` list, and the ellipsis and singleton-broadcast cases
of ``tests/test_input.py``. Index sizes are this file's own (2 to 4), so the whole list runs
in seconds. Each expression is also run spelled in Greek letters (as opt_einsum's
``test_compare_greek`` does) against numpy.einsum on the ASCII spelling; derivatives are
checked on every expression to second order, and in complex numbers on a subset.
"""

import numpy as np
import opt_einsum
import pytest

import tenferro_py as tf
from tenferro_py.testing import check_grads

# opt_einsum tests/test_contract.py, ``tests``.
EXPRESSIONS = [
    # Test scalar-like operations
    "a,->a",
    "ab,->ab",
    ",ab,->ab",
    ",,->",
    # Test hadamard-like products
    "a,ab,abc->abc",
    "a,b,ab->ab",
    # Test index-transformations
    "ea,fb,gc,hd,abcd->efgh",
    "ea,fb,abcd,gc,hd->efgh",
    "abcd,ea,fb,gc,hd->efgh",
    # Test complex contractions
    "acdf,jbje,gihb,hfac,gfac,gifabc,hfac",
    "acdf,jbje,gihb,hfac,gfac,gifabc,hfac",
    "cd,bdhe,aidb,hgca,gc,hgibcd,hgac",
    "abhe,hidj,jgba,hiab,gab",
    "bde,cdh,agdb,hica,ibd,hgicd,hiac",
    "chd,bde,agbc,hiad,hgc,hgi,hiad",
    "chd,bde,agbc,hiad,bdi,cgh,agdb",
    "bdhe,acad,hiab,agac,hibd",
    # Test collapse
    "ab,ab,c->",
    "ab,ab,c->c",
    "ab,ab,cd,cd->",
    "ab,ab,cd,cd->ac",
    "ab,ab,cd,cd->cd",
    "ab,ab,cd,cd,ef,ef->",
    # Test outer prodcuts
    "ab,cd,ef->abcdef",
    "ab,cd,ef->acdf",
    "ab,cd,de->abcde",
    "ab,cd,de->be",
    "ab,bcd,cd->abcd",
    "ab,bcd,cd->abd",
    # Random test cases that have previously failed
    "eb,cb,fb->cef",
    "dd,fb,be,cdb->cef",
    "bca,cdb,dbf,afc->",
    "dcc,fce,ea,dbf->ab",
    "fdf,cdd,ccd,afe->ae",
    "abcd,ad",
    "ed,fcd,ff,bcf->be",
    "baa,dcf,af,cde->be",
    "bd,db,eac->ace",
    "fff,fae,bef,def->abd",
    "efc,dbc,acf,fd->abe",
    # Inner products
    "ab,ab",
    "ab,ba",
    "abc,abc",
    "abc,bac",
    "abc,cba",
    # GEMM test cases
    "ab,bc",
    "ab,cb",
    "ba,bc",
    "ba,cb",
    "abcd,cd",
    "abcd,ab",
    "abcd,cdef",
    "abcd,cdef->feba",
    "abcd,efdc",
    # Inner than dot
    "aab,bc->ac",
    "ab,bcc->ac",
    "aab,bcc->ac",
    "baa,bcc->ac",
    "aab,ccb->ac",
    # Randomly build test caes
    "aab,fa,df,ecc->bde",
    "ecb,fef,bad,ed->ac",
    "bcf,bbb,fbf,fc->",
    "bb,ff,be->e",
    "bcb,bb,fc,fff->",
    "fbb,dfd,fc,fc->",
    "afd,ba,cc,dc->bf",
    "adb,bc,fa,cfc->d",
    "bbd,bda,fc,db->acf",
    "dba,ead,cad->bce",
    "aef,fbc,dca->bde",
]

# This file's index sizes (opt_einsum's go up to 7).
SIZES = dict(zip("abcdefghij", [2, 3, 4, 2, 3, 4, 2, 3, 4, 2]))

# opt_einsum tests/test_input.py: the ellipsis cases of ``test_compare`` (there '...' stands
# for axes of sizes 2, 3) and the singleton broadcasts of ``test_singleton_dimension_broadcast``.
WITH_SHAPES = [
    ("...a->...", [(2, 3, 2)]),
    ("a...->...", [(2, 2, 3)]),
    ("a...a->...a", [(2, 2, 3, 2)]),
    ("...,...", [(2, 3), (2, 3)]),
    ("a,b", [(2,), (3,)]),
    ("...a,...b", [(2, 3, 2), (2, 3, 3)]),
    ("...a->...a", [(2, 3, 2)]),
    ("...b,...a->...", [(2, 3, 3), (2, 3, 2)]),
    ("ij,ij->j", [(10, 2), (1, 2)]),
    ("...ij,...jk->...ik", [(1, 5), (1, 5)]),
    ("...ij,...jk->...ik", [(1, 5), (5, 5)]),
]


def shapes_of(expression):
    return [tuple(SIZES[c] for c in term) for term in expression.split("->")[0].split(",")]


def greek(expression):
    """The expression with a-j spelled α-κ, as opt_einsum's test_compare_greek does."""
    return "".join(chr(ord(c) + 848) if c.isalpha() else c for c in expression)


def assert_matches_numpy(run, subscripts, arrays, numpy_subscripts):
    y = run(lambda s: s.einsum([tf.Tensor(a) for a in arrays], subscripts))
    want = np.einsum(numpy_subscripts, *arrays)
    assert y.shape == want.shape
    scale = max(1.0, float(np.max(np.abs(want))) if want.size else 0.0)
    np.testing.assert_allclose(y.value().to_numpy(), want, rtol=1e-12, atol=1e-12 * scale)


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_forward_matches_numpy(run, rng, expression):
    arrays = [rng.standard_normal(shape) for shape in shapes_of(expression)]
    assert_matches_numpy(run, expression, arrays, expression)


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_forward_in_greek_matches_numpy(run, rng, expression):
    arrays = [rng.standard_normal(shape) for shape in shapes_of(expression)]
    assert_matches_numpy(run, greek(expression), arrays, expression)


@pytest.mark.parametrize("subscripts,shapes", WITH_SHAPES)
def test_ellipsis_and_broadcast_match_numpy(run, rng, subscripts, shapes):
    arrays = [rng.standard_normal(shape) for shape in shapes]
    assert_matches_numpy(run, subscripts, arrays, subscripts)
    check_grads(lambda s, *xs: s.einsum(list(xs), subscripts), arrays, modes=("fwd", "rev"), order=2)


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_grads(rng, expression):
    arrays = [rng.standard_normal(shape) for shape in shapes_of(expression)]
    check_grads(lambda s, *xs: s.einsum(list(xs), expression), arrays, modes=("fwd", "rev"), order=2)


@pytest.mark.parametrize("expression", EXPRESSIONS[::5])
def test_complex_in_greek(run, rng, expression):
    arrays = [rng.standard_normal(shape) + 1j * rng.standard_normal(shape) for shape in shapes_of(expression)]
    assert_matches_numpy(run, greek(expression), arrays, expression)
    check_grads(lambda s, *xs: s.einsum(list(xs), greek(expression)), arrays, modes=("fwd", "rev"), order=1)


@pytest.mark.parametrize("subscripts,shapes", [(e, shapes_of(e)) for e in EXPRESSIONS] + WITH_SHAPES)
def test_tnp_einsum_outside_a_session_is_the_sessions_bit_for_bit(rng, subscripts, shapes):
    """NumPy data outside a session go through the same planned kernels as inside one (not through
    NumPy's unoptimised einsum), real and complex, also on non-contiguous views."""
    import tenferro_py.numpy as tnp

    for complex_ in (False, True):
        arrays = [rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if complex_ else 0)
                  for shape in shapes]
        arrays = [np.asfortranarray(a) if i % 2 and np.ndim(a) > 1 else np.asarray(a) for i, a in enumerate(arrays)]
        outside = tnp.einsum(subscripts, *arrays)
        with tnp.session():
            inside = tnp.einsum(subscripts, *arrays).tensor.value().array
        assert isinstance(outside, (np.ndarray, np.generic)) and outside.dtype == inside.dtype
        assert outside.shape == inside.shape and outside.tobytes() == np.ascontiguousarray(inside).tobytes()


def test_tnp_einsum_outside_a_session_plans_a_large_network(rng):
    """A CTMRG-like network of nine operands at chi = 16 (NumPy's einsum without optimize would form
    their full outer product: 1262 s, reported in issue 33) takes opt_einsum's path."""
    import tenferro_py.numpy as tnp

    chi, d = 16, 3
    c = [rng.standard_normal((chi, chi)) for _ in range(4)]
    t = [rng.standard_normal((chi, d, d, chi)) for _ in range(4)]
    a = rng.standard_normal((d, d, d, d))
    spec = "ab,bcdf,fg,gehi,ij,jklm,mn,nopa,cekp->dhlo"  # corners, edges, the site tensor; open: d h l o
    operands = (c[0], t[0], c[1], t[1], c[2], t[2], c[3], t[3], a)
    got = tnp.einsum(spec, *operands)
    want = opt_einsum.contract(spec, *operands)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


def test_tnp_einsum_of_what_is_not_a_number_is_refused_with_a_named_error():
    import tenferro_py.numpy as tnp

    for data in (np.array([1, "a"], dtype=object), np.array(["a", "b"])):
        with pytest.raises(tf.DTypeMismatch, match="einsum: expected numeric data"):
            tnp.einsum("i,i", data, data)


def test_tnp_einsum_of_integers_is_numpys():
    import tenferro_py.numpy as tnp

    x = np.arange(6).reshape(2, 3)
    got = tnp.einsum("ij,kj->ik", x, x)
    assert got.dtype == np.einsum("ij,kj->ik", x, x).dtype and (got == x @ x.T).all()
