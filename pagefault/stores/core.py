"""Core memory: named blocks pinned in every prompt, kept in a LangGraph ``BaseStore``.

Blocks live under the user's namespace, so every thread of that user sees the same blocks, and
they survive restarts with whatever store backs the graph (SQLite, Postgres, the server's).
Each block keeps a short edit log: which kind of source each edit came from (user statement,
agent, document, tool, system), in which thread and turn, when, and what the guard flagged.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, replace
from typing import Any, Hashable

from langgraph.store.base import BaseStore

from pagefault.engines.locks import edit_lock
from pagefault.safety.guard import scan
from pagefault.safety.redaction import redact
from pagefault.stores import typed_core
from pagefault.stores.cached_reads import UNREAD, cached_read
from pagefault.stores.provenance import Provenance, shown_log_entry
from pagefault.stores.scope import Scope
from pagefault.text.tags import SHOWN_CLOSE, as_stored, inert
from pagefault.text.unicode import encodable

DEFAULT_BLOCK_LIMIT = 2_000
#: Largest character limit of a block: every block is in every prompt.
MAX_BLOCK_LIMIT = 100_000
#: Edits remembered per block (the oldest are dropped).
MAX_LOG = 20
#: A block's label, which the prompt shows as its tag: 1-32 chars, a lowercase letter, then letters, digits or '_'.
_LABEL = re.compile(r"[a-z][a-z0-9_]{0,31}")
LABEL_RULE = "section labels are 1-32 chars: a lowercase letter, then lowercase letters, digits or '_'"
_logger = logging.getLogger("pagefault.core")
_reported: set[tuple[tuple[str, ...], str, str]] = set()


def malformed_label(label: object) -> str:
    """What is wrong with a core block's label, the key of its store item ('' if nothing; see ``LABEL_RULE``)."""
    if isinstance(label, str) and _LABEL.fullmatch(label):
        return ""
    return f"label {label!r} is not allowed: {LABEL_RULE}"


def malformed_block(v: object) -> str:
    """What is wrong with a stored core block ('' if nothing): it needs a string ``value`` and an
    integer ``limit`` from 1 to ``MAX_BLOCK_LIMIT`` that the value fits in, and a ``schema``, if it
    has one, that ``typed_core.check_schema`` accepts."""
    return _malformed_shape(v) or (_malformed_schema(v) if isinstance(v, dict) else "")


def _malformed_schema(v: dict[str, Any]) -> str:
    if v.get("schema") is None:
        return ""
    try:
        typed_core.check_schema(v["schema"])
    except typed_core.TypedBlockError as e:
        return f"schema: {e}"
    return ""


def _malformed_shape(v: object) -> str:
    if not isinstance(v, dict):
        return f"the item is {type(v).__name__}, not an object"
    missing = [k for k in ("value", "limit") if k not in v]
    if missing:
        return f"no {' or '.join(missing)}"
    if not isinstance(v["value"], str):
        return "value is not a string"
    limit = v["limit"]
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_BLOCK_LIMIT:
        return f"limit must be an integer from 1 to {MAX_BLOCK_LIMIT}, got {limit!r}"
    if len(v["value"]) > limit:
        return f"value is {len(v['value'])} chars, over its limit of {limit}"
    if "description" in v and not isinstance(v["description"], (str, type(None))):
        return "description is not a string"
    return ""


class CoreMemoryError(ValueError):
    """A core-memory edit that cannot be applied; the message tells the model what to do."""


