"""Ports of JAX's tests/linalg_test.py (NumpyLinalgTest, ScipyLinalgTest): det, slogdet, cholesky,
inv, solve, pinv, matrix_power, lstsq, norm, expm, sqrtm and the functions tnp does not have.

Each case keeps JAX's shapes, dtypes and inputs (jtu.rand_* as ``draw``); values are checked
against NumPy/SciPy in the case's dtype, and in 64-bit the derivatives by check_grads (both
modes, order 2 unless JAX asks for less) and against JAX's JVP. Where JAX checks a derivative
in float32, ours is checked in float64 (check_grads works in 64-bit).
"""

from __future__ import annotations

import itertools

import numpy as np
import scipy.linalg

import tenferro_py.numpy as tnp

from . import jax_linalg_more
from .harness import Case, close, draw, grads, hermitian, ours, rng_for, value_tol
from .jax_support import check, is_64, product_cases

ALL = [np.float32, np.float64, np.complex64, np.complex128]
REAL = [np.float32, np.float64]


def _cholesky(name, shape, dtype, upper):
    rng = rng_for(name)
    f = draw(rng, shape[:-1] + (2 * shape[-1],), dtype)
    a = f @ np.conj(np.swapaxes(f, -1, -2))
    # JAX's cholesky symmetrizes its input, NumPy's (and ours) reads one triangle: the two JVPs
    # agree along Hermitian tangents only.
    check(name, lambda xp, x: xp.linalg.cholesky(x, upper=upper), [a],
          lambda x: np.linalg.cholesky(x, upper=upper), tol=value_tol(dtype, 100), tangent=hermitian)


def _det(name, n, dtype):
    a = draw(rng_for(name), (n, n), dtype)
    check(name, lambda xp, x: xp.linalg.det(x), [a], np.linalg.det, tol=value_tol(dtype, 1e3), derivative=False)


def _det_grad(name, shape, dtype):
    a = draw(rng_for(name), shape, dtype)
    check(name, lambda xp, x: xp.linalg.det(x), [a], np.linalg.det, tol=value_tol(dtype, 1e3))
    zero = np.zeros_like(a)
    if len(shape) > 2:
        zero = a.copy()
        zero[0] = 0
    grads(lambda x: tnp.linalg.det(x), [zero], order=1)  # no NaN at a zero matrix


def _det_special(name, a, order):
    grads(lambda x: tnp.linalg.det(x), [a], order=order)


def _det_sum(name):
    grads(lambda x: tnp.sum(tnp.linalg.det(x)), [np.ones((16, 1, 1))], order=2)


def _slogdet(name, shape, dtype, grad=False):
    a = draw(rng_for(name), shape, dtype)
    check(name, lambda xp, x: tuple(xp.linalg.slogdet(x)), [a], lambda x: tuple(np.linalg.slogdet(x)),
          tol=value_tol(dtype, 1e3), derivative=grad)


def _issue1213(name):
    mat = np.array([np.diag(np.ones(5, dtype=np.float32)) * -0.01] * 2)
    check(name, lambda xp, x: tuple(xp.linalg.slogdet(x)), [mat], lambda x: tuple(np.linalg.slogdet(x)))


def _inv(name, shape, dtype):
    a = draw(rng_for(name), shape, dtype)
    cond = float(np.max(np.linalg.cond(a))) if a.size else 1.0
    check(name, lambda xp, x: xp.linalg.inv(x), [a], np.linalg.inv, tol=value_tol(dtype, 10 * cond),
          rtol=1e-5 * max(1.0, cond / 100))


def _solve(name, lhs, rhs, dtype):
    rng = rng_for(name)
    a, b = draw(rng, lhs, dtype), draw(rng, rhs, dtype)
    cond = float(np.max(np.linalg.cond(a))) if a.size else 1.0
    check(name, lambda xp, x, y: xp.linalg.solve(x, y), [a, b], np.linalg.solve, tol=value_tol(dtype, 10 * cond),
          rtol=1e-5 * max(1.0, cond / 100))


def _pinv(name, shape, hermitian_, dtype):
    a = draw(rng_for(name), shape, dtype)
    if hermitian_:
        a = hermitian(a)
    order = 1 if max(shape) > 1000 else 2
    cond = float(np.max(np.linalg.cond(a))) if min(shape[-2:]) else 1.0
    check(name, lambda xp, x: xp.linalg.pinv(x, hermitian=hermitian_), [a],
          lambda x: np.linalg.pinv(x, hermitian=hermitian_), tol=value_tol(dtype, 10 * cond), order=order,
          tangent=hermitian if hermitian_ else None)  # JAX's hermitian=True differentiates pinv((a + aᴴ)/2)


