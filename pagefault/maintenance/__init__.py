"""Jobs on a user's memory outside a conversation: document ingestion (``documents``), history
import (``history_import``), export and import (``transfer``), episodic replay (``replay``), the
terminal inspector (``inspect``) and the engine check (``doctor``)."""
