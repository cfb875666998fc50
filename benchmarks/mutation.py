"""The mutation check: do the targeted tests catch regressions in the safety-critical modules?

    .venv/bin/python benchmarks/mutation.py                  # every mutant; writes its section of RESULTS.md
    .venv/bin/python benchmarks/mutation.py --list           # list the mutants, run nothing
    .venv/bin/python benchmarks/mutation.py --area guard --max-generated 40 --no-write
    .venv/bin/python benchmarks/mutation.py --mutant 3f2a9c01d4    # one mutant (ids from --list)
    .venv/bin/python benchmarks/mutation.py --resume         # go on from the per-mutant log of a run cut short

Each mutant (hand-chosen ones, and ones generated from the syntax tree of named functions: see
``mutation_mutants.py`` and ``mutation_catalog.py``) is applied to a scratch copy of the repository,
never to the tree itself: the tree is copied to a temporary directory once, one file is patched, the
area's test files run there (``pytest -x -q``, through this interpreter, ``PYTHONPATH`` pointing at the
copy), and the file is restored. Mutants run one at a time.

A mutant is killed when a test fails (a timeout counts as killed, and is noted), survives when all
pass, and is equivalent when it survived and is on the reviewed list of ``mutation_catalog.EQUIVALENT``
(with the reason it changes no behaviour). Not part of the default test command: a full run takes
about two hours on two cores.

Each outcome is appended to the per-mutant log (``benchmarks/mutation_log.jsonl``, kept in the repository
beside RESULTS.md, so a run spread over several sittings adds up) as it comes, with a digest of the mutated
file and of the area's test files. ``--resume`` keeps the logged outcomes that still hold for the tree and
runs only the rest, so a run cut short goes on where it stopped; the table then counts both, and says so. An
outcome holds while the mutated file and the area's test files are unchanged; a kill also holds while the
mutated file and the one test file that failed are unchanged, so adding a test for a survivor re-runs the
area's survivors, not its kills.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from mutation_catalog import AREAS, EQUIVALENT, HAND, Area  # noqa: E402
from mutation_mutants import Mutant, generate, resolve_hand, sample  # noqa: E402
from results_md import write_section  # noqa: E402

RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "mutation"
LOG = ROOT / "benchmarks" / "mutation_log.jsonl"
COMMAND = "python benchmarks/mutation.py"
#: Kept out of the scratch copy: environments, caches, state a run leaves behind.
IGNORED = (".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", ".pagefault", ".langgraph_api",
           ".cache", "*.egg-info", "docs", ".ipynb_checkpoints")
#: Every process a run starts carries this variable (with the run's id), so that any left behind by a
#: timed-out run can be found and stopped. Not PAGEFAULT_*: the test servers drop those.
MARKER = "MUTATION_CHECK_RUN"
GOAL = 0.90


@dataclass
class Outcome:
    """What one mutant's test run came to: ``status`` is killed, timeout, survived, equivalent or error."""

    mutant: Mutant
    status: str
    seconds: float
    detail: str = ""


def digest(root: Path, mutant: Mutant) -> str:
    """What a logged outcome of ``mutant`` depends on: the mutated file and the test files run against it."""
    h = hashlib.sha256((root / mutant.file).read_bytes())
    for test in mutant.tests:
        h.update(b"\x00" + (root / test.split("::")[0]).read_bytes() + test.encode())
    return h.hexdigest()[:16]


def file_digest(root: Path, path: str) -> str:
    """One file's share of an outcome's key: the mutated file, or the test file whose failure killed it."""
    return hashlib.sha256((root / path).read_bytes()).hexdigest()[:16]


def killer(mutant: Mutant, detail: str) -> str | None:
    """The test file whose failure (or collection error) killed ``mutant``, read off the outcome's first failure
    line; None when the line names none of the mutant's test files (a crash, say)."""
    for prefix in ("FAILED ", "ERROR "):
        if detail.startswith(prefix):
            path = detail[len(prefix):].split("::")[0].split(" ")[0]
            if path in {t.split("::")[0] for t in mutant.tests}:
                return path
    return None


