"""What one compaction plans and writes (``pagefault.window.compaction``): which messages are cut down and
to how many tokens (``plan_compaction``), how far the plan reaches into the window, and the state update
it makes, on exact windows and token costs. Then one real compaction: a message cut down in the window
has its full text in recall before the compaction returns, not only once the background writer gets
to it (the checkpoint holds only the cut copy from then on)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage

from pagefault import Context, MemoryServices, PagefaultState
from pagefault.models.offline import OfflineChatModel
from pagefault.models.tokens import TokenCounter
from pagefault.stores.recall import recall_id
from pagefault.window.compaction import (
    MESSAGE_SHARE,
    MIN_TRUNCATE_TOKENS,
    Compaction,
    CompactionPlan,
    compact_window,
    plan_compaction,
)
from pagefault.window.run import MemoryRun

COUNTER = TokenCounter()
WINDOW = 10_000
CTX = Context(user_id="ana", context_window=WINDOW, compaction_trigger=0.9, compaction_target=0.5)
MAX_MSG = int(MESSAGE_SHARE * WINDOW)  # 3500
TRIGGER = int(0.9 * WINDOW)  # 9000


def long_text(tokens: int) -> str:
    return " the" * tokens  # one token per word


def plan(messages, costs, total):
    return plan_compaction(messages, costs, total, CTX, COUNTER, lambda i: f"message {i}")


def current_turn(*sizes: int) -> list:
    """A window that is all the current turn (nothing evictable): a short user message, then answers."""
    return [HumanMessage("go", id="h"), *[AIMessage(long_text(n), id=f"a{k}") for k, n in enumerate(sizes)]]


def kept_tokens(message) -> int:
    head = message.content.split("\n[... truncated by pagefault")[0]
    return len(COUNTER.encoding.encode_ordinary(head))


def test_a_message_over_its_share_is_cut_to_the_share_even_under_the_trigger():
    messages = [HumanMessage(long_text(5000), id="h0")]
    got = plan(messages, [5000], 5000)
    assert got.evict == 0 and list(got.cut) == [0]
    cut = got.cut[0]
    assert cut.id == "h0" and cut.additional_kwargs["pagefault"] == {"truncated": True}
    assert kept_tokens(cut) == MAX_MSG - 64
    assert cut.content.endswith("[... truncated by pagefault: 5000 tokens in full; the full text is in recall as "
                                "message 0; use conversation_search]")
    assert got.tokens == 5000 - 5000 + COUNTER.count_message(cut)


def test_a_message_at_its_share_is_left_whole_under_the_trigger():
    got = plan(current_turn(MAX_MSG, 300), [1, MAX_MSG, 300], TRIGGER)  # exactly at the share and the trigger
    assert (got.evict, got.cut) == (0, {})


def test_over_the_trigger_the_largest_messages_are_cut_by_the_excess():
    messages = current_turn(3000, 1000)
    got = plan(messages, [1, 3000, 1000], TRIGGER + 1)  # one token over: the largest loses that token (and 64)
    assert got.evict == 0 and list(got.cut) == [1] and kept_tokens(got.cut[1]) == 3000 - 1 - 64
    got = plan(messages, [1, 3000, 1000], TRIGGER + 2000)
    assert list(got.cut) == [1] and kept_tokens(got.cut[1]) == 3000 - 2000 - 64


def test_a_cut_never_goes_below_the_floor_and_small_messages_are_never_cut():
    messages = current_turn(400, MIN_TRUNCATE_TOKENS)
    got = plan(messages, [1, 400, MIN_TRUNCATE_TOKENS], TRIGGER + 5000)
    assert list(got.cut) == [1] and kept_tokens(got.cut[1]) == MIN_TRUNCATE_TOKENS


def test_a_message_already_cut_is_not_cut_again():
    cut = HumanMessage(long_text(5000), id="h0", additional_kwargs={"pagefault": {"truncated": True}})
    assert plan([cut], [5000], TRIGGER + 100).cut == {}


def test_eviction_comes_first_and_cuts_are_indexed_after_it():
    messages = [HumanMessage(long_text(300), id="h0"), AIMessage(long_text(300), id="a0"),
                HumanMessage(long_text(5000), id="h1")]
    got = plan(messages, [300, 300, 5000], 5600)
    assert got.evict == 2 and list(got.cut) == [0] and got.cut[0].id == "h1"
    assert got.cut[0].content.endswith("in recall as message 2; use conversation_search]")


def test_the_plans_reach_is_the_last_message_it_evicts_or_cuts():
    m = HumanMessage("x")
    assert CompactionPlan(2, {}, 0).reach == 2
    assert CompactionPlan(2, {0: m, 3: m}, 0).reach == 6
    assert CompactionPlan(0, {1: m}, 0).reach == 2


def test_a_compaction_that_changed_nothing_updates_only_what_recall_indexed():
    view = PagefaultState(messages=[HumanMessage("hi", id="h0")], summary="s", evicted_count=4, recall_indexed=5,
                          pressure_warned=True, compactions=2)
    same = Compaction(view, [], [], 100, 100)
    assert not same.changed and same.update() == {"recall_indexed": 5}


def test_a_compaction_writes_its_summary_and_eviction_in_one_update():
    gone = [HumanMessage("old", id="h0"), AIMessage("older", id="a0")]
    cut = HumanMessage("cut down", id="h1")
    view = PagefaultState(messages=[cut], summary="new summary", evicted_count=6, recall_indexed=7, pressure_warned=False,
                          compactions=3, evicted_user_messages=2)
    done = Compaction(view, gone, [cut], 900, 400)
    assert done.changed and Compaction(view, [], [cut], 900, 800).changed
    update = done.update()
    assert update == {"messages": [RemoveMessage(id="h0"), RemoveMessage(id="a0"), cut], "summary": "new summary",
                      "evicted_count": 6, "evicted_user_messages": 2, "recall_indexed": 7, "pressure_warned": False,
                      "compactions": 3}


def test_a_message_cut_in_the_window_is_in_recall_before_the_compaction_returns(data_dir, embedded):
    ctx = Context(user_id="ana", data_dir=data_dir, context_window=4000)
    services = MemoryServices.open(data_dir)
    services.recall.writer.linger = 30.0  # the background writer would take its time
    config = {"configurable": {"thread_id": "t1", "checkpoint_id": "cp1"}}
    run = MemoryRun.open(ctx, embedded.store, config, TokenCounter())
    huge = long_text(2500) + " zanzibar"
    state = PagefaultState(messages=[HumanMessage("hello", id="h0"), AIMessage("hi", id="a0"), HumanMessage(huge, id="h1")])
    done = compact_window(state, run, config, OfflineChatModel(), lambda s: run.main_context(s, []))
    assert [m.id for m in done.replaced] == ["h1"] and [m.id for m in done.evicted] == ["h0", "a0"]
    assert done.view.recall_indexed == 3
    stored = services.recall.index.lexical.texts([recall_id(run.scope, "t1", 2)])
    assert list(stored.values()) and "zanzibar" in next(iter(stored.values()))
