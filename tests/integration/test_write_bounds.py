"""Archival writes stay within what the engines take, and one insert that cannot be written wedges no one
(issue 44, case 6).

A burst of 10,000 inserts used to reach Chroma as one upsert, above its ``max_batch_size`` (5,461): it
failed every time, every archival search of the directory (any user's) raised ``InternalError``, and a
reopened store failed the same way, since the journal only grew. Now every Chroma write is cut to the
limit the client reports (``stores.index.batched_writes``), the journal writes in bounded passes, and
an insert whose write fails on its own is set aside, kept, and named by ``pagefault doctor``
(``stores.writers.archival_journal``).

Real Chroma on disk (and a real ``chroma run`` server), real SQLite. The embedding is LangChain's cheap
deterministic ``DeterministicFakeEmbedding`` (64 dimensions), so 10,000 records embed at once; the
insert that fails is refused, as OpenAI refuses one, by a scripted OpenAI-compatible server over HTTP.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import tiktoken
from langchain_core.embeddings import DeterministicFakeEmbedding
from support.engines import chroma_server, fresh_database
from support.scripted_openai import ScriptedError, ScriptedOpenAI, trigram_embedding

from pagefault import MemoryServices, Scope
from pagefault.maintenance.doctor import diagnose, report
from pagefault.models.embedding_choice import EmbeddingModel

BURST = 10_000
#: Of the burst, alice's come first (one run of one scope, above Chroma's limit), then bob's.
ALICE = 9_000
#: OpenAI's embedding models refuse an input longer than this many tokens (with a 400).
EMBEDDING_MAX_TOKENS = 8_192



def fake_64() -> EmbeddingModel:
    """A cheap deterministic embedding of 64 dimensions (the children below make the same one)."""
    return EmbeddingModel("fake-64", DeterministicFakeEmbedding(size=64))


#: Journals the burst (the writer lingers: nothing hurries it until a search), then as ``argv[2]`` says:
#: ``search`` searches as each user and exits normally; ``kill`` kills the process with the burst journalled.
BURST_CHILD = textwrap.dedent(f"""
    import json, os, signal, sys
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from pagefault import MemoryServices, Scope
    from pagefault.models.embedding_choice import EmbeddingModel

    svc = MemoryServices.open(sys.argv[1], embeddings=EmbeddingModel("fake-64", DeterministicFakeEmbedding(size=64)))
    svc.archival.journal.linger = 3600  # nothing is written until a read asks: the whole burst is pending
    alice, bob, carol = Scope("alice"), Scope("bob"), Scope("carol")
    for k in range({BURST}):
        svc.archival.insert(alice if k < {ALICE} else bob, f"Parcel note {{k}}: locker {{k * 7}} holds box {{k * 13}}.",
                            defer=True)
    assert len(svc.archival.journal.pending_in(alice)) == {ALICE}, "the burst is journalled, not yet written"
    if sys.argv[2] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    found = {{s.user_id: [r.text for r, _ in svc.archival.search(s, q, 3)]
             for s, q in ((alice, "Parcel note 4321"), (bob, "Parcel note 9876"), (carol, "Parcel note 1"))}}
    counts = {{s.user_id: svc.archival.count(s) for s in (alice, bob, carol)}}
    print(json.dumps({{"found": found, "counts": counts}}))
""")


def _child(data_dir: str, how: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BURST_CHILD, data_dir, how], capture_output=True, text=True, timeout=600)


def test_a_burst_of_ten_thousand_inserts_leaves_every_users_search_working_and_the_process_exits_0(data_dir):
    run = _child(data_dir, "search")
    assert run.returncode == 0, f"exit {run.returncode}:\n{run.stderr[-3000:]}"
    said = json.loads(run.stdout.strip().splitlines()[-1])
    assert "Parcel note 4321: locker 30247 holds box 56173." in said["found"]["alice"]
    assert "Parcel note 9876: locker 69132 holds box 128388." in said["found"]["bob"]
    assert said["found"]["carol"] == []
    assert said["counts"] == {"alice": ALICE, "bob": BURST - ALICE, "carol": 0}


def test_a_burst_left_journalled_by_a_killed_process_is_written_when_the_directory_is_reopened(data_dir):
    run = _child(data_dir, "kill")
    assert run.returncode == -signal.SIGKILL, f"exit {run.returncode}:\n{run.stderr[-3000:]}"
    svc = MemoryServices.open(data_dir, embeddings=fake_64())
    alice, bob, carol = Scope("alice"), Scope("bob"), Scope("carol")
    assert len(svc.archival.journal.pending_in(alice)) == ALICE, "the burst was left journalled"
    assert "Parcel note 77: locker 539 holds box 1001." in [r.text for r, _ in svc.archival.search(alice, "Parcel note 77", 3)]
    assert "Parcel note 9001: locker 63007 holds box 117013." in [
        r.text for r, _ in svc.archival.search(bob, "Parcel note 9001", 3)]
    assert svc.archival.search(carol, "Parcel note", 3) == []
    assert not svc.archival.journal.pending_in(alice) and not svc.archival.journal.pending_in(bob)
    assert svc.archival.index.collection.count() == BURST, "every record is in the vectors"
    assert svc.archival.count(alice) == ALICE and svc.archival.count(bob) == BURST - ALICE


def _refusing_long_inputs(texts: list[str]) -> list[list[float]]:
    """The scripted server's embeddings, refusing an input over OpenAI's limit as OpenAI does (a 400)."""
    encoding = tiktoken.get_encoding("cl100k_base")
    for text in texts:
        n = len(encoding.encode(text))
        if n > EMBEDDING_MAX_TOKENS:
            raise ScriptedError(400, f"This model's maximum context length is {EMBEDDING_MAX_TOKENS} tokens, however "
                                     f"you requested {n} tokens (1 in your prompt). Please reduce your prompt.")
    return trigram_embedding(texts)


def _long_text() -> str:
    """A text archival takes (under 20,000 characters) that is over the embedding's token limit."""
    text = " ".join(f"z{(k * 7919) % 99991:x}q{k % 97}" for k in range(3000))[:19_990]
    assert len(tiktoken.get_encoding("cl100k_base").encode(text)) > EMBEDDING_MAX_TOKENS
    return text