def still_holds(root: Path, mutant: Mutant, entry: dict) -> bool:
    """Whether a logged outcome holds for the tree at ``root``.

    Any outcome holds while the mutated file and every one of the area's test files are unchanged. A kill
    also holds, whatever else changed in the tests, while the mutated file and the test file that failed are
    unchanged: tests added beside it can only kill more, never revive a mutant. A survivor needs the whole
    test set unchanged, since a new test may be what kills it."""
    if entry.get("digest") == digest(root, mutant):
        return True
    if entry.get("status") != "killed" or entry.get("source") != file_digest(root, mutant.file):
        return False
    path = entry.get("killer")
    if not path or path != killer(mutant, entry.get("detail", "")):
        return False
    return bool(entry.get("killer_digest") == file_digest(root, path))


def log_outcome(root: Path, outcome: Outcome) -> None:
    """Append ``outcome`` to the per-mutant log, with the digests that say when it still holds (``still_holds``)."""
    m = outcome.mutant
    entry = {"id": m.id, "digest": digest(root, m), "source": file_digest(root, m.file), "area": m.area,
             "origin": m.origin, "file": m.file, "line": m.line, "function": m.function,
             "description": m.description, "status": outcome.status, "seconds": round(outcome.seconds, 1),
             "detail": outcome.detail}
    path = killer(m, outcome.detail) if outcome.status == "killed" else None
    if path:
        entry |= {"killer": path, "killer_digest": file_digest(root, path)}
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def logged_outcomes(root: Path, mutants: list[Mutant]) -> dict[str, Outcome]:
    """The outcomes in the log that still hold for the tree at ``root`` (``still_holds``; the last entry of a
    mutant wins; an equivalent's status follows today's reviewed list). A kept entry written before the log
    carried the per-file digests is written again with them, so a later change to other test files keeps it."""
    if not LOG.exists():
        return {}
    by_id = {m.id: m for m in mutants}
    found: dict[str, Outcome] = {}
    upgrade: dict[str, Outcome] = {}
    for line in LOG.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a kill
        m = by_id.get(entry.get("id"))
        if m is None or not still_holds(root, m, entry):
            continue
        status = entry["status"]
        if status in ("survived", "equivalent"):
            status = "equivalent" if m.id in EQUIVALENT else "survived"
        found[m.id] = Outcome(m, status, float(entry["seconds"]), entry.get("detail", ""))
        if "source" in entry:
            upgrade.pop(m.id, None)
        else:
            upgrade[m.id] = found[m.id]
    for outcome in upgrade.values():
        log_outcome(root, outcome)
    return found


def all_mutants(root: Path, areas: list[Area], cap: int | None) -> list[Mutant]:
    """Hand-chosen mutants first, then the generated ones, area by area, in a fixed order."""
    keys = {a.key for a in areas}
    out = [resolve_hand(root, h) for h in HAND if h.area in keys]
    for area in areas:
        generated = [m for file, functions in area.functions.items()
                     for m in generate(root, area.key, file, functions, area.tests)]
        out += sample(generated, cap)
    return out


