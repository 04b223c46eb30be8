"""Fire-time arithmetic for recurring schedules (R-S2, R-S3, R-S4, R-S5, R-S8, R-N2).

This is the one module that computes when a schedule fires: the runner's next
boundary, the catch-up after downtime, the ``upcoming`` forecast and the
calendar all call it, so they cannot disagree (R-S3). It is pure: no I/O, no
database, no clock; every instant comes in as an argument.

Grammar (R-S2):

* ``@every <n><unit>``: unit ``s``, ``m``, ``h`` or ``d``; ``n`` a positive
  integer; elapsed time, blind to daylight saving (R-S4). Boundaries are
  ``anchor + k * interval`` (R-S5).
* 5-field cron (``minute hour day-of-month month day-of-week``) and 6-field
  cron (a leading ``second`` field), with month and weekday names, ranges,
  steps, ``L`` (last day of the month, day-of-month field) and ``#`` (nth
  weekday, day-of-week field). Fields are read in the schedule's IANA zone.

Cron fields are parsed and matched by :mod:`cronsim`; this module owns the
grammar gate, ``@every``, anchors, the daylight-saving mapping and the catch-up
arithmetic.

Daylight saving (R-S4) follows cronie. An expression whose minute and hour
fields both start with something other than ``*`` is a *fixed-time* job: its
fields are matched against wall-clock time; a wall time skipped by a
spring-forward fires once, at the end of the gap; a wall time repeated by a
fall-back fires once, at its first occurrence. Any other expression (minute or
hour field starting with ``*``) is a *wildcard* job: it is matched against the
local time of each elapsed second, so ``0 * * * *`` and ``*/30 * * * *`` keep
their cadence in elapsed time through both transitions. The same rule applies to
6-field expressions (cronsim itself applies the fixed-time rule only to 5-field
ones; this module applies it to both).

Every datetime argument must be timezone-aware (R-N2); every datetime returned
is a timezone-aware UTC instant. Instants are exact to the microsecond.
"""

from __future__ import annotations

import bisect
import functools
import importlib.resources
import math
import re
import zoneinfo
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from itertools import chain, islice
from typing import ClassVar, Final, Literal, Protocol

from cronsim import CronSim, CronSimError

from service import errors
from service.errors import ValidationError

__all__ = [
    "EVERY_MAX_SECONDS",
    "SPEC_MAX_LENGTH",
    "Catchup",
    "InvalidSpec",
    "InvalidTimezone",
    "NaiveDatetime",
    "Spec",
    "due_boundaries",
    "next_after",
    "parse",
    "upcoming",
    "zone",
]

#: Longest accepted spec text, in characters (R-S2).
SPEC_MAX_LENGTH: Final = 1024
#: Longest accepted ``@every`` interval, in seconds (100 years of 366 days) (R-S2).
EVERY_MAX_SECONDS: Final = 100 * 366 * 86_400

_UNIT_SECONDS: Final = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}
_EVERY_RE: Final = re.compile(r"@every[ \t]+([0-9]{1,12})([smhd])")
_SPEC_CHARS_RE: Final = re.compile(r"[A-Za-z0-9*,/#@ \t-]*")
_FIELD_NAMES: Final = ("second", "minute", "hour", "day-of-month", "month", "day-of-week")
_DIGITS: Final = frozenset("0123456789*,-/")
_FIELD_CHARS: Final = {
    "second": _DIGITS,
    "minute": _DIGITS,
    "hour": _DIGITS,
    "day-of-month": _DIGITS | {"L"},
    "month": _DIGITS | frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
    "day-of-week": _DIGITS | frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ#"),
}
_CRON_SHAPE = "'@every <n><unit>' or a 5- or 6-field cron expression"

#: Reference start for grammar probes. Every one of the 14 kinds of calendar
#: year (weekday of 1 January x leap or not) occurs in 2000-2027, and cronsim
#: searches 50 years before giving up, so a day pattern that matches nowhere in
#: that search matches in no year at all.
_PROBE_START: Final = datetime(2000, 1, 1)
_ONE_SECOND: Final = timedelta(seconds=1)
_ONE_MICROSECOND: Final = timedelta(microseconds=1)
_ONE_DAY: Final = timedelta(days=1)
#: How far a wildcard job's search runs past offset changes before it gives up
#: (cronsim's own search limit on naive wall times is also 50 years).
_HORIZON: Final = timedelta(days=50 * 366)
#: Around a UTC-offset change the counting code enumerates boundaries one by one
#: from this long before the change to this long after the change plus its size
#: (the stretch where repeated wall times are read again) instead of counting
#: wall times arithmetically. Property tests show one second would do.
_TRANSITION_MARGIN: Final = timedelta(hours=1)


