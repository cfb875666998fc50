"""README claims, each with a test that fails when the claim is false.

- "Secrets": every key format README lists (Anthropic, GitLab, Slack, Google, Stripe, Hugging
  Face, JWTs, bearer tokens) is redacted, by ``redact`` and on the way into archival and core memory;
- "A run that waits longer than ``wait`` seconds (default 120) gets ``ThreadBusy``": the default
  reaches the lock wait (on a fake clock, against a thread another process really holds);
- "re-running it resumes and never duplicates": an ``import-history`` killed mid-batch is finished
  by running the same command again, every message once;
- "naming the service and its address (never a password)": an outage and ``pagefault doctor`` with
  a Postgres URL that carries a password never show it;
- "tables and collections are made on first use (idempotent, and safe when replicas start
  together)": two processes opening one fresh Chroma server at the same moment.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time as real_time
from pathlib import Path

import jwt
import pytest
from langchain_core.messages import HumanMessage
from support.engines import TcpProxy, child_env, chroma_server, free_port, fresh_database, spawn

from pagefault import Context, open_embedded
from pagefault.engines import locks as lock_module
from pagefault.engines.connections import ServiceUnavailable
from pagefault.engines.thread_lock import THREAD_WAIT, ThreadBusy
from pagefault.persistence.postgres import open_postgres
from pagefault.safety.redaction import redact
from pagefault.stores import CoreMemory, MemoryServices, Scope
from pagefault.stores.index.embedding_record import collection_name

# -- the listed secret formats --------------------------------------------------------------------

# Built from parts, so no scanner mistakes this file for a leak; each has its provider's shape.
SECRETS = [
    ("anthropic-key", "sk-ant-api03-" + "Zq8Xv2Lm4Np6Rt1Wy3Kb5Hd7Jf9Gs0Ac2Ee4Ii6Oo8"),
    ("gitlab-token", "glpat-" + "x7Yq2Vb9Nm4Lk1Jh8Gf3D"),
    ("slack-token", "xoxb-" + "2750341-8832015467-Wq9Zr3Tx6Vb1Nm4Lk7Jh"),
    ("google-api-key", "AIza" + "SyD3f8Qw2Ze9Rx4Tc7Vb1Nm5Lk0Jh6Gf2Ds"),
    ("stripe-key", "sk_live_" + "51Hq8Zr2Xv4Nb7Mc1Lk9Jh3Gf6Ds0Aw5Qe"),
    ("huggingface-token", "hf_" + "QwErTy12UiOp34AsDf56GhJk78LzXc90VbNm"),
    ("jwt", jwt.encode({"sub": "ana", "scope": "admin"}, "a-signing-secret-for-this-test-only-0123456789",
                       algorithm="HS256")),
    ("bearer-token", "Zm9vYmFyYmF6cXV4" + "LnRva2VuLnZhbHVlLjEyMzQ1"),
]


def _said(kind: str, secret: str) -> str:
    return f"Here is the header: Authorization: Bearer {secret}" if kind == "bearer-token" else \
        f"My credential for the deploy is {secret} please keep it"


@pytest.mark.parametrize("kind,secret", SECRETS, ids=[k for k, _ in SECRETS])
def test_each_listed_secret_format_is_redacted(kind, secret):
    out = redact(_said(kind, secret))
    assert secret not in out.text and f"[REDACTED {kind}]" in out.text, out
    assert kind in out.found


@pytest.mark.parametrize("kind,secret", SECRETS, ids=[k for k, _ in SECRETS])
def test_each_listed_secret_format_stays_out_of_archival_and_core_memory(embedded, data_dir, kind, secret):
    scope = Scope("sec-" + kind)
    record = MemoryServices.open(data_dir).archival.insert(scope, _said(kind, secret))
    block = CoreMemory(embedded.store, scope).append("human", _said(kind, secret))
    for stored in (record.text, block.value):
        assert secret not in stored and f"[REDACTED {kind}]" in stored, stored
    found = MemoryServices.open(data_dir).archival.search(scope, "credential deploy header", 3)
    assert found and all(secret not in r.text for r, _ in found)


# -- the default wait before ThreadBusy -----------------------------------------------------------


class FakeClock:
    """Stands in for the ``time`` module of the lock code: its clock moves only when the code sleeps,
    so a 120-second wait runs at once and says how long it waited."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.slept = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept += seconds

    def __getattr__(self, name: str):
        return getattr(real_time, name)


