"""Queues: enqueue, claim, lease-fenced ack/retry/heartbeat, dead letters (R-Q1–R-Q10).

Every operation is one SQL statement from :mod:`service.queries.jobs`. The
Python side validates input before any round trip (R-N1, R-N2, R-N4).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from service.checks import (
    check_id,
    check_int,
    check_seconds,
    check_text,
    require_text,
    storable_text,
)
from service.db import Statements
from service.errors import Conflict, NotFound, ValidationError
from service.jobs import Job, NewJob, StoredPayload
from service.metrics import Metrics
from service.names import check_name
from service.payloads import DEFAULT_MAX_BYTES, encode_payload, require_aware
from service.queries import jobs as q

Executor = asyncpg.Connection | asyncpg.Pool | PoolConnectionProxy


@dataclass(frozen=True)
class QueueDefaults:
    """Engine-wide defaults used when neither the call nor the queue row sets a value (R-Q2).

    Seconds for every duration.
    """

    lease_seconds: float = 60.0
    max_attempts: int = 5
    backoff_base_seconds: float = 5.0
    backoff_cap_seconds: float = 3600.0


ENGINE_DEFAULTS = QueueDefaults()
_DEDUPE_RETRIES = 20


class Queues:
    """Queue operations over a pool (or any asyncpg executor).

    Args:
        pool: the shared asyncpg pool.
        defaults: engine defaults (R-Q2).
        max_payload_bytes: payload limit in bytes (R-N4).
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        defaults: QueueDefaults = ENGINE_DEFAULTS,
        max_payload_bytes: int = DEFAULT_MAX_BYTES,
        metrics: Metrics | None = None,
    ) -> None:
        self.pool = pool
        self.sql = Statements(pool)
        self.defaults = defaults
        self.max_payload_bytes = max_payload_bytes
        self.metrics = metrics or Metrics()
        self._ensured: set[str] = set()

    # -- enqueue -----------------------------------------------------------------

    def _row(self, job: NewJob) -> tuple[Any, ...]:
        if isinstance(job.payload, StoredPayload):
            payload = str(job.payload)
        else:
            raw = dict(job.payload) if isinstance(job.payload, Mapping) else job.payload
            payload = encode_payload(raw, max_bytes=self.max_payload_bytes)
        if job.run_at is not None and job.delay is not None:
            raise ValidationError(
                "pass run_at or delay, not both",
                errors=[{"loc": ["delay"], "msg": "conflicts with run_at", "type": "value_error"}],
            )
        run_at = require_aware(job.run_at, "run_at") if job.run_at is not None else None
        delay = check_seconds(job.delay, "delay") if job.delay is not None else None
        priority = check_int(job.priority, "priority", -(2**31))
        max_attempts = (
            check_int(job.max_attempts, "max_attempts", 1) if job.max_attempts is not None else None
        )
        check_text(job.dedupe_key, "dedupe_key", required=False, max_len=512)
        scheduled_for = (
            require_aware(job.scheduled_for, "scheduled_for") if job.scheduled_for else None
        )
        return (payload, priority, run_at, delay, max_attempts, job.dedupe_key, scheduled_for)

    async def insert(
        self,
        executor: Executor,
        queue: str,
        jobs: Sequence[NewJob],
        *,
        allow_reserved: bool = False,
        ensure: QueueDefaults | None = None,
    ) -> list[int]:
        """Insert ``jobs`` into ``queue`` with one statement; the engine's entry for every enqueue.

        Args:
            executor: a pool (auto-commit) or a connection (joins its open transaction).
            queue: queue name (R-N1).
            jobs: the jobs; all validated before the round trip.
            allow_reserved: engine-internal callers (outboxes, schedules) use ``__`` queues.
            ensure: create the queue row with these defaults (after validation) if absent.

        Returns:
            One id per input job, in order. A job whose ``dedupe_key`` matches a
            pending or running job of the queue returns that job's id (R-Q7).

        Raises:
            InvalidName, ReservedName, InvalidPayload, PayloadTooLarge,
            NaiveDatetime, ValidationError: bad input; nothing is stored.
        """
        if not allow_reserved:
            check_name(queue, kind="queue")
        rows = [self._row(j) for j in jobs]
        if not rows:
            return []
        if ensure is not None:
            await self.ensure(queue, ensure)
        d = self.defaults
        defaults = (d.max_attempts, d.lease_seconds, d.backoff_base_seconds, d.backoff_cap_seconds)
        # On a pool: pgwake's statement alone, so the release needs no session reset.
        run = self.sql if executor is self.pool else executor
        if isinstance(run, asyncpg.Pool):
            run = Statements(run)
        if len(rows) == 1:
            # One job (every single enqueue): scalar parameters, no arrays to unnest.
            rec = await run.fetchrow(q.ENQUEUE_ONE, queue, *rows[0], *defaults)
            if rec is not None:
                self.metrics.enqueued.labels(queue).inc()
                return [int(rec["id"])]
            # Its dedupe key belongs to a live job: resolved below, as in a batch.
        cols = list(zip(*rows, strict=True))
        args = (
            [queue] * len(rows),
            list(cols[0]),
            list(cols[1]),
            list(cols[2]),
            list(cols[3]),
            list(cols[4]),
            list(cols[5]),
            list(cols[6]),
            *defaults,
        )
        ids: list[int | None] = [None] * len(rows)
        want: dict[str, list[int]] = {}
        for i, key in enumerate(cols[5]):
            if key is not None:
                want.setdefault(key, []).append(i)
        inserted = await run.fetch(q.ENQUEUE, *args) if len(rows) > 1 else []
        if inserted:
            self.metrics.enqueued.labels(queue).inc(len(inserted))
        unkeyed = iter(i for i, key in enumerate(cols[5]) if key is None)
        for rec in inserted:
            if rec["dedupe_key"] is None:
                ids[next(unkeyed)] = rec["id"]
            else:
                for i in want[rec["dedupe_key"]]:
                    ids[i] = rec["id"]
        # Keys that collided with a live job: return that job's id (R-Q7). The live
        # job may finish in between; then insert again. Each statement sees all
        # commits so far, so this converges.
        for _ in range(_DEDUPE_RETRIES):
            missing = sorted({cols[5][i] for i, v in enumerate(ids) if v is None})
            if not missing:
                return [int(v) for v in ids if v is not None]
            found = await run.fetch(q.FIND_LIVE_BY_DEDUPE, [queue] * len(missing), missing)
            for rec in found:
                for i in want[rec["dedupe_key"]]:
                    ids[i] = rec["id"]
            missing = sorted({cols[5][i] for i, v in enumerate(ids) if v is None})
            if not missing:
                continue
            idx = [want[k][0] for k in missing]
            retry_args = (
                [queue] * len(idx),
                *([cols[c][i] for i in idx] for c in range(7)),
                *args[8:],
            )
            for rec in await run.fetch(q.ENQUEUE, *retry_args):
                for i in want[rec["dedupe_key"]]:
                    ids[i] = rec["id"]
        raise Conflict(f"could not resolve dedupe keys on queue {queue!r}; try again")

    async def enqueue(
        self,
        queue: str,
        payload: Mapping[str, Any],
        *,
        run_at: datetime | None = None,
        delay: float | None = None,
        priority: int = 0,
        max_attempts: int | None = None,
        dedupe_key: str | None = None,
    ) -> int:
        """Enqueue one job, auto-committed (R-Q1); wakes workers at commit (R-Q9).

        Args:
            queue: queue name (R-N1).
            payload: JSON object (R-N4).
            run_at: timezone-aware instant to run at; or ``delay`` seconds from now.
            priority: higher runs first.
            max_attempts: overrides the queue's default (R-Q2).
            dedupe_key: at most one pending or running job per (queue, key) (R-Q7).

        Returns:
            The job id (the existing job's id on a dedupe hit).

        Raises:
            InvalidName, ReservedName, InvalidPayload, PayloadTooLarge, NaiveDatetime,
            ValidationError.
        """
        job = NewJob(payload, run_at, delay, priority, max_attempts, dedupe_key)
        return (await self.insert(self.pool, queue, [job]))[0]

    async def enqueue_tx(
        self,
        conn: asyncpg.Connection,
        queue: str,
        payload: Mapping[str, Any],
        *,
        run_at: datetime | None = None,
        delay: float | None = None,
        priority: int = 0,
        max_attempts: int | None = None,
        dedupe_key: str | None = None,
    ) -> int:
        """Like :meth:`enqueue`, inside the caller's open transaction on ``conn`` (R-Q1).

        Rollback drops the job; commit publishes it and wakes workers.
        """
        job = NewJob(payload, run_at, delay, priority, max_attempts, dedupe_key)
        return (await self.insert(conn, queue, [job]))[0]

    async def enqueue_many(
        self,
        queue: str,
        jobs: Iterable[NewJob | Mapping[str, Any]],
        *,
        conn: asyncpg.Connection | None = None,
    ) -> list[int]:
        """Enqueue many jobs in one statement (R-Q1).

        Args:
            queue: queue name.
            jobs: :class:`NewJob` items, or bare payload dicts.
            conn: join this connection's transaction instead of auto-committing.

        Returns:
            Job ids in input order.
        """
        if isinstance(jobs, Mapping | str | bytes) or not isinstance(jobs, Iterable):
            raise ValidationError("jobs must be an iterable of NewJob or payload objects")
        items = [j if isinstance(j, NewJob) else NewJob(j) for j in jobs]
        return await self.insert(conn if conn is not None else self.pool, queue, items)

    # -- leases ------------------------------------------------------------------

    async def claim(
        self,
        queue: str,
        worker_id: str,
        limit: int = 1,
        *,
        allow_reserved: bool = False,
        executor: Executor | None = None,
    ) -> list[Job]:
        """Claim up to ``limit`` due jobs in one statement with SKIP LOCKED (R-Q3).

        Highest priority first, then oldest ``run_at``, then id. Each claimed job has
        ``attempts`` incremented, ``worker_id`` set and a lease deadline of
        now + its ``lease_seconds``.

        Args:
            executor: run the statement there (a worker's own connection) instead of
                on the pool; it auto-commits all the same.

        Returns:
            The claimed jobs in claim order, bound for ack/retry/heartbeat.
        """
        if not allow_reserved:
            check_name(queue, kind="queue")
        worker_id = require_text(worker_id, "worker_id")
        check_int(limit, "limit", 1, 10_000)
        rows = await (executor or self.sql).fetch(q.CLAIM, queue, worker_id, limit)
        if rows:
            self.metrics.claimed.labels(queue).inc(len(rows))
        jobs = [Job.from_row(r, self) for r in rows]
        jobs.sort(key=lambda j: (-j.priority, j.run_at, j.id))
        return jobs

    async def ack(self, job: Job) -> bool:
        """Complete a claimed job: delete it, or keep it as ``done`` when the queue
        has a retention period (R-Q4, R-Q10).

        Returns:
            False when the lease is no longer this worker's (nothing changed).
        """
        return job.id in await self.ack_many([job])

    async def ack_many(self, jobs: Sequence[Job], *, executor: Executor | None = None) -> set[int]:
        """Ack several claimed jobs of one worker in one statement, each fenced on its
        own lease (R-Q4): the worker's batched acks.

        Args:
            executor: as for :meth:`claim`.

        Returns:
            The ids acked; a job missing from it had lost its lease (nothing changed).
        """
        if not jobs:
            return set()
        worker_ids = {j.worker_id for j in jobs}
        if len(worker_ids) != 1:
            raise ValueError("ack_many takes the jobs of one worker")
        rows = await (executor or self.sql).fetch(
            q.ACK, [j.id for j in jobs], worker_ids.pop(), [j.attempts for j in jobs]
        )
        acked = {r["id"] for r in rows}
        per_queue: dict[str, int] = {}
        for job in jobs:
            if job.id in acked:
                per_queue[job.queue] = per_queue.get(job.queue, 0) + 1
        for queue, n in per_queue.items():
            self.metrics.acked.labels(queue).inc(n)
        return acked

    async def retry(self, job: Job, error: str, *, delay: float | None = None) -> bool:
        """Fail the current attempt (R-Q4, R-Q5).

        With attempts left the job returns to pending after ``delay`` seconds, or by
        default after exponential backoff with full jitter: uniform between the
        base and min(cap, base·2^attempts). With none left it becomes ``dead``
        with ``error`` recorded.

        Returns:
            False when the lease is no longer this worker's (nothing changed).
        """
        if delay is not None:
            delay = check_seconds(delay, "delay")
        row = await self.sql.fetchrow(
            q.RETRY, job.id, job.worker_id, job.attempts, storable_text(error), delay
        )
        if row is not None:
            counter = self.metrics.dead if row["status"] == "dead" else self.metrics.retried
            counter.labels(job.queue).inc()
        return row is not None

    async def release(self, job: Job) -> bool:
        """Give a claimed job back without counting the attempt (the worker is stopping),
        so another worker takes it now instead of after the lease. False if lease lost."""
        return await self.sql.fetchval(q.RELEASE, job.id, job.worker_id, job.attempts) is not None

    async def dead_letter(self, job: Job, error: str) -> bool:
        """Move a claimed job to ``dead`` at once (e.g. HTTP 410 Gone). False if lease lost."""
        row = await self.sql.fetchrow(
            q.DEAD_LETTER, job.id, job.worker_id, job.attempts, storable_text(error)
        )
        if row is not None:
            self.metrics.dead.labels(job.queue).inc()
        return row is not None

    async def heartbeat(self, job: Job, *, extend: float | None = None) -> bool:
        """Push the lease deadline to now + ``extend`` seconds (default: the job's lease).

        Returns:
            False when the lease is no longer this worker's.
        """
        if extend is not None:
            extend = check_seconds(extend, "extend", allow_zero=False)
        row = await self.sql.fetchrow(q.HEARTBEAT, job.id, job.worker_id, job.attempts, extend)
        return row is not None

    async def reap_expired(self, limit: int = 1000) -> int:
        """Return jobs whose lease expired to pending, or dead without attempts left (R-Q6).

        Returns:
            How many jobs were reclaimed.
        """
        return len(await self.sql.fetch(q.REAP_EXPIRED, limit))

    async def prune_done(self, limit: int = 1000) -> int:
        """Delete ``done`` jobs older than their queue's retention (R-Q10). Returns the count."""
        status = await self.sql.execute(q.PRUNE_DONE, limit)
        return int(status.split()[-1])

    async def next_run_in(self, queue: str) -> float | None:
        """Seconds until the queue's soonest pending job is due (<= 0: due now; None: none)."""
        v = await self.sql.fetchval(q.NEXT_RUN_IN, queue)
        return None if v is None else float(v)

    async def next_lease_expiry_in(self) -> float | None:
        """Seconds until the soonest running lease expires (None when nothing runs)."""
        v = await self.sql.fetchval(q.NEXT_LEASE_EXPIRY_IN)
        return None if v is None else float(v)

    # -- inspection and admin ----------------------------------------------------

    async def get_job(self, job_id: int) -> Job | None:
        """The job row with id ``job_id``, or None (acked jobs are deleted by default)."""
        try:
            check_id(job_id, "job")
        except NotFound:
            return None
        row = await self.sql.fetchrow(q.GET, job_id)
        return None if row is None else Job.from_row(row)

    async def cancel(self, job_id: int) -> None:
        """Remove a pending job (R-Q8), compare-and-set on ``pending`` (R-H6).

        Raises:
            NotFound: no such job.
            Conflict: the job is no longer pending (``extra["current"]`` has its status).
        """
        check_id(job_id, "job")
        if await self.sql.fetchval(q.CANCEL, job_id) is None:
            await self._conflict_or_missing(job_id, "pending")

    async def requeue_dead(self, job_id: int, *, queue: str | None = None) -> None:
        """Put a dead job back to pending with a fresh attempt budget (R-Q5).

        Args:
            queue: when given, the job must belong to this queue.

        Raises:
            NotFound: no such job (in ``queue``).
            Conflict: the job is not dead, or a live job holds its dedupe key.
        """
        check_id(job_id, "job")
        if queue is not None:
            check_name(queue, kind="queue")
            job = await self.get_job(job_id)
            if job is None or job.queue != queue:
                raise NotFound(f"queue {queue!r} has no job {job_id}")
        try:
            done = await self.sql.fetchval(q.REQUEUE_DEAD, job_id)
        except asyncpg.UniqueViolationError:
            raise Conflict(
                f"job {job_id}: a pending or running job already holds its dedupe key"
            ) from None
        if done is None:
            await self._conflict_or_missing(job_id, "dead")

    async def _conflict_or_missing(self, job_id: int, expected: str) -> None:
        job = await self.get_job(job_id)
        if job is None:
            raise NotFound(f"job {job_id} does not exist")
        raise Conflict(
            f"job {job_id} is {job.status}, not {expected}", current={"status": job.status}
        )

    async def list_dead(
        self,
        queue: str,
        *,
        limit: int = 50,
        before: int | None = None,
        allow_reserved: bool = False,
    ) -> list[Job]:
        """Dead jobs of ``queue``, newest first; pass the last id as ``before`` to page."""
        if not allow_reserved:
            check_name(queue, kind="queue")
        check_int(limit, "limit", 1, 1000)
        if before is not None:
            check_int(before, "before", 1, 2**63 - 1)
        return [Job.from_row(r) for r in await self.sql.fetch(q.LIST_DEAD, queue, limit, before)]

    async def live_stats(self) -> list[dict[str, Any]]:
        """Every queue with pending, running or dead jobs: ``[{"queue", "pending",
        "running", "dead", "oldest_pending_run_at"}, …]`` by queue name."""
        out: dict[str, dict[str, Any]] = {}
        for r in await self.sql.fetch(q.LIVE_COUNTS):
            item = out.setdefault(
                r["queue"],
                {"queue": r["queue"], "pending": 0, "running": 0, "dead": 0,
                 "oldest_pending_run_at": None},
            )  # fmt: skip
            item[r["status"]] = r["n"]
            item["oldest_pending_run_at"] = r["oldest"] or item["oldest_pending_run_at"]
        return list(out.values())

    async def stats(self, queue: str, *, allow_reserved: bool = False) -> dict[str, Any]:
        """Counts per status for ``queue`` and the oldest pending ``run_at``."""
        if not allow_reserved:
            check_name(queue, kind="queue")
        counts = {"pending": 0, "running": 0, "done": 0, "dead": 0}
        oldest = None
        for r in await self.sql.fetch(q.STATS, queue):
            counts[r["status"]] = r["n"]
            oldest = r["oldest"] or oldest
        return {"queue": queue, **counts, "oldest_pending_run_at": oldest}

    async def configure(
        self,
        queue: str,
        *,
        lease_seconds: float | None = None,
        max_attempts: int | None = None,
        backoff_base_seconds: float | None = None,
        backoff_cap_seconds: float | None = None,
        retention_seconds: float | None = None,
        allow_reserved: bool = False,
    ) -> None:
        """Set a queue's defaults (R-Q2) and retention of completed jobs (R-Q10).

        Unset arguments keep the stored value. Seconds for every duration.
        """
        if not allow_reserved:
            check_name(queue, kind="queue")
        await self.sql.execute(
            q.CONFIGURE_QUEUE,
            queue,
            None
            if lease_seconds is None
            else check_seconds(lease_seconds, "lease_seconds", allow_zero=False),
            None if max_attempts is None else check_int(max_attempts, "max_attempts", 1),
            None
            if backoff_base_seconds is None
            else check_seconds(backoff_base_seconds, "backoff_base_seconds"),
            None
            if backoff_cap_seconds is None
            else check_seconds(backoff_cap_seconds, "backoff_cap_seconds"),
            None
            if retention_seconds is None
            else check_seconds(retention_seconds, "retention_seconds"),
        )

    async def ensure(self, queue: str, defaults: QueueDefaults) -> None:
        """Create the queue row with ``defaults`` if it does not exist (engine-internal).

        Done once per queue per process.
        """
        if queue in self._ensured:
            return
        await self.sql.execute(
            q.ENSURE_QUEUE,
            queue,
            defaults.lease_seconds,
            defaults.max_attempts,
            defaults.backoff_base_seconds,
            defaults.backoff_cap_seconds,
        )
        self._ensured.add(queue)
