"""Process-wide state in ``pagefault/``: no registry is keyed by ``id()``, none expires by a clock.

The project's rule: no stored or returned value may depend on a wall-clock window, on the ``id()`` of
an object that can be freed (a freed object's id is handed to the next one made), or on which thread
finishes first; a cache is owned by an object whose lifetime matches what it caches. This test parses
every module of ``pagefault/`` (``ast``; nothing is imported or run) and checks:

- **The inventory.** Every piece of process-wide state is listed in ``REGISTRIES``, with what it is
  keyed by and why it may live as long as the process. Process-wide state is: a module-level or
  class-level assignment of a mutable container (a dict, list or set literal or comprehension, or a
  call to ``dict``, ``list``, ``set``, ``OrderedDict``, ``defaultdict``, ``deque``, ``Counter``,
  ``WeakKeyDictionary``, ``WeakValueDictionary`` or ``WeakSet``) whose name is not a constant's
  (``UPPER_CASE``, ``__dunder__``) or which code mutates (a subscript store or delete, ``.add``,
  ``.append``, ``.update``, ``.setdefault``, ``.pop``... or ``global``); a module-level ``ContextVar``
  or ``threading.local()``; and every function memoized by ``functools.cache`` or ``lru_cache`` (a
  process-wide dict keyed by its arguments). A new one fails the test until it is listed, and a listed
  one that is gone fails it too, so the list stays the inventory.
- **No key made by ``id()``.** No such registry is indexed (subscript, ``in``/``not in``, any method
  call on it or on what its ``.get()`` returns, a memoized function's arguments) by an expression that
  calls ``id(...)``, directly, through a name assigned from one, or through a function of the same
  module that returns one; this has no exceptions. And, wider (a cache may also live on an instance,
  or a key travel through a function of another module): ``pagefault/`` calls the builtin ``id()``
  nowhere, except where ``EXCEPTIONS`` says why.
- **No expiry by a clock.** No function that touches a registry, and no memoized function, reads a
  clock (``time.time()``, ``time.monotonic()``, ``perf_counter()``, the ``_ns`` forms,
  ``datetime.now()``...). This is coarser than "expires entries by the clock": a function that uses a
  clock only to bound a wait and touches a registry too is flagged, and must be listed in
  ``EXCEPTIONS`` with its reason. It does not follow calls: a function that reads the clock and
  passes the reading to a helper that evicts would pass, which review must catch.

``EXCEPTIONS`` lists each allowed finding of the ``id()`` call check (``"module:function"``) and of
the clock check (``"module:registry"``), with its reason; an entry that no longer matches a finding
fails the test.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from support.clock_calls import is_clock_call

PACKAGE = Path(__file__).resolve().parents[2] / "pagefault"

#: Calls that make a mutable container (by the called name, however it was imported).
CONTAINER_CALLS = {"dict", "list", "set", "OrderedDict", "defaultdict", "deque", "Counter",
                   "WeakKeyDictionary", "WeakValueDictionary", "WeakSet"}
CONTAINER_LITERALS = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
#: Calls that make per-context or per-thread state at module level.
STATE_CALLS = {"ContextVar", "local"}
#: Decorators that memoize a function in a process-wide dict keyed by its arguments.
MEMOIZERS = {"cache", "lru_cache"}
#: Methods that change a container (``set``: a ``ContextVar``'s).
MUTATORS = {"add", "append", "appendleft", "extend", "extendleft", "insert", "update", "setdefault", "pop",
            "popitem", "popleft", "clear", "discard", "remove", "move_to_end", "difference_update",
            "intersection_update", "symmetric_difference_update", "set"}
#: A constant's name: ``NAME``, ``_NAME``, ``__all__``.
CONSTANT = re.compile(r"^(_*[A-Z][A-Z0-9_]*|__\w+__)$")

#: Every piece of process-wide state in ``pagefault/``: ``"module:name"`` -> what it is keyed by, and why
#: it may live as long as the process.
INFRASTRUCTURE = ("process-wide infrastructure registry (issue 46, \"infrastructure lives in process globals\"): "
                  "to be owned by the object whose lifetime it matches, not moved here")
REGISTRIES: dict[str, str] = {
    # Infrastructure: what a process opened, found again by where it lives. Issue 46 replaces these.
    "pagefault.stores.services:_open": "keyed by (data directory, Chroma URL, database URL): " + INFRASTRUCTURE,
    "pagefault.engines.connections:_homes": "weak, keyed by the store or checkpointer itself (its entry goes with "
                                            "it): " + INFRASTRUCTURE,
    "pagefault.engines.connections:_pools": "keyed by database URL; a closed pool is replaced: " + INFRASTRUCTURE,
    "pagefault.engines.locks:_registry": "keyed by database URL (one advisory-lock session per database): "
                                         + INFRASTRUCTURE,
    "pagefault.engines.locks:_bound": "weak, keyed by the store or checkpointer itself: " + INFRASTRUCTURE,
    "pagefault.engines.file_locks:_registry": "keyed by the data directory's real path (one lock file descriptor "
                                              "per directory per process): " + INFRASTRUCTURE,
    "pagefault.engines.directory_use:_held": "keyed by data directory; the descriptor through which this process "
                                             "holds its shared use lock, which lasts as long as the process uses "
                                             "the directory (released by MemoryServices.forget): " + INFRASTRUCTURE,
    "pagefault.integrations.langchain_tools:_stores": "keyed by the data directory's absolute path (the SQLite "
                                                      "store opened there): " + INFRASTRUCTURE,
    # Made once per value, by a stable key; the values are the same for as long as the process runs.
    "pagefault.consolidation.supersede:_judges": "keyed by (model id, base URL), both strings: one judge per model "
                                                 "the process names",
    "pagefault.models.chat:_cache": "keyed by (model id, base URL), both strings: one chat model per name",
    "pagefault.models.tokens:_counters": "keyed by the model name: one token counter (and its count caches, "
                                         "keyed by text) per tokenizer",
    "pagefault.models.tokens:_installed": "encoding names whose tiktoken file this process has written",
    "pagefault.models.pinned_weights:_checked": "weight file paths already hashed against PINNED this process",
    "pagefault.stores.index.embedding_record:_registered": "the names of embedding functions registered with "
                                                          "Chroma (a process-wide registry of Chroma's own)",
    "pagefault.stores.index.lexical_postgres:_ready": "keyed by (database URL, index kind): tables this process "
                                                      "has created or found",
    "pagefault.engines.thread_lock:_classes": "keyed by the graph class itself (held strongly, as classes are): "
                                              "its serialized subclass, made once",
    "pagefault.stores.core:_reported": "(namespace, label, kind) already warned about: each warning once per process",
    "pagefault.stores.procedures:_reported": "(namespace, key) already warned about: each warning once per process",
    # Held weakly, by the object itself: an entry goes when its object does.
    "pagefault.stores.cached_reads:_cache": "weak, keyed by the store itself, then by namespace; an entry is "
                                            "valid while the store's version is unchanged (no clock)",
    "pagefault.engines.thread_lock:_warned": "weak set of checkpointers already warned about, the objects themselves",
    "pagefault.engines.locks:_warned": "weak set of unbound single-connection Postgres holders already warned about, "
                                       "the objects themselves",
    "pagefault.stores.writers.recall_writer:_writers": "weak set of the live recall writers, drained at exit",
    "pagefault.stores.writers.archival_journal:ArchivalJournal.running": "weak set of the live journals, drained at "
                                                                         "exit",
    "pagefault.stores.writers.shared_journal:SharedJournal.running": "weak set of the live journals, drained at exit",
    # Filled at import, read afterwards.
    "pagefault.models.embeddings:_releases": "the models' release functions, registered at import, called at exit",
    "pagefault.graph.context:BUILTIN_DEFAULTS": "keyed by Context field name: each field's built-in default, "
                                                "filled at import while the Context class is defined",
    # Per context or per thread, not per process.
    "pagefault.engines.thread_lock:_held": "per context: (the locks object itself, thread id) of the turns the "
                                           "current call holds, compared by identity; set and reset around one call",
    "pagefault.engines.thread_lock:_in_turn": "per context: thread ids whose turn the current run is in",
    "pagefault.serve.auth:_recording_owner": "per context: a flag, keyed by nothing",
    "pagefault.models.embeddings:_thread_role": "per thread: whether it is background work, keyed by nothing",
    # Memoized functions: keyed by their arguments, all values that do not change while the process runs.
    "pagefault.safety.guard:rule_tables": "no arguments: the compiled rule tables, built on the first scan",
    "pagefault.safety.guard:_scan": "keyed by the scanned text (bounded LRU); the verdict is a function of the text",
    "pagefault.serve.settings:served_settings": "no arguments: the served graph's settings, read from the "
                                                "environment once",
    "pagefault.stores.cached_reads:_where": "keyed by a conninfo string (bounded LRU): its parsed host, port, "
                                            "database and user",
    "pagefault.tools.handlers:_model_schema": "keyed by the argument model class itself (held strongly): its "
                                              "compact JSON schema",
    "pagefault.window.main_context:_count": "keyed by (token counter, text), bounded LRU; the counter is held "
                                            "strongly (the process's, from token_counter) and a count is a "
                                            "function of the two",
}

#: Findings of the ``id()`` call check (``"module:function"``) and the clock check (``"module:registry"``)
#: that are allowed -> why.
EXCEPTIONS: dict[str, str] = {
    "pagefault.window.main_context:_count": "build_main_context reads datetime.now() for the prompt's last line "
                                            "(the request's time, shown to the model), not to expire anything: that "
                                            "line is counted by counter.count_text, never passed to _count, whose "
                                            "entries are keyed by text and dropped by LRU size alone",
}


@dataclass(frozen=True)
class Registry:
    """One piece of process-wide state: ``key`` (``module:name``), how code refers to it (``name``; an
    attribute's name when ``attribute``, i.e. a class-level one), and what made it (``kind``)."""

    key: str
    name: str
    kind: str
    line: int
    attribute: bool = False


def _called_name(node: ast.AST) -> str | None:
    """``f`` of ``f(...)``, ``m.f(...)`` or ``m.f(...)(...)`` (the last name), else None."""
    while isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _container_kind(value: ast.AST | None) -> str | None:
    if isinstance(value, CONTAINER_LITERALS):
        return type(value).__name__.lower()
    if isinstance(value, ast.Call) and _called_name(value) in CONTAINER_CALLS:
        return _called_name(value)
    return None


def _assigned(body: list[ast.stmt]) -> list[tuple[str, ast.expr, int]]:
    """(name, value, line) of each simple assignment in ``body``."""
    out: list[tuple[str, ast.expr, int]] = []
    for node in body:
        if isinstance(node, ast.Assign):
            out += [(t.id, node.value, node.lineno) for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out.append((node.target.id, node.value, node.lineno))
    return out


def _refers(node: ast.AST, reg: Registry) -> bool:
    """Whether ``node`` is ``reg`` itself (its name, or for a class-level one any ``x.name``)."""
    if reg.attribute:
        return isinstance(node, ast.Attribute) and node.attr == reg.name
    return isinstance(node, ast.Name) and node.id == reg.name


def _mutated(tree: ast.Module, reg: Registry) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)) and _refers(node.value, reg):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS \
                and _refers(node.func.value, reg):
            return True
        if isinstance(node, ast.AugAssign) and _refers(node.target, reg):
            return True
        if isinstance(node, ast.Global) and not reg.attribute and reg.name in node.names:
            return True
    return False


