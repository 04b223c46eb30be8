"""Shared by every system's bench driver: arguments, timing and the result line.

Stdlib only: the drivers of PgQueuer and Procrastinate run in their own virtual
environment (``bench/.venv-peers``), pgwake's in the project's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any, NoReturn

WORKLOADS = (
    "throughput",
    "enqueue_single",
    "enqueue_batch",
    "pickup_latency",
    "delayed_lag",
    "idle",
    "scale_claim",
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", choices=WORKLOADS)
    parser.add_argument("--dsn", required=True)
    parser.add_argument("-n", type=int, default=50_000, help="jobs (throughput, enqueue)")
    parser.add_argument("--batch", type=int, default=10, help="claim batch size")
    parser.add_argument("--samples", type=int, default=200, help="pickup latency samples")
    parser.add_argument("--every", type=float, default=0.05, help="pickup interval, seconds")
    parser.add_argument("--delayed", type=int, default=1000, help="delayed jobs")
    parser.add_argument("--window", type=float, default=20.0, help="delayed spread, seconds")
    parser.add_argument("--idle", type=float, default=60.0, help="idle seconds")
    parser.add_argument("--rows", type=int, default=0, help="scale_claim: rows not due")
    parser.add_argument("--claims", type=int, default=20, help="scale_claim: claims timed")
    return parser.parse_args()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency(values_s: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(values_s) * 1000, 3),
        "p99_ms": round(percentile(values_s, 0.99) * 1000, 3),
    }


def emit(**metrics: Any) -> None:
    """The driver's result: one JSON object on the last line of stdout."""
    print(json.dumps(metrics), flush=True)


class Drain:
    """Counts handler calls; ``rate()`` is jobs per second from first start to last end."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.count = 0
        self.first: float | None = None
        self.last = 0.0

    def start(self) -> None:
        if self.first is None:
            self.first = time.perf_counter()

    def end(self) -> bool:
        self.count += 1
        self.last = time.perf_counter()
        return self.count >= self.n

    def rate(self) -> float:
        assert self.first is not None
        return self.n / (self.last - self.first)


def rss_mb() -> float:
    """Peak resident set size of this process, MB (Linux ru_maxrss is in KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def fail(message: str) -> NoReturn:
    print(message, file=sys.stderr)
    raise SystemExit(2)
