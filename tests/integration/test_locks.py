"""TTL locks over a table (R-L1)."""

from __future__ import annotations

import asyncio

import pytest

from service.engine import Engine
from service.errors import InvalidName, PgwakeError, ReservedName
from service.identity import instance_id


async def test_one_owner_at_a_time_until_the_ttl(engine: Engine) -> None:
    locks = engine.locks
    assert await locks.try_lock("jobs.cleanup", "a", 0.3)
    assert await locks.try_lock("jobs.cleanup", "b", 10) is None
    assert (await locks.holder("jobs.cleanup"))[0] == "a"  # type: ignore[index]
    assert await locks.try_lock("jobs.cleanup", "a", 0.3)  # re-taking one's own
    await asyncio.sleep(0.4)
    assert await locks.holder("jobs.cleanup") is None  # past its TTL the lock is free
    assert await locks.renew("jobs.cleanup", "a", 10) is None  # too late to renew
    assert await locks.try_lock("jobs.cleanup", "b", 10)
    assert await locks.unlock("jobs.cleanup", "a") is False
    assert await locks.renew("jobs.cleanup", "b", 10)
    assert await locks.unlock("jobs.cleanup", "b") is True
    assert await locks.holder("jobs.cleanup") is None


async def test_concurrent_takers_get_exactly_one_winner(engine: Engine) -> None:
    owners = [instance_id() for _ in range(20)]
    results = await asyncio.gather(*(engine.locks.try_lock("race", o, 10) for o in owners))
    winners = [o for o, r in zip(owners, results, strict=True) if r is not None]
    assert len(winners) == 1
    assert (await engine.locks.holder("race"))[0] == winners[0]  # type: ignore[index]


def test_owner_tokens_are_unique_per_instance() -> None:
    assert len({instance_id() for _ in range(100)}) == 100


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("", "o", 1), InvalidName),
        (("__scheduler", "o", 1), ReservedName),
        (("x", "", 1), PgwakeError),
        (("x", None, 1), PgwakeError),
        (("x", "o", 0), PgwakeError),
        (("x", "o", float("nan")), PgwakeError),
        (("x", "o", "5"), PgwakeError),
    ],
)
async def test_bad_lock_arguments(engine: Engine, args: tuple, error: type) -> None:
    with pytest.raises(error):
        await engine.locks.try_lock(*args)
    assert await engine.pool.fetchval("SELECT count(*) FROM pgwake.locks") == 0


async def test_engine_may_use_reserved_names(engine: Engine) -> None:
    assert await engine.locks.try_lock("__scheduler", "me", 10, allow_reserved=True)
