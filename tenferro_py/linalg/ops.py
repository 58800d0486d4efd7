"""The session methods of the linalg ops: a mixin of :class:`~tenferro_py.opset.OpSet`, so that
every session has them, a KernelSession (which runs a composite's reference on arrays)
included. Each checks its arguments and binds the op's primitive, on one matrix or, through
:func:`~tenferro_py.batching.bind_batched`, on each of a stack.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..batching import bind_batched
from ..errors import InvalidArgument, ShapeMismatch
from ..ops.structural import SliceConfig
from ..tensor import Tensor, is_integer
from . import least_squares, norms
from .cholesky import cholesky_p
from .common import check_derivative_eps
from .determinants import det_p, slogdet_p
from .eig import eig_p, eigvals_p
from .eigh import eigh_p
from .eigh_function import check_functions, eigh_function_p
from .eigh_krylov import truncated_eigh
from .expm import expm_p
from .matrix_functions import inv_sqrtm_p, logm_p, sqrtm_p
from .pinv import pinv_p, pinv_rtol
from .qr import qr_p
from .solve import inv_p, solve_p
from .split import ABSORB, split_p
from .svd import svd_p
from .svd_truncated import svd_krylov_p

Value = Any  # an op's operand or result: an EagerTensor in an eager session, an array in a KernelSession


class LinalgOps:
    """The linalg op methods of a session, over its ``bind`` and ``_operand`` (declared here, the base
    of :class:`~tenferro_py.opset.OpSet`, and given by each session)."""

    __slots__ = ()

    def _operand(self, op: str, x: object) -> Any:
        """An op's input as the session takes it (each session's own)."""
        raise NotImplementedError

    def svd(
        self, x: Value, derivative_eps: float | None = None, k: int | None = None, method: str = "full"
    ) -> tuple[Value, Value, Value]:
        """Thin SVD (u, s, vt), s descending (real for complex x); ``derivative_eps`` overrides the
        context's ε, relative to the largest singular value. A stack (..., m, n) gives u (..., m, k),
        s (..., k), vt (..., k, n).

        ``k``: only the k leading triplets, (u (m, k), s (k,), vt (k, n)). ``method="full"`` slices
        the full SVD; ``method="krylov"`` computes them by a block Krylov method (falling back to
        the full SVD where that is faster or it does not converge), with exact derivatives that
        take the discarded subspace into account without computing it (docs/truncated.md).
        """
        x = self._operand("svd", x)
        if derivative_eps is not None:
            derivative_eps = check_derivative_eps("svd", derivative_eps)
        if method not in ("full", "krylov"):
            raise InvalidArgument("svd", "method 'full' or 'krylov'", repr(method))
        if k is not None:
            if not is_integer(k) or isinstance(k, bool):
                raise InvalidArgument("svd", "k: an int", repr(k))
            if x.ndim != 2:
                raise ShapeMismatch("svd", "a matrix (rank 2) for a truncated SVD (k given)", f"shape {list(x.shape)}")
            if method == "krylov" and 1 <= k < min(x.shape):  # k = min(m, n): nothing to discard
                u, s, vt = self.bind(svd_krylov_p, x, k=int(k), derivative_eps=derivative_eps)[:3]
                return u, s, vt
            if not 0 <= k <= min(x.shape):  # k = 0: empty factors, as a slice of the full SVD
                raise InvalidArgument("svd", f"k in [0, {min(x.shape)}] for a {x.shape[0]} × {x.shape[1]} matrix",
                                      repr(k))
            u, s, vt = self.bind(svd_p, x, derivative_eps=derivative_eps)
            m, n = x.shape
            return (self.slice(u, SliceConfig([0, 0], [m, k])), self.slice(s, SliceConfig([0], [k])),
                    self.slice(vt, SliceConfig([0, 0], [k, n])))
        if method == "krylov":
            raise InvalidArgument("svd", "k (the number of leading triplets) with method='krylov'", "k=None")
        _check_matrices("svd", x, square=False)  # x and ε are checked above
        u, s, vt = bind_batched(self, "svd", svd_p, [x], [2], derivative_eps=derivative_eps)
        return u, s, vt

    def eigh(
        self, x: Value, derivative_eps: float | None = None, k: int | None = None, method: str = "full"
    ) -> tuple[Value, Value]:
        """Eigenvalues (real, ascending) and eigenvectors (w, v) of the Hermitian part (x + xᴴ)/2
        of a square matrix (or of each of a stack (..., n, n)), real or complex.

        Taking the Hermitian part makes the op (and its derivatives) defined for any square
        input; a Hermitian x is unchanged. ``derivative_eps`` overrides the context's ε of
        the broadened rule, relative to max |w|.

        ``k``: only the k pairs of largest |w| of a matrix, by |w| descending (w (k,), v (n, k)).
        ``method="full"`` slices the full eigh; ``method="krylov"`` computes them by a block Krylov
        method (falling back to the full eigh where that is faster or it does not converge), with
        the same derivatives, the discarded subspace's share by solves (docs/truncated.md).
        """
        if method not in ("full", "krylov"):
            raise InvalidArgument("eigh", "method 'full' or 'krylov'", repr(method))
        if k is None and method == "krylov":
            raise InvalidArgument("eigh", "k (the number of eigenpairs of largest |w|) with method='krylov'", "k=None")
        if k is not None:
            if derivative_eps is not None:
                derivative_eps = check_derivative_eps("eigh", derivative_eps)
            return truncated_eigh(self, self._operand("eigh", x), k, method, derivative_eps)
        w, v = self._factorisation("eigh", eigh_p, x, derivative_eps, square=True)
        return w, v

    def qr(self, x: Value, derivative_eps: float | None = None) -> tuple[Value, Value]:
        """Thin QR (q, r) of an m × n matrix (or of each of a stack): q (m, k) with orthonormal
        columns, r (k, n) upper triangular, k = min(m, n), R's diagonal real and ≥ 0 (NumPy's
        mode='reduced' up to those signs). Differentiable where r's leading k × k block is
        invertible; ``derivative_eps`` overrides the context's ε, which broadens the rules'
        1/r_jj relative to max |r_jj| (so they stay finite at a zero pivot)."""
        q, r = self._factorisation("qr", qr_p, x, derivative_eps, square=False)
        return q, r

    def split(self, x: Value, k: Any = None, absorb: str = "both", derivative_eps: float | None = None,
              values: bool = False) -> tuple:
        """The factors (l, r) of x's rank-k truncation U_k S_k V_kᴴ by the SVD: l = U_k S_k,
        r = V_kᴴ (``absorb="left"``), U_k √S_k and √S_k V_kᴴ ("both"), or U_k and S_k V_kᴴ ("right").

        For factors that the network contracts back together (a bond of an MPS or PEPS, quimb's
        tensor_split): the derivatives are exact at repeated and zero kept values too, wherever
        the loss depends on l and r only through l·r (docs/spectral.md#degenerate). ``k``: an
        int in [0, min(m, n)] (None: all), or a function of the singular values (a NumPy array,
        descending) that returns it. ``values=True`` returns (l, r, s), s all min(m, n) singular
        values, differentiable (as svd's).
        """
        x = self._operand("split", x)
        if absorb not in ABSORB:
            raise InvalidArgument("split", f"absorb one of {sorted(ABSORB)}", repr(absorb))
        if x.ndim != 2:
            raise ShapeMismatch("split", "a matrix (rank 2)", f"shape {list(x.shape)}")
        if derivative_eps is not None:
            derivative_eps = check_derivative_eps("split", derivative_eps)
        u, sv, vt = self.bind(svd_p, x, derivative_eps=derivative_eps, within_split=True)
        kk = sv.shape[0]
        if callable(k):
            k = k(sv.value().to_numpy())
        k = kk if k is None else k
        if not is_integer(k) or isinstance(k, bool) or not 0 <= k <= kk:
            raise InvalidArgument("split", f"k: an int in [0, {kk}] for a {x.shape[0]} × {x.shape[1]} matrix", repr(k))
        left, right = self.bind(split_p, x, u, sv, vt, k=int(k), absorb=absorb, derivative_eps=derivative_eps)
        return (left, right, sv) if values else (left, right)

    def _factorisation(self, op: str, prim: Any, x: object, derivative_eps: float | None, square: bool) -> tuple:
        """``prim`` (svd, eigh or qr) on a matrix or on each of a stack, its ε checked."""
        matrices = self._operand(op, x)
        if derivative_eps is not None:
            derivative_eps = check_derivative_eps(op, derivative_eps)
        _check_matrices(op, matrices, square=square)
        return bind_batched(self, op, prim, [matrices], [2], derivative_eps=derivative_eps)

    def solve(self, a: Value, b: Value) -> Value:
        """x with a x = b for a square nonsingular a: b a vector (n,) or a matrix (n, m); a and b
        may be stacks with equal leading axes, and one without them is shared (NumPy ≥ 2: b is a
        vector only when it is 1-D). A singular a is a LinalgError."""
        a, b = self._operand("solve", a), self._operand("solve", b)
        _check_matrices("solve", a, square=True)
        core = 1 if b.ndim == 1 else 2
        if b.ndim < core or b.shape[b.ndim - core] != a.shape[-1]:
            n = a.shape[-1]
            raise ShapeMismatch("solve", f"b of shape [{n}] or [..., {n}, m] (a is [..., {n}, {n}])",
                                f"shape {list(b.shape)}")
        (x,) = bind_batched(self, "solve", solve_p, [a, b], [2, core])
        return x

    def inv(self, x: Value) -> Value:
        """The inverse of a square nonsingular matrix (or of each of a stack); a singular one is a
        LinalgError."""
        x = self._operand("inv", x)
        _check_matrices("inv", x, square=True)
        (y,) = bind_batched(self, "inv", inv_p, [x], [2])
        return y

    def norm(self, x: Value, ord: object = None) -> Value:
        """numpy.linalg.norm(x, ord) of a vector (ord None or 2, 1, ±inf) or a matrix (None or 'fro',
        'nuc', ±2, ±1, ±inf), a real scalar; see :func:`tenferro_py.linalg.norm` for the derivatives
        where the norm has none (at 0, at ties)."""
        return norms.norm(self, self._operand("norm", x), ord)

    def det(self, x: Value) -> Value:
        """The determinant of a square matrix (or of each of a stack), by LU; its derivative
        tr(adj(A) dA) is exact at a singular matrix too (the second asks for A⁻¹)."""
        (d,) = self._square_op("det", det_p, x)
        return d

    def slogdet(self, x: Value) -> tuple[Value, Value]:
        """(sign, log|det|) of a square matrix (or of each of a stack), as numpy.linalg.slogdet; the
        derivative at a singular matrix (sign 0) is infinite, and asking for it is a LinalgError."""
        sign, logabs = self._square_op("slogdet", slogdet_p, x)
        return sign, logabs

    def cholesky(self, x: Value) -> Value:
        """L (lower, real positive diagonal) with L Lᴴ the Hermitian part (x + xᴴ)/2 of a square
        matrix (or of each of a stack); one that is not positive definite is a LinalgError."""
        (low,) = self._square_op("cholesky", cholesky_p, x)
        return low

    def eigvalsh(self, x: Value, derivative_eps: float | None = None) -> Value:
        """The eigenvalues of :meth:`eigh` alone (ascending)."""
        return self.eigh(x, derivative_eps)[0]

    def svdvals(self, x: Value, derivative_eps: float | None = None) -> Value:
        """The singular values of :meth:`svd` alone (descending)."""
        return self.svd(x, derivative_eps)[1]

    def lstsq(self, a: Value, b: Value, rcond: float | None = None) -> tuple:
        """numpy.linalg.lstsq(a, b, rcond) → (x, residuals, rank, sv): a a matrix, b a vector or a
        matrix; differentiable at full rank, see :func:`tenferro_py.linalg.lstsq`."""
        return least_squares.lstsq(self, self._operand("lstsq", a), self._operand("lstsq", b), rcond)

    def matrix_power(self, x: Value, n: int) -> Value:
        """x**n for an int n by repeated squaring, of a square matrix (or of each of a stack):
        x⁰ is the identity, n < 0 a power of inv(x)."""
        x = self._operand("matrix_power", x)
        _check_matrices("matrix_power", x, square=True)
        if not is_integer(n) or isinstance(n, bool):
            raise InvalidArgument("matrix_power", "an int exponent", repr(n))
        if n == 0:
            eye = self.constant_from(Tensor.adopt(np.eye(x.shape[-1], dtype=x.dtype)))
            return self.broadcast_in_dim(eye, x.shape, (x.ndim - 2, x.ndim - 1))
        base, power, result = (self.inv(x) if n < 0 else x), abs(int(n)), None
        while True:
            if power & 1:
                result = base if result is None else self.einsum([result, base], "...ij,...jk->...ik")
            power >>= 1
            if not power:
                return result
            base = self.einsum([base, base], "...ij,...jk->...ik")

    def pinv(self, x: Value, rtol: float | None = None) -> Value:
        """The pseudo-inverse (n, m) of an m × n matrix (or of each of a stack), singular values
        ≤ rtol·s₁ counted as zero (None: max(m, n)·ε, NumPy's ``rtol=None``); its rules are the
        constant-rank derivative, exact at repeated singular values (tenferro_py/linalg/pinv.py)."""
        x = self._operand("pinv", x)
        _check_matrices("pinv", x, square=False)
        (y,) = bind_batched(self, "pinv", pinv_p, [x], [2], rtol=pinv_rtol(x, rtol))
        return y

    def eig(self, x: Value) -> tuple[Value, Value]:
        """Eigenvalues and eigenvectors (w, v) of a general square matrix (or of each of a stack),
        both complex; v's columns of unit norm with their largest entry real and positive. The
        derivative of an eigenvector of a repeated eigenvalue is a LinalgError (tenferro_py/linalg/eig.py)."""
        w, v = self._square_op("eig", eig_p, x)
        return w, v

    def eigvals(self, x: Value) -> Value:
        """eig's eigenvalues alone (complex); their symmetric functions are differentiable at repeated ones."""
        return self._square_op("eigvals", eigvals_p, x)[0]

    def expm(self, x: Value) -> Value:
        """The matrix exponential of a square matrix (or of each of a stack), scipy.linalg.expm's,
        with derivatives exact at every order and every spectrum."""
        return self._square_op("expm", expm_p, x)[0]

    def sqrtm(self, x: Value) -> Value:
        """The square root of the (positive semidefinite) Hermitian part of x (linalg/matrix_functions.py)."""
        return self._square_op("sqrtm", sqrtm_p, x)[0]

    def inv_sqrtm(self, x: Value) -> Value:
        """The inverse square root of the (positive definite) Hermitian part of x."""
        return self._square_op("inv_sqrtm", inv_sqrtm_p, x)[0]

    def logm(self, x: Value) -> Value:
        """The logarithm of the (positive definite) Hermitian part of x."""
        return self._square_op("logm", logm_p, x)[0]

    def eigh_function(self, x: Value, f: Any, fprime: Any, *higher: Any) -> Value:
        """V f(w) Vᴴ for eigh's (w, V) of x's Hermitian part: f, fprime (and fsecond, … for higher
        derivatives) elementwise NumPy functions of real arrays (tenferro_py/linalg/eigh_function.py)."""
        functions = check_functions(f, (fprime,) + higher)
        return self._square_op("eigh_function", eigh_function_p, x, functions=functions)[0]

    def _square_op(self, op: str, prim: Any, x: object, **params: object) -> tuple:
        """``prim`` on a square matrix or on each of a stack."""
        x = self._operand(op, x)
        _check_matrices(op, x, square=True)
        return bind_batched(self, op, prim, [x], [2], **params)


def _check_matrices(op: str, x: Value, square: bool) -> None:
    """x is a matrix or a stack of them (..., m, n), square when ``square``; else ShapeMismatch."""
    if x.ndim < 2 or (square and x.shape[-1] != x.shape[-2]):
        kind = "a square matrix or a stack of them (..., n, n)" if square else "a matrix or a stack of them (..., m, n)"
        raise ShapeMismatch(op, kind, f"shape {list(x.shape)}")
