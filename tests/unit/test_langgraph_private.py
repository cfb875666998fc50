"""LangGraph's private interfaces, fenced in ``pagefault.engines.langgraph_private``: written for langgraph 1.2.24
(langgraph-checkpoint 4.3.2, langgraph-checkpoint-postgres 3.2.0, langgraph-api 0.16.7).

Two halves. Each private shape the fence touches, and the behaviour ``window.cut_short`` relies on, is
checked against the installed LangGraph: on a version that changes one, the test fails saying what changed
and which version the fence was written for. And no other module of the package reaches past LangGraph's
or LangChain's public interfaces (checked from the source with ``ast``): no private module or name imported,
no ``_store`` read, no mention of LangGraph's private loop, no attribute of LangGraph's assigned.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import importlib.util
import operator
import types
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph

import pagefault
from pagefault.engines import langgraph_private as fence

#: The LangGraph version the fence was written for (and its checkpoint, Postgres saver and server packages').
WRITTEN_FOR = {"langgraph": "1.2.24", "langgraph-checkpoint": "4.3.2", "langgraph-checkpoint-postgres": "3.2.0",
               "langgraph-api": "0.16.7"}

PACKAGE = Path(pagefault.__file__).resolve().parent
FENCE = Path(fence.__file__).resolve()


def _installed(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _changed(what: str) -> str:
    """The failure message when an installed LangGraph's private shape is not the one the fence knows."""
    versions = ", ".join(f"{d} {v} (installed: {_installed(d)})" for d, v in WRITTEN_FOR.items())
    return (f"LangGraph's private interface changed: {what}. pagefault/engines/langgraph_private.py was written for "
            f"{versions}; adapt it (and its docstring) to the installed version, or pin the one it was written for.")


# -- the version ------------------------------------------------------------------------------------------

def test_the_fence_names_the_version_it_was_written_for():
    assert fence.WRITTEN_FOR == WRITTEN_FOR, "the fence and this test name the same versions"
    doc = fence.__doc__ or ""
    assert all(f"{d} {v}" in doc for d, v in WRITTEN_FOR.items()), "the fence's docstring names them"
    readme = (PACKAGE.parent / "README.md").read_text()
    assert f"langgraph {WRITTEN_FOR['langgraph']}" in readme, "README says which LangGraph version is tested"


# -- the private shapes the fence touches -----------------------------------------------------------------

def _loads_global(code: types.CodeType, name: str) -> bool:
    """Whether ``code`` (or a function nested in it) reads the global ``name``."""
    return name in code.co_names or any(isinstance(c, types.CodeType) and _loads_global(c, name) for c in code.co_consts)


def test_the_postgres_savers_read_their_module_constant_for_the_delta_page_size():
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    readers = {"langgraph.checkpoint.postgres": PostgresSaver.get_delta_channel_history,
               "langgraph.checkpoint.postgres.aio": AsyncPostgresSaver.aget_delta_channel_history}
    assert tuple(readers) == fence.DELTA_PAGE_MODULES
    name = fence.DELTA_PAGE_CONSTANT
    before = {}
    for module_name, reader in readers.items():
        module = importlib.import_module(module_name)
        assert isinstance(getattr(module, name, None), int), _changed(f"{module_name} has no int {name}")
        assert reader.__globals__ is vars(module) and _loads_global(reader.__code__, name), _changed(
            f"{reader.__qualname__} no longer reads {module_name}.{name}")
        before[module_name] = getattr(module, name)
    try:
        fence.set_delta_page_size(77)
        assert {m: getattr(importlib.import_module(m), name) for m in readers} == dict.fromkeys(readers, 77)
    finally:
        for module_name, value in before.items():
            setattr(importlib.import_module(module_name), name, value)


class _Log(TypedDict):
    log: Annotated[list[str], operator.add]


def _two_steps(seen: dict[str, Any] | None = None, *, stop_before_b: bool = False) -> tuple[Any, list[str]]:
    """A graph ``a`` then ``b`` on an in-memory saver (stopping before ``b`` when asked), and the nodes it ran."""
    ran: list[str] = []

    def a(state: _Log) -> dict[str, Any]:
        ran.append("a")
        return {"log": ["a"]}

    def b(state: _Log, config: RunnableConfig) -> dict[str, Any]:
        ran.append("b")
        if seen is not None:
            seen.update(checkpointer=fence.step_checkpointer(config), started=fence.step_checkpoint_map(config))
        return {"log": ["b"]}

    builder = StateGraph(_Log)
    builder.add_node("a", a)
    builder.add_node("b", b)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    return builder.compile(checkpointer=InMemorySaver(), interrupt_before=["b"] if stop_before_b else None), ran


