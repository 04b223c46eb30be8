"""The schedule leader: one-transaction ticks, catch-up, leadership (R-S6–R-S8)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from service import db
from service.engine import Engine
from service.errors import LeadershipLost
from service.identity import instance_id
from service.leader import LEADER_LOCK, RENEW_EVERY_SECONDS, Leader, dedupe_key


def _leader(engine: Engine, owner: str | None = None) -> Leader:
    return Leader(
        engine.queues,
        engine.locks,
        engine.hub,
        engine.health,
        owner=owner or instance_id(),
        poll_seconds=5,
    )


async def _tick(engine: Engine, leader: Leader | None = None) -> int:
    """One fenced tick as the leader (takes the lock first)."""
    leader = leader or _leader(engine)
    assert await engine.locks.try_lock(LEADER_LOCK, leader.owner, 10, allow_reserved=True)
    try:
        return await leader.tick()
    finally:
        await engine.locks.unlock(LEADER_LOCK, leader.owner, allow_reserved=True)


async def _unfenced_tick(engine: Engine, leader: Leader) -> int:
    """A rogue ticker that skips the leadership fence: only the database stops it."""
    async with engine.pool.acquire() as conn, conn.transaction():
        return len(await leader._fire_due(conn))


async def _backdate(engine: Engine, name: str, seconds: float) -> datetime:
    """Pretend the runner was down: next fire (and anchor) ``seconds`` in the past."""
    at = await engine.pool.fetchval(
        "UPDATE pgwake.schedules SET next_fire_at = date_trunc('second', now())"
        " - make_interval(secs => $2), anchor = date_trunc('second', now())"
        " - make_interval(secs => $2) WHERE name = $1 RETURNING next_fire_at",
        name,
        seconds,
    )
    return at


async def test_tick_fires_each_elapsed_boundary_once(engine: Engine) -> None:
    await engine.schedules.schedule("s", "@every 1s", "work", {"k": 1}, priority=3)
    start = await _backdate(engine, "s", 3)
    assert await _tick(engine) >= 3
    jobs = await engine.pool.fetch(
        "SELECT * FROM pgwake.jobs WHERE queue = 'work' ORDER BY scheduled_for"
    )
    assert jobs[0]["scheduled_for"] == start
    assert [j["scheduled_for"] - start for j in jobs[:3]] == [
        timedelta(seconds=n) for n in range(3)
    ]
    assert all(j["dedupe_key"] == dedupe_key("s", j["scheduled_for"]) for j in jobs)
    assert all(j["priority"] == 3 and j["payload"] == {"k": 1} for j in jobs)
    row = await engine.schedules.get_schedule("s")
    assert row["next_fire_at"] > datetime.now(UTC) - timedelta(seconds=1)
    assert row["fired_total"] == len(jobs)
    assert await _tick(engine) in (0, 1)  # nothing fired twice


async def test_catch_up_fires_64_then_skips_forward(engine: Engine) -> None:
    """Issue 3 acceptance 6: 200 missed boundaries -> 64 fired oldest first, 136 skipped."""
    await engine.schedules.schedule("c", "@every 1s", "cq", {})
    start = await _backdate(engine, "c", 199.5)
    await _tick(engine)
    jobs = await engine.pool.fetch(
        "SELECT scheduled_for FROM pgwake.jobs WHERE queue = 'cq' ORDER BY scheduled_for"
    )
    row = await engine.schedules.get_schedule("c")
    assert len(jobs) == 64 and jobs[0]["scheduled_for"] == start
    assert row["skipped_total"] + 64 == 200 or row["skipped_total"] + 64 == 201
    assert row["next_fire_at"] > row["updated_at"] - timedelta(seconds=1)

    await engine.schedules.schedule("z", "@every 1s", "zq", {}, catch_up=0)
    await _backdate(engine, "z", 199.5)
    await _tick(engine)
    assert await engine.pool.fetchval("SELECT count(*) FROM pgwake.jobs WHERE queue = 'zq'") == 1


async def test_rogue_second_ticker_cannot_double_fire(engine: Engine) -> None:
    await engine.schedules.schedule("r", "@every 1s", "rq", {})
    await _backdate(engine, "r", 30)
    counts = await asyncio.gather(*(_unfenced_tick(engine, _leader(engine)) for _ in range(4)))
    n = await engine.pool.fetchval("SELECT count(*) FROM pgwake.jobs WHERE queue = 'rq'")
    distinct = await engine.pool.fetchval(
        "SELECT count(DISTINCT scheduled_for) FROM pgwake.jobs WHERE queue = 'rq'"
    )
    assert n == distinct == sum(counts)


async def test_acked_boundaries_never_fire_again(engine: Engine) -> None:
    """The unique backstop (R-S7): even with the jobs acked and deleted and the
    schedule's next fire time wound back, a boundary fires at most once."""
    await engine.schedules.schedule("b", "@every 1s", "bq", {})
    start = await _backdate(engine, "b", 5)
    first = await _tick(engine)
    assert first >= 5
    await engine.pool.execute("DELETE FROM pgwake.jobs WHERE queue = 'bq'")  # acked, pruned
    await engine.pool.execute(
        "UPDATE pgwake.schedules SET next_fire_at = $1 WHERE name = 'b'", start
    )
    again = await _unfenced_tick(engine, _leader(engine))
    fires = await engine.pool.fetch(
        "SELECT f.boundary, f.job_id FROM pgwake.schedule_fires f WHERE schedule = 'b'"
    )
    assert again <= 1  # only a boundary that became due since the first tick
    assert len(fires) == first + again
    assert all(f["job_id"] is not None for f in fires)
    row = await engine.schedules.get_schedule("b")
    assert row["fired_total"] == first + again


