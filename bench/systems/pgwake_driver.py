"""pgwake's bench driver (project venv). See bench/run.py for the protocol."""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg

# The checkout this file lives in, not whatever `service` the venv would import.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Drain, emit, latency, parse_args, rss_mb

from service.engine import Engine
from service.events import Event
from service.jobs import Job

FACTS = {"facts_version": 1, "scenario": "bench"}
CHUNK = 1000


async def enqueue_all(engine: Engine, queue: str, n: int) -> None:
    for start in range(0, n, CHUNK):
        await engine.enqueue_many(queue, [{"i": i} for i in range(start, min(n, start + CHUNK))])


async def main() -> None:
    args = parse_args()
    w = args.workload
    async with Engine(args.dsn, poll_seconds=30, pool_max=10) as engine:
        if w == "throughput":
            await enqueue_all(engine, "bench", args.n)
            drain = Drain(args.n)
            done = asyncio.Event()

            @engine.handler("bench", concurrency=args.batch)
            async def noop(job: Job) -> None:
                drain.start()
                if drain.end():
                    done.set()

            async with engine.runner(webhooks=False):
                await done.wait()
            emit(jobs_per_s=round(drain.rate(), 1), rss_mb=round(rss_mb(), 1))
        elif w == "enqueue_single":
            t0 = time.perf_counter()
            for i in range(args.n):
                await engine.enqueue("bench", {"i": i})
            emit(jobs_per_s=round(args.n / (time.perf_counter() - t0), 1))
        elif w == "enqueue_batch":
            t0 = time.perf_counter()
            await enqueue_all(engine, "bench", args.n)
            emit(jobs_per_s=round(args.n / (time.perf_counter() - t0), 1))
        elif w == "pickup_latency":
            returned: dict[int, float] = {}
            picked: dict[int, float] = {}
            got = asyncio.Event()

            @engine.handler("lat")
            async def on_job(job: Job) -> None:
                picked[job.id] = time.perf_counter()
                if len(picked) >= args.samples:
                    got.set()

            async with engine.runner(webhooks=False):
                await asyncio.sleep(1)
                for i in range(args.samples):
                    job_id = await engine.enqueue("lat", {"i": i})
                    returned[job_id] = time.perf_counter()
                    await asyncio.sleep(args.every)
                await asyncio.wait_for(got.wait(), 30)
            emit(**latency([picked[k] - returned[k] for k in returned]))
        elif w == "delayed_lag":
            lags: list[float] = []
            got = asyncio.Event()

            @engine.on_event
            async def on_event(event: Event, conn: asyncpg.Connection) -> None:
                lags.append(time.time() - event.trigger_at.timestamp())
                if len(lags) >= args.delayed:
                    got.set()

            start = datetime.now(UTC) + timedelta(seconds=3)
            step = args.window / args.delayed
            for i in range(args.delayed):
                await engine.events.store("bench", start + timedelta(seconds=i * step), FACTS)
            async with engine.runner(webhooks=False):
                await asyncio.wait_for(got.wait(), args.window + 60)
            emit(**latency(lags))
        elif w == "idle":  # set-up only: its connections close before the count starts
            await engine.schedules.schedule("nightly", "0 3 * * *", "idle", {})
    if w == "idle":
        print("ready", flush=True)
        await asyncio.sleep(2)  # the harness reads the counter now
        async with Engine(args.dsn, migrate=False, poll_seconds=30) as engine:

            @engine.handler("idle")
            async def idle_job(job: Job) -> None:
                pass

            @engine.on_event
            async def idle_event(event: Event, conn: asyncpg.Connection) -> None:
                pass

            async with engine.runner(webhooks=True):  # the full runner, every loop
                await asyncio.sleep(args.idle)
        emit(idle_s=args.idle)


if __name__ == "__main__":
    asyncio.run(main())
