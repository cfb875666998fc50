"""A long text is counted line by line (``TokenCounter.count_text``); the sum must be the encoding's
own count of the whole text, exactly, for every encoding pagefault ships."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pagefault.models.tokens import LONG_TEXT_CHARS, TokenCounter

PIECES = st.sampled_from(["\n", "\n\n", "\r\n", "  \n", " ", "\t", "\u00a0", "\u2028", ".", ",", ":", "'s", "'ll",
                          "-", "/", "#", "**", "()", "[x]", "{}", "123", "4567", "the", " the", "Kiln", "naïve",
                          "café", "中文", "🙂", "✓", "\u0301", "Ω", "ALLCAPS", "camelCase"])
TEXTS = st.lists(PIECES, min_size=1, max_size=300).map("".join)


@pytest.mark.parametrize("model", ["offline", "openai:gpt-4o"])
@settings(max_examples=300, deadline=None)
@given(text=TEXTS)
def test_line_by_line_count_is_the_whole_texts_count(model, text):
    counter = TokenCounter(model)
    text = text if len(text) >= LONG_TEXT_CHARS else text + "\n" + "x" * LONG_TEXT_CHARS
    assert counter.count_text(text) == len(counter.encoding.encode_ordinary(text))
    assert counter.count_text(text) == len(counter.encoding.encode_ordinary(text))  # remembered, same
