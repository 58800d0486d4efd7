"""The linalg functions added for the peers' suites: triangular solves and LU (primitives with
rules), their SciPy front ends (solve_triangular, lu, lu_factor, lu_solve, cho_solve), polar, left
eigenvectors, and numpy.linalg's vector_norm, matrix_norm, cond, vecdot, cross, multi_dot,
tensorinv, tensorsolve, matrix_rank, lstsq of stacks, solve broadcasting and qr's modes: values
against NumPy/SciPy, check_grads both modes to order 2, real and complex, zero-size, singular and
extreme-scale inputs, and the refusals."""

import numpy as np
import pytest
import scipy.linalg as sl

import tenferro_py.numpy as tnp
from tenferro_py.errors import LinalgError, Unsupported

LA, SLA = tnp.linalg, tnp.scipy.linalg


def rand(rng, shape, complex_=False):
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if complex_ else x


def value(f, *args):
    with tnp.session():
        out = f(*[tnp.asarray(a) + 0 for a in args])  # tracked inside the session's ops
        return tuple(np.asarray(o) for o in out) if isinstance(out, tuple) else np.asarray(out)


def grads(f, args, order=2):
    def joined(*xs):
        out = f(*xs)
        return tnp.concatenate([tnp.ravel(o) for o in out]) if isinstance(out, tuple) else out
    tnp.check_grads(joined, args, order=order)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular(rng, complex_, trans, lower, unit):
    a, b = rand(rng, (3, 3), complex_) + 3 * np.eye(3), rand(rng, (3, 2), complex_)
    f = lambda a, b: SLA.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit)  # noqa: E731
    np.testing.assert_allclose(value(f, a, b), sl.solve_triangular(a, b, trans=trans, lower=lower,
                                                                   unit_diagonal=unit), atol=1e-13)
    grads(f, [a, b])
    grads(lambda a, b: f(a, b), [a, b[:, 0]])


def test_solve_triangular_stacks_zero_size_singular_and_scale(rng):
    a, b = np.triu(rand(rng, (2, 1, 4, 4))) + 4 * np.eye(4), rand(rng, (3, 4, 2))
    want = np.stack([[sl.solve_triangular(a[i, 0], b[j]) for j in range(3)] for i in range(2)])
    np.testing.assert_allclose(value(SLA.solve_triangular, a, b), want, atol=1e-13)
    grads(SLA.solve_triangular, [a, b])
    assert value(SLA.solve_triangular, np.zeros((0, 0)), np.zeros((0, 3))).shape == (0, 3)
    grads(SLA.solve_triangular, [np.zeros((0, 0)), np.zeros((0, 3))])
    with pytest.raises(LinalgError, match="solve_triangular.*zero on its diagonal"):
        value(SLA.solve_triangular, np.triu(np.ones((3, 3))) - np.eye(3), np.ones(3))
    for scale in (1e-150, 1e150):  # no squares: the solution and its derivative scale as 1/scale
        got = value(SLA.solve_triangular, scale * a[0, 0], b[0])
        np.testing.assert_allclose(got * scale, sl.solve_triangular(a[0, 0], b[0]), rtol=1e-13)
        grads(lambda x: scale * SLA.solve_triangular(scale * x, b[0]), [a[0, 0]])


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 3, 3), (0, 3), (3, 0), (1, 1)])
def test_lu_and_lu_factor(rng, complex_, shape):
    a = rand(rng, shape, complex_)
    got = value(SLA.lu, a)
    np.testing.assert_allclose(got[0] @ got[1] @ got[2], a, atol=1e-13)
    for g, want in zip(got, sl.lu(a)) if a.size else ():  # SciPy's p of an empty a is empty, ours the identity
        np.testing.assert_allclose(g, want, atol=1e-13)
    lu, piv = value(SLA.lu_factor, a)
    if a.size:
        want_lu, want_piv = sl.lu_factor(a)
        np.testing.assert_allclose(lu, want_lu, atol=1e-13)
        np.testing.assert_array_equal(piv, want_piv)
    grads(lambda a: SLA.lu(a)[1:], [a])
    grads(lambda a: SLA.lu_factor(a)[0], [a])


