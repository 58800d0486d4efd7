"""Saving an iPEPS run's state: one JSON file, written atomically (read back, field by field, by
:func:`tenferro_py.models.ipeps.load_state`)."""

from __future__ import annotations

import json
import os
import tempfile

from ..errors import TenferroError

__all__ = ["SAVE_FORMAT", "StateFileError", "check_writable", "save_state"]

SAVE_FORMAT = "ipeps_heisenberg/1"


class StateFileError(TenferroError, ValueError):
    """A state file that cannot be written or read back, or is not one ``save_state`` wrote."""


def check_writable(path: str) -> None:
    """StateFileError unless ``save_state`` can (re)write ``path``: its directory exists and is writable."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(directory) or not os.access(directory, os.W_OK | os.X_OK):
        raise StateFileError("save_state", "a file in an existing, writable directory", repr(path))


def save_state(path: str, state: dict) -> None:
    """Write ``state`` as JSON to ``path`` atomically: a temporary file in the same directory, flushed and
    fsynced, then renamed over ``path``, so ``path`` is always a whole file."""
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump(state, file)
            file.write("\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    directory_handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(directory_handle)  # the rename itself survives a crash
    finally:
        os.close(directory_handle)
