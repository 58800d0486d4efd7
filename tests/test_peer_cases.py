"""Cases ported from the peers' own test suites (JAX, PyTorch, autograd, opt_einsum), pinned so they
never regress: zero-size factorisations' JVP and VJP, pinv at eye(2) and at deficient rank,
subnormal and rank-deficient inputs, gauge-fixed spectral derivatives, einsum's broadcasting.
bench/peer_suites.py runs the thousands of ported cases these stand for; each test names the peer
test it comes from. Values against NumPy/SciPy, derivatives by check_grads (both modes, order 2).
"""

import numpy as np
import pytest
import scipy.linalg
from conftest import random

import tenferro_py.numpy as tnp

ORDER2 = dict(modes=("fwd", "rev"), order=2)


def joined(out):
    """A tuple of outputs as one vector, as autograd's check_grads takes a tuple."""
    return tnp.concatenate([tnp.ravel(o) for o in out]) if isinstance(out, tuple) else out


# --- zero-size factorisations (JAX testCholesky/testSlogdet/testQr/testSVD, torch's OpInfo samples) ---

ZERO_SIZE = {
    "svd": lambda x: tnp.linalg.svd(x, full_matrices=False),
    "svdvals": tnp.linalg.svdvals,
    "qr": tnp.linalg.qr,
    "eigh": tnp.linalg.eigh,
    "eigvalsh": tnp.linalg.eigvalsh,
    "cholesky": tnp.linalg.cholesky,
    "det": tnp.linalg.det,
    "slogdet": lambda x: tuple(tnp.linalg.slogdet(x)),
    "inv": tnp.linalg.inv,
    "pinv": tnp.linalg.pinv,
    "eig": tnp.linalg.eig,
    "expm": tnp.scipy.linalg.expm,
}
RECTANGULAR = {"svd", "svdvals", "qr", "pinv"}


EMPTY = [(op, shape) for op in sorted(ZERO_SIZE) for shape in [(0, 0), (2, 0, 0), (0, 3, 3), (3, 0), (0, 3), (2, 3, 0)]
         if shape[-1] == shape[-2] or op in RECTANGULAR]


@pytest.mark.parametrize("op, shape", EMPTY, ids=[f"{op}-{shape}" for op, shape in EMPTY])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["real", "complex"])
def test_zero_size_factorisations_have_jvp_and_vjp(op, shape, dtype):
    """k = min(m, n) = 0 or an empty stack: the forward gives NumPy's empty outputs and the rules
    their zero derivatives (issue 26: every JVP and VJP raised, ~340 JAX and PyTorch cases)."""
    x = np.zeros(shape, dtype)
    f = lambda a: joined(ZERO_SIZE[op](a))  # noqa: E731
    y, tangent = tnp.jvp(f, (x,), (x,))
    assert np.asarray(tangent).shape == np.asarray(y).shape and not np.asarray(tangent).any()
    y, pullback = tnp.vjp(f, x)
    (cotangent,) = pullback(np.zeros(np.shape(y), np.asarray(y).dtype))
    assert np.asarray(cotangent).shape == shape and not np.asarray(cotangent).any()
    tnp.check_grads(f, [x], **ORDER2)


# --- pinv (JAX testPinvGradIssue2792, torch linalg.pinv 'singular') --------------------------------


def jacobian(f, x):
    """∂f/∂x, of shape f(x).shape + x.shape, column by column by forward mode."""
    columns = []
    for index in np.ndindex(*x.shape):
        e = np.zeros(x.shape)
        e[index] = 1
        columns.append(np.asarray(tnp.jvp(f, (x,), (e,))[1]))
    return np.stack(columns, -1).reshape(columns[0].shape + x.shape)


def test_jax_pinv_grad_issue_2792():
    def f(p):
        zero = 0.0 * p
        return tnp.linalg.pinv(tnp.stack([tnp.stack([zero, zero]), tnp.stack([-p, zero + 1])]) / (1 + p ** 2))

    np.testing.assert_allclose(jacobian(f, np.array(2.0)), [[0.0, -1.0], [0.0, 0.0]], atol=1e-14)
    expected = np.array([[[[-1.0, 0.0], [0.0, 0.0]], [[0.0, -1.0], [0.0, 0.0]]],
                         [[[0.0, 0.0], [-1.0, 0.0]], [[0.0, 0.0], [0.0, -1.0]]]])
    np.testing.assert_allclose(jacobian(tnp.linalg.pinv, np.eye(2)), expected, atol=1e-14)


