"""Run-time configuration of a pagefault agent, passed as LangGraph ``context``.

Every field of ``RunContext`` can be given per run (``graph.invoke(..., context=Context(user_id="ana"))``
or the SDK's ``context={...}``). A field the run does not give is read from the environment variable
``PAGEFAULT_<FIELD>`` when that is set; a value the run gives always wins, even one equal to the
default (so a server's environment can never re-scope a run to another user).

Where the memory lives (``data_dir``, ``chroma_url``, ``database_url``) is the process's choice, not
a run's: ``Context`` adds those fields for graphs run in this process by code that picks them, while
a served graph (``langgraph dev``, a LangGraph server) takes ``RunContext``, reads them from the
server's environment, and refuses a client's context that names one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any, Callable

from pagefault.guard import GUARD_MODES

#: What happens to a core-memory edit that comes from untrusted content.
CORE_EDIT_POLICIES = ("deny", "approve", "allow")

DEFAULT_PERSONA = (
    "I am a helpful assistant with a long-term memory. I keep what the user tells me, "
    "look things up before I answer, and say where my answers come from."
)


def _env(name: str, default: Any) -> Callable[[], Any]:
    """A default factory: ``PAGEFAULT_<NAME>`` if set (coerced to the default's type), else the default."""

    def read() -> Any:
        raw = os.environ.get(f"PAGEFAULT_{name.upper()}")
        if raw is None:
            return default
        if isinstance(default, bool):  # bool("false") is True; read the usual spellings instead
            if raw.strip().lower() in ("1", "true", "yes", "on"):
                return True
            if raw.strip().lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(f"PAGEFAULT_{name.upper()}={raw!r} is not a valid bool (use true or false)")
        try:
            return type(default)(raw)
        except ValueError as e:
            raise ValueError(f"PAGEFAULT_{name.upper()}={raw!r} is not a valid {type(default).__name__}") from e

    return read


#: Where the memory lives: chosen by the process (its environment or the code that runs the graph).
ENGINE_FIELDS = ("data_dir", "chroma_url", "database_url")


@dataclass(kw_only=True)
class RunContext:
    """Who the agent serves, which model it runs and how big its main context is: what a run may set."""

    user_id: str = field(default_factory=_env("user_id", "default"), metadata={
        "description": "The user whose memory this run reads and writes. Scope comes only from here."})
    agent_id: str = field(default_factory=_env("agent_id", "default"), metadata={
        "description": "The agent; each (user, agent) pair has its own core and archival memory."})
    model: str = field(default_factory=_env("model", "offline"), metadata={
        "description": "'offline' (the built-in rule-based model, not an LLM) or a LangChain model id "
                       "such as 'openai:gpt-4o-mini'."})
    base_url: str = field(default_factory=_env("base_url", ""), metadata={
        "description": "OpenAI-compatible base URL for local servers (Ollama, vLLM); empty for the provider's."})
    context_window: int = field(default_factory=_env("context_window", 8192), metadata={
        "description": "Token budget of the main context: system prompt, core memory, summary, messages, tools."})
    warning_fraction: float = field(default_factory=_env("warning_fraction", 0.75), metadata={
        "description": "Fraction of the window at which the agent gets a one-shot memory-pressure warning."})
    compaction_trigger: float = field(default_factory=_env("compaction_trigger", 0.9), metadata={
        "description": "Fraction of the window at which the oldest messages are summarized and evicted."})
    compaction_target: float = field(default_factory=_env("compaction_target", 0.5), metadata={
        "description": "Fraction of the window that compaction brings the main context down to."})
    persona: str = field(default_factory=_env("persona", DEFAULT_PERSONA), metadata={
        "description": "The persona block a new user's agent starts with."})
    core_block_limit: int = field(default_factory=_env("core_block_limit", 2000), metadata={
        "description": "Character limit of each core memory block."})
    top_k: int = field(default_factory=_env("top_k", 5), metadata={
        "description": "Results a memory search returns when the model does not say."})
    respond: bool = field(default=True, metadata={
        "description": "Whether the agent replies. False only records the input (paging, compaction and "
                       "recall indexing as usual, no model call): used to import existing history."})

    guard: str = field(default_factory=_env("guard", "flag"), metadata={
        "description": "Poisoning guard: 'flag' marks instruction-shaped memories as untrusted when they are "
                       "shown, 'quarantine' also leaves them out of search results, 'off' does neither."})
    untrusted_core_edits: str = field(default_factory=_env("untrusted_core_edits", "deny"), metadata={
        "description": "Core-memory edits that come from untrusted content (flagged text, or a turn that read "
                       "flagged memory or tool output): 'deny' refuses them, 'approve' asks a human through "
                       "LangGraph interrupt(), 'allow' applies them (logged as flagged)."})
    redact_secrets: bool = field(default_factory=_env("redact_secrets", True), metadata={
        "description": "Replace API keys, private keys and passwords in text before it is written to memory."})
    consolidate_every: int = field(default_factory=_env("consolidate_every", 0), metadata={
        "description": "Run a consolidation pass (merge duplicates, settle contradictions, shorten full core "
                       "blocks) on a background thread every this many user turns; 0 turns it off."})

    def __new__(cls, *args: Any, **kwargs: Any) -> "RunContext":
        own = {f.name for f in fields(cls)}
        refused = [k for k in ENGINE_FIELDS if k in kwargs and k not in own]
        if refused:
            raise ValueError(
                f"{', '.join(refused)} cannot be set by a run's context: a served graph keeps its memory where "
                "the server's environment says (PAGEFAULT_DATA_DIR, PAGEFAULT_CHROMA_URL, PAGEFAULT_DATABASE_URL)")
        return super().__new__(cls)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError with a clear message for settings that cannot work."""
        for f in fields(self):
            value = getattr(self, f.name)
            kind = {"str": str, "int": int, "float": (int, float), "bool": bool}.get(str(f.type))
            if kind is not None and (not isinstance(value, kind) or (kind is not bool and isinstance(value, bool))):
                noun = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false"}[str(f.type)]
                raise ValueError(f"{f.name} must be {noun}, got {value!r}")
        if self.guard not in GUARD_MODES:
            raise ValueError(f"guard must be one of {', '.join(GUARD_MODES)}, got {self.guard!r}")
        if self.untrusted_core_edits not in CORE_EDIT_POLICIES:
            raise ValueError(f"untrusted_core_edits must be one of {', '.join(CORE_EDIT_POLICIES)}, "
                             f"got {self.untrusted_core_edits!r}")
        if self.context_window < 256:
            raise ValueError(f"context_window must be at least 256 tokens, got {self.context_window}")
        if not 0 < self.compaction_target < self.compaction_trigger <= 1:
            raise ValueError("need 0 < compaction_target < compaction_trigger <= 1, got "
                             f"{self.compaction_target} and {self.compaction_trigger}")
        if not 0 < self.warning_fraction <= self.compaction_trigger:
            raise ValueError("warning_fraction must be in (0, compaction_trigger]")
        if self.consolidate_every < 0:
            raise ValueError(f"consolidate_every must be 0 (off) or a number of turns, got {self.consolidate_every}")
        if not 1 <= self.top_k <= 50:
            raise ValueError("top_k must be between 1 and 50")
        if not 100 <= self.core_block_limit <= 100_000:
            raise ValueError("core_block_limit must be from 100 to 100000 characters (every block is in every prompt)")


@dataclass(kw_only=True)
class Context(RunContext):
    """``RunContext`` plus where the memory lives, for graphs this process runs itself (``build_graph``,
    ``open_embedded(...).graph()``, the middleware): the code running them may choose the engines.
    A served graph never takes these from a client (see the module docstring)."""

    data_dir: str = field(default_factory=_env("data_dir", ".pagefault"), metadata={
        "description": "Directory of the embedded stores (SQLite checkpoints and store, Chroma, BM25 index)."})
    chroma_url: str = field(default_factory=_env("chroma_url", ""), metadata={
        "description": "A Chroma server (http://host:port) for archival and recall vectors instead of the "
                       "Chroma directory under data_dir; empty for embedded."})
    database_url: str = field(default_factory=_env("database_url", ""), metadata={
        "description": "Postgres (postgresql://...) for the BM25 index when chroma_url is set, so replicas "
                       "share it; threads and core memory go to Postgres through pagefault.production."})
