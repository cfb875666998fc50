"""The unit tier's guard (``support.unit_tier``, held by ``tests/unit/conftest.py``) refuses what a unit test must not touch."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import psycopg
import pytest
from support.unit_tier import NotAUnitTest


def test_a_subprocess_is_refused():
    with pytest.raises(NotAUnitTest, match="subprocess"):
        subprocess.run([sys.executable, "-c", "pass"])
    with pytest.raises(NotAUnitTest, match="os.fork"):
        os.fork()


def test_postgres_is_refused():
    with pytest.raises(NotAUnitTest, match="Postgres"):
        psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", connect_timeout=1)


def test_network_connections_and_servers_are_refused_and_local_sockets_are_not():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s, pytest.raises(NotAUnitTest, match="network"):
        s.connect(("127.0.0.1", 5432))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s, pytest.raises(NotAUnitTest, match="server"):
        s.bind(("127.0.0.1", 0))
    a, b = socket.socketpair()  # in-process plumbing (asyncio's self-pipe) is not a server
    with a, b:
        a.sendall(b"x")
        assert b.recv(1) == b"x"
