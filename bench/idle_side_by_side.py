"""The ``idle`` row, with every system idling at the same time on its own scratch
database: this checkout's pgwake, another checkout's pgwake (``--base``), PgQueuer
and Procrastinate.

A LISTEN backend also runs a transaction, counted in its own database, whenever
other databases' NOTIFY traffic has moved the server-wide notification queue far
past it; on a shared server that noise lands on whichever row runs at that moment
in ``bench/run.py``. Run side by side, every system gets the same noise. Same
protocol otherwise: ``xact_commit`` from the driver's "ready" to 1.5 s after it exits.

    .venv/bin/python bench/idle_side_by_side.py --base /tmp/main-tree [--idle 60]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from pathlib import Path

import asyncpg

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from run import PEERS_PYTHON, ROOT, default_dsn, with_database, xact_commit  # noqa: E402


async def idle(dsn: str, python: str, root: Path, system: str, seconds: str) -> float:
    admin = await asyncpg.connect(dsn)
    db = f"pgwake_bench_{uuid.uuid4().hex[:8]}"
    await admin.execute(f'CREATE DATABASE "{db}"')
    try:
        proc = await asyncio.create_subprocess_exec(
            python,
            str(root / "bench" / "systems" / f"{system}_driver.py"),
            "idle",
            "--dsn",
            with_database(dsn, db),
            "--idle",
            seconds,
            cwd=root,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        assert proc.stdout is not None
        if (await proc.stdout.readline()).strip() != b"ready":
            raise RuntimeError(f"{system} in {root}: no ready line")
        before = await xact_commit(admin, db)
        await proc.communicate()
        await asyncio.sleep(1.5)
        return round((await xact_commit(admin, db) - before) / float(seconds), 2)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        await admin.close()


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", default=default_dsn())
    parser.add_argument("--base", type=Path, required=True, help="another pgwake checkout")
    parser.add_argument("--idle", default="60", help="seconds")
    args = parser.parse_args()
    runs = {
        "pgwake (this checkout)": (sys.executable, ROOT, "pgwake"),
        "pgwake (base)": (sys.executable, args.base.resolve(), "pgwake"),
        "pgqueuer": (str(PEERS_PYTHON), ROOT, "pgqueuer"),
        "procrastinate": (str(PEERS_PYTHON), ROOT, "procrastinate"),
    }
    values = await asyncio.gather(*(idle(args.dsn, *r, args.idle) for r in runs.values()))
    for name, value in zip(runs, values, strict=True):
        print(f"{name:<24}{value:>8} tx/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
