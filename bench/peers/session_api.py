"""The same linalg cases through the session API (``s.svd``, ``s.eigh``, ... in an eager session), as a
tenferro program spells them: JAX's and PyTorch's shapes (empty matrices and stacks included) for
every session linalg op, values against NumPy/SciPy and tenferro_py.testing.check_grads (both
modes, order 2, real and complex) on gauge-invariant outputs."""

from __future__ import annotations

import numpy as np
import scipy.linalg

import tenferro_py as tf
from tenferro_py.testing import check_grads

from .harness import Case, close, draw, hermitian, rng_for, value_tol

SQUARE = [(0, 0), (1, 1), (4, 4), (2, 5, 5), (0, 3, 3), (2, 0, 0)]
RECTANGULAR = SQUARE + [(5, 3), (3, 5), (2, 5, 2), (3, 0), (0, 3)]


def _herm(s, x):
    return s.scale_real(s.add(x, s.conj(s.transpose(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)))), 0.5)


def _reconstruction(s, x):
    u, sv, vt = s.svd(x)
    return s.einsum([u, s.convert(sv, u.dtype), vt], "...ik,...k,...kj->...ij")


# name: (session function, NumPy/SciPy reference, shapes, input: "any" | "hermitian" | "pd")
OPS = {
    "svd (U S Vᴴ)": (_reconstruction, lambda a: a, RECTANGULAR, "any"),
    "svd (s)": (lambda s, x: s.svd(x)[1], lambda a: np.linalg.svd(a, compute_uv=False), RECTANGULAR, "any"),
    "svdvals": (lambda s, x: s.svdvals(x), lambda a: np.linalg.svd(a, compute_uv=False), RECTANGULAR, "any"),
    "eigh (w)": (lambda s, x: s.eigh(x)[0], np.linalg.eigvalsh, SQUARE, "hermitian"),
    "eigvalsh": (lambda s, x: s.eigvalsh(x), np.linalg.eigvalsh, SQUARE, "hermitian"),
    "qr (Q R)": (lambda s, x: (lambda q, r: s.einsum([q, r], "...ik,...kj->...ij"))(*s.qr(x)), lambda a: a,
                 RECTANGULAR, "any"),
    "cholesky": (lambda s, x: s.cholesky(x), np.linalg.cholesky, SQUARE, "pd"),
    "det": (lambda s, x: s.det(x), np.linalg.det, SQUARE, "any"),
    "slogdet (log|det|)": (lambda s, x: s.slogdet(x)[1], lambda a: np.linalg.slogdet(a)[1], SQUARE, "any"),
    "inv": (lambda s, x: s.inv(x), np.linalg.inv, SQUARE, "any"),
    "pinv": (lambda s, x: s.pinv(x), lambda a: np.linalg.pinv(a, rtol=None), RECTANGULAR, "any"),
    "matrix_power 3": (lambda s, x: s.matrix_power(x, 3), lambda a: np.linalg.matrix_power(a, 3), SQUARE, "any"),
    "matrix_power -2": (lambda s, x: s.matrix_power(x, -2), lambda a: np.linalg.matrix_power(a, -2), SQUARE, "any"),
    "eigvals": (lambda s, x: s.eigvals(x), None, SQUARE, "any"),
    "expm": (lambda s, x: s.expm(x), scipy.linalg.expm, SQUARE, "any"),
    "sqrtm": (lambda s, x: s.sqrtm(_herm(s, x)), None, SQUARE, "pd"),
    "logm": (lambda s, x: s.logm(_herm(s, x)), None, SQUARE, "pd"),
    "inv_sqrtm": (lambda s, x: s.inv_sqrtm(_herm(s, x)), None, SQUARE, "pd"),
}


def _input(name, shape, dtype, kind):
    a = draw(rng_for(name), shape, dtype)
    if kind == "hermitian":
        a = hermitian(a)
    if kind == "pd":
        a = a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])
    return a


def _run(name, op, shape, dtype):
    f, reference, _, kind = OPS[op]
    a = _input(name, shape, dtype, kind)
    rt = tf.EagerRuntime()
    got = rt.with_eager_session(tf.CpuEngine.serial(), lambda s: f(s, rt.variable_from(tf.Tensor(a)))).value()
    if reference is not None:
        with np.errstate(all="ignore"):
            close(op, got.to_numpy(), reference(a), value_tol(dtype, 1e3))
    check_grads(f, [a], modes=("fwd", "rev"), order=2, rtol=1e-5, atol=1e-7)


def cases() -> list[Case]:
    out = []
    for op, (_, _, shapes, _) in OPS.items():
        for shape in shapes:
            for dtype in (np.float64, np.complex128):
                name = f"session API: {op}[shape={shape} dtype={np.dtype(dtype).name}]"
                out.append(Case("jax", name, lambda name=name, op=op, shape=shape, dtype=dtype:
                                _run(name, op, shape, dtype)))
    return out
