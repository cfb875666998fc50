"""Documents into archival memory: MemGPT's document analysis, where a text far bigger than the
window is split into passages that the agent pages in with ``archival_memory_search``.

Passages are cut on paragraph boundaries (a paragraph longer than a passage is cut on sentences,
then hard). Each passage is an ordinary archival record written through ``ArchivalStore.insert_many``
(so the poisoning guard and secret redaction apply), with provenance ``source="document"``,
``message_id="<name>#p<i>"`` and ``offset`` (the character offset in the text where the passage
starts). Passages are embedded in batches, one batch ahead of the writes, which reuse those vectors;
each batch is written with one read and one write of the stores instead of one per passage.
"""

from __future__ import annotations

import re
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from tqdm import tqdm

from pagefault.stores.archival import ArchivalRecord, ArchivalStore, Provenance
from pagefault.stores.scope import Scope

#: Passage size. A search hit shows the model its first 500 characters and carries 4,000 in its
#: artifact; the embedding reads about the first 1,000.
DEFAULT_PASSAGE_CHARS = 1_500
_BATCH = 64


def _pieces(text: str, pattern: str, base: int = 0) -> list[tuple[int, str]]:
    """(offset, piece) for the stripped pieces of ``text`` between matches of ``pattern``."""
    out, pos = [], 0
    for m in [*re.finditer(pattern, text), None]:
        stop = m.start() if m else len(text)
        raw = text[pos:stop]
        piece = raw.strip()
        if piece:
            out.append((base + pos + len(raw) - len(raw.lstrip()), piece))
        pos = m.end() if m else pos
    return out


def split_passages_at(text: str, max_chars: int = DEFAULT_PASSAGE_CHARS) -> list[tuple[int, str]]:
    """Consecutive passages of at most ``max_chars``, cut between paragraphs where possible, each
    with the character offset in ``text`` where it starts."""
    if max_chars < 100:
        raise ValueError("max_chars must be at least 100")
    pieces: list[tuple[int, str]] = []
    for at, para in _pieces(text, r"\n\s*\n"):
        if len(para) <= max_chars:
            pieces.append((at, para))
            continue
        sentence, sentence_at = "", at
        for s_at, s in _pieces(para, r"(?<=[.!?])\s+", at):
            while len(s) > max_chars:  # a "sentence" longer than a passage: cut it hard
                pieces.append((s_at, s[:max_chars]))
                s, s_at = s[max_chars:], s_at + max_chars
            if sentence and len(sentence) + 1 + len(s) > max_chars:
                pieces.append((sentence_at, sentence))
                sentence, sentence_at = s, s_at
            else:
                joined = f"{sentence} {s}"
                base = sentence_at if sentence else s_at - 1  # where ``joined`` would start in the text
                sentence, sentence_at = joined.strip(), base + len(joined) - len(joined.lstrip())
        if sentence:
            pieces.append((sentence_at, sentence))
    passages: list[tuple[int, str]] = []
    for at, piece in pieces:
        if passages and len(passages[-1][1]) + 2 + len(piece) <= max_chars:
            passages[-1] = (passages[-1][0], passages[-1][1] + "\n\n" + piece)
        else:
            passages.append((at, piece))
    return passages


def split_passages(text: str, max_chars: int = DEFAULT_PASSAGE_CHARS) -> list[str]:
    """Consecutive passages of at most ``max_chars``, cut between paragraphs where possible."""
    return [p for _, p in split_passages_at(text, max_chars)]


def ingest_document(
    archival: ArchivalStore,
    scope: Scope,
    text: str,
    *,
    name: str,
    tags: Sequence[str] = (),
    max_chars: int = DEFAULT_PASSAGE_CHARS,
    progress: bool = True,
) -> list[ArchivalRecord]:
    """Split ``text`` into passages and save each to ``scope``'s archival memory (idempotent)."""
    if not name or not isinstance(name, str):
        raise ValueError("a document needs a name (it goes into each passage's provenance)")
    passages = split_passages_at(text, max_chars)
    records: list[ArchivalRecord] = []
    embed = archival.index.embeddings.embed_array
    batches = [passages[k:k + _BATCH] for k in range(0, len(passages), _BATCH)]
    # The next batch is embedded (CPU) while this one is inserted (mostly waiting on the stores' disk
    # syncs), so ingestion runs at about the speed of embedding alone. The inserts find the vectors in
    # the embedding cache instead of running the model once per passage.
    with tqdm(total=len(passages), desc=f"ingesting {name}", unit="passage", file=sys.stderr,
              disable=not progress) as bar, ThreadPoolExecutor(1, thread_name_prefix="pagefault-embed") as pool:
        ahead = pool.submit(embed, [p for _, p in batches[0]]) if batches else None
        for b, batch in enumerate(batches):
            assert ahead is not None  # submitted before the loop, since batches is not empty
            ahead.result()
            if b + 1 < len(batches):
                ahead = pool.submit(embed, [p for _, p in batches[b + 1]])
            records += archival.insert_many(scope, [
                (passage, Provenance(source="document", message_id=f"{name}#p{i}", offset=offset))
                for i, (offset, passage) in enumerate(batch, b * _BATCH)], tags)
            bar.update(len(batch))
    return records
