"""Numeric command-line flags that are not ``Context`` fields, each checked against its bounds.

A flag that sets a ``Context`` field (``import-history --window``) is passed to ``Context``, which
checks it (``pagefault.graph.context.NUMERIC_BOUNDS``). The others get an argparse type from here: a
value out of range is a usage error, one line and exit status 2, before the command does anything.
"""

from __future__ import annotations

import argparse
import math
from typing import Callable


def bounded_int(low: int, high: int, unit: str) -> Callable[[str], int]:
    """An argparse type: an integer from ``low`` to ``high`` (inclusive), counted in ``unit``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number of {unit}, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low:,} to {high:,} {unit}, got {text}")
        return value

    return parse


def bounded_float(low: float, high: float, what: str, *, low_open: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number from ``low`` to ``high`` (``low`` itself excluded when
    ``low_open``), ``what`` saying what it is in the message."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        inside = low < value <= high if low_open else low <= value <= high  # nan is inside no range
        if not inside:
            opening = "(" if low_open else "["
            raise argparse.ArgumentTypeError(f"{what} must be in {opening}{low:g}, {high:g}], got {text!r}")
        return value

    return parse
