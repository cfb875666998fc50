"""pagefault's served graph, for ``tests/server/test_killed_turn_served.py``, with a way to hold a run at its input.

When the file ``PAGEFAULT_TEST_HOLD`` names exists, the next run's first step (the router that runs before
any node, once the run's input checkpoint is saved) removes it, creates ``<hold>.held`` and waits there
until the server is killed, or until ``<hold>.release`` appears (the held run then fails).

``langgraph dev`` writes its in-memory checkpoints and runs to ``.langgraph_api`` every 10 seconds; here
every 0.2 seconds after its first write, so that a held run is on disk soon before the test kills the server.
"""

from __future__ import annotations

import os
import time
from typing import Any

from langgraph_runtime_inmem import _persistence

from pagefault.graph.graph import served_graph
from pagefault.serve.settings import served_settings
from pagefault.window.setup import AgentSetup

_persistence._flush_interval = 0.2  # read by the flush loop on each round

_open_run = AgentSetup.open_run


def _held_open_run(self: AgentSetup, ctx: Any, store: Any, config: Any) -> Any:
    hold = os.environ.get("PAGEFAULT_TEST_HOLD", "")
    if hold and os.path.exists(hold):
        os.remove(hold)
        open(hold + ".held", "w").close()
        while not os.path.exists(hold + ".release"):
            time.sleep(0.05)
        raise RuntimeError("a held run was released")
    return _open_run(self, ctx, store, config)


AgentSetup.open_run = _held_open_run  # type: ignore[method-assign]

graph = served_graph(served_settings())
