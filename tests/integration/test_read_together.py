"""On the replicated setup (the store and the archival count in one Postgres database) a main context reads
the prompt's stored parts (core blocks, procedures, the archival count) in one statement, and they are what
the separate reads answer."""

from __future__ import annotations

import threading
from typing import Any

from langchain_core.messages import HumanMessage
from support.engines import chroma_server, fresh_database

from pagefault import Context
from pagefault.persistence.postgres import open_postgres
from pagefault.stores import MemoryServices
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


def _said(used: PromptReads) -> tuple[Any, ...]:
    return tuple((b.label, b.value, b.limit, b.description, b.log, b.schema) for b in used.blocks), used.records


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
            # prompt's read threads: the write-behind threads have their own statements). The pool's liveness
            # check of a connection idle over CHECK_IDLE_SECONDS (an empty statement) is not a read: whether
            # it runs depends on how long this machine took since the connection was last lent.
            monkeypatch.undo()
            svc = MemoryServices.open(data_dir, chroma_url=chroma.url, database_url=url)
            svc.recall.writer.flush()
            svc.archival.journal.flush()
            statements: list[str] = []
            here, real = threading.get_ident(), psycopg.Connection.execute

            def counted(self: Any, query: Any, *a: Any, **k: Any) -> Any:
                mine = threading.get_ident() == here or threading.current_thread().name.startswith("pagefault-prompt-reads")
                if mine and str(query):
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
