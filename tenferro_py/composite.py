"""Composite primitives: a primitive defined by one function of session ops, its reference.

Its kernel runs the reference on arrays in a kernel session (one kernel: no tape, no per-op
dispatch); its JVP and VJP differentiate the same reference in the eager session they are
given. One formula is the fast first-order path and, differentiated, every higher order.

The sessions that run a reference on arrays (:class:`~tenferro_py.kernel_sessions.KernelSession`
and its tangent-carrying and recording kinds) need every op, linalg's included, so they live
above the op families, in :mod:`tenferro_py.kernel_sessions`, while the composites are defined
below them (the SVD's rules are composites). That module hands them to this one once, at its
import, by
:func:`use_kernel_sessions`: the one place where a lower layer is given something by a higher
one.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .rules import Primitive
from .structure import dense, flatten, unflatten

#: (the kernel session, the tangent kernel session's class, the recording one's): set before any
#: kernel runs, since importing any module of the package imports the package, which imports
#: kernel_sessions.
_kernel_sessions: tuple[Any, Callable[[Any], Any], Callable[[Sequence], Any]] = (None, None, None)

#: The shapes, dtypes and params a shape-determined composite keeps replays for, at most.
MAX_REPLAYS = 256


def use_kernel_sessions(kernel_session: Any, tangent_session_type: Callable[[Any], Any],
                        recording_session_type: Callable[[Sequence], Any]) -> None:
    """Give composites the sessions that run references on arrays: ``kernel_session`` (a
    KernelSession), ``tangent_session_type`` (TangentKernelSession, made from a rule set) and
    ``recording_session_type`` (RecordingKernelSession, made from the kernel's input arrays).
    Called once, by :mod:`tenferro_py.kernel_sessions` at its import (see this module's docstring)."""
    global _kernel_sessions
    _kernel_sessions = (kernel_session, tangent_session_type, recording_session_type)


def fused_jvp(s: Any, reference: Callable[..., Sequence], cost: Callable[..., float], primals: Sequence[Any],
              tangents: Sequence[Any], params: dict, out_avals: tuple, with_values: bool = False) -> tuple:
    """The tangents of ``reference(primals)``'s outputs along ``tangents`` (``with_values``: the outputs
    first, then their tangents), from one kernel bound in session ``s``: the reference run with
    its tangents in a tangent kernel session. The results are constants: only for where nothing
    will differentiate them."""
    leaves, spec = flatten(tangents)
    rules, count = s.runtime.ad_context, len(primals)

    def tangent_kernel(*arrays: np.ndarray) -> tuple:
        kernel_session, tangent_session_type, _ = _kernel_sessions
        ks = tangent_session_type(rules)
        for x, t in zip(arrays[:count], unflatten(spec, arrays[count:])):
            if t is not None:
                ks.seed(x, t)
        outs = tuple(reference(ks, *arrays[:count], **params))
        found = [ks.tangent(o) for o in outs]
        dots = tuple(np.zeros(o.shape, o.dtype) if t is None else dense(kernel_session, t) for o, t in zip(outs, found))
        return outs + dots if with_values else dots

    flops = (4.0 if with_values else 3.0) * cost(tuple(p.aval for p in primals), out_avals, params)
    prim = Primitive("jvp", lambda *avals: out_avals * (1 + with_values), tangent_kernel, lambda *_: flops)
    return s.bind(prim, *primals, *leaves)


def composite(reference: Callable[..., Sequence], cost: Callable[..., float],
              shape_determined: bool = False) -> dict[str, Callable]:
    """The kernel, rules and cost of a primitive defined by ``reference(s, *inputs, **params)``, a
    function of session ops returning the outputs: keyword arguments of ``RuleSet.define``.

    The kernel runs the reference on arrays in the kernel session: one kernel, with no tape and
    no per-op dispatch. ``shape_determined`` promises that the reference's ops, and the constants
    it makes, follow from its inputs' shapes and dtypes and its params alone (no value read in
    Python decides anything): its kernel then runs the reference once per (shapes, dtypes,
    params), writing its ops down, and later replays them (:class:`~tenferro_py.replay.Replay`); an array that no op
    and no constant made, or a structured value, leaves that run unreplayed. The rules
    differentiate the same reference in the eager session they are given (``s.jvp_of``,
    ``s.vjp_of``), so they are exact to every order and differentiable again. This is the one
    place where a composite's route is chosen: where nothing will differentiate a JVP's result
    (``runtime.differentiating`` is false), the JVP is one kernel too (:func:`fused_jvp`), which
    also gives the outputs' values when the runtime asks for both (``values_and_jvp``: the
    reference then runs once, not twice).
    """

    replays: dict = {}

    def kernel(*arrays: np.ndarray, **params: Any) -> tuple:
        if not shape_determined:
            return tuple(reference(_kernel_sessions[0], *arrays, **params))
        key = (tuple([(a.shape, a.dtype) for a in arrays]), tuple(sorted(params.items())))
        try:
            replay = replays.get(key, kernel)  # kernel: not run for these shapes yet
        except TypeError:  # a param that is no dictionary key
            replay = None
        if replay is kernel:
            recorder = _kernel_sessions[2](arrays)
            outs = tuple(reference(recorder, *arrays, **params))
            if len(replays) < MAX_REPLAYS:
                replays[key] = recorder.replay(outs)
            return outs
        if replay is None:  # not replayable for these shapes
            return tuple(reference(_kernel_sessions[0], *arrays, **params))
        return replay(arrays)

    def jvp(s, tangents, primals, outputs, **params):
        if s.runtime.differentiating:
            return s.jvp_of(lambda xs: reference(s, *xs, **params), primals, tangents)
        return fused_jvp(s, reference, cost, primals, tangents, params, tuple(o.aval for o in outputs))

    def values_and_jvp(s, tangents, primals, out_avals, **params):
        if s.runtime.differentiating:
            return None
        both = fused_jvp(s, reference, cost, primals, tangents, params, out_avals, with_values=True)
        return both[: len(out_avals)], both[len(out_avals) :]

    def vjp(s, cotangents, primals, outputs, needs, **params):
        return s.vjp_of(lambda xs: reference(s, *xs, **params), primals, cotangents, needs)

    return dict(impl=kernel, jvp=jvp, vjp=vjp, cost=cost, values_and_jvp=values_and_jvp)