@pytest.mark.parametrize("batch, m, n, k", [((), 3, 3, 1), ((), 3, 5, 2), ((2,), 5, 3, 2), ((0,), 3, 3, 1)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["real", "complex"])
def test_torch_pinv_singular(rng, batch, m, n, k, dtype):
    """pinv(a @ bᵀ) of orthonormal factors of rank k < min(m, n): every path in (a, b) keeps the rank,
    along which pinv is differentiable."""
    a = np.linalg.qr(random(rng, batch + (m, k), dtype))[0]
    b = np.linalg.qr(random(rng, batch + (n, k), dtype))[0]
    with tnp.session():
        got = np.asarray(tnp.linalg.pinv(a @ np.swapaxes(b, -1, -2)))
    np.testing.assert_allclose(got, np.linalg.pinv(a @ np.swapaxes(b, -1, -2)), atol=1e-12)
    tnp.check_grads(lambda x, y: tnp.linalg.pinv(x @ tnp.swapaxes(y, -1, -2)), [a, b], **ORDER2)


# --- subnormal and rank-deficient inputs (JAX svd_test) --------------------------------------------


@pytest.mark.parametrize("m, n, r, c", [(2, 4, 1, 1), (4, 4, 0, 0), (8, 6, 1, 1)])
def test_jax_svd_on_tiny_element(m, n, r, c):
    """A matrix of zeros but one entry at the smallest normal number: s₁ is that entry, its
    derivative along it 1 (in units of the entry), finite everywhere else."""
    tiny = np.finfo(np.float64).tiny
    a = np.zeros((m, n))
    a[r, c] = tiny
    with tnp.session():
        s = np.asarray(tnp.linalg.svdvals(a))
    np.testing.assert_array_equal(s, np.r_[tiny, np.zeros(min(m, n) - 1)])
    d = np.zeros((m, n))
    d[r, c] = 1.0
    _, ds = tnp.jvp(lambda x: tnp.linalg.svdvals(x), (a,), (d,))
    np.testing.assert_allclose(np.asarray(ds)[0], 1.0, rtol=1e-15)
    assert np.all(np.isfinite(tnp.grad(lambda x: tnp.sum(tnp.linalg.svdvals(x)))(a)))


@pytest.mark.parametrize("op", ["svd", "eigh", "qr"])
def test_subnormal_matrices_differentiate_as_unscaled_ones(rng, op):
    """At 2⁻¹⁰³⁰ ≈ 1e-310 the gradient of a loss of degree 1 in A (so of degree 0: representable) is the
    unscaled one, though the couplings 1/(s_j − s_i) overflow there (issue 26 item 6: the SVD's was NaN)."""
    scale = 2.0 ** -1030
    a = random(rng, (5, 4) if op != "eigh" else (4, 4))
    a = a + a.T if op == "eigh" else a
    w1, w2 = random(rng, (5, 4)), random(rng, (4, 4))
    loss = {"svd": lambda x: (lambda u, s, vt: tnp.sum(w1 * (u * s)) + tnp.sum(w2 * (s[:, None] * vt)))(
                *tnp.linalg.svd(x, full_matrices=False)),
            "eigh": lambda x: (lambda w, v: tnp.sum(w2 * (v * w)))(*tnp.linalg.eigh(x)),
            "qr": lambda x: (lambda q, r: tnp.sum(w1 * q * tnp.diagonal(r)) + tnp.sum(w2 * r))(*tnp.linalg.qr(x))}[op]
    unscaled = tnp.grad(loss)(a)
    scaled = tnp.grad(loss)(scale * a)
    np.testing.assert_allclose(scaled, unscaled, rtol=1e-10, atol=1e-10 * np.abs(unscaled).max())


def test_jax_svd_rank_deficient_input_along_rank_keeping_directions(rng):
    """U S Vᴴ at a rank-3 8×8 matrix (svd_test.testSvdWithOnRankDeficientInput): its JVP along a
    direction that keeps the rank is that direction, as is pinv's second-order consistency."""
    u, _, v = np.linalg.svd(np.triu(np.ones((8, 8))))
    s = np.linspace(100, 1, 8)
    s[3:] = 0
    a = (u * s) @ v
    d = u[:, :3] @ random(rng, (3, 3)) @ v[:3, :]
    _, tangent = tnp.jvp(lambda x: (lambda uu, ss, vv: (uu * ss) @ vv)(*tnp.linalg.svd(x, full_matrices=False)),
                         (a,), (d,))
    np.testing.assert_allclose(np.asarray(tangent), d, atol=1e-12)


# --- gauge-fixed spectral derivatives (JAX testSVDGrad, testEighGrad; torch's output processing) ---


def normalizing_svd(a):
    """JAX's _normalizing_svd: U's first row real and positive, V's phases to match."""
    u, s, vt = tnp.linalg.svd(a, full_matrices=False)
    top = u[..., 0:1, :]
    phase = tnp.conj(top) / tnp.abs(top)
    return u * phase, s, vt * tnp.conj(tnp.swapaxes(phase, -1, -2))


@pytest.mark.parametrize("shape", [(5, 2), (2, 5), (2, 4, 4)], ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["real", "complex"])
def test_jax_svd_grad(rng, shape, dtype):
    tnp.check_grads(lambda x: joined(normalizing_svd(x)), [random(rng, shape, dtype)], **ORDER2)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["real", "complex"])
def test_jax_eigh_grad_of_a_triangle(rng, dtype):
    """eigh of a lower triangle, symmetrised (JAX's symmetrize_input=True, as tnp's eigh reads the
    Hermitian part), V's phases fixed by its first row."""
    a = random(rng, (4, 4), dtype)
    a = np.tril(a + np.conj(a.T))

    def f(x):
        w, v = tnp.linalg.eigh(x)
        top = v[..., 0:1, :]
        return joined((w, v * (tnp.conj(top) / tnp.abs(top))))

    tnp.check_grads(f, [a], **ORDER2)


@pytest.mark.parametrize("process", ["fn_U", "fn_UVh"])
@pytest.mark.parametrize("shape", [(3, 5, 3), (3, 3, 5)], ids=str)
def test_torch_svd_samples(rng, process, shape):
    """torch's svd OpInfo samples, through its output processing: |U| and (U Vᴴ, S)."""
    a = random(rng, shape, np.complex128)
    f = {"fn_U": lambda x: tnp.abs(tnp.linalg.svd(x, full_matrices=False)[0]),
         "fn_UVh": lambda x: (lambda u, s, vh: joined((u @ vh, s)))(*tnp.linalg.svd(x, full_matrices=False))}[process]
    tnp.check_grads(f, [a], **ORDER2)


def test_torch_eigh_sample_through_its_hermitian_wrapper(rng):
    a = random(rng, (2, 5, 5), np.complex128)
    tnp.check_grads(lambda x: (lambda w, v: joined((w, tnp.abs(v))))(*tnp.linalg.eigh(x + tnp.conj(
        tnp.swapaxes(x, -1, -2)))), [a], **ORDER2)


def test_jax_det_grad_of_singular_matrices():
    """det's gradient at corank 1 (nonzero) and corank 2 (zero), JAX's matrices."""
    corank1 = np.array([[50, -30, 45], [-30, 90, -81], [45, -81, 81]], dtype=float)
    corank2 = np.array([[36, -42, 18], [-42, 49, -21], [18, -21, 9]], dtype=float)
    for a in (corank1, corank2):
        tnp.check_grads(tnp.linalg.det, [a], modes=("fwd", "rev"), order=1)
    adjugate = np.array([[np.linalg.det(np.delete(np.delete(corank1, i, 0), j, 1)) * (-1) ** (i + j)
                          for j in range(3)] for i in range(3)])
    np.testing.assert_allclose(tnp.grad(tnp.linalg.det)(corank1), adjugate, rtol=1e-10)
    np.testing.assert_allclose(tnp.grad(tnp.linalg.det)(corank2), 0, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["real", "complex"])
