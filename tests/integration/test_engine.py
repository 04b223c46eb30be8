"""Engine wiring: LISTEN reconnect (R-X1), migrations (R-X3), workers and the
runner's supervision (R-X2, R-E5), NOTIFY-driven wakeups (R-Q9)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from service.engine import Engine
from service.errors import MigrationError
from service.events import Event
from service.jobs import Job
from service.migrate import load_migrations, migrate
from tests.pgserver import unique_name, with_database

FACTS = {"facts_version": 1, "scenario": "s"}


async def test_worker_wakes_on_notify_not_poll(engine: Engine) -> None:
    """R-Q9: a job enqueued while the worker sleeps (5 s poll) is handled at once."""
    done = asyncio.Event()
    handled: list[float] = []

    @engine.handler("wake", concurrency=2)
    async def handle(job: Job) -> None:
        handled.append(time.monotonic())
        done.set()

    async with engine.runner(webhooks=False):
        await asyncio.sleep(0.3)
        t0 = time.monotonic()
        await engine.enqueue("wake", {})
        await asyncio.wait_for(done.wait(), 3)
    assert handled[0] - t0 < 1.0


async def test_worker_sleeps_until_run_at(engine: Engine) -> None:
    done = asyncio.Event()

    @engine.handler("later")
    async def handle(job: Job) -> None:
        done.set()

    async with engine.runner(webhooks=False):
        t0 = time.monotonic()
        await engine.enqueue("later", {}, delay=0.5)
        await asyncio.wait_for(done.wait(), 4)
    assert 0.45 <= time.monotonic() - t0 < 2.0


async def test_worker_retries_failures_then_dead(engine: Engine) -> None:
    await engine.queues.configure("flaky", backoff_base_seconds=0.01, backoff_cap_seconds=0.02)
    calls: list[int] = []

    @engine.handler("flaky")
    async def handle(job: Job) -> None:
        calls.append(job.attempts)
        raise ValueError("nope")

    job_id = await engine.enqueue("flaky", {}, max_attempts=3)
    async with engine.runner(webhooks=False):
        for _ in range(300):
            job = await engine.get_job(job_id)
            if job and job.status == "dead":
                break
            await asyncio.sleep(0.01)
    assert calls == [1, 2, 3]
    job = await engine.get_job(job_id)
    assert job and job.status == "dead" and job.last_error == "ValueError: nope"


async def test_listener_reconnects_and_rereads_deadlines(engine: Engine) -> None:
    """R-X1: after the LISTEN backend is killed, work stored meanwhile is not late."""
    fired = asyncio.Event()

    @engine.on_event
    async def handler(event: Event, conn: asyncpg.Connection) -> None:
        fired.set()

    async with engine.runner(webhooks=False):
        assert engine.listener is not None
        await asyncio.sleep(0.2)
        before = engine.listener.reconnects
        await engine.pool.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid() "
            "AND datname = current_database()"
        )
        t0 = time.monotonic()
        await engine.events.store("x", datetime.now(UTC), FACTS)
        await asyncio.wait_for(fired.wait(), 3)
        assert time.monotonic() - t0 < 2.0
        for _ in range(200):
            if engine.listener.reconnects > before and engine.listener.is_connected:
                break
            await asyncio.sleep(0.01)
        assert engine.listener.reconnects > before and engine.listener.is_connected


async def test_supervisor_restarts_a_crashed_loop(engine: Engine) -> None:
    """R-E5: an exception escaping the dispatcher is logged, counted, and the loop restarts."""
    blew_up = False
    fired = asyncio.Event()

    @engine.on_event
    async def handler(event: Event, conn: asyncpg.Connection) -> None:
        fired.set()

    original = engine.events.dispatch_once

    async def flaky_dispatch() -> int:
        nonlocal blew_up
        if not blew_up:
            blew_up = True
            raise RuntimeError("injected")
        return await original()

    engine.events.dispatch_once = flaky_dispatch  # type: ignore[method-assign]
    async with engine.runner(webhooks=False):
        await engine.events.store("x", datetime.now(UTC), FACTS)
        await asyncio.wait_for(fired.wait(), 5)
        state = engine.health.loops["dispatcher"]
        assert state.restarts == 1 and state.last_error == "RuntimeError: injected"
        for _ in range(200):  # the beat follows the batch's commit
            if state.last_ok is not None:
                break
            await asyncio.sleep(0.01)
        assert state.last_ok is not None


async def test_far_future_event_does_not_block_due_one(engine: Engine) -> None:
    fired: list[str] = []
    done = asyncio.Event()

    @engine.on_event
    async def handler(event: Event, conn: asyncpg.Connection) -> None:
        fired.append(event.event_type)
        done.set()

    await engine.events.store("far", datetime.now(UTC) + timedelta(days=30), FACTS)
    async with engine.runner(webhooks=False):
        await engine.events.store("due", datetime.now(UTC) - timedelta(seconds=1), FACTS)
        await asyncio.wait_for(done.wait(), 3)
    assert fired == ["due"]


async def test_concurrent_migrations_do_not_race(pg_server: str) -> None:
    name = unique_name("pgwake_mig")
    admin = await asyncpg.connect(pg_server)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = with_database(pg_server, name)
        conns = [await asyncpg.connect(url) for _ in range(4)]
        try:
            results = await asyncio.gather(*(migrate(c) for c in conns))
            applied = sorted(v for r in results for v in r)
            assert applied == [m.version for m in load_migrations()]  # each once
            rows = await conns[0].fetch("SELECT version, checksum FROM pgwake.migrations")
            assert {r["version"]: r["checksum"] for r in rows} == {
                m.version: m.checksum for m in load_migrations()
            }
            await conns[0].execute("UPDATE pgwake.migrations SET checksum = 'x'")
            with pytest.raises(MigrationError, match="edited"):
                await migrate(conns[1])
            await conns[0].execute(
                "INSERT INTO pgwake.migrations (version, name, checksum) VALUES (9999, 'f', 'x')"
            )
            with pytest.raises(MigrationError, match="does not ship"):
                await migrate(conns[1])
        finally:
            for c in conns:
                await c.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def test_short_lease_is_reclaimed_on_time_not_at_the_poll(engine: Engine) -> None:
    """R-Q6: a lease shorter than the reaper's sleep (5 s poll here) expires on time."""
    await engine.queues.configure("short", lease_seconds=0.3)
    attempts: dict[int, float] = {}
    second = asyncio.Event()

    @engine.handler("short", concurrency=2)
    async def hang_once(job: Job) -> None:
        attempts[job.attempts] = time.monotonic()
        if job.attempts == 1:
            await asyncio.sleep(3)  # holds the job past its lease, never heartbeats
        else:
            second.set()

    async with engine.runner(webhooks=False):
        await asyncio.sleep(0.2)  # the reaper is asleep on its 5 s poll
        await engine.enqueue("short", {})
        await asyncio.wait_for(second.wait(), 4)
    assert attempts[2] - attempts[1] < 1.5


