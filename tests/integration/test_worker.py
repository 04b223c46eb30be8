"""The worker loop's drain path (service.worker): its own connection for claims and
acks, a fixed set of slots for the jobs in flight, and the jobs claimed but not yet
started handed back when the loop fails. Every wait here waits for a state, with a
generous bound; nothing asserts how long something took."""

from __future__ import annotations

import asyncio
from collections import Counter

import asyncpg

from service import db
from service.engine import Engine
from service.jobs import Job
from service.queries import jobs as q

WAIT = 20  # seconds: a bound for states that arrive in milliseconds


async def _until(check, timeout: float = WAIT) -> None:  # type: ignore[no-untyped-def]
    """Poll ``await check()`` until it is true (a state, not a duration)."""
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.02)


async def _count(url: str, sql: str, *args: object) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval(sql, *args))
    finally:
        await conn.close()


def _metric(engine: Engine, name: str, queue: str) -> float:
    value = engine.metrics.registry.get_sample_value(f"{name}_total", {"queue": queue})
    return value or 0.0


async def test_fast_handlers_drain_exactly_once_with_exact_counters(engine: Engine) -> None:
    """Handlers that never wait: every job runs once, is acked (deleted), and the
    claimed and acked counters both say so."""
    n = 500
    seen: Counter[int] = Counter()
    done = asyncio.Event()

    @engine.handler("fast", concurrency=10)
    async def handle(job: Job) -> None:
        seen[job.id] += 1
        if len(seen) == n:
            done.set()

    ids = await engine.enqueue_many("fast", [{"i": i} for i in range(n)])
    async with engine.runner(webhooks=False):
        await asyncio.wait_for(done.wait(), WAIT)
        await _until(lambda: _empty(engine))
    assert sorted(seen) == sorted(ids) and set(seen.values()) == {1}
    assert _metric(engine, "pgwake_jobs_claimed", "fast") == n
    assert _metric(engine, "pgwake_jobs_acked", "fast") == n


async def _empty(engine: Engine) -> bool:
    return not await engine.pool.fetchval("SELECT count(*) FROM pgwake.jobs")


async def test_concurrency_bounds_the_jobs_claimed(engine: Engine) -> None:
    """With every slot busy the worker claims nothing more: 3 slots, 10 jobs, 3 running."""
    started: list[int] = []
    three = asyncio.Event()
    go = asyncio.Event()

    @engine.handler("slots", concurrency=3)
    async def handle(job: Job) -> None:
        started.append(job.id)
        if len(started) == 3:
            three.set()
        await go.wait()

    await engine.enqueue_many("slots", [{"i": i} for i in range(10)])
    async with engine.runner(webhooks=False):
        await asyncio.wait_for(three.wait(), WAIT)
        stats = await engine.queues.stats("slots")
        assert (stats["running"], stats["pending"]) == (3, 7)
        assert len(started) == 3  # each running job is in a handler: none waits for a slot
        go.set()
        await _until(lambda: _empty(engine))
    assert len(started) == len(set(started)) == 10


async def test_claims_and_acks_use_the_workers_own_connection(engine: Engine) -> None:
    """The worker drains while the pool cannot lend it a connection (the test holds
    every one): its claims and acks run on a connection of its own, which closes
    when the runner stops."""
    url = engine.dsn
    assert url is not None
    n = 50
    handled = asyncio.Event()
    count = 0

    @engine.handler("own", concurrency=5)
    async def handle(job: Job) -> None:
        nonlocal count
        count += 1
        if count == n:
            handled.set()

    await engine.enqueue_many("own", [{"i": i} for i in range(n)])
    claimers = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND query = $1 AND pid <> pg_backend_pid()"
    )
    async with engine.runner(webhooks=False):
        held = [await engine.pool.acquire() for _ in range(engine.pool.get_max_size())]
        try:
            await asyncio.wait_for(handled.wait(), WAIT)
            # The last acks linger a moment on the worker's connection, not the pool.
            await _until(lambda: _count(url, "SELECT count(*) = 0 FROM pgwake.jobs"))
            assert await _count(url, claimers, q.CLAIM) == 1
        finally:
            for conn in held:
                await engine.pool.release(conn)

    async def closed() -> bool:
        return await _count(url, claimers, q.CLAIM) == 0

    await _until(closed)


async def test_engine_on_an_application_pool_claims_on_that_pool(clean_db: str) -> None:
    """Handed the application's pool (no dsn), pgwake opens no connection of its own."""
    pool = await db.create_pool(clean_db)
    try:
        async with Engine(pool=pool, poll_seconds=5.0, migrate=False) as engine:
            assert await engine.worker_connection() is None
            done = asyncio.Event()
            seen: list[int] = []

            @engine.handler("shared", concurrency=4)
            async def handle(job: Job) -> None:
                seen.append(job.id)
                if len(seen) == 20:
                    done.set()

            await engine.enqueue_many("shared", [{"i": i} for i in range(20)])
            async with engine.runner(webhooks=False):
                await asyncio.wait_for(done.wait(), WAIT)
                await _until(lambda: _empty(engine))
            assert len(set(seen)) == 20
    finally:
        await pool.close()


async def test_jobs_claimed_when_the_loop_fails_go_back_at_once(engine: Engine) -> None:
    """The loop fails right after a claim (a fault planted in its health beat), which
    once left the jobs it had just claimed leased until their 60 s lease expired: now
    they are in the slots' hands, so each is run, or interrupted and handed back with
    its attempt not counted, and the restarted loop runs it. Each runs to its end once."""
    attempts: list[tuple[int, int]] = []
    done = asyncio.Event()

    @engine.handler("fault", concurrency=5)
    async def handle(job: Job) -> None:
        await asyncio.sleep(0)  # the failure reaches the slot here: this job is interrupted
        attempts.append((job.id, job.attempts))
        if len(attempts) == 5:
            done.set()

    ids = await engine.enqueue_many("fault", [{"i": i} for i in range(5)])
    engine.health.register("worker:fault", engine.poll_seconds)
    engine.health.inject_fault("worker:fault", RuntimeError("planted"))
    async with engine.runner(webhooks=False):
        await asyncio.wait_for(done.wait(), WAIT)
        assert engine.health.loops["worker:fault"].faults == 0  # it fired
        await _until(lambda: _empty(engine))
    assert sorted(attempts) == [(i, 1) for i in sorted(ids)]
