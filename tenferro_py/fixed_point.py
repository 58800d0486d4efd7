"""Fixed points x* = f(x*, θ) and their derivatives by implicit differentiation.

CTMRG, VUMPS and power methods run a step x_{n+1} = f(x_n, θ) until it stops moving; a
loss L = ℓ(x*, θ) of the fixed point then depends on θ through x*(θ), which solves
x* = f(x*, θ). Differentiating that equation, rather than the iterations, gives:

* reverse mode: (I − ∂f/∂x)ᴴ λ = ∂ℓ/∂x, then dL/dθ = ∂ℓ/∂θ + (∂f/∂θ)ᴴ λ;
* forward mode: (I − ∂f/∂x) ẋ = ∂f/∂θ θ̇, then L̇ = ∂ℓ/∂x ẋ + ∂ℓ/∂θ θ̇;
* forward over reverse: differentiating the adjoint equation along (ẋ, θ̇) gives
  (I − ∂f/∂x)ᴴ λ̇ = a_x and H θ̇ = a_θ + (∂f/∂θ)ᴴ λ̇, where (a_x, a_θ) is the jvp along
  (ẋ, θ̇) of the pullbacks of ℓ (cotangent 1) and of f (cotangent λ, held fixed).

Every product with ∂f/∂x, its adjoint, ∂f/∂θ and the second-order terms is a jvp or vjp of
one recorded step at (x*, θ), so the solves (scipy's GMRES or BiCGStab, or the geometric
series λ ← b + (∂f/∂x)ᴴ λ) cost a step's pullback per iteration, and no graph of the
iterations is kept. The step may include a gauge fix (``gauge``), applied after each step,
which must make the iterates converge element by element: the derivative is that of the
gauge-fixed map, and a fixed point only up to a gauge has no derivative.

The state x is a tuple of tensors of one dtype; inside the derivatives it travels as one
column-major vector, so the solvers see a vector space. Norms, solves, cotangents and directions
are brought to unit scale by powers of two (linear_solve), so that the fixed point and its
derivatives are right at any scale of x, θ and the cotangents; what the floating-point range
cannot hold is an error.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple, Sequence

import numpy as np

from .engine import CpuEngine
from .errors import InvalidArgument, TenferroError
from .linear_solve import SOLVERS, power_of_two, relative_change, solve_shifted, times_power_of_two
from .ops.structural import SliceConfig
from .runtime import EagerRuntime
from .session import EagerSession
from .tape import EagerTensor
from .tensor import Tensor, is_real_number

State = tuple[EagerTensor, ...]
StepFn = Callable[[EagerSession, State, EagerTensor], Sequence[EagerTensor]]
GaugeFn = Callable[[EagerSession, State, State], Sequence[EagerTensor]]
ReadoutFn = Callable[[EagerSession, State, EagerTensor], EagerTensor]


class FixedPointError(TenferroError, ArithmeticError):
    """The iteration, or a linear solve of its derivative, did not converge."""


class _Flat:
    """How a tuple of tensors of given shapes maps to one column-major vector and back."""

    def __init__(self, shapes: Sequence[tuple[int, ...]], dtype: np.dtype):
        self.shapes = [tuple(shape) for shape in shapes]
        self.sizes = [math.prod(shape) for shape in self.shapes]
        self.dtype = dtype

    def pack(self, arrays: Sequence[np.ndarray]) -> np.ndarray:
        return np.concatenate([np.asarray(a, self.dtype).reshape(-1, order="F") for a in arrays])

    def unpack(self, vector: np.ndarray) -> tuple[np.ndarray, ...]:
        bounds = np.cumsum([0, *self.sizes])
        return tuple(vector[lo:hi].reshape(shape, order="F") for lo, hi, shape in zip(bounds, bounds[1:], self.shapes))

    def split(self, s: EagerSession, x: EagerTensor) -> State:
        """The session-op inverse of ``join``."""
        parts, start = [], 0
        for size, shape in zip(self.sizes, self.shapes):
            parts.append(s.reshape(s.slice(x, SliceConfig([start], [start + size])), shape))
            start += size
        return tuple(parts)

    def join(self, s: EagerSession, parts: Sequence[EagerTensor]) -> EagerTensor:
        return s.concatenate([s.reshape(p, (math.prod(p.shape),)) for p in parts], 0)


class FixedPoint:
    """The map x ↦ gauge(step(x, θ), x), iterated to its fixed point, and that point's derivatives.

    ``step(s, x, theta)`` takes and returns a tuple of tensors (same shapes and dtype) in session
    ops; ``gauge(s, new, old)``, optional, fixes the gauge of ``new`` (for example signs, against
    ``old``). The iteration stops when every tensor moved by at most ``tol`` relative to its norm,
    after at most ``maxiter`` steps. The linear solves of the derivatives use ``solver`` (one of
    SOLVERS) to a relative residual of ``solve_tol`` within ``solve_maxiter`` products.
    """

    def __init__(
        self, step: StepFn, gauge: GaugeFn | None = None, *, tol: float = 1e-12, maxiter: int = 1000,
        solver: str = "gmres", solve_tol: float = 1e-12, solve_maxiter: int = 1000,
    ):
        op = "FixedPoint"
        if not callable(step) or (gauge is not None and not callable(gauge)):
            raise InvalidArgument(op, "a callable step and gauge (or gauge=None)", f"{type(step).__name__}, "
                                  f"{type(gauge).__name__}")
        for name, value in (("tol", tol), ("solve_tol", solve_tol)):
            if not (is_real_number(value) and 0 < value < 1):
                raise InvalidArgument(op, f"{name} in (0, 1)", repr(value))
        for name, value in (("maxiter", maxiter), ("solve_maxiter", solve_maxiter)):
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                raise InvalidArgument(op, f"{name}: an int >= 1", repr(value))
        if solver not in SOLVERS:
            raise InvalidArgument(op, f"solver one of {', '.join(SOLVERS)}", repr(solver))
        self.step, self.gauge = step, gauge
        self.tol, self.maxiter = float(tol), maxiter
        self.solver, self.solve_tol, self.solve_maxiter = solver, float(solve_tol), solve_maxiter

    def apply(self, s: EagerSession, x: State, theta: EagerTensor) -> State:
        """One step of the gauge-fixed map: the function whose fixed point is differentiated."""
        out = self.step(s, x, theta)
        new = tuple(out) if isinstance(out, (tuple, list)) else ()
        if not new or not all(isinstance(n, EagerTensor) for n in new):
            raise InvalidArgument("FixedPoint.step", "a tuple of tensors", type(out).__name__)
        if len(new) != len(x) or any(n.shape != o.shape for n, o in zip(new, x)):
            raise InvalidArgument("FixedPoint.step", f"{len(x)} tensors of shapes {[list(o.shape) for o in x]}",
                                  f"shapes {[list(n.shape) for n in new]}")
        return tuple(self.gauge(s, new, x)) if self.gauge is not None else new

    def solve(
        self, theta: "Tensor | float", x0: Sequence["Tensor | np.ndarray"], *, engine: CpuEngine | None = None,
        runtime: EagerRuntime | None = None,
    ) -> "FixedPointSolution":
        """Iterate from ``x0`` to the fixed point at ``theta``; FixedPointError if it does not converge."""
        rt = runtime if runtime is not None else EagerRuntime()
        eng = engine if engine is not None else CpuEngine.serial()
        theta_t = _as_tensor("FixedPoint.solve", "theta", theta)
        arrays = [_as_tensor("FixedPoint.solve", "x0", x).to_numpy() for x in x0]
        if not arrays:
            raise InvalidArgument("FixedPoint.solve", "x0: at least one tensor", "an empty sequence")
        if not all(np.isfinite(a).all() for a in arrays):
            raise InvalidArgument("FixedPoint.solve", "x0: finite entries", "a non-finite one")
        dtype = np.result_type(*arrays)
        flat = _Flat([a.shape for a in arrays], dtype)
        residual, iterations = math.inf, 0
        with rt.no_grad(), eng.active():  # the engine's BLAS pin also covers the norms between steps
            theta_c = rt.constant_from(theta_t)
            x = tuple(rt.constant_from(Tensor.from_numpy(a.astype(dtype))) for a in arrays)
            while iterations < self.maxiter:
                new = rt.with_eager_session(eng, lambda s: self.apply(s, x, theta_c))
                iterations += 1
                arrays = [n.value().to_numpy() for n in new]
                if not all(np.isfinite(a).all() for a in arrays):
                    raise FixedPointError("FixedPoint.solve", "finite iterates",
                                          f"a non-finite one at step {iterations}")
                residual = max(relative_change(a, o.value().to_numpy()) for a, o in zip(arrays, x))
                x = new
                if residual <= self.tol:
                    break
        if not residual <= self.tol:
            raise FixedPointError("FixedPoint.solve", f"a change <= {self.tol:.0e} (relative) within "
                                  f"{self.maxiter} steps", f"{residual:.1e} after {iterations} steps")
        return FixedPointSolution(self, rt, eng, theta_t, flat, flat.pack([t.value().to_numpy() for t in x]),
                                  iterations, residual)


class _Linearisation(NamedTuple):
    """One step recorded at the fixed point: the flat state and θ as variables, the step's flat output."""

    x: EagerTensor
    theta: EagerTensor
    out: EagerTensor


