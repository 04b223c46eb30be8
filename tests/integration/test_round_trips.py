"""Round trips and session hygiene of the shared pool (issue 6).

pgwake's own statements release their pool connection without asyncpg's reset
query (one round trip and one transaction less per call); anything else done on
a pooled connection (the caller's code, an event handler) is still reset, so no
LISTEN, session ``SET`` or advisory lock leaks to the next borrower.

Statements are counted with asyncpg's query logger on a one-connection pool:
every statement the client sends on that connection is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio
import asyncpg
import pytest

from service.engine import Engine
from service.events import Event
from service.identity import instance_id
from service.leader import Leader
from service.listener import Listener
from service.queries import jobs as jobs_q
from service.queries import schedules as schedules_q
from service.wakeup import WakeHub

FACTS = {"facts_version": 1, "scenario": "s"}


class Recorder:
    """The statements sent on the pool's one connection, whitespace-folded."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def __call__(self, record: asyncpg.connection.LoggedQuery) -> None:
        self.queries.append(" ".join(record.query.split()))

    def resets(self) -> int:
        return sum("RESET ALL" in q for q in self.queries)


@pytest.fixture
async def one_conn_engine(clean_db: str) -> AsyncIterator[tuple[Engine, Recorder]]:
    """An engine whose pool holds exactly one connection, with a query recorder on it."""
    rec = Recorder()
    async with Engine(clean_db, migrate=False, pool_min=1, pool_max=1) as eng:
        async with eng.pool.acquire() as conn:
            conn.add_query_logger(rec)
        await eng.enqueue("warm-up", {})  # asyncpg introspects the array types once
        rec.queries.clear()
        yield eng, rec


async def _session_state(engine: Engine) -> tuple[list[str], int, str]:
    """(channels listened on, advisory locks held, application_name) of the pool's
    connection as the next borrower finds it."""
    async with engine.pool.acquire() as conn:
        row = await conn.fetchrow(
            """SELECT ARRAY(SELECT pg_listening_channels()) AS channels,
                      (SELECT count(*) FROM pg_locks
                       WHERE locktype = 'advisory' AND pid = pg_backend_pid()) AS locks,
                      current_setting('application_name') AS app"""
        )
    assert row is not None
    return list(row["channels"]), int(row["locks"]), str(row["app"])


async def test_single_enqueue_is_one_statement(one_conn_engine: tuple[Engine, Recorder]) -> None:
    """Issue 6 / R-Q1: ``enqueue`` sends its INSERT and nothing else (no BEGIN/COMMIT,
    no reset query on release), and its NOTIFY still wakes a listener (R-Q9)."""
    engine, rec = one_conn_engine
    heard: list[str] = []
    got = asyncio.Event()
    assert engine.dsn is not None
    listener = await asyncpg.connect(engine.dsn)
    try:
        await listener.add_listener("pgwake", lambda *args: (heard.append(str(args[3])), got.set()))
        ids = [await engine.enqueue("rt", {"i": i}) for i in range(5)]
        ids.append(await engine.enqueue("rt", {"i": 5}, dedupe_key="k"))
        assert await engine.enqueue("rt", {"i": 6}, dedupe_key="k") == ids[-1]  # R-Q7
        await asyncio.wait_for(got.wait(), 5)
    finally:
        await listener.close()
    enqueue = " ".join(jobs_q.ENQUEUE_ONE.split())
    find = " ".join(jobs_q.FIND_LIVE_BY_DEDUPE.split())
    # Six inserts; the dedupe hit is an insert that conflicts plus one lookup.
    assert rec.queries == [enqueue] * 7 + [find], rec.queries
    assert len(set(ids)) == 6
    assert "job:rt" in heard


async def test_callers_session_state_is_still_reset(
    one_conn_engine: tuple[Engine, Recorder],
) -> None:
    """The caller's LISTEN, session SET and advisory lock on a pooled connection are
    reset on release, also when pgwake statements ran on that connection since."""
    engine, rec = one_conn_engine
    async with engine.pool.acquire() as conn:
        await conn.execute("LISTEN caller_channel")
        await conn.execute("SET application_name = 'leaky'")
        await conn.fetchval("SELECT pg_advisory_lock(42)")
    await engine.enqueue("rt", {})  # a pgwake statement in between
    assert rec.resets() == 1
    # The pool's own shortcuts are the caller's code too.
    await engine.pool.fetchval("SELECT pg_advisory_lock(43)")
    assert rec.resets() == 2
    assert await _session_state(engine) == ([], 0, "")


