"""Every notebook in notebooks/ runs top to bottom without a cell error.

The notebooks carry their own asserts, so executing them is a test of the API they show. They run
on a kernel of *this* interpreter (a kernelspec written to a temp dir whose argv is
``sys.executable``), so the result does not depend on which ``python3`` kernel happens to be
installed globally, in a temp working directory, with no ``PAGEFAULT_*`` settings inherited.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
KERNEL_NAME = "pagefault-test-python"
CELL_TIMEOUT = 120


def test_notebooks_exist():
    assert NOTEBOOKS, f"no notebooks in {REPO / 'notebooks'}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_committed_without_outputs(path: Path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, f"{path.name}: clear the outputs of cells {dirty} before committing"


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kernelspec that launches ipykernel on the interpreter running the tests."""
    kernels = tmp_path_factory.mktemp("kernels")
    spec_dir = kernels / KERNEL_NAME
    spec_dir.mkdir()
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Python ({sys.executable})",
        "language": "python",
    }))
    return kernels


def _kernel_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGEFAULT_")}
    env.update({
        "IPYTHONDIR": str(tmp / "ipython"),         # no writes to ~/.ipython
        "JUPYTER_PLATFORM_DIRS": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",      # quiets debugpy's frozen-modules warning
        "ANONYMIZED_TELEMETRY": "False",
        "LANGSMITH_TRACING": "false",
        "MPLBACKEND": "Agg",
    })
    return env


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path, kernel_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    nb = nbformat.read(path, as_version=4)
    # First, prove the kernel is this interpreter (and so sees this checkout's pagefault).
    nb.cells.insert(0, nbformat.v4.new_code_cell(
        f"import sys\nassert sys.executable == {sys.executable!r}, sys.executable"))
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))

    km = AsyncKernelManager(kernel_name=KERNEL_NAME,
                            kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dir)]),
                            connection_file=str(tmp_path / "kernel-connection.json"))
    client = NotebookClient(nb, km=km, kernel_name=KERNEL_NAME, timeout=CELL_TIMEOUT, allow_errors=False,
                            resources={"metadata": {"path": str(workdir)}})
    try:
        client.execute(env=_kernel_env(tmp_path))
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as e:
        pytest.fail(f"{path.name} failed:\n{e}", pytrace=False)
    finally:
        # nbclient only shuts down kernels it created itself; this one is ours to stop.
        if client.kc is not None:
            client.kc.stop_channels()
        if km.has_kernel:
            run_sync(km.shutdown_kernel)(now=True)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors
