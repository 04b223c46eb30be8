"""In-process wakeups fed by LISTEN/NOTIFY (R-Q9, R-E3, R-X1).

Loops sleep until their own deadline; a notification on a topic (``job:<queue>``,
``events``, ``outboxes``, …) cuts the sleep short. To never lose a notification
that arrives between "query the deadline" and "start sleeping", a loop *arms* a
:class:`Waiter` first, then queries, then waits on that waiter.
"""

from __future__ import annotations

import math
from collections import defaultdict

import anyio


class Waiter:
    """One armed wait on a set of topics; fire-once."""

    __slots__ = ("_event", "_hub", "topics")

    def __init__(self, hub: WakeHub, topics: tuple[str, ...]) -> None:
        self._hub = hub
        self._event = anyio.Event()
        self.topics = topics

    def fire(self) -> None:
        self._event.set()

    def disarm(self) -> None:
        """Stop listening without waiting (the loop found work and will re-arm)."""
        self._hub._disarm(self)

    @property
    def fired(self) -> bool:
        return self._event.is_set()

    async def wait(self, timeout: float | None) -> bool:
        """Sleep until a notification on one of the topics or ``timeout`` seconds.

        Args:
            timeout: seconds; ``None`` or ``inf`` waits for a notification only;
                a value <= 0 returns at once.

        Returns:
            True if woken by a notification, False on timeout.
        """
        try:
            if timeout is None or math.isinf(timeout):
                await self._event.wait()
                return True
            if timeout <= 0:
                return self._event.is_set()
            with anyio.move_on_after(timeout):
                await self._event.wait()
            return self._event.is_set()
        finally:
            self._hub._disarm(self)


class WakeHub:
    """Routes notification topics to armed waiters. Not thread-safe: one event loop."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[Waiter]] = defaultdict(set)

    def arm(self, *topics: str) -> Waiter:
        """Register interest in ``topics`` now; await :meth:`Waiter.wait` later."""
        waiter = Waiter(self, topics)
        for topic in topics:
            self._waiters[topic].add(waiter)
        return waiter

    def _disarm(self, waiter: Waiter) -> None:
        for topic in waiter.topics:
            bucket = self._waiters.get(topic)
            if bucket is not None:
                bucket.discard(waiter)
                if not bucket:
                    del self._waiters[topic]

    def notify(self, topic: str) -> None:
        """Wake every waiter armed on ``topic``."""
        for waiter in list(self._waiters.get(topic, ())):
            waiter.fire()

    def notify_all(self) -> None:
        """Wake every armed waiter (after the LISTEN connection reconnects: deadlines
        may have moved while notifications could not arrive)."""
        for bucket in list(self._waiters.values()):
            for waiter in list(bucket):
                waiter.fire()
