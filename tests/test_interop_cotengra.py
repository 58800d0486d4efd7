"""einsum planned by a path optimiser object (cotengra's HyperOptimizer and ReusableHyperOptimizer,
opt_einsum's): asked once per subscripts and shapes, its path is the one contracted, forward and
(through the forward's pairwise steps) reverse. (The core without cotengra: test_interop_autoray.)"""

import warnings

import numpy as np
import opt_einsum
import pytest

import tenferro_py as tf
import tenferro_py.numpy as tnp
from tenferro_py import einsum as tf_einsum
from tenferro_py.errors import InvalidArgument

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # cotengra's: kahypar not installed
    ctg = pytest.importorskip("cotengra")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # cotengra's: kahypar, optuna not installed


def peps_norm(rows, cols, bond, phys, rng):
    """The subscripts and ket arrays of ⟨ψ|ψ⟩ for a random rows × cols PEPS (bra = conjugated ket,
    its operands after the ket's): letters for every index, as numpy.einsum takes."""
    letters = iter(c for c in map(chr, range(0x41, 0x3000)) if c.isalpha())
    bonds = {}

    def bond_index(a, b, layer):
        return bonds.setdefault((min(a, b), max(a, b), layer), next(letters))

    terms = {"ket": [], "bra": []}
    shapes = []
    for r in range(rows):
        for c in range(cols):
            neighbours = [(r + dr, c + dc) for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1))
                          if 0 <= r + dr < rows and 0 <= c + dc < cols]
            physical = next(letters)
            for layer in ("ket", "bra"):
                terms[layer].append(physical + "".join(bond_index((r, c), n, layer) for n in neighbours))
            shapes.append((phys,) + (bond,) * len(neighbours))
    arrays = [rng.standard_normal(shape) / np.sqrt(np.prod(shape)) for shape in shapes]
    return ",".join(terms["ket"] + terms["bra"]) + "->", arrays


def norm_function(subscripts, optimize):
    return lambda *ket: tnp.einsum(subscripts, *ket, *[tnp.conj(k) for k in ket], optimize=optimize)


def planners():
    return {"HyperOptimizer": ctg.HyperOptimizer(max_repeats=8, optlib="random", progbar=False),
            "ReusableHyperOptimizer": ctg.ReusableHyperOptimizer(max_repeats=8, optlib="random", progbar=False),
            "opt_einsum.DynamicProgramming": opt_einsum.DynamicProgramming(),
            "opt_einsum.paths.greedy": opt_einsum.paths.greedy}


@pytest.mark.parametrize("name", ["HyperOptimizer", "ReusableHyperOptimizer", "opt_einsum.DynamicProgramming",
                                  "opt_einsum.paths.greedy"])
def test_a_planner_gives_the_value_and_gradient_of_the_default_path(rng, name):
    subscripts, ket = peps_norm(3, 3, 2, 2, rng)
    argnums = tuple(range(len(ket)))
    value, grads = tnp.value_and_grad(norm_function(subscripts, planners()[name]), argnums)(*ket)
    want, want_grads = tnp.value_and_grad(norm_function(subscripts, None), argnums)(*ket)
    assert value == pytest.approx(want, rel=1e-13)
    scale = max(np.max(np.abs(g)) for g in want_grads)
    for g, w in zip(grads, want_grads):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-12 * scale)


class CountingPlanner:
    """opt_einsum's greedy path, counting the calls."""

    def __init__(self):
        self.calls = []

    def __call__(self, inputs, output, size_dict, memory_limit=None):
        self.calls.append(len(inputs))
        return opt_einsum.paths.greedy(inputs, output, size_dict, memory_limit)


def test_the_planner_is_asked_once_per_subscripts_and_shapes(rng):
    planner = CountingPlanner()
    subscripts, ket = peps_norm(2, 3, 2, 2, rng)
    f = norm_function(subscripts, planner)
    for _ in range(3):
        tnp.value_and_grad(f, tuple(range(len(ket))))(*ket)
        tnp.hvp(lambda x: f(x, *ket[1:]), ket[0], ket[0])
    assert planner.calls == [12]
    bigger = [np.concatenate([k, k], axis=0) for k in ket]  # physical dimension 4: other shapes
    tnp.value_and_grad(f)(*bigger)
    assert planner.calls == [12, 12]


