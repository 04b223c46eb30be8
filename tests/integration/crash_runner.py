"""A runner process for the crash test: dispatches scheduled events with a slow
handler that appends each event id to a file (an external side effect)."""

from __future__ import annotations

import asyncio
import os
import sys

import asyncpg

from service.engine import Engine
from service.events import Event


async def main(dsn: str, log_path: str) -> None:
    log = open(log_path, "a", buffering=1)  # lives as long as the process
    async with Engine(dsn, migrate=False, poll_seconds=2) as engine:

        @engine.on_event
        async def handler(event: Event, conn: asyncpg.Connection) -> None:
            await asyncio.sleep(0.01)
            log.write(f"{event.id}\n")
            os.fsync(log.fileno())

        async with engine.runner(webhooks=False):
            print("ready", flush=True)
            await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
