"""What keeps the unit tier a unit tier: ``unit_tier_only()`` refuses a subprocess, a Postgres connection and
a network socket (a connection or a server), naming where a test that needs one belongs: ``tests/integration``
(engines, processes), ``tests/server`` (``langgraph dev``) or ``tests/project`` (tools run over the repository).
``tests/unit/conftest.py`` holds every unit test's setup, call and teardown in it."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

_NETWORK = (socket.AF_INET, socket.AF_INET6)


class NotAUnitTest(AssertionError):
    """A unit test reached a server, a subprocess or Postgres."""


def _refuse(what: str):
    def refused(*args, **kwargs):
        raise NotAUnitTest(f"a unit test started {what}: move it to tests/integration, tests/server or tests/project")

    return refused


def _inet_only(method, what: str):
    def guarded(sock: socket.socket, *args, **kwargs):
        if sock.family in _NETWORK:
            _refuse(what)()
        return method(sock, *args, **kwargs)

    return guarded


@contextmanager
def unit_tier_only() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(subprocess.Popen, "__init__", _refuse("a subprocess"))
        mp.setattr(os, "fork", _refuse("a process (os.fork)"))
        postgres = _refuse("a Postgres connection")
        mp.setattr(psycopg, "connect", postgres)  # libpq's own sockets: not seen by the socket guard
        mp.setattr(psycopg.Connection, "connect", classmethod(postgres))
        mp.setattr(psycopg.AsyncConnection, "connect", classmethod(postgres))
        mp.setattr(socket.socket, "connect", _inet_only(socket.socket.connect, "a network connection"))
        mp.setattr(socket.socket, "bind", _inet_only(socket.socket.bind, "a server (a bound network socket)"))
        yield
