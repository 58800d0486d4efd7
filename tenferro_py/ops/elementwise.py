"""Elementwise ops on tensors of one shape and dtype, each with its rules.

Complex numbers: the JVP of a holomorphic y = f(z) is f'(z)·dz and the VJP ȳ·conj(f'(z)), the
adjoint under the real inner product Re Σ conj(a)·b (PyTorch's convention; JAX's VJP is its
conjugate), so the gradient of a real loss is ∂L/∂Re z + i ∂L/∂Im z. A unary op's derivative
is multiplication by f'(x); one function ``deriv(s, t, x, y) = f'(x)·t`` gives
its JVP, and conj(deriv(conj(ȳ))) its VJP (just deriv(ȳ) for real dtypes).

Complex parts, magnitude, phase and dtype conversion are in :mod:`.complex_parts`; maximum,
minimum, where and logaddexp in :mod:`.extrema`.

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
from ..rules import RuleSet, ufunc_kernel
from ..structure import Embedded, Product, Structured, dense, embedded, hull
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


def real_dtype(dtype: np.dtype) -> np.dtype:
    """float64 for complex128, float32 for complex64; a real dtype itself."""
    return np.empty(0, dtype).real.dtype


def unary(name: str, impl, deriv, structured=None, rules: RuleSet = RULES, abstract=same_aval):
    """Define a unary elementwise primitive (in ``rules``) from its kernel and ``deriv`` (f'(x)·t),
    both given the primitive's parameters, if it has any, as keywords; the VJP is the JVP conjugated."""

    def jvp(s, tangents, primals, outputs, **params):
        return (deriv(s, tangents[0], primals[0], outputs[0], **params),)

    def vjp(s, cotangents, primals, outputs, needs, **params):
        return (cj(s, deriv(s, cj(s, cotangents[0]), primals[0], outputs[0], **params)),)

    kernel = ufunc_kernel(impl) if isinstance(impl, np.ufunc) else lambda x, **params: (impl(x, **params),)
    return rules.define(name, abstract, kernel, jvp, vjp, structured=structured)


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
    ufunc_kernel(np.add),
    jvp=lambda s, t, p, o: (s.accumulate(t[0], t[1]),),
    vjp=lambda s, c, p, o, needs: (c[0], c[0]),
    structured=_sum_structured(lambda s, a, b: s.add(a, b)),
)

sub = RULES.define(
    "sub",
    matching_avals("sub"),
    ufunc_kernel(np.subtract),
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


mul = RULES.define("mul", matching_avals("mul"), ufunc_kernel(np.multiply), _mul_jvp, _mul_vjp,
                   structured=_scaled_structured(lambda s, a, b: s.mul(a, b), commutes=True))


def _div_jvp(s, tangents, primals, outputs):
    # d(a/b) = (da - y db) / b
    (da, db), (_, b), (y,) = tangents, primals, outputs
    return (s.div(minus(s, da, None if db is None else s.mul(y, db)), b),)


def _div_vjp(s, cotangents, primals, outputs, needs):
    (ct,), (_, b), (y,) = cotangents, primals, outputs
    ct_a = s.div(ct, cj(s, b))
    return (ct_a, s.neg(s.mul(ct_a, cj(s, y))) if needs[1] else None)


div = RULES.define("div", matching_avals("div"), ufunc_kernel(np.divide), _div_jvp, _div_vjp,
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


neg = RULES.define_linear("neg", same_aval, ufunc_kernel(np.negative), lambda s, c, p, needs: (s.neg(c[0]),),
                          structured=on_blocks(lambda s, x: s.neg(x), lambda s, x: Product(s.neg(x.left), x.right)))
exp = unary("exp", np.exp, lambda s, t, x, y: s.mul(t, y))
log = unary("log", np.log, lambda s, t, x, y: s.div(t, x))
def has_zero(x: np.ndarray) -> bool:
    """Whether an entry of x is 0."""
    return bool(np.any(x == 0))


def nothing_where_nothing_flows(s, t, at, derivative):
    """``derivative`` (t times a slope that is infinite where ``at`` is 0), but 0 where t is 0 there:
    an infinite slope times a tangent of 0 is no change, not NaN (a gauge √s at s = 0 that the loss
    does not see). Where t is not 0 the infinity stays, as it is. Checked on the values, so
    spectra without zeros take the plain rule."""
    if not at.runtime.observe(has_zero, at):
        return derivative()
    t = dense(s, t)
    with np.errstate(divide="ignore", invalid="ignore"):
        return s.where(s.bind(zero_mask, t)[0], s.zeros(t.shape, t.dtype), derivative())


sqrt = unary("sqrt", np.sqrt,
             lambda s, t, x, y: nothing_where_nothing_flows(s, t, y, lambda: s.scale_real(s.div(t, y), 0.5)))
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
    slope = lambda: s.mul(t, s.scale_real(s.real_pow(x, exponent - 1.0), exponent))  # noqa: E731
    return nothing_where_nothing_flows(s, t, x, slope) if exponent < 1 else slope()


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


def real_matching_avals(op: str):
    """Shape rule of a binary op NumPy defines for real dtypes only: equal shapes and dtypes, real."""
    matching = matching_avals(op)

    def abstract(a: Aval, b: Aval) -> tuple[Aval]:
        matching(a, b)
        if a.dtype.kind == "c":
            raise DTypeMismatch(op, "real operands (float64 or float32)", str(a.dtype))
        return (a,)

    return abstract


def constant_for_ad(name: str, impl, rules: RuleSet = RULES, abstract=None):
    """An elementwise op that is piecewise constant (real only unless ``abstract`` says otherwise),
    of any number of operands: its derivative is zero (None) everywhere."""
    return rules.define(name, abstract or real_only(name), lambda *xs: (impl(*xs),),
                        jvp=lambda s, t, p, o: (None,), vjp=lambda s, c, p, o, needs: tuple(None for _ in p))


floor = constant_for_ad("floor", np.floor)
ceil = constant_for_ad("ceil", np.ceil)
