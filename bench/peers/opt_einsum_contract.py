"""opt_einsum's contract tests against tnp.einsum: the expressions of opt_einsum's
tests/test_contract.py (read from the installed package, with its own ``build_views`` operands),
its broadcasting, ellipsis, singleton and interleaved-input cases (tests/test_edge_cases.py,
tests/test_input.py), random equations (``rand_equation``) and the malformed inputs it refuses.
Values against numpy.einsum; derivatives by check_grads (order 2 in float64, 1 in complex128).
"""

from __future__ import annotations

import numpy as np

import tenferro_py.numpy as tnp

from tenferro_py.errors import InvalidArgument

from .harness import Case, Missing, WrongValue, close, grads, ours, rng_for

NUMPY_OPTIMIZE = [False, True, "greedy", "optimal"]

BROADCASTING = [  # tests/test_edge_cases.py, tests/test_input.py
    ("ijk,kl,jl", [(1, 5, 4), (4, 6), (5, 6)]),
    ("ijk,kl,jl,i->i", [(1, 5, 4), (4, 6), (5, 6), (10,)]),
    ("abjk,kl,jl", [(1, 1, 5, 4), (4, 6), (5, 6)]),
    ("abjk,kl,jl,ab->ab", [(1, 1, 5, 4), (4, 6), (5, 6), (7, 7)]),
    ("ajk,kbl,jl,ab->ab", [(1, 5, 4), (4, 1, 6), (5, 6), (7, 7)]),
    ("obk,ijk->ioj", [(2, 4, 8), (2, 4, 8)]),
    ("ab,bc,bd->acd", [(5, 4), (1, 5), (4, 20)]),
    ("ij,ij->j", [(10, 2), (1, 2)]),
    ("...ij,...jk->...ik", [(1, 5), (5, 5)]),
    ("...ij,...jk->...ik", [(1, 5), (1, 5)]),
]
ELLIPSIS = ["...a->...", "a...->...", "a...a->...a", "...,...", "a,b", "...a,...b"]
ASSUMED_SHAPES = [(",,->", (5, 5.0, 2.0j)), ("ab,->", ([[5, 5], [2.0, 1]], 2.0j)),
                  ("ab,bc->ac", ([[5, 5], [2.0, 1]], [[2.0, 1], [3.0, 4]])), ("ab,->", ([[5, 5], [2.0, 1]], True))]
# tests/test_input.py test_value_errors: (subscripts, operands), each a ValueError for NumPy and opt_einsum
VALUE_ERRORS = [("", ()), ("i%...", ([0, 0],)), ("...j$", ([0, 0],)), ("i->&", ([0, 0],)), ("", (0, 0)),
                (",", (0, [0], [0])), (",", ([0],)), ("i", (0,)), ("ij", ([0, 0],)), ("...i", (0,)),
                ("i...j", ([0, 0],)), ("i...", (0,)), ("ij...", ([0, 0],)), ("i..", ([0, 0],)), (".i...", ([0, 0],)),
                ("j->..j", ([0, 0],)), ("j->.j...", ([0, 0],)), ("i->ij", ([0, 0],)), ("ij->jij", ([[0, 0], [0, 0]],)),
                ("ii", (np.arange(6).reshape(2, 3),)), ("ii->i", (np.arange(6).reshape(2, 3),)),
                ("i", (np.arange(6).reshape(2, 3),))]


def _views(string, dims=None, complex_=False, seed=""):
    """Random operands as opt_einsum's build_views draws them ('...' as two axes, as its test_input's)."""
    from opt_einsum.testing import build_shapes

    rng = rng_for(string + seed)
    shapes = build_shapes(string.replace("...", "ij"), dims) if dims else build_shapes(string.replace("...", "ij"))
    return [rng.rand(*s) + (1j * rng.rand(*s) if complex_ else 0) for s in shapes]


def _contract(name, string, views, optimize=None, order=2, reference=None):
    kwargs = {} if optimize is None else {"optimize": optimize}
    got = ours(lambda *xs: tnp.einsum(string, *xs, **kwargs), *views)
    close(string, got, np.einsum(reference or string, *views), 1e-12)
    if order:
        grads(lambda *xs: tnp.einsum(string, *xs, **kwargs), views, order=order)


def _greek(string):
    return "".join(chr(ord(c) + 848) if c not in ",->." else c for c in string)