def test_lu_permute_l_indices_and_zero_pivot():
    a = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]])
    pl, u = value(lambda x: SLA.lu(x, permute_l=True), a)
    np.testing.assert_allclose(pl @ u, a, atol=1e-14)
    p, l, u = value(lambda x: SLA.lu(x, p_indices=True), a)
    np.testing.assert_allclose((l @ u)[p], a, atol=1e-14)
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])  # u's last pivot is 0: the values are SciPy's
    np.testing.assert_allclose(value(SLA.lu, singular)[2], sl.lu(singular)[2])
    with pytest.raises(LinalgError, match="lu"):
        tnp.jvp(lambda x: SLA.lu(x)[2], (singular,), (np.ones((2, 2)),))


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("trans", [0, 1, 2])
def test_lu_solve(rng, complex_, trans):
    a, b = rand(rng, (2, 4, 4), complex_), rand(rng, (2, 4, 3), complex_)
    lu, piv = sl.lu_factor(a)
    want = np.stack([sl.lu_solve((lu[i], piv[i]), b[i], trans=trans) for i in range(2)])
    np.testing.assert_allclose(value(lambda f, y: SLA.lu_solve((f, piv), y, trans=trans), lu, b), want, atol=1e-12)
    grads(lambda f, y: SLA.lu_solve((f, piv), y, trans=trans), [lu, b])
    grads(lambda f, y: SLA.lu_solve((f, piv[0]), y, trans=trans), [lu[0], b[0, :, 0]])
    grads(lambda y: SLA.lu_solve((np.zeros((0, 0)), np.zeros(0, np.int32)), y), [np.zeros((0, 2))])


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("lower", [False, True])
def test_cho_solve(rng, complex_, lower):
    f = rand(rng, (4, 4), complex_)
    c, b = sl.cholesky(f @ f.conj().T + np.eye(4), lower=lower), rand(rng, (4, 2), complex_)
    np.testing.assert_allclose(value(lambda x, y: SLA.cho_solve((x, lower), y), c, b), sl.cho_solve((c, lower), b),
                               atol=1e-12)
    grads(lambda x, y: SLA.cho_solve((x, lower), y), [c, b])


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4)])
@pytest.mark.parametrize("side", ["right", "left"])
def test_polar(rng, complex_, shape, side):
    a = rand(rng, shape, complex_)
    for got, want in zip(value(lambda x: SLA.polar(x, side), a), sl.polar(a, side)):
        np.testing.assert_allclose(got, want, atol=1e-12)
    grads(lambda x: SLA.polar(x, side), [a])


def test_polar_repeated_values_and_rank_deficiency():
    q = np.linalg.qr(np.random.default_rng(1).standard_normal((3, 3)))[0]
    grads(lambda x: SLA.polar(x), [2.0 * q])  # all singular values 2: u and p are smooth there
    grads(lambda x: SLA.polar(x, "left"), [np.diag([2.0, 2.0, 1.0])])
    for scale in (1e-200, 1e200):  # the Gram matrix is formed after an exact rescaling
        u, p = value(SLA.polar, scale * q)
        np.testing.assert_allclose(u, q, atol=1e-14)
        grads(lambda x: SLA.polar(scale * x)[0], [q])
    with pytest.raises(LinalgError, match="polar.*full rank"):
        tnp.grad(lambda x: tnp.sum(SLA.polar(x)[0]))(np.diag([1.0, 1.0, 0.0]))


@pytest.mark.parametrize("complex_", [False, True])
def test_left_eigenvectors(rng, complex_):
    a = rand(rng, (4, 4), complex_)
    w, vl, vr = value(lambda x: SLA.eig(x, left=True), a)
    np.testing.assert_allclose(vl.conj().T @ a, w[:, None] * vl.conj().T, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(vl, axis=0), 1.0)
    top = np.abs(vl).argmax(0)
    np.testing.assert_allclose(vl[top, range(4)].imag, 0.0, atol=1e-15)
    assert np.all(vl[top, range(4)].real > 0)
    grads(lambda x: SLA.eig(x, left=True, right=False), [a])
    with pytest.raises(LinalgError, match="eig"):  # an eigenvector of a repeated eigenvalue has no derivative
        tnp.jvp(lambda x: SLA.eig(x, left=True)[1], (np.eye(2),), (np.array([[0.0, 1.0], [2.0, 0.0]]),))