def _pinv_rcond(name):
    x = np.ones((3, 3))
    with tnp.session():
        try:
            tnp.linalg.pinv(x, rcond=1e-2, rtol=1e-2)
        except ValueError:
            pass
        else:
            raise AssertionError("pinv(rcond=, rtol=) accepted both")
    close("rcond = rtol", ours(lambda y: tnp.linalg.pinv(y, rcond=1e-2), x),
          ours(lambda y: tnp.linalg.pinv(y, rtol=1e-2), x), 0.0)


def _pinv_issue2792(name):
    """The Jacobian of pinv where the rank stays 1, and at eye(2), as JAX's exact values."""
    def f(p):
        zero = 0.0 * p
        a = tnp.stack([tnp.stack([zero, zero]), tnp.stack([-p, zero + 1.0])])
        return tnp.linalg.pinv(a / (1 + p ** 2))
    got = np.asarray(tnp.jvp(f, (np.float64(2.0),), (np.float64(1.0),))[1])
    close("d pinv(a(p))/dp at p = 2", got, np.array([[0.0, -1.0], [0.0, 0.0]]), 1e-12)
    jac = np.zeros((2, 2, 2, 2))
    for i, j in itertools.product(range(2), range(2)):
        e = np.zeros((2, 2))
        e[i, j] = 1
        jac[:, :, i, j] = np.asarray(tnp.jvp(tnp.linalg.pinv, (np.eye(2),), (e,))[1])
    expected = np.array([[[[-1.0, 0.0], [0.0, 0.0]], [[0.0, -1.0], [0.0, 0.0]]],
                         [[[0.0, 0.0], [-1.0, 0.0]], [[0.0, 0.0], [0.0, -1.0]]]])
    close("jacobian of pinv at eye(2)", jac, expected, 1e-12)
    grads(lambda x: tnp.linalg.pinv(x), [np.eye(2)], order=2)


def _matrix_power(name, shape, dtype, n):
    a = draw(rng_for(name), shape, dtype)
    cond = float(np.max(np.linalg.cond(a))) ** abs(n) if n < 0 else 1.0
    check(name, lambda xp, x: xp.linalg.matrix_power(x, n), [a], lambda x: np.linalg.matrix_power(x, n),
          tol=value_tol(dtype, 100 * max(1, abs(n)) * cond), rtol=1e-5 * max(1.0, cond / 100))


def _lstsq(name, lhs, rhs, rcond, dtype):
    rng = rng_for(name)
    a, b = draw(rng, lhs, dtype), draw(rng, rhs, dtype)
    got = ours(lambda x, y: tnp.linalg.lstsq(x, y, rcond=rcond), a, b)
    want = np.linalg.lstsq(a, b, rcond=rcond)
    for what, g, w in zip(("x", "residuals", "rank", "s"), got, want):
        close(what, g, w, value_tol(dtype, 100))
    if is_64(dtype) and min(lhs) > 0:
        if int(want[2]) == min(lhs):
            grads(lambda x, y: tnp.linalg.lstsq(x, y, rcond=rcond)[0], [a, b], order=2)
        else:  # below full rank x differentiates in b only (README, lstsq)
            grads(lambda y: tnp.linalg.lstsq(a, y, rcond=rcond)[0], [b], order=2)


def _lstsq_zero(name, shape):
    got = ours(lambda x, y: tnp.linalg.lstsq(x, y), np.zeros(shape), np.ones(shape))
    for what, g, w in zip(("x", "residuals", "rank", "s"), got, np.linalg.lstsq(np.zeros(shape), np.ones(shape))):
        close(what, g, w, 1e-12)


def _norm(name, shape, dtype, ord, axis, keepdims):
    a = draw(rng_for(name), shape, dtype)
    check(name, lambda xp, x: xp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims), [a],
          lambda x: np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims), tol=value_tol(dtype, 100),
          derivative=ord not in (np.inf, -np.inf, 1, -1, 0) or a.size < 2, peer=False)


def _expm(name, n, batch, dtype):
    a = draw(rng_for(name), batch + (n, n), dtype, "small")
    check(name, lambda xp, x: xp.scipy.linalg.expm(x), [a], scipy.linalg.expm, tol=value_tol(dtype, 10),
          order=2 if n <= 20 and not batch else 0)
    t = np.triu(a)
    check(name + "/triu", lambda xp, x: xp.scipy.linalg.expm(x), [t], scipy.linalg.expm, tol=value_tol(dtype, 10),
          order=0)


def _expm_grad(name, n, dtype):
    a0 = draw(rng_for(name), (n, n), dtype, "small")
    for target in [1e-2, 0.2, 0.9, 2.0, 3.0]:
        a = a0 / np.linalg.norm(a0, 1) * target
        check(name, lambda xp, x: xp.scipy.linalg.expm(x), [a], order=2 if n <= 20 else 1, rtol=1e-5)


