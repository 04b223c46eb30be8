"""The README's library example, runnable: ``.venv/bin/python docs/library_example.py``.

Uses DATABASE_URL (e.g. the one ``make run`` prints for its embedded PostgreSQL).
"""

from __future__ import annotations

import asyncio
import os

from service.engine import Engine
from service.jobs import Job


async def main() -> None:
    async with Engine(os.environ["DATABASE_URL"]) as engine:
        await engine.pool.execute("CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY)")
        done = asyncio.Event()

        @engine.handler("emails", concurrency=4)
        async def send(job: Job) -> None:  # ack on return, retry with backoff on exception
            print("sending", job.payload)
            done.set()

        # A job in your own transaction: it exists only if the transaction commits.
        async with engine.pool.acquire() as conn, conn.transaction():
            await conn.execute("INSERT INTO orders VALUES (1) ON CONFLICT DO NOTHING")
            await engine.enqueue_tx(conn, "emails", {"order": 1})

        async with engine.runner():  # dispatcher, workers, relays, lease reaper, pruner
            await asyncio.wait_for(done.wait(), 10)


if __name__ == "__main__":
    asyncio.run(main())
