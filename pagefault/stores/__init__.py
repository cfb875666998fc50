"""The memory tiers: core (a LangGraph ``BaseStore``), archival (Chroma + BM25) and recall (derived
from checkpoints), with procedures, provenance, validity and the search indexes (``index/``) and
write-behind writers (``writers/``) behind them."""

from pagefault.stores.archival import ArchivalRecord, ArchivalStore, Provenance
from pagefault.stores.core import CoreBlock, CoreMemory, CoreMemoryError
from pagefault.stores.recall import RecallHit, RecallIndex
from pagefault.stores.scope import Scope
from pagefault.stores.services import MemoryServices

__all__ = ["ArchivalRecord", "ArchivalStore", "CoreBlock", "CoreMemory", "CoreMemoryError", "MemoryServices",
           "Provenance", "RecallHit", "RecallIndex", "Scope"]
