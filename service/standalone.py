"""The standalone service's wiring: every dispatched or live event goes to the
``events`` outbox (R-E4, SPEC §9), whose webhook (if configured) receives it."""

from __future__ import annotations

import asyncpg

from service.engine import Engine
from service.events import Event

EVENTS_OUTBOX = "events"


def install_default_handler(engine: Engine) -> None:
    """Register the handler that enqueues each event into the ``events`` outbox,
    in the dispatch transaction (so dispatch and enqueue commit together)."""
    outbox = engine.outbox(EVENTS_OUTBOX)

    async def to_outbox(event: Event, conn: asyncpg.Connection) -> None:
        await outbox.enqueue_tx(conn, event.as_message())

    engine.on_event(to_outbox)