class Scratch:
    """A copy of the repository in a temporary directory, where one mutant at a time is applied, and the
    warm test runner (``mutation_worker.py``) started there."""

    def __init__(self, root: Path) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="pagefault-mutation-"))
        self.repo = self.dir / "repo"
        self._copy_stable(root)
        self.run_id = uuid.uuid4().hex
        self.env = {**os.environ, "PYTHONPATH": str(self.repo), "PYTHONDONTWRITEBYTECODE": "1",
                    MARKER: self.run_id}
        self.worker: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self.last_output = ""

    def _copy_stable(self, root: Path, settle: float = 20.0, tries: int = 10) -> None:
        """Copy ``root``, then again until the package and the tests read the same as a moment later: the
        tree is shared with people editing it, and a copy taken halfway through an edit (or during
        someone's own experiment on a file) is not the code to test."""
        for _ in range(tries):
            shutil.rmtree(self.repo, ignore_errors=True)
            shutil.copytree(root, self.repo, ignore=shutil.ignore_patterns(*IGNORED), symlinks=True)
            time.sleep(settle)
            if _digest(root) == _digest(self.repo):
                return
            print("the tree changed while it was copied; copying again", flush=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        sys.exit(f"mutation: the tree kept changing for {tries} copies; try again when it is quiet")

    def check_import(self) -> str:
        """Where the copy's interpreter imports pagefault from; exits unless it is the copy."""
        got = subprocess.run([sys.executable, "-c", "import pagefault; print(pagefault.__file__)"], cwd=self.repo,
                             env=self.env, capture_output=True, text=True, timeout=300)
        where = got.stdout.strip()
        if got.returncode or not where.startswith(str(self.repo)):
            sys.exit(f"mutation: the scratch copy's pagefault is not the one imported ({where or got.stderr.strip()})")
        return where

    def start_worker(self) -> None:
        self.worker = subprocess.Popen([sys.executable, str(self.repo / "benchmarks" / "mutation_worker.py")],
                                       cwd=self.repo, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        if self._message(600) != {"ready": True}:
            sys.exit("mutation: the test runner did not start")

    def _message(self, timeout: float) -> dict | None:
        """The worker's next line, as JSON; None when none came within ``timeout`` seconds."""
        assert self.worker is not None and self.worker.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.worker.stdout], [], [], left)[0]:
                return None
            chunk = os.read(self.worker.stdout.fileno(), 65536)
            if not chunk:
                sys.exit("mutation: the test runner exited")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def pytest(self, tests: tuple[str, ...], timeout: float) -> tuple[int | None, float, str]:
        """Run ``tests`` in the copy: (exit code or None on timeout, seconds, the first failure's line)."""
        assert self.worker is not None and self.worker.stdin is not None
        out = self.dir / "run.log"
        began = time.monotonic()
        self.worker.stdin.write(json.dumps({"tests": list(tests), "out": str(out)}).encode() + b"\n")
        self.worker.stdin.flush()
        started = self._message(60)
        if not started:
            sys.exit("mutation: the test runner did not start a run")
        done = self._message(timeout)
        code: int | None = done["code"] if done else None
        if done is None:  # interrupt it (pytest tears its fixtures down on SIGINT), then kill it
            for sig, wait in ((signal.SIGINT, 30), (signal.SIGKILL, 30)):
                try:
                    os.killpg(started["pid"], sig)
                except ProcessLookupError:
                    pass
                if self._message(wait) is not None:
                    break
        self.sweep()
        self.last_output = out.read_text(errors="replace") if out.exists() else ""
        return code, time.monotonic() - began, _first_failure(self.last_output)

    def sweep(self) -> None:
        """Stop any process this run started that outlived its test run (found by ``MARKER``), but the worker."""
        needle = f"{MARKER}={self.run_id}".encode()
        keep = {os.getpid(), self.worker.pid if self.worker else -1}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) in keep:
                continue
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    os.kill(int(entry.name), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                continue

    def close(self) -> None:
        if self.worker is not None:
            if self.worker.stdin is not None:
                self.worker.stdin.close()
            try:
                self.worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.worker.kill()
                self.worker.wait()
        self.worker = None
        self.sweep()
        shutil.rmtree(self.dir, ignore_errors=True)


def _digest(root: Path) -> dict[str, bytes]:
    """The source files the check reads (package, tests, benchmarks), by path."""
    return {str(f.relative_to(root)): f.read_bytes() for d in ("pagefault", "tests", "benchmarks")
            for f in sorted((root / d).rglob("*.py")) if "__pycache__" not in f.parts}


def _first_failure(out: str) -> str:
    lines = out.splitlines()
    for prefix in ("FAILED ", "ERROR ", "Timeout"):
        for line in lines:
            if line.startswith(prefix):
                return line[:200]
    return (lines[-1] if lines else "")[:200]


def run_mutant(scratch: Scratch, mutant: Mutant, timeout: float) -> Outcome:
    path = scratch.repo / mutant.file
    original = path.read_bytes()
    path.write_bytes(mutant.apply(original))
    try:
        code, seconds, detail = scratch.pytest(mutant.tests, timeout)
    finally:
        path.write_bytes(original)
    if code is None:
        return Outcome(mutant, "timeout", seconds, f"no result within {timeout:.0f} s")
    if code == 0:
        return Outcome(mutant, "equivalent" if mutant.id in EQUIVALENT else "survived", seconds)
    if code in (1, 2, 3):  # tests failed, or failed to collect (e.g. the mutant broke an import), or crashed
        return Outcome(mutant, "killed", seconds, detail)
    return Outcome(mutant, "error", seconds, f"pytest exit code {code}: {detail}")


def table(outcomes: list[Outcome], areas: list[Area]) -> tuple[str, dict[str, float]]:
    """The markdown table, per area and in total, and the generated kill-or-equivalent rate per area."""
    rows = ["| area | hand-chosen killed / total | generated: killed | survived | equivalent | total "
            "| killed or equivalent | kill rate (killed / non-equivalent) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    rates: dict[str, float] = {}
    groups = [(a.title, [o for o in outcomes if o.mutant.area == a.key]) for a in areas]
    groups.append(("**all**", outcomes))
    for title, group in groups:
        hand = [o for o in group if o.mutant.origin == "hand"]
        gen = Counter("killed" if o.status == "timeout" else o.status for o in group if o.mutant.origin == "generated")
        total = sum(gen.values())
        ok = gen["killed"] + gen["equivalent"]
        live = total - gen["equivalent"]
        rate = ok / total if total else 1.0
        rates[title] = rate
        kill = f"{gen['killed'] / live:.1%}" if live else "-"
        hand_killed = sum(o.status in ("killed", "timeout") for o in hand)
        rows.append(f"| {title} | {hand_killed} / {len(hand)} | {gen['killed']} | {gen['survived']} "
                    f"| {gen['equivalent']} | {total} | {rate:.1%} | {kill} |")
    return "\n".join(rows), rates


def report(outcomes: list[Outcome], areas: list[Area], command: str, minutes: float, cap: int | None,
           resumed: int = 0) -> str:
    body, rates = table(outcomes, areas)
    timeouts = [o for o in outcomes if o.status == "timeout"]
    survivors = [o for o in outcomes if o.status in ("survived", "error")]
    hand_missed = [o for o in outcomes if o.mutant.origin == "hand" and o.status not in ("killed", "timeout")]
    lines = [
        "## Mutation check (issue 22)",
        "",
        f"Command: `{command}` ("
        + (f"{resumed} outcomes kept from the log of a run cut short, the rest run now; " if resumed else "one run, ")
        + f"{minutes:.0f} min on 2 shared cores; mutants one at a time, each in a scratch "
        "copy of the repository, the area's test files run with `pytest -x`). Not in the default test command.",
        "",
        "Hand-chosen mutants stand for regressions we know matter (each with the tests that must kill it); generated "
        "ones are every comparison swap, `and`/`or` swap, `not` removed, boolean or number constant changed, `return` "
        "of a constant, statement deleted inside an `if` and element removed from a list, tuple or dict display, in "
        "the named functions of each area (`benchmarks/mutation_catalog.py`)"
        + (f", at most {cap} per area" if cap is not None else "") + ". A timeout counts as killed; "
        "\"equivalent\" are survivors reviewed by hand and shown to change no behaviour (the list and each reason "
        "are in `mutation_catalog.EQUIVALENT`).",
        "",
        body,
        "",
        f"Goal: every hand-chosen mutant killed, and at least {GOAL:.0%} of generated mutants killed or equivalent in "
        "each area: " + ("met." if not hand_missed and all(r >= GOAL for r in rates.values()) else "**not met**."),
    ]
    if timeouts:
        lines += ["", f"Timeouts (counted as killed): {len(timeouts)}: "
                  + "; ".join(f"`{o.mutant.id}` {o.mutant.file}:{o.mutant.function}" for o in timeouts) + "."]
    if hand_missed:
        lines += ["", "Hand-chosen mutants not killed:"]
        lines += [f"- `{o.mutant.id}` {o.mutant.regression} ({o.status})" for o in hand_missed]
    if survivors:
        lines += ["", "Surviving generated mutants (not yet killed by a test nor shown equivalent):"]
        lines += [f"- `{o.mutant.id}` {o.mutant.file}:{o.mutant.line} `{o.mutant.function}`: "
                  f"{o.mutant.description}" + (f" ({o.detail})" if o.status == "error" else "")
                  for o in survivors if o.mutant.origin == "generated"]
    lines += ["", "Scope (what is mutated, and what is left out on purpose):", "",
              *[f"- {line}" for line in _scope_lines()]]
    return "\n".join(lines)


def _scope_lines() -> list[str]:
    import mutation_catalog

    doc = mutation_catalog.__doc__ or ""
    items = doc.split("Scope limits, on purpose:\n", 1)[-1].strip().split("\n- ")
    return [" ".join(item.removeprefix("- ").split()) for item in items if item.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--area", action="append", choices=[a.key for a in AREAS],
                        help="only this area (repeatable; default: all)")
    parser.add_argument("--max-generated", type=int, default=None,
                        help="at most this many generated mutants per area, spread evenly (default: all)")
    parser.add_argument("--hand-only", action="store_true", help="only the hand-chosen mutants")
    parser.add_argument("--mutant", action="append", help="only the mutant with this id (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--no-write", action="store_true", help="print the table, do not write RESULTS.md")
    parser.add_argument("--resume", action="store_true",
                        help="keep the logged outcomes that still match the tree, run only the other mutants")
    parser.add_argument("--timeout-factor", type=float, default=3.0,
                        help="a mutant's run times out after this many times the area's clean run, plus 60 s")
    args = parser.parse_args()

    areas = [a for a in AREAS if not args.area or a.key in args.area]

    def chosen(root: Path) -> list[Mutant]:
        mutants = all_mutants(root, areas, args.max_generated)
        if args.hand_only:
            mutants = [m for m in mutants if m.origin == "hand"]
        if args.mutant:
            mutants = [m for m in mutants if m.id in set(args.mutant)]
        missing = sorted({t for m in mutants for t in m.tests if not (root / t.split("::")[0]).exists()})
        if missing and not args.list:
            sys.exit(f"mutation: test files not found: {', '.join(missing)}")
        return mutants

    if args.list:
        mutants = chosen(ROOT)
        for m in mutants:
            print(f"{m.id}  {m.area:<10} {m.origin:<9} {m.file}:{m.line} {m.function}: {m.description}")
        counts = Counter((m.area, m.origin) for m in mutants)
        print("\n" + ", ".join(f"{a} {o}: {n}" for (a, o), n in sorted(counts.items())))
        return

    began = time.monotonic()
    scratch = Scratch(ROOT)
    outcomes: list[Outcome] = []
    done: dict[str, Outcome] = {}
    try:
        mutants = chosen(scratch.repo)  # from the copy: the spans are those of the files the tests run on
        done = logged_outcomes(scratch.repo, mutants) if args.resume else {}
        if not args.resume and LOG.exists():
            LOG.unlink()
        outcomes = [done[m.id] for m in mutants if m.id in done]
        todo = [m for m in mutants if m.id not in done]
        print(f"scratch copy {scratch.repo}; pagefault imported from {scratch.check_import()}"
              + (f"; {len(done)} outcomes kept from the log, {len(todo)} to run" if args.resume else ""), flush=True)
        scratch.start_worker()
        timeouts: dict[tuple[str, ...], float] = {}
        for tests in dict.fromkeys(m.tests for m in todo):
            code, seconds, detail = scratch.pytest(tests, 1800)
            if code != 0:
                print(scratch.last_output[-6000:])
                sys.exit(f"mutation: the tests fail without any mutant ({detail}); fix them first")
            timeouts[tests] = args.timeout_factor * seconds + 60
            print(f"clean run of {len(tests)} test file(s): {seconds:.0f} s", flush=True)
        for n, m in enumerate(todo, len(done) + 1):
            o = run_mutant(scratch, m, timeouts[m.tests])
            outcomes.append(o)
            log_outcome(scratch.repo, o)
            print(f"[{n}/{len(mutants)}] {o.status:<10} {o.seconds:5.0f}s {m.id} {m.area} {m.file}:{m.line} "
                  f"{m.function}: {m.description}" + (f" -- {o.detail}" if o.status != "survived" and o.detail else ""),
                  flush=True)
    finally:
        scratch.close()
    minutes = (time.monotonic() - began) / 60
    if done:  # the minutes of the logged outcomes' runs are their tests' seconds: what resuming saved
        minutes += sum(o.seconds for o in done.values()) / 60
    stale = sorted(set(EQUIVALENT) - {o.mutant.id for o in outcomes if o.status == "equivalent"}
                   & {o.mutant.id for o in outcomes})
    if stale:
        print(f"reviewed as equivalent but killed now (drop them from EQUIVALENT): {', '.join(stale)}")
    command = " ".join([COMMAND, *sys.argv[1:]])
    text = report(outcomes, areas, command, minutes, args.max_generated, len(done))
    print("\n" + text)
    if not args.no_write and not args.mutant:
        write_section(RESULTS, SECTION, text)
        print(f"\nwrote the {SECTION} section of {RESULTS.relative_to(ROOT)}; per-mutant log in {LOG.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
