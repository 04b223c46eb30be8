"""Loop liveness for ``/healthz`` (R-E5): each loop records its last good iteration."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class LoopState:
    """Liveness of one loop. Times are Unix seconds; ``period`` in seconds."""

    name: str
    period: float
    started_at: float = field(default_factory=time.time)
    last_ok: float | None = None
    restarts: int = 0
    last_error: str | None = None
    #: Crashed and not yet back: set by the supervisor, cleared by the next good beat.
    down: bool = False
    #: Test hook: raised from the loop's next ``faults`` :meth:`Health.beat` calls.
    fault: BaseException | None = None
    faults: int = 0
    #: When the supervisor last caught a crash (Unix seconds).
    last_crash_at: float | None = None

    def stale(self, now: float) -> bool:
        """True when the loop has been silent for more than three of its periods
        (counted from its start until its first good iteration)."""
        ref = self.last_ok if self.last_ok is not None else self.started_at
        return now - ref > 3 * self.period


class Health:
    """Registry of loop states, shared by the runner and the HTTP app."""

    def __init__(self) -> None:
        self.loops: dict[str, LoopState] = {}

    def register(self, name: str, period: float) -> LoopState:
        state = self.loops.get(name)
        if state is None:
            state = self.loops[name] = LoopState(name, period)
        state.period = period
        return state

    def beat(self, name: str) -> None:
        """Record a successful iteration of loop ``name`` now.

        Raises:
            The exception planted by :meth:`inject_fault`, once.
        """
        state = self.loops.get(name)
        if state is not None:
            if state.fault is not None and state.faults > 0:
                state.faults -= 1
                raise state.fault
            state.last_ok = time.time()
            state.down = False

    def inject_fault(self, name: str, exc: BaseException, times: int = 1) -> None:
        """Test hook: loop ``name`` raises ``exc`` from inside its next ``times``
        iterations (each restart included), as if its code had failed there. The
        supervisor must notice, report it and restart the loop.

        Raises:
            KeyError: no loop of that name is registered.
        """
        state = self.loops[name]
        state.fault, state.faults = exc, times

    def unregister(self, name: str) -> None:
        self.loops.pop(name, None)

    def snapshot(self) -> list[LoopState]:
        return list(self.loops.values())
