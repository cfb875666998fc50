"""``pagefault reindex`` (issue 23): a store written by the offline MiniLM re-embedded with a second,
real model served over HTTP (the scripted OpenAI-compatible server, through ``langchain-openai``) and
back, by the real ``pagefault`` script in a subprocess. One run is SIGKILLed in the middle, once its
progress bar has shown records done (the server holds its next embedding request until the kill, so
the kill always lands mid-run): the store is then still whole and searched by the old model, and the
next run resumes, embedding only what the killed one had not. Every record is there once, with its
text and metadata, and with the new model's vectors; searches find by them."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.messages import HumanMessage
from support.engines import child_env
from support.scripted_openai import API_KEY, EMBED_DIMS, EMBEDDING_MODEL, ScriptedOpenAI, trigram_embedding

from pagefault import Context, OfflineEmbeddings, open_embedded
from pagefault.maintenance.reindex import same_metadata
from pagefault.models.embedding_choice import EmbeddingModel
from pagefault.stores import MemoryServices, Scope
from pagefault.stores.index.embedding_record import EmbeddingMismatch, EmbeddingRecord
from pagefault.stores.recall import dense_text

PAGEFAULT = str(Path(sys.executable).with_name("pagefault"))
SCRIPTED_ID = f"openai:{EMBEDDING_MODEL}"
TALK = ["My sister Lucia works at the aquarium in Valencia.", "I keep three beehives on the roof.",
        "Tell me something about harbours.", "Where does my sister work?"]
FACTS = [f"Note {n}: the {w} of the {t} project is due in week {n + 3}."
         for n, (w, t) in enumerate((w, t) for w in ("report", "review", "budget", "demo", "launch")
                                    for t in ("orchard", "lighthouse", "glacier", "atlas"))]
KINDS = ("archival", "recall", "recall_unit")
PROGRESS = re.compile(r"\|\s*(\d+)/(\d+) \[")


def _say(graph, text: str, user: str = "ana", thread: str = "t1") -> None:
    graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}},
                 context=Context(user_id=user))


def _write_store(data: Path, users: tuple[str, ...] = ("ana",)) -> None:
    """A store the offline MiniLM (``offline``, the default before ``offline-joint``) wrote: conversations
    through the graph, and archival facts."""
    with open_embedded(str(data), embeddings="offline") as p:
        graph = p.graph()
        for user in users:
            for text in TALK:
                _say(graph, text, user, thread=f"t-{user}")
    svc = MemoryServices.open(str(data), embeddings="offline")
    for user in users:
        for fact in FACTS:
            svc.archival.insert(Scope(user), fact)
        svc.recall.count(Scope(user))  # the recall writer has written everything
    MemoryServices.forget(str(data))  # as when the agent's process exits: a reindex may run


def _snapshot(data: Path, embeddings: str) -> dict[str, dict[str, tuple[str, dict[str, Any], np.ndarray]]]:
    """Every record of every tier as the store holds it now: (text, metadata, vector) by id, by kind."""
    svc = MemoryServices.open(str(data), embeddings=embeddings)
    try:
        out = {}
        for kind, index in (("archival", svc.archival.index), ("recall", svc.recall.index),
                            ("recall_unit", svc.recall.units)):
            got = index.collection.get(include=["documents", "metadatas", "embeddings"])
            assert len(set(got["ids"])) == len(got["ids"]), f"{kind}: an id twice"
            out[kind] = {i: (d, dict(m), np.asarray(v, dtype=np.float32))
                         for i, d, m, v in zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"])}
        return out
    finally:
        MemoryServices.forget(str(data))


def _same_records(now, before) -> None:
    """The same ids in every tier, each with its text and metadata as they were (floats to their last
    digits: Chroma keeps a float a digit shorter than SQLite's JSON)."""
    for kind in KINDS:
        assert set(now[kind]) == set(before[kind]), kind
        for i, (text, meta, _) in before[kind].items():
            assert now[kind][i][0] == text and same_metadata(now[kind][i][1], meta), (kind, i, now[kind][i][1], meta)


def _assert_vectors_of(snapshot, embed, dims: int) -> None:
    """Archival vectors and people's recall turns carry ``embed``'s vectors of their text; units are unit length."""
    archival = snapshot["archival"]
    ids = list(archival)
    np.testing.assert_allclose(np.vstack([archival[i][2] for i in ids]),
                               np.asarray(embed([archival[i][0] for i in ids])), atol=2e-3)
    human = [r for r in snapshot["recall"].values() if r[1].get("role") == "human"]
    assert len(human) == len(TALK)
    np.testing.assert_allclose(np.vstack([r[2] for r in human]), np.asarray(embed([dense_text(r[0]) for r in human])),
                               atol=2e-3)
    for kind in KINDS:
        vectors = np.vstack([r[2] for r in snapshot[kind].values()])
        assert vectors.shape[1] == dims, kind
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)


