"""Queues against a real PostgreSQL (R-Q1–R-Q10)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from service.engine import Engine
from service.errors import (
    Conflict,
    InvalidName,
    InvalidPayload,
    NaiveDatetime,
    NotFound,
    PayloadTooLarge,
    ReservedName,
)
from service.jobs import NewJob
from service.queries.jobs import CLAIM


async def test_enqueue_claim_ack_deletes(engine: Engine) -> None:
    job_id = await engine.enqueue("mail", {"to": "a@example.com"})
    [job] = await engine.claim("mail", "w1", 10)
    assert (job.id, job.attempts, job.worker_id, job.status) == (job_id, 1, "w1", "running")
    assert job.lease_expires_at is not None
    assert await job.ack() is True
    assert await engine.get_job(job_id) is None  # R-Q10: ack deletes by default


async def test_defaults_resolved_and_stamped(engine: Engine) -> None:
    """R-Q2: explicit option > queue row > engine default, stamped on the row."""
    a = await engine.enqueue("q2", {})
    await engine.queues.configure("q2", lease_seconds=7, max_attempts=9, backoff_base_seconds=1)
    b = await engine.enqueue("q2", {})
    c = await engine.enqueue("q2", {}, max_attempts=2)
    ja, jb, jc = [await engine.get_job(i) for i in (a, b, c)]
    assert ja and jb and jc
    assert (ja.lease_seconds, ja.max_attempts, ja.backoff_base_seconds) == (60, 5, 5)
    assert (jb.lease_seconds, jb.max_attempts, jb.backoff_base_seconds) == (7, 9, 1)
    assert jb.backoff_cap_seconds == 3600
    assert (jc.lease_seconds, jc.max_attempts) == (7, 2)


async def test_claim_order_priority_then_run_at_then_id(engine: Engine) -> None:
    now = datetime.now(UTC)
    low_old = await engine.enqueue("o", {"n": 1}, run_at=now - timedelta(seconds=10))
    high = await engine.enqueue("o", {"n": 2}, priority=5)
    low_new = await engine.enqueue("o", {"n": 3}, run_at=now - timedelta(seconds=5))
    low_new2 = await engine.enqueue("o", {"n": 4}, run_at=now - timedelta(seconds=5))
    future = await engine.enqueue("o", {"n": 5}, delay=3600)
    jobs = await engine.claim("o", "w", 10)
    assert [j.id for j in jobs] == [high, low_old, low_new, low_new2]
    assert future not in [j.id for j in jobs]


async def test_claim_spans_priority_levels_past_future_jobs(engine: Engine) -> None:
    """Due work under a level of not-yet-due higher-priority jobs is claimed in claim
    order across levels (R-Q3), and a claim locks only the rows it returns."""
    now = datetime.now(UTC)
    for _ in range(3):
        await engine.enqueue("lv", {}, priority=9, delay=3600)  # a level with nothing due
    p5 = [
        await engine.enqueue("lv", {}, priority=5, run_at=now - timedelta(seconds=s))
        for s in (3, 1)
    ]
    await engine.enqueue("lv", {}, priority=5, delay=3600)
    p0 = [await engine.enqueue("lv", {}, run_at=now - timedelta(seconds=s)) for s in (9, 8, 7)]
    pm = await engine.enqueue("lv", {}, priority=-3, run_at=now - timedelta(seconds=60))
    async with engine.pool.acquire() as claimer, claimer.transaction():
        rows = await claimer.fetch(CLAIM, "lv", "w", 4)
        # Another session sees every other pending row as free.
        free = await engine.pool.fetch(
            "SELECT id FROM pgwake.jobs WHERE queue = 'lv' AND status = 'pending' "
            "FOR UPDATE SKIP LOCKED"
        )
        assert len(free) == 3 + 1 + 1 + 1  # the future ones, one p0 and the p-3 job
    assert sorted(r["id"] for r in rows) == sorted([*p5, *p0[:2]])
    jobs = await engine.claim("lv", "w", 10)
    assert [j.id for j in jobs] == [p0[2], pm]


async def test_enqueue_tx_rollback_and_commit(engine: Engine) -> None:
    async with engine.pool.acquire() as conn:
        tr = conn.transaction()
        await tr.start()
        rolled = await engine.enqueue_tx(conn, "tx", {"a": 1})
        await tr.rollback()
        async with conn.transaction():
            kept = await engine.enqueue_tx(conn, "tx", {"a": 2})
    assert await engine.get_job(rolled) is None
    assert await engine.get_job(kept) is not None


async def test_batch_enqueue_in_order_with_dedupe(engine: Engine) -> None:
    first = await engine.enqueue("b", {"x": 0}, dedupe_key="k1")
    ids = await engine.enqueue_many(
        "b",
        [
            {"x": 1},
            NewJob({"x": 2}, dedupe_key="k1"),
            NewJob({"x": 3}, priority=2),
            NewJob({"x": 4}, dedupe_key="k2"),
            NewJob({"x": 5}, dedupe_key="k2"),
        ],
    )
    assert ids[1] == first and ids[3] == ids[4]
    assert len(set(ids)) == 4  # new, k1 (existing), new, k2 twice
    payloads = [(await engine.get_job(i)).payload["x"] for i in ids]  # type: ignore[union-attr]
    assert payloads == [1, 0, 3, 4, 4]


async def test_two_workers_never_hold_the_same_job(engine: Engine) -> None:
    await engine.enqueue_many("c", [{"i": i} for i in range(200)])
    results = await asyncio.gather(*(engine.claim("c", f"w{n}", 7) for n in range(30)))
    ids = [j.id for batch in results for j in batch]
    assert len(ids) == len(set(ids)) == 200


async def test_fence_refuses_stale_worker(engine: Engine) -> None:
    """R-Q4: a worker whose lease was reclaimed cannot ack or fail the job."""
    await engine.queues.configure("f", lease_seconds=0.2)
    await engine.enqueue("f", {})
    [stale] = await engine.claim("f", "dead-worker", 1)
    await asyncio.sleep(0.3)
    assert await engine.queues.reap_expired() == 1
    [fresh] = await engine.claim("f", "alive", 1)
    assert fresh.attempts == 2
    assert await stale.ack() is False
    assert await stale.retry("late") is False
    assert await stale.heartbeat() is False
    assert await fresh.heartbeat() is True
    assert await fresh.ack() is True


async def test_retry_backoff_and_dead_then_requeue(engine: Engine) -> None:
    await engine.queues.configure("r", backoff_base_seconds=10, backoff_cap_seconds=20)
    job_id = await engine.enqueue("r", {}, max_attempts=2)
    [job] = await engine.claim("r", "w", 1)
    t0 = datetime.now(UTC)
    assert await job.retry("boom") is True
    row = await engine.get_job(job_id)
    assert row and row.status == "pending" and row.last_error == "boom"
    delay = (row.run_at - t0).total_seconds()
    assert 9 <= delay <= 21  # uniform in [base, min(cap, base*2^1)] = [10, 20]
    await engine.pool.execute("UPDATE pgwake.jobs SET run_at = now() WHERE id = $1", job_id)
    [job] = await engine.claim("r", "w", 1)
    assert await job.retry("boom again") is True
    row = await engine.get_job(job_id)
    assert row and row.status == "dead" and row.last_error == "boom again"
    assert [j.id for j in await engine.queues.list_dead("r")] == [job_id]
    await engine.queues.requeue_dead(job_id)
    row = await engine.get_job(job_id)
    assert row and row.status == "pending" and row.attempts == 0
    with pytest.raises(Conflict):
        await engine.queues.requeue_dead(job_id)


async def test_reaper_dead_letters_exhausted(engine: Engine) -> None:
    await engine.queues.configure("x", lease_seconds=0.1)
    job_id = await engine.enqueue("x", {}, max_attempts=1)
    await engine.claim("x", "w", 1)
    await asyncio.sleep(0.2)
    assert await engine.queues.reap_expired() == 1
    row = await engine.get_job(job_id)
    assert row and row.status == "dead" and "lease expired" in (row.last_error or "")


async def test_dedupe_safe_under_concurrency(engine: Engine) -> None:
    ids = await asyncio.gather(
        *(engine.enqueue("d", {"n": n}, dedupe_key="same") for n in range(20))
    )
    assert len(set(ids)) == 1
    n = await engine.pool.fetchval("SELECT count(*) FROM pgwake.jobs WHERE queue = 'd'")
    assert n == 1
    [job] = await engine.claim("d", "w", 1)
    assert await engine.enqueue("d", {}, dedupe_key="same") == job.id  # running counts too
    await job.ack()
    assert await engine.enqueue("d", {}, dedupe_key="same") != job.id


async def test_cancel_is_compare_and_set(engine: Engine) -> None:
    a = await engine.enqueue("k", {})
    await engine.cancel(a)
    assert await engine.get_job(a) is None
    with pytest.raises(NotFound):
        await engine.cancel(a)
    b = await engine.enqueue("k", {})
    await engine.claim("k", "w", 1)
    with pytest.raises(Conflict) as info:
        await engine.cancel(b)
    assert info.value.extra["current"] == {"status": "running"}


async def test_retention_keeps_done_and_prunes(engine: Engine) -> None:
    await engine.queues.configure("keep", retention_seconds=0.1)
    job_id = await engine.enqueue("keep", {})
    [job] = await engine.claim("keep", "w", 1)
    await job.ack()
    row = await engine.get_job(job_id)
    assert row and row.status == "done" and row.finished_at
    await asyncio.sleep(0.2)
    assert await engine.queues.prune_done() == 1
    assert await engine.get_job(job_id) is None


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda e: e.enqueue("", {}), InvalidName),
        (lambda e: e.enqueue("a b", {}), InvalidName),
        (lambda e: e.enqueue("x" * 129, {}), InvalidName),
        (lambda e: e.enqueue("__outbox:x", {}), ReservedName),
        (lambda e: e.enqueue("q", {"v": float("nan")}), InvalidPayload),
        (lambda e: e.enqueue("q", {"v": float("inf")}), InvalidPayload),
        (lambda e: e.enqueue("q", {"v": "a\x00b"}), InvalidPayload),
        (lambda e: e.enqueue("q", {"v": "\ud800"}), InvalidPayload),
        (lambda e: e.enqueue("q", [1, 2]), InvalidPayload),
        (lambda e: e.enqueue("q", {"v": "x" * (1024 * 1024)}), PayloadTooLarge),
        (lambda e: e.enqueue("q", {}, run_at=datetime(2030, 1, 1)), NaiveDatetime),
    ],
)
async def test_bad_input_raises_and_stores_nothing(engine: Engine, call, error) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error):
        await call(engine)
    assert await engine.pool.fetchval("SELECT count(*) FROM pgwake.jobs") == 0
