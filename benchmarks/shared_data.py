"""Where the benchmarks' read-only data comes from: ``../shared/data`` beside the repository.

The LoCoMo conversations (``shared/data/locomo``, or ``PAGEFAULT_LOCOMO_DIR``) and the seed
documents (``shared/seeds``) are not part of the repository. A benchmark that needs them and finds
them missing stops with one line saying what it looked for and where, not a traceback.
"""

from __future__ import annotations

from pathlib import Path


def require(path: Path, what: str) -> Path:
    """``path`` if it exists; otherwise stop the benchmark with one line naming ``what`` and where."""
    if not path.exists():
        raise SystemExit(f"{what} not found at {path}: the benchmarks read it from ../shared beside the repository "
                         "(for LoCoMo, PAGEFAULT_LOCOMO_DIR points elsewhere)")
    return path
