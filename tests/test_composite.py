"""Composites (tenferro_py/composite.py): a primitive whose kernel is a reference of session ops
run on arrays in a kernel session, which opset hands over at its import."""

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py import composite as composite_module
from tenferro_py.composite import composite
from tenferro_py.rules import RuleSet
from tenferro_py.testing import check_grads


def negated_square(s, x):
    return (s.neg(s.mul(x, x)),)


def test_a_composite_runs_its_reference_as_one_kernel_and_differentiates_it():
    rules = RuleSet()
    prim = rules.define("negated_square", lambda x: (x,), **composite(negated_square, lambda *args: 1.0))
    a = np.array([0.5, -2.0, 3.0])
    np.testing.assert_array_equal(prim.impl(a)[0], -a * a)
    context = tf.AdContext.builder().with_semantic_extension_rules(rules).build()
    check_grads(lambda s, x: s.bind(prim, x)[0], [a], context=context)


def test_a_composite_run_before_opset_hands_over_its_sessions_says_so(monkeypatch):
    monkeypatch.setattr(composite_module, "_kernel_sessions", None)
    kernel = composite(negated_square, lambda *args: 1.0)["impl"]
    with pytest.raises(tf.Unsupported, match=r"^composite: expected tenferro_py\.opset imported first"):
        kernel(np.ones(2))
