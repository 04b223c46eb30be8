"""Scheduled events: store, dispatch, failure, retry, idempotency (R-E1–R-E6)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from service.engine import Engine
from service.errors import Conflict, NaiveDatetime, NotFound, ValidationError
from service.events import Event

FACTS = {"facts_version": 1, "scenario": "reminder"}


def _now() -> datetime:
    return datetime.now(UTC)


async def _wait_status(engine: Engine, event_id: int, status: str, timeout: float = 10) -> dict:
    async def until() -> dict:
        while True:
            row = await engine.events.get(event_id)
            if row["status"] == status:
                return row
            await asyncio.sleep(0.01)

    return await asyncio.wait_for(until(), timeout)


async def test_store_validates_before_storing(engine: Engine) -> None:
    bad = [
        dict(event_type="", trigger_at=_now(), facts=FACTS),
        dict(event_type="x", trigger_at=_now(), facts={}),
        dict(event_type="x", trigger_at=_now(), facts={"scenario": "s"}),
        dict(event_type="x", trigger_at=_now(), facts={"facts_version": 1}),
        dict(event_type="x", trigger_at=_now(), facts={**FACTS, "n": float("nan")}),
        dict(event_type="x", trigger_at=_now(), facts={**FACTS, "s": "\x00"}),
    ]
    for kwargs in bad:
        with pytest.raises(ValidationError):
            await engine.events.store(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(NaiveDatetime):
        await engine.events.store("x", datetime(2030, 1, 1), FACTS)
    assert await engine.pool.fetchval("SELECT count(*) FROM pgwake.scheduled_events") == 0


async def test_handler_failure_marks_one_row_and_retry_clears(engine: Engine) -> None:
    """Acceptance 3: one raising handler call fails its row only; retry then succeeds."""
    fail_once = {"boom"}
    seen: list[str] = []

    @engine.on_event
    async def handler(event: Event, conn: asyncpg.Connection) -> None:
        seen.append(event.event_type)
        await conn.execute("SELECT 1")
        if event.event_type in fail_once:
            fail_once.discard(event.event_type)
            raise RuntimeError("handler exploded")

    past = _now() - timedelta(seconds=1)
    rows = [(await engine.events.store(t, past, FACTS))[0] for t in ("a", "boom", "c")]
    assert await engine.events.dispatch_once() == 3
    a, boom, c = [await engine.events.get(r["id"]) for r in rows]
    assert a["status"] == c["status"] == "dispatched" and a["dispatched_at"]
    assert boom["status"] == "failed" and boom["dispatched_at"] is None
    assert boom["last_error"] == "RuntimeError: handler exploded"

    with pytest.raises(Conflict):
        await engine.events.retry(a["id"])  # R-H6: only failed rows can be retried
    await engine.events.retry(boom["id"])
    with pytest.raises(Conflict):
        await engine.events.retry(boom["id"])  # already pending again
    assert await engine.events.dispatch_once() == 1
    boom = await engine.events.get(boom["id"])
    assert boom["status"] == "dispatched" and boom["last_error"] is None
    assert seen == ["a", "boom", "c", "boom"]


async def test_handler_work_rolls_back_with_its_failure(engine: Engine) -> None:
    outbox = engine.outbox("events")

    @engine.on_event
    async def handler(event: Event, conn: asyncpg.Connection) -> None:
        await outbox.enqueue_tx(conn, event.as_message())
        if event.event_type == "bad":
            raise RuntimeError("after enqueue")

    await engine.events.store("good", _now(), FACTS)
    await engine.events.store("bad", _now(), FACTS)
    await engine.events.dispatch_once()
    stats = await outbox.stats()
    assert stats["pending"] == 1  # the failed event's message was rolled back


async def test_external_key_rewrites_and_refires(engine: Engine) -> None:
    """Acceptance 4 (library level); concurrency below."""

    @engine.on_event
    async def handler(event: Event, conn: asyncpg.Connection) -> None:
        return None

    first, created = await engine.events.store("a", _now(), FACTS, external_key="k")
    assert created
    await engine.events.dispatch_once()
    assert (await engine.events.get(first["id"]))["status"] == "dispatched"
    later = _now() + timedelta(hours=1)
    second, created = await engine.events.store(
        "b", later, {**FACTS, "v": 2}, subject_id="s", external_key="k"
    )
    assert not created and second["id"] == first["id"]
    assert second["status"] == "pending" and second["dispatched_at"] is None
    assert (second["event_type"], second["subject_id"], second["facts"]["v"]) == ("b", "s", 2)
    assert second["trigger_at"] == later
    # Without a key, identical posts are two rows.
    await engine.events.store("same", later, FACTS)
    await engine.events.store("same", later, FACTS)
    assert (
        await engine.pool.fetchval(
            "SELECT count(*) FROM pgwake.scheduled_events WHERE event_type = 'same'"
        )
        == 2
    )


async def test_concurrent_posts_with_one_key_leave_one_row(engine: Engine) -> None:
    results = await asyncio.gather(
        *(
            engine.events.store("x", _now() + timedelta(minutes=n), FACTS, external_key="same")
            for n in range(20)
        )
    )
    assert len({r[0]["id"] for r in results}) == 1
    assert await engine.pool.fetchval("SELECT count(*) FROM pgwake.scheduled_events") == 1


async def test_cancel_is_compare_and_set(engine: Engine) -> None:
    row, _ = await engine.events.store("x", _now() + timedelta(hours=1), FACTS)
    assert (await engine.events.cancel(row["id"]))["status"] == "cancelled"
    with pytest.raises(Conflict) as info:
        await engine.events.cancel(row["id"])
    assert info.value.extra["current"] == {"status": "cancelled"}
    with pytest.raises(NotFound):
        await engine.events.cancel(10**9)


async def test_dispatcher_sleeps_to_deadline_and_wakes_on_notify(engine: Engine) -> None:
    """R-E3: with a 5 s safety poll, an event due in 0.3 s fires near 0.3 s, and an
    event stored for 'now' while the dispatcher sleeps on a far deadline fires at once."""
    fired: dict[str, float] = {}
    soon_fired = asyncio.Event()

    @engine.on_event
    async def handler(event: Event, conn: asyncpg.Connection) -> None:
        fired[event.event_type] = time.monotonic()
        if event.event_type == "soon":
            soon_fired.set()

    async with engine.runner():
        await engine.events.store("far", _now() + timedelta(hours=1), FACTS)
        await asyncio.sleep(0.2)  # the dispatcher is asleep on the far deadline
        t0 = time.monotonic()
        await engine.events.store("soon", _now() + timedelta(seconds=0.3), FACTS)
        await engine.events.store("now", _now(), FACTS)
        await asyncio.wait_for(soon_fired.wait(), 4)
    assert fired["now"] - t0 < 1.0  # woken by NOTIFY, not the 5 s poll
    assert 0.25 <= fired["soon"] - t0 < 1.5  # deadline, not the poll


async def test_dispatch_batches_are_bounded_and_replicas_do_not_share_rows(
    engine: Engine, clean_db: str
) -> None:
    calls: list[int] = []

    async def handler(event: Event, conn: asyncpg.Connection) -> None:
        assert isinstance(event.id, int)
        calls.append(event.id)
        await asyncio.sleep(0.002)

    engine.on_event(handler)
    past = _now() - timedelta(seconds=5)
    for _ in range(3):
        await engine.events.store("x", past, FACTS)
    await engine.pool.execute(
        "INSERT INTO pgwake.scheduled_events (event_type, trigger_at, facts) "
        "SELECT 'bulk', now() - interval '1 second', '{\"facts_version\":1,\"scenario\":\"s\"}' "
        "FROM generate_series(1, 97)"
    )
    async with Engine(clean_db, migrate=False, poll_seconds=5) as other:
        other.on_event(handler)
        counts = await asyncio.gather(*(e.events.dispatch_once() for e in [engine, other] * 3))
        assert all(n <= 20 for n in counts)
        while await engine.events.dispatch_once() or await other.events.dispatch_once():
            pass
    assert len(calls) == len(set(calls)) == 100
