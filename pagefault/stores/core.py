"""Core memory: named blocks pinned in every prompt, kept in a LangGraph ``BaseStore``.

Blocks live under the user's namespace, so every thread of that user sees the same blocks, and
they survive restarts with whatever store backs the graph (SQLite, Postgres, the server's).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import BaseStore

from pagefault.stores.scope import Scope

DEFAULT_BLOCK_LIMIT = 2_000
_LABEL = re.compile(r"[a-z][a-z0-9_]{0,31}")


class CoreMemoryError(ValueError):
    """A core-memory edit that cannot be applied; the message tells the model what to do."""


@dataclass
class CoreBlock:
    label: str
    value: str
    limit: int
    description: str = ""

    @property
    def usage(self) -> str:
        return f"{len(self.value)}/{self.limit} chars"

    def to_store(self) -> dict[str, Any]:
        return {"value": self.value, "limit": self.limit, "description": self.description,
                "updated_at": time.time()}


class CoreMemory:
    """The core blocks of one scope. ``persona`` and ``human`` always exist."""

    def __init__(self, store: BaseStore, scope: Scope, *, persona: str = "", block_limit: int = DEFAULT_BLOCK_LIMIT):
        self.store = store
        self.scope = scope
        self.namespace = scope.namespace("core")
        self._defaults = {
            "persona": CoreBlock("persona", persona[:block_limit], block_limit, "Who you are and how you behave."),
            "human": CoreBlock("human", "", block_limit, "What you know about the user."),
        }

    def blocks(self) -> list[CoreBlock]:
        """All blocks: persona, human, then custom blocks by label."""
        found = {
            item.key: CoreBlock(item.key, item.value["value"], int(item.value["limit"]), item.value.get("description", ""))
            for item in self.store.search(self.namespace, limit=1000)
        }
        for label, block in self._defaults.items():
            found.setdefault(label, block)
        order = ["persona", "human"] + sorted(k for k in found if k not in self._defaults)
        return [found[k] for k in order]

    def get(self, label: str) -> CoreBlock:
        if not isinstance(label, str):
            raise CoreMemoryError("section must be a string")
        item = self.store.get(self.namespace, label) if _LABEL.fullmatch(label) else None
        if item is not None:
            v = item.value
            return CoreBlock(label, v["value"], int(v["limit"]), v.get("description", ""))
        if label in self._defaults:
            return self._defaults[label]
        known = ", ".join(b.label for b in self.blocks())
        raise CoreMemoryError(f"unknown core memory section {label!r}; sections are: {known}")

    def _save(self, block: CoreBlock) -> CoreBlock:
        self.store.put(self.namespace, block.label, block.to_store(), index=False)
        return block

    def append(self, label: str, text: str) -> CoreBlock:
        _check_text(text)
        block = self.get(label)
        new = f"{block.value}\n{text}" if block.value else text
        if len(new) > block.limit:
            raise CoreMemoryError(
                f"section {label!r} would hold {len(new)} chars, over its limit of {block.limit}; shorten the text, or "
                f"use core_memory_replace to condense the section, or move details to archival memory"
            )
        return self._save(CoreBlock(label, new, block.limit, block.description))

    def replace(self, label: str, old: str, new: str) -> CoreBlock:
        if not isinstance(old, str) or not old:
            raise CoreMemoryError("old must be the exact, non-empty text to replace")
        if not isinstance(new, str):
            raise CoreMemoryError("new must be a string (use an empty string to delete)")
        block = self.get(label)
        count = block.value.count(old)
        if count == 0:
            raise CoreMemoryError(f"text {old!r} not found in section {label!r}; copy it exactly from the prompt")
        value = block.value.replace(old, new, 1)
        if len(value) > block.limit:
            raise CoreMemoryError(f"section {label!r} would hold {len(value)} chars, over its limit of {block.limit}")
        return self._save(CoreBlock(label, value, block.limit, block.description))

    def set_block(self, label: str, value: str = "", *, limit: int | None = None, description: str = "") -> CoreBlock:
        """Create or overwrite a block (API use; the model edits via append/replace)."""
        if not isinstance(label, str) or not _LABEL.fullmatch(label):
            raise CoreMemoryError("section labels are 1-32 chars: a lowercase letter, then letters, digits or '_'")
        if not isinstance(value, str):
            raise CoreMemoryError("value must be a string")
        try:
            current = self.get(label)
        except CoreMemoryError:
            current = None
        limit = limit or (current.limit if current else DEFAULT_BLOCK_LIMIT)
        if not isinstance(limit, int) or limit <= 0:
            raise CoreMemoryError("limit must be a positive integer")
        if len(value) > limit:
            raise CoreMemoryError(f"value is {len(value)} chars; the limit is {limit}")
        desc = description or (current.description if current else "")
        return self._save(CoreBlock(label, value, limit, desc))


def _check_text(text: object) -> None:
    if not isinstance(text, str) or not text.strip():
        raise CoreMemoryError("text must be a non-empty string")
