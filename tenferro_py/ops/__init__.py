"""Primitive families of the core: elementwise arithmetic and shape ops.

einsum and linalg have modules of their own (:mod:`tenferro_py.einsum`,
:mod:`tenferro_py.linalg`), each with its ``semantic_ad_rules()``.
"""

from . import elementwise, structural

#: The rules every context has: elementwise and shape ops.
CORE_RULES = elementwise.RULES.merge(structural.RULES)