def _memoized(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    for d in fn.decorator_list:
        if _called_name(d) in MEMOIZERS:
            return _called_name(d)
    return None


def _qualnames(tree: ast.Module) -> dict[ast.AST, str]:
    """Each function and class of ``tree`` -> its dotted name within the module."""
    out: dict[ast.AST, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out[child] = prefix + child.name
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def registries(tree: ast.Module, module: str) -> list[Registry]:
    """The process-wide state ``tree`` (the module ``module``) defines (see the module docstring)."""
    out = []
    for name, value, line in _assigned(tree.body):
        if isinstance(value, ast.Call) and _called_name(value) in STATE_CALLS:
            out.append(Registry(f"{module}:{name}", name, str(_called_name(value)), line))
            continue
        kind = _container_kind(value)
        if kind is not None:
            reg = Registry(f"{module}:{name}", name, kind, line)
            if not CONSTANT.match(name) or _mutated(tree, reg):
                out.append(reg)
    names = _qualnames(tree)
    for node, qualname in names.items():
        if isinstance(node, ast.ClassDef):
            for name, value, line in _assigned(node.body):
                kind = _container_kind(value)
                if kind is not None:
                    reg = Registry(f"{module}:{qualname}.{name}", name, kind, line, attribute=True)
                    if not CONSTANT.match(name) or _mutated(tree, reg):
                        out.append(reg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _memoized(node):
            out.append(Registry(f"{module}:{qualname}", node.name, str(_memoized(node)), node.lineno))
    return out


def _is_id_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "id"


class _IdTaint:
    """What in a module carries an ``id()``: names assigned from one, and functions that return one."""

    def __init__(self, tree: ast.Module) -> None:
        self.names: set[str] = set()
        self.functions: set[str] = set()
        while True:
            before = len(self.names) + len(self.functions)
            for node in ast.walk(tree):
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) \
                        and node.value is not None and self.carries(node.value):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    self.names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                        isinstance(r, ast.Return) and r.value is not None and self.carries(r.value)
                        for r in ast.walk(node)):
                    self.functions.add(node.name)
            if len(self.names) + len(self.functions) == before:
                return

    def carries(self, expr: ast.AST) -> bool:
        for n in ast.walk(expr):
            if _is_id_call(n) or (isinstance(n, ast.Name) and n.id in self.names):
                return True
            if isinstance(n, ast.Call) and _called_name(n.func) in self.functions:
                return True
        return False


def _uses(node: ast.AST, reg: Registry) -> bool:
    """``node`` is ``reg``, or what its ``.get()`` returns (a ``ContextVar``'s value)."""
    if _refers(node, reg):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
        and not node.args and _refers(node.func.value, reg)


def id_keyed(tree: ast.Module, regs: list[Registry]) -> list[tuple[str, int, str]]:
    """(registry, line, code) for each use of a registry of ``tree`` with a key that carries an ``id()``."""
    taint = _IdTaint(tree)
    out = []
    for node in ast.walk(tree):
        for reg in regs:
            keys: list[ast.AST] = []
            if isinstance(node, ast.Subscript) and _uses(node.value, reg):
                keys = [node.slice]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _uses(node.func.value, reg):
                keys = [*node.args, *(k.value for k in node.keywords)]
            elif isinstance(node, ast.Call) and reg.kind in MEMOIZERS and _called_name(node.func) == reg.name:
                keys = [*node.args, *(k.value for k in node.keywords)]
            elif isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                for op, (left, right) in zip(node.ops, zip(sides, sides[1:])):
                    if isinstance(op, (ast.In, ast.NotIn)) and _uses(right, reg):
                        keys.append(left)
            if any(taint.carries(k) for k in keys):
                out.append((reg.key, getattr(node, "lineno", 0), ast.unparse(node)))
    return out


def id_calls(tree: ast.Module, module: str) -> list[tuple[str, int, str]]:
    """(``module:function``, line, code) for each call of the builtin ``id()`` in ``tree``."""
    names = _qualnames(tree)
    out = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = names.get(child, where)
            if isinstance(child, ast.Call) and _is_id_call(child):
                out.append((f"{module}:{where}", child.lineno, ast.unparse(child)))
            visit(child, inner)

    visit(tree, "<module>")
    return out




def clocked(tree: ast.Module, regs: list[Registry]) -> list[tuple[str, int, str]]:
    """(registry, line, function) for each function of ``tree`` that reads a clock and touches a registry
    (any use of its name, nested functions included), and each memoized function that reads a clock."""
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        inside = list(ast.walk(fn))
        if not any(is_clock_call(n) for n in inside):
            continue
        for reg in regs:
            memoized = reg.kind in MEMOIZERS and reg.name == fn.name and reg.line == fn.lineno
            if memoized or any(_refers(n, reg) for n in inside if n is not fn):
                out.append((reg.key, fn.lineno, fn.name))
    return out


@dataclass
class _Module:
    name: str
    path: Path
    tree: ast.Module


def _modules() -> list[_Module]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out.append(_Module(name, path, ast.parse(path.read_text(encoding="utf-8"), str(path))))
    return out


MODULES = _modules()


def _where(m: _Module, line: int) -> str:
    return f"{m.path.relative_to(PACKAGE.parent)}:{line}"


def test_the_scan_reads_every_module():
    names = {m.name for m in MODULES}
    assert {"pagefault", "pagefault.engines.thread_lock", "pagefault.stores.services",
            "pagefault.integrations.langchain_tools"} <= names and len(names) > 100


def test_every_registry_is_listed_with_its_reason():
    found = {r.key: (m, r) for m in MODULES for r in registries(m.tree, m.name)}
    unlisted = [f"{_where(m, r.line)}: {r.key} ({r.kind})" for k, (m, r) in sorted(found.items())
                if k not in REGISTRIES]
    assert unlisted == [], "process-wide state that REGISTRIES does not list (say what it is keyed by and why it " \
                           "may live as long as the process, or give it an owner):\n" + "\n".join(unlisted)
    gone = sorted(set(REGISTRIES) - set(found))
    assert gone == [], f"REGISTRIES lists state that no longer exists; remove it: {gone}"
    assert all(reason.strip() for reason in REGISTRIES.values())


def _findings() -> dict[str, list[str]]:
    """Each finding of the ``id()`` call and clock checks: key -> where and what."""
    out: dict[str, list[str]] = {}
    for m in MODULES:
        regs = registries(m.tree, m.name)
        for key, line, code in id_calls(m.tree, m.name):
            out.setdefault(key, []).append(f"{_where(m, line)}: calls {code}")
        for key, line, fn in clocked(m.tree, regs):
            out.setdefault(key, []).append(f"{_where(m, line)}: {fn} reads a clock and touches {key}")
    return out


def test_no_registry_is_keyed_by_an_id():
    found = [f"{_where(m, line)}: {code}" for m in MODULES
             for _, line, code in id_keyed(m.tree, registries(m.tree, m.name))]
    assert found == [], "a freed object's id() is given to the next object made: key by the object (weakly) " \
                        "or by a stable value:\n" + "\n".join(found)


def test_no_id_call_and_no_clock_near_a_registry_but_the_listed_ones():
    findings = _findings()
    new = [what for key, whats in sorted(findings.items()) if key not in EXCEPTIONS for what in whats]
    assert new == [], "id() anywhere in pagefault/, or a clock read where a registry is touched; fix it, or " \
                      "list it in EXCEPTIONS with its reason:\n" + "\n".join(new)
    stale = sorted(set(EXCEPTIONS) - set(findings))
    assert stale == [], f"EXCEPTIONS lists what is no longer found; remove it: {stale}"


# --- the checks themselves ------------------------------------------------------------------------


def _scan(source: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """(registries, id-keyed uses, id() calls, clock findings) of a snippet, as the module ``m``."""
    tree = ast.parse(source)
    regs = registries(tree, "m")
    return ([r.key for r in regs], [k for k, _, _ in id_keyed(tree, regs)], [k for k, _, _ in id_calls(tree, "m")],
            [k for k, _, _ in clocked(tree, regs)])


#: Snippets each with one registry keyed by an id(): (source, the registry flagged).
ID_KEYED = {
    "_cache = {}\ndef put(x, v):\n    _cache[id(x)] = v\n": "m:_cache",
    "_cache: dict = dict()\ndef get(x):\n    return _cache.get(id(x))\n": "m:_cache",
    "_seen = set()\ndef once(x):\n    if id(x) not in _seen:\n        _seen.add(id(x))\n": "m:_seen",
    "import weakref\n_by = weakref.WeakValueDictionary()\ndef put(x):\n    k = (id(x), 1)\n    _by[k] = x\n": "m:_by",
    "_memo = {}\ndef f(x):\n    return _memo.setdefault(id(x), [])\n": "m:_memo",
    "import functools\n@functools.lru_cache(maxsize=8)\ndef f(key):\n    return key\ndef g(x):\n    return f(id(x))\n":
        "m:f",
    # What thread_lock did: a ContextVar's set of (id(locks), thread), made by a method.
    "from contextvars import ContextVar\n_held = ContextVar('held', default=frozenset())\n"
    "class G:\n    def _key(self, tid):\n        return id(self.locks), tid\n"
    "    def run(self, tid):\n        if self._key(tid) in _held.get():\n            return\n"
    "        _held.set(_held.get() | {self._key(tid)})\n": "m:_held",
    "class C:\n    live = {}\n    def keep(self):\n        C.live[id(self)] = self\n": "m:C.live",
}

#: Snippets with registries and no id() key.
NOT_ID_KEYED = [
    "import weakref\n_cache = weakref.WeakKeyDictionary()\ndef put(x, v):\n    _cache[x] = v\n",
    "_by_url = {}\ndef pool(url):\n    return _by_url.setdefault(url, object())\n",
    "_cache = {}\ndef put(x, v):\n    _cache[x.id] = v\n    _cache[v] = identity(x)\n",
    "_held = []\ndef f(x):\n    return any(h is x for h in _held)\n",
]


def test_the_id_key_check_flags_an_id_key():
    for source, flagged in ID_KEYED.items():
        regs, keyed, _, _ = _scan(source)
        assert flagged in regs and set(keyed) == {flagged}, source
    for source in NOT_ID_KEYED:
        regs, keyed, _, _ = _scan(source)
        assert regs and keyed == [], source


def test_the_id_call_check_finds_each_call():
    _, _, calls, _ = _scan("def f(x):\n    return id(x)\nclass C:\n    def k(self):\n        return hash(id(self))\n"
                           "x = id(f)\n")
    assert calls == ["m:f", "m:C.k", "m:<module>"]
    assert _scan("def f(x):\n    return x.id, record_id(x), ids[0]\n")[2] == []


#: Snippets each with a function that reads a clock and touches a registry: (source, the registry flagged).
CLOCKED = {
    "import time\n_cache = {}\ndef get(k):\n    hit = _cache.get(k)\n"
    "    if hit and time.monotonic() - hit[0] < 60:\n        return hit[1]\n": "m:_cache",
    "from time import monotonic\n_seen: dict = {}\ndef prune():\n    for k, t in list(_seen.items()):\n"
    "        if monotonic() > t:\n            del _seen[k]\n": "m:_seen",
    "import datetime\nimport collections\n_recent = collections.OrderedDict()\ndef put(k, v):\n"
    "    _recent[k] = (datetime.datetime.now(), v)\n": "m:_recent",
    "import functools, time\n@functools.cache\ndef token():\n    return int(time.time() // 3600)\n": "m:token",
    "import time\nclass C:\n    entries = {}\n    def get(self, k):\n        t, v = C.entries[k]\n"
    "        return v if time.time() < t else None\n": "m:C.entries",
}

#: A clock used away from any registry, or a registry with no clock.
NOT_CLOCKED = [
    "import time\n_pools = {}\ndef wait(timeout):\n    deadline = time.monotonic() + timeout\n    return deadline\n"
    "def pool(url):\n    return _pools.setdefault(url, object())\n",
    "import time\nclass C:\n    def __init__(self):\n        self._cache = {}\n    def stamp(self):\n"
    "        return time.time()\n",
    "NAMES = {'a': 1}\ndef f():\n    import time\n    return NAMES['a'] + time.time()\n",
]


def test_the_clock_check_flags_a_clock_near_a_registry():
    for source, flagged in CLOCKED.items():
        regs, _, _, clock = _scan(source)
        assert flagged in regs and clock == [flagged], source
    for source in NOT_CLOCKED:
        assert _scan(source)[3] == [], source


def test_the_inventory_tells_registries_from_constants():
    regs = _scan("TABLE = {'a': 1}\n__all__ = ['x']\n_WORDS = ['a']\n_cache = {}\n_HIDDEN = {}\n"
                 "def f(k):\n    _HIDDEN[k] = 1\n"
                 "import threading, contextvars\n_local = threading.local()\n_var = contextvars.ContextVar('v')\n"
                 "class C:\n    KINDS = ('a',)\n    live: set = set()\n    def g(self):\n        pass\n"
                 "import functools\n@functools.lru_cache(maxsize=4)\ndef h(x):\n    return x\n"
                 "@functools.cached_property\ndef p(self):\n    return 1\n")[0]
    assert sorted(regs) == ["m:C.live", "m:_HIDDEN", "m:_cache", "m:_local", "m:_var", "m:h"]
