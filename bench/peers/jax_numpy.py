"""Ports of JAX's jax.numpy tests where tnp has the function: elementwise ops
(tests/lax_numpy_operators_test.py, testOp: values against NumPy over JAX's shapes, empty and
scalar ones included), their derivatives (tests/lax_autodiff_test.py LAX_GRAD_OPS and special
values, tests/lax_numpy_test.py GRAD_TEST_RECORDS), reductions (tests/lax_numpy_reducers_test.py)
and einsum (tests/lax_numpy_einsum_test.py), with check_grads on every 64-bit case.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np

import tenferro_py.numpy as tnp

from .harness import Case, NotPorted, close, draw, grads, ours, rng_for, value_tol

F = [np.float32, np.float64]
C = [np.complex64, np.complex128]
INEXACT = F + C
PY = "python scalar"
NONEMPTY = [(), (4,), (3, 4), (3, 1), (1, 4), (2, 1, 4), (2, 3, 4)]
EMPTY = [(0,), (0, 4), (3, 0)]
ALL_SHAPES = [PY] + NONEMPTY + EMPTY

# (name, nargs, dtypes, input kind): lax_numpy_operators_test.py's records of functions tnp has.
ELEMENTWISE = [
    ("abs", 1, INEXACT, "default"), ("add", 2, INEXACT, "default"), ("ceil", 1, F, "default"),
    ("conj", 1, INEXACT, "default"), ("exp", 1, INEXACT, "default"), ("fabs", 1, F, "default"),
    ("floor", 1, F, "default"), ("log", 1, INEXACT, "positive"), ("maximum", 2, F, "default"),
    ("minimum", 2, F, "default"), ("multiply", 2, INEXACT, "default"), ("negative", 1, INEXACT, "default"),
    ("reciprocal", 1, INEXACT, "default"), ("subtract", 2, INEXACT, "default"), ("sin", 1, INEXACT, "default"),
    ("cos", 1, INEXACT, "default"), ("tan", 1, INEXACT, "uniform:-1.5:1.5"), ("sinh", 1, INEXACT, "default"),
    ("cosh", 1, INEXACT, "default"), ("tanh", 1, INEXACT, "default"), ("arcsin", 1, INEXACT, "small"),
    ("arccos", 1, INEXACT, "small"), ("arctan", 1, INEXACT, "small"), ("arcsinh", 1, INEXACT, "default"),
    ("arccosh", 1, INEXACT, "default"), ("arctanh", 1, INEXACT, "small"), ("angle", 1, INEXACT, "default"),
    ("conjugate", 1, INEXACT, "default"), ("deg2rad", 1, F, "default"), ("divide", 2, INEXACT, "nonzero"),
    ("exp2", 1, INEXACT, "default"), ("expm1", 1, INEXACT, "positive"), ("expm1", 1, INEXACT, "small_positive"),
    ("kron", 2, INEXACT, "default"), ("outer", 2, INEXACT, "default"), ("imag", 1, INEXACT, "default"),
    ("log2", 1, INEXACT, "positive"), ("log10", 1, INEXACT, "positive"), ("log1p", 1, INEXACT, "positive"),
    ("log1p", 1, INEXACT, "small_positive"), ("logaddexp", 2, F, "default"), ("power", 2, INEXACT, "positive"),
    ("rad2deg", 1, F, "default"), ("ravel", 1, INEXACT, "default"), ("real", 1, INEXACT, "default"),
    ("sign", 1, INEXACT, "default"), ("square", 1, INEXACT, "default"), ("sqrt", 1, INEXACT, "positive"),
    ("transpose", 1, INEXACT, "default"), ("true_divide", 2, INEXACT, "nonzero"),
]
NONSCALAR = "nonempty nonscalar shapes"
I = [np.int32, np.int64]
# The records of the functions tnp added later (dtypes: a list, or explicit tuples of them), with the
# shapes JAX gives them where not all of them.
ELEMENTWISE += [
    ("float_power", 2, INEXACT, "default"), ("arctan2", 2, F, "small"), ("cbrt", 1, F, "some_inf"),
    ("divmod", 2, F, "nonzero"), ("floor_divide", 2, F, "nonzero"), ("fmin", 2, F, "some_nan"),
    ("fmax", 2, F, "some_nan"), ("fmod", 2, F, "some_nan"), ("heaviside", 2, F, "default"), ("hypot", 2, F, "default"),
    ("logaddexp2", 2, F, "some_inf_and_nan"), ("polyval", 2, INEXACT, "default", NONSCALAR),
    ("remainder", 2, F, "some_zero"), ("mod", 2, F, "some_zero"), ("modf", 1, F, "default"),
    ("rint", 1, INEXACT, "some_inf_and_nan"), ("copysign", 2, F, "some_inf_and_nan"), ("sinc", 1, INEXACT, "default"),
    ("trunc", 1, F, "some_inf_and_nan"), ("i0", 1, F, "default"), ("ldexp", 2, [(f, i) for f in F for i in I], "default"),
    ("nextafter", 2, F, "default"), ("spacing", 1, F, "default"), ("signbit", 1, F, "some_inf_and_nan"),
    ("unwrap", 1, F, "default", NONSCALAR), ("isclose", 2, INEXACT, "small_positive"), ("gcd", 2, [(i, i) for i in I], "default"),
    ("lcm", 2, [(i, i) for i in I], "default"),
]

# lax_autodiff_test.py LAX_GRAD_OPS by tnp name: (name, nargs, order, input kind, complex too, tol)
GRAD_OPS = [
    ("negative", 1, 2, "default", True, None), ("floor", 1, 2, "uniform:0.1:0.4", False, None),
    ("ceil", 1, 2, "uniform:0.1:0.4", False, None), ("exp", 1, 2, "small", True, None),
    ("exp2", 1, 2, "small", True, None), ("expm1", 1, 2, "default", True, None), ("log", 1, 2, "positive", True, None),
    ("log1p", 1, 2, "positive", True, None), ("sinh", 1, 2, "default", True, 1e-5), ("cosh", 1, 2, "default", True, 1e-5),
    ("tanh", 1, 2, "default", True, 2e-4), ("sin", 1, 2, "default", True, None), ("cos", 1, 2, "default", True, None),
    ("tan", 1, 2, "uniform:-1.3:1.3", True, 1e-3), ("arcsin", 1, 2, "uniform:-0.9:0.9", False, 1e-3),
    ("arccos", 1, 2, "uniform:-0.9:0.9", False, 2e-2), ("real", 1, 2, "default", True, None),
    ("imag", 1, 2, "default", True, None), ("conj", 1, 2, "default", True, None), ("abs", 1, 2, "positive", True, None),
    ("power", 2, 2, "positive", True, None), ("sqrt", 1, 2, "positive", True, None), ("add", 2, 2, "default", True, None),
    ("subtract", 2, 2, "default", True, None), ("multiply", 2, 2, "default", True, None),
    ("divide", 2, 1, "not_small", True, None), ("maximum", 2, 2, "default", False, None),
    ("minimum", 2, 2, "default", False, None),
    # lax_numpy_test.py GRAD_TEST_RECORDS
    ("arcsinh", 1, 2, "positive", True, 2e-2), ("arccosh", 1, 1, "positive", True, 2e-2),
    ("arctanh", 1, 2, "uniform:-0.9:0.9", True, 2e-2), ("logaddexp", 2, 1, "uniform:-0.9:0.9", False, 1e-4),
    ("logaddexp2", 2, 2, "uniform:-0.9:0.9", False, 1e-4), ("arctan2", 2, 2, "default", False, None),  # lax.atan2
]
GRAD_SHAPES = [[(3,)], [(), (3, 4), (3, 1), (1, 4)], [(2, 3, 4), (2, 1, 4)]]
SPECIAL_VALUES = [("sinh", [0.0], 2), ("cosh", [0.0], 2), ("tanh", [0.0, 1000.0], 2),
                  ("sin", [0.0, np.pi, np.pi / 2, np.pi / 4], 2), ("cos", [0.0, np.pi, np.pi / 2, np.pi / 4], 2),
                  ("tan", [0.0], 2), ("arcsin", [0.0], 2), ("arccos", [0.0], 2), ("arctan", [0.0, 1000.0], 2),
                  ("arcsinh", [0.0, 1000.0], 2), ("arccosh", [1000.0], 2), ("arctanh", [0.0], 2), ("sinc", [0.0], 1)]

REDUCERS = [("sum", "default", True), ("prod", "small_positive", True), ("mean", "default", False),
            ("var", "default", False), ("std", "default", False), ("max", "default", False),
            ("min", "default", False), ("amax", "default", False), ("amin", "default", False)]

EINSUM = [("i,j,k->ijk", [(3,), (4,), (5,)]), ("ij,j->i", [(3, 4), (4,)]), ("ijk,j->i", [(3, 4, 5), (4,)]),
          ("iji,i->j", [(3, 4, 3), (3,)]), ("ij,ij->", [(3, 4), (3, 4)]), ("nij,jk->nik", [(10, 2, 3), (3, 4)]),
          ("sa,shb->shab", [(2, 1), (2, 3, 4)]), ("ijk->j", [(3, 4, 5)]), ("ijk->kij", [(3, 4, 5)]),
          ("ijk->ki", [(3, 4, 5)]), ("...ijk->...ki", [(2, 3, 4, 5)]), ("...ijk->ki", [(3, 4, 5)]),
          ("ii->", [(3, 3)]), ("ij->", [(3, 3)]), ("iii->", [(3, 3, 3)]), ("ii->i", [(3, 3)]),
          ("iij->i", [(3, 3, 4)]), ("iii->i", [(3, 3, 3)]), ("iijkk->i", [(3, 3, 5, 4, 4)]),
          ("iijkk->ik", [(3, 3, 5, 4, 4)]), ("iijkl->il", [(3, 3, 5, 4, 4)]), ("ij->ij", [(3, 3)]),
          ("ij...,jk...->ik...", [(2, 3, 5, 1), (3, 4, 5, 1)]), ("ijj,k->ik", [(2, 3, 3), (4,)]),
          ("ij,ij,jk->ik", [(2, 3), (2, 3), (3, 4)]), ("ijkl,ijml->ijkm", [(1, 8, 20, 4), (1, 8, 20, 4)]),
          ("ntk,kd,dc->nc", [(2, 6, 5), (5, 4), (4, 3)]), ("cij,cjk->cik", [(3, 4, 5), (3, 1, 6)]),
          ("cij,cjk->cik", [(1, 4, 5), (3, 5, 6)]), ("cij,cjk->cik", [(1, 4, 5), (3, 1, 6)]),
          ("...ij,...j", [(2, 1, 3, 3), (2, 4, 3)])]
DASK = ["abc,bad->abcd", "abcdef,bcdfg->abcdeg", "ea,fb,abcd,gc,hd->efgh", "ab,b", "aa", "a,a->", "a,a->a", "a,a",
        "a,b", "a,b,c", "a", "ba,b", "ba,b->", "defab,fedbc->defac", "ab...,bc...->ac...", "a...a", "abc...->cba...",
        "...ab->...a", "a...a->a...", "...abc,...abcd->...d", "ab...,b->ab...", "aa->a", "ab,ab,c->c", "aab,bc->ac",
        "aab,bcc->ac", "fdf,cdd,ccd,afe->ae", "fff,fae,bef,def->abd"]


def _raise(err):
    raise err


def _kind(kind):
    name, *bounds = kind.split(":")
    return dict(kind=name, low=float(bounds[0]), high=float(bounds[1])) if bounds else dict(kind=name)


SPECIALS = {"some_inf": [np.inf, -np.inf], "some_nan": [np.nan], "some_zero": [0.0],
            "some_inf_and_nan": [np.inf, -np.inf, np.nan]}


def _drawn(rng, shape, dtype, kind):
    """jtu.rand_<kind>; the rand_some_* kinds: rand_default with some entries special (or 0)."""
    if kind not in SPECIALS:
        return draw(rng, shape, dtype, **_kind(kind))
    x = draw(rng, shape, np.float64 if np.dtype(dtype).kind != "c" else np.complex128)
    picks = rng.rand(*shape) < 0.3
    x = np.where(picks, np.asarray(SPECIALS[kind])[rng.randint(0, len(SPECIALS[kind]), shape)], x)
    return np.asarray(x).astype(dtype)


def _arg(rng, shape, dtype, kind):
    if shape == PY:
        x = _drawn(rng, (), np.complex128 if np.dtype(dtype).kind == "c" else np.float64, kind)
        return complex(x) if np.iscomplexobj(x) else float(x)
    return _drawn(rng, shape, dtype, kind)


def _broadcastable(shapes):
    try:
        np.broadcast_shapes(*[() if s == PY else s for s in shapes])
        return True
    except ValueError:
        return False


def _op_value(name, op, shapes, dtypes, kind):
    rng = rng_for(name)
    args = [_arg(rng, s, d, kind) for s, d in zip(shapes, dtypes)]
    if all(s == PY for s in shapes):
        return
    got, want = ours(lambda *xs: getattr(tnp, op)(*xs), *args), getattr(np, op)(*args)
    if np.asarray(want).dtype == bool:  # signbit, isclose: NumPy bools of the values, compared as numbers
        got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    close(op, got, want, value_tol(np.result_type(*dtypes), 10))


def _op_grad(name, op, shapes, dtype, kind, order, tol):
    rng = rng_for(name)
    args = [draw(rng, s, dtype, **_kind(kind)) for s in shapes]
    grads(lambda *xs: getattr(tnp, op)(*xs), args, order=order, rtol=tol or 1e-5, atol=tol or 1e-7)


def _special(name, op, value, order):
    grads(lambda x: getattr(tnp, op)(x), [np.array(value)], order=order)


def _reducer(name, op, shape, dtype, axis, keepdims, kind, grad):
    x = draw(rng_for(name), shape, dtype, **_kind(kind))
    got = ours(lambda y: getattr(tnp, op)(y, axis=axis, keepdims=keepdims), x)
    with np.errstate(all="ignore"):
        want = getattr(np, op)(x, axis=axis, keepdims=keepdims)
    close(op, got, want, value_tol(dtype, 10))
    if np.dtype(dtype) in (np.dtype(np.float64), np.dtype(np.complex128)) and x.size and (op not in ("max", "min", "amax", "amin") or dtype == np.float64):
        grads(lambda y: getattr(tnp, op)(y, axis=axis, keepdims=keepdims), [x], order=2)


def _einsum(name, subscripts, shapes, dtype):
    rng = rng_for(name)
    ops = [draw(rng, s, dtype) if np.dtype(dtype).kind != "b" else rng.rand(*s) > 0.5 for s in shapes]
    got = ours(lambda *xs: tnp.einsum(subscripts, *xs), *ops)
    if np.dtype(dtype).kind == "b":  # README: a bool einsum counts the true products
        close(subscripts, got, np.einsum(subscripts, *[o.astype(np.int64) for o in ops]), 0.0)
        return
    close(subscripts, got, np.einsum(subscripts, *ops), value_tol(dtype, 10))
    if np.dtype(dtype) in (np.dtype(np.float64), np.dtype(np.complex128)):
        grads(lambda *xs: tnp.einsum(subscripts, *xs), ops, order=2)


def _dask_shapes(subscripts):
    inputs = subscripts.split("->")[0].split(",")
    dims = itertools.cycle([2, 3, 4])
    sizes = defaultdict(lambda: next(dims))
    return [tuple(sizes[c] for c in names.replace("...", "01")) for names in inputs]


def cases() -> list[Case]:
    out: list[Case] = []

    def add(name, run):
        out.append(Case("jax", name, run))

    pairs = [(d, d) for d in INEXACT] + [(np.float32, np.float64), (np.float64, np.complex128),
                                         (np.float32, np.complex64), (np.complex64, np.float64)]
    for op, nargs, dtypes, kind, *only in ELEMENTWISE:
        for shapes in itertools.combinations_with_replacement(NONEMPTY[1:] if only else ALL_SHAPES, nargs):
            if not _broadcastable(shapes) or (op in ("kron", "outer") and PY in shapes):
                continue
            combos = (dtypes if isinstance(dtypes[0], tuple) else [(d,) for d in dtypes] if nargs == 1
                      else [p for p in pairs if set(p) <= set(dtypes)])
            for ds in combos:
                if any(s == PY and np.dtype(d) not in (np.dtype(np.float64), np.dtype(np.complex128))
                       for s, d in zip(shapes, ds)):
                    continue
                name = f"lax_numpy_operators_test.testOp[{op} {kind} {shapes} {[np.dtype(d).name for d in ds]}]"
                add(name, lambda name=name, op=op, shapes=shapes, ds=ds, kind=kind: _op_value(name, op, shapes, ds, kind))
    for op, nargs, order, kind, complex_too, tol in GRAD_OPS:
        for group in GRAD_SHAPES:
            for shapes in itertools.combinations_with_replacement(group, nargs):
                for dtype in [np.float64] + ([np.complex128] if complex_too else []):
                    name = f"lax_autodiff_test.testOpGrad[{op} {shapes} {np.dtype(dtype).name}]"
                    add(name, lambda name=name, op=op, shapes=shapes, dtype=dtype, kind=kind, order=order, tol=tol:
                        _op_grad(name, op, shapes, dtype, kind, order, tol))
    for op, values, order in SPECIAL_VALUES:
        for value in values:
            add(f"testOpGradSpecialValue[{op} {value}]", lambda op=op, value=value, order=order:
                _special("", op, value, order))
    for shapes in itertools.combinations_with_replacement(NONEMPTY, 2):
        if _broadcastable(shapes):
            add(f"lax_numpy_test.testGradLogaddexpComplex[{shapes}]", lambda: _raise(NotPorted(
                "a JAX extension: numpy.logaddexp has no complex loop, and tnp's is NumPy's")))
    for op, kind, empty_too in REDUCERS:
        for shape in NONEMPTY + (EMPTY if empty_too else []):
            for dtype, keepdims in itertools.product(INEXACT if op not in ("max", "min", "amax", "amin") else F + C,
                                                     [False, True]):
                for axis in list(range(-len(shape), len(shape))) + [None]:
                    name = f"lax_numpy_reducers_test.testReducer[{op} {shape} {np.dtype(dtype).name} axis={axis} keepdims={keepdims}]"
                    add(name, lambda name=name, op=op, shape=shape, dtype=dtype, axis=axis, keepdims=keepdims, kind=kind:
                        _reducer(name, op, shape, dtype, axis, keepdims, kind, True))
    for i, (subscripts, shapes) in enumerate(EINSUM):
        for dtype in (np.float64, np.complex128, np.float32):
            name = f"lax_numpy_einsum_test[{i}: {subscripts} {shapes} {np.dtype(dtype).name}]"
            add(name, lambda name=name, s=subscripts, shapes=shapes, dtype=dtype: _einsum(name, s, shapes, dtype))
    for subscripts in DASK:
        for dtype in (np.float32, np.int32, np.complex64, np.bool_, np.float64, np.complex128):
            name = f"lax_numpy_einsum_test.test_from_dask[{subscripts} {np.dtype(dtype).name}]"
            add(name, lambda name=name, s=subscripts, dtype=dtype: _einsum(name, s, _dask_shapes(s), dtype))
    return out