async def test_tick_without_leadership_fires_nothing(engine: Engine) -> None:
    await engine.schedules.schedule("f", "@every 1s", "fq", {})
    await _backdate(engine, "f", 3)
    with pytest.raises(LeadershipLost):
        await _leader(engine).tick()  # never took the lock
    leader = _leader(engine)
    assert await engine.locks.try_lock(LEADER_LOCK, leader.owner, 10, allow_reserved=True)
    # The lease runs out (a stopped process): the stale leader must not tick.
    await engine.pool.execute(
        "UPDATE pgwake.locks SET expires_at = now() - interval '1 second' WHERE name = $1",
        LEADER_LOCK,
    )
    with pytest.raises(LeadershipLost):
        await leader.tick()
    assert await engine.pool.fetchval("SELECT count(*) FROM pgwake.jobs WHERE queue = 'fq'") == 0
    assert await engine.pool.fetchval("SELECT count(*) FROM pgwake.schedule_fires") == 0


async def test_leadership_is_exclusive(engine: Engine) -> None:
    assert await engine.locks.try_lock(LEADER_LOCK, "someone-else", 10, allow_reserved=True)
    with pytest.raises(LeadershipLost):
        await _leader(engine).run_schedules()
    await engine.locks.unlock(LEADER_LOCK, "someone-else", allow_reserved=True)

    leader = _leader(engine)
    stop = asyncio.Event()
    task = asyncio.create_task(leader.run_schedules(stop))  # type: ignore[arg-type]
    await asyncio.sleep(0.3)
    assert (await engine.locks.holder(LEADER_LOCK, allow_reserved=True))[0] == leader.owner  # type: ignore[index]
    # Someone steals the expired-looking lock: the leader notices before its next tick.
    await engine.pool.execute(
        "UPDATE pgwake.locks SET owner = 'thief' WHERE name = $1", LEADER_LOCK
    )
    await engine.schedules.schedule("wake", "@every 1h", "q", {})  # NOTIFY wakes it
    with pytest.raises(LeadershipLost):
        await asyncio.wait_for(task, 5)


