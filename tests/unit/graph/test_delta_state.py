"""The delta channels' reducers and the compressed serializer, without a graph.

A ``DeltaChannel`` replays stored writes through its reducer, possibly batched differently from how
they were written, so each reducer must give the same value for any batching and the same ids on every
replay; the system prompt's line patches must give back the prompt exactly."""

from __future__ import annotations

import random

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from pagefault.graph.state import DELTA_CHANNELS, fold_messages, last_value, patched_prompt, prompt_patch
from pagefault.persistence.compression import MIN_BYTES, CompressedSerializer


def _view(messages):
    return [(m.id, m.type, m.content) for m in messages]


def _writes():
    """Writes as nodes and callers send them: id-less input, dicts, a tool round trip, removals."""
    return [
        [HumanMessage("My name is Ana.")],
        [AIMessage("Saved.", id="ai-1", tool_calls=[{"name": "core_memory_append", "args": {}, "id": "c1"}])],
        [ToolMessage("ok", tool_call_id="c1")],
        {"role": "user", "content": "I live in Lisbon."},
        [AIMessage("Noted.", id="ai-2")],
        [RemoveMessage(id="ai-1")],
        [HumanMessage("And again.")],
        [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("A fresh window."), AIMessage("Yes.", id="ai-3")],
        [HumanMessage("And again.")],
    ]


def test_message_reducer_gives_the_same_window_however_the_writes_are_batched():
    writes = _writes()
    one_by_one = []
    for w in writes:
        one_by_one = fold_messages(one_by_one, [w])
    assert _view(fold_messages([], writes)) == _view(one_by_one)
    for cut in range(1, len(writes)):
        assert _view(fold_messages(fold_messages([], writes[:cut]), writes[cut:])) == _view(one_by_one), cut
    assert [m.content for m in one_by_one] == ["A fresh window.", "Yes.", "And again."]


def test_a_message_without_an_id_gets_the_same_id_on_every_replay_and_no_two_share_one():
    first, again = fold_messages([], _writes()[:7]), fold_messages([], _writes()[:7])
    assert _view(first) == _view(again)
    assert all(m.id for m in first)
    assert len({m.id for m in first}) == len(first)
    # The same text said twice, at different places, is two messages.
    twice = fold_messages([], [[HumanMessage("ok")], [AIMessage("fine", id="a")], [HumanMessage("ok")]])
    assert len(twice) == 3 and twice[0].id != twice[2].id
    # The caller's message is not changed in place.
    mine = HumanMessage("hello")
    fold_messages([], [[mine]])
    assert mine.id is None


def test_last_value_channels_hold_the_last_write():
    assert last_value("", ["a", "b", "c"]) == "c"
    assert last_value({"x": 1}, []) == {"x": 1}
    assert set(DELTA_CHANNELS) == {"messages", "summary", "tokens", "system_prompt"}


def _prompt(rng: random.Random, lines: int) -> str:
    return "".join(f"line {i}: {rng.choice(['core', 'memory', 'tools', 'summary'])} {rng.random():.6f}\n" for i in range(lines))


def test_prompt_patches_give_back_every_prompt_exactly_and_are_small():
    rng = random.Random(7)
    value, prompts = "", []
    text = _prompt(rng, 60)
    for step in range(40):
        lines = text.splitlines(keepends=True)
        k = rng.randrange(len(lines))
        op = rng.choice(["edit", "insert", "delete", "tail"])
        if op == "edit":
            lines[k] = f"changed {step}\n"
        elif op == "insert":
            lines.insert(k, f"inserted {step}\n")
        elif op == "delete" and len(lines) > 5:
            del lines[k]
        else:
            lines[-1] = lines[-1].rstrip("\n")  # a prompt that does not end in a newline
        text = "".join(lines)
        write = prompt_patch(value, text)
        if step:
            assert isinstance(write, dict), "a one-line change is written as a patch"
            assert sum(len(o) if isinstance(o, str) else 4 for o in write["patch"]) < len(text) / 4
        value = patched_prompt(value, [write])
        assert value == text
        prompts.append(write)
    # Replayed in one batch, the patches give the last prompt.
    assert patched_prompt("", prompts) == text


def test_a_prompt_is_written_whole_when_a_patch_would_not_be_smaller():
    assert prompt_patch("", "a whole new prompt\n") == "a whole new prompt\n"
    old, new = "a\nb\nc\n", "x\ny\nz\n"
    assert prompt_patch(old, new) == new


def test_a_patch_against_another_prompt_says_so_instead_of_guessing():
    rng = random.Random(3)
    old = _prompt(rng, 30)
    patch = prompt_patch(old, old.replace("line 3:", "LINE 3:"))
    assert isinstance(patch, dict)
    out = patched_prompt("some other prompt\n", [patch])
    assert out.startswith("[system prompt unknown")


def test_compressed_serializer_round_trips_and_reads_what_was_written_before():
    serde, plain = CompressedSerializer(), JsonPlusSerializer()
    window = [HumanMessage(f"message {i}: the quiet harbour had boats painted blue", id=f"h{i}") for i in range(40)]
    typ, data = serde.dumps_typed(window)
    assert typ.endswith("+zlib")
    assert len(data) * 3 < len(plain.dumps_typed(window)[1])
    assert _view(serde.loads_typed((typ, data))) == _view(window)
    small = serde.dumps_typed("short")
    assert small[0].endswith("+raw") and len(small[1]) < MIN_BYTES
    assert serde.loads_typed(small) == "short"
    # A checkpoint written before (an unmarked type) reads as it was.
    assert _view(serde.loads_typed(plain.dumps_typed(window))) == _view(window)
    with pytest.raises(ValueError, match="neither zlib nor raw"):
        serde.loads_typed(("msgpack+aes", b"\x00"))


def test_the_batched_fold_is_the_same_as_merging_one_write_at_a_time():
    from pagefault.graph.state import add_storable_messages

    rng = random.Random(11)
    for trial in range(30):
        writes, ids = [], []
        for step in range(rng.randrange(5, 40)):
            roll = rng.random()
            if roll < 0.1 and ids:
                gone = rng.choice(ids)
                ids.remove(gone)
                writes.append([RemoveMessage(id=gone)])
            elif roll < 0.13:
                writes.append([RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage(f"fresh {step}")])
                ids = []
            elif roll < 0.25 and ids:  # a new version of a message already there
                writes.append([AIMessage(f"edited {step}", id=rng.choice(ids))])
            elif roll < 0.6:
                writes.append([HumanMessage(rng.choice(["ok", "yes", f"say {step}"]))])  # id-less, repeats
            else:
                writes.append([AIMessage(f"answer {step}", id=f"ai-{trial}-{step}")])
                ids.append(f"ai-{trial}-{step}")
        one_by_one: list = []
        for w in writes:
            one_by_one = add_storable_messages(one_by_one, w)
        assert _view(fold_messages([], writes)) == _view(one_by_one), trial
