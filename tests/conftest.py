"""Shared fixtures: a migrated template database per run, a fresh database per
test module, and a clean schema per test (R-T1)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest

from service.engine import Engine
from service.migrate import migrate
from tests.pgserver import server_url, unique_name, with_database

_TABLES = (
    "pgwake.jobs, pgwake.queues, pgwake.scheduled_events, pgwake.outboxes, "
    "pgwake.api_tokens, pgwake.locks, pgwake.schedules, pgwake.schedule_fires, "
    "pgwake.admin_sessions"
)


def _run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """Admin URL of the test server; the whole run's databases are dropped at the end."""
    with server_url() as (url, source):
        print(f"\n[pgwake tests] PostgreSQL from {source}")
        yield url


@pytest.fixture(scope="session")
def template_db(pg_server: str) -> Iterator[str]:
    name = unique_name("pgwake_tpl")

    async def create() -> None:
        admin = await asyncpg.connect(pg_server)
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
        finally:
            await admin.close()
        conn = await asyncpg.connect(with_database(pg_server, name))
        try:
            await migrate(conn)
        finally:
            await conn.close()

    _run(create())
    yield name
    _run(_drop(pg_server, name))


async def _drop(admin_url: str, name: str) -> None:
    admin = await asyncpg.connect(admin_url)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture(scope="module")
def database_url(pg_server: str, template_db: str) -> Iterator[str]:
    """A fresh, migrated database for this test module."""
    name = unique_name("pgwake_test")

    async def create() -> None:
        admin = await asyncpg.connect(pg_server)
        try:
            await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
        finally:
            await admin.close()

    _run(create())
    yield with_database(pg_server, name)
    _run(_drop(pg_server, name))


@pytest.fixture
async def clean_db(database_url: str) -> str:
    """The module's database with every pgwake table emptied."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(f"TRUNCATE {_TABLES} RESTART IDENTITY")
    finally:
        await conn.close()
    return database_url


@pytest.fixture
async def engine(clean_db: str) -> AsyncIterator[Engine]:
    """A started Engine (pool + LISTEN connection) on a clean database."""
    async with Engine(clean_db, poll_seconds=5.0, migrate=False) as eng:
        yield eng
