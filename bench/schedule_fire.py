"""Schedule fire timing against a real PostgreSQL (issue 3, acceptance 3 and 4).

Runs a pgwake runner in this process on a throwaway database and measures:

* ``register``: a schedule whose first boundary falls ~15 ms after ``schedule()``
  is called, while the leader sleeps on a far deadline; ``schedule()`` return →
  fire and boundary → fire, over ``--tries`` tries (the NOTIFY path, R-S9).
* ``no-notify``: the same without a LISTEN connection; the fire then waits for
  the leader's renew cadence (3.3 s), the deadline that never depends on NOTIFY.
* ``every``: ``@every 1s`` for ``--seconds`` seconds → one job per boundary and
  ``|fired − boundary|`` percentiles.

"Fired" is the commit of the leader's tick, read as the job's ``created_at``
(the tick transaction's start on the database clock, the same host's clock).

    .venv/bin/python bench/schedule_fire.py --dsn postgresql://postgres@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from service import db
from service.engine import Engine
from service.leader import RENEW_EVERY_SECONDS


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_ms": round(statistics.median(values) * 1000, 2),
        "p99_ms": round(percentile(values, 0.99) * 1000, 2),
        "max_ms": round(max(values) * 1000, 2),
    }


@contextlib.asynccontextmanager
async def scratch_database(dsn: str) -> AsyncIterator[str]:
    """Create a throwaway database on ``dsn``'s server; drop it afterwards."""
    name = f"pgwake_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def fire_time(engine: Engine, queue: str, timeout: float) -> tuple[datetime, datetime]:
    """Wait for the first job in ``queue``: ``(created_at, scheduled_for)``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = await engine.pool.fetchrow(
            "SELECT created_at, scheduled_for FROM pgwake.jobs WHERE queue = $1"
            " ORDER BY scheduled_for LIMIT 1",
            queue,
        )
        if row is not None:
            return row["created_at"], row["scheduled_for"]
        await asyncio.sleep(0.002)
    raise TimeoutError(f"nothing fired in {queue} within {timeout}s")


async def registration_to_fire(
    engine: Engine, tries: int, prefix: str
) -> dict[str, dict[str, float]]:
    """Acceptance 3: ``schedule()`` return → fire, the leader asleep on a far deadline."""
    await engine.schedules.schedule("far", "@every 1d", "far", {})
    after_return: list[float] = []
    after_boundary: list[float] = []
    for i in range(tries):
        # Let the leader pass the previous schedule's second boundary (it was asleep
        # until then) and go back to its far deadline; then call schedule() ~15 ms
        # before a whole second, so its first boundary is that second.
        await asyncio.sleep(1.2)
        now = time.time()
        await asyncio.sleep((1 - now % 1) - 0.015 if now % 1 < 0.985 else 1.985 - now % 1)
        name = f"{prefix}{i}"
        await engine.schedules.schedule(name, "* * * * * *", name, {})
        returned = datetime.now(UTC)
        fired, boundary = await fire_time(engine, name, timeout=2 * RENEW_EVERY_SECONDS + 2)
        after_return.append((fired - returned).total_seconds())
        after_boundary.append((fired - boundary).total_seconds())
        await engine.schedules.unschedule(name)
    await engine.schedules.unschedule("far")
    return {"return_to_fire": summary(after_return), "boundary_to_fire": summary(after_boundary)}


async def every_second(engine: Engine, seconds: float) -> dict[str, float]:
    """Acceptance 4: ``@every 1s`` for ``seconds`` → one job per boundary, fire error."""
    await engine.schedules.schedule("tick", "@every 1s", "tick", {})
    await asyncio.sleep(seconds + 0.5)
    await engine.schedules.unschedule("tick")
    rows = await engine.pool.fetch(
        "SELECT created_at, scheduled_for FROM pgwake.jobs WHERE queue = 'tick'"
        " ORDER BY scheduled_for"
    )
    errors = [abs((r["created_at"] - r["scheduled_for"]).total_seconds()) for r in rows]
    distinct = len({r["scheduled_for"] for r in rows})
    gaps = [
        (b["scheduled_for"] - a["scheduled_for"]).total_seconds()
        for a, b in itertools.pairwise(rows)
    ]
    out: dict[str, float] = {"jobs": len(rows), "distinct_boundaries": distinct}
    out.update(summary(errors))
    out["max_gap_s"] = max(gaps) if gaps else 0.0
    return out


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--tries", type=int, default=50)
    parser.add_argument("--no-notify-tries", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    if not args.dsn:
        parser.error("--dsn or DATABASE_URL is required")
    results: dict[str, object] = {}
    async with scratch_database(args.dsn) as dsn:
        async with Engine(dsn, poll_seconds=30) as engine, engine.runner(webhooks=False):
            results["register"] = await registration_to_fire(engine, args.tries, "notify")
            results["every_1s"] = await every_second(engine, args.seconds)
        # No LISTEN connection at all: only the deadline can fire it (R-S9).
        pool = await db.create_pool(dsn, min_size=2, max_size=4)
        try:
            async with Engine(pool=pool) as engine, engine.runner(webhooks=False):
                results["no_notify"] = await registration_to_fire(
                    engine, args.no_notify_tries, "silent"
                )
        finally:
            await pool.close()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
