"""Prometheus metrics of one engine (R-H2 ``/metrics``), with ``prometheus-client``.

Counters count what this process did (Prometheus sums replicas): jobs enqueued,
claimed, acked, retried and dead-lettered per queue; scheduled events
dispatched or failed; schedule boundaries fired. Histograms: scheduled-event
dispatch lag (``trigger_at`` → dispatch) and schedule fire lag (boundary →
fire), in seconds. Gauges refreshed at scrape time: loop liveness from
:class:`service.health.Health` and, from the database, live jobs per queue and
status and scheduled events per status.

Each engine owns its registry, so several engines in one process (tests, apps
embedding two) never collide in the global default registry.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from service.queries import events as eq
from service.queries import jobs as jq

if TYPE_CHECKING:
    from service.db import Connection
    from service.health import Health

CONTENT_TYPE = CONTENT_TYPE_LATEST
#: Lag buckets in seconds: a millisecond-level scheduler, and the takeover window.
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class Metrics:
    """The engine's metrics; :meth:`render` produces the Prometheus text format."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.enqueued = Counter("pgwake_jobs_enqueued", "Jobs enqueued", ["queue"], registry=r)
        self.claimed = Counter("pgwake_jobs_claimed", "Jobs claimed", ["queue"], registry=r)
        self.acked = Counter("pgwake_jobs_acked", "Jobs acked (completed)", ["queue"], registry=r)
        self.retried = Counter(
            "pgwake_jobs_retried", "Failed attempts scheduled again", ["queue"], registry=r
        )
        self.dead = Counter(
            "pgwake_jobs_dead", "Jobs moved to the dead letters", ["queue"], registry=r
        )
        self.events = Counter(
            "pgwake_scheduled_events", "Scheduled events taken by the dispatcher", ["outcome"],
            registry=r,
        )  # fmt: skip
        self.fired = Counter("pgwake_schedule_fires", "Schedule boundaries fired", registry=r)
        self.dispatch_lag = Histogram(
            "pgwake_event_dispatch_lag_seconds",
            "Scheduled event trigger_at to dispatch, seconds",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.fire_lag = Histogram(
            "pgwake_schedule_fire_lag_seconds",
            "Schedule boundary to fire, seconds",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.loop_up = Gauge(
            "pgwake_loop_up", "1 when the runner loop is healthy, else 0", ["loop"], registry=r
        )
        self.loop_age = Gauge(
            "pgwake_loop_seconds_since_success",
            "Seconds since the loop's last good iteration",
            ["loop"],
            registry=r,
        )
        self.loop_restarts = Gauge(
            "pgwake_loop_restarts", "Times the supervisor restarted the loop", ["loop"], registry=r
        )
        self.queue_jobs = Gauge(
            "pgwake_queue_jobs", "Live jobs per queue and status", ["queue", "status"], registry=r
        )
        self.pending_events = Gauge(
            "pgwake_scheduled_events_open", "Scheduled events per open status", ["status"],
            registry=r,
        )  # fmt: skip

    async def render(self, conn: Connection, health: Health) -> bytes:
        """Refresh the scrape-time gauges and return the exposition (text format 0.0.4)."""
        now = time.time()
        self.loop_up.clear()
        self.loop_age.clear()
        self.loop_restarts.clear()
        for s in health.snapshot():
            self.loop_up.labels(s.name).set(0 if s.stale(now) or s.down else 1)
            ref = s.last_ok if s.last_ok is not None else s.started_at
            self.loop_age.labels(s.name).set(round(now - ref, 3))
            self.loop_restarts.labels(s.name).set(s.restarts)
        self.queue_jobs.clear()
        for row in await conn.fetch(jq.LIVE_COUNTS):
            self.queue_jobs.labels(row["queue"], row["status"]).set(row["n"])
        self.pending_events.clear()
        counts = {"pending": 0, "failed": 0}
        for row in await conn.fetch(eq.OPEN_COUNTS):
            counts[row["status"]] = row["n"]
        for status, n in counts.items():
            self.pending_events.labels(status).set(n)
        return generate_latest(self.registry)
