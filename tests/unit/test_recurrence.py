"""Fire-time arithmetic: grammar, fixtures, daylight saving, catch-up.

Pure unit tests, no database (R-S2, R-S3, R-S4, R-S5, R-S8, R-N2).
"""

from __future__ import annotations

import csv
import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import islice, pairwise
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service import recurrence
from service.recurrence import (
    Catchup,
    InvalidSpec,
    InvalidTimezone,
    NaiveDatetime,
    Spec,
    due_boundaries,
    next_after,
    parse,
    upcoming,
    zone,
)

REPO = Path(__file__).resolve().parents[2]


def at(text: str) -> datetime:
    """A UTC instant from ``YYYY-MM-DDTHH:MM[:SS]`` (always read as UTC)."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def iso(values: list[datetime]) -> list[str]:
    return [v.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") for v in values]


def full(expected: list[str]) -> list[str]:
    """``2026-03-08T07:00Z`` -> ``2026-03-08T07:00:00Z`` (seconds optional in tables)."""
    return [e if e.count(":") == 2 else e.replace("Z", ":00Z") for e in expected]


# --------------------------------------------------------------------------- fixture (R-S3)


def _shared_dir() -> Path:
    configured = os.environ.get("PGWAKE_SHARED_DIR")
    return Path(configured) if configured else REPO.parent / "shared"


TSV = _shared_dir() / "data" / "real-schedules.tsv"
EXPECTED = _shared_dir() / "data" / "real-schedules.expected.json"


def _fixture() -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    if not (TSV.is_file() and EXPECTED.is_file()):
        pytest.skip(
            f"real-schedules fixture not found ({TSV}, {EXPECTED}); "
            "set PGWAKE_SHARED_DIR to the shared directory"
        )
    with TSV.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    return rows, expected


def test_fixture_files_describe_the_same_42_schedules() -> None:
    rows, expected = _fixture()
    assert len(rows) == 42
    assert [(r["expression"], r["timezone"]) for r in rows] == [
        (e["expression"], e["timezone"]) for e in expected
    ]


def test_every_real_schedule_parses() -> None:
    rows, _ = _fixture()
    for row in rows:
        spec = parse(row["expression"])
        assert spec.text == row["expression"]
        zone(row["timezone"])


@pytest.mark.parametrize("index", range(42))
def test_real_schedule_next_five_fires_match_fixture(index: int) -> None:
    """R-S3: next five fires after 2026-01-15T00:00Z (@every anchored there)."""
    _, expected = _fixture()
    if index >= len(expected):
        pytest.fail(f"fixture has only {len(expected)} rows")
    case = expected[index]
    after = datetime.fromisoformat(case["after"].replace("Z", "+00:00"))
    count = len(case["next_utc"])
    got = upcoming(case["expression"], case["timezone"], after, count, anchor=after)
    assert iso(got) == case["next_utc"], (case["expression"], case["timezone"])
    assert all(v.tzinfo is UTC for v in got)


# --------------------------------------------------------------------------- daylight saving (R-S4)

DST_CASES = [
    # America/New_York: spring forward 2026-03-08 07:00Z, fall back 2026-11-01 06:00Z.
    ("30 2 * * *", "America/New_York", "2026-03-07T12:00",
     ["2026-03-08T07:00Z", "2026-03-09T06:30Z"]),
    # 6-field: cronsim alone skips this day; the fixed-time rule applies here too.
    ("0 30 2 * * *", "America/New_York", "2026-03-07T12:00",
     ["2026-03-08T07:00Z", "2026-03-09T06:30Z"]),
    ("0 2,3 * * *", "America/New_York", "2026-03-07T12:00",
     ["2026-03-08T07:00Z", "2026-03-09T06:00Z", "2026-03-09T07:00Z"]),
    ("30 1 * * *", "America/New_York", "2026-10-31T12:00",
     ["2026-11-01T05:30Z", "2026-11-02T06:30Z"]),
    # 6-field: cronsim alone fires 05:30Z and 06:30Z.
    ("0 30 1 * * *", "America/New_York", "2026-10-31T12:00",
     ["2026-11-01T05:30Z", "2026-11-02T06:30Z"]),
    # After the first 01:45 has fired, its repeat (01:45 EST) never does.
    ("15,45 1 * * *", "America/New_York", "2026-11-01T06:20",
     ["2026-11-02T06:15Z", "2026-11-02T06:45Z"]),
    ("0 * * * *", "America/New_York", "2026-03-08T04:30",
     ["2026-03-08T05:00Z", "2026-03-08T06:00Z", "2026-03-08T07:00Z", "2026-03-08T08:00Z"]),
    ("0 * * * *", "America/New_York", "2026-11-01T03:30",
     ["2026-11-01T04:00Z", "2026-11-01T05:00Z", "2026-11-01T06:00Z", "2026-11-01T07:00Z"]),
    ("*/30 * * * *", "America/New_York", "2026-03-08T05:50",
     ["2026-03-08T06:00Z", "2026-03-08T06:30Z", "2026-03-08T07:00Z", "2026-03-08T07:30Z"]),
    ("*/30 * * * *", "America/New_York", "2026-11-01T05:10",
     ["2026-11-01T05:30Z", "2026-11-01T06:00Z", "2026-11-01T06:30Z", "2026-11-01T07:00Z"]),
    # Europe/Berlin: spring forward 2026-03-29 01:00Z, fall back 2026-10-25 01:00Z.
    ("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00", ["2026-03-29T01:00Z", "2026-03-30T00:30Z"]),
    ("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00", ["2026-10-25T00:30Z", "2026-10-26T01:30Z"]),
    ("0 * * * *", "Europe/Berlin", "2026-03-28T23:30",
     ["2026-03-29T00:00Z", "2026-03-29T01:00Z", "2026-03-29T02:00Z"]),
    ("*/30 * * * *", "Europe/Berlin", "2026-10-25T00:10",
     ["2026-10-25T00:30Z", "2026-10-25T01:00Z", "2026-10-25T01:30Z", "2026-10-25T02:00Z"]),
    # Australia/Sydney: fall back 2026-04-04 16:00Z, spring forward 2026-10-03 16:00Z.
    ("30 2 * * *", "Australia/Sydney", "2026-04-04T00:00",
     ["2026-04-04T15:30Z", "2026-04-05T16:30Z"]),
    ("30 2 * * *", "Australia/Sydney", "2026-10-03T00:00",
     ["2026-10-03T16:00Z", "2026-10-04T15:30Z"]),
    ("0 * * * *", "Australia/Sydney", "2026-04-04T14:30",
     ["2026-04-04T15:00Z", "2026-04-04T16:00Z", "2026-04-04T17:00Z"]),
    ("*/30 * * * *", "Australia/Sydney", "2026-10-03T15:10",
     ["2026-10-03T15:30Z", "2026-10-03T16:00Z", "2026-10-03T16:30Z"]),
    # @every is elapsed time (R-S4).
    ("@every 1h", "America/New_York", "2026-03-08T05:30",
     ["2026-03-08T06:30Z", "2026-03-08T07:30Z", "2026-03-08T08:30Z"]),
    ("@every 1d", "Europe/Berlin", "2026-03-28T12:00",
     ["2026-03-29T12:00Z", "2026-03-30T12:00Z"]),
]  # fmt: skip


@pytest.mark.parametrize(("expr", "tz", "after", "expected"), DST_CASES)
def test_dst_follows_cronie(expr: str, tz: str, after: str, expected: list[str]) -> None:
    """R-S4: a skipped wall time fires once at the end of the gap, a repeated
    wall time fires once, wildcard hours keep their elapsed cadence."""
    assert iso(upcoming(expr, tz, at(after), len(expected))) == full(expected)


def test_skipped_new_york_0230_fires_at_0700z() -> None:
    """R-S4, the spec's own example."""
    assert next_after("30 2 * * *", "America/New_York", at("2026-03-07T12:00")) == at(
        "2026-03-08T07:00"
    )


