"""Jobs on a user's memory outside a conversation: document ingestion (``documents``), history
import (``history_import``), export and import (``transfer``), episodic replay (``replay``), the
terminal inspector (``inspect``), the engine check (``doctor``) and re-embedding a store with another
model (``reindex``)."""
