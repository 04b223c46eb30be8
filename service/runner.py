"""The runner: every loop under one task group, each supervised (R-X2, R-E5).

Loops: the schedule leader (standby until it holds the lock), the
scheduled-event dispatcher, queue workers for registered handlers,
webhook relays (one per outbox with a webhook URL, reconciled on NOTIFY),
the lease reaper and the retention pruner. A loop that raises is logged,
counted in :class:`service.health.Health` and restarted with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import httpx

from service.leader import Leader
from service.outbox import backing_queue
from service.queries import outbox as outbox_q
from service.sessions import prune_sessions
from service.webhooks import WebhookDelivery, WebhookTarget
from service.worker import REAPER_TOPIC, error_text, run_worker

if TYPE_CHECKING:
    from service.engine import Engine

log = logging.getLogger("pgwake.runner")

PRUNE_EVERY_SECONDS = 60.0
#: A loop that ran this long (seconds) before failing restarts with the shortest backoff.
STABLE_SECONDS = 30.0
#: Longest pause between restarts of a crashing loop, seconds: during a database
#: outage every loop crashes, and this bounds how long after the database is back
#: a loop may still be waiting to retry (the LISTEN connection uses the same cap).
MAX_BACKOFF_SECONDS = 2.0


async def supervise(
    engine: Engine, name: str, loop: Callable[[], Awaitable[None]], period: float
) -> None:
    """Run ``loop`` forever; when it raises, log it, mark it down in health (``/healthz``
    answers 503 until it iterates again) and restart it with backoff (0.1 s doubling
    to 2 s). Anything but cancellation, ``KeyboardInterrupt`` and ``SystemExit`` is
    caught, ``BaseException`` subclasses included: one loop must never take the task
    group, and with it every other loop, down."""
    state = engine.health.register(name, period)
    backoff = 0.1
    cancelled = anyio.get_cancelled_exc_class()
    while True:
        started = anyio.current_time()
        try:
            await loop()
            return
        except (cancelled, KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            if anyio.current_time() - started > STABLE_SECONDS:
                backoff = 0.1  # it had been healthy: a fresh failure, not a crash loop
            state.restarts += 1
            state.down = True
            state.last_crash_at = time.time()
            state.last_error = error_text(exc)
            log.error("loop %s crashed; restarting in %.1fs", name, backoff, exc_info=exc)
        await anyio.sleep(backoff)
        backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)


class Runner:
    """Owns the task group of one engine's loops. Use :meth:`Engine.runner`."""

    def __init__(
        self, engine: Engine, *, webhooks: bool = True, grace_seconds: float = 10.0
    ) -> None:
        self.engine = engine
        self.webhooks = webhooks
        self.grace_seconds = grace_seconds
        self.worker_id = engine.instance_id
        self.stopping = anyio.Event()
        self._busy = 0  # loops that hold claimed work and drain on stop
        self._drained = anyio.Event()

    async def _draining(self, name: str, loop: Callable[[], Awaitable[None]]) -> None:
        """Supervise a loop that owns claimed work; counted until it has drained."""
        self._busy += 1
        try:
            await supervise(self.engine, name, loop, self.engine.poll_seconds)
        finally:
            self._busy -= 1
            if self._busy == 0:
                self._drained.set()

    async def serve(self, started: anyio.Event) -> None:
        """Run every loop until cancelled; ``started`` is set once all are scheduled."""
        e = self.engine
        poll = e.poll_seconds
        async with httpx.AsyncClient() as client, anyio.create_task_group() as tg:
            if e.events.handler is not None:
                tg.start_soon(
                    self._draining,
                    "dispatcher",
                    lambda: e.events.run_dispatcher(poll_seconds=poll, stopping=self.stopping),
                )
            for queue, (handler, concurrency) in e._job_handlers.items():
                tg.start_soon(
                    self._draining,
                    f"worker:{queue}",
                    _bind_worker(e, queue, handler, concurrency, self.worker_id, self.stopping),
                )
            leader = Leader(
                e.queues, e.locks, e.hub, e.health, owner=self.worker_id, poll_seconds=poll
            )
            tg.start_soon(supervise, e, "scheduler", lambda: leader.standby(self.stopping), poll)
            tg.start_soon(supervise, e, "reaper", self._reaper, poll)
            tg.start_soon(supervise, e, "pruner", self._pruner, PRUNE_EVERY_SECONDS)
            if self.webhooks:
                tg.start_soon(supervise, e, "webhooks", lambda: self._webhooks(client), poll)
            started.set()
            await anyio.sleep_forever()

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[Runner]:
        """Run the loops in a background task while the block is open.

        A task of its own (not a task group in the caller's task), so the block may
        be entered and exited from different tasks (pytest fixtures, lifespans).
        """
        started = anyio.Event()
        task = asyncio.get_running_loop().create_task(self.serve(started))
        try:
            waiter = asyncio.ensure_future(started.wait())
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                waiter.cancel()
                task.result()
            yield self
        finally:
            # Graceful stop: claim nothing more, let work in hand finish for up to
            # grace_seconds, then cancel (interrupted jobs are handed back).
            self.stopping.set()
            self._drained = anyio.Event()
            self.engine.hub.notify_all()
            if self._busy and not task.done():
                log.info("stopping: %d loops finishing work in hand", self._busy)
                with anyio.move_on_after(self.grace_seconds):
                    await self._drained.wait()
                if not self._drained.is_set():
                    log.warning("stopping: grace of %.0fs over; interrupting", self.grace_seconds)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            for name in [n for n in self.engine.health.loops]:
                self.engine.health.unregister(name)

    async def _reaper(self) -> None:
        """Reclaim expired leases (R-Q6); sleeps until the soonest lease expiry, woken
        early when a local worker takes a lease shorter than that sleep."""
        e = self.engine
        while True:
            waiter = e.hub.arm(REAPER_TOPIC)
            await e.queues.reap_expired()
            e.health.beat("reaper")
            next_in = await e.queues.next_lease_expiry_in()
            timeout = e.poll_seconds if next_in is None else min(max(next_in, 0.01), e.poll_seconds)
            await waiter.wait(timeout)

    async def _pruner(self) -> None:
        """Delete completed jobs past their queue's retention (R-Q10), old fire history
        and expired admin sessions."""
        e = self.engine
        while True:
            while await e.queues.prune_done() > 0:
                await anyio.lowlevel.checkpoint()
            while await e.schedules.prune_fires() > 0:
                await anyio.lowlevel.checkpoint()
            while await prune_sessions(e.pool) > 0:
                await anyio.lowlevel.checkpoint()
            e.health.beat("pruner")
            await anyio.sleep(PRUNE_EVERY_SECONDS)

    async def _webhooks(self, client: httpx.AsyncClient) -> None:
        """Keep one relay per outbox with a webhook URL, reconciled when configs change."""
        e = self.engine
        running: dict[str, tuple[WebhookTarget, anyio.CancelScope]] = {}
        async with anyio.create_task_group() as tg:
            while True:
                waiter = e.hub.arm("outboxes")
                rows = await e.queues.sql.fetch(outbox_q.LIST_WEBHOOKS)
                wanted = {
                    r["name"]: WebhookTarget(
                        r["webhook_url"], r["webhook_secret"], r["timeout_seconds"]
                    )
                    for r in rows
                }
                for name, (target, scope) in list(running.items()):
                    if wanted.get(name) != target:
                        scope.cancel()
                        del running[name]
                for name, target in wanted.items():
                    if name not in running:
                        scope = anyio.CancelScope()
                        running[name] = (target, scope)
                        tg.start_soon(self._relay, name, target, client, scope)
                e.health.beat("webhooks")
                await waiter.wait(e.poll_seconds)

    async def _relay(
        self,
        name: str,
        target: WebhookTarget,
        client: httpx.AsyncClient,
        scope: anyio.CancelScope,
    ) -> None:
        e = self.engine

        async def relay() -> None:
            # Built inside the supervised loop: a bad target breaks this relay only.
            delivery = WebhookDelivery(target, client)
            await run_worker(
                e.queues,
                e.hub,
                e.health,
                queue=backing_queue(name),
                handler=delivery,
                worker_id=self.worker_id,
                concurrency=8,
                poll_seconds=e.poll_seconds,
                loop_name=f"outbox:{name}",
                stopping=self.stopping,
            )

        with scope:
            await self._draining(f"outbox:{name}", relay)
        e.health.unregister(f"outbox:{name}")


def _bind_worker(
    e: Engine,
    queue: str,
    handler: Callable[..., Awaitable[object]],
    concurrency: int,
    worker_id: str,
    stopping: anyio.Event,
) -> Callable[[], Awaitable[None]]:
    return lambda: run_worker(
        e.queues,
        e.hub,
        e.health,
        queue=queue,
        handler=handler,
        worker_id=worker_id,
        concurrency=concurrency,
        poll_seconds=e.poll_seconds,
        stopping=stopping,
        connect=e.worker_connection,
    )
