"""The context window drawn as SVG on the server: no script and no download, so it works offline.

- ``budget_bar``: one request's tokens by segment, stacked against the budget, with the warning and
  compaction-trigger lines;
- ``history_plot``: a thread's model calls, one stacked column each (tokens by segment), so the window
  filling up and each compaction's drop show as a sawtooth, under the same two lines. Each column
  links to that call's replay and says its numbers in a tooltip (SVG ``<title>``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from pagefault.inspector.markup import Markup, el
from pagefault.window.main_context import SEGMENTS

#: One colour per segment of the main context (stack order is ``SEGMENTS``'s, the prompt's order).
SEGMENT_COLOURS: dict[str, str] = {
    "system": "#64748b", "core": "#10b981", "procedures": "#f59e0b",
    "summary": "#e11d74", "messages": "#3b82f6", "tools": "#a78bfa",
}
WARNING_COLOUR = "#d97706"
TRIGGER_COLOUR = "#dc2626"
BUDGET_COLOUR = "#111827"
COMPACTION_COLOUR = "#e11d74"


@dataclass(frozen=True)
class Column:
    """One model call in the plot: its ``tokens`` by segment, a short ``label`` under the axis (its
    turn), the ``title`` its tooltip starts with, the ``link`` to its replay, and whether a compaction
    came just before it (``after_compaction``)."""

    tokens: Mapping[str, int]
    label: str
    title: str
    link: str
    after_compaction: bool = False

    @property
    def total(self) -> int:
        """The call's tokens, all segments."""
        return sum(int(self.tokens.get(s, 0) or 0) for s in SEGMENTS)


