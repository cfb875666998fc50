"""Models: chat models by ``init_chat_model`` id or the offline rule-based model (``chat``,
``offline``; the offline model is NOT an LLM), the offline embedding (``embeddings``) and token
accounting (``tokens``)."""