def _wait_for_file(path: Path, proc: subprocess.Popen) -> None:
    """Until ``path`` exists (bounded: two minutes), failing at once if ``proc`` died first."""
    deadline = real_time.monotonic() + 120
    while not path.exists() and proc.poll() is None and real_time.monotonic() < deadline:
        real_time.sleep(0.01)
    assert path.exists(), f"{path} never appeared: " + (proc.communicate()[1][-3000:] if proc.poll() is not None else "")


def test_a_run_waits_120_seconds_by_default_then_gets_thread_busy(tmp_path, monkeypatch):
    """Another process holds the thread (inside its run); a run with the default ``wait`` keeps asking
    for it for exactly 120 seconds of the lock code's clock, then is refused, and nothing of it is saved."""
    user, thread = "wait-default", "busy-by-default"
    marks = tmp_path / "marks"
    marks.mkdir()
    with fresh_database("pf_wait") as url:
        env = child_env(PAGEFAULT_DATABASE_URL=url, PAGEFAULT_DATA_DIR=str(tmp_path / "holder"))
        holder = spawn("say", user, thread, "My tent is green.", "--turn-marks", f"{marks}:holder",
                       "--hold-until", str(marks / "released"), env=env)
        try:
            _wait_for_file(marks / "inside-holder", holder)
            with open_postgres(url) as persistence:
                graph = persistence.graph()
                assert graph.wait == THREAD_WAIT == 120
                clock = FakeClock()
                monkeypatch.setattr(lock_module, "time", clock)
                ctx = Context(user_id=user, data_dir=str(tmp_path / "mine"), database_url=url)
                with pytest.raises(ThreadBusy, match="over 120s"):
                    graph.invoke({"messages": [HumanMessage("My canoe is yellow.")]},
                                 {"configurable": {"thread_id": thread}}, context=ctx)
                monkeypatch.undo()
                assert round(clock.slept, 6) == 120.0, clock.slept
        finally:
            (marks / "released").touch()
            out, err = holder.communicate(timeout=120)
        assert holder.returncode == 0, err[-3000:]
        with open_postgres(url) as persistence:
            values = persistence.graph().get_state({"configurable": {"thread_id": thread}}).values
        assert [m.content for m in values["messages"] if isinstance(m, HumanMessage)] == ["My tent is green."]


# -- import-history resumes an interrupted import ---------------------------------------------------

SESSIONS, PER_SESSION, BATCH = 3, 20, 16

# Imports the dialog as ``pagefault import-history`` does, and SIGKILLs itself in the middle of the
# third batch (the second session's first), once that batch's first graph step has run.
DIES_MID_IMPORT = textwrap.dedent("""
    import os, signal, sys
    from pagefault import Context, open_embedded
    from pagefault.maintenance.history_import import import_history, parse_dialog

    class DiesInThirdBatch:
        def __init__(self, graph):
            self.graph, self.batches = graph, 0
        def __getattr__(self, name):
            return getattr(self.graph, name)
        def invoke(self, input, config, **kwargs):
            self.batches += 1
            if self.batches < 3:
                return self.graph.invoke(input, config, **kwargs)
            for _ in self.graph.stream(input, config, stream_mode="updates", **kwargs):
                os.kill(os.getpid(), signal.SIGKILL)

    path, user, data_dir = sys.argv[1:4]
    ctx = Context(user_id=user, data_dir=data_dir)
    with open_embedded(data_dir) as memory:
        import_history(DiesInThirdBatch(memory.graph()), parse_dialog(open(path).read()), ctx, progress=False)
""")


