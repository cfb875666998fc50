"""A pagefault agent's settings, passed as LangGraph ``context``: the ``Context`` dataclass.

Code that runs a graph in its own process sets any field per run
(``graph.invoke(..., context=Context(user_id="ana"))``). A field the run does not give is read from
the environment variable ``PAGEFAULT_<FIELD>`` when that is set; a value the run gives always wins.

A served graph (``langgraph dev``, a LangGraph server) is different: its clients may set only the
fields in ``pagefault.serve.CLIENT_FIELDS``, and everything else (model endpoints and keys, the
engines that hold the memory, the token budget) is the server's, read from its environment when it
starts. See ``pagefault.serve.settings``.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field, fields
from typing import Any, Callable, TypedDict, TypeVar, get_type_hints

from pagefault.safety.policy import CORE_EDIT_POLICIES, GUARD_MODES
from pagefault.text.ids import MAX_ID, too_long

DEFAULT_PERSONA = (
    "I am a helpful assistant with a long-term memory. I keep what the user tells me, "
    "look things up before I answer, and say where my answers come from."
)


BUILTIN_DEFAULTS: dict[str, Any] = {}
"""Each ``Context`` field's built-in default, the value it takes when ``PAGEFAULT_<FIELD>`` is not set."""


def _env(name: str, default: Any) -> Callable[[], Any]:
    """A default factory: ``PAGEFAULT_<NAME>`` if set (coerced to the default's type), else the default."""
    BUILTIN_DEFAULTS[name] = default

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


@dataclass(kw_only=True)
class Context:
    """A pagefault agent's settings: who it serves, which model it runs, how big its main context is and
    where its memory lives. Code that runs a graph in its own process sets any of them; a served graph
    lets a client set only ``pagefault.serve.CLIENT_FIELDS`` (see ``pagefault.serve``)."""

    user_id: str = field(default_factory=_env("user_id", "default"), metadata={
        "description": "The user whose memory this run reads and writes. Scope comes only from here."})
    agent_id: str = field(default_factory=_env("agent_id", "default"), metadata={
        "description": "The agent; each (user, agent) pair has its own core and archival memory."})
    model: str = field(default_factory=_env("model", "offline"), metadata={
        "description": "'offline' (the built-in rule-based model, not an LLM) or a LangChain model id "
                       "such as 'openai:gpt-4o-mini'."})
    base_url: str = field(default_factory=_env("base_url", ""), metadata={
        "description": "OpenAI-compatible base URL for local servers (Ollama, vLLM); empty for the provider's."})
    summary_model: str = field(default_factory=_env("summary_model", ""), metadata={
        "description": "The model that writes compaction summaries: a LangChain model id (a cheaper one than "
                       "the chat model, say); empty uses the chat model."})
    embeddings: str = field(default_factory=_env("embeddings", "offline-joint"), metadata={
        "description": "The embedding of archival and recall: 'offline-joint' (the built-in MiniLM and USE "
                       "Multilingual v3 together: English and 15 other languages, nothing downloaded), 'offline' "
                       "(the built-in all-MiniLM-L6-v2 alone, English, the default before), 'offline-multilingual' "
                       "(USE Multilingual v3 alone) or a LangChain init_embeddings id such as "
                       "'openai:text-embedding-3-small'. One per data directory: `pagefault reindex` changes it."})
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
        "description": "Core-memory edits that come from untrusted content (flagged text, or flagged memory, tool "
                       "output or tool error still in the context): 'deny' refuses them, 'approve' asks a human through "
                       "LangGraph interrupt(), 'allow' applies them (logged as flagged)."})
    redact_secrets: bool = field(default_factory=_env("redact_secrets", True), metadata={
        "description": "Replace API keys, private keys and passwords in text before it is written to memory."})
    consolidate_every: int = field(default_factory=_env("consolidate_every", 0), metadata={
        "description": "Run a consolidation pass (merge duplicates, settle contradictions, shorten full core "
                       "blocks) on a background thread every this many user turns; 0 turns it off."})

    data_dir: str = field(default_factory=_env("data_dir", ".pagefault"), metadata={
        "description": "Directory of the embedded stores (SQLite checkpoints and store, Chroma, BM25 index)."})
    chroma_url: str = field(default_factory=_env("chroma_url", ""), metadata={
        "description": "A Chroma server (http://host:port) for archival and recall vectors instead of the "
                       "Chroma directory under data_dir; empty for embedded."})
    database_url: str = field(default_factory=_env("database_url", ""), metadata={
        "description": "Postgres (postgresql://...) for the BM25 index when chroma_url is set, so replicas "
                       "share it; threads and core memory go to Postgres through pagefault.persistence.postgres."})

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError with a clear message for settings that cannot work."""
        for f in fields(self):
            value = getattr(self, f.name)
            kinds: dict[str, type | tuple[type, ...]] = {"str": str, "int": int, "float": (int, float), "bool": bool}
            kind = kinds.get(str(f.type))
            if kind is not None and (not isinstance(value, kind) or (kind is not bool and isinstance(value, bool))):
                noun = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false"}[str(f.type)]
                raise ValueError(f"{f.name} must be {noun}, got {value!r}")
        for name in ("user_id", "agent_id"):  # the rest of an id's rule is ``Scope``'s, checked as a run opens it
            if len(getattr(self, name)) > MAX_ID:
                raise ValueError(f"{too_long(name, getattr(self, name))}{_from_env(name, getattr(self, name))}")
        if self.guard not in GUARD_MODES:
            raise ValueError(f"guard must be one of {', '.join(GUARD_MODES)}, got {self.guard!r}")
        if self.untrusted_core_edits not in CORE_EDIT_POLICIES:
            raise ValueError(f"untrusted_core_edits must be one of {', '.join(CORE_EDIT_POLICIES)}, "
                             f"got {self.untrusted_core_edits!r}")
        for name, (low, high, unit) in NUMERIC_BOUNDS.items():
            value = getattr(self, name)
            if not low <= value <= high:
                raise ValueError(f"{name} must be from {low:,} to {high:,} {unit}, got {value!r}{_from_env(name, value)}")
        if not 0 < self.compaction_target < self.compaction_trigger <= 1:
            raise ValueError("need 0 < compaction_target < compaction_trigger <= 1, got "
                             f"{self.compaction_target} and {self.compaction_trigger}"
                             f"{_from_env('compaction_target', self.compaction_target)}"
                             f"{_from_env('compaction_trigger', self.compaction_trigger)}")
        if not 0 < self.warning_fraction <= self.compaction_trigger:
            raise ValueError(f"warning_fraction must be in (0, compaction_trigger], got {self.warning_fraction}"
                             f"{_from_env('warning_fraction', self.warning_fraction)}")


NUMERIC_BOUNDS: dict[str, tuple[int, int, str]] = {
    "context_window": (256, 10_000_000, "tokens"),
    "core_block_limit": (100, 100_000, "characters (every block is in every prompt)"),
    "top_k": (1, 50, "results"),
    "consolidate_every": (0, 1_000_000, "user turns (0 turns it off)"),
}
"""The range (inclusive) of each integer setting of ``Context``, and its unit: ``Context.validate``
refuses a value outside it, whether a run gave it or ``PAGEFAULT_<FIELD>`` did. The fractions
(``warning_fraction``, ``compaction_trigger``, ``compaction_target``) are each within (0, 1], in that
order."""


def _from_env(name: str, value: Any) -> str:
    """`` (PAGEFAULT_<NAME>)`` when that variable holds ``value``: the message then says where it came from."""
    raw = os.environ.get(f"PAGEFAULT_{name.upper()}")
    try:
        parsed = type(value)(raw) if raw is not None else None
    except ValueError:
        parsed = None
    same = parsed is not None and (parsed == value or parsed != parsed and value != value)  # nan is no value's equal
    return f" (PAGEFAULT_{name.upper()})" if same else ""


def builtin_context() -> Context:
    """A ``Context`` of the built-in defaults, whatever the environment's ``PAGEFAULT_<FIELD>`` say."""
    return Context(**BUILTIN_DEFAULTS)


