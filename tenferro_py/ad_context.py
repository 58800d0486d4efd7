"""AdContext: which rules and which ε a runtime differentiates with (a runtime's, shared by those made with it)."""

from __future__ import annotations

from typing import Any

from . import einsum as _einsum
from . import linalg as _linalg
from .errors import InvalidArgument, Unsupported
from .ops import core_rules
from .rules import RuleSet


class AdContext:
    """The AD rule set and options that runtimes made with it share.

    ``AdContext()`` has every rule of the library; ``AdContext.builder()`` starts from the
    core (elementwise and shape ops) and adds rule sets such as
    ``tenferro_py.linalg.semantic_ad_rules()``. The context keeps its own copy of the rules
    it is given: merging more into that set later changes no context already built.
    """

    __slots__ = ("_rules", "_by_name", "_derivative_eps")

    def __init__(self, rules: RuleSet | None = None, derivative_eps: float = _linalg.DEFAULT_DERIVATIVE_EPS):
        if rules is None:
            rules = core_rules().merge(_einsum.semantic_ad_rules()).merge(_linalg.semantic_ad_rules())
        if not isinstance(rules, RuleSet):
            raise InvalidArgument("AdContext", "a RuleSet", type(rules).__name__)
        self._rules = rules.copy()
        self._by_name = {name: self._rules.get(name) for name in self._rules.names()}
        self._derivative_eps = _linalg.check_derivative_eps("AdContext", derivative_eps)

    @staticmethod
    def builder() -> "AdContextBuilder":
        """A builder, as Rust's ``AdContext::builder()``."""
        return AdContextBuilder()

    @property
    def rules(self) -> RuleSet:
        """A copy of the context's rules."""
        return self._rules.copy()

    def get(self, name: str) -> Any:
        """The rules of the primitive called ``name``, or None."""
        return self._by_name.get(name)

    def rule(self, prim: Any, transform: str) -> Any:
        """The rules of ``prim`` (what the sweeps ask), or Unsupported naming it and the transform
        (``"jvp"``, ``"vjp"``) that needed them."""
        found = self._by_name.get(prim.name)
        if found is None:
            raise Unsupported(transform, f"an AD rule for {prim.name!r} in the runtime's AdContext", "none")
        return found

    @property
    def derivative_eps(self) -> float:
        """ε of the broadened SVD rule (default 1e-12)."""
        return self._derivative_eps

    def __repr__(self) -> str:
        return f"AdContext({self._rules!r}, derivative_eps={self._derivative_eps!r})"


class AdContextBuilder:
    """Builder of an :class:`AdContext`, as tenferro's ``AdContext::builder()``."""

    __slots__ = ("_rules", "_eps")

    def __init__(self) -> None:
        self._rules = core_rules()
        self._eps: float = _linalg.DEFAULT_DERIVATIVE_EPS

    def with_semantic_extension_rules(self, rules: RuleSet) -> "AdContextBuilder":
        """Add a family's rules (for example ``tenferro_py.linalg.semantic_ad_rules()``)."""
        self._rules.merge(rules)
        return self

    def with_derivative_eps(self, eps: float) -> "AdContextBuilder":
        """Set ε of the broadened SVD rule: a finite number > 0."""
        self._eps = _linalg.check_derivative_eps("AdContext.with_derivative_eps", eps)
        return self

    def build(self) -> AdContext:
        """The context, with a copy of the rules given."""
        return AdContext(self._rules, self._eps)
