"""quimb's truncated decompositions (``svd_truncated``, ``svd_via_eig_truncated``,
``eigh_truncated``: ``tensor_split`` with method "svd", "svd:eig", "eig" and "eigh", and every
compression and boundary contraction built on them; ``qr_stabilized``, quimb's canonisation) for
tnp arrays.

quimb looks them up through autoray by the array's backend, so registering them under tnp's
backend (:func:`register`, called with the rest of tnp's autoray functions) makes quimb run these
on tnp arrays and its own on every other. Where the singular values are absorbed into the
factors ("left", "both", "right"), they run ``split``, whose derivatives are exact at repeated
and zero singular values for a network that contracts the factors back together
(docs/spectral.md#degenerate); so does the mode that returns them apart (U, s, Vᴴ, as l = U,
s and s⁻¹·r; a row of Vᴴ at an exact zero value is zero then, which the product never sees). The
one-sided modes return the factors as quimb does, through svd.
The truncation (``cutoff``, ``cutoff_mode``, ``max_bond``), ``renorm`` and ``info["error"]``
follow quimb's definitions. All three run the SVD: for a Hermitian x its singular triplets are
its eigenpairs (|λ| descending, the signs in V), and the SVD is the more accurate way to the
same truncation as the Gram matrix's eigh.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidArgument
from . import functions as fn
from . import manipulation as mp
from . import linalg
from .array import lift, session, value_of, wrap

#: quimb's codes of ``absorb`` (quimb.tensor.decomp), by its names, and those ``split`` runs.
ABSORB_CODES = {"left": -1, "both": 0, "right": 1, "full": None, "svals": 2, "lsqrt": -12, "rorthog": -11,
                "lfactor": -10, "lorthog": 10, "rfactor": 11, "rsqrt": 12}
SPLIT_ABSORB = {-1: "left", 0: "both", 1: "right"}
#: quimb's codes of ``cutoff_mode``.
CUTOFF_MODES = {"abs": 1, "rel": 2, "sum2": 3, "rsum2": 4, "sum1": 5, "rsum1": 6}


def _code(op: str, value: Any, codes: dict) -> Any:
    """A quimb option as its numeric code (it may be given by name or code)."""
    if isinstance(value, str):
        if value not in codes:
            raise InvalidArgument(op, f"one of {sorted(codes)}", repr(value))
        return codes[value]
    if value is not None and value not in codes.values():
        raise InvalidArgument(op, f"one of {sorted(codes)} or their codes", repr(value))
    return value


def kept_count(values: np.ndarray, cutoff: float, cutoff_mode: int, max_bond: int, renorm: int) -> int:
    """How many of the descending ``values`` (≥ 0) quimb keeps (``_trim_and_renorm_svd_result``)."""
    d = values.shape[-1]
    if cutoff > 0.0 or renorm > 0:
        if cutoff_mode == 1:
            n = int(np.count_nonzero(values > cutoff))
        elif cutoff_mode == 2:
            n = int(np.count_nonzero(values > cutoff * (values[0] if d else 0.0)))
        else:
            powered = values ** (2 if cutoff_mode in (3, 4) else 1)
            running = np.cumsum(powered)
            total = running[-1] if d else 0.0
            above = running < (total * (1 - cutoff) if cutoff_mode in (4, 6) else total - cutoff)
            n = int(np.count_nonzero(above)) + 1
        n = max(n, 1)
        return min(n, max_bond) if max_bond > 0 else n
    return min(max_bond, d) if max_bond > 0 else d


def _renormalised(sv: Any, k: int, renorm: int) -> Any:
    """quimb's renormalisation of the kept values: (Σ s^p / Σ_kept s^p)^(1/p), p = renorm (1 where
    nothing is kept), a differentiable function of the values."""
    weights = fn.power(sv, renorm)
    total, kept = fn.sum(weights), fn.sum(weights[:k])
    return fn.where(value_of(kept) > 0, fn.power(total / fn.where(value_of(kept) > 0, kept, 1.0), 1.0 / renorm), 1.0)


def _absorbed(u: Any, sv: Any, vh: Any, absorb: Any) -> tuple:
    """quimb's ``_do_absorb`` for the modes that return the factors as they are or partly."""
    root = None if absorb not in (-12, 12) else fn.sqrt(sv)
    return {
        None: (u, sv, vh), 2: (None, sv, None), 10: (u, None, None), -11: (None, None, vh),
        -10: (u * sv[None, :], None, None), 11: (None, None, sv[:, None] * vh),
        -12: (None if root is None else u * root[None, :], None, None),
        12: (None, None, None if root is None else root[:, None] * vh),
    }[absorb]


