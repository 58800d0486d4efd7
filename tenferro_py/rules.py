"""The rule interface between the tape and the op families.

A :class:`Primitive` is an op's forward: shape inference with checks (``abstract``)
and a NumPy kernel (``impl``). Its derivative rules live in a :class:`RuleSet`
under its name, so a context can leave a family out (its transforms then say
"unsupported") or add a user's family.

Rule signatures (``s`` is the session the rule emits ops into, so rules are
themselves differentiable; ``None`` stands for a symbolic zero):

``jvp(s, tangents, primals, outputs, **params) -> tuple of output tangents``
    ``tangents[i]`` is the tangent of ``primals[i]`` or None; at least one is set.

``vjp(s, cotangents, primals, outputs, needs, **params) -> tuple of input cotangents``
    ``cotangents[j]`` is the cotangent of ``outputs[j]`` or None; the result has
    one entry per primal, computed only where ``needs[i]``.

Forward mode knows which parts of each tangent are used downstream: an
*extent* is a box, one (start, stop) per axis, or None for an unused output.
A rule may declare ``demand(out_extents, primals, **params) -> in_extents``
(what of its inputs it reads; by default all of every input) and may ask for
the extents of its outputs (``jvp_extents``), then called as
``jvp(s, tangents, primals, outputs, extents, **params)``; its tangents must be
right inside those boxes and may be anything (zero, say) outside.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from .errors import InvalidArgument
from .tape import densify, reverse_sweep, tensor_key
from .tensor import Tensor

JvpRule = Callable[..., tuple]
VjpRule = Callable[..., tuple]


@dataclass(frozen=True, eq=False)
class Primitive:
    """An op's forward: checked shape inference and the NumPy kernel.

    ``abstract(*avals, **params)`` returns the output avals (or raises a
    TenferroError naming the op); ``impl(*arrays, **params)`` returns the output
    arrays, always as a tuple. ``cost(in_avals, out_avals, params)`` estimates
    its work in flops (default: the number of output elements); a wide engine
    hands costly kernels to its workers and runs cheap ones in place.
    """

    name: str
    abstract: Callable[..., tuple]
    impl: Callable[..., tuple]
    cost: Callable[..., float] | None = None

    def flops(self, in_avals: tuple, out_avals: tuple, params: dict) -> float:
        if self.cost is not None:
            return self.cost(in_avals, out_avals, params)
        return float(sum(math.prod(a.shape) for a in out_avals))

    def __repr__(self) -> str:
        return f"Primitive({self.name})"


@dataclass(frozen=True, eq=False)
class Rule:
    """A primitive's JVP and VJP rules.

    ``embedded_cotangents``: the VJP accepts :class:`~tenferro_py.tape.Embedded`
    cotangents (a block inside zeros, as a slice's VJP makes) and exploits them;
    other rules get them made dense first. ``factored_tangents``: likewise, the
    JVP accepts :class:`~tenferro_py.tape.Product` tangents (a matrix as two
    unmultiplied factors, as the SVD's JVP makes) and passes them on. ``demand``
    and ``jvp_extents``: see the module's docstring.
    """

    jvp: JvpRule
    vjp: VjpRule
    embedded_cotangents: bool = False
    demand: Callable[..., tuple] | None = None
    jvp_extents: bool = False
    factored_tangents: bool = False


def vjp_from_linear_jvp(jvp: JvpRule) -> VjpRule:
    """The VJP rule of a primitive whose JVP is linear in the tangents: that JVP transposed.

    It runs the JVP on placeholder tangents (fresh variables, recorded even under
    ``no_grad``) and takes reverse mode through it, in the rule's own session:
    ȳ ↦ ∂/∂t Re⟨ȳ, jvp(t)⟩. The result is built from that session's ops, so it
    differentiates again where the JVP's ops do.
    """

    def vjp(s, cotangents, primals, outputs, needs, **params):
        rt = s.runtime
        with rt.enable_grad():  # the placeholders' graph is needed under no_grad too
            placeholders = [rt.variable_from(s.zeros(p.shape, p.dtype)) for p in primals]
            tangents = jvp(s, placeholders, primals, outputs, **params)
            pairing = None
            for t, ct in zip(tangents, cotangents):
                if t is not None and ct is not None:
                    term = s.reduce_sum(s.mul(s.conj(ct), t))
                    term = s.real(term) if term.dtype.kind == "c" else term
                    pairing = term if pairing is None else s.add(pairing, term)
        wanted = [x for x, need in zip(placeholders, needs) if need]
        if pairing is None or not wanted:
            return tuple(None for _ in primals)
        # Swept in this session, so the result is recorded, or carries a tangent, as the session's ops do.
        cts, _ = reverse_sweep(s, rt.ad_context.rules, [(pairing, s.constant_from(Tensor.scalar(1.0, pairing.dtype)))],
                               wanted)
        found = iter(densify(s, cts[tensor_key(x)]) if tensor_key(x) in cts else None for x in wanted)
        return tuple(next(found) if need else None for need in needs)

    return vjp


class RuleSet:
    """Derivative rules by primitive name; sets combine with :meth:`merge`."""

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
        embedded_cotangents: bool = False,
        cost: Callable[..., float] | None = None,
        demand: Callable[..., tuple] | None = None,
        jvp_extents: bool = False,
        factored_tangents: bool = False,
    ) -> Primitive:
        """Make a primitive and register its rules here: forward and rules in one place."""
        if name in self._rules:
            raise InvalidArgument("RuleSet.define", "a new primitive name", f"{name!r} twice")
        self._rules[name] = Rule(jvp, vjp, embedded_cotangents, demand, jvp_extents, factored_tangents)
        return Primitive(name, abstract, impl, cost)

    def merge(self, other: "RuleSet") -> "RuleSet":
        """A new set with the rules of both; one name with two different rules is an error."""
        if not isinstance(other, RuleSet):
            raise InvalidArgument("RuleSet.merge", "a RuleSet", type(other).__name__)
        merged = dict(self._rules)
        for name, rule in other._rules.items():
            if merged.get(name, rule) is not rule:
                raise InvalidArgument("RuleSet.merge", "disjoint rule sets", f"two rules for {name!r}")
            merged[name] = rule
        return RuleSet(merged)

    def get(self, name: str) -> Rule | None:
        return self._rules.get(name)

    def names(self) -> Iterable[str]:
        return tuple(sorted(self._rules))

    def __contains__(self, name: object) -> bool:
        return name in self._rules

    def __len__(self) -> int:
        return len(self._rules)

    def __repr__(self) -> str:
        return f"RuleSet({', '.join(self.names())})"
