"""PgQueuer's bench driver (bench/.venv-peers). See bench/run.py for the protocol."""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import timedelta
from pathlib import Path

import asyncpg
from pgqueuer import AsyncpgDriver, PgQueuer, Queries
from pgqueuer.domain.types import QueueExecutionMode
from pgqueuer.models import Job

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Drain, emit, latency, parse_args, rss_mb

CHUNK = 1000


async def enqueue_all(queries: Queries, n: int, entrypoint: str = "noop") -> None:
    for start in range(0, n, CHUNK):
        k = min(n, start + CHUNK) - start
        await queries.enqueue([entrypoint] * k, [b"{}"] * k, [0] * k)


async def main() -> None:
    args = parse_args()
    w = args.workload
    setup = await asyncpg.connect(args.dsn)
    queries = Queries(AsyncpgDriver(setup))
    await queries.install()
    if w == "throughput":
        await enqueue_all(queries, args.n)
        drain = Drain(args.n)
        conn = await asyncpg.connect(args.dsn)
        pgq = PgQueuer(AsyncpgDriver(conn))

        @pgq.entrypoint("noop")
        async def noop(job: Job) -> None:
            drain.start()
            drain.end()

        await pgq.run(batch_size=args.batch, mode=QueueExecutionMode.drain)
        emit(jobs_per_s=round(drain.rate(), 1), rss_mb=round(rss_mb(), 1))
    elif w == "enqueue_single":
        t0 = time.perf_counter()
        for _ in range(args.n):
            await queries.enqueue("noop", b"{}")
        emit(jobs_per_s=round(args.n / (time.perf_counter() - t0), 1))
    elif w == "enqueue_batch":
        t0 = time.perf_counter()
        await enqueue_all(queries, args.n)
        emit(jobs_per_s=round(args.n / (time.perf_counter() - t0), 1))
    elif w in ("pickup_latency", "delayed_lag"):
        conn = await asyncpg.connect(args.dsn)
        pgq = PgQueuer(AsyncpgDriver(conn))
        picked: dict[int, float] = {}
        lags: list[float] = []
        want = args.samples if w == "pickup_latency" else args.delayed
        got = asyncio.Event()

        @pgq.entrypoint("lat")
        async def on_job(job: Job) -> None:
            picked[job.id] = time.perf_counter()
            lags.append(time.time() - job.execute_after.timestamp())
            if len(picked) >= want:
                got.set()

        runner = asyncio.create_task(pgq.run(batch_size=args.batch))
        await asyncio.sleep(1)
        if w == "pickup_latency":
            returned: dict[int, float] = {}
            for _ in range(args.samples):
                [job_id] = await queries.enqueue("lat", b"{}")
                returned[job_id] = time.perf_counter()
                await asyncio.sleep(args.every)
            await asyncio.wait_for(got.wait(), 30)
            result = latency([picked[k] - returned[k] for k in returned])
        else:
            step = args.window / args.delayed
            k = args.delayed
            await queries.enqueue(
                ["lat"] * k, [b"{}"] * k, [0] * k,
                [timedelta(seconds=3 + i * step) for i in range(k)],
            )  # fmt: skip
            await asyncio.wait_for(got.wait(), args.window + 60)
            result = latency(lags)
        pgq.shutdown.set()
        await asyncio.wait_for(runner, 30)
        emit(**result)
    elif w == "idle":
        print("ready", flush=True)
        await asyncio.sleep(2)
        conn = await asyncpg.connect(args.dsn)
        pgq = PgQueuer(AsyncpgDriver(conn))

        @pgq.entrypoint("idle")
        async def idle(job: Job) -> None:
            pass

        runner = asyncio.create_task(pgq.run())
        await asyncio.sleep(args.idle)
        pgq.shutdown.set()
        await asyncio.wait_for(runner, 30)
        await conn.close()
        emit(idle_s=args.idle)
    await setup.close()


if __name__ == "__main__":
    asyncio.run(main())
