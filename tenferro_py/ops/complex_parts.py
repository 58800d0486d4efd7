"""Complex parts and dtype conversion as ops: conj, real, imag, complex, abs, sign, angle and
convert, each with its rules (the complex conventions of :mod:`.elementwise`)."""

from __future__ import annotations

import numpy as np

from ..errors import DTypeMismatch
from ..rules import RuleSet, ufunc_kernel
from ..structure import Product
from ..tensor import Aval
from .elementwise import full_like, matching_avals, on_blocks, real_dtype, same_aval, zero_mask

RULES = RuleSet()


# --- complex parts ----------------------------------------------------------
# conj is real-linear (its own transpose); real/imag/abs map complex to real and
# complex() maps two real tensors to one complex one. For a real x, conj and real
# are x itself, imag is zero, so they are defined for every dtype.


def _real_part_aval(x: Aval) -> tuple[Aval]:
    return (Aval(x.shape, real_dtype(x.dtype)),)


def _zeros_like(s, x):
    return s.zeros(x.shape, x.dtype)


conj = RULES.define_linear(
    "conj",
    same_aval,
    ufunc_kernel(np.conj),
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
