"""A NumPy-style front end: ``import tenferro_py.numpy as tnp``.

NumPy's functions, operators and array methods on the library's session ops, with NumPy's
semantics (row-major reshape, broadcasting, promotion, indexing), and JAX-style transforms
(``grad``, ``value_and_grad``, ``jvp``, ``vjp``, ``hvp``) that take and return NumPy data.
Inside a session (``tnp.session()``, ``with_eager_session`` or a transform) the functions
return arrays of that session, so derivatives, higher orders, staging and engine widths are
those of the tenferro-style API; outside one, on NumPy data, they are NumPy's own.
"""

from importlib.util import find_spec as _find_spec

from numpy import (  # noqa: F401 (NumPy's constants, dtypes and random numbers, as NumPy's)
    __version__,
    bool_,
    complex64,
    complex128,
    dtype,
    e,
    float32,
    float64,
    inf,
    int32,
    int64,
    nan,
    newaxis,
    pi,
    random,
)

from . import interop, linalg, methods, scipy  # noqa: F401 (methods: sets ndarray's methods, at import)
from .array import astype, ndarray, power, stop_gradient  # noqa: F401
from .contractions import matmul  # noqa: F401
from .shaping import reshape, transpose  # noqa: F401
from .functions import *  # noqa: F401,F403
from .functions import __all__ as _functions
from .manipulation import *  # noqa: F401,F403
from .manipulation import __all__ as _manipulation
from .joining import *  # noqa: F401,F403
from .joining import __all__ as _joining
from .arithmetic import *  # noqa: F401,F403
from .arithmetic import __all__ as _arithmetic
from .transforms import check_grads, grad, hvp, jvp, session, value_and_grad, vjp  # noqa: F401

__all__ = sorted(set(_functions) | set(_manipulation) | set(_joining) | set(_arithmetic) | {
    "bool_", "dtype", "int32", "int64",
    "astype", "check_grads", "complex64", "complex128", "e", "float32", "float64", "grad", "hvp", "inf", "jvp", "linalg",
    "matmul", "nan", "ndarray", "newaxis", "pi", "power", "random", "reshape", "scipy", "session", "stop_gradient", "transpose",
    "value_and_grad", "vjp",
})

interop.offer_names("numpy", __all__)
interop.offer_names("numpy.linalg", linalg.__all__)

if _find_spec("autoray") is not None:  # quimb's and cotengra's dispatcher: tnp arrays run on tnp
    from . import autoray_backend

    autoray_backend.register()
