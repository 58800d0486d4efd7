"""Ports of JAX's tests/linalg_test.py for the functions tnp.linalg and tnp.scipy.linalg gained
with triangular solves and LU: matrix_norm, vector_norm, cond, tensorinv, tensorsolve,
matrix_rank, multi_dot, cross, vecdot, lu, solve_triangular, cho_solve, polar, schur, funm.

JAX's shapes and dtypes on a smaller grid; values against NumPy/SciPy in the case's dtype, and
in 64-bit derivatives by check_grads (both modes, order 2 where the function is smooth) and
against JAX's JVP.
"""

from __future__ import annotations

import itertools

import numpy as np
import scipy.linalg

import tenferro_py.numpy as tnp
from tenferro_py.errors import LinalgError

from .harness import Case, WrongDerivative, close, draw, ours, rng_for, value_tol
from .jax_support import check, is_64, product_cases

P = itertools.product
ALL = [np.float32, np.float64, np.complex64, np.complex128]
C64 = [np.float64, np.complex128]


def _well_conditioned(rng, shape, dtype):
    a = draw(rng, shape, dtype)
    return a + 3 * max(shape[-1], 1) * np.eye(shape[-1], dtype=dtype) if shape else a


def _matrix_norm(name, shape, dtype, ord, keepdims):
    a = draw(rng_for(name), shape, dtype)
    check(name, lambda xp, x: xp.linalg.matrix_norm(x, ord=ord, keepdims=keepdims), [a],
          lambda x: np.linalg.matrix_norm(x, ord=ord, keepdims=keepdims), tol=value_tol(dtype, 100),
          order=2 if ord in ("fro", "nuc") else 1)


def _vector_norm(name, shape, dtype, ord, axis, keepdims):
    a = draw(rng_for(name), shape, dtype)
    check(name, lambda xp, x: xp.linalg.vector_norm(x, ord=ord, axis=axis, keepdims=keepdims), [a],
          lambda x: np.linalg.vector_norm(x, ord=ord, axis=axis, keepdims=keepdims), tol=value_tol(dtype, 100),
          derivative=ord not in (0, np.inf, -np.inf))


def _cond(name, shape, dtype, p):
    a = _well_conditioned(rng_for(name), shape, dtype)
    check(name, lambda xp, x: xp.linalg.cond(x, p), [a], lambda x: np.linalg.cond(x, p), tol=value_tol(dtype, 1e3),
          order=2 if p in (None, 2, -2, "fro", "nuc") else 1)
    if is_64(dtype):  # singular: NumPy's inf, and the derivative refused
        singular = np.zeros(shape, dtype)
        close("cond of a singular matrix", ours(lambda x: tnp.linalg.cond(x), singular), np.linalg.cond(singular), 0)


def _tensorinv(name, shape, ind, dtype):
    a = _well_conditioned(rng_for(name), (int(np.prod(shape[:ind])),) * 2, dtype).reshape(shape)
    check(name, lambda xp, x: xp.linalg.tensorinv(x, ind), [a], lambda x: np.linalg.tensorinv(x, ind),
          tol=value_tol(dtype, 100))


def _tensorsolve(name, a_shape, b_shape, dtype):
    rng = rng_for(name)
    a = _well_conditioned(rng, (int(np.prod(b_shape)),) * 2, dtype).reshape(a_shape)
    b = draw(rng, b_shape, dtype)
    check(name, lambda xp, x, y: xp.linalg.tensorsolve(x, y), [a, b], np.linalg.tensorsolve, tol=value_tol(dtype, 100))


def _matrix_rank(name, shape, dtype):
    a = draw(rng_for(name), shape, dtype)
    if shape[-1] > 1:
        a[..., -1] = a[..., 0]  # rank min(m, n) - 1
    close("matrix_rank", ours(tnp.linalg.matrix_rank, a), np.linalg.matrix_rank(a), 0)


