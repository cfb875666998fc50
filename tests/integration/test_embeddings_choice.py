"""Pluggable embeddings (issue 23): a second, real embedding served over HTTP (the scripted
OpenAI-compatible server's hashed-trigram model, through ``langchain-openai``'s ``OpenAIEmbeddings``)
embeds the store, as an instance (``EmbeddingModel``) or an ``init_embeddings`` id; every collection
records the model and its dimensions; a store is refused by any other model, with a message naming
both and ``pagefault reindex``; a store written before records were kept is the offline MiniLM's."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.messages import HumanMessage
from support.scripted_openai import API_KEY, EMBED_DIMS, EMBEDDING_MODEL, ScriptedOpenAI, trigram_embedding

from pagefault import Context, open_embedded
from pagefault.models.embedding_choice import EmbeddingModel, EmbeddingsError
from pagefault.stores import MemoryServices, Scope
from pagefault.stores.index.embedding_record import EmbeddingMismatch, EmbeddingRecord

FACTS = ["My sister Lucia works at the aquarium in Valencia.", "I live in Lisbon near the river.",
         "Our launch deadline is the third of March."]
SCRIPTED_ID = f"openai:{EMBEDDING_MODEL}"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("PAGEFAULT_EMBEDDINGS", "PAGEFAULT_DATA_DIR", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def _say(graph, ctx, text, thread="t1"):
    return graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}}, context=ctx)


def _records(svc: MemoryServices) -> dict[str, EmbeddingRecord | None]:
    """What each of the store's collections records: Chroma's archival, and both resident files' rows."""
    out: dict[str, EmbeddingRecord | None] = {
        "chroma archival": EmbeddingRecord.from_metadata(svc.client.get_collection(svc.collections["archival"]).metadata)}
    for file, kinds in (("archival_recent.sqlite", ("archival",)), ("recall.sqlite", ("recall", "recall_unit"))):
        with sqlite3.connect(f"{svc.data_dir}/{file}") as db:
            for kind in kinds:
                row = db.execute("SELECT model, dimensions, generation, complete FROM embedding_records WHERE kind = ?",
                                 (svc.collections[kind],)).fetchone()
                out[f"{file} {kind}"] = EmbeddingRecord(row[0], row[1], row[2], bool(row[3])) if row else None
    return out


def test_an_instance_embeds_every_tier_and_search_finds_by_its_vectors(tmp_path):
    with ScriptedOpenAI() as api:
        model = EmbeddingModel("scripted-trigram", api.embeddings())
        with open_embedded(str(tmp_path / "mem"), embeddings=model) as p:
            _say(p.graph(), Context(user_id="ana"), "Tell me about the harbour at dawn.")  # ctx.embeddings left default
            svc = MemoryServices.open(p.data_dir)
            assert svc.embeddings is model
            for fact in FACTS:
                svc.archival.insert(Scope("ana"), fact)
            assert set(_records(svc).values()) == {EmbeddingRecord("scripted-trigram", EMBED_DIMS, 0, True)}

            got = svc.archival.index.collection.get(include=["documents", "embeddings"])
            assert sorted(got["documents"]) == sorted(FACTS)
            np.testing.assert_allclose(np.asarray(got["embeddings"]), np.asarray(trigram_embedding(got["documents"])),
                                       atol=1e-5)  # the scripted model's vectors, not MiniLM's 384
            assert svc.recall.count(Scope("ana")) >= 1  # (after the recall writer has written the turn)
            recall = svc.recall.index.collection.get(include=["embeddings"])
            assert len(recall["ids"]) >= 1 and np.asarray(recall["embeddings"]).shape[1] == EMBED_DIMS

            # A query sharing no word with the fact (BM25 finds nothing): only its vector can find it.
            query = "acquarium valensia sisterly"
            sent = len(api.embedding_requests)
            (record, hit), *_ = svc.archival.explained_search(Scope("ana"), query, 3)
            assert record.text == FACTS[0] and hit.parts is not None and hit.parts.bm25 is None
            q, d = trigram_embedding([query, FACTS[0]])
            assert hit.parts.dense == pytest.approx(float(np.dot(q, d)), abs=1e-4)
            assert [query] in [r["input"] for r in api.embedding_requests[sent:]]
            assert [h.text for h in svc.recall.search(Scope("ana"), "harbor at dawn", 1)] == \
                ["user: Tell me about the harbour at dawn."]


