"""Interleaved runs of one workload: this checkout's pgwake, another checkout's pgwake
(``--base``, e.g. a ``git archive`` of main) and PgQueuer, in turn, ``--reps`` times.

On a shared, noisy machine a slow minute lands on every system alike, so the
ratios are steadier than those of ``bench/run.py``, which runs each system's rows
one after another. Same driver protocol (a driver process on a fresh scratch
database per run).

    .venv/bin/python bench/interleave.py --base /tmp/main-tree [--workload enqueue_single] \
        [-n 10000] [--reps 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import uuid
from pathlib import Path

import asyncpg

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from run import PEERS_PYTHON, ROOT, default_dsn, with_database  # noqa: E402


async def run_once(
    admin: asyncpg.Connection, dsn: str, python: str, root: Path, system: str, args: list[str]
) -> float:
    db = f"pgwake_bench_{uuid.uuid4().hex[:8]}"
    await admin.execute(f'CREATE DATABASE "{db}"')
    try:
        proc = await asyncio.create_subprocess_exec(
            python,
            str(root / "bench" / "systems" / f"{system}_driver.py"),
            *args[:1],
            "--dsn",
            with_database(dsn, db),
            *args[1:],
            cwd=root,
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"{system} in {root}: exit {proc.returncode}")
        metrics = json.loads(out.decode().strip().splitlines()[-1])
        return float(next(iter(metrics.values())))
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", default=default_dsn())
    parser.add_argument("--base", type=Path, required=True, help="another pgwake checkout")
    parser.add_argument("--workload", default="enqueue_single")
    parser.add_argument("-n", default="10000")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    driver_args = [args.workload, "-n", args.n]
    systems = {
        "pgwake (this checkout)": (sys.executable, ROOT, "pgwake"),
        "pgwake (base)": (sys.executable, args.base.resolve(), "pgwake"),
        "pgqueuer": (str(PEERS_PYTHON), ROOT, "pgqueuer"),
    }
    admin = await asyncpg.connect(args.dsn)
    results: dict[str, list[float]] = {name: [] for name in systems}
    try:
        for _ in range(args.reps):
            for name, (python, root, system) in systems.items():
                results[name].append(
                    await run_once(admin, args.dsn, python, root, system, driver_args)
                )
            print({k: v[-1] for k, v in results.items()}, file=sys.stderr, flush=True)
    finally:
        await admin.close()
    med = {k: statistics.median(v) for k, v in results.items()}
    for name, runs in results.items():
        print(f"{name:<24}median {med[name]:>10.1f}   runs {runs}")
    this, base, peer = med.values()
    ratios = f"this/pgqueuer {this / peer:.2f}   base/pgqueuer {base / peer:.2f}"
    print(f"{ratios}   this/base {this / base:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