def test_a_steps_config_names_its_checkpointer_and_the_checkpoint_it_started_from():
    seen: dict[str, Any] = {}
    graph, _ = _two_steps(seen)
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    graph.invoke({"log": []}, config)
    assert seen["checkpointer"] is graph.checkpointer, _changed(
        f"a step's config no longer holds its checkpointer under {fence.CONFIG_KEY_CHECKPOINTER!r}")
    before_b = next(s for s in graph.get_state_history(config) if s.next == ("b",))
    assert seen["started"] == {"": before_b.config["configurable"]["checkpoint_id"]}, _changed(
        f"a step's config no longer maps its namespace to the checkpoint it started from under {fence.CHECKPOINT_MAP!r}")


def test_a_compiled_graph_is_remade_as_a_subclass_from_its_fields():
    graph, ran = _two_steps()

    class Remade(CompiledStateGraph[Any, Any, Any, Any]):
        pass

    try:
        remade = Remade(**fence.compiled_fields(graph))
    except TypeError as e:
        raise AssertionError(_changed(f"a compiled graph's constructor no longer takes its own fields ({e})")) from e
    config: RunnableConfig = {"configurable": {"thread_id": "r"}}
    assert remade.invoke({"log": []}, config) == {"log": ["a", "b"]} and ran == ["a", "b"]
    copy = remade.copy()
    assert type(copy) is Remade and fence.compiled_fields(copy).keys() == fence.compiled_fields(remade).keys(), _changed(
        "Pregel.copy no longer remakes a graph from its fields")


def _source(module: str) -> ast.Module:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, _changed(f"there is no module {module}")
    return ast.parse(Path(spec.origin).read_text())


def test_the_servers_checkpointer_and_context_marker_are_where_the_fence_looks():
    """Read from langgraph_api's source (importing its server modules sets up a server's state)."""
    getter = next((n for n in ast.walk(_source("langgraph_api._checkpointer"))
                   if isinstance(n, ast.AsyncFunctionDef) and n.name == "get_checkpointer"), None)
    assert getter is not None, _changed("langgraph_api._checkpointer has no async get_checkpointer")
    args = getter.args
    assert not args.args and not args.posonlyargs and all(d is not None for d in args.kw_defaults), _changed(
        "langgraph_api._checkpointer.get_checkpointer needs arguments")
    marks = [n for n in ast.walk(_source("langgraph_api.models.run"))
             if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and n.slice.value == fence.CONTEXT_PROVIDED]
    assert marks, _changed(f"langgraph_api no longer marks a run whose client sent a context with {fence.CONTEXT_PROVIDED!r}")


def test_new_input_does_not_run_a_threads_pending_steps_and_none_does():
    """What ``window.cut_short`` stands on: a thread left with a step to run (here: stopped before ``b``)
    does not run it when new input comes (it starts again from the input); ``None`` as input runs it."""
    graph, ran = _two_steps(stop_before_b=True)
    config: RunnableConfig = {"configurable": {"thread_id": "c"}}
    graph.invoke({"log": ["first"]}, config)
    assert graph.get_state(config).next == ("b",)
    ran.clear()
    assert graph.invoke({"log": ["second"]}, config) == {"log": ["first", "a", "second", "a"]} and ran == ["a"], _changed(
        "new input on a thread with a step still to run no longer leaves that step unrun (window/cut_short.py)")
    ran.clear()
    assert graph.invoke(None, config)["log"][-1] == "b" and ran == ["b"], _changed(
        "None as input no longer runs a thread's pending step")


# -- nothing else reaches past the public interfaces ------------------------------------------------------

