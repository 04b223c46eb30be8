"""Trigger → webhook lag of scheduled events against a running pgwake (issue 2, item 2).

Starts a local webhook receiver, points the ``events`` outbox at it, posts N
scheduled events spread over a window (plus one in the past), and reports
whether each arrived exactly once with a valid Standard Webhooks signature and
the trigger→receive lag percentiles.

    .venv/bin/python bench/reminder_lag.py --url http://127.0.0.1:8000 --token "$TOKEN"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta

import httpx
import uvicorn
from standardwebhooks.webhooks import Webhook
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--token", required=True)
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--window", type=float, default=10.0, help="seconds")
    parser.add_argument("--secret", default="s3cret")
    parser.add_argument("--receiver-port", type=int, default=0)
    args = parser.parse_args()

    received: list[tuple[float, dict[str, str], bytes]] = []

    async def hook(request: Request) -> Response:
        body = await request.body()
        received.append((time.time(), dict(request.headers), body))
        return Response(status_code=204)

    app = Starlette(routes=[Route("/hook", hook, methods=["POST"])])
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=args.receiver_port, log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    auth = {"authorization": f"Bearer {args.token}"}
    run = f"lag-{int(time.time())}"
    async with httpx.AsyncClient(base_url=args.url, headers=auth, timeout=10) as client:
        r = await client.put(
            "/admin/outboxes/events",
            json={"webhook_url": f"http://127.0.0.1:{port}/hook", "secret": args.secret},
        )
        r.raise_for_status()
        await asyncio.sleep(0.5)  # the runner reconciles relays on NOTIFY
        start = datetime.now(UTC) + timedelta(seconds=1)
        triggers = {f"{run}-past": datetime.now(UTC) - timedelta(minutes=5)}
        for i in range(args.count):
            triggers[f"{run}-{i}"] = start + timedelta(seconds=args.window * i / args.count)
        ids: dict[int, str] = {}
        for key, at in triggers.items():
            r = await client.post(
                "/admin/scheduled-events",
                json={
                    "event_type": "reminder",
                    "subject_id": key,
                    "trigger_at": at.isoformat(),
                    "facts": {"facts_version": 1, "scenario": "lag-check"},
                    "external_key": key,
                },
            )
            r.raise_for_status()
            ids[r.json()["id"]] = key
        deadline = time.time() + args.window + 15
        while time.time() < deadline:
            mine = [d for d in received if json.loads(d[2]).get("id") in ids]
            if len(mine) >= len(ids):
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # let any duplicate arrive
    server.should_exit = True
    await task

    verifier = Webhook(args.secret.encode())
    per_event: dict[int, int] = {}
    lags: list[float] = []
    bad_sigs = 0
    for at, headers, body in received:
        msg = json.loads(body)
        if msg.get("id") not in ids:
            continue
        per_event[msg["id"]] = per_event.get(msg["id"], 0) + 1
        try:
            verifier.verify(body, headers)
        except Exception:
            bad_sigs += 1
        if not ids[msg["id"]].endswith("-past"):
            trigger = triggers[ids[msg["id"]]].timestamp()
            lags.append((at - trigger) * 1000)
    missing = [k for i, k in ids.items() if i not in per_event]
    dupes = {ids[i]: n for i, n in per_event.items() if n > 1}
    print(
        f"events posted: {len(ids)}  received: {len(per_event)}  missing: {missing}  "
        f"duplicates: {dupes}  bad signatures: {bad_sigs}"
    )
    if lags:
        print(
            f"trigger->receive lag ms (n={len(lags)}): p50 {statistics.median(lags):.1f}  "
            f"p99 {percentile(lags, 0.99):.1f}  max {max(lags):.1f}  min {min(lags):.1f}"
        )
    ok = not missing and not dupes and not bad_sigs
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
