"""PyTorch's own linalg test inputs, run against tnp: every OpInfo sample of torch's linalg ops
(torch.testing._internal's op_db: shapes with empty batches and matrices, batches, kwargs, the
gradcheck wrappers and output processing), in float64 and complex128.

Per sample: the value of our port against torch's (through the sample's output processing, the
gauge-invariant view PyTorch's own gradcheck differentiates: |U|, U Vᴴ, |v|, …), then gradcheck
semantics on our side (check_grads, both modes, order 2 where torch checks gradgrad) and our JVP
against torch's forward AD along the same direction. Each op's port is the call a NumPy user
would write (torch's vector rule of solve, the pinv of a @ bᵀ of its 'singular' variant, …).
"""

from __future__ import annotations

import sys
import types
import unittest
from typing import Any, Callable

import numpy as np

import tenferro_py.numpy as tnp

from .harness import Case, Missing, WrongDerivative, close, grads, joined, our_jvp, ours, same_jvp, tangents_for

_torch: Any = None


def torch_module() -> Any:
    """torch, with PyTorch's test-only dependency expecttest stubbed when absent (the OpInfo
    database imports it for its TestCase base class only)."""
    global _torch
    if _torch is None:
        try:
            import expecttest  # noqa: F401
        except ImportError:
            stub = types.ModuleType("expecttest")
            stub.TestCase = unittest.TestCase
            sys.modules["expecttest"] = stub
        import torch

        _torch = torch
    return _torch


def _swap(x):
    return tnp.swapaxes(x, -1, -2)


def _hermitian_input(x):
    """gradcheck_wrapper_hermitian_input: the op sees x + xᴴ."""
    return x + tnp.conj(_swap(x))


def _solve(a, b):
    """torch.linalg.solve's rule: b is a (batch of) vector(s) when it is 1-D or has a's shape without
    its last axis; NumPy 2 takes only a 1-D b as a vector, so a batch of vectors goes as columns."""
    if b.ndim > 1 and b.shape == a.shape[:-1]:
        return tnp.linalg.solve(a, b[..., None])[..., 0]
    return tnp.linalg.solve(a, b)


def _float(v):
    return None if v is None else float(np.asarray(v))


def _pinv(x, rtol=None, hermitian=False, atol=None):
    if atol is not None:
        raise Missing("tnp.linalg.pinv(atol=)")
    return tnp.linalg.pinv(x, rtol=_float(rtol), hermitian=hermitian)


def _lstsq(a, b, driver=None, grad_oriented=False):
    """x, and for the grad_oriented variant the residuals where torch computes them (not with gelsy)."""
    x, residuals, _, _ = tnp.linalg.lstsq(a, b)
    return (x, residuals) if grad_oriented and driver != "gelsy" else x


def _matrix_rank(x, atol=None, rtol=None, hermitian=False):
    """torch's tolerance max(atol, rtol·s₁) (rtol 0 when only atol > 0 is given; NumPy's default
    when neither is) as NumPy's absolute tol."""
    if atol is None and rtol is None:
        return tnp.linalg.matrix_rank(x, hermitian=hermitian)
    value = np.asarray(tnp.stop_gradient(x))
    if rtol is None:
        rtol = 0.0 if atol is not None and np.all(np.asarray(atol) > 0) else np.finfo(value.dtype).eps * max(value.shape[-2:])
    top = np.max(np.abs(np.linalg.eigvalsh(value)) if hermitian else np.linalg.svd(value, compute_uv=False),
                 axis=-1, initial=0.0)
    return tnp.linalg.matrix_rank(x, tol=np.maximum(0.0 if atol is None else atol, rtol * top), hermitian=hermitian)


def _solve_triangular(a, b, upper, left=True, unitriangular=False):
    """left=False (x a = b) as aᵀ xᵀ = bᵀ."""
    if left:
        return tnp.scipy.linalg.solve_triangular(a, b, lower=not upper, unit_diagonal=unitriangular)
    return _swap(tnp.scipy.linalg.solve_triangular(a, _swap(b), trans=1, lower=not upper, unit_diagonal=unitriangular))


def _lu_factor(x, pivot=True):
    if not pivot:
        raise Missing("tnp.scipy.linalg.lu without pivoting")
    lu, piv = tnp.scipy.linalg.lu_factor(x)
    return lu, piv + 1  # torch's pivots are 1-based