def _lang(module: str) -> bool:
    """Whether ``module`` is LangGraph's or LangChain's (``langgraph``, ``langgraph_api``, ``langchain_core``...)."""
    return module.split(".")[0].startswith(("langgraph", "langchain"))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _root(node: ast.AST) -> str | None:
    """The name an attribute chain starts from (``a`` of ``a.b.c``), None if it starts elsewhere."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, (ast.Assign, ast.Delete)):
        found = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        found = [node.target]
    else:
        return []
    flat: list[ast.AST] = []
    while found:
        t = found.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            found += t.elts
        else:
            flat.append(t)
    return flat


def reaches(source: str) -> list[str]:
    """Where ``source`` reaches past LangGraph's or LangChain's public interfaces, one line each."""
    tree = ast.parse(source)
    found: list[str] = []
    ours: set[str] = set()  # names bound to a LangGraph or LangChain module or object
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if _lang(a.name):
                    ours.add(a.asname or a.name.split(".")[0])
                    if any(_private(p) for p in a.name.split(".")):
                        found.append(f"line {node.lineno}: imports the private module {a.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _lang(node.module):
            if any(_private(p) for p in node.module.split(".")):
                found.append(f"line {node.lineno}: imports from the private module {node.module}")
            for a in node.names:
                ours.add(a.asname or a.name)
                if _private(a.name):
                    found.append(f"line {node.lineno}: imports the private name {node.module}.{a.name}")
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and node.value.args \
                and isinstance(node.value.args[0], ast.Constant) and isinstance(node.value.args[0].value, str) \
                and _lang(node.value.args[0].value) and ast.unparse(node.value.func).endswith(("import_module", "__import__")):
            ours.update(t.id for t in node.targets if isinstance(t, ast.Name))  # m = importlib.import_module("langgraph...")
    for node in ast.walk(tree):  # for m in (sync_module, async_module): m is one of them
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and isinstance(node.iter, (ast.Tuple, ast.List)) \
                and any(isinstance(e, ast.Name) and e.id in ours for e in node.iter.elts):
            ours.add(node.target.id)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        if isinstance(node, ast.Attribute) and node.attr == "_store":
            found.append(f"line {line}: reads ._store")
        elif isinstance(node, ast.Attribute) and _private(node.attr) and _root(node) in ours:
            found.append(f"line {line}: uses the private attribute {node.attr} of {_root(node)} (LangGraph's or LangChain's)")
        for t in _targets(node):
            if isinstance(t, ast.Attribute) and _root(t) in ours:
                found.append(f"line {line}: assigns to an attribute of {_root(t)}, which is LangGraph's or LangChain's")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args \
                and node.func.id in ("getattr", "hasattr", "setattr", "delattr"):
            name = node.args[1] if len(node.args) > 1 else None
            literal = name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else None
            if literal == "_store":
                found.append(f"line {line}: {node.func.id} of _store")
            elif _root(node.args[0]) in ours and (node.func.id in ("setattr", "delattr")
                                                  or (literal is not None and _private(literal))):
                found.append(f"line {line}: {node.func.id} on {_root(node.args[0])}, which is LangGraph's or LangChain's")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("__pregel"):
            found.append(f"line {line}: names LangGraph's private config key {node.value}")
    for n, text in enumerate(source.splitlines(), 1):
        if "langgraph.pregel._" in text or "PregelLoop" in text:
            found.append(f"line {n}: names LangGraph's private loop")
    return found


def test_only_the_fence_reaches_past_langgraphs_public_interfaces():
    modules = sorted(p for p in PACKAGE.rglob("*.py") if p.resolve() != FENCE)
    assert len(modules) > 100, "the whole package is scanned"
    wrong = [f"{p.relative_to(PACKAGE.parent)} {r}" for p in modules for r in reaches(p.read_text())]
    assert not wrong, ("reaches past LangGraph's public interfaces outside pagefault/engines/langgraph_private.py "
                       "(move it there, with a check in this test):\n" + "\n".join(wrong))


def test_the_scan_would_see_the_fences_own_reaches():
    """The module the scan excuses is the one that reaches: read as any other, it would fail."""
    assert reaches(FENCE.read_text()), "the fence's private reaches are visible to the scan"


def test_the_scan_sees_each_kind_of_reach():
    source = "\n".join([
        "import langgraph.pregel._loop as loop",                                 # a private module
        "from langgraph.checkpoint.serde.types import _DeltaSnapshot",           # a private name
        "from langgraph_api._checkpointer import get_checkpointer",              # from a private module
        "import langgraph.checkpoint.postgres as pg",
        "from langgraph.graph.state import CompiledStateGraph",
        "pg._DELTA_PAGE_SIZE = 128",                                             # a module constant patched
        "setattr(pg, 'PAGE', 1)",                                                # the same, by setattr
        "CompiledStateGraph.stream = None",                                      # a class patched
        "x = holder._store",                                                     # a wrapper's private store
        "y = getattr(holder, '_store', None)",                                   # the same, probed
        "z = CompiledStateGraph._first",                                         # a private attribute
        "key = '__pregel_checkpointer'",                                         # a private config key
        "# PregelLoop._first decides",                                           # the private loop named
        "m = importlib.import_module('langgraph.checkpoint.postgres.aio')",
        "m.PAGE = 1",                                                            # a module imported by name, patched
        "for module in (pg, m):",
        "    module._DELTA_PAGE_SIZE = 128",                                      # the same, through a loop
        "ok = tup._replace(checkpoint={})",                                      # a NamedTuple's own: fine
        "from langgraph.types import Overwrite",                                 # public: fine
    ])
    found = reaches(source)
    lines = sorted({int(r.split(":")[0].removeprefix("line ")) for r in found})
    assert lines == [1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 15, 17], found
