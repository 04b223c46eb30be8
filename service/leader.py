"""The schedule leader (R-S6–R-S9): one runner at a time fires schedules.

Leadership is the table lock ``__scheduler`` held by the engine's instance token
with a 10 s TTL, renewed at the top of every iteration and on a cadence during
the sleep. A tick is one transaction: due schedule rows ``FOR UPDATE``, one job
per elapsed boundary (stamped ``scheduled_for``, dedupe key
``schedule:<name>:<boundary>``), ``next_fire_at`` advanced, commit.
"""

from __future__ import annotations

import logging
from datetime import datetime

import anyio
from asyncpg import Record

from service import recurrence
from service.db import Connection
from service.errors import LeadershipLost
from service.health import Health
from service.jobs import NewJob, StoredPayload
from service.locks import Locks
from service.queries import schedules as q
from service.queues import Queues
from service.wakeup import WakeHub
from service.worker import error_text

log = logging.getLogger("pgwake.leader")

LEADER_LOCK = "__scheduler"
LEASE_TTL_SECONDS = 10.0
RENEW_EVERY_SECONDS = LEASE_TTL_SECONDS / 3


def dedupe_key(name: str, boundary: datetime) -> str:
    """``schedule:<name>:<boundary>`` with the boundary as a UTC ISO 8601 instant (R-S7)."""
    return f"schedule:{name}:{boundary.isoformat()}"


