"""What the admin calendar shows (R-H4): the next 14 days and the last 24 hours.

:func:`load_calendar` reads the window's running schedules and pending
scheduled events, and the last day's fired boundaries, dispatched and failed
events and dead outbox messages. Schedule fire instants come from
:func:`service.recurrence.upcoming`, the function the leader and
``GET /schedules/{name}/upcoming`` use, never from a second computation;
skipped occurrences are left out (R-S10).

The result is plain data in UTC; the page renders it in the viewer's zone.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from itertools import islice, takewhile
from typing import Any, Literal
from zoneinfo import ZoneInfo

import anyio
import asyncpg

from service import recurrence
from service.outbox import backing_queue
from service.queries import admin as q

#: Days in the window (R-H4).
WINDOW_DAYS = 14
#: Hours of history.
HISTORY_HOURS = 24
#: Upcoming items drawn at most, over all schedules and events; more are counted.
MAX_ITEMS = 2000
#: Upcoming fires drawn at most per schedule (an ``@every 1s`` schedule has 1.2 M).
MAX_PER_SCHEDULE = 500
#: Schedules considered at most.
MAX_SCHEDULES = 1000
#: History rows per kind at most.
MAX_HISTORY = 500

#: The status filter's values: ``scheduled`` is every upcoming item.
STATUSES = ("scheduled", "fired", "dispatched", "failed", "dead")
Status = Literal["scheduled", "fired", "dispatched", "failed", "dead"]


@dataclass(frozen=True)
class Filters:
    """The page's filters; None means "any".

    A filter hides the items that lack its attribute: ``schedule`` keeps only that
    schedule's fires, ``queue`` the fires of schedules on that queue and the dead
    messages of the outbox of that name, ``event_type`` only scheduled events.
    """

    queue: str | None = None
    schedule: str | None = None
    event_type: str | None = None
    status: Status | None = None

    @property
    def active(self) -> bool:
        return any((self.queue, self.schedule, self.event_type, self.status))

    def wants(self, status: Status) -> bool:
        return self.status is None or self.status == status

    @property
    def fires(self) -> bool:
        """Schedule fires can match (no event type asked for)."""
        return self.event_type is None

    @property
    def events(self) -> bool:
        return self.schedule is None and self.queue is None

    @property
    def dead(self) -> bool:
        return self.schedule is None and self.event_type is None


@dataclass(frozen=True)
class Upcoming:
    """One coming occurrence.

    Attributes:
        at: the UTC instant.
        kind: ``fire`` (a schedule boundary) or ``event`` (a pending scheduled event).
        name: the schedule's name or the event's type.
        detail: the schedule's queue, or the event's subject.
        zone: the schedule's own IANA zone (``UTC`` for events).
        event_id: the scheduled event's id, for events.
    """

    at: datetime
    kind: Literal["fire", "event"]
    name: str
    detail: str | None
    zone: str
    event_id: int | None = None


@dataclass(frozen=True)
class Past:
    """One history row: a fired boundary, a dispatched or failed event, a dead message.

    Attributes:
        at: when it happened (fire time, dispatch or failure time, death time), UTC.
        status: ``fired``, ``dispatched``, ``failed`` or ``dead``.
        name: schedule name, event type, or outbox name.
        detail: boundary, subject, or message id as text.
        error: the last error, for failed events and dead messages.
        ref: the event or message id the retry action needs.
    """

    at: datetime
    status: Literal["fired", "dispatched", "failed", "dead"]
    name: str
    detail: str | None
    error: str | None = None
    ref: int | None = None
    zone: str = "UTC"


@dataclass
class Day:
    """One local day of the window, its items in time order."""

    date: date
    items: list[Upcoming] = field(default_factory=list)
    today: bool = False


@dataclass
class Calendar:
    """Everything the page draws. Instants are UTC; ``zone`` is the viewer's."""

    zone: str
    now: datetime
    start: date
    days: list[Day]
    history: list[Past]
    #: Upcoming occurrences left out by the caps (MAX_ITEMS, MAX_PER_SCHEDULE, MAX_SCHEDULES).
    truncated: bool = False
    #: History rows left out by MAX_HISTORY (per kind).
    history_truncated: bool = False

    @property
    def next_start(self) -> date:
        """The first day of the following window."""
        return self.start + timedelta(days=WINDOW_DAYS)

    @property
    def upcoming_count(self) -> int:
        return sum(len(d.items) for d in self.days)


