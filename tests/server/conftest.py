"""A ``langgraph dev`` shared by the server tests that need nothing but the repo's config (no auth, the
offline model): started once per session (per worker under xdist). Each test keeps to users and threads of
its own; tests that need other settings, a fresh server or a kill start their own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.devserver import DevServer, dev_server


@pytest.fixture(scope="session")
def plain_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    with dev_server(tmp_path_factory.mktemp("plain-server")) as srv:
        yield srv
