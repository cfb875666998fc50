"""Search indexes behind archival and recall memory.

- ``protocols``: the seams: ``VectorCollection`` and ``LexicalBackend``;
- ``hybrid``: vectors and BM25 fused (``HybridIndex``);
- ``lexical_sqlite``: BM25 in SQLite FTS5, with postings resident in memory (``resident_bm25``);
- ``lexical_postgres``: the same BM25 surface in Postgres, shared by replicas;
- ``resident_vectors``: recall's vectors, SQLite on disk and numpy in memory;
- ``tiered_vectors``: archival's vectors, recent writes resident and the rest in Chroma;
- ``embedding_record``: which model made each collection's vectors, and the refusal to mix two.
"""