def test_the_planners_path_is_the_one_contracted(rng):
    subscripts, ket = peps_norm(2, 2, 3, 2, rng)
    operands = ket + [k.conj() for k in ket]
    planner = ctg.ReusableHyperOptimizer(max_repeats=4, optlib="random", progbar=False)
    inputs, output = tf_einsum.parse(subscripts, [x.shape for x in operands])
    path = planner([frozenset(sub) for sub in inputs], frozenset(output),
                   {c: n for sub, x in zip(inputs, operands) for c, n in zip(sub, x.shape)})
    steps = tf_einsum.pairwise_steps(inputs, output, tuple(x.shape for x in operands),
                                     tf_einsum.check_optimize(planner, len(operands)))
    assert [tuple(sorted(positions)) for positions, _, _ in steps] == [tuple(sorted(p)) for p in path]


def test_the_session_einsum_takes_a_planner(rng, rt, eng):
    subscripts, ket = peps_norm(2, 2, 2, 2, rng)
    operands = ket + [k.conj() for k in ket]
    planner = ctg.HyperOptimizer(max_repeats=4, optlib="random", progbar=False)
    x = rt.variable_from(tf.Tensor(operands[0]))
    y = rt.with_eager_session(eng, lambda s: s.einsum([x, *[tf.Tensor(o) for o in operands[1:]]], subscripts,
                                                      optimize=planner))
    assert y.value().item() == pytest.approx(np.einsum(subscripts, *operands), rel=1e-13)
    first, rest = subscripts.split(",", 1)  # rest ends with "->": the gradient has first's indices
    np.testing.assert_allclose(rt.grad(eng, y, x).value().to_numpy(), np.einsum(rest + first, *operands[1:]),
                               rtol=1e-12)


def test_outside_a_session_a_planner_gives_numpys_einsum(rng):
    subscripts, ket = peps_norm(2, 2, 2, 2, rng)
    operands = ket + [k.conj() for k in ket]
    got = tnp.einsum(subscripts, *operands, optimize=ctg.HyperOptimizer(max_repeats=4, optlib="random",
                                                                        progbar=False))
    assert type(got) is np.ndarray
    assert got == pytest.approx(np.einsum(subscripts, *operands), rel=1e-13)


@pytest.mark.parametrize("planner, message", [
    (lambda inputs, output, sizes, limit: "greedy", "returning a path"),
    (lambda inputs, output, sizes, limit: [(0, 1)], "contracts all 3 operands"),
    (lambda inputs, output, sizes, limit: [(0, 7), (0, 1)], "distinct positions"),
    (lambda inputs, output, sizes, limit: 1 / 0, "ZeroDivisionError"),
], ids=["not-a-path", "too-short", "out-of-range", "raises"])
def test_a_planner_that_gives_no_path_is_refused(rng, planner, message):
    a, b, c = (rng.standard_normal((2, 2)) for _ in range(3))
    with pytest.raises(InvalidArgument, match=message):
        tnp.grad(lambda x: tnp.einsum("ij,jk,kl->", x, b, c, optimize=planner))(a)


def test_cotengras_cost_is_reported_and_at_most_greedys_on_a_peps(rng):
    """The planner reports its contraction cost (flops); on a 4×4 PEPS norm it is no worse than
    opt_einsum's default ('auto', greedy for so many operands), by opt_einsum's own count of both paths."""
    subscripts, ket = peps_norm(4, 4, 3, 2, rng)
    shapes = [k.shape for k in ket] * 2
    planner = ctg.HyperOptimizer(max_repeats=16, optlib="random", progbar=False)
    inputs, output = tf_einsum.parse(subscripts, shapes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = planner.search([tuple(sub) for sub in inputs], tuple(output),
                              {c: n for sub, shape in zip(inputs, shapes) for c, n in zip(sub, shape)})
    assert tree.contraction_cost() > 0
    path = tree.get_path()
    cost = opt_einsum.contract_path(subscripts, *shapes, shapes=True, optimize=list(path))[1].opt_cost
    default = opt_einsum.contract_path(subscripts, *shapes, shapes=True, optimize="auto")[1].opt_cost
    assert cost <= default
