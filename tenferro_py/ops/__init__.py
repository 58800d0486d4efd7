"""Primitive families of the core: elementwise arithmetic, shape ops and reductions.

einsum and linalg have modules of their own (:mod:`tenferro_py.einsum`,
:mod:`tenferro_py.linalg`), each with its ``semantic_ad_rules()``.
"""

from ..rules import RuleSet
from . import elementwise, reductions, structural


def core_rules() -> RuleSet:
    """The rules every context has: elementwise, shape ops and reductions (a new set on each call)."""
    return RuleSet().merge(elementwise.RULES).merge(structural.RULES).merge(reductions.RULES)
