"""No test compares a measured wall-clock duration with a threshold.

On a loaded 2-core machine any such threshold flakes, so ordering and overlap are proven with
events, barriers and files instead, and timing figures live in ``benchmarks/``. This test parses
every Python file under ``tests/`` (``ast``, not a text search) and fails naming ``file:line`` for:

- a comparison one of whose sides holds a measured interval: a subtraction involving a clock
  reading (``time.time()``, ``time.monotonic()``, ``perf_counter()``, ``datetime.now()``...), a
  name assigned from one, or a value named like a timestamp (``started``, ``finished``, ``t0``);
- a comparison naming an elapsed time or a duration (``elapsed``, ``duration``, ``took``...);
- an ``assert`` comparing a clock reading itself (``assert time.monotonic() < deadline``) after
  the fact, outside a polling loop.

A deadline that only bounds a wait is fine: ``while not done() and time.monotonic() < deadline``,
``while not done(): assert time.monotonic() < deadline, ...`` (or ``event.wait(timeout=30)``)
followed by an assert that the awaited thing happened.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from support.clock_calls import is_clock_call

TESTS = Path(__file__).resolve().parents[1]

#: Names (variables, attributes, dict keys) that hold a point in time.
TIMESTAMP = re.compile(r"^(t\d|t_?(start|end|begin|stop)|(start|finish|end|stop)(ed)?_(at|time|ts)|started|finished|"
                       r"deadline)$", re.IGNORECASE)
#: Names that hold a measured interval.
DURATION = re.compile(r"elapsed|duration|took|latency|wall_?time|runtime|seconds_taken", re.IGNORECASE)


def _label(node: ast.AST) -> str | None:
    """The identifier a node names: a variable, an attribute, or a string key of a subscript."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    return None




class _Scanner:
    """One file: which names hold clock readings, then which comparisons use them as a threshold."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.clocked: set[str] = set()
        self._taint()

    def _timeish(self, node: ast.AST) -> bool:
        for n in ast.walk(node):
            label = _label(n)
            if is_clock_call(n) or (isinstance(n, ast.Name) and n.id in self.clocked) or \
                    (label is not None and (TIMESTAMP.match(label) or DURATION.search(label))):
                return True
        return False

    def _clock_value(self, node: ast.AST, *, named: bool = True) -> bool:
        """Whether an expression is a clock reading or arithmetic on one (``time.monotonic() + 30``,
        ``[r["started"] for r in reports]``, ``int(time.time())``), not merely built with one.
        ``named``: a value named like a timestamp counts too."""
        if is_clock_call(node) or (isinstance(node, ast.Name) and node.id in self.clocked):
            return True
        label = _label(node)
        if named and isinstance(node, (ast.Subscript, ast.Attribute)) and label is not None and TIMESTAMP.match(label):
            return True
        if isinstance(node, ast.BinOp):
            return self._clock_value(node.left, named=named) or self._clock_value(node.right, named=named)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return self._clock_value(node.elt, named=named)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return any(self._clock_value(e, named=named) for e in node.elts)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in {"int", "float", "round", "abs", "min", "max", "sorted"}:
            return any(self._clock_value(a, named=named) for a in node.args)
        return False

    def _taint(self) -> None:
        """Names assigned a clock reading (or arithmetic on such a name), to a fixed point."""
        while True:
            before = len(self.clocked)
            for node in ast.walk(self.tree):
                value = getattr(node, "value", None)
                if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and value is not None \
                        and self._clock_value(value):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        self.clocked |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
            if len(self.clocked) == before:
                return

    def _measures_an_interval(self, node: ast.AST) -> bool:
        for n in ast.walk(node):
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub) and (self._timeish(n.left) or self._timeish(n.right)):
                return True
            label = _label(n)
            if label is not None and DURATION.search(label):
                return True
        return False

    def findings(self) -> list[tuple[int, str]]:
        polling = {id(a) for loop in ast.walk(self.tree) if isinstance(loop, ast.While)
                   for a in ast.walk(loop) if isinstance(a, ast.Assert)}  # the bound of a polling wait
        asserted = {id(c) for a in ast.walk(self.tree) if isinstance(a, ast.Assert) and id(a) not in polling
                    for c in ast.walk(a.test) if isinstance(c, ast.Compare)}
        out = []
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            if any(self._measures_an_interval(s) for s in sides):
                out.append((node.lineno, "compares a measured interval: " + ast.unparse(node)))
            elif id(node) in asserted and any(self._clock_value(s, named=False) for s in sides):
                out.append((node.lineno, "asserts on a clock reading: " + ast.unparse(node)))
        return sorted(out)


def wall_clock_comparisons(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` for each comparison of ``source`` that uses wall-clock time as a threshold."""
    return _Scanner(ast.parse(source)).findings()


def _test_sources() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if p.resolve() != Path(__file__).resolve())


def test_no_test_compares_a_duration_with_a_threshold():
    found = [f"{path.relative_to(TESTS.parent)}:{line}: {what}" for path in _test_sources()
             for line, what in wall_clock_comparisons(path.read_text(encoding="utf-8"))]
    assert found == [], "wall-clock thresholds flake on a loaded machine; prove ordering with events, barriers " \
                        "or files instead:\n" + "\n".join(found)


def test_the_scan_reads_every_test_file():
    sources = _test_sources()
    assert TESTS / "integration" / "test_replicas.py" in sources and TESTS / "support" / "replica.py" in sources
    assert TESTS / "conftest.py" in sources and len(sources) > 60


FLAGGED = {
    "started = time.monotonic()\nrun()\nassert time.monotonic() - started < 10\n": 3,
    "t0 = perf_counter()\nwork()\nelapsed = perf_counter() - t0\nassert elapsed < 0.5\n": 4,
    "starts = [r['started'] for r in reports]\nassert max(starts) - min(starts) < 0.5\n": 2,
    "done = sorted(rs)\nassert done[1]['finished'] - done[0]['finished'] >= 0.6\n": 2,
    "import time\nassert time.time() < deadline\n": 2,
    "import datetime\nbegin = datetime.datetime.now()\nif datetime.datetime.now() - begin > limit:\n    fail()\n": 3,
    "def f(report):\n    assert report.duration <= 2.0\n": 2,
    "a = loop.time()\nb = loop.time()\nok = (b - a) < 1\n": 3,
}

ALLOWED = [
    "deadline = time.monotonic() + 30\nwhile not done() and time.monotonic() < deadline:\n    time.sleep(0.01)\n"
    "assert done()\n",
    "assert event.wait(timeout=30)\nassert len(items) - 1 == 3\n",
    "token = jwt.encode({'exp': int(time.time()) + 60})\nassert decode(token)['sub'] == 'ana'\n",
    "time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))\n",
    "assert worker.join(30) is None and not worker.is_alive()\n",
    "assert verify(jwt.encode({'sub': 'ann', 'exp': int(time.time()) + 60}, key)) == 'ann'\n",
    "before = count()\nremove(2)\nassert count() == before - 2\n",
    "assert kinds['now'] == 'Berlin' and (m.max_tokens, m.stop) == (50, ['END'])\n",
    "deadline = time.monotonic() + 30\nwhile not held.exists():\n    assert time.monotonic() < deadline, 'never held'\n"
    "    time.sleep(0.05)\n",
]


def test_the_scan_flags_thresholds_and_allows_bounded_waits():
    for source, line in FLAGGED.items():
        assert [n for n, _ in wall_clock_comparisons(source)] == [line], source
    for source in ALLOWED:
        assert wall_clock_comparisons(source) == [], source