def _multi_dot(name, shapes, dtype):
    rng = rng_for(name)
    arrays = [draw(rng, s, dtype) for s in shapes]
    check(name, lambda xp, *xs: xp.linalg.multi_dot(xs), arrays, lambda *xs: np.linalg.multi_dot(xs),
          tol=value_tol(dtype, 100))


def _cross(name, lhs, rhs, axis, dtype):
    rng = rng_for(name)
    a, b = draw(rng, lhs, dtype), draw(rng, rhs, dtype)
    check(name, lambda xp, x, y: xp.linalg.cross(x, y, axis=axis), [a, b],
          lambda x, y: np.linalg.cross(x, y, axis=axis), tol=value_tol(dtype, 10))


def _vecdot(name, lhs, rhs, axis, dtype):
    rng = rng_for(name)
    a, b = draw(rng, lhs, dtype), draw(rng, rhs, dtype)
    check(name, lambda xp, x, y: xp.linalg.vecdot(x, y, axis=axis), [a, b],
          lambda x, y: np.linalg.vecdot(x, y, axis=axis), tol=value_tol(dtype, 10))


def _lu(name, shape, dtype):
    a = draw(rng_for(name), shape, dtype)
    got = ours(tnp.scipy.linalg.lu, a)
    for what, g, w in zip("plu", got, scipy.linalg.lu(a)):
        close(what, g, w, value_tol(dtype, 100))
    if is_64(dtype) and a.size:
        check(name, lambda xp, x: xp.scipy.linalg.lu(x)[1:], [a], peer=len(shape) == 2)  # JAX's lu: matrices only


def _solve_triangular(name, lower, trans, unit, lhs, rhs, dtype):
    rng = rng_for(name)
    a = _well_conditioned(rng, lhs, dtype)
    a = np.tril(a) if lower else np.triu(a)
    b = draw(rng, rhs, dtype)
    check(name, lambda xp, x, y: xp.scipy.linalg.solve_triangular(x, y, trans=trans, lower=lower, unit_diagonal=unit),
          [a, b], lambda x, y: scipy.linalg.solve_triangular(x, y, trans=trans, lower=lower, unit_diagonal=unit),
          tol=value_tol(dtype, 100))


def _cho_solve(name, lhs, rhs, lower, dtype):
    rng = rng_for(name)
    f = draw(rng, lhs, dtype)
    c = scipy.linalg.cholesky(f @ np.conj(f.T) + lhs[0] * np.eye(lhs[0]), lower=lower)
    b = draw(rng, rhs, dtype)
    check(name, lambda xp, x, y: xp.scipy.linalg.cho_solve((x, lower), y), [c, b],
          lambda x, y: scipy.linalg.cho_solve((x, lower), y), tol=value_tol(dtype, 100))


def _polar(name, shape, side, dtype):
    a = draw(rng_for(name), shape, dtype)
    check(name, lambda xp, x: xp.scipy.linalg.polar(x, side=side), [a], lambda x: scipy.linalg.polar(x, side=side),
          tol=value_tol(dtype, 1e3), peer=False)


def _refused(name, op, a, reference):
    """SciPy's values, and a derivative asked for refused (a LinalgError naming the op)."""
    got, want = ours(op, a), reference
    for g, w in zip(got, want) if isinstance(want, tuple) else [(got, want)]:
        close("value", g, w, 1e-10)
    first = (lambda x: op(x)[0]) if isinstance(want, tuple) else op
    try:
        tnp.grad(lambda x: tnp.sum(tnp.real(first(x))))(a)
    except LinalgError:
        return
    raise WrongDerivative(f"{name}: a derivative was returned where the library documents a refusal")