def window(start: date, zone: ZoneInfo, now: datetime) -> tuple[datetime, datetime]:
    """The UTC bounds ``[from, to)`` of the 14 local days from ``start``, never before ``now``."""
    begin = datetime.combine(start, time(0), tzinfo=zone).astimezone(UTC)
    end = datetime.combine(start + timedelta(days=WINDOW_DAYS), time(0), tzinfo=zone)
    return max(begin, now), end.astimezone(UTC)


def _window_fires(
    row: dict[str, Any] | asyncpg.Record, begin: datetime, end: datetime, limit: int
) -> Iterator[datetime]:
    """Up to ``limit + 1`` fire instants of one schedule row in ``[begin, end)``, skips
    left out; lazy, so a busy schedule costs at most ``limit + 1`` steps."""
    skips = set(row["skips"])
    every = recurrence.fires(
        row["spec"], row["timezone"], begin - timedelta(microseconds=1), anchor=row["anchor"]
    )
    return islice(takewhile(lambda f: f < end, (f for f in every if f not in skips)), limit + 1)


def schedule_fires(
    row: dict[str, Any] | asyncpg.Record, begin: datetime, end: datetime, limit: int
) -> tuple[list[datetime], bool]:
    """Fire instants of one schedule row in ``[begin, end)``, skips left out.

    Returns:
        ``(instants, more)``: at most ``limit`` instants; ``more`` when others follow
        inside the window.
    """
    kept = list(_window_fires(row, begin, end, limit))
    return kept[:limit], len(kept) > limit


def _merged_fires(
    rows: list[asyncpg.Record], begin: datetime, end: datetime
) -> tuple[list[Upcoming], bool]:
    """The soonest MAX_ITEMS fires of all ``rows`` in the window, at most
    MAX_PER_SCHEDULE each, merged lazily: the work is bounded by the items drawn
    plus the schedules, however often they fire."""

    def tagged(row: asyncpg.Record) -> Iterator[Upcoming]:
        for at in _window_fires(row, begin, end, MAX_PER_SCHEDULE):
            yield Upcoming(at, "fire", row["name"], row["queue"], row["timezone"])

    out: list[Upcoming] = []
    per: dict[str, int] = {}
    truncated = False
    for item in heapq.merge(*(tagged(r) for r in rows), key=lambda u: u.at):
        if len(out) == MAX_ITEMS:
            return out, True
        per[item.name] = per.get(item.name, 0) + 1
        if per[item.name] > MAX_PER_SCHEDULE:
            truncated = True  # that schedule's generator ends here
        else:
            out.append(item)
    return out, truncated


