"""Workers under faults (issue 5, scenarios 1–3): SIGKILL mid-job, long jobs that
heartbeat, retry accounting. Real processes and real time."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from service.engine import Engine
from service.jobs import Job
from tests.reliability.support import processes, size, spawn, wait_until


async def test_sigkilled_worker_job_is_reclaimed_and_its_late_ack_refused(
    engine: Engine, tmp_path: Path
) -> None:
    """Scenario 1: the job runs again after its lease with attempt 2; the dead
    worker's ack (simulated with its lease token) is refused by the owner fence."""
    lease = 2.0
    await engine.queues.configure("rel", lease_seconds=lease)
    job_id = await engine.enqueue("rel", {"n": 1})
    async with processes() as procs:
        victim = await spawn(engine.dsn, "hold", tmp_path, "victim")  # type: ignore[arg-type]
        procs.append(victim)

        async def started() -> bool:
            return bool(victim.lines())

        await wait_until(started, 10)
        held = await engine.get_job(job_id)
        assert held is not None and held.status == "running" and held.attempts == 1
        victim.kill()
        await victim.process.wait()
        killed_at = time.monotonic()

        second_run = asyncio.Event()
        release = asyncio.Event()
        runs: list[tuple[int, float]] = []

        @engine.handler("rel")
        async def handler(job: Job) -> None:
            runs.append((job.attempts, time.monotonic() - killed_at))
            second_run.set()
            await release.wait()

        async with engine.runner(webhooks=False):
            await asyncio.wait_for(second_run.wait(), lease + 10)
            # The dead worker comes back from the grave and acks with its old lease.
            row = await engine.pool.fetchrow("SELECT * FROM pgwake.jobs WHERE id = $1", job_id)
            lease_token = {"worker_id": held.worker_id, "attempts": held.attempts}
            stale = Job.from_row({**dict(row), **lease_token}, engine.queues)
            assert await stale.ack() is False
            assert await stale.retry("late failure") is False
            still = await engine.get_job(job_id)
            assert still is not None and still.status == "running" and still.attempts == 2
            release.set()
            await wait_until(lambda: _gone(engine, job_id), 10)
    assert [a for a, _ in runs] == [2]
    assert lease - 0.5 <= runs[0][1] <= lease + 5, runs  # reclaimed at the lease, not a poll
    print(f"\n[kill] reclaimed {runs[0][1]:.2f}s after SIGKILL (lease {lease}s)")


async def _gone(engine: Engine, job_id: int) -> bool:
    return await engine.get_job(job_id) is None


async def test_long_job_that_heartbeats_runs_exactly_once(engine: Engine) -> None:
    """Scenario 2: lease 5 s, a job of 30 s (8 s in the short run) heartbeating every
    second, two workers competing and the reaper running: one execution."""
    duration = size(8, 30)
    await engine.queues.configure("long", lease_seconds=5)
    job_id = await engine.enqueue("long", {})
    executions: list[int] = []
    beats: list[bool] = []

    async def handler(job: Job) -> None:
        executions.append(job.attempts)
        start = time.monotonic()
        while time.monotonic() - start < duration:
            await asyncio.sleep(1)
            beats.append(await job.heartbeat())

    engine.handler("long", concurrency=2)(handler)
    async with Engine(engine.dsn, migrate=False, poll_seconds=1) as other:  # type: ignore[arg-type]
        other.handler("long", concurrency=2)(handler)
        async with engine.runner(webhooks=False), other.runner(webhooks=False):
            await wait_until(lambda: _gone(engine, job_id), duration + 15, every=0.5)
    assert executions == [1]
    assert beats and all(beats), beats


async def test_retry_accounting_is_exact(engine: Engine) -> None:
    """Scenario 3: a handler that always fails runs exactly max_attempts times, then
    the job is dead with the last error."""
    await engine.queues.configure(
        "acct", backoff_base_seconds=0, backoff_cap_seconds=0, retention_seconds=3600
    )
    three = await engine.enqueue("acct", {"k": 3}, max_attempts=3)
    one = await engine.enqueue("acct", {"k": 1}, max_attempts=1)
    calls: dict[int, list[int]] = {three: [], one: []}

    @engine.handler("acct", concurrency=2)
    async def handler(job: Job) -> None:
        calls[job.id].append(job.attempts)
        raise RuntimeError(f"failure {job.attempts}")

    async def both_dead() -> bool:
        return (
            await engine.pool.fetchval(
                "SELECT count(*) FROM pgwake.jobs WHERE queue = 'acct' AND status = 'dead'"
            )
            == 2
        )

    async with engine.runner(webhooks=False):
        await wait_until(both_dead, 20)
        await asyncio.sleep(1)  # any extra execution would show now
    assert calls == {three: [1, 2, 3], one: [1]}
    dead = {j.id: j for j in await engine.queues.list_dead("acct")}
    assert dead[three].last_error == "RuntimeError: failure 3" and dead[three].attempts == 3
    assert dead[one].last_error == "RuntimeError: failure 1" and dead[one].attempts == 1
