"""The Starlette application (R-H1–R-H3) and its lifespan (R-X2).

``create_app(settings)`` opens the engine (pool, LISTEN, migrations) and runs
the runner inside the app's lifespan, so ``uvicorn`` serves HTTP and every loop
in one process on one pool. ``create_app(engine=…)`` mounts the surface on an
engine the caller already runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import asyncpg
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from service.config import Settings
from service.engine import Engine
from service.errors import PgwakeError
from service.http import admin, events, health, openapi, outboxes, problems, queues, schedules
from service.http.api import Endpoint, mount
from service.standalone import install_default_handler


async def openapi_json(request: Request) -> Response:
    """The OpenAPI 3.1 document of this service, generated from the route table."""
    return JSONResponse(request.app.state.openapi)


#: The route table (R-H2): every operation, its permission and its models.
ENDPOINTS: list[Endpoint] = [
    *health.endpoints,
    *events.endpoints,
    *schedules.endpoints,
    *queues.endpoints,
    *outboxes.endpoints,
    Endpoint("GET", "/openapi.json", openapi_json, "read", "This document", "operations"),
]


def create_app(
    settings: Settings | None = None,
    *,
    engine: Engine | None = None,
    run_runner: bool = True,
) -> Starlette:
    """Build the HTTP app.

    Args:
        settings: configuration; ``settings.database_url`` must be set when no
            ``engine`` is given (the CLI resolves the embedded PostgreSQL first).
        engine: an engine the caller opened; the app then neither opens nor closes it.
        run_runner: run the runner (dispatcher, relays, reaper) in the lifespan.

    Returns:
        A Starlette app whose lifespan starts and stops everything cleanly.
    """
    settings = settings or Settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            eng = engine
            if eng is None:
                if not settings.database_url:
                    raise RuntimeError("DATABASE_URL is not set")
                eng = await stack.enter_async_context(
                    Engine(
                        settings.database_url,
                        listen_dsn=settings.listen_url,
                        poll_seconds=settings.poll_seconds,
                        dispatch_batch=settings.dispatch_batch,
                        max_payload_bytes=settings.max_body_bytes,
                        pool_min=settings.pool_min,
                        pool_max=settings.pool_max,
                        statement_cache_size=settings.statement_cache_size,
                    )
                )
                install_default_handler(eng)
            app.state.engine = eng
            if run_runner:
                await stack.enter_async_context(eng.runner())
            yield

    app = Starlette(
        routes=[*mount(ENDPOINTS), *admin.ROUTES],
        lifespan=lifespan,
        exception_handlers={
            PgwakeError: problems.pgwake_error,
            HTTPException: problems.http_error,
            asyncpg.DataError: problems.data_error,
            Exception: problems.unexpected_error,
        },
    )
    app.state.max_body_bytes = settings.max_body_bytes
    app.state.openapi = openapi.build(ENDPOINTS)
    app.state.runner_expected = run_runner
    app.state.cookie_secure = settings.cookie_secure
    app.state.session_ttl = settings.session_ttl_seconds
    if engine is not None:
        app.state.engine = engine
    return app
