"""The calendar's window and per-schedule fire lists (R-H4): pure fire-time math,
taken from service.recurrence, with skips left out (R-S10)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

from service import recurrence
from service.calendar import schedule_fires, window

BERLIN = ZoneInfo("Europe/Berlin")


def test_window_is_fourteen_local_days_and_never_starts_in_the_past() -> None:
    now = datetime(2027, 3, 20, 12, 0, tzinfo=UTC)
    # 14 Berlin days from 2027-03-21, across Berlin's change on 2027-03-28.
    begin, end = window(date(2027, 3, 21), BERLIN, now)
    assert begin == datetime(2027, 3, 20, 23, 0, tzinfo=UTC)  # 00:00 CET
    assert end == datetime(2027, 4, 3, 22, 0, tzinfo=UTC)  # 00:00 CEST
    # Starting today: from now, not from midnight.
    begin, _ = window(date(2027, 3, 20), BERLIN, now)
    assert begin == now


def _row(spec: str, zone: str, skips: list[datetime]) -> dict[str, object]:
    anchor = datetime(2027, 1, 1, tzinfo=UTC)
    return {"spec": spec, "timezone": zone, "anchor": anchor, "skips": skips}


def test_fires_match_recurrence_and_leave_skips_out() -> None:
    begin = datetime(2027, 3, 8, 5, 0, tzinfo=UTC)
    end = datetime(2027, 3, 22, 5, 0, tzinfo=UTC)
    expected = recurrence.upcoming("0 9 * * *", "America/New_York", begin, 14)
    assert schedule_fires(_row("0 9 * * *", "America/New_York", []), begin, end, 500) == (
        expected,
        False,
    )
    skipped = expected[6]  # 2027-03-14, the first EDT fire
    fires, more = schedule_fires(_row("0 9 * * *", "America/New_York", [skipped]), begin, end, 500)
    assert skipped not in fires and len(fires) == 13 and not more


def test_a_fire_exactly_at_the_window_start_is_drawn_and_the_end_is_open() -> None:
    begin = datetime(2027, 3, 8, 0, 0, tzinfo=UTC)
    end = datetime(2027, 3, 8, 3, 0, tzinfo=UTC)
    fires, more = schedule_fires(_row("0 * * * *", "UTC", []), begin, end, 500)
    assert [f.hour for f in fires] == [0, 1, 2] and not more


def test_the_per_schedule_cap_says_more_follow() -> None:
    begin = datetime(2027, 3, 8, tzinfo=UTC)
    end = datetime(2027, 3, 9, tzinfo=UTC)
    fires, more = schedule_fires(_row("@every 1m", "UTC", []), begin, end, 500)
    assert len(fires) == 500 and more
    assert all(begin <= f < end for f in fires)
