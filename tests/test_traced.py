"""Record once, replay after (tenferro_py.traced): the same bits as a real run, no more memory, and a
real run wherever the program depends on values or on state that changed."""

import tracemalloc

import numpy as np
import pytest

import tenferro_py as tf
import tenferro_py.numpy as tnp

RNG = np.random.default_rng(7)
HAMILTONIAN = RNG.standard_normal((4, 4))


def transfer_energy(a):
    """A uMPS-like energy: a transfer matrix's dominant eigenvectors by eig and an argmax."""
    d = a.shape[0]
    e = tnp.einsum("asb,csd->acbd", a, a).reshape(d * d, d * d)
    w, v = tnp.linalg.eig(e)
    i = tnp.argmax(tnp.abs(w))
    r = tnp.real(v[:, i])
    return tnp.einsum("i,ij,j->", r, HAMILTONIAN[: d * d, : d * d], r) / tnp.sum(r * r) / tnp.real(w[i]) ** 2


def power_energy(a, steps=8):
    """The same energy by power iteration: many small ops, and a norm (sqrt's rule reads a guard)."""
    d = a.shape[0]
    e = tnp.einsum("asb,csd->acbd", a, a).reshape(d * d, d * d)
    r = tnp.ones(d * d)
    for _ in range(steps):
        r = e @ r
        r = r / tnp.linalg.norm(r)
    return r @ (HAMILTONIAN[: d * d, : d * d] @ r)


def calls(f, xs, **options):
    """(results of the replayed transform, of the real one, the Traced) over the inputs xs."""
    traced, real = tnp.value_and_grad(f, **options), tnp.value_and_grad(f, replay=False)
    return [traced(x) for x in xs], [real(x) for x in xs], traced.traced


def assert_same_bits(got, want):
    for (v1, g1), (v2, g2) in zip(got, want):
        assert v1.tobytes() == v2.tobytes() and g1.dtype == g2.dtype and g1.tobytes() == g2.tobytes()


@pytest.mark.parametrize("f", [transfer_energy, power_energy], ids=["eig", "power"])
def test_replays_give_the_real_runs_bits(f):
    xs = [RNG.standard_normal((2, 2, 2)) for _ in range(6)]
    got, want, traced = calls(f, xs)
    assert_same_bits(got, want)
    assert (traced.real_calls, traced.replayed_calls) == (2, 4)  # two agreeing recordings, then replays


def test_a_replay_of_complex_inputs_and_several_arguments():
    def f(x, y, scale):
        return tnp.real(tnp.sum(tnp.conj(x) * (y @ x))) * scale

    vg, real = tnp.value_and_grad(f, argnums=(0, 1)), tnp.value_and_grad(f, argnums=(0, 1), replay=False)
    for scale in (1.0, 1.0, 1.0, 2.0, 2.0, 2.0):
        x = RNG.standard_normal(3) + 1j * RNG.standard_normal(3)
        y = RNG.standard_normal((3, 3)) + 0j
        (v1, (gx1, gy1)), (v2, (gx2, gy2)) = vg(x, y, scale), real(x, y, scale)
        assert v1 == v2 and gx1.tobytes() == gx2.tobytes() and gy1.tobytes() == gy2.tobytes()
    assert vg.traced.replayed_calls == 2  # a static argument is part of the key: two per value


def test_a_replay_holds_no_more_memory_than_a_real_run():
    n, k = 200, 8
    m = RNG.standard_normal((n, n)) / np.sqrt(n)

    def chain(x):
        for _ in range(k):
            x = tnp.tanh(x @ m)
        return tnp.sum(x * x)

    x0 = RNG.standard_normal((n, n))
    peaks = {}
    for name, fn in (("real", tnp.value_and_grad(chain, replay=False)), ("traced", tnp.value_and_grad(chain))):
        for _ in range(3):
            tracemalloc.start()
            try:
                fn(x0)
                peaks[name] = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
    assert peaks["traced"] <= peaks["real"]


def _check_real_where_it_must(f, xs, replayed):
    got, want, traced = calls(f, xs)
    assert_same_bits(got, want)
    assert (traced.replayed_calls > 0) == replayed, traced.why_not
    return traced


def test_a_branch_on_values_is_a_guard():
    def f(x):
        return tnp.sum(x**2) if tnp.sum(x) > 0 else tnp.sum(tnp.sin(x))

    xs = [np.array([1.0, 2.0]), np.array([2.0, 1.0]), np.array([3.0, 1.0]), np.array([-3.0, 1.0]),
          np.array([-1.0, -1.0]), np.array([-2.0, -1.0]), np.array([-1.0, -4.0]), np.array([5.0, 1.0])]
    _check_real_where_it_must(f, xs, replayed=True)


