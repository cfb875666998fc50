"""The memory tiers: core (BaseStore), archival (Chroma + BM25) and recall (derived from checkpoints)."""

from pagefault.stores.archival import ArchivalRecord, ArchivalStore, Provenance
from pagefault.stores.core import CoreBlock, CoreMemory, CoreMemoryError
from pagefault.stores.recall import RecallHit, RecallIndex
from pagefault.stores.scope import Scope
from pagefault.stores.services import MemoryServices

__all__ = ["ArchivalRecord", "ArchivalStore", "CoreBlock", "CoreMemory", "CoreMemoryError", "MemoryServices",
           "Provenance", "RecallHit", "RecallIndex", "Scope"]
