"""The HTTP surface as a whole (issue 4): the route table, auth on every route,
the OpenAPI document, /metrics, /healthz recovery, JSON limits."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence

import pytest
from starlette.routing import BaseRoute, Route

from service.config import Settings
from service.http import admin
from service.http.api import Endpoint
from service.http.app import ENDPOINTS, create_app
from service.tokens import create_token
from tests.e2e.conftest import Service

PUBLIC = {("GET", "/healthz"), ("GET", "/readyz")}
SAMPLE = {"name": "sample", "id": "1"}


def _url(ep: Endpoint) -> str:
    return re.sub(r"{(\w+)}", lambda m: SAMPLE[m.group(1)], ep.path)


def _methods(routes: Sequence[BaseRoute]) -> set[tuple[str, str]]:
    found = {(m, r.path) for r in routes if isinstance(r, Route) for m in r.methods or ()}
    return {(m, p) for m, p in found if m != "HEAD"}


def test_every_route_comes_from_the_table(engine) -> None:  # type: ignore[no-untyped-def]
    """No route can bypass the table (and with it the permission check); only the
    probes are public (R-H1). The admin calendar's HTML routes are their own table,
    walked by test_admin_routes_need_a_session."""
    app = create_app(Settings(), engine=engine)
    table = {(ep.method, ep.path) for ep in ENDPOINTS}
    assert _methods(app.routes) == table | _methods(admin.ROUTES)
    assert not table & _methods(admin.ROUTES)
    assert {(ep.method, ep.path) for ep in ENDPOINTS if ep.permission is None} == PUBLIC
    assert len(table) == len(ENDPOINTS)  # no operation declared twice


ADMIN_OPEN = {
    ("GET", "/admin/login"),  # the form
    ("POST", "/admin/login"),  # takes a token
    ("POST", "/admin/logout"),  # ends whatever session there is
    ("GET", "/admin"),  # a redirect to the calendar
    ("GET", "/admin/static/{name}"),  # stylesheet and script
}


@pytest.mark.parametrize(
    "route", sorted(_methods(admin.ROUTES) - ADMIN_OPEN), ids=lambda r: f"{r[0]} {r[1]}"
)
async def test_admin_routes_need_a_session(service: Service, route: tuple[str, str]) -> None:
    """Generated from admin.ROUTES: the page redirects to the login form, a control
    answers 401, without a session; a new admin route is walked automatically (R-H4)."""
    method, path = route
    response = await service.client.request(method, path, data={"csrf": "x"})
    if method == "GET":
        assert response.status_code == 303 and response.headers["location"] == "/admin/login"
    else:
        assert response.status_code == 401, response.text


@pytest.mark.parametrize(
    "ep", [ep for ep in ENDPOINTS if ep.permission], ids=lambda ep: f"{ep.method} {ep.path}"
)
async def test_route_refuses_missing_token_and_missing_permission(
    service: Service, ep: Endpoint
) -> None:
    """Generated from the route table: a new route is walked automatically (R-H1)."""
    url = _url(ep)
    body = {"content": b"{}", "headers": {"content-type": "application/json"}}
    anonymous = await service.client.request(ep.method, url, **body)  # type: ignore[arg-type]
    assert anonymous.status_code == 401, anonymous.text
    assert anonymous.headers["content-type"] == "application/problem+json"
    assert anonymous.headers["www-authenticate"] == "Bearer"
    bogus = await service.client.request(
        ep.method, url, content=b"{}", headers={**body["headers"], "authorization": "Bearer x"}
    )
    assert bogus.status_code == 401
    # A token holding every permission except the one this route needs.
    others = [p for p in ("ingest", "read", "admin") if p != ep.permission]
    name = f"lacks-{ep.permission}"
    token = service.tokens.get(name) or await create_token(service.engine.pool, name, others)
    service.tokens[name] = token
    denied = await service.client.request(
        ep.method,
        url,
        content=b"{}",
        headers={**body["headers"], "authorization": f"Bearer {token}"},
    )
    assert denied.status_code == 403, denied.text
    assert denied.json()["code"] == "forbidden"


async def test_openapi_document_lists_every_operation(service: Service) -> None:
    resp = await service.client.get("/openapi.json", headers=service.auth("read"))
    assert resp.status_code == 200
    doc = resp.json()
    assert doc["openapi"].startswith("3.1")
    for ep in ENDPOINTS:
        op = doc["paths"][ep.path][ep.method.lower()]
        assert op.get("x-permission") == ep.permission
        assert str(ep.status) in op["responses"]
        if ep.permission:
            assert {"401", "403"} <= set(op["responses"])
        if ep.body is not None:
            schema = op["requestBody"]["content"]["application/json"]["schema"]
            assert schema["$ref"].endswith(ep.body.__name__ + "-Input") or schema["$ref"].endswith(
                ep.body.__name__
            )
    assert "Problem" in str(doc["components"]["schemas"].keys())
    # The models that validate are the models documented: a limit over the documented
    # maximum is refused with the same bound.
    limit = next(
        p
        for p in doc["paths"]["/admin/scheduled-events"]["get"]["parameters"]
        if p["name"] == "limit"
    )
    assert limit["schema"]["maximum"] == 500
    over = await service.client.get(
        "/admin/scheduled-events?limit=501", headers=service.auth("read")
    )
    assert over.status_code == 422 and over.json()["errors"][0]["loc"] == ["query", "limit"]


@pytest.mark.parametrize("depth", [65, 100_000])
async def test_deep_json_is_refused_not_crashed(service: Service, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    body = (
        '{"event_type":"e","trigger_at":"2030-01-01T00:00:00Z",'
        f'"facts":{{"facts_version":1,"scenario":"s","deep":{nested}}}}}'
    )
    resp = await service.client.post(
        "/admin/scheduled-events",
        content=body.encode(),
        headers={**service.auth("ingest"), "content-type": "application/json"},
    )
    assert resp.status_code in (400, 422), resp.text
    assert "deeper" in resp.json()["detail"] or resp.status_code == 400
    assert await service.engine.pool.fetchval("SELECT count(*) FROM pgwake.scheduled_events") == 0


def _metric(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = (
        rf"^{re.escape(name)}(?:{{{re.escape(want)}}})? (\S+)$"
        if labels
        else (rf"^{re.escape(name)} (\S+)$")
    )
    for line in text.splitlines():
        m = re.match(pattern, line)
        if m:
            return float(m.group(1))
    raise AssertionError(f"{name}{{{want}}} not in /metrics")


async def test_metrics_show_what_happened(service: Service) -> None:
    """Issue 4 acceptance 5: the counters match the jobs that ran."""
    e = service.engine
    await e.queues.configure("m", max_attempts=2, backoff_base_seconds=0, backoff_cap_seconds=0)
    await e.enqueue_many("m", [{"n": i} for i in range(5)])
    jobs = await e.claim("m", "w", 5)
    for job in jobs[:3]:
        await job.ack()
    await jobs[3].retry("boom", delay=0)
    await jobs[4].dead_letter("gone")
    again = await e.claim("m", "w", 1)
    await again[0].retry("boom again")  # second attempt of two: dead
    for n in range(3):
        await e.events.store("metric", _soon(), {"facts_version": 1, "scenario": "s", "n": n})
    async with asyncio.timeout(10):
        while await e.pool.fetchval(
            "SELECT count(*) FROM pgwake.scheduled_events WHERE status = 'pending'"
        ):
            await asyncio.sleep(0.05)

    resp = await service.client.get("/metrics", headers=service.auth("read"))
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    text = resp.text
    assert _metric(text, "pgwake_jobs_enqueued_total", queue="m") == 5
    assert _metric(text, "pgwake_jobs_claimed_total", queue="m") == 6
    assert _metric(text, "pgwake_jobs_acked_total", queue="m") == 3
    assert _metric(text, "pgwake_jobs_retried_total", queue="m") == 1
    assert _metric(text, "pgwake_jobs_dead_total", queue="m") == 2
    assert _metric(text, "pgwake_queue_jobs", queue="m", status="dead") == 2
    assert _metric(text, "pgwake_scheduled_events_total", outcome="dispatched") == 3
    assert _metric(text, "pgwake_event_dispatch_lag_seconds_count") == 3
    assert _metric(text, "pgwake_loop_up", loop="dispatcher") == 1


def _soon():  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime, timedelta

    return datetime.now(UTC) + timedelta(milliseconds=200)


class LoopKilled(BaseException):
    """Not an Exception: the kind that escapes ``except Exception`` handlers."""


async def test_killed_dispatcher_shows_in_healthz_and_recovers(service: Service) -> None:
    """Issue 4 acceptance 4: a BaseException raised inside the dispatcher is visible
    in /healthz (503, the loop down) and the supervisor restarts it."""
    health = service.engine.health

    async def probe() -> tuple[int, dict]:  # type: ignore[type-arg]
        resp = await service.client.get("/healthz")
        loop = next(x for x in resp.json()["loops"] if x["name"] == "dispatcher")
        return resp.status_code, loop

    assert (await probe())[0] == 200
    # Three crashes in a row (the first iteration and two restarts): the supervisor's
    # backoff (0.1 s, 0.2 s, 0.4 s) keeps the loop down long enough to watch.
    health.inject_fault("dispatcher", LoopKilled("killed by the test hook"), times=3)
    killed_at = time.time()
    service.engine.hub.notify_all()  # wake it so the fault fires now
    seen_down: float | None = None
    async with asyncio.timeout(10):
        while True:
            status, loop = await probe()
            if status == 503 and loop["down"] and seen_down is None:
                seen_down = time.time() - killed_at
            if seen_down is not None and status == 200 and not loop["down"]:
                break
            await asyncio.sleep(0.005)
    assert loop["restarts"] == 3 and "killed by the test hook" in loop["last_error"]
    crashed = loop["last_crash_at"] - killed_at
    recovered = loop["last_ok"] - loop["last_crash_at"]
    assert seen_down is not None and seen_down < loop["period_seconds"]
    print(
        f"\n[healthz] 503 seen {seen_down * 1000:.0f} ms after the first crash;"
        f" last crash at +{crashed * 1000:.0f} ms, good iteration {recovered * 1000:.0f} ms"
        " after it"
    )
    # It really runs again: an event is dispatched.
    row, _ = await service.engine.events.store(
        "after", _soon(), {"facts_version": 1, "scenario": "s"}
    )
    for _ in range(500):
        ev = await service.engine.events.get(row["id"])
        if ev["status"] == "dispatched":
            break
        await asyncio.sleep(0.02)
    assert ev["status"] == "dispatched", (ev, [x for x in (await probe())[1].items()])


async def test_unknown_route_and_method_are_problems(service: Service) -> None:
    missing = await service.client.get("/nope")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    wrong = await service.client.patch("/schedules/x", headers=service.auth())
    assert wrong.status_code == 405
    assert wrong.headers["content-type"] == "application/problem+json"
    allowed = {m.strip() for m in wrong.headers["allow"].split(",")}
    assert {"GET", "PUT", "DELETE"} <= allowed  # every method of the path (RFC 9110)
