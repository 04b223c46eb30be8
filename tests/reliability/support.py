"""Helpers for the reliability scenarios: sizes, runner processes, log files."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: ``make test-reliability`` sets PGWAKE_RELIABILITY=full: the issue's full sizes.
#: ``make test`` (and CI) runs the same scenarios at a short size.
FULL = os.environ.get("PGWAKE_RELIABILITY") == "full"


def size(short: float, full: float) -> float:
    return full if FULL else short


#: Run the command as PID 1 of a new PID namespace with host name ``web-1``: two such
#: runners share host name and PID, the worst case for owner tokens (issue 5, #4).
SAME_HOST = (
    "unshare", "--uts", "--pid", "--fork",
    "sh", "-c", 'hostname web-1 && exec "$0" "$@"',
)  # fmt: skip


@dataclass
class Proc:
    """A runner process (``tests.reliability.proc``) and its log file."""

    process: asyncio.subprocess.Process
    owner: str
    log: Path
    stderr: Path
    extra: dict[str, str] = field(default_factory=dict)

    #: The runner's own PID when a wrapper (``unshare --fork``) started it.
    child: int | None = None

    @property
    def pid(self) -> int:
        return self.child or self.process.pid

    def lines(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [line.split() for line in self.log.read_text().splitlines() if line]

    def kill(self, sig: int = signal.SIGKILL) -> None:
        os.kill(self.pid, sig)

    async def stop(self) -> None:
        if self.child is not None and self.process.returncode is None:
            # PID 1 of its namespace ignores SIGTERM; SIGKILL from outside still works.
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.child, signal.SIGKILL)
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGCONT)
            self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), 15)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()


async def spawn(
    dsn: str,
    mode: str,
    tmp: Path,
    name: str,
    *args: str,
    prefix: Sequence[str] = (),
) -> Proc:
    """Start ``tests.reliability.proc`` and wait until its runner is up.

    ``prefix`` wraps the command (e.g. ``unshare`` for its own host name and PIDs).
    """
    log, err = tmp / f"{name}.log", tmp / f"{name}.err"
    process = await asyncio.create_subprocess_exec(
        *prefix,
        sys.executable,
        "-m",
        "tests.reliability.proc",
        dsn,
        mode,
        str(log),
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=err.open("w"),
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 60)
    owner = line.decode().strip()
    assert owner.startswith("pgwake:"), (owner, err.read_text())
    proc = Proc(process, owner, log, err)
    if prefix:
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        proc.child = int(children[0])
    return proc


@asynccontextmanager
async def processes() -> AsyncIterator[list[Proc]]:
    """A list to put spawned processes in; every one is stopped at the end."""
    procs: list[Proc] = []
    try:
        yield procs
    finally:
        for p in procs:
            await p.stop()


async def wait_until(predicate, timeout: float, every: float = 0.05) -> None:  # type: ignore[no-untyped-def]
    """Poll ``await predicate()`` until true, or fail after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if await predicate():
            return
        await asyncio.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s")
