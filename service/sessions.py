"""Browser sessions of the admin calendar (R-H4).

An operator exchanges an API token (R-H1) for a session at the login form. The
session id (256 random bits) travels only in an HttpOnly cookie; the database
keeps its SHA-256. Each session carries a synchronizer CSRF token for its
forms. Permissions are never copied into the session: every lookup joins the
token, so revoking the token ends its sessions at once.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass

import asyncpg

from service.queries import admin as q
from service.tokens import hash_token

#: Default session lifetime in seconds (12 hours).
DEFAULT_TTL_SECONDS = 12 * 3600.0
#: Live sessions one token may hold; logging in again ends the oldest beyond it.
MAX_SESSIONS_PER_TOKEN = 20


@dataclass(frozen=True)
class Session:
    """A live admin session.

    Attributes:
        token_name: the name of the API token the session was opened with.
        permissions: that token's permissions now (``ingest``, ``read``, ``admin``).
        csrf_token: the value every form of this session must send back.
        timezone: the IANA zone the browser reported at login, or None.
    """

    token_name: str
    permissions: frozenset[str]
    csrf_token: str
    timezone: str | None

    def csrf_ok(self, sent: str | None) -> bool:
        """True when ``sent`` is this session's CSRF token (constant-time comparison)."""
        return sent is not None and hmac.compare_digest(
            sent.encode("utf-8", "surrogatepass"), self.csrf_token.encode()
        )


async def open_session(
    pool: asyncpg.Pool,
    api_token: str,
    *,
    timezone: str | None = None,
    ttl: float = DEFAULT_TTL_SECONDS,
) -> tuple[str, Session] | None:
    """Exchange ``api_token`` for a new session.

    Args:
        api_token: a bearer token as issued by ``pgwake token create``.
        timezone: the browser's IANA zone (already validated) or None.
        ttl: lifetime in seconds.

    Returns:
        ``(session_id, session)``: the id goes into the cookie and nowhere else.
        None when the token is unknown or revoked (nothing is stored). A token keeps
        at most MAX_SESSIONS_PER_TOKEN sessions: the oldest beyond it end.
    """
    if not api_token or len(api_token) > 512:
        return None
    session_id = secrets.token_urlsafe(32)
    csrf = secrets.token_urlsafe(32)
    row = await pool.fetchrow(
        q.CREATE_SESSION, hash_token(session_id), hash_token(api_token), csrf, timezone, ttl
    )
    if row is None:
        return None
    await pool.execute(q.TRIM_SESSIONS, row["id"], MAX_SESSIONS_PER_TOKEN)
    return session_id, Session(row["name"], frozenset(row["permissions"]), csrf, timezone)


async def get_session(pool: asyncpg.Pool, session_id: str | None) -> Session | None:
    """The live session for a cookie value; None when absent, expired or its token revoked."""
    if not session_id or len(session_id) > 128:
        return None
    row = await pool.fetchrow(q.GET_SESSION, hash_token(session_id))
    if row is None:
        return None
    return Session(row["name"], frozenset(row["permissions"]), row["csrf_token"], row["timezone"])


async def close_session(pool: asyncpg.Pool, session_id: str | None) -> None:
    """Forget a session (logout). Unknown ids are ignored."""
    if session_id and len(session_id) <= 128:
        await pool.execute(q.DELETE_SESSION, hash_token(session_id))


async def prune_sessions(pool: asyncpg.Pool, limit: int = 1000) -> int:
    """Delete up to ``limit`` expired sessions; returns how many were deleted."""
    status = await pool.execute(q.PRUNE_SESSIONS, limit)
    return int(status.split()[-1])