def test_a_loop_to_convergence_is_a_guard():
    def f(x):
        y, steps = x, 0
        while tnp.max(tnp.abs(y)) > 1e-3:  # as many steps as the values need
            y, steps = y * 0.5, steps + 1
        return tnp.sum(y) * steps

    xs = [np.array([1.0, 2.0]), np.array([1.1, 2.0]), np.array([1.2, 2.0]), np.array([100.0, 2.0]),
          np.array([101.0, 2.0]), np.array([102.0, 2.0]), np.array([1.3, 2.0])]
    _check_real_where_it_must(f, xs, replayed=True)


def test_an_argmax_that_picks_a_branch_is_a_guard():
    def f(x):
        i = tnp.argmax(x)
        return x[i] ** 3 + (tnp.sum(x) if int(i) == 0 else 0.0)

    xs = [np.array([3.0, 1, 2]), np.array([4.0, 1, 2]), np.array([5.0, 1, 2]), np.array([1.0, 7, 2]),
          np.array([1.0, 8, 2]), np.array([1.0, 9, 2]), np.array([6.0, 1, 2])]
    _check_real_where_it_must(f, xs, replayed=True)


def test_a_data_dependent_shape_is_a_guard():
    def f(x):
        return tnp.sum(x[x > 0] ** 2)

    xs = [np.array([1.0, -2, 3]), np.array([2.0, -1, 1]), np.array([1.0, 2, 3]), np.array([-1.0, 2, -3]),
          np.array([1.5, -2, 3])]
    _check_real_where_it_must(f, xs, replayed=True)


def test_a_float_read_runs_for_real():
    def f(x):
        scale = float(tnp.stop_gradient(tnp.sum(x)))  # a number read into Python: not replayable
        return tnp.sum(x**2) / scale

    traced = _check_real_where_it_must(f, [np.array([1.0, 2.0]) * k for k in range(1, 6)], replayed=False)
    assert "read into Python" in traced.why_not


def test_printing_a_value_runs_for_real(capsys):
    def f(x):
        y = tnp.sum(x**2)
        print(f"{y:.3f}")
        return y

    _check_real_where_it_must(f, [np.array([1.0, 2.0])] * 4, replayed=False)
    assert capsys.readouterr().out.count("5.000") == 8  # every call printed (4 traced, 4 real)


def test_a_changed_global_is_seen():
    global HAMILTONIAN
    saved = HAMILTONIAN
    try:
        vg = tnp.value_and_grad(power_energy)
        x = RNG.standard_normal((2, 2, 2))
        for _ in range(3):
            vg(x)
        assert vg.traced.replayed_calls == 1
        HAMILTONIAN = saved + 1.0  # rebound
        assert vg(x)[0] == tnp.value_and_grad(power_energy, replay=False)(x)[0]
        HAMILTONIAN[0, 0] += 1.0  # changed in place
        assert vg(x)[0] == tnp.value_and_grad(power_energy, replay=False)(x)[0]
    finally:
        HAMILTONIAN = saved


def test_a_changed_closure_and_argument_are_seen():
    h = np.eye(3)
    vg = tnp.value_and_grad(lambda x, g: tnp.sum((h @ x) ** 2) * g[0])
    x, g = np.arange(3.0), np.array([2.0])
    for _ in range(3):
        vg(x, g)
    assert vg.traced.replayed_calls == 1
    h[1, 1] = 5.0
    assert vg(x, g)[0] == 2 * (25 + 4)
    g[0] = 3.0
    assert vg(x, g)[0] == 3 * (25 + 4)


def test_a_changed_attribute_of_a_module_in_a_closure_is_seen():
    import types

    settings = types.ModuleType("settings")  # a user's module, named by the closure
    settings.field = 2.0

    def make():
        return lambda x: tnp.sum(x**2) * settings.field

    vg = tnp.value_and_grad(make())
    for _ in range(3):
        vg(np.ones(2))
    assert vg.traced.replayed_calls == 1
    settings.field = 3.0
    assert vg(np.ones(2))[0] == 6.0