def test_an_insert_the_embedding_refuses_is_set_aside_and_named_by_doctor_while_every_search_works(data_dir):
    long_text = _long_text()
    with ScriptedOpenAI(embed=_refusing_long_inputs) as api:
        model = EmbeddingModel("scripted-trigram", api.embeddings())
        svc = MemoryServices.open(data_dir, embeddings=model)
        journal = svc.archival.journal
        journal.linger = 3600  # the three inserts are written in one pass, when the first search asks
        alice, bob = Scope("alice"), Scope("bob")
        svc.archival.insert(bob, "Bob parks his bicycle behind the bakery.", defer=True)
        refused = svc.archival.insert(alice, long_text, defer=True)
        svc.archival.insert(alice, "Alice keeps the spare key in the blue teapot.", defer=True)

        assert [r.text for r, _ in svc.archival.search(bob, "where does Bob park his bicycle", 1)] == [
            "Bob parks his bicycle behind the bakery."]
        assert [r.text for r, _ in svc.archival.search(alice, "spare key teapot", 3)] == [
            "Alice keeps the spare key in the blue teapot."]
        aside = journal.set_aside()
        assert [(a.rid, a.scope, a.text) for a in aside] == [(refused.id, alice.key, long_text)], "kept, whole"
        assert "maximum context length" in aside[0].error
        assert not journal.is_pending(refused.id) and svc.archival.get(alice, refused.id) is None

        said = report(diagnose(data_dir))
        line = next((x for x in said.splitlines() if "set aside" in x), "")
        assert line.startswith("problem: ") and "1 archival insert(s) set aside" in line, said
        assert refused.id in line and "maximum context length" in line and "open the directory again" in line

        # Reopened, it is tried once more: still refused, set aside again; no one's search waits for it.
        MemoryServices.forget(data_dir)
        svc = MemoryServices.open(data_dir, embeddings=model)
        assert [r.text for r, _ in svc.archival.search(bob, "bicycle bakery", 1)] == [
            "Bob parks his bicycle behind the bakery."]
        assert [a.rid for a in svc.archival.journal.set_aside()] == [refused.id]
        MemoryServices.forget(data_dir)


def test_a_document_larger_than_the_servers_batch_limit_is_written_in_batches(tmp_path):
    with chroma_server(tmp_path / "chroma") as chroma:
        svc = MemoryServices.open(str(tmp_path / "data"), chroma_url=chroma.url, embeddings=fake_64())
        limit = svc.client.get_max_batch_size()
        scope = Scope("dora")
        passages = [(f"Manual page {k}: valve {k * 3} opens at {k * 11} kPa.", None) for k in range(limit + 500)]
        written = svc.archival.insert_many(scope, passages)
        assert len(written) == limit + 500 and all(r.created for r in written)
        assert svc.archival.index.collection.count() == limit + 500
        hits = [r.text for r, _ in svc.archival.search(scope, "Manual page 5555 valve", 3)]
        assert "Manual page 5555: valve 16665 opens at 61105 kPa." in hits
        MemoryServices.forget(str(tmp_path / "data"))


def test_on_the_replicated_setup_an_insert_the_embedding_refuses_is_set_aside_and_named_by_doctor(tmp_path):
    long_text = _long_text()
    data_dir = str(tmp_path / "data")
    with fresh_database("pf_set_aside") as url, chroma_server(tmp_path / "chroma") as chroma, \
            ScriptedOpenAI(embed=_refusing_long_inputs) as api:
        svc = MemoryServices.open(data_dir, chroma_url=chroma.url, database_url=url,
                                  embeddings=EmbeddingModel("scripted-trigram", api.embeddings()))
        journal = svc.archival.journal
        journal.linger = 3600  # the three inserts are written in one pass, when the first search asks
        alice, bob = Scope("alice"), Scope("bob")
        svc.archival.insert(bob, "Bob parks his bicycle behind the bakery.", defer=True)
        refused = svc.archival.insert(alice, long_text, defer=True)
        svc.archival.insert(alice, "Alice keeps the spare key in the blue teapot.", defer=True)

        assert [r.text for r, _ in svc.archival.search(bob, "where does Bob park his bicycle", 1)] == [
            "Bob parks his bicycle behind the bakery."]
        assert [r.text for r, _ in svc.archival.search(alice, "spare key teapot", 3)] == [
            "Alice keeps the spare key in the blue teapot."]
        aside = journal.set_aside()
        assert [(a.rid, a.scope, a.text) for a in aside] == [(refused.id, alice.key, long_text)], "kept, whole"
        assert "maximum context length" in aside[0].error and not journal.is_pending(refused.id)

        said = report(diagnose(data_dir, database_url=url, chroma_url=chroma.url))
        line = next((x for x in said.splitlines() if "set aside" in x), "")
        assert line.startswith("problem: ") and "1 archival insert(s) set aside" in line, said
        assert refused.id in line and "maximum context length" in line and "start a replica again" in line
        MemoryServices.forget(data_dir)
