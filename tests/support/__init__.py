"""Test support: real engines (Postgres databases, a Chroma server, a TCP proxy), a real
``langgraph dev`` server, and the replica process the production-path tests run."""
