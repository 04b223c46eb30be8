"""Configuration from the environment (SPEC §9), via pydantic-settings."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """pgwake settings, each read from the environment variable named in its alias.

    Attributes:
        database_url: ``DATABASE_URL``; None starts an embedded PostgreSQL (R-H5).
        listen_url: ``PGWAKE_LISTEN_URL``; a direct connection for LISTEN when
            ``database_url`` goes through a transaction-pooling proxy. Defaults to it.
        data_dir: ``PGWAKE_DATA_DIR``; where the embedded PostgreSQL keeps its data.
        host, port: ``PGWAKE_HOST`` / ``PGWAKE_PORT``; where ``serve`` listens.
        poll_seconds: ``SCHEDULER_POLL_SECONDS``; the safety-net poll (seconds).
        max_body_bytes: ``PGWAKE_MAX_BODY_BYTES``; request/payload limit in bytes (R-N4).
        dispatch_batch: ``PGWAKE_DISPATCH_BATCH``; scheduled events per dispatch (R-E3).
        pool_min, pool_max: asyncpg pool size.
        statement_cache_size: ``PGWAKE_STATEMENT_CACHE_SIZE``; 0 behind PgBouncer in
            transaction mode.
        cookie_secure: ``PGWAKE_COOKIE_SECURE``; mark the admin session cookie Secure
            (R-H4). Browsers keep it over HTTPS and on localhost only; set false to use
            the calendar over plain HTTP on a trusted network.
        session_ttl_seconds: ``PGWAKE_SESSION_TTL_SECONDS``; admin session lifetime.
    """

    model_config = SettingsConfigDict(populate_by_name=True, extra="ignore")

    database_url: str | None = Field(default=None, alias="DATABASE_URL")
    listen_url: str | None = Field(default=None, alias="PGWAKE_LISTEN_URL")
    data_dir: Path = Field(default=Path(".pgwake"), alias="PGWAKE_DATA_DIR")
    host: str = Field(default="127.0.0.1", alias="PGWAKE_HOST")
    port: int = Field(default=8000, alias="PGWAKE_PORT", ge=0, le=65535)
    poll_seconds: float = Field(default=30.0, alias="SCHEDULER_POLL_SECONDS", gt=0)
    max_body_bytes: int = Field(default=1024 * 1024, alias="PGWAKE_MAX_BODY_BYTES", gt=0)
    dispatch_batch: int = Field(default=20, alias="PGWAKE_DISPATCH_BATCH", ge=1, le=10_000)
    pool_min: int = Field(default=2, alias="PGWAKE_POOL_MIN", ge=1)
    pool_max: int = Field(default=10, alias="PGWAKE_POOL_MAX", ge=1)
    statement_cache_size: int = Field(default=100, alias="PGWAKE_STATEMENT_CACHE_SIZE", ge=0)
    cookie_secure: bool = Field(default=True, alias="PGWAKE_COOKIE_SECURE")
    session_ttl_seconds: float = Field(
        default=12 * 3600.0, alias="PGWAKE_SESSION_TTL_SECONDS", gt=0, le=30 * 86_400
    )
