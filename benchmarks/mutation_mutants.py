"""Mutants for the mutation check (``benchmarks/mutation.py``): what one is, the hand-chosen ones
resolved against the source, and the generated ones, made from the syntax tree (``ast``) of named
functions in a fixed order.

A mutant is one span of one file replaced by other text. Generated mutants are made on the tree and
spliced into the source text (only the mutated node's span changes, comments and layout elsewhere
stay); each is re-parsed and kept only if its tree is exactly the mutated tree, so a splice can never
produce something other than what its description says.

Operators (each applied to every place it fits inside the named functions, annotations, docstrings and
f-strings left alone):

- ``compare``: one comparison operator swapped (``==``/``!=``, ``<``/``<=``, ``>``/``>=``, ``in``/
  ``not in``, ``is``/``is not``);
- ``boolop``: ``and`` and ``or`` swapped;
- ``not``: a ``not`` removed;
- ``constant``: ``True``/``False`` flipped, an integer ``n`` made ``n + 1``, a float made ``0.0`` (or
  ``1.0`` if it was zero);
- ``return``: a returned expression replaced by a constant of the function's return type (``None``
  for an unannotated or optional one, an empty container, both booleans for ``bool``);
- ``delete``: a statement directly inside an ``if`` (its body or its ``else``) replaced by ``pass``;
- ``element``: one element of a list, tuple, set or dict display removed (a filter's clause, a
  field of a tuple of names...).
"""

from __future__ import annotations

import ast
import copy
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence


@dataclass(frozen=True)
class Mutant:
    """One change to one file: bytes ``start:end`` of ``file`` (UTF-8) become ``replacement``.

    ``id`` is stable across unrelated edits of the file (a hash of file, function, description and
    occurrence, not of line numbers); ``origin`` is ``hand`` or ``generated``; ``regression`` says what
    a hand-chosen mutant stands for; ``tests``: the test files run against it.
    """

    id: str
    area: str
    origin: str
    file: str
    function: str
    line: int
    operator: str
    description: str
    start: int
    end: int
    replacement: str
    tests: tuple[str, ...]
    regression: str = ""

    def apply(self, source: bytes) -> bytes:
        """``source`` (the file's bytes) with this mutant's span replaced."""
        return source[: self.start] + self.replacement.encode() + source[self.end:]


@dataclass(frozen=True)
class HandMutant:
    """A hand-chosen mutant: in ``file``, the one occurrence of ``original`` becomes ``replacement``;
    ``regression`` is the one-line regression it represents, ``tests`` the files that must kill it."""

    area: str
    file: str
    original: str
    replacement: str
    regression: str
    tests: tuple[str, ...]


def _stable_id(*parts: object) -> str:
    return hashlib.sha1("\x00".join(map(str, parts)).encode()).hexdigest()[:10]


def resolve_hand(root: Path, hand: HandMutant) -> Mutant:
    """The hand-chosen mutant as a span of its file; a ``ValueError`` unless ``original`` occurs exactly once
    and the result still parses."""
    source = (root / hand.file).read_bytes()
    needle = hand.original.encode()
    n = source.count(needle)
    if n != 1:
        raise ValueError(f"{hand.file}: the hand-chosen snippet occurs {n} times (must be once): {hand.original!r}")
    start = source.index(needle)
    mutant = Mutant(_stable_id(hand.file, hand.original, hand.replacement), hand.area, "hand", hand.file,
                    _enclosing(source, start), source[:start].count(b"\n") + 1, "hand", hand.regression, start,
                    start + len(needle), hand.replacement, hand.tests, hand.regression)
    try:
        ast.parse(mutant.apply(source))
    except SyntaxError as e:
        raise ValueError(f"{hand.file}: the hand-chosen mutant does not parse ({e}): {hand.regression}") from None
    return mutant


def _enclosing(source: bytes, offset: int) -> str:
    """The qualified name of the innermost function or class around byte ``offset`` ('' at module level)."""
    best = ""
    starts = _line_starts(source)
    for qual, node in _definitions(ast.parse(source)):
        a = starts[node.lineno - 1] + node.col_offset
        b = starts[(node.end_lineno or node.lineno) - 1] + (node.end_col_offset or 0)
        if a <= offset < b and len(qual) >= len(best):
            best = qual
    return best or "<module>"


def _line_starts(source: bytes) -> list[int]:
    starts = [0]
    for i, b in enumerate(source):
        if b == 0x0A:
            starts.append(i + 1)
    return starts


_Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _definitions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, _Def]]:
    """(qualified name, node) of every function and class, outermost first."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            qual = f"{prefix}{node.name}"
            yield qual, node
            yield from _definitions(node, qual + ".")


_SWAP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
_EMPTY = {"list": "[]", "tuple": "()", "set": "set()", "frozenset": "frozenset()", "dict": "{}", "str": "''",
          "int": "0", "float": "0.0", "Sequence": "()", "Mapping": "{}"}


@dataclass
class _Edit:
    """A mutation found on the tree: the node at ``path`` (from the module root) becomes ``new``."""

    path: tuple[tuple[str, int | None], ...]
    node: ast.expr | ast.stmt
    new: ast.AST
    operator: str
    what: str


def _short(text: str, limit: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Finder:
    """Walks one function and lists its edits, in source order."""

    def __init__(self, func: ast.FunctionDef | ast.AsyncFunctionDef, path: tuple[tuple[str, int | None], ...]) -> None:
        self.func = func
        self.edits: list[_Edit] = []
        self.returns = _returns(func)
        body = func.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]  # the docstring
            first = 1
        else:
            first = 0
        for i, stmt in enumerate(body, start=first):
            self._visit(stmt, (*path, ("body", i)))

    def _add(self, path: tuple[tuple[str, int | None], ...], node: ast.expr | ast.stmt, new: ast.AST, operator: str,
             what: str) -> None:
        self.edits.append(_Edit(path, node, new, operator, what))

    def _visit(self, node: ast.AST, path: tuple[tuple[str, int | None], ...]) -> None:
        if isinstance(node, ast.JoinedStr):
            return  # f-strings: messages, and node positions inside them are not reliable before 3.12
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):  # a nested function: its own return type
            outer, self.returns = self.returns, _returns(node)
            for i, stmt in enumerate(node.body):
                self._visit(stmt, (*path, ("body", i)))
            self.returns = outer
            return
        self._mutations(node, path)
        for name, value in ast.iter_fields(node):
            if name in ("annotation", "returns", "type_comment", "decorator_list"):
                continue
            if isinstance(value, list):
                for i, child in enumerate(value):
                    if isinstance(child, ast.AST) and not (name == "args" and i == 0 and _is_cast(node)):
                        self._visit(child, (*path, (name, i)))
            elif isinstance(value, ast.AST):
                self._visit(value, (*path, (name, None)))

    def _mutations(self, node: ast.AST, path: tuple[tuple[str, int | None], ...]) -> None:
        src = _short(ast.unparse(node)) if isinstance(node, ast.expr) else ""
        if isinstance(node, ast.Compare):
            for k, op in enumerate(node.ops):
                swap = _SWAP.get(type(op))
                if swap is not None:
                    new = copy.deepcopy(node)
                    new.ops[k] = swap()
                    self._add(path, node, new, "compare", f"`{src}` -> `{_short(ast.unparse(new))}`")
        elif isinstance(node, ast.BoolOp):
            new = copy.deepcopy(node)
            new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            self._add(path, node, new, "boolop", f"`{src}` -> `{_short(ast.unparse(new))}`")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self._add(path, node, copy.deepcopy(node.operand), "not", f"`{src}` -> `{_short(ast.unparse(node.operand))}`")
        elif isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, float)):
            if isinstance(node.value, bool):
                value: object = not node.value
            elif isinstance(node.value, int):
                value = node.value + 1
            else:
                value = 0.0 if node.value else 1.0
            self._add(path, node, ast.Constant(value), "constant", f"`{src}` -> `{value!r}`")
        elif isinstance(node, ast.Return) and node.value is not None and not isinstance(node.value, ast.Constant):
            for text in self._return_constants():
                new = ast.Return(ast.parse(text, mode="eval").body)
                self._add(path, node, new, "return", f"`{_short(ast.unparse(node))}` -> `return {text}`")
        elif isinstance(node, ast.If):
            for field in ("body", "orelse"):
                stmts = getattr(node, field)
                if field == "orelse" and len(stmts) == 1 and isinstance(stmts[0], ast.If):
                    continue  # an elif: its own ``if``
                where = "in" if field == "body" else "in the else of"
                for i, stmt in enumerate(stmts):
                    if not isinstance(stmt, ast.Pass):
                        self._add((*path, (field, i)), stmt, ast.Pass(), "delete",
                                  f"`{_short(ast.unparse(stmt))}` deleted ({where} "
                                  f"`if {_short(ast.unparse(node.test), 50)}`)")
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)) and isinstance(getattr(node, "ctx", ast.Load()), ast.Load):
            if not any(isinstance(e, ast.Starred) for e in node.elts) or len(node.elts) > 1:
                for i in range(len(node.elts)):
                    new = copy.deepcopy(node)
                    del new.elts[i]
                    if isinstance(new, ast.Set) and not new.elts:
                        continue  # ``{}`` would be a dict
                    self._add(path, node, new, "element", f"`{src}` -> `{_short(ast.unparse(new))}`")
        elif isinstance(node, ast.Dict):
            for i in range(len(node.keys)):
                new = copy.deepcopy(node)
                del new.keys[i]
                del new.values[i]
                self._add(path, node, new, "element", f"`{src}` -> `{_short(ast.unparse(new))}`")

    def _return_constants(self) -> list[str]:
        r = self.returns
        if r == "bool":
            return ["True", "False"]
        if not r or "None" in r or "Optional" in r:
            return ["None"]
        head = r.split("[", 1)[0].split(".")[-1]
        return [_EMPTY[head]] if head in _EMPTY else []


def _returns(func: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """A function's return annotation as written ('' when it has none)."""
    return ast.unparse(func.returns).strip("'\"") if func.returns is not None else ""