TRANSITIONS = [
    ("America/New_York", "2026-03-08T07:00"),
    ("America/New_York", "2026-11-01T06:00"),
    ("Europe/Berlin", "2026-03-29T01:00"),
    ("Europe/Berlin", "2026-10-25T01:00"),
    ("Australia/Sydney", "2026-04-04T16:00"),
    ("Australia/Sydney", "2026-10-03T16:00"),
]


@pytest.mark.parametrize(("tz", "change"), TRANSITIONS)
@pytest.mark.parametrize(("expr", "step"), [("0 * * * *", 3600), ("*/30 * * * *", 1800)])
def test_wildcard_hour_keeps_elapsed_cadence(tz: str, change: str, expr: str, step: int) -> None:
    """R-S4: hourly and half-hourly expressions stay evenly spaced across the change."""
    fires = upcoming(expr, tz, at(change) - timedelta(hours=12), 24 * 3600 // step)
    assert fires[0] < at(change) < fires[-1]
    assert {b - a for a, b in pairwise(fires)} == {timedelta(seconds=step)}


@pytest.mark.parametrize(("tz", "change"), TRANSITIONS)
def test_fixed_time_fires_once_per_day_across_transitions(tz: str, change: str) -> None:
    """R-S4: every fixed wall time fires exactly once on the transition day."""
    start = at(change) - timedelta(days=1)
    for hour in range(24):
        for minute in (0, 30):
            fires = upcoming(f"{minute} {hour} * * *", tz, start, 3)
            local_days = [f.astimezone(ZoneInfo(tz)).date() for f in fires]
            assert len(set(local_days)) == 3, (hour, minute, fires)


# --------------------------------------------------------------------------- calendar (R-S2, R-S4)

CALENDAR_CASES = [
    ("0 0 29 2 *", "2026-01-01T00:00",
     ["2028-02-29T00:00Z", "2032-02-29T00:00Z", "2036-02-29T00:00Z"]),
    ("0 0 31 * *", "2026-01-01T00:00",
     ["2026-01-31T00:00Z", "2026-03-31T00:00Z", "2026-05-31T00:00Z", "2026-07-31T00:00Z",
      "2026-08-31T00:00Z", "2026-10-31T00:00Z", "2026-12-31T00:00Z"]),
    ("0 9 L * *", "2028-01-15T00:00",
     ["2028-01-31T09:00Z", "2028-02-29T09:00Z", "2028-03-31T09:00Z", "2028-04-30T09:00Z"]),
    ("0 9 L 2 *", "2026-01-01T00:00",
     ["2026-02-28T09:00Z", "2027-02-28T09:00Z", "2028-02-29T09:00Z"]),
    ("0 9 * * 1#2", "2026-01-01T00:00",
     ["2026-01-12T09:00Z", "2026-02-09T09:00Z", "2026-03-09T09:00Z"]),
    ("0 9 * * MON#2", "2026-01-01T00:00",
     ["2026-01-12T09:00Z", "2026-02-09T09:00Z", "2026-03-09T09:00Z"]),
    ("0 0 * 2 1#5", "2026-01-01T00:00", ["2044-02-29T00:00Z", "2072-02-29T00:00Z"]),
    ("0 9 * JAN-MAR MON-FRI", "2026-03-30T12:00",
     ["2026-03-31T09:00Z", "2027-01-01T09:00Z", "2027-01-04T09:00Z"]),
    ("0 9 * jan-mar mon-fri", "2026-03-30T12:00",
     ["2026-03-31T09:00Z", "2027-01-01T09:00Z", "2027-01-04T09:00Z"]),
    ("0 12 * * SUN,sat", "2026-01-01T00:00", ["2026-01-03T12:00Z", "2026-01-04T12:00Z"]),
    ("0 12 * * 7", "2026-01-01T00:00", ["2026-01-04T12:00Z", "2026-01-11T12:00Z"]),
    # Day-of-month and day-of-week both restricted: either matches (cron rule).
    ("0 0 1,15 * 1", "2026-01-01T00:00",
     ["2026-01-05T00:00Z", "2026-01-12T00:00Z", "2026-01-15T00:00Z", "2026-01-19T00:00Z"]),
    ("0 0 */10 1-6/2 *", "2026-01-01T00:00",
     ["2026-01-11T00:00Z", "2026-01-21T00:00Z", "2026-01-31T00:00Z", "2026-03-01T00:00Z"]),
    # 6-field: leading seconds.
    ("*/15 0 12 * * *", "2026-01-01T00:00",
     ["2026-01-01T12:00:00Z", "2026-01-01T12:00:15Z", "2026-01-01T12:00:30Z",
      "2026-01-01T12:00:45Z", "2026-01-02T12:00:00Z"]),
    ("30 * * * * *", "2026-01-01T00:00", ["2026-01-01T00:00:30Z", "2026-01-01T00:01:30Z"]),
    ("0 9 18 * * 1", "2026-01-15T00:00", ["2026-01-19T18:09:00Z", "2026-01-26T18:09:00Z"]),
]  # fmt: skip


@pytest.mark.parametrize(("expr", "after", "expected"), CALENDAR_CASES)
def test_calendar_features(expr: str, after: str, expected: list[str]) -> None:
    """R-S2/R-S4: Feb 29 and day 31 only where they exist, L, #, names, seconds."""
    assert iso(upcoming(expr, "UTC", at(after), len(expected))) == full(expected)


def test_cron_fields_are_read_in_the_schedule_zone() -> None:
    """R-S2: 09:00 in Berlin is 08:00Z in winter and 07:00Z in summer."""
    assert iso(upcoming("0 9 * * *", "Europe/Berlin", at("2026-03-28T12:00"), 2)) == [
        "2026-03-29T07:00:00Z",
        "2026-03-30T07:00:00Z",
    ]
    winter = next_after("0 9 * * *", "Europe/Berlin", at("2026-01-10T00:00"))
    assert winter == at("2026-01-10T08:00")


# --------------------------------------------------------------------------- grammar (R-S2)


def test_parse_every() -> None:
    assert parse("@every 90s") == Spec(kind="every", text="@every 90s", interval_seconds=90)
    assert parse("@every 5m").interval_seconds == 300
    assert parse("@every 2h").interval_seconds == 7200
    assert parse("@every 1d").interval_seconds == 86400
    assert parse(" @every 1s ").text == " @every 1s "


def test_parse_cron_normalizes() -> None:
    spec = parse("  0  9 * jan-mar\tmon-fri ")
    assert spec.kind == "cron"
    assert spec.cron == "0 9 * JAN-MAR MON-FRI"
    assert spec.interval_seconds is None
    assert parse("0 0 1,L * *").cron == "0 0 1,L * *"


BAD_SPECS = [
    "",
    "   ",
    "@every 0s",
    "@every 00m",
    "@every 5x",
    "@every 5",
    "@every m",
    "@every -5m",
    "@every 1.5h",
    "@every 5 m",
    "@every 5M",
    "@every 1h30m",
    "@every5m",
    "@EVERY 5m",
    "@every 999999999999d",
    "@daily",
    "@reboot",
    "61 * * * *",
    "* 24 * * *",
    "* * 0 * *",
    "* * 32 * *",
    "* * * 13 *",
    "* * * * 8",
    "60 * * * * *",
    "* * *",
    "* * * *",
    "* * * * * * *",
    "0 0 30 2 *",
    "0 0 31 4 *",
    "0 0 30,31 2 *",
    "0 0 */20 * 1#2",  # days 1 and 21 are never a second Monday
    "*/0 * * * *",
    "5-1 * * * *",
    "1, * * * *",
    "0 0 ? * *",
    "0 0 LW * *",
    "0 0 L/2 * *",
    "0 0 L-3 * *",
    "0 0 15W * *",
    "0 0 * * 5L",
    "0 0 * * MON#6",
    "0 0 * * MON#0",
    "0 0 1#2 * *",
    "0 0 * * MONDAY",
    "0 0 * JANUARY *",
    "0 0 * * frı",  # dotless i, which str.upper() turns into I
    "0 0 * * ５",  # full-width digit
    "H * * * *",
    "0 0 * * * 2026",
    "x" * 2000,
]


@pytest.mark.parametrize("text", BAD_SPECS)
def test_invalid_spec(text: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        parse(text)
    assert caught.value.code == "invalid_spec"
    assert repr(text)[:20] in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_invalid_spec_is_raised_by_every_entry_point() -> None:
    after = at("2026-01-01T00:00")
    with pytest.raises(InvalidSpec):
        upcoming("0 0 30 2 *", "UTC", after, 1)
    with pytest.raises(InvalidSpec):
        next_after("@every 0s", "UTC", after)
    with pytest.raises(InvalidSpec):
        due_boundaries("* * *", "UTC", after, after, 64)
    with pytest.raises(InvalidSpec):
        parse(5)  # type: ignore[arg-type]


def test_spec_that_never_fires_in_its_zone_is_rejected_boundedly() -> None:
    """Second Sunday of March, 02:xx: always skipped by New York's spring-forward."""
    started = time.perf_counter()
    with pytest.raises(InvalidSpec, match="never fires in America/New_York"):
        upcoming("*/5 2 * 3 0#2", "America/New_York", at("2026-01-01T00:00"), 1)
    assert time.perf_counter() - started < 5
    assert upcoming("*/5 2 * 3 0#2", "UTC", at("2026-01-01T00:00"), 1) == [at("2026-03-08T02:00")]


@pytest.mark.timeout(10)
def test_wildcard_job_across_a_midnight_fall_back_terminates() -> None:
    """No dead loop: cronsim on aware datetimes cycled forever here (found by
    hypothesis). St John's fell back at 00:01 NDT on 1997-10-26 (02:31Z, -02:30 to
    -03:30): 00:07 NDT does not exist and 23:07 NST is an odd hour, so the next
    fire after 22:07 NDT is 00:07 NST, 03:37Z (elapsed-time rule, R-S4)."""
    expr, tz = "7 */2 * * *", "America/St_Johns"
    after = datetime(1997, 10, 25, 13, 27, 21, 1870, tzinfo=UTC)
    fires = upcoming(expr, tz, after, 6)
    assert iso(fires) == [
        "1997-10-25T14:37:00Z",
        "1997-10-25T16:37:00Z",
        "1997-10-25T18:37:00Z",
        "1997-10-25T20:37:00Z",
        "1997-10-25T22:37:00Z",
        "1997-10-26T00:37:00Z",
    ]
    # The call that spun forever: from the first fire, crossing the fall-back.
    assert iso(upcoming(expr, tz, fires[0], 6)[-2:]) == [
        "1997-10-26T00:37:00Z",
        "1997-10-26T03:37:00Z",
    ]
    assert next_after(expr, tz, at("1997-10-26T00:37")) == at("1997-10-26T03:37")
    result = due_boundaries(expr, tz, fires[0], at("1997-10-26T04:00"), 64)
    assert iso(result.fire)[-2:] == ["1997-10-26T00:37:00Z", "1997-10-26T03:37:00Z"]
    assert result.next_fire_at == at("1997-10-26T05:37")


@pytest.mark.parametrize(
    "name",
    ["", "Mars/Olympus", "europe/berlin", "Europe/Berlin ", "localtime", "../etc/passwd",
     "/usr/share/zoneinfo/UTC", "posix/UTC", "right/UTC", "Europe/", "+01:00", "CET\x00"],
)  # fmt: skip
def test_invalid_timezone(name: str) -> None:
    with pytest.raises(InvalidTimezone) as caught:
        zone(name)
    assert caught.value.code == "invalid_timezone"
    assert isinstance(caught.value, InvalidSpec)
    with pytest.raises(InvalidTimezone):
        upcoming("@every 1m", name, at("2026-01-01T00:00"), 1)


@pytest.mark.parametrize(
    "name", ["UTC", "Europe/Berlin", "America/Bahia", "US/Eastern", "Etc/GMT+5"]
)
def test_valid_timezone(name: str) -> None:
    assert zone(name) == ZoneInfo(name)


def test_naive_datetimes_are_rejected() -> None:
    """R-N2: a naive datetime is never taken as local or UTC."""
    naive = datetime(2026, 1, 1)
    aware = at("2026-01-01T00:00")
    calls: list[Callable[[], object]] = [
        lambda: upcoming("@every 1m", "UTC", naive, 1),
        lambda: upcoming("@every 1m", "UTC", aware, 1, anchor=naive),
        lambda: next_after("0 * * * *", "UTC", naive),
        lambda: due_boundaries("@every 1m", "UTC", naive, aware, 64),
        lambda: due_boundaries("@every 1m", "UTC", aware, naive, 64),
        lambda: due_boundaries("@every 1m", "UTC", aware, aware, 64, anchor=naive),
    ]
    for call in calls:
        with pytest.raises(NaiveDatetime) as caught:
            call()
        assert caught.value.code == "naive_datetime"
        assert isinstance(caught.value, ValueError)


def test_argument_checks() -> None:
    aware = at("2026-01-01T00:00")
    with pytest.raises(ValueError):
        upcoming("@every 1m", "UTC", aware, -1)
    with pytest.raises(TypeError):
        upcoming("@every 1m", "UTC", "2026-01-01T00:00:00Z", 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        due_boundaries("@every 1m", "UTC", aware, aware, -1)
    with pytest.raises(ValueError):
        due_boundaries("@every 1m", "UTC", aware, aware, 1, grace=-1)
    with pytest.raises(ValueError):
        due_boundaries("@every 1m", "UTC", aware, aware, 1, grace=float("nan"))
    assert upcoming("@every 1m", "UTC", aware, 0) == []


def test_results_are_utc_whatever_the_input_offset() -> None:
    after = datetime(2026, 1, 1, 9, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    fires = upcoming("@every 1h", "UTC", after, 2)
    assert fires == [at("2026-01-01T09:00"), at("2026-01-01T10:00")]
    assert all(f.tzinfo is UTC for f in fires)


# --------------------------------------------------------------------------- @every anchors (R-S5)


def test_every_is_anchored() -> None:
    anchor = at("2026-01-15T00:00:07")
    fires = upcoming("@every 5m", "UTC", at("2026-01-15T01:01:00"), 3, anchor=anchor)
    assert iso(fires) == ["2026-01-15T01:05:07Z", "2026-01-15T01:10:07Z", "2026-01-15T01:15:07Z"]
    # Strictly after: a boundary equal to ``after`` is not returned.
    assert next_after("@every 5m", "UTC", at("2026-01-15T01:05:07"), anchor=anchor) == at(
        "2026-01-15T01:10:07"
    )
    # Default anchor is ``after`` itself.
    assert next_after("@every 90s", "UTC", at("2026-01-15T00:00")) == at("2026-01-15T00:01:30")


def test_every_keeps_microseconds_exactly() -> None:
    anchor = datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)
    fires = upcoming("@every 1s", "UTC", anchor + timedelta(days=400), 2, anchor=anchor)
    assert [f.microsecond for f in fires] == [123456, 123456]


# --------------------------------------------------------------------------- catch-up (R-S8)

T0 = at("2026-01-15T00:00")


def test_catch_up_fires_oldest_first_and_skips_the_rest() -> None:
    """200 elapsed @every 1s boundaries, catch_up=64."""
    now = T0 + timedelta(seconds=199)
    result = due_boundaries("@every 1s", "UTC", T0, now, 64)
    assert result.fire == [T0 + timedelta(seconds=i) for i in range(64)]
    assert (result.skipped, result.missed) == (136, 0)
    assert result.next_fire_at == T0 + timedelta(seconds=200) > now
    assert result.elapsed == 200


def test_catch_up_zero_fires_only_the_latest() -> None:
    now = T0 + timedelta(seconds=199, milliseconds=500)
    result = due_boundaries("@every 1s", "UTC", T0, now, 0)
    assert result.fire == [T0 + timedelta(seconds=199)]
    assert (result.skipped, result.missed) == (199, 0)
    assert result.next_fire_at == T0 + timedelta(seconds=200)


def test_skipped_occurrences_do_not_use_up_the_catch_up() -> None:
    """A user-skipped boundary is never fired and does not count against catch_up:
    with catch_up=1 and the oldest skipped, the next one fires (found by a helper)."""
    now = T0 + timedelta(seconds=59)
    result = due_boundaries("@every 20s", "UTC", T0, now, 1, exclude=[T0])
    assert result.fire == [T0 + timedelta(seconds=20)]
    assert (result.skipped, result.missed) == (2, 0)  # T0 (user) and T0+40 (limit)
    assert result.elapsed == 3
    many = due_boundaries("@every 1s", "UTC", T0, now, 3, exclude=[T0, T0 + timedelta(seconds=1)])
    assert many.fire == [T0 + timedelta(seconds=s) for s in (2, 3, 4)]
    latest_skipped = due_boundaries("@every 1s", "UTC", T0, now, 0, exclude=[now])
    assert latest_skipped.fire == [] and latest_skipped.skipped == 60


def test_the_calendar_ends_at_9999_without_an_error() -> None:
    far = upcoming("@every 36600d", "UTC", T0, 1000)
    assert 0 < len(far) < 1000 and far[-1].year <= 9999
    assert upcoming("0 0 * * *", "UTC", at("9999-12-31T00:00"), 5) == []
    with pytest.raises(InvalidSpec, match="never fires"):
        next_after("0 0 * * *", "UTC", at("9999-12-31T00:00"))


def test_grace_marks_old_boundaries_missed() -> None:
    now = T0 + timedelta(seconds=199)
    result = due_boundaries("@every 1s", "UTC", T0, now, 64, grace=10)
    # Older than now - 10 s (T0 + 189 s): missed; T0+189 .. T0+199 fire.
    assert result.fire == [T0 + timedelta(seconds=i) for i in range(189, 200)]
    assert (result.skipped, result.missed) == (0, 189)

    limited = due_boundaries("@every 1s", "UTC", T0, now, 5, grace=10)
    assert limited.fire == [T0 + timedelta(seconds=i) for i in range(189, 194)]
    assert (limited.skipped, limited.missed) == (6, 189)

    latest = due_boundaries("@every 1s", "UTC", T0, now, 0, grace=10.5)
    assert latest.fire == [now]
    assert (latest.skipped, latest.missed) == (10, 189)

    exact = due_boundaries("@every 1s", "UTC", T0, now, 64, grace=0)
    assert exact.fire == [now]
    assert exact.missed == 199


def test_grace_can_leave_nothing_to_fire() -> None:
    now = T0 + timedelta(seconds=199, milliseconds=500)
    result = due_boundaries("@every 1s", "UTC", T0, now, 64, grace=0.25)
    assert result.fire == []
    assert (result.skipped, result.missed) == (0, 200)
    assert result.next_fire_at == T0 + timedelta(seconds=200)


def test_not_yet_due_is_a_no_op() -> None:
    later = T0 + timedelta(minutes=5)
    result = due_boundaries("*/5 * * * *", "UTC", later, T0, 64)
    assert result == Catchup(fire=[], skipped=0, missed=0, next_fire_at=later)


def test_exactly_due() -> None:
    result = due_boundaries("*/5 * * * *", "UTC", T0, T0, 64)
    assert result.fire == [T0]
    assert result.next_fire_at == T0 + timedelta(minutes=5)


def test_thirty_day_downtime_of_every_second_is_arithmetic() -> None:
    now = T0 + timedelta(days=30, microseconds=1)
    started = time.perf_counter()
    result = due_boundaries("@every 1s", "UTC", T0, now, 64)
    catch_up_zero = due_boundaries("@every 1s", "UTC", T0, now, 0, grace=3600)
    assert time.perf_counter() - started < 0.5
    assert len(result.fire) == 64
    assert result.skipped == 30 * 86400 + 1 - 64
    assert result.next_fire_at == T0 + timedelta(days=30, seconds=1)
    assert catch_up_zero.fire == [T0 + timedelta(days=30)]
    # Within grace: the 3600 boundaries at or after now - 3600 s; the latest fires.
    assert (catch_up_zero.skipped, catch_up_zero.missed) == (3599, 30 * 86400 + 1 - 3600)


def test_long_cron_downtime_counts_exactly_and_quickly() -> None:
    """Every second for 59 days across New York's spring-forward."""
    first, now = at("2026-02-01T00:00"), at("2026-04-01T00:00") + timedelta(milliseconds=500)
    started = time.perf_counter()
    result = due_boundaries("* * * * * *", "America/New_York", first, now, 64, grace=3600)
    assert time.perf_counter() - started < 5
    assert result.fire[0] == at("2026-03-31T23:00:01")
    assert len(result.fire) == 64
    assert result.elapsed == 59 * 86400 + 1
    assert (result.skipped, result.missed) == (3600 - 64, 59 * 86400 + 1 - 3600)
    assert result.next_fire_at == at("2026-04-01T00:00:01")


def test_cron_catch_up_across_spring_forward() -> None:
    result = due_boundaries(
        "30 2 * * *", "America/New_York", at("2026-03-07T07:30"), at("2026-03-10T12:00"), 64
    )
    assert iso(result.fire) == [
        "2026-03-07T07:30:00Z",
        "2026-03-08T07:00:00Z",
        "2026-03-09T06:30:00Z",
        "2026-03-10T06:30:00Z",
    ]
    assert result.next_fire_at == at("2026-03-11T06:30")
    hourly = due_boundaries(
        "0 * * * *", "America/New_York", at("2026-03-08T05:00"), at("2026-03-09T04:59"), 0
    )
    assert hourly.elapsed == 24  # elapsed hours, one fire each
    assert hourly.fire == [at("2026-03-09T04:00")]


def test_misaligned_stored_next_fire_is_fired_then_anchor_lattice() -> None:
    anchor = at("2026-01-15T00:00")
    stored = at("2026-01-15T00:00:30")
    result = due_boundaries(
        "@every 1m", "UTC", stored, at("2026-01-15T00:03:00"), 64, anchor=anchor
    )
    assert iso(result.fire) == [
        "2026-01-15T00:00:30Z",
        "2026-01-15T00:01:00Z",
        "2026-01-15T00:02:00Z",
        "2026-01-15T00:03:00Z",
    ]
    assert result.next_fire_at == at("2026-01-15T00:04:00")


# --------------------------------------------------------------------------- properties

PROPERTY_ZONES = [
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Australia/Sydney",
    "Australia/Lord_Howe",  # 30-minute DST
    "America/Santiago",  # changes at midnight
    "America/Havana",  # changes at midnight
    "Asia/Kolkata",
    "America/St_Johns",
    "Pacific/Chatham",
    "Africa/Casablanca",  # suspends DST for Ramadan
    "Europe/London",
]
CRON_SPECS = [
    "0 4 * * *",
    "30 2 * * *",
    "15,45 0-3 * * *",
    "0 * * * *",
    "*/30 * * * *",
    "7 */2 * * *",
    "*/20 1,2 * * *",
    "0 9 * * 1-5",
    "0 0 L * *",
    "0 9 * * TUE#2",
    "0 9 29 2 *",
    "*/15 30 1 * * *",
    "0 30 2 * * 0",
    "*/10 * 2 * * *",
]
DENSE_SPECS = ["* * * * * *", "*/7 * * * * *", "* 30 2 * * *", "*/5 * 0-3 * * *"]

instants = st.datetimes(
    min_value=datetime(1990, 1, 1), max_value=datetime(2060, 1, 1), timezones=st.just(UTC)
)
#: Instants near 2026's transitions, where the interesting cases are.
near_2026 = st.datetimes(
    min_value=datetime(2026, 1, 1), max_value=datetime(2027, 1, 1), timezones=st.just(UTC)
)
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(
    amount=st.integers(1, 10_000),
    unit=st.sampled_from("smhd"),
    anchor=instants,
    after=instants,
    count=st.integers(1, 20),
)
def test_every_properties(
    amount: int, unit: str, anchor: datetime, after: datetime, count: int
) -> None:
    """R-S5: strictly increasing, strictly after, spaced by the interval, aligned."""
    spec = parse(f"@every {amount}{unit}")
    assert spec.interval_seconds is not None
    step = timedelta(seconds=spec.interval_seconds)
    fires = upcoming(spec, "Europe/Berlin", after, count, anchor=anchor)
    assert len(fires) == count
    assert after < fires[0] <= after + step
    assert all(b - a == step for a, b in pairwise(fires))
    assert all((f - anchor) % step == timedelta(0) for f in fires)


@PROPERTY
@given(
    expr=st.sampled_from(CRON_SPECS),
    tz=st.sampled_from(PROPERTY_ZONES),
    after=st.one_of(instants, near_2026),
)
def test_cron_upcoming_is_increasing_and_consistent(expr: str, tz: str, after: datetime) -> None:
    """R-S3: forecasts from any point agree with forecasts from the next fire."""
    fires = upcoming(expr, tz, after, 6)
    assert after < fires[0]
    assert all(a < b for a, b in pairwise(fires))
    assert fires[1:] == upcoming(expr, tz, fires[0], 6)[:-1]


@PROPERTY
@given(
    expr=st.sampled_from(CRON_SPECS),
    tz=st.sampled_from(sorted(recurrence._iana_names())),
    after=near_2026,
)
def test_cron_consistent_in_every_zone(expr: str, tz: str, after: datetime) -> None:
    fires = upcoming(expr, tz, after, 4)
    assert after < fires[0]
    assert all(a < b for a, b in pairwise(fires))
    assert fires[1:] == upcoming(expr, tz, fires[0], 4)[:-1]


FIXED_5_FIELD = [s for s in CRON_SPECS if len(s.split()) == 5 and s.split()[0][0] != "*"
                 and s.split()[1][0] != "*"]  # fmt: skip


@PROPERTY
@given(expr=st.sampled_from(FIXED_5_FIELD), tz=st.sampled_from(PROPERTY_ZONES), after=near_2026)
def test_fixed_time_mapping_agrees_with_cronsim(expr: str, tz: str, after: datetime) -> None:
    """For 5-field fixed-time jobs cronsim applies cronie's rules itself; ours must agree,
    except that cronsim can return a repeated wall time's first occurrence even
    when it lies before ``after`` (we never do)."""
    reference: list[datetime] = []
    for moment in CronSim(expr, after.astimezone(ZoneInfo(tz))):
        instant = moment.astimezone(UTC)
        if instant > after and (not reference or instant > reference[-1]):
            reference.append(instant)
        if len(reference) == 5:
            break
    assert upcoming(expr, tz, after, 5) == reference


def _enumerate(expr: str, tz: str, low: datetime, high: datetime) -> list[datetime]:
    out: list[datetime] = []
    for fire in islice(recurrence._plan(parse(expr), zone(tz), low).iter_after(low), 200_000):
        if fire > high:
            return out
        out.append(fire)
    raise AssertionError("window too large for enumeration")


def _reference_catch_up(
    expr: str, tz: str, stored: datetime, now: datetime, catch_up: int, grace: float | None
) -> Catchup:
    elapsed = [stored, *_enumerate(expr, tz, stored, now)] if stored <= now else []
    cutoff = now - timedelta(seconds=grace) if grace is not None else None
    missed = [b for b in elapsed if cutoff is not None and b < cutoff]
    eligible = elapsed[len(missed) :]
    fire = eligible[:catch_up] if catch_up else eligible[-1:]
    following = stored if stored > now else next_after(expr, tz, now)
    return Catchup(fire, len(eligible) - len(fire), len(missed), following)


@PROPERTY
@given(
    expr=st.sampled_from(CRON_SPECS),
    tz=st.sampled_from(PROPERTY_ZONES),
    start=near_2026,
    hours=st.integers(0, 96),
    catch_up=st.integers(0, 70),
    grace=st.one_of(st.none(), st.floats(0, 200_000)),
)
def test_cron_catch_up_matches_enumeration(
    expr: str,
    tz: str,
    start: datetime,
    hours: int,
    catch_up: int,
    grace: float | None,
) -> None:
    """R-S8: the counting shortcut agrees with boundary-by-boundary enumeration."""
    stored = next_after(expr, tz, start)
    now = stored + timedelta(hours=hours, seconds=17)
    expected = _reference_catch_up(expr, tz, stored, now, catch_up, grace)
    assert due_boundaries(expr, tz, stored, now, catch_up, grace=grace) == expected


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    expr=st.sampled_from(DENSE_SPECS),
    tz=st.sampled_from(["America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "UTC"]),
    change=st.sampled_from(["2026-03-08T07:00", "2026-03-29T01:00", "2026-04-04T15:00",
                            "2026-10-03T15:30", "2026-10-25T01:00", "2026-11-01T06:00"]),
    offset=st.integers(-6 * 3600, 6 * 3600),
    seconds=st.integers(0, 5 * 3600),
)  # fmt: skip
def test_dense_cron_count_matches_enumeration(
    expr: str, tz: str, change: str, offset: int, seconds: int
) -> None:
    low = at(change) + timedelta(seconds=offset, microseconds=250_000)
    high = low + timedelta(seconds=seconds)
    plan = recurrence._plan(parse(expr), zone(tz), low)
    assert plan.count(low, high) == len(_enumerate(expr, tz, low, high))


@PROPERTY
@given(
    amount=st.integers(1, 600),
    anchor=instants,
    start=st.timedeltas(timedelta(0), timedelta(days=3)),
    down=st.timedeltas(timedelta(0), timedelta(hours=2)),
    catch_up=st.integers(0, 70),
    grace=st.one_of(st.none(), st.floats(0, 10_000)),
)
def test_every_catch_up_matches_enumeration(
    amount: int,
    anchor: datetime,
    start: timedelta,
    down: timedelta,
    catch_up: int,
    grace: float | None,
) -> None:
    expr = f"@every {amount}s"
    step = timedelta(seconds=amount)
    stored = next_after(expr, "UTC", anchor + start, anchor=anchor)
    now = stored + down
    elapsed = [stored + i * step for i in range((now - stored) // step + 1)]
    cutoff = now - timedelta(seconds=grace) if grace is not None else None
    missed = [b for b in elapsed if cutoff is not None and b < cutoff]
    eligible = elapsed[len(missed) :]
    fire = eligible[:catch_up] if catch_up else eligible[-1:]
    expected = Catchup(fire, len(eligible) - len(fire), len(missed), elapsed[-1] + step)
    assert (
        due_boundaries(expr, "UTC", stored, now, catch_up, anchor=anchor, grace=grace) == expected
    )
