"""Every hot query uses its partial index and never scans finished rows (R-Q10).

The table is filled with many finished, dead and far-future rows and a few
due ones; each statement's EXPLAIN must name its index and contain no
sequential scan of the hot tables.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from service.queries import admin as aq
from service.queries import events as eq
from service.queries import jobs as jq
from service.queries import schedules as sq
from service.queries import tokens as tq


@pytest.fixture
async def filled(clean_db: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(clean_db)
    await conn.execute(
        "TRUNCATE pgwake.jobs, pgwake.scheduled_events, pgwake.queues, pgwake.schedules CASCADE"
    )
    await conn.execute("""
        INSERT INTO pgwake.jobs (queue, status, payload, max_attempts, lease_seconds,
                                 backoff_base_seconds, backoff_cap_seconds, run_at,
                                 finished_at, dedupe_key)
        SELECT 'q' || (g % 4), s.status, '{}', 5, 60, 5, 3600,
               CASE WHEN s.status = 'pending' THEN now() + interval '30 days' ELSE now() END,
               CASE WHEN s.status IN ('done', 'dead') THEN now() END, NULL
        FROM generate_series(1, 20000) g
        CROSS JOIN LATERAL (SELECT CASE WHEN g % 50 = 0 THEN 'dead'
                                        WHEN g % 50 < 10 THEN 'pending'
                                        ELSE 'done' END AS status) s;
        INSERT INTO pgwake.jobs (queue, payload, max_attempts, lease_seconds,
                                 backoff_base_seconds, backoff_cap_seconds, dedupe_key)
        SELECT 'q1', '{}', 5, 60, 5, 3600, 'k' || g FROM generate_series(1, 20) g;
        INSERT INTO pgwake.scheduled_events (event_type, trigger_at, facts, status, updated_at)
        SELECT 'e', now() - interval '3 days', '{}', 'dispatched', now() - interval '2 days'
        FROM generate_series(1, 20000);
        INSERT INTO pgwake.scheduled_events (event_type, trigger_at, facts, status, updated_at)
        SELECT 'e', now() - interval '1 hour', '{}', 'failed', now() - interval '1 hour'
        FROM generate_series(1, 5);
        INSERT INTO pgwake.scheduled_events (event_type, trigger_at, facts)
        SELECT 'e', now() + interval '30 days', '{}' FROM generate_series(1, 20000);
        INSERT INTO pgwake.scheduled_events (event_type, trigger_at, facts)
        SELECT 'e', now(), '{}' FROM generate_series(1, 10);
        INSERT INTO pgwake.schedules (name, spec, timezone, queue, payload, anchor,
                                      next_fire_at, paused)
        SELECT 's' || g, '@every 1h', 'UTC', 'q', '{}', now(),
               now() + make_interval(secs => g), g % 2 = 0
        FROM generate_series(1, 20000) g;
        INSERT INTO pgwake.schedules (name, spec, timezone, queue, payload, anchor, next_fire_at)
        SELECT 'due' || g, '@every 1h', 'UTC', 'q', '{}', now(), now()
        FROM generate_series(1, 3) g;
        INSERT INTO pgwake.schedule_fires (schedule, boundary, fired_by, fired_at)
        SELECT 's' || g, now() - make_interval(secs => h * 3600), 'x',
               now() - make_interval(secs => h * 3600)
        FROM generate_series(1, 2000) g, generate_series(1, 10) h;
        INSERT INTO pgwake.queues (name) VALUES ('__outbox:o');
        INSERT INTO pgwake.jobs (queue, status, payload, max_attempts, lease_seconds,
                                 backoff_base_seconds, backoff_cap_seconds, finished_at)
        SELECT '__outbox:o', 'dead', '{}', 5, 60, 5, 3600, now() - interval '3 days'
        FROM generate_series(1, 2000);
        ANALYZE pgwake.jobs; ANALYZE pgwake.scheduled_events; ANALYZE pgwake.schedules;
        ANALYZE pgwake.schedule_fires;
    """)
    yield conn
    await conn.execute(
        "TRUNCATE pgwake.jobs, pgwake.scheduled_events, pgwake.schedules, pgwake.queues CASCADE"
    )
    await conn.close()


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    out = [plan]
    for child in plan.get("Plans", []):
        out.extend(_nodes(child))
    return out


async def _plan(conn: asyncpg.Connection, sql: str, *args: Any) -> list[dict[str, Any]]:
    async with conn.transaction():  # EXPLAIN ANALYZE of DML must not change the data
        raw = await conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", *args)
        plan = json.loads(raw) if isinstance(raw, str) else raw
        # Raising inside the block rolls the statement back.
        raise _Rollback(_nodes(plan[0]["Plan"]))


class _Rollback(Exception):
    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.nodes = nodes


_NOW = datetime.now(UTC)
_SOON = _NOW + timedelta(days=14)
_DAY_AGO = _NOW - timedelta(days=1)

HOT = [
    ("claim", jq.CLAIM, ("q1", "w", 10), "jobs_claim_idx"),
    ("next run_at", jq.NEXT_RUN_IN, ("q1",), "jobs_claim_idx"),
    ("next lease expiry", jq.NEXT_LEASE_EXPIRY_IN, (), "jobs_lease_idx"),
    ("reap", jq.REAP_EXPIRED, (1000,), "jobs_lease_idx"),
    ("dedupe lookup", jq.FIND_LIVE_BY_DEDUPE, (["q1"], ["k3"]), "jobs_dedupe_idx"),
    ("dead list", jq.LIST_DEAD, ("q1", 50, None), "jobs_dead_idx"),
    ("events claim", eq.CLAIM_DUE, (20,), "scheduled_events_due_idx"),
    ("events next due", eq.NEXT_DUE_IN, (), "scheduled_events_due_idx"),
    ("schedules due", sq.DUE_FOR_UPDATE, (), "schedules_due_idx"),
    ("schedules next fire", sq.NEXT_FIRE_IN, (), "schedules_due_idx"),
    ("token lookup", tq.LOOKUP, (b"x" * 32,), "api_tokens_token_hash_key"),
    ("session lookup", aq.GET_SESSION, (b"x" * 32,), "admin_sessions_pkey"),
    ("calendar schedules", aq.WINDOW_SCHEDULES, (_SOON, None, None, 1000), "schedules_due_idx"),
    ("calendar events", aq.WINDOW_EVENTS, (_NOW, _SOON, None, 2001), "scheduled_events_due_idx"),
    ("calendar fires", aq.RECENT_FIRES, (_DAY_AGO, None, None, 500), "schedule_fires_fired_at_idx"),
    (
        "calendar history",
        aq.RECENT_EVENTS,
        (_DAY_AGO, None, ["dispatched", "failed"], 500),
        "scheduled_events_history_idx",
    ),
    ("calendar dead", aq.RECENT_DEAD_MESSAGES, (_DAY_AGO, None, 500), "jobs_dead_idx"),
]


async def test_hot_queries_use_their_indexes(filled: asyncpg.Connection) -> None:
    problems = []
    for what, sql, args, index in HOT:
        with pytest.raises(_Rollback) as caught:
            await _plan(filled, sql, *args)
        nodes = caught.value.nodes
        used = {n.get("Index Name") for n in nodes} - {None}
        seq = {n["Relation Name"] for n in nodes if n["Node Type"] == "Seq Scan"}
        if index not in used or {"jobs", "scheduled_events", "schedules"} & seq:
            problems.append(f"{what}: indexes {sorted(used)}, seq scans {sorted(seq)}")
    assert not problems, "\n".join(problems)


async def test_claim_keeps_its_index_with_stale_statistics(clean_db: str) -> None:
    """Right after a bulk enqueue, before autovacuum's ANALYZE, the statistics still
    say the table is empty. The claim must still walk jobs_claim_idx in order (no
    sort of every pending job): with a second pending index it did not, and a
    worker draining 50,000 jobs one by one crawled at 124 jobs/s."""
    conn = await asyncpg.connect(clean_db)
    try:
        await conn.execute("TRUNCATE pgwake.jobs")
        await conn.execute("ANALYZE pgwake.jobs")  # statistics of an empty table
        await conn.execute("""
            INSERT INTO pgwake.jobs (queue, payload, max_attempts, lease_seconds,
                                     backoff_base_seconds, backoff_cap_seconds, priority)
            SELECT 'bulk', '{}', 5, 60, 5, 3600, g % 3 FROM generate_series(1, 50000) g
        """)
        for what, sql, args in (
            ("claim", jq.CLAIM, ("bulk", "w", 10)),
            ("next run_at", jq.NEXT_RUN_IN, ("bulk",)),
        ):
            with pytest.raises(_Rollback) as caught:
                await _plan(conn, sql, *args)
            nodes = caught.value.nodes
            kinds = {n["Node Type"] for n in nodes}
            used = {n.get("Index Name") for n in nodes} - {None}
            assert used - {"jobs_pkey"} == {"jobs_claim_idx"}, (what, used)
            assert "Sort" not in kinds and "Seq Scan" not in kinds, (what, kinds)
        # And it answers right: the earliest run_at over every priority.
        await conn.execute(
            "UPDATE pgwake.jobs SET run_at = now() + interval '1 hour' WHERE priority = 2"
        )
        await conn.execute(
            "UPDATE pgwake.jobs SET run_at = now() + interval '5 minutes' WHERE id = 3"
        )  # priority 0
        await conn.execute(
            "UPDATE pgwake.jobs SET run_at = now() + interval '1 day'"
            " WHERE priority < 2 AND id <> 3"
        )
        in_s = await conn.fetchval(jq.NEXT_RUN_IN, "bulk")
        assert 290 < in_s <= 300
        assert await conn.fetchval(jq.NEXT_RUN_IN, "empty") is None
    finally:
        await conn.execute("TRUNCATE pgwake.jobs")
        await conn.close()


async def test_claim_passes_over_future_higher_priority_jobs(clean_db: str) -> None:
    """60,000 jobs due tomorrow at priority 5 above 100 due now at priority 0: the
    claim reads each level's due jobs only (a handful of buffers, not the whole
    future level) and needs no sort."""
    conn = await asyncpg.connect(clean_db)
    try:
        await conn.execute("""
            INSERT INTO pgwake.jobs (queue, payload, priority, run_at, max_attempts,
                                     lease_seconds, backoff_base_seconds, backoff_cap_seconds)
            SELECT 'lv', '{}', 5, now() + interval '1 day', 5, 60, 5, 3600
            FROM generate_series(1, 60000);
            INSERT INTO pgwake.jobs (queue, payload, priority, run_at, max_attempts,
                                     lease_seconds, backoff_base_seconds, backoff_cap_seconds)
            SELECT 'lv', '{}', 0, now() - make_interval(secs => g), 5, 60, 5, 3600
            FROM generate_series(1, 100) g;
        """)
        await conn.execute("VACUUM ANALYZE pgwake.jobs")
        with pytest.raises(_Rollback) as caught:
            await _plan(conn, jq.CLAIM, "lv", "w", 10)
        nodes = caught.value.nodes
        top = nodes[0]
        assert top["Actual Rows"] == 10
        assert not [n for n in nodes if n["Node Type"] in ("Sort", "Seq Scan")]
        assert {n.get("Index Name") for n in nodes} - {None} <= {"jobs_claim_idx", "jobs_pkey"}
        # The future level's index entries span over 300 leaf pages (a walk in claim
        # order read 418 buffers); the claim reads none of them.
        assert top["Shared Hit Blocks"] + top["Shared Read Blocks"] < 200, top
    finally:
        await conn.execute("TRUNCATE pgwake.jobs")
        await conn.close()
