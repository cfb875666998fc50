"""Procedural memory: the rules and preferences an agent has learned ("always answer in French",
"summaries as bullet points"), kept apart from facts.

Facts say what is true and live in archival or core memory; procedures say how to behave and are
shown in every system prompt as a numbered list of rules. Each procedure records where it came
from (thread, turn, source message, kind of source, guard flags) and every later edit. They live
in the LangGraph store under the user's namespace, like core blocks, so every thread sees them.
Ids are a hash of the normalised text: teaching the same rule twice keeps one procedure.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any, Hashable

from langgraph.store.base import BaseStore

from pagefault.engines.locks import edit_lock
from pagefault.safety.guard import scan
from pagefault.safety.redaction import redact
from pagefault.stores.cached_reads import UNREAD, cached_read
from pagefault.stores.provenance import Provenance, shown_log_entry
from pagefault.stores.scope import Scope
from pagefault.text.tags import inert
from pagefault.text.unicode import encodable

#: Characters of one procedure; a rule is a sentence, not a document.
MAX_PROCEDURE_CHARS = 300
#: Procedures one scope may hold: each one is in every prompt.
MAX_PROCEDURES = 50
KINDS = ("rule", "preference")
#: A procedure's id, which the prompt shows: ``procedure_id``'s form, or an exported one's.
_ID = re.compile(r"proc-[a-z0-9]{1,32}")
_logger = logging.getLogger("pagefault.procedures")
_reported: set[tuple[tuple[str, ...], str]] = set()


class ProcedureError(ValueError):
    """A procedure edit that cannot be applied; the message says what to do instead."""


@dataclass(frozen=True)
class Procedure:
    id: str
    text: str
    kind: str = "rule"
    created_at: float = field(default_factory=time.time)
    log: tuple[dict[str, Any], ...] = ()

    @property
    def provenance(self) -> dict[str, Any]:
        """Where it was first taught (the first log entry)."""
        return self.log[0] if self.log else {}

    def to_store(self) -> dict[str, Any]:
        return {"text": self.text, "kind": self.kind, "created_at": self.created_at, "log": list(self.log)}

    @classmethod
    def from_store(cls, id_: str, v: Any) -> "Procedure":
        """The procedure a store item holds; fields written by hand in another shape read as their defaults
        (a malformed item must not stop the user's runs)."""
        v = v if isinstance(v, dict) else {}
        log = v.get("log") if isinstance(v.get("log"), list) else []
        created = v.get("created_at")
        return cls(id_, v["text"] if isinstance(v.get("text"), str) else "",
                   v["kind"] if v.get("kind") in KINDS else "rule",
                   float(created) if isinstance(created, (int, float)) and not isinstance(created, bool) else 0.0,
                   tuple(shown_log_entry(e) for e in log if isinstance(e, dict)))


def malformed_procedure(key: object, v: object) -> str:
    """What is wrong with a procedure item written through a store API ('' if nothing): its key must be
    an id the prompt can show (proc- and 1-32 lowercase letters or digits), its ``text`` a string of
    at most ``MAX_PROCEDURE_CHARS`` characters, its ``kind`` (if any) one of ``KINDS``."""
    if not isinstance(key, str) or not _ID.fullmatch(key):
        return f"id {key!r} is not allowed: an id is proc- and 1-32 lowercase letters or digits"
    if not isinstance(v, dict) or not isinstance(v.get("text"), str) or not v["text"].strip():
        return "text must be a non-empty string"
    if len(v["text"]) > MAX_PROCEDURE_CHARS:
        return f"text holds at most {MAX_PROCEDURE_CHARS} characters"
    if v.get("kind", "rule") not in KINDS:
        return f"kind must be one of {', '.join(KINDS)}"
    return ""


def procedure_id(text: str) -> str:
    norm = " ".join(text.split()).lower().rstrip(".!")
    return "proc-" + hashlib.sha256(norm.encode()).hexdigest()[:12]


def _check(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ProcedureError("a procedure must be a non-empty string")
    if not encodable(text):
        raise ProcedureError("a procedure must be valid Unicode text")
    text = " ".join(text.split())
    if len(text) > MAX_PROCEDURE_CHARS:
        raise ProcedureError(f"a procedure holds at most {MAX_PROCEDURE_CHARS} characters (got {len(text)}): "
                             "state the rule in one sentence")
    return text


class ProceduralMemory:
    """The procedures of one scope, in a LangGraph ``BaseStore``."""

    def __init__(self, store: BaseStore, scope: Scope, *, redact_secrets: bool = True) -> None:
        self.store = store
        self.scope = scope
        self.namespace = scope.namespace("procedures")
        self.redact_secrets = redact_secrets

    def list(self, *, version: Hashable | None = UNREAD) -> list[Procedure]:
        """Every procedure, oldest first (the order they are shown in the prompt). ``version``: the store's
        version of their namespace, if just read (``cached_reads.versions_with``)."""
        return list(cached_read(self.store, self.namespace, lambda: sorted(
            (Procedure.from_store(i.key, i.value) for i in self.store.search(self.namespace, limit=MAX_PROCEDURES + 10)
             if self._shown_id(i.key)),
            key=lambda p: (p.created_at, p.id)), version=version))

    def _shown_id(self, key: str) -> bool:
        """Whether a store item's ``key`` is an id the prompt may show; an item under another key (written
        behind pagefault's back) is left out, and reported once."""
        if _ID.fullmatch(key):
            return True
        if (self.namespace, key) not in _reported:
            _reported.add((self.namespace, key))
            _logger.warning("pagefault: procedure %r at store namespace %s is left out of the prompt (an id is proc- "
                            "and 1-32 lowercase letters or digits); delete the item", key, list(self.namespace))
        return False

    def get(self, id_: str) -> Procedure:
        item = self.store.get(self.namespace, id_) if isinstance(id_, str) and id_ else None
        if item is None:
            known = ", ".join(p.id for p in self.list()) or "none"
            raise ProcedureError(f"no procedure {id_!r}; procedures are: {known}")
        return Procedure.from_store(id_, item.value)

    def _entry(self, op: str, text: str, provenance: Provenance | None) -> dict[str, Any]:
        p = provenance or Provenance(source="system")
        p = replace(p, created_at=time.time(), flags=tuple(dict.fromkeys((*p.flags, *scan(text).rules))))
        return {**p.log_entry(op), "text": text}

    def add(self, text: str, *, kind: str = "rule", provenance: Provenance | None = None) -> Procedure:
        """Learn a rule (idempotent: the same rule taught again is kept once, its log notes it)."""
        text = _check(text)
        if kind not in KINDS:
            raise ProcedureError(f"kind must be one of {', '.join(KINDS)}")
        if self.redact_secrets:
            text = redact(text).text
        pid = procedure_id(text)
        with edit_lock(self.store, *self.namespace, "all"):
            item = self.store.get(self.namespace, pid)
            if item is not None:
                return Procedure.from_store(pid, item.value)
            if len(self.store.search(self.namespace, limit=MAX_PROCEDURES + 1)) >= MAX_PROCEDURES:
                raise ProcedureError(f"already {MAX_PROCEDURES} procedures (all are in every prompt); remove or "
                                     "merge one first")
            proc = Procedure(pid, text, kind, time.time(), (self._entry("add", text, provenance),))
            self.store.put(self.namespace, pid, proc.to_store(), index=False)
            return proc

    def restore(self, proc: Procedure) -> Procedure:
        """Put back a procedure as it was (id, time and history kept), e.g. from an export."""
        text = _check(proc.text)
        if proc.kind not in KINDS or not isinstance(proc.id, str) or not _ID.fullmatch(proc.id):
            raise ProcedureError(f"a procedure needs an id like proc-… (then 1-32 lowercase letters or digits) and a "
                                 f"kind in {', '.join(KINDS)}")
        proc = Procedure(proc.id, text, proc.kind, proc.created_at, proc.log)
        with edit_lock(self.store, *self.namespace, "all"):
            if (self.store.get(self.namespace, proc.id) is None
                    and len(self.store.search(self.namespace, limit=MAX_PROCEDURES + 1)) >= MAX_PROCEDURES):
                raise ProcedureError(f"already {MAX_PROCEDURES} procedures (all are in every prompt); "
                                     f"{proc.id} cannot be added")
            self.store.put(self.namespace, proc.id, proc.to_store(), index=False)
        return proc

    def replace(self, id_: str, text: str, *, provenance: Provenance | None = None) -> Procedure:
        """Reword a procedure; it keeps its id, place and history."""
        text = _check(text)
        if self.redact_secrets:
            text = redact(text).text
        with edit_lock(self.store, *self.namespace, "all"):
            old = self.get(id_)
            proc = Procedure(old.id, text, old.kind, old.created_at, (*old.log, self._entry("replace", text, provenance)))
            self.store.put(self.namespace, old.id, proc.to_store(), index=False)
            return proc

    def remove(self, id_: str) -> Procedure:
        """Forget a procedure; returns what was removed."""
        with edit_lock(self.store, *self.namespace, "all"):
            old = self.get(id_)
            self.store.delete(self.namespace, old.id)
            return old


def render_procedures(procedures: list[Procedure]) -> str:
    """The rules as the system prompt shows them (empty when there are none)."""
    if not procedures:
        return ""
    # One line each, whatever the store holds, and no text can close the list's tag.
    lines = [f"{i}. {inert(' '.join(p.text.split()))} [{p.id}]"
             for i, p in enumerate(procedures, 1) if _ID.fullmatch(p.id)]
    return ("<procedures>\nRules and preferences you have learned; follow them unless the user says otherwise "
            "(edit them with procedure_update):\n" + "\n".join(lines) + "\n</procedures>")
