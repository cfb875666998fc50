"""The API reference: every public name has a docstring that says what it is and names its
arguments (``tests/project/test_api_reference_builds.py`` builds the reference from them with pdoc).

The public names are the ``__all__`` of ``pagefault``, ``pagefault.serve``, ``pagefault.stores`` and
``pagefault.graph``, with the public methods and properties of each public class (not those it
inherits unchanged from LangChain, LangGraph or pydantic). The reference is built with

    pdoc pagefault pagefault.serve pagefault.stores -o docs/api

(pdoc follows a package's ``__all__``, so ``pagefault`` alone would leave ``serve`` and ``stores`` out;
``pagefault.graph`` comes with ``pagefault``).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
import re
import sys
import textwrap
import typing
from collections.abc import Callable, Iterator
from typing import Any

PUBLIC_MODULES = ("pagefault", "pagefault.serve", "pagefault.stores", "pagefault.graph")
"""The modules whose ``__all__`` is the public API."""
REFERENCE_MODULES = ("pagefault", "pagefault.serve", "pagefault.stores")
"""The modules given to pdoc (``pagefault.graph`` comes with ``pagefault``)."""


def _ours(module: str | None) -> bool:
    return bool(module) and (module == "pagefault" or str(module).startswith("pagefault."))


# -- what counts as documented -------------------------------------------------------------------

def _class_doc(cls: type) -> str:
    """The class's own docstring; '' for none, or for the one ``dataclass`` or ``NamedTuple`` makes up
    from the signature (``Name(field: type, ...)``), which documents nothing."""
    doc = cls.__dict__.get("__doc__") or ""
    return "" if doc.startswith(f"{cls.__name__}(") else doc


def _assigned_docstrings(node: ast.AST) -> dict[str, str]:
    """Docstrings after assignments in a module or class body (``x = 1`` then ``\"\"\"...\"\"\"``), as pdoc reads them."""
    body = getattr(node, "body", [])
    found: dict[str, str] = {}
    for a, b in zip(body, body[1:]):
        targets = a.targets if isinstance(a, ast.Assign) else [a.target] if isinstance(a, ast.AnnAssign) else []
        if isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str):
            found.update({t.id: b.value.value for t in targets if isinstance(t, ast.Name)})
    return found


def _field_docstrings(cls: type, ours: Callable[[str | None], bool]) -> dict[str, str]:
    """Attribute docstrings of the fields of ``cls`` and of its bases that are ours."""
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not ours(klass.__module__):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        found.update(_assigned_docstrings(tree.body[0]))
    for name, info in getattr(cls, "model_fields", {}).items():  # pydantic: Field(description=...)
        if info.description:
            found.setdefault(name, info.description)
    return found


def _arguments(obj: Any, ours: Callable[[str | None], bool]) -> list[str]:
    """The named arguments of a function, or of a class's constructor (a dataclass's or a pydantic
    model's own fields, else its own ``__init__``); ``self``, ``*args`` and ``**kwargs`` aside."""
    if inspect.isclass(obj):
        if typing.is_typeddict(obj):
            return []
        if dataclasses.is_dataclass(obj):
            return [f.name for f in dataclasses.fields(obj) if f.init]
        if hasattr(obj, "model_fields"):
            own = {k for klass in obj.__mro__ if ours(klass.__module__) for k in klass.__dict__.get("__annotations__", {})}
            return [k for k in obj.model_fields if k in own]
        init = obj.__dict__.get("__init__")
        return _arguments(init, ours) if inspect.isfunction(init) else []
    try:
        parameters = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in parameters
            if p.name not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _unmentioned(doc: str, names: list[str]) -> list[str]:
    """The ``names`` that ``doc`` does not mention. A docstring that points to ``ContextSettings``
    documents the ``Context`` fields taken as keywords there (``context_keywords``)."""
    if re.search(r"\bContextSettings\b", doc):
        from pagefault.graph import ContextSettings

        names = [n for n in names if n not in ContextSettings.__annotations__]
    return [n for n in names if not re.search(rf"\b{re.escape(n)}\b", doc)]


def _methods(cls: type, ours: Callable[[str | None], bool]) -> Iterator[tuple[str, Any]]:
    """The public methods and properties of ``cls`` whose code is ours (overrides included; those
    inherited unchanged from a library, or written by pydantic, are the library's to document)."""
    for name in sorted(dir(cls)):
        if name.startswith("_"):
            continue
        owner = next((k for k in cls.__mro__ if name in k.__dict__), None)
        if owner is None:
            continue
        raw = owner.__dict__[name]
        func = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
        if isinstance(func, property):
            func = func.fget
        elif isinstance(func, functools.cached_property):
            func = func.func
        if inspect.isfunction(func) and ours(func.__module__):
            yield f"{owner.__qualname__}.{name}", func


def _variable_docstring(name: str, value: Any, ours: Callable[[str | None], bool]) -> str:
    """The docstring after the assignment that made ``value``, in whichever of our modules made it."""
    for module in list(sys.modules.values()):
        if not ours(getattr(module, "__name__", None)) or getattr(module, name, None) is not value:
            continue
        try:
            doc = _assigned_docstrings(ast.parse(inspect.getsource(module))).get(name, "")
        except (OSError, TypeError, SyntaxError):
            continue
        if doc:
            return doc
    return ""


