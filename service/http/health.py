"""``/healthz`` (loop liveness, R-E5), ``/readyz`` (database + migrations + runner)
and ``/metrics`` (Prometheus text format)."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response

from service.http.api import Endpoint
from service.http.common import engine_of, json_response
from service.http.models import HealthOut, ReadyOut
from service.metrics import CONTENT_TYPE
from service.migrate import is_current


async def healthz(request: Request) -> Response:
    """200 when every runner loop iterated within three of its periods, none is down
    after a crash, and LISTEN is connected; else 503 with the same body."""
    engine = engine_of(request)
    now = time.time()
    loops = [
        {
            "name": s.name,
            "period_seconds": s.period,
            "last_ok": s.last_ok,
            "seconds_since_ok": None if s.last_ok is None else round(now - s.last_ok, 3),
            "stale": s.stale(now),
            "down": s.down,
            "restarts": s.restarts,
            "last_crash_at": s.last_crash_at,
            "last_error": s.last_error,
        }
        for s in engine.health.snapshot()
    ]
    listener = engine.listener
    listening = listener is not None and listener.is_connected
    ok = listening and not any(loop["stale"] or loop["down"] for loop in loops)
    body = {
        "status": "ok" if ok else "degraded",
        "listener": {"connected": listening, "reconnects": listener.reconnects if listener else 0},
        "loops": loops,
    }
    return json_response(body, 200 if ok else 503)


async def readyz(request: Request) -> Response:
    """200 once the database answers, migrations are current and the runner is up."""
    engine = engine_of(request)
    checks: dict[str, bool | str] = {
        "database": False,
        "migrations": False,
        "runner": bool(request.app.state.runner_expected is False or engine.runner_running),
    }
    try:
        async with engine.pool.acquire(timeout=2) as conn:
            checks["database"] = await conn.fetchval("SELECT true")
            checks["migrations"] = await is_current(conn)
    except Exception as exc:  # any failure to reach the database is "not ready"
        checks["error"] = str(exc) or type(exc).__name__
    ok = all(v is True for k, v in checks.items() if k != "error")
    return json_response({"status": "ready" if ok else "not ready", **checks}, 200 if ok else 503)


async def metrics(request: Request) -> Response:
    """This process's counters and histograms plus live counts from the database,
    in the Prometheus text exposition format."""
    engine = engine_of(request)
    async with engine.pool.acquire() as conn:
        body = await engine.metrics.render(conn, engine.health)
    return Response(body, media_type=CONTENT_TYPE)


TAG = "operations"
# fmt: off
endpoints = [
    Endpoint(
        "GET", "/healthz", healthz, None, "Runner loop liveness", TAG,
        response=HealthOut, errors=(503,),
    ),
    Endpoint(
        "GET", "/readyz", readyz, None, "Readiness: database, migrations, runner", TAG,
        response=ReadyOut, errors=(503,),
    ),
    Endpoint(
        "GET", "/metrics", metrics, "read", "Prometheus metrics", TAG,
        media_type="text/plain",
    ),
]
# fmt: on
