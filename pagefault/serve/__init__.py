"""Serving pagefault to clients: what a client may set, who it is, and the LangGraph auth handlers.

- ``settings``: the split between client-settable and server-owned settings (``CLIENT_FIELDS``,
  what a client may set per run; ``SERVER_FIELDS``, the other ``Context`` fields, which only the
  server's environment sets), the context schema a served graph shows (Studio's form), and the one
  function that turns a client's settings and the authenticated identity into a run's ``Context``;
- ``auth``: the ``langgraph_sdk.Auth`` object that ``langgraph.json`` names (bearer JWTs, owner
  tags and filters on threads, runs, crons, assistants and store items).
"""

from pagefault.serve.settings import (
    CLIENT_FIELDS,
    SERVER_FIELDS,
    Identity,
    ServerSettings,
    SettingsError,
    check_client_settings,
    identity_of,
)

__all__ = ["CLIENT_FIELDS", "SERVER_FIELDS", "Identity", "ServerSettings", "SettingsError", "check_client_settings",
           "identity_of"]
