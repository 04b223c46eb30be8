"""Queues over HTTP (R-H2): live counts, per-queue stats, dead letters, re-queue."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from service.http.api import Endpoint, query_of
from service.http.common import engine_of, json_response, page, path_id
from service.http.models import JobPage, PageQuery, QueueListOut, QueueStatsOut, RequeuedOut


def _queue(request: Request) -> str:
    name: str = request.path_params["name"]
    return name


async def list_queues(request: Request) -> Response:
    """Every queue with live jobs: pending, running and dead counts and the oldest
    pending ``run_at`` (engine-internal ``__`` queues included)."""
    return json_response({"items": await engine_of(request).queues.live_stats()})


async def queue_stats(request: Request) -> Response:
    """One queue's counts per status (``done`` only exists with a retention period)."""
    return json_response(await engine_of(request).queues.stats(_queue(request)))


async def queue_dead(request: Request) -> Response:
    """Dead jobs, newest first; pass ``next_before`` as ``before`` for the next page."""
    query = query_of(request, PageQuery)
    jobs = await engine_of(request).queues.list_dead(
        _queue(request), limit=query.limit, before=query.before
    )
    return page([j.as_dict() for j in jobs], query.limit)


async def queue_requeue(request: Request) -> Response:
    """Compare-and-set dead → pending with a fresh attempt budget (R-Q5, R-H6)."""
    job_id = path_id(request)
    await engine_of(request).queues.requeue_dead(job_id, queue=_queue(request))
    return json_response({"id": job_id, "status": "pending"})


TAG = "queues"
# fmt: off
endpoints = [
    Endpoint(
        "GET", "/queues", list_queues, "read", "Live counts of every queue", TAG,
        response=QueueListOut,
    ),
    Endpoint(
        "GET", "/queues/{name}/stats", queue_stats, "read", "Queue statistics", TAG,
        response=QueueStatsOut,
    ),
    Endpoint(
        "GET", "/queues/{name}/dead", queue_dead, "read", "Dead jobs", TAG,
        query=PageQuery, response=JobPage,
    ),
    Endpoint(
        "POST", "/queues/{name}/dead/{id}/requeue", queue_requeue, "admin",
        "Re-queue a dead job", TAG, response=RequeuedOut, errors=(404, 409),
    ),
]
# fmt: on
