"""The web inspector: one user's memory as pages a person can read, served beside the graph.

A Starlette app (``app``) that ``langgraph.json`` mounts in the LangGraph server (``served``) and
``pagefault inspect --web`` serves on loopback. For one user and agent it shows the context window
(the last request by segment against the budget, and the thread's history as an SVG plot drawn on
the server), core memory (editable, through ``CoreMemory``'s own rules), archival memory (browse,
the agent's own hybrid search with each score's parts, provenance, trust, validity, delete), recall
(search across threads, evicted or in the window, linked to each turn's replay) and compactions.
"""