def test_constants_made_anew_are_not_replayed():
    def f(x):
        return tnp.sum(x * np.random.standard_normal(x.shape))

    np.random.seed(3)
    got = [tnp.value_and_grad(f)(np.ones(3)) for _ in range(2)]
    vg = tnp.value_and_grad(f)
    np.random.seed(3)
    traced = [vg(np.ones(3)) for _ in range(8)]
    np.random.seed(3)
    real = [tnp.value_and_grad(f, replay=False)(np.ones(3)) for _ in range(8)]
    assert_same_bits(traced, real)
    assert got[0][0] != got[1][0] and vg.traced.replayed_calls == 0
    assert "disagree" in vg.traced.why_not


def test_state_it_cannot_check_runs_for_real():
    class Model:
        def __init__(self):
            self.g = 1.0

        def energy(self, x):
            return tnp.sum(x**2) * self.g

    model = Model()
    vg = tnp.value_and_grad(model.energy)
    for g in (1.0, 1.0, 1.0, 2.0):
        model.g = g
        assert vg(np.ones(2))[0] == 2 * g
    assert vg.traced.replayed_calls == 0 and "bound method" in vg.traced.why_not


def test_replay_can_be_turned_off_and_nested_calls_run_for_real():
    vg = tnp.value_and_grad(lambda x: tnp.sum(x**3), replay=False)
    assert vg.traced is None
    inner = tnp.grad(lambda x: tnp.sum(x**3))
    hess = tnp.grad(lambda x: tnp.sum(inner(x) ** 2))
    for _ in range(3):
        np.testing.assert_allclose(hess(np.array([1.0, 2.0])), 36 * np.array([1.0, 8.0]))  # ∇ Σ (3x²)²
    assert inner.traced.replayed_calls == 0  # inside another transform: a session's arrays


def test_a_kernel_error_is_raised_with_its_context():
    vg = tnp.value_and_grad(lambda x: tnp.sum(tnp.linalg.inv(x)))
    for _ in range(3):
        vg(np.eye(2))
    with pytest.raises(tf.LinalgError, match="inv"):
        vg(np.zeros((2, 2)))


# --- a staged program -----------------------------------------------------------------------


@pytest.mark.parametrize("checkpoint", [None, "stage"])
def test_a_staged_program_replays_bit_for_bit(checkpoint):
    from tenferro_py.models import trg

    ks = trg.schedule(4, 6)
    program, real = trg.program(ks), trg.program(ks)
    for beta in (0.3, 0.3, 0.3, 0.35, 0.4, 0.45):
        got = program.value_and_grad(tf.Tensor.scalar(beta), checkpoint=checkpoint)
        want = real.value_and_grad(tf.Tensor.scalar(beta), checkpoint=checkpoint, replay=False)
        assert got.value == want.value and got.grad.array.tobytes() == want.grad.array.tobytes()
    assert program.traced.replayed_calls == 4


def test_a_stage_that_reads_a_value_runs_for_real():
    from tenferro_py import staged

    def source(s, theta):
        return s.mul(theta, theta)

    def stage(s, x):
        scale = s.constant_from(tf.Tensor.scalar(abs(x.item()) + 1.0))  # a value read into Python
        return s.div(x, scale), s.log(s.mul(x, x))

    program = staged.Program(source, [staged.Stage(stage, 0.5)] * 3, lambda s, x: s.mul(x, x))
    for theta in (0.7, 0.7, 0.7, 0.9):
        got = program.value_and_grad(tf.Tensor.scalar(theta))
        want = program.value_and_grad(tf.Tensor.scalar(theta), replay=False)
        assert got.value == want.value and got.grad.array.tobytes() == want.grad.array.tobytes()
    assert program.traced.replayed_calls == 0 and "read into Python" in program.traced.why_not


def test_threads_may_call_one_transform_at_once():
    import concurrent.futures

    vg = tnp.value_and_grad(power_energy)
    xs = [RNG.standard_normal((2, 2, 2)) for _ in range(24)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        got = list(pool.map(vg, xs))
    assert_same_bits(got, [tnp.value_and_grad(power_energy, replay=False)(x) for x in xs])
    assert vg.traced.replayed_calls + vg.traced.real_calls == len(xs) and vg.traced.replayed_calls > 0


def test_norms_and_value_tests_replay_through_guards():
    """NumPy's norms and tests of values (all, any, isclose) read masks, which are guards: replayed."""

    def f(x):
        bonus = 1.0 if tnp.all(x > -5) and not tnp.any(tnp.isclose(x, 7.0)) else 0.0
        return tnp.linalg.vector_norm(x, ord=3) + tnp.linalg.norm(x) + bonus

    xs = [np.arange(1.0, 5.0) * k for k in (1, 1.1, 1.2, 1.3)] + [np.array([7.0, 1, 2, 3])]
    _check_real_where_it_must(f, xs, replayed=True)
