"""The unit tier touches no server, no subprocess and no Postgres, so ``pytest tests/unit`` gives its answer
in about a minute and runs anywhere (``support.unit_tier`` refuses them, naming where such a test belongs)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.unit_tier import unit_tier_only


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with unit_tier_only():
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with unit_tier_only():
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    with unit_tier_only():
        yield
