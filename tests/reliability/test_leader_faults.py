"""The schedule leader under faults (issue 5, scenarios 4 and 5): split brain after
SIGSTOP, also with two runners sharing host name and PID; a catch-up storm."""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest

from service.engine import Engine
from service.leader import LEADER_LOCK, LEASE_TTL_SECONDS, RENEW_EVERY_SECONDS
from tests.reliability.support import SAME_HOST, Proc, processes, size, spawn


async def _leader_of(engine: Engine, procs: list[Proc]) -> Proc:
    for _ in range(300):
        held = await engine.locks.holder(LEADER_LOCK, allow_reserved=True)
        if held is not None:
            return next(p for p in procs if p.owner == held[0])
        await asyncio.sleep(0.1)
    raise AssertionError("no leader within 30 s")


async def _boundaries(engine: Engine, queue: str) -> list:  # type: ignore[type-arg]
    return await engine.pool.fetch(
        "SELECT scheduled_for, created_at FROM pgwake.jobs WHERE queue = $1 ORDER BY scheduled_for",
        queue,
    )


@pytest.mark.parametrize("hosts", ["distinct", "same-host-and-pid"])
async def test_split_brain_after_sigstop_fires_each_boundary_once(
    engine: Engine, tmp_path: Path, hosts: str
) -> None:
    """Scenario 4: the leader is stopped across boundaries for longer than its lease,
    the standby takes over; on resume the old leader raises LeadershipLost before it
    ticks and fires nothing. With ``same-host-and-pid`` both runners are PID 1 of
    their own namespace with host name ``web-1``: owner tokens still differ."""
    prefix = SAME_HOST if hosts == "same-host-and-pid" else ()
    stop_for = LEASE_TTL_SECONDS + RENEW_EVERY_SECONDS + 1
    async with processes() as procs:
        for i in range(2):
            procs.append(await spawn(engine.dsn, "idle", tmp_path, f"r{i}", prefix=prefix))  # type: ignore[arg-type]
        if prefix:
            assert [p.owner.split(":")[1:3] for p in procs] == [["web-1", "1"]] * 2
            assert procs[0].owner != procs[1].owner
        await engine.schedules.schedule("sb", "@every 1s", "sbq", {})
        await asyncio.sleep(3)
        stopped = await _leader_of(engine, procs)
        stopped.kill(signal.SIGSTOP)
        await asyncio.sleep(stop_for)
        resumed_at = await engine.pool.fetchval("SELECT now()")
        stopped.kill(signal.SIGCONT)
        await asyncio.sleep(4)
        await engine.schedules.pause("sb")
        await asyncio.sleep(0.5)
        other = next(p for p in procs if p is not stopped)
        assert (await _leader_of(engine, procs)) is other
    jobs = await _boundaries(engine, "sbq")
    fires = await engine.pool.fetch(
        "SELECT boundary, fired_by, fired_at FROM pgwake.schedule_fires WHERE schedule = 'sb'"
    )
    stamps = [j["scheduled_for"] for j in jobs]
    assert len(stamps) == len(set(stamps)) == len(fires) >= stop_for + 5
    assert all(b - a == timedelta(seconds=1) for a, b in itertools.pairwise(stamps))
    assert not [f for f in fires if f["fired_by"] == stopped.owner and f["fired_at"] >= resumed_at]
    assert {f["fired_by"] for f in fires} == {stopped.owner, other.owner}
    assert "lost leadership" in stopped.stderr.read_text()


@pytest.mark.timeout(size(300, 900))
async def test_catch_up_storm_is_bounded(engine: Engine, tmp_path: Path) -> None:
    """Scenario 5: ``@every 1s`` while the only runner is suspended (SIGSTOP) for 10
    minutes (short run: 20 s with catch_up=5): on resume at most ``catch_up``
    boundaries fire, oldest first, the rest are skipped and counted, and the
    cadence goes on from the next future boundary, with no second burst."""
    suspend = size(20, 600)
    catch_up = int(size(5, 64))
    await engine.schedules.schedule("storm", "@every 1s", "stormq", {}, catch_up=catch_up)
    async with processes() as procs:
        runner = await spawn(engine.dsn, "idle", tmp_path, "storm")  # type: ignore[arg-type]
        procs.append(runner)
        await asyncio.sleep(3)
        before = len(await _boundaries(engine, "stormq"))
        runner.kill(signal.SIGSTOP)
        stopped_at = time.time()
        await asyncio.sleep(suspend)
        runner.kill(signal.SIGCONT)
        resumed_at = time.time()
        await asyncio.sleep(RENEW_EVERY_SECONDS + LEASE_TTL_SECONDS / 2)
        await engine.schedules.pause("storm")
        await asyncio.sleep(0.5)
    jobs = await _boundaries(engine, "stormq")
    row = await engine.schedules.get_schedule("storm")
    gap = [
        j for j in jobs if stopped_at < j["scheduled_for"].timestamp() < resumed_at - 1
    ]  # boundaries that fell inside the suspension
    # The burst: fired together right after the resume.
    burst = [j for j in jobs if j["created_at"].timestamp() > resumed_at - 0.5
             and j["scheduled_for"].timestamp() < resumed_at - 1]  # fmt: skip
    assert len(burst) <= catch_up
    assert len(gap) <= catch_up + 2  # the last boundaries before the stop may straddle it
    assert row["skipped_total"] >= suspend - catch_up - 3
    stamps = [j["scheduled_for"] for j in jobs]
    assert len(stamps) == len(set(stamps))
    # After the burst, one job per second again, on time.
    after = [j for j in jobs if j["scheduled_for"].timestamp() > resumed_at + 1]
    assert after and all(
        (j["created_at"] - j["scheduled_for"]).total_seconds() < 1.0 for j in after
    )
    print(
        f"\n[storm] suspended {suspend:.0f}s: {before} before, burst {len(burst)} "
        f"(catch_up {catch_up}), skipped {row['skipped_total']}, {len(after)} on time after"
    )
