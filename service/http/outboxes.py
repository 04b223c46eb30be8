"""Outbox enqueue, configuration, stats and dead letters over HTTP (R-O4)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from service.http.api import Endpoint, body_of, query_of
from service.http.common import engine_of, json_response, page, path_id
from service.http.models import (
    EnqueuedOut,
    JobPage,
    OutboxConfigIn,
    OutboxConfigOut,
    OutboxMessageIn,
    OutboxStatsOut,
    PageQuery,
    RequeuedOut,
)
from service.outbox import Outbox


def _outbox(request: Request) -> Outbox:
    return engine_of(request).outbox(request.path_params["name"])


async def enqueue_message(request: Request) -> Response:
    """Enqueue a message for the outbox's relay (R-O4); 202 with its id."""
    body = body_of(request, OutboxMessageIn)
    outbox = _outbox(request)
    message_id = await outbox.enqueue(
        body.payload,
        max_attempts=body.max_attempts,
        delay=body.delay_seconds,
        dedupe_key=body.dedupe_key,
    )
    return json_response({"id": message_id, "outbox": outbox.name}, 202)


async def configure_outbox(request: Request) -> Response:
    """Set (or clear) the outbox's webhook target; the secret is never echoed."""
    body = body_of(request, OutboxConfigIn)
    stored = await _outbox(request).configure_webhook(
        body.webhook_url, secret=body.secret, timeout=body.timeout_seconds
    )
    return json_response(stored)


async def outbox_stats(request: Request) -> Response:
    """Message counts per status and the oldest pending instant."""
    return json_response(await _outbox(request).stats())


async def outbox_dead(request: Request) -> Response:
    """Dead messages, newest first; pass ``next_before`` as ``before`` for the next page."""
    query = query_of(request, PageQuery)
    jobs = await _outbox(request).dead(limit=query.limit, before=query.before)
    return page([j.as_dict() for j in jobs], query.limit)


async def outbox_requeue(request: Request) -> Response:
    """Compare-and-set dead → pending (R-H6); 409 when the message is not dead."""
    message_id = path_id(request)
    await _outbox(request).requeue(message_id)
    return json_response({"id": message_id, "status": "pending"})


TAG = "outboxes"
# fmt: off
endpoints = [
    Endpoint(
        "POST", "/outbox/{name}/messages", enqueue_message, "ingest", "Enqueue a message", TAG,
        body=OutboxMessageIn, response=EnqueuedOut, status=202,
    ),
    Endpoint(
        "GET", "/outbox/{name}/stats", outbox_stats, "read", "Outbox statistics", TAG,
        response=OutboxStatsOut,
    ),
    Endpoint(
        "GET", "/outbox/{name}/dead", outbox_dead, "read", "Dead messages", TAG,
        query=PageQuery, response=JobPage,
    ),
    Endpoint(
        "POST", "/outbox/{name}/dead/{id}/requeue", outbox_requeue, "admin",
        "Re-queue a dead message", TAG, response=RequeuedOut, errors=(404, 409),
    ),
    Endpoint(
        "PUT", "/admin/outboxes/{name}", configure_outbox, "admin",
        "Configure the webhook target", TAG, body=OutboxConfigIn, response=OutboxConfigOut,
    ),
]
# fmt: on
