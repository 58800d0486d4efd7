"""Eigenvalues and eigenvectors of general square matrices (numpy.linalg.eig), always complex.

A V = V diag(w), each column of V of unit norm with its largest entry real and positive (the
first such entry at a tie): LAPACK's normalisation, with the sign of a real eigenvector fixed
too, so that V is a smooth function of A wherever the eigenvalues are apart. With
C = V⁻¹ dA V, the rules (nondegenerate perturbation theory, as JAX's) are

    dw = diag(C),   dV = U + V diag(c),   U = V (F ∘ C),   F_ij = 1/(w_j − w_i) (0 at i = j),

c_j = −Re(v_jᴴ u_j) − i Im(u_kj)/v_kj (k the largest entry) keeping the normalisation; the VJP
is their transpose. The reciprocals are a primitive (``eig_coupling``) that refuses, with a
LinalgError, an entry it would multiply by a nonzero number where w_i and w_j are apart by no
more than their rounding (10 n ε ‖A‖ times each one's condition number, the row norm of
V⁻¹): the derivative of an eigenvector of a repeated eigenvalue is not defined. So a JVP of
eig at a repeated eigenvalue raises; a VJP raises only where a cotangent reaches such an
eigenvector. Eigenvalues alone (``eigvals``) stay differentiable there: diag(C) is the exact
derivative of every symmetric function of a repeated eigenvalue's copies, and a VJP whose
cotangents differ on those copies (a function that is not symmetric in them, which has no
derivative) raises. A defective matrix (dependent eigenvectors) has no derivative: LinalgError.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import LinalgError
from ..ops.elementwise import cj, lift_real, real_dtype
from ..rules import vjp_from_linear_jvp
from ..tensor import Aval
from . import _RULES, _check_finite, _square_abstract
from .eigh_function import by_col, by_row


def _complex(dtype: np.dtype) -> np.dtype:
    return np.result_type(dtype, np.complex64)


def _eig_abstract(a: Aval) -> tuple[Aval, Aval]:
    n = _square_abstract("eig", a)
    return Aval((n,), _complex(a.dtype)), Aval((n, n), _complex(a.dtype))


def _eig_impl(a):
    """LAPACK geev through NumPy, then each column scaled to unit norm with its largest entry real
    and positive. Input with inf or NaN raises LinalgError."""
    _check_finite("eig", a)
    dtype = _complex(a.dtype)
    try:
        w, v = np.linalg.eig(a)
    except np.linalg.LinAlgError as err:
        raise LinalgError("eig", "LAPACK geev to converge", str(err)) from None
    w, v = w.astype(dtype), v.astype(dtype)
    if w.size:
        columns = np.arange(w.size)
        top = np.argmax(np.abs(v), axis=0)
        v = v * (np.conj(v[top, columns]) / np.abs(v[top, columns]))
        v /= np.linalg.norm(v, axis=0)
        v[top, columns] = v[top, columns].real
    return w, v


def _constants_impl(a, v):
    """(r, K): r_i = 10 n ε ‖A‖_F ‖row i of V⁻¹‖, how far rounding may move w_i; K the mask of each
    column's largest entry. A singular V (a defective A) raises LinalgError."""
    n = a.shape[0]
    real = real_dtype(v.dtype)
    try:
        rows = np.linalg.norm(np.linalg.inv(v), axis=1)
    except np.linalg.LinAlgError:
        rows = np.array([np.inf])
    if not np.isfinite(rows).all():
        raise LinalgError("eig", "a diagonalisable matrix for a derivative (linearly independent eigenvectors)",
                          "a defective one")
    mask = np.zeros((n, n), real)
    mask[np.argmax(np.abs(v), axis=0), np.arange(n)] = 1
    return (10 * n * np.finfo(real).eps * np.linalg.norm(a) * rows).astype(real), mask


# Constants of eig's rules (no derivative): the rounding radius of each eigenvalue and the
# mask of each eigenvector's largest entry.
constants_p = _RULES.define(
    "eig_constants",
    lambda a, v: (Aval((a.shape[0],), real_dtype(v.dtype)), Aval(v.shape, real_dtype(v.dtype))),
    _constants_impl,
    jvp=lambda s, tangents, primals, outputs: (None, None),
    vjp=lambda s, cotangents, primals, outputs, needs: (None, None),
)


def _apart(w, r):
    """Pairs i ≠ j whose eigenvalues are apart by more than their rounding radii."""
    apart = np.abs(w[None, :] - w[:, None]) > r[:, None] + r[None, :]
    np.fill_diagonal(apart, False)
    return apart


def _coupling_impl(w, r, m):
    """M_ij/(w_j − w_i) where apart, 0 on the diagonal; LinalgError at a nonzero M_ij of a pair
    that is not apart."""
    apart = _apart(w, r)
    clash = ~apart & (m != 0)
    np.fill_diagonal(clash, False)
    if clash.any():
        i, j = np.argwhere(clash)[0]
        raise LinalgError("eig", "eigenvalues apart where an eigenvector's derivative is taken (at a repeated "
                                 "eigenvalue it is not defined; eigvals, or functions of the eigenvalues, stay "
                                 "differentiable)", f"w[{i}] = {w[i]:.6g} and w[{j}] = {w[j]:.6g}, equal to rounding")
    gap = np.where(apart, w[None, :] - w[:, None], 1)
    return (np.where(apart, m / gap, 0).astype(m.dtype),)


