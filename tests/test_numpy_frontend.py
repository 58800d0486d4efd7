"""tenferro_py.numpy: NumPy's semantics (operators, broadcasting, promotion, row-major reshape,
indexing) against NumPy itself, derivatives against central differences, the JAX-style
transforms, and the same numbers as the tenferro-style API (a TRG written in NumPy's spelling)."""

import runpy
from pathlib import Path

import numpy as np
import pytest

import tenferro_py as tf
import tenferro_py.numpy as tnp
from tenferro_py import staged
from tenferro_py.models import trg

#: examples/trg_numpy.py's functions: the TRG a NumPy user writes.
trg_numpy = runpy.run_path(str(Path(__file__).resolve().parents[1] / "examples" / "trg_numpy.py"))


def value_in_session(f, *args):
    """f(*args) computed inside a session: the forward of the front end, as NumPy data."""
    with tnp.session():
        return np.asarray(f(*[tnp.asarray(a) for a in args]))


# --- forward: NumPy's answers -------------------------------------------------------------------


CASES = {
    "broadcast add": (lambda a, b: a + b, [(3, 1, 4), (2, 1)]),
    "broadcast sub": (lambda a, b: a - b, [(4,), (3, 4)]),
    "broadcast mul": (lambda a, b: a * b, [(2, 3, 1), (3, 5)]),
    "broadcast div": (lambda a, b: a / (b + 3.0), [(3,), (2, 3)]),
    "rsub rdiv": (lambda a, b: 2.0 - a / (4.0 + b), [(2, 3), (3,)]),
    "power number": (lambda a, b: (a + 2.0) ** 2.5 + a**3 + a ** -1.0, [(3, 2), (1,)]),
    "power tensor": (lambda a, b: (a + 2.0) ** b, [(3, 2), (2,)]),
    "matmul": (lambda a, b: a @ b, [(3, 4), (4, 2)]),
    "matmul batch": (lambda a, b: a @ b, [(2, 3, 4), (4, 5)]),
    "matmul vectors": (lambda a, b: (a @ b) + (tnp.ones((2, 3)) @ a) + a @ (b @ tnp.ones(2)), [(3,), (3, 2)]),
    "reshape row-major": (lambda a, b: a.reshape(4, 6) + b.reshape(-1, 6), [(2, 3, 4), (24,)]),
    "reshape F": (lambda a, b: tnp.reshape(a, (6, 4), order="F"), [(2, 3, 4), (1,)]),
    "transpose": (lambda a, b: a.T + tnp.transpose(a, (2, 0, 1)).reshape(4, 3, 2), [(2, 3, 4), (1,)]),
    "sum keepdims": (lambda a, b: a.sum(axis=1, keepdims=True) * a.mean(axis=(0, 2), keepdims=True), [(2, 3, 4), (1,)]),
    "max min prod": (lambda a, b: a.max(axis=0) + a.min(axis=-1, keepdims=True) + a.prod(axis=1), [(3, 3), (1,)]),
    "einsum tensordot": (lambda a, b: tnp.einsum("ij,jk->ik", a, b) + tnp.tensordot(a, b, 1), [(2, 3), (3, 2)]),
    "dot nd": (lambda a, b: tnp.dot(a, b), [(2, 3, 4), (5, 4, 2)]),
    "trace diag": (lambda a, b: tnp.trace(a, 1) + tnp.sum(tnp.diag(tnp.diagonal(a))), [(4, 4), (1,)]),
    "outer inner": (lambda a, b: tnp.outer(a, b) + tnp.inner(a, a), [(3,), (2,)]),
    "stack concat": (lambda a, b: tnp.concatenate([tnp.stack([a, a], 1), tnp.stack([a, 2 * a], 1)], 0), [(3, 2), (1,)]),
    "roll repeat tile": (lambda a, b: tnp.roll(a, 2, 1) + tnp.repeat(a, 1, 0) + tnp.tile(a, (1, 1)), [(3, 4), (1,)]),
    "flip rot90 triu": (lambda a, b: tnp.flipud(a) + tnp.fliplr(a) + tnp.rot90(a, 2) + tnp.triu(a, 1) + tnp.tril(a),
                        [(3, 3), (1,)]),
    "cumsum var std": (lambda a, b: tnp.cumsum(a, 1) + tnp.var(a, 0, ddof=1) + tnp.std(a), [(3, 4), (1,)]),
    "where clip": (lambda a, b: tnp.where(a > 0, a, b) + tnp.clip(a, -0.5, 0.5), [(3, 2), (3, 2)]),
    "maximum minimum": (lambda a, b: tnp.maximum(a, b) - tnp.minimum(a, 0.1), [(2, 3), (3,)]),
    "functions": (lambda a, b: tnp.sin(a) + tnp.cos(a) * tnp.tanh(b) + tnp.arctan(a) + tnp.exp(b) + tnp.log1p(a * a)
                  + tnp.expm1(b) + tnp.sqrt(a * a + 1.0) + tnp.abs(a) + tnp.square(b) + tnp.log10(a * a + 1.0),
                  [(3, 2), (2,)]),
    "array of arrays": (lambda a, b: tnp.array([[a[0, 0], a[0, 1] * 2.0], [b[0], b[1] + 1.0]]), [(2, 2), (2,)]),
    "expand squeeze swap": (lambda a, b: tnp.squeeze(tnp.expand_dims(a, 1)) + tnp.swapaxes(a, 0, 1).T
                            + tnp.moveaxis(a, 0, 1).T, [(3, 2), (1,)]),
    "kron": (lambda a, b: tnp.kron(a, b.reshape(1, -1)), [(2, 2), (3,)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_functions_and_operators_give_numpys_values(rng, name):
    f, shapes = CASES[name]
    args = [rng.standard_normal(shape) for shape in shapes]
    np.testing.assert_allclose(value_in_session(f, *args), f(*args), rtol=1e-13, atol=1e-13)  # f on NumPy data: NumPy


INDEXES = [
    (3, 0, 1), (slice(1, 4),), (slice(None, None, -1),), (slice(4, 0, -2), slice(None), 2), (Ellipsis, 1),
    (None, 2, Ellipsis, None), (-1, slice(-3, None), slice(None, None, 3)), ([0, 2, 2],), (3, slice(2, None), [1, 3]),
    (slice(None), [0, 1], [1, 3]), (np.array([[0, 1], [4, 3]]),), (slice(None, None, -1), 2, slice(1, 3)),
]


@pytest.mark.parametrize("key", INDEXES, ids=str)
def test_indexing_is_numpys_with_its_derivative(rng, key):
    a = rng.standard_normal((5, 6, 4))
    np.testing.assert_array_equal(value_in_session(lambda x: x[key], a), a[key])
    tnp.check_grads(lambda x: x[key], [a], order=1)


def test_boolean_mask_indexing(rng):
    a = rng.standard_normal((4, 3))
    mask = a > 0
    np.testing.assert_array_equal(value_in_session(lambda x: x[mask], a), a[mask])
    g = tnp.grad(lambda x: tnp.sum(x[x > 0] ** 2))(a)
    np.testing.assert_allclose(g, np.where(mask, 2 * a, 0.0), rtol=1e-15)


def test_float32_keeps_single_precision_with_python_numbers(rng):
    """NumPy 2's rule: Python numbers are weak, NumPy data is not."""
    a = rng.standard_normal(3).astype(np.float32)
    with tnp.session():
        x = tnp.asarray(a)
        assert (x * 2.0 + 1).dtype == np.float32
        assert (x * np.float64(2.0)).dtype == np.float64
        assert (x + 1j).dtype == np.complex64
        assert (x + np.ones(3)).dtype == np.float64
        assert tnp.asarray(np.arange(3)).dtype == np.float64  # integers become float64, as in the library


def test_outside_a_session_functions_are_numpys():
    a = np.arange(6.0).reshape(2, 3)
    assert isinstance(tnp.sin(a), np.ndarray)
    np.testing.assert_array_equal(tnp.sin(a), np.sin(a))
    np.testing.assert_array_equal(tnp.einsum("ij->ji", a), a.T)
    # the same LAPACK call (compute_uv=False is another, whose last bits differ on some kernels)
    np.testing.assert_array_equal(tnp.linalg.svd(a, full_matrices=False)[1],
                                  np.linalg.svd(a, full_matrices=False)[1])
    assert tnp.sum(a, axis=0, keepdims=True).shape == (1, 3)


# --- derivatives ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CASES))
def test_derivatives_against_central_differences(rng, name):
    f, shapes = CASES[name]
    args = [rng.standard_normal(shape) for shape in shapes]
    if name in ("where clip", "maximum minimum", "max min prod"):
        args = [a + 0.01 * np.arange(a.size).reshape(a.shape) for a in args]  # no ties, no kinks
    tnp.check_grads(f, args, order=1)


def test_second_order_and_complex(rng):
    a = rng.standard_normal((3, 3))
    tnp.check_grads(lambda x: tnp.sum(tnp.sin(x) @ x.T) * tnp.trace(x), [a], order=2)
    z = rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))
    tnp.check_grads(lambda x: tnp.exp(x) * x.conj() + x.reshape(3, 2).T ** 2, [z], order=2)


def test_transforms(rng):
    x = rng.standard_normal(4)
    value, g = tnp.value_and_grad(lambda v: tnp.sum(v**3))(x)
    assert value == pytest.approx(np.sum(x**3)) and np.allclose(g, 3 * x**2)
    g0, g1 = tnp.grad(lambda a, b: tnp.sum(a * b**2), argnums=(0, 1))(x, 2 * x)
    np.testing.assert_allclose(g0, 4 * x**2)
    np.testing.assert_allclose(g1, 4 * x**2)
    y, dy = tnp.jvp(lambda v: tnp.sin(v) * v, (x,), (np.ones(4),))
    np.testing.assert_allclose(dy, np.cos(x) * x + np.sin(x))
    y, pullback = tnp.vjp(lambda a, b: a * b, x, 3 * x)
    ga, gb = pullback(np.ones(4))
    np.testing.assert_allclose(ga, 3 * x)
    np.testing.assert_allclose(gb, x)
    np.testing.assert_allclose(tnp.hvp(lambda v: tnp.sum(v**4), x, np.ones(4)), 12 * x**2)
    assert tnp.grad(tnp.grad(tnp.grad(lambda v: v**4)))(2.0) == pytest.approx(48.0)
    assert tnp.grad(lambda v: v * tnp.grad(lambda w: v * w)(v))(3.0) == pytest.approx(6.0)  # no perturbation confusion
    assert tnp.grad(lambda z: tnp.abs(z) ** 2)(3 + 4j) == pytest.approx(6 + 8j)  # docs/complex.md's convention
    np.testing.assert_array_equal(tnp.grad(lambda v: 3.0)(x), np.zeros(4))  # a constant function


def test_transform_errors():
    with pytest.raises(tf.NonScalarGrad, match=r"^grad: expected a function returning a real scalar"):
        tnp.grad(lambda v: v * 2)(np.ones(3))
    with pytest.raises(tf.InvalidArgument, match=r"^grad: expected argnums among the 1 arguments"):
        tnp.grad(lambda v: v, argnums=1)(1.0)
    with pytest.raises(tf.InvalidArgument, match=r"^jvp: expected a tangent of its primal's shape"):
        tnp.jvp(lambda v: v, (np.ones(3),), (np.ones(2),))
    with pytest.raises(TypeError, match="immutable"):
        with tnp.session():
            tnp.asarray(np.ones(3))[0] = 1.0
    kept = []
    with tnp.session():
        kept.append(tnp.asarray(np.ones(3)) * 2.0)
    with pytest.raises(tf.SessionEnded):
        kept[0] + 1.0
    with pytest.raises(tf.ShapeMismatch, match="broadcast"):
        with tnp.session():
            tnp.asarray(np.ones(3)) + tnp.asarray(np.ones(4))


# --- the same numbers as the tenferro-style API ----------------------------------------------------------


@pytest.mark.parametrize("chi, steps, beta", [(16, 20, 0.5), (8, 10, 0.3), (8, 10, 0.6)])
def test_trg_in_numpys_spelling_gives_the_examples_numbers(chi, steps, beta):
    """examples/trg_numpy.py (NumPy's row-major reshapes, one tape) against tenferro_py.models.trg."""
    ks = trg.schedule(chi, steps)
    lnz, grad = tnp.value_and_grad(trg_numpy["lnz_per_site"])(beta, ks)
    lnz_ref, grad_ref = trg.value_and_grad(beta, ks)
    assert abs(float(lnz) - lnz_ref) < 1e-13
    assert abs(float(grad) - grad_ref) < 1e-13


@pytest.mark.parametrize("width", [1, 2])
def test_numpy_style_stages_in_a_staged_program(width):
    """A stage written with tnp runs in the stage's session: staging and widths work as for the
    tenferro-style step, to the bit at either width."""

    def stage(s, t, k):
        t_next, ln_norm = trg_numpy["step"](tnp.ndarray(t), k)
        return t_next.tensor, ln_norm.tensor

    ks = trg.schedule(8, 8)
    n = len(ks)
    program = staged.Program(trg.initial, [staged.Stage(lambda s, t, k=k: stage(s, t, k), 2.0**-i)
                                                 for i, k in enumerate(ks)], trg.log_trace, 2.0**-n)
    engine = tf.CpuEngine(tf.Pool.builder().threads(width).build())
    lnz, grad = program.value_and_grad(0.45, engine=engine)
    lnz_ref, grad_ref = trg.program(ks).value_and_grad(0.45)
    assert abs(lnz - lnz_ref) < 1e-14 and abs(grad.item() - grad_ref.item()) < 1e-13
    if width == 2:
        serial = program.value_and_grad(0.45)
        assert lnz == serial.value and grad.item() == serial.grad.item()


# --- linalg -----------------------------------------------------------------------------------------


def _well_conditioned(rng, shape):
    a = rng.standard_normal(shape)
    return a + 3 * np.eye(*shape[-2:]) if shape[-1] == shape[-2] else a


LINALG = {
    "svd values": (lambda a: tnp.linalg.svd(a, full_matrices=False, compute_uv=False), (4, 3)),
    "svd reconstruction": (lambda a: (lambda u, s, vh: (u * s) @ vh)(*tnp.linalg.svd(a, full_matrices=False)), (3, 4)),
    "eigh": (lambda a: (lambda w, v: (v * tnp.exp(w)) @ v.T)(*tnp.linalg.eigh(a + a.T)), (3, 3)),
    "qr": (lambda a: (lambda q, r: q @ r + r[0, 0] * q)(*tnp.linalg.qr(a)), (4, 3)),
    "solve": (lambda a: tnp.linalg.solve(a, a[:, :2] + 1.0), (3, 3)),
    "inv": (lambda a: tnp.linalg.inv(a) @ a.T, (3, 3)),
    "norms": (lambda a: tnp.linalg.norm(a) + tnp.linalg.norm(a, "nuc") + tnp.linalg.norm(a, 2)
              + tnp.linalg.norm(a, 1) + tnp.linalg.norm(a, np.inf) + tnp.linalg.norm(a[0], 1)
              + tnp.sum(tnp.linalg.norm(a, axis=1)), (3, 4)),
    "stacks": (lambda a: tnp.linalg.inv(a @ tnp.swapaxes(a, -1, -2) + 2 * np.eye(3)), (2, 3, 3)),
}


@pytest.mark.parametrize("name", sorted(LINALG))
def test_linalg_against_numpy_and_central_differences(rng, name):
    f, shape = LINALG[name]
    a = _well_conditioned(rng, shape)
    np.testing.assert_allclose(value_in_session(f, a), f(a) if name != "qr" else value_in_session(f, a), rtol=1e-12,
                               atol=1e-12)
    tnp.check_grads(f, [a], order=1)


def test_linalg_values_are_numpys(rng):
    a = rng.standard_normal((4, 3))
    q, r = (np.asarray(x) for x in _in_session(lambda x: tnp.linalg.qr(x), a))
    np.testing.assert_allclose(q @ r, a, atol=1e-14)
    assert np.all(np.diag(r) >= 0)  # the convention: R's diagonal real and >= 0 (NumPy's may be negative)
    for ord_ in (None, "fro", "nuc", 2, 1, np.inf, -1, -np.inf):
        assert value_in_session(lambda x: tnp.linalg.norm(x, ord_), a) == pytest.approx(np.linalg.norm(a, ord_), 1e-14)


def _in_session(f, *args):
    with tnp.session():
        out = f(*[tnp.asarray(x) for x in args])
        return tuple(np.asarray(o) for o in out) if isinstance(out, tuple) else np.asarray(out)
