"""The job row and the handle a handler receives (R-Q3, R-Q4)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from asyncpg import Record

if TYPE_CHECKING:
    from service.queues import Queues


class StoredPayload(str):
    """The JSON text of a payload pgwake validated and stored earlier (a schedule's).

    Enqueued verbatim: re-decoding and re-encoding stored ``jsonb`` can change its
    size (``1e300`` comes back as 301 digits), so a payload accepted once must not
    be measured again on every fire.
    """

    __slots__ = ()


@dataclass(frozen=True)
class NewJob:
    """One job of a batch enqueue (R-Q1). Times are timezone-aware; ``delay`` in seconds.

    ``run_at`` and ``delay`` are mutually exclusive; neither means "now".
    """

    payload: Mapping[str, Any] | StoredPayload
    run_at: datetime | None = None
    delay: float | None = None
    priority: int = 0
    max_attempts: int | None = None
    dedupe_key: str | None = None
    scheduled_for: datetime | None = None


@dataclass(frozen=True)
class Job:
    """A row of ``pgwake.jobs`` (R-Q2: resolved lease, attempts and backoff are stamped on it).

    A job returned by :meth:`service.queues.Queues.claim` is bound to its lease:
    ``worker_id`` and ``attempts`` fence :meth:`ack`, :meth:`retry`,
    :meth:`heartbeat` and :meth:`dead_letter` (R-Q4). Instants are UTC-aware.
    """

    id: int
    queue: str
    status: str
    payload: dict[str, Any]
    priority: int
    run_at: datetime
    attempts: int
    max_attempts: int
    lease_seconds: float
    backoff_base_seconds: float
    backoff_cap_seconds: float
    lease_expires_at: datetime | None
    worker_id: str | None
    dedupe_key: str | None
    scheduled_for: datetime | None
    last_error: str | None
    created_at: datetime
    finished_at: datetime | None
    _queues: Queues | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_row(cls, row: Mapping[str, Any] | Record, queues: Queues | None = None) -> Job:
        """Build a Job from a ``pgwake.jobs`` record, optionally bound for lease calls."""
        # The fields set directly: a frozen dataclass's __init__ sets each of its 19
        # fields through object.__setattr__, which a worker paid for every claimed job.
        job = object.__new__(cls)
        fields = job.__dict__
        for k in _COLUMNS:
            fields[k] = row[k]
        fields["_queues"] = queues
        return job

    def as_dict(self) -> dict[str, Any]:
        """The row as a JSON-friendly dict (instants as ISO 8601 strings)."""
        out: dict[str, Any] = {}
        for k in _COLUMNS:
            v = getattr(self, k)
            out[k] = v.isoformat() if isinstance(v, datetime) else v
        return out

    def _bound(self) -> Queues:
        if self._queues is None:
            raise RuntimeError("this Job is not bound to a lease; use the one claim() returned")
        return self._queues

    async def ack(self) -> bool:
        """Complete the job (R-Q4, R-Q10). Returns False if the lease was lost."""
        return await self._bound().ack(self)

    async def retry(self, error: str, delay: float | None = None) -> bool:
        """Fail this attempt (R-Q5); see :meth:`service.queues.Queues.retry`."""
        return await self._bound().retry(self, error, delay=delay)

    async def heartbeat(self, extend: float | None = None) -> bool:
        """Extend the lease by ``extend`` seconds (default: the job's lease). False if lost."""
        return await self._bound().heartbeat(self, extend=extend)

    async def dead_letter(self, error: str) -> bool:
        """Move the job to ``dead`` now, whatever attempts remain. False if the lease was lost."""
        return await self._bound().dead_letter(self, error)


_COLUMNS = (
    "id",
    "queue",
    "status",
    "payload",
    "priority",
    "run_at",
    "attempts",
    "max_attempts",
    "lease_seconds",
    "backoff_base_seconds",
    "backoff_cap_seconds",
    "lease_expires_at",
    "worker_id",
    "dedupe_key",
    "scheduled_for",
    "last_error",
    "created_at",
    "finished_at",
)
