"""The inspector as a LangGraph server mounts it: ``"http": {"app": ...}`` in ``langgraph.json``.

- ``app`` (``langgraph.json``): the server's own checkpointer and store, those its runs of the graph get;
- ``postgres_app`` (``langgraph.postgres.json``): the Postgres database on ``PAGEFAULT_DATABASE_URL`` that
  config gives the server.

Both authenticate as the API does (``pagefault.serve.auth.CONFIG``, read from the server's environment
when it starts): with tokens, each caller sees only their own memory; without, only loopback requests
are answered. Their routes are all under ``/inspector``, beside the server's own.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from pagefault.inspector.app import inspector_app
from pagefault.inspector.source import MemorySource, postgres_source, served_source
from pagefault.serve.auth import CONFIG


async def _postgres() -> MemorySource:
    return await run_in_threadpool(postgres_source)


app = inspector_app(served_source, CONFIG)
"""The inspector on the LangGraph server's own checkpointer and store (``langgraph.json``)."""

postgres_app = inspector_app(_postgres, CONFIG)
"""The inspector on the Postgres checkpointer and store of ``langgraph.postgres.json``."""
