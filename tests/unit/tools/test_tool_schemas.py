"""The memory tools as the model sees them: their schemas fit in 600 o200k tokens, keep every argument,
and can be chosen and reworded; the system prompt names only the tools a model has.

Each schema is measured as it is sent: ``convert_to_openai_tool`` of the tool (what ``bind_tools``
sends), counted with pagefault's token counter for ``gpt-4o-mini`` (o200k).
"""

from __future__ import annotations

import json

import pytest
from langchain_core.utils.function_calling import convert_to_openai_tool

from pagefault import Context, memory_tools
from pagefault.models.tokens import token_counter
from pagefault.text.prompts import MEMORY_TOOLS_MARKER, SYSTEM_PROMPT, TOOL_GUIDANCE, Prompts
from pagefault.tools.handlers import MEMORY_TOOLS, choose_memory_tools, model_schema
from pagefault.window.setup import AgentSetup

COUNTER = token_counter("gpt-4o-mini")
#: The six schemas' budget, in tokens as sent (issue 23: they were 1,082, archival_memory_search alone 293).
BUDGET = 600


def _sent() -> dict[str, dict]:
    return {t.name: convert_to_openai_tool(t) for t in AgentSetup().memory_toolset}


def test_the_six_schemas_fit_in_600_o200k_tokens():
    assert COUNTER.encoding.name == "o200k_base"
    each = {name: COUNTER.count_tools([schema]) for name, schema in _sent().items()}
    assert set(each) == set(MEMORY_TOOLS)
    assert sum(each.values()) <= BUDGET, each
    assert all(40 < n <= 150 for n in each.values()), each  # no tool carries most of the budget
    assert COUNTER.count_tools(list(_sent().values())) == sum(each.values())


def test_every_argument_is_still_there_with_its_type_and_whether_it_is_required():
    types = {str: "string", int: "integer", bool: "boolean"}
    for name, schema in _sent().items():
        fn = schema["function"]
        model = MEMORY_TOOLS[name].schema
        params = fn["parameters"]
        assert list(params["properties"]) == list(model.model_fields), name
        required = [f for f, info in model.model_fields.items() if info.is_required()]
        assert params.get("required", []) == required, name
        for field, prop in params["properties"].items():
            annotation = model.model_fields[field].annotation
            base = next((t for t in (str, int, bool) if annotation is t or t in getattr(annotation, "__args__", ())), None)
            assert prop["type"] == (types[base] if base else "array"), (name, field, prop)
            assert "anyOf" not in prop and "default" not in prop and "title" not in prop, (name, field, prop)
        # What the model leaves out, or sends as null, is still accepted.
        minimal = {f: ("x" if params["properties"][f]["type"] == "string" else 1) for f in required}
        nulls = {f: None for f in params["properties"] if f not in required}
        assert model.model_validate({**minimal, **nulls})


def test_descriptions_are_one_line():
    for name, schema in _sent().items():
        text = json.dumps(schema)
        description = schema["function"]["description"]
        assert description and "\n" not in description and "  " not in description, (name, description)
        assert "\\n" not in text, name


def test_the_toolkit_and_the_graph_send_the_same_schemas():
    toolkit = {t.name: convert_to_openai_tool(t) for t in memory_tools(Context(user_id="ana"))}
    assert toolkit == _sent()
    assert AgentSetup().tool_schemas == list(_sent().values())


def test_model_schema_returns_a_fresh_dict():
    first = model_schema(MEMORY_TOOLS["archival_memory_search"].schema)
    first["properties"].clear()
    assert "query" in model_schema(MEMORY_TOOLS["archival_memory_search"].schema)["properties"]


# -- choosing and rewording ---------------------------------------------------------------------

def test_a_list_chooses_a_subset_in_the_usual_order():
    chosen = choose_memory_tools(["conversation_search", "core_memory_append"])
    assert [t.name for t in chosen] == ["core_memory_append", "conversation_search"]
    assert [t.name for t in choose_memory_tools()] == list(MEMORY_TOOLS)
    assert choose_memory_tools([]) == ()


def test_a_mapping_rewords_the_descriptions_on_one_line():
    choice = {"archival_memory_search": "  Look up\n   saved facts. ", "procedure_update": None}
    assert [t.name for t in choose_memory_tools(choice)] == ["archival_memory_search", "procedure_update"]
    (search, procedure) = AgentSetup(memory_tools=choice).memory_toolset
    assert search.description == "Look up saved facts."
    assert procedure.description == MEMORY_TOOLS["procedure_update"].description
    assert convert_to_openai_tool(search)["function"]["description"] == "Look up saved facts."


