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

import math

import numpy as np

from ..errors import DTypeMismatch, InvalidArgument, ShapeMismatch
from ..rules import RuleSet
from ..structure import Embedded, Product, Structured, embedded, hull
from ..tensor import Aval, Tensor, is_real_number
from .structural import SliceConfig

RULES = RuleSet()


def same_aval(x: Aval, **params: object) -> tuple[Aval]:
    """Shape inference of an elementwise op of one operand: the operand's shape and dtype."""
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
    """Define a unary elementwise primitive from its kernel and ``deriv`` (f'(x)·t), both given the
    primitive's parameters, if it has any, as keywords; the VJP is the JVP conjugated."""

    def jvp(s, tangents, primals, outputs, **params):
        return (deriv(s, tangents[0], primals[0], outputs[0], **params),)

    def vjp(s, cotangents, primals, outputs, needs, **params):
        return (cj(s, deriv(s, cj(s, cotangents[0]), primals[0], outputs[0], **params)),)

    return RULES.define(name, same_aval, lambda x, **params: (impl(x, **params),), jvp, vjp, structured=structured)


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
)

sub = RULES.define(
    "sub",
    matching_avals("sub"),
    lambda a, b: (np.subtract(a, b),),
    jvp=lambda s, t, p, o: (minus(s, t[0], t[1]),),
    vjp=lambda s, c, p, o, needs: (c[0], s.neg(c[0]) if needs[1] else None),
    structured=_sum_structured(lambda s, a, b: s.sub(a, b)),
)


def _mul_jvp(s, tangents, primals, outputs):
    (da, db), (a, b) = tangents, primals
    return (s.accumulate(None if da is None else s.mul(da, b), None if db is None else s.mul(a, db)),)


def _mul_vjp(s, cotangents, primals, outputs, needs):
    (ct,), (a, b) = cotangents, primals
    return (s.mul(ct, cj(s, b)) if needs[0] else None, s.mul(cj(s, a), ct) if needs[1] else None)


mul = RULES.define("mul", matching_avals("mul"), lambda a, b: (np.multiply(a, b),), _mul_jvp, _mul_vjp,
                   structured=_scaled_structured(lambda s, a, b: s.mul(a, b), commutes=True))


def _div_jvp(s, tangents, primals, outputs):
    # d(a/b) = (da - y db) / b
    (da, db), (_, b), (y,) = tangents, primals, outputs
    return (s.div(minus(s, da, None if db is None else s.mul(y, db)), b),)


def _div_vjp(s, cotangents, primals, outputs, needs):
    (ct,), (_, b), (y,) = cotangents, primals, outputs
    ct_a = s.div(ct, cj(s, b))
    return (ct_a, s.neg(s.mul(ct_a, cj(s, y))) if needs[1] else None)


div = RULES.define("div", matching_avals("div"), lambda a, b: (np.divide(a, b),), _div_jvp, _div_vjp,
                   structured=_scaled_structured(lambda s, a, b: s.div(a, b), commutes=False))


# --- unary ----------------------------------------------------------------


def full(s, shape, dtype, value):
    """A constant of ``shape`` and ``dtype`` filled with ``value``: one number, broadcast."""
    return s.broadcast_in_dim(s.constant_from(Tensor.adopt(np.array(value, dtype=dtype))), tuple(shape), ())


def full_like(s, x, value):
    """A constant of x's shape and dtype filled with ``value``."""
    return full(s, x.shape, x.dtype, value)


def one_plus(s, x):
    """1 + x, in session ops."""
    return s.add(full_like(s, x, 1), x)


def one_minus(s, x):
    """1 − x, in session ops."""
    return s.sub(full_like(s, x, 1), x)


neg = RULES.define_linear("neg", same_aval, lambda x: (np.negative(x),), lambda s, c, p, needs: (s.neg(c[0]),),
                          structured=on_blocks(lambda s, x: s.neg(x), lambda s, x: Product(s.neg(x.left), x.right)))
