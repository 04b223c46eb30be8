"""The dedicated LISTEN connection (R-X1).

One connection outside the pool (a pool resets sessions on release, which
would drop LISTEN). It reconnects with backoff on loss and, after every
(re)connect, wakes every waiter so that each loop re-reads its deadline: a
NOTIFY lost while disconnected never delays work past its due time.

A connection the server closes (restart, ``pg_terminate_backend``, a reset by
the network) is noticed at once through asyncpg's termination callback. One
that goes silent without closing (a dropped route, a frozen server) can only be
found by asking: an idle LISTEN connection receives nothing. It is probed with
``SELECT 1`` every ``keepalive_seconds`` (default 15 s; each probe is a
transaction, the largest share of an idle runner's cost at the old 5 s), so a
silent loss is found within 20 s, inside the loops' 30 s safety poll.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import anyio
import asyncpg

from service.wakeup import WakeHub

log = logging.getLogger("pgwake.listener")

CHANNEL = "pgwake"


class Listener:
    """Keeps ``LISTEN pgwake`` alive and feeds notifications into a :class:`WakeHub`.

    Args:
        dsn: a direct (not transaction-pooled) connection URL.
        hub: where notifications are routed; the payload is the topic.
        keepalive_seconds: how often an idle connection is probed, in seconds.
        probe_timeout_seconds: a probe unanswered for this long means the connection
            is lost, in seconds.
    """

    def __init__(
        self,
        dsn: str,
        hub: WakeHub,
        *,
        keepalive_seconds: float = 15.0,
        probe_timeout_seconds: float = 5.0,
    ) -> None:
        self.dsn = dsn
        self.hub = hub
        self.keepalive_seconds = keepalive_seconds
        self.probe_timeout_seconds = probe_timeout_seconds
        self.connected = anyio.Event()
        self.is_connected = False
        self.reconnects = 0
        self.last_ok: float | None = None

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: object) -> None:
        self.hub.notify(str(payload))

    async def run(self) -> None:
        """Run until cancelled: connect, listen, probe, reconnect on loss."""
        backoff = 0.05
        while True:
            conn: asyncpg.Connection | None = None
            try:
                conn = await asyncpg.connect(self.dsn, timeout=10)
                lost = anyio.Event()
                conn.add_termination_listener(lambda _c, lost=lost: lost.set())
                await conn.add_listener(CHANNEL, self._on_notify)
                self.is_connected = True
                self.connected.set()
                self.last_ok = time.time()
                backoff = 0.05
                # Deadlines may have moved while we could not hear about it.
                self.hub.notify_all()
                while not lost.is_set():
                    with anyio.move_on_after(self.keepalive_seconds):
                        await lost.wait()
                    if lost.is_set():
                        break
                    with anyio.fail_after(self.probe_timeout_seconds):
                        await conn.fetchval("SELECT 1")
                    self.last_ok = time.time()
                log.warning("LISTEN connection lost; reconnecting")
            except Exception as exc:
                # Anything, not only the expected network and server errors: a kill that
                # lands mid-LISTEN surfaces as asyncpg.InternalClientError, and a
                # listener that stops retrying would leave every loop on its safety poll.
                log.warning("LISTEN connection failed: %r; retrying in %.2fs", exc, backoff)
            finally:
                self.is_connected = False
                if conn is not None and not conn.is_closed():
                    conn.terminate()
            self.reconnects += 1
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)
