"""Schedule registration, control and forecasts (R-S1, R-S5, R-S9, R-S10)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from service.engine import Engine
from service.errors import Conflict, NotFound, PgwakeError
from service.recurrence import InvalidSpec, InvalidTimezone


async def test_register_then_reregister_keeps_anchor_and_next_fire(engine: Engine) -> None:
    row, created = await engine.schedules.schedule("tick", "@every 10s", "jobs", {"a": 1})
    assert created and row["next_fire_at"] > datetime.now(UTC)
    assert row["next_fire_at"] - row["anchor"] == timedelta(seconds=10)
    await asyncio.sleep(0.05)
    for _ in range(10):  # an app registering its schedules at every start (R-S5)
        again, created = await engine.schedules.schedule("tick", "@every 10s", "jobs", {"a": 2})
        assert not created
        assert (again["anchor"], again["next_fire_at"]) == (row["anchor"], row["next_fire_at"])
    assert again["payload"] == {"a": 2}
    changed, _ = await engine.schedules.schedule("tick", "@every 20s", "jobs", {})
    assert changed["anchor"] > row["anchor"]  # a new spec starts a new lattice


async def test_cron_in_a_zone_and_forecast(engine: Engine) -> None:
    await engine.schedules.schedule("nine", "0 9 * * *", "mail", {}, timezone="Europe/Berlin")
    after = datetime(2026, 3, 27, 12, tzinfo=UTC)
    fires = await engine.schedules.upcoming("nine", 3, after)
    # 09:00 Berlin is 08:00Z in winter and 07:00Z from 2026-03-29 (DST).
    assert [f["utc"] for f in fires] == [
        datetime(2026, 3, 28, 8, tzinfo=UTC),
        datetime(2026, 3, 29, 7, tzinfo=UTC),
        datetime(2026, 3, 30, 7, tzinfo=UTC),
    ]
    assert {f["local"].hour for f in fires} == {9}


async def test_skip_removes_an_occurrence_from_the_forecast(engine: Engine) -> None:
    await engine.schedules.schedule("hourly", "0 * * * *", "q", {})
    first, second, third = [f["utc"] for f in await engine.schedules.upcoming("hourly", 3)]
    await engine.schedules.skip("hourly", second)
    assert [f["utc"] for f in await engine.schedules.upcoming("hourly", 3)][:2] == [first, third]
    with pytest.raises(PgwakeError):
        await engine.schedules.skip("hourly", second + timedelta(minutes=1))  # not a boundary


async def test_pause_resume_are_compare_and_set(engine: Engine) -> None:
    await engine.schedules.schedule("p", "@every 1m", "q", {})
    assert (await engine.schedules.pause("p"))["paused"] is True
    with pytest.raises(Conflict):
        await engine.schedules.pause("p")
    resumed = await engine.schedules.resume("p")
    assert resumed["paused"] is False and resumed["next_fire_at"] > datetime.now(UTC)
    with pytest.raises(Conflict):
        await engine.schedules.resume("p")
    with pytest.raises(NotFound):
        await engine.schedules.pause("absent")


async def test_unschedule_and_list(engine: Engine) -> None:
    for name in ("b", "a", "c"):
        await engine.schedules.schedule(name, "@every 1h", "q", {})
    assert [r["name"] for r in await engine.schedules.list_schedules()] == ["a", "b", "c"]
    assert [r["name"] for r in await engine.schedules.list_schedules(after="a", limit=1)] == ["b"]
    assert await engine.schedules.unschedule("b") is True
    assert await engine.schedules.unschedule("b") is False


@pytest.mark.parametrize(
    ("spec", "tz", "error"),
    [
        ("@every 0s", "UTC", InvalidSpec),
        ("@every 5x", "UTC", InvalidSpec),
        ("61 * * * *", "UTC", InvalidSpec),
        ("* * *", "UTC", InvalidSpec),
        ("0 0 30 2 *", "UTC", InvalidSpec),
        ("0 9 * * *", "Mars/Olympus", InvalidTimezone),
        ("0 9 * * *", "", InvalidTimezone),
    ],
)
async def test_bad_specs_store_nothing(engine: Engine, spec: str, tz: str, error: type) -> None:
    with pytest.raises(error) as info:
        await engine.schedules.schedule("bad", spec, "q", {}, timezone=tz)
    assert info.value.status == 422
    assert await engine.pool.fetchval("SELECT count(*) FROM pgwake.schedules") == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": "__x"},
        {"queue": "__outbox:events"},
        {"name": ""},
        {"payload": {"v": float("nan")}},
        {"catch_up": -1},
        {"grace": 0},
        {"max_attempts": 0},
    ],
)
async def test_bad_arguments_store_nothing(engine: Engine, kwargs: dict) -> None:
    args = {"name": "ok", "spec": "@every 1m", "queue": "q", "payload": {}, **kwargs}
    with pytest.raises(PgwakeError):
        await engine.schedules.schedule(**args)
    assert await engine.pool.fetchval("SELECT count(*) FROM pgwake.schedules") == 0


async def test_registration_notifies_the_scheduler_channel(engine: Engine) -> None:
    waiter = engine.hub.arm("schedules")
    await engine.schedules.schedule("n", "@every 1m", "q", {})
    assert await waiter.wait(2.0)
