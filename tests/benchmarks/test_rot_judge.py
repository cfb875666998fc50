"""The rot benchmark's model-worded facts check, small (benchmarks/rot.py ``judge_check``): no pattern
reads these statements, so the patterns alone leave stale values on top; the model judge (a real
``ChatOpenAI`` against the scripted server, answering as the scenario's oracle) supersedes them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import rot  # noqa: E402

from pagefault.text.facts import parse_fact  # noqa: E402


def test_model_wordings_are_read_by_no_pattern_and_by_the_oracle():
    s = rot.generate(12, wording="model")
    assert [m.text for m in s.mentions] == [m.text for m in rot.generate(12, wording="model").mentions]
    assert all(parse_fact(m.text) is None for m in s.mentions)
    assert all(rot.model_worded(m.text) == (m.name, m.attribute, m.value) for m in s.mentions)
    assert any(m.restated for m in s.mentions) and any(not m.restated for m in s.mentions[1:])


def test_the_model_judge_column():
    r = rot.judge_check(6, progress=False)
    p, m = r["patterns"], r["model"]
    assert m["current"] == 100.0 and m["as_of"] == 100.0
    assert p["current"] < 100.0 and p["as_of"] < 100.0
    assert 0 < r["judge_calls"] < r["inserts"]  # the first insert had nothing to compare with
    assert "| current-value accuracy@1 |" in rot.render_judge(r)