async def test_stopping_runner_hands_interrupted_jobs_back(engine: Engine) -> None:
    """A job interrupted by shutdown is pending again at once, its attempt not counted."""
    started = asyncio.Event()

    @engine.handler("long")
    async def long(job: Job) -> None:
        started.set()
        await asyncio.sleep(60)

    job_id = await engine.enqueue("long", {})
    async with engine.runner(webhooks=False, grace_seconds=0.2):
        await asyncio.wait_for(started.wait(), 3)
    job = await engine.get_job(job_id)
    assert job and job.status == "pending" and job.attempts == 0 and job.worker_id is None
    [again] = await engine.claim("long", "next", 1)  # due now, not after the 60 s lease
    assert again.id == job_id and again.attempts == 1


async def test_graceful_stop_lets_work_in_hand_finish(engine: Engine) -> None:
    started = asyncio.Event()
    finished: list[int] = []

    @engine.handler("drain", concurrency=4)
    async def slow(job: Job) -> None:
        started.set()
        await asyncio.sleep(0.5)
        finished.append(job.id)

    ids = await engine.enqueue_many("drain", [{"n": n} for n in range(3)])
    async with engine.runner(webhooks=False, grace_seconds=5):
        await asyncio.wait_for(started.wait(), 3)
        late = await engine.enqueue("drain", {"n": "late"}, delay=0.1)
    assert sorted(finished) == sorted(ids)  # finished and acked, not interrupted
    assert [await engine.get_job(i) for i in ids] == [None, None, None]
    job = await engine.get_job(late)
    assert job and job.status == "pending" and job.attempts == 0  # not claimed while stopping


async def test_one_runner_per_engine(engine: Engine) -> None:
    """Two runners on one engine would run every loop twice under the same names."""
    async with engine.runner(webhooks=False):
        with pytest.raises(RuntimeError, match="already running"):
            async with engine.runner(webhooks=False):
                pass
        assert engine.runner_running
    assert not engine.runner_running
    async with engine.runner(webhooks=False):  # and it can start again afterwards
        assert engine.runner_running