async def test_event_handler_session_state_is_reset(
    one_conn_engine: tuple[Engine, Recorder],
) -> None:
    """A dispatch that ran a handler resets its connection (the handler may have set
    session state); a dispatch that found nothing due sends no reset."""
    engine, rec = one_conn_engine

    @engine.on_event
    async def handler(event: Event, conn: asyncpg.Connection) -> None:
        await conn.execute("SELECT set_config('application_name', 'handler', false)")

    assert await engine.events.dispatch_once() == 0
    assert rec.resets() == 0
    await engine.events.store("rt", datetime(2020, 1, 1, tzinfo=UTC), FACTS)
    assert await engine.events.dispatch_once() == 1
    assert rec.resets() == 1
    assert await _session_state(engine) == ([], 0, "")


async def test_idle_leader_iteration_is_one_transaction(
    one_conn_engine: tuple[Engine, Recorder],
) -> None:
    """R-S6/R-S9, issue 6: an idle leader's iteration (renew the lease, tick, read the
    next deadline) is one transaction; outside transactions it sends only the lock's
    acquisition and release, and no reset query."""
    engine, rec = one_conn_engine
    await engine.schedules.schedule("nightly", "0 3 * * *", "idle", {})
    leader = Leader(engine.queues, engine.locks, engine.hub, engine.health, owner=instance_id())
    rec.queries.clear()
    stop = anyio.Event()
    task = asyncio.get_running_loop().create_task(leader.run_schedules(stop))
    for _ in range(3):  # three iterations: the first, then two woken by "schedules"
        while rec.queries.count("COMMIT;") < 1 + _:
            await asyncio.sleep(0.01)
        engine.hub.notify("schedules")
    stop.set()
    engine.hub.notify("schedules")
    await asyncio.wait_for(task, 10)

    outside: list[str] = []
    depth = 0
    for query in rec.queries:
        if query.startswith("BEGIN"):
            depth += 1
        elif query.startswith(("COMMIT", "ROLLBACK")):
            depth -= 1
        elif depth == 0:
            outside.append(query)
    iterations = rec.queries.count("COMMIT;")
    assert iterations >= 3
    assert [q.split()[0] for q in outside] == ["INSERT", "DELETE"], outside  # lock, unlock
    next_fire = " ".join(schedules_q.NEXT_FIRE_IN.split())
    assert rec.queries.count(next_fire) == iterations
    assert rec.resets() == 0


class SilentProxy:
    """A TCP relay to the test server whose open connections can be frozen: bytes are
    dropped in both directions and the sockets stay open (no FIN, no RST), as when a
    route disappears. Connections opened after :meth:`freeze` relay normally."""

    def __init__(self, host: str, port: int) -> None:
        """``host``: a name or address, or a directory holding the server's Unix socket
        (as in a ``?host=/dir`` URL, e.g. the embedded PostgreSQL's)."""
        self.host, self.port = host, port
        self.frozen: set[int] = set()
        self.conns: list[tuple[int, asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.host.startswith("/"):
            path = f"{self.host}/.s.PGSQL.{self.port}"
            up_reader, up_writer = await asyncio.open_unix_connection(path)
        else:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        n = len(self.conns)
        self.conns.append((n, writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while data := await src.read(65536):
                if n not in self.frozen:
                    dst.write(data)
                    await dst.drain()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def freeze(self) -> None:
        self.frozen.update(n for n, _, _ in self.conns)

    async def close(self) -> None:
        for _, a, b in self.conns:
            a.close()
            b.close()
        if self.server is not None:
            self.server.close()


async def test_listener_probe_finds_a_silently_dead_connection(engine: Engine) -> None:
    """R-X1: a LISTEN connection that goes silent (no FIN, no RST: the termination
    callback never fires) is found by the probe and replaced; NOTIFY reaches the
    hub again. The probe is what the 15 s keepalive keeps; here it is shortened."""
    assert engine.dsn is not None
    url = urlsplit(engine.dsn)
    query = dict(parse_qsl(url.query))
    upstream = query.pop("host", None) or url.hostname or "127.0.0.1"
    proxy = SilentProxy(upstream, url.port or int(query.pop("port", 5432)))
    port = await proxy.start()
    dsn = urlunsplit(
        url._replace(netloc=f"{url.username}@127.0.0.1:{port}", query=urlencode(query))
    )
    hub = WakeHub()
    listener = Listener(dsn, hub, keepalive_seconds=0.2, probe_timeout_seconds=0.5)
    task = asyncio.get_running_loop().create_task(listener.run())
    try:
        await asyncio.wait_for(listener.connected.wait(), 10)
        proxy.freeze()

        async def replaced() -> None:
            while not (listener.reconnects >= 1 and listener.is_connected):
                await asyncio.sleep(0.02)

        await asyncio.wait_for(replaced(), 15)
        waiter = hub.arm("ping")
        await engine.pool.execute("NOTIFY pgwake, 'ping'")
        assert await waiter.wait(10)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await proxy.close()
