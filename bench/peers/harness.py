"""The machinery every ported suite shares: a case, its outcome, and the checks a case makes.

A case is a name and a function that raises to say what went wrong; ``run`` sorts what it
raises into the outcome categories of the report:

* passed;
* wrong value (``WrongValue``: our value against the peer's or NumPy's, beyond the tolerance);
* wrong derivative (``WrongDerivative``, or check_grads' AssertionError: our JVP/VJP against
  central differences, or against the peer's own AD along the same direction);
* refused (documented): a TenferroError the README or the op's docstring names for this input
  (``DOCUMENTED``: e.g. eig's eigenvector derivative at a repeated eigenvalue); not a pass;
* missing function: tnp has no such function or option (``Missing``, an AttributeError of
  tnp, or a documented refusal of an option);
* library error: anything else our library raised (a TenferroError not documented for the
  case, or a raw Python error): what the issue says must not happen;
* not ported: the peer's case tests what has no counterpart here (``NotPorted``).
"""

from __future__ import annotations

import re
import traceback
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

import tenferro_py.numpy as tnp
from tenferro_py.errors import TenferroError

PASSED, WRONG_VALUE, WRONG_DERIVATIVE = "passed", "wrong value", "wrong derivative"
REFUSED, MISSING, LIBRARY_ERROR, NOT_PORTED = "refused (documented)", "missing function", "library error", "not ported"
CATEGORIES = (PASSED, WRONG_VALUE, WRONG_DERIVATIVE, LIBRARY_ERROR, MISSING, REFUSED, NOT_PORTED)
FAILURES = (WRONG_VALUE, WRONG_DERIVATIVE, LIBRARY_ERROR)


class WrongValue(Exception):
    pass


class WrongDerivative(Exception):
    pass


class Missing(Exception):
    pass


class NotPorted(Exception):
    pass


#: TenferroErrors that are documented answers, not failures: (op, error class name, message
#: pattern, category, where it is documented). A case that meets one is "refused (documented)"
#: (or "missing function" for an option tnp does not implement).
DOCUMENTED = [
    ("*", "LinalgError", r"finite entries", REFUSED,
     "README (Errors): a LinalgError where LAPACK would meet inf or NaN (peers return NaN)"),
    ("eig", "LinalgError", r"eigenvalues apart where eigenvectors are differentiated", REFUSED,
     "README (linalg list: eig) and tenferro_py/linalg/eig.py: no eigenvector derivative at a repeated eigenvalue"),
    ("eig", "LinalgError", r"equal cotangents on eigenvalues equal to rounding", REFUSED,
     "tenferro_py/linalg/eig.py: only symmetric functions of tied eigenvalues differentiate"),
    ("eig", "LinalgError", r"a diagonalisable matrix for a derivative", REFUSED,
     "README (linalg list: eig): defective x has no derivative"),
    ("slogdet", "LinalgError", r"nonsingular matrix", REFUSED,
     "README (det, slogdet): the derivative of log|det| at a singular matrix is infinite"),
    ("det", "LinalgError", r"nonsingular matrix", REFUSED,
     "README (det): det's second derivative at a singular n >= 3 matrix"),
    ("lstsq", "LinalgError", r"rank", REFUSED,
     "README (lstsq): below full rank, the derivative in a is refused"),
    ("svd", "Unsupported", r"full_matrices=False", REFUSED,
     "README (refusals): full_matrices=True of a rectangular matrix has no derivative through u, vh"),
    ("cholesky", "LinalgError", r"positive-definite", REFUSED,
     "README (cholesky): a matrix that is not positive definite is a LinalgError"),
    ("sqrtm", "LinalgError", r"", REFUSED, "tnp.scipy.linalg docstring: sqrtm of a Hermitian PSD matrix"),
    ("logm", "LinalgError", r"", REFUSED, "tnp.scipy.linalg docstring: logm of a Hermitian PD matrix"),
    ("sqrtm", "InvalidArgument", r"a Hermitian matrix", REFUSED,
     "tnp.scipy.linalg docstring: sqrtm/logm take Hermitian matrices (derivatives of Hermitian ones)"),
    ("logm", "InvalidArgument", r"a Hermitian matrix", REFUSED,
     "tnp.scipy.linalg docstring: sqrtm/logm take Hermitian matrices (derivatives of Hermitian ones)"),
    ("inv", "LinalgError", r"", REFUSED, "README (solve, inv): a singular matrix is a LinalgError"),
    ("solve", "LinalgError", r"", REFUSED, "README (solve, inv): a singular matrix is a LinalgError"),
    ("matrix_power", "LinalgError", r"", REFUSED, "README (solve, inv): inverse of a singular matrix"),
    ("solve", "ShapeMismatch", r"equal leading \(batch\) axes", MISSING,
     "README (solve): other broadcasts of a and b are refused"),
    ("norm", "ShapeMismatch", r"at least one row and column for ord -?2", REFUSED,
     "README (norm): ±2 of an empty matrix is a ShapeMismatch (NumPy 2.4, torch and JAX give 0 for ord 2)"),
    ("norm", "ShapeMismatch", r"the least of none", REFUSED,
     "README (norm): −1, −∞ where there are no sums (NumPy raises too)"),
    ("qr", "InvalidArgument", r"mode='reduced'", MISSING, "tnp.linalg.qr: modes 'reduced', 'complete', 'r' (not 'raw')"),
    ("qr", "Unsupported", r"mode='reduced' to differentiate", REFUSED,
     "docs/linalg.md (qr): the complete Q's extra columns of a tall matrix have no derivative"),
    ("*", "LinalgError", r"a nonsingular triangular matrix", REFUSED,
     "docs/linalg.md (triangular solves, LU): a zero pivot is a LinalgError"),
    ("polar", "LinalgError", r"full rank", REFUSED, "docs/linalg.md (polar): no derivative at a rank-deficient a"),
    ("cond", "LinalgError", r"nonsingular", REFUSED, "docs/linalg.md (cond): no derivative where cond is inf"),
    ("lstsq", "ShapeMismatch", r"a matrix a \(rank 2\)", MISSING,
     "README (linalg list): lstsq is NumPy's, which takes matrices, not stacks"),
    ("norm", "InvalidArgument", r"ord", MISSING, "tnp.linalg.norm: the orders NumPy has for vectors and matrices"),
    ("sum", "InvalidArgument", r"initial|where", MISSING, "README (refusals): initial= and where= are refused"),
]


