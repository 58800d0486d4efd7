"""Elementwise ops on tensors of one shape and dtype, each with its rules.

Complex numbers: the JVP of a holomorphic y = f(z) is f'(z)·dz and the VJP ȳ·conj(f'(z)), the
adjoint under the real inner product Re Σ conj(a)·b (PyTorch's convention; JAX's VJP is its
conjugate), so the gradient of a real loss is ∂L/∂Re z + i ∂L/∂Im z. A unary op's derivative
is multiplication by f'(x); one function ``deriv(s, t, x, y) = f'(x)·t`` gives
its JVP, and conj(deriv(conj(ȳ))) its VJP (just deriv(ȳ) for real dtypes).

The linear ones keep structured values (:mod:`tenferro_py.structure`): neg, scale_real,
conj, real and imag act on a block inside zeros by acting on the block; a product times
anything, or divided by anything, is the block times (divided by) the same window of it;
the sum of two blocks is a block over both. neg, scale_real and conj of a factored matrix
act on its factors.
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeMismatch, InvalidArgument, ShapeMismatch
from ..rules import RuleSet
from ..structure import Embedded, Product, Structured, embedded, hull
from ..tensor import Aval, Tensor, is_real_number
from .structural import SliceConfig

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


def unary(name: str, impl, deriv, structured=None):
    """Define a unary elementwise primitive from its kernel and ``deriv``."""

    def jvp(s, tangents, primals, outputs):
        return (deriv(s, tangents[0], primals[0], outputs[0]),)

    def vjp(s, cotangents, primals, outputs, needs):
        return (cj(s, deriv(s, cj(s, cotangents[0]), primals[0], outputs[0])),)

    return RULES.define(name, same_aval, lambda x: (impl(x),), jvp, vjp, structured=structured, structured_rules=True)


# --- structured forms ---------------------------------------------------------------


def on_blocks(op, on_product=None):
    """The structured form of a linear unary op: a block's image is the block's; a product's is
    ``on_product``'s (None: made dense)."""

    def structured(s, x, **params):
        if type(x) is Embedded:
            return (Embedded(op(s, x.block, **params), x.shape, x.starts, x.strides),)
        if type(x) is Product and on_product is not None:
            return (on_product(s, x, **params),)
        return NotImplemented

    return structured


def window(s, x, box):
    """The part of x inside ``box``."""
    if all(lo == 0 and hi == n for (lo, hi), n in zip(box, x.shape)):
        return x
    return s.slice(x, SliceConfig([lo for lo, _ in box], [hi for _, hi in box]))


def _placed(s, x: Embedded, box):
    """x's block padded out to fill ``box`` (which holds it)."""
    if x.box() == box:
        return x.block
    return s.pad(x.block, [hi - lo for lo, hi in box], [st - lo for st, (lo, _) in zip(x.starts, box)])


def _sum_structured(op):
    """The structured form of add or sub: of two blocks, a block over both."""

    def structured(s, a, b):
        if not (type(a) is Embedded and type(b) is Embedded and a.contiguous and b.contiguous):
            return NotImplemented
        whole = hull(a.box(), b.box())
        return (embedded(op(s, _placed(s, a, whole), _placed(s, b, whole)), a.shape, whole),)

    return structured


def _scaled_structured(op, commutes: bool):
    """The structured form of mul (``commutes``) or div: a block times (over) anything is the block
    times (over) the same window of it."""

    def structured(s, a, b):
        if type(a) is Embedded and a.contiguous and not isinstance(b, Structured):
            return (Embedded(op(s, a.block, window(s, b, a.box())), a.shape, a.starts),)
        if commutes and type(b) is Embedded and b.contiguous and not isinstance(a, Structured):
            return (Embedded(op(s, window(s, a, b.box()), b.block), b.shape, b.starts),)
        return NotImplemented

    return structured


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
    jvp=lambda s, t, p, o: (s.accumulate(t[0], t[1]),),
    vjp=lambda s, c, p, o, needs: (c[0], c[0]),
    structured=_sum_structured(lambda s, a, b: s.add(a, b)),
    structured_rules=True,
)

