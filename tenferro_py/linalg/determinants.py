"""det and slogdet of square matrices, by LU (LAPACK getrf), with rules that never divide by det.

slogdet gives (sign, log|det|): d log|det| = Re tr(A⁻¹ dA) and, for complex A, d sign = sign ·
i Im tr(A⁻¹ dA). At a singular matrix (sign 0, log|det| = −inf) that derivative is infinite, and
asking for it is a LinalgError naming slogdet.

det's derivative is tr(adj(A) dA), with the adjugate adj(A) = det(U Vᴴ) V diag(∏_{j≠i} s_j) Uᴴ from
the SVD A = U S Vᴴ: a product of n − 1 singular values, never a quotient, so it is exact at a
singular matrix too (nonzero at rank n − 1, zero below). The adjugate's own derivative (det's
second) is tr(A⁻¹ dA) adj(A) − A⁻¹ dA adj(A), which needs A⁻¹: at a singular matrix asking for it
is a LinalgError naming det (for n ≤ 2, where adj is linear, it is exact everywhere).
"""

from __future__ import annotations

import numpy as np

from ..errors import LinalgError
from ..ops.complex_parts import lift_real, times_i
from ..ops.elementwise import cj, real_dtype
from ..tensor import Aval, Tensor
from .common import RULES, check_finite, check_square
from .solve import inv_p
from .svd import svd_p


# --- A⁻¹ for the rules, whose error at a singular matrix names the op being differentiated ----------


def _inverse_impl(a, op, purpose):
    try:
        return inv_p.impl(a)
    except LinalgError as err:
        raise LinalgError(op, f"a nonsingular matrix for {purpose}", err.got) from None


_INV_RULE = RULES.get("inv")

_inverse_p = RULES.define(
    "inverse_for_derivative",
    lambda a, op, purpose: inv_p.abstract(a),
    _inverse_impl,
    jvp=lambda s, tangents, primals, outputs, op, purpose: _INV_RULE.jvp(s, tangents, primals, outputs),
    vjp=lambda s, cotangents, primals, outputs, needs, op, purpose: _INV_RULE.vjp(s, cotangents, primals, outputs,
                                                                               needs),
    cost=lambda in_avals, out_avals, params: 2.0 * in_avals[0].shape[0] ** 3,
    dense_only=True,
)


def _inverse(s, a, op, purpose):
    """A⁻¹, for the derivative of ``op``: at a singular A, a LinalgError naming ``op`` and ``purpose``."""
    return s.bind(_inverse_p, a, op=op, purpose=purpose)[0]


def _trace_of_product(s, x, y):
    """tr(x y)."""
    return s.einsum([x, y], "ij,ji->")


# --- slogdet -------------------------------------------------------------------------------------


def _slogdet_abstract(a: Aval) -> tuple[Aval, Aval]:
    check_square("slogdet", a)
    return Aval((), a.dtype), Aval((), real_dtype(a.dtype))


def _slogdet_impl(a):
    check_finite("slogdet", a)
    sign, logabs = np.linalg.slogdet(a)
    return np.asarray(sign, a.dtype), np.asarray(logabs, real_dtype(a.dtype))


_SLOGDET_PURPOSE = "the derivative of log|det| (infinite at a singular one)"


def _slogdet_jvp(s, tangents, primals, outputs):
    """d log|det| = Re t, d sign = sign · i Im t (complex A), t = tr(A⁻¹ dA)."""
    (da,), (a,), (sign, _) = tangents, primals, outputs
    t = _trace_of_product(s, _inverse(s, a, "slogdet", _SLOGDET_PURPOSE), da)
    if a.dtype.kind != "c":
        return None, t
    return s.mul(sign, times_i(s, s.imag(t))), s.real(t)


def _slogdet_vjp(s, cotangents, primals, outputs, needs):
    """Ā = c A⁻ᴴ with c = log|det|̄ + i Im(conj(sign) · sign̄) (the second term for complex A only)."""
    (sign_bar, log_bar), (a,), (sign, _) = cotangents, primals, outputs
    c = None if log_bar is None else lift_real(s, log_bar, a)
    if a.dtype.kind == "c" and sign_bar is not None:
        c = s.accumulate(c, times_i(s, s.imag(s.mul(s.conj(sign), sign_bar))))
    if c is None:
        return (None,)
    return (s.einsum([c, cj(s, _inverse(s, a, "slogdet", _SLOGDET_PURPOSE))], ",ji->ij"),)


