"""Sleep-time consolidation: a consolidation pass every N user turns, on a background thread.

The turn that reaches the count only starts the thread and goes on; the pass runs beside the next
turns (``pagefault.consolidation.consolidate`` explains why that is safe). One pass per scope at a time: a count
reached while a pass is still running is skipped, not queued. Turns are counted per process, so with
several replicas each runs its own passes (they are idempotent and take the same locks).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from pagefault.consolidation.consolidate import (
    ConsolidationPolicy,
    ConsolidationReport,
    Judge,
    ModelJudge,
    RulesJudge,
    consolidate,
)
from pagefault.stores.archival import ArchivalStore
from pagefault.stores.core import CoreMemory
from pagefault.stores.scope import Scope

log = logging.getLogger(__name__)


class SleepTime:
    """Counts user turns per scope and starts a background pass every ``every`` of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._turns: dict[str, int] = {}
        self._running: dict[str, threading.Thread] = {}
        self.reports: list[ConsolidationReport] = []

    def note_turn(self, every: int, archival: ArchivalStore, core: CoreMemory, scope: Scope,
                  policy: ConsolidationPolicy | None = None, judge: Judge | Callable[[], Judge] | None = None
                  ) -> threading.Thread | None:
        """Count one user turn; every ``every`` turns start a pass and return its thread."""
        if every <= 0:
            return None
        with self._lock:
            n = self._turns[scope.key] = self._turns.get(scope.key, 0) + 1
            busy = self._running.get(scope.key)
            if n % every or (busy is not None and busy.is_alive()):
                return None
            thread = threading.Thread(target=self._run, args=(archival, core, scope, policy, judge),
                                      name=f"pagefault-sleeptime-{scope.key}", daemon=True)
            self._running[scope.key] = thread
        thread.start()
        return thread

    def _run(self, archival: ArchivalStore, core: CoreMemory, scope: Scope, policy: ConsolidationPolicy | None,
             judge: Any) -> None:
        report = None
        try:
            if judge is not None and not hasattr(judge, "shorten"):
                judge = judge()  # a factory: the model is loaded on the background thread, only when needed
            report = consolidate(archival, scope, core, policy, judge)
        except Exception:  # a background pass must never take the process down
            log.exception("sleep-time consolidation of %s failed", scope.key)
        finally:
            with self._lock:
                if report is not None:
                    self.reports.append(report)
                    del self.reports[:-100]
                if self._running.get(scope.key) is threading.current_thread():
                    del self._running[scope.key]  # a finished pass holds nothing per user

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the passes running now (tests, shutdown)."""
        with self._lock:
            threads = list(self._running.values())
        for t in threads:
            t.join(timeout)


#: The process's sleep-time scheduler (the graph's reason node reports turns to it).
SLEEP_TIME = SleepTime()


def judge_for(model: str, base_url: str = "") -> Judge:
    """The rules for the offline model; a model-backed judge otherwise."""
    if model == "offline":
        return RulesJudge()
    from pagefault.models.chat import load_chat_model

    return ModelJudge(load_chat_model(model, base_url))


def note_turn(ctx: Any, archival: ArchivalStore, core: CoreMemory, scope: Scope) -> threading.Thread | None:
    """What the reason node calls at the start of each user turn."""
    every = int(getattr(ctx, "consolidate_every", 0) or 0)
    if every <= 0:
        return None
    return SLEEP_TIME.note_turn(every, archival, core, scope, judge=lambda: judge_for(ctx.model, ctx.base_url))
