"""Typed core sections: a core block that declares a JSON schema (the MemGPT research repo's
core-memory schema idea), e.g. ``human: {name, location, preferences[]}``.

The block's data is a JSON object validated against the schema (``jsonschema``, Draft 2020-12) on
every edit. What the prompt shows, and what ``core_memory_append`` / ``core_memory_replace`` edit,
is a compact text form with one ``field: value`` line per set field, list items joined by ``"; "``::

    name: Ana
    location: Berlin
    preferences: green tea; jazz

An edit changes that text; the result is parsed back, validated, and rendered again in canonical
form, so the model edits a typed block with the same two tools as a plain one. Appending
``preferences: cycling`` adds a list item; appending a field that is already set is refused (replace
it instead). Limits: nested objects and lists of objects are shown and edited as inline JSON; a list
item cannot itself contain ``"; "``.
"""

from __future__ import annotations

import json
from typing import Any, cast

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from referencing import Registry
from referencing.exceptions import Unresolvable

#: Separator of list items in the compact form.
ITEM_SEP = "; "


class TypedBlockError(ValueError):
    """Text or data that does not fit the block's schema; the message names the field and the rule."""


#: Where a block schema's ``$ref``s are looked up: nowhere but the schema itself (jsonschema would otherwise
#: fetch a remote ``$ref``'s URL at every validation).
_NO_REMOTE = Registry()


def check_schema(schema: object) -> dict[str, Any]:
    """A usable block schema: a valid JSON schema (its meta-schema, Draft 2020-12) of ``type: object``
    with ``properties``, whose references (``$ref``) point only within itself."""
    if not isinstance(schema, dict) or schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        raise TypedBlockError('a block schema must be a JSON schema with "type": "object" and "properties"')
    bad = [k for k, v in schema["properties"].items() if not isinstance(v, dict)]
    if bad:
        raise TypedBlockError(f"each property needs a schema object (like {{\"type\": \"string\"}}); not {bad[0]!r}")
    try:
        Draft202012Validator.check_schema(schema)
        remote = _remote_ref(schema)
    except SchemaError as e:
        raise TypedBlockError(f"invalid JSON schema: {e.message}") from e
    except RecursionError:
        raise TypedBlockError("invalid JSON schema: nested too deeply") from None
    if remote:
        raise TypedBlockError(f"a block schema may refer only within itself (\"$ref\": \"#/...\"), not to {remote!r}")
    return schema


def _remote_ref(node: object) -> str:
    """The first reference in ``node`` that points outside the schema ('' if none)."""
    if isinstance(node, dict):
        for key, v in node.items():
            if key in ("$ref", "$dynamicRef") and isinstance(v, str) and not v.startswith("#"):
                return v
            found = _remote_ref(v)
            if found:
                return found
    elif isinstance(node, list):
        for v in node:
            found = _remote_ref(v)
            if found:
                return found
    return ""


def validate(schema: dict[str, Any], data: object) -> dict[str, Any]:
    """``data`` if it satisfies ``schema``; else TypedBlockError listing every problem (or naming a
    reference the schema cannot resolve)."""
    try:
        errors = sorted(Draft202012Validator(schema, registry=_NO_REMOTE).iter_errors(data), key=lambda e: list(e.path))
    except Unresolvable as e:
        raise TypedBlockError(f"the section's schema has a reference that resolves to nothing ({e})") from None
    if errors:
        problems = "; ".join(f"{'.'.join(map(str, e.path)) or 'block'}: {e.message}" for e in errors[:5])
        raise TypedBlockError(f"does not fit the section's schema ({problems})")
    return cast("dict[str, Any]", data)  # a schema of ``type: object`` (``check_schema``) passes only a dict


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def render(schema: dict[str, Any], data: dict[str, Any]) -> str:
    """The compact text form: schema field order, unset and empty fields left out."""
    order = list(schema["properties"]) + sorted(k for k in data if k not in schema["properties"])
    lines = []
    for key in order:
        if key not in data or data[key] in (None, "", []):
            continue
        v = data[key]
        shown = ITEM_SEP.join(_scalar(x) for x in v) if isinstance(v, list) and not _has_objects(v) else _scalar(v)
        lines.append(f"{key}: {shown}")
    return "\n".join(lines)


def _has_objects(items: list[Any]) -> bool:
    return any(isinstance(x, (dict, list)) for x in items)


def _kind(prop: dict[str, Any]) -> str:
    t = prop.get("type", "string")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "string")
    return t


def _coerce(field: str, prop: dict[str, Any], text: str) -> Any:
    kind = _kind(prop)
    text = text.strip()
    try:
        if kind == "integer":
            return int(text)
        if kind == "number":
            number = float(text) if any(c in text for c in ".eE") else int(text)
            if number != number or number in (float("inf"), float("-inf")):
                raise ValueError(text)
            return number
    except ValueError:
        raise TypedBlockError(f"{field}: {text!r} is not a valid {kind}")
    if kind == "boolean":
        low = text.lower()
        if low in ("true", "yes"):
            return True
        if low in ("false", "no"):
            return False
        raise TypedBlockError(f"{field}: {text!r} is not true or false")
    if kind in ("object", "array"):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            raise TypedBlockError(f"{field}: write it as JSON")
    return text


def parse(schema: dict[str, Any], text: str) -> dict[str, Any]:
    """Data from the compact text form (the inverse of ``render``), not yet validated."""
    props: dict[str, Any] = schema["properties"]
    data: dict[str, Any] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        key, sep, rest = line.partition(":")
        key = key.strip()
        if not sep or key not in props:
            raise TypedBlockError(f"line {line!r} is not 'field: value' for a field of this section "
                                  f"({', '.join(props)})")
        prop = props[key]
        if _kind(prop) == "array":
            items_prop = prop.get("items") if isinstance(prop.get("items"), dict) else {}
            rest = rest.strip()
            if rest.startswith("["):
                items = _coerce(key, prop, rest)
            else:
                items = [_coerce(key, items_prop, x) for x in rest.split(ITEM_SEP.strip()) if x.strip()]
            data.setdefault(key, []).extend(items)
        elif key in data:
            raise TypedBlockError(f"{key} is already set to {data[key]!r}; replace that line instead of adding one")
        else:
            data[key] = _coerce(key, prop, rest)
    return data


def normalize(schema: dict[str, Any], text: str) -> str:
    """Parse edited text, validate it, and render it again in canonical form."""
    return render(schema, validate(schema, parse(schema, text)))