async def test_runner_fires_every_second_on_time(engine: Engine) -> None:
    async with engine.runner(webhooks=False):
        await engine.schedules.schedule("sec", "@every 1s", "secq", {})
        await asyncio.sleep(3.2)
    rows = await engine.pool.fetch(
        "SELECT scheduled_for, created_at FROM pgwake.jobs WHERE queue = 'secq'"
        " ORDER BY scheduled_for"
    )
    assert len(rows) >= 2
    lags = [(r["created_at"] - r["scheduled_for"]).total_seconds() for r in rows]
    assert max(lags) < 0.5, lags  # generous: the leader sleeps to each boundary
    assert await engine.locks.holder(LEADER_LOCK, allow_reserved=True) is None  # released


async def _first_fire(engine: Engine, queue: str, timeout: float) -> tuple[datetime, datetime]:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        row = await engine.pool.fetchrow(
            "SELECT created_at, scheduled_for FROM pgwake.jobs WHERE queue = $1", queue
        )
        if row is not None:
            return row["created_at"], row["scheduled_for"]
        await asyncio.sleep(0.005)
    raise AssertionError(f"{queue} did not fire within {timeout}s")


async def test_registration_wakes_a_sleeping_leader(engine: Engine) -> None:
    """R-S9: the leader sleeps on a far deadline (up to its 3.3 s renew cadence); a
    schedule registered meanwhile fires at its first boundary, woken by NOTIFY.
    Three tries: a cadence wake-up landing near every boundary by luck is unlikely."""
    await engine.schedules.schedule("far", "@every 1d", "far", {})
    async with engine.runner(webhooks=False):
        for i in range(3):
            await asyncio.sleep(1.2)  # the leader is back asleep on the far deadline
            await engine.schedules.schedule(f"soon{i}", "* * * * * *", f"soon{i}", {})
            fired, boundary = await _first_fire(engine, f"soon{i}", timeout=5)
            lag = (fired - boundary).total_seconds()
            assert lag < 0.5, lag  # generous; the cadence alone would average 1.6 s
            await engine.schedules.unschedule(f"soon{i}")


async def test_deadline_fires_without_notify(clean_db: str) -> None:
    """R-S9: correctness never depends on NOTIFY. With no LISTEN connection at all,
    a new schedule still fires by the leader's renew cadence."""
    pool = await db.create_pool(clean_db, min_size=1, max_size=4)
    try:
        async with Engine(pool=pool) as engine:
            assert engine.listener is None
            async with engine.runner(webhooks=False):
                await asyncio.sleep(0.5)
                await engine.schedules.schedule("quiet", "* * * * * *", "quiet", {})
                fired, boundary = await _first_fire(engine, "quiet", timeout=10)
            assert (fired - boundary).total_seconds() < RENEW_EVERY_SECONDS + 1.0
    finally:
        await pool.close()


async def test_registering_at_every_start_fires_nothing_extra(engine: Engine) -> None:
    """Issue 3 acceptance 6: an app that registers its schedule at each of 10 starts
    gets exactly one job per elapsed boundary, no extra fire and no reset anchor."""
    for _ in range(10):
        async with engine.runner(webhooks=False):
            row, _ = await engine.schedules.schedule("boot", "@every 1s", "bootq", {})
            await asyncio.sleep(0.35)
    jobs = await engine.pool.fetch(
        "SELECT scheduled_for FROM pgwake.jobs WHERE queue = 'bootq' ORDER BY scheduled_for"
    )
    after = await engine.schedules.get_schedule("boot")
    assert after["anchor"] == row["anchor"]  # never reset by re-registration
    # Every boundary before the next fire time fired exactly once, and nothing else.
    fired = int((after["next_fire_at"] - row["anchor"]).total_seconds()) - 1
    boundaries = [j["scheduled_for"] for j in jobs]
    assert boundaries == [row["anchor"] + timedelta(seconds=k) for k in range(1, fired + 1)]
    assert fired >= 3


