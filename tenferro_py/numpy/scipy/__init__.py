"""SciPy's namespaces on tnp arrays, as far as the library has them: ``tnp.scipy.linalg``."""

from . import linalg  # noqa: F401