@dataclass
class CoreBlock:
    """One section of core memory, as the prompt shows it: its ``label`` ('persona', 'human' or a
    custom one), ``value`` (the text), character ``limit`` and ``description`` (what belongs in it);
    ``log``, its latest edits with their provenance; ``schema``, a typed block's JSON schema (see
    ``pagefault.stores.typed_core``), else None."""

    label: str
    value: str
    limit: int
    description: str = ""
    log: tuple[dict[str, Any], ...] = ()
    schema: dict[str, Any] | None = None  # a typed block's JSON schema (see stores.typed_core)

    @property
    def shown(self) -> str:
        """The value as the prompt shows it (``text.tags.inert``): no text in a block can close its own tag
        or core memory's. ``core_memory_replace`` takes text copied from this form too."""
        return inert(self.value)

    @property
    def usage(self) -> str:
        """How full the block is, as the prompt says it: '120/2000 chars'."""
        return f"{len(self.value)}/{self.limit} chars"

    def to_store(self) -> dict[str, Any]:
        """The block as a store item's value (``from_store`` reads it back); the log keeps the latest edits."""
        return {"value": self.value, "limit": self.limit, "description": self.description,
                "updated_at": time.time(), "log": list(self.log[-MAX_LOG:]),
                **({"schema": self.schema} if self.schema else {})}

    @classmethod
    def from_store(cls, label: str, v: Any, namespace: tuple[str, ...] = ()) -> "CoreBlock":
        """The block a store item holds. A malformed item (written by hand through a store API) is
        reported in the log, with where it is and how to repair it, and read as an empty block: it
        must never stop the user's runs."""
        problem = _malformed_shape(v)
        if problem:
            _report_once(namespace, label, "shape", "pagefault: core block %r at store namespace %s is malformed (%s); it is "
                         "read as empty until it is repaired: put {\"value\": str, \"limit\": int} there, or delete "
                         "the item", problem)
            return cls(label, "", DEFAULT_BLOCK_LIMIT, "(malformed in the store; read as empty)")
        schema_problem = _malformed_schema(v)
        if schema_problem:  # its text is sound: keep it, as a plain block
            _report_once(namespace, label, "schema", "pagefault: core block %r at store namespace %s has an unusable "
                         "%s; it is read as a plain block, and its next edit saves it without that schema", schema_problem)
        log = v.get("log")
        return cls(label, v["value"], int(v["limit"]), v.get("description") or "",
                   tuple(shown_log_entry(e) for e in log if isinstance(e, dict)) if isinstance(log, list) else (),
                   v["schema"] if isinstance(v.get("schema"), dict) and not schema_problem else None)

    def edited(self, value: str, op: str, provenance: Provenance) -> "CoreBlock":
        """This block with a new value and one more log entry."""
        return CoreBlock(self.label, value, self.limit, self.description, (*self.log, provenance.log_entry(op)),
                         self.schema)

    def typed(self, value: str) -> str:
        """``value`` parsed, validated and re-rendered when the block declares a schema; else as is."""
        if not self.schema:
            return value
        try:
            return typed_core.normalize(self.schema, value)
        except typed_core.TypedBlockError as e:
            raise CoreMemoryError(f"section {self.label!r}: {e}") from e