# --------------------------------------------------------------------------- errors


class InvalidSpec(ValidationError, ValueError):
    """A schedule spec outside the grammar, or one that can never fire (R-S2, R-S3).

    A :class:`service.errors.PgwakeError` (HTTP 422) and, for pure callers, a ValueError.

    Attributes:
        code: stable error code, ``"invalid_spec"``.
        value: the rejected input, as given.
        reason: what is wrong with it, in words.
    """

    code: str = "invalid_spec"
    title = "Invalid schedule spec"
    subject: ClassVar[str] = "schedule spec"

    def __init__(self, value: object, reason: str) -> None:
        self.value = value
        self.reason = reason
        super().__init__(
            f"invalid {self.subject} {value!r}: {reason}",
            errors=[{"loc": [self.subject], "msg": reason, "type": self.code}],
        )


class InvalidTimezone(InvalidSpec):
    """A timezone name that is not an IANA zone name (R-S1, R-S2).

    Attributes:
        code: stable error code, ``"invalid_timezone"``.
        value: the rejected name, as given.
        reason: what is wrong with it, in words.
    """

    code: str = "invalid_timezone"
    title = "Invalid timezone"
    subject: ClassVar[str] = "timezone"


class NaiveDatetime(errors.NaiveDatetime, ValueError):
    """A datetime without a UTC offset where an instant is required (R-N2).

    A naive datetime is never taken as local time or as UTC.

    Attributes:
        code: stable error code, ``"naive_datetime"``.
        argument: the name of the offending argument.
    """

    code: str = "naive_datetime"

    def __init__(self, argument: str, value: datetime) -> None:
        self.argument = argument
        super().__init__(
            f"{argument} must be a timezone-aware datetime, got naive {value.isoformat()}; "
            "a naive datetime is never taken as local time or UTC",
            errors=[
                {"loc": [argument], "msg": "datetime without offset", "type": "naive_datetime"}
            ],
        )


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Spec:
    """A parsed schedule spec, as returned by :func:`parse` (R-S2).

    Attributes:
        kind: ``"every"`` for ``@every`` intervals, ``"cron"`` for cron expressions.
        text: the spec exactly as it was given to :func:`parse`.
        interval_seconds: for ``"every"``, the interval in seconds (> 0); else None.
        cron: for ``"cron"``, the normalized expression (upper case, fields joined
            by single spaces, 5 or 6 fields as given); else None.
    """

    kind: Literal["every", "cron"]
    text: str
    interval_seconds: int | None = None
    cron: str | None = None

    def __post_init__(self) -> None:
        if self.kind == "every":
            ok = (
                isinstance(self.interval_seconds, int)
                and 0 < self.interval_seconds <= EVERY_MAX_SECONDS
                and self.cron is None
            )
        else:
            ok = (
                self.kind == "cron" and isinstance(self.cron, str) and self.interval_seconds is None
            )
        if not ok:
            raise InvalidSpec(self.text, f"inconsistent Spec fields: {self!r}")


@dataclass(frozen=True)
class Catchup:
    """What a leader tick must do for one due schedule (R-S7, R-S8).

    ``len(fire) + skipped + missed`` is the number of elapsed boundaries: the
    stored ``next_fire_at`` plus every boundary after it up to and including
    ``now``.

    Attributes:
        fire: boundaries to enqueue now, oldest first, as UTC instants.
        skipped: elapsed boundaries within grace that were not fired because of
            the ``catch_up`` limit.
        missed: elapsed boundaries older than ``now - grace``, never fired.
        next_fire_at: the new stored next fire time, a UTC instant strictly after
            ``now`` (the stored value, unchanged, when it was still in the future).
    """

    fire: list[datetime]
    skipped: int
    missed: int
    next_fire_at: datetime

    @property
    def elapsed(self) -> int:
        """Number of elapsed boundaries: ``len(fire) + skipped + missed``."""
        return len(self.fire) + self.skipped + self.missed


# --------------------------------------------------------------------------- parsing