exp = unary("exp", np.exp, lambda s, t, x, y: s.mul(t, y))
log = unary("log", np.log, lambda s, t, x, y: s.div(t, x))
sqrt = unary("sqrt", np.sqrt, lambda s, t, x, y: s.scale_real(s.div(t, y), 0.5))
square = unary("square", np.square, lambda s, t, x, y: s.mul(t, s.scale_real(x, 2.0)))
sin = unary("sin", np.sin, lambda s, t, x, y: s.mul(t, s.cos(x)))
cos = unary("cos", np.cos, lambda s, t, x, y: s.neg(s.mul(t, s.sin(x))))
tan = unary("tan", np.tan, lambda s, t, x, y: s.mul(t, one_plus(s, s.square(y))))  # 1 + tan²
sinh = unary("sinh", np.sinh, lambda s, t, x, y: s.mul(t, s.cosh(x)))
cosh = unary("cosh", np.cosh, lambda s, t, x, y: s.mul(t, s.sinh(x)))
tanh = unary("tanh", np.tanh, lambda s, t, x, y: s.mul(t, one_minus(s, s.square(y))))  # 1 − tanh²
arcsin = unary("arcsin", np.arcsin, lambda s, t, x, y: s.div(t, s.sqrt(one_minus(s, s.square(x)))))
arccos = unary("arccos", np.arccos, lambda s, t, x, y: s.neg(s.div(t, s.sqrt(one_minus(s, s.square(x))))))
arctan = unary("arctan", np.arctan, lambda s, t, x, y: s.div(t, one_plus(s, s.square(x))))
log1p = unary("log1p", np.log1p, lambda s, t, x, y: s.div(t, one_plus(s, x)))
expm1 = unary("expm1", np.expm1, lambda s, t, x, y: s.mul(t, one_plus(s, y)))


# --- powers ---------------------------------------------------------------
# x**n for an integer n and x**p for a real p are unary (the exponent a parameter); x**y of two
# tensors is binary. Each derivative is n·x**(n−1) (p·x**(p−1)) written with the op itself, so
# every order follows; at x = 0 they are what NumPy's power gives (x**0 = 1, so 0·x**−1 is
# never formed: an exponent of 0 has a zero derivative).


def _integer_pow_deriv(s, t, x, y, exponent):
    if exponent == 0:
        return None
    return s.mul(t, s.scale_real(s.integer_pow(x, exponent - 1), exponent))


def _real_pow_deriv(s, t, x, y, exponent):
    if exponent == 0:
        return None
    return s.mul(t, s.scale_real(s.real_pow(x, exponent - 1.0), exponent))


integer_pow = unary("integer_pow", lambda x, exponent: np.power(x, exponent), _integer_pow_deriv)
real_pow = unary("real_pow", lambda x, exponent: np.power(x, x.dtype.type(exponent)), _real_pow_deriv)

# 1 where x = 0, else 0 (of x's real dtype): a constant for AD, for rules that treat zeros apart.
zero_mask = RULES.define(
    "zero_mask",
    lambda x: (Aval(x.shape, real_dtype(x.dtype)),),
    lambda x: (np.equal(x, 0).astype(real_dtype(x.dtype)),),
    jvp=lambda s, t, p, o: (None,),
    vjp=lambda s, c, p, o, needs: (None,),
)


def _pow_factors(s, x, y, z):
    """(∂z/∂x, ∂z/∂y) of z = x**y: y·x**(y−1), read as 0 where y = 0 (x**0 = 1 at every x), and
    log(x)·z, with log(x) read as 0 where x = 0 (z is 0 or 1 there, as NumPy's power gives)."""
    one = full_like(s, y, 1)
    by_x = s.mul(y, s.pow(x, s.where(s.bind(zero_mask, y)[0], one, s.sub(y, one))))  # y = 0: 0·x, not 0·x**−1
    by_y = s.mul(s.log(s.where(s.bind(zero_mask, x)[0], full_like(s, x, 1), x)), z)
    return by_x, by_y


def _pow_jvp(s, tangents, primals, outputs):
    (dx, dy), (x, y), (z,) = tangents, primals, outputs
    by_x, by_y = _pow_factors(s, x, y, z)
    return (s.accumulate(None if dx is None else s.mul(dx, by_x), None if dy is None else s.mul(dy, by_y)),)


def _pow_vjp(s, cotangents, primals, outputs, needs):
    (ct,), (x, y), (z,) = cotangents, primals, outputs
    by_x, by_y = _pow_factors(s, x, y, z)
    return (s.mul(ct, cj(s, by_x)) if needs[0] else None, s.mul(ct, cj(s, by_y)) if needs[1] else None)


pow_ = RULES.define("pow", matching_avals("pow"), lambda x, y: (np.power(x, y),), _pow_jvp, _pow_vjp)


