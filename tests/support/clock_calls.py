"""Which calls in Python source read a clock: the one reading of "a clock call" for the source scans of the
unit tier (``test_no_wall_clock``, ``test_module_state``)."""

from __future__ import annotations

import ast

#: Methods that read a clock when called with no argument (``time.time()``, ``time.monotonic()``...).
CLOCK_METHODS = {"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "process_time"}
#: The same functions imported by name (``from time import monotonic``), and ``timeit.default_timer``.
CLOCK_FUNCTIONS = {"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time_ns", "default_timer"}


def _owner(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def is_clock_call(node: ast.AST) -> bool:
    """Whether ``node`` is a call that reads a clock: a ``CLOCK_METHODS`` method with no argument, a
    ``CLOCK_FUNCTIONS`` function, ``datetime.now()`` / ``utcnow()`` or ``date.today()``."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Attribute):
        if f.attr in CLOCK_METHODS and not node.args:
            return True
        return f.attr in {"now", "utcnow", "today"} and _owner(f.value) in {"datetime", "date"}
    return isinstance(f, ast.Name) and f.id in CLOCK_FUNCTIONS
