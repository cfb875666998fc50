"""A data directory or file with the immutable attribute (``chattr +i``): nobody can write it, root
neither, whatever its mode bits say. The one-line problem (``pagefault doctor`` and every command)
names the attribute, not the mode bits, which looked writable and sent the reader the wrong way.

Setting the attribute needs CAP_LINUX_IMMUTABLE (root) and a file system that keeps it (ext4, xfs,
btrfs): without them this test fails, saying so, rather than pass without checking anything.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pagefault.maintenance.doctor import data_dir_problems


@contextmanager
def attribute(path: Path, flag: str) -> Iterator[None]:
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.fail("no chattr (e2fsprogs) on this machine: cannot set the attribute under test", pytrace=False)
    done = subprocess.run([chattr, f"+{flag}", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"chattr +{flag} {path} failed ({done.stderr.strip()}): this test needs root and a file "
                    "system that keeps attributes", pytrace=False)
    try:
        yield
    finally:
        subprocess.run([chattr, f"-{flag}", str(path)], check=True)


def test_an_immutable_data_directory_is_named_as_immutable(tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    with attribute(data, "i"):
        [problem] = data_dir_problems(str(data))
    assert problem.startswith(f"{data}: the data directory has the immutable attribute (chattr +i; lsattr shows it)")
    assert "chattr -i clears it" in problem and "mode" in problem and "drwx" not in problem, problem


def test_an_immutable_data_file_is_named_as_immutable(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    checkpoints = data / "checkpoints.sqlite"
    checkpoints.write_bytes(b"")  # an empty SQLite database
    checkpoints.chmod(0o644)
    with attribute(checkpoints, "i"):
        [problem] = data_dir_problems(str(data))
    assert problem == (f"{checkpoints}: has the immutable attribute (chattr +i; lsattr shows it), so no user can "
                       "write it whatever its mode; chattr -i clears it"), problem