def test_jax_expm_frechet_is_the_jvp_of_expm(rng, dtype):
    """SciPy's expm_frechet(a, e) is expm's JVP at a along e (JAX testExpmFrechet's norms)."""
    for target in (1e-2, 0.2, 0.9, 2.0, 3.0):
        a = random(rng, (5, 5), dtype)
        a = a / np.linalg.norm(a, 1) * target
        e = random(rng, (5, 5), dtype)
        got = np.asarray(tnp.jvp(tnp.scipy.linalg.expm, (a,), (e,))[1])
        np.testing.assert_allclose(got, scipy.linalg.expm_frechet(a, e, compute_expm=False), rtol=1e-12,
                                   atol=1e-12 * np.abs(got).max())


def test_jax_issue_669_eigh_grad_at_the_identity():
    got = tnp.grad(lambda x: tnp.real(tnp.sum(tnp.linalg.eigh(x)[0])))(np.eye(3, dtype=np.complex128))
    np.testing.assert_allclose(got, np.eye(3), atol=1e-14)


def test_torch_lstsq_grad_oriented(rng):
    """(x, residuals) of an overdetermined full-rank problem, both differentiable."""
    a, b = random(rng, (4, 3)), random(rng, (4, 3))
    tnp.check_grads(lambda x, y: (lambda sol, res, *_: joined((sol, res)))(*tnp.linalg.lstsq(x, y)), [a, b],
                    **ORDER2)


# --- einsum (opt_einsum's tests/test_contract.py, tests/test_input.py) ------------------------------


@pytest.mark.parametrize("subscripts, shapes", [
    ("fdf,cdd,ccd,afe->ae", [(6, 4, 6), (3, 4, 4), (3, 3, 4), (2, 6, 5)]),
    ("ab,ab,c->c", [(2, 3), (2, 3), (4,)]),
    ("...ij,...jk->...ik", [(1, 5), (5, 5)]),
    ("ajk,kbl,jl,ab->ab", [(1, 5, 4), (4, 1, 6), (5, 6), (7, 7)]),
    ("a...a->...a", [(2, 3, 4, 2)]),
])
def test_opt_einsum_contractions(rng, subscripts, shapes):
    ops = [rng.random(s) for s in shapes]
    with tnp.session():
        got = np.asarray(tnp.einsum(subscripts, *ops))
    np.testing.assert_allclose(got, np.einsum(subscripts, *ops), rtol=1e-12)
    tnp.check_grads(lambda *xs: tnp.einsum(subscripts, *xs), ops, **ORDER2)


def test_opt_einsum_greek_indices(rng):
    string = "abcd,ea,fb,gc,hd->efgh"
    greek = "".join(chr(ord(c) + 848) if c not in ",->" else c for c in string)
    ops = [rng.random(s) for s in [(2, 3, 4, 5), (6, 2), (7, 3), (2, 4), (3, 5)]]
    with tnp.session():
        got = np.asarray(tnp.einsum(greek, *ops))
    np.testing.assert_allclose(got, np.einsum(string, *ops), rtol=1e-12)


# --- norms over axis pairs and vector p-norms (JAX testNorm, torch linalg.matrix_norm/norm, autograd) ---

MATRIX_ORDS = [None, "fro", "nuc", 2, -2, 1, -1, np.inf, -np.inf]


@pytest.mark.parametrize("shape, axis", [((3, 4, 5), (0, 2)), ((7, 8, 9), (2, 0)), ((2, 3, 2), (-1, 0)),
                                         ((4, 5), (1, 0))], ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_matrix_norms_over_a_pair_of_axes_are_numpys(rng, shape, axis, keepdims):
    """norm(x, ord, axis=(i, j)) is the matrix norm of each matrix over those axes: ord 1, 2 and inf
    (and −1, −2, −inf) were vector norms over both axes, without an error (JAX testNorm)."""
    for dtype in (np.float64, np.complex128):
        x = random(rng, shape, dtype)
        for ord_ in MATRIX_ORDS:
            with tnp.session():
                got = np.asarray(tnp.linalg.norm(x, ord_, axis, keepdims))
            want = np.linalg.norm(x, ord_, axis, keepdims)
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=f"ord {ord_}")


