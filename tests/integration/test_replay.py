"""Episodic replay: every past model call of a thread comes back exactly as it was sent (system prompt
with the core memory, procedures and summary of that moment, and the messages), through the
checkpointer's history; also from the CLI."""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

import pytest
from langchain_core.messages import HumanMessage

from pagefault import Context, OfflineChatModel, open_embedded
from pagefault.cli.main import main
from pagefault.maintenance.replay import ReplayError, model_calls, replay
from pagefault.models.offline import SUMMARY_INSTRUCTION

TEXTS = ["My name is Ana and I live in Lisbon.", "Always answer in French.",
         "I moved to Berlin.", "Where do I live?"] + [
    f"Note {i}: the quiet harbour had boats painted blue and green, and gulls on every post." for i in range(8)]


class Recorder(OfflineChatModel):
    """The offline model, keeping every request it receives."""

    sent: ClassVar[list[list[Any]]] = []

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any):
        Recorder.sent.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)


@pytest.fixture
def thread(data_dir):
    Recorder.sent.clear()
    ctx = Context(user_id="ana", data_dir=data_dir, context_window=2600, warning_fraction=0.7)
    with open_embedded(data_dir) as p:
        g = p.graph(model=Recorder())
        for text in TEXTS:
            g.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "t1"}}, context=ctx)
        values = g.get_state({"configurable": {"thread_id": "t1"}}).values
    assert values["compactions"] >= 1, "the scenario must evict messages, so replay crosses a compaction"
    return [m for m in Recorder.sent if not str(m[0].content).startswith(SUMMARY_INSTRUCTION)]  # not compaction's


def test_every_model_call_replays_exactly(data_dir, thread):
    with open_embedded(data_dir) as p:
        calls = model_calls(p.graph(), "t1")
    assert len(calls) == len(thread)
    for call, sent in zip(calls, thread):
        assert call.system_prompt == sent[0].content
        assert [(m.id, m.type, m.content) for m in call.messages] == [(m.id, m.type, m.content) for m in sent[1:]]
    # The prompt changed along the way (core memory, procedures, summary), and replay shows each version.
    prompts = [c.system_prompt for c in calls]
    assert "Lives in: Lisbon" in prompts[1] and "<procedures>" not in prompts[1]
    assert any("Lives in: Berlin" in x and "Always answer in French." in x for x in prompts)
    assert any("<summary_of_evicted_messages>" in x for x in prompts)
    assert any(c.first_message_index > 0 for c in calls), "some calls came after eviction"
    # Each call answered one user message: its turn counts user messages, its message index positions.
    assert [c.turn for c in calls if c.step == 0] == list(range(len(TEXTS)))
    for c in calls:
        asked = c.messages[c.message_index - c.first_message_index]
        assert asked.type == "human" and asked.content == TEXTS[c.turn]
        assert c.turns[c.message_index - c.first_message_index] == c.turn


def test_replay_by_turn_and_step(data_dir, thread):
    with open_embedded(data_dir) as p:
        g = p.graph()
        first = replay(g, "t1", 0)
        assert (first.turn, first.step, first.steps) == (0, 0, 2)  # memory round trip, then the answer
        assert first.system_prompt == thread[0][0].content and [m.content for m in first.messages] == [TEXTS[0]]
        second = replay(g, "t1", 0, step=1)
        assert second.system_prompt == thread[1][0].content
        # Message 1 is the agent's reply: it belongs to turn 0. Turn 1 is the user's second message.
        assert (replay(g, "t1", message_index=1).turn, replay(g, "t1", message_index=1).message_index) == (0, 0)
        turn1 = replay(g, "t1", 1)
        assert turn1.turn == 1 and turn1.message_index > 1
        assert turn1.messages[turn1.message_index - turn1.first_message_index].content == TEXTS[1]
        assert replay(g, "t1", message_index=turn1.message_index).checkpoint_id == turn1.checkpoint_id
        late = replay(g, "t1", len(TEXTS) - 1)  # after compaction: numbered on past the evicted messages
        assert late.first_message_index > 0 and late.messages[late.message_index - late.first_message_index].content == (
            TEXTS[-1])
        with pytest.raises(ReplayError, match="no model call in turn 99"):
            replay(g, "t1", 99)
        with pytest.raises(ReplayError, match="step must be 0 to 1"):
            replay(g, "t1", 0, step=2)
        with pytest.raises(ReplayError, match="no recorded model calls"):
            replay(g, "nope", 0)


def test_cli_replay(data_dir, thread, capsys):
    assert main(["replay", "--thread", "t1", "--turn", "0", "--data-dir", data_dir]) == 0
    out = capsys.readouterr().out
    assert out.startswith("thread t1, turn 0, message 0, model call 1 of 2 (checkpoint ")
    assert thread[0][0].content in out
    assert f"=== human (turn 0, message 0) ===\n{TEXTS[0]}" in out
    assert main(["replay", "--thread", "t1", "--turn", "1", "--data-dir", data_dir]) == 0
    out = capsys.readouterr().out
    head = re.match(r"thread t1, turn 1, message (\d+), model call 1 of \d+ ", out)
    assert head and int(head.group(1)) > 1, out[:200]
    assert f"=== human (turn 1, message {head.group(1)}) ===\n{TEXTS[1]}" in out
    assert main(["replay", "--thread", "t1", "--message", head.group(1), "--data-dir", data_dir]) == 0
    assert capsys.readouterr().out == out, "--message addresses the same call by its message index"
    assert main(["replay", "--thread", "t1", "--turn", "0", "--json", "--user", "ana", "--data-dir", data_dir]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["system_prompt"] == thread[0][0].content and doc["messages"][0]["content"] == TEXTS[0]
    assert main(["replay", "--thread", "t1", "--turn", "0", "--user", "eve", "--data-dir", data_dir]) == 1
    assert "has no turns of user 'eve'" in capsys.readouterr().err