class CoreMemory:
    """The core blocks of one scope. ``persona`` and ``human`` always exist.

    ``store`` (a LangGraph ``BaseStore``) holds the blocks under ``scope``'s namespace. ``persona`` is
    the persona block's text until something is written to it; ``block_limit``, the character limit
    of the default blocks; ``redact_secrets``, whether secrets are removed from text before it is
    written. A bad edit raises ``CoreMemoryError``.
    """

    def __init__(self, store: BaseStore, scope: Scope, *, persona: str = "", block_limit: int = DEFAULT_BLOCK_LIMIT,
                 redact_secrets: bool = True):
        self.store = store
        self.scope = scope
        self.redact_secrets = redact_secrets
        self.namespace = scope.namespace("core")
        self._defaults = {
            "persona": CoreBlock("persona", persona[:block_limit], block_limit, "Who you are and how you behave."),
            "human": CoreBlock("human", "", block_limit, "What you know about the user."),
        }

    def blocks(self, *, version: Hashable | None = UNREAD) -> list[CoreBlock]:
        """All blocks: persona, human, then custom blocks by label. ``version``: the store's version of
        their namespace, if just read (``cached_reads.versions_with``)."""
        found = dict(cached_read(self.store, self.namespace, lambda: {
            item.key: CoreBlock.from_store(item.key, item.value, self.namespace)
            for item in self.store.search(self.namespace, limit=1000) if self._labelled(item.key)}, version=version))
        for label, block in self._defaults.items():
            found.setdefault(label, block)
        order = ["persona", "human"] + sorted(k for k in found if k not in self._defaults)
        return [found[k] for k in order]

    def _labelled(self, key: str) -> bool:
        """Whether a store item's ``key`` is a label the prompt may show; an item under another key (written
        behind pagefault's back) is left out, and reported once."""
        problem = malformed_label(key)
        if problem:
            _report_once(self.namespace, key, "label", "pagefault: core block %r at store namespace %s is left out of "
                         "the prompt (%s); move its value to a block with a valid label, or delete the item", problem)
        return not problem

    def get(self, label: str) -> CoreBlock:
        """The block named ``label`` (a default block as it starts, if never written); a
        ``CoreMemoryError`` naming the existing sections if there is none."""
        if not isinstance(label, str):
            raise CoreMemoryError("section must be a string")
        item = self.store.get(self.namespace, label) if _LABEL.fullmatch(label) else None
        if item is not None:
            return CoreBlock.from_store(label, item.value, self.namespace)
        if label in self._defaults:
            return self._defaults[label]
        known = ", ".join(b.label for b in self.blocks())
        raise CoreMemoryError(f"unknown core memory section {label!r}; sections are: {known}")

    def _save(self, block: CoreBlock) -> CoreBlock:
        self.store.put(self.namespace, block.label, block.to_store(), index=False)
        return block

    def _provenance(self, text: str, provenance: Provenance | None) -> Provenance:
        if provenance is not None and not isinstance(provenance, Provenance):
            raise CoreMemoryError("provenance must be a Provenance")
        p = provenance or Provenance()
        return replace(p, created_at=time.time(), flags=tuple(dict.fromkeys((*p.flags, *scan(text).rules))))

    def _clean(self, text: str) -> str:
        return redact(text).text if self.redact_secrets else text

    def append(self, label: str, text: str, *, provenance: Provenance | None = None) -> CoreBlock:
        """Add ``text`` as a new line of the block ``label``; ``provenance`` says where it came from."""
        _check_text(text)
        with edit_lock(self.store, *self.namespace, str(label)):  # no lost update between processes sharing the store
            return self._append(label, text, provenance)

    def _append(self, label: str, text: str, provenance: Provenance | None) -> CoreBlock:
        block = self.get(label)
        text = self._clean(text[: block.limit + 1])  # anything longer is refused below
        if _retried(block, "append", provenance, f"\n{text}\n" in f"\n{block.value}\n"):
            return block
        new = block.typed(f"{block.value}\n{text}" if block.value else text)
        if len(new) > block.limit:
            raise CoreMemoryError(
                f"section {label!r} would hold {len(new)} chars, over its limit of {block.limit}; shorten the text, or "
                f"use core_memory_replace to condense the section, or move details to archival memory"
            )
        return self._save(block.edited(new, "append", self._provenance(text, provenance)))

    def replace(self, label: str, old: str, new: str, *, provenance: Provenance | None = None) -> CoreBlock:
        """Replace the first occurrence of ``old`` with ``new`` in the block ``label`` (empty ``new``
        deletes); ``provenance`` says where the edit came from."""
        if not isinstance(old, str) or not old:
            raise CoreMemoryError("old must be the exact, non-empty text to replace")
        if not isinstance(new, str):
            raise CoreMemoryError("new must be a string (use an empty string to delete)")
        _check_text(new, "new", empty=True)
        with edit_lock(self.store, *self.namespace, str(label)):
            return self._replace(label, old, new, provenance)

    def _replace(self, label: str, old: str, new: str, provenance: Provenance | None) -> CoreBlock:
        block = self.get(label)
        new = self._clean(new[: block.limit + 1])
        if old not in block.value and SHOWN_CLOSE in old:  # copied from the prompt (CoreBlock.shown)
            old = as_stored(old)
        count = block.value.count(old)
        if count == 0 and _retried(block, "replace", provenance, not new or new in block.value):
            return block
        if count == 0:
            raise CoreMemoryError(f"text {old!r} not found in section {label!r}; copy it exactly from the prompt")
        value = block.typed(block.value.replace(old, new, 1))
        if len(value) > block.limit:
            raise CoreMemoryError(f"section {label!r} would hold {len(value)} chars, over its limit of {block.limit}")
        return self._save(block.edited(value, "replace", self._provenance(new, provenance)))

    def set_block(self, label: str, value: str = "", *, limit: int | None = None, description: str = "",
                  provenance: Provenance | None = None, schema: dict[str, Any] | None = None) -> CoreBlock:
        """Create or overwrite the block ``label`` with ``value`` (API use, so the source defaults to
        ``system``; the model edits via append/replace). ``limit``, ``description`` and ``schema``
        (a JSON schema that makes it a typed block) keep the block's current ones when not given;
        ``provenance`` says where the value came from."""
        if malformed_label(label):
            raise CoreMemoryError(LABEL_RULE)
        if not isinstance(value, str):
            raise CoreMemoryError("value must be a string")
        _check_text(value, "value", empty=True)
        _check_text(description, "description", empty=True)
        if schema is not None:
            try:
                typed_core.check_schema(schema)
            except typed_core.TypedBlockError as e:
                raise CoreMemoryError(str(e)) from e
        with edit_lock(self.store, *self.namespace, label):  # an append in flight cannot overwrite it
            return self._set_block(label, value, limit, description, provenance, schema)

    def _set_block(self, label: str, value: str, limit: int | None, description: str,
                   provenance: Provenance | None, schema: dict[str, Any] | None = None) -> CoreBlock:
        try:
            current = self.get(label)
        except CoreMemoryError:
            current = None
        schema = schema or (current.schema if current else None)
        value = CoreBlock(label, value, 0, schema=schema).typed(value)
        limit = limit or (current.limit if current else DEFAULT_BLOCK_LIMIT)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_BLOCK_LIMIT:
            raise CoreMemoryError(f"limit must be an integer from 1 to {MAX_BLOCK_LIMIT} (core memory is in every prompt)")
        if len(value) > limit:
            raise CoreMemoryError(f"value is {len(value)} chars; the limit is {limit}")
        value = self._clean(value)
        desc = description or (current.description if current else "")
        prov = self._provenance(value, provenance or Provenance(source="system"))
        return self._save(CoreBlock(label, value, limit, desc, current.log if current else (), schema).edited(
            value, "set", prov))


def _report_once(namespace: tuple[str, ...], label: str, kind: str, message: str, problem: str) -> None:
    """Log ``message`` (``%r`` label, ``%s`` namespace, ``%s`` problem) about a stored block once per
    process and kind of fault, not at every step that reads it."""
    if (namespace, label, kind) not in _reported:
        _reported.add((namespace, label, kind))
        _logger.warning(message, label, list(namespace), problem)


def _retried(block: CoreBlock, op: str, provenance: object, landed: bool) -> bool:
    """Whether this edit already landed in an earlier run of the same step (a step cut short by a crash
    runs its tool calls again): the block shows it, and its log has the same operation from the same
    source message of the same thread."""
    p = provenance
    return landed and isinstance(p, Provenance) and bool(p.message_id) and any(
        e.get("op") == op and e.get("thread_id") == p.thread_id and e.get("message_id") == p.message_id
        for e in block.log)


def _check_text(text: object, name: str = "text", empty: bool = False) -> None:
    if not isinstance(text, str) or not (empty or text.strip()):
        raise CoreMemoryError(f"{name} must be a {'' if empty else 'non-empty '}string")
    if not encodable(text):
        raise CoreMemoryError(f"{name} is not valid Unicode text (it contains a lone surrogate such as \\ud800)")
