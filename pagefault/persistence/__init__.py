"""A whole agent's persistence in one call: ``open_embedded`` (SQLite and Chroma in a local
directory, ``embedded``) and ``open_postgres`` (threads and core memory in Postgres, ``postgres``)."""
