"""Where a spectral rule meets repeated values, what it can tell from what it sees, and the warning
it gives (docs/spectral.md#degenerate).

A VJP sees the cotangents: a loss that depends on the basis chosen inside a block of repeated
values (a cut inside a multiplet, one vector of a pair) sends cotangents that change under a
rotation of that basis, and has no derivative there. A JVP sees the direction: one that splits
a repeated nonzero value meets the part of dA the broadened rule drops. Either is told by a DegenerateDerivativeWarning naming the op and the values. The
checks read the values and run only where some are repeated; they cost a few |B| × |B| products.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

from ..errors import DegenerateDerivativeWarning
from ..structure import Embedded, Product
from ..tape import EagerTensor

#: Values closer than REPEATED · ε times the spectrum's scale are repeated: LAPACK's equal values
#: differ by rounding (~1e-15 of the scale), where the broadened 1/δ is near zero.
REPEATED = 10.0
#: Values within NOISE_FLOOR · REPEATED · ε of zero (relative to the scale) are rounding, not a multiplet.
NOISE_FLOOR = 100.0
#: A cotangent's (or tangent's) part that the rule cannot determine, relative to its size, above
#: which the rule warns (the rest is rounding).
NOTICEABLE = 1e-8


def warn(op: str, what: str) -> None:
    """The warning, naming ``op`` and pointing at the page that says what to do."""
    warnings.warn(f"{op}: {what} (docs/spectral.md#degenerate)", DegenerateDerivativeWarning, stacklevel=4)


def named(values) -> str:
    """A few values, for a message."""
    shown = ", ".join(f"{v:.6g}" for v in values[:6])
    return shown + (", …" if len(values) > 6 else "")


def eps_scale(values: np.ndarray) -> float:
    """The scale ε is relative to: max |value| (0 for an empty spectrum)."""
    return float(np.max(np.abs(values), initial=0.0))


def repeated_blocks(values: np.ndarray, eps: float) -> list[np.ndarray]:
    """Index arrays of the runs of sorted ``values`` (descending or ascending) that are repeated:
    neighbours within REPEATED · ε · max |value|. Zero singular values form one run too."""
    if values.size < 2:
        return []
    tie = REPEATED * eps * eps_scale(values)
    close = np.abs(np.diff(values)) <= tie
    blocks, start = [], None
    for i, c in enumerate(close):
        if c and start is None:
            start = i
        if not c and start is not None:
            blocks.append(np.arange(start, i + 1))
            start = None
    if start is not None:
        blocks.append(np.arange(start, values.size))
    return blocks


def _numpy(t):
    """A value given to a check (an array, or a structured value of arrays) as NumPy data."""
    if t is None:
        return None
    if isinstance(t, Embedded):
        out = np.zeros(t.shape, t.dtype)
        block = _numpy(t.block)
        out[tuple(slice(st, st + n * sd, sd) for st, n, sd in zip(t.starts, block.shape, t.strides))] = block
        return out
    if isinstance(t, Product):
        return _numpy(t.left) @ _numpy(t.right)
    return np.asarray(t.value().to_numpy() if isinstance(t, EagerTensor) else t)


def on_values(check):
    """``check(*args)`` on the values of the tensors among its arguments (structured ones, and lists
    of them, too). While a program is recorded, through ``runtime.observe``: its replay runs the
    check again, which warns wherever the new values call for it."""

    def observed(*args):
        first = next((a for a in args if isinstance(a, EagerTensor)), None)
        if first is None or first.runtime.recorder is None:
            return check(*args)
        tensors: list = []
        template = _template(args, tensors)
        return first.runtime.observe(functools.partial(_run_on_arrays, check, template), *tensors)

    return functools.wraps(check)(observed)


def _template(value, tensors: list):
    """value with each tensor replaced by its position in ``tensors`` (a static description)."""
    if isinstance(value, EagerTensor):
        tensors.append(value)
        return ("tensor", len(tensors) - 1)
    if isinstance(value, Product):
        return ("product", _template(value.left, tensors), _template(value.right, tensors))
    if isinstance(value, Embedded):
        return ("embedded", _template(value.block, tensors), value.shape, value.starts, value.strides)
    if isinstance(value, (list, tuple)):
        return ("sequence", type(value), tuple(_template(v, tensors) for v in value))
    return ("value", value)


def _rebuilt(template, arrays):
    kind = template[0]
    if kind == "tensor":
        return arrays[template[1]]
    if kind == "product":
        return Product(_rebuilt(template[1], arrays), _rebuilt(template[2], arrays))
    if kind == "embedded":
        return Embedded(_rebuilt(template[1], arrays), *template[2:])
    if kind == "sequence":
        return template[1](_rebuilt(t, arrays) for t in template[2])
    return template[1]


def _run_on_arrays(check, template, *arrays) -> None:
    check(*_rebuilt(template, arrays))


def _skew_off_diagonal(x: np.ndarray) -> float:
    """‖(X − Xᴴ)/2‖ off the diagonal."""
    skew = (x - x.conj().T) / 2
    return float(np.linalg.norm(skew - np.diag(np.diag(skew))))


def check_basis_free(op: str, values: np.ndarray, blocks: list, pairs: list) -> None:
    """Warn where a cotangent is not invariant under rotations inside a block of repeated values.
    ``pairs``: (basis, its cotangent) for each factor that rotates with the block (U and V for the
    SVD, V for eigh); the invariance is skew(Σ basisᴴ·cotangent) = 0 inside the block."""
    scale = sum(float(np.linalg.norm(c)) * float(np.linalg.norm(b)) for b, c in pairs) or 1.0
    for block in blocks:
        inside = sum(b[:, block].conj().T @ c[:, block] for b, c in pairs)
        if _skew_off_diagonal(inside) > NOTICEABLE * scale:
            warn(op, f"the loss depends on the basis chosen inside repeated values ({named(values[block])}), e.g. "
                     "by a cut inside the multiplet: it has no derivative there; cut at a gap, or keep or drop the "
                     "whole multiplet")
            return


def check_keeps_degeneracy(op: str, values: np.ndarray, blocks: list, middle: np.ndarray, eps: float,
                           within_split: bool = False) -> None:
    """Warn where a direction splits repeated nonzero values: ``middle`` is Uᴴ dA V (Vᴴ dA V for
    eigh), whose Hermitian part inside a block must be a multiple of the identity. Blocks that
    reach down to the noise floor are left out: their vectors span a near-null space that any
    direction "splits" by rounding, and that truncations discard (split is exact there for
    contracted factors)."""
    scale = float(np.linalg.norm(middle)) or 1.0
    floor = NOISE_FLOOR * REPEATED * eps * eps_scale(values)
    for block in blocks:
        if np.min(np.abs(values[block])) <= floor:
            continue
        inside = middle[np.ix_(block, block)]
        hermitian = (inside + inside.conj().T) / 2
        if float(np.linalg.norm(hermitian - np.diag(np.diag(hermitian)))) > NOTICEABLE * scale:
            _splitting(op, f"splits repeated values ({named(values[block])})", within_split)
            return


def _splitting(op: str, what: str, within_split: bool) -> None:
    if within_split:
        warn("split", f"the direction {what}: split's first derivatives are exact there, but derivatives of its "
                      "derivatives (forward over reverse) get only the part of the direction that keeps them")
    else:
        warn(op, f"the direction {what}: the vectors' tangents have no value there, and the rule drops that part; "
                 "for factors a network contracts again use split, for a function of the matrix make it one op")


@on_values
def svd_cotangents(op: str, u, sv, vt, ub, vb, kk: int, eps: float) -> None:
    """The SVD's VJP check: U and V rotate together inside a block. ``ub``, ``vb``: the cotangents'
    leading blocks (columns of u, rows of vt before ``kk``; zero beyond), or None. Blocks wholly
    beyond kk get no cotangent, so only those that start before it are read."""
    values = _numpy(sv)
    blocks = [b for b in repeated_blocks(values, eps) if b[0] < kk]
    if not blocks:
        return
    reach = int(max(b[-1] for b in blocks)) + 1  # the columns the blocks reach

    def padded(c):  # the cotangent's columns up to ``reach``, zero beyond its own
        out = np.zeros((c.shape[0], reach), c.dtype)
        out[:, :min(c.shape[1], reach)] = c[:, :reach]
        return out

    pairs = [] if ub is None else [(_numpy(u)[:, :reach], padded(_numpy(ub)))]
    if vb is not None:
        pairs.append((_numpy(vt)[:reach].conj().T, padded(_numpy(vb).conj().T)))
    check_basis_free(op, values, blocks, pairs)


@on_values
def svd_tangent(op: str, u, sv, vt, da, eps: float, within_split: bool = False) -> None:
    """The SVD's JVP check, for the direction da (dense). ``within_split``: the SVD is split's, whose
    own rules are exact there; what this JVP drops reaches only derivatives of split's rules."""
    values = _numpy(sv)
    blocks = repeated_blocks(values, eps)
    if blocks:
        middle = _numpy(u).conj().T @ _numpy(da) @ _numpy(vt).conj().T
        check_keeps_degeneracy(op, values, blocks, middle, eps, within_split=within_split)