def _truncated(op: str, x: Any, cutoff: float, cutoff_mode: Any, max_bond: int, absorb: Any, renorm: int,
               info: Any, signed: bool = False) -> tuple:
    """The truncated decomposition by the SVD, as quimb's: (left, s or None, right). ``signed``: x is
    Hermitian, and values returned on their own are its eigenvalues (|λ| the singular values)."""
    absorb, mode = _code(op, absorb, ABSORB_CODES), _code(op, cutoff_mode, CUTOFF_MODES)
    renorm = int(renorm or 0)
    seen = {}

    def keep(values: np.ndarray) -> int:
        seen["values"], seen["k"] = values, kept_count(values, cutoff, mode, int(max_bond), renorm)
        return seen["k"]

    if (absorb in SPLIT_ABSORB or absorb is None) and x.ndim == 2:
        s = session(op)
        left, right, sv = (wrap(t) for t in s.split(lift(s, x), k=keep, absorb=SPLIT_ABSORB.get(absorb, "right"),
                                                       values=True))
        k = seen["k"]
        if renorm > 0 and k < sv.shape[0]:
            c, a = _renormalised(sv, k, renorm), {-1: 1.0, 0: 0.5, 1: 0.0, None: 0.0}[absorb]
            left, right = left * fn.power(c, a), right * fn.power(c, 1.0 - a)
        if absorb is None:  # (U, s, Vᴴ) as l, s and s⁻¹ r: their product is l·r's, whatever s's rows
            values = sv[:k] * c if renorm > 0 and k < sv.shape[0] else sv[:k]
            if signed:  # λ_j = s_j · sign(u_jᴴ x u_j); then s⁻¹·r holds u_jᴴ, as quimb's Vᴴ = Uᴴ
                vectors = np.asarray(value_of(left))
                quotients = np.einsum("aj,ab,bj->j", vectors.conj(), np.asarray(value_of(x)), vectors).real
                values = values * np.where(quotients < 0, -1.0, 1.0)
            positive = np.asarray(value_of(values)) != 0
            right = right * fn.where(positive, 1.0 / fn.where(positive, values, 1.0), 0.0)[:, None]
            result = (left, values, right)
        else:
            result = (left, None, right)
    else:
        u, sv, vh = linalg.svd(x, full_matrices=False)
        k = keep(np.asarray(value_of(sv)))
        if k < sv.shape[-1]:
            u, vh = u[..., :, :k], vh[..., :k, :]
            sv = sv[..., :k] * _renormalised(sv, k, renorm) if renorm > 0 else sv[..., :k]
        result = _absorbed(u, sv, vh, absorb)
    if isinstance(info, dict) and "error" in info:
        info["error"] = float(np.sqrt(np.sum(seen["values"][..., seen["k"]:] ** 2)))
    return result


def svd_truncated(x: Any, cutoff: float = -1.0, cutoff_mode: Any = 2, max_bond: int = -1, absorb: Any = 0,
                  renorm: int = 0, info: Any = None, **kwargs: Any) -> tuple:
    """quimb's ``svd_truncated`` (``tensor_split(method="svd")``) on a tnp array."""
    return _truncated("svd_truncated", x, cutoff, cutoff_mode, max_bond, absorb, renorm, info)


def svd_via_eig_truncated(x: Any, cutoff: float = -1.0, cutoff_mode: Any = 2, max_bond: int = -1, absorb: Any = 0,
                          renorm: int = 0, info: Any = None) -> tuple:
    """quimb's ``svd_via_eig_truncated`` (method "svd:eig" and "eig"): the same truncation, by the SVD."""
    return _truncated("svd_via_eig_truncated", x, cutoff, cutoff_mode, max_bond, absorb, renorm, info)


