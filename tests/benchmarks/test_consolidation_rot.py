"""The rot benchmark, small (benchmarks/rot.py): facts restated and changed through the real graph;
validity and consolidation give the current and the dated values where plain search does not."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import rot  # noqa: E402


def test_the_scenario_is_fixed_by_its_seed():
    a, b = rot.generate(30), rot.generate(30)
    assert [m.text for m in a.mentions] == [m.text for m in b.mentions]
    other = rot.generate(30, seed=1)
    assert other.mentions[0].text != a.mentions[0].text or len(other.mentions) != len(a.mentions)
    timeline = a.timeline()
    assert len(timeline) == 60 and all(1 <= len(ms) <= 10 for ms in timeline.values())
    assert all(ms[i].at <= ms[i + 1].at for ms in timeline.values() for i in range(len(ms) - 1))
    assert all(m.restated == (i > 0 and m.value == ms[i - 1].value) for ms in timeline.values() for i, m in enumerate(ms))


def test_rot_smoke():
    r = rot.run(subjects=12, locomo_conversations=0, progress=False)
    assert r["turns"] == r["mentions"] + 2 * len(rot.generate(12).notes)
    assert r["validity"]["current"] == 100.0 and r["consolidated"]["current"] == 100.0
    assert r["validity"]["as_of"] == 100.0 and r["consolidated"]["as_of"] == 100.0
    assert r["baseline"]["current"] < 80.0
    assert r["merged_pct"] == 100.0
    assert r["records_after"] == r["records_before"] - r["planted"]
    body = rot.render(r, "python benchmarks/rot.py --subjects 12 --locomo 0")
    assert "| current-value accuracy@1 |" in body and "| as-of accuracy@1 |" in body
