"""The inspector's pages, as HTML: what each section shows, from data the routes read.

Every page works without JavaScript: filters and thread pickers are plain ``GET`` forms, edits and
deletes plain ``POST`` forms (a delete asks first, on a page of its own), the plots are SVG drawn
on the server and their tooltips SVG titles.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from langchain_core.messages import AIMessage, BaseMessage

from pagefault.inspector.archival_view import TRUST_CHOICES, ArchivalFilters, ArchivalPage, ArchivalRow, RecordDetail
from pagefault.inspector.history import CompactionRecord, ThreadInfo, shown_time
from pagefault.inspector.layout import (
    ROOT,
    Frame,
    card,
    csrf_field,
    day,
    meter,
    page,
    place,
    stat,
    trust_badge,
    user_path,
    when,
    where,
)
from pagefault.inspector.markup import Child, Markup, el
from pagefault.inspector.plot import SEGMENT_COLOURS, Column, budget_bar, history_plot, legend
from pagefault.inspector.recall_view import RecallRow
from pagefault.maintenance.inspect import Overview
from pagefault.maintenance.replay import ModelCall
from pagefault.stores.archival import ArchivalRecord
from pagefault.stores.core import CoreBlock
from pagefault.stores.procedures import Procedure
from pagefault.stores.scope import Scope
from pagefault.text.messages import message_text
from pagefault.window.main_context import SEGMENTS

#: Characters of a record or message shown in a list (the record's own page shows all of it).
SNIPPET = 240
#: Marks an edit made on the inspector's core-memory page, in the edit log's ``message_id``.
INSPECTOR_EDIT = "inspector:"


def _snippet(text: str, n: int = SNIPPET) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def replay_path(scope: Scope, thread_id: str, turn: int, step: int = 0) -> str:
    """The replay page of one model call of a thread."""
    return user_path(scope, "replay", thread=thread_id, turn=turn, step=step or None)


def _thread_picker(frame: Frame, section: str, threads: list[ThreadInfo], current: str | None) -> Markup:
    assert frame.scope is not None
    options = [el("option", {"value": t.thread_id, "selected": t.thread_id == current},
                  f"{t.thread_id}  ({t.messages} messages, {shown_time(t.updated_at) or 'no time'})") for t in threads]
    agent = frame.scope.agent_id
    return el("form", {"method": "get", "action": user_path(frame.scope, section), "class": "filters", "id": "thread-picker"},
              el("input", {"type": "hidden", "name": "agent", "value": agent}) if agent != "default" else None,
              el("label", None, "Thread", el("select", {"name": "thread"}, options)),
              el("button", {"type": "submit", "class": "plain"}, "Show"))


def _no_threads() -> Markup:
    return card(el("h2", None, "No conversation yet"),
                el("p", {"class": "muted"}, "This user has no thread here. Once they talk to the agent, each thread's "
                                            "context window and compactions show up on these pages."), id_="no-threads")


# -- context window ------------------------------------------------------------------------------------


def context_page(frame: Frame, threads: list[ThreadInfo], thread: ThreadInfo | None, overview: Overview | None,
                 columns: Sequence[Column]) -> str:
    """The context window of ``thread`` (one of the user's ``threads``): the last request by segment
    against the budget (``overview``) and the thread's model calls as a plot (``columns``)."""
    title = "Context window"
    if thread is None or overview is None:
        return page(frame, title, el("h1", None, title), _no_threads())
    tokens, window = overview.tokens, overview.window
    total = int(tokens.get("total", 0))
    rows = [el("tr", {"data-segment": seg},
               el("td", None, el("span", {"class": "swatch", "style": f"background:{_colour(seg)}"}), seg),
               el("td", {"class": "num"}, f"{int(tokens.get(seg, 0)):,}"),
               el("td", {"class": "num"}, f"{100 * int(tokens.get(seg, 0)) / max(window, 1):.1f}%"))
            for seg in SEGMENTS]
    rows.append(el("tr", {"class": "total"}, el("td", None, el("b", None, "total")),
                   el("td", {"class": "num"}, el("b", None, f"{total:,}")),
                   el("td", {"class": "num"}, el("b", None, f"{100 * total / max(window, 1):.1f}%"))))
    measured = ("as the last model call was sent" if overview.measured == "last model call"
                else "as it stands now (the thread has not reached the model yet)")
    return page(
        frame, title,
        el("h1", None, title),
        el("p", {"class": "sub"}, f"What the model is sent on thread {thread.thread_id}: the main context by segment, "
                                  f"against a budget of {window:,} tokens."),
        _thread_picker(frame, "context", threads, thread.thread_id),
        el("div", {"class": "grid", "style": "margin-top:18px"},
           stat(f"{total:,} / {window:,}", f"tokens in the last request ({100 * total // max(window, 1)}%)", "stat-total"),
           stat(overview.in_window, "messages in the window"),
           stat(overview.messages - overview.in_window, "messages evicted"),
           stat(overview.compactions, "compactions"),
           stat(overview.turns, "turns"),
           stat(overview.archival_records, "archival records")),
        card(el("h2", None, "Last request"),
             el("p", {"class": "muted small"}, f"Measured {measured}. The memory-pressure warning fires at "
                                               f"{overview.warning_at:,} tokens ({overview.ctx.warning_fraction:.0%}); "
                                               f"compaction at {overview.compaction_at:,} "
                                               f"({overview.ctx.compaction_trigger:.0%})."),
             budget_bar(tokens, window, overview.warning_at, overview.compaction_at), legend(),
             el("div", {"class": "split"},
                el("table", {"id": "segments"},
                   el("thead", None, el("tr", None, el("th", None, "segment"), el("th", {"class": "num"}, "tokens"),
                                        el("th", {"class": "num"}, "of the budget"))),
                   el("tbody", None, rows)),
                _budget_table(overview)), id_="last-request"),
        card(el("h2", None, "History"),
             el("p", {"class": "muted small"}, "Tokens of every model call of the thread, by segment. The window fills "
                                               "up turn by turn; each compaction (dotted line) summarizes and evicts the "
                                               "oldest messages, so the total drops. Click a column for that call's replay."),
             history_plot(columns, window, overview.warning_at, overview.compaction_at) if columns
             else el("p", {"class": "muted"}, "No model call recorded on this thread yet."),
             legend(), id_="history"),
    )


def _colour(seg: str) -> str:
    return SEGMENT_COLOURS.get(seg, "#999")


def _budget_table(ov: Overview) -> Markup:
    """The budget's lines in numbers, beside the segments."""
    total, window = int(ov.tokens.get("total", 0)), ov.window
    target = int(ov.ctx.compaction_target * window)
    rows = [("budget", f"{window:,}"), ("free", f"{max(window - total, 0):,}"),
            ("memory-pressure warning", f"{ov.warning_at:,}"), ("compaction trigger", f"{ov.compaction_at:,}"),
            ("a compaction evicts down to", f"{target:,}"), ("summary so far", f"{ov.summary_chars:,} chars"),
            ("recall entries (every thread)", f"{ov.recall_entries:,}")]
    return el("table", {"class": "budget", "id": "budget"},
              el("thead", None, el("tr", None, el("th", None, "the budget"), el("th", {"class": "num"}, "tokens"))),
              el("tbody", None, [el("tr", None, el("td", None, k), el("td", {"class": "num"}, v)) for k, v in rows]))


# -- core memory -----------------------------------------------------------------------------------------


def _log_by(entry: dict[str, Any]) -> str:
    source = str(entry.get("source", "?"))
    mid = str(entry.get("message_id") or "")
    if mid.startswith(INSPECTOR_EDIT):
        return f"{source}, on the inspector ({mid[len(INSPECTOR_EDIT):]})"
    return source


def _log_where(scope: Scope, entry: dict[str, Any]) -> Child:
    thread, turn, index = str(entry.get("thread_id") or ""), int(entry.get("turn", -1)), int(entry.get("message_index", -1))
    return where(thread, turn, index, replay_path(scope, thread, turn) if thread and turn >= 0 else None)


def _block_card(frame: Frame, b: CoreBlock, error: str) -> Markup:
    assert frame.scope is not None
    used = len(b.value)
    log_rows = [el("tr", None, el("td", {"class": "nowrap small"}, when(float(e.get("at", 0) or 0))),
                   el("td", None, str(e.get("op", ""))), el("td", None, _log_by(e)),
                   el("td", None, _log_where(frame.scope, e)), el("td", None, trust_badge(list(e.get("flags") or []))))
                for e in reversed(b.log)]
    action = user_path(frame.scope, f"core/{b.label}")
    append_action = user_path(frame.scope, f"core/{b.label}/append")
    return card(
        el("div", {"class": "block-head"}, el("h2", None, b.label, " ",
                                              el("span", {"class": "badge info"}, "typed") if b.schema else None),
           el("span", {"class": "muted small usage"}, f"{used:,} / {b.limit:,} chars")),
        meter(used, b.limit),
        el("p", {"class": "muted small"}, b.description) if b.description else None,
        el("div", {"class": "notice error", "style": "border-radius:8px;padding:8px 12px;margin:8px 0"}, error)
        if error else None,
        el("pre", {"class": "value", "style": "margin-top:10px"}, b.value) if b.value
        else el("p", {"class": "muted value"}, "(empty)"),
        el("details", None, el("summary", None, "Schema (typed block)"),
           el("pre", {"class": "schema"}, json.dumps(b.schema, indent=2, ensure_ascii=False))) if b.schema else None,
        el("details", {"open": bool(error)}, el("summary", None, "Edit this block"),
           el("form", {"method": "post", "action": action, "class": "edit"}, csrf_field(frame.viewer),
              el("label", None, "The whole text (the same checks as the agent's edits: the limit, the schema, "
                                "secrets redacted, the guard's flags logged)",
                 el("textarea", {"name": "value"}, b.value)),
              el("p", None, el("button", {"type": "submit"}, "Save"))),
           el("form", {"method": "post", "action": append_action, "class": "filters"}, csrf_field(frame.viewer),
              el("label", {"style": "flex:1"}, "Or append a line (as core_memory_append does)",
                 el("input", {"type": "text", "name": "text", "style": "width:100%"})),
              el("button", {"type": "submit", "class": "plain"}, "Append"))),
        el("h3", {"style": "margin-top:16px"}, "Edit log"),
        el("table", {"class": "log"},
           el("thead", None, el("tr", None, el("th", None, "when"), el("th", None, "change"),
                                el("th", None, "by"), el("th", None, "from"), el("th", None, "trust"))),
           el("tbody", None, log_rows)) if log_rows else el("p", {"class": "muted small"}, "Never edited."),
        id_=f"block-{b.label}", class_="block")


def core_page(frame: Frame, blocks: list[CoreBlock], procedures: list[Procedure], errors: dict[str, str]) -> str:
    """Every core block of the user (``blocks``) with its fill, schema, edit log and edit forms
    (``errors``: a refused edit's message, by block label), and the learned rules (``procedures``)."""
    rules = [el("li", None, el("span", {"class": "badge muted"}, p.kind), " ", p.text) for p in procedures]
    return page(frame, "Core memory",
                el("h1", None, "Core memory"),
                el("p", {"class": "sub"}, "The blocks pinned in every prompt, each with its character limit. An edit here "
                                          "goes through the same rules as the agent's tools and is logged with who made it."),
                [_block_card(frame, b, errors.get(b.label, "")) for b in blocks],
                card(el("h2", None, "Learned rules"), el("ul", None, rules), id_="procedures") if rules else None)


# -- archival ------------------------------------------------------------------------------------------


def _validity(r: ArchivalRecord, scope: Scope) -> Child:
    v = r.validity
    if v is None or not r.fact_key:
        return el("span", {"class": "muted"}, "-")
    if v.current:
        return el("span", None, f"{day(v.valid_from)} → {day(v.valid_to)}")
    return el("span", None, f"{day(v.valid_from)} → {day(v.valid_to)} ", el("span", {"class": "badge warn"}, "superseded"),
              el("br"), el("span", {"class": "small"}, "by ",
                             el("a", {"href": user_path(scope, f"archival/{v.superseded_by}")}, v.superseded_by))
              if v.superseded_by else None)


def _source(r: ArchivalRecord, scope: Scope) -> Child:
    p = r.provenance
    if p.thread_id:
        link = replay_path(scope, p.thread_id, p.turn) if p.turn >= 0 else None
        at: Child = where(p.thread_id, p.turn, p.message_index, link)
    elif p.message_id:  # a document's passage: its file and place there
        at = el("span", None, el("span", {"class": "nowrap"}, p.message_id), el("br"),
                el("span", {"class": "nowrap small"}, f"character {p.offset:,}") if p.offset >= 0 else None)
    else:
        at = el("span", {"class": "muted"}, "-")
    return el("div", None, el("span", {"class": "badge muted"}, p.source), el("div", {"class": "small"}, at))


def _score(row: ArchivalRow) -> Markup:
    hit = row.hit
    if hit is None:
        return el("td", {"class": "num"})
    parts = hit.parts
    detail: list[Child] = []
    if parts is not None:
        bm25 = f"BM25 {parts.bm25:.2f} → {parts.bm25_share:.2f}" if parts.bm25 is not None else "BM25 -"
        dense = f"cosine {parts.dense:.3f} → {parts.dense_share:.2f}" if parts.dense is not None else "cosine -"
        detail = [el("div", {"class": "parts part-bm25"}, bm25), el("div", {"class": "parts part-dense"}, dense)]
    return el("td", {"class": "num"}, el("div", {"class": "score"}, f"{hit.score:.3f}"), detail)


def archival_page(frame: Frame, f: ArchivalFilters, listing: ArchivalPage, count: int) -> str:
    """The archival listing ``listing`` under the filters ``f`` (``count``: the user's records, all of them)."""
    assert frame.scope is not None
    scope = frame.scope
    searching = bool(f.query)
    trust = el("select", {"name": "trust"}, [el("option", {"value": t, "selected": t == f.trust}, t) for t in TRUST_CHOICES])
    agent = scope.agent_id
    form = el("form", {"method": "get", "action": user_path(scope, "archival"), "class": "filters", "id": "archival-filters"},
              el("input", {"type": "hidden", "name": "agent", "value": agent}) if agent != "default" else None,
              el("label", None, "Search (the agent's hybrid search)",
                 el("input", {"type": "search", "name": "q", "value": f.query, "placeholder": "e.g. where does she work"})),
              el("label", None, "Tag", el("input", {"type": "text", "name": "tag", "value": ",".join(f.tags), "size": 12})),
              el("label", None, "Trust", trust),
              el("label", None, "From", el("input", {"type": "date", "name": "from", "value": _date_value(f.start)})),
              el("label", None, "To", el("input", {"type": "date", "name": "to", "value": _date_value(f.end, end=True)})),
              el("label", {"class": "check"}, el("input", {"type": "checkbox", "name": "superseded", "value": "1",
                                                            "checked": f.superseded}), "superseded too"),
              el("button", {"type": "submit"}, "Search" if searching else "Filter"),
              el("a", {"href": user_path(scope, "archival"), "style": "padding-bottom:8px"}, "clear"))
    head = [el("th", None, "record"), el("th", None, "source"), el("th", {"class": "num"}, "saved"),
            el("th", None, "valid"), el("th", None, "trust")]
    if searching:
        head.insert(0, el("th", {"class": "num"}, "score"))
    body = []
    for row in listing.rows:
        r = row.record
        cells = [el("td", None, el("a", {"href": user_path(scope, f"archival/{r.id}"), "class": "text"}, _snippet(r.text)),
                    el("div", None, [el("span", {"class": "tag"}, t) for t in r.tags])),
                 el("td", None, _source(r, scope)), el("td", {"class": "num small"}, when(r.provenance.created_at)),
                 el("td", {"class": "small nowrap"}, _validity(r, scope)), el("td", None, trust_badge(row.flags))]
        if searching:
            cells.insert(0, _score(row))
        body.append(el("tr", {"class": "record", "data-id": r.id}, cells))
    if searching:
        summary = el("p", {"class": "muted small"}, "Ranked as archival_memory_search ranks them: BM25 and cosine "
                                                    "similarity, each min-max normalized over its candidates (the number "
                                                    "after the arrow), summed into the score. Filters apply before the limit.")
        heading = f"Results for “{f.query}”"
    else:
        summary = el("p", {"class": "muted small"}, f"{listing.total} of {count} record(s) match, newest first.")
        heading = "Records"
    pager = _pager(scope, f, listing)
    return page(frame, "Archival memory",
                el("h1", None, "Archival memory"),
                el("p", {"class": "sub"}, "Facts and documents outside the window, each with where it came from, "
                                          "what the guard flagged and when it was true."),
                card(form),
                card(el("h2", None, heading), summary,
                     el("table", {"id": "records"}, el("thead", None, el("tr", None, head)), el("tbody", None, body))
                     if body else el("p", {"class": "muted", "id": "no-records"}, "Nothing matches."),
                     pager, id_="archival-results"))


def _date_value(ts: float | None, end: bool = False) -> str:
    if ts is None:
        return ""
    return day(ts - 86399 if end else ts)


def _pager(scope: Scope, f: ArchivalFilters, listing: ArchivalPage) -> Markup:
    query = {"q": f.query, "tag": ",".join(f.tags), "trust": None if f.trust == "any" else f.trust,
             "from": _date_value(f.start), "to": _date_value(f.end, end=True), "superseded": "1" if f.superseded else None}
    prev = el("a", {"href": user_path(scope, "archival", **query, page=listing.page - 1)}, "← previous") \
        if listing.page > 1 else None
    nxt = el("a", {"href": user_path(scope, "archival", **query, page=listing.page + 1)}, "next →") if listing.more else None
    where = f"page {listing.page}" + (f" of {listing.pages}" if listing.pages else "")
    return el("div", {"class": "pager"}, prev, el("span", {"class": "muted"}, where), nxt)


def record_page(frame: Frame, detail: RecordDetail) -> str:
    """One archival record: its text, provenance, trust, validity and its fact's supersession chain."""
    assert frame.scope is not None
    scope, r, flags = frame.scope, detail.row.record, detail.row.flags
    p, v = r.provenance, r.validity
    prov_rows = [("source", _source(r, scope)), ("message id", el("span", {"class": "mono small"}, p.message_id or "-")),
                 ("saved", when(p.created_at))]
    if p.offset >= 0:
        prov_rows.append(("document offset", f"character {p.offset:,}"))
    if r.merged_from:
        prov_rows.append(("merged", f"{r.merged_from} duplicate(s) folded into it by consolidation"))
    chain = [el("li", {"class": "here" if c.id == r.id else None},
                el("a", {"href": user_path(scope, f"archival/{c.id}")}, _snippet(c.text, 120)), " ",
                el("span", {"class": "muted small"}, f"{day(c.validity.valid_from)} → {day(c.validity.valid_to)}"
                   if c.validity else ""), " ",
                el("span", {"class": "badge ok"}, "current") if c.validity is not None and c.validity.current
                else el("span", {"class": "badge warn"}, "superseded")) for c in detail.chain]
    validity_rows = [] if v is None else [
        ("valid", f"{day(v.valid_from)} → {day(v.valid_to)}"), ("recorded", when(v.recorded_at)),
        ("status", "current" if v.current else f"superseded {when(v.superseded_at)}")]
    if v is not None and v.superseded_by:
        validity_rows.append(("superseded by", el("a", {"href": user_path(scope, f"archival/{v.superseded_by}"),
                                                        "class": "mono small"}, v.superseded_by)))
    if v is not None and v.expired:
        validity_rows.append(("expired", "yes (consolidation expired its tag)"))
    return page(frame, "Archival record",
                el("h1", None, "Archival record"), el("p", {"class": "sub mono"}, r.id),
                card(el("div", {"class": "text", "id": "record-text"}, r.text),
                     el("div", {"style": "margin-top:10px"}, [el("span", {"class": "tag"}, t) for t in r.tags]), id_="record"),
                el("div", {"class": "grid", "style": "grid-template-columns:repeat(auto-fit,minmax(330px,1fr))"},
                   card(el("h2", None, "Provenance"), _kv(prov_rows), id_="provenance"),
                   card(el("h2", None, "Trust"), trust_badge(flags),
                        el("p", {"class": "muted small"}, "What the poisoning guard found in it, as a search shows it to "
                                                          "the model" + (f" (guard {r.guard_version})." if r.guard_version
                                                                         else ".")), id_="trust"),
                   card(el("h2", None, "Validity"), _kv(validity_rows) if r.fact_key and validity_rows
                        else el("p", {"class": "muted small"}, "States no fact with a subject and attribute: valid from "
                                                               "when it was saved, never superseded."), id_="validity")),
                card(el("h2", None, "Supersession chain"),
                     el("p", {"class": "muted small"}, f"Every record of the fact “{r.fact_key}”, oldest first."),
                     el("ol", {"class": "chain"}, chain), id_="chain") if detail.chain else None,
                card(el("h2", None, "Delete"),
                     el("p", {"class": "muted small"}, "Removes it from every index the agent searches."),
                     el("a", {"class": "button", "href": user_path(scope, f"archival/{r.id}/delete"), "id": "delete-link",
                              "style": "background:#dc2626;border-color:#b91c1c"}, "Delete this record…"), id_="delete"))


def _kv(rows: Sequence[tuple[str, Child]]) -> Markup:
    return el("table", {"class": "kv"}, el("tbody", None, [el("tr", None, el("th", {"style": "width:34%"}, k), el("td", None, v))
                                                           for k, v in rows]))


def delete_page(frame: Frame, r: ArchivalRecord) -> str:
    """The confirmation a delete asks for, with the form that does it."""
    assert frame.scope is not None
    return page(frame, "Delete an archival record",
                el("h1", None, "Delete this record?"),
                card(el("div", {"class": "text"}, r.text),
                     el("p", {"class": "muted small", "style": "margin-top:12px"},
                        "It is removed from archival memory everywhere the agent searches: the vector index (Chroma, and "
                        "its resident tier), the BM25 index and the postings held in memory."
                        + (" A value it superseded holds again." if r.fact_key else "")
                        + (" The conversation it came from stays in recall." if r.provenance.thread_id else "")
                        + " This cannot be undone."),
                     el("form", {"method": "post", "action": user_path(frame.scope, f"archival/{r.id}/delete"),
                                 "class": "filters", "id": "confirm-delete"}, csrf_field(frame.viewer),
                        el("button", {"type": "submit", "class": "danger"}, "Delete it"),
                        el("a", {"href": user_path(frame.scope, f"archival/{r.id}"), "style": "padding:8px"}, "Cancel")),
                     id_="delete-confirm"))


# -- recall -------------------------------------------------------------------------------------------------


def recall_page(frame: Frame, threads: list[ThreadInfo], query: str, thread_id: str | None, rows: list[RecallRow]) -> str:
    """Recall: a search across the user's ``threads`` (or ``thread_id``) for ``query`` and its ``rows``;
    with no query, the threads and where their windows stand."""
    assert frame.scope is not None
    scope = frame.scope
    options = [el("option", {"value": ""}, "every thread")] + [
        el("option", {"value": t.thread_id, "selected": t.thread_id == thread_id}, t.thread_id) for t in threads]
    form = el("form", {"method": "get", "action": user_path(scope, "recall"), "class": "filters", "id": "recall-search"},
              el("input", {"type": "hidden", "name": "agent", "value": scope.agent_id}) if scope.agent_id != "default"
              else None,
              el("label", None, "Search past messages (conversation_search)",
                 el("input", {"type": "search", "name": "q", "value": query, "placeholder": "e.g. sister aquarium"})),
              el("label", None, "Thread", el("select", {"name": "thread"}, options)),
              el("button", {"type": "submit"}, "Search"))
    if query:
        body = [el("tr", {"class": "hit", "data-window": "in" if r.in_window else "evicted"},
                   el("td", {"class": "small"}, where(r.hit.thread_id, r.hit.turn, r.hit.message_index)),
                   el("td", None, el("span", {"class": "text"}, _snippet(r.hit.text))),
                   el("td", None, el("span", {"class": "badge ok"}, "in window") if r.in_window
                      else el("span", {"class": "badge muted"}, "evicted")),
                   el("td", None, trust_badge(r.flags)),
                   el("td", {"class": "num score"}, f"{r.hit.score:.3f}"),
                   el("td", None, el("a", {"href": replay_path(scope, r.hit.thread_id, r.hit.turn)}, "replay")
                      if r.hit.turn >= 0 else None)) for r in rows]
        result = card(el("h2", None, f"Results for “{query}”"),
                      el("p", {"class": "muted small"}, "Evicted messages left the context window in a compaction: the "
                                                        "model finds them only by searching. Replay shows the turn exactly "
                                                        "as the model saw it."),
                      el("table", {"id": "recall-hits"},
                         el("thead", None, el("tr", None, el("th", None, "where"), el("th", None, "message"),
                                              el("th", None, "window"), el("th", None, "trust"),
                                              el("th", {"class": "num"}, "score"), el("th", None, ""))),
                         el("tbody", None, body)) if body
                      else el("p", {"class": "muted", "id": "no-hits"}, "No message matches."),
                      id_="recall-results")
    else:
        result = card(el("h2", None, "Threads"),
                      el("table", {"id": "threads"},
                         el("thead", None, el("tr", None, el("th", None, "thread"), el("th", None, "last change"),
                                              el("th", {"class": "num"}, "messages"), el("th", {"class": "num"}, "in window"),
                                              el("th", {"class": "num"}, "evicted"), el("th", {"class": "num"}, "compactions"))),
                         el("tbody", None, [el("tr", {"data-thread": t.thread_id},
                                               el("td", None, el("a", {"href": user_path(scope, "context", thread=t.thread_id)},
                                                                 t.thread_id)),
                                               el("td", {"class": "small"}, shown_time(t.updated_at)),
                                               el("td", {"class": "num"}, str(t.messages)),
                                               el("td", {"class": "num"}, str(t.in_window)),
                                               el("td", {"class": "num"}, str(t.evicted)),
                                               el("td", {"class": "num"}, el("a", {"href": user_path(
                                                   scope, "compactions", thread=t.thread_id)}, str(t.compactions))))
                                            for t in threads])) if threads else el("p", {"class": "muted"}, "No thread yet."),
                      id_="recall-threads")
    return page(frame, "Recall", el("h1", None, "Recall"),
                el("p", {"class": "sub"}, "Every message of every thread, evicted ones included, searchable as the agent "
                                          "searches them."), card(form), result)


# -- compactions ------------------------------------------------------------------------------------------


def _message(m: BaseMessage, label: str) -> Markup:
    body = message_text(m)
    if isinstance(m, AIMessage) and m.tool_calls:
        calls = "; ".join(f"{c['name']}({json.dumps(c['args'], ensure_ascii=False)})" for c in m.tool_calls)
        body = (body + "\n" if body else "") + f"[calls {calls}]"
    return el("div", {"class": f"msg {m.type}"}, el("span", {"class": "from"}, label), el("div", {"class": "text"}, body))


def compactions_page(frame: Frame, threads: list[ThreadInfo], thread: ThreadInfo | None,
                     records: list[CompactionRecord]) -> str:
    """Every compaction of ``thread`` (``records``): what each evicted and the summary it wrote."""
    title = "Compactions"
    if thread is None:
        return page(frame, title, el("h1", None, title), _no_threads())
    assert frame.scope is not None
    cards = []
    for c in reversed(records):
        turns = sorted({e.turn for e in c.evicted if e.turn >= 0})
        span = (f"messages {c.evicted[0].message_index}–{c.evicted[-1].message_index}" if c.evicted else "no message")
        if turns:
            span += f", turns {turns[0]}–{turns[-1]}" if len(turns) > 1 else f", turn {turns[0]}"
        tokens = " → ".join(f"{t:,}" for t in (c.tokens_before, c.tokens_after) if t is not None)
        cards.append(card(
            el("div", {"class": "block-head"}, el("h2", None, f"Compaction {c.number}"),
               el("span", {"class": "muted small"}, shown_time(c.created_at))),
            el("p", None, f"Evicted {len(c.evicted)} message(s) ({span})"
               + (f", cut {c.truncated} down in place" if c.truncated else "") + "."
               + (f" Model calls around it: {tokens} tokens." if tokens else "")),
            el("h3", None, "The summary it wrote"), el("pre", {"class": "summary"}, c.summary or "(empty)"),
            el("details", None, el("summary", None, f"What it evicted ({len(c.evicted)})"),
               [_message(e.message, place(thread.thread_id, e.turn, e.message_index) + f" · {e.message.type}")
                for e in c.evicted]),
            el("details", None, el("summary", None, "The summary before it"),
               el("pre", None, c.previous_summary or "(none: the first compaction)")),
            id_=f"compaction-{c.number}", class_="compaction"))
    return page(frame, title, el("h1", None, title),
                el("p", {"class": "sub"}, f"Each time thread {thread.thread_id} outgrew its trigger, the oldest messages "
                                          "were summarized and evicted (to recall, where search still finds them)."),
                _thread_picker(frame, "compactions", threads, thread.thread_id),
                el("div", {"style": "height:16px"}),
                cards or card(el("p", {"class": "muted", "id": "no-compactions"}, "This thread has never been compacted.")))


# -- replay ----------------------------------------------------------------------------------------------------


def replay_page(frame: Frame, call: ModelCall, calls: list[ModelCall], window: int, warning_at: int, trigger_at: int) -> str:
    """One past model call exactly as the model saw it (``call``, one of the thread's ``calls``)."""
    assert frame.scope is not None
    scope = frame.scope
    at = calls.index(call)
    prev = calls[at - 1] if at > 0 else None
    nxt = calls[at + 1] if at + 1 < len(calls) else None
    nav = el("div", {"class": "pager"},
             el("a", {"href": replay_path(scope, prev.thread_id, prev.turn, prev.step)}, "← previous call") if prev else None,
             el("span", {"class": "muted"}, f"model call {at + 1} of {len(calls)}"),
             el("a", {"href": replay_path(scope, nxt.thread_id, nxt.turn, nxt.step)}, "next call →") if nxt else None,
             el("a", {"href": user_path(scope, "context", thread=call.thread_id)}, "context window"))
    messages = [_message(m, place(call.thread_id, call.turns[i] if i < len(call.turns) else -1,
                                  call.first_message_index + i) + f" · {m.type}") for i, m in enumerate(call.messages)]
    return page(frame, "Replay",
                el("h1", None, f"Replay: thread {call.thread_id}, turn {call.turn}"),
                el("p", {"class": "sub"}, f"Call {call.step + 1} of {call.steps} of this turn, exactly as the model was sent "
                                          f"it ({shown_time(call.created_at)}; checkpoint {call.checkpoint_id})."),
                nav,
                card(el("h2", None, "Tokens"), budget_bar(call.tokens, window, warning_at, trigger_at), legend(),
                     id_="replay-tokens") if call.tokens else None,
                card(el("h2", None, "System prompt"), el("pre", {"id": "system-prompt"}, call.system_prompt)),
                card(el("h2", None, f"Messages sent ({len(call.messages)})"), messages, id_="replay-messages"),
                card(el("h2", None, "Reply"), _message(call.reply, "reply") if call.reply is not None else None))


# -- the way in --------------------------------------------------------------------------------------------------


def index_page(frame: Frame, users: list[tuple[str, str]]) -> str:
    """Without authentication: choose whose memory to look at (``users``: (user, agent) pairs with core memory)."""
    known = [el("li", None, el("a", {"href": user_path(Scope(u, a), "context")}, u), el("span", {"class": "muted"},
                                                                                   f" · agent {a}" if a != "default" else ""))
             for u, a in users]
    return page(frame, "Choose a user",
                el("h1", None, "Whose memory?"),
                el("p", {"class": "sub"}, "Memory is kept per user and agent."),
                card(el("form", {"method": "get", "action": f"{ROOT}/open", "class": "filters", "id": "choose-user"},
                        el("label", None, "User id", el("input", {"type": "text", "name": "user", "required": True})),
                        el("label", None, "Agent", el("input", {"type": "text", "name": "agent", "value": "default"})),
                        el("button", {"type": "submit"}, "Open"))),
                card(el("h2", None, "Users with core memory here"), el("ul", {"id": "users"}, known)) if known else None)


def login_page(frame: Frame) -> str:
    """With tokens on: sign in by pasting the bearer token the API takes."""
    return page(frame, "Sign in",
                el("h1", None, "Sign in"),
                el("p", {"class": "sub"}, "Paste your token: the same bearer JWT the API takes. You will see only your own "
                                          "memory. It is kept in a cookie for this site's inspector pages only."),
                card(el("form", {"method": "post", "action": f"{ROOT}/login", "id": "login"}, csrf_field(frame.viewer),
                        el("label", None, "Token", el("input", {"type": "password", "name": "token", "required": True,
                                                                "style": "width:100%", "autocomplete": "off"})),
                        el("p", None, el("button", {"type": "submit"}, "Sign in")))))


def error_page(frame: Frame, status: int, message: str) -> str:
    """A refused or failed request, in one line."""
    home = el("a", {"href": f"{ROOT}/"}, "Back to the start")
    return page(frame, f"Error {status}", el("h1", None, {400: "Bad request", 401: "Sign in needed", 403: "Not yours to see",
                                                          404: "Not found", 405: "Not allowed",
                                                          422: "Cannot apply that"}.get(status, "Error")),
                card(el("p", {"id": "error-message"}, message), el("p", {"class": "muted small"}, f"HTTP {status}. ", home)))
