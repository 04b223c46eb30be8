"""Scheduled events (R-E1, R-E2, R-E6, R-H6) and live events (R-E4) over HTTP."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from service.http.api import Endpoint, body_of, query_of
from service.http.common import engine_of, json_response, page, path_id
from service.http.models import (
    EventListQuery,
    LiveEventIn,
    LiveEventOut,
    ScheduledEventIn,
    ScheduledEventOut,
    ScheduledEventPage,
)


async def create_scheduled_event(request: Request) -> Response:
    """Store a scheduled event; ``external_key`` makes the call idempotent (R-E1).

    Answers 201 with the stored row, ``Location`` and ``Pgwake-Created: true|false``.
    """
    body = body_of(request, ScheduledEventIn)
    row, created = await engine_of(request).events.store(
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
    """Scheduled events, newest first; pass ``next_before`` as ``before`` for the next page."""
    query = query_of(request, EventListQuery)
    rows = await engine_of(request).events.list(
        status=query.status, limit=query.limit, before=query.before
    )
    return page(rows, query.limit)


async def get_scheduled_event(request: Request) -> Response:
    """One scheduled event: ``status``, ``dispatched_at``, ``last_error`` (R-E2)."""
    return json_response(await engine_of(request).events.get(path_id(request)))


async def retry_scheduled_event(request: Request) -> Response:
    """Compare-and-set failed → pending (R-H6); 409 with the current status otherwise."""
    return json_response(await engine_of(request).events.retry(path_id(request)))


async def cancel_scheduled_event(request: Request) -> Response:
    """Compare-and-set pending → cancelled (R-H6); 409 with the current status otherwise."""
    return json_response(await engine_of(request).events.cancel(path_id(request)))


async def post_live_event(request: Request) -> Response:
    """Handle an event now through the registered handler (R-E4); 202."""
    body = body_of(request, LiveEventIn)
    event = await engine_of(request).ingest(
        body.event_type, body.facts, subject_id=body.subject_id, tenant_id=body.tenant_id
    )
    return json_response(event.as_message(), 202)


TAG = "scheduled events"
EVENT = "/admin/scheduled-events/{id}"
# fmt: off
endpoints = [
    Endpoint(
        "POST", "/admin/scheduled-events", create_scheduled_event, "ingest",
        "Store a scheduled event", TAG, body=ScheduledEventIn,
        response=ScheduledEventOut, status=201,
    ),
    Endpoint(
        "GET", "/admin/scheduled-events", list_scheduled_events, "read",
        "List scheduled events", TAG, query=EventListQuery, response=ScheduledEventPage,
    ),
    Endpoint(
        "GET", EVENT, get_scheduled_event, "read", "Get a scheduled event", TAG,
        response=ScheduledEventOut, errors=(404,),
    ),
    Endpoint(
        "DELETE", EVENT, cancel_scheduled_event, "admin", "Cancel a pending event", TAG,
        response=ScheduledEventOut, errors=(404, 409),
    ),
    Endpoint(
        "POST", EVENT + "/retry", retry_scheduled_event, "admin", "Retry a failed event", TAG,
        response=ScheduledEventOut, errors=(404, 409),
    ),
    Endpoint(
        "POST", "/events", post_live_event, "ingest", "Handle a live event now", "live events",
        body=LiveEventIn, response=LiveEventOut, status=202,
    ),
]
# fmt: on
