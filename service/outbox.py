"""Transactional outbox (R-O1–R-O4): messages are jobs on the reserved queue
``__outbox:<name>``, relayed to a delivery callable or a signed webhook."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import anyio
import asyncpg

from service.checks import check_id, check_seconds, require_text
from service.errors import NotFound, ValidationError
from service.health import Health
from service.jobs import Job, NewJob
from service.names import check_name
from service.queries import outbox as q
from service.queues import QueueDefaults, Queues
from service.wakeup import WakeHub
from service.webhooks import WebhookTarget, signer
from service.worker import process, run_worker

OUTBOX_DEFAULTS = QueueDefaults(lease_seconds=60.0, max_attempts=5, backoff_base_seconds=5.0)
Delivery = Callable[[Job], Awaitable[object]]


def backing_queue(name: str) -> str:
    """The reserved queue behind outbox ``name`` (R-O1)."""
    return f"__outbox:{name}"


def check_secret(secret: object) -> str:
    """Validate a webhook signing secret (R-O4): ``whsec_`` + non-empty base64, or any
    other non-empty string (used as raw UTF-8 bytes).

    Raises:
        ValidationError: empty, not a string, NUL, or a ``whsec_`` secret that is not base64.
    """
    text = require_text(secret, "secret", max_len=512)
    try:
        signer(text)
    except Exception:
        raise ValidationError(
            "secret: a whsec_ secret must be followed by non-empty base64",
            errors=[{"loc": ["secret"], "msg": "invalid whsec_ secret", "type": "value_error"}],
        ) from None
    return text


def check_webhook_url(url: object) -> str:
    """Validate an http(s) URL for webhook delivery.

    Raises:
        ValidationError: not an absolute http/https URL.
    """
    url = require_text(url, "webhook_url", max_len=2048)
    try:
        parts = urlsplit(url)
        host = parts.hostname
        _ = parts.port
    except ValueError:
        host = None
    if host is None or parts.scheme not in ("http", "https"):
        raise ValidationError(
            f"webhook_url must be an absolute http(s) URL, got {url!r}",
            errors=[{"loc": ["webhook_url"], "msg": "not an http(s) URL", "type": "url"}],
        )
    return url


class Outbox:
    """One named outbox. Get it with :meth:`service.engine.Engine.outbox` (R-O1).

    Raises (on construction):
        InvalidName: empty or malformed name.
        ReservedName: a name starting with ``__``.
    """

    def __init__(
        self, name: str, queues: Queues, hub: WakeHub, health: Health, *, poll_seconds: float
    ) -> None:
        self.name = check_name(name, kind="outbox")
        self.queue = backing_queue(name)
        self._queues = queues
        self._hub = hub
        self._health = health
        self._poll_seconds = poll_seconds

    async def _ensure(self) -> None:
        await self._queues.ensure(self.queue, OUTBOX_DEFAULTS)

    async def enqueue(
        self,
        payload: Mapping[str, Any],
        *,
        max_attempts: int | None = None,
        delay: float | None = None,
        dedupe_key: str | None = None,
    ) -> int:
        """Store a message, auto-committed (R-O2). Returns the message id.

        Raises:
            InvalidPayload, PayloadTooLarge, ValidationError: bad input; nothing stored.
        """
        job = NewJob(payload, delay=delay, max_attempts=max_attempts, dedupe_key=dedupe_key)
        return (
            await self._queues.insert(
                self._queues.pool, self.queue, [job], allow_reserved=True, ensure=OUTBOX_DEFAULTS
            )
        )[0]

    async def enqueue_tx(
        self,
        conn: asyncpg.Connection,
        payload: Mapping[str, Any],
        *,
        max_attempts: int | None = None,
        delay: float | None = None,
        dedupe_key: str | None = None,
    ) -> int:
        """Store a message inside the caller's open transaction on ``conn`` (R-O2):
        the business write and the message commit or roll back together."""
        job = NewJob(payload, delay=delay, max_attempts=max_attempts, dedupe_key=dedupe_key)
        return (
            await self._queues.insert(
                conn, self.queue, [job], allow_reserved=True, ensure=OUTBOX_DEFAULTS
            )
        )[0]

    async def run_once(self, worker_id: str, delivery: Delivery) -> bool:
        """Claim one message and deliver it (R-O3).

        Ack on success; retry with the queue's backoff when ``delivery`` raises (its
        text becomes ``last_error``); dead after the last attempt.

        Returns:
            False when no message was due.
        """
        jobs = await self._queues.claim(self.queue, worker_id, 1, allow_reserved=True)
        if not jobs:
            return False
        await process(jobs[0], delivery)
        return True

    async def run(
        self,
        delivery: Delivery,
        *,
        worker_id: str,
        concurrency: int = 1,
        stopping: anyio.Event | None = None,
    ) -> None:
        """The relay loop (R-O3): deliver until cancelled, woken by NOTIFY; or until
        ``stopping`` is set, after the messages in flight are done."""
        await self._ensure()
        await run_worker(
            self._queues,
            self._hub,
            self._health,
            queue=self.queue,
            handler=delivery,
            worker_id=worker_id,
            concurrency=concurrency,
            poll_seconds=self._poll_seconds,
            loop_name=f"outbox:{self.name}",
            stopping=stopping,
        )

    async def configure_webhook(
        self, url: str | None, *, secret: str | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """Set (or with ``url=None`` clear) this outbox's webhook target (R-O4).

        Args:
            url: absolute http(s) URL.
            secret: ``whsec_<base64>`` or any string (used as raw UTF-8 key).
            timeout: per-request timeout in seconds (default 10).

        Returns:
            The stored configuration, without the secret.
        """
        if url is not None:
            check_webhook_url(url)
        if secret is not None:
            check_secret(secret)
        if timeout is not None:
            check_seconds(timeout, "timeout", allow_zero=False, maximum=300)
        await self._ensure()
        row = await self._queues.sql.fetchrow(q.CONFIGURE, self.name, url, secret, timeout)
        assert row is not None
        return dict(row)

    async def webhook(self) -> WebhookTarget | None:
        """The configured webhook target, or None."""
        row = await self._queues.sql.fetchrow(q.GET, self.name)
        if row is None or row["webhook_url"] is None:
            return None
        return WebhookTarget(row["webhook_url"], row["webhook_secret"], row["timeout_seconds"])

    async def stats(self) -> dict[str, Any]:
        """Message counts per status (pending, running, dead)."""
        out = await self._queues.stats(self.queue, allow_reserved=True)
        out["outbox"] = self.name
        return out

    async def dead(self, *, limit: int = 50, before: int | None = None) -> list[Job]:
        """Dead messages, newest first (keyset pagination by id)."""
        return await self._queues.list_dead(
            self.queue, limit=limit, before=before, allow_reserved=True
        )

    async def requeue(self, message_id: int) -> None:
        """Put a dead message back to pending (compare-and-set, R-H6).

        Raises:
            NotFound: no such message in this outbox.
            Conflict: the message is not dead.
        """
        check_id(message_id, "message")
        job = await self._queues.get_job(message_id)
        if job is None or job.queue != self.queue:
            raise NotFound(f"outbox {self.name!r} has no message {message_id}")
        await self._queues.requeue_dead(message_id)