def documented(err: TenferroError) -> tuple[str, str] | None:
    """(category, where documented) if err is a documented answer, else None."""
    for op, kind, pattern, category, where in DOCUMENTED:
        if op in ("*", err.op) and type(err).__name__ == kind and re.search(pattern, str(err)):
            return category, where
    return None


@dataclass
class Case:
    suite: str
    name: str
    run: Callable[[], None]


@dataclass
class Outcome:
    case: Case
    category: str
    detail: str = ""
    seconds: float = 0.0


def outcome_of(case: Case) -> tuple[str, str]:
    """(category, detail) of running the case; the detail on one line."""
    category, detail = _outcome(case)
    return category, " ".join(detail.split())[:400]


def _outcome(case: Case) -> tuple[str, str]:
    try:
        case.run()
        return PASSED, ""
    except WrongValue as err:
        return WRONG_VALUE, str(err)
    except (WrongDerivative, AssertionError) as err:
        return WRONG_DERIVATIVE, str(err).strip().splitlines()[0] if str(err).strip() else "AssertionError"
    except Missing as err:
        return MISSING, str(err)
    except NotPorted as err:
        return NOT_PORTED, str(err)
    except TenferroError as err:
        known = documented(err)
        if known is not None:
            return known[0], f"{type(err).__name__}: {err} [{known[1]}]"
        return LIBRARY_ERROR, f"{type(err).__name__}: {err}"
    except AttributeError as err:
        if "tenferro_py" in str(err) or "'ndarray' object" in str(err):
            return MISSING, str(err)
        return LIBRARY_ERROR, _raw(err)
    except TypeError as err:
        inside = any("tenferro_py" in f.filename for f in traceback.extract_tb(err.__traceback__))
        if "unexpected keyword argument" in str(err) and not inside:
            return MISSING, f"an option tnp does not take: {err}"
        return LIBRARY_ERROR, _raw(err)
    except Exception as err:  # noqa: BLE001 (every other error is a finding)
        return LIBRARY_ERROR, _raw(err)