# --- maximum, minimum, where ---------------------------------------------------


def _real_operands(op: str):
    """Shape rule of maximum and minimum: equal shapes and dtypes, real (NumPy orders complex
    numbers lexicographically, which has no derivative)."""
    matching = matching_avals(op)

    def abstract(a: Aval, b: Aval) -> tuple[Aval]:
        matching(a, b)
        if a.dtype.kind == "c":
            raise DTypeMismatch(op, "real operands (float64 or float32)", str(a.dtype))
        return (a,)

    return abstract


def _shares_abstract(*xs: Aval, axes, largest) -> tuple[Aval, ...]:
    return xs


def _shares_impl(*xs, axes, largest):
    """Each entry's share in the extremum: of one operand over ``axes``, or of several operands'
    entries at each position (the operands stacked on a leading axis)."""
    stacked, over = (xs[0], axes) if len(xs) == 1 else (np.stack(xs), (0,))
    best = (np.max if largest else np.min)(stacked, axis=over, keepdims=True)
    hits = np.equal(stacked, best)
    shares = (hits / np.sum(hits, axis=over, keepdims=True)).astype(stacked.dtype)
    return (shares,) if len(xs) == 1 else tuple(shares)


# The shares of entries in an extremum (max or min, ``largest``), the one tie-splitting op of
# maximum, minimum, reduce_max and reduce_min: 1 where an entry alone attains it, 1/t where t
# entries tie (JAX's convention: a tie splits the derivative), 0 elsewhere. A constant for AD.
extremum_shares = RULES.define(
    "extremum_shares",
    _shares_abstract,
    _shares_impl,
    jvp=lambda s, t, p, o, axes, largest: tuple(None for _ in p),
    vjp=lambda s, c, p, o, needs, axes, largest: tuple(None for _ in p),
)


def _extremum_jvp(largest):
    def jvp(s, tangents, primals, outputs):
        (da, db), (a, b) = tangents, primals
        wa, wb = s.bind(extremum_shares, a, b, axes=(), largest=largest)
        return (s.accumulate(None if da is None else s.mul(da, wa), None if db is None else s.mul(db, wb)),)

    return jvp


def _extremum_vjp(largest):
    def vjp(s, cotangents, primals, outputs, needs):
        (ct,), (a, b) = cotangents, primals
        wa, wb = s.bind(extremum_shares, a, b, axes=(), largest=largest)
        return (s.mul(ct, wa) if needs[0] else None, s.mul(ct, wb) if needs[1] else None)

    return vjp


maximum = RULES.define("maximum", _real_operands("maximum"), lambda a, b: (np.maximum(a, b),),
                       _extremum_jvp(True), _extremum_vjp(True))
minimum = RULES.define("minimum", _real_operands("minimum"), lambda a, b: (np.minimum(a, b),),
                       _extremum_jvp(False), _extremum_vjp(False))


def _select_abstract(cond: Aval, x: Aval, y: Aval) -> tuple[Aval]:
    matching_avals("where")(x, y)
    if cond.shape != x.shape:
        raise ShapeMismatch("where", f"a condition of the operands' shape {list(x.shape)}", f"{list(cond.shape)}")
    return (x,)


def _select_jvp(s, tangents, primals, outputs):
    (_, dx, dy), (cond, x, y) = tangents, primals
    if dx is None and dy is None:
        return (None,)
    return (s.where(cond, dx if dx is not None else s.zeros(x.shape, x.dtype),
                    dy if dy is not None else s.zeros(y.shape, y.dtype)),)


def _select_vjp(s, cotangents, primals, outputs, needs):
    (ct,), (cond, x, _) = cotangents, primals
    zero = s.zeros(x.shape, x.dtype)
    return (None, s.where(cond, ct, zero) if needs[1] else None, s.where(cond, zero, ct) if needs[2] else None)


# where(cond, x, y): x where cond is nonzero, else y. The condition is a constant for AD.
select = RULES.define("where", _select_abstract, lambda c, x, y: (np.where(c != 0, x, y),), _select_jvp, _select_vjp)


def check_real_scalar(op: str, alpha: object) -> float:
    """A real number (Python or NumPy) as a float, or InvalidArgument."""
    if not is_real_number(alpha):
        raise InvalidArgument(op, "a real number", repr(alpha))
    return float(alpha)