def _expm_frechet(name, n, dtype):
    """JAX compares its expm_frechet with SciPy's; tnp's is the JVP of expm: the same number."""
    rng = rng_for(name)
    for target in [1e-2, 0.2, 0.9, 2.0, 3.0]:
        a = draw(rng, (n, n), dtype, "small")
        a = a / np.linalg.norm(a, 1) * target
        e = draw(rng, (n, n), dtype, "small")
        got = np.asarray(tnp.jvp(tnp.scipy.linalg.expm, (a,), (e,))[1])
        close(f"jvp of expm at norm {target} against scipy.linalg.expm_frechet", got,
              scipy.linalg.expm_frechet(a, e, compute_expm=False), 1e-12)


def _sqrtm_psd(name, shape, dtype):
    arg = draw(rng_for(name), shape, dtype)
    mat = arg @ arg.T  # JAX's input: symmetric, Hermitian only when real
    check(name, lambda xp, x: xp.scipy.linalg.sqrtm(x), [mat], scipy.linalg.sqrtm,
          tol=1e-4 if not is_64(dtype) else 1e-8, derivative=False)
    if is_64(dtype) and shape[0] <= 15:  # sqrtm takes Hermitian matrices: differentiated along Hermitian paths
        grads(lambda x: tnp.scipy.linalg.sqrtm((x + tnp.conj(tnp.swapaxes(x, -1, -2))) / 2), [mat], order=2)


def _sqrtm_general(name, shape, dtype):
    arg = draw(rng_for(name), shape, dtype)
    root = ours(tnp.scipy.linalg.sqrtm, arg)
    close("R @ R", root @ root, arg, 2e-3 if not is_64(dtype) else 1e-8)


def _sqrtm_edge(name, diag, expected, dtype):
    close("sqrtm of a diagonal with zeros", ours(tnp.scipy.linalg.sqrtm, np.diag(diag).astype(dtype)),
          np.diag(expected), value_tol(dtype, 10))