def _dialog() -> dict:
    return {"sessions": [
        {"id": f"s{s}", "timestamp": f"2023-05-0{s + 1}T10:00:00",
         "messages": [{"speaker": "Ana" if i % 2 == 0 else "Bot", "role": "user" if i % 2 == 0 else "assistant",
                       "text": f"Session {s} line {i}: the lighthouse keeper logged ship {s * 100 + i}.",
                       "id": f"D{s}:{i}"} for i in range(PER_SESSION)]}
        for s in range(SESSIONS)]}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).with_name("pagefault")), *args], capture_output=True, text=True, timeout=600,
                          env=child_env(), stdin=subprocess.DEVNULL)


def test_import_history_resumes_an_import_killed_mid_batch(tmp_path):
    dialog, data_dir = _dialog(), str(tmp_path / "pf")
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(dialog))
    killed = subprocess.run([sys.executable, "-c", DIES_MID_IMPORT, str(path), "ana", data_dir], capture_output=True,
                            text=True, timeout=600, env=child_env(), stdin=subprocess.DEVNULL)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]

    again = _cli("import-history", str(path), "--user", "ana", "--data-dir", data_dir)
    assert again.returncode == 0, again.stderr[-3000:]
    report = json.loads(again.stdout.strip().splitlines()[-1])
    total = SESSIONS * PER_SESSION
    # The first session was whole when the import died; the second had at most its first batch.
    assert report["threads"] == SESSIONS and report["imported"] + report["skipped"] == total, report
    assert PER_SESSION <= report["skipped"] <= PER_SESSION + BATCH and report["imported"] > 0, report

    with open_embedded(data_dir) as memory:
        graph = memory.graph()
        for session in dialog["sessions"]:
            values = graph.get_state({"configurable": {"thread_id": session["id"]}}).values
            assert values.get("evicted_count", 0) == 0
            assert [m.content for m in values["messages"]] == [m["text"] for m in session["messages"]], session["id"]
    # The sessions the re-run went on with are in recall, each message once, the killed batch's too.
    recall = MemoryServices.open(data_dir).recall
    for thread in ("s1", "s2"):
        stored = recall.index.collection.get(where={"thread_id": thread}, include=[])["ids"]
        assert len(stored) == len(set(stored)) == PER_SESSION, (thread, len(stored))
    hits = recall.search(Scope("ana"), "lighthouse keeper logged ship 107", 1)
    assert [(h.thread_id, h.message_index) for h in hits] == [("s1", 7)]

    third = _cli("import-history", str(path), "--user", "ana", "--data-dir", data_dir)
    assert third.returncode == 0 and json.loads(third.stdout.strip().splitlines()[-1]) == {
        "threads": SESSIONS, "imported": 0, "skipped": total}


# -- never a password ---------------------------------------------------------------------------------

PASSWORD = "Hunter2-never-shown-7731"


