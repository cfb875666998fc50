"""Which engines hold the memory, and how to reach them safely from several replicas or processes.

- ``connections``: the engine choice (``Engines``), Postgres pools, Chroma clients, ``ServiceUnavailable``;
- ``locks``: named locks across processes (``NamedLocks``), Postgres advisory locks, ``locks_of`` a store;
- ``file_locks``: the same locks for the processes on one embedded data directory;
- ``directory_use``: which processes use a data directory's tiers (shared), a reindex alone (exclusive);
- ``thread_lock``: runs on one thread take turns (``SerializedGraph``);
- ``langgraph_private``: the one module that touches LangGraph's private interfaces (each listed there).
"""