sub = RULES.define(
    "sub",
    matching_avals("sub"),
    lambda a, b: (np.subtract(a, b),),
    jvp=lambda s, t, p, o: (minus(s, t[0], t[1]),),
    vjp=lambda s, c, p, o, needs: (c[0], s.neg(c[0]) if needs[1] else None),
    structured=_sum_structured(lambda s, a, b: s.sub(a, b)),
    structured_rules=True,
)


def _mul_jvp(s, tangents, primals, outputs):
    (da, db), (a, b) = tangents, primals
    return (s.accumulate(None if da is None else s.mul(da, b), None if db is None else s.mul(a, db)),)


def _mul_vjp(s, cotangents, primals, outputs, needs):
    (ct,), (a, b) = cotangents, primals
    return (s.mul(ct, cj(s, b)) if needs[0] else None, s.mul(cj(s, a), ct) if needs[1] else None)


mul = RULES.define("mul", matching_avals("mul"), lambda a, b: (np.multiply(a, b),), _mul_jvp, _mul_vjp,
                   structured=_scaled_structured(lambda s, a, b: s.mul(a, b), commutes=True), structured_rules=True)


def _div_jvp(s, tangents, primals, outputs):
    # d(a/b) = (da - y db) / b
    (da, db), (_, b), (y,) = tangents, primals, outputs
    return (s.div(minus(s, da, None if db is None else s.mul(y, db)), b),)


def _div_vjp(s, cotangents, primals, outputs, needs):
    (ct,), (_, b), (y,) = cotangents, primals, outputs
    ct_a = s.div(ct, cj(s, b))
    return (ct_a, s.neg(s.mul(ct_a, cj(s, y))) if needs[1] else None)


div = RULES.define("div", matching_avals("div"), lambda a, b: (np.divide(a, b),), _div_jvp, _div_vjp,
                   structured=_scaled_structured(lambda s, a, b: s.div(a, b), commutes=False), structured_rules=True)


# --- unary ----------------------------------------------------------------

neg = unary("neg", np.negative, lambda s, t, x, y: s.neg(t),
            structured=on_blocks(lambda s, x: s.neg(x), lambda s, x: Product(s.neg(x.left), x.right)))
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
    structured=on_blocks(lambda s, x, alpha: s.scale_real(x, alpha),
                         lambda s, x, alpha: Product(s.scale_real(x.left, alpha), x.right)),
    structured_rules=True,
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


conj = RULES.define(
    "conj",
    same_aval,
    lambda x: (np.conj(x),),
    jvp=lambda s, t, p, o: (s.conj(t[0]),),
    vjp=lambda s, c, p, o, needs: (s.conj(c[0]),),
    structured=on_blocks(lambda s, x: s.conj(x), lambda s, x: Product(s.conj(x.left), s.conj(x.right))),
    structured_rules=True,
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
    structured=on_blocks(lambda s, x: s.real(x)),
    structured_rules=True,
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
    structured=on_blocks(lambda s, x: s.imag(x)),
    structured_rules=True,
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
    structured_rules=True,
)

# sign(x) = x/|x| (0 at 0): a constant for AD, as tenferro's contract says.
sign = RULES.define(
    "sign",
    same_aval,
    lambda x: (np.sign(x) if x.dtype.kind != "c" else np.where(x == 0, 0, x / np.where(x == 0, 1, np.abs(x))),),
    jvp=lambda s, t, p, o: (None,),
    vjp=lambda s, c, p, o, needs: (None,),
    structured_rules=True,
)


def _nonzero(s, y):
    """|z| + tiny: the same numbers, but z/(|z| + tiny) is 0 at z = 0 (sign(0) = 0)."""
    return s.add(y, s.constant_from(Tensor.adopt(np.full(y.shape, np.finfo(y.dtype).tiny, y.dtype))))


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


abs_ = RULES.define("abs", _real_part_aval, lambda x: (np.abs(x),), _abs_jvp, _abs_vjp, structured_rules=True)
