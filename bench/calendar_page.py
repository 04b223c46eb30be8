"""Server time of the admin calendar page (issue 7, acceptance 3).

Creates a throwaway database, fills the next 14 days with ``--items`` upcoming
items (schedules and pending scheduled events, half each) plus a day of history,
serves the app under uvicorn, logs in like a browser and loads
``/admin/calendar`` ``--loads`` times. Reports the page's own ``Server-Timing``
(database + fire-time work, rendering, total) and the client-observed time,
as median and max, in milliseconds.

    .venv/bin/python bench/calendar_page.py --dsn postgresql://postgres@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from service.config import Settings
from service.engine import Engine
from service.http.admin import COOKIE
from service.http.app import create_app
from service.tokens import create_token
from tests.support import serve

TIMING = re.compile(r"(\w+);dur=([\d.]+)")


def with_database(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + name))


async def fill(engine: Engine, items: int) -> None:
    """``items`` upcoming items: hourly schedules (up to 24 fires a day each) and
    pending events spread over 14 days; plus 100 failed events in the history."""
    now = datetime.now(UTC)
    events = items // 2
    hours = 14 * 24 - 24  # fires a schedule surely has left in the window
    schedules = items - events
    n = 0
    while schedules > 0:
        every = max(1, hours * 60 // min(schedules, hours))  # minutes between fires
        await engine.schedules.schedule(f"s{n}", f"@every {every}m", "q", {})
        schedules -= hours * 60 // every
        n += 1
    facts = {"facts_version": 1, "scenario": "bench"}
    for i in range(events):
        at = now + timedelta(minutes=10 + i * (13 * 24 * 60) / events)
        await engine.events.store("reminder", at, facts, subject_id=f"user-{i}")
    await engine.pool.execute(
        """
        INSERT INTO pgwake.scheduled_events (event_type, trigger_at, facts, status,
                                             last_error, updated_at)
        SELECT 'reminder', now() - interval '1 hour', '{}', 'failed',
               'RuntimeError: receiver answered 503', now() - interval '1 hour'
        FROM generate_series(1, 100)
        """
    )


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--items", type=int, default=500)
    parser.add_argument("--loads", type=int, default=30)
    args = parser.parse_args()
    name = f"pgwake_bench_cal_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(args.dsn)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        async with Engine(with_database(args.dsn, name)) as engine:
            await fill(engine, args.items)
            token = await create_token(engine.pool, "bench", ["read", "admin"])
            app = create_app(Settings(), engine=engine, run_runner=False)
            async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
                login = await client.post("/admin/login", data={"token": token, "tz": "UTC"})
                session = login.cookies[COOKIE]
                client.cookies.clear()
                client.cookies.set(COOKIE, session, path="/")
                rows: list[dict[str, float]] = []
                drawn = 0
                for _ in range(args.loads):
                    began = time.perf_counter()
                    page = await client.get("/admin/calendar")
                    client_ms = (time.perf_counter() - began) * 1000
                    assert page.status_code == 200, page.status_code
                    drawn = page.text.count('<li class="item ')
                    timing = {k: float(v) for k, v in TIMING.findall(page.headers["server-timing"])}
                    rows.append({**timing, "client": client_ms, "bytes": len(page.content)})
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    report: dict[str, object] = {"items_drawn": drawn, "loads": args.loads}
    for key in ("db", "render", "total", "client", "bytes"):
        values = [r[key] for r in rows]
        report[key] = {"median": round(statistics.median(values), 1), "max": round(max(values), 1)}
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