@pytest.mark.parametrize("ord_", [2, "nuc", 1, -np.inf, None])
def test_matrix_norms_over_a_pair_of_axes_differentiate(rng, ord_):
    tnp.check_grads(lambda x: tnp.linalg.norm(x, ord_, (2, 0), True), [random(rng, (3, 4, 5), np.complex128)],
                    **ORDER2)


@pytest.mark.parametrize("ord_", [0, 0.5, 3, 3.5, 4, -0.5, -1, -2, -3.5])
def test_vector_p_norms(rng, ord_):
    """NumPy's vector norms of any order (autograd test_vector_norm_ord, torch linalg.norm), and at
    zero a finite derivative, 0 (torch's subgradients_at_zero samples)."""
    for x, axis in ((random(rng, (6,)), None), (random(rng, (3, 4), np.complex128), 1), (np.array([0.0, 1, 2]), 0)):
        with tnp.session():
            got = np.asarray(tnp.linalg.norm(x, ord_, axis))
        with np.errstate(divide="ignore"):
            np.testing.assert_allclose(got, np.linalg.norm(x, ord_, axis), rtol=1e-12)
    if ord_ != 0:
        tnp.check_grads(lambda x: tnp.linalg.norm(x, ord_, 1), [random(rng, (3, 4), np.complex128)], **ORDER2)
    np.testing.assert_array_equal(tnp.grad(lambda x: tnp.linalg.norm(x, ord_))(np.zeros(5)), np.zeros(5))


@pytest.mark.parametrize("shape", [(0, 0), (5, 0), (0, 5)], ids=str)
def test_empty_matrix_norms_are_numpys(shape):
    """1 and inf of an empty matrix are 0 (the largest of none), as NumPy's (torch's linalg.norm
    samples); −1 and −inf are 0 where there are sums, a clear error where there are none."""
    x = np.zeros(shape)
    for ord_ in (1, np.inf, -1, -np.inf):
        try:
            want = np.linalg.norm(x, ord_)
        except ValueError:
            with pytest.raises(ValueError, match="^norm: expected at least one row and column"), tnp.session():
                tnp.linalg.norm(x, ord_)
            continue
        with tnp.session():
            assert float(np.asarray(tnp.linalg.norm(x, ord_))) == want


# --- reductions, kron, einsum's interleaved form (JAX reducers and testOp, autograd test_systematic) ---


@pytest.mark.parametrize("shape, axis", [((3, 1), 1), ((1, 4), 0), ((), None), ((2, 1, 4), 1)], ids=str)
def test_std_where_the_variance_is_zero(rng, shape, axis):
    """std over one entry is 0 identically, so its derivative is 0 at every order, not 0/0 = NaN
    (JAX testReducer std over an axis of size 1, autograd test_std); over equal entries 0 too."""
    x = random(rng, shape)
    tnp.check_grads(lambda y: tnp.std(y, axis=axis), [x], **ORDER2)
    tnp.check_grads(lambda y: tnp.std(y, axis=axis), [x + 1j * random(rng, shape)], **ORDER2)
    np.testing.assert_array_equal(tnp.grad(lambda y: tnp.sum(tnp.std(y, axis=0)))(np.ones((3, 2))), 0)


@pytest.mark.parametrize("shapes", [((), (3,)), ((2,), (3,)), ((2, 3), (4,)), ((2, 1, 3), (4, 5)), ((2, 3), (4, 5)),
                                    ((0, 2), (3, 1))], ids=str)
def test_kron_of_any_ranks(rng, shapes):
    """NumPy's kron pads the lower rank with leading axes of size 1 (JAX testOp kron, autograd test_kron)."""
    a, b = (random(rng, s, np.complex128) for s in shapes)
    with tnp.session():
        got = np.asarray(tnp.kron(a, b))
    np.testing.assert_allclose(got, np.kron(a, b), rtol=1e-14)
    if a.size and b.size:
        tnp.check_grads(tnp.kron, [a, b], **ORDER2)


