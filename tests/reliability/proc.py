"""A pgwake runner process for the reliability scenarios (real processes, real kills).

    python -m tests.reliability.proc DSN MODE LOG [--queues q0,q1] [--concurrency N]

Modes:
    hold    queue ``rel``: log ``start <id> <attempt>``, then hold the job forever.
    load    each of ``--queues``: log ``run <id> <attempt>``; the attempt fails while
            ``attempt <= payload["fail_attempts"]`` (a deterministic failure plan).
    events  scheduled events: log ``event <id> <trigger_at epoch> <handler epoch>``.
    idle    the runner only (schedules, reaper).

Every line is one ``write`` to a file opened for appending, flushed at once, so a
SIGKILL loses nothing already written and never tears a line. Prints the
runner's instance token once it is up.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time

import asyncpg

from service.engine import Engine
from service.events import Event
from service.jobs import Job


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn")
    parser.add_argument("mode", choices=["hold", "load", "events", "idle"])
    parser.add_argument("log")
    parser.add_argument("--queues", default="q0,q1,q2,q3")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--listen-dsn", default=None)
    parser.add_argument("--statement-cache-size", type=int, default=None)
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    fd = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(line: str) -> None:
        os.write(fd, (line + "\n").encode())

    options = {}
    if args.statement_cache_size is not None:
        options["statement_cache_size"] = args.statement_cache_size
    async with Engine(
        args.dsn, listen_dsn=args.listen_dsn, migrate=False, poll_seconds=5, **options
    ) as engine:
        if args.mode == "hold":

            @engine.handler("rel")
            async def hold(job: Job) -> None:
                log(f"start {job.id} {job.attempts}")
                await asyncio.Event().wait()

        elif args.mode == "load":

            async def run(job: Job) -> None:
                log(f"run {job.id} {job.attempts}")
                if job.attempts <= int(job.payload.get("fail_attempts", 0)):
                    raise RuntimeError(f"planned failure {job.attempts}")

            for queue in args.queues.split(","):
                engine.handler(queue, concurrency=args.concurrency)(run)

        elif args.mode == "events":

            @engine.on_event
            async def on_event(event: Event, conn: asyncpg.Connection) -> None:
                log(f"event {event.id} {event.trigger_at.timestamp()} {time.time()}")

        async with engine.runner(webhooks=False):
            print(engine.instance_id, flush=True)
            await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