def _coupling(s, w, r, m):
    return s.bind(coupling_p, w, r, m)[0]


def _coupling_jvp(s, tangents, primals, outputs):
    """d(F∘M) = F∘dM + F∘(F∘M)∘(dw_i − dw_j), as dF_ij = F_ij² (dw_i − dw_j)."""
    (dw, _, dm), (w, r, _), (out,) = tangents, primals, outputs
    result = None if dm is None else _coupling(s, w, r, dm)
    if dw is not None:
        result = s.accumulate(result, _coupling(s, w, r, s.mul(out, s.sub(by_row(s, dw), by_col(s, dw)))))
    return (result,)


def _coupling_vjp(s, cotangents, primals, outputs, needs):
    """M̄ = conj(F)∘Ō; w̄ = conj(Σ_j G_ij − Σ_j G_ji) for G = conj(Ō)∘F∘F∘M."""
    (ob,), (w, r, _), (out,) = cotangents, primals, outputs
    mb = _coupling(s, s.conj(w), r, ob) if needs[2] else None
    wb = None
    if needs[0]:
        g = s.mul(s.conj(ob), _coupling(s, w, r, out))
        wb = s.conj(s.sub(s.reduce_sum(g, (1,)), s.reduce_sum(g, (0,))))
    return wb, None, mb


coupling_p = _RULES.define(
    "eig_coupling",
    lambda w, r, m: (m,),
    _coupling_impl,
    _coupling_jvp,
    _coupling_vjp,
)


def _gate_impl(w, r, t, check):
    """t; when ``check``, LinalgError where eigenvalues equal to rounding have different entries of t."""
    if check:
        tied = ~_apart(w, r)
        np.fill_diagonal(tied, False)
        spread = np.abs(t[None, :] - t[:, None]) > math.sqrt(np.finfo(real_dtype(t.dtype)).eps) * np.abs(t).max(
            initial=0)
        if (tied & spread).any():
            i, j = np.argwhere(tied & spread)[0]
            raise LinalgError("eig", "equal cotangents on eigenvalues equal to rounding (only symmetric functions of "
                                     "a repeated eigenvalue's copies, e.g. their sum, have a derivative)",
                              f"w[{i}] = {w[i]:.6g} and w[{j}] = {w[j]:.6g} with cotangents {t[i]:.6g} and {t[j]:.6g}")
    return (t,)


# The identity on an eigenvalue tangent; its transpose checks the cotangent (see the module's note).
gate_p = _RULES.define(
    "eig_cluster_gate",
    lambda w, r, t, check: (t,),
    _gate_impl,
    jvp=lambda s, tangents, primals, outputs, check: (tangents[2],),
    vjp=lambda s, cotangents, primals, outputs, needs, check: (
        None, None, s.bind(gate_p, primals[0], primals[1], cotangents[0], check=not check)[0]),
)


def _normalised(s, v, u, mask):
    """U + V diag(c), c_j = −Re(v_jᴴ u_j) − i Im(u_kj)/v_kj: the tangent that keeps each column of
    unit norm with its largest entry (``mask``) real."""
    top = lift_real(s, mask, v)
    inner = s.real(s.einsum([cj(s, v), u], "aj,aj->j"))
    turn = s.div(s.imag(s.einsum([top, u], "aj,aj->j")), s.real(s.einsum([top, v], "aj,aj->j")))
    return s.add(u, s.einsum([v, s.neg(s.complex(inner, turn))], "aj,j->aj"))


def _tangent(s, a, da, w, v, vectors):
    """(dw, dV) (dV only with ``vectors``), the module's formulas."""
    if w.shape[0] == 0:
        return s.zeros(w.shape, w.dtype), s.zeros(v.shape, v.dtype) if vectors else None
    r, mask = s.bind(constants_p, a, v)
    da = da if da.dtype.kind == "c" else lift_real(s, da, v)
    c = s.solve(v, s.einsum([da, v], "ab,bj->aj"))  # V⁻¹ dA V
    dw = s.bind(gate_p, w, r, s.einsum([c], "ii->i"), check=False)[0]
    if not vectors:
        return dw, None
    return dw, _normalised(s, v, s.einsum([v, _coupling(s, w, r, c)], "ai,ij->aj"), mask)


def _eig_jvp(s, tangents, primals, outputs):
    return _tangent(s, primals[0], tangents[0], outputs[0], outputs[1], vectors=True)


def _eigvals_jvp(s, tangents, primals, outputs):
    (a,), (w,) = primals, outputs
    v = s.bind(eig_p, a)[1]
    return (_tangent(s, a, tangents[0], w, v, vectors=False)[0],)


def _cost(in_avals, out_avals, params) -> float:
    return 25.0 * in_avals[0].shape[0] ** 3  # Hessenberg reduction, QR iterations, vectors


eig_p = _RULES.define("eig", _eig_abstract, _eig_impl, _eig_jvp, vjp_from_linear_jvp(_eig_jvp), cost=_cost)

eigvals_p = _RULES.define(
    "eigvals",
    lambda a: _eig_abstract(a)[:1],
    lambda a: _eig_impl(a)[:1],  # eig's kernel: the rules' eig orders the eigenvalues as this does
    _eigvals_jvp,
    vjp_from_linear_jvp(_eigvals_jvp),
    cost=_cost,
)
