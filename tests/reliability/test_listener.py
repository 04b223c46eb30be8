"""The LISTEN connection killed by ``pg_terminate_backend`` (issue 5, scenario 6)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

from service.engine import Engine
from service.jobs import Job

KILL_LISTENER = """
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid() AND datname = current_database()
"""


async def test_killed_listener_delays_nothing(engine: Engine) -> None:
    """A job enqueued right after the kill is picked up within 2 s; a job that becomes
    due while the listener stays down (killed again at every reconnect for 1.5 s) runs
    no later than its due time plus the reconnect. The safety poll is 30 s, so
    neither can be rescued by polling."""
    picked: dict[str, float] = {}
    async with Engine(engine.dsn, migrate=False, poll_seconds=30) as e:  # type: ignore[arg-type]

        @e.handler("lis")
        async def handler(job: Job) -> None:
            picked[job.payload["name"]] = time.monotonic()

        async with e.runner(webhooks=False):
            assert e.listener is not None
            await asyncio.sleep(0.3)  # every loop asleep on its 30 s poll
            assert await e.pool.fetchval(KILL_LISTENER) >= 1  # ours (and the fixture's)
            t_kill = time.monotonic()
            await e.enqueue("lis", {"name": "right-after"})
            while "right-after" not in picked and time.monotonic() - t_kill < 5:
                await asyncio.sleep(0.005)

            # Keep it down: kill every reconnect for 1.5 s; a job falls due meanwhile.
            due = datetime.now(UTC) + timedelta(seconds=0.5)
            t_due = time.monotonic() + 0.5
            await e.enqueue("lis", {"name": "due-while-down"}, run_at=due)
            kills = 0
            down_until = time.monotonic() + 1.5
            while time.monotonic() < down_until:
                kills += await e.pool.fetchval(KILL_LISTENER)
                await asyncio.sleep(0.01)
            t_up = time.monotonic()
            while (not e.listener.is_connected or "due-while-down" not in picked) and (
                time.monotonic() - t_up < 10
            ):
                await asyncio.sleep(0.005)
            t_reconnected = time.monotonic()
            # Still listening: a kill that lands mid-LISTEN once ended the listener
            # task for good (asyncpg.InternalClientError was not retried).
            assert e.listener.is_connected
    right_after = picked["right-after"] - t_kill
    late = picked["due-while-down"] - max(t_due, t_up)
    vs_due = picked["due-while-down"] - t_due
    assert right_after < 2.0, right_after
    assert kills >= 1
    assert late < 2.5, late  # the reconnect backoff (at most 2 s) plus a claim
    print(
        f"\n[listener] job after kill picked in {right_after * 1000:.0f} ms;"
        f" job due while down ({kills} more kills over 1.5 s) ran {vs_due * 1000:.0f} ms"
        f" after its due time; listener back {(t_reconnected - t_up) * 1000:.0f} ms"
        " after the kills stopped"
    )