def cases() -> list[Case]:
    out: list[Case] = []
    out += product_cases("testMatrixNorm", [dict(shape=s, dtype=d, ord=o, keepdims=k) for s, d, o, k in
                                            P([(3, 4), (2, 3, 5)], C64, [None, "fro", "nuc", 1, -1, 2, -2,
                                                                         np.inf, -np.inf], [False, True])
                                            if o is not None], _matrix_norm)
    out += product_cases("testVectorNorm", [dict(shape=(3, 4, 5), dtype=d, ord=o, axis=ax, keepdims=k)
                                            for d, o, ax, k in P(C64, [1, 2, 3, 0.5, -1.5, np.inf, -np.inf, 0],
                                                                 [None, 0, (1, 2), (-1, 0)], [False, True])],
                         _vector_norm)
    out += product_cases("testCond", [dict(shape=s, dtype=d, p=p) for s, d, p in
                                      P([(1, 1), (4, 4), (3, 2, 5, 5)], ALL,
                                        [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])], _cond)
    out += product_cases("testTensorinv", [dict(shape=s, ind=i, dtype=d) for (s, i), d in
                                           P([((4, 4), 1), ((2, 3, 6), 2), ((4, 6, 8, 3), 2)], ALL)], _tensorinv)
    out += product_cases("testTensorsolve", [dict(a_shape=a, b_shape=b, dtype=d) for (a, b), d in
                                             P([((2, 3, 6), (2, 3)), ((4, 4), (4,)), ((3, 4, 12), (3, 4))], ALL)],
                         _tensorsolve)
    out += product_cases("testMatrixRank", [dict(shape=s, dtype=d) for s, d in
                                            P([(1, 1), (4, 4), (3, 5), (2, 4, 3), (0, 3)], ALL)], _matrix_rank)
    out += product_cases("testMultiDot", [dict(shapes=s, dtype=d) for s, d in
                                          P([[(3, 4), (4, 5)], [(3,), (3, 4), (4, 5), (5,)], [(2, 3), (3, 8), (8, 1),
                                                                                             (1, 4)]], ALL)], _multi_dot)
    out += product_cases("testCross", [dict(lhs=l, rhs=r, axis=ax, dtype=d) for (l, r, ax), d in
                                       P([((3,), (3,), -1), ((4, 3), (3,), -1), ((3, 5), (3, 1), 0)], ALL)], _cross)
    out += product_cases("testVecdot", [dict(lhs=l, rhs=r, axis=ax, dtype=d) for (l, r, ax), d in
                                        P([((4,), (4,), -1), ((3, 4), (4,), -1), ((5, 3), (5, 1), 0)], ALL)], _vecdot)
    out += product_cases("testLu", [dict(shape=s, dtype=d) for s, d in
                                    P([(1, 1), (4, 5), (10, 5), (7, 7), (2, 3, 4), (0, 3)], ALL)], _lu)
    out += product_cases("testSolveTriangular", [dict(lower=lo, trans=t, unit=u, lhs=l, rhs=r, dtype=d)
                                                 for lo, t, u, (l, r), d in
                                                 P([False, True], [0, 1, 2], [False, True],
                                                   [((4, 4), (4,)), ((4, 4), (4, 3)), ((2, 8, 8), (2, 8, 2))],
                                                   [np.float64, np.complex128])], _solve_triangular)
    out += product_cases("testChoSolve", [dict(lhs=l, rhs=r, lower=lo, dtype=d) for (l, r), lo, d in
                                          P([((1, 1), (1, 1)), ((4, 4), (4,)), ((8, 8), (8, 4))], [False, True], ALL)],
                         _cho_solve)
    out += product_cases("testPolar", [dict(shape=s, side=sd, dtype=d) for s, sd, d in
                                       P([(1, 1), (4, 4), (5, 3), (3, 5)], ["right", "left"], ALL)], _polar)
    a = draw(rng_for("testSchur"), (5, 5), np.float64)
    out += [Case("jax", "testSchur[refused derivative]",
                 lambda: _refused("testSchur", tnp.scipy.linalg.schur, a, scipy.linalg.schur(a))),
            Case("jax", "testFunm[refused derivative]",
                 lambda: _refused("testFunm", lambda x: tnp.scipy.linalg.funm(x, np.sin), a,
                                  scipy.linalg.funm(a, np.sin)))]
    return out