def cases() -> list[Case]:
    out: list[Case] = []
    P = itertools.product
    out += product_cases("testCholesky", [dict(shape=s, dtype=d, upper=u) for s, d, u in
                                          P([(1, 1), (4, 4), (2, 5, 5), (200, 200), (1000, 0, 0)], ALL, [True, False])],
                         _cholesky)
    out += product_cases("testDet", [dict(n=n, dtype=d) for n, d in P([0, 2, 3, 4, 5, 25], ALL)], _det)
    out += product_cases("testDetGrad", [dict(shape=s, dtype=d) for s, d in
                                         P([(1, 1), (2, 2), (3, 3), (2, 2, 2), (2, 3, 3), (2, 4, 4), (5, 7, 7)],
                                           [np.float64])], _det_grad)
    out += [Case("jax", "testDetGradIssue6121", lambda: _det_sum("testDetGradIssue6121"))]
    corank1 = np.array([[50, -30, 45], [-30, 90, -81], [45, -81, 81]], dtype=float)
    corank2 = np.array([[36, -42, 18], [-42, 49, -21], [18, -21, 9]], dtype=float)
    out += [Case("jax", "testDetGradOfSingularMatrixCorank1", lambda: _det_special("", corank1, 1)),
            Case("jax", "testDetGradOfSingularMatrixCorank2", lambda: _det_special("", corank2, 1))]
    out += product_cases("testSlogdet", [dict(shape=s, dtype=d) for s, d in
                                         P([(0, 0), (1, 1), (3, 3), (4, 4), (10, 10), (200, 200), (2, 2, 2),
                                            (2, 3, 3), (3, 2, 2)], ALL)], _slogdet)
    out += product_cases("testSlogdetGrad", [dict(shape=s, dtype=d, grad=True) for s, d in
                                             P([(1, 1), (4, 4), (5, 5), (2, 7, 7)], [np.float64, np.complex128])],
                         _slogdet)
    out += [Case("jax", "testIssue1213", lambda: _issue1213("testIssue1213"))]
    out += product_cases("testInv", [dict(shape=s, dtype=d) for s, d in
                                     P([(1, 1), (4, 4), (2, 5, 5), (100, 100), (5, 5, 5), (0, 0)], REAL)], _inv)
    solve_shapes = [((1, 1), (1, 1)), ((4, 4), (4,)), ((8, 8), (8, 4)), ((2, 2), (3, 2, 2)),
                    ((2, 1, 3, 3), (1, 4, 3, 4)), ((1, 0, 0), (1, 0, 2))]
    out += product_cases("testSolve", [dict(lhs=l, rhs=r, dtype=d) for (l, r), d in P(solve_shapes, ALL)], _solve)
    out += product_cases("testSolveBroadcasting", [dict(lhs=l, rhs=r, dtype=np.float32) for l, r in
                                                   P([(2, 2), (2, 2, 2), (2, 2, 2, 2), (2, 2, 2, 2, 2)],
                                                     [(2,), (2, 2), (2, 2, 2), (2, 2, 2, 2)])], _solve)
    pinv_shapes = [(1, 1), (4, 4), (3, 10, 10), (2, 70, 7), (2000, 7), (7, 1000), (70, 7, 2), (2, 0, 0), (3, 0, 2),
                   (1, 0), (400000, 2), (2, 400000)]
    out += product_cases("testPinv", [dict(shape=s, hermitian_=h, dtype=d) for s in pinv_shapes
                                      for h in ([False, True] if s[-1] == s[-2] else [False]) for d in ALL], _pinv)
    out += [Case("jax", "testPinvRcond", lambda: _pinv_rcond("testPinvRcond")),
            Case("jax", "testPinvGradIssue2792", lambda: _pinv_issue2792("testPinvGradIssue2792"))]
    out += product_cases("testMatrixPower", [dict(shape=s, dtype=d, n=n) for s, d, n in
                                             P([(1, 1), (2, 2), (4, 4), (5, 5), (1, 2, 2), (2, 3, 3), (2, 5, 5)], ALL,
                                               [-5, -2, -1, 0, 1, 2, 3, 4, 5, 10])], _matrix_power)
    lstsq_shapes = [((1, 1), (1, 1)), ((4, 6), (4,)), ((6, 6), (6, 1)), ((8, 6), (8, 4)), ((0, 3), (0,)),
                    ((3, 0), (3,)), ((3, 1), (3, 0))]
    out += product_cases("testLstsq", [dict(lhs=l, rhs=r, rcond=c, dtype=d) for (l, r), c, d in
                                       P(lstsq_shapes, [-1, None, 0.5], ALL)], _lstsq)
    out += product_cases("testLstsqZeroMatrix", [dict(shape=s) for s in [(2, 1), (2, 2), (1, 2)]], _lstsq_zero)
    norm_params = []
    for axis, shape in [(None, (1,)), (None, (7,)), (None, (5, 8)), (0, (9,)), (0, (4, 5)), ((1,), (10, 7, 3)),
                        ((-2,), (4, 8)), (-1, (6, 3)), ((0, 2), (3, 4, 5)), ((2, 0), (7, 8, 9)), (None, (7, 8, 11))]:
        if axis is None and len(shape) > 2:
            ords = [None]
        elif (axis is None and len(shape) == 1) or isinstance(axis, int) or (isinstance(axis, tuple) and len(axis) == 1):
            ords = [None, 0, 1, 2, 3, -1, -2, -3, np.inf, -np.inf]
        else:
            ords = [None, "fro", 1, 2, -1, -2, np.inf, -np.inf, "nuc"]
        norm_params += [dict(shape=shape, dtype=d, ord=o, axis=axis, keepdims=k)
                        for o, k, d in P(ords, [False, True], [np.float64, np.complex128])]
    out += product_cases("testNorm", norm_params, _norm)
    out += product_cases("testExpm", [dict(n=n, batch=b, dtype=d) for n, b, d in
                                      P([1, 4, 5, 20, 50, 100], [(), (2,), (3, 4)], ALL)], _expm)
    out += product_cases("testExpmGrad", [dict(n=n, dtype=d) for n, d in
                                          P([1, 4, 5, 20, 50], [np.float64, np.complex128])], _expm_grad)
    out += product_cases("testExpmFrechet", [dict(n=n, dtype=d) for n, d in
                                             P([1, 4, 5, 20, 50, 100], [np.float64, np.complex128])], _expm_frechet)
    out += product_cases("testSqrtmPSDMatrix", [dict(shape=s, dtype=d) for s, d in
                                                P([(4, 4), (15, 15), (50, 50), (100, 100)], ALL)], _sqrtm_psd)
    out += product_cases("testSqrtmGenMatrix", [dict(shape=s, dtype=d) for s, d in
                                                P([(4, 4), (15, 15), (50, 50), (100, 100)], ALL)], _sqrtm_general)
    edges = [([1, 0, 0], [1, 0, 0]), ([0, 4, 0], [0, 2, 0]), ([0, 0, 0, 9], [0, 0, 0, 3]),
             ([0, 0, 9, 0, 0, 4], [0, 0, 3, 0, 0, 2])]
    out += product_cases("testSqrtmEdgeCase", [dict(diag=a, expected=e, dtype=d) for (a, e), d in P(edges, ALL)],
                         _sqrtm_edge)
    out += jax_linalg_more.cases()
    return out