def parse(spec: str) -> Spec:
    """Parse and validate a schedule spec (R-S2, R-S3).

    Args:
        spec: ``@every <n><unit>`` (unit ``s``, ``m``, ``h`` or ``d``; ``n`` a
            positive integer written without spaces, e.g. ``@every 90s``;
            at most :data:`EVERY_MAX_SECONDS` seconds), or a 5-field or 6-field
            (leading seconds) cron expression. Cron fields accept numbers,
            ``*``, lists, ranges, steps, month names (``JAN``-``DEC``) and
            weekday names (``SUN``-``SAT``, ``0`` and ``7`` are Sunday), ``L``
            alone as a day-of-month term (last day of the month), and
            ``<weekday>#<n>`` (n = 1..5) in the day-of-week field. Names are
            case-insensitive; fields are separated by spaces or tabs; leading
            and trailing blanks are ignored.

    Returns:
        The parsed :class:`Spec`.

    Raises:
        InvalidSpec: the spec is not a string, is empty, longer than
            :data:`SPEC_MAX_LENGTH`, outside the grammar (including the cronsim
            extensions ``LW``, ``<weekday>L`` and a step on ``L``, and every
            ``@`` form other than ``@every``), or can never fire (such as
            ``0 0 30 2 *``).
    """
    if not isinstance(spec, str):
        raise InvalidSpec(spec, f"a spec must be a string, got {type(spec).__name__}")
    text = spec.strip()
    if not text:
        raise InvalidSpec(spec, f"the spec is empty; expected {_CRON_SHAPE}")
    if len(text) > SPEC_MAX_LENGTH:
        raise InvalidSpec(spec, f"longer than {SPEC_MAX_LENGTH} characters")
    if _SPEC_CHARS_RE.fullmatch(text) is None:
        bad = next(ch for ch in text if _SPEC_CHARS_RE.fullmatch(ch) is None)
        raise InvalidSpec(spec, f"unexpected character {bad!r}; expected {_CRON_SHAPE}")
    if text.startswith("@"):
        return _parse_every(spec, text)
    return _parse_cron(spec, text)


def _parse_every(spec: str, text: str) -> Spec:
    match = _EVERY_RE.fullmatch(text)
    if match is None:
        if not text.startswith("@every"):
            reason = "the only @-form is '@every <n><unit>'"
        else:
            reason = (
                "expected '@every <n><unit>' with n a positive integer and unit one of "
                "s, m, h, d, no space between them (e.g. '@every 90s')"
            )
        raise InvalidSpec(spec, reason)
    amount = int(match[1])
    if amount == 0:
        raise InvalidSpec(spec, "the interval must be positive")
    seconds = amount * _UNIT_SECONDS[match[2]]
    if seconds > EVERY_MAX_SECONDS:
        raise InvalidSpec(spec, f"the interval is longer than {EVERY_MAX_SECONDS} seconds")
    return Spec(kind="every", text=spec, interval_seconds=seconds)


def _parse_cron(spec: str, text: str) -> Spec:
    fields = text.upper().split()
    if len(fields) not in (5, 6):
        raise InvalidSpec(
            spec,
            f"a cron expression has 5 fields (minute hour day-of-month month day-of-week) "
            f"or 6 (a leading second field), got {len(fields)}",
        )
    for name, value in zip(_FIELD_NAMES[-len(fields) :], fields, strict=True):
        _check_field(spec, name, value)
    expr = " ".join(fields)
    try:
        probe = CronSim(expr, _PROBE_START)
    except CronSimError as exc:
        raise InvalidSpec(spec, _cronsim_reason(exc)) from exc
    except Exception as exc:  # a gate never lets a parser crash escape as a 500
        raise InvalidSpec(spec, f"malformed cron expression ({exc})") from exc
    try:
        next(probe)
    except StopIteration:
        raise InvalidSpec(
            spec,
            "can never fire: no date satisfies the day-of-month, month and day-of-week "
            "fields together",
        ) from None
    return Spec(kind="cron", text=spec, cron=expr)


def _check_field(spec: str, name: str, value: str) -> None:
    allowed = _FIELD_CHARS[name]
    for ch in value:
        if ch not in allowed:
            raise InvalidSpec(spec, f"{ch!r} is not allowed in the {name} field ({value!r})")
    if name == "day-of-month":
        for term in value.split(","):
            if "L" in term and term != "L":
                raise InvalidSpec(
                    spec,
                    f"'L' (last day of the month) must stand alone as a day-of-month term, "
                    f"got {term!r} ('LW', ranges and steps on 'L' are not supported)",
                )
    if name == "day-of-week" and "L" in value:
        raise InvalidSpec(
            spec,
            f"'L' is not supported in the day-of-week field ({value!r}); "
            "use '<weekday>#<n>' for the nth weekday of the month",
        )


def _cronsim_reason(exc: CronSimError) -> str:
    message = str(exc)
    if message.startswith("Bad "):
        field = message[4:]
        extra = ""
        if field == "day-of-month":
            extra = ", or a day that none of the selected months has (such as 30 February)"
        return (
            f"bad {field} field: a value out of range, a malformed list, range or step, "
            f"or an unknown name{extra}"
        )
    return message


@functools.cache
def _iana_names() -> frozenset[str]:
    try:
        listing = importlib.resources.files("tzdata").joinpath("zones").read_text("utf-8")
    except (ModuleNotFoundError, OSError):
        listing = ""
    names = frozenset(listing.split())
    if names:
        return names
    # No tzdata package: fall back to the system database, minus its host aliases.
    return frozenset(zoneinfo.available_timezones() - {"localtime", "posixrules"})


