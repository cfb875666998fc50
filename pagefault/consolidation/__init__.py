"""Consolidation: the pass that keeps memory true and small (``consolidate``), and the sleep-time
trigger that runs it on a background thread every N user turns (``sleeptime``)."""
