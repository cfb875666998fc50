"""pagefault's served graph, for ``tests/server/test_killed_turn_served.py``, with a way to hold a run at its input.

When the file ``PAGEFAULT_TEST_HOLD`` names exists, the next run's first node (``reason``, which runs once the
run's input checkpoint is saved; the graph's admission, before that, reads no node's settings) removes it,
creates ``<hold>.held`` and waits there until the server is killed, or until ``<hold>.release`` appears (the
held run then fails).

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

_context = AgentSetup.context


def _held_context(self: AgentSetup, runtime: Any) -> Any:
    hold = os.environ.get("PAGEFAULT_TEST_HOLD", "")
    if hold and os.path.exists(hold):
        os.remove(hold)
        open(hold + ".held", "w").close()
        while not os.path.exists(hold + ".release"):
            time.sleep(0.05)
        raise RuntimeError("a held run was released")
    return _context(self, runtime)


AgentSetup.context = _held_context  # type: ignore[method-assign]

graph = served_graph(served_settings())