@on_values
def eigh_cotangents(op: str, w, v, vb, eps: float) -> None:
    """eigh's VJP check: V rotates inside a block."""
    if vb is None:
        return
    values = _numpy(w)
    blocks = repeated_blocks(values, eps)
    if blocks:
        check_basis_free(op, values, blocks, [(_numpy(v), _numpy(vb))])


@on_values
def eigh_tangent(op: str, w, v, da, eps: float) -> None:
    """eigh's JVP check, for the direction da (dense)."""
    values = _numpy(w)
    blocks = repeated_blocks(values, eps)
    if blocks:
        vv, d = _numpy(v), _numpy(da)
        check_keeps_degeneracy(op, values, blocks, vv.conj().T @ ((d + d.conj().T) / 2) @ vv, eps)


@on_values
def qr_pivots(r, eps: float, parts) -> None:
    """QR's check: at a zero pivot R_jj (within REPEATED · ε of max |R_jj|) the later columns of Q and
    rows of R have no derivative; warn when ``parts`` (a tangent or the cotangents, dense or None)
    are not all zero."""
    pivots = np.abs(np.diag(_numpy(r)))
    if pivots.size == 0 or pivots.min() > REPEATED * eps * pivots.max():
        return
    if any(p is not None and np.any(_numpy(p)) for p in parts):
        zero = int(np.argmax(pivots <= REPEATED * eps * pivots.max()))
        warn("qr", f"R has a zero pivot at column {zero} (rank below {pivots.size}): Q's later columns and R's later "
                   "rows have no derivative, and get finite values that are none; for factors a network contracts "
                   "again use split (quimb's canonisation by QR does, at such ranks)")
