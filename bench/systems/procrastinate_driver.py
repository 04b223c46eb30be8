"""Procrastinate's bench driver (bench/.venv-peers), at its defaults. See bench/run.py."""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import procrastinate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Drain, emit, latency, parse_args, rss_mb

CHUNK = 1000


async def main() -> None:
    args = parse_args()
    w = args.workload
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=args.dsn))
    state: dict[str, object] = {}

    @app.task(name="noop", pass_context=True)
    async def noop(context: procrastinate.JobContext, i: int = 0) -> None:
        hook = state.get("hook")
        if hook is not None:
            hook(context)  # type: ignore[operator]

    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        if w == "throughput":
            for start in range(0, args.n, CHUNK):
                await noop.batch_defer_async(
                    *({"i": i} for i in range(start, min(args.n, start + CHUNK)))
                )
            drain = Drain(args.n)
            done = asyncio.Event()

            def hook(context: procrastinate.JobContext) -> None:
                drain.start()
                if drain.end():
                    done.set()

            state["hook"] = hook
            worker = asyncio.create_task(app.run_worker_async(install_signal_handlers=False))
            await done.wait()
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)
            emit(jobs_per_s=round(drain.rate(), 1), rss_mb=round(rss_mb(), 1))
        elif w == "enqueue_single":
            t0 = time.perf_counter()
            for i in range(args.n):
                await noop.defer_async(i=i)
            emit(jobs_per_s=round(args.n / (time.perf_counter() - t0), 1))
        elif w == "enqueue_batch":
            t0 = time.perf_counter()
            for start in range(0, args.n, CHUNK):
                await noop.batch_defer_async(
                    *({"i": i} for i in range(start, min(args.n, start + CHUNK)))
                )
            emit(jobs_per_s=round(args.n / (time.perf_counter() - t0), 1))
        elif w in ("pickup_latency", "delayed_lag"):
            picked: dict[int, float] = {}
            lags: list[float] = []
            want = args.samples if w == "pickup_latency" else args.delayed
            got = asyncio.Event()

            def on_job(context: procrastinate.JobContext) -> None:
                job = context.job
                picked[job.id] = time.perf_counter()  # type: ignore[index]
                if job.scheduled_at is not None:
                    lags.append(time.time() - job.scheduled_at.timestamp())
                if len(picked) >= want:
                    got.set()

            state["hook"] = on_job
            worker = asyncio.create_task(app.run_worker_async(install_signal_handlers=False))
            await asyncio.sleep(1)
            if w == "pickup_latency":
                returned: dict[int, float] = {}
                for i in range(args.samples):
                    job_id = await noop.defer_async(i=i)
                    returned[job_id] = time.perf_counter()
                    await asyncio.sleep(args.every)
                await asyncio.wait_for(got.wait(), 30)
                result = latency([picked[k] - returned[k] for k in returned])
            else:
                start = datetime.now(UTC) + timedelta(seconds=3)
                step = args.window / args.delayed
                for i in range(args.delayed):
                    await noop.configure(
                        schedule_at=start + timedelta(seconds=i * step)
                    ).defer_async(i=i)
                await asyncio.wait_for(got.wait(), args.window + 60)
                result = latency(lags)
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)
            emit(**result)
        elif w == "idle":
            print("ready", flush=True)
            await asyncio.sleep(2)
            worker = asyncio.create_task(app.run_worker_async(install_signal_handlers=False))
            await asyncio.sleep(args.idle)
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)
            emit(idle_s=args.idle)


if __name__ == "__main__":
    asyncio.run(main())
