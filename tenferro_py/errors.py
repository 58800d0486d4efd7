"""Error classes. Each names the op, what was expected and what was got.

They mirror tenferro's error kinds; each is also the built-in exception that fits
(``ValueError`` for bad values and shapes, ``TypeError`` for dtypes), so callers
may catch either.
"""

from __future__ import annotations


class TenferroError(Exception):
    """Base class of every error raised by tenferro_py."""

    def __init__(self, op: str, expected: str, got: object):
        self.op = op
        self.expected = expected
        self.got = got
        super().__init__(f"{op}: expected {expected}, got {got}")


class ShapeMismatch(TenferroError, ValueError):
    """Shapes (or data lengths) that do not fit together."""


class DTypeMismatch(TenferroError, TypeError):
    """A dtype that is not supported or does not match its partner."""


class InvalidArgument(TenferroError, ValueError):
    """A bad axis, permutation, slice bound, subscript, option or count."""


class NonScalarGrad(TenferroError, ValueError):
    """``backward()`` or ``grad`` asked of an output that is not a scalar."""


class NotReachable(TenferroError, ValueError):
    """``wrt`` does not reach the output (or is a constant, which has no slot)."""


class RuntimeMismatch(TenferroError, ValueError):
    """Tensors of two different runtimes mixed in one call."""


class Unsupported(TenferroError, NotImplementedError):
    """A transform met a primitive with no AD rule in the runtime's context."""


class TrackedConversion(TenferroError, TypeError):
    """A tracked array (one a derivative is being taken through) read as a number or NumPy data,
    or handed to a NumPy function: its derivative would be dropped."""


class NoSuchOp(TenferroError, AttributeError):
    """A session attribute that is no op of the session."""


class SessionEnded(TenferroError, ValueError):
    """An op on a session whose ``with_eager_session`` call has returned."""


class LinalgError(TenferroError, ArithmeticError):
    """LAPACK did not converge, or was given inf or NaN."""


class DegenerateDerivativeWarning(UserWarning):
    """A derivative at repeated or zero singular values (or eigenvalues) that the rule could not
    determine from what it sees: the message names the op, the values, and how to get the exact
    derivative instead (docs/spectral.md#degenerate). ``warnings.simplefilter("error",
    DegenerateDerivativeWarning)`` makes it an error."""
