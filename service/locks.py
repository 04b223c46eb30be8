"""TTL locks over a table (R-L1).

Rows, not session advisory locks: an asyncpg pool resets sessions on release
(``pg_advisory_unlock_all()``), which would silently drop an advisory lock.
Owner tokens must be unique per runner instance
(:func:`service.identity.instance_id`), never a shared constant.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

from service.checks import check_seconds, require_text
from service.db import Connection, Statements
from service.names import check_name
from service.queries import locks as q

MAX_TTL_SECONDS = 86_400.0


class Locks:
    """Lock operations over the shared pool. Every TTL is in seconds (0 < ttl <= 1 day)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.sql = Statements(pool)

    def _args(
        self, name: str, owner: str, ttl: float | None, allow_reserved: bool
    ) -> tuple[object, ...]:
        check_name(name, kind="lock", allow_reserved=allow_reserved)
        require_text(owner, "owner")
        if ttl is None:
            return (name, owner)
        return (name, owner, check_seconds(ttl, "ttl", allow_zero=False, maximum=MAX_TTL_SECONDS))

    async def try_lock(
        self, name: str, owner: str, ttl: float, *, allow_reserved: bool = False
    ) -> datetime | None:
        """Take lock ``name`` for ``owner`` for ``ttl`` seconds if it is free, expired, or
        already this owner's.

        Returns:
            The new expiry instant (UTC), or None when another owner holds it.

        Raises:
            InvalidName, ReservedName, ValidationError: bad arguments.
        """
        args = self._args(name, owner, ttl, allow_reserved)
        result: datetime | None = await self.sql.fetchval(q.TRY_LOCK, *args)
        return result

    async def renew(
        self,
        name: str,
        owner: str,
        ttl: float,
        *,
        allow_reserved: bool = False,
        conn: Connection | None = None,
    ) -> datetime | None:
        """Extend ``owner``'s unexpired lock to now + ``ttl`` seconds.

        Args:
            conn: run inside this connection's open transaction, which then holds the
                lock row until it ends: a fence, since nobody can take the lock
                before that transaction commits or rolls back.

        Returns:
            The new expiry, or None when the lock expired or belongs to someone else.
        """
        args = self._args(name, owner, ttl, allow_reserved)
        executor = self.sql if conn is None else conn
        result: datetime | None = await executor.fetchval(q.RENEW, *args)
        return result

    async def unlock(self, name: str, owner: str, *, allow_reserved: bool = False) -> bool:
        """Release ``owner``'s lock. Returns False when ``owner`` did not hold it."""
        args = self._args(name, owner, None, allow_reserved)
        return await self.sql.fetchval(q.UNLOCK, *args) is not None

    async def holder(
        self, name: str, *, allow_reserved: bool = False
    ) -> tuple[str, datetime] | None:
        """``(owner, expires_at)`` of the unexpired lock ``name``, or None when it is free."""
        check_name(name, kind="lock", allow_reserved=allow_reserved)
        row = await self.sql.fetchrow(q.HOLDER, name)
        return None if row is None else (row["owner"], row["expires_at"])
