"""Tensor-network algorithms written on tenferro_py's public API: import them, do not copy a script.

``onsager``: the exact infinite 2D Ising model (the reference the others are checked against).
"""

from . import onsager

__all__ = ["onsager"]
