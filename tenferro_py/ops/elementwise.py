"""Elementwise ops on tensors of one shape and dtype, each with its rules.

Complex numbers follow JAX's convention: the JVP of y = f(z) is f'(z)·dz and the
VJP is ȳ·conj(f'(z)) (the transpose under the real inner product Re Σ conj(a)·b),
so the gradient of a real loss is ∂L/∂Re z + i ∂L/∂Im z. A unary op's derivative
is multiplication by f'(x); one function ``deriv(s, t, x, y) = f'(x)·t`` gives
its JVP, and conj(deriv(conj(ȳ))) its VJP (just deriv(ȳ) for real dtypes).
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeMismatch, InvalidArgument, ShapeMismatch
from ..rules import RuleSet
from ..tape import Product, accumulate
from ..tensor import Aval, Tensor, is_real_number

RULES = RuleSet()


def same_aval(x: Aval) -> tuple[Aval]:
    return (x,)


def matching_avals(op: str):
    """Shape rule of a binary elementwise op: equal shapes, equal dtypes."""

    def abstract(a: Aval, b: Aval) -> tuple[Aval]:
        if a.shape != b.shape:
            raise ShapeMismatch(op, f"operands of one shape (lhs {list(a.shape)})", f"rhs {list(b.shape)}")
        if a.dtype != b.dtype:
            raise DTypeMismatch(op, f"operands of one dtype (lhs {a.dtype})", f"rhs {b.dtype}")
        return (a,)

    return abstract


def cj(s, x):
    """conj(x) for a complex x; x itself for a real one (or a symbolic zero)."""
    return s.conj(x) if x is not None and x.dtype.kind == "c" else x


def unary(name: str, impl, deriv):
    """Define a unary elementwise primitive from its kernel and ``deriv``."""

    def jvp(s, tangents, primals, outputs):
        return (deriv(s, tangents[0], primals[0], outputs[0]),)

    def vjp(s, cotangents, primals, outputs, needs):
        return (cj(s, deriv(s, cj(s, cotangents[0]), primals[0], outputs[0])),)

    return RULES.define(name, same_aval, lambda x: (impl(x),), jvp, vjp)


def minus(s, a, b):
    """a - b where None is a symbolic zero."""
    if b is None:
        return a
    if a is None:
        return s.neg(b)
    return s.sub(a, b)


# --- binary ---------------------------------------------------------------

add = RULES.define(
    "add",
    matching_avals("add"),
    lambda a, b: (np.add(a, b),),
    jvp=lambda s, t, p, o: (accumulate(s, t[0], t[1]),),
    vjp=lambda s, c, p, o, needs: (c[0], c[0]),
)

sub = RULES.define(
    "sub",
    matching_avals("sub"),
    lambda a, b: (np.subtract(a, b),),
    jvp=lambda s, t, p, o: (minus(s, t[0], t[1]),),
    vjp=lambda s, c, p, o, needs: (c[0], s.neg(c[0]) if needs[1] else None),
)


def _mul_jvp(s, tangents, primals, outputs):
    (da, db), (a, b) = tangents, primals
    return (accumulate(s, None if da is None else s.mul(da, b), None if db is None else s.mul(a, db)),)


def _mul_vjp(s, cotangents, primals, outputs, needs):
    (ct,), (a, b) = cotangents, primals
    return (s.mul(ct, cj(s, b)) if needs[0] else None, s.mul(cj(s, a), ct) if needs[1] else None)


mul = RULES.define("mul", matching_avals("mul"), lambda a, b: (np.multiply(a, b),), _mul_jvp, _mul_vjp)


def _div_jvp(s, tangents, primals, outputs):
    # d(a/b) = (da - y db) / b
    (da, db), (_, b), (y,) = tangents, primals, outputs
    return (s.div(minus(s, da, None if db is None else s.mul(y, db)), b),)


def _div_vjp(s, cotangents, primals, outputs, needs):
    (ct,), (_, b), (y,) = cotangents, primals, outputs
    ct_a = s.div(ct, cj(s, b))
    return (ct_a, s.neg(s.mul(ct_a, cj(s, y))) if needs[1] else None)


div = RULES.define("div", matching_avals("div"), lambda a, b: (np.divide(a, b),), _div_jvp, _div_vjp)


# --- unary ----------------------------------------------------------------

neg = unary("neg", np.negative, lambda s, t, x, y: s.neg(t))
exp = unary("exp", np.exp, lambda s, t, x, y: s.mul(t, y))
log = unary("log", np.log, lambda s, t, x, y: s.div(t, x))
sqrt = unary("sqrt", np.sqrt, lambda s, t, x, y: s.scale_real(s.div(t, y), 0.5))


def check_real_scalar(op: str, alpha: object) -> float:
    """A real number (Python or NumPy) as a float, or InvalidArgument."""
    if not is_real_number(alpha):
        raise InvalidArgument(op, "a real number", repr(alpha))
    return float(alpha)


scale_real = RULES.define(
    "scale_real",
    lambda x, alpha: (x,),
    lambda x, alpha: (np.multiply(x, x.dtype.type(alpha)),),
    jvp=lambda s, t, p, o, alpha: (s.scale_real(t[0], alpha),),
    vjp=lambda s, c, p, o, needs, alpha: (s.scale_real(c[0], alpha),),
)


# --- complex parts ----------------------------------------------------------
# conj is real-linear (its own transpose); real/imag/abs map complex to real and
# complex() maps two real tensors to one complex one. For a real x, conj and real
# are x itself, imag is zero, so they are defined for every dtype.


def real_dtype(dtype: np.dtype) -> np.dtype:
    """float64 for complex128, float32 for complex64; a real dtype itself."""
    return np.empty(0, dtype).real.dtype


def _real_part_aval(x: Aval) -> tuple[Aval]:
    return (Aval(x.shape, real_dtype(x.dtype)),)


def _zeros_like(s, x):
    return s.zeros(x.shape, x.dtype)


def _conj_jvp(s, tangents, primals, outputs):
    """conj of the tangent; of a Product, the product of the conjugated factors."""
    (t,) = tangents
    return (Product(s.conj(t.left), s.conj(t.right)) if type(t) is Product else s.conj(t),)


conj = RULES.define(
    "conj",
    same_aval,
    lambda x: (np.conj(x),),
    jvp=_conj_jvp,
    vjp=lambda s, c, p, o, needs: (s.conj(c[0]),),
    factored_tangents=True,
)


def lift_real(s, re, like):
    """re (real) as a tensor of ``like``'s dtype: complex (zero imaginary part) when ``like`` is."""
    return s.complex(re, _zeros_like(s, re)) if like.dtype.kind == "c" else re


