"""The consumer loop shared by queue workers and outbox relays (R-Q3–R-Q6, R-Q9, R-O3).

A worker claims a batch, runs the handler for each job, acks on success and
retries (with the queue's backoff) on exception. It sleeps until the earliest
of: a NOTIFY on its queue, the queue's next ``run_at``, the safety poll.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable

import anyio
import asyncpg
from anyio import get_cancelled_exc_class

from service.checks import storable_text
from service.health import Health
from service.jobs import Job
from service.queues import Queues
from service.wakeup import WakeHub

log = logging.getLogger("pgwake.worker")

JobHandler = Callable[[Job], Awaitable[object]]

#: Seconds a stopping worker spends handing an interrupted job back.
RELEASE_TIMEOUT_SECONDS = 2.0
#: In-process topic that wakes the lease reaper (see service.runner).
REAPER_TOPIC = "reaper"
# When due rows exist but another worker holds them (SKIP LOCKED), re-check this soon.
_CONTENDED_RECHECK = 0.05
#: Seconds a successful job's ack may wait to be sent with others (one statement).
ACK_LINGER_SECONDS = 0.002
#: Seconds a busy worker waits for more slots to free up, so one claim fetches several.
REFILL_LINGER_SECONDS = 0.002


class AckBuffer:
    """Acks of one worker, sent together: one fenced statement for many jobs.

    A job is acked at most ``ACK_LINGER_SECONDS`` after its handler returned (or at
    once when ``size`` acks are waiting, or before the worker claims again). A crash
    in between means the job runs again after its lease, which at-least-once
    delivery allows; nothing is lost.

    The worker's claims go through :meth:`claim`, so the acks and claims of one worker
    share its connection ``conn`` (None: the pool) one statement at a time.
    """

    def __init__(self, queues: Queues, size: int, conn: asyncpg.Connection | None = None) -> None:
        self.queues = queues
        self.size = max(1, size)
        self.conn = conn
        self.pending: list[Job] = []
        self.waiting = anyio.Event()
        self._lock = anyio.Lock()

    async def add(self, job: Job) -> None:
        self.pending.append(job)
        if len(self.pending) >= self.size:
            await self.flush()
        else:
            self.waiting.set()

    async def flush(self) -> None:
        async with self._lock:
            await self._send()

    async def _send(self) -> None:
        jobs, self.pending = self.pending, []
        if not jobs:
            return
        acked = await self.queues.ack_many(jobs, executor=self.conn)
        if len(acked) < len(jobs):
            for job in jobs:
                if job.id not in acked:
                    log.warning("job %s on %s: lease lost before ack", job.id, job.queue)

    async def claim(self, queue: str, worker_id: str, limit: int) -> list[Job]:
        """Send the waiting acks, then claim up to ``limit`` jobs (acks always first)."""
        async with self._lock:
            await self._send()
            return await self.queues.claim(
                queue, worker_id, limit, allow_reserved=True, executor=self.conn
            )

    async def run(self) -> None:
        """Background flusher: send waiting acks after a short linger."""
        while True:
            await self.waiting.wait()
            self.waiting = anyio.Event()
            await anyio.sleep(ACK_LINGER_SECONDS)
            await self.flush()


class DeadLetter(Exception):
    """Raise from a handler to move the job to ``dead`` at once, without further attempts."""


def error_text(exc: BaseException) -> str:
    """The text recorded as a job's ``last_error`` for ``exc``."""
    text = str(exc)
    return storable_text(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


async def process(job: Job, handler: JobHandler, acks: AckBuffer | None = None) -> bool:
    """Run ``handler(job)``; ack on success, dead-letter on :class:`DeadLetter`, else retry.

    Args:
        acks: batch the ack with other jobs' (the worker loop); None acks at once.

    Returns:
        True when the handler succeeded (whether or not the ack still held the lease).
    """
    try:
        await handler(job)
    except get_cancelled_exc_class():
        # Stopping (deploy, shutdown): hand the job back at once rather than leave it
        # leased until the lease expires. Shielded, bounded, best effort.
        with anyio.CancelScope(shield=True), anyio.move_on_after(RELEASE_TIMEOUT_SECONDS):
            await job._bound().release(job)
        raise
    except DeadLetter as exc:
        await job.dead_letter(error_text(exc))
        return False
    except Exception as exc:
        log.info("job %s on %s failed (attempt %s): %s", job.id, job.queue, job.attempts, exc)
        await job.retry(error_text(exc))
        return False
    if acks is not None:
        await acks.add(job)
    elif not await job.ack():
        log.warning("job %s on %s: lease lost before ack", job.id, job.queue)
    return True


async def run_worker(
    queues: Queues,
    hub: WakeHub,
    health: Health,
    *,
    queue: str,
    handler: JobHandler,
    worker_id: str,
    concurrency: int = 1,
    batch: int | None = None,
    poll_seconds: float = 30.0,
    loop_name: str | None = None,
    stopping: anyio.Event | None = None,
    connect: Callable[[], Awaitable[asyncpg.Connection | None]] | None = None,
) -> None:
    """Consume ``queue`` forever (until cancelled).

    Args:
        queues: queue operations.
        hub: NOTIFY wakeups; the worker listens on topic ``job:<queue>``.
        health: liveness registry; the loop beats once per iteration.
        queue: the queue name (reserved names allowed: outboxes use ``__outbox:*``).
        handler: ``async (Job) -> Any``.
        worker_id: the lease owner token.
        concurrency: jobs in flight at once.
        batch: jobs claimed per statement (default: ``concurrency``).
        poll_seconds: the safety-net poll, in seconds.
        stopping: once set (and the hub's waiters woken), the worker claims no more
            and returns when the jobs in flight are done (graceful shutdown).
        connect: opens the worker's own connection for its claims and acks (closed
            when the worker returns); None, or a None connection: the pool.
    """
    name = loop_name or f"worker:{queue}"
    health.register(name, poll_seconds)
    batch = batch or concurrency
    # A busy worker claims again once this many slots are free (or after a linger),
    # so one statement fetches several jobs instead of one per finished job.
    refill = max(1, min(batch, concurrency) // 2)
    # Claimed jobs not yet started, and the jobs running: at most ``concurrency``.
    ready: deque[Job] = deque()
    inflight = 0
    slot_free = anyio.Event()
    jobs_ready = anyio.Event()
    closing = False
    topic = f"job:{queue}"
    conn = await connect() if connect is not None else None
    acks = AckBuffer(queues, batch, conn)

    async def slot() -> None:
        # One of ``concurrency`` long-lived tasks, each running one job at a time (a
        # task per job costs more than a no-op handler). A handler that never waits
        # runs to completion at once, so one slot may run several jobs in a row.
        nonlocal inflight
        while True:
            while ready:
                job = ready.popleft()
                try:
                    await process(job, handler, acks)
                finally:
                    inflight -= 1
                    slot_free.set()
            if closing:
                return
            await jobs_ready.wait()

    try:
        async with anyio.create_task_group() as background:
            background.start_soon(acks.run)
            async with anyio.create_task_group() as tg:
                for _ in range(concurrency):
                    tg.start_soon(slot)
                while stopping is None or not stopping.is_set():
                    if inflight >= concurrency:
                        slot_free = anyio.Event()
                        await slot_free.wait()
                        continue
                    if inflight and concurrency - inflight < refill:
                        with anyio.move_on_after(REFILL_LINGER_SECONDS):
                            while inflight and concurrency - inflight < refill:
                                slot_free = anyio.Event()
                                await slot_free.wait()
                    waiter = hub.arm(topic)
                    jobs = await acks.claim(queue, worker_id, min(batch, concurrency - inflight))
                    if jobs:
                        inflight += len(jobs)
                        ready.extend(jobs)
                        jobs_ready.set()
                        jobs_ready = anyio.Event()
                    # After the jobs are in hand: if the beat fails, they are handed back.
                    health.beat(name)
                    if jobs:
                        if jobs[0].lease_seconds < poll_seconds:
                            hub.notify(REAPER_TOPIC)  # the reaper may be asleep past this lease
                        waiter.disarm()
                        continue
                    next_in = await queues.next_run_in(queue)
                    if next_in is None:
                        timeout = poll_seconds
                    elif next_in <= 0:
                        timeout = _CONTENDED_RECHECK
                    else:
                        timeout = min(next_in, poll_seconds)
                    await waiter.wait(timeout)
                # Stopping: the slots run the jobs claimed, then return.
                closing = True
                jobs_ready.set()
            background.cancel_scope.cancel()
    finally:
        # Acks of finished jobs are sent even when the worker is cancelled, on the pool:
        # the worker's own connection may have been cut mid-statement. Jobs claimed
        # but never started (none, as the slots are woken before the next checkpoint;
        # kept in case) go back to pending at once, as interrupted ones do.
        with anyio.CancelScope(shield=True), anyio.move_on_after(RELEASE_TIMEOUT_SECONDS):
            acks.conn = None
            await acks.flush()
            while ready:
                await queues.release(ready.popleft())
        if conn is not None:
            await _close(conn)


async def _close(conn: asyncpg.Connection) -> None:
    """Close the worker's connection politely, else cut it (shielded, bounded)."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(RELEASE_TIMEOUT_SECONDS):
        try:
            await conn.close()
        except Exception:
            pass
    if not conn.is_closed():
        conn.terminate()
