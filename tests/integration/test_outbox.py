"""Outbox and signed webhook delivery against a real HTTP receiver (R-O1–R-O4)."""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime

import pytest
from standardwebhooks.webhooks import Webhook

from service.engine import Engine
from service.errors import InvalidName, ReservedName
from service.jobs import Job
from tests.support import Receiver, serve


def test_outbox_names_are_checked() -> None:
    engine = Engine("postgresql://unused")
    with pytest.raises(InvalidName):
        engine.outbox("")
    with pytest.raises(ReservedName):
        engine.outbox("__x")


async def test_backing_queue_is_reserved(engine: Engine) -> None:
    with pytest.raises(ReservedName):
        await engine.enqueue("__outbox:mail", {})
    msg = await engine.outbox("mail").enqueue({"a": 1})
    job = await engine.get_job(msg)
    assert job and job.queue == "__outbox:mail"
    assert (job.lease_seconds, job.max_attempts, job.backoff_base_seconds) == (60, 5, 5)


async def test_enqueue_tx_commits_with_business_write(engine: Engine) -> None:
    outbox = engine.outbox("orders")
    async with engine.pool.acquire() as conn:
        await conn.execute("CREATE TEMP TABLE orders (id int)")
        tr = conn.transaction()
        await tr.start()
        await conn.execute("INSERT INTO orders VALUES (1)")
        gone = await outbox.enqueue_tx(conn, {"order": 1})
        await tr.rollback()
        async with conn.transaction():
            await conn.execute("INSERT INTO orders VALUES (2)")
            kept = await outbox.enqueue_tx(conn, {"order": 2})
    assert await engine.get_job(gone) is None
    assert await engine.get_job(kept) is not None


async def test_run_once_ack_retry_dead(engine: Engine) -> None:
    outbox = engine.outbox("relay")
    assert await outbox.run_once("w", _ok) is False
    ok_id = await outbox.enqueue({"n": 1})
    assert await outbox.run_once("w", _ok) is True
    assert await engine.get_job(ok_id) is None

    bad_id = await outbox.enqueue({"n": 2}, max_attempts=2)
    assert await outbox.run_once("w", _fail) is True
    job = await engine.get_job(bad_id)
    assert job and job.status == "pending" and job.last_error == "RuntimeError: receiver down"
    await engine.pool.execute("UPDATE pgwake.jobs SET run_at = now() WHERE id = $1", bad_id)
    assert await outbox.run_once("w", _fail) is True
    job = await engine.get_job(bad_id)
    assert job and job.status == "dead" and "receiver down" in (job.last_error or "")
    assert [m.id for m in await outbox.dead()] == [bad_id]
    await outbox.requeue(bad_id)
    assert (await outbox.stats())["pending"] == 1


async def test_delivery_can_heartbeat(engine: Engine) -> None:
    outbox = engine.outbox("hb")
    await outbox.enqueue({})
    seen: list[datetime | None] = []

    async def slow(message: Job) -> None:
        assert await message.heartbeat(extend=120)
        seen.append((await engine.get_job(message.id)).lease_expires_at)  # type: ignore[union-attr]

    assert await outbox.run_once("w", slow)
    assert seen[0] is not None and (seen[0] - datetime.now(UTC)).total_seconds() > 100


async def _ok(_m: Job) -> None:
    return None


async def _fail(_m: Job) -> None:
    raise RuntimeError("receiver down")


async def _wait_status(
    engine: Engine, job_id: int, status: str | None, timeout: float = 10
) -> None:
    async def until() -> None:
        while True:
            job = await engine.get_job(job_id)
            if (job.status if job else None) == status:
                return
            await asyncio.sleep(0.02)

    await asyncio.wait_for(until(), timeout)


@pytest.mark.parametrize("secret", ["whsec_" + base64.b64encode(b"k" * 24).decode(), "s3cret"])
async def test_webhook_signed_per_standard_webhooks(engine: Engine, secret: str) -> None:
    receiver = Receiver()
    async with serve(receiver.app()) as base, engine.runner():
        outbox = engine.outbox("hooks")
        await outbox.configure_webhook(f"{base}/hook", secret=secret)
        msg = await outbox.enqueue({"hello": "wörld"})
        await receiver.wait_for(1)
        await _wait_status(engine, msg, None)
    d = receiver.deliveries[0]
    assert d.headers["webhook-id"] == str(msg)
    assert d.json() == {"hello": "wörld"}
    key = secret if secret.startswith("whsec_") else secret.encode()
    # The reference package verifies the signature over the exact bytes received.
    Webhook(key).verify(d.body, d.headers)


async def test_webhook_retries_non_2xx_then_410_is_dead(engine: Engine) -> None:
    receiver = Receiver(statuses=[500, 204])
    async with serve(receiver.app()) as base, engine.runner():
        await engine.queues.configure(
            "__outbox:flaky",
            backoff_base_seconds=0.05,
            backoff_cap_seconds=0.1,
            allow_reserved=True,
        )
        outbox = engine.outbox("flaky")
        await outbox.configure_webhook(f"{base}/hook")
        msg = await outbox.enqueue({"n": 1})
        await receiver.wait_for(2)
        await _wait_status(engine, msg, None)
        ids = {d.headers["webhook-id"] for d in receiver.deliveries}
        assert ids == {str(msg)}  # stable across retries

        receiver.statuses = [410]
        gone = await outbox.enqueue({"n": 2})
        await receiver.wait_for(3)
        await _wait_status(engine, gone, "dead")
    job = await engine.get_job(gone)
    assert job and job.attempts == 1 and "410" in (job.last_error or "")


async def test_webhook_timeout_retries(engine: Engine) -> None:
    receiver = Receiver(delay=1.0)
    async with serve(receiver.app()) as base, engine.runner():
        outbox = engine.outbox("slow")
        await outbox.configure_webhook(f"{base}/hook", timeout=0.2)
        msg = await outbox.enqueue({})
        await receiver.wait_for(1)
        await _wait_status(engine, msg, "pending")
    job = await engine.get_job(msg)
    assert job and "Timeout" in (job.last_error or "")