class Leader:
    """Ticks schedules while holding the leader lock.

    Args:
        queues, locks: the engine's operations.
        hub: NOTIFY wakeups (topic ``schedules``).
        health: loop liveness (``scheduler``).
        owner: this runner instance's unique token (R-L1).
        poll_seconds: the safety-net poll, seconds.
    """

    def __init__(
        self,
        queues: Queues,
        locks: Locks,
        hub: WakeHub,
        health: Health,
        *,
        owner: str,
        poll_seconds: float = 30.0,
    ) -> None:
        self.queues = queues
        self.locks = locks
        self.hub = hub
        self.health = health
        self.owner = owner
        self.poll_seconds = poll_seconds

    async def tick(self) -> int:
        """Fire every elapsed boundary of every due schedule in one transaction (R-S7, R-S8).

        The transaction first renews the leader lock and keeps its row locked until
        commit, so a runner that lost leadership (stopped or partitioned past the TTL)
        fires nothing, and nobody can take over halfway through a tick.

        Returns:
            The number of jobs enqueued.

        Raises:
            LeadershipLost: this runner does not hold ``__scheduler``; nothing fired.
        """
        fired, _ = await self._tick()
        return fired

    async def _tick(self) -> tuple[int, float | None]:
        """:meth:`tick`, also returning the seconds until the soonest unpaused fire time
        (None: no schedule), read in the same transaction: an idle leader's iteration
        is one transaction (renew, tick, next deadline), not two."""
        async with self.queues.sql.acquire() as conn, conn.transaction():
            # The fence holds the lock row until commit: a leader frozen mid-tick (GC
            # pause, SIGSTOP) must not block every standby's takeover, so the server
            # ends a tick that sits idle for longer than the lease.
            await conn.execute(q.TICK_IDLE_TIMEOUT)
            if not await self.locks.renew(
                LEADER_LOCK, self.owner, LEASE_TTL_SECONDS, allow_reserved=True, conn=conn
            ):
                raise LeadershipLost(f"{self.owner} no longer holds {LEADER_LOCK}")
            lags = await self._fire_due(conn)
            next_in = await conn.fetchval(q.NEXT_FIRE_IN)
        # Committed: count them.
        metrics = self.queues.metrics
        for lag in lags:
            metrics.fire_lag.observe(lag)
        if lags:
            metrics.fired.inc(len(lags))
        return len(lags), None if next_in is None else float(next_in)

    async def _fire_due(self, conn: Connection) -> list[float]:
        """The tick's body, in ``conn``'s open transaction. Without the fence only the
        row locks and the ``schedule_fires`` key stand between two tickers.

        Each schedule is fired in a savepoint: one that fails (a bug, or data that
        no longer validates) is recorded on its row and does not stop the others.

        Returns:
            For each fired boundary, the fire lag in seconds (tick start − boundary).
        """
        lags: list[float] = []
        for row in await conn.fetch(q.DUE_FOR_UPDATE):
            try:
                async with conn.transaction():  # a savepoint per schedule
                    fired = await self._fire_one(conn, row)
            except Exception as exc:
                log.exception("schedule %s could not fire", row["name"])
                await self._record_failure(conn, row, error_text(exc))
                continue
            lags.extend((row["db_now"] - b).total_seconds() for b in fired)
        return lags

    async def _fire_one(self, conn: Connection, row: Record) -> list[datetime]:
        """Fire one due schedule's elapsed boundaries; returns the ones fired."""
        plan = recurrence.due_boundaries(
            row["spec"],
            row["timezone"],
            row["next_fire_at"],
            row["db_now"],
            row["catch_up"],
            anchor=row["anchor"],
            grace=row["grace_seconds"],
            exclude=row["skips"],
        )
        # The unique backstop: boundaries fired before (by anyone) drop out here.
        recorded = await conn.fetch(q.RECORD_FIRES, row["name"], plan.fire, self.owner)
        new = {r["boundary"] for r in recorded}
        boundaries = [b for b in plan.fire if b in new]
        payload = StoredPayload(row["payload_json"])
        jobs = [
            NewJob(
                payload,
                run_at=b,
                priority=row["priority"],
                max_attempts=row["max_attempts"],
                dedupe_key=dedupe_key(row["name"], b),
                scheduled_for=b,
            )
            for b in boundaries
        ]
        if jobs:
            ids = await self.queues.insert(conn, row["queue"], jobs, allow_reserved=True)
            await conn.execute(q.LINK_FIRES, row["name"], boundaries, ids)
        await conn.execute(
            q.ADVANCE,
            row["name"],
            plan.next_fire_at,
            len(boundaries),
            plan.skipped,
            plan.missed,
            boundaries[-1] if boundaries else None,
            None,
        )
        if plan.skipped or plan.missed or len(boundaries) < len(plan.fire):
            log.info(
                "schedule %s: fired %d, skipped %d, missed %d after downtime, %d already fired",
                row["name"],
                len(boundaries),
                plan.skipped,
                plan.missed,
                len(plan.fire) - len(boundaries),
            )
        return boundaries

    async def _record_failure(self, conn: Connection, row: Record, error: str) -> None:
        """A schedule that could not fire: its elapsed boundaries count as missed and
        it moves on to its next boundary, with ``last_error`` set; if even the next
        boundary cannot be computed, it is paused (an operator must look at it)."""
        try:
            plan = recurrence.due_boundaries(
                row["spec"], row["timezone"], row["next_fire_at"], row["db_now"], 0,
                anchor=row["anchor"],
            )  # fmt: skip
            missed = len(plan.fire) + plan.skipped + plan.missed
            await conn.execute(q.ADVANCE, row["name"], plan.next_fire_at, 0, 0, missed, None, error)
        except Exception:
            log.exception("schedule %s: no next fire time; pausing it", row["name"])
            await conn.execute(q.PAUSE_BROKEN, row["name"], error)

    async def run_schedules(self, stop: anyio.Event | None = None) -> None:
        """Lead until ``stop`` is set (R-S6): acquire the lock, then renew-tick-sleep.

        Raises:
            LeadershipLost: the lock could not be acquired, or was lost; raised before
                any further tick.
        """
        if not await self.locks.try_lock(
            LEADER_LOCK, self.owner, LEASE_TTL_SECONDS, allow_reserved=True
        ):
            raise LeadershipLost(f"{LEADER_LOCK} is held by another runner")
        log.info("%s leads the schedules (%s)", self.owner, LEADER_LOCK)
        self.health.register("scheduler", min(self.poll_seconds, RENEW_EVERY_SECONDS))
        try:
            while stop is None or not stop.is_set():
                waiter = self.hub.arm("schedules")
                try:
                    # Renews the lease first (or raises LeadershipLost), fires, and reads
                    # the next deadline: one transaction.
                    _, v = await self._tick()
                except LeadershipLost:
                    log.warning("%s lost leadership of %s; standing by", self.owner, LEADER_LOCK)
                    raise
                self.health.beat("scheduler")
                sleep = RENEW_EVERY_SECONDS if v is None else max(0.0, min(v, RENEW_EVERY_SECONDS))
                await waiter.wait(min(sleep, self.poll_seconds))
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                await self.locks.unlock(LEADER_LOCK, self.owner, allow_reserved=True)

    async def standby(self, stop: anyio.Event | None = None) -> None:
        """The runner's loop (R-S6): lead when the lock is free, else wait and retry, so a
        dead leader is replaced within about one TTL."""
        self.health.register("scheduler", RENEW_EVERY_SECONDS)
        while stop is None or not stop.is_set():
            try:
                await self.run_schedules(stop)
            except LeadershipLost:
                self.health.beat("scheduler")  # a healthy standby
                with anyio.move_on_after(RENEW_EVERY_SECONDS):
                    if stop is not None:
                        await stop.wait()
                    else:
                        await anyio.sleep_forever()
