"""The full service under uvicorn on a real port, with tokens for each permission."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from service.config import Settings
from service.engine import Engine
from service.http.app import create_app
from service.standalone import install_default_handler
from service.tokens import create_token
from tests.support import serve


@dataclass
class Service:
    engine: Engine
    url: str
    client: httpx.AsyncClient
    tokens: dict[str, str]

    def auth(self, who: str = "all") -> dict[str, str]:
        return {"authorization": f"Bearer {self.tokens[who]}"}


@pytest.fixture
async def service(engine: Engine) -> AsyncIterator[Service]:
    install_default_handler(engine)
    tokens = {
        "all": await create_token(engine.pool, "all", ["ingest", "read", "admin"]),
        "read": await create_token(engine.pool, "reader", ["read"]),
        "ingest": await create_token(engine.pool, "ingester", ["ingest"]),
    }
    # The fixture runs the runner itself; the app must not start a second one.
    app = create_app(Settings(PGWAKE_MAX_BODY_BYTES=1024 * 1024), engine=engine, run_runner=False)
    async with engine.runner(), serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        yield Service(engine, url, client, tokens)
