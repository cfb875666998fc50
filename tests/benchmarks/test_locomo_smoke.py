"""The LoCoMo benchmark (``benchmarks/locomo.py``) on its smallest conversation: pagefault's
recall beats BM25 alone through the real import and ``conversation_search``. Reads LoCoMo from
``../shared/data/locomo`` (or ``PAGEFAULT_LOCOMO_DIR``), so it runs with ``-m shared_data``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.shared_data  # reads LoCoMo from ../shared/data (a benchmark's data, not the repo's)
def test_locomo_one_conversation_beats_bm25():
    """The benchmark's smallest conversation, through the real import and conversation_search."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import locomo

    data = locomo.load()
    smallest = min(range(len(data)), key=lambda i: sum(len(s["messages"]) for s in data[i]["dialog"]["sessions"]))
    result = locomo.run_subset([smallest], progress=False)
    ours = result["table"]["pagefault"]["overall"]
    bm25 = result["table"]["BM25 only"]["overall"]
    assert ours[1] >= bm25[1], f"recall@10 {ours[1]:.1f} fell below BM25's {bm25[1]:.1f}"
    assert result["timings"]["compactions"] > 0
