"""Real servers for tests: the app under uvicorn, and a webhook receiver."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp


@contextlib.asynccontextmanager
async def serve(app: ASGIApp, *, lifespan: str = "on") -> AsyncIterator[str]:
    """Run ``app`` under uvicorn on a free loopback port; yields its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan=lifespan)
    server = uvicorn.Server(config)
    task = asyncio.get_running_loop().create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("uvicorn exited before starting")
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@dataclass
class Delivery:
    received_at: float
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        import json

        return json.loads(self.body)


@dataclass
class Receiver:
    """A webhook endpoint recording every POST; ``statuses`` scripts the answers."""

    deliveries: list[Delivery] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    delay: float = 0.0
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def hook(self, request: Request) -> Response:
        body = await request.body()
        self.deliveries.append(Delivery(time.time(), dict(request.headers), body))
        self.arrived.set()
        if self.delay:
            await asyncio.sleep(self.delay)
        status = self.statuses.pop(0) if self.statuses else 204
        return Response(status_code=status)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])

    async def wait_for(self, count: int, timeout: float = 15.0) -> None:
        async def until() -> None:
            while len(self.deliveries) < count:
                self.arrived.clear()
                await self.arrived.wait()

        await asyncio.wait_for(until(), timeout)
