"""After a memory step, the prompt's reads its own writes changed are derived, not read again
(``window.run.MemoryRun.note_writes``): a saved core block replaces its label's block, an archival record
the step added counts one more. The derived reads must be what the stores would answer: checked after
every memory step of a conversation, on the embedded setup and on the production path (Postgres, a
Chroma server, archival inserts journalled in the database)."""

from __future__ import annotations

import threading
from typing import Any, Iterator

import pytest
from langchain_core.messages import HumanMessage
from support.engines import chroma_server, fresh_database

from pagefault import Context, open_embedded
from pagefault.persistence.postgres import open_postgres
from pagefault.stores import CoreMemory, MemoryServices, Scope
from pagefault.stores.core import CoreMemoryError
from pagefault.window import run as run_module
from pagefault.window.run import MemoryRun, PromptReads

#: Statements the offline model saves in archival memory, facts it also writes to core memory, the same
#: note again (saved once: the count must not move), and an acknowledgement (no memory step).
SCRIPT = [
    "Note 1: Ana keeps the red bike in a shed near Oslo.",
    "I work as a nurse in Oslo.",
    "Note 2: Ana keeps the blue kayak in a barn near Bergen.",
    "Thanks!",
    "Note 1: Ana keeps the red bike in a shed near Oslo.",
    "I live in Valencia these days.",
    "I work as a baker in Valencia.",
    "Note 3: Ana keeps the old radio in the attic.",
]


@pytest.fixture(params=["embedded", "postgres-chroma"])
def opened(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[tuple[Any, Context]]:
    data_dir = str(tmp_path / "pf")
    if request.param == "embedded":
        with open_embedded(data_dir) as p:
            yield p, Context(user_id="ana", data_dir=data_dir)
        return
    with fresh_database("pf_derived") as url, chroma_server(tmp_path / "chroma") as chroma:
        p = open_postgres(url, data_dir=data_dir)
        try:
            yield p, Context(user_id="ana", data_dir=data_dir, chroma_url=chroma.url, database_url=url)
        finally:
            MemoryServices.forget(data_dir)  # its writers are done before the database goes
            p.close()


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """After every edge that follows a memory step, the reads its main context used next to the stores' answer now."""
    monkeypatch.setattr(run_module, "HANDOFF_SECONDS", 30.0)  # a slow first turn must not make reads stale
    seen: dict[str, list[Any]] = {"pairs": [], "parts": []}
    built, reads = MemoryRun.main_context, MemoryRun.prompt_reads

    def main_context(self: MemoryRun, *args: Any, **kwargs: Any) -> Any:
        out = built(self, *args, **kwargs)
        if kwargs.get("reread") is not None:
            used = run_module._last[self._key()][0]
            seen["pairs"].append((used, reads(self)))
        return out

    def prompt_reads(self: MemoryRun, parts: frozenset[str] = run_module.PROMPT_PARTS, known: Any = None) -> Any:
        seen["parts"].append(sorted(parts) if known is not None else "all")
        return reads(self, parts, known)

    monkeypatch.setattr(MemoryRun, "main_context", main_context)
    monkeypatch.setattr(MemoryRun, "prompt_reads", prompt_reads)
    return seen


def _said(used: PromptReads) -> tuple[Any, ...]:
    return tuple((b.label, b.value, b.limit, b.description, b.log, b.schema) for b in used.blocks), used.records


def test_derived_reads_are_what_the_stores_answer(opened, checked):
    p, ctx = opened
    graph = p.graph()
    for n, text in enumerate(SCRIPT):
        if n == 6:  # another writer of the scope between turns: seen at the next turn's start
            CoreMemory(p.store, Scope("ana")).append("human", "Ana's sister is called Mila.")
        graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "t"}}, context=ctx)
    pairs = checked["pairs"]
    assert len(pairs) == 7, "every turn but the acknowledgement had a memory step"
    for used, fresh in pairs:
        assert _said(used) == _said(fresh)
    # Each statement is kept in archival (the facts too, beside core memory); the same note again is not.
    assert [used.records for used, _ in pairs] == [1, 2, 3, 3, 4, 5, 6], [used.records for used, _ in pairs]
    assert any("Mila" in b.value for b in pairs[-1][0].blocks)
    # Nothing was read again after a memory step: its own writes said what changed.
    assert checked["parts"].count([]) == len(pairs), checked["parts"]


def test_a_write_that_failed_is_read_again(tmp_path, checked, monkeypatch):
    data_dir = str(tmp_path / "pf")
    real = CoreMemory.append

    def refused(self: CoreMemory, *args: Any, **kwargs: Any) -> Any:
        raise CoreMemoryError("section 'human' would hold too many chars")

    with open_embedded(data_dir) as p:
        graph = p.graph()
        monkeypatch.setattr(CoreMemory, "append", refused)
        graph.invoke({"messages": [HumanMessage("I work as a nurse in Oslo.")]}, {"configurable": {"thread_id": "t"}},
                     context=Context(user_id="ana", data_dir=data_dir))
        monkeypatch.setattr(CoreMemory, "append", real)
    after_memory = [parts for parts in checked["parts"] if parts != "all"]
    assert after_memory and all("blocks" in parts for parts in after_memory), checked["parts"]
    assert all(_said(used) == _said(fresh) for used, fresh in checked["pairs"])


def test_a_turns_start_reads_the_prompts_parts_in_one_statement_on_the_replicated_setup(tmp_path, monkeypatch):
    import psycopg

    from pagefault.stores.cached_reads import same_database

    data_dir = str(tmp_path / "pf")
    with fresh_database("pf_together") as url, chroma_server(tmp_path / "chroma") as chroma:
        p = open_postgres(url, data_dir=data_dir)
        try:
            ctx = Context(user_id="ana", data_dir=data_dir, chroma_url=chroma.url, database_url=url)
            graph = p.graph()
            for text in SCRIPT[:3]:
                graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "t"}}, context=ctx)
            run = graph.setup.open_run(ctx, p.store, {"configurable": {"thread_id": "t"}})
            together = run._read_together()
            assert together is not None, "the store and the count share the database"
            monkeypatch.setattr(MemoryRun, "_read_together", lambda self: None)
            apart = run.prompt_reads()
            assert _said(together) == _said(apart) and together.procedures == apart.procedures
            assert together.records == 3 and any("nurse" in b.value for b in together.blocks)
            # Its namespaces unchanged, a turn's start asks the database once (counted on this thread and the
            # prompt's read threads: the write-behind threads have their own statements).
            monkeypatch.undo()
            svc = MemoryServices.open(data_dir, chroma_url=chroma.url, database_url=url)
            svc.recall.writer.flush()
            svc.archival.journal.flush()
            statements: list[str] = []
            here, real = threading.get_ident(), psycopg.Connection.execute

            def counted(self: Any, query: Any, *a: Any, **k: Any) -> Any:
                if threading.get_ident() == here or threading.current_thread().name.startswith("pagefault-prompt-reads"):
                    statements.append(str(query))
                return real(self, query, *a, **k)

            monkeypatch.setattr(psycopg.Connection, "execute", counted)
            assert _said(run.prompt_reads()) == _said(apart)
            assert len(statements) == 1, statements
            monkeypatch.undo()
            # Another spelling of the same database is the same database; another database is not.
            d = psycopg.conninfo.conninfo_to_dict(url)
            assert same_database(p.store, f"host={d['host']} port={d.get('port', 5432)} dbname={d['dbname']} "
                                          f"user={d['user']}")
            assert not same_database(p.store, url.rsplit("/", 1)[0] + "/another")
        finally:
            MemoryServices.forget(data_dir)
            p.close()