def zone(name: str) -> zoneinfo.ZoneInfo:
    """Return the IANA timezone called ``name`` (R-S1, R-S2).

    Args:
        name: an IANA zone name such as ``"Europe/Berlin"`` or ``"UTC"``
            (case-sensitive; backward-compatible links such as ``"US/Eastern"``
            are accepted; host aliases such as ``"localtime"`` and file paths
            are not).

    Returns:
        The :class:`zoneinfo.ZoneInfo` for that name.

    Raises:
        InvalidTimezone: ``name`` is not a string or not an IANA zone name.
    """
    if not isinstance(name, str) or not name:
        raise InvalidTimezone(name, "expected an IANA zone name such as 'Europe/Berlin' or 'UTC'")
    if name not in _iana_names():
        raise InvalidTimezone(name, "not an IANA zone name (such as 'Europe/Berlin' or 'UTC')")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise InvalidTimezone(name, f"the zone cannot be loaded ({exc})") from exc


# --------------------------------------------------------------------------- public math


def upcoming(
    spec: str | Spec,
    timezone: str,
    after: datetime,
    count: int,
    anchor: datetime | None = None,
) -> list[datetime]:
    """Return the next ``count`` fire instants strictly after ``after`` (R-S3, R-S4, R-S5).

    Args:
        spec: a spec string (parsed with :func:`parse`) or a :class:`Spec`.
        timezone: IANA zone name in which cron fields are read (R-S2); checked
            but otherwise unused for ``@every``, which is elapsed time (R-S4).
        after: timezone-aware instant; every result is strictly later.
        count: how many instants to return (>= 0).
        anchor: timezone-aware instant that ``@every`` boundaries are aligned
            to: they are ``anchor + k * interval`` for integer ``k``
            (R-S5). Defaults to ``after``, so the first result is then
            ``after + interval``. Ignored for cron specs.

    Returns:
        Up to ``count`` strictly increasing timezone-aware UTC datetimes: fewer
        only when the calendar ends first (nothing after year 9999 exists).

    Raises:
        InvalidSpec: the spec is invalid, or a cron spec has no fire time
            within 50 years in this zone (only possible when every matching
            wall time is skipped by daylight saving).
        InvalidTimezone: ``timezone`` is not an IANA zone name.
        NaiveDatetime: ``after`` or ``anchor`` is naive (R-N2).
        TypeError: ``after``/``anchor`` is not a datetime or ``count`` not an int.
        ValueError: ``count`` is negative.
    """
    if isinstance(count, bool) or not isinstance(count, int):
        raise TypeError(f"count must be an int, got {type(count).__name__}")
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    return list(islice(fires(spec, timezone, after, anchor), count))


def fires(
    spec: str | Spec,
    timezone: str,
    after: datetime,
    anchor: datetime | None = None,
) -> Iterator[datetime]:
    """Every fire instant strictly after ``after``, lazily, in increasing order.

    The same sequence as :func:`upcoming` (which takes its first ``count``), for
    callers that stop at an instant rather than a count, such as the admin
    calendar's 14-day window (R-H4). Arguments and errors are :func:`upcoming`'s;
    the spec, zone and instants are checked before the first instant is asked for.

    Returns:
        An iterator of timezone-aware UTC datetimes; it ends at year 9999.
    """
    start = _utc(after, "after")
    origin = start if anchor is None else _utc(anchor, "anchor")
    plan = _plan(_coerce(spec), zone(timezone), origin)
    return _until_calendar_end(plan.iter_after(start))


def _until_calendar_end(instants: Iterator[datetime]) -> Iterator[datetime]:
    try:
        yield from instants
    except OverflowError:  # the calendar ends at year 9999
        return


def next_after(
    spec: str | Spec,
    timezone: str,
    after: datetime,
    anchor: datetime | None = None,
) -> datetime:
    """Return the first fire instant strictly after ``after`` (R-S3).

    Same as ``upcoming(spec, timezone, after, 1, anchor)[0]``; see
    :func:`upcoming` for the arguments, units and errors.

    Returns:
        A timezone-aware UTC datetime strictly later than ``after``.

    Raises:
        InvalidSpec: also when no fire instant exists before the end of year 9999.
    """
    found = upcoming(spec, timezone, after, 1, anchor)
    if not found:
        raise InvalidSpec(
            spec.text if isinstance(spec, Spec) else spec,
            f"never fires after {_utc(after, 'after').isoformat()} (the calendar ends at 9999)",
        )
    return found[0]


