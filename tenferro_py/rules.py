"""The rule interface between the tape and the op families.

A :class:`Primitive` is an op's forward: shape inference with checks (``abstract``), a
NumPy kernel (``impl``), a cost estimate for the engine and, optionally, how it acts on
structured values (``structured``, see :mod:`tenferro_py.structure`). Its derivative rules
live in a :class:`RuleSet` under its name, so that a context can leave a family out (its
transforms then say "unsupported") or add a user's family.

Rule signatures (``s`` is the session the rule emits its ops into, so rules are themselves
differentiable; ``None`` stands for a symbolic zero):

``jvp(s, tangents, primals, outputs, **params) -> tuple of output tangents``
    ``tangents[i]`` is the tangent of ``primals[i]`` or None; at least one is set.

``vjp(s, cotangents, primals, outputs, needs, **params) -> tuple of input cotangents``
    ``cotangents[j]`` is the cotangent of ``outputs[j]`` or None; the result has one entry
    per primal, computed where ``needs[i]`` (others may be None).

Rules are written in session ops alone, so they may be handed structured tangents and
cotangents (a block inside zeros, a matrix kept as two factors): the ops keep the structure
where they can and make the value dense where they cannot. A rule that needs plain tensors
says so (``dense_only=True``), and is given them.

A **linear** primitive (``RuleSet.define_linear``, JAX's ``deflinear``) declares only its
transpose: its JVP is the primitive itself applied to the tangents, and its VJP the transpose.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from .errors import InvalidArgument

JvpRule = Callable[..., tuple]
VjpRule = Callable[..., tuple]


@dataclass(frozen=True, eq=False)
class Primitive:
    """An op's forward: checked shape inference, the NumPy kernel, its cost, its structured form.

    ``abstract(*avals, **params)`` returns the output avals (or raises a TenferroError
    naming the op); ``impl(*arrays, **params)`` returns the output arrays, always as a
    tuple. ``cost(in_avals, out_avals, params)`` estimates its work in flops (default:
    the number of output elements); a wide engine hands costly kernels to its workers.
    ``structured(s, *inputs, **params)``, where given, is the op on inputs of which some are
    structured values: it returns the outputs (structured or not), or NotImplemented to have
    the inputs made dense first.
    """

    name: str
    abstract: Callable[..., tuple]
    impl: Callable[..., tuple]
    cost: Callable[..., float] | None = None
    structured: Callable[..., Any] | None = None

    def flops(self, in_avals: tuple, out_avals: tuple, params: dict) -> float:
        """The op's cost for the scheduler: ``cost`` when given, else the outputs' size."""
        if self.cost is not None:
            return self.cost(in_avals, out_avals, params)
        return float(sum(math.prod(a.shape) for a in out_avals))

    def __repr__(self) -> str:
        return f"Primitive({self.name})"


@dataclass(frozen=True, eq=False)
class Rule:
    """A primitive's JVP and VJP rules; ``dense_only``: they take plain tensors only (structured
    tangents and cotangents are made dense first).

    ``values_and_jvp(s, tangents, primals, out_avals, **params)``, where given, computes the outputs'
    values with their tangents, as JAX's JVP rules do: the runtime asks it first when one forward
    trace carries the op and nothing records it (a composite then runs its reference once, not
    once for the values and again for the tangents). It returns (output tensors, their tangents),
    or None to decline.
    """

    jvp: JvpRule
    vjp: VjpRule
    dense_only: bool = False
    values_and_jvp: Callable[..., Any] | None = None


def vjp_from_linear_jvp(jvp: JvpRule) -> VjpRule:
    """The VJP rule of a primitive whose JVP is linear in the tangents: that JVP transposed.

    ȳ ↦ ∂/∂t Re⟨ȳ, jvp(t)⟩, taken by reverse mode through the JVP run on placeholder
    tangents (``s.transpose_linear``). The result is built from the session's ops, so it
    differentiates again where the JVP's ops do.
    """

    def vjp(s, cotangents, primals, outputs, needs, **params):
        return s.transpose_linear(lambda tangents: jvp(s, tangents, primals, outputs, **params),
                                  primals, cotangents, needs)

    return vjp


def ufunc_kernel(fn: Callable[..., Any]) -> Callable[..., tuple]:
    """The kernel of an elementwise op that is one NumPy function of its inputs: ``(fn(*xs),)``. It
    carries ``fn`` as ``direct``, which a replay (tenferro_py.replay) calls in its place."""

    kernel = lambda *xs: (fn(*xs),)  # noqa: E731 (a kernel, as the op families write theirs)
    kernel.direct = fn  # type: ignore[attr-defined]
    return kernel


class RuleSet:
    """Derivative rules by primitive name; :meth:`merge` adds another set's rules in place."""

    __slots__ = ("_rules",)

    def __init__(self, rules: Mapping[str, Rule] | None = None):
        self._rules: dict[str, Rule] = dict(rules or {})

    def define(
        self,
        name: str,
        abstract: Callable[..., tuple],
        impl: Callable[..., tuple],
        jvp: JvpRule,
        vjp: VjpRule,
        cost: Callable[..., float] | None = None,
        structured: Callable[..., Any] | None = None,
        dense_only: bool = False,
        values_and_jvp: Callable[..., Any] | None = None,
    ) -> Primitive:
        """Make a primitive and register its rules here: forward and rules in one place.

        ``structured``: see :class:`Primitive`; ``dense_only`` and ``values_and_jvp``: see :class:`Rule`.
        """
        if name in self._rules:
            raise InvalidArgument("RuleSet.define", "a new primitive name", f"{name!r} twice")
        self._rules[name] = Rule(jvp, vjp, dense_only, values_and_jvp)
        return Primitive(name, abstract, impl, cost, structured)

    def define_linear(
        self,
        name: str,
        abstract: Callable[..., tuple],
        impl: Callable[..., tuple],
        transpose: VjpRule,
        cost: Callable[..., float] | None = None,
        structured: Callable[..., Any] | None = None,
    ) -> Primitive:
        """A primitive linear in its inputs (jointly), from its transpose: its JVP is the primitive
        applied to the tangents (zeros where an input has none) and its VJP is
        ``transpose(s, cotangents, primals, needs, **params)``, the adjoint under Re⟨·,·⟩."""
        prim: Primitive

        def jvp(s, tangents, primals, outputs, **params):
            ts = [t if t is not None else s.zeros(p.shape, p.dtype) for t, p in zip(tangents, primals)]
            return s.bind(prim, *ts, **params)

        def vjp(s, cotangents, primals, outputs, needs, **params):
            return transpose(s, cotangents, primals, needs, **params)

        prim = self.define(name, abstract, impl, jvp, vjp, cost, structured)
        return prim

    def merge(self, other: "RuleSet") -> "RuleSet":
        """Add ``other``'s rules to this set, in place (as tenferro's ``merge``), and return this set.

        One name with two different rules is an error, and then nothing is added.
        """
        if not isinstance(other, RuleSet):
            raise InvalidArgument("RuleSet.merge", "a RuleSet", type(other).__name__)
        for name, rule in other._rules.items():
            if self._rules.get(name, rule) is not rule:
                raise InvalidArgument("RuleSet.merge", "disjoint rule sets", f"two rules for {name!r}")
        self._rules.update(other._rules)
        return self

    def copy(self) -> "RuleSet":
        """A new set with the same rules: later merges into either leave the other as it is."""
        return RuleSet(self._rules)

    def get(self, name: str) -> Rule | None:
        """The rule of the primitive named name, or None."""
        return self._rules.get(name)

    def names(self) -> Iterable[str]:
        """The names of the primitives with a rule here, sorted."""
        return tuple(sorted(self._rules))

    def __contains__(self, name: object) -> bool:
        return name in self._rules

    def __len__(self) -> int:
        return len(self._rules)

    def __repr__(self) -> str:
        return f"RuleSet({', '.join(self.names())})"