def _n(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _thousands(n: int) -> str:
    return f"{n:,}"


def _nice_top(value: float) -> int:
    """A round axis maximum at or above ``value``."""
    if value <= 0:
        return 1
    step = 10 ** max(0, int(math.log10(value)) - 1)
    return int(math.ceil(value / step) * step)


def _line(x1: float, y1: float, x2: float, y2: float, colour: str, dash: str = "", width: float = 1.5) -> Markup:
    return el("line", {"x1": _n(x1), "y1": _n(y1), "x2": _n(x2), "y2": _n(y2), "stroke": colour,
                       "stroke-width": _n(width), "stroke-dasharray": dash or None})


def _text(x: float, y: float, text: str, *, anchor: str = "start", colour: str = "#374151", size: int = 12,
          weight: str = "normal") -> Markup:
    return el("text", {"x": _n(x), "y": _n(y), "text-anchor": anchor, "fill": colour, "font-size": size,
                       "font-weight": weight if weight != "normal" else None}, text)


def budget_bar(tokens: Mapping[str, int], window: int, warning_at: int, trigger_at: int) -> Markup:
    """One request's segments stacked against the ``window`` budget, with the ``warning_at`` and
    ``trigger_at`` lines (all in tokens)."""
    width, height, left, right, top, bar = 1000.0, 74.0, 4.0, 4.0, 22.0, 26.0
    total = sum(int(tokens.get(s, 0) or 0) for s in SEGMENTS)
    scale = max(window, total, 1)
    span = width - left - right
    x = left
    parts: list[Markup] = [el("rect", {"x": _n(left), "y": _n(top), "width": _n(span * window / scale),
                                       "height": _n(bar), "fill": "#f3f4f6", "rx": 4})]
    for seg in SEGMENTS:
        n = int(tokens.get(seg, 0) or 0)
        if n <= 0:
            continue
        w = span * n / scale
        parts.append(el("rect", {"x": _n(x), "y": _n(top), "width": _n(w), "height": _n(bar),
                                 "fill": SEGMENT_COLOURS[seg], "class": f"seg seg-{seg}", "data-segment": seg,
                                 "data-tokens": n}, el("title", None, f"{seg}: {_thousands(n)} tokens")))
        x += w
    for at, colour, label, anchor in ((warning_at, WARNING_COLOUR, f"warning {_thousands(warning_at)}", "end"),
                                      (trigger_at, TRIGGER_COLOUR, f"compaction {_thousands(trigger_at)}", "start")):
        lx = left + span * at / scale
        if anchor == "start" and lx + 8 * len(label) > width:  # no room on the right: the label goes left of a line
            anchor = "end"
            label = label.replace("compaction", "compaction at")
            lx_text = lx - 4
            parts.append(_text(lx_text, top + bar + 17, label, anchor=anchor, colour=colour, size=12))
        else:
            parts.append(_text(lx + (4 if anchor == "start" else -4), top - 9, label, anchor=anchor, colour=colour,
                               size=12))
        parts.append(_line(lx, top - 6, lx, top + bar + 4, colour, "4 3", 2))
    bx = left + span * window / scale
    parts.append(_line(bx, top - 4, bx, top + bar + 4, BUDGET_COLOUR, "", 2))
    return el("svg", {"class": "budget-bar", "id": "budget-bar", "viewBox": f"0 0 {_n(width)} {_n(height)}",
                      "role": "img", "aria-label": f"{_thousands(total)} of {_thousands(window)} tokens",
                      "xmlns": "http://www.w3.org/2000/svg"}, parts)


def history_plot(columns: Sequence[Column], window: int, warning_at: int, trigger_at: int) -> Markup:
    """A thread's model calls as stacked ``columns``, with the ``window`` budget and the
    ``warning_at`` and ``trigger_at`` lines; a compaction shows as a dotted line before the call it
    preceded."""
    width, height = 1000.0, 320.0
    left, right, top, bottom = 64.0, 150.0, 16.0, 40.0
    pw, ph = width - left - right, height - top - bottom
    top_value = _nice_top(max([window, *(c.total for c in columns)]) * 1.04)

    def y(v: float) -> float:
        return top + ph - ph * v / top_value

    parts: list[Markup] = []
    for f in (0.0, 0.25, 0.5, 0.75, 1.0):
        v = window * f
        parts.append(_line(left, y(v), left + pw, y(v), "#e5e7eb", "", 1))
        parts.append(_text(left - 8, y(v) + 4, _thousands(int(v)), anchor="end", colour="#6b7280", size=11))
    n = max(len(columns), 1)
    slot = pw / n
    bar_w = max(1.0, min(slot * 0.72, 38.0))
    labelled_at = -1e9  # x of the last axis label: a label for each new turn, where there is room
    for i, c in enumerate(columns):
        cx = left + slot * i + (slot - bar_w) / 2
        stack: list[Markup] = [el("title", None, f"{c.title}: {_thousands(c.total)} tokens ("
                                  + ", ".join(f"{s} {_thousands(int(c.tokens.get(s, 0) or 0))}" for s in SEGMENTS) + ")")]
        base = 0
        for seg in SEGMENTS:
            v = int(c.tokens.get(seg, 0) or 0)
            if v <= 0:
                continue
            stack.append(el("rect", {"x": _n(cx), "y": _n(y(base + v)), "width": _n(bar_w),
                                     "height": _n(max(y(base) - y(base + v), 0.5)), "fill": SEGMENT_COLOURS[seg]}))
            base += v
        parts.append(el("a", {"href": c.link, "class": "step", "data-total": c.total}, el("g", None, stack)))
        if c.after_compaction:
            mx = left + slot * i
            parts.append(_line(mx, top, mx, top + ph, COMPACTION_COLOUR, "2 3", 1.5))
            parts.append(el("path", {"d": f"M{_n(mx - 5)},{_n(top)} L{_n(mx + 5)},{_n(top)} L{_n(mx)},{_n(top + 7)} Z",
                                     "fill": COMPACTION_COLOUR, "class": "compaction-mark"},
                            el("title", None, f"compaction before {c.title}")))
        lx = left + slot * i + slot / 2
        if (i == 0 or c.label != columns[i - 1].label) and lx - labelled_at >= 26:
            parts.append(_text(lx, top + ph + 16, c.label, anchor="middle", colour="#6b7280", size=11))
            labelled_at = lx
    for at, colour, label, dash in ((window, BUDGET_COLOUR, "budget", ""),
                                    (trigger_at, TRIGGER_COLOUR, "compaction trigger", "6 4"),
                                    (warning_at, WARNING_COLOUR, "pressure warning", "6 4")):
        parts.append(_line(left, y(at), left + pw, y(at), colour, dash, 1.8))
        parts.append(_text(left + pw + 8, y(at) + 4, label, colour=colour, size=11, weight="600"))
        parts.append(_text(left + pw + 8, y(at) + 17, f"{_thousands(at)} tokens", colour=colour, size=10))
    parts.append(_line(left, top + ph, left + pw, top + ph, "#9ca3af", "", 1))
    parts.append(_text(left + pw / 2, height - 4, "model calls, labelled by turn", anchor="middle", colour="#6b7280", size=11))
    return el("svg", {"class": "history-plot", "id": "context-plot", "viewBox": f"0 0 {_n(width)} {_n(height)}",
                      "role": "img", "aria-label": f"tokens of {len(columns)} model calls by segment",
                      "xmlns": "http://www.w3.org/2000/svg", "data-steps": len(columns)}, parts)


def legend() -> Markup:
    """The segment colours, as HTML beside the plots."""
    return el("ul", {"class": "legend"}, [el("li", None, el("span", {"class": "swatch", "style": f"background:{c}"}),
                                             seg) for seg, c in SEGMENT_COLOURS.items()])