def due_boundaries(
    spec: str | Spec,
    timezone: str,
    next_fire_at: datetime,
    now: datetime,
    catch_up: int,
    anchor: datetime | None = None,
    grace: float | None = None,
    exclude: Collection[datetime] = (),
) -> Catchup:
    """Decide which elapsed boundaries a leader tick fires (R-S7, R-S8).

    The elapsed boundaries are ``next_fire_at`` (the stored next fire time)
    and every boundary of the spec after it, up to and including ``now``,
    oldest first. Of those:

    1. with ``grace``, each boundary older than ``now - grace`` is *missed*
       (never fired: nobody could have acted on it);
    2. of the rest, the ``catch_up`` oldest are *fired* and the others
       *skipped*; ``catch_up=0`` fires only the latest one. Boundaries in
       ``exclude`` (occurrences the user skipped, R-S10) are never fired and
       do not use up ``catch_up``: they count as skipped;
    3. the schedule then skips forward to the first boundary after ``now``.

    Counting is exact and does not enumerate the elapsed boundaries: for
    ``@every`` it is integer arithmetic; for cron, wall times are counted per
    matching day from the field value sets, and boundaries are enumerated one
    by one only within about an hour of each UTC-offset change (where the
    daylight-saving rules apply). The cost is therefore proportional to the
    number of matching days and offset changes in the downtime plus
    ``catch_up``, not to the number of elapsed boundaries.

    Args:
        spec: a spec string or a :class:`Spec`.
        timezone: IANA zone name in which cron fields are read.
        next_fire_at: timezone-aware stored next fire time, normally a
            boundary of the spec.
        now: timezone-aware current instant.
        catch_up: maximum number of elapsed boundaries to fire (>= 0).
        anchor: timezone-aware ``@every`` anchor (R-S5); defaults to
            ``next_fire_at``. Ignored for cron specs.
        grace: seconds (>= 0, finite or ``math.inf``) after which an elapsed
            boundary counts as missed; None means no limit.
        exclude: UTC instants never to fire (the schedule's skipped occurrences).

    Returns:
        A :class:`Catchup`; all instants are timezone-aware UTC datetimes.
        When ``next_fire_at`` is after ``now`` nothing is elapsed and the
        result carries ``next_fire_at`` unchanged.

    Raises:
        InvalidSpec: as for :func:`upcoming`.
        InvalidTimezone: ``timezone`` is not an IANA zone name.
        NaiveDatetime: ``next_fire_at``, ``now`` or ``anchor`` is naive (R-N2).
        TypeError: a datetime argument is not a datetime, ``catch_up`` not an
            int or ``grace`` not a number.
        ValueError: ``catch_up`` is negative, or ``grace`` negative or NaN.
    """
    if isinstance(catch_up, bool) or not isinstance(catch_up, int):
        raise TypeError(f"catch_up must be an int, got {type(catch_up).__name__}")
    if catch_up < 0:
        raise ValueError(f"catch_up must be >= 0, got {catch_up}")
    first = _utc(next_fire_at, "next_fire_at")
    current = _utc(now, "now")
    cutoff = _cutoff(current, grace)
    origin = first if anchor is None else _utc(anchor, "anchor")
    plan = _plan(_coerce(spec), zone(timezone), origin)
    if first > current:
        return Catchup(fire=[], skipped=0, missed=0, next_fire_at=first)

    if cutoff is None or first >= cutoff:
        missed, eligible, oldest = 0, 1 + plan.count(first, current), first
    else:
        # Missed: the stored boundary and every later one strictly before the cutoff.
        last_missed = min(cutoff - _ONE_MICROSECOND, current)
        missed = 1 + plan.count(first, last_missed)
        eligible = plan.count(last_missed, current)
        oldest = plan.next_after(last_missed) if eligible else first

    skip = set(exclude)
    fire: list[datetime] = []
    if eligible > 0 and catch_up == 0:
        latest = oldest if eligible == 1 else plan.latest(oldest, current)
        fire = [] if latest in skip else [latest]
    elif eligible > 0:
        # Walk oldest first; skipped occurrences are passed over, so the walk is at
        # most catch_up + len(exclude) boundaries long.
        for walked, boundary in enumerate(chain([oldest], plan.iter_after(oldest))):
            if walked >= eligible or len(fire) >= catch_up:
                break
            if boundary not in skip:
                fire.append(boundary)
    return Catchup(
        fire=fire,
        skipped=eligible - len(fire),
        missed=missed,
        next_fire_at=plan.next_after(current),
    )


# --------------------------------------------------------------------------- helpers


