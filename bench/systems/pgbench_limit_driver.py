"""The pgbench limit (project venv): pgwake's own claim and ack statements driven by
``pgbench`` with no Python in the loop, the ceiling a Python worker can approach.

Python only sets up: it enqueues the jobs through pgwake, writes the pgbench script
from the statements in :mod:`service.queries.jobs` (never a copy of their text), and
reads pgbench's result. One script run is one batch, as in pgwake's worker: the
claim, then the ack of every job it claimed, each statement its own transaction
(pgwake runs both auto-committed on its pool). The claim is wrapped to hand the ids
and attempts it returned to the ack (pgbench keeps one row per query, ``\\gset``);
``$n`` become pgbench variables, sent as parameters of prepared statements
(``-M prepared``), as asyncpg does. One client, one thread.

    pgbench_limit_driver.py throughput --dsn URL -n 50000 --batch 10
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, fail, parse_args

from service.engine import Engine
from service.queries import jobs as q

QUEUE = "bench"
WORKER = "pgbench-limit"
CHUNK = 1000
# pgbench variables for the statements' parameters.
CLAIM_VARS = {"1": "queue", "2": "worker", "3": "batch"}  # $1 queue $2 worker_id $3 limit
ACK_VARS = {"1": "ids", "2": "worker", "3": "attempts"}  # $1 ids $2 worker_id $3 attempts


def pgbench_binary() -> str | None:
    """``$PGBENCH``, else ``pgbench`` on PATH, else None."""
    return os.environ.get("PGBENCH") or shutil.which("pgbench")


def with_vars(sql: str, names: dict[str, str]) -> str:
    """``sql`` with each ``$n`` replaced by the pgbench variable ``:name``."""
    out = re.sub(r"\$(\d+)\b", lambda m: ":" + names[m[1]], sql.strip())
    if ";" in out or "\\" in out:
        raise ValueError("statement text pgbench would split or misread")
    return out


def script() -> str:
    """One batch: pgwake's CLAIM (its rows' ids and attempts kept), then its ACK."""
    claim = with_vars(q.CLAIM, CLAIM_VARS)
    ack = with_vars(q.ACK, ACK_VARS)
    return (
        f"WITH claimed AS (\n{claim}\n)\n"
        "SELECT coalesce(array_agg(id ORDER BY id), '{}') AS ids,\n"
        "       coalesce(array_agg(attempts ORDER BY id), '{}') AS attempts\n"
        "FROM claimed \\gset\n"
        f"{ack};\n"
    )


async def enqueue(dsn: str, n: int) -> None:
    async with Engine(dsn, poll_seconds=30, pool_max=2) as engine:
        for start in range(0, n, CHUNK):
            await engine.enqueue_many(
                QUEUE, [{"i": i} for i in range(start, min(n, start + CHUNK))]
            )


async def remaining(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM pgwake.jobs"))
    finally:
        await conn.close()


def main() -> None:
    args = parse_args()
    if args.workload != "throughput":
        fail(f"pgbench-limit runs throughput only, not {args.workload}")
    binary = pgbench_binary()
    if binary is None:
        fail("pgbench not found (PATH or $PGBENCH)")
    asyncio.run(enqueue(args.dsn, args.n))
    batches = math.ceil(args.n / args.batch)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", prefix="pgwake_limit_") as f:
        f.write(script())
        f.flush()
        cmd = [binary, "--no-vacuum", "--client=1", "--jobs=1", "--protocol=prepared",
               f"--transactions={batches}", f"--file={f.name}", f"--define=queue={QUEUE}",
               f"--define=worker={WORKER}", f"--define=batch={args.batch}", args.dsn]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        fail(f"pgbench exit {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    left = asyncio.run(remaining(args.dsn))
    if left:
        fail(f"pgbench left {left} of {args.n} jobs in the table:\n{done.stdout[-2000:]}")
    tps = re.search(r"^tps = ([0-9.]+)", done.stdout, re.M)
    if tps is None:
        fail(f"no tps in pgbench's output:\n{done.stdout}")
    seconds = batches / float(tps[1])  # pgbench's own clock, connection time excluded
    emit(jobs_per_s=round(args.n / seconds, 1))


if __name__ == "__main__":
    main()
