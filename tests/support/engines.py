"""Real engines for the production-path tests: a fresh Postgres database, a Chroma server, a TCP proxy.

- ``fresh_database()``: a new database with a random name on the machine's PostgreSQL (default
  ``postgresql://postgres@127.0.0.1:5432/test``, or ``PAGEFAULT_TEST_POSTGRES``), dropped afterwards,
  so parallel developers and re-runs never share tables. Unreachable Postgres FAILS the test.
- ``ChromaServer``: ``chroma run`` from the venv on a free loopback port, with kill and restart.
- ``TcpProxy``: a loopback port forwarding to Postgres that can be cut and restored, to take the
  database "down" and bring it back without touching the real server.
- ``child(...)``: runs ``tests/replica.py`` in a fresh interpreter, as a separate replica.
"""

from __future__ import annotations

import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

HERE = Path(__file__).resolve().parent
ADMIN_URL = os.environ.get("PAGEFAULT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
CHROMA_START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def admin_connection() -> psycopg.Connection:
    try:
        return psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as e:
        pytest.fail(f"PostgreSQL is required for these tests and is unreachable at {ADMIN_URL}: {e}. "
                    "Start it (pg_ctlcluster <version> main start) or set PAGEFAULT_TEST_POSTGRES.", pytrace=False)


@contextmanager
def fresh_database(prefix: str = "pf") -> Iterator[str]:
    """A new, empty database; yields its URL and drops it (and any session left on it) afterwards."""
    name = f"{prefix}_{secrets.token_hex(6)}"
    with admin_connection() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(ADMIN_URL, name)
    finally:
        with admin_connection() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class ChromaServer:
    """``chroma run`` on a free loopback port; ``kill`` is SIGKILL, ``start`` brings it back on the same
    port and data directory."""

    def __init__(self, path: Path, port: int | None = None) -> None:
        self.path = path
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = path.parent / f"chroma-{self.port}.log"

    def start(self) -> "ChromaServer":
        chroma = Path(sys.executable).with_name("chroma")
        if not chroma.exists():
            pytest.fail(f"no `chroma` executable next to {sys.executable}; pip install -e '.[test]'", pytrace=False)
        env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "NO_COLOR": "1"}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([str(chroma), "run", "--path", str(self.path), "--host", "127.0.0.1",
                                          "--port", str(self.port)], stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        deadline = time.monotonic() + CHROMA_START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"chroma run exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}",
                            pytrace=False)
            try:
                with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        pytest.fail(f"chroma run did not answer on {self.url} within {CHROMA_START_TIMEOUT:.0f}s", pytrace=False)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None


@contextmanager
def chroma_server(path: Path) -> Iterator[ChromaServer]:
    server = ChromaServer(path).start()
    try:
        yield server
    finally:
        server.kill()


class TcpProxy:
    """Forwards a loopback port to ``target``; ``cut()`` closes the port and every open connection,
    ``restore()`` listens again on the same port."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

    def url_for(self, url: str) -> str:
        parts = urlsplit(url)
        auth = f"{parts.username}@" if parts.username else ""
        return urlunsplit((parts.scheme, f"{auth}127.0.0.1:{self.port}", parts.path, parts.query, parts.fragment))

    def restore(self) -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(64)
        self._listener = s
        threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        # poll, not select: in a long test session descriptors pass select's limit of 1024.
        poller, by_fd = select.poll(), {a.fileno(): (a, b), b.fileno(): (b, a)}
        for s in (a, b):
            poller.register(s, select.POLLIN)
        try:
            while True:
                for fd, _ in poller.poll(1000):
                    src, dst = by_fd[fd]
                    data = src.recv(65536)
                    if not data:
                        return
                    dst.sendall(data)
        except (OSError, ValueError, KeyError):
            return
        finally:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def cut(self) -> None:
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def child_env(**settings: str) -> dict[str, str]:
    """The environment of a replica process: none of the developer's PAGEFAULT_* settings, plus ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGEFAULT_")}
    env.update({"ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    env.update(settings)
    return env


def child(*args: str, env: dict[str, str], timeout: float = 120.0) -> subprocess.CompletedProcess:
    """Run ``tests/replica.py`` with ``args`` to the end and return what it printed."""
    return subprocess.run([sys.executable, str(HERE / "replica.py"), *args], env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def spawn(*args: str, env: dict[str, str]) -> subprocess.Popen:
    """Start ``tests/replica.py`` with ``args`` without waiting for it."""
    return subprocess.Popen([sys.executable, str(HERE / "replica.py"), *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