class FixedPointSolution:
    """A converged fixed point ``x`` (a tuple of Tensors) at ``theta``, and its derivatives.

    ``iterations`` and ``residual`` say how it converged. The derivative methods record one
    step at (x, θ) on first use and reuse it.
    """

    def __init__(self, problem: FixedPoint, rt: EagerRuntime, eng: CpuEngine, theta: Tensor, flat: _Flat,
                 x_flat: np.ndarray, iterations: int, residual: float):
        self.problem, self._rt, self._eng, self.theta, self._flat = problem, rt, eng, theta, flat
        self._x_flat, self.iterations, self.residual = x_flat, iterations, residual
        self._lin: _Linearisation | None = None

    @property
    def x(self) -> tuple[Tensor, ...]:
        """The fixed point, one Tensor per tensor of the state."""
        return tuple(Tensor.from_numpy(a) for a in self._flat.unpack(self._x_flat))

    # --- the recorded step and the solves ------------------------------------------------

    def _linearisation(self) -> _Linearisation:
        """The recorded step, made on first use (recorded even when called inside ``no_grad``)."""
        if self._lin is None:
            rt, flat = self._rt, self._flat
            with rt.enable_grad():
                x = rt.variable_from(Tensor.from_numpy(self._x_flat))
                theta = rt.variable_from(self.theta)
                out = rt.with_eager_session(
                    self._eng, lambda s: flat.join(s, self.problem.apply(s, flat.split(s, x), theta))
                )
            self._lin = _Linearisation(x, theta, out)
        return self._lin

    def _readout(self, readout: ReadoutFn, x: EagerTensor, theta: EagerTensor) -> EagerTensor:
        """readout(x, θ) for the flat state x, recorded when x or θ is a variable; checked to be a scalar."""
        with self._rt.enable_grad():
            value = self._rt.with_eager_session(self._eng, lambda s: readout(s, self._flat.split(s, x), theta))
        if not isinstance(value, EagerTensor) or math.prod(value.shape) != 1:
            raise InvalidArgument("FixedPointSolution", "a readout that returns a scalar tensor",
                                  type(value).__name__ if not isinstance(value, EagerTensor) else
                                  f"shape {list(value.shape)}")
        return value

    def _vector(self, t: EagerTensor | None, like: EagerTensor) -> np.ndarray:
        return np.zeros(like.shape, like.dtype) if t is None else t.value().to_numpy()

    def _adjoint_step(self, v: np.ndarray) -> np.ndarray:
        """(∂f/∂x)ᴴ v: the step's pullback to x."""
        lin = self._linearisation()
        with self._rt.no_grad():
            return self._vector(self._rt.vjp_optional(self._eng, lin.out, lin.x, Tensor.from_numpy(v)), lin.x)

    def _tangent_step(self, v: np.ndarray) -> np.ndarray:
        """(∂f/∂x) v: the step's jvp along x."""
        lin = self._linearisation()
        with self._rt.no_grad():
            return self._vector(self._rt.jvp_optional(self._eng, lin.out, lin.x, Tensor.from_numpy(v)), lin.out)

    def _solve(self, product: Callable[[np.ndarray], np.ndarray], b: np.ndarray, what: str) -> tuple[np.ndarray, int]:
        """(y, k) with y·2^k the solution of z − product(z) = b, by the problem's solver within
        ``solve_maxiter`` products, at every scale of b (linear_solve); FixedPointError if it fails.

        The engine stays active throughout, so its BLAS pin covers the solver's own vector
        operations too (with BLAS's threads, each of those small products costs a thread wake-up).
        """
        p = self.problem
        if not np.isfinite(b).all():
            raise FixedPointError("FixedPointSolution", f"a finite right-hand side of the {what} solve",
                                  "a non-finite one")
        with self._eng.active():
            found = solve_shifted(product, b, p.solver, p.solve_tol, p.solve_maxiter)
        if not found.residual <= 10 * p.solve_tol:  # a solver's own residual estimate may differ by rounding
            raise FixedPointError("FixedPointSolution", f"the {what} solve ({p.solver}) to reach a relative "
                                  f"residual of {p.solve_tol:.0e} within {p.solve_maxiter} products",
                                  f"{found.residual:.1e} after {found.products}")
        return found.y, found.exponent

    def _readout_pullback(self, readout: ReadoutFn) -> tuple[EagerTensor, np.ndarray, np.ndarray, list[EagerTensor]]:
        """(the recorded ℓ, ∂ℓ/∂x, ∂ℓ/∂θ, those of x and θ that ℓ depends on)."""
        rt, lin = self._rt, self._linearisation()
        value = self._readout(readout, lin.x, lin.theta)
        with rt.no_grad():
            one = Tensor.from_numpy(np.ones(value.shape, value.dtype))
            dx, dtheta = rt.vjp_optional(self._eng, value, [lin.x, lin.theta], one)
        reached = [w for w, d in ((lin.x, dx), (lin.theta, dtheta)) if d is not None]
        return value, self._vector(dx, lin.x), self._vector(dtheta, lin.theta), reached

    def _pull_theta(self, lam: np.ndarray) -> np.ndarray:
        """(∂f/∂θ)ᴴ λ."""
        lin = self._linearisation()
        with self._rt.no_grad():
            return self._vector(self._rt.vjp_optional(self._eng, lin.out, lin.theta, Tensor.from_numpy(lam)),
                                lin.theta)

    def _checked_direction(self, op: str, direction: "Tensor | float | None") -> tuple[np.ndarray, int]:
        """(θ̇·2^-k, k): the direction (default ones) at unit scale, and its power of two."""
        theta = self.theta.to_numpy()
        d = np.ones_like(theta) if direction is None else _as_tensor(op, "direction", direction).to_numpy()
        if d.shape != theta.shape:
            raise InvalidArgument(op, f"a direction of theta's shape {list(theta.shape)}", f"shape {list(d.shape)}")
        if not np.isfinite(d).all():
            raise InvalidArgument(op, "a finite direction", "a non-finite entry")
        k = power_of_two(d)
        return times_power_of_two(d.astype(theta.dtype), -k), k

    # --- the derivatives -----------------------------------------------------------------

    def vjp(self, x_bar: Sequence["Tensor | np.ndarray"]) -> Tensor:
        """θ̄ = (∂f/∂θ)ᴴ λ with (I − ∂f/∂x)ᴴ λ = x̄: the cotangent x̄ of x* pulled back to θ."""
        arrays = [_as_tensor("FixedPointSolution.vjp", "x_bar", x).to_numpy() for x in x_bar]
        shapes = [a.shape for a in arrays]
        if shapes != self._flat.shapes:
            raise InvalidArgument("FixedPointSolution.vjp", f"cotangents of the state's shapes "
                                  f"{[list(s) for s in self._flat.shapes]}", f"{[list(s) for s in shapes]}")
        bar = self._flat.pack(arrays)
        if not np.isfinite(bar).all():
            raise InvalidArgument("FixedPointSolution.vjp", "finite cotangents", "a non-finite entry")
        lam, k = self._solve(self._adjoint_step, bar, "adjoint")
        return Tensor.from_numpy(_finite("FixedPointSolution.vjp", "cotangent of theta",
                                         times_power_of_two(self._pull_theta(lam), k)))

    def jvp(self, direction: "Tensor | float | None" = None) -> tuple[Tensor, ...]:
        """ẋ with (I − ∂f/∂x) ẋ = ∂f/∂θ θ̇: the tangent of x* along θ̇ (default ones)."""
        theta_dot, k = self._checked_direction("jvp", direction)
        x_dot = _finite("FixedPointSolution.jvp", "tangent of x", times_power_of_two(self._x_dot(theta_dot), k))
        return tuple(Tensor.from_numpy(a) for a in self._flat.unpack(x_dot))

    def _x_dot(self, theta_dot: np.ndarray) -> np.ndarray:
        """ẋ along θ̇ (at unit scale: ẋ is then at the scale of dx*/dθ)."""
        rt, lin = self._rt, self._linearisation()
        with rt.no_grad():
            b = self._vector(rt.jvp_optional(self._eng, lin.out, lin.theta, Tensor.from_numpy(theta_dot)), lin.out)
        y, k = self._solve(self._tangent_step, b, "tangent")
        return times_power_of_two(y, k)

    def value(self, readout: ReadoutFn) -> float:
        """ℓ(x*, θ), with nothing recorded."""
        rt = self._rt
        return self._readout(readout, rt.constant_from(Tensor.from_numpy(self._x_flat)),
                             rt.constant_from(self.theta)).item()

    def value_and_grad(self, readout: ReadoutFn) -> tuple[float, Tensor]:
        """(L, dL/dθ) for L = readout(x*, θ), by reverse mode through the fixed point."""
        value, dx, dtheta, _ = self._readout_pullback(readout)
        lam, k = self._solve(self._adjoint_step, dx, "adjoint")
        grad = dtheta + times_power_of_two(self._pull_theta(lam), k)
        _finite("FixedPointSolution.value_and_grad", "gradient", grad)
        return value.item(), Tensor.from_numpy(grad)

    def value_and_jvp(self, readout: ReadoutFn, direction: "Tensor | float | None" = None) -> tuple[float, float]:
        """(L, dL/dθ · θ̇) by forward mode through the fixed point (θ̇ = ``direction``, default ones)."""
        rt, lin = self._rt, self._linearisation()
        theta_dot, k = self._checked_direction("value_and_jvp", direction)
        x_dot = self._x_dot(theta_dot)
        value = self._readout(readout, lin.x, lin.theta)
        with rt.no_grad():
            tangent = rt.jvp_optional(self._eng, value, [lin.x, lin.theta],
                                      [Tensor.from_numpy(x_dot), Tensor.from_numpy(theta_dot)])
        slope = np.zeros(()) if tangent is None else times_power_of_two(tangent.value().to_numpy(), k)
        return value.item(), _finite("FixedPointSolution.value_and_jvp", "slope", slope).item()

    def value_grad_and_curvature(
        self, readout: ReadoutFn, direction: "Tensor | float | None" = None
    ) -> tuple[float, Tensor, Tensor]:
        """(L, dL/dθ, H θ̇) by forward over reverse through the fixed point (θ̇ default ones;
        d²L/dθ² for a scalar θ)."""
        rt, lin, eng = self._rt, self._linearisation(), self._eng
        theta_dot, k_dot = self._checked_direction("value_grad_and_curvature", direction)  # θ̇ = theta_dot·2^k_dot
        value, dx, dtheta, readout_reaches = self._readout_pullback(readout)
        lam, k_lam = self._solve(self._adjoint_step, dx, "adjoint")  # λ = lam·2^k_lam
        with rt.no_grad():  # (∂f/∂θ)ᴴ λ, and which of x and θ the step depends on
            pulled = rt.vjp_optional(eng, lin.out, [lin.x, lin.theta], Tensor.from_numpy(lam))
        step_reaches = [w for w, p in zip((lin.x, lin.theta), pulled) if p is not None]
        grad = dtheta + times_power_of_two(self._vector(pulled[1], lin.theta), k_lam)
        x_dot = self._x_dot(theta_dot)
        tangent_of = {id(lin.x): Tensor.from_numpy(x_dot), id(lin.theta): Tensor.from_numpy(theta_dot)}
        second = {id(lin.x): np.zeros_like(dx), id(lin.theta): np.zeros_like(dtheta)}
        with rt.no_grad():
            for out, cot, wrt, k in ((value, np.ones(value.shape, value.dtype), readout_reaches, k_dot),
                                     (lin.out, lam, step_reaches, k_dot + k_lam)):  # bilinear in cot and tangent
                if wrt:
                    _, dots = rt.vjp_jvp(eng, out, wrt, Tensor.from_numpy(cot), [tangent_of[id(w)] for w in wrt], None)
                    for w, dot in zip(wrt, dots):
                        second[id(w)] = second[id(w)] + times_power_of_two(dot.value().to_numpy(), k)
        lam_dot, k = self._solve(self._adjoint_step, second[id(lin.x)], "adjoint")
        curvature = second[id(lin.theta)] + times_power_of_two(self._pull_theta(lam_dot), k)
        op = "FixedPointSolution.value_grad_and_curvature"
        return (value.item(), Tensor.from_numpy(_finite(op, "gradient", grad)),
                Tensor.from_numpy(_finite(op, "curvature", curvature)))


def _finite(op: str, what: str, v: np.ndarray) -> np.ndarray:
    """v, checked finite: a derivative beyond the floating-point range is an error, not inf."""
    if not np.isfinite(v).all():
        raise FixedPointError(op, f"a finite {what}", "a non-finite one (beyond the floating-point range, "
                              "or not finite in the step's derivative)")
    return v


def _as_tensor(op: str, name: str, value: object) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, np.ndarray):
        return Tensor.from_numpy(value)
    if is_real_number(value):
        return Tensor.from_numpy(np.array(float(value)))
    raise InvalidArgument(op, f"{name}: a Tensor, a NumPy array or a real number", type(value).__name__)
