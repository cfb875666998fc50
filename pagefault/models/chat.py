"""Chat models: any LangChain model by id, or the offline rule-based model (not an LLM)."""

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


def token_model_name(model: BaseChatModel | None, configured: str) -> str:
    """The model name that decides how tokens are counted."""
    if model is None:
        return configured
    if isinstance(model, OfflineChatModel):
        return "offline"
    return str(getattr(model, "model_name", None) or getattr(model, "model", None) or "unknown")


__all__ = ["load_chat_model", "token_model_name"]
