"""Where ops run: ``CpuEngine`` on a ``Pool`` of a given width.

Every kernel call of every op goes through :meth:`CpuEngine.run`. While an engine
runs, BLAS/LAPACK are pinned to one thread each, so a kernel gives the same bits
whatever the width; the width is the number of kernels that may run at once.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from threadpoolctl import ThreadpoolController

from .errors import InvalidArgument

_CONTROLLER: ThreadpoolController | None = None


def _controller() -> ThreadpoolController:
    """The process's BLAS thread controller, found once (finding it scans the libraries)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


class Pool:
    """A number of worker threads; built as ``Pool.builder().threads(n).build()``."""

    __slots__ = ("_threads",)

    def __init__(self, threads: int = 1):
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise InvalidArgument("Pool.threads", "an int >= 1", repr(threads))
        self._threads = threads

    @staticmethod
    def builder() -> "PoolBuilder":
        return PoolBuilder()

    @property
    def threads(self) -> int:
        return self._threads

    def __repr__(self) -> str:
        return f"Pool(threads={self._threads})"


class PoolBuilder:
    """Builder of a :class:`Pool`, as tenferro's ``Pool::builder()``."""

    __slots__ = ("_threads",)

    def __init__(self) -> None:
        self._threads = 1

    def threads(self, n: int) -> "PoolBuilder":
        """Set the width (checked when built)."""
        self._threads = n
        return self

    def build(self) -> Pool:
        return Pool(self._threads)


class CpuEngine:
    """Runs kernels on the CPU, ``pool.threads`` of them at a time at most."""

    __slots__ = ("_pool",)

    def __init__(self, pool: Pool):
        if not isinstance(pool, Pool):
            raise InvalidArgument("CpuEngine", "a Pool (Pool.builder().threads(n).build())", repr(pool))
        self._pool = pool

    @classmethod
    def serial(cls) -> "CpuEngine":
        """An engine of width 1."""
        return cls(Pool(1))

    @property
    def width(self) -> int:
        return self._pool.threads

    @contextlib.contextmanager
    def active(self) -> Iterator["CpuEngine"]:
        """Pin BLAS/LAPACK to one thread per kernel while ops run here."""
        with _controller().limit(limits=1, user_api="blas"):
            yield self

    def run(self, kernel: Callable[..., Any], *args: Any, **params: Any) -> Any:
        """Run one kernel and return its result."""
        return kernel(*args, **params)

    def __repr__(self) -> str:
        return f"CpuEngine(width={self.width})"
