"""Primitive families of the core: elementwise arithmetic, shape ops and reductions (and the
stacks of :mod:`tenferro_py.batching`).

einsum and linalg have modules of their own (:mod:`tenferro_py.einsum`,
:mod:`tenferro_py.linalg`), each with its ``semantic_ad_rules()``.
"""

from .. import batching
from ..rules import RuleSet
from . import complex_parts, elementwise, extrema, reductions, structural


def core_rules() -> RuleSet:
    """The rules every context has: elementwise, shape ops, reductions and stacks (a new set on each call)."""
    return (RuleSet().merge(elementwise.RULES).merge(complex_parts.RULES).merge(extrema.RULES)
            .merge(structural.RULES).merge(reductions.RULES)
            .merge(batching.RULES))