def _raw(err: Exception) -> str:
    """A raw error with the innermost frame of tenferro_py it came from."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if "tenferro_py" in f.filename]
    where = f" at {frames[-1].filename.split('tenferro_py')[-1]}:{frames[-1].lineno}" if frames else ""
    return f"raw {type(err).__name__}: {str(err)[:200]}{where}"


# --- inputs --------------------------------------------------------------------------------------


def rng_for(name: str) -> np.random.RandomState:
    """A generator seeded by the case's name: every run draws the same inputs."""
    return np.random.RandomState(zlib.crc32(name.encode()))


def draw(rng: np.random.RandomState, shape: Sequence[int], dtype: Any, kind: str = "default",
         low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """Random input as JAX's test utilities draw it (jtu.rand_<kind>), real and imaginary parts
    drawn alike for complex dtypes."""
    dtype = np.dtype(dtype)

    def real() -> np.ndarray:
        if kind == "default":
            return 3 * rng.randn(*shape)
        if kind == "small":
            return 1e-3 * rng.randn(*shape)
        if kind == "positive":
            return 2 * rng.rand(*shape) + 1
        if kind == "nonzero":
            x = 3 * rng.randn(*shape)
            return np.where(x == 0, 1.0, x)
        if kind == "not_small":
            x = 3 * rng.randn(*shape)
            return x + np.where(x > 0, 10.0, -10.0)
        if kind == "small_positive":
            return 2e-5 * rng.rand(*shape)
        if kind == "uniform":
            return rng.rand(*shape) * (high - low) + low
        raise ValueError(kind)

    x = real() + 1j * real() if dtype.kind == "c" else real()
    return np.asarray(x).astype(dtype)


def hermitian(a: np.ndarray) -> np.ndarray:
    return (a + np.conj(np.swapaxes(a, -1, -2))) / 2


# --- running our side ----------------------------------------------------------------------------


def to_numpy(out: Any) -> Any:
    """A result of tnp (an array, or a tuple of them) as NumPy data."""
    if isinstance(out, tuple):
        return tuple(to_numpy(o) for o in out)
    return np.asarray(out)


def ours(f: Callable[..., Any], *args: Any) -> Any:
    """f(*args) computed by tenferro_py: in a session, so tnp's functions run as session ops on
    the inputs (NumPy data becomes constants of the session)."""
    with tnp.session():
        return to_numpy(f(*args))


def joined(xp: Any, out: Any) -> Any:
    """A result (one array or a tuple) as one 1-D array: what check_grads and the jvp comparisons
    differentiate, as autograd's check_grads does with a tuple."""
    if isinstance(out, tuple):
        parts = [xp.ravel(o) for o in out]
        return xp.concatenate(parts) if parts else xp.zeros(0)
    return out


# --- checks ---------------------------------------------------------------------------------------

#: Relative tolerances of values, by dtype: rounding of the op at that precision, scaled by the
#: largest entry of the expected value.
VALUE_TOL = {np.dtype(np.float32): 1e-4, np.dtype(np.complex64): 1e-4,
             np.dtype(np.float64): 1e-10, np.dtype(np.complex128): 1e-10}


def value_tol(dtype: Any, factor: float = 1.0) -> float:
    return factor * VALUE_TOL.get(np.dtype(dtype), 1e-10)


def close(what: str, got: Any, want: Any, tol: float, error: type = WrongValue) -> None:
    """got against want: same shape, the same non-finite entries, the rest within tol·max(1, max|want|)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise error(f"{what}: shape {got.shape}, expected {want.shape}")
    if not got.size:
        return
    finite = np.isfinite(want)
    if not np.array_equal(np.isfinite(got), finite) or not np.array_equal(got[~finite], want[~finite], equal_nan=True):
        raise error(f"{what}: non-finite entries differ (got {got.ravel()[:4]}, expected {want.ravel()[:4]})")
    scale = max(1.0, float(np.max(np.abs(want[finite])))) if finite.any() else 1.0
    err = float(np.max(np.abs(got[finite] - want[finite]))) if finite.any() else 0.0
    if not err <= tol * scale:
        raise error(f"{what}: differs by {err:.2e} (tolerance {tol * scale:.1e})")


def grads(f: Callable[..., Any], args: Sequence[np.ndarray], order: int = 2, modes: Sequence[str] = ("fwd", "rev"),
          rtol: float = 1e-5, atol: float = 1e-7, h: float = 1e-6) -> None:
    """check_grads semantics (JAX's, autograd's): f's JVP and VJP against central differences along a
    random direction, both modes, to ``order``, real and complex; f may return a tuple."""
    try:
        tnp.check_grads(lambda *xs: joined(tnp, f(*xs)), [np.asarray(a) for a in args], modes=tuple(modes),
                        order=order, h=h, rtol=rtol, atol=atol)
    except AssertionError as err:
        raise WrongDerivative(str(err)) from None


def tangents_for(name: str, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    rng = rng_for(name + "/tangent")
    return [draw(rng, np.shape(a), np.asarray(a).dtype if np.iscomplexobj(a) else np.float64) for a in args]


def our_jvp(f: Callable[..., Any], args: Sequence[np.ndarray], tangents: Sequence[np.ndarray]) -> np.ndarray:
    args = [np.asarray(a, dtype=np.complex128 if np.iscomplexobj(a) else np.float64) for a in args]
    tangents = [np.asarray(t, dtype=a.dtype) for t, a in zip(tangents, args)]
    return np.asarray(tnp.jvp(lambda *xs: joined(tnp, f(*xs)), tuple(args), tuple(tangents))[1])


def same_jvp(name: str, f: Callable[..., Any], peer_jvp: Callable[..., Any], args: Sequence[np.ndarray],
             rtol: float = 1e-8, tangent: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
    """Our JVP of f against the peer's own (exact AD, both) along one seeded random direction
    (mapped by ``tangent``, e.g. to a Hermitian one where the peer's function reads a Hermitian
    matrix's triangle or Hermitian part, and so differs from ours off that subspace)."""
    ts = [t if tangent is None else tangent(t) for t in tangents_for(name, args)]
    close("jvp against the peer's", our_jvp(f, args, ts), np.asarray(peer_jvp(args, ts)), rtol, WrongDerivative)


def along(f: Callable[..., Any], a: np.ndarray, direction: np.ndarray, order: int = 2, h: float = 1e-5,
          rtol: float = 1e-6) -> None:
    """At a degenerate point, where a random direction would leave it: f's derivatives along
    ``direction``, one that keeps the degeneracy (README, "Spectral rules": exact along directions
    that keep repeated values repeated), against central differences along it: the JVP and the
    VJP (⟨vjp(w), d⟩ against ⟨w, difference⟩) to first order, nested JVPs to ``order``."""
    a, direction = np.asarray(a), np.asarray(direction, dtype=np.asarray(a).dtype)
    for depth in range(1, order + 1):
        exact = derivative_along(f, a, direction, depth)
        fd = (derivative_along(f, a + h * direction, direction, depth - 1)
              - derivative_along(f, a - h * direction, direction, depth - 1)) / (2 * h)
        close(f"order-{depth} jvp along a direction that keeps the degeneracy", exact, fd, rtol, WrongDerivative)
        if depth == 1:
            w = draw(rng_for("along/cotangent"), fd.shape, fd.dtype)
            _, pullback = tnp.vjp(lambda y: joined(tnp, f(y)), a)
            got = np.real(np.vdot(np.asarray(pullback(w)[0]), direction))
            close("<vjp(w), d> along a direction that keeps the degeneracy", got, np.real(np.vdot(w, fd)), rtol,
                  WrongDerivative)


def derivative_along(f: Callable[..., Any], x: np.ndarray, d: np.ndarray, depth: int) -> np.ndarray:
    """The depth-th derivative of f at x along d (f's value for depth 0), by nested jvps."""
    def nested(y: Any, k: int) -> Any:
        if k == 0:
            return joined(tnp, f(y))
        return tnp.jvp(lambda z: nested(z, k - 1), (y,), (d,))[1]
    if depth == 0:
        return np.asarray(ours(lambda y: joined(tnp, f(y)), x))
    return np.asarray(tnp.jvp(lambda y: nested(y, depth - 1), (x,), (d,))[1])
