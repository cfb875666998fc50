"""LangChain's own standard test suites (``langchain-tests``) against pagefault's components.

- the offline chat model: ``ChatModelUnitTests`` and ``ChatModelIntegrationTests``;
- the offline embedding: ``EmbeddingsUnitTests`` and ``EmbeddingsIntegrationTests``;
- ``ArchivalRetriever``: ``RetrieversIntegrationTests``;
- each of the five memory tools from ``memory_tools``: ``ToolsUnitTests`` and ``ToolsIntegrationTests``.

A standard test that cannot apply is marked the way langchain-tests documents: the test is
overridden with ``pytest.mark.xfail(reason=...)``. ``strict=True`` where the test runs and must
fail (so a pass is noticed); ``run=False`` where running it would fetch a file from the internet
(image, PDF and audio inputs) or needs a recorded provider (VCR). Nothing here is skipped.

The integration suites run for real: the offline model, the ONNX embedding, Chroma and SQLite in
a temporary directory. No network is used.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.load import dumpd, load
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import (
    ChatModelIntegrationTests,
    EmbeddingsIntegrationTests,
    RetrieversIntegrationTests,
    ToolsIntegrationTests,
)
from langchain_tests.unit_tests import ChatModelUnitTests, EmbeddingsUnitTests, ToolsUnitTests
from langgraph.store.memory import InMemoryStore

from pagefault import ArchivalRetriever, Context, JointEmbeddings, OfflineChatModel, OfflineEmbeddings, memory_tools
from pagefault.stores import ArchivalStore, MemoryServices, Provenance, Scope

DATA_DIR = tempfile.mkdtemp(prefix="pagefault-standard-")
USER = "standard-suite"
FACTS = [
    "Ana drinks green tea every morning.",
    "Ana's cat is called Miso and likes tea towels.",
    "The team's tea budget is 40 euros a month.",
    "Ana moved to Lisbon in 2019.",
    "Bruno brings herbal tea to the Friday meeting.",
]


@pytest.fixture(scope="module", autouse=True)
def _archival():
    """Archival memory the retriever and search tools read; removed after the module."""
    archival: ArchivalStore = MemoryServices.open(DATA_DIR).archival
    for i, fact in enumerate(FACTS):
        archival.insert(Scope(USER), fact, ["fact"], Provenance("seed", i, f"m{i}", "user"))
    yield
    shutil.rmtree(DATA_DIR, ignore_errors=True)



NO_ENV = ("nothing to initialise from the environment: the offline model and embedding take no key, "
          "endpoint or setting from it (test_offline_parts_need_no_environment checks that)")


# -- the offline chat model ---------------------------------------------------------------------

NOT_AN_LLM = "the offline model is rule-based, not an LLM"
NO_MEDIA = "the offline model reads text only (and the test would fetch the file from the internet)"
NO_PUNCHLINE = pytest.mark.xfail(strict=True, reason=f"{NOT_AN_LLM}: a forced call fills only the first string "
                                                     "field with the message, so the Joke model's punchline is missing")


class TestOfflineChatModelUnit(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return OfflineChatModel

    @pytest.mark.xfail(run=False, reason=NO_ENV)
    def test_init_from_env(self) -> None:
        super().test_init_from_env()

    @pytest.mark.xfail(strict=True, reason="the dump matches its snapshot, but langchain-core's load() revives only "
                                           "classes on its own allowlist, even with allowed_objects='all'; with "
                                           "allowed_objects=[OfflineChatModel] it round-trips (see test below)")
    def test_serdes(self, model: BaseChatModel, snapshot: Any) -> None:
        super().test_serdes(model, snapshot)


def test_offline_model_round_trips_through_langchain_serialization():
    model = OfflineChatModel(max_tokens=50, stop=["END"], model="pagefault-offline-x")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # load() is marked beta in langchain-core
        revived = load(dumpd(model), valid_namespaces=["pagefault"], allowed_objects=[OfflineChatModel])
    assert isinstance(revived, OfflineChatModel)
    assert (revived.max_tokens, revived.stop, revived.model_name) == (50, ["END"], "pagefault-offline-x")


class TestOfflineChatModelIntegration(ChatModelIntegrationTests):
    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return OfflineChatModel

    @property
    def model_override_value(self) -> str:
        return "pagefault-offline-override"

    @property
    def supports_json_mode(self) -> bool:
        return True  # so test_json_mode runs; it is marked below

    @pytest.mark.xfail(strict=True, reason=f"{NOT_AN_LLM}: it calls a tool only when the message names it "
                                           "(here 'weather' never names get_weather); it does not infer intent")
    @pytest.mark.parametrize("model", [{}, {"output_version": "v1"}], indirect=True)
    def test_agent_loop(self, model: BaseChatModel) -> None:
        super().test_agent_loop(model)

    # Only the pydantic variant is marked: the suite accepts for the typed-dict and JSON-schema
    # variants a dict whose keys are a subset of the schema's, which a forced call gives; they run
    # unmarked, under their own name, just below.
    @NO_PUNCHLINE
    @pytest.mark.parametrize("schema_type", ["pydantic"])
    def test_structured_output(self, model: BaseChatModel, schema_type: Any) -> None:
        super().test_structured_output(model, schema_type)

    @NO_PUNCHLINE
    @pytest.mark.parametrize("schema_type", ["pydantic"])
    async def test_structured_output_async(self, model: BaseChatModel, schema_type: Any) -> None:
        await super().test_structured_output_async(model, schema_type)

    @pytest.mark.parametrize("schema_type", ["typeddict", "json_schema"])
    def test_structured_output_as_dict(self, model: BaseChatModel, schema_type: Any) -> None:
        ChatModelIntegrationTests.test_structured_output(self, model, schema_type)

    @pytest.mark.parametrize("schema_type", ["typeddict", "json_schema"])
    async def test_structured_output_as_dict_async(self, model: BaseChatModel, schema_type: Any) -> None:
        await ChatModelIntegrationTests.test_structured_output_async(self, model, schema_type)

    @NO_PUNCHLINE
    def test_structured_output_pydantic_2_v1(self, model: BaseChatModel) -> None:
        super().test_structured_output_pydantic_2_v1(model)

    @pytest.mark.xfail(strict=True, reason=f"{NOT_AN_LLM}: it cannot write JSON to a schema in plain text")
    def test_json_mode(self, model: BaseChatModel) -> None:
        super().test_json_mode(model)

    @pytest.mark.xfail(run=False, reason=NO_MEDIA)
    def test_image_inputs(self, model: BaseChatModel) -> None:
        super().test_image_inputs(model)

    @pytest.mark.xfail(run=False, reason=NO_MEDIA)
    def test_image_tool_message(self, model: BaseChatModel) -> None:
        super().test_image_tool_message(model)

    @pytest.mark.xfail(run=False, reason=NO_MEDIA)
    def test_pdf_inputs(self, model: BaseChatModel) -> None:
        super().test_pdf_inputs(model)

    @pytest.mark.xfail(run=False, reason=NO_MEDIA)
    def test_pdf_tool_message(self, model: BaseChatModel) -> None:
        super().test_pdf_tool_message(model)

    @pytest.mark.xfail(run=False, reason=NO_MEDIA)
    def test_audio_inputs(self, model: BaseChatModel) -> None:
        super().test_audio_inputs(model)

    @pytest.mark.xfail(run=False, reason="Anthropic-format content and tools are not supported (and the test "
                                         "would fetch an image from the internet)")
    def test_anthropic_inputs(self, model: BaseChatModel) -> None:
        super().test_anthropic_inputs(model)

    @pytest.mark.xfail(run=False, reason="VCR replays recorded provider HTTP; the offline model makes none")
    def test_stream_time(self, model: BaseChatModel, benchmark: Any, vcr: Any) -> None:
        super().test_stream_time(model, benchmark, vcr)


# -- the offline embedding ----------------------------------------------------------------------

class TestOfflineEmbeddingsUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self) -> type[OfflineEmbeddings]:
        return OfflineEmbeddings

    @pytest.mark.xfail(run=False, reason=NO_ENV)
    def test_init_from_env(self) -> None:
        super().test_init_from_env()


class TestOfflineEmbeddingsIntegration(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[OfflineEmbeddings]:
        return OfflineEmbeddings


class TestJointEmbeddingsUnit(EmbeddingsUnitTests):
    """The default embedding (``offline-joint``)."""

    @property
    def embeddings_class(self) -> type[JointEmbeddings]:
        return JointEmbeddings

    @pytest.mark.xfail(run=False, reason=NO_ENV)
    def test_init_from_env(self) -> None:
        super().test_init_from_env()


class TestJointEmbeddingsIntegration(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[JointEmbeddings]:
        return JointEmbeddings


# -- the archival retriever ---------------------------------------------------------------------

class TestArchivalRetriever(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[ArchivalRetriever]:
        return ArchivalRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"user_id": USER, "data_dir": DATA_DIR}

    @property
    def retriever_query_example(self) -> str:
        return "tea"


# -- the memory tools ---------------------------------------------------------------------------

TOOLS = {t.name: t for t in memory_tools(Context(user_id=USER, data_dir=DATA_DIR), store=InMemoryStore())}
EXAMPLES = {
    "core_memory_append": {"section": "human", "text": "Drinks green tea."},
    "core_memory_replace": {"section": "persona", "old": "helpful", "new": "helpful"},
    "archival_memory_insert": {"text": "The standard suite saved this.", "tags": ["suite"]},
    "archival_memory_search": {"query": "tea", "top_k": 3},
    "conversation_search": {"query": "tea"},
    "procedure_update": {"add": "Use metric units."},  # not instruction-shaped: no user turn vouches for it here
}
assert set(TOOLS) == set(EXAMPLES)


class _MemoryTool:
    name: str

    @property
    def tool_constructor(self) -> BaseTool:
        return TOOLS[self.name]

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return EXAMPLES[self.name]


def _tool_suites(name: str) -> tuple[type, type]:
    unit = type(f"Test_{name}_Unit", (_MemoryTool, ToolsUnitTests), {"name": name})
    integration = type(f"Test_{name}_Integration", (_MemoryTool, ToolsIntegrationTests), {"name": name})
    return unit, integration


for _name in EXAMPLES:
    for _suite in _tool_suites(_name):
        globals()[_suite.__name__] = _suite
del _name, _suite


def test_offline_parts_need_no_environment(tmp_path):
    """What the two marked test_init_from_env stand for: with an empty environment (no PAGEFAULT_,
    OpenAI or LangSmith variables, no HOME), the model answers and the embedding embeds."""
    code = ("from pagefault import OfflineChatModel, OfflineEmbeddings\n"
            "assert OfflineChatModel().invoke('Hello').content\n"
            "assert len(OfflineEmbeddings().embed_query('tea')) == 384\n")
    env = {"PATH": os.environ.get("PATH", ""), "TIKTOKEN_CACHE_DIR": str(tmp_path / "tiktoken")}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
