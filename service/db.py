"""asyncpg pool construction shared by the engine, the HTTP app and the caller (R-X1)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
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


class PooledConnection(asyncpg.Connection):
    """The connection class of the pools pgwake opens (:func:`create_pool`).

    On release an asyncpg pool sends its reset query (``SELECT
    pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL;``): one more round
    trip and one more transaction per borrowed connection, which doubled the cost of
    a single ``enqueue`` and of every idle poll. pgwake's own statements leave no
    session state behind (no LISTEN, no session ``SET``, no advisory lock, no
    cursor), so :class:`Statements` marks the connection clean after them and
    :func:`reset_session` skips the query for that one release. Anything else done
    on the connection (the caller's code, a handler, migrations) is never marked and
    is reset as asyncpg always does.
    """

    _pgwake_clean = False

    def mark_session_clean(self) -> None:
        """Declare that nothing since acquire left session state: the next release
        skips the reset query (once)."""
        self._pgwake_clean = True


def mark_clean(conn: Connection) -> None:
    """Mark ``conn`` (borrowed from a pool of :func:`create_pool`) as carrying no session
    state, so its next release skips the reset query; a no-op on other connections.
    Call it only when nothing but pgwake's own statements ran since acquire."""
    mark = getattr(conn, "mark_session_clean", None)
    if mark is not None:
        mark()


async def reset_session(conn: asyncpg.Connection) -> None:
    """The pool's reset hook: asyncpg's reset query, unless pgwake marked the session
    clean (see :class:`PooledConnection`). asyncpg has already rolled back any open
    transaction and dropped the connection's listener callbacks before this runs."""
    if getattr(conn, "_pgwake_clean", False):
        conn._pgwake_clean = False  # type: ignore[attr-defined]
        return
    query = conn.get_reset_query()
    if query:
        await conn.execute(query)


class Statements:
    """pgwake's own statements on a pool: each borrows a connection, runs, and gives it
    back marked clean, so the release costs no reset round trip (one statement, one
    transaction). On a pool not opened by :func:`create_pool` the mark is ignored and
    the pool resets as configured.

    Never hand a connection from :meth:`acquire` to code that is not pgwake's own
    (event handlers, caller callbacks): their session state must be reset.

    Args:
        pool: the shared asyncpg pool.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[PoolConnectionProxy]:
        """Borrow a connection for pgwake statements only; marked clean if the block
        exits normally (an exception or cancellation gets the full reset)."""
        async with self.pool.acquire() as conn:
            yield conn
            mark_clean(conn)

    async def fetch(self, query: str, *args: Any) -> list[Row]:
        """``Connection.fetch`` on a borrowed connection."""
        async with self.acquire() as conn:
            return await conn.fetch(query, *args)

    async def fetchrow(self, query: str, *args: Any) -> Row | None:
        """``Connection.fetchrow`` on a borrowed connection."""
        async with self.acquire() as conn:
            return await conn.fetchrow(query, *args)

    async def fetchval(self, query: str, *args: Any) -> Any:
        """``Connection.fetchval`` on a borrowed connection."""
        async with self.acquire() as conn:
            return await conn.fetchval(query, *args)

    async def execute(self, query: str, *args: Any) -> str:
        """``Connection.execute`` on a borrowed connection; the command status."""
        async with self.acquire() as conn:
            return await conn.execute(query, *args)


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
        An open :class:`asyncpg.Pool` whose connections decode ``jsonb`` to Python
        and are :class:`PooledConnection`: released after pgwake's own statements
        without the reset round trip; after anything else, reset as usual.
    """
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=init_connection,
        reset=reset_session,
        connection_class=PooledConnection,
        statement_cache_size=statement_cache_size,
    )
    assert pool is not None
    return pool
