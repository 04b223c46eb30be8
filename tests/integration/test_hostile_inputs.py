"""Findings of a hostile run, pinned: library calls with bad arguments raise typed
errors (R-N3) and leave nothing behind; a bad webhook target breaks only its
own outbox; slow receivers are not sent the same message twice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from service.engine import Engine
from service.errors import PgwakeError
from service.events import ENVELOPE_BYTES
from service.jobs import NewJob
from tests.support import Receiver, serve

FACTS = {"facts_version": 1, "scenario": "s"}

BAD_CALLS = [
    ("cancel text id", lambda e: e.queues.cancel("abc")),
    ("cancel huge id", lambda e: e.cancel(2**64)),
    ("events.get text id", lambda e: e.events.get("x")),
    ("events.retry huge id", lambda e: e.events.retry(2**64)),
    ("events.list text limit", lambda e: e.events.list(limit="5")),
    ("events.list bad before", lambda e: e.events.list(before="x")),
    ("events.list negative limit", lambda e: e.events.list(limit=-1)),
    ("outbox.requeue text id", lambda e: e.outbox("o").requeue("x")),
    ("outbox.dead bad before", lambda e: e.outbox("o").dead(before="x")),
    ("claim int worker", lambda e: e.claim("q", 123)),
    ("claim None worker", lambda e: e.claim("q", None)),
    ("claim surrogate worker", lambda e: e.claim("q", "\ud800")),
    ("claim NUL worker", lambda e: e.claim("q", "a\x00")),
    ("webhook int secret", lambda e: e.outbox("o").configure_webhook("http://h/", secret=5)),
    ("webhook NUL url", lambda e: e.outbox("o").configure_webhook("http://127.0.0.1/\x00")),
    ("webhook NUL secret", lambda e: e.outbox("o").configure_webhook("http://h/", secret="a\x00")),
    ("webhook bad whsec", lambda e: e.outbox("o").configure_webhook("http://h/", secret="whsec_a")),
    (
        "webhook empty whsec",
        lambda e: e.outbox("o").configure_webhook("http://h/", secret="whsec_"),
    ),
    ("webhook text timeout", lambda e: e.outbox("o").configure_webhook("http://h/", timeout="5")),
    ("webhook bracket url", lambda e: e.outbox("o").configure_webhook("http://[::1")),
    ("surrogate dedupe key", lambda e: e.enqueue("q", {}, dedupe_key="\ud800")),
    ("huge int payload", lambda e: e.enqueue("q", {"a": 10**5000})),
    ("enqueue_many not iterable", lambda e: e.enqueue_many("q", 5)),
    ("enqueue_many a dict", lambda e: e.enqueue_many("q", {"a": 1})),
    ("outbox bad payload", lambda e: e.outbox("fresh").enqueue({"a": "\x00"})),
    (
        "facts over the limit less the envelope",
        lambda e: e.events.store(
            "x", datetime.now(UTC), {**FACTS, "pad": "x" * (1024 * 1024 - ENVELOPE_BYTES)}
        ),
    ),
]


@pytest.mark.parametrize("call", [c[1] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
async def test_bad_library_arguments_raise_typed_errors(engine: Engine, call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PgwakeError):
        await call(engine)
    counts = await engine.pool.fetchrow(
        "SELECT (SELECT count(*) FROM pgwake.jobs) AS jobs,"
        " (SELECT count(*) FROM pgwake.queues) AS queues,"
        " (SELECT count(*) FROM pgwake.outboxes) AS outboxes,"
        " (SELECT count(*) FROM pgwake.scheduled_events) AS events"
    )
    assert dict(counts) == {"jobs": 0, "queues": 0, "outboxes": 0, "events": 0}


async def test_get_job_with_impossible_id_is_none(engine: Engine) -> None:
    assert await engine.get_job(2**70) is None
    assert await engine.get_job(0) is None


async def test_largest_accepted_facts_can_be_dispatched_to_the_outbox(engine: Engine) -> None:
    from service.standalone import install_default_handler

    install_default_handler(engine)
    pad = "x" * (1024 * 1024 - ENVELOPE_BYTES - 100)
    row, _ = await engine.events.store(
        "x" * 256,
        datetime.now(UTC),
        {**FACTS, "pad": pad},
        subject_id="s" * 256,
        tenant_id="t" * 256,
    )
    await engine.events.dispatch_once()
    row = await engine.events.get(row["id"])
    assert row["status"] == "dispatched", row["last_error"]


async def test_a_bad_webhook_secret_breaks_only_its_own_outbox(engine: Engine) -> None:
    receiver = Receiver()
    async with serve(receiver.app()) as base:
        # Bypass validation, as a row written by an older version or by hand would.
        await engine.pool.execute(
            "INSERT INTO pgwake.outboxes (name, webhook_url, webhook_secret)"
            " VALUES ('broken', $1, 'whsec_a')",
            f"{base}/hook",
        )
        good = engine.outbox("good")
        await good.configure_webhook(f"{base}/hook")
        async with engine.runner():
            msg = await good.enqueue({"n": 1})
            await receiver.wait_for(1, timeout=10)
            await asyncio.sleep(0.3)
            assert engine.health.loops["outbox:broken"].restarts >= 1
            assert engine.health.loops["webhooks"].restarts == 0
    assert [d.headers["webhook-id"] for d in receiver.deliveries] == [str(msg)]


@pytest.fixture
async def slow_receiver() -> AsyncIterator[tuple[str, list[float]]]:
    hits: list[float] = []

    async def slow(request: Request) -> Response:
        hits.append(asyncio.get_running_loop().time())
        await asyncio.sleep(1.5)
        return Response(status_code=204)

    async def trickle(request: Request) -> Response:
        hits.append(asyncio.get_running_loop().time())

        async def body() -> AsyncIterator[bytes]:
            for _ in range(20):
                yield b"."
                await asyncio.sleep(0.3)

        return StreamingResponse(body(), status_code=200)

    app = Starlette(
        routes=[
            Route("/slow", slow, methods=["POST"]),
            Route("/trickle", trickle, methods=["POST"]),
        ]
    )
    async with serve(app) as base:
        yield base, hits


async def test_lease_outlives_a_slow_receiver(engine: Engine, slow_receiver) -> None:  # type: ignore[no-untyped-def]
    base, hits = slow_receiver
    await engine.queues.configure("__outbox:slowpoke", lease_seconds=0.5, allow_reserved=True)
    outbox = engine.outbox("slowpoke")
    await outbox.configure_webhook(f"{base}/slow", timeout=3)
    async with engine.runner():
        msg = await outbox.enqueue({})
        await asyncio.sleep(1.0)  # mid-request, past the 0.5 s lease
        assert await engine.queues.reap_expired() == 0  # any replica's reaper
        for _ in range(400):
            if await engine.get_job(msg) is None:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)
    assert len(hits) == 1  # the lease was extended past the 1.5 s answer
    assert await engine.get_job(msg) is None


async def test_trickling_receiver_times_out_as_a_whole(engine: Engine, slow_receiver) -> None:  # type: ignore[no-untyped-def]
    base, hits = slow_receiver
    outbox = engine.outbox("trickle")
    await outbox.configure_webhook(f"{base}/trickle", timeout=1)
    async with engine.runner():
        msg = await outbox.enqueue({})
        for _ in range(400):
            job = await engine.get_job(msg)
            if job and job.status == "pending" and job.last_error:
                break
            await asyncio.sleep(0.01)
    job = await engine.get_job(msg)
    assert job and job.status == "pending" and "Timeout" in (job.last_error or "")
    assert len(hits) == 1


async def test_batch_of_new_jobs_validates_every_item(engine: Engine) -> None:
    with pytest.raises(PgwakeError):
        await engine.enqueue_many("q", [NewJob({}), NewJob({}, priority=2**40)])
    assert await engine.pool.fetchval("SELECT count(*) FROM pgwake.jobs") == 0