async def test_a_payload_that_grows_in_jsonb_still_fires(engine: Engine) -> None:
    """jsonb writes 1e300 as 301 digits: a payload accepted at registration may be
    over the limit once re-encoded. Fires enqueue the stored text verbatim
    (found by a helper: it crash-looped the leader and stopped every schedule)."""
    await engine.schedules.schedule("big", "@every 1s", "bigq", {"x": [1e300] * 4000})
    await engine.schedules.schedule("small", "@every 1s", "smallq", {})
    await _backdate(engine, "big", 2)
    await _backdate(engine, "small", 2)
    assert await _tick(engine) >= 4
    job = await engine.pool.fetchrow(
        "SELECT payload::text AS p FROM pgwake.jobs WHERE queue = 'bigq' LIMIT 1"
    )
    assert len(job["p"]) > engine.max_payload_bytes  # it did grow
    row = await engine.schedules.get_schedule("big")
    assert row["last_error"] is None and row["fired_total"] >= 2


async def test_one_broken_schedule_does_not_stop_the_others(engine: Engine) -> None:
    """A schedule whose fire fails is recorded (missed, last_error) and moved on; the
    others fire in the same tick. One whose next fire time cannot be computed any
    more is paused."""
    await engine.schedules.schedule("fine", "@every 1s", "fineq", {})
    await engine.schedules.schedule("bad", "@every 1s", "badq", {})
    await _backdate(engine, "fine", 2)
    await _backdate(engine, "bad", 2)
    # An insert into badq fails, as a user's trigger or constraint might make it.
    await engine.pool.execute("""
        CREATE FUNCTION pgwake_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'badq refuses jobs'; END $$;
        CREATE TRIGGER refuse BEFORE INSERT ON pgwake.jobs FOR EACH ROW
        WHEN (NEW.queue = 'badq') EXECUTE FUNCTION pgwake_test_refuse();
    """)
    try:
        assert await _tick(engine) >= 2
    finally:
        await engine.pool.execute(
            "DROP TRIGGER refuse ON pgwake.jobs; DROP FUNCTION pgwake_test_refuse()"
        )
    fine = await engine.pool.fetchval("SELECT count(*) FROM pgwake.jobs WHERE queue = 'fineq'")
    assert fine >= 2
    bad = await engine.schedules.get_schedule("bad")
    assert "badq refuses jobs" in bad["last_error"] and bad["missed_total"] >= 2
    assert bad["fired_total"] == 0 and not bad["paused"]
    assert bad["next_fire_at"] > bad["updated_at"] - timedelta(seconds=1)
    fires = "SELECT count(*) FROM pgwake.schedule_fires WHERE schedule = 'bad'"
    assert await engine.pool.fetchval(fires) == 0  # rolled back with its savepoint

    await engine.pool.execute(
        "UPDATE pgwake.schedules SET timezone = 'Nowhere/Zone', next_fire_at = now()"
        " WHERE name = 'bad'"
    )
    await _tick(engine)
    bad = await engine.schedules.get_schedule("bad")
    assert bad["paused"] and "Nowhere/Zone" in bad["last_error"]  # no next fire time


async def test_resume_is_a_compare_and_set_on_the_spec(engine: Engine) -> None:
    """resume computes the next fire from the spec it read; the write must not land
    if a re-registration changed the spec meanwhile (found by a helper)."""
    from service.queries import schedules as q

    row, _ = await engine.schedules.schedule("race", "@every 7m", "rq", {})
    await engine.schedules.pause("race")
    await engine.schedules.schedule("race", "0 0 * * *", "rq", {})  # the racing PUT
    stale = await engine.pool.fetchrow(
        q.RESUME, "race", row["next_fire_at"], row["spec"], row["timezone"], row["anchor"]
    )
    assert stale is None  # the old spec's instant is refused
    resumed = await engine.schedules.resume("race")
    assert resumed["spec"] == "0 0 * * *" and not resumed["paused"]
    assert (resumed["next_fire_at"].hour, resumed["next_fire_at"].minute) == (0, 0)
