"""JAX-style function transforms on the eager runtime: grad, value_and_grad, jvp, vjp, hvp.

At top level a transform opens a session of its own (a fresh runtime; ``engine`` or a serial
one), runs the function on NumPy data made tracked, differentiates, and returns NumPy arrays.
Inside a session (``tnp.session()``, ``with_eager_session``, or another transform) it works on
that session's runtime and returns arrays of the session, themselves differentiable: so
``grad(grad(f))`` and ``jvp(grad(f), …)`` are higher derivatives. An argument that is already
tracked enters as a recorded copy, so that derivatives with respect to it are taken through
that argument alone (no perturbation confusion with a closure over the same value).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Hashable, Iterator, Sequence

import numpy as np

from ..engine import CpuEngine
from ..errors import DTypeMismatch, InvalidArgument, NonScalarGrad, ShapeMismatch
from ..runtime import EagerRuntime, current_session
from ..session import EagerSession
from ..tape import EagerTensor
from ..tensor import Tensor
from ..testing import check_grads as _check_session_grads
from ..traced import Traced, static_key
from .array import host_dtype, is_weak, lift, ndarray, wrap

__all__ = ["check_grads", "grad", "hvp", "jvp", "session", "value_and_grad", "vjp"]


@contextlib.contextmanager
def session(engine: CpuEngine | None = None, runtime: EagerRuntime | None = None) -> Iterator[EagerSession]:
    """A session for NumPy-style code: ``with tnp.session(): ...`` (serial engine, fresh runtime by default).

    Inside, tnp's functions and operators record on its tape, and transforms return arrays of
    it instead of NumPy data.
    """
    rt = runtime if runtime is not None else EagerRuntime()
    with rt.session(engine if engine is not None else CpuEngine.serial()) as s:
        yield s


def _argnums(op: str, argnums: Any, count: int) -> tuple[tuple[int, ...], bool]:
    """(the differentiated positions, whether one was asked for as an int)."""
    single = isinstance(argnums, (int, np.integer))
    nums = (argnums,) if single else tuple(argnums)
    if not nums or any(not isinstance(i, (int, np.integer)) or not -count <= i < count for i in nums):
        raise InvalidArgument(op, f"argnums among the {count} arguments", repr(argnums))
    return tuple(int(i) % count for i in nums), single


def _entered(s: EagerSession, x: Any) -> EagerTensor:
    """A differentiated argument as a tracked tensor of s: a recorded copy of a tracked one, a
    fresh variable of anything else."""
    if isinstance(x, ndarray):
        x = x.tensor
    if isinstance(x, EagerTensor) and x.is_tracked:
        return s.scale_real(x, 1.0)
    value = x.value().to_numpy() if isinstance(x, EagerTensor) else np.asarray(x, dtype=host_dtype(x))
    return s.runtime.variable_from(Tensor(value))


def _run(body: Callable[[EagerSession, bool], Any]) -> Any:
    """body(session, nested) in the running session, or in one of its own."""
    s = current_session()
    if s is not None:
        return body(s, True)
    with session() as s:
        return body(s, False)


def _sweep(s: EagerSession, nested: bool) -> Any:
    """The mode of a reverse sweep: recorded inside a session (its results differentiate again),
    not at top level, where nothing will (the sweep then holds no cotangent past its use)."""
    return contextlib.nullcontext() if nested else s.runtime.no_grad()


def _out(op: str, s: EagerSession, y: Any) -> EagerTensor:
    if isinstance(y, (tuple, list)):
        raise InvalidArgument(op, "a function returning one array", f"a {type(y).__name__} of {len(y)}")
    return lift(s, y)


def _checked_dtype(op: str, what: str, x: Any, dtype: np.dtype) -> np.dtype:
    """``dtype``, the one a tangent or cotangent x must have (a Python number takes it, unless a
    complex one for a real value); a mismatch is refused, not cast (a cast drops an imaginary part)."""
    if is_weak(x):
        fits, given = not (isinstance(x, complex) and dtype.kind != "c"), type(x).__name__
    else:
        fits, given = host_dtype(x) == dtype, str(x.dtype if isinstance(x, ndarray) else np.asarray(x).dtype)
    if not fits:
        raise DTypeMismatch(op, f"{what} dtype {dtype}", given)
    return dtype


def _result(x: Any, nested: bool) -> Any:
    """An array of the session inside one; NumPy data at top level."""
    if nested:
        return wrap(x) if isinstance(x, EagerTensor) else x
    return x.value().to_numpy() if isinstance(x, EagerTensor) else x


def value_and_grad(f: Callable[..., Any], argnums: Any = 0, *, argnum: Any = None, replay: bool = True
                   ) -> Callable[..., tuple[Any, Any]]:
    """f's value and its gradient with respect to the arguments at ``argnums`` (``argnum``, as
    autograd spells it), for f returning a real scalar; keyword arguments pass to f, not
    differentiated (as JAX). The gradient of complex arguments is ∂L/∂Re z + i ∂L/∂Im z
    (docs/complex.md: the complex convention).

    At top level, calls with the same shapes, dtypes and static arguments replay the kernels that
    two agreeing calls recorded, with the same bits, wherever that is safe (docs/traced.md);
    ``replay=False`` runs every call for real."""
    wanted = argnum if argnum is not None else argnums
    traced = Traced(f) if replay else None

    def gradients(s: EagerSession, nested: bool, args: tuple, kwargs: dict, nums: tuple, entered: list) -> tuple:
        xs = list(args)
        for i, x in zip(nums, entered):
            xs[i] = wrap(x)
        y = _out("grad", s, f(*xs, **kwargs))
        if y.shape != () or y.dtype.kind == "c":
            raise NonScalarGrad("grad", "a function returning a real scalar", f"shape {list(y.shape)} {y.dtype}")
        with _sweep(s, nested):
            grads = s.runtime.grad_optional(s.engine, y, entered) if y.is_tracked else [None] * len(entered)
        return y, [g if g is not None else s.zeros(w.shape, w.dtype) for g, w in zip(grads, entered)]

    def transformed(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        nums, single = _argnums("grad", wanted, len(args))

        def shaped(y: Any, grads: Sequence[Any]) -> tuple[Any, Any]:
            return y, (grads[0] if single else tuple(grads))

        if traced is not None and current_session() is None:
            key = _replay_key(args, kwargs, nums)
            if key is not None:
                tensors = [_input_tensor(args[i]) for i in nums]

                def run(recorder: Any) -> tuple[Any, list]:
                    rt = EagerRuntime()
                    with session(runtime=rt) as s, rt.record(recorder):
                        y, grads = gradients(s, False, args, kwargs, nums, [rt.variable_from(t) for t in tensors])
                    outs = [y, *grads]
                    return shaped(*_numpy_results(outs)), [o.payload for o in outs]

                def finish(arrays: Sequence[np.ndarray]) -> tuple[Any, Any]:
                    return shaped(np.array(arrays[0]), [np.array(a) for a in arrays[1:]])

                return traced.call(key + (tuple((t.array.shape, t.array.dtype.str, t.array.strides) for t in tensors),),
                                   [t.array for t in tensors], run, finish)

        def body(s: EagerSession, nested: bool) -> tuple[Any, Any]:
            y, grads = gradients(s, nested, args, kwargs, nums, [_entered(s, args[i]) for i in nums])
            return shaped(_result(y, nested), [_result(g, nested) for g in grads])

        return _run(body)

    transformed.traced = traced  # type: ignore[attr-defined]  (its programs: tenferro_py.traced.Traced)
    return transformed


def _input_tensor(x: Any) -> Tensor:
    """A differentiated argument's value as the Tensor a real run makes a variable of."""
    return Tensor(np.asarray(x, dtype=host_dtype(x)))