real = RULES.define(
    "real",
    _real_part_aval,
    lambda x: (np.real(x).copy(),),
    jvp=lambda s, t, p, o: (s.real(t[0]),),
    vjp=lambda s, c, p, o, needs: (lift_real(s, c[0], p[0]),),
)


def times_i(s, x):
    """i·x for a real x: the complex tensor 0 + i·x."""
    return s.complex(_zeros_like(s, x), x)


def _imag_vjp(s, cotangents, primals, outputs, needs):
    (ct,), (x,) = cotangents, primals
    if x.dtype.kind != "c":
        return (None,)
    return (times_i(s, ct),)


imag = RULES.define(
    "imag",
    _real_part_aval,
    lambda x: (np.imag(x).copy(),),
    jvp=lambda s, t, p, o: (s.imag(t[0]),),
    vjp=_imag_vjp,
)


def _complex_abstract(re: Aval, im: Aval) -> tuple[Aval]:
    matching_avals("complex")(re, im)
    if re.dtype.kind != "f":
        raise DTypeMismatch("complex", "real parts of a real dtype (float64 or float32)", str(re.dtype))
    return (Aval(re.shape, np.result_type(re.dtype, np.complex64)),)


def _make_complex(re: np.ndarray, im: np.ndarray) -> np.ndarray:
    out = np.empty(re.shape, np.result_type(re.dtype, np.complex64))
    out.real, out.imag = re, im
    return out


def _complex_jvp(s, tangents, primals, outputs):
    dre, dim = (t if t is not None else _zeros_like(s, p) for t, p in zip(tangents, primals))
    return (s.complex(dre, dim),)


complex_ = RULES.define(
    "complex",
    _complex_abstract,
    lambda re, im: (_make_complex(re, im),),
    jvp=_complex_jvp,
    vjp=lambda s, c, p, o, needs: (s.real(c[0]) if needs[0] else None, s.imag(c[0]) if needs[1] else None),
)

# sign(x) = x/|x| (0 at 0): a constant for AD, as tenferro's contract says.
sign = RULES.define(
    "sign",
    same_aval,
    lambda x: (np.sign(x) if x.dtype.kind != "c" else np.where(x == 0, 0, x / np.where(x == 0, 1, np.abs(x))),),
    jvp=lambda s, t, p, o: (None,),
    vjp=lambda s, c, p, o, needs: (None,),
)


def _nonzero(s, y):
    """|z| + tiny: the same numbers, but z/(|z| + tiny) is 0 at z = 0 (sign(0) = 0)."""
    return s.add(y, s.constant_from(Tensor(np.full(y.shape, np.finfo(y.dtype).tiny, y.dtype))))


def _abs_jvp(s, tangents, primals, outputs):
    # real x: sign(x)·t; complex z: Re(conj(z)·dz)/|z|, written so that it differentiates again
    (t,), (x,), (y,) = tangents, primals, outputs
    if x.dtype.kind != "c":
        return (s.mul(s.sign(x), t),)
    return (s.div(s.real(s.mul(s.conj(x), t)), _nonzero(s, y)),)


def _abs_vjp(s, cotangents, primals, outputs, needs):
    # ȳ·sign(z), with sign(z) = z/|z| for complex z
    (ct,), (x,), (y,) = cotangents, primals, outputs
    if x.dtype.kind != "c":
        return (s.mul(s.sign(x), ct),)
    return (s.mul(x, lift_real(s, s.div(ct, _nonzero(s, y)), x)),)


abs_ = RULES.define("abs", _real_part_aval, lambda x: (np.abs(x),), _abs_jvp, _abs_vjp)