slogdet_p = RULES.define(
    "slogdet",
    _slogdet_abstract,
    _slogdet_impl,
    _slogdet_jvp,
    _slogdet_vjp,
    cost=lambda in_avals, out_avals, params: 2.0 * in_avals[0].shape[0] ** 3 / 3.0,
    dense_only=True,
)


# --- the adjugate, and det ---------------------------------------------------------------------------


def _adjugate_impl(a):
    """det(U Vᴴ) V diag(∏_{j≠i} s_j) Uᴴ (the products by prefix and suffix products: no division)."""
    u, sv, vt = svd_p.impl(a, derivative_eps=None)
    n = sv.shape[0]
    before = np.concatenate([np.ones(1, sv.dtype), np.cumprod(sv[:-1])]) if n else sv
    after = np.concatenate([np.cumprod(sv[::-1][:-1])[::-1], np.ones(1, sv.dtype)]) if n else sv
    phase = np.linalg.det(u) * np.linalg.det(vt) if n else 1
    return ((vt.conj().T * (before * after)) @ u.conj().T * phase,)


_DET_PURPOSE = "second and higher derivatives of det (its first is exact at any matrix)"


def _adjugate_jvp(s, tangents, primals, outputs):
    """d adj(A) = tr(X dA) adj(A) − X dA adj(A), X = A⁻¹; for n ≤ 2, where adj is constant or linear
    (adj(A) = tr(A) I − A), its exact derivative at every A."""
    (da,), (a,), (adj,) = tangents, primals, outputs
    n = a.shape[0]
    if n < 2:
        return (None,)
    if n == 2:
        return (s.sub(s.einsum([s.einsum([da], "ii->"), _eye(s, a)], ",ij->ij"), da),)
    x = s.einsum([_inverse(s, a, "det", _DET_PURPOSE), da], "ij,jk->ik")
    return (s.sub(s.einsum([s.einsum([x], "ii->"), adj], ",ij->ij"), s.einsum([x, adj], "ij,jk->ik")),)


def _adjugate_vjp(s, cotangents, primals, outputs, needs):
    """The JVP's transpose: Ā = k Xᴴ − Xᴴ Ḡ adj(A)ᴴ with k = Σ Ḡ ∘ conj(adj(A)) (for n = 2,
    tr(Ḡ) I − Ḡ)."""
    (g,), (a,), (adj,) = cotangents, primals, outputs
    n = a.shape[0]
    if n < 2:
        return (None,)
    if n == 2:
        return (s.sub(s.einsum([s.einsum([g], "ii->"), _eye(s, a)], ",ij->ij"), g),)
    x_h = s.transpose(cj(s, _inverse(s, a, "det", _DET_PURPOSE)), (1, 0))
    k = s.einsum([g, cj(s, adj)], "ij,ij->")
    return (s.sub(s.einsum([k, x_h], ",ij->ij"), s.einsum([x_h, g, cj(s, adj)], "ai,ij,bj->ab")),)


def _eye(s, a):
    return s.constant_from(Tensor.adopt(np.eye(a.shape[0], dtype=a.dtype)))


adjugate_p = RULES.define(
    "adjugate",
    lambda a: (Aval(a.shape, a.dtype),),
    _adjugate_impl,
    _adjugate_jvp,
    _adjugate_vjp,
    cost=lambda in_avals, out_avals, params: 12.0 * in_avals[0].shape[0] ** 3,
    dense_only=True,
)


def _det_abstract(a: Aval) -> tuple[Aval]:
    check_square("det", a)
    return (Aval((), a.dtype),)


def _det_impl(a):
    check_finite("det", a)
    return (np.asarray(np.linalg.det(a), a.dtype),)


def _adjugate(s, a):
    return s.bind(adjugate_p, a)[0]


det_p = RULES.define(
    "det",
    _det_abstract,
    _det_impl,
    jvp=lambda s, tangents, primals, outputs: (_trace_of_product(s, _adjugate(s, primals[0]), tangents[0]),),
    vjp=lambda s, cotangents, primals, outputs, needs: (
        s.einsum([cotangents[0], cj(s, _adjugate(s, primals[0]))], ",ji->ij"),),
    cost=lambda in_avals, out_avals, params: 2.0 * in_avals[0].shape[0] ** 3 / 3.0,
    dense_only=True,
)