class _E5Style(Embeddings):
    """An asymmetric model in E5's shape over the scripted server's real embedding: stored texts go out
    as ``passage: ...``, search queries as ``query: ...``."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_documents([f"passage: {t}" for t in texts])

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_documents([f"query: {text}"])[0]


def test_searches_embed_the_query_with_embed_query_and_stored_texts_with_embed_documents(tmp_path):
    """An asymmetric model gets its two sides: archival and recall searches embed the query through
    ``embed_query``, what they store through ``embed_documents``, and the two are cached apart."""
    with ScriptedOpenAI() as api:
        model = EmbeddingModel("scripted-trigram-e5-style", _E5Style(api.embeddings()))
        with open_embedded(str(tmp_path / "mem"), embeddings=model) as p:
            _say(p.graph(), Context(user_id="ana"), "Tell me about the harbour at dawn.")
            svc = MemoryServices.open(p.data_dir)
            svc.archival.insert(Scope("ana"), FACTS[0])
            query = "acquarium valensia sisterly"
            sent = len(api.embedding_requests)
            (record, hit), *_ = svc.archival.explained_search(Scope("ana"), query, 3)
            assert record.text == FACTS[0] and hit.parts is not None and hit.parts.bm25 is None
            q, d = trigram_embedding([f"query: {query}", f"passage: {FACTS[0]}"])
            assert hit.parts.dense == pytest.approx(float(np.dot(q, d)), abs=1e-4)
            inputs = [r["input"] for r in api.embedding_requests[sent:]]
            assert [f"query: {query}"] in inputs and [f"passage: {query}"] not in inputs, inputs
            stored = svc.archival.index.collection.get(include=["embeddings"])["embeddings"]
            np.testing.assert_allclose(np.asarray(stored), np.asarray([d]), atol=1e-5)

            sent = len(api.embedding_requests)
            hits = svc.recall.search(Scope("ana"), "harbor at dawn", 1)
            assert [h.text for h in hits] == ["user: Tell me about the harbour at dawn."]
            assert [r["input"] for r in api.embedding_requests[sent:]] == [["query: harbor at dawn"]]

            # One text on both sides: two vectors, each from its own side, neither served from the other's cache.
            both = [model.embed_array(["tide tables"])[0], model.embed_query_array(["tide tables"])[0]]
            np.testing.assert_allclose(np.asarray(both), np.asarray(trigram_embedding(
                ["passage: tide tables", "query: tide tables"])), atol=1e-5)
            assert model.embed_query("tide tables") == pytest.approx(both[1].tolist(), abs=1e-6)


def test_import_history_runs_on_the_embedding_the_store_was_opened_with(tmp_path):
    """``import_history`` reads recall with the store's model, the context's embedding left at its default (it
    used to ask for the offline model there and be refused: one embedding per store and process)."""
    from pagefault.maintenance.history_import import import_history

    dialog = {"sessions": [{"id": "s1", "messages": [
        {"id": "m1", "text": "My sister Lucia works at the aquarium in Valencia."},
        {"id": "m2", "role": "assistant", "text": "Noted."}]}]}
    with ScriptedOpenAI() as api:
        model = EmbeddingModel("scripted-trigram", api.embeddings())
        with open_embedded(str(tmp_path / "mem"), embeddings=model) as p:
            report = import_history(p.graph(), dialog, Context(user_id="ana", data_dir=p.data_dir), progress=False)
            assert report.imported == 2
            svc = MemoryServices.open(p.data_dir)
            svc.recall.writer.flush()
            assert svc.embeddings is model
            hits = svc.recall.search(Scope("ana"), "acquarium valensia sisterly", 1)
            assert len(hits) == 1 and "My sister Lucia works at the aquarium in Valencia." in hits[0].text, hits
            assert any("My sister Lucia works at the aquarium in Valencia." in str(r["input"])
                       for r in api.embedding_requests)


def test_an_id_in_the_context_embeds_through_init_embeddings_and_another_model_is_refused(tmp_path, monkeypatch):
    data = tmp_path / "mem"
    with ScriptedOpenAI() as api:
        monkeypatch.setenv("OPENAI_BASE_URL", api.url)
        monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
        with open_embedded(str(data)) as p:
            _say(p.graph(), Context(user_id="ana", embeddings=SCRIPTED_ID), FACTS[0])
            svc = MemoryServices.open(p.data_dir)  # no choice: the one the directory is open with
            assert svc.embeddings.name == SCRIPTED_ID and svc.embeddings.dimensions == EMBED_DIMS
            assert {r["model"] for r in api.embedding_requests} == {EMBEDDING_MODEL}
            assert set(_records(svc).values()) == {EmbeddingRecord(SCRIPTED_ID, EMBED_DIMS, 0, True)}
            archived = svc.archival.count(Scope("ana"))
            assert archived == 1

            with pytest.raises(EmbeddingsError, match="is open in this process with embeddings 'openai:text-embedding"):
                MemoryServices.open(p.data_dir, embeddings="offline")

            MemoryServices.forget(p.data_dir)  # as a new process would find it
            with pytest.raises(EmbeddingMismatch) as e:
                MemoryServices.open(p.data_dir, embeddings="offline")
            message = str(e.value)
            assert f"embedded by '{SCRIPTED_ID}' ({EMBED_DIMS} dimensions)" in message
            assert "this process uses 'offline' (384 dimensions)" in message
            assert "run `pagefault reindex --embeddings offline`" in message and "\n" not in message
            # A run left at the default (offline) is refused the same way, before it writes a vector.
            with pytest.raises(EmbeddingMismatch):
                _say(p.graph(), Context(user_id="ana"), "I also keep bees on the roof.", thread="t2")
        MemoryServices.forget(str(data))
        again = MemoryServices.open(str(data), embeddings=SCRIPTED_ID)
        assert again.archival.count(Scope("ana")) == archived
        assert [r.text for r, _ in again.archival.search(Scope("ana"), "sister aquarium", 1)] == [FACTS[0]]


def test_the_same_name_with_other_dimensions_is_refused(tmp_path):
    with ScriptedOpenAI() as api:
        MemoryServices.open(str(tmp_path), embeddings=EmbeddingModel("scripted", api.embeddings())) \
            .archival.insert(Scope("ana"), FACTS[0])
    MemoryServices.forget(str(tmp_path))
    with ScriptedOpenAI(embed=lambda texts: trigram_embedding(texts, 32)) as other:
        with pytest.raises(EmbeddingMismatch, match="holds 64-dimension vectors of 'scripted', but 'scripted' now "
                                                    "makes 32-dimension ones"):
            MemoryServices.open(str(tmp_path), embeddings=EmbeddingModel("scripted", other.embeddings()))


def test_a_store_without_records_is_the_offline_minilms(tmp_path):
    svc = MemoryServices.open(str(tmp_path), embeddings="offline")
    svc.archival.insert(Scope("ana"), FACTS[1])
    svc.recall.add(Scope("ana"), "t1", [(0, HumanMessage("We spoke about the harbour."))], "cp1")
    assert svc.recall.count(Scope("ana")) == 1
    MemoryServices.forget(str(tmp_path))
    # As a directory written before records were kept: no record anywhere.
    svc.client.get_collection("pagefault_archival").modify(metadata={"written_by": "an earlier pagefault"})
    for file in ("recall.sqlite", "archival_recent.sqlite"):
        with sqlite3.connect(tmp_path / file) as db:
            db.execute("DELETE FROM embedding_records")
    with ScriptedOpenAI() as api:
        with pytest.raises(EmbeddingMismatch, match="embedded by 'offline' \\(384 dimensions\\), and this process uses "
                                                    "'scripted'"):
            MemoryServices.open(str(tmp_path), embeddings=EmbeddingModel("scripted", api.embeddings()))
    opened = MemoryServices.open(str(tmp_path), embeddings="offline")
    assert [r.text for r, _ in opened.archival.search(Scope("ana"), "where do I live", 1)] == [FACTS[1]]
    assert set(_records(opened).values()) == {EmbeddingRecord("offline", 384, 0, True)}  # said from now on
    assert opened.client.get_collection("pagefault_archival").metadata["written_by"] == "an earlier pagefault"


def test_a_bad_choice_is_one_clear_error_naming_it(tmp_path):
    with ScriptedOpenAI() as api:
        with pytest.raises(EmbeddingsError, match=r"an instance needs the name its collections record: "
                                                  r"EmbeddingModel\('my-model', embeddings\)"):
            open_embedded(str(tmp_path / "a"), embeddings=api.embeddings())  # type: ignore[arg-type]
    with pytest.raises(EmbeddingsError, match="embeddings 'nosuch:model': Provider 'nosuch' is not supported"):
        open_embedded(str(tmp_path / "b"), embeddings="nosuch:model")
    with pytest.raises(EmbeddingsError,
                       match="embeddings 'minilm': expected 'offline-joint', 'offline', 'offline-multilingual' or a LangChain "
                             "init_embeddings id"):
        MemoryServices.open(str(tmp_path / "c"), embeddings="minilm")
    assert not (tmp_path / "b" / "chroma").exists() and not (tmp_path / "c" / "chroma").exists()


def test_doctor_says_which_model_made_the_store_and_when_this_process_would_be_refused(tmp_path, monkeypatch):
    from pagefault.maintenance.doctor import diagnose

    with ScriptedOpenAI() as api:
        MemoryServices.open(str(tmp_path), embeddings=EmbeddingModel("scripted", api.embeddings())) \
            .archival.insert(Scope("ana"), FACTS[0])
    MemoryServices.forget(str(tmp_path))
    found = diagnose(str(tmp_path), database_url="", chroma_url="")
    check = next(c for c in found.checks if c.tier == "embeddings")
    assert not check.ok and check.detail == "'scripted' (64 dimensions); this process: 'offline-joint' (the default)"
    assert any("the store is embedded by 'scripted' (64 dimensions) and this process would use 'offline-joint'" in p
               and "pagefault reindex --embeddings offline-joint" in p for p in found.problems), found.problems
    monkeypatch.setenv("PAGEFAULT_EMBEDDINGS", "scripted")
    again = diagnose(str(tmp_path), database_url="", chroma_url="")
    assert next(c for c in again.checks if c.tier == "embeddings").ok and again.ok, again.problems