def undocumented(name: str, obj: Any, ours: Callable[[str | None], bool] = _ours) -> list[str]:
    """What the reference would lack for the public ``obj`` called ``name``: a docstring (of it,
    or of one of its methods and properties), or the mention of one of its arguments. ``ours`` tells
    our modules from libraries' (whose inherited methods are theirs to document)."""
    problems = []
    if inspect.isclass(obj):
        doc = _class_doc(obj)
        if not doc.strip():
            problems.append(f"{name}: no docstring")
        else:
            said = doc + (getattr(obj.__dict__.get("__init__"), "__doc__", None) or "")
            # A field with its own docstring (pdoc shows it under the field) is documented there.
            documented_fields = _field_docstrings(obj, ours)
            if missing := [n for n in _unmentioned(said, _arguments(obj, ours)) if n not in documented_fields]:
                problems.append(f"{name}: docstring does not say what {', '.join(missing)} is")
        for method, func in _methods(obj, ours):
            if not (func.__doc__ or "").strip():
                problems.append(f"{name} ({method}): no docstring")
    elif inspect.isroutine(obj):
        if not (obj.__doc__ or "").strip():
            problems.append(f"{name}: no docstring")
        elif missing := _unmentioned(obj.__doc__, _arguments(obj, ours)):
            problems.append(f"{name}: docstring does not say what {', '.join(missing)} is")
    elif not inspect.ismodule(obj) and not _variable_docstring(name.rpartition(".")[2], obj, ours).strip():
        problems.append(f"{name}: no docstring after the assignment that makes it")
    return problems


def public_names() -> dict[str, Any]:
    """Every public name, once (the first module that exports it names it)."""
    found: dict[int, tuple[str, Any]] = {}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            found.setdefault(id(obj), (f"{module_name}.{name}", obj))
    return dict(found.values())


def test_every_public_name_has_a_docstring_that_names_its_arguments():
    names = public_names()
    assert len(names) > 30  # the walk found the API, not an empty list
    problems = [p for name, obj in names.items() for p in undocumented(name, obj)]
    assert not problems, "undocumented public API:\n" + "\n".join(problems)


# -- the check can fail ----------------------------------------------------------------------------

class _Synthetic:
    """A made-up class that says what ``size`` is but not its other argument."""

    def __init__(self, size: int, colour: str) -> None:
        self.size, self.colour = size, colour

    def documented(self) -> None:
        """Does nothing."""

    def bare(self) -> None:
        pass

    @property
    def bare_property(self) -> int:
        return self.size

    def _private(self) -> None:
        pass


@dataclasses.dataclass
class _SyntheticRecord:
    name: str


def _synthetic_function(x: int) -> int:
    return x


SYNTHETIC_VALUE = object()


def test_the_check_names_what_is_undocumented():
    ours: Callable[[str | None], bool] = lambda module: module == __name__  # noqa: E731
    assert undocumented("_Synthetic", _Synthetic, ours) == [
        "_Synthetic: docstring does not say what colour is",
        "_Synthetic (_Synthetic.bare): no docstring",
        "_Synthetic (_Synthetic.bare_property): no docstring",
    ]
    # A dataclass's made-up docstring (its signature) documents nothing.
    assert undocumented("_SyntheticRecord", _SyntheticRecord, ours) == ["_SyntheticRecord: no docstring"]
    assert undocumented("_synthetic_function", _synthetic_function, ours) == ["_synthetic_function: no docstring"]
    assert undocumented("SYNTHETIC_VALUE", SYNTHETIC_VALUE, ours) == [
        "SYNTHETIC_VALUE: no docstring after the assignment that makes it"]
    # What is documented passes: a variable with a docstring after it, a function that names its argument.
    assert undocumented("REFERENCE_MODULES", REFERENCE_MODULES, ours) == []
    assert undocumented("undocumented", undocumented, ours) == []


# -- the settings keywords show in the signature ---------------------------------------------------

def test_the_settings_keywords_are_typed_as_the_context_fields():
    """Type checkers see ``**settings: Unpack[ContextSettings]``; ``help()`` and the reference see one
    keyword per ``Context`` field, of its type or None, defaulting to None."""
    from pagefault import Context, PagefaultMiddleware, memory_tools
    from pagefault.graph import ContextSettings

    fields = typing.get_type_hints(Context)
    assert typing.get_type_hints(ContextSettings) == {name: fields[name] | None for name in fields}
    for func in (PagefaultMiddleware.__init__, memory_tools):
        assert typing.get_type_hints(func)["settings"] == typing.Unpack[ContextSettings]
        shown = inspect.signature(func).parameters.values()
        own = ("store", "tools", "prompts")  # their own keywords, before the Context fields
        keywords = {p.name: p for p in shown if p.kind is p.KEYWORD_ONLY and p.name not in own}
        assert list(keywords) == list(fields)
        assert all(p.default is None and p.annotation == fields[name] | None for name, p in keywords.items())
    assert list(inspect.signature(PagefaultMiddleware).parameters)[:2] == ["context", "store"]