def _interleaved_form(run):
    """NumPy's interleaved einsum(x, labels, y, labels, ..., out): tnp.einsum takes subscripts only."""
    def case():
        try:
            run()
        except InvalidArgument as err:
            if "subscripts as a str" in str(err):
                raise Missing("tnp.einsum's interleaved form einsum(x, [0, 1], y, [1, 2], ...)") from None
            raise
    return case


def _interleaved(name):
    rng = rng_for(name)
    x, y, z = (rng.randn(2, 2) for _ in "xyz")
    expected = np.einsum(x, [0, 1], y, [1, 2], z, [2, 3], [3, 0])
    close("interleaved", ours(lambda a, b, c: tnp.einsum(a, [0, 1], b, [1, 2], c, [2, 3], [3, 0]), x, y, z),
          expected, 1e-12)
    v = _views("...b,...a")
    close("ellipsis interleaved", ours(lambda a, b: tnp.einsum(a, [Ellipsis, 1], b, [Ellipsis, 0], [Ellipsis]), *v),
          np.einsum("...b,...a->...", *v), 1e-12)


def _large_int(name):
    x, y, z = _views("ab,bc,cd")
    got = ours(lambda a, b, c: tnp.einsum(a, (1000, 1001), b, (1001, 1002), c, (1002, 1003)), x, y, z)
    close("large int labels", got, np.einsum("ab,bc,cd", x, y, z), 1e-12)


def _value_error(name, subscripts, operands):
    try:
        ours(lambda *xs: tnp.einsum(subscripts, *xs), *operands)
    except ValueError:
        return
    raise WrongValue(f"einsum({subscripts!r}, ...) gave a value where NumPy and opt_einsum raise ValueError")


def _assumed(name, expression, operands):
    got = ours(lambda *xs: tnp.einsum(expression, *xs), *[np.asarray(o) for o in operands])
    close(expression, got, np.einsum(expression, *operands), 1e-12)


def cases() -> list[Case]:
    from opt_einsum.testing import rand_equation
    from opt_einsum.tests.test_contract import tests as expressions

    out = []

    def add(name, run):
        out.append(Case("opt_einsum", name, run))

    for string in expressions:
        add(f"test_drop_in_replacement[{string}]", lambda s=string: _contract("", s, _views(s)))
        add(f"test_drop_in_replacement[{string} complex128]",
            lambda s=string: _contract("", s, _views(s, complex_=True), order=1))
        add(f"test_compare_greek[{string}]", lambda s=string: _contract("", _greek(s), _views(s), order=0, reference=s))
        for optimize in NUMPY_OPTIMIZE:
            add(f"test_compare[{string} optimize={optimize}]",
                lambda s=string, o=optimize: _contract("", s, _views(s), optimize=o, order=0))
    for string, shapes in BROADCASTING:
        def run(s=string, shapes=shapes):
            rng = rng_for(s + str(shapes))
            _contract("", s, [rng.rand(*sh) for sh in shapes])
        add(f"test_broadcasting_contraction[{string} {shapes}]", run)
    for string in ELLIPSIS:
        add(f"test_input.test_compare[{string}]", lambda s=string: _contract("", s, _views(s)))
    for expression, operands in ASSUMED_SHAPES:
        add(f"test_contract_with_assumed_shapes[{expression} {operands}]",
            lambda e=expression, o=operands: _assumed("", e, o))
    add("test_contract_expression_interleaved_input+test_ellipse_input4",
        _interleaved_form(lambda: _interleaved("interleaved")))
    add("test_large_int_input_format", _interleaved_form(lambda: _large_int("")))
    for subscripts, operands in VALUE_ERRORS:
        add(f"test_value_errors[{subscripts!r} {operands}]", lambda s=subscripts, o=operands: _value_error("", s, o))
    for n, reg, n_out, global_dim in [(n, r, o, g) for n in (4, 5) for r in (2, 3) for o in (0, 2, 4)
                                      for g in (False, True)]:
        eq, _, sizes = rand_equation(n, reg, n_out, d_min=2, d_max=5, seed=42, return_size_dict=True,
                                     global_dim=global_dim)
        add(f"test_rand_equation[{eq}]", lambda eq=eq, sizes=sizes: _contract("", eq, _views(eq, sizes), order=1))
    return out
