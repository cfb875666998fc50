"""The package's layers, checked from its imports: no module imports from a layer above its own.

The order is README's "Layout". A layer may import its own modules and any layer below it. Every
import counts, a function-local one too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pagefault

PACKAGE = Path(pagefault.__file__).resolve().parent

#: Lowest first. ``graph.context`` and ``graph.state`` (the agent's settings and state types) sit
#: below everything that runs the agent; ``graph`` (the builder) above the nodes it wires.
LAYERS: list[tuple[str, ...]] = [
    ("text",),
    ("safety",),
    ("models",),
    ("engines",),
    ("stores",),
    ("graph.context", "graph.state", "graph.saved_state", "graph.delta_memo"),
    ("serve",),
    ("consolidation",),
    ("tools",),
    ("window",),
    ("nodes",),
    ("graph",),
    ("integrations",),
    ("persistence",),
    ("maintenance",),
    ("inspector",),
    ("cli",),
    ("",),  # the package's face, pagefault/__init__.py
]


def layer_of(module: str) -> int:
    """The layer of ``pagefault.<module>`` (longest matching prefix)."""
    name = module.removeprefix("pagefault").removeprefix(".")
    best, best_len = None, -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (name == p or name.startswith(p + ".") or p == "") and len(p) > best_len:
                best, best_len = i, len(p)
    assert best is not None, module
    return best


def _imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "pagefault":
            if node.module == "pagefault":  # from pagefault import x: x is a subpackage
                out += [(node.lineno, f"pagefault.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "pagefault"]
    return out


def _modules() -> list[tuple[str, Path]]:
    return [(".".join(("pagefault", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__"), p)
            for p in sorted(PACKAGE.rglob("*.py"))]


def test_every_module_has_a_layer():
    for module, _ in _modules():
        assert layer_of(module) is not None


def test_no_module_imports_from_a_layer_above_it():
    wrong = []
    for module, path in _modules():
        own = layer_of(module)
        for line, target in _imports(path):
            if layer_of(target) > own:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} {module} -> {target}")
    assert not wrong, "imports from a higher layer:\n" + "\n".join(wrong)


def test_the_checker_sees_an_upward_import(tmp_path):
    """The check can fail: a stores module importing the graph builder is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from pagefault.graph.graph import build_graph\n")
    assert [layer_of(t) > layer_of("pagefault.stores.core") for _, t in _imports(bad)] == [True]


def test_every_package_says_what_it_holds():
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc.split()) >= 8, f"{init.relative_to(PACKAGE.parent)} has no docstring saying what it holds"


def test_readme_layout_lists_every_module():
    readme = (PACKAGE.parent / "README.md").read_text()
    layout = readme[readme.index("## Layout"):]
    layout = layout[:layout.index("\n## ", 4)] if "\n## " in layout[4:] else layout
    missing = [str(p.relative_to(PACKAGE.parent)) for _, p in _modules()
               if p.name != "__init__.py" and f"`{p.relative_to(PACKAGE.parent / 'pagefault')}`" not in layout]
    assert not missing, f"README's Layout does not list: {missing}"
