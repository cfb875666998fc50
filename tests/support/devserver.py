"""A real ``langgraph dev`` server for the tests that drive pagefault through ``langgraph_sdk``.

``dev_server(workdir, env=..., config="langgraph.json")`` starts the CLI on a free loopback port in
``workdir`` with a copy of the repository's config whose relative paths are made absolute
(``langgraph dev`` keeps its state in ``./.langgraph_api`` of its working directory, so this keeps
the repo tree clean and a developer's own dev-server state out of the test), waits for ``/ok`` and
stops the whole process group afterwards. Its log is kept for the assertions and for failures.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 90.0
LOG_TAIL_CHARS = 12000
#: Variables of the developer's environment that must not reach a test server.
_PRIVATE = ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGGRAPH_API_KEY", "OPENAI_API_KEY")


class DevServer:
    def __init__(self, proc: subprocess.Popen, url: str, log_path: Path, data_dir: Path, workdir: Path):
        self.proc = proc
        self.url = url
        self.log_path = log_path
        self.data_dir = data_dir
        self.workdir = workdir

    def log(self, tail: int | None = LOG_TAIL_CHARS) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as e:
            return f"(no server log: {e})"
        text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # the server logs in colour
        return text if tail is None or len(text) <= tail else "...\n" + text[-tail:]

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the server runs in its own process group
        except ProcessLookupError:
            return
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_config(workdir: Path, name: str = "langgraph.json") -> Path:
    """The repo's config ``name`` with its relative graph and dependency paths made absolute."""
    config = json.loads((REPO / name).read_text())

    def absolute(p: str) -> str:
        return str((REPO / p).resolve()) if not os.path.isabs(p) and (p.startswith(".") or "/" in p) else p

    graphs = {}
    for gid, spec in config.get("graphs", {}).items():
        if isinstance(spec, dict):
            path, _, var = spec["path"].rpartition(":")
            graphs[gid] = {**spec, "path": f"{absolute(path)}:{var}"}
        else:
            path, _, var = spec.rpartition(":")
            graphs[gid] = f"{absolute(path)}:{var}"
    config["graphs"] = graphs
    config["dependencies"] = [absolute(d) for d in config.get("dependencies", [])]
    if isinstance(config.get("env"), str):
        config["env"] = absolute(config["env"])
    out = workdir / "langgraph.json"
    out.write_text(json.dumps(config, indent=2))
    return out


def server_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PAGEFAULT_")  # a developer's PAGEFAULT_MODEL etc. must not leak in
           and k not in _PRIVATE}
    env.update({
        "PAGEFAULT_DATA_DIR": str(data_dir),
        "PAGEFAULT_MODEL": "offline",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",     # langgraph-cli usage analytics
        "LANGGRAPH_NO_VERSION_CHECK": "true",  # langgraph-api's PyPI "newer version" check
        "LANGSMITH_TRACING": "false",
        "LANGCHAIN_TRACING_V2": "false",
        "ANONYMIZED_TELEMETRY": "False",       # Chroma (pagefault also disables it in code)
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
        "NO_COLOR": "1",
    })
    env.update(extra)
    return env


def _wait_ready(server: DevServer, deadline: float) -> None:
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            pytest.fail(f"`langgraph dev` exited with code {server.proc.returncode} before it was ready.\n"
                        f"--- server log ---\n{server.log()}", pytrace=False)
        try:
            with urllib.request.urlopen(f"{server.url}/ok", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
            last_error = repr(e)
        time.sleep(0.25)
    pytest.fail(f"`langgraph dev` was not ready at {server.url}/ok within {STARTUP_TIMEOUT:.0f}s "
                f"(last error: {last_error}).\n--- server log ---\n{server.log()}", pytrace=False)


@contextmanager
def dev_server(workdir: Path, *, config: str = "langgraph.json", **env: str) -> Iterator[DevServer]:
    """``langgraph dev`` on the repo's ``config``, with pagefault's data under ``workdir`` and ``env`` added."""
    langgraph = Path(sys.executable).with_name("langgraph")
    if not langgraph.exists():
        pytest.fail(f"no `langgraph` executable next to {sys.executable}; install the test extras: "
                    "pip install -e '.[test]'", pytrace=False)
    data_dir = workdir / "pagefault-data"
    port = free_port()
    log_path = workdir / "server.log"
    cmd = [str(langgraph), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port),
           "--config", str(server_config(workdir, config))]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=workdir, env=server_env(data_dir, **env), stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    srv = DevServer(proc, f"http://127.0.0.1:{port}", log_path, data_dir, workdir)
    try:
        _wait_ready(srv, time.monotonic() + STARTUP_TIMEOUT)
        yield srv
    finally:
        srv.stop()


def print_log_on_failure(request: pytest.FixtureRequest, server: DevServer) -> Iterator[None]:
    """For an autouse fixture: print the server log when a test fails."""
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed > failed_before:
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        text = f"\n--- langgraph dev log ({server.log_path}) ---\n{server.log()}\n--- end of server log ---"
        if reporter is not None:
            reporter.write_line(text)
        else:
            print(text, file=sys.stderr)