def test_einsum_interleaved_form(rng):
    """NumPy's einsum(x, [0, 1], y, [1, 2], ..., [output]), labels any ints and Ellipsis (opt_einsum
    test_contract_expression_interleaved_input and test_large_int_input_format, autograd test_einsum2_*)."""
    x, y, z = (random(rng, (2, 2)) for _ in range(3))
    a, b = random(rng, (2, 3)), random(rng, (2, 2, 3))
    for args in [(x, [0, 1], y, [1, 2], z, [2, 3], [3, 0]), (x, [1, 0]), (a, [Ellipsis, 0, 1], b, [Ellipsis, 0, 1]),
                 (a, [Ellipsis, 1], b, [Ellipsis, 0], [Ellipsis])]:
        with tnp.session():
            got = np.asarray(tnp.einsum(*args))
        np.testing.assert_allclose(got, np.einsum(*args), rtol=1e-13)
    with tnp.session():
        got = np.asarray(tnp.einsum(x, (1000, 1001), y, (1001, 1002), z, (1002, 1003)))
    np.testing.assert_allclose(got, x @ y @ z, rtol=1e-13)
    tnp.check_grads(lambda p, q: tnp.einsum(p, [Ellipsis, 0, 1], q, [Ellipsis, 0, 1]), [a, b], **ORDER2)


def test_einsum_names_labels_that_are_no_lists_of_ints(rng):
    """Subscripts that are neither a str nor interleaved labels: the library's error, naming einsum,
    in a session and outside one (never a TypeError from deep inside the parsing)."""
    from tenferro_py import InvalidArgument

    x = random(rng, (2, 2))
    for args in [(3, x, x), (["ij,jk->ik"], x, x), (x, "ij", x, [1, 2]), (x, [0, True]), (x, [0, 1.5]),
                 (x, [0, 1], x, [1, 2], [0, "k"])]:
        with pytest.raises(InvalidArgument, match="^einsum: expected subscripts as a str"):
            tnp.einsum(*args)
        with pytest.raises(InvalidArgument, match="^einsum: expected subscripts as a str"), tnp.session():
            tnp.einsum(*args)


@pytest.mark.parametrize("op", ["max", "min"])
def test_complex_max_and_min_are_numpys(rng, op):
    """NumPy orders complex numbers lexicographically (real part, then imaginary); the derivative
    goes to the entry attained (JAX's complex reducers, autograd test_max/test_min)."""
    x = random(rng, (2, 3, 4), np.complex128)
    x[0, 0, :2] = [1 + 2j, 1 - 3j]  # a tie in the real part, broken by the imaginary one
    for axis in (None, 0, -1, (0, 2)):
        for keepdims in (False, True):
            with tnp.session():
                got = np.asarray(getattr(tnp, op)(x, axis=axis, keepdims=keepdims))
            np.testing.assert_array_equal(got, getattr(np, op)(x, axis=axis, keepdims=keepdims))
    tnp.check_grads(lambda y: getattr(tnp, op)(y, axis=1), [x], **ORDER2)
    with pytest.raises(ValueError, match=f"^{op}: expected axes of size >= 1"), tnp.session():
        getattr(tnp, op)(np.zeros((0, 2), complex), axis=0)


def test_svd_takes_numpys_hermitian_flag(rng):
    """svd(a, hermitian=True) (JAX testSVD's hermitian cases): NumPy's singular values, a valid SVD."""
    a = random(rng, (2, 4, 4), np.complex128)
    a = a + np.conj(np.swapaxes(a, -1, -2))
    with tnp.session():
        u, s, vh = (np.asarray(f) for f in tnp.linalg.svd(a, hermitian=True))
    np.testing.assert_allclose(s, np.linalg.svd(a, hermitian=True, compute_uv=False), rtol=1e-13)
    np.testing.assert_allclose((u * s[..., None, :]) @ vh, a, atol=1e-12)
    tnp.check_grads(lambda x: tnp.linalg.svd(x, hermitian=True, compute_uv=False), [a], **ORDER2)