def _lu_solve(lu, pivots, b, left=True, adjoint=False):
    """torch's (left, adjoint) as SciPy's trans on b or on bᴴ (x a = b as aᵀ xᵀ = bᵀ; x aᴴ = b as a xᴴ = bᴴ)."""
    factors = (lu, np.asarray(pivots) - 1)
    if left:
        return tnp.scipy.linalg.lu_solve(factors, b, trans=2 if adjoint else 0)
    if not adjoint:
        return _swap(tnp.scipy.linalg.lu_solve(factors, _swap(b), trans=1))
    return tnp.conj(_swap(tnp.scipy.linalg.lu_solve(factors, tnp.conj(_swap(b)))))


def _vector_norm(x, ord=2, dim=None, keepdim=False):
    """torch takes dim 0 (or -1) of a 0-d tensor as the whole of it."""
    if np.ndim(x) == 0:
        dim, keepdim = None, False
    return tnp.linalg.vector_norm(x, axis=dim, keepdims=keepdim, ord=ord)


def _logdet(x):
    """log det: log|det| + log(sign) (NaN for a negative real det, as torch's)."""
    sign, logabs = tnp.linalg.slogdet(x)
    return logabs + tnp.log(sign)


OURS: dict[tuple[str, str], Callable[..., Any]] = {
    ("linalg.det", ""): lambda x: tnp.linalg.det(x),
    ("linalg.slogdet", ""): lambda x: tuple(tnp.linalg.slogdet(x)),
    ("linalg.inv", ""): lambda x: tnp.linalg.inv(x),
    ("linalg.cholesky", ""): lambda x, upper=False: tnp.linalg.cholesky(_hermitian_input(x), upper=upper),
    ("linalg.eig", ""): lambda x: tnp.linalg.eig(x),
    ("linalg.eigvals", ""): lambda x: tnp.linalg.eigvals(x),
    ("linalg.eigh", ""): lambda x, UPLO="L": tnp.linalg.eigh(_hermitian_input(x), UPLO=UPLO),
    ("linalg.eigvalsh", ""): lambda x, UPLO="L": tnp.linalg.eigvalsh(_hermitian_input(x), UPLO=UPLO),
    ("linalg.matrix_power", ""): lambda x, n: tnp.linalg.matrix_power(x, n),
    ("linalg.norm", ""): lambda x, ord=None, dim=None, keepdim=False: tnp.linalg.norm(x, ord, dim, keepdim),
    ("linalg.norm", "subgradients_at_zero"): lambda x, ord=None, dim=None, keepdim=False: tnp.linalg.norm(
        x, ord, dim, keepdim),
    ("linalg.matrix_norm", ""): lambda x, ord="fro", dim=(-2, -1), keepdim=False: tnp.linalg.norm(
        x, ord, tuple(dim), keepdim),
    ("linalg.qr", ""): lambda x, mode="reduced": tnp.linalg.qr(x, mode=mode),
    ("linalg.solve", ""): _solve,
    ("linalg.pinv", ""): _pinv,
    ("linalg.pinv", "hermitian"): lambda x, hermitian=True, **kw: _pinv(_hermitian_input(x), hermitian=hermitian, **kw),
    ("linalg.pinv", "singular"): lambda a, b: tnp.linalg.pinv(a @ _swap(b)),
    ("linalg.svd", ""): lambda x, full_matrices=True: tnp.linalg.svd(x, full_matrices=full_matrices),
    ("linalg.svdvals", ""): lambda x: tnp.linalg.svdvals(x),
    ("linalg.lstsq", ""): _lstsq,
    ("linalg.lstsq", "grad_oriented"): lambda a, b, driver=None: _lstsq(a, b, driver, grad_oriented=True),
    ("linalg.diagonal", ""): lambda x, offset=0, dim1=-2, dim2=-1: tnp.diagonal(x, offset, dim1, dim2),
    ("matrix_exp", ""): lambda x: tnp.scipy.linalg.expm(x),
    ("linalg.cond", ""): lambda x, p=None: tnp.linalg.cond(x, p),
    ("linalg.matrix_rank", ""): _matrix_rank,
    ("linalg.matrix_rank", "hermitian"): _matrix_rank,
    ("linalg.vector_norm", ""): _vector_norm,
    ("linalg.cross", ""): lambda x, y, dim=-1: tnp.linalg.cross(x, y, axis=dim),
    ("linalg.vecdot", ""): lambda x, y, dim=-1: tnp.linalg.vecdot(x, y, axis=dim),
    ("linalg.multi_dot", ""): lambda xs: tnp.linalg.multi_dot(xs),
    ("linalg.tensorinv", ""): lambda x, ind=2: tnp.linalg.tensorinv(x, ind=ind),
    ("linalg.tensorsolve", ""): lambda a, b, dims=None: tnp.linalg.tensorsolve(a, b, axes=dims),
    ("linalg.solve_triangular", ""): _solve_triangular,
    ("linalg.lu", ""): lambda x, pivot=True: tnp.scipy.linalg.lu(x) if pivot else _lu_factor(x, pivot),
    ("linalg.lu_factor", ""): _lu_factor,
    ("linalg.lu_solve", ""): _lu_solve,
    ("logdet", ""): _logdet,
}
MISSING = {"linalg.householder_product": "a Householder product", "linalg.vander": "tnp.vander",
           "linalg.ldl_factor": "tnp.scipy.linalg.ldl", "linalg.ldl_solve": "an LDL solve",
           "linalg.cholesky_ex": "cholesky_ex (torch's info-returning variant)",
           "linalg.inv_ex": "inv_ex (torch's info-returning variant)",
           "linalg.solve_ex": "solve_ex (torch's info-returning variant)",
           "linalg.lu_factor_ex": "lu_factor_ex", "linalg.ldl_factor_ex": "ldl_factor_ex"}


