"""Archival memory as a LangChain retriever, for RAG chains over what an agent has saved.

The same hybrid search (Chroma + BM25, fused by reciprocal rank) that ``archival_memory_search``
runs, with its filters applied before the limit. Each ``Document`` carries the record id and its
provenance, so a chain can cite where a passage came from.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field, field_validator

from pagefault.graph.context import Context
from pagefault.stores.archival import check_tags
from pagefault.stores.scope import Scope
from pagefault.stores.services import MemoryServices
from pagefault.tools.handlers import MAX_TOP_K, ToolError, parse_time


class ArchivalRetriever(BaseRetriever):
    """Search one user's archival memory: a LangChain ``BaseRetriever`` whose documents are archival
    records (their citation, tags and score in ``metadata``).

    ``user_id`` and ``agent_id`` name the memory (its ``Scope``), ``data_dir`` where it lives (as
    ``Context.data_dir``); ``k`` is how many records a search returns. ``k``, ``tags``, ``start``
    and ``end`` may also be given per call: ``retriever.invoke("query", k=3, tags=["work"])``.
    ``from_context`` builds one from a run's settings.
    """

    user_id: str = "default"
    agent_id: str = "default"
    data_dir: str = ".pagefault"
    k: int = Field(default=4, ge=1, le=MAX_TOP_K)
    tags: list[str] = Field(default_factory=list, description="Only records with all these tags.")
    start: str | None = Field(default=None, description="Only records saved at or after this ISO date/time.")
    end: str | None = Field(default=None, description="Only records saved at or before this ISO date/time.")

    @field_validator("tags")
    @classmethod
    def _valid_tags(cls, value: list[str]) -> list[str]:
        return list(check_tags(value))

    @classmethod
    def from_context(cls, ctx: Context, **kwargs: Any) -> "ArchivalRetriever":
        """The retriever over the archival memory a pagefault run with ``ctx`` reads and writes."""
        return cls(user_id=ctx.user_id, agent_id=ctx.agent_id, data_dir=ctx.data_dir, **{"k": ctx.top_k, **kwargs})

    @property
    def scope(self) -> Scope:
        """The memory searched: ``Scope(user_id, agent_id)``."""
        return Scope(self.user_id, self.agent_id)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        k = int(kwargs.get("k", self.k))
        if not 1 <= k <= MAX_TOP_K:
            raise ValueError(f"k must be between 1 and {MAX_TOP_K}, got {k}")
        tags = check_tags(kwargs.get("tags", self.tags))
        start, end = (_epoch(kwargs.get(name, getattr(self, name)), name) for name in ("start", "end"))
        archival = MemoryServices.open(self.data_dir).archival
        found = archival.search(self.scope, query, k, tags=tags, start=start, end=end)
        return [
            Document(
                id=record.id, page_content=record.text,
                metadata={**record.citation(), "message_id": record.provenance.message_id,
                          "origin": record.provenance.source, "tags": list(record.tags), "score": score},
            )
            for record, score in found
        ]


def _epoch(value: str | float | datetime | None, name: str) -> float | None:
    if value is None or isinstance(value, (int, float)):
        return value
    if isinstance(value, datetime):
        return value.timestamp()
    try:
        return parse_time(value, name)
    except ToolError as e:
        raise ValueError(str(e)) from e
