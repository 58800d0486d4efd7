"""tenferro_py.staged: the helper against tenferro_py.models.trg's hand-written sweeps, bit for
bit, in every checkpoint mode; exact answers of a 1D chain; what checkpointing keeps alive;
errors.
"""

from __future__ import annotations

import math
import weakref

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py import Tensor, staged
from tenferro_py.models import trg

CHECKPOINTS = [None, "stage", "sqrt"]


trg_program = trg.program  # trg's initial, step and log_trace driven by the helper


# --- bit for bit against the hand-written sweeps ---------------------------------------------


@pytest.fixture(scope="module")
def spec_setting():
    """SPEC's setting, χ = 16 and 20 steps, at β = 0.5: hand-written and helper results."""
    ks = trg.schedule(16, 20)
    program = trg_program(ks)
    return {
        "hand": (trg.value_and_grad(0.5, ks), trg.value_grad_and_curvature(0.5, ks)),
        "helper": {cp: (program.value_and_grad(0.5, checkpoint=cp), program.value_grad_and_curvature(
            0.5, checkpoint=cp)) for cp in CHECKPOINTS},
    }


@pytest.mark.parametrize("checkpoint", CHECKPOINTS)
def test_spec_setting_bit_for_bit(spec_setting, checkpoint):
    (lnz, grad), (lnz2, grad2, curvature) = spec_setting["hand"]
    vg, vgc = spec_setting["helper"][checkpoint]
    assert (vg.value, vg.grad.item()) == (lnz, grad)
    assert (vgc.value, vgc.grad.item(), vgc.curvature.item()) == (lnz2, grad2, curvature)


@pytest.mark.parametrize("beta", [0.3, 0.44, 0.6])
def test_small_settings_bit_for_bit(beta):
    """χ = 6, 10 steps: the √L segments (4, 4, 2) do not divide the chain evenly."""
    ks = trg.schedule(6, 10)
    program = trg_program(ks)
    hand, hand2 = trg.value_and_grad(beta, ks), trg.value_grad_and_curvature(beta, ks)
    for cp in CHECKPOINTS:
        vg, vgc = program.value_and_grad(beta, checkpoint=cp), program.value_grad_and_curvature(beta, checkpoint=cp)
        assert (vg.value, vg.grad.item()) == hand
        assert (vgc.value, vgc.grad.item(), vgc.curvature.item()) == hand2
    assert program.value(beta) == hand[0]


def test_forward_mode_agrees_with_reverse():
    ks = trg.schedule(8, 12)
    program = trg_program(ks)
    value, grad = trg.value_and_grad(0.44, ks)
    vj = program.value_and_jvp(0.44)
    assert vj.value == value
    assert abs(vj.jvp - grad) <= 1e-14 * abs(grad)
    assert abs(program.value_and_jvp(0.44, 0.5).jvp - 0.5 * grad) <= 1e-14 * abs(grad)


def test_wide_engine_gives_the_same_bits():
    ks = trg.schedule(8, 8)
    program = trg_program(ks)
    serial = program.value_grad_and_curvature(0.4, checkpoint="sqrt")
    wide_engine = tf.CpuEngine(tf.Pool.builder().threads(2).build())
    wide = program.value_grad_and_curvature(0.4, checkpoint="sqrt", engine=wide_engine)
    assert (serial.value, serial.grad.item(), serial.curvature.item()) == (
        wide.value, wide.grad.item(), wide.curvature.item())


# --- a chain with an exact answer: the 1D Ising ring in a field -----------------------------


def ising_chain_source(s, theta):
    """T[σ, σ'] = exp(β σσ' + h (σ + σ')/2) for θ = (β, h): the 1D Ising transfer matrix."""
    signs = Tensor.from_numpy([[1.0, -1.0], [-1.0, 1.0]])  # σσ'
    fields = Tensor.from_numpy([[1.0, 0.0], [0.0, -1.0]])  # (σ + σ')/2
    weights = s.einsum([theta, s.constant_from(Tensor(np.stack([signs.to_numpy(), fields.to_numpy()])))],
                       "p,pab->ab")
    return s.exp(weights)


def square(s, t):
    """T ← (T / ‖T‖)², ln‖T‖: doubles the sites T stands for."""
    norm = s.sqrt(s.reduce_sum(s.mul(t, t)))
    t = s.div(t, s.broadcast_in_dim(norm, t.shape, ()))
    return s.einsum([t, t], "ij,jk->ik"), s.log(norm)


