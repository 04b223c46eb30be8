"""Schedules over HTTP (R-S1, R-S10, R-H2, R-H6)."""

from __future__ import annotations

from datetime import datetime

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from service.errors import NotFound, ValidationError
from service.http.auth import require
from service.http.body import read_model
from service.http.common import engine_of, json_response, query_int
from service.http.models import ScheduleIn, SkipIn
from service.payloads import require_aware


def _name(request: Request) -> str:
    name: str = request.path_params["name"]
    return name


async def put_schedule(request: Request) -> Response:
    """``PUT /schedules/{name}`` (admin): create (201) or update (200)."""
    await require(request, "admin")
    body = await read_model(request, ScheduleIn, request.app.state.max_body_bytes)
    row, created = await engine_of(request).schedules.schedule(
        _name(request),
        body.spec,
        body.queue,
        body.payload,
        timezone=body.timezone,
        catch_up=body.catch_up,
        grace=body.grace_seconds,
        priority=body.priority,
        max_attempts=body.max_attempts,
    )
    return json_response(row, 201 if created else 200)


async def get_schedule(request: Request) -> Response:
    """``GET /schedules/{name}`` (read)."""
    await require(request, "read")
    return json_response(await engine_of(request).schedules.get_schedule(_name(request)))


async def list_schedules(request: Request) -> Response:
    """``GET /schedules?limit=&after=`` (read), by name."""
    await require(request, "read")
    limit = query_int(request, "limit", 100, 1, 1000) or 100
    rows = await engine_of(request).schedules.list_schedules(
        limit=limit, after=request.query_params.get("after") or None
    )
    return json_response(
        {"items": rows, "next_after": rows[-1]["name"] if len(rows) == limit else None}
    )


async def delete_schedule(request: Request) -> Response:
    """``DELETE /schedules/{name}`` (admin): 200, or 404 when absent."""
    await require(request, "admin")
    name = _name(request)
    if not await engine_of(request).schedules.unschedule(name):
        raise NotFound(f"schedule {name!r} does not exist")
    return json_response({"name": name, "deleted": True})


async def pause_schedule(request: Request) -> Response:
    """``POST /schedules/{name}/pause`` (admin): 409 when already paused."""
    await require(request, "admin")
    return json_response(await engine_of(request).schedules.pause(_name(request)))


async def resume_schedule(request: Request) -> Response:
    """``POST /schedules/{name}/resume`` (admin): 409 when not paused."""
    await require(request, "admin")
    return json_response(await engine_of(request).schedules.resume(_name(request)))


async def skip_occurrence(request: Request) -> Response:
    """``POST /schedules/{name}/skip`` (admin) with ``{"instant": …}``."""
    await require(request, "admin")
    body = await read_model(request, SkipIn, request.app.state.max_body_bytes)
    return json_response(await engine_of(request).schedules.skip(_name(request), body.instant))


async def upcoming(request: Request) -> Response:
    """``GET /schedules/{name}/upcoming?count=&after=`` (read): forecast, nothing stored."""
    await require(request, "read")
    count = query_int(request, "count", 10, 1, 1000) or 10
    after = None
    raw = request.query_params.get("after")
    if raw:
        try:
            after = require_aware(datetime.fromisoformat(raw), "after")
        except ValueError:
            raise ValidationError(
                "query parameter after must be an ISO 8601 instant with a UTC offset",
                errors=[{"loc": ["query", "after"], "msg": "invalid instant", "type": "datetime"}],
            ) from None
    fires = await engine_of(request).schedules.upcoming(_name(request), count, after)
    return json_response({"name": _name(request), "items": fires})


routes = [
    Route("/schedules", list_schedules, methods=["GET"]),
    Route("/schedules/{name}", put_schedule, methods=["PUT"]),
    Route("/schedules/{name}", get_schedule, methods=["GET"]),
    Route("/schedules/{name}", delete_schedule, methods=["DELETE"]),
    Route("/schedules/{name}/pause", pause_schedule, methods=["POST"]),
    Route("/schedules/{name}/resume", resume_schedule, methods=["POST"]),
    Route("/schedules/{name}/skip", skip_occurrence, methods=["POST"]),
    Route("/schedules/{name}/upcoming", upcoming, methods=["GET"]),
]
