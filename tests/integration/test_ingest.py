"""``pagefault ingest``: files into archival memory with file + offset provenance and a progress bar."""

from __future__ import annotations

import json
import os

from pagefault.cli.main import main
from pagefault.maintenance.documents import split_passages_at
from pagefault.stores.scope import Scope
from pagefault.stores.services import MemoryServices


def _book(chapters: int, secret: str) -> str:
    paras = [f"Chapter {i}. The caravan rested at oasis number {i}; the water there tasted of iron and dust."
             for i in range(chapters)]
    paras.insert(chapters // 2, secret)
    return "\n\n".join(paras) + "\n"


def test_ingest_records_file_and_offset_and_search_finds_the_passage(tmp_path, capsys):
    data_dir = str(tmp_path / "pf")
    secret = "At the ninth well the guide Yusuf buried the silver astrolabe beneath a leaning tamarisk."
    a, b = tmp_path / "caravan.txt", tmp_path / "ledger.txt"
    a.write_text(_book(120, secret), encoding="utf-8")
    b.write_text("\n\n".join(f"Ledger line {i}: forty sacks of saffron, paid in copper." for i in range(30)),
                 encoding="utf-8")

    assert main(["ingest", str(a), str(b), "--user", "ana", "--data-dir", data_dir, "--max-chars", "600"]) == 0
    out, err = capsys.readouterr()
    lines = [json.loads(x) for x in out.splitlines()]
    expected_a = split_passages_at(a.read_text(), 600)
    expected_b = split_passages_at(b.read_text(), 600)
    assert lines[0] == {"file": str(a), "passages": len(expected_a), "new": len(expected_a)}
    assert lines[1] == {"file": str(b), "passages": len(expected_b), "new": len(expected_b)}
    total = len(expected_a) + len(expected_b)
    assert lines[2] == {"files": 2, "passages": total, "new": total, "archival_records": total}
    assert "ingesting" in err and "passage" in err  # the tqdm bar went to stderr

    archival = MemoryServices.open(data_dir).archival
    scope = Scope("ana")
    assert archival.count(scope) == total
    assert archival.count(Scope("bob")) == 0
    hits = archival.search(scope, "Where did Yusuf bury the silver astrolabe?", 3)
    top = hits[0][0]
    assert secret in top.text
    i = next(k for k, (_, p) in enumerate(expected_a) if secret in p)
    assert top.provenance.source == "document"
    assert top.provenance.message_id == f"{a}#p{i}"
    assert top.provenance.offset == expected_a[i][0]
    text = a.read_text()
    assert text[top.provenance.offset:].startswith(top.text.split("\n\n")[0])
    assert top.provenance.offset == text.index(top.text.split("\n\n")[0])

    # Every passage's offset points at its own text in its own file.
    for path, expected in ((a, expected_a), (b, expected_b)):
        got = archival.index.collection.get(where={"message_id": {"$in": [f"{path}#p{k}" for k in range(len(expected))]}},
                                            include=["metadatas", "documents"])
        assert sorted(m["offset"] for m in got["metadatas"]) == [o for o, _ in expected]

    # Ingesting again adds nothing.
    assert main(["ingest", str(a), "--user", "ana", "--data-dir", data_dir, "--max-chars", "600", "-q"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out.splitlines()[0]) == {"file": str(a), "passages": len(expected_a), "new": 0}
    assert err == ""
    assert archival.count(scope) == total


def test_ingest_fails_before_writing_when_a_file_is_missing_or_binary(tmp_path, capsys):
    data_dir = str(tmp_path / "pf")
    good = tmp_path / "good.txt"
    good.write_text("A perfectly readable line about tides.\n", encoding="utf-8")
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\xff\xfe\x00bad")
    assert main(["ingest", str(good), str(tmp_path / "nope.txt"), "--data-dir", data_dir]) == 2
    assert "nope.txt: no such file" in capsys.readouterr().err
    assert main(["ingest", str(good), str(binary), "--data-dir", data_dir]) == 2
    assert "not UTF-8 text" in capsys.readouterr().err
    assert not os.path.exists(data_dir)  # nothing was opened, let alone written
