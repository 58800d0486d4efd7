"""JAX as the reference of the JAX ports: one function ``f(xp, *args)`` written once runs on tnp
and on jax.numpy (x64), and ``check`` compares values with NumPy's or SciPy's, derivatives with
central differences (check_grads semantics) and with JAX's own JVP along the same direction."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

import tenferro_py.numpy as tnp

from .harness import Case, NotPorted, close, grads, joined, ours, same_jvp, value_tol

_jax: Any = None


def jax_modules() -> tuple[Any, Any]:
    """(jax, jax.numpy), with 64-bit floats on (the reference computes in the case's dtype)."""
    global _jax
    if _jax is None:
        import jax

        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_platforms", "cpu")
        _jax = jax
    return _jax, _jax.numpy


class JaxNumpy:
    """jax.numpy with ``.scipy`` (jax.scipy), so that ``xp.scipy.linalg.expm`` reads as for tnp."""

    def __getattr__(self, name: str) -> Any:
        jax, jnp = jax_modules()
        if name == "scipy":
            import jax.scipy.linalg  # noqa: F401

            return jax.scipy
        return getattr(jnp, name)


JNP = JaxNumpy()


def jax_jvp(f: Callable[..., Any]) -> Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], np.ndarray]:
    """The peer's JVP of f(xp, *args), as NumPy data (outputs joined as ours are)."""
    def jvp(args: Sequence[np.ndarray], tangents: Sequence[np.ndarray]) -> np.ndarray:
        jax, jnp = jax_modules()
        primals = tuple(jnp.asarray(np.asarray(a, dtype=np.complex128 if np.iscomplexobj(a) else np.float64))
                        for a in args)
        ts = tuple(jnp.asarray(np.asarray(t, dtype=p.dtype)) for t, p in zip(tangents, primals))
        return np.asarray(jax.jvp(lambda *xs: joined(jnp, f(JNP, *xs)), primals, ts)[1])
    return jvp


def is_64(dtype: Any) -> bool:
    return np.dtype(dtype) in (np.dtype(np.float64), np.dtype(np.complex128))


def check(name: str, f: Callable[..., Any], args: Sequence[np.ndarray], reference: Callable[..., Any] | None = None,
          *, tol: float | None = None, order: int = 2, rtol: float = 1e-5, atol: float = 1e-7, h: float = 1e-6,
          peer: bool = True, peer_rtol: float = 1e-8, derivative: bool = True,
          tangent: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
    """The value of f(tnp, *args) against reference(*args) (NumPy/SciPy, in the case's dtype), and
    in 64-bit its derivatives: check_grads to ``order`` and the JVP against JAX's."""
    dtype = np.result_type(*[np.asarray(a).dtype for a in args])
    if reference is not None:
        got = ours(lambda *xs: f(tnp, *xs), *args)
        want = reference(*args)
        if isinstance(want, tuple) != isinstance(got, tuple):
            raise NotPorted(f"{name}: reference and ours return different structures")
        for i, (g, w) in enumerate(zip(got, want) if isinstance(got, tuple) else [(got, want)]):
            close(f"output {i}", g, w, tol if tol is not None else value_tol(dtype))
    if derivative and order and is_64(dtype):
        grads(lambda *xs: f(tnp, *xs), args, order=order, rtol=rtol, atol=atol, h=h)
        if peer:
            same_jvp(name, lambda *xs: f(tnp, *xs), jax_jvp(f), args, rtol=peer_rtol, tangent=tangent)


def product_cases(test: str, params: list[dict], run: Callable[..., None]) -> list[Case]:
    """One case per parameter set, named as JAX names its parameterised tests."""
    out = []
    for p in params:
        label = " ".join(f"{k}={_short(v)}" for k, v in p.items())
        name = f"{test}[{label}]"
        out.append(Case("jax", name, (lambda p=p, name=name: run(name, **p))))
    return out


def _short(v: Any) -> str:
    if isinstance(v, type) or isinstance(v, np.dtype):
        return np.dtype(v).name
    return str(v).replace(" ", "")
