"""Documents into archival memory: MemGPT's document analysis, where a text far bigger than the
window is split into passages that the agent pages in with ``archival_memory_search``.

Passages are cut on paragraph boundaries (a paragraph longer than a passage is cut on sentences,
then hard). Each passage is an ordinary archival record written through ``ArchivalStore.insert``
(so the poisoning guard and secret redaction apply), with provenance ``source="document"`` and
``message_id="<name>#p<i>"``. Passages are embedded in batches first, so the one-by-one inserts
reuse those vectors instead of running the model once per passage.
"""

from __future__ import annotations

import re
import sys
from typing import Sequence

from tqdm import tqdm

from pagefault.stores.archival import ArchivalRecord, ArchivalStore, Provenance
from pagefault.stores.scope import Scope

#: Passage size. A search hit shows the model its first 500 characters and carries 4,000 in its
#: artifact; the embedding reads about the first 1,000.
DEFAULT_PASSAGE_CHARS = 1_500
_BATCH = 64


def split_passages(text: str, max_chars: int = DEFAULT_PASSAGE_CHARS) -> list[str]:
    """Consecutive passages of at most ``max_chars``, cut between paragraphs where possible."""
    if max_chars < 100:
        raise ValueError("max_chars must be at least 100")
    pieces: list[str] = []
    for para in (p.strip() for p in re.split(r"\n\s*\n", text)):
        if not para:
            continue
        if len(para) <= max_chars:
            pieces.append(para)
            continue
        sentence = ""
        for s in re.split(r"(?<=[.!?])\s+", para):
            while len(s) > max_chars:  # a "sentence" longer than a passage: cut it hard
                pieces.append(s[:max_chars])
                s = s[max_chars:]
            if sentence and len(sentence) + 1 + len(s) > max_chars:
                pieces.append(sentence)
                sentence = s
            else:
                sentence = f"{sentence} {s}".strip()
        if sentence:
            pieces.append(sentence)
    passages: list[str] = []
    for piece in pieces:
        if passages and len(passages[-1]) + 2 + len(piece) <= max_chars:
            passages[-1] += "\n\n" + piece
        else:
            passages.append(piece)
    return passages


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
    passages = split_passages(text, max_chars)
    records: list[ArchivalRecord] = []
    embeddings = archival.index.embeddings
    with tqdm(total=len(passages), desc=f"ingesting {name}", unit="passage", file=sys.stderr,
              disable=not progress) as bar:
        for start in range(0, len(passages), _BATCH):
            batch = passages[start:start + _BATCH]
            embeddings.embed_array(batch)  # one model run for the batch; the inserts reuse it
            for i, passage in enumerate(batch, start):
                prov = Provenance(source="document", message_id=f"{name}#p{i}")
                records.append(archival.insert(scope, passage, tags, prov))
                bar.update()
    return records
