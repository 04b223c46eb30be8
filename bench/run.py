"""``make bench`` (R-T2): pgwake, PgQueuer and Procrastinate on the same PostgreSQL,
in one run, on the same workloads; one table and ``bench/results/latest.json``.
Also the pgbench limit (pgwake's claim and ack driven by ``pgbench``, no Python) and
``scale_claim`` (the claim under millions of rows, plans in ``latest.plans.txt``).

Each measurement runs a system's driver (``bench/systems/<system>_driver.py``) as
its own process on a fresh scratch database, then drops it. pgwake's driver runs
in the project's virtual environment, the peers' in ``bench/.venv-peers``
(installed by ``make bench`` from ``bench/requirements-peers.txt``). The value of
each row is the median of ``--reps`` repetitions.

    .venv/bin/python bench/run.py [--dsn URL] [--reps 3] [--smoke] [--only WORKLOAD]
                                  [--systems pgwake,pgbench-limit]

Environment: ``BENCH_DATABASE_URL`` (else ``DATABASE_URL``, else the local server).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PEERS_PYTHON = BENCH / ".venv-peers" / "bin" / "python"
UNITS = {"jobs_per_s": "jobs/s", "p50_ms": "ms", "p99_ms": "ms", "tx_per_s": "tx/s",
         "rss_mb": "MB", "ms": "ms", "buffers": "buffers"}  # fmt: skip


@dataclass(frozen=True)
class Case:
    """One row group: a workload name, a system, its driver arguments."""

    workload: str
    system: str
    driver_workload: str
    args: tuple[str, ...] = ()
    rows: int | None = None  # scale_claim: jobs in the table that are not due


# system -> (interpreter, driver). pgbench-limit runs pgbench from the project venv.
SYSTEMS = ("pgwake", "pgqueuer", "procrastinate", "pgbench-limit")


def driver(system: str) -> tuple[str, Path]:
    python = str(PEERS_PYTHON) if system in ("pgqueuer", "procrastinate") else sys.executable
    return python, BENCH / "systems" / f"{system.replace('-', '_')}_driver.py"


def pgbench_missing() -> str | None:
    """Why the pgbench-limit rows cannot run here, or None."""
    if os.environ.get("PGBENCH") or shutil.which("pgbench"):
        return None
    return "pgbench not found on PATH (apt-get install postgresql-client, or set PGBENCH)"


def cases(smoke: bool) -> list[Case]:
    n = "600" if smoke else "50000"
    small = ("-n", "300") if smoke else ("-n", "50000")
    lat = ("--samples", "20") if smoke else ("--samples", "200")
    delayed = ("--delayed", "50", "--window", "2") if smoke else ()
    idle = ("--idle", "3") if smoke else ("--idle", "60")
    out = []
    for system in ("pgwake", "pgqueuer", "pgbench-limit"):
        out.append(Case("throughput_batch10", system, "throughput", ("-n", n, "--batch", "10")))
        out.append(Case("throughput_batch100", system, "throughput", ("-n", n, "--batch", "100")))
    out.append(Case("throughput_default", "pgwake", "throughput", ("-n", n, "--batch", "1")))
    out.append(Case("throughput_default", "procrastinate", "throughput", ("-n", n)))
    for system in ("pgwake", "pgqueuer", "procrastinate"):
        out.append(Case("enqueue_single", system, "enqueue_single", small))
        out.append(Case("enqueue_batch", system, "enqueue_batch", ("-n", n)))
        out.append(Case("pickup_latency", system, "pickup_latency", lat))
        out.append(Case("delayed_lag", system, "delayed_lag", delayed))
        out.append(Case("idle", system, "idle", idle))
    for rows in (0, 20_000) if smoke else (0, 1_000_000, 5_000_000):
        args = ("--rows", str(rows), "--batch", "10", "--claims", "20")
        out.append(Case("scale_claim", "pgwake", "scale_claim", args, rows=rows))
    return out


def with_database(dsn: str, name: str) -> str:
    return urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))


async def xact_commit(conn: asyncpg.Connection, db: str) -> int:
    return int(
        await conn.fetchval("SELECT xact_commit FROM pg_stat_database WHERE datname = $1", db)
    )


async def run_case(admin: asyncpg.Connection, dsn: str, case: Case) -> dict[str, Any]:
    """Run ``case`` once on a scratch database; returns the driver's metrics (and
    ``plan``, text, for scale_claim)."""
    db = f"pgwake_bench_{uuid.uuid4().hex[:8]}"
    await admin.execute(f'CREATE DATABASE "{db}"')
    try:
        python, script = driver(case.system)
        proc = await asyncio.create_subprocess_exec(
            python,
            str(script),
            case.driver_workload,
            "--dsn",
            with_database(dsn, db),
            *case.args,
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        before = None
        if case.driver_workload == "idle":
            line = await asyncio.wait_for(proc.stdout.readline(), 120)
            if line.strip() == b"ready":
                before = await xact_commit(admin, db)
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"{case}: exit {proc.returncode}\n{err.decode()[-3000:]}")
        metrics: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
        if case.driver_workload == "idle":
            assert before is not None, "idle driver did not say ready"
            await asyncio.sleep(1.5)  # closed backends have flushed their counters
            idle_s = metrics.pop("idle_s")
            metrics["tx_per_s"] = round((await xact_commit(admin, db) - before) / idle_s, 2)
        return metrics
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def size(rows: object) -> str:
    """5000000 -> 5M, 20000 -> 20k."""
    n = int(str(rows))
    return f"{n // 10**6}M" if n >= 10**6 else f"{n // 1000}k" if n >= 1000 else str(n)


def table(rows: list[dict[str, object]]) -> str:
    """One line per (workload, metric); the last column is pgwake's share of the pgbench
    limit (jobs/s rows that have one)."""
    order = [c.workload for c in cases(True)]
    keys = sorted(
        {(str(r["workload"]), int(str(r.get("rows", -1))), str(r["metric"])) for r in rows},
        key=lambda k: (order.index(k[0]), k[1], k[2]),
    )
    head = f"{'workload':<22}{'metric':<9}" + "".join(f"{s:>15}" for s in SYSTEMS)
    lines = [head + f"{'pgwake/limit':>14}"]
    for workload, n, metric in keys:
        values = {str(r["system"]): r["value"] for r in rows
                  if r["workload"] == workload and r["metric"] == metric
                  and int(str(r.get("rows", -1))) == n}  # fmt: skip
        name = workload if n < 0 else f"{workload}@{size(n)}"
        cells = "".join(f"{values.get(s, '-')!s:>15}" for s in SYSTEMS)
        share = "-"
        if "pgwake" in values and "pgbench-limit" in values:
            share = f"{float(str(values['pgwake'])) / float(str(values['pgbench-limit'])):.0%}"
        lines.append(f"{name:<22}{metric:<9}{cells}{share:>14}")
    return "\n".join(lines)


def default_dsn() -> str:
    """The server to benchmark: BENCH_DATABASE_URL, else DATABASE_URL, else the local one."""
    return (
        os.environ.get("BENCH_DATABASE_URL")
        or os.environ.get("DATABASE_URL")
        or "postgresql://postgres@127.0.0.1:5432/postgres"
    )


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", default=default_dsn())
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: the harness works")
    parser.add_argument(
        "--only", default=None, help="comma-separated workload prefixes to run (default: all)"
    )
    parser.add_argument(
        "--systems", default=None, help=f"comma-separated systems to run (default: {SYSTEMS})"
    )
    parser.add_argument("--out", default=str(BENCH / "results" / "latest.json"))
    args = parser.parse_args()
    reps = 1 if args.smoke else args.reps
    admin = await asyncpg.connect(args.dsn)
    rows: list[dict[str, object]] = []
    skipped: list[str] = []
    plans: list[str] = []
    t0 = time.monotonic()
    failed: str | None = None
    try:
        for case in cases(args.smoke):
            if args.only and not case.workload.startswith(tuple(args.only.split(","))):
                continue
            if args.systems and case.system not in args.systems.split(","):
                continue
            why = pgbench_missing() if case.system == "pgbench-limit" else None
            if why is not None:
                skipped.append(f"{case.workload} {case.system}: skipped, {why}")
                print(f"  {skipped[-1]}", file=sys.stderr, flush=True)
                continue
            try:
                runs = [await run_case(admin, args.dsn, case) for _ in range(reps)]
            except RuntimeError as exc:  # keep what was measured; say what failed
                failed = str(exc)
                break
            plan = str(runs[-1].get("plan", ""))  # the last repetition's EXPLAIN, text
            for r in runs:
                r.pop("plan", None)
            if plan:
                plans.append(f"== {case.workload} {case.system}, {case.rows} rows\n{plan}\n")
            for metric in runs[0]:
                value = statistics.median(r[metric] for r in runs)
                row: dict[str, object] = {"workload": case.workload, "system": case.system,
                                          "metric": metric, "value": round(value, 3),
                                          "unit": UNITS[metric]}  # fmt: skip
                if case.rows is not None:
                    row["rows"] = case.rows
                rows.append(row)
            print(f"  {case.workload:<22}{case.system:<15}{runs}", file=sys.stderr, flush=True)
    finally:
        await admin.close()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=1) + "\n")
    if plans:
        out.with_suffix(".plans.txt").write_text("\n".join(plans))
    print(table(rows))
    for line in skipped:
        print(line)
    print(f"\n{len(rows)} rows in {out} ({time.monotonic() - t0:.0f} s, median of {reps})")
    if failed is not None:
        print(
            f"\nstopped at a failed case; the rows above were written:\n{failed}", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