def _with_password(url: str, port: int | None = None) -> str:
    """``url`` with ``PASSWORD`` for its user (the test server trusts loopback, so any password works)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = f"127.0.0.1:{port}" if port else parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, f"{parts.username or 'postgres'}:{PASSWORD}@{host}", parts.path, "", ""))


def test_an_outage_never_shows_the_database_password(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    proxy = TcpProxy("127.0.0.1", 5432)
    proxy.restore()
    with fresh_database("pf_pw") as url:
        secret_url = _with_password(url, proxy.port)
        ctx = Context(user_id="pw", database_url=secret_url, data_dir=str(tmp_path / "d"))
        try:
            with open_postgres(secret_url) as persistence:
                graph = persistence.graph()
                config = {"configurable": {"thread_id": "pw-thread"}}
                graph.invoke({"messages": [HumanMessage("My name is Pia.")]}, config, context=ctx)
                proxy.cut()
                with pytest.raises(ServiceUnavailable) as down:
                    graph.invoke({"messages": [HumanMessage("My dog is Rex.")]}, config, context=ctx)
        finally:
            proxy.cut()
    message = str(down.value)
    assert down.value.service == "PostgreSQL" and f"127.0.0.1:{proxy.port}" in message, message
    assert PASSWORD not in message and PASSWORD not in down.value.where and ":***@" in message, message
    assert PASSWORD not in caplog.text


def test_doctor_never_shows_the_database_password():
    unreachable = _with_password("postgresql://postgres@127.0.0.1/nowhere", free_port())
    down = _cli("doctor", "--database-url", unreachable)
    assert down.returncode == 1, (down.stdout, down.stderr)
    assert "DOWN" in down.stdout and "PostgreSQL" in down.stdout, down.stdout
    assert PASSWORD not in down.stdout + down.stderr, down.stdout + down.stderr
    with fresh_database("pf_pw_doctor") as url:
        up = _cli("doctor", "--database-url", _with_password(url))
    assert "PostgreSQL" in up.stdout and up.stdout.count("DOWN") == 0, up.stdout + up.stderr
    assert PASSWORD not in up.stdout + up.stderr, up.stdout + up.stderr


# -- Chroma collections made safely when replicas start together ------------------------------------------

# One replica: waits until both are at the barrier, then opens the stores (making the collections on
# first use) and writes one record; prints the ids of the collections it got.
OPENS_TOGETHER = textwrap.dedent("""
    import json, os, sys, time
    folder, data_dir, word = sys.argv[1:4]
    open(os.path.join(folder, f"ready-{os.getpid()}"), "w").close()
    deadline = time.monotonic() + 120
    while len(os.listdir(folder)) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    from langchain_core.messages import HumanMessage
    from pagefault.stores import MemoryServices, Scope
    svc = MemoryServices.open(data_dir)
    svc.archival.insert(Scope("both"), f"The {word} lighthouse keeper logged a ship.")
    svc.recall.add(Scope("both"), f"thread-{word}", [(0, HumanMessage(f"I met the {word} keeper."))], "cp-1")
    svc.recall.writer.flush()
    print(json.dumps({"archival": str(svc.archival.index.collection.inner.id),
                      "recall": str(svc.recall.index.collection.inner.id)}))
""")


def test_chroma_collections_are_made_once_when_replicas_start_together(tmp_path):
    barrier = tempfile.mkdtemp(prefix="chroma-setup-")
    with fresh_database("pf_chroma_setup") as url, chroma_server(tmp_path / "chroma") as chroma:
        env = child_env(PAGEFAULT_CHROMA_URL=chroma.url, PAGEFAULT_DATABASE_URL=url)
        procs = [subprocess.Popen([sys.executable, "-c", OPENS_TOGETHER, barrier, str(tmp_path / f"d{i}"), word],
                                  env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for i, word in enumerate(("north", "south"))]
        reports = []
        for p in procs:
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, err[-3000:]
            reports.append(json.loads(out.strip().splitlines()[-1]))
        assert len(os.listdir(barrier)) == 2
        assert reports[0] == reports[1], "the replicas got different collections"
        svc = MemoryServices.open(str(tmp_path / "reader"), chroma_url=chroma.url, database_url=url)
        names = sorted(c.name for c in svc.client.list_collections() if c.name.startswith("pagefault_"))
        assert names == [collection_name(k, "offline-joint") for k in ("archival", "recall", "recall_unit")], names
        found = {r.text for r, _ in svc.archival.search(Scope("both"), "lighthouse keeper logged a ship", 5)}
        assert found == {"The north lighthouse keeper logged a ship.", "The south lighthouse keeper logged a ship."}
        assert {h.thread_id for h in svc.recall.search(Scope("both"), "keeper", 5)} == {"thread-north", "thread-south"}


def test_the_claims_here_are_readmes():
    """Each claim tested here is still what README says (so a reworded README points back here)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    flat = " ".join(readme.split())
    for claim in ("Anthropic, AWS, GitHub, GitLab, Slack, Google, Stripe, Hugging Face, JWTs",
                  "longer than `wait` seconds (default 120) gets `ThreadBusy`",
                  "re-running it resumes and never duplicates",
                  "naming the service and its address (never a password)",
                  "safe when replicas start together"):
        assert claim in flat, claim
