"""Models: chat models by ``init_chat_model`` id or the offline rule-based model (``chat``,
``offline``; the offline model is NOT an LLM), the offline embedding (``embeddings``), the process's choice of embedding
(``embedding_choice``: offline, an ``init_embeddings`` id or a named instance) and token accounting
(``tokens``)."""