def _utc(value: datetime | None, argument: str) -> datetime:
    if not isinstance(value, datetime):
        raise TypeError(f"{argument} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise NaiveDatetime(argument, value)
    return value.astimezone(UTC)


def _cutoff(now: datetime, grace: float | None) -> datetime | None:
    if grace is None:
        return None
    if isinstance(grace, bool) or not isinstance(grace, int | float):
        raise TypeError(f"grace must be a number of seconds or None, got {type(grace).__name__}")
    if math.isnan(grace) or grace < 0:
        raise ValueError(f"grace must be a number of seconds >= 0, got {grace!r}")
    try:
        return now - timedelta(seconds=grace)
    except OverflowError:  # longer than the calendar: nothing is ever too old
        return None


def _coerce(spec: str | Spec) -> Spec:
    return spec if isinstance(spec, Spec) else parse(spec)


class _Plan(Protocol):
    def iter_after(self, after: datetime) -> Iterator[datetime]: ...

    def next_after(self, after: datetime) -> datetime: ...

    def count(self, low: datetime, high: datetime) -> int: ...

    def latest(self, low: datetime, high: datetime) -> datetime: ...


def _plan(spec: Spec, tz: zoneinfo.ZoneInfo, anchor: datetime) -> _Plan:
    if spec.kind == "every":
        assert spec.interval_seconds is not None
        return _EveryPlan(timedelta(seconds=spec.interval_seconds), anchor)
    assert spec.cron is not None
    return _CronPlan(spec, _shape(spec.cron), tz)


class _EveryPlan:
    """``anchor + k * step`` for every integer k, in exact microsecond arithmetic."""

    def __init__(self, step: timedelta, anchor: datetime) -> None:
        self.step = step
        self.anchor = anchor

    def _index(self, instant: datetime) -> int:
        # Largest k with anchor + k * step <= instant (timedelta // timedelta floors).
        return (instant - self.anchor) // self.step

    def iter_after(self, after: datetime) -> Iterator[datetime]:
        boundary = self.next_after(after)
        while True:
            yield boundary
            boundary += self.step

    def next_after(self, after: datetime) -> datetime:
        return self.anchor + (self._index(after) + 1) * self.step

    def count(self, low: datetime, high: datetime) -> int:
        """Boundaries b with low < b <= high."""
        return max(0, self._index(high) - self._index(low))

    def latest(self, low: datetime, high: datetime) -> datetime:
        """Latest boundary <= high, given that ``low`` (<= high) is a due instant."""
        return max(low, self.anchor + self._index(high) * self.step)


@dataclass(frozen=True)
class _Shape:
    """What the counting code needs to know about a cron expression."""

    expr: str
    #: Fixed-time job (cronie): neither the minute nor the hour field starts with '*'.
    wall_clock: bool
    #: A 6-field expression matching 00:00:00 of every date the spec matches.
    day_expr: str
    hours: tuple[int, ...]
    minutes: tuple[int, ...]
    seconds: tuple[int, ...]

    @property
    def per_day(self) -> int:
        return len(self.hours) * len(self.minutes) * len(self.seconds)

    def rank(self, wall: datetime) -> int:
        """Matching times of day on ``wall``'s date that are <= wall's time of day."""
        n_minutes, n_seconds = len(self.minutes), len(self.seconds)
        rank = bisect.bisect_left(self.hours, wall.hour) * n_minutes * n_seconds
        if wall.hour in self.hours:
            rank += bisect.bisect_left(self.minutes, wall.minute) * n_seconds
            if wall.minute in self.minutes:
                rank += bisect.bisect_right(self.seconds, wall.second)
        return rank


@functools.lru_cache(maxsize=1024)
def _shape(expr: str) -> _Shape:
    fields = expr.split()
    if len(fields) == 5:
        fields.insert(0, "0")
    second, minute, hour, dom, month, dow = fields

    def values(probe: str, span: timedelta, part: Callable[[datetime], int]) -> tuple[int, ...]:
        found: list[int] = []
        for moment in CronSim(probe, _PROBE_START - _ONE_SECOND):
            if moment >= _PROBE_START + span:
                return tuple(found)
            found.append(part(moment))
        raise AssertionError("unreachable: cronsim iterators do not end")  # pragma: no cover

    return _Shape(
        expr=expr,
        wall_clock=not minute.startswith("*") and not hour.startswith("*"),
        day_expr=f"0 0 0 {dom} {month} {dow}",
        hours=values(f"0 0 {hour} * * *", timedelta(days=1), lambda m: m.hour),
        minutes=values(f"0 {minute} * * * *", timedelta(hours=1), lambda m: m.minute),
        seconds=values(f"{second} * * * * *", timedelta(minutes=1), lambda m: m.second),
    )


class _CronPlan:
    """Cron boundaries as UTC instants, with cronie's daylight-saving rules (R-S4)."""

    def __init__(self, spec: Spec, shape: _Shape, tz: zoneinfo.ZoneInfo) -> None:
        self.spec = spec
        self.shape = shape
        self.tz = tz

    # -- enumeration

    def iter_after(self, after: datetime) -> Iterator[datetime]:
        if self.shape.wall_clock:
            return self._iter_wall_clock(after)
        return self._iter_elapsed(after)

    def _never_fires(self, after: datetime) -> InvalidSpec:
        return InvalidSpec(
            self.spec.text,
            f"never fires in {self.tz.key} within 50 years after {after.isoformat()} "
            "(every matching wall time is skipped by daylight saving)",
        )

    def _iter_wall_clock(self, after: datetime) -> Iterator[datetime]:
        """Fixed-time job: match wall-clock times, then map each to its instant.

        cronsim runs on naive datetimes only: on those it moves strictly
        forward and gives up after 50 years, so every ``next`` is bounded (on
        aware datetimes it can cycle forever around a fall-back, see
        :meth:`_iter_elapsed`). Each wall time is mapped by :func:`_wall_instant`.
        """
        last = after
        source = CronSim(self.shape.expr, after.astimezone(self.tz).replace(tzinfo=None))
        while True:
            try:
                moment = next(source)
            except StopIteration:
                raise self._never_fires(last) from None
            instant = _wall_instant(moment, self.tz)
            # Several wall times of one spring-forward gap map to the same instant,
            # and wall times repeated by a fall-back can map before ``after``.
            if instant > last:
                last = instant
                yield instant
                continue
            # Skip the rest of a gap at once (a gap can be a whole day, as in
            # Pacific/Apia in 2011): resume at the wall time of ``last``, which
            # is past the gap. Only when that is ahead, so this always progresses.
            resume = last.astimezone(self.tz).replace(tzinfo=None)
            if resume > moment:
                source = CronSim(self.shape.expr, resume)

    def _iter_elapsed(self, after: datetime) -> Iterator[datetime]:
        """Wildcard job: the instants whose local time matches, in elapsed time.

        The instants are split into stretches of constant UTC offset. Within a
        stretch, instants and wall times correspond one to one, so cronsim is run
        on naive wall times (strictly forward, bounded) and each match is mapped
        back with the stretch's offset; a match past the stretch's end restarts
        the search at the next offset change. cronsim is never run on aware
        datetimes: there it can cycle forever (for instance ``7 */2 * * *`` in
        America/St_Johns from 1997-10-26T02:30Z: its minute step crosses the
        00:01 fall-back into 23:07 of the previous day, its hour step returns to
        00:00, and so on). The search gives up, with :class:`InvalidSpec`,
        once a stretch starts more than 50 years after ``after``.
        """
        horizon = _plus(after, _HORIZON)
        start = after  # the stretch covers [start, end of stretch), offset ``offset``
        offset = _offset(after, self.tz)
        low = after  # results are strictly after ``low``
        while True:
            checked = start  # no offset change in [start, checked]
            source = CronSim(self.shape.expr, (low + offset).replace(tzinfo=None))
            while True:
                try:
                    wall = next(source)
                except StopIteration:
                    raise self._never_fires(after) from None
                instant = (wall - offset).replace(tzinfo=UTC)
                change = _next_change(self.tz, offset, checked, instant)
                if change is not None:
                    break
                checked = instant
                yield instant
            if change > horizon:
                raise self._never_fires(after)
            start, offset, low = change, _offset(change, self.tz), change - _ONE_MICROSECOND

    def next_after(self, after: datetime) -> datetime:
        return next(self.iter_after(after))

    def latest(self, low: datetime, high: datetime) -> datetime:
        """Latest boundary <= high, given that ``low`` (<= high) is a due instant.

        Bisection over :meth:`next_after`, so it agrees with forward iteration
        by construction. Invariant: ``low`` is due and no boundary lies in
        ``(upper, high]``.
        """
        upper = high
        while True:
            following = self.next_after(low)
            if following > upper:
                return low
            middle = low + (upper - low) // 2
            probe = self.next_after(middle)
            if probe <= upper:
                low = probe
            else:
                upper = middle

    # -- counting

    def count(self, low: datetime, high: datetime) -> int:
        """Number of boundaries b with low < b <= high.

        Between UTC-offset changes, boundaries are exactly the matching wall
        times, counted arithmetically per matching day. Near each offset change
        (see ``_TRANSITION_MARGIN``), boundaries are enumerated with
        :meth:`iter_after`.
        """
        if high <= low:
            return 0
        windows: list[tuple[datetime, datetime]] = []
        for change, size in _offset_changes(self.tz, low, high):
            start = max(low, change - _TRANSITION_MARGIN)
            end = min(high, change + size + _TRANSITION_MARGIN)
            if start >= end:
                continue
            if windows and start <= windows[-1][1]:
                windows[-1] = (windows[-1][0], max(windows[-1][1], end))
            else:
                windows.append((start, end))
        total, cursor = 0, low
        for start, end in windows:
            total += self._count_calm(cursor, start)
            for boundary in self.iter_after(start):
                if boundary > end:
                    break
                total += 1
            cursor = end
        return total + self._count_calm(cursor, high)

    def _count_calm(self, low: datetime, high: datetime) -> int:
        """Boundaries in (low, high], an interval with no UTC-offset change."""
        if high <= low:
            return 0
        first = low.astimezone(self.tz).replace(tzinfo=None, microsecond=0)
        last = high.astimezone(self.tz).replace(tzinfo=None, microsecond=0)
        return self._count_walls(first, last)

    def _count_walls(self, first: datetime, last: datetime) -> int:
        """Matching whole-second wall times w with first < w <= last (naive)."""
        shape = self.shape
        total = 0
        for day in _matching_days(shape.day_expr, first.date(), last.date()):
            upper = shape.rank(last) if day == last.date() else shape.per_day
            lower = shape.rank(first) if day == first.date() else 0
            total += upper - lower
        return total


def _matching_days(day_expr: str, first: date, last: date) -> Iterator[date]:
    """Dates in [first, last] matched by ``day_expr`` (see _Shape.day_expr)."""
    source = CronSim(day_expr, datetime.combine(first, time()) - _ONE_SECOND)
    while True:
        try:
            day = next(source).date()
        except StopIteration:  # no match within 50 years
            return
        if day > last:
            return
        yield day


def _offset(instant: datetime, tz: zoneinfo.ZoneInfo) -> timedelta:
    offset = instant.astimezone(tz).utcoffset()
    assert offset is not None
    return offset


def _offset_changes(
    tz: zoneinfo.ZoneInfo, low: datetime, high: datetime
) -> Iterator[tuple[datetime, timedelta]]:
    """UTC-offset changes near (low, high]: (instant of the change, its size).

    Samples the offset once a day (real zones change it at most once in any
    24 hours) over the interval widened by a day each side, and bisects each
    change to the second.
    """
    step = timedelta(days=1)
    cursor = low - step
    stop = high + step
    before = _offset(cursor, tz)
    while cursor < stop:
        following = min(cursor + step, stop)
        after = _offset(following, tz)
        if after != before:
            yield _bisect_change(tz, cursor, following), abs(after - before)
        cursor, before = following, after


def _bisect_change(tz: zoneinfo.ZoneInfo, low: datetime, high: datetime) -> datetime:
    """First instant in (low, high] whose UTC offset differs from ``low``'s (to 1 s)."""
    before = _offset(low, tz)
    while high - low > _ONE_SECOND:
        middle = low + _ONE_SECOND * (((high - low) // _ONE_SECOND) // 2)
        if middle <= low:
            middle = low + _ONE_SECOND
        if _offset(middle, tz) == before:
            low = middle
        else:
            high = middle
    return high


def _next_change(
    tz: zoneinfo.ZoneInfo, offset: timedelta, low: datetime, high: datetime
) -> datetime | None:
    """The first instant in (low, high] whose UTC offset is not ``offset``, or None.

    ``low`` must have offset ``offset``. Samples once a day (real zones change
    the offset at most once in any 24 hours) and bisects a change to the exact
    whole second (tz database changes fall on whole seconds).
    """
    cursor = low
    while cursor < high:
        following = high if high - cursor <= _ONE_DAY else cursor + _ONE_DAY
        if _offset(following, tz) != offset:
            while following - cursor > _ONE_SECOND:
                middle = cursor + (following - cursor) // 2
                if _offset(middle, tz) == offset:
                    cursor = middle
                else:
                    following = middle
            # The change is a whole second in (cursor, following], at most 1 s long.
            return cursor.replace(microsecond=0) + _ONE_SECOND
        cursor = following
    return None


def _plus(instant: datetime, delta: timedelta) -> datetime:
    """``instant + delta``, saturating at the end of the calendar."""
    try:
        return instant + delta
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC)


def _wall_instant(wall: datetime, tz: zoneinfo.ZoneInfo) -> datetime:
    """The instant a fixed-time job fires for a matching wall time (R-S4, cronie).

    A wall time that exists once is that instant; a wall time repeated by a
    fall-back is its first occurrence; a wall time skipped by a spring-forward
    is the end of the gap (the instant of the offset change).
    """
    early = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    late = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    if early <= late:  # unique, or repeated (fold=0 is the first occurrence)
        return early
    # Skipped: fold=0 reads the wall time with the offset before the change
    # and lands after it, fold=1 with the offset after and lands before it.
    return _bisect_change(tz, late, early)
