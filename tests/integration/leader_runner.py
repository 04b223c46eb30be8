"""A runner process for the band test: schedules only, logging to stderr.

Prints its instance token (the leader lock's owner) once the runner is up.
"""

from __future__ import annotations

import asyncio
import logging
import sys

from service.engine import Engine


async def main(dsn: str) -> None:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    async with Engine(dsn, migrate=False, poll_seconds=30) as engine:
        async with engine.runner(webhooks=False):
            print(engine.instance_id, flush=True)
            await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