def test_schur_and_funm_values_and_refusals(rng):
    a = rand(rng, (4, 4))
    for got, want in zip(value(SLA.schur, a), sl.schur(a)):
        np.testing.assert_allclose(got, want)
    np.testing.assert_allclose(value(lambda x: SLA.funm(x, np.exp), a), sl.funm(a, np.exp))
    with pytest.raises(LinalgError, match="schur"):
        tnp.grad(lambda x: tnp.sum(SLA.schur(x)[0]))(a)
    with pytest.raises(LinalgError, match="funm"):
        tnp.grad(lambda x: tnp.sum(SLA.funm(x, np.exp)))(a)


@pytest.mark.parametrize("complex_", [False, True])
def test_vector_and_matrix_norms(rng, complex_):
    x = rand(rng, (2, 3, 4), complex_)
    for ord_ in (2, 1, np.inf, -np.inf, 0, 3, 0.5, -1.5):
        for axis in (None, 1, (0, 2)):
            np.testing.assert_allclose(value(lambda y: LA.vector_norm(y, axis=axis, ord=ord_, keepdims=True), x),
                                       np.linalg.vector_norm(x, axis=axis, ord=ord_, keepdims=True), rtol=1e-13)
    grads(lambda y: LA.vector_norm(y, axis=(0, 2), ord=3), [x])
    grads(lambda y: LA.vector_norm(y), [x])
    assert tnp.grad(lambda y: LA.vector_norm(y, ord=3))(np.zeros(3)).tolist() == [0.0, 0.0, 0.0]  # not 0/0
    np.testing.assert_allclose(value(lambda y: LA.vector_norm(1e200 * y), x[0, 0]),
                               1e200 * np.linalg.norm(x[0, 0]), rtol=1e-14)
    for ord_ in ("fro", "nuc", 2, -2, 1, -1, np.inf, -np.inf):
        np.testing.assert_allclose(value(lambda y: LA.matrix_norm(y, ord=ord_), x), np.linalg.matrix_norm(x, ord=ord_),
                                   rtol=1e-13)
    grads(lambda y: LA.matrix_norm(y, ord="nuc"), [x])


@pytest.mark.parametrize("complex_", [False, True])
def test_cond(rng, complex_):
    a = rand(rng, (2, 3, 3), complex_) + 3 * np.eye(3)
    for p in (None, 2, -2, "fro", "nuc", 1, -1, np.inf, -np.inf):
        np.testing.assert_allclose(value(lambda x: LA.cond(x, p), a), np.linalg.cond(a, p), rtol=1e-12)
        grads(lambda x: LA.cond(x, p), [a], order=2 if p in (None, 2, -2, "fro", "nuc") else 1)
    singular = np.diag([1.0, 0.0])
    assert value(LA.cond, singular) == np.inf == np.linalg.cond(singular)
    assert value(LA.cond, np.zeros((2, 2))) == np.inf == np.linalg.cond(np.zeros((2, 2)))
    with pytest.raises(LinalgError, match="cond"):
        tnp.grad(LA.cond)(singular)


@pytest.mark.parametrize("complex_", [False, True])
def test_vecdot_cross_multi_dot(rng, complex_):
    x, y = rand(rng, (3, 4), complex_), rand(rng, (4,), complex_)
    np.testing.assert_allclose(value(LA.vecdot, x, y), np.linalg.vecdot(x, y))
    grads(LA.vecdot, [x, y])
    grads(LA.vecdot, [np.zeros((2, 0)), np.zeros(0)])
    u, v = rand(rng, (4, 3), complex_), rand(rng, (3, 1), complex_)
    np.testing.assert_allclose(value(lambda a, b: LA.cross(a, b, axis=0), u.T, v), np.linalg.cross(u.T, v, axis=0))
    grads(lambda a, b: LA.cross(a, b), [u, v[:, 0]])
    ms = [rand(rng, (3,), complex_), rand(rng, (3, 4), complex_), rand(rng, (4, 5), complex_), rand(rng, (5,), complex_)]
    np.testing.assert_allclose(value(lambda *m: LA.multi_dot(m), *ms), np.linalg.multi_dot(ms))
    grads(lambda *m: LA.multi_dot(m), ms)
    empty = [np.zeros((2, 0)), np.zeros((0, 3)), rand(rng, (3, 2))]
    np.testing.assert_allclose(value(lambda *m: LA.multi_dot(m), *empty), np.zeros((2, 2)))


