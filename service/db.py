"""asyncpg pool construction shared by the engine, the HTTP app and the caller (R-X1)."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

#: A connection as callers hold it: plain, or borrowed from a pool.
Connection = asyncpg.Connection | PoolConnectionProxy
#: A row as asyncpg returns it (mapping-like).
Row = asyncpg.Record


def _encode_jsonb(value: Any) -> str:
    # Callers hand pgwake's statements JSON text already validated (R-N4);
    # anything else is encoded strictly.
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


async def init_connection(conn: asyncpg.Connection) -> None:
    """Per-connection setup: ``jsonb`` decodes to Python objects and encodes JSON text."""
    await conn.set_type_codec(
        "jsonb", encoder=_encode_jsonb, decoder=json.loads, schema="pg_catalog"
    )


async def connect(dsn: str, *, statement_cache_size: int = 100) -> asyncpg.Connection:
    """One connection outside the pool, set up as the pool's are (``jsonb`` codec).

    A worker's own claims and acks run on one: a pool resets every connection on
    release (one more round trip per statement), which only application code needs.
    """
    conn = await asyncpg.connect(dsn, statement_cache_size=statement_cache_size, timeout=10)
    try:
        await init_connection(conn)
    except BaseException:
        conn.terminate()
        raise
    return conn


async def create_pool(
    dsn: str, *, min_size: int = 2, max_size: int = 10, statement_cache_size: int = 100
) -> asyncpg.Pool:
    """Open the one asyncpg pool pgwake and the application share.

    Args:
        dsn: a libpq URL (``postgresql://…``).
        min_size, max_size: pool bounds (connections).
        statement_cache_size: asyncpg's prepared-statement cache per connection; 0
            behind a transaction pooler (PgBouncer before 1.21 in transaction mode),
            where a named prepared statement may meet another server connection.

    Returns:
        An open :class:`asyncpg.Pool` whose connections decode ``jsonb`` to Python.
    """
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=init_connection,
        statement_cache_size=statement_cache_size,
    )
    assert pool is not None
    return pool
