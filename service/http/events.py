"""Scheduled events (R-E1, R-E2, R-E6, R-H6) and live events (R-E4) over HTTP."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from service.http.auth import require
from service.http.body import read_model
from service.http.common import engine_of, json_response, path_id, query_int
from service.http.models import LiveEventIn, ScheduledEventIn


async def create_scheduled_event(request: Request) -> Response:
    """``POST /admin/scheduled-events`` (ingest): 201 with the stored row."""
    await require(request, "ingest")
    engine = engine_of(request)
    body = await read_model(request, ScheduledEventIn, request.app.state.max_body_bytes)
    row, created = await engine.events.store(
        body.event_type,
        body.trigger_at,
        body.facts,
        subject_id=body.subject_id,
        tenant_id=body.tenant_id,
        external_key=body.external_key,
    )
    return json_response(
        row,
        201,
        headers={
            "Location": f"/admin/scheduled-events/{row['id']}",
            "Pgwake-Created": "true" if created else "false",
        },
    )


async def list_scheduled_events(request: Request) -> Response:
    """``GET /admin/scheduled-events?status=&limit=&before=`` (read), newest first."""
    await require(request, "read")
    engine = engine_of(request)
    limit = query_int(request, "limit", 50, 1, 500)
    before = query_int(request, "before", None, 1, 2**63 - 1)
    rows = await engine.events.list(
        status=request.query_params.get("status") or None, limit=limit or 50, before=before
    )
    next_before = rows[-1]["id"] if len(rows) == limit else None
    return json_response({"items": rows, "next_before": next_before})


async def get_scheduled_event(request: Request) -> Response:
    """``GET /admin/scheduled-events/{id}`` (read)."""
    await require(request, "read")
    return json_response(await engine_of(request).events.get(path_id(request)))


async def retry_scheduled_event(request: Request) -> Response:
    """``POST /admin/scheduled-events/{id}/retry`` (admin): failed → pending, else 409."""
    await require(request, "admin")
    return json_response(await engine_of(request).events.retry(path_id(request)))


async def cancel_scheduled_event(request: Request) -> Response:
    """``DELETE /admin/scheduled-events/{id}`` (admin): pending → cancelled, else 409."""
    await require(request, "admin")
    return json_response(await engine_of(request).events.cancel(path_id(request)))


async def post_live_event(request: Request) -> Response:
    """``POST /events`` (ingest): handle now through the registered handler; 202."""
    await require(request, "ingest")
    engine = engine_of(request)
    body = await read_model(request, LiveEventIn, request.app.state.max_body_bytes)
    event = await engine.ingest(
        body.event_type, body.facts, subject_id=body.subject_id, tenant_id=body.tenant_id
    )
    return json_response(event.as_message(), 202)


routes = [
    Route("/admin/scheduled-events", create_scheduled_event, methods=["POST"]),
    Route("/admin/scheduled-events", list_scheduled_events, methods=["GET"]),
    Route("/admin/scheduled-events/{id}", get_scheduled_event, methods=["GET"]),
    Route("/admin/scheduled-events/{id}", cancel_scheduled_event, methods=["DELETE"]),
    Route("/admin/scheduled-events/{id}/retry", retry_scheduled_event, methods=["POST"]),
    Route("/events", post_live_event, methods=["POST"]),
]
