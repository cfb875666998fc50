"""The texts the poisoning guard is trained and measured on, each with a fixed train/held-out split.

Shared by ``benchmarks/injection.py`` (measures) and ``training/guard/train_scorer.py`` (fits the
learned scorer), so both see exactly the same split. Every corpus comes from an installed package or
from files in this machine's shared data, so the split is reproducible offline.

Injection corpora (PyPI packages, exact versions pinned in the ``test`` extra):

- ``bastioncorpus`` 0.6.0 (MIT): injections in 7 categories and 5 languages, plus benign
  look-alike "traps"; split in halves within each (label, category).
- ``jailbreak-corpus-mini-py`` 0.1.0 (MIT), ``nullsec-promptinject`` 0.1.0 (MIT),
  ``agent-injection-bench`` 0.1.0 (MIT; the injected tool results) and ``bastionprobe`` 0.19.0
  (MIT; its own payloads): held out whole.
- ``raucle-bench`` 0.1.0 (MIT): a prompt-injection detection benchmark, 125 attacks in six classes
  (direct and indirect injection, jailbreak, data exfiltration, tool abuse, evasion) and 40 benign
  prompts; held out whole. Added later than the others, and chosen before the guard's third round
  of design work, so that round has a corpus it was never tuned against. Its data files are only in
  the source distribution (the wheel has none), so the loader reads that archive, fetched once with
  ``pip download`` into a cache and checked against a fixed SHA-256; nothing in it is run.

Benign corpora: LoCoMo (dialogue turns, observations, session summaries; split by conversation),
the project's seed documents (French prose about agent memory; split by file) and the docstrings of
a fixed list of Python standard-library modules (technical prose full of "instructions", "system",
"ignore"; split by module; the texts are those of the running Python, 3.11 here).

A held-out text identical (after normalisation) to a training text is dropped from the held-out
set: bastionprobe, for one, reuses some bastioncorpus rows.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import subprocess
import sys
import tarfile
import warnings
from dataclasses import dataclass
from importlib import import_module, resources
from pathlib import Path
from typing import Callable, Iterable

from shared_data import require

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
LOCOMO = SHARED / "data" / "locomo" / "locomo10.json"
SEEDS = SHARED / "seeds"
TRAIN, HELD_OUT = "train", "held-out"
CANARY = "PF-CANARY-7731"
#: Standard-library modules whose docstrings serve as benign document text (fixed, so reproducible).
STDLIB_MODULES = (
    "argparse", "asyncio", "base64", "calendar", "collections", "concurrent.futures", "configparser",
    "contextlib", "csv", "dataclasses", "datetime", "decimal", "difflib", "email.message", "enum",
    "fractions", "functools", "getpass", "gettext", "glob", "gzip", "hashlib", "heapq", "hmac", "html.parser",
    "http.client", "http.server", "imaplib", "importlib", "inspect", "ipaddress", "itertools", "json", "locale",
    "logging", "mailbox", "mimetypes", "multiprocessing", "os", "pathlib", "pdb", "pickle", "platform",
    "pprint", "queue", "random", "re", "sched", "secrets", "selectors", "shelve", "shlex", "shutil",
    "smtplib", "socket", "sqlite3", "ssl", "statistics", "string", "subprocess", "tarfile", "tempfile",
    "textwrap", "threading", "timeit", "tokenize", "trace", "traceback", "typing", "unittest", "urllib.parse",
    "urllib.request", "uuid", "warnings", "weakref", "webbrowser", "xml.dom.minidom", "zipfile", "zoneinfo",
)


@dataclass(frozen=True)
class Sample:
    corpus: str
    key: str
    text: str
    malicious: bool
    split: str  # TRAIN or HELD_OUT
    kind: str = ""


def _h(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def _alternate(items: list, key: Callable[[object], str]) -> Iterable[tuple[object, str]]:
    for i, item in enumerate(sorted(items, key=lambda x: _h(key(x)))):
        yield item, TRAIN if i % 2 == 0 else HELD_OUT


def bastion() -> list[Sample]:
    from bastioncorpus import load_corpus

    groups: dict[tuple, list] = {}
    for r in load_corpus():
        groups.setdefault((r.label, r.category), []).append(r)
    out = []
    for rows in groups.values():
        for r, split in _alternate(rows, lambda r: "bastioncorpus:" + r.id):
            out.append(Sample("bastioncorpus", r.id, r.stripped(), r.is_malicious, split, r.category))
    return out


def jailbreak_mini() -> list[Sample]:
    from jailbreak_corpus_mini import load_corpus

    return [Sample("jailbreak-corpus-mini-py", f.id, f.prompt, True, HELD_OUT, f.category) for f in load_corpus()]


def nullsec() -> list[Sample]:
    from nullsec_promptinject.payloads import PAYLOADS

    return [Sample("nullsec-promptinject", str(i), p.text, True, HELD_OUT, p.category) for i, p in enumerate(PAYLOADS)]


def agent_injection_bench() -> list[Sample]:
    from aib.dataset import load

    path = resources.files("aib") / "data" / "attacks.jsonl"
    return [Sample("agent-injection-bench", a.id, a.injected, True, HELD_OUT, a.family) for a in load(str(path))]


def bastionprobe() -> list[Sample]:
    from bastionprobe.corpus import load_payloads

    return [Sample("bastionprobe", p.id, p.render(CANARY), True, HELD_OUT, p.category) for p in load_payloads()]


RAUCLE_VERSION = "0.1.0"
RAUCLE_SDIST = f"raucle_bench-{RAUCLE_VERSION}.tar.gz"
RAUCLE_SHA256 = "e79a6f97b1517118efad9b69de019a5ad7aad886d4435b0fea6724d0f3f4a65e"
#: Where the sdist is kept once fetched (``PAGEFAULT_BENCH_CACHE`` overrides).
BENCH_CACHE = Path(os.environ.get("PAGEFAULT_BENCH_CACHE", Path.home() / ".cache" / "pagefault-bench"))


def _raucle_sdist() -> Path:
    path = BENCH_CACHE / RAUCLE_SDIST
    if not path.exists():
        BENCH_CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                        "--dest", str(BENCH_CACHE), f"raucle-bench=={RAUCLE_VERSION}"], check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != RAUCLE_SHA256:
        raise RuntimeError(f"{path}: SHA-256 {digest}, expected {RAUCLE_SHA256}")
    return path


def raucle_bench() -> list[Sample]:
    """raucle-bench's datasets/*.jsonl: every non-benign row is an injection, ``benign`` rows are benign."""
    out = []
    with tarfile.open(_raucle_sdist()) as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile() and re.fullmatch(
            rf"raucle_bench-{RAUCLE_VERSION}/datasets/[a-z_]+\.jsonl", m.name)), key=lambda m: m.name)
        for m in members:
            for line in tar.extractfile(m).read().decode("utf-8").splitlines():
                if line.strip():
                    r = json.loads(line)
                    out.append(Sample("raucle-bench", r["id"], r["prompt"], r["attack_class"] != "benign",
                                      HELD_OUT, r["attack_class"]))
    return out