scale_real = RULES.define_linear(
    "scale_real",
    lambda x, alpha: (x,),
    lambda x, alpha: (np.multiply(x, x.dtype.type(alpha)),),
    transpose=lambda s, c, p, needs, alpha: (s.scale_real(c[0], alpha),),
    structured=on_blocks(lambda s, x, alpha: s.scale_real(x, alpha),
                         lambda s, x, alpha: Product(s.scale_real(x.left, alpha), x.right)),
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


conj = RULES.define_linear(
    "conj",
    same_aval,
    lambda x: (np.conj(x),),
    transpose=lambda s, c, p, needs: (s.conj(c[0]),),
    structured=on_blocks(lambda s, x: s.conj(x), lambda s, x: Product(s.conj(x.left), s.conj(x.right))),
)


def lift_real(s, re, like):
    """re (real) as a tensor of ``like``'s dtype: complex (zero imaginary part) when ``like`` is."""
    return s.complex(re, _zeros_like(s, re)) if like.dtype.kind == "c" else re


real = RULES.define_linear(
    "real",
    _real_part_aval,
    lambda x: (np.real(x).copy(),),
    transpose=lambda s, c, p, needs: (lift_real(s, c[0], p[0]),),
    structured=on_blocks(lambda s, x: s.real(x)),
)


def times_i(s, x):
    """i·x for a real x: the complex tensor 0 + i·x."""
    return s.complex(_zeros_like(s, x), x)


def _imag_transpose(s, cotangents, primals, needs):
    (ct,), (x,) = cotangents, primals
    if x.dtype.kind != "c":
        return (None,)
    return (times_i(s, ct),)


imag = RULES.define_linear(
    "imag",
    _real_part_aval,
    lambda x: (np.imag(x).copy(),),
    transpose=_imag_transpose,
    structured=on_blocks(lambda s, x: s.imag(x)),
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


complex_ = RULES.define_linear(
    "complex",
    _complex_abstract,
    lambda re, im: (_make_complex(re, im),),
    transpose=lambda s, c, p, needs: (s.real(c[0]) if needs[0] else None, s.imag(c[0]) if needs[1] else None),
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
    """|z| where it is nonzero and 1 at z = 0, where z/that is then 0 (sign(0) = 0); unlike |z| + tiny,
    exact at every nonzero |z|, however small."""
    return s.where(s.bind(zero_mask, y)[0], full_like(s, y, 1), y)


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


# --- dtype conversion -------------------------------------------------------------
# convert(x, dtype): float32 ↔ float64, complex64 ↔ complex128 and real → complex (the embedding);
# complex → real is refused (it would drop the imaginary part). The VJP of the embedding takes
# the real part, its adjoint under Re⟨·,·⟩.


def _convert_abstract(x: Aval, dtype) -> tuple[Aval]:
    if x.dtype.kind == "c" and np.dtype(dtype).kind != "c":
        raise DTypeMismatch("convert", f"a complex dtype for complex input ({x.dtype})", str(np.dtype(dtype)))
    return (Aval(x.shape, np.dtype(dtype)),)


def _convert_transpose(s, cotangents, primals, needs, dtype):
    (ct,), (x,) = cotangents, primals
    if ct.dtype.kind == "c" and x.dtype.kind != "c":
        ct = s.real(ct)
    return (s.convert(ct, x.dtype),)


convert = RULES.define_linear(
    "convert",
    _convert_abstract,
    lambda x, dtype: (x.astype(dtype),),
    transpose=_convert_transpose,
)


# --- inverse hyperbolic functions, powers and logarithms of base 2 and 10, angle, rounding ---------
# Each derivative is written with the op's output where that keeps it finite at every scale:
# 1/√(1 + z²) as 1/cosh(arcsinh z) and 1/(√(z − 1)√(z + 1)) as 1/sinh(arccosh z) (the same
# functions on the cut plane), which never square a large z.

arcsinh = unary("arcsinh", np.arcsinh, lambda s, t, x, y: s.div(t, s.cosh(y)))
arccosh = unary("arccosh", np.arccosh, lambda s, t, x, y: s.div(t, s.sinh(y)))
arctanh = unary("arctanh", np.arctanh, lambda s, t, x, y: s.div(t, s.mul(one_minus(s, x), one_plus(s, x))))
exp2 = unary("exp2", np.exp2, lambda s, t, x, y: s.mul(t, s.scale_real(y, math.log(2.0))))
log2 = unary("log2", np.log2, lambda s, t, x, y: s.div(t, s.scale_real(x, math.log(2.0))))
log10 = unary("log10", np.log10, lambda s, t, x, y: s.div(t, s.scale_real(x, math.log(10.0))))


def real_only(op: str):
    """Shape rule of an op NumPy defines for real dtypes only: x's aval, complex refused."""

    def abstract(x: Aval, **params: object) -> tuple[Aval]:
        if x.dtype.kind == "c":
            raise DTypeMismatch(op, "a real tensor (float64 or float32)", str(x.dtype))
        return (x,)

    return abstract


def _constant_for_ad(name: str, impl):
    """A real elementwise op that is piecewise constant: its derivative is zero (None) everywhere."""
    return RULES.define(name, real_only(name), lambda x: (impl(x),), jvp=lambda s, t, p, o: (None,),
                        vjp=lambda s, c, p, o, needs: (None,))


floor = _constant_for_ad("floor", np.floor)
ceil = _constant_for_ad("ceil", np.ceil)


def _unit_phase(s, z):
    """(z/|z|, |z|) with |z| read as 1 at z = 0, where z/|z| is then 0."""
    r = _nonzero(s, s.abs(z))
    return s.div(z, lift_real(s, r, z)), r


def _angle_jvp(s, tangents, primals, outputs):
    # dθ = Im(conj(z) dz)/|z|², formed as Im(conj(z/|z|) dz)/|z| (no square; 0 at z = 0)
    (t,), (z,) = tangents, primals
    if z.dtype.kind != "c":
        return (None,)
    u, r = _unit_phase(s, z)
    return (s.div(s.imag(s.mul(s.conj(u), t)), r),)


def _angle_vjp(s, cotangents, primals, outputs, needs):
    # z̄ = θ̄ · i z/|z|²: the adjoint of dz ↦ Im(conj(u) dz)/|z| under Re⟨·,·⟩
    (ct,), (z,) = cotangents, primals
    if z.dtype.kind != "c":
        return (None,)
    u, r = _unit_phase(s, z)
    return (s.div(s.mul(times_i(s, ct), u), lift_real(s, r, z)),)


# The argument of a complex number, real (0 or π for a real x, whose derivative is zero); at z = 0
# NumPy's angle is 0 and its derivative is taken as 0, as abs's is.
angle = RULES.define("angle", _real_part_aval, lambda x: (np.angle(x),), _angle_jvp, _angle_vjp)


# 1 where a and b are infinities of one sign (their difference is NaN), else 0: a constant for AD.
same_infinity = RULES.define(
    "same_infinity",
    _real_operands("same_infinity"),
    lambda a, b: ((np.isinf(a) & (a == b)).astype(a.dtype),),
    jvp=lambda s, t, p, o: (None,),
    vjp=lambda s, c, p, o, needs: (None, None),
)


def _logaddexp_weights(s, a, b):
    """(σ(a − b), σ(b − a)), the softmax weights of a and b, each as exp(−logaddexp(0, other − own)):
    finite at every pair, ½ each where a and b are one infinity."""
    tie = s.bind(same_infinity, a, b)[0]
    zero = _zeros_like(s, a)
    a, b = s.where(tie, zero, a), s.where(tie, zero, b)
    return (s.exp(s.neg(s.logaddexp(zero, s.sub(b, a)))), s.exp(s.neg(s.logaddexp(zero, s.sub(a, b)))))


def _logaddexp_jvp(s, tangents, primals, outputs):
    (da, db), (a, b) = tangents, primals
    wa, wb = _logaddexp_weights(s, a, b)
    return (s.accumulate(None if da is None else s.mul(da, wa), None if db is None else s.mul(db, wb)),)


def _logaddexp_vjp(s, cotangents, primals, outputs, needs):
    (ct,), (a, b) = cotangents, primals
    wa, wb = _logaddexp_weights(s, a, b)
    return (s.mul(ct, wa) if needs[0] else None, s.mul(ct, wb) if needs[1] else None)


# log(exp(a) + exp(b)) by NumPy's kernel (max + log1p(exp(−|a − b|)): no overflow, exact at infinities).
logaddexp = RULES.define("logaddexp", _real_operands("logaddexp"), lambda a, b: (np.logaddexp(a, b),),
                         _logaddexp_jvp, _logaddexp_vjp)