def _searches_work(data: Path, embeddings: str) -> None:
    svc = MemoryServices.open(str(data), embeddings=embeddings)
    try:
        assert [r.text for r, _ in svc.archival.search(Scope("ana"), "glacier budget week", 1)] == \
            ["Note 10: the budget of the glacier project is due in week 13."]
        assert "user: I keep three beehives on the roof." in [h.text for h in svc.recall.search(Scope("ana"), "bees", 3)]
    finally:
        MemoryServices.forget(str(data))


def _refused(data: Path, embeddings: str, recorded: str) -> None:
    with pytest.raises(EmbeddingMismatch, match=f"embedded by '{re.escape(recorded)}'"):
        MemoryServices.open(str(data), embeddings=embeddings)
    MemoryServices.forget(str(data))


class Gate:
    """The scripted model's embedding, held after ``after`` requests until ``opened`` (a run to kill)."""

    def __init__(self, after: int) -> None:
        self.after, self.calls = after, 0
        self.opened = threading.Event()
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self.calls += 1
            hold = self.calls > self.after
        if hold:
            self.opened.wait(600)
        return trigram_embedding(texts)


def _progress(stream: Any, seen: "queue.Queue[tuple[int, int] | str]") -> None:
    """Every ``done/total`` of the progress bar on ``stream`` (tqdm redraws the line with ``\\r``), then
    everything it said when it closes."""
    buffer, said = "", ""
    while chunk := os.read(stream.fileno(), 4096).decode("utf-8", "replace"):
        buffer, said = buffer + chunk, said + chunk
        *lines, buffer = re.split(r"[\r\n]", buffer)
        # The bar's last state has no line end until it is redrawn: read it as it stands too (a frame cut
        # short does not match, its total needs the " [" that follows).
        for line in [*lines, buffer]:
            if (m := PROGRESS.search(line)) is not None:
                seen.put((int(m.group(1)), int(m.group(2))))
    seen.put(said)


