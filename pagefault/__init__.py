"""pagefault: MemGPT-style virtual context memory for LangGraph agents.

The prompt is RAM, external stores are disk, memory tools are page-in/page-out, the graph is the
kernel. What a user imports:

- ``build_graph`` / ``graph``: the agent graph (``graph`` has no persistence, for ``langgraph dev``);
- ``Context``: per-run settings (user, model, token budget, data directory);
- ``Prompts``: pagefault's prompts (the system prompt, the summarizer's), to override; ``WindowTooSmall``:
  the refusal of a context window too small for the agent's fixed part;
- ``open_embedded`` / ``open_embedded_async``: SQLite checkpointer + store in a local directory;
- ``OfflineChatModel``: the rule-based offline model (not an LLM) used when no model is configured;
- ``JointEmbeddings``: the default embedding, MiniLM and USE Multilingual v3 joined, local (LangChain
  ``Embeddings``); ``OfflineEmbeddings``: the local MiniLM alone; ``EmbeddingModel``: any
  LangChain ``Embeddings`` with the name its collections record (``open_embedded(dir, embeddings=...)``);
- ``TokenCounter``: token accounting (tiktoken for OpenAI models, offline);
- the stores: ``CoreMemory``, ``ArchivalStore``, ``RecallIndex``, ``MemoryServices``, ``Scope``;
- for existing LangChain apps: ``PagefaultMiddleware`` (``create_agent`` middleware), ``memory_tools``
  (plain LangChain tools) and ``ArchivalRetriever`` (a ``BaseRetriever``);
- ``export_agent`` / ``import_agent``: a whole agent's memory as one versioned JSON file.
"""

from pagefault.graph import Context, PagefaultState, build_graph, graph
from pagefault.integrations.langchain_tools import memory_tools
from pagefault.integrations.middleware import PagefaultMiddleware
from pagefault.integrations.retriever import ArchivalRetriever
from pagefault.maintenance.transfer import export_agent, import_agent
from pagefault.models.chat import load_chat_model
from pagefault.models.embedding_choice import EmbeddingModel
from pagefault.models.embeddings import OfflineEmbeddings
from pagefault.models.joint import JointEmbeddings
from pagefault.models.offline import OfflineChatModel
from pagefault.models.tokens import TokenCounter
from pagefault.persistence.embedded import EmbeddedPersistence, open_embedded, open_embedded_async
from pagefault.stores import ArchivalStore, CoreMemory, MemoryServices, RecallIndex, Scope
from pagefault.text.prompts import Prompts
from pagefault.window.fixed_part import WindowTooSmall

__all__ = [
    "ArchivalStore", "Context", "CoreMemory", "EmbeddedPersistence", "EmbeddingModel", "JointEmbeddings", "MemoryServices",
    "OfflineChatModel", "OfflineEmbeddings", "PagefaultState", "Prompts", "RecallIndex", "Scope", "TokenCounter",
    "WindowTooSmall",
    "build_graph", "graph",
    "load_chat_model", "open_embedded", "open_embedded_async",
    "ArchivalRetriever", "PagefaultMiddleware", "export_agent", "import_agent", "memory_tools",
]