def _thin(u_s_vh):
    """torch's ``uniformize``: the k = len(s) leading columns of U and rows of Vh."""
    u, s, vh = u_s_vh
    k = s.shape[-1]
    return u[..., :k], s, vh[..., :k, :]


def process(name: str, out: Any, xp_abs: Callable[[Any], Any]) -> Any:
    """The sample's output_process_fn_grad, by its name, for either library's outputs."""
    if name == "fn_U":
        return xp_abs(_thin(out)[0])
    if name == "fn_S":
        return _thin(out)[1]
    if name == "fn_Vh":
        _, s, vh = _thin(out)
        return s, xp_abs(vh)
    if name == "fn_UVh":
        u, s, vh = _thin(out)
        return u @ vh, s
    if name == "out_fn" and isinstance(out, tuple):
        return out[0], xp_abs(out[1])
    return tuple(out) if isinstance(out, tuple) else out


def _torch_qr_gauge(torch, q, r):
    """torch's Q, R in this library's convention (R's diagonal real and ≥ 0)."""
    d = torch.diagonal(r, dim1=-2, dim2=-1)
    phase = torch.where(d.abs() == 0, torch.ones_like(d), d / d.abs().clamp_min(1e-300))
    return q * phase.unsqueeze(-2), r * phase.conj().unsqueeze(-1)


def _run(name: str, op: Any, sample: Any, key: tuple[str, str]) -> None:
    torch = torch_module()
    listed = isinstance(sample.input, (list, tuple))  # multi_dot's input is a list of tensors
    firsts = list(sample.input) if listed else [sample.input]
    kwargs = {k: (v.item() if v.ndim == 0 else v.numpy()) if isinstance(v, torch.Tensor) else v
              for k, v in sample.kwargs.items()}
    # Integer tensors (lu_solve's pivots) are fixed arguments, not differentiated.
    fixed = {i: a.numpy().copy() for i, a in enumerate(sample.args)
             if isinstance(a, torch.Tensor) and not (a.is_floating_point() or a.is_complex())}
    tensors = firsts + [a for i, a in enumerate(sample.args) if isinstance(a, torch.Tensor) and i not in fixed]
    arrays = [t.detach().resolve_conj().numpy().copy() for t in tensors]
    fn_name = getattr(sample.output_process_fn_grad, "__name__", "")
    our_fn = OURS[key]

    def with_args(inputs, as_tensor=False):
        """The sample's positional arguments with its differentiated tensors replaced by ``inputs``, in order."""
        rest = iter(inputs[len(firsts):])
        return [(torch.from_numpy(fixed[i]) if as_tensor else fixed[i]) if i in fixed
                else next(rest) if isinstance(a, torch.Tensor) else a for i, a in enumerate(sample.args)]

    def first(inputs):
        return list(inputs[:len(firsts)]) if listed else inputs[0]

    def our_processed(*xs):
        return process(fn_name, our_fn(first(xs), *with_args(xs), **kwargs), tnp.abs)

    def torch_processed(*ts):
        out = op.gradcheck_wrapper(op.op, first(ts), *with_args(ts, True), **sample.kwargs)
        if key[0] == "linalg.qr" and sample.kwargs.get("mode", "reduced") == "reduced":
            out = _torch_qr_gauge(torch, *out)
        if key == ("linalg.lstsq", ""):
            out = out[0]
        if key == ("linalg.lstsq", "grad_oriented") and sample.kwargs.get("driver") == "gelsy":
            out = out[0]
        return process(fn_name, tuple(out) if isinstance(out, tuple) else out, torch.abs)

    got = ours(lambda *xs: joined(tnp, our_processed(*xs)), *arrays)
    with torch.no_grad():
        want = torch_processed(*[t.detach() for t in tensors])
    want = torch.cat([w.reshape(-1).to(torch.complex128 if any(v.is_complex() for v in want) else w.dtype)
                      for w in want]) if isinstance(want, tuple) else want
    close("value against torch's", got, want.resolve_conj().numpy(), 1e-10)
    if not op.supports_autograd:
        return
    if key[1] == "subgradients_at_zero":  # torch's own gradchecks expect failure there: a subgradient, finite
        _finite_subgradient(name, our_processed, arrays)
        return
    grads(our_processed, arrays, order=2 if op.supports_gradgrad else 1)
    if op.supports_forward_ad:
        same_jvp(name, our_processed, _torch_jvp(torch, torch_processed), arrays, rtol=1e-8)


