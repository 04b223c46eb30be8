"""pgwake's bench driver (project venv). See bench/run.py for the protocol."""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg

# The checkout this file lives in, not whatever `service` the venv would import.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Drain, emit, fail, latency, parse_args, rss_mb

from service.engine import Engine
from service.events import Event
from service.jobs import Job
from service.queries import jobs as q

FACTS = {"facts_version": 1, "scenario": "bench"}
CHUNK = 1000

# The claim's partial index (sql/0001_core.sql; since 0004 the only index on pending jobs).
CLAIM_INDEX = "jobs_claim_idx"
DUE = 1000
# scale_claim's bulk: $1 rows of the claimed queue, none due. 80 % done (kept by the
# queue's retention, R-Q10), 5 % dead, 15 % pending but due in 1 to 31 days (delayed
# jobs, retries in backoff). Priority 0, as the 1,000 due jobs added afterwards.
FILL = """
INSERT INTO pgwake.jobs (queue, status, payload, priority, run_at, attempts, max_attempts,
                         lease_seconds, backoff_base_seconds, backoff_cap_seconds,
                         created_at, finished_at, last_error)
SELECT 'bench', s.status, jsonb_build_object('i', g), 0,
       CASE WHEN s.status = 'pending'
            THEN now() + make_interval(secs => 86400 + g % (30 * 86400))
            ELSE now() - make_interval(secs => g % 86400) END,
       CASE s.status WHEN 'pending' THEN 0 WHEN 'dead' THEN 5 ELSE 1 END, 5, 60, 5, 3600,
       now() - interval '2 days',
       CASE WHEN s.status <> 'pending' THEN now() - make_interval(secs => g % 86400) END,
       CASE WHEN s.status = 'dead' THEN 'bench: failed' END
FROM generate_series(1, $1::bigint) g
CROSS JOIN LATERAL (SELECT CASE WHEN g % 20 = 0 THEN 'dead'
                                WHEN g % 20 < 4 THEN 'pending'
                                ELSE 'done' END AS status) s
"""


async def enqueue_all(engine: Engine, queue: str, n: int) -> None:
    for start in range(0, n, CHUNK):
        await engine.enqueue_many(queue, [{"i": i} for i in range(start, min(n, start + CHUNK))])


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(n for child in plan.get("Plans", []) for n in _nodes(child))]


async def scale_claim(engine: Engine, dsn: str, rows: int, batch: int, claims: int) -> None:
    """The real claim statement (service.queries.jobs.CLAIM) with ``rows`` jobs that are
    not due plus 1,000 due: median execution time and shared buffers (hit + read) over
    ``claims`` claims of ``batch``, each run as EXPLAIN (ANALYZE, BUFFERS) and committed,
    as a worker's would be. Exits non-zero when the plan does not walk CLAIM_INDEX."""
    if claims * batch > DUE:
        fail(f"scale_claim: {claims} claims of {batch} need more than {DUE} due jobs")
    await engine.queues.configure("bench", retention_seconds=7 * 86400)  # done rows stay
    conn = await asyncpg.connect(dsn)
    try:
        if not await conn.fetchval(
            "SELECT 1 FROM pg_indexes WHERE schemaname = 'pgwake' AND indexname = $1",
            CLAIM_INDEX,
        ):
            fail(f"scale_claim: no index {CLAIM_INDEX} in the schema; update the bench")
        t0 = time.perf_counter()
        if rows:
            await conn.execute(FILL, rows)
        await conn.execute("VACUUM (ANALYZE) pgwake.jobs")  # steady state, as autovacuum keeps it
        fill_s = time.perf_counter() - t0
        await enqueue_all(engine, "bench", DUE)  # the real enqueue, after the ANALYZE
        explain = f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {q.CLAIM}"
        ms: list[float] = []
        buffers: list[int] = []
        for _ in range(claims):
            raw = await conn.fetchval(explain, "bench", "bench-worker", batch)
            plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]
            # The selection (the CTEs that pick the jobs) must walk the partial index;
            # the UPDATE then finds its few rows by id, which on a table of a few
            # pages the planner rightly does with a sequential scan.
            nodes = [
                n
                for sub in plan["Plan"].get("Plans", [])
                if str(sub.get("Subplan Name", "")).startswith("CTE ")
                for n in _nodes(sub)
            ]
            used = {str(n["Index Name"]) for n in nodes if "Index Name" in n}
            seq = {n["Relation Name"] for n in nodes if n["Node Type"] == "Seq Scan"}
            if CLAIM_INDEX not in used or seq:
                fail(f"scale_claim at {rows} rows: the claim did not walk {CLAIM_INDEX} "
                     f"(indexes {sorted(used)}, seq scans {sorted(seq)}):\n"
                     + json.dumps(plan, indent=1))  # fmt: skip
            if plan["Plan"]["Actual Rows"] != batch:
                fail(f"scale_claim: claimed {plan['Plan']['Actual Rows']} jobs, not {batch}")
            ms.append(plan["Execution Time"])
            top = plan["Plan"]
            buffers.append(top["Shared Hit Blocks"] + top["Shared Read Blocks"])
        text = await conn.fetch(
            f"EXPLAIN (ANALYZE, BUFFERS) {q.CLAIM}", "bench", "bench-worker", batch
        )
        counts = await conn.fetch(
            "SELECT status, count(*) AS n FROM pgwake.jobs GROUP BY status ORDER BY status"
        )
    finally:
        await conn.close()
    plan_text = "\n".join(r[0] for r in text)
    head = ", ".join(f"{r['status']} {r['n']}" for r in counts)
    emit(
        ms=round(statistics.median(ms), 3),
        buffers=statistics.median(buffers),
        plan=f"-- {rows} rows not due + {DUE} due ({head}); fill {fill_s:.0f} s\n"
        f"-- claims of {batch}: execution ms {[round(m, 3) for m in ms]}\n"
        f"-- shared buffers (hit + read) {buffers}\n{plan_text}",
    )


async def main() -> None:
    args = parse_args()
    w = args.workload
    async with Engine(args.dsn, poll_seconds=30, pool_max=10) as engine:
        if w == "scale_claim":
            await scale_claim(engine, args.dsn, args.rows, args.batch, args.claims)
        elif w == "throughput":
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
