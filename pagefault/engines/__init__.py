"""Which engines hold the memory, and how to reach them safely from several replicas.

- ``connections``: the engine choice (``Engines``), Postgres pools, Chroma clients, ``ServiceUnavailable``;
- ``locks``: advisory locks that hold across replicas;
- ``thread_lock``: runs on one thread take turns (``SerializedGraph``).
"""
