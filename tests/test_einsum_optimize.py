"""einsum's ``optimize``, NumPy's spelling: False, True, 'greedy', 'optimal' (and opt_einsum's other
strategies), (strategy, memory limit), and explicit paths from numpy.einsum_path, each honoured
(the path given is the one contracted) or refused with a clear error."""

import numpy as np
import pytest

import tenferro_py.numpy as tnp
from tenferro_py import einsum as tf_einsum
from tenferro_py.errors import InvalidArgument

SUBSCRIPTS = "ij,jk,kl,lm->im"
SHAPES = [(3, 4), (4, 5), (5, 6), (6, 3)]


@pytest.fixture
def operands(rng):
    return [rng.standard_normal(shape) for shape in SHAPES]


def numpy_path(operands, strategy="optimal"):
    return np.einsum_path(SUBSCRIPTS, *operands, optimize=strategy)[0]


ACCEPTED = [None, False, True, "greedy", "optimal", "dp", ("greedy", 30), ["einsum_path", (2, 3), (0, 1), (0, 1)],
            [(0, 1), (0, 1), (0, 1)], ["einsum_path", (0, 1, 2, 3)], ["einsum_path", (1,), (0, 1), (0, 2), (0, 1)]]


@pytest.mark.parametrize("optimize", ACCEPTED, ids=repr)
def test_every_accepted_value_gives_numpys_einsum_and_its_derivative(operands, optimize):
    a, b, c, d = operands
    f = lambda x: tnp.sum(tnp.einsum(SUBSCRIPTS, x, b, c, d, optimize=optimize) ** 2)  # noqa: E731
    value, grad = tnp.value_and_grad(f)(a)
    want = np.einsum(SUBSCRIPTS, a, b, c, d)
    assert value == pytest.approx(np.sum(want ** 2), rel=1e-13)
    np.testing.assert_allclose(grad, 2 * np.einsum("im,jk,kl,lm->ij", want, b, c, d), rtol=1e-12)
    tnp.check_grads(lambda x, y: tnp.einsum(SUBSCRIPTS, x, y, c, d, optimize=optimize), [a, b])


def test_a_path_from_einsum_path_is_the_one_contracted(operands):
    path = numpy_path(operands)
    request = tf_einsum.check_optimize(path, 4)
    steps = tf_einsum.pairwise_steps(("ij", "jk", "kl", "lm"), "im", tuple(SHAPES), request)
    assert [tuple(sorted(positions)) for positions, _, _ in steps] == [tuple(sorted(p)) for p in path[1:]]
    other = ["einsum_path", (2, 3), (0, 1), (0, 1)]
    steps = tf_einsum.pairwise_steps(("ij", "jk", "kl", "lm"), "im", tuple(SHAPES),
                                     tf_einsum.check_optimize(other, 4))
    assert [positions for positions, _, _ in steps] == [(3, 2), (1, 0), (1, 0)]
    assert [set(out) for _, _, out in steps] == [{"k", "m"}, {"i", "k"}, {"i", "m"}]


def test_the_session_hands_the_request_to_the_planner(monkeypatch, operands):
    seen = []
    planner = tf_einsum.pairwise_steps

    def spy(inputs, output, shapes, optimize=tf_einsum.AUTO):
        seen.append(optimize)
        return planner(inputs, output, shapes, optimize)

    monkeypatch.setattr(tf_einsum, "pairwise_steps", spy)
    path = ["einsum_path", (2, 3), (0, 1), (0, 1)]
    with tnp.session():  # the forward alone (a derivative's own contractions are planned as usual)
        for optimize in (None, True, "optimal", ("greedy", 30), path, False):
            tnp.einsum(SUBSCRIPTS, tnp.asarray(operands[0]), *operands[1:], optimize=optimize)
    assert seen == [("auto", None), ("greedy", None), ("optimal", None), ("greedy", 30),
                    ("path", ((2, 3), (0, 1), (0, 1))), ("path", ((0, 1, 2, 3),))]


def test_outside_a_session_it_is_numpys(operands):
    path = numpy_path(operands, "greedy")
    got = tnp.einsum(SUBSCRIPTS, *operands, optimize=path)
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, np.einsum(SUBSCRIPTS, *operands, optimize=path))


@pytest.mark.parametrize("optimize, message", [
    ("fastest", "optimize: False, True, a strategy name"),
    (3, "optimize: False, True, a strategy name"),
    (("greedy", -5), "a memory limit: an int >= 1"),
    (("greedy", 2.5), "a memory limit: an int >= 1"),
    (["einsum_path", (0, 7), (0, 1), (0, 1)], "a path whose steps are tuples of distinct positions"),
    (["einsum_path", (0, 0), (0, 1), (0, 1)], "a path whose steps are tuples of distinct positions"),
    (["einsum_path", (0, 1)], "a path that contracts all 4 operands into one"),
    (["einsum_path", (0, 1), (0, 1), (0, 1), (0, 1)], "a path whose steps"),
    (["einsum_path", (0, 1), 2, (0, 1)], "a path whose steps"),
], ids=repr)
def test_what_cannot_be_honoured_is_refused(operands, optimize, message):
    with pytest.raises(InvalidArgument, match=message):
        tnp.grad(lambda x: tnp.sum(tnp.einsum(SUBSCRIPTS, x, *operands[1:], optimize=optimize)))(operands[0])
