"""Decoded views of a text: what an attacker may have hidden from a plain-text scanner.

An instruction can be smuggled past a pattern scanner inside base64, hex, escapes, invisible
Unicode tag characters, reversed or leetspeak text, while a model still reads it fluently. The
poisoning guard scans every view this module returns as well as the text itself.

Only runs that decode to readable text become views, so ids, hashes, keys and image data add
nothing. Work is bounded: at most ``MAX_INPUT`` characters are decoded and views are not
decoded again more than once.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import html
import re
import urllib.parse
from dataclasses import dataclass

#: Characters of input that decoding looks at (pattern rules still see the whole text).
MAX_INPUT = 250_000
#: Shortest encoded run worth decoding.
MIN_RUN = 16

_TAGS = re.compile("[\U000E0000-\U000E007F]+")
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{%d,}={0,2}" % MIN_RUN)
_BASE32 = re.compile(r"\b[A-Z2-7]{%d,}=*" % MIN_RUN)
_HEX = re.compile(r"\b(?:(?:0x)?[0-9a-fA-F]{2}[\s:,]?){%d,}" % (MIN_RUN // 2))
_DECIMAL = re.compile(r"\b(?:\d{2,3}[\s,]+){7,}\d{2,3}\b")
_BINARY = re.compile(r"\b(?:[01]{8}[\s,]*){4,}")
_ESCAPES = re.compile(r"(?:\\u[0-9a-fA-F]{4}|\\x[0-9a-fA-F]{2}){4,}")
_PERCENT_ONE = re.compile(r"%[0-9a-fA-F]{2}")
_ASCII85 = re.compile(r"<~(.{4,}?)~>", re.S)
_ASCII85_BARE = re.compile(r"[!-u]{24,}")
_BASE85 = re.compile(r"[0-9A-Za-z!#$%&()*+\-;<=>?@^_`{|}~]{24,}")
_ENTITIES = re.compile(r"(?:&#x?[0-9a-fA-F]{1,6};){3,}")
_SPACED = re.compile(r"(?:\b\w\b(?:[ .\-_*|]{1,3}|\s*/\s*)){7,}\w\b")
_MORSE = re.compile(r"(?:[.\-]{1,7}(?: {1,3}| ?/ ?)){7,}[.\-]{1,7}")
_MORSE_CODE = dict(zip(
    ".- -... -.-. -.. . ..-. --. .... .. .--- -.- .-.. -- -. --- .--. --.- .-. ... - ..- ...- .-- -..- -.-- --.. "
    "----- .---- ..--- ...-- ....- ..... -.... --... ---.. ----.".split(),
    "abcdefghijklmnopqrstuvwxyz0123456789"))
#: Cyrillic and Greek letters that look like Latin ones (homoglyph substitution).
_CONFUSABLES = str.maketrans("аеорсухіјѕԁɡһկӏАВЕКМНОРСТХІЈЅΑΒΕΗΙΚΜΝΟΡΤΧΥΖοντι",
                             "aeopcyxijsdghklABEKMHOPCTXIJSABEHIKMNOPTXYZovti")
_MIXED_SCRIPT = re.compile(r"\b(?=\w*[a-zA-Z])(?=\w*[\u0370-\u03ff\u0400-\u04ff])\w+\b")
#: Words almost every injection uses; a reversed or rot13 view is only worth scanning if they appear in it.
_KEYWORDS = ("ignore", "disregard", "forget", "instruction", "prompt", "system", "reveal", "send", "assistant",
             "password", "mode", "rules", "previous", "override", "bypass", "restriction", "secret", "email", "call")
_REVERSED_MARKERS = tuple(w[::-1] for w in _KEYWORDS)
_ROT13_MARKERS = tuple(codecs.encode(w, "rot13") for w in _KEYWORDS)
_LEET_WORD = re.compile(r"\b(?=\w*[a-zA-Z])(?=\w*[013457@$])[\w@$]{3,}\b")
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"})


@dataclass(frozen=True)
class View:
    """One decoded reading of (part of) a text, named by how it was encoded."""

    encoding: str
    text: str


def readable(text: str) -> bool:
    """Decoded bytes that read like words, not like binary, a hash or another encoding."""
    if len(text) < 8:
        return False
    printable = sum(c.isprintable() or c in "\n\t" for c in text)
    letters = sum(c.isalpha() for c in text)
    return printable / len(text) > 0.95 and letters / len(text) > 0.5 and len(text.split()) >= 2


def printable(text: str) -> bool:
    return bool(text) and sum(c.isprintable() or c in "\n\t" for c in text) / len(text) > 0.95


def _text(raw: bytes) -> str | None:
    """Decoded bytes as text when they are printable (readable or not: they may hold another layer)."""
    try:
        out = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return out if printable(out) else None


def _b64(run: str) -> str | None:
    run = run.rstrip("=")
    try:
        raw = base64.b64decode(run + "=" * (-len(run) % 4), altchars=b"-_" if ("-" in run or "_" in run) else None,
                               validate=True)
    except (binascii.Error, ValueError):
        return None
    return _text(raw)


def _b32(run: str) -> str | None:
    run = run.rstrip("=")
    try:
        return _text(base64.b32decode(run + "=" * (-len(run) % 8)))
    except (binascii.Error, ValueError):
        return None


def _hex(run: str) -> str | None:
    digits = re.sub(r"0x|[\s:,]", "", run)
    if len(digits) % 2:
        digits = digits[:-1]
    try:
        return _text(bytes.fromhex(digits))
    except ValueError:
        return None


def _binary(run: str) -> str | None:
    return _text(bytes(int(b, 2) for b in re.findall(r"[01]{8}", run)))


def _decimal(run: str) -> str | None:
    codes = [int(n) for n in re.findall(r"\d+", run)]
    return "".join(map(chr, codes)) if all(32 <= c < 127 for c in codes) else None


def _escapes(run: str) -> str | None:
    try:
        out = codecs.decode(run, "unicode_escape")
    except (UnicodeDecodeError, ValueError):
        return None
    return out if printable(out) else None


def _a85(run: str) -> str | None:
    try:
        return _text(base64.a85decode(re.sub(r"\s", "", run)))
    except (ValueError, binascii.Error):
        return None


def _b85(run: str) -> str | None:
    try:
        return _text(base64.b85decode(run))
    except (ValueError, binascii.Error):
        return None


def _spaced(run: str) -> str:
    """'I g n o r e   a l l' -> 'Ignore all': the commonest separator joins letters, any other breaks words."""
    parts = re.split(r"([^\w]+)", run)
    seps = parts[1::2]
    common = max(set(seps), key=seps.count) if seps else ""
    return "".join(p if i % 2 == 0 else ("" if p == common else " ") for i, p in enumerate(parts))


def _morse(run: str) -> str:
    words = re.split(r" {2,}| ?/ ?", run)
    return " ".join("".join(_MORSE_CODE.get(c, "") for c in w.split()) for w in words)


_RUNS = (
    ("base64", _BASE64, _b64),
    ("base32", _BASE32, _b32),
    ("hex", _HEX, _hex),
    ("binary", _BINARY, _binary),
    ("escapes", _ESCAPES, _escapes),
    ("base85", _BASE85, _b85),
    ("decimal", _DECIMAL, _decimal),
    ("ascii85", _ASCII85_BARE, _a85),
)


def _decode_runs(text: str) -> list[View]:
    out: list[View] = []
    for name, pattern, decode in _RUNS:
        for m in pattern.finditer(text):
            got = decode(m.group(0))
            if got:
                out.append(View(name, got))
    for m in _ASCII85.finditer(text):
        got = _a85(m.group(1))
        if got:
            out.append(View("ascii85", got))
    if len(_PERCENT_ONE.findall(text)) >= 3:
        out.append(View("percent", urllib.parse.unquote(text)))
    return out


def decoded_views(text: str) -> list[View]:
    """Every readable hidden reading of ``text`` (not including ``text`` itself)."""
    text = text[:MAX_INPUT]
    views: list[View] = []
    tags = "".join(chr(ord(c) - 0xE0000) for run in _TAGS.findall(text) for c in run)
    if readable(tags):
        views.append(View("unicode-tags", tags))
    visible = _INVISIBLE.sub("", _TAGS.sub("", text))
    if visible != text:
        views.append(View("invisible-stripped", visible))
    lower = visible.lower()
    if any(m in lower for m in _REVERSED_MARKERS):
        views.append(View("reversed", visible[::-1]))
    if any(m in lower for m in _ROT13_MARKERS):
        views.append(View("rot13", codecs.encode(visible, "rot13")))
    if _MIXED_SCRIPT.search(visible):
        views.append(View("homoglyphs", visible.translate(_CONFUSABLES)))
    for m in _ENTITIES.finditer(visible):
        views.append(View("html-entities", html.unescape(visible)))
        break
    spaced = [_spaced(m.group(0)) for m in _SPACED.finditer(visible)]
    if spaced:
        views.append(View("spaced-letters", " ".join(spaced)))
    morse = [_morse(m.group(0)) for m in _MORSE.finditer(visible)]
    if any(readable(t) for t in morse):
        views.append(View("morse", " ".join(morse)))
    if len(_LEET_WORD.findall(visible)) >= 3:
        views.append(View("leetspeak", visible.translate(_LEET)))
    found = _decode_runs(visible)
    for v in list(found):  # one more layer: base64 inside hex and the like
        found += [View(f"{v.encoding}>{w.encoding}", w.text) for w in _decode_runs(v.text)]
    budget = 4 * len(text) + 1024
    for v in (v for v in found if readable(v.text)):
        budget -= len(v.text)
        if budget < 0:
            break
        views.append(v)
    return views
