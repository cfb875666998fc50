"""``fit_summary`` keeps the newest lines of a summary that outgrew its share: as many as fit, no fewer."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pagefault.models.tokens import token_counter
from pagefault.window.compaction import fit_summary

WORDS = st.sampled_from("the ledger kiln Lisbon 1994 naïve café ✓ -- : , user assistant said note".split())
LINES = st.lists(st.lists(WORDS, min_size=0, max_size=30).map(" ".join), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(lines=LINES, max_tokens=st.integers(min_value=0, max_value=400))
def test_keeps_the_most_newest_lines_that_fit(lines, max_tokens):
    counter = token_counter("offline")
    summary = "\n".join(lines)
    got = fit_summary(summary, max_tokens, counter)
    if counter.count_text(summary) <= max_tokens:
        assert got == summary
        return
    assert got == "" or counter.count_text(got) <= max_tokens
    # The slowest correct answer: drop the oldest line until what is left fits.
    kept = summary.splitlines()
    while kept and counter.count_text("\n".join(["(older summary dropped)", *kept])) > max_tokens:
        kept.pop(0)
    assert got == ("\n".join(["(older summary dropped)", *kept]) if kept else "")