@pytest.mark.parametrize("complex_", [False, True])
def test_tensorinv_tensorsolve_matrix_rank(rng, complex_):
    t = (rand(rng, (24, 24), complex_) + 8 * np.eye(24)).reshape(4, 6, 8, 3)
    np.testing.assert_allclose(value(lambda a: LA.tensorinv(a, ind=2), t), np.linalg.tensorinv(t, ind=2), atol=1e-13)
    grads(lambda a: LA.tensorinv(a, ind=2), [t])
    a, b = (rand(rng, (6, 6), complex_) + 4 * np.eye(6)).reshape(2, 3, 6), rand(rng, (2, 3), complex_)
    np.testing.assert_allclose(value(LA.tensorsolve, a, b), np.linalg.tensorsolve(a, b), atol=1e-13)
    grads(LA.tensorsolve, [a, b])
    moved = np.moveaxis(a, 2, 0)
    np.testing.assert_allclose(value(lambda x, y: LA.tensorsolve(x, y, axes=(0,)), moved, b),
                               np.linalg.tensorsolve(moved, b, axes=(0,)), atol=1e-13)
    deficient = rand(rng, (2, 5, 3), complex_)
    deficient[..., 2] = deficient[..., 0]
    assert value(LA.matrix_rank, deficient).tolist() == [2, 2]
    assert value(lambda x: LA.matrix_rank(x, rtol=0.5), deficient).tolist() == np.linalg.matrix_rank(
        deficient, rtol=0.5).tolist()


@pytest.mark.parametrize("complex_", [False, True])
def test_solve_broadcasting_and_lstsq_stacks(rng, complex_):
    a, b = rand(rng, (2, 1, 3, 3), complex_) + 3 * np.eye(3), rand(rng, (1, 4, 3, 2), complex_)
    np.testing.assert_allclose(value(LA.solve, a, b), np.linalg.solve(a, b), atol=1e-13)
    grads(LA.solve, [a, b])
    a, b = rand(rng, (2, 5, 3), complex_), rand(rng, (2, 5, 2), complex_)
    x, residuals, rank, sv = value(LA.lstsq, a, b)
    for i in range(2):
        want = np.linalg.lstsq(a[i], b[i])
        np.testing.assert_allclose(x[i], want[0], atol=1e-13)
        np.testing.assert_allclose(residuals[i], want[1], atol=1e-13)
    assert rank.tolist() == [3, 3]
    grads(lambda p, q: LA.lstsq(p, q)[:2], [a, b])
    assert value(LA.lstsq, np.zeros((0, 5, 3)), np.zeros((0, 5, 2)))[0].shape == (0, 3, 2)


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (3, 3), (2, 4, 2), (0, 2), (2, 0)])
def test_qr_modes(rng, complex_, shape):
    a = rand(rng, shape, complex_)
    np.testing.assert_allclose(np.abs(value(lambda x: LA.qr(x, mode="r"), a)), np.abs(np.linalg.qr(a, mode="r")),
                               atol=1e-13)
    q, r = value(lambda x: LA.qr(x, mode="complete"), a)
    want_q, want_r = np.linalg.qr(a, mode="complete")
    assert q.shape == want_q.shape and r.shape == want_r.shape
    np.testing.assert_allclose(q @ r, a, atol=1e-13)
    m = shape[-2]
    np.testing.assert_allclose(np.swapaxes(q, -1, -2).conj() @ q, np.broadcast_to(np.eye(m), shape[:-2] + (m, m)),
                               atol=1e-13)
    if a.size:
        grads(lambda x: LA.qr(x, mode="r"), [a])
        grads(lambda x: LA.qr(x, mode="complete")[1], [a])
        if shape[-2] <= shape[-1]:  # complete = reduced: Q differentiates too
            grads(lambda x: LA.qr(x, mode="complete"), [a])
    if shape[-2] > shape[-1]:
        with pytest.raises(Unsupported, match="qr.*complement"):
            tnp.grad(lambda x: tnp.sum(tnp.abs(LA.qr(x, mode="complete")[0])))(a)
