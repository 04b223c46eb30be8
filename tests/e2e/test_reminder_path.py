"""The main job end to end: HTTP ingest → scheduled event → dispatcher → events
outbox → signed webhook at a real receiver (issue 2, acceptance 2)."""

from __future__ import annotations

import asyncio
import statistics
from datetime import UTC, datetime, timedelta

from standardwebhooks.webhooks import Webhook

from tests.e2e.conftest import Service
from tests.support import Receiver, serve


async def test_reminders_reach_the_webhook_once_signed_and_on_time(service: Service) -> None:
    receiver = Receiver()
    async with serve(receiver.app()) as hook_base:
        resp = await service.client.put(
            "/admin/outboxes/events",
            json={"webhook_url": f"{hook_base}/hook", "secret": "s3cret"},
            headers=service.auth(),
        )
        assert resp.status_code == 200
        start = datetime.now(UTC) + timedelta(seconds=0.5)
        triggers = [datetime.now(UTC) - timedelta(minutes=1)] + [
            start + timedelta(seconds=0.2 * i) for i in range(10)
        ]
        posted: dict[int, datetime] = {}
        for n, at in enumerate(triggers):
            resp = await service.client.post(
                "/admin/scheduled-events",
                json={
                    "event_type": "reminder",
                    "subject_id": f"user-{n}",
                    "tenant_id": "t1",
                    "trigger_at": at.isoformat(),
                    "facts": {"facts_version": 1, "scenario": "dentist"},
                },
                headers=service.auth("ingest"),
            )
            assert resp.status_code == 201
            posted[resp.json()["id"]] = at
        await receiver.wait_for(len(posted), timeout=15)
        await asyncio.sleep(0.5)  # a duplicate would arrive now

    assert len(receiver.deliveries) == len(posted)
    verifier = Webhook(b"s3cret")
    lags = []
    for d in receiver.deliveries:
        verifier.verify(d.body, d.headers)
        msg = d.json()
        assert set(msg) == {
            "id",
            "event_type",
            "subject_id",
            "tenant_id",
            "facts",
            "trigger_at",
            "dispatched_at",
        }
        assert msg["tenant_id"] == "t1" and msg["facts"]["scenario"] == "dentist"
        at = posted.pop(msg["id"])
        assert datetime.fromisoformat(msg["dispatched_at"]) >= at
        if at > start - timedelta(seconds=1):
            lags.append(d.received_at - at.timestamp())
    assert not posted
    for event_id in range(1, 12):
        row = (
            await service.client.get(
                f"/admin/scheduled-events/{event_id}", headers=service.auth("read")
            )
        ).json()
        assert row["status"] == "dispatched" and row["dispatched_at"] and not row["last_error"]
    # Issue 4 acceptance 5: /metrics scraped after the scenario shows what happened.
    text = (await service.client.get("/metrics", headers=service.auth("read"))).text
    samples = dict(
        line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#")
    )
    assert float(samples['pgwake_scheduled_events_total{outcome="dispatched"}']) == 11
    assert float(samples["pgwake_event_dispatch_lag_seconds_count"]) == 11
    assert float(samples['pgwake_jobs_enqueued_total{queue="__outbox:events"}']) == 11
    assert float(samples['pgwake_jobs_acked_total{queue="__outbox:events"}']) == 11
    assert 'pgwake_queue_jobs{queue="__outbox:events"' not in text  # nothing left live
    assert float(samples['pgwake_loop_up{loop="dispatcher"}']) == 1
    # Generous bound for a shared machine; bench/reminder_lag.py reports the real numbers.
    assert max(lags) < 2.0, lags
    print(f"\nreminder lag ms: p50 {statistics.median(lags) * 1000:.1f} max {max(lags) * 1000:.1f}")
