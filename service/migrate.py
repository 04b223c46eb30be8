"""Forward-only, checksummed schema migrations (R-X3).

Migrations are the files ``sql/NNNN_name.sql`` (shipped in the wheel as
``service.sql``). They are applied in order, each in its own transaction, while
holding a session advisory lock on a dedicated connection, so concurrent
starters serialise instead of racing. Each applied file is recorded in
``pgwake.migrations`` with its SHA-256; an edited, already-applied file is an error.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import re
from dataclasses import dataclass

from service.db import Connection
from service.errors import MigrationError

# Arbitrary constant: the advisory-lock key pgwake's migrator holds ("pgwake" in ASCII).
_LOCK_KEY = 0x7067_7761_6B65
_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")

_BOOTSTRAP = """
CREATE SCHEMA IF NOT EXISTS pgwake;
CREATE TABLE IF NOT EXISTS pgwake.migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
"""


@dataclass(frozen=True)
class Migration:
    """One migration file: ``version``, ``name``, ``sql`` text and its SHA-256 ``checksum``."""

    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


def load_migrations() -> list[Migration]:
    """Read every ``NNNN_name.sql`` migration shipped with the package, ordered by version.

    Raises:
        MigrationError: two files share a version number.
    """
    found: dict[int, Migration] = {}
    for entry in importlib.resources.files("service.sql").iterdir():
        match = _FILE.fullmatch(entry.name)
        if not match:
            continue
        version = int(match.group(1))
        if version in found:
            raise MigrationError(f"two migrations share version {version:04d}")
        found[version] = Migration(version, match.group(2), entry.read_text("utf-8"))
    return [found[v] for v in sorted(found)]


async def migrate(conn: Connection) -> list[int]:
    """Apply pending migrations on ``conn`` (a dedicated, non-pooled connection is best).

    Args:
        conn: an open asyncpg connection, not inside a transaction.

    Returns:
        The versions applied by this call (empty when already up to date).

    Raises:
        MigrationError: an applied migration's checksum differs from its file, or the
            database records a version this code does not ship (a newer pgwake ran).
    """
    migrations = load_migrations()
    applied_now: list[int] = []
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
    try:
        await conn.execute(_BOOTSTRAP)
        rows = await conn.fetch("SELECT version, name, checksum FROM pgwake.migrations")
        recorded = {r["version"]: r for r in rows}
        known = {m.version for m in migrations}
        unknown = sorted(set(recorded) - known)
        if unknown:
            raise MigrationError(
                f"database has migrations {unknown} that this pgwake does not ship; upgrade pgwake"
            )
        for m in migrations:
            row = recorded.get(m.version)
            if row is not None:
                if row["checksum"] != m.checksum:
                    raise MigrationError(
                        f"migration {m.version:04d}_{m.name} was edited after it was applied "
                        f"(recorded {row['checksum'][:12]}, file {m.checksum[:12]})"
                    )
                continue
            async with conn.transaction():
                await conn.execute(m.sql)
                await conn.execute(
                    "INSERT INTO pgwake.migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    m.version,
                    m.name,
                    m.checksum,
                )
            applied_now.append(m.version)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    return applied_now


async def is_current(conn: Connection) -> bool:
    """True when every shipped migration is recorded in the database (for ``/readyz``)."""
    exists = await conn.fetchval("SELECT to_regclass('pgwake.migrations') IS NOT NULL")
    if not exists:
        return False
    versions = {r["version"] for r in await conn.fetch("SELECT version FROM pgwake.migrations")}
    return all(m.version in versions for m in load_migrations())