async def load_calendar(
    conn: asyncpg.Connection | asyncpg.Pool,
    *,
    zone: str,
    start: date | None = None,
    filters: Filters = Filters(),
    now: datetime | None = None,
) -> Calendar:
    """Read the calendar for the viewer's ``zone``.

    Args:
        conn: a connection or the pool.
        zone: the viewer's IANA zone (validated by the caller); days are its local days.
        start: the first local day; default (and never earlier than) today.
        filters: what to show.
        now: the current instant (default: the clock).

    Returns:
        A :class:`Calendar`: 14 days of upcoming items, then the last 24 h of history,
        newest first.
    """
    tz = recurrence.zone(zone)
    now = now or datetime.now(UTC)
    today = now.astimezone(tz).date()
    first = max(start or today, today)
    begin, end = window(first, tz, now)
    items: list[Upcoming] = []
    truncated = False
    if filters.wants("scheduled") and filters.fires:
        rows = await conn.fetch(
            q.WINDOW_SCHEDULES, end, filters.schedule, filters.queue, MAX_SCHEDULES + 1
        )
        # Pure CPU work (a few hundred ms for a thousand cron schedules): off the event
        # loop, so the runner's loops and other requests keep their timing.
        items, truncated = await anyio.to_thread.run_sync(
            _merged_fires, rows[:MAX_SCHEDULES], begin, end
        )
        truncated = truncated or len(rows) > MAX_SCHEDULES
    if filters.wants("scheduled") and filters.events:
        rows = await conn.fetch(q.WINDOW_EVENTS, begin, end, filters.event_type, MAX_ITEMS + 1)
        truncated = truncated or len(rows) > MAX_ITEMS
        items.extend(
            Upcoming(r["trigger_at"], "event", r["event_type"], r["subject_id"], "UTC", r["id"])
            for r in rows[:MAX_ITEMS]
        )
    items.sort(key=lambda u: (u.at, u.kind, u.name))
    if len(items) > MAX_ITEMS:
        items, truncated = items[:MAX_ITEMS], True
    days = [Day(first + timedelta(days=i)) for i in range(WINDOW_DAYS)]
    days[0].today = first == today
    by_date = {d.date: d for d in days}
    for item in items:
        day = by_date.get(item.at.astimezone(tz).date())
        if day is not None:
            day.items.append(item)
    history, history_truncated = await load_history(
        conn, now - timedelta(hours=HISTORY_HOURS), filters
    )
    return Calendar(
        zone=zone,
        now=now,
        start=first,
        days=days,
        history=history,
        truncated=truncated,
        history_truncated=history_truncated,
    )


async def load_history(
    conn: asyncpg.Connection | asyncpg.Pool, since: datetime, filters: Filters
) -> tuple[list[Past], bool]:
    """Fired boundaries, dispatched and failed events and dead outbox messages since
    ``since``, newest first.

    Returns:
        ``(rows, truncated)``: at most MAX_HISTORY rows of each kind; ``truncated``
        when a kind had more.
    """
    out: list[Past] = []
    full = 0  # kinds that hit MAX_HISTORY
    if filters.wants("fired") and filters.fires:
        rows = await conn.fetch(
            q.RECENT_FIRES, since, filters.schedule, filters.queue, MAX_HISTORY + 1
        )
        full += len(rows) > MAX_HISTORY
        for r in rows[:MAX_HISTORY]:
            out.append(
                Past(r["fired_at"], "fired", r["schedule"], _boundary(r), zone=r["timezone"])
            )
    kinds: tuple[Status, ...] = ("dispatched", "failed")
    wanted = [k for k in kinds if filters.wants(k)]
    if wanted and filters.events:
        rows = await conn.fetch(q.RECENT_EVENTS, since, filters.event_type, wanted, MAX_HISTORY + 1)
        full += len(rows) > MAX_HISTORY
        for r in rows[:MAX_HISTORY]:
            out.append(
                Past(
                    r["updated_at"],
                    r["status"],
                    r["event_type"],
                    r["subject_id"],
                    r["last_error"],
                    r["id"],
                )
            )
    if filters.wants("dead") and filters.dead:
        queue = None if filters.queue is None else backing_queue(filters.queue)
        rows = await conn.fetch(q.RECENT_DEAD_MESSAGES, since, queue, MAX_HISTORY + 1)
        full += len(rows) > MAX_HISTORY
        for r in rows[:MAX_HISTORY]:
            out.append(
                Past(
                    r["finished_at"],
                    "dead",
                    r["queue"].removeprefix("__outbox:"),
                    f"message {r['id']}",
                    r["last_error"],
                    r["id"],
                )
            )
    out.sort(key=lambda p: p.at, reverse=True)
    return out, full > 0


def _boundary(row: asyncpg.Record) -> str:
    boundary: datetime = row["boundary"]
    return "boundary " + boundary.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
