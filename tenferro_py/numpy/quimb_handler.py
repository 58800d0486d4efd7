"""quimb's ``TNOptimizer`` with this library as its autodiff backend.

quimb keeps one handler class per autodiff library (``quimb.tensor.optimize``: autograd, JAX,
TensorFlow, PyTorch), chosen by ``TNOptimizer(..., autodiff_backend=name)``. :func:`register`
adds :class:`TenferroHandler` under ``"tenferro_py"``::

    from tenferro_py.numpy import quimb_handler
    quimb_handler.register()
    opt = qtn.TNOptimizer(psi, loss_fn, norm_fn, autodiff_backend="tenferro_py")

The loss runs on tnp arrays (quimb dispatches through autoray, which tnp registers with), inside
a session of its own for each evaluation; gradients of complex arrays are ∂L/∂Re z + i ∂L/∂Im z,
which is what quimb's vectoriser packs (it conjugates JAX's and autograd's to get the same).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from quimb.utils import tree_flatten, tree_unflatten

from ..errors import InvalidArgument
from . import functions as fn
from . import joining as jn
from .array import value_of
from .transforms import grad, jvp, session, value_and_grad

#: The name ``TNOptimizer``'s ``autodiff_backend`` takes for this library.
NAME = "tenferro_py"


class TenferroHandler:
    """What quimb's optimiser asks of an autodiff backend: arrays as the backend takes them, the
    loss, its value and gradient, and Hessian-vector products (for scipy's Newton-type methods)."""

    def __init__(self, device: str = "cpu"):
        if device != "cpu":
            raise InvalidArgument("TenferroHandler", "device 'cpu' (the library runs on the host)", repr(device))

    def to_variable(self, x: Any) -> np.ndarray:
        """The array as NumPy data (the handler's transforms track it)."""
        return np.asarray(x)

    def to_constant(self, x: Any) -> np.ndarray:
        """The array as NumPy data."""
        return np.asarray(x)

    def setup_fn(self, fn_: Callable[[Any], Any]) -> None:
        """``fn_(arrays)``: the loss of a pytree of arrays (quimb's vectoriser's)."""
        self._fn = fn_

    def _flat(self, arrays: Any) -> tuple[list, Any, Callable[..., Any]]:
        """The pytree's leaves, its structure, and the loss as a function of the leaves."""
        leaves, ref = tree_flatten(arrays, get_ref=True)
        return leaves, ref, lambda *xs: self._fn(tree_unflatten(list(xs), ref))

    def value(self, arrays: Any) -> np.ndarray:
        """The loss at arrays, without a derivative."""
        leaves, _, loss = self._flat(arrays)
        with session():
            return np.asarray(value_of(fn.asarray(loss(*[fn.asarray(x) for x in leaves]))))

    def value_and_grad(self, arrays: Any) -> tuple[np.ndarray, Any]:
        """The loss at arrays and its gradient, in the arrays' tree."""
        leaves, ref, loss = self._flat(arrays)
        value, grads = value_and_grad(loss, argnums=tuple(range(len(leaves))))(*leaves)
        return value, tree_unflatten(grads, ref)

    def hessp(self, primals: Any, tangents: Any) -> Any:
        """The Hessian of the loss at ``primals`` times ``tangents`` (forward over reverse), as the
        real Hessian of the real and imaginary parts for complex arrays, which quimb packs."""
        leaves, ref, loss = self._flat(primals)
        argnums = tuple(range(len(leaves)))

        def flat_grad(*xs: Any) -> Any:
            return jn.concatenate([jn.ravel(g) for g in grad(loss, argnums=argnums)(*xs)])

        _, product = jvp(flat_grad, tuple(leaves), tuple(tree_flatten(tangents)))
        pieces, start = [], 0
        for x in leaves:
            x = np.asarray(x)
            piece = product[start:start + x.size].reshape(x.shape)
            pieces.append(piece if x.dtype.kind == "c" else piece.real)
            start += x.size
        return tree_unflatten(pieces, ref)


def register() -> None:
    """Make ``TNOptimizer(..., autodiff_backend="tenferro_py")`` use :class:`TenferroHandler`
    (idempotent; quimb's registry of handlers is a dict of its optimiser module)."""
    from quimb.tensor import optimize

    optimize._BACKEND_HANDLERS[NAME] = TenferroHandler