# The reference (pdoc) shows a class's docstring, not its fields' metadata: list each field there.
Context.__doc__ = inspect.cleandoc(Context.__doc__ or "") + (
    "\n\nThe fields (one a run does not give is read from ``PAGEFAULT_<FIELD>`` when that is set, "
    "but ``respond``):\n\n") + "\n".join(f"- ``{f.name}`` ({f.type}): {f.metadata['description']}" for f in fields(Context))


class ContextSettings(TypedDict, total=False):
    """``Context`` fields as keywords: what ``PagefaultMiddleware(...)`` and ``memory_tools(...)`` take
    besides a ``Context`` (``PagefaultMiddleware(user_id="ana", context_window=4096)``). The same
    names and types, each optional: one left out or None takes ``Context``'s default
    (``PAGEFAULT_<FIELD>`` if set, else the built-in value)."""

    user_id: str | None
    agent_id: str | None
    model: str | None
    base_url: str | None
    summary_model: str | None
    embeddings: str | None
    context_window: int | None
    warning_fraction: float | None
    compaction_trigger: float | None
    compaction_target: float | None
    persona: str | None
    core_block_limit: int | None
    top_k: int | None
    respond: bool | None
    guard: str | None
    untrusted_core_edits: str | None
    redact_secrets: bool | None
    consolidate_every: int | None
    data_dir: str | None
    chroma_url: str | None
    database_url: str | None


def context_of(context: Context | None, settings: ContextSettings) -> Context:
    """The settings an app gives its middleware or memory tools: ``context``, or a ``Context`` of the
    ``settings`` keywords that are not None; a TypeError when both are given."""
    given: dict[str, Any] = {k: v for k, v in settings.items() if v is not None}
    if context is not None and given:
        raise TypeError("give either a Context or Context fields as keywords, not both")
    return context if context is not None else Context(**given)


_F = TypeVar("_F", bound=Callable[..., Any])


def context_keywords(func: _F) -> _F:
    """Show ``func``'s ``**settings: Unpack[ContextSettings]`` as what it takes: one keyword-only
    parameter per ``Context`` field, of that field's type or None, defaulting to None. Type checkers
    read the ``Unpack``; ``help()``, ``inspect.signature`` and the API reference read this."""
    signature = inspect.signature(func)
    kept = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    keywords = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=kind)
                for name, kind in get_type_hints(ContextSettings).items()]
    setattr(func, "__signature__", signature.replace(parameters=[*kept, *keywords]))
    return func