def _is_cast(node: ast.AST) -> bool:
    """A ``cast(type, value)`` call: its first argument is a type, with no behaviour to mutate."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "cast"


def _locate(tree: ast.AST, path: tuple[tuple[str, int | None], ...]) -> tuple[ast.AST, str, int | None]:
    """The parent of the node at ``path`` and the field (and index) holding it."""
    node = tree
    for name, index in path[:-1]:
        value = getattr(node, name)
        node = value[index] if index is not None else value
    name, index = path[-1]
    return node, name, index


def _replaced(tree: ast.Module, path: tuple[tuple[str, int | None], ...], new: ast.AST) -> ast.Module:
    out = copy.deepcopy(tree)
    parent, name, index = _locate(out, path)
    if index is None:
        setattr(parent, name, new)
    else:
        getattr(parent, name)[index] = new
    return out


def generate(root: Path, area: str, file: str, functions: Sequence[str], tests: tuple[str, ...]) -> list[Mutant]:
    """The generated mutants of ``functions`` (qualified names, e.g. ``ServerSettings.for_run``) of ``file``,
    in source order; a ``ValueError`` when a named function is not in the file."""
    source = (root / file).read_bytes()
    tree = ast.parse(source)
    starts = _line_starts(source)
    defs = {qual: node for qual, node in _definitions(tree)}
    paths = _def_paths(tree)
    out: list[Mutant] = []
    seen: dict[tuple[str, str], int] = {}
    original_dump = ast.dump(tree)
    for qual in functions:
        func = defs.get(qual)
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            raise ValueError(f"{file}: no function {qual}")
        for edit in _Finder(func, paths[qual]).edits:
            node = edit.node
            start = starts[node.lineno - 1] + node.col_offset
            end = starts[(node.end_lineno or node.lineno) - 1] + (node.end_col_offset or 0)
            text = "pass" if isinstance(edit.new, ast.stmt) and isinstance(edit.new, ast.Pass) else \
                ast.unparse(edit.new) if isinstance(edit.new, ast.stmt) else f"({ast.unparse(edit.new)})"
            mutated = source[:start] + text.encode() + source[end:]
            try:
                got = ast.dump(ast.parse(mutated))
            except SyntaxError:
                continue
            if got == original_dump or got != ast.dump(_replaced(tree, edit.path, edit.new)):
                continue  # the splice did not make exactly the mutated tree: leave it out
            key = (qual, edit.what)
            seen[key] = seen.get(key, 0) + 1
            out.append(Mutant(_stable_id(file, qual, edit.what, seen[key]), area, "generated", file, qual,
                              node.lineno, edit.operator, edit.what, start, end, text, tests))
    return out


def _def_paths(tree: ast.Module) -> dict[str, tuple[tuple[str, int | None], ...]]:
    """Qualified name -> the path of its definition from the module root."""
    out: dict[str, tuple[tuple[str, int | None], ...]] = {}

    def walk(node: ast.AST, prefix: str, path: tuple[tuple[str, int | None], ...]) -> None:
        for i, child in enumerate(getattr(node, "body", [])):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = f"{prefix}{child.name}"
                out[qual] = (*path, ("body", i))
                walk(child, qual + ".", out[qual])

    walk(tree, "", ())
    return out


def sample(mutants: list[Mutant], cap: int | None) -> list[Mutant]:
    """At most ``cap`` of ``mutants``, spread evenly over them (deterministic); all when ``cap`` is None."""
    if cap is None or len(mutants) <= cap:
        return mutants
    if cap <= 0:
        return []
    return [mutants[i * len(mutants) // cap] for i in range(cap)]
