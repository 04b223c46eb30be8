"""Bearer tokens with permissions, stored hashed (R-H1).

A token is ``pgw_`` + 43 URL-safe characters (256 random bits). Only its
SHA-256 is stored; lookups are by hash, so no token is ever compared in
variable time or kept in plain text.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Any

import asyncpg

from service.db import Statements
from service.errors import Conflict, NotFound, ValidationError
from service.queries import tokens as q

PERMISSIONS = ("ingest", "read", "admin")
_TOKEN_NAME = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")


def hash_token(token: str) -> bytes:
    """SHA-256 of the token's UTF-8 bytes."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def parse_permissions(value: str | list[str] | tuple[str, ...]) -> list[str]:
    """``"ingest,read"`` or a list → sorted unique permissions.

    Raises:
        ValidationError: empty, or a permission outside ingest/read/admin.
    """
    items = value.split(",") if isinstance(value, str) else list(value)
    perms = sorted({p.strip() for p in items if p.strip()})
    bad = [p for p in perms if p not in PERMISSIONS]
    if bad or not perms:
        raise ValidationError(
            f"permissions must be a non-empty subset of {', '.join(PERMISSIONS)}; got {value!r}"
        )
    return perms


async def create_token(pool: asyncpg.Pool, name: str, permissions: list[str]) -> str:
    """Create a token named ``name`` and return it (shown once; only the hash is kept).

    Raises:
        ValidationError: bad name or permissions.  Conflict: the name is taken.
    """

    if not _TOKEN_NAME.fullmatch(name):
        raise ValidationError("token name must be 1-128 characters of [A-Za-z0-9_.:-]")
    perms = parse_permissions(permissions)
    token = "pgw_" + secrets.token_urlsafe(32)
    try:
        await Statements(pool).execute(q.CREATE, name, hash_token(token), perms)
    except asyncpg.UniqueViolationError:
        raise Conflict(f"a token named {name!r} already exists") from None
    return token


async def list_tokens(pool: asyncpg.Pool) -> list[dict[str, Any]]:
    """Every token's name, permissions, created and revoked instants (never the secret)."""

    return [dict(r) for r in await Statements(pool).fetch(q.LIST)]


async def revoke_token(pool: asyncpg.Pool, name: str) -> None:
    """Revoke the active token ``name``. Raises NotFound."""

    if await Statements(pool).fetchval(q.REVOKE, name) is None:
        raise NotFound(f"no active token named {name!r}")


async def authenticate(pool: asyncpg.Pool, token: str) -> tuple[str, frozenset[str]] | None:
    """``(name, permissions)`` for an active token, else None."""

    if not token or len(token) > 512:
        return None
    digest = hash_token(token)
    row = await Statements(pool).fetchrow(q.LOOKUP, digest)
    # The index finds the row by digest; the final comparison is constant-time anyway.
    if row is None or not hmac.compare_digest(bytes(row["token_hash"]), digest):
        return None
    return row["name"], frozenset(row["permissions"])
