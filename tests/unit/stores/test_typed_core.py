"""Typed core sections: a block with a JSON schema validates every edit, renders compactly, and is
edited with the same two tools as a plain block; plain blocks are untouched."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from pagefault import Context, open_embedded
from pagefault.stores import MemoryServices, Scope
from pagefault.stores.core import CoreMemory, CoreMemoryError
from pagefault.stores.typed_core import parse
from pagefault.tools.handlers import MemoryCall, ToolError, run_memory_tool
from pagefault.tools.trust import Origins
from pagefault.window.main_context import render_core

HUMAN = {"type": "object", "additionalProperties": False,
         "properties": {"name": {"type": "string", "maxLength": 40}, "location": {"type": "string"},
                        "age": {"type": "integer", "minimum": 0},
                        "preferences": {"type": "array", "items": {"type": "string"}}},
         "required": ["name"]}


def test_edits_are_validated_and_rendered_compactly(embedded):
    core = CoreMemory(embedded.store, Scope("ana"))
    block = core.set_block("human", "name: Ana\npreferences: green tea", schema=HUMAN)
    assert block.value == "name: Ana\npreferences: green tea"
    assert core.append("human", "preferences: jazz; cycling").value == "name: Ana\npreferences: green tea; jazz; cycling"
    assert core.append("human", "location: Berlin").value == (
        "name: Ana\nlocation: Berlin\npreferences: green tea; jazz; cycling")  # schema field order
    assert core.replace("human", "location: Berlin", "location: Paris").value.splitlines()[1] == "location: Paris"
    assert core.append("human", "age: 41").value.splitlines()[2] == "age: 41"
    assert parse(HUMAN, core.get("human").value) == {"name": "Ana", "location": "Paris", "age": 41,
                                                      "preferences": ["green tea", "jazz", "cycling"]}
    before = core.get("human").value
    with pytest.raises(CoreMemoryError, match=r"'Lives in: Rome' is not 'field: value' for a field of this section "
                                              r"\(name, location, age, preferences\)"):
        core.append("human", "Lives in: Rome")
    with pytest.raises(CoreMemoryError, match="location is already set"):
        core.append("human", "location: Rome")
    with pytest.raises(CoreMemoryError, match="age: 'forty' is not a valid integer"):
        core.replace("human", "age: 41", "age: forty")
    with pytest.raises(CoreMemoryError, match=r"age: -1 is less than the minimum of 0"):
        core.replace("human", "age: 41", "age: -1")
    with pytest.raises(CoreMemoryError, match=r"block: 'name' is a required property"):
        core.replace("human", "name: Ana\n", "")
    assert core.get("human").value == before  # refused edits change nothing
    assert core.get("human").schema == HUMAN
    assert render_core([core.get("human")]) == (
        f'<core_memory>\n<human chars="{len(before)}/2000 chars">\n{before}\n</human>\n</core_memory>')


def test_plain_blocks_keep_working(embedded):
    core = CoreMemory(embedded.store, Scope("bo"))
    assert core.append("human", "Lives in: Rome").value == "Lives in: Rome"
    assert core.append("human", "anything: at all\nfree text").value == "Lives in: Rome\nanything: at all\nfree text"
    assert core.get("human").schema is None


def test_a_bad_schema_is_refused(embedded):
    core = CoreMemory(embedded.store, Scope("cy"))
    with pytest.raises(CoreMemoryError, match='"type": "object"'):
        core.set_block("human", "", schema={"type": "string"})
    with pytest.raises(CoreMemoryError, match="invalid JSON schema"):
        core.set_block("human", "", schema={"type": "object", "properties": {"a": {"type": "nonsense"}}})
    with pytest.raises(CoreMemoryError, match="does not fit"):
        core.set_block("human", "location: Oslo", schema=HUMAN)  # name is required
    with pytest.raises(CoreMemoryError, match="each property needs a schema object"):
        core.set_block("human", "", schema={"type": "object", "properties": {"a": True}})
    scored = {"type": "object", "properties": {"score": {"type": "number"}}}
    core.set_block("stats", "score: 2.5", schema=scored)
    for bad in ("1e999", "nan", "-inf"):  # would be stored, then never parse again
        with pytest.raises(CoreMemoryError, match="is not a valid number"):
            core.replace("stats", "2.5", bad)
    assert core.get("stats").value == "score: 2.5"


def test_the_model_edits_a_typed_block_through_the_tools(embedded, data_dir):
    scope = Scope("dee")
    core = CoreMemory(embedded.store, scope)
    core.set_block("human", "name: Dee", schema=HUMAN)
    svc = MemoryServices.open(data_dir)
    call = MemoryCall(scope=scope, thread_id="t", turn=0, message_id="m", core=core, archival=svc.archival,
                      recall=svc.recall, origins=Origins(user_text="I like tea"))
    out = run_memory_tool(call, "core_memory_append", {"section": "human", "text": "preferences: tea"})
    assert out.artifact["value"] == "name: Dee\npreferences: tea"
    with pytest.raises(ToolError, match="not 'field: value'"):
        run_memory_tool(call, "core_memory_append", {"section": "human", "text": "Likes tea"})


def test_a_typed_block_in_the_prompt_through_the_graph(data_dir):
    ctx = Context(user_id="eve", data_dir=data_dir)
    with open_embedded(data_dir) as p:
        CoreMemory(p.store, Scope("eve")).set_block("human", "name: Eve\npreferences: chess", schema=HUMAN)
        out = p.graph().invoke({"messages": [HumanMessage("Hello")]}, {"configurable": {"thread_id": "t"}}, context=ctx)
    assert out["tokens"]["core"] > 0
    with open_embedded(data_dir) as p:
        assert CoreMemory(p.store, Scope("eve")).get("human").value == "name: Eve\npreferences: chess"
