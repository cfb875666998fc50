"""HTML written safely: every string is escaped unless it is ``Markup`` this module made.

Pages are built from ``el(tag, attrs, *children)``: a child that is a plain ``str`` (memory text, a
user id, a query) is escaped, an attribute value always is, and only ``Markup`` (what ``el`` and
``raw`` return) passes as it is. So text read from memory can never become markup on a page.
"""

from __future__ import annotations

from html import escape
from typing import Iterable, Union
from urllib.parse import urlencode

#: Elements that have no closing tag.
_VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "col", "source"})


class Markup(str):
    """A string of HTML that is already safe: ``el`` made it, or ``raw`` vouched for it."""


Child = Union[str, Markup, None, Iterable["Child"]]
"""What an element may hold: text (escaped), markup, None (nothing), or an iterable of children."""


def raw(html: str) -> Markup:
    """``html`` taken as markup as it is: only for text pagefault itself wrote (styles, SVG it drew)."""
    return Markup(html)


def render(child: Child) -> Markup:
    """One child as markup: text escaped, markup as is, None as nothing, iterables in order."""
    if child is None:
        return Markup("")
    if isinstance(child, Markup):
        return child
    if isinstance(child, str):
        return Markup(escape(child, quote=False))
    return Markup("".join(render(c) for c in child))


def el(tag: str, attrs: dict[str, object] | None = None, *children: Child) -> Markup:
    """The element ``tag`` with ``attrs`` (a value of None or False leaves the attribute out, True
    writes it bare; others are escaped) and ``children``."""
    parts = [tag]
    for k, v in (attrs or {}).items():
        if v is None or v is False:
            continue
        name = k.rstrip("_").replace("_", "-")  # class_ -> class, data_x -> data-x
        parts.append(name if v is True else f'{name}="{escape(str(v), quote=True)}"')
    head = "<" + " ".join(parts) + ">"
    if tag in _VOID:
        return Markup(head)
    return Markup(f"{head}{render(list(children))}</{tag}>")


def href(path: str, **query: object) -> str:
    """``path`` with the query parameters that are set (None and '' are left out)."""
    kept = {k: v for k, v in query.items() if v is not None and v != ""}
    return f"{path}?{urlencode(kept)}" if kept else path
