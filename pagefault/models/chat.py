"""Chat models: any LangChain model by id, or the offline rule-based model (not an LLM), and which one
writes compaction summaries."""

from __future__ import annotations

import threading

from langchain_core.language_models import BaseChatModel

from pagefault.models.offline import OfflineChatModel

_cache: dict[tuple[str, str], BaseChatModel] = {}
_lock = threading.Lock()


def load_chat_model(model: str = "offline", base_url: str = "") -> BaseChatModel:
    """The chat model ``model`` names: 'offline' gives the rule-based ``OfflineChatModel``; anything
    else goes to ``init_chat_model`` (e.g. 'openai:gpt-4o-mini', or 'openai:llama3.1' with an Ollama
    ``base_url``, an OpenAI-compatible endpoint). One model per (model, base_url), made once."""
    key = (model, base_url)
    with _lock:
        if key not in _cache:
            if model == "offline":
                _cache[key] = OfflineChatModel()
            else:
                from langchain.chat_models import init_chat_model

                _cache[key] = init_chat_model(model, base_url=base_url) if base_url else init_chat_model(model)
        return _cache[key]


def load_summary_model(summary_model: str, base_url: str, chat: BaseChatModel) -> BaseChatModel:
    """The model that writes compaction summaries: the one ``summary_model`` names (``load_chat_model``,
    with the same ``base_url``), or ``chat``, the run's chat model, when it is empty. The graph's
    ``compact`` node and ``PagefaultMiddleware`` both ask here."""
    if not summary_model.strip():
        return chat
    try:
        return load_chat_model(summary_model.strip(), base_url)
    except (ValueError, ImportError) as e:  # an unknown provider, or its package not installed
        raise ValueError(f"summary_model {summary_model!r} cannot be loaded: {e}") from e


def token_model_name(model: BaseChatModel | None, configured: str) -> str:
    """The model name that decides how tokens are counted."""
    if model is None:
        return configured
    if isinstance(model, OfflineChatModel):
        return "offline"
    return str(getattr(model, "model_name", None) or getattr(model, "model", None) or "unknown")


__all__ = ["load_chat_model", "load_summary_model", "token_model_name"]
