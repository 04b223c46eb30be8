"""Schedules over HTTP (R-S1, R-S10, R-H2, R-H6)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from service.errors import NotFound
from service.http.api import Endpoint, body_of, query_of
from service.http.common import engine_of, json_response, page
from service.http.models import (
    DeletedOut,
    ScheduleIn,
    ScheduleListQuery,
    ScheduleOut,
    SchedulePage,
    SkipIn,
    UpcomingOut,
    UpcomingQuery,
)


def _name(request: Request) -> str:
    name: str = request.path_params["name"]
    return name


async def put_schedule(request: Request) -> Response:
    """Create (201) or update (200) a schedule (R-S1); unchanged spec and zone keep
    the anchor and next fire time (R-S5)."""
    body = body_of(request, ScheduleIn)
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
    """One schedule with its counters (fired, skipped, missed)."""
    return json_response(await engine_of(request).schedules.get_schedule(_name(request)))


async def list_schedules(request: Request) -> Response:
    """Schedules by name; pass ``next_after`` as ``after`` for the next page."""
    query = query_of(request, ScheduleListQuery)
    rows = await engine_of(request).schedules.list_schedules(limit=query.limit, after=query.after)
    return page(rows, query.limit, cursor="next_after", key="name")


async def delete_schedule(request: Request) -> Response:
    """Remove a schedule; 404 when absent."""
    name = _name(request)
    if not await engine_of(request).schedules.unschedule(name):
        raise NotFound(f"schedule {name!r} does not exist")
    return json_response({"name": name, "deleted": True})


async def pause_schedule(request: Request) -> Response:
    """Compare-and-set running → paused (R-H6); 409 when already paused."""
    return json_response(await engine_of(request).schedules.pause(_name(request)))


async def resume_schedule(request: Request) -> Response:
    """Compare-and-set paused → running (R-H6); boundaries slept through do not fire."""
    return json_response(await engine_of(request).schedules.resume(_name(request)))


async def skip_occurrence(request: Request) -> Response:
    """Skip one coming fire instant: neither fired nor forecast (R-S10)."""
    body = body_of(request, SkipIn)
    return json_response(await engine_of(request).schedules.skip(_name(request), body.instant))


async def upcoming(request: Request) -> Response:
    """The next fire instants in UTC and the schedule's zone; nothing stored (R-S10)."""
    query = query_of(request, UpcomingQuery)
    fires = await engine_of(request).schedules.upcoming(_name(request), query.count, query.after)
    return json_response({"name": _name(request), "items": fires})


TAG = "schedules"
ONE = "/schedules/{name}"
# fmt: off
endpoints = [
    Endpoint(
        "GET", "/schedules", list_schedules, "read", "List schedules", TAG,
        query=ScheduleListQuery, response=SchedulePage,
    ),
    Endpoint(
        "PUT", ONE, put_schedule, "admin", "Create or update a schedule", TAG,
        body=ScheduleIn, response=ScheduleOut, also=(201,),
    ),
    Endpoint(
        "GET", ONE, get_schedule, "read", "Get a schedule", TAG,
        response=ScheduleOut, errors=(404,),
    ),
    Endpoint(
        "DELETE", ONE, delete_schedule, "admin", "Remove a schedule", TAG,
        response=DeletedOut, errors=(404,),
    ),
    Endpoint(
        "POST", ONE + "/pause", pause_schedule, "admin", "Pause a schedule", TAG,
        response=ScheduleOut, errors=(404, 409),
    ),
    Endpoint(
        "POST", ONE + "/resume", resume_schedule, "admin", "Resume a schedule", TAG,
        response=ScheduleOut, errors=(404, 409),
    ),
    Endpoint(
        "POST", ONE + "/skip", skip_occurrence, "admin", "Skip one occurrence", TAG,
        body=SkipIn, response=ScheduleOut, errors=(404,),
    ),
    Endpoint(
        "GET", ONE + "/upcoming", upcoming, "read", "Forecast the next fires", TAG,
        query=UpcomingQuery, response=UpcomingOut, errors=(404,),
    ),
]
# fmt: on
