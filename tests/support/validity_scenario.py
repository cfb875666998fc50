"""The validity scenario both engine setups run (embedded, and a Chroma server with BM25 in Postgres)."""

from __future__ import annotations

from pagefault.stores import Scope
from pagefault.stores.validity import OPEN
from pagefault.text.facts import parse_date

D = parse_date


def check_validity(archival, scope: Scope) -> None:
    """The scenario both engine setups run: Paris, then Berlin, an older Lyon written late, Paris again."""
    paris = archival.insert(scope, "As of 2024-01-10, Ana's city is Paris.")
    archival.insert(scope, "Ana's favourite tea is mint.")  # another attribute: never superseded by city facts
    berlin = archival.insert(scope, "As of 2024-05-03, Ana's city is Berlin.")
    assert (paris.fact_key, berlin.fact_key) == ("ana|city", "ana|city")

    old = archival.get(scope, paris.id)
    assert old.validity.superseded_by == berlin.id
    assert old.validity.valid_from == D("2024-01-10") and old.validity.valid_to == D("2024-05-03")
    assert old.validity.superseded_at > 0 and not old.validity.current
    assert archival.get(scope, berlin.id).validity.valid_to == OPEN

    def top(query: str, **kw) -> list[str]:
        return [r.text for r, _ in archival.search(scope, query, 5, **kw)]

    # Default search: the superseded fact is gone on both sides of the hybrid (BM25 would match "Paris").
    assert top("Where does Ana live? city Paris") == ["As of 2024-05-03, Ana's city is Berlin.",
                                                    "Ana's favourite tea is mint."]
    assert top("Ana city", as_of=D("2024-03-01"))[0] == "As of 2024-01-10, Ana's city is Paris."
    assert "As of 2024-05-03, Ana's city is Berlin." not in top("Ana city", as_of=D("2024-03-01"))
    assert top("Ana city", as_of=D("2024-06-01"))[0] == "As of 2024-05-03, Ana's city is Berlin."
    assert top("Ana city", as_of=D("2023-06-01")) == []  # nothing was known to be true then
    assert set(top("Ana city", include_superseded=True)) >= {"As of 2024-01-10, Ana's city is Paris.",
                                                            "As of 2024-05-03, Ana's city is Berlin."}

    # A fact learned late but true earlier slots into the timeline instead of superseding the present.
    lyon = archival.insert(scope, "As of 2024-03-01, Ana's city is Lyon.")
    assert [(r.text, r.validity.valid_to, r.validity.superseded_by) for r in archival.timeline(scope, "ana|city")] == [
        ("As of 2024-01-10, Ana's city is Paris.", D("2024-03-01"), lyon.id),
        ("As of 2024-03-01, Ana's city is Lyon.", D("2024-05-03"), berlin.id),
        ("As of 2024-05-03, Ana's city is Berlin.", OPEN, ""),
    ]
    assert top("Ana city", as_of=D("2024-04-01"))[0] == "As of 2024-03-01, Ana's city is Lyon."
    assert top("Ana city")[0] == "As of 2024-05-03, Ana's city is Berlin."

    # The same value stated again later is a restatement, not a contradiction: both stay current.
    again = archival.insert(scope, "As of 2024-07-01, Ana's city is still Berlin.")
    assert [r.id for r in archival.timeline(scope, "ana|city") if r.validity.current] == [berlin.id, again.id]

    # Identical words after the value changed: a new record (the old one keeps its history).
    archival.insert(scope, "As of 2024-08-01, Ana's city is Rome.")
    back = archival.insert(scope, "Ana's city is Paris.", valid_from=D("2024-09-01"))
    assert back.created and back.validity.current and back.validity.valid_from == D("2024-09-01")
    assert top("Ana city")[0] == "Ana's city is Paris."
    assert archival.get(scope, paris.id).validity.valid_to == D("2024-03-01")  # history untouched
