"""Through PgBouncer in transaction pooling mode (issue 5, scenario 10).

The test starts its own ``pgbouncer`` (Debian package, installed by ``make test``)
in front of the test database. The pool goes through it with
``statement_cache_size=0``; LISTEN and migrations use the direct connection
(``listen_dsn`` / ``PGWAKE_LISTEN_URL``), as the README says.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from service.engine import Engine
from service.events import Event
from service.jobs import Job
from tests.reliability.support import size, wait_until

FACTS = {"facts_version": 1, "scenario": "pooler"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def pgbouncer(clean_db: str) -> AsyncIterator[tuple[str, Path]]:
    """A transaction-mode PgBouncer in front of the test database: ``(url, log)``."""
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not Path(binary).exists():
        message = "pgbouncer is not installed (make test installs Debian's package)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    target = urlsplit(clean_db)
    if target.hostname is None:
        pytest.skip("PgBouncer needs the test database on TCP (TEST_DATABASE_URL)")
    dbname = target.path.lstrip("/")
    port = _free_port()
    root = Path(tempfile.mkdtemp(prefix="pgwake-pgbouncer-"))
    root.chmod(0o777)  # pgbouncer refuses to run as root: it drops to postgres
    (root / "users.txt").write_text(f'"{target.username}" ""\n')
    (root / "pgbouncer.ini").write_text(
        f"""[databases]
{dbname} = host={target.hostname} port={target.port or 5432} dbname={dbname}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {root / "users.txt"}
pool_mode = transaction
default_pool_size = 4
max_client_conn = 200
ignore_startup_parameters = extra_float_digits
logfile = {root / "pgbouncer.log"}
pidfile = {root / "pgbouncer.pid"}
"""
    )
    for f in root.iterdir():
        f.chmod(0o666)
    args = [binary, str(root / "pgbouncer.ini")]
    if os.geteuid() == 0:
        args[1:1] = ["-u", "postgres"]
    proc = await asyncio.create_subprocess_exec(*args)
    url = urlunsplit(target._replace(netloc=f"{target.username}@127.0.0.1:{port}"))
    try:
        for _ in range(100):
            try:
                conn = await asyncpg.connect(url, statement_cache_size=0)
                await conn.close()
                break
            except (OSError, asyncpg.PostgresError):
                await asyncio.sleep(0.05)
        else:
            raise AssertionError((root / "pgbouncer.log").read_text())
        yield url, root / "pgbouncer.log"
    finally:
        proc.terminate()
        await proc.wait()
        shutil.rmtree(root, ignore_errors=True)


async def test_enqueue_claim_ack_through_pgbouncer(
    pgbouncer: tuple[str, Path], clean_db: str
) -> None:
    url, log = pgbouncer
    n = int(size(500, 5000))
    handled: list[int] = []
    events: list[int] = []
    async with Engine(
        url, listen_dsn=clean_db, statement_cache_size=0, poll_seconds=30, pool_max=8
    ) as engine:
        assert engine.listener is not None and engine.listener.is_connected

        @engine.handler("pooled", concurrency=8)
        async def handler(job: Job) -> None:
            handled.append(job.id)

        @engine.on_event
        async def on_event(event: Event, conn: asyncpg.Connection) -> None:
            events.append(event.id)

        async with engine.runner(webhooks=False):
            ids = await engine.enqueue_many("pooled", [{"n": i} for i in range(n)])
            async with engine.pool.acquire() as conn, conn.transaction():
                ids.append(await engine.enqueue_tx(conn, "pooled", {"tx": True}))
            await engine.schedules.schedule("pooled-every", "@every 1s", "pooled", {"s": 1})
            row, _ = await engine.events.store("pooled", await _soon(engine), FACTS)

            async def all_done() -> bool:
                return set(ids) <= set(handled) and row["id"] in events

            await wait_until(all_done, 30)
            await asyncio.sleep(1.5)  # a schedule fire, woken by NOTIFY over the direct link
    assert len(handled) == len(set(handled))
    assert await _count(clean_db, "SELECT count(*) FROM pgwake.schedule_fires") >= 1
    logins = log.read_text().count("login attempt")
    assert logins >= 2  # the pool really went through the pooler
    print(
        f"\n[pgbouncer] {len(ids)} jobs enqueued, claimed and acked through PgBouncer"
        f" (transaction mode, {logins} client logins); event dispatched; schedule fired"
    )


async def _soon(engine: Engine):  # type: ignore[no-untyped-def]
    return await engine.pool.fetchval("SELECT now() + interval '300 milliseconds'")


async def _count(dsn: str, sql: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval(sql))
    finally:
        await conn.close()