def _reindex(data: Path, env: dict[str, str], *args: str) -> dict[str, Any]:
    done = subprocess.run([PAGEFAULT, "reindex", "--data-dir", str(data), "--json", *args], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_reindex_to_a_served_model_and_back_with_a_kill_in_the_middle(tmp_path):
    data = tmp_path / "mem"
    _write_store(data)
    before = _snapshot(data, "offline")
    total = sum(len(before[k]) for k in KINDS)
    assert len(before["archival"]) >= len(FACTS) and total > 40

    gate = Gate(after=2)  # the model's dimensions, the first batch; the second waits
    with ScriptedOpenAI(embed=gate.embed) as api:
        env = child_env(OPENAI_BASE_URL=api.url, OPENAI_API_KEY=API_KEY)
        run = subprocess.Popen([PAGEFAULT, "reindex", "--data-dir", str(data), "--embeddings", SCRIPTED_ID,
                                "--batch", "4"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        seen: queue.Queue[tuple[int, int] | str] = queue.Queue()
        reader = threading.Thread(target=_progress, args=(run.stderr, seen), daemon=True)
        reader.start()
        while True:  # the progress line, not a clock
            line = seen.get()
            assert not isinstance(line, str), f"the reindex ended before it showed progress: {line}"
            done, of = line
            if done > 0:
                break
        assert of == total and done < total
        run.send_signal(signal.SIGKILL)
        assert run.wait(timeout=120) == -signal.SIGKILL
        gate.opened.set()
        reader.join(timeout=60)

        # Killed mid-run: the store is whole and still the offline model's; the new one is refused.
        _same_records(_snapshot(data, "offline"), before)
        _searches_work(data, "offline")
        with pytest.raises(EmbeddingMismatch, match="embedded by 'offline'"):
            MemoryServices.open(str(data), embeddings=EmbeddingModel(SCRIPTED_ID, api.embeddings()))
        MemoryServices.forget(str(data))

        report = _reindex(data, env, "--embeddings", SCRIPTED_ID)
        assert report["embeddings"] == SCRIPTED_ID and report["dimensions"] == EMBED_DIMS
        assert report["previous"] == dict.fromkeys(KINDS, "offline")
        assert report["records"] == {k: len(before[k]) for k in KINDS}
        assert report["kept"] >= 4 and report["embedded"] + report["kept"] == len(before["archival"]) + len(before["recall"])

        os.environ.update(OPENAI_BASE_URL=api.url, OPENAI_API_KEY=API_KEY)
        try:
            served = _snapshot(data, SCRIPTED_ID)
            _same_records(served, before)
            _assert_vectors_of(served, trigram_embedding, EMBED_DIMS)
            _searches_work(data, SCRIPTED_ID)
            _refused(data, "offline", SCRIPTED_ID)
            svc = MemoryServices.open(str(data), embeddings=SCRIPTED_ID)
            listed = {c.name: EmbeddingRecord.from_metadata(c.metadata) for c in svc.client.list_collections()}
            assert list(listed.values()) == [EmbeddingRecord(SCRIPTED_ID, EMBED_DIMS, 1, True)]  # the old one is gone
            MemoryServices.forget(str(data))

            back = _reindex(data, env, "--embeddings", "offline", "--user", "ana")
            assert back["previous"] == dict.fromkeys(KINDS, SCRIPTED_ID) and back["kept"] == 0
            offline = _snapshot(data, "offline")
            _same_records(offline, before)
            _assert_vectors_of(offline, OfflineEmbeddings().embed_documents, 384)
            _searches_work(data, "offline")
            _refused(data, SCRIPTED_ID, "offline")
        finally:
            for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
                os.environ.pop(name, None)


def test_a_store_of_the_former_default_opens_with_it_until_reindex_moves_it_to_the_default(tmp_path, caplog):
    """Upgrading: a store MiniLM (the default before ``offline-joint``) wrote opens in a process left at the
    default, searched with MiniLM and a warning saying to reindex; ``pagefault reindex`` with no
    ``--embeddings`` moves it to the default, every record kept, with the joint model's vectors."""
    from pagefault.maintenance.doctor import embedding_check
    from pagefault.models.joint import DIMENSION, JointEmbeddings

    data = tmp_path / "mem"
    _write_store(data)
    before = _snapshot(data, "offline")
    with caplog.at_level("WARNING", logger="pagefault.stores.services"):
        svc = MemoryServices.open(str(data))
    assert svc.embeddings.name == "offline"
    assert f"{data} was embedded by 'offline', pagefault's default before 'offline-joint'" in caplog.text
    assert "`pagefault reindex --embeddings offline-joint`" in caplog.text
    assert MemoryServices.open(str(data), embeddings="offline-joint") is svc  # the default asked again: the same
    MemoryServices.forget(str(data))
    _searches_work(data, "offline-joint")
    check, problems = embedding_check(str(data))
    assert check.ok and problems == [] and "'offline' was the default before 'offline-joint'" in check.detail
    with pytest.raises(EmbeddingMismatch, match="embedded by 'offline'"):  # another model is still refused
        MemoryServices.open(str(data), embeddings="offline-multilingual")
    MemoryServices.forget(str(data))

    report = _reindex(data, child_env(), "--user", "ana")
    assert report["embeddings"] == "offline-joint" and report["dimensions"] == DIMENSION
    assert report["previous"] == dict.fromkeys(KINDS, "offline")
    joint = _snapshot(data, "offline-joint")
    _same_records(joint, before)
    _assert_vectors_of(joint, JointEmbeddings().embed_documents, DIMENSION)
    _searches_work(data, "offline-joint")
    _refused(data, "offline", "offline-joint")
    check, problems = embedding_check(str(data))
    assert check.ok and problems == [] and "'offline-joint' (896 dimensions)" in check.detail


CLI_RUNS = Path(__file__).resolve().parents[1] / "support" / "cli_runs.py"


def _cli_runs(runs: list[dict]) -> list[dict]:
    """``runs`` (see ``tests/support/cli_runs.py``) in one fresh process."""
    done = subprocess.run([sys.executable, str(CLI_RUNS)], input=json.dumps(runs), capture_output=True, text=True,
                          timeout=600, env=child_env())
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_bad_input_is_one_line_and_status_2_and_nothing_changes(tmp_path):
    data = tmp_path / "mem"
    _write_store(data, users=("ana", "bob"))
    before = _snapshot(data, "offline")
    d = ["--data-dir", str(data), "-q"]
    results = _cli_runs([
        {"argv": ["reindex", *d, "--embeddings", "nosuch:model"]},
        {"argv": ["reindex", *d, "--embeddings", "minilm"]},
        {"argv": ["reindex", *d, "--user", "carl"]},
        {"argv": ["reindex", *d, "--user", "ana", "--embeddings", "offline"]},
        {"argv": ["reindex", *d, "--batch", "0"]},
        {"argv": ["reindex", "--data-dir", str(tmp_path / "none"), "-q"]},
    ])
    MemoryServices.open(str(data))  # this process has the directory open: a reindex must not start beside it
    try:
        results += _cli_runs([{"argv": ["reindex", *d]}])
    finally:
        MemoryServices.forget(str(data))
    said = [r["stderr"] for r in results]
    assert [r["rc"] for r in results] == [2] * len(results), said
    assert all(s.count("\n") == 1 and s.startswith("pagefault") for s in said), said
    assert "embeddings 'nosuch:model': Provider 'nosuch' is not supported" in said[0]
    assert ("embeddings 'minilm': expected 'offline-joint', 'offline', 'offline-multilingual' or a LangChain "
            "init_embeddings id") in said[1]
    assert "--user 'carl'" in said[2] and "holds no archival or recall records of that user" in said[2]
    assert "--user 'ana'" in said[3] and "also holds the memory of 'bob'" in said[3] and "re-embedded whole" in said[3]
    assert "--batch" in said[4]
    assert f"{tmp_path / 'none'}: no such data directory" in said[5]
    assert "has this data directory open" in said[6]
    _same_records(_snapshot(data, "offline"), before)


def test_on_a_chroma_server_the_collections_record_the_model_and_reindex_switches_them(tmp_path):
    """The production setup: vectors on a Chroma server (each collection's metadata records the model),
    BM25 in Postgres. A store written by the offline model is refused by the scripted one, then
    re-embedded on the server and searched by the new vectors."""
    from support.engines import chroma_server, fresh_database

    from pagefault.maintenance.reindex import reindex

    with fresh_database("pf_reindex") as url, chroma_server(tmp_path / "chroma") as chroma, ScriptedOpenAI() as api:
        where = {"chroma_url": chroma.url, "database_url": url}
        svc = MemoryServices.open(str(tmp_path / "data"), embeddings="offline", **where)
        for fact in FACTS[:8]:
            svc.archival.insert(Scope("ana"), fact)
        svc.recall.add(Scope("ana"), "t1", [(0, HumanMessage(TALK[1]))], "cp1")
        assert svc.recall.count(Scope("ana")) == 1
        records = {c.name: EmbeddingRecord.from_metadata(c.metadata) for c in svc.client.list_collections()}
        assert records == {f"pagefault_{k}": EmbeddingRecord("offline", 384, 0, True) for k in KINDS}
        MemoryServices.forget(str(tmp_path / "data"))

        model = EmbeddingModel("scripted-trigram", api.embeddings())
        with pytest.raises(EmbeddingMismatch, match=f"{re.escape(chroma.url)}: archival was embedded by 'offline'"):
            MemoryServices.open(str(tmp_path / "data"), embeddings=model, **where)
        report = reindex(str(tmp_path / "data"), model, progress=False, **where)
        assert report.records == {"archival": 8, "recall": 1, "recall_unit": 1} and report.embedded == 9

        svc = MemoryServices.open(str(tmp_path / "data"), embeddings=model, **where)
        records = {c.name: EmbeddingRecord.from_metadata(c.metadata) for c in svc.client.list_collections()}
        assert set(records.values()) == {EmbeddingRecord("scripted-trigram", EMBED_DIMS, 1, True)} and len(records) == 3
        assert [r.text for r, _ in svc.archival.search(Scope("ana"), "orchard review week", 1)] == \
            ["Note 4: the review of the orchard project is due in week 7."]
        assert [h.text for h in svc.recall.search(Scope("ana"), "beehives roof", 1)] == [f"user: {TALK[1]}"]
        MemoryServices.forget(str(tmp_path / "data"))