def _finite_subgradient(name, f, arrays):
    """At a point where the norm has no derivative (zero): the JVP and VJP finite, never NaN (README,
    norm: the derivative at 0 is 0, ties share it, 'nuc' gives U Vᴴ)."""
    ts = tangents_for(name, arrays)
    jvp = our_jvp(f, arrays, ts)
    _, pullback = tnp.vjp(lambda *xs: joined(tnp, f(*xs)), *arrays)
    vjp = pullback(np.ones(jvp.shape, dtype=jvp.dtype))
    if not (np.all(np.isfinite(jvp)) and all(np.all(np.isfinite(np.asarray(v))) for v in vjp)):
        raise WrongDerivative(f"a derivative at zero is not finite: jvp {jvp}")


def _torch_jvp(torch, f):
    def jvp(args, tangents):
        primals = tuple(torch.from_numpy(np.asarray(a)) for a in args)
        ts = tuple(torch.from_numpy(np.asarray(t, dtype=np.asarray(a).dtype)) for t, a in zip(tangents, args))

        def flat(*xs):
            out = f(*xs)
            if not isinstance(out, tuple):
                return out
            complex_ = any(o.is_complex() for o in out)
            return torch.cat([o.reshape(-1).to(torch.complex128) if complex_ else o.reshape(-1) for o in out])
        return torch.func.jvp(flat, primals, ts)[1].detach().resolve_conj().numpy()
    return jvp


def cases() -> list[Case]:
    torch = torch_module()
    from torch.testing._internal.common_methods_invocations import op_db

    out = []
    for op in op_db:
        key = (op.name, op.variant_test_name)
        if key not in OURS and op.name not in MISSING:
            continue
        for dtype in (torch.float64, torch.complex128):
            if dtype not in op.supported_dtypes("cpu"):
                continue
            for i, sample in enumerate(op.sample_inputs("cpu", dtype, requires_grad=False)):
                shape = tuple(sample.input.shape) if isinstance(sample.input, torch.Tensor) else ()
                label = f"{op.name}{'.' + op.variant_test_name if op.variant_test_name else ''}"
                name = (f"{label}[{i} {str(dtype).split('.')[-1]} {shape} args={_describe(sample.args)} "
                        f"kwargs={_describe(sample.kwargs)}]")
                if key in OURS:
                    out.append(Case("torch", name, lambda name=name, op=op, s=sample, key=key: _run(name, op, s, key)))
                else:
                    out.append(Case("torch", name, lambda f=MISSING[op.name]: (_ for _ in ()).throw(Missing(f))))
    return out


def _describe(x: Any) -> str:
    torch = torch_module()
    if isinstance(x, dict):
        return "{" + ",".join(f"{k}:{_describe(v)}" for k, v in x.items()) + "}"
    if isinstance(x, (tuple, list)):
        return "(" + ",".join(_describe(v) for v in x) + ")"
    if isinstance(x, torch.Tensor):
        return f"T{tuple(x.shape)}"
    return repr(x)