def _numpy_results(outs: Sequence[EagerTensor]) -> tuple[Any, list]:
    return outs[0].value().to_numpy(), [g.value().to_numpy() for g in outs[1:]]


def _replay_key(args: tuple, kwargs: dict, nums: tuple) -> tuple | None:
    """The static part of a call's key (its other arguments by value), or None where a call cannot
    be replayed: an argument that is no NumPy data, number or string (a tnp array of a session, an
    object whose state may change)."""
    try:
        return (nums, tuple(static_key(a) if i not in nums else _differentiated(a) for i, a in enumerate(args)),
                tuple((k, static_key(v)) for k, v in sorted(kwargs.items())))
    except TypeError:
        return None


def _differentiated(x: Any) -> Hashable:
    if isinstance(x, (ndarray, EagerTensor)):
        raise TypeError("an array of a session")
    return None


def grad(f: Callable[..., Any], argnums: Any = 0, *, argnum: Any = None, replay: bool = True) -> Callable[..., Any]:
    """The gradient of f (a real scalar) with respect to the arguments at ``argnums`` (``replay``:
    as :func:`value_and_grad`'s)."""
    both = value_and_grad(f, argnums, argnum=argnum, replay=replay)

    def gradient(*args: Any, **kwargs: Any) -> Any:
        return both(*args, **kwargs)[1]

    gradient.traced = both.traced  # type: ignore[attr-defined]
    return gradient


def jvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    """(f(*primals), its derivative along ``tangents``): forward mode. ``primals`` and
    ``tangents`` are tuples (or lists), one entry per argument of f, a tangent of its primal's
    shape and dtype."""
    for what, given in (("primals", primals), ("tangents", tangents)):
        if not isinstance(given, (tuple, list)):
            raise InvalidArgument("jvp", f"{what} as a tuple, one per argument of f (e.g. (x,))", type(given).__name__)
    if len(primals) != len(tangents):
        raise InvalidArgument("jvp", f"one tangent per primal ({len(primals)})", f"{len(tangents)}")

    def body(s: EagerSession, nested: bool) -> tuple[Any, Any]:
        xs = [_entered(s, p) for p in primals]
        y = _out("jvp", s, f(*[wrap(x) for x in xs]))
        dtypes = [x.dtype for x in xs]
        ts = [lift(s, t, _checked_dtype("jvp", "a tangent of its primal's", t, d)) for t, d in zip(tangents, dtypes)]
        for t, x in zip(ts, xs):
            if t.shape != x.shape:
                raise InvalidArgument("jvp", f"a tangent of its primal's shape {list(x.shape)}", f"{list(t.shape)}")
        dy = s.runtime.jvp_optional(s.engine, y, xs, ts) if y.is_tracked else None
        if dy is None:
            dy = s.zeros(y.shape, y.dtype)
        return _result(y, nested), _result(dy, nested)

    return _run(body)


def vjp(f: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[[Any], tuple]]:
    """(f(*primals), pullback): pullback(ȳ) is the tuple of cotangents of the primals, the
    adjoint of the JVP under Re⟨·,·⟩; ȳ has the output's shape and dtype. Called inside a
    session of its runtime, the pullback gives arrays of it; anywhere else (after the transform
    that made it returned too: it keeps the tape it needs), NumPy data."""

    def body(s: EagerSession, nested: bool) -> tuple[Any, Callable[[Any], tuple]]:
        rt = s.runtime
        xs = [_entered(s, p) for p in primals]
        y = _out("vjp", s, f(*[wrap(x) for x in xs]))

        def pullback(ct: Any) -> tuple:
            def pull(s2: EagerSession, inner: bool) -> tuple:
                cot = lift(s2, ct, _checked_dtype("vjp", "a cotangent of the output's", ct, y.dtype))
                if cot.shape != y.shape:
                    raise ShapeMismatch("vjp", f"a cotangent of the output's shape {list(y.shape)}",
                                        f"{list(cot.shape)}")
                with _sweep(s2, inner):
                    cts = rt.vjp_optional(s2.engine, y, xs, cot) if y.is_tracked else [None] * len(xs)
                return tuple(_result(c if c is not None else s2.zeros(x.shape, x.dtype), inner)
                             for c, x in zip(cts, xs))

            inner_session = current_session()
            if inner_session is not None and inner_session.runtime is rt:
                return pull(inner_session, True)
            with rt.session(s.engine if nested else CpuEngine.serial()) as s2:
                return pull(s2, False)

        return _result(y, nested), pullback

    return _run(body)


def hvp(f: Callable[..., Any], x: Any, v: Any) -> Any:
    """The Hessian of f (a real scalar) at x times v: forward mode over the gradient."""
    return jvp(grad(f), (x,), (v,))[1]


def check_grads(f: Callable[..., Any], args: Sequence[Any], modes: Sequence[str] = ("fwd", "rev"), order: int = 2,
                **options: Any) -> None:
    """:func:`tenferro_py.testing.check_grads` for a NumPy-style ``f(*arrays) -> array``: its JVP
    and VJP against central differences, to ``order``, with respect to every argument."""
    _check_session_grads(lambda s, *xs: lift(s, f(*[wrap(x) for x in xs])), [np.asarray(a) for a in args],
                         modes, order, **options)