def log_trace(s, t):
    return s.log(s.einsum([t], "ii->"))


def chain_program(n, extra_stage=None):
    stages = [staged.Stage(square, 2.0**-i) for i in range(n)]
    if extra_stage is not None:
        stages.insert(n // 2, extra_stage)
    return staged.Program(ising_chain_source, stages, log_trace, 2.0**-n)


def exact_lnz(beta, h):
    """ln λ₊ per site of the infinite ring."""
    return math.log(math.exp(beta) * math.cosh(h) + math.sqrt(math.exp(2 * beta) * math.sinh(h) ** 2
                                                              + math.exp(-2 * beta)))


def _exact_grad(beta, h, d=1e-5):
    return np.array([(exact_lnz(beta + d, h) - exact_lnz(beta - d, h)) / (2 * d),
                     (exact_lnz(beta, h + d) - exact_lnz(beta, h - d)) / (2 * d)])


@pytest.mark.parametrize("checkpoint", CHECKPOINTS)
def test_ising_chain_against_the_exact_solution(checkpoint):
    """2^30 sites: value, gradient (β, h) and the Hessian along a direction."""
    beta, h = 0.7, 0.3
    theta, direction = Tensor.from_numpy([beta, h]), np.array([0.6, -0.8])
    program = chain_program(30)
    value, grad = program.value_and_grad(theta, checkpoint=checkpoint)
    assert abs(value - exact_lnz(beta, h)) < 1e-14
    np.testing.assert_allclose(grad.to_numpy(), _exact_grad(beta, h), rtol=1e-9)
    _, grad2, hv = program.value_grad_and_curvature(theta, Tensor(direction), checkpoint=checkpoint)
    np.testing.assert_array_equal(grad2.to_numpy(), grad.to_numpy())
    d = 1e-5
    hv_fd = (_exact_grad(beta + d * direction[0], h + d * direction[1])
             - _exact_grad(beta - d * direction[0], h - d * direction[1])) / (2 * d)
    np.testing.assert_allclose(hv.to_numpy(), hv_fd, rtol=1e-5)


def test_linear_readout():
    """A readout linear in x_n (tr, not ln tr) has a constant cotangent: its tangent is zero."""
    theta = Tensor.from_numpy([0.7, 0.3])
    program = staged.Program(ising_chain_source, [staged.Stage(square, 2.0**-i) for i in range(6)],
                             lambda s, t: s.einsum([t], "ii->"), 0.25)
    _, grad, hv = program.value_grad_and_curvature(theta, Tensor.from_numpy([1.0, 0.0]))
    h = 1e-5
    difference = (program.value_and_grad(Tensor.from_numpy([0.7 + h, 0.3])).grad.to_numpy()
                  - program.value_and_grad(Tensor.from_numpy([0.7 - h, 0.3])).grad.to_numpy()) / (2 * h)
    np.testing.assert_allclose(hv.to_numpy(), difference, rtol=1e-7)


def test_stage_without_side_output():
    """A stage returning (x, None) adds nothing to L: transposing a symmetric T changes nothing."""
    theta = Tensor.from_numpy([0.7, 0.3])
    with_transpose = chain_program(12, staged.Stage(lambda s, t: (s.transpose(t, (1, 0)), None)))
    plain = chain_program(12)
    assert len(with_transpose) == 13
    for cp in CHECKPOINTS:
        a, b = with_transpose.value_grad_and_curvature(theta, checkpoint=cp), plain.value_grad_and_curvature(theta)
        assert abs(a.value - b.value) < 1e-15
        np.testing.assert_allclose(a.grad.to_numpy(), b.grad.to_numpy(), rtol=1e-13)
        np.testing.assert_allclose(a.curvature.to_numpy(), b.curvature.to_numpy(), rtol=1e-12)


# --- what checkpointing keeps ---------------------------------------------------------------


class GraphCounter:
    """Wraps a stage; counts its calls and, at each call, how many earlier stage graphs are alive."""

    def __init__(self):
        self.calls = 0
        self.alive_max = 0
        self._outs: list[weakref.ref] = []

    def stage(self, s, t):
        self.calls += 1
        self.alive_max = max(self.alive_max, sum(r() is not None for r in self._outs))
        out, side = square(s, t)
        if out.is_tracked:
            self._outs.append(weakref.ref(out._node))  # the recorded op behind out: its graph
        return out, side


@pytest.mark.parametrize(
    "checkpoint, calls, alive",
    [(None, 16, 15), ("sqrt", 32, 3), ("stage", 32, 0)],
)
@pytest.mark.parametrize("method", ["value_and_grad", "value_grad_and_curvature"])
def test_checkpointing_reruns_stages_and_frees_graphs(checkpoint, calls, alive, method):
    """16 stages: plain runs each once and keeps every graph; "sqrt" (segments of 4) and
    "stage" run each twice and hold at most one segment's other graphs (3), or none."""
    counter = GraphCounter()
    program = staged.Program(ising_chain_source, [staged.Stage(counter.stage, 2.0**-i) for i in range(16)],
                             log_trace, 2.0**-16)
    getattr(program, method)(Tensor.from_numpy([0.7, 0.3]), checkpoint=checkpoint)
    assert counter.calls == calls
    assert counter.alive_max == alive


# --- errors ---------------------------------------------------------------------------------


def test_errors():
    program = chain_program(4)
    with pytest.raises(tf.InvalidArgument, match=r"^Program.value_and_grad: expected checkpoint None, 'stage'"):
        program.value_and_grad(Tensor.from_numpy([0.7, 0.3]), checkpoint="all")
    with pytest.raises(tf.InvalidArgument, match=r"^Program.value_grad_and_curvature: expected direction of theta's"):
        program.value_grad_and_curvature(Tensor.from_numpy([0.7, 0.3]), 1.0)
    with pytest.raises(tf.InvalidArgument, match=r"^Program.value: expected theta: a Tensor or a real number"):
        program.value("0.7")
    with pytest.raises(tf.InvalidArgument, match=r"^staged.Program: expected stages\[1\]: a Stage"):
        staged.Program(ising_chain_source, [staged.Stage(square, 1.0), square], log_trace)
    with pytest.raises(tf.InvalidArgument, match=r"^staged.Program: expected readout_coef: a finite real number"):
        staged.Program(ising_chain_source, [], log_trace, math.nan)
    with pytest.raises(tf.InvalidArgument, match=r"^staged.Program: expected callable source and readout"):
        staged.Program(None, [], log_trace)


def _one_tensor_stage(s, x):
    return s.scale_real(x, 0.5)


def _three_value_stage(s, x):
    return x, s.reduce_sum(x), x


def _matrix_side_stage(s, x):
    return x, x


def _float_side_stage(s, x):
    return x, 1.0


@pytest.mark.parametrize(
    "stage, expected, got",
    [
        (_one_tensor_stage, "fn(s, x) to return (x_next, side)", "one EagerTensor"),
        (_three_value_stage, "fn(s, x) to return (x_next, side)", "3 values"),
        (_matrix_side_stage, "side a scalar EagerTensor or None", "shape [2, 2]"),
        (_float_side_stage, "side a scalar EagerTensor or None", "float"),
    ],
)
@pytest.mark.parametrize("method", ["value", "value_and_grad", "value_and_jvp", "value_grad_and_curvature"])
def test_a_stage_returning_the_wrong_thing_is_named(stage, expected, got, method):
    program = staged.Program(ising_chain_source, [staged.Stage(square, 1.0), staged.Stage(stage, 1.0)], log_trace)
    with pytest.raises(tf.InvalidArgument) as info:
        getattr(program, method)(Tensor.from_numpy([0.7, 0.3]))
    message = str(info.value)
    assert message.startswith(f"staged.Program stage 1 ({stage.__name__}): expected {expected}")
    assert message.endswith(f"got {got}")


def test_a_source_or_readout_returning_the_wrong_thing_is_named():
    bad_source = staged.Program(lambda s, theta: [theta], [staged.Stage(square, 1.0)], log_trace)
    with pytest.raises(tf.InvalidArgument, match=r"^staged.Program source \(<lambda>\): expected an EagerTensor, got list"):
        bad_source.value_and_grad(Tensor.from_numpy([0.7, 0.3]))
    bad_readout = staged.Program(ising_chain_source, [staged.Stage(square, 1.0)], lambda s, x: x)
    with pytest.raises(tf.InvalidArgument, match=r"^staged.Program readout \(<lambda>\): expected a scalar EagerTensor"):
        bad_readout.value(Tensor.from_numpy([0.7, 0.3]))
