"""``lexical_confidence``: BM25's say in a fusion follows its best raw score, up to ``full_at``."""

from __future__ import annotations

import pytest

from pagefault.stores.index.hybrid import lexical_confidence


def test_the_say_grows_with_the_best_score_of_any_signal_and_stops_at_one():
    assert lexical_confidence([{"a": 2.5, "b": 1.0}, {"c": 4.0}], 10.0) == pytest.approx(0.4)
    assert lexical_confidence([{"a": 25.0}], 10.0) == 1.0
    assert lexical_confidence([{}, {}], 10.0) == 0.0  # BM25 found nothing: it has nothing to say
    assert lexical_confidence([{"a": -3.0}], 10.0) == 0.0


def test_full_at_zero_turns_it_off():
    assert lexical_confidence([{"a": 0.1}], 0.0) == 1.0
