"""The scheduling hint ``support.scheduling.LONGEST_FIRST`` names test files that exist (a renamed file would quietly
lose its early start)."""

from __future__ import annotations

from pathlib import Path

from support.scheduling import LONGEST_FIRST

TESTS = Path(__file__).resolve().parents[1]


def test_every_file_named_longest_first_exists_once():
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    assert [name for name in LONGEST_FIRST if not (TESTS / name).is_file()] == []
