"""Eigenvalues and eigenvectors of general square matrices (numpy.linalg.eig), always complex.

A V = V diag(w), each column of V of unit norm with its largest entry real and positive (the
first such entry at a tie): LAPACK's normalisation, with the sign of a real eigenvector fixed
too, so that V is a smooth function of A wherever the eigenvalues are apart. With
C = V⁻¹ dA V, the rules (nondegenerate perturbation theory, as JAX's) are

    dw = diag(C),   dV = U + V diag(c),   U = V (F ∘ C),   F_ij = 1/(w_j − w_i) (0 at i = j),

c_j = −Re(v_jᴴ u_j) − i Im(u_kj)/v_kj (k the largest entry) keeping the normalisation; the VJP
is their transpose.

Eigenvalues are tied where they are apart by no more than rounding can move them (10 n ε ‖A‖
times each one's condition number κ_i, the row norm of V⁻¹). The reciprocals F are a primitive
(``eig_coupling``) that refuses, with a LinalgError, to multiply a tied pair's entry unless it is
zero: the derivative of an eigenvector of a repeated eigenvalue is not defined. So a JVP of eig
at tied eigenvalues raises; a VJP raises only where a cotangent reaches such an eigenvector; and
second derivatives of eigenvalues, which need the eigenvectors', raise there too. The first
derivative of eigenvalues stays defined for their symmetric functions: dw is averaged over each
tied group (``eig_cluster_gate``, exact for those functions), and a VJP whose cotangents differ
within a group (a function that is not symmetric in the copies, which has no derivative)
raises. A defective matrix (dependent eigenvectors: a singular V, or tied eigenvalues with
κ > 0.1/√ε) has no derivative: LinalgError.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph

from ..errors import LinalgError
from ..ops.complex_parts import lift_real
from ..ops.elementwise import cj, real_dtype
from ..rules import vjp_from_linear_jvp
from ..tensor import Aval
from .common import RULES, check_finite, check_square
from .eigh_function import by_col, by_row


def _complex(dtype: np.dtype) -> np.dtype:
    return np.result_type(dtype, np.complex64)


def _eig_abstract(a: Aval) -> tuple[Aval, Aval]:
    n = check_square("eig", a)
    return Aval((n,), _complex(a.dtype)), Aval((n, n), _complex(a.dtype))


def _eig_impl(a):
    """LAPACK geev through NumPy, then each column scaled to unit norm with its largest entry real
    and positive. Input with inf or NaN raises LinalgError."""
    check_finite("eig", a)
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


def _tied(w, r):
    """Pairs i ≠ j of eigenvalues equal to rounding: apart by no more than r_i + r_j."""
    tied = np.abs(w[None, :] - w[:, None]) <= r[:, None] + r[None, :]
    np.fill_diagonal(tied, False)
    return tied


def _constants_impl(a, w, v):
    """(T, K, V⁻¹): T the mask of tied pairs (:func:`_tied`) for r_i = 10 n ε ‖A‖_F κ_i, how far
    rounding may move w_i, κ_i = ‖row i of V⁻¹‖ its condition number; K the mask of each column's
    largest entry. A defective A raises
    LinalgError: a singular V, or tied eigenvalues with κ > 0.1/√ε (nearly dependent
    eigenvectors: no derivative through them keeps even half the digits)."""
    n = a.shape[0]
    real = real_dtype(v.dtype)
    eps = np.finfo(real).eps
    try:
        inverse = np.linalg.inv(v)
    except np.linalg.LinAlgError:
        inverse = np.full(v.shape, np.inf, v.dtype)
    kappa = np.linalg.norm(inverse, axis=1)
    r = 10 * n * eps * np.linalg.norm(a) * kappa
    tied = _tied(w, r) if np.isfinite(r).all() else None
    if tied is None or (kappa[tied.any(axis=1)] > 0.1 / math.sqrt(eps)).any():
        raise LinalgError("eig", "a diagonalisable matrix for a derivative (independent eigenvectors)",
                          f"a defective one (eigenvector condition numbers up to {kappa.max():.3g})")
    mask = np.zeros((n, n), real)
    mask[np.argmax(np.abs(v), axis=0), np.arange(n)] = 1
    return tied.astype(real), mask, inverse


def _inverse_jvp(s, tangents, primals, outputs):
    """d(V⁻¹) = −V⁻¹ dV V⁻¹; the radii and the mask have no derivative."""
    dv, inverse = tangents[2], outputs[2]
    return None, None, None if dv is None else s.neg(s.einsum([inverse, dv, inverse], "ia,ab,bj->ij"))


def _inverse_vjp(s, cotangents, primals, outputs, needs):
    """V̄ = −V⁻ᴴ Ȳ V⁻ᴴ for the cotangent Ȳ of V⁻¹."""
    yb, inverse = cotangents[2], cj(s, outputs[2])
    return None, None, None if yb is None or not needs[2] else s.neg(s.einsum([inverse, yb, inverse], "ai,ab,jb->ij"))


# What eig's rules need besides A, w and V: the rounding radius of each eigenvalue and the mask of
# each eigenvector's largest entry (constants), and V⁻¹ (the rules' V⁻¹ X is a product with it:
# one inverse, which the radii need anyway, in place of a solve in each rule and its transpose).
constants_p = RULES.define(
    "eig_constants",
    lambda a, w, v: (Aval(v.shape, real_dtype(v.dtype)), Aval(v.shape, real_dtype(v.dtype)), Aval(v.shape, v.dtype)),
    _constants_impl,
    _inverse_jvp,
    _inverse_vjp,
    dense_only=True,
)


def _coupling_impl(w, tied, m):
    """M_ij/(w_j − w_i), 0 on the diagonal; LinalgError at a nonzero M_ij of tied w_i, w_j (``tied``)."""
    tied = tied != 0
    clash = tied & (m != 0)
    if clash.any():
        i, j = np.argwhere(clash)[0]
        raise LinalgError("eig", "eigenvalues apart where eigenvectors are differentiated (at a repeated eigenvalue "
                                 "their derivative, which the eigenvalues' second one needs, is not defined; the "
                                 "eigenvalues' first derivative is: eigvals)",
                          f"w[{i}] = {w[i]:.6g} and w[{j}] = {w[j]:.6g}, equal to rounding")
    apart = ~tied
    np.fill_diagonal(apart, False)
    gap = np.where(apart, w[None, :] - w[:, None], 1)
    return (np.where(apart, m / gap, 0).astype(m.dtype),)


def _coupling(s, w, tied, m):
    return s.bind(coupling_p, w, tied, m)[0]


def _coupling_jvp(s, tangents, primals, outputs):
    """d(F∘M) = F∘dM + F∘(F∘M)∘(dw_i − dw_j), as dF_ij = F_ij² (dw_i − dw_j)."""
    (dw, _, dm), (w, tied, _), (out,) = tangents, primals, outputs
    result = None if dm is None else _coupling(s, w, tied, dm)
    if dw is not None:
        result = s.accumulate(result, _coupling(s, w, tied, s.mul(out, s.sub(by_row(s, dw), by_col(s, dw)))))
    return (result,)


def _coupling_vjp(s, cotangents, primals, outputs, needs):
    """M̄ = conj(F)∘Ō; w̄ = conj(Σ_j G_ij − Σ_j G_ji) for G = conj(Ō)∘F∘F∘M."""
    (ob,), (w, tied, _), (out,) = cotangents, primals, outputs
    mb = _coupling(s, s.conj(w), tied, ob) if needs[2] else None
    wb = None
    if needs[0]:
        g = s.mul(s.conj(ob), _coupling(s, w, tied, out))
        wb = s.conj(s.sub(s.reduce_sum(g, (1,)), s.reduce_sum(g, (0,))))
    return wb, None, mb


# F∘M, F_ij = 1/(w_j − w_i), refusing the pairs of tied eigenvalues it would use.
coupling_p = RULES.define(
    "eig_coupling",
    lambda w, tied, m: (m,),
    _coupling_impl,
    _coupling_jvp,
    _coupling_vjp,
    dense_only=True,
)


def _gate_impl(w, tied, t, check):
    """t averaged over each group of tied eigenvalues; when ``check``, LinalgError where t differs from
    that average (by more than √ε max|t|)."""
    tied = tied != 0
    if not tied.any():
        return (t,)
    groups = scipy.sparse.csgraph.connected_components(scipy.sparse.csr_matrix(tied), directed=False)[1]
    counts = np.bincount(groups)
    mean = (np.bincount(groups, t.real) + (1j * np.bincount(groups, t.imag) if t.dtype.kind == "c" else 0)) / counts
    out = mean[groups].astype(t.dtype)
    if check:
        off = np.abs(t - out) > math.sqrt(np.finfo(real_dtype(t.dtype)).eps) * np.abs(t).max(initial=0)
        if off.any():
            i = int(np.argmax(off))
            raise LinalgError("eig", "equal cotangents on eigenvalues equal to rounding (only symmetric functions of "
                                     "a repeated eigenvalue's copies, e.g. their sum, have a derivative)",
                              f"cotangent {t[i]:.6g} of w[{i}] = {w[i]:.6g}, whose copies average {out[i]:.6g}")
    return (out,)


# The average of an eigenvalue tangent over tied eigenvalues (the derivative of their symmetric
# functions); self-adjoint, its transpose also refuses cotangents that are not symmetric.
gate_p = RULES.define(
    "eig_cluster_gate",
    lambda w, tied, t, check: (t,),
    _gate_impl,
    jvp=lambda s, tangents, primals, outputs, check: (
        None if tangents[2] is None else s.bind(gate_p, primals[0], primals[1], tangents[2], check=False)[0],),
    vjp=lambda s, cotangents, primals, outputs, needs, check: (
        None, None, s.bind(gate_p, primals[0], primals[1], cotangents[0], check=not check)[0]),
    dense_only=True,
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
    tied, mask, inverse = s.bind(constants_p, a, w, v)
    da = da if da.dtype.kind == "c" else lift_real(s, da, v)
    c = s.einsum([inverse, da, v], "ia,ab,bj->ij")  # V⁻¹ dA V
    dw = s.bind(gate_p, w, tied, s.einsum([c], "ii->i"), check=False)[0]
    if not vectors:
        return dw, None
    return dw, _normalised(s, v, s.einsum([v, _coupling(s, w, tied, c)], "ai,ij->aj"), mask)


def _eig_jvp(s, tangents, primals, outputs):
    return _tangent(s, primals[0], tangents[0], outputs[0], outputs[1], vectors=True)


def _eigvals_jvp(s, tangents, primals, outputs):
    (a,), (w,) = primals, outputs
    v = s.bind(eig_p, a)[1]
    return (_tangent(s, a, tangents[0], w, v, vectors=False)[0],)


def _cost(in_avals, out_avals, params) -> float:
    return 25.0 * in_avals[0].shape[0] ** 3  # Hessenberg reduction, QR iterations, vectors


eig_p = RULES.define("eig", _eig_abstract, _eig_impl, _eig_jvp, vjp_from_linear_jvp(_eig_jvp), cost=_cost,
                      dense_only=True)

eigvals_p = RULES.define(
    "eigvals",
    lambda a: _eig_abstract(a)[:1],
    lambda a: _eig_impl(a)[:1],  # eig's kernel: the rules' eig orders the eigenvalues as this does
    _eigvals_jvp,
    vjp_from_linear_jvp(_eigvals_jvp),
    cost=_cost,
    dense_only=True,
)
