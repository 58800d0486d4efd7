"""The examples' command-line convention, shared: ``--help`` prints the usage and exits 0; a
usage error prints one line, ``prog: message``, to stderr and exits 2; numbers are plain
decimals (no ``1_000``, ``inf`` or ``nan``)."""

from __future__ import annotations

import argparse
import re
from typing import Callable

__all__ = ["ArgumentParser", "number", "plain_number"]

_PLAIN = {
    int: re.compile(r"[+-]?[0-9]+"),
    float: re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"),
}


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser with the one-line usage error (exit status 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        """A bad argument: one line on stderr and exit status 2, without the usage block."""
        self.exit(2, f"{self.prog}: {message}\n")


def plain_number(text: str, kind: type) -> int | float:
    """The int or float that ``text`` spells in plain decimal notation, else ValueError.

    Python's int() and float() also take ``1_000``, spaces, non-ASCII digits and, for float,
    ``inf`` and ``nan``: a command line means none of them.
    """
    if not _PLAIN[kind].fullmatch(text):
        raise ValueError(f"not a plain decimal {kind.__name__}: {text!r}")
    return kind(text)


def number(kind: type, allowed: str, ok: Callable[[float], bool] = lambda v: True) -> Callable[[str], float]:
    """An argparse ``type=``: a plain decimal of ``kind`` for which ``ok`` holds, else the usage
    error "must be <allowed>, got '<text>'"."""

    def parse(text: str) -> float:
        try:
            value = plain_number(text, kind)
        except ValueError:
            value = None
        if value is None or not ok(value):
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text!r}")
        return value

    return parse
