"""Every checkpointer pagefault builds passes LangGraph's own checkpointer conformance suite
(``langgraph-checkpoint-conformance``) on every capability it offers, and offers only what it does.

The suite detects a capability by the saver's class overriding the async method of it, and runs that
capability's tests on a fresh saver each time. The sync savers (``open_embedded``'s, ``open_postgres``')
are run through an async front that calls their own sync methods on a worker thread, and offers exactly
the operations their class implements. Each saver is built by pagefault's own openers, in a fresh data
directory or a fresh database for every capability.
"""

from __future__ import annotations

import asyncio
import tempfile
from contextlib import ExitStack
from typing import Any, AsyncIterator, Callable

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES, EXTENDED_CAPABILITIES, Capability
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from support.engines import fresh_database

from pagefault.graph.delta_memo import (
    RememberingAsyncPostgresSaver,
    RememberingAsyncSqliteSaver,
    RememberingPostgresSaver,
    RememberingSqliteSaver,
)
from pagefault.persistence.embedded import open_embedded, open_embedded_async
from pagefault.persistence.postgres import open_postgres, open_postgres_async

#: Each capability's sync method, as the async method the suite detects it by, without its leading "a".
SYNC_METHOD = {cap: f"{cap.value}" for cap in Capability}


def _offers(cls: type, method: str) -> bool:
    return getattr(cls, method, None) is not getattr(BaseCheckpointSaver, method, None)


def _async_front(saver: BaseCheckpointSaver[Any]) -> BaseCheckpointSaver[Any]:
    """``saver`` (a sync saver) seen through the async methods the suite calls, each running the sync
    method of the same name on a worker thread; only the operations ``saver``'s class implements."""

    def bridged(name: str) -> Callable[..., Any]:
        async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(getattr(saver, name), *args, **kwargs)
        return method

    async def alist(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        for item in await asyncio.to_thread(lambda: list(saver.list(*args, **kwargs))):
            yield item

    methods: dict[str, Any] = {"alist": alist,
                               "get_next_version": lambda self, current, channel: saver.get_next_version(current, channel)}
    for cap in Capability:
        sync = SYNC_METHOD[cap]
        if cap is not Capability.LIST and _offers(type(saver), sync):
            methods["a" + sync] = bridged(sync)
    front = type(f"Async{type(saver).__name__}", (BaseCheckpointSaver,), methods)
    return front(serde=saver.serde)


async def _embedded() -> AsyncIterator[Any]:
    with tempfile.TemporaryDirectory() as d, open_embedded(d) as p:
        yield _async_front(p.checkpointer)


async def _embedded_async() -> AsyncIterator[Any]:
    with tempfile.TemporaryDirectory() as d:
        async with open_embedded_async(d) as p:
            yield p.checkpointer


async def _postgres() -> AsyncIterator[Any]:
    with ExitStack() as stack:
        url = stack.enter_context(fresh_database("pf_conform"))
        p = stack.enter_context(open_postgres(url))
        yield _async_front(p.checkpointer)


async def _postgres_async() -> AsyncIterator[Any]:
    with fresh_database("pf_conform") as url:
        async with open_postgres_async(url) as p:
            yield p.checkpointer


SAVERS = {
    "embedded": (_embedded, RememberingSqliteSaver, SqliteSaver),
    "embedded-async": (_embedded_async, RememberingAsyncSqliteSaver, AsyncSqliteSaver),
    "postgres": (_postgres, RememberingPostgresSaver, PostgresSaver),
    "postgres-async": (_postgres_async, RememberingAsyncPostgresSaver, AsyncPostgresSaver),
}


@pytest.mark.parametrize("name", list(SAVERS))
async def test_the_saver_passes_langgraphs_conformance_suite(name):
    factory, ours, langgraphs = SAVERS[name]
    registered = checkpointer_test(name=f"pagefault-{name}")(factory)
    report = await validate(registered)
    results = report.results
    assert all(results[cap.value].detected for cap in BASE_CAPABILITIES), results
    failures = {cap: r.failures for cap, r in results.items() if r.detected and r.passed is not True}
    assert failures == {}, failures
    # It offers what LangGraph's saver it extends offers, no more and no less.
    prefix = "" if name in ("embedded", "postgres") else "a"
    for cap in EXTENDED_CAPABILITIES:
        method = prefix + SYNC_METHOD[cap]
        assert results[cap.value].detected == _offers(langgraphs, method) == _offers(ours, method), (cap, results)
        if _offers(langgraphs, method):  # a remembering saver must forget what the operation changes
            assert getattr(ours, method) is not getattr(langgraphs, method), f"{ours.__name__}.{method} keeps its memo"
    assert sum(r.tests_passed for r in results.values()) >= 58
