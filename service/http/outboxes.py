"""Outbox enqueue, configuration, stats and dead letters over HTTP (R-O4)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from service.http.auth import require
from service.http.body import read_model
from service.http.common import engine_of, json_response, path_id, query_int
from service.http.models import OutboxConfigIn, OutboxMessageIn


async def enqueue_message(request: Request) -> Response:
    """``POST /outbox/{name}/messages`` (ingest): 202 with ``{"id": …}``."""
    await require(request, "ingest")
    outbox = engine_of(request).outbox(request.path_params["name"])
    body = await read_model(request, OutboxMessageIn, request.app.state.max_body_bytes)
    message_id = await outbox.enqueue(
        body.payload,
        max_attempts=body.max_attempts,
        delay=body.delay_seconds,
        dedupe_key=body.dedupe_key,
    )
    return json_response({"id": message_id, "outbox": outbox.name}, 202)


async def configure_outbox(request: Request) -> Response:
    """``PUT /admin/outboxes/{name}`` (admin): set the webhook target."""
    await require(request, "admin")
    outbox = engine_of(request).outbox(request.path_params["name"])
    body = await read_model(request, OutboxConfigIn, request.app.state.max_body_bytes)
    stored = await outbox.configure_webhook(
        body.webhook_url, secret=body.secret, timeout=body.timeout_seconds
    )
    return json_response(stored)


async def outbox_stats(request: Request) -> Response:
    """``GET /outbox/{name}/stats`` (read)."""
    await require(request, "read")
    return json_response(await engine_of(request).outbox(request.path_params["name"]).stats())


async def outbox_dead(request: Request) -> Response:
    """``GET /outbox/{name}/dead?limit=&before=`` (read): dead messages, newest first."""
    await require(request, "read")
    outbox = engine_of(request).outbox(request.path_params["name"])
    limit = query_int(request, "limit", 50, 1, 500) or 50
    jobs = await outbox.dead(limit=limit, before=query_int(request, "before", None, 1, 2**63 - 1))
    items = [j.as_dict() for j in jobs]
    return json_response(
        {"items": items, "next_before": items[-1]["id"] if len(items) == limit else None}
    )


async def outbox_requeue(request: Request) -> Response:
    """``POST /outbox/{name}/dead/{id}/requeue`` (admin): dead → pending, else 409."""
    await require(request, "admin")
    outbox = engine_of(request).outbox(request.path_params["name"])
    message_id = path_id(request)
    await outbox.requeue(message_id)
    return json_response({"id": message_id, "status": "pending"})


routes = [
    Route("/outbox/{name}/messages", enqueue_message, methods=["POST"]),
    Route("/outbox/{name}/stats", outbox_stats, methods=["GET"]),
    Route("/outbox/{name}/dead", outbox_dead, methods=["GET"]),
    Route("/outbox/{name}/dead/{id}/requeue", outbox_requeue, methods=["POST"]),
    Route("/admin/outboxes/{name}", configure_outbox, methods=["PUT"]),
]
