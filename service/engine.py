"""The Engine: one asyncpg pool, one LISTEN connection, and every part wired (R-X1).

Use it as an async context manager::

    async with Engine("postgresql://localhost/app") as engine:
        job_id = await engine.enqueue("emails", {"to": "a@example.com"})
        async with engine.runner():
            ...  # loops run until the block exits
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import anyio
import asyncpg

from service import db
from service.events import Event, EventHandler, ScheduledEvents
from service.health import Health
from service.identity import instance_id
from service.jobs import Job, NewJob
from service.listener import Listener
from service.locks import Locks
from service.metrics import Metrics
from service.migrate import migrate as run_migrations
from service.names import check_name
from service.outbox import Outbox
from service.payloads import DEFAULT_MAX_BYTES
from service.queues import ENGINE_DEFAULTS, QueueDefaults, Queues
from service.schedules import Schedules
from service.wakeup import WakeHub
from service.worker import JobHandler

H = TypeVar("H", bound=JobHandler)


class Engine:
    """pgwake's entry point for library use.

    Args:
        dsn: PostgreSQL URL for the pool (may go through a transaction pooler).
        listen_dsn: direct URL for LISTEN (defaults to ``dsn``).
        pool: an existing asyncpg pool to share with the application instead of
            opening one (pgwake then does not close it).
        migrate: apply pending migrations on start (R-X3).
        poll_seconds: safety-net poll of every loop, seconds (``SCHEDULER_POLL_SECONDS``).
        dispatch_batch: scheduled events per dispatch transaction (R-E3).
        max_payload_bytes: payload limit in bytes (R-N4).
        defaults: engine-wide queue defaults (R-Q2).
        pool_min, pool_max: pool bounds, connections.
        statement_cache_size: 0 when ``dsn`` is a transaction pooler (PgBouncer);
            LISTEN and migrations then need ``listen_dsn``, a direct connection.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        listen_dsn: str | None = None,
        pool: asyncpg.Pool | None = None,
        migrate: bool = True,
        poll_seconds: float = 30.0,
        dispatch_batch: int = 20,
        max_payload_bytes: int = DEFAULT_MAX_BYTES,
        defaults: QueueDefaults = ENGINE_DEFAULTS,
        pool_min: int = 2,
        pool_max: int = 10,
        statement_cache_size: int = 100,
    ) -> None:
        if dsn is None and pool is None:
            raise ValueError("Engine needs a dsn or a pool")
        self.dsn = dsn
        self.listen_dsn = listen_dsn or dsn
        self._external_pool = pool
        self._migrate = migrate
        self.poll_seconds = poll_seconds
        self.dispatch_batch = dispatch_batch
        self.max_payload_bytes = max_payload_bytes
        self.defaults = defaults
        self._pool_min, self._pool_max = pool_min, pool_max
        self._statement_cache_size = statement_cache_size
        self.instance_id = instance_id()
        self.hub = WakeHub()
        self.health = Health()
        self.metrics = Metrics()
        self._event_handler: EventHandler | None = None
        self._job_handlers: dict[str, tuple[JobHandler, int]] = {}
        self._stack: contextlib.AsyncExitStack | None = None
        self._pool: asyncpg.Pool | None = None
        self.listener: Listener | None = None
        self.runner_running = False
        self._runner_active = False

    # -- lifecycle ---------------------------------------------------------------

    @property
    def pool(self) -> asyncpg.Pool:
        """The shared asyncpg pool (available once started)."""
        if self._pool is None:
            raise RuntimeError("Engine is not started; use 'async with Engine(...)'")
        return self._pool

    async def __aenter__(self) -> Engine:
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        try:
            if self._external_pool is not None:
                self._pool = self._external_pool
            else:
                assert self.dsn is not None
                self._pool = await db.create_pool(
                    self.dsn,
                    min_size=self._pool_min,
                    max_size=self._pool_max,
                    statement_cache_size=self._statement_cache_size,
                )
                stack.push_async_callback(self._pool.close)
            if self._migrate:
                await self._run_migrations()
            self.queues = Queues(
                self._pool,
                defaults=self.defaults,
                max_payload_bytes=self.max_payload_bytes,
                metrics=self.metrics,
            )
            self.locks = Locks(self._pool)
            self.schedules = Schedules(self._pool, max_payload_bytes=self.max_payload_bytes)
            self.events = ScheduledEvents(
                self._pool,
                self.hub,
                self.health,
                handler=self._event_handler,
                batch=self.dispatch_batch,
                max_payload_bytes=self.max_payload_bytes,
                metrics=self.metrics,
            )
            if self.listen_dsn is not None:
                # A plain task, not a task group: the engine may be opened and closed
                # from different tasks (pytest fixtures, frameworks' startup/shutdown).
                self.listener = Listener(self.listen_dsn, self.hub)
                task = asyncio.get_running_loop().create_task(self.listener.run())
                stack.push_async_callback(_cancel_task, task)
                with anyio.fail_after(15):
                    await self.listener.connected.wait()
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def worker_connection(self) -> asyncpg.Connection | None:
        """A new connection for one worker's own claims and acks, outside the pool (a
        pool resets a connection on every release: a second round trip per statement).
        None when the application handed pgwake its pool: its workers use that pool."""
        if self._external_pool is not None or self.dsn is None:
            return None
        return await db.connect(self.dsn, statement_cache_size=self._statement_cache_size)

    async def _run_migrations(self) -> None:
        """Apply pending migrations (R-X3). They hold a session advisory lock, which a
        transaction pooler would not keep on one server connection: with a distinct
        ``listen_dsn`` (the direct connection) they run there."""
        if self.listen_dsn is not None and self.listen_dsn != self.dsn:
            conn = await asyncpg.connect(self.listen_dsn)
            try:
                await db.init_connection(conn)
                await run_migrations(conn)
            finally:
                await conn.close()
        else:
            async with self.pool.acquire() as pooled:
                await run_migrations(pooled)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.__aexit__(exc_type, exc, tb)
        self._pool = None

    # -- registration ------------------------------------------------------------

    def on_event(self, handler: EventHandler) -> EventHandler:
        """Register the handler for dispatched and live events (R-E4); usable as a decorator.

        ``handler(event: Event, conn: asyncpg.Connection)`` runs inside the dispatch
        transaction: database writes on ``conn`` commit with the status change.
        """
        self._event_handler = handler
        if hasattr(self, "events"):
            self.events.handler = handler
        return handler

    def handler(self, queue: str, *, concurrency: int = 1) -> Callable[[H], H]:
        """Decorator registering ``async (Job) -> Any`` as the worker for ``queue`` (R-X2)."""
        check_name(queue, kind="queue")

        def register(fn: H) -> H:
            self._job_handlers[queue] = (fn, concurrency)
            return fn

        return register

    # -- queues (R-Q*) -------------------------------------------------------------

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
        """Enqueue one job (R-Q1); see :meth:`service.queues.Queues.enqueue`."""
        return await self.queues.enqueue(
            queue,
            payload,
            run_at=run_at,
            delay=delay,
            priority=priority,
            max_attempts=max_attempts,
            dedupe_key=dedupe_key,
        )

    async def enqueue_tx(
        self, conn: asyncpg.Connection, queue: str, payload: Mapping[str, Any], **options: Any
    ) -> int:
        """Enqueue inside the caller's transaction on ``conn`` (R-Q1)."""
        return await self.queues.enqueue_tx(conn, queue, payload, **options)

    async def enqueue_many(
        self,
        queue: str,
        jobs: list[NewJob | Mapping[str, Any]],
        *,
        conn: asyncpg.Connection | None = None,
    ) -> list[int]:
        """Enqueue a batch in one statement (R-Q1). Returns ids in input order."""
        return await self.queues.enqueue_many(queue, jobs, conn=conn)

    async def claim(self, queue: str, worker_id: str, limit: int = 1) -> list[Job]:
        """Claim up to ``limit`` due jobs (R-Q3)."""
        return await self.queues.claim(queue, worker_id, limit)

    async def get_job(self, job_id: int) -> Job | None:
        """The job row, or None (R-Q8)."""
        return await self.queues.get_job(job_id)

    async def cancel(self, job_id: int) -> None:
        """Remove a pending job (R-Q8). Raises NotFound or Conflict."""
        await self.queues.cancel(job_id)

    # -- outbox, events ------------------------------------------------------------

    def outbox(self, name: str) -> Outbox:
        """The outbox ``name`` (R-O1). Raises InvalidName or ReservedName."""
        check_name(name, kind="outbox")
        return Outbox(name, self.queues, self.hub, self.health, poll_seconds=self.poll_seconds)

    async def ingest(
        self,
        event_type: str,
        facts: Mapping[str, Any],
        *,
        subject_id: str | None = None,
        tenant_id: str | None = None,
    ) -> Event:
        """Handle a live event now through the registered handler (R-E4)."""
        return await self.events.ingest(
            event_type, facts, subject_id=subject_id, tenant_id=tenant_id
        )

    # -- runner (R-X2) -------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def runner(
        self, *, webhooks: bool = True, grace_seconds: float = 10.0
    ) -> AsyncIterator[Engine]:
        """Run every loop under one task group while the block is open (R-X2).

        Loops: the scheduled-event dispatcher (when a handler is registered), one
        worker per registered queue handler, webhook relays for outboxes with a
        webhook URL (``webhooks=True``), the lease reaper and the retention
        pruner. Each is supervised: an exception is logged and the loop restarts.

        On exit the runner stops claiming, gives work in hand up to ``grace_seconds``
        to finish, then cancels; jobs interrupted that way are handed back at once.

        Raises:
            RuntimeError: this engine's runner is already running (one per engine:
                two would run every loop twice under the same health names).
        """
        from service.runner import Runner

        if self._runner_active:
            raise RuntimeError("this engine's runner is already running")
        self._runner_active = True
        try:
            async with Runner(self, webhooks=webhooks, grace_seconds=grace_seconds).run():
                self.runner_running = True  # every loop is scheduled: /readyz says so
                try:
                    yield self
                finally:
                    self.runner_running = False
        finally:
            self._runner_active = False


async def _cancel_task(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
