"""The fixed part of every request: the tokens a new user's request carries before any message.

    python benchmarks/fixed_part.py            # print the table
    python benchmarks/fixed_part.py --write    # also write it into benchmarks/RESULTS.md

It measures through the code the graph runs at a turn's first step (``AgentSetup.open_run`` and
``MemoryRun.main_context``, the main context ``window.fixed_part.check_window`` judges), for an OpenAI
model name (``openai:gpt-4o-mini``, counted with o200k by ``pagefault.models.tokens``), on a fresh data
directory: the system prompt (pagefault's instructions, the statistics and date lines), the core blocks
of a new user, the learned procedures (none yet) and each memory tool's schema as it is sent
(``convert_to_openai_tool``). Nothing is sent anywhere; it takes a few seconds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from results_md import write_section  # noqa: E402

from pagefault import Context, PagefaultState, open_embedded  # noqa: E402
from pagefault.window.fixed_part import FixedPart  # noqa: E402
from pagefault.window.setup import AgentSetup  # noqa: E402

MODEL = "openai:gpt-4o-mini"
#: Before issue 23: what the issue's report measured with a real ChatOpenAI (system prompt and core
#: blocks were not given apart there), and this script's method run on the tree before the cut (670acea).
REPORTED = {"tool schemas": 1082, "archival_memory_search": 293, "procedure_update": 203, "fixed part": 1540}
BEFORE = {"system prompt": 311, "core blocks": 68, "procedures": 0, "core_memory_append": 128,
          "core_memory_replace": 117, "archival_memory_insert": 186, "archival_memory_search": 294,
          "conversation_search": 154, "procedure_update": 202, "tool schemas": 1081, "fixed part": 1460}


def measure() -> dict[str, int]:
    """Tokens of each part of a new user's fixed part, and each memory tool's schema, by name."""
    setup = AgentSetup()
    with tempfile.TemporaryDirectory(prefix="pagefault-fixed-") as data_dir:
        ctx = Context(user_id="new-user", data_dir=data_dir, model=MODEL)
        with open_embedded(data_dir) as memory:
            run = setup.open_run(ctx, memory.store, {"configurable": {"thread_id": "fixed-part"}})
            main = run.main_context(PagefaultState(), setup.tool_schemas)
            each = {s["function"]["name"]: run.counter.count_tools([s]) for s in setup.tool_schemas}
            run.services.turn_over()
    fixed = FixedPart.of(main)
    assert sum(each.values()) == fixed.tools, (each, fixed)
    return {"system prompt": fixed.system, "core blocks": fixed.core, "procedures": fixed.procedures, **each,
            "tool schemas": fixed.tools, "fixed part": fixed.total}


def table(after: dict[str, int], target: float) -> str:
    def cell(figures: dict[str, int], key: str) -> str:
        return f"{figures[key]:,}" if key in figures else "–"

    rows = [f"| {'**' + k + '**' if k in ('tool schemas', 'fixed part') else k} | {cell(REPORTED, k)} | "
            f"{cell(BEFORE, k)} | {cell(after, k)} |" for k in after]
    need = int(after["fixed part"] / target) + 1
    return "\n".join([
        "## Fixed part of every request (issue 23)",
        "",
        f"Command: `python benchmarks/fixed_part.py --write`. A new user's first request, for `{MODEL}` (o200k tokens, "
        "pagefault's counter), measured through the code the graph runs at a turn's first step. Tool schemas are "
        "counted as sent (`convert_to_openai_tool`, JSON). *Before, reported*: the issue's measurement with a real "
        "`ChatOpenAI`; *before, 670acea*: this script's method on the tree before the cut.",
        "",
        "| part | before, reported | before, 670acea | after |",
        "|---|---|---|---|",
        *rows,
        "",
        "The system prompt now also says when to use each memory tool (for the tools the model has) and gives the "
        "date and time in its last line; the schemas lost their docstrings' line breaks, the `null` alternatives "
        "and defaults, and most argument descriptions (none of their arguments).",
        "",
        f"With `compaction_target` {target:g}, the smallest `context_window` a new user's agent is not refused "
        f"(`WindowTooSmall`) is {need:,} tokens; the same rule would have needed "
        f"{int(BEFORE['fixed part'] / target) + 1:,} before the cut, and nothing checked it. Core blocks and "
        "procedures grow with the user: the check is made when each turn starts.",
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the table into benchmarks/RESULTS.md")
    args = ap.parse_args()
    body = table(measure(), Context().compaction_target)
    print(body)
    if args.write:
        write_section(ROOT / "benchmarks" / "RESULTS.md", "fixed-part", body)


if __name__ == "__main__":
    main()
