"""Where the inspector reads a deployment's memory: the checkpointer and store its graph runs on.

Three places, one shape (``MemorySource``):

- ``embedded_source(data_dir)``: the SQLite files ``open_embedded`` opens (``pagefault inspect --web``);
- ``served_source()``: inside a LangGraph server, the server's own checkpointer and store, the ones its
  runs of the graph get (``langgraph.json``, under ``langgraph dev``); a sync read of them from a worker
  thread is what the graph's own nodes do;
- ``postgres_source()``: the Postgres database on ``PAGEFAULT_DATABASE_URL`` that ``langgraph.postgres.json``
  gives the server (``open_postgres``, the same tables).

Archival and recall come from each user's settings (``ServerSettings.for_run``), as for a run: the
server's environment says where they are, never a request.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

from pagefault.engines.langgraph_private import server_checkpointer
from pagefault.graph.context import Context
from pagefault.graph.graph import PagefaultGraph, build_graph
from pagefault.persistence.embedded import open_embedded
from pagefault.persistence.postgres import open_postgres
from pagefault.serve.settings import Identity, ServerSettings, served_settings
from pagefault.stores.scope import Scope
from pagefault.stores.services import MemoryServices
from pagefault.window.run import services


@dataclass
class MemorySource:
    """The threads (``checkpointer``) and core memory (``store``) of one deployment, with its
    ``settings`` (budgets, engines, the models it allows); ``data_dir`` and ``where`` say where the
    memory lives (``where``: one line for the page's footer); ``closer`` closes what was opened here."""

    checkpointer: Any
    store: Any
    settings: ServerSettings
    data_dir: str
    where: str
    closer: Callable[[], None] | None = None

    @cached_property
    def graph(self) -> PagefaultGraph:
        """The pagefault graph on this checkpointer and store, for its history (replay, compactions)."""
        return build_graph(checkpointer=self.checkpointer, store=self.store)

    def context(self, scope: Scope, identity: Identity) -> Context:
        """The settings a run of ``scope`` gets here, for the authenticated ``identity``: the server's own,
        through the one function every run goes through (``SettingsError`` when the identity is
        another user)."""
        return self.settings.for_run({"user_id": scope.user_id, "agent_id": scope.agent_id}, identity)

    def services(self, ctx: Context) -> MemoryServices:
        """Archival and recall where the run's settings ``ctx`` say (``window.run.services``)."""
        return services(ctx)

    def close(self) -> None:
        """Close the connections this source opened (a server's own are the server's to close)."""
        if self.closer is not None:
            self.closer()


def embedded_source(data_dir: str) -> MemorySource:
    """The embedded files of ``data_dir`` (checkpoints, store, Chroma and BM25 beside them; a Chroma
    server where ``PAGEFAULT_CHROMA_URL`` says, as for ``pagefault inspect``)."""
    p = open_embedded(data_dir)
    base = dataclasses.replace(Context(), data_dir=p.data_dir)
    return MemorySource(p.checkpointer, p.store, ServerSettings.of_app(base), p.data_dir,
                        f"embedded files in {p.data_dir}", p.close)


def postgres_source(url: str | None = None) -> MemorySource:
    """The Postgres database at ``url`` (default ``PAGEFAULT_DATABASE_URL``) that ``langgraph.postgres.json``
    gives the server, with the server's settings."""
    p = open_postgres(url)
    settings = served_settings()
    return MemorySource(p.checkpointer, p.store, settings, settings.base.data_dir, "Postgres (PAGEFAULT_DATABASE_URL)",
                        p.close)


async def served_source() -> MemorySource:
    """Inside a LangGraph server: its own checkpointer and store, and the settings its graph is served with."""
    from langgraph_api.store import get_store  # the server's; only there when served

    settings = served_settings()
    return MemorySource(await server_checkpointer(), await get_store(), settings, settings.base.data_dir,
                        "the LangGraph server's checkpointer and store")
