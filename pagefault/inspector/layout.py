"""The frame every inspector page shares: the header with its sections, the access notice, the
style sheet (inline: no CDN, works offline) and the small pieces pages are made of (cards, badges,
meters, times).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import quote

from pagefault.inspector.access import Viewer
from pagefault.inspector.markup import Child, Markup, el, href, raw
from pagefault.stores.scope import Scope
from pagefault.stores.validity import OPEN

ROOT = "/inspector"
#: The sections of a user's pages: (path segment, title).
SECTIONS = (("context", "Context window"), ("core", "Core memory"), ("archival", "Archival"),
            ("recall", "Recall"), ("compactions", "Compactions"))

STYLE = """
:root{--bg:#f5f6f8;--card:#fff;--ink:#1f2328;--muted:#6b7280;--line:#e5e7eb;--accent:#2563eb;--ok:#047857;
--okbg:#ecfdf5;--bad:#b91c1c;--badbg:#fef2f2;--warn:#92400e;--warnbg:#fffbeb}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,
"Helvetica Neue",Arial,sans-serif}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
.wrap{max-width:1180px;margin:0 auto;padding:0 24px}
header.top{background:#111827;color:#e5e7eb}
header.top .wrap{display:flex;align-items:center;gap:28px;height:56px}
.brand{color:#fff;font-weight:700;font-size:17px;letter-spacing:.2px}.brand span{color:#93c5fd;font-weight:500}
nav.tabs{display:flex;gap:4px;flex:1}
nav.tabs a{color:#cbd5e1;padding:7px 12px;border-radius:7px;font-size:14px}
nav.tabs a:hover{background:#1f2937;text-decoration:none;color:#fff}
nav.tabs a.on{background:#374151;color:#fff}
.who{font-size:13px;color:#cbd5e1;display:flex;gap:10px;align-items:center}
.who b{color:#fff}.who form{margin:0}
.who button{background:none;border:1px solid #4b5563;color:#e5e7eb;border-radius:6px;padding:3px 9px;cursor:pointer}
.notice{font-size:14px;padding:9px 0}
.notice.local{background:var(--warnbg);color:var(--warn);border-bottom:1px solid #fde68a}
.notice.flash{background:var(--okbg);color:var(--ok);border-bottom:1px solid #a7f3d0}
.notice.error{background:var(--badbg);color:var(--bad);border-bottom:1px solid #fecaca}
main{padding:26px 24px 40px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:17px;margin:0 0 12px}h3{font-size:15px;margin:0 0 8px}
.sub{color:var(--muted);margin:0 0 20px}
.card{background:var(--card);border:1px solid var(--line);border-radius:12px;padding:18px 20px;margin-bottom:18px;
box-shadow:0 1px 2px rgba(16,24,40,.04)}
.grid{display:grid;gap:14px;grid-template-columns:repeat(auto-fit,minmax(165px,1fr));margin-bottom:18px}
.stat{background:var(--card);border:1px solid var(--line);border-radius:12px;padding:12px 16px}
.stat .n{font-size:21px;font-weight:650;white-space:nowrap}.stat .l{color:var(--muted);font-size:13px}
table{border-collapse:collapse;width:100%;font-size:14px}
th{text-align:left;color:var(--muted);font-weight:600;font-size:12.5px;text-transform:uppercase;letter-spacing:.4px;
border-bottom:1px solid var(--line);padding:7px 8px}
td{border-bottom:1px solid #f0f1f3;padding:8px;vertical-align:top}tr:last-child td{border-bottom:0}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.badge{display:inline-block;font-size:12px;font-weight:600;border-radius:999px;padding:1px 9px;white-space:nowrap}
.badge.ok{background:var(--okbg);color:var(--ok)}.badge.bad{background:var(--badbg);color:var(--bad)}
.badge.muted{background:#f3f4f6;color:#4b5563}.badge.info{background:#eff6ff;color:#1d4ed8}
.badge.warn{background:var(--warnbg);color:var(--warn)}
.tag{display:inline-block;font-size:12px;background:#f1f5f9;color:#334155;border-radius:5px;padding:0 7px;margin-right:4px}
.meter{height:8px;background:#eef0f3;border-radius:99px;overflow:hidden;min-width:120px}
.meter span{display:block;height:100%;background:#10b981}.meter.full span{background:#dc2626}
pre,.mono{font:13px/1.5 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:#f8fafc;border:1px solid var(--line);border-radius:8px;padding:10px 12px;white-space:pre-wrap;
word-break:break-word;margin:0}
pre.summary{max-height:340px;overflow:auto}.nowrap{white-space:nowrap}
.split{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:28px;margin-top:14px}
.budget td{padding:6px 8px}.budget td.num{font-weight:600}
.text{white-space:pre-wrap;word-break:break-word}
.muted{color:var(--muted)}.small{font-size:13px}
form.filters{display:flex;flex-wrap:wrap;gap:10px;align-items:end}
label{font-size:13px;color:var(--muted);display:flex;flex-direction:column;gap:3px}
label.check{flex-direction:row;align-items:center;gap:6px;padding-bottom:7px}
input[type=text],input[type=search],input[type=date],input[type=password],select,textarea{font:inherit;
font-size:14px;padding:7px 9px;border:1px solid #d1d5db;border-radius:7px;background:#fff;color:var(--ink)}
input[type=search]{min-width:220px}input[type=date]{width:140px}textarea{width:100%;min-height:110px}
button,.button{font:inherit;font-size:14px;padding:7px 14px;border-radius:7px;border:1px solid #1d4ed8;
background:var(--accent);color:#fff;cursor:pointer}
button.plain{background:#fff;color:var(--ink);border-color:#d1d5db}button.danger{background:#dc2626;border-color:#b91c1c}
details{margin-top:10px}summary{cursor:pointer;color:var(--accent);font-size:14px}
.legend{display:flex;flex-wrap:wrap;gap:14px;list-style:none;padding:0;margin:10px 0 0;font-size:13px;color:#374151}
.swatch{display:inline-block;width:11px;height:11px;border-radius:3px;margin-right:6px;vertical-align:-1px}
svg.history-plot{width:100%;height:auto;display:block}svg.budget-bar{width:100%;height:auto;display:block}
#segments{max-width:560px}
svg a.step:hover rect{opacity:.75}
.block-head{display:flex;justify-content:space-between;align-items:baseline;gap:12px;margin-bottom:8px}
.pager{display:flex;gap:12px;align-items:center;margin-top:12px;font-size:14px}
.score{font-variant-numeric:tabular-nums}.parts{color:var(--muted);font-size:12.5px}
.chain li{margin-bottom:4px}.chain .here{font-weight:600}
.msg{border-left:3px solid var(--line);padding:4px 0 4px 12px;margin:10px 0}
.msg.human{border-color:#3b82f6}.msg.ai{border-color:#10b981}.msg.tool{border-color:#a78bfa}
.msg .from{color:var(--muted);font-size:12.5px;display:block;margin-bottom:2px}
footer{color:var(--muted);font-size:12.5px;padding:0 24px 30px}
"""


@dataclass(frozen=True)
class Frame:
    """What the frame of a page needs: the ``viewer``, whose memory (``scope``; None on pages before a
    user is chosen), which ``section`` is open, ``where`` the memory lives, and one-line ``flash``
    (an action done) or ``error`` notices."""

    viewer: Viewer
    scope: Scope | None = None
    section: str = ""
    where: str = ""
    flash: str = ""
    error: str = ""


def user_path(scope: Scope, section: str = "", **query: object) -> str:
    """The URL of a user's section page, with the agent and ``query`` parameters."""
    path = f"{ROOT}/{quote(scope.user_id, safe='')}" + (f"/{section}" if section else "")
    return href(path, agent=None if scope.agent_id == "default" else scope.agent_id, **query)


def page(frame: Frame, title: str, *body: Child) -> str:
    """A whole HTML page: the frame around ``body``, titled ``title``."""
    v = frame.viewer
    tabs = None
    if frame.scope is not None:
        tabs = el("nav", {"class": "tabs"}, [el("a", {"href": user_path(frame.scope, key),
                                                       "class": "on" if key == frame.section else None}, name)
                                              for key, name in SECTIONS])
    who: list[Child] = []
    if frame.scope is not None:
        who.append(el("span", None, el("b", None, frame.scope.user_id), " · agent ", frame.scope.agent_id))
    if v.identity is not None:
        who.append(el("form", {"method": "post", "action": f"{ROOT}/logout"}, csrf_field(v),
                      el("button", {"type": "submit"}, "Sign out")))
    notices: list[Child] = []
    if v.mode == "none":
        notices.append(el("div", {"class": "notice local", "id": "access-notice"}, el("div", {"class": "wrap"},
                          el("b", None, "No authentication."),
                          " This inspector answers only on this machine (loopback): anyone here can read and change "
                          "every user's memory. Set PAGEFAULT_JWT_SECRET to require tokens.")))
    if frame.flash:
        notices.append(el("div", {"class": "notice flash", "id": "flash"}, el("div", {"class": "wrap"}, frame.flash)))
    if frame.error:
        notices.append(el("div", {"class": "notice error", "id": "error"}, el("div", {"class": "wrap"}, frame.error)))
    doc = el("html", {"lang": "en"},
             el("head", None, el("meta", {"charset": "utf-8"}),
                el("meta", {"name": "viewport", "content": "width=device-width, initial-scale=1"}),
                el("title", None, f"{title} · pagefault inspector"), el("style", None, raw(STYLE))),
             el("body", {"data-section": frame.section or None},
                el("header", {"class": "top"}, el("div", {"class": "wrap"},
                   el("a", {"class": "brand", "href": f"{ROOT}/"}, "pagefault ", el("span", None, "inspector")),
                   tabs or el("nav", {"class": "tabs"}), el("div", {"class": "who"}, who))),
                notices, el("main", {"class": "wrap"}, list(body)),
                el("footer", {"class": "wrap"}, f"Memory: {frame.where}" if frame.where else "", )))
    return "<!doctype html>\n" + doc


def csrf_field(viewer: Viewer) -> Markup:
    """The hidden field that carries the page's CSRF token in a form."""
    return el("input", {"type": "hidden", "name": "csrf", "value": viewer.csrf})


def card(*children: Child, id_: str | None = None, class_: str = "") -> Markup:
    """A white panel."""
    return el("section", {"class": f"card {class_}".strip(), "id": id_}, list(children))


def stat(number: object, label: str, id_: str | None = None) -> Markup:
    """A big number with its label."""
    return el("div", {"class": "stat", "id": id_}, el("div", {"class": "n"}, str(number)), el("div", {"class": "l"}, label))


def trust_badge(flags: tuple[str, ...] | list[str]) -> Markup:
    """``trusted``, or ``flagged`` with the guard rules that fired."""
    if not flags:
        return el("span", {"class": "badge ok trust", "data-trust": "trusted"}, "trusted")
    return el("span", {"class": "badge bad trust", "data-trust": "flagged", "title": ", ".join(flags)},
              "flagged: " + ", ".join(flags))


def meter(used: int, limit: int) -> Markup:
    """A thin bar: ``used`` of ``limit``."""
    share = 0.0 if limit <= 0 else min(1.0, used / limit)
    return el("div", {"class": "meter full" if share >= 0.9 else "meter", "role": "meter", "aria-valuenow": used,
                      "aria-valuemax": limit}, el("span", {"style": f"width:{share * 100:.1f}%"}))


def when(ts: float) -> str:
    """Epoch seconds as ``2026-05-03 14:02 UTC``."""
    try:
        return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    except (OverflowError, OSError, ValueError):
        return "?"


def day(ts: float) -> str:
    """Epoch seconds as ``2026-05-03``; ``now`` for a validity still open."""
    if ts >= OPEN:
        return "now"
    try:
        return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d")
    except (OverflowError, OSError, ValueError):
        return "?"


def place(thread_id: str, turn: int, message_index: int) -> str:
    """Where a memory came from in a thread, in words: ``t1 · turn 2 · message 5``."""
    if not thread_id:
        return "-"
    return " · ".join([thread_id, *position(turn, message_index)])


def position(turn: int, message_index: int) -> list[str]:
    """A place in a thread without the thread: ``["turn 2", "message 5"]`` (what is known of it)."""
    return ([f"turn {turn}"] if turn >= 0 else []) + ([f"message {message_index}"] if message_index >= 0 else [])


def where(thread_id: str, turn: int, message_index: int, link: str | None = None) -> Markup:
    """A place in a thread on two lines (the thread, then turn and message), linked to ``link`` if given."""
    if not thread_id:
        return el("span", {"class": "muted"}, "-")
    inner: list[Child] = [el("span", {"class": "nowrap"}, thread_id), el("br"),
                          el("span", {"class": "nowrap small"}, " · ".join(position(turn, message_index)))]
    return el("a", {"href": link}, inner) if link else el("span", None, inner)
