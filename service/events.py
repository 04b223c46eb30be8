"""Scheduled (one-shot) events and the live path (R-E1–R-E6).

An event is stored now and dispatched at ``trigger_at``. Dispatching runs the
same handler as a live event (``POST /events``, :meth:`ScheduledEvents.ingest`):
inside one transaction the row is marked ``dispatched`` and the handler runs
on that transaction's connection, so a handler that writes to the database
(the default handler enqueues into the ``events`` outbox) commits atomically
with the status change. A crash before commit leaves the row pending: it is
dispatched again (at-least-once).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import anyio
import asyncpg
from asyncpg import Record

from service.checks import check_id, check_int, check_text, require_text
from service.db import Connection, Statements, mark_clean
from service.errors import Conflict, NotFound, PgwakeError, ValidationError
from service.health import Health
from service.metrics import Metrics
from service.payloads import DEFAULT_MAX_BYTES, encode_payload, require_aware
from service.queries import events as q
from service.wakeup import WakeHub
from service.worker import error_text

log = logging.getLogger("pgwake.events")

_CONTENDED_RECHECK = 0.05
STATUSES = ("pending", "dispatched", "failed", "cancelled")


@dataclass(frozen=True)
class Event:
    """What a handler receives, for a dispatched scheduled event or a live one (R-E4).

    ``id`` is the scheduled event's id, or a ``live-<uuid>`` string for a live event.
    Instants are UTC-aware; ``dispatched_at`` is when the handler was called.
    """

    id: int | str
    event_type: str
    subject_id: str | None
    tenant_id: str | None
    facts: dict[str, Any]
    trigger_at: datetime
    dispatched_at: datetime
    external_key: str | None = None

    def as_message(self) -> dict[str, Any]:
        """The JSON body delivered to webhooks (SPEC §9)."""
        return {
            "id": self.id,
            "event_type": self.event_type,
            "subject_id": self.subject_id,
            "tenant_id": self.tenant_id,
            "facts": self.facts,
            "trigger_at": self.trigger_at.isoformat(),
            "dispatched_at": self.dispatched_at.isoformat(),
        }


#: ``async handler(event, conn)``; ``conn`` is the dispatch transaction's connection
#: (a pool connection proxy, which offers every :class:`asyncpg.Connection` method).
EventHandler = Callable[[Event, asyncpg.Connection], Awaitable[object]]


class HandlerFailed(PgwakeError):
    """The event handler raised while handling a live event (``ingest``)."""

    code = "handler_failed"
    status = 500
    title = "Event handler failed"


REQUIRED_FACTS = ("facts_version", "scenario")
#: Room kept under the payload limit for the fields that travel with the facts
#: (event type, subject, tenant, instants): an event accepted when stored can
#: always be handed on as one message (R-E1: validation happens at store time).
ENVELOPE_BYTES = 8 * 1024


def missing_facts(facts: Mapping[str, Any]) -> list[str]:
    """The members R-E1 requires of facts (``facts_version``, ``scenario``) that are absent."""
    return [k for k in REQUIRED_FACTS if k not in facts]


def check_facts(facts: object, *, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """Validate event facts (R-E1, R-N4) and return them as JSON text.

    Facts must be a non-empty object carrying ``facts_version`` and ``scenario``, at
    most ``max_bytes`` minus 8 KiB kept for the event's other fields.

    Raises:
        ValidationError: missing members (``errors`` names each failing field).
        InvalidPayload, PayloadTooLarge: content jsonb cannot store, or too large.
    """
    if not isinstance(facts, dict) or not facts:
        raise ValidationError(
            "facts must be a non-empty JSON object",
            errors=[{"loc": ["facts"], "msg": "must be a non-empty object", "type": "value_error"}],
        )
    missing = missing_facts(facts)
    if missing:
        raise ValidationError(
            f"facts is missing {', '.join(missing)}",
            errors=[
                {"loc": ["facts", k], "msg": "field required", "type": "missing"} for k in missing
            ],
        )
    return encode_payload(facts, max_bytes=max_bytes - ENVELOPE_BYTES, what="facts")


def event_from_row(row: Mapping[str, Any] | Record) -> Event:
    return Event(
        id=row["id"],
        event_type=row["event_type"],
        subject_id=row["subject_id"],
        tenant_id=row["tenant_id"],
        facts=row["facts"],
        trigger_at=row["trigger_at"],
        dispatched_at=row["dispatched_at"],
        external_key=row["external_key"],
    )


class ScheduledEvents:
    """Store, inspect, control and dispatch scheduled events.

    Args:
        pool: the shared pool.
        hub: NOTIFY wakeups (topic ``events``).
        health: loop liveness registry.
        handler: called for each dispatched or live event with the transaction's connection.
        batch: events per dispatch transaction (R-E3, default 20).
        handler_timeout: seconds one handler call may take before it counts as failed.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        hub: WakeHub,
        health: Health,
        *,
        handler: EventHandler | None = None,
        batch: int = 20,
        handler_timeout: float = 30.0,
        max_payload_bytes: int = DEFAULT_MAX_BYTES,
        metrics: Metrics | None = None,
    ) -> None:
        self.pool = pool
        self.sql = Statements(pool)
        self.hub = hub
        self.health = health
        self.metrics = metrics or Metrics()
        self.handler = handler
        self.batch = batch
        self.handler_timeout = handler_timeout
        self.max_payload_bytes = max_payload_bytes

    async def store(
        self,
        event_type: str,
        trigger_at: datetime,
        facts: Mapping[str, Any],
        *,
        subject_id: str | None = None,
        tenant_id: str | None = None,
        external_key: str | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Store a scheduled event (R-E1, R-E2); NOTIFY wakes the dispatcher at commit.

        Args:
            event_type: non-empty string.
            trigger_at: timezone-aware instant; a past instant fires at once.
            facts: non-empty object with ``facts_version`` and ``scenario``.
            subject_id, tenant_id: optional strings.
            external_key: makes storing idempotent: a second store with the same key
                rewrites the row and resets it to pending (it fires again).

        Returns:
            ``(row, created)``: the stored row as a dict and whether it is new.

        Raises:
            ValidationError, NaiveDatetime, InvalidPayload, PayloadTooLarge: nothing stored.
        """
        args = (
            require_text(event_type, "event_type"),
            check_text(subject_id, "subject_id", required=False),
            check_text(tenant_id, "tenant_id", required=False),
            require_aware(trigger_at, "trigger_at"),
            check_facts(
                dict(facts) if isinstance(facts, Mapping) else facts,
                max_bytes=self.max_payload_bytes,
            ),
            check_text(external_key, "external_key", required=False),
        )
        row = await self.sql.fetchrow(q.STORE, *args)
        assert row is not None
        data = dict(row)
        created = bool(data.pop("created"))
        return data, created

    async def get(self, event_id: int) -> dict[str, Any]:
        """The stored row. Raises NotFound (or ValidationError for a non-integer id)."""
        check_id(event_id, "scheduled event")
        row = await self.sql.fetchrow(q.GET, event_id)
        if row is None:
            raise NotFound(f"scheduled event {event_id} does not exist")
        return dict(row)

    async def list(
        self, *, status: str | None = None, limit: int = 50, before: int | None = None
    ) -> list[dict[str, Any]]:
        """Rows newest first, optionally of one ``status``; ``before`` is the last id seen."""
        if status is not None and status not in STATUSES:
            raise ValidationError(f"status must be one of {', '.join(STATUSES)}")
        check_int(limit, "limit", 1, 1000)
        if before is not None:
            check_int(before, "before", 1, 2**63 - 1)
        rows = await self.sql.fetch(q.LIST, status, before, limit)
        return [dict(r) for r in rows]

    async def retry(self, event_id: int) -> dict[str, Any]:
        """Put a failed event back to pending (R-E6), compare-and-set on ``failed`` (R-H6).

        Raises:
            NotFound: no such event.  Conflict: not failed (``current`` carries the row).
        """
        return await self._cas(q.RETRY_FAILED, event_id, "failed")

    async def cancel(self, event_id: int) -> dict[str, Any]:
        """Cancel a pending event (R-E6), compare-and-set on ``pending`` (R-H6)."""
        return await self._cas(q.CANCEL_PENDING, event_id, "pending")

    async def _cas(self, sql: str, event_id: int, expected: str) -> dict[str, Any]:
        check_id(event_id, "scheduled event")
        row = await self.sql.fetchrow(sql, event_id)
        if row is not None:
            return dict(row)
        current = await self.get(event_id)
        raise Conflict(
            f"scheduled event {event_id} is {current['status']}, not {expected}",
            current={"status": current["status"]},
        )

    async def counts(self) -> dict[str, int]:
        """Number of events per status."""
        out = dict.fromkeys(STATUSES, 0)
        for r in await self.sql.fetch(q.COUNT_BY_STATUS):
            out[r["status"]] = r["n"]
        return out

    # -- dispatch ----------------------------------------------------------------

    async def _call(self, event: Event, conn: Connection) -> None:
        if self.handler is None:
            raise RuntimeError("no event handler registered")
        with anyio.fail_after(self.handler_timeout):
            await self.handler(event, cast(asyncpg.Connection, conn))

    async def dispatch_once(self) -> int:
        """Dispatch one batch of due events in one transaction (R-E3–R-E5).

        Each event runs in a savepoint: a handler exception rolls back that event's
        work only, marks it ``failed`` with ``last_error``, and the batch goes on.

        Returns:
            How many events were taken (dispatched or failed).
        """
        failed = 0
        async with self.pool.acquire() as conn:
            async with conn.transaction():
                rows = await conn.fetch(q.CLAIM_DUE, self.batch)
                events = sorted(map(event_from_row, rows), key=lambda e: (e.trigger_at, e.id))
                for event in events:
                    try:
                        async with conn.transaction():  # a savepoint per event
                            await self._call(event, conn)
                    except Exception as exc:
                        log.warning("scheduled event %s failed: %s", event.id, exc)
                        await conn.execute(q.MARK_FAILED, event.id, error_text(exc))
                        failed += 1
            if not rows:
                # No handler ran on this connection: its session is as pgwake left it.
                mark_clean(conn)
        # Committed: count them.
        for r in rows:
            self.metrics.dispatch_lag.observe(
                (r["dispatched_at"] - r["trigger_at"]).total_seconds()
            )
        if failed:
            self.metrics.events.labels("failed").inc(failed)
        if len(rows) > failed:
            self.metrics.events.labels("dispatched").inc(len(rows) - failed)
        return len(events)

    async def next_due_in(self) -> float | None:
        """Seconds until the soonest pending trigger (<= 0: due; None: nothing pending)."""
        v = await self.sql.fetchval(q.NEXT_DUE_IN)
        return None if v is None else float(v)

    async def run_dispatcher(
        self, *, poll_seconds: float = 30.0, stopping: anyio.Event | None = None
    ) -> None:
        """The dispatcher loop (R-E3): sleep until the soonest trigger, woken early by
        NOTIFY, polling every ``poll_seconds`` only as a safety net. Returns after the
        batch in hand once ``stopping`` is set; cancelling it rolls that batch back."""
        self.health.register("dispatcher", poll_seconds)
        while stopping is None or not stopping.is_set():
            waiter = self.hub.arm("events")
            taken = await self.dispatch_once()
            self.health.beat("dispatcher")
            if taken >= self.batch:
                waiter.disarm()
                continue
            next_in = await self.next_due_in()
            if next_in is None:
                timeout = poll_seconds
            elif next_in <= 0:
                timeout = 0.0 if taken else _CONTENDED_RECHECK
            else:
                timeout = min(next_in, poll_seconds)
            await waiter.wait(timeout)

    async def ingest(
        self,
        event_type: str,
        facts: Mapping[str, Any],
        *,
        subject_id: str | None = None,
        tenant_id: str | None = None,
    ) -> Event:
        """Handle a live event now, on the same path as a dispatched one (R-E4).

        Returns:
            The Event handed to the handler.

        Raises:
            ValidationError, InvalidPayload, PayloadTooLarge: bad input.
            HandlerFailed: the handler raised; its work was rolled back.
        """
        facts_text = check_facts(
            dict(facts) if isinstance(facts, Mapping) else facts, max_bytes=self.max_payload_bytes
        )
        now = datetime.now(UTC)
        event = Event(
            id=f"live-{uuid.uuid4()}",
            event_type=require_text(event_type, "event_type"),
            subject_id=check_text(subject_id, "subject_id", required=False),
            tenant_id=check_text(tenant_id, "tenant_id", required=False),
            facts=json.loads(facts_text),
            trigger_at=now,
            dispatched_at=now,
        )
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                await self._call(event, conn)
        except Exception as exc:
            raise HandlerFailed(f"event handler failed: {error_text(exc)}") from exc
        return event
