"""Recurring schedules: registration, control and forecasts (R-S1, R-S5, R-S9, R-S10).

Every fire time comes from :mod:`service.recurrence`, so the forecast, the
registration check and (with the leader loop) the runner cannot disagree.
Registration and resume wake the leader through a NOTIFY trigger at commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from service import recurrence
from service.checks import check_int, check_seconds
from service.db import Statements
from service.errors import Conflict, NotFound, ValidationError
from service.names import check_name
from service.payloads import DEFAULT_MAX_BYTES, encode_payload, require_aware
from service.queries import schedules as q

MAX_CATCH_UP = 10_000
MAX_FORECAST = 1_000
#: How often resume/skip recompute after a concurrent re-registration changed the spec.
SPEC_RACE_RETRIES = 5
FIRES_RETENTION_SECONDS = 7 * 86_400.0


class Schedules:
    """Schedule operations over the shared pool."""

    def __init__(self, pool: asyncpg.Pool, *, max_payload_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.pool = pool
        self.sql = Statements(pool)
        self.max_payload_bytes = max_payload_bytes

    async def schedule(
        self,
        name: str,
        spec: str,
        queue: str,
        payload: Mapping[str, Any],
        *,
        timezone: str = "UTC",
        catch_up: int = 64,
        grace: float | None = None,
        priority: int = 0,
        max_attempts: int | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Create or update schedule ``name`` (R-S1); everything is validated first.

        Args:
            name: schedule name (R-N1, not reserved).
            spec: ``@every <n><unit>`` or 5/6-field cron (R-S2), read in ``timezone``.
            queue: the queue each fire enqueues one job into (not reserved).
            payload: JSON object for each job (R-N4).
            timezone: IANA zone name.
            catch_up: boundaries fired after downtime, at most (R-S8).
            grace: seconds; older boundaries count as missed instead of firing (R-S8).
            priority, max_attempts: stamped on each job.

        Returns:
            ``(row, created)``. Re-registering with the same spec and timezone keeps
            the anchor and next fire time (R-S5).

        Raises:
            InvalidName, ReservedName, InvalidSpec, InvalidTimezone, InvalidPayload,
            PayloadTooLarge, ValidationError: nothing is stored.
        """
        check_name(name, kind="schedule")
        check_name(queue, kind="queue")
        if not isinstance(spec, str):
            raise recurrence.InvalidSpec(spec, "must be a string")
        parsed = recurrence.parse(spec)
        recurrence.zone(timezone)
        payload_text = encode_payload(
            dict(payload) if isinstance(payload, Mapping) else payload,
            max_bytes=self.max_payload_bytes,
        )
        check_int(catch_up, "catch_up", 0, MAX_CATCH_UP)
        grace_s = None if grace is None else check_seconds(grace, "grace", allow_zero=False)
        check_int(priority, "priority", -(2**31))
        if max_attempts is not None:
            check_int(max_attempts, "max_attempts", 1)
        now = datetime.now(UTC)
        # Raises InvalidSpec when the spec never fires in this zone.
        first = recurrence.next_after(parsed, timezone, now, anchor=now)
        row = await self.sql.fetchrow(
            q.UPSERT,
            name,
            parsed.text,
            timezone,
            queue,
            payload_text,
            priority,
            max_attempts,
            catch_up,
            grace_s,
            now,
            first,
        )
        assert row is not None
        data = dict(row)
        return data, bool(data.pop("created"))

    async def get_schedule(self, name: str) -> dict[str, Any]:
        """The schedule row. Raises NotFound."""
        check_name(name, kind="schedule")
        row = await self.sql.fetchrow(q.GET, name)
        if row is None:
            raise NotFound(f"schedule {name!r} does not exist")
        return dict(row)

    async def list_schedules(
        self, *, limit: int = 100, after: str | None = None
    ) -> list[dict[str, Any]]:
        """Schedules ordered by name; pass the last name as ``after`` for the next page."""
        check_int(limit, "limit", 1, 1000)
        if after is not None:
            check_name(after, kind="schedule", allow_reserved=True)
        return [dict(r) for r in await self.sql.fetch(q.LIST, limit, after)]

    async def unschedule(self, name: str) -> bool:
        """Delete schedule ``name`` (R-S1). Returns False when it did not exist."""
        check_name(name, kind="schedule")
        return await self.sql.fetchval(q.DELETE, name) is not None

    async def pause(self, name: str) -> dict[str, Any]:
        """Stop firing ``name``; compare-and-set on running (R-H6). Raises NotFound/Conflict."""
        check_name(name, kind="schedule")
        return await self._cas(name, await self.sql.fetchrow(q.PAUSE, name), "running")

    async def resume(self, name: str) -> dict[str, Any]:
        """Fire ``name`` again from the next boundary after now (the paused stretch is not
        caught up); compare-and-set on paused (R-H6). Raises NotFound/Conflict."""
        for _ in range(SPEC_RACE_RETRIES):
            row = await self.get_schedule(name)
            if not row["paused"]:
                break
            nxt = recurrence.next_after(
                row["spec"], row["timezone"], datetime.now(UTC), anchor=row["anchor"]
            )
            updated = await self.sql.fetchrow(q.RESUME, name, nxt, *_spec_of(row))
            if updated is not None:
                return dict(updated)
            # Re-registered with another spec meanwhile: compute again from the new one.
        return await self._cas(name, None, "paused")

    async def _cas(self, name: str, row: asyncpg.Record | None, expected: str) -> dict[str, Any]:
        if row is not None:
            return dict(row)
        current = await self.get_schedule(name)
        state = "paused" if current["paused"] else "running"
        raise Conflict(
            f"schedule {name!r} is {state}, not {expected}", current={"paused": current["paused"]}
        )

    async def skip(self, name: str, instant: datetime) -> dict[str, Any]:
        """Skip one future occurrence at ``instant`` (R-S10): neither fired nor forecast.

        Raises:
            NaiveDatetime: ``instant`` has no offset.
            ValidationError: ``instant`` is past, or not one of the schedule's fire instants.
            NotFound: no such schedule.
        """
        require_aware(instant, "instant")
        at = instant.astimezone(UTC)
        if at <= datetime.now(UTC):
            raise ValidationError(
                f"{instant.isoformat()} is not in the future; only coming occurrences "
                "can be skipped",
                errors=[{"loc": ["instant"], "msg": "in the past", "type": "value_error"}],
            )
        for _ in range(SPEC_RACE_RETRIES):
            row = await self.get_schedule(name)
            found = recurrence.upcoming(
                row["spec"],
                row["timezone"],
                at - timedelta(microseconds=1),
                1,
                anchor=row["anchor"],
            )
            if not found or found[0] != at:
                after = (
                    f"the next one after it is {found[0].isoformat()}" if found else "none follows"
                )
                raise ValidationError(
                    f"{instant.isoformat()} is not a fire instant of schedule {name!r}; {after}",
                    errors=[
                        {"loc": ["instant"], "msg": "not a fire instant", "type": "value_error"}
                    ],
                )
            updated = await self.sql.fetchrow(q.SKIP, name, at, *_spec_of(row))
            if updated is not None:
                return dict(updated)
            # Removed or re-registered with another spec meanwhile: check again.
        raise Conflict(f"schedule {name!r} kept changing; try again")

    async def upcoming(
        self, name: str, count: int = 10, after: datetime | None = None
    ) -> list[dict[str, datetime]]:
        """The next ``count`` fire instants of ``name`` after ``after`` (default now),
        without storing anything, skipped occurrences left out (R-S10).

        Returns:
            ``[{"utc": instant, "local": same instant in the schedule's zone}, …]``.
        """
        check_int(count, "count", 1, MAX_FORECAST)
        start = datetime.now(UTC) if after is None else require_aware(after, "after")
        row = await self.get_schedule(name)
        skips = set(row["skips"])
        fires = recurrence.upcoming(
            row["spec"], row["timezone"], start, count + len(skips), anchor=row["anchor"]
        )
        tz = recurrence.zone(row["timezone"])
        out: list[dict[str, datetime]] = []
        for f in [f for f in fires if f not in skips][:count]:
            try:
                out.append({"utc": f, "local": f.astimezone(tz)})
            except OverflowError:  # the local date would be past 9999-12-31
                break
        return out

    async def prune_fires(
        self, retention: float = FIRES_RETENTION_SECONDS, limit: int = 1000
    ) -> int:
        """Forget fired boundaries older than ``retention`` seconds (default 7 days).

        Their ``schedule_fires`` rows are the unique backstop of R-S7 only while a
        boundary could still be ticked, i.e. near ``next_fire_at``; older ones are
        history. Returns how many rows were deleted (at most ``limit``).
        """
        status = await self.sql.execute(q.PRUNE_FIRES, retention, limit)
        return int(status.split()[-1])


def _spec_of(row: Mapping[str, Any]) -> tuple[str, str, datetime]:
    """The compare-and-set arguments of RESUME and SKIP: what the instant was computed from."""
    return row["spec"], row["timezone"], row["anchor"]
