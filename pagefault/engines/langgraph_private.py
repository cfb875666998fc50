"""The one module that touches LangGraph's private interfaces: everything else stands on public ones.

Written for langgraph 1.2.24 (langgraph-checkpoint 4.3.2, langgraph-checkpoint-postgres 3.2.0,
langgraph-api 0.16.7: ``WRITTEN_FOR``). ``tests/unit/test_langgraph_private.py`` checks each private
shape below against the installed LangGraph and fails, naming what changed and the version this was
written for, when one moves; it also fails when any other module of ``pagefault`` imports a private
LangGraph or LangChain module or name, reads a ``_store``, names LangGraph's private loop, or assigns to
a LangGraph module's attribute.

What it touches, and why (each has no public counterpart in the versions above):

- ``_DELTA_PAGE_SIZE`` of ``langgraph.checkpoint.postgres`` and ``langgraph.checkpoint.postgres.aio``
  (a module constant, 1,024, that each module's saver reads when it rebuilds a delta channel: checkpoints
  per query). The savers take no such setting. ``set_delta_page_size`` assigns both, for the whole
  process (``persistence.postgres.lean_delta_reads`` sets 128: a long thread's turn then reads a page
  of 128 rows for the fifty or so checkpoints it needs, not 1,024).
- ``CONFIG_KEY_CHECKPOINTER`` (``langgraph.constants``, where LangGraph keeps it only for backward
  compatibility; its home is ``langgraph._internal._constants``): the key of a step's config that holds
  its graph's checkpointer. A node has no public way to its checkpointer (``Runtime`` carries the store,
  not the saver); ``step_checkpointer`` reads it (``window.cut_short``, ``engines.thread_lock``).
- ``checkpoint_map`` (``CONFIG_KEY_CHECKPOINT_MAP``): a step's config maps each namespace to the
  checkpoint the step started from; ``step_checkpoint_map`` reads it (``window.cut_short``).
  ``window/run.py`` and ``serve/settings.py`` (``LANGGRAPH_KEYS``) name the same key.
- ``compiled_fields``: a compiled graph is remade as a subclass of its class from its instance fields,
  as ``Pregel.copy`` remakes it (its constructor takes its own ``__dict__``, without the
  ``__orig_class__`` a generic alias leaves on it). ``StateGraph.compile`` has no hook for the class
  it makes, so ``SerializedGraph``, ``ResumingGraph`` and ``integrations.owner_checked``'s agent are built
  this way (``engines.thread_lock`` passes it on to the last).
- ``langgraph_api._checkpointer.get_checkpointer``: a LangGraph server's checkpointer, for the web
  inspector it serves (``server_checkpointer``); the server's store has a public accessor
  (``langgraph_api.store.get_store``), its checkpointer none.
- ``__context_provided__`` (``CONTEXT_PROVIDED``): the key a LangGraph server puts in a run's
  configurable when its client sent a context (``serve.auth`` checks what the client sent once).

Relied on, nothing touched: given new input, a thread whose last run still has steps to run does
not run them (LangGraph's loop, ``PregelLoop._first`` in ``langgraph.pregel._loop``, marks them seen and
puts the input where the old one was), while ``None`` as input runs them. ``window.cut_short`` exists
because of the first and finishes a cut-short run with the second; the test pins both.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Mapping

from langgraph.constants import CONFIG_KEY_CHECKPOINTER

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

#: The versions this module was written for and checked against.
WRITTEN_FOR: dict[str, str] = {
    "langgraph": "1.2.24",
    "langgraph-checkpoint": "4.3.2",
    "langgraph-checkpoint-postgres": "3.2.0",
    "langgraph-api": "0.16.7",
}

#: The Postgres saver modules whose ``DELTA_PAGE_CONSTANT`` ``set_delta_page_size`` assigns.
DELTA_PAGE_MODULES = ("langgraph.checkpoint.postgres", "langgraph.checkpoint.postgres.aio")
#: The name of their page-size constant.
DELTA_PAGE_CONSTANT = "_DELTA_PAGE_SIZE"

CHECKPOINT_MAP = "checkpoint_map"
"""The key of a step's config that maps each namespace to the checkpoint the step started from."""

CONTEXT_PROVIDED = "__context_provided__"
"""The key a LangGraph server sets in a run's configurable when its client sent a context."""

_log = logging.getLogger("pagefault.langgraph_private")


def set_delta_page_size(rows: int) -> None:
    """Have LangGraph's Postgres savers, sync and async, read ``rows`` checkpoints per query when they
    rebuild a delta channel (for the whole process). A LangGraph without the constant is left as it is,
    with a warning: its savers read their own page size."""
    import importlib

    for name in DELTA_PAGE_MODULES:
        module = importlib.import_module(name)
        if not isinstance(getattr(module, DELTA_PAGE_CONSTANT, None), int):
            _log.warning("pagefault: %s has no %s (written for langgraph %s): its delta reads keep their own page size",
                         name, DELTA_PAGE_CONSTANT, WRITTEN_FOR["langgraph"])
            continue
        setattr(module, DELTA_PAGE_CONSTANT, rows)


def step_checkpointer(config: Mapping[str, Any]) -> Any:
    """The checkpointer of the graph a step runs in (``config`` is the step's); None outside a run."""
    return (config.get("configurable") or {}).get(CONFIG_KEY_CHECKPOINTER)


def step_checkpoint_map(config: Mapping[str, Any]) -> dict[str, Any]:
    """The checkpoint each namespace's step started from (``config`` is the step's); {} outside a run."""
    return dict((config.get("configurable") or {}).get(CHECKPOINT_MAP) or {})


def compiled_fields(graph: CompiledStateGraph[Any, Any, Any, Any]) -> dict[str, Any]:
    """What a subclass of ``CompiledStateGraph`` is built from to stand for ``graph``: its fields, without
    the generic alias that ``CompiledStateGraph[...]`` left on it (as ``Pregel.copy`` builds a copy)."""
    return {k: v for k, v in vars(graph).items() if k != "__orig_class__"}


async def server_checkpointer() -> Any:
    """The checkpointer of the LangGraph server this process runs in (only there: ``langgraph_api``)."""
    from langgraph_api._checkpointer import get_checkpointer

    return await get_checkpointer()


__all__ = ["CHECKPOINT_MAP", "CONFIG_KEY_CHECKPOINTER", "CONTEXT_PROVIDED", "DELTA_PAGE_CONSTANT",
           "DELTA_PAGE_MODULES", "WRITTEN_FOR", "compiled_fields", "server_checkpointer", "set_delta_page_size",
           "step_checkpoint_map", "step_checkpointer"]
