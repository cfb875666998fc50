"""``pagefault doctor`` warns when a data directory holds more records than one embedded process holds
well (``EMBEDDED_RECORD_LIMIT``): a real directory, its records counted from its own files, the limit
lowered through ``diagnose``'s ``record_limit``."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from pagefault.maintenance.doctor import (
    EMBEDDED_RECORD_LIMIT,
    RecordCounts,
    as_json,
    diagnose,
    record_counts,
    report,
    resident_estimate,
    scale_warnings,
)
from pagefault.stores.provenance import Provenance
from pagefault.stores.scope import Scope
from pagefault.stores.services import MemoryServices


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory):
    """A data directory with 3 archival records (two users) and 4 recall entries, written by the stores."""
    path = str(tmp_path_factory.mktemp("scale") / "pf")
    svc = MemoryServices.open(path)
    ana, bo = Scope("ana"), Scope("bo")
    svc.archival.insert_many(ana, [("The copper lantern is in the blue cupboard.", Provenance(source="document")),
                                   ("The orchard was planted in spring.", Provenance(source="document"))])
    svc.archival.insert_many(bo, [("The canoe is kept at the harbour.", Provenance(source="document"))])
    svc.recall.add(ana, "t1", list(enumerate([HumanMessage("Where is the lantern?"), AIMessage("In the cupboard."),
                                              HumanMessage("And the canoe?"), AIMessage("At the harbour.")])), "cp-1")
    MemoryServices.forget(path)
    return path


def _diagnosis(path: str, **limit: int):
    return diagnose(path, database_url="", chroma_url="", **limit)


def test_records_are_counted_from_the_directory_every_user_included(small_dir, tmp_path):
    assert record_counts(small_dir) == RecordCounts(archival=3, recall=4)
    assert record_counts(str(tmp_path / "never-made")) is None


def test_a_directory_past_the_limit_is_a_warning_not_a_problem(small_dir):
    found = _diagnosis(small_dir, record_limit=3)  # 4 recall entries pass 3
    assert found.ok and found.problems == [], found.problems
    [warning] = found.warnings
    assert warning.startswith(f"{small_dir}: 3 archival records and 4 recall entries, past the 3 of either kind")
    gib = resident_estimate(RecordCounts(3, 4)) / 2**30
    assert f"about {gib:,.1f} GiB resident" in warning and "Chroma server" in warning, warning
    assert "\n" not in warning
    text = report(found)
    assert f"warning: {warning}" in text.splitlines()
    assert text.endswith("all reachable; 1 warning(s)") and "problem:" not in text, text
    assert as_json(found)["warnings"] == [warning] and as_json(found)["ok"] is True


def test_a_directory_at_or_under_the_limit_has_no_warning(small_dir):
    for limit in (4, EMBEDDED_RECORD_LIMIT):  # 4 recall entries do not pass 4
        found = _diagnosis(small_dir, record_limit=limit)
        assert found.ok and found.warnings == [], found.warnings
        text = report(found)
        assert "warning:" not in text and text.endswith("all reachable"), text
    assert _diagnosis(small_dir).warnings == []  # the documented limit, EMBEDDED_RECORD_LIMIT
    assert scale_warnings(small_dir, limit=4) == [] and len(scale_warnings(small_dir, limit=2)) == 1


def test_a_setup_whose_vectors_are_on_a_chroma_server_is_not_counted(small_dir):
    """With a Chroma server the vectors do not live in the process; an unreachable one is a problem,
    but the records in the local files are no warning."""
    found = diagnose(small_dir, database_url="", chroma_url="http://127.0.0.1:9", record_limit=1)
    assert found.warnings == []
