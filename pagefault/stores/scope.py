"""Whose memory a call touches. Always taken from the run's context, never from tool args."""

from __future__ import annotations

from dataclasses import dataclass

from pagefault.text.ids import check_id


@dataclass(frozen=True)
class Scope:
    """A user's memory as seen by one agent: the unit of isolation for every tier.

    ``user_id`` and ``agent_id`` are non-empty strings of at most 256 characters, without control
    characters (a ValueError otherwise).
    """

    user_id: str
    agent_id: str = "default"

    def __post_init__(self) -> None:
        check_id("user_id", self.user_id)
        check_id("agent_id", self.agent_id)

    @property
    def key(self) -> str:
        """A single string naming the scope, used as a metadata filter value."""
        return f"{len(self.user_id)}:{self.user_id}|{self.agent_id}"

    def namespace(self, *parts: str) -> tuple[str, ...]:
        """A LangGraph store namespace under this scope (labels may not contain '.')."""
        enc = lambda s: s.replace("%", "%25").replace(".", "%2E")  # noqa: E731
        return ("pagefault", enc(self.user_id), enc(self.agent_id), *parts)
