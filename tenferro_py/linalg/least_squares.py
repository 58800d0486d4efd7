"""lstsq: numpy.linalg.lstsq's (x, residuals, rank, sv) in session ops.

The rank is NumPy's: the singular values above rcond · s₁ (rcond = eps · max(m, n) by default),
so it reads sv's value. At full rank (rank = min(m, n)) x is the least-squares solution
R⁻¹ Qᴴ b from the thin QR of a (m ≥ n), or the minimum-norm one Q R⁻ᴴ b from that of aᴴ (m < n):
session ops, so x differentiates to every order in a and b. Below full rank x is NumPy's
minimum-norm solution pinv(a) b, with pinv(a) from the SVD of a's value: exact in b, and its
derivative with respect to a (which would need the rank to stay constant) is a LinalgError,
raised when that derivative is asked for.
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeMismatch, InvalidArgument, LinalgError, ShapeMismatch
from ..ops.elementwise import cj
from ..tensor import Aval, Tensor, is_real_number
from .common import RULES


def _refuse(op: str, expected: str, got: str):
    def rule(*args, **params):
        raise LinalgError(op, expected, got)

    return rule


# Zeros of a given aval that depend on x, whose derivative with respect to x is refused: added to
# a value computed from x's value alone, it makes asking for that derivative a clear error.
refused_derivative_p = RULES.define(
    "refused_derivative",
    lambda x, shape, dtype, op, expected, got: (Aval(shape, dtype),),
    lambda x, shape, dtype, op, expected, got: (np.zeros(shape, dtype),),
    jvp=lambda s, tangents, primals, outputs, op, expected, got, **params: _refuse(op, expected, got)(),
    vjp=lambda s, cotangents, primals, outputs, needs, op, expected, got, **params: _refuse(op, expected, got)(),
    dense_only=True,
)


def _check(a, b) -> None:
    if a.ndim != 2:
        raise ShapeMismatch("lstsq", "a matrix a (rank 2)", f"shape {list(a.shape)}")
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ShapeMismatch("lstsq", f"b of shape [{a.shape[0]}] or [{a.shape[0]}, k] (a is {list(a.shape)})",
                            f"shape {list(b.shape)}")
    if a.dtype != b.dtype:
        raise DTypeMismatch("lstsq", f"a and b of one dtype (a {a.dtype})", f"b {b.dtype}")


def _product(s, x, y):
    """x y for a matrix x and a vector or matrix y."""
    return s.einsum([x, y], "ij,j->i" if y.ndim == 1 else "ij,jk->ik")


def _adjoint(s, x):
    return s.transpose(cj(s, x), (1, 0))


def lstsq(s, a, b, rcond):
    """(x, residuals, rank, sv) as numpy.linalg.lstsq(a, b, rcond): residuals are the squared
    2-norms of b − a x per column where rank = n < m, else empty; rank is an int."""
    _check(a, b)
    m, n = a.shape
    k = min(m, n)
    if rcond is not None and not is_real_number(rcond):
        raise InvalidArgument("lstsq", "rcond: a real number or None", repr(rcond))
    u, sv, vt = s.svd(a)
    values = sv.value().to_numpy()
    eps = float(np.finfo(values.dtype).eps)
    ratio = eps * max(m, n) if rcond is None else (eps if rcond < 0 else float(rcond))  # < 0: LAPACK's "eps"
    cutoff = ratio * (values.max() if k else 0.0)
    rank = int(np.count_nonzero(values > cutoff))
    if rank == k > 0 and m >= n:
        q, r = s.qr(a)
        x = s.solve(r, _product(s, _adjoint(s, q), b))
    elif rank == k > 0:
        q, r = s.qr(_adjoint(s, a))
        x = _product(s, q, s.solve(_adjoint(s, r), b))
    else:
        kept = values > cutoff
        u, vt = u.value().to_numpy()[:, kept], vt.value().to_numpy()[kept]
        pseudo_inverse = (vt.conj().T / values[kept]) @ u.conj().T
        x = _product(s, s.constant_from(Tensor.adopt(pseudo_inverse.astype(a.dtype))), b)
        if rank < k and a.is_tracked:
            x = s.add(x, s.bind(refused_derivative_p, a, shape=x.shape, dtype=x.dtype, op="lstsq",
                                expected="a of full rank min(m, n) for the derivative of x with respect to a",
                                got=f"rank {rank} of a {m} × {n} matrix (rcond {ratio:.3g})")[0])
    if rank == n < m:
        residual = s.sub(b, _product(s, a, x))
        squares = s.mul(cj(s, residual), residual)
        residuals = s.reduce_sum(s.real(squares) if squares.dtype.kind == "c" else squares, (0,))
        residuals = s.reshape(residuals, (1,)) if b.ndim == 1 else residuals
    else:
        residuals = s.zeros((0,), sv.dtype)
    return x, residuals, rank, sv
