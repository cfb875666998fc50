"""The pools' check on checkout (``engines.connections.check_pooled``), on the machine's real PostgreSQL:
a connection in use a moment ago is lent without a round trip, yet one the server dropped (a restart,
a cut) is replaced before it is lent, and a database cut off and back is reconnected to at once."""

from __future__ import annotations

import psycopg
import pytest
from psycopg_pool import ConnectionPool
from support.engines import TcpProxy, fresh_database

from pagefault.engines import connections


@pytest.fixture(scope="module")
def engines():
    with fresh_database("pf_pool") as url:
        yield {"url": url}


# --- the pools' check -------------------------------------------------------------------------------

def _counting_checks(monkeypatch) -> list[object]:
    calls: list[object] = []
    real = ConnectionPool.check_connection
    monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(lambda conn: (calls.append(conn), real(conn))))
    return calls


def test_a_connection_in_use_a_moment_ago_is_lent_without_a_round_trip(engines, monkeypatch):
    calls = _counting_checks(monkeypatch)
    pool = ConnectionPool(engines["url"], min_size=1, max_size=1, open=True, check=connections.check_pooled)
    try:
        for _ in range(5):
            with pool.connection() as conn:
                assert conn.execute("SELECT 1").fetchone()[0] == 1
        assert len(calls) == 1, "only its first lending is checked with a round trip"
        monkeypatch.setattr(connections, "CHECK_IDLE_SECONDS", 0.0)  # idle longer than that: checked again
        with pool.connection() as conn:
            conn.execute("SELECT 1")
        assert len(calls) == 2
    finally:
        pool.close()


def test_a_connection_the_server_terminated_is_replaced_before_it_is_lent(engines, monkeypatch):
    calls = _counting_checks(monkeypatch)
    pool = ConnectionPool(engines["url"], min_size=1, max_size=1, open=True, check=connections.check_pooled)
    try:
        with pool.connection() as conn:
            pid = conn.info.backend_pid
        with psycopg.connect(engines["url"], autocommit=True) as admin:  # what a restart does to each session
            assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
            admin.execute("SELECT pg_sleep(0.2)")
        with pool.connection() as conn:
            assert conn.info.backend_pid != pid and conn.execute("SELECT 1").fetchone()[0] == 1
        assert len(calls) >= 2, "the dropped connection was checked (and failed) before being lent"
    finally:
        pool.close()


def test_a_database_cut_off_and_back_is_reconnected_to_at_once(engines):
    proxy = TcpProxy("127.0.0.1", 5432)
    proxy.restore()
    url = proxy.url_for(engines["url"])
    try:
        with connections.postgres_connection(url) as conn:
            assert conn.execute("SELECT 1 AS one").fetchone()["one"] == 1
        proxy.cut()
        with pytest.raises(connections.ServiceUnavailable):
            with connections.postgres_connection(url) as conn:
                conn.execute("SELECT 1")
        proxy.restore()
        with connections.postgres_connection(url) as conn:  # no failed call first
            assert conn.execute("SELECT 1 AS one").fetchone()["one"] == 1
    finally:
        proxy.cut()
        connections.postgres_pool(url).close()
