"""Busy processes that keep the CPU loaded while a test runs (issue 43: "Nothing lost under load").

Kept apart from the tests so that a spawned hog imports only this module, not pagefault.
"""

from __future__ import annotations

import multiprocessing as mp
from contextlib import contextmanager
from typing import Iterator


def spin() -> None:
    """Burn CPU until terminated."""
    n = 0
    while True:
        n = (n + 1) % 1_000_003


@contextmanager
def busy_cpus(hogs: int) -> Iterator[list[mp.process.BaseProcess]]:
    """``hogs`` processes spinning on the CPU for the duration of the block, stopped (and reaped) after
    it whatever happens. They are spawned, not forked: the test process has threads."""
    spawn = mp.get_context("spawn")
    procs = [spawn.Process(target=spin, daemon=True, name=f"cpu-hog-{i}") for i in range(hogs)]
    try:
        for p in procs:
            p.start()
        yield procs
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            if p.pid is not None:
                p.join(10)
