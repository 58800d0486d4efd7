"""check_grads: derivative rules against central differences, as HIPS autograd's.

``f(session, *xs) -> EagerTensor`` is differentiated at ``args`` along a random
direction v with a random output cotangent w:

* ``fwd``: jvp(v) against (f(x + hv) − f(x − hv)) / 2h;
* ``rev``: ⟨vjp(w), v⟩ against ⟨w, that difference⟩;
* both: the dot-product test ⟨vjp(w), v⟩ = ⟨w, jvp(v)⟩, to rounding;
* order 2: the same checks of x ↦ ⟨vjp(w)(x), v⟩ (forward- and reverse-over-reverse)
  and of x ↦ ⟨w, jvp(v)(x)⟩ (over forward), and so on for higher orders.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .engine import CpuEngine
from .ad_context import AdContext
from .runtime import EagerRuntime
from .session import EagerSession
from .tape import EagerTensor
from .tensor import Tensor

Fn = Callable[..., EagerTensor]


def _inner(s: EagerSession, xs: Sequence[EagerTensor | None], ys: Sequence[np.ndarray]) -> EagerTensor:
    """Σ_i Re⟨xs[i], ys[i]⟩ (the real inner product Re Σ conj(x)·y) as a differentiable real scalar;
    None stands for zero (a derivative that does not reach)."""
    total = None
    for x, y in zip(xs, ys):
        if x is None:
            continue
        term = s.reduce_sum(s.mul(s.conj(x), s.constant_from(Tensor(np.array(y, dtype=x.dtype)))))
        term = s.real(term) if x.dtype.kind == "c" else term
        total = term if total is None else s.add(total, term)
    return total if total is not None else s.constant_from(Tensor(np.array(0.0)))


def _real_dot(a: np.ndarray, b: np.ndarray) -> float:
    """Re Σ conj(a)·b: the inner product under which VJPs are transposes of JVPs."""
    return float(np.real(np.vdot(a, b)))


def _array(x: EagerTensor | None, shape: tuple[int, ...]) -> np.ndarray:
    """The value of a transform's result; None (wrt does not reach: a linear f's higher order) is zero."""
    return np.zeros(shape) if x is None else x.value().to_numpy()


def _close(what: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float, order: int) -> None:
    err = float(np.max(np.abs(got - want))) if np.size(want) else 0.0
    scale = float(np.max(np.abs(want))) if np.size(want) else 0.0
    tol = atol + rtol * scale
    if not err <= tol:  # also fails on NaN
        raise AssertionError(
            f"check_grads (order {order}): {what} differs by {err:.3e} (tolerance {tol:.3e}, scale {scale:.3e})"
        )


def check_grads(
    f: Fn,
    args: Sequence[object],
    modes: Sequence[str] = ("fwd", "rev"),
    order: int = 2,
    *,
    h: float = 1e-6,
    rtol: float = 1e-6,
    atol: float = 1e-8,
    seed: int = 0,
    context: AdContext | None = None,
) -> None:
    """Check f's JVP and VJP rules at ``args`` (arrays or Tensors) up to ``order``.

    Real arguments are taken in float64, complex ones in complex128; with a complex
    argument every check runs twice, along a real and along an imaginary direction.
    Raises AssertionError naming the failed check and the measured error.
    """
    if not set(modes) <= {"fwd", "rev"} or not modes:
        raise ValueError(f"check_grads: expected modes among 'fwd', 'rev', got {modes!r}")
    arrays = [np.asarray(a) for a in args]
    arrays = [np.array(a, dtype=np.complex128 if np.iscomplexobj(a) else np.float64) for a in arrays]
    rng = np.random.default_rng(seed)
    for part in (1.0, 1j) if any(a.dtype.kind == "c" for a in arrays) else (1.0,):
        _check(f, arrays, tuple(modes), order, h, rtol, atol, rng, context, 1, part)


def _random(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype, part: complex = 1.0) -> np.ndarray:
    """A normal random array of ``dtype``: real, or ``part`` (1 or i) times a real one when complex."""
    x = rng.standard_normal(shape)
    return (part * x).astype(dtype) if dtype.kind == "c" else x


def _check(f, arrays, modes, order, h, rtol, atol, rng, context, level, part) -> None:
    rt = EagerRuntime(context)
    eng = CpuEngine.serial()

    def value(points):
        xs = [rt.variable_from(Tensor(np.array(p))) for p in points]
        return rt.with_eager_session(eng, lambda s: f(s, *xs)).value().to_numpy()

    xs = [rt.variable_from(Tensor(np.array(a))) for a in arrays]
    y = rt.with_eager_session(eng, lambda s: f(s, *xs))
    v = [_random(rng, a.shape, a.dtype, part) for a in arrays]
    w = _random(rng, y.shape, y.dtype)
    if y.dtype.kind == "c":
        w = w + 1j * rng.standard_normal(y.shape)
    fd = (value([a + h * d for a, d in zip(arrays, v)]) - value([a - h * d for a, d in zip(arrays, v)])) / (2 * h)
    # Rounding in the difference grows with |f| / h: the absolute tolerance scales with |f|.
    scale = max(1.0, float(np.max(np.abs(y.value().to_numpy()))) if y.value().size else 0.0)
    if "fwd" in modes:
        jv = _array(rt.jvp_optional(eng, y, xs, [Tensor(d) for d in v]), y.shape)
        _close("jvp vs central difference", jv, fd, rtol, atol * scale, level)
    if "rev" in modes:
        gs = rt.vjp_optional(eng, y, xs, Tensor(w))
        vjp_v = sum(_real_dot(_array(g, d.shape), d) for g, d in zip(gs, v))
        _close("<vjp(w), v> vs <w, central difference>", np.array(vjp_v), np.array(_real_dot(w, fd)), rtol,
               atol * scale, level)
    if "fwd" in modes and "rev" in modes:
        _close("dot-product test <vjp(w), v> vs <w, jvp(v)>", np.array(vjp_v), np.array(_real_dot(w, jv)), 1e-10,
               1e-12, level)
    if order <= 1:
        return

    def over_reverse(s, *ys):
        return _inner(s, s.runtime.vjp_optional(s.engine, f(s, *ys), list(ys), Tensor(w)), v)

    def over_forward(s, *ys):
        return _inner(s, [s.runtime.jvp_optional(s.engine, f(s, *ys), list(ys), [Tensor(d) for d in v])], [w])

    for g, mode in ((over_reverse, "rev"), (over_forward, "fwd")):
        if mode in modes:
            _check(g, arrays, modes, order - 1, h, rtol, atol, rng, context, level + 1, part)
