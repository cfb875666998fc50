"""The eviction plan's pairing rules on small, exact windows (``pagefault.window.compaction``): each
rule with the window that breaks when the rule does. The property tests of
``test_compaction_property.py`` check the same rules on random windows; these make sure the cases a
generator may rarely draw (an AI message whose every call failed to parse, a shed that lands exactly
on the target) are always there."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from pagefault.window.compaction import eviction_units, plan_eviction, protected_from


def calls(*ids: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "lookup", "args": {}, "id": i, "type": "tool_call"} for i in ids])


def unparsed(*ids: str) -> AIMessage:
    """An AI message whose every call's arguments failed to parse (``invalid_tool_calls`` only)."""
    return AIMessage("", invalid_tool_calls=[{"name": "archival_memory_insert", "args": "{not json", "id": i,
                                              "error": "bad JSON", "type": "invalid_tool_call"} for i in ids])


def result(call_id: str) -> ToolMessage:
    return ToolMessage("done", tool_call_id=call_id, name="lookup")


def test_an_ai_message_with_only_unparsed_calls_stays_with_its_error_results():
    window: list[BaseMessage] = [HumanMessage("a"), unparsed("x1", "x2"), result("x1"), result("x2"),
                                 AIMessage("b"), HumanMessage("c")]
    assert eviction_units(window) == [[0], [1, 2, 3], [4], [5]]
    # Shedding the AI message's own cost is not enough: its results go with it.
    assert plan_eviction(window, [1, 1, 1, 1, 1, 1], 2) == 4


def test_every_result_of_a_multi_call_message_goes_with_it():
    window: list[BaseMessage] = [calls("c1", "c2", "c3"), result("c2"), result("c1"), result("c3"), HumanMessage("q")]
    assert eviction_units(window) == [[0, 1, 2, 3], [4]]
    assert plan_eviction(window, [5, 1, 1, 1, 1], 1) == 4


def test_valid_and_unparsed_calls_together_form_one_unit():
    mixed = AIMessage("", tool_calls=calls("c1").tool_calls, invalid_tool_calls=unparsed("x1").invalid_tool_calls)
    window: list[BaseMessage] = [mixed, result("c1"), result("x1"), AIMessage("ok"), HumanMessage("q")]
    assert eviction_units(window) == [[0, 1, 2], [3], [4]]


def test_plain_messages_and_a_call_still_waiting_are_units_of_their_own():
    window: list[BaseMessage] = [HumanMessage("a"), AIMessage("b"), result("stray"), calls("c9")]
    assert eviction_units(window) == [[0], [1], [2], [3]]
    assert eviction_units([]) == []


def test_the_current_user_turn_starts_at_the_last_user_message():
    window: list[BaseMessage] = [HumanMessage("a"), AIMessage("b"), HumanMessage("c"), calls("c1"), result("c1")]
    assert protected_from(window) == 2
    assert protected_from([HumanMessage("only")]) == 0
    assert protected_from([AIMessage("no user"), calls("c1"), result("c1")]) == 3
    assert protected_from([]) == 0


def test_the_current_user_turn_is_never_evicted_however_much_must_go():
    window: list[BaseMessage] = [HumanMessage("a"), AIMessage("b"), HumanMessage("now"), calls("c1"), result("c1")]
    assert plan_eviction(window, [10, 10, 10, 10, 10], 10_000) == 2
    assert plan_eviction([HumanMessage("now"), AIMessage("thinking")], [50, 50], 10_000) == 0


def test_eviction_stops_as_soon_as_the_excess_is_shed():
    window: list[BaseMessage] = [HumanMessage("a"), AIMessage("b"), HumanMessage("c"), AIMessage("d"), HumanMessage("e")]
    costs = [3, 4, 5, 6, 7]
    assert plan_eviction(window, costs, 0) == 0
    assert plan_eviction(window, costs, 3) == 1  # exactly the first message's cost: nothing more
    assert plan_eviction(window, costs, 4) == 2
    assert plan_eviction(window, costs, 7) == 2
    assert plan_eviction(window, costs, 8) == 3


def test_eviction_ends_on_a_unit_boundary_not_inside_a_unit():
    window: list[BaseMessage] = [HumanMessage("a"), calls("c1", "c2"), result("c1"), result("c2"), HumanMessage("q")]
    assert plan_eviction(window, [1, 1, 1, 1, 1], 2) == 4
    assert plan_eviction(window, [1, 1, 1, 1, 1], 1) == 1
