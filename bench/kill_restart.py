"""SIGKILL (or SIGTERM) the service mid-dispatch, restart it, and count what
reached the webhook (issue 2, acceptance 6). Starts its own ``pgwake serve``.

    .venv/bin/python bench/kill_restart.py --events 500

Uses ``DATABASE_URL`` if set, else an embedded PostgreSQL in a temp folder.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

BIN = os.path.join(os.path.dirname(sys.executable), "pgwake")


def start_service(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [BIN, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


async def wait_ready(url: str) -> None:
    async with httpx.AsyncClient() as client:
        for _ in range(600):
            try:
                if (await client.get(f"{url}/readyz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.05)
    raise RuntimeError("service did not become ready")


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--lead", type=float, default=5.0, help="seconds to the first trigger")
    parser.add_argument("--spread", type=float, default=4.0, help="seconds of trigger times")
    parser.add_argument(
        "--kill-at",
        type=float,
        default=2.0,
        help="SIGKILL this many seconds after the first trigger",
    )
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--signal",
        default="KILL",
        choices=["KILL", "TERM", "INT"],
        help="KILL (crash) or TERM/INT (graceful stop)",
    )
    args = parser.parse_args()

    counts: collections.Counter[int] = collections.Counter()

    async def hook(request: Request) -> Response:
        counts[json.loads(await request.body())["id"]] += 1
        return Response(status_code=204)

    receiver = uvicorn.Server(
        uvicorn.Config(
            Starlette(routes=[Route("/hook", hook, methods=["POST"])]),
            host="127.0.0.1",
            port=0,
            log_level="warning",
        )
    )
    rtask = asyncio.create_task(receiver.serve())
    while not receiver.started:
        await asyncio.sleep(0.01)
    hook_port = receiver.servers[0].sockets[0].getsockname()[1]

    env = {**os.environ, "PGWAKE_PORT": str(args.port), "SCHEDULER_POLL_SECONDS": "5"}
    if "DATABASE_URL" not in env:
        env["PGWAKE_DATA_DIR"] = tempfile.mkdtemp(prefix="pgwake-kill-")
    url = f"http://127.0.0.1:{args.port}"
    proc = start_service(env)
    await wait_ready(url)
    token = (
        subprocess.run(
            [
                BIN,
                "token",
                "create",
                "--name",
                f"kill-{time.time_ns()}",
                "--permissions",
                "ingest,read,admin",
            ],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    auth = {"authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=auth, timeout=10) as client:
        (
            await client.put(
                "/admin/outboxes/events", json={"webhook_url": f"http://127.0.0.1:{hook_port}/hook"}
            )
        ).raise_for_status()
        start = datetime.now(UTC) + timedelta(seconds=args.lead)
        ids = []
        for i in range(args.events):
            at = start + timedelta(seconds=args.spread * i / args.events)
            r = await client.post(
                "/admin/scheduled-events",
                json={
                    "event_type": "kill-test",
                    "trigger_at": at.isoformat(),
                    "facts": {"facts_version": 1, "scenario": "kill"},
                },
            )
            r.raise_for_status()
            ids.append(r.json()["id"])
        await asyncio.sleep((start - datetime.now(UTC)).total_seconds() + args.kill_at)
        received_before_kill = sum(1 for i in ids if counts[i])
        os.kill(proc.pid, getattr(signal, f"SIG{args.signal}"))
        await asyncio.to_thread(proc.wait)  # the receiver shares this event loop
        killed_at = time.monotonic()
        proc = start_service(env)
        await wait_ready(url)
        restarted_in = time.monotonic() - killed_at
        deadline = time.monotonic() + 120  # in-flight messages return after their lease
        while time.monotonic() < deadline and not all(counts[i] for i in ids):
            await asyncio.sleep(0.2)
        all_in = time.monotonic() - killed_at
        await asyncio.sleep(1.0)
        statuses = collections.Counter()
        for i in ids:
            statuses[(await client.get(f"/admin/scheduled-events/{i}")).json()["status"]] += 1
    proc.send_signal(signal.SIGINT)
    await asyncio.to_thread(proc.wait, 30)
    receiver.should_exit = True
    await rtask

    lost = [i for i in ids if not counts[i]]
    dupes = {i: n for i, n in counts.items() if n > 1 and i in ids}
    print(
        f"events {len(ids)}; delivered before SIG{args.signal} {received_before_kill}; "
        f"restart ready in {restarted_in:.1f}s; all delivered {all_in:.1f}s after the kill"
    )
    print(
        f"statuses {dict(statuses)}; lost {len(lost)}; duplicated {len(dupes)} "
        f"(extra deliveries {sum(n - 1 for n in dupes.values())})"
    )
    return 0 if not lost and statuses == {"dispatched": len(ids)} else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
