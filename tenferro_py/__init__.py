"""tenferro_py: an eager automatic-differentiation tape over NumPy/LAPACK with tenferro's API."""

from . import einsum, linalg, staged
from . import kernel_sessions  # noqa: F401  (hands composites their kernel sessions, before any kernel runs)
from .engine import CpuEngine, Pool, PoolBuilder
from .errors import (
    DegenerateDerivativeWarning,
    DTypeMismatch,
    InvalidArgument,
    LinalgError,
    NoSuchOp,
    NonScalarGrad,
    NotReachable,
    RuntimeMismatch,
    SessionEnded,
    ShapeMismatch,
    TenferroError,
    TrackedConversion,
    Unsupported,
)
from .ops.structural import SliceConfig
from .rules import RuleSet
from .ad_context import AdContext, AdContextBuilder
from .runtime import EagerRuntime
from .session import EagerSession
from .tape import EagerTensor, TangentMemo
from .tensor import Tensor

__version__ = "0.1.0"

__all__ = [
    "AdContext",
    "AdContextBuilder",
    "CpuEngine",
    "DTypeMismatch",
    "DegenerateDerivativeWarning",
    "EagerRuntime",
    "EagerSession",
    "EagerTensor",
    "InvalidArgument",
    "LinalgError",
    "NoSuchOp",
    "NonScalarGrad",
    "NotReachable",
    "Pool",
    "PoolBuilder",
    "RuleSet",
    "RuntimeMismatch",
    "SessionEnded",
    "ShapeMismatch",
    "SliceConfig",
    "TangentMemo",
    "Tensor",
    "TenferroError",
    "TrackedConversion",
    "Unsupported",
    "einsum",
    "linalg",
    "staged",
]
