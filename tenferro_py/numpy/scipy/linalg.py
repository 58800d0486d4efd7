"""scipy.linalg's expm, sqrtm and logm on tnp arrays, and the library's inv_sqrtm and
eigh_function, as the session's ops (tenferro_py/linalg/matrix_functions.py); its triangular
solves, LU, Cholesky solves, polar decomposition and left eigenvectors are in
:mod:`.factorizations`.

expm takes any square matrix, as SciPy's. sqrtm and logm are SciPy's for general matrices,
but their derivatives are those of Hermitian ones: on an array of a session they take a
Hermitian matrix (to rounding: |a − aᴴ| ≤ 10 n ε max|a|) and raise InvalidArgument for another,
positive semidefinite for sqrtm and positive definite for logm (a LinalgError otherwise, where
SciPy returns a complex root or logarithm). On NumPy data outside a session, SciPy's own (inv_sqrtm
and eigh_function then run in a session of their own and return NumPy data).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg

from ...errors import InvalidArgument
from ...ops.elementwise import real_dtype
from ..array import lift, session, tracked, wrap
from ..transforms import session as new_session

from .factorizations import (  # noqa: F401 (re-exported)
    cho_solve, eig, funm, lu, lu_factor, lu_solve, polar, schur, solve_triangular,
)

__all__ = ["eigh_function", "expm", "inv_sqrtm", "logm", "sqrtm"]
__all__ += ["cho_solve", "eig", "funm", "lu", "lu_factor", "lu_solve", "polar", "schur", "solve_triangular"]


def expm(A: Any) -> Any:  # noqa: N803 (SciPy's name)
    """The matrix exponential of a square matrix or a stack of them."""
    if not tracked(A):
        return scipy.linalg.expm(A)
    s = session("expm")
    return wrap(s.expm(lift(s, A)))


def _on_hermitian(op: str, a: Any, call: Any) -> Any:
    """call(s, x) on a, checked Hermitian to rounding, as a tensor of the running session; on NumPy
    data outside a session, in a session of its own, returning NumPy data."""
    if not tracked(a):
        with new_session():
            return _on_hermitian(op, a, call).tensor.value().to_numpy()
    s = session(op)
    x = lift(s, a)
    value = x.value().to_numpy()
    if value.ndim >= 2 and value.shape[-1] == value.shape[-2] and value.size:
        n = value.shape[-1]
        asymmetry = np.abs(value - np.conj(np.swapaxes(value, -1, -2))).max()
        if asymmetry > 10 * n * np.finfo(real_dtype(value.dtype)).eps * np.abs(value).max():
            raise InvalidArgument(op, "a Hermitian matrix (its derivatives are those of Hermitian matrices; "
                                      "symmetrize it, or call SciPy on its value)",
                                  f"one with max |a − aᴴ| = {asymmetry:.3g}")
    return wrap(call(s, x))


def sqrtm(A: Any) -> Any:  # noqa: N803
    """The principal square root of a Hermitian positive semidefinite matrix (or of each of a stack)."""
    if not tracked(A):
        return scipy.linalg.sqrtm(A)
    return _on_hermitian("sqrtm", A, lambda s, x: s.sqrtm(x))


def logm(A: Any) -> Any:  # noqa: N803
    """The principal logarithm of a Hermitian positive definite matrix (or of each of a stack)."""
    if not tracked(A):
        return scipy.linalg.logm(A)
    return _on_hermitian("logm", A, lambda s, x: s.logm(x))


def inv_sqrtm(A: Any) -> Any:  # noqa: N803
    """The inverse square root of a Hermitian positive definite matrix (or of each of a stack)."""
    return _on_hermitian("inv_sqrtm", A, lambda s, x: s.inv_sqrtm(x))


def eigh_function(A: Any, f: Any, fprime: Any, *higher: Any) -> Any:  # noqa: N803
    """V f(w) Vᴴ for eigh's (w, V) of a Hermitian matrix: f, fprime (fsecond, ... for higher
    derivatives) elementwise NumPy functions of real arrays."""
    return _on_hermitian("eigh_function", A, lambda s, x: s.eigh_function(x, f, fprime, *higher))