def eigh_truncated(x: Any, cutoff: float = -1.0, cutoff_mode: Any = 2, max_bond: int = -1, absorb: Any = 0,
                   renorm: int = 0, positive: Any = 0, shift: Any = False) -> tuple:
    """quimb's ``eigh_truncated`` (method "eigh", a Hermitian x), with its diagonal ``shift``: the
    factors of the same truncation, by the SVD. Where the values come back on their own (absorb
    None, "svals"), they are the eigenvalues, signed, as quimb's (with Vᴴ = Uᴴ)."""
    shift = {False: 0.0, True: -1.0}.get(shift, shift)
    if shift:
        trace = fn.sum(mp.diagonal(x))
        scale = np.finfo(np.dtype(fn.asarray(x).dtype)).eps if shift < 0 else shift
        x = x + (trace * scale) * np.eye(x.shape[-1])
    if _code("eigh_truncated", absorb, ABSORB_CODES) in SPLIT_ABSORB or absorb is None:
        return _truncated("eigh_truncated", x, cutoff, cutoff_mode, max_bond, absorb, renorm, None, signed=True)
    w, v = linalg.eigh(x)
    order = np.argsort(-np.abs(np.asarray(value_of(w))), kind="stable")
    w, v = w[order], v[:, order]
    k = kept_count(np.abs(np.asarray(value_of(w))), cutoff, _code("eigh_truncated", cutoff_mode, CUTOFF_MODES),
                   int(max_bond), int(renorm or 0))
    if k < w.shape[0]:
        scale = _renormalised(fn.abs(w), k, int(renorm)) if renorm else 1.0
        w, v = w[:k] * scale, v[:, :k]
    return _absorbed(v, w, fn.conj(mp.swapaxes(v, -1, -2)), _code("eigh_truncated", absorb, ABSORB_CODES))


#: A pivot of R below this, relative to the largest, makes the QR's later columns no function of x:
#: qr_stabilized then splits by the SVD instead (exact for a network that contracts the factors again).
PIVOT_FLOOR = 1e-6


def qr_stabilized(x: Any, absorb: Any = 1, stabilized: bool = True, **kwargs: Any) -> tuple:
    """quimb's ``qr_stabilized`` (canonisation: Q with R's diagonal real ≥ 0, and its LQ form for
    absorb "left"). Where R has a (near) zero pivot, Q's later columns have no derivative, and the
    factors come from ``split`` instead: an isometry and the rest, exact for a network that
    contracts them again; elsewhere they are the QR's, whose rules are exact there."""
    absorb = _code("qr_stabilized", absorb, ABSORB_CODES)
    if absorb not in (1, -1, 10, 11, -10, -11):
        raise InvalidArgument("qr_stabilized", "absorb 'right', 'left' or one of their one-sided forms", repr(absorb))
    transposed = absorb in (-1, -10, -11)
    y = mp.swapaxes(x, -2, -1) if transposed else x
    q, r = linalg.qr(y)
    pivots = np.abs(np.diagonal(np.asarray(value_of(r)), axis1=-2, axis2=-1))
    if y.ndim == 2 and pivots.size and pivots.min() <= PIVOT_FLOOR * pivots.max():
        s = session("qr_stabilized")
        q, r = (wrap(t) for t in s.split(lift(s, y), absorb="right"))
    if transposed:
        q, r = mp.swapaxes(r, -2, -1), mp.swapaxes(q, -2, -1)
        return {-1: (q, None, r), -10: (q, None, None), -11: (None, None, r)}[absorb]
    return {1: (q, None, r), 10: (q, None, None), 11: (None, None, r)}[absorb]


def register(autoray: Any, backend: str) -> None:
    """Make quimb's decompositions of ``backend``'s arrays these (autoray finds them by name)."""
    for f in (svd_truncated, svd_via_eig_truncated, eigh_truncated, qr_stabilized):
        autoray.register_function(backend, f.__name__, f)