@pytest.mark.parametrize("choice, message", [
    (["archival_search"], "unknown memory tool(s) 'archival_search'; the memory tools are: core_memory_append, "),
    ({"recall": "x", "conversation_search": None}, "unknown memory tool(s) 'recall'"),
    ("archival_memory_search", "must be a list of memory tool names or a mapping"),
    (42, "must be a list of memory tool names or a mapping"),
    (["conversation_search", "conversation_search"], "named more than once: conversation_search"),
    ({"conversation_search": ""}, "must be non-empty text"),
    ({"conversation_search": 3}, "must be non-empty text"),
])
def test_a_bad_choice_is_refused_naming_it(choice, message):
    with pytest.raises(ValueError) as refused:
        choose_memory_tools(choice)
    assert message in str(refused.value)
    if "unknown" in message:
        assert ", ".join(MEMORY_TOOLS) in str(refused.value)


def test_a_graph_setup_and_the_toolkit_take_the_same_choice():
    setup = AgentSetup(memory_tools={"archival_memory_search": "Find facts."})
    assert [s["function"]["name"] for s in setup.tool_schemas] == ["archival_memory_search"]
    assert setup.tool_schemas[0]["function"]["description"] == "Find facts."
    assert setup.memory_tool_names == frozenset({"archival_memory_search"})
    toolkit = memory_tools(Context(user_id="ana"), tools={"archival_memory_search": "Find facts."})
    assert [convert_to_openai_tool(t) for t in toolkit] == setup.tool_schemas
    with pytest.raises(ValueError, match="reserved for pagefault's memory tools"):
        AgentSetup(tools=memory_tools(Context(user_id="ana"), tools=["procedure_update"]),
                   memory_tools=["archival_memory_search"])


# -- the system prompt names only the tools the model has ---------------------------------------

def test_the_guidance_covers_every_memory_tool():
    assert list(TOOL_GUIDANCE) == list(MEMORY_TOOLS)
    assert all(line.startswith(f"{name}: ") and "\n" not in line for name, line in TOOL_GUIDANCE.items())
    assert SYSTEM_PROMPT.count(MEMORY_TOOLS_MARKER) == 1


def test_the_instructions_name_only_the_tools_given():
    prompts = Prompts()
    full = prompts.instructions(MEMORY_TOOLS)
    assert all(f"- {line}" in full for line in TOOL_GUIDANCE.values()) and MEMORY_TOOLS_MARKER not in full
    some = prompts.instructions(["archival_memory_search", "my_own_tool"])
    assert "- archival_memory_search: " in some
    assert not any(name in some for name in MEMORY_TOOLS if name != "archival_memory_search"), some
    none = prompts.instructions([])
    assert not any(name in none for name in MEMORY_TOOLS) and MEMORY_TOOLS_MARKER not in none
    assert "\n\n" not in none and none.splitlines()[1].startswith("- Old messages"), "the marker's line is gone"


def test_an_override_is_used_as_written_and_bad_prompts_are_refused():
    assert Prompts(system="Be brief.").instructions(MEMORY_TOOLS) == "Be brief."
    assert Prompts(system="Be brief. {memory_tools}").instructions(["conversation_search"]) == (
        "Be brief. - " + TOOL_GUIDANCE["conversation_search"])
    with pytest.raises(ValueError, match="Prompts.system must be a string"):
        Prompts(system=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prompts must be a pagefault Prompts"):
        AgentSetup(prompts="Be brief.")  # type: ignore[arg-type]


def test_the_prompt_ends_with_the_date_and_names_no_missing_tool_anywhere():
    from datetime import datetime, timezone

    from pagefault import PagefaultState
    from pagefault.window.main_context import build_main_context

    setup = AgentSetup(memory_tools=["archival_memory_search"])
    ctx = Context(context_window=4096)
    at = datetime(2026, 12, 1, 15, 13, tzinfo=timezone.utc)
    main = build_main_context(PagefaultState(evicted_count=3), ctx, setup.counter(ctx), [], 7, setup.tool_schemas,
                              warn=True, now=at)
    lines = main.system_prompt.splitlines()
    assert lines[-2:] == ["Memory: 3 message(s) evicted, 7 archival record(s).", "Now: Tuesday 2026-12-01 15:13 UTC."]
    assert "MEMORY PRESSURE" in main.system_prompt and "Save anything" not in main.system_prompt  # it cannot save
    assert not any(name in main.system_prompt for name in MEMORY_TOOLS if name != "archival_memory_search")
    full = AgentSetup()
    warned = build_main_context(PagefaultState(), ctx, full.counter(ctx), [], 0, full.tool_schemas, warn=True, now=at)
    assert "Save anything important to archival or core memory now." in warned.system_prompt