def locomo(path: Path = LOCOMO) -> list[Sample]:
    convs = json.loads(require(path, "LoCoMo (locomo10.json), the benign side of the corpora").read_text())
    out = []
    for conv, split in _alternate(convs, lambda c: "locomo:" + c["sample_id"]):
        sid = conv["sample_id"]
        for k, turns in conv["conversation"].items():
            if k.startswith("session_") and isinstance(turns, list):
                out += [Sample("locomo", f"{sid}:{t['dia_id']}", t["text"], False, split, "turn") for t in turns]
        for sess, by_speaker in (conv.get("observation") or {}).items():
            for speaker, facts in by_speaker.items():
                out += [Sample("locomo", f"{sid}:{sess}:{speaker}:{i}", f[0], False, split, "observation")
                        for i, f in enumerate(facts)]
        for sess, summary in (conv.get("session_summary") or {}).items():
            out.append(Sample("locomo", f"{sid}:{sess}", summary, False, split, "session summary"))
    return out


def _paragraphs(text: str, min_chars: int = 40) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", text) if len(p.strip()) >= min_chars]


def seeds(folder: Path = SEEDS) -> list[Sample]:
    files = sorted(folder.glob("*.txt")) if folder.is_dir() else []
    out = []
    for f, split in _alternate(files, lambda f: "seeds:" + f.name):
        out += [Sample("seed documents", f"{f.name}:{i}", p, False, split, "paragraph")
                for i, p in enumerate(_paragraphs(f.read_text()))]
    return out


def stdlib_docs() -> list[Sample]:
    out = []
    for name, split in _alternate(list(STDLIB_MODULES), lambda n: "stdlib:" + n):
        with warnings.catch_warnings():  # typing.io and the like warn when touched
            warnings.simplefilter("ignore", DeprecationWarning)
            module = import_module(name)
            docs = [inspect.getdoc(module) or ""]
            for attr in sorted(vars(module)):
                obj = getattr(module, attr)
                if not attr.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj)) and \
                        getattr(obj, "__module__", None) == module.__name__:
                    docs.append(inspect.getdoc(obj) or "")
        seen: set[str] = set()
        for i, p in enumerate(p for d in docs for p in _paragraphs(d)):
            if p not in seen:
                seen.add(p)
                out.append(Sample("python stdlib docstrings", f"{name}:{i}", p, False, split, "paragraph"))
    return out


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def all_samples() -> list[Sample]:
    """Every corpus, with held-out texts that repeat a training text left out."""
    samples = (bastion() + jailbreak_mini() + nullsec() + agent_injection_bench() + bastionprobe()
               + raucle_bench() + locomo() + seeds() + stdlib_docs())
    train = {_norm(s.text) for s in samples if s.split == TRAIN}
    return [s for s in samples if s.split == TRAIN or _norm(s.text) not in train]


def split(samples: list[Sample], which: str) -> list[Sample]:
    return [s for s in samples if s.split == which]
