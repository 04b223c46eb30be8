"""Per-instance owner tokens (R-L1): host + pid + random, never a shared constant."""

from __future__ import annotations

import os
import secrets
import socket


def instance_id(prefix: str = "pgwake") -> str:
    """A token unique to this runner instance, e.g. ``pgwake:web-1:4242:9f8c2a1b``."""
    return f"{prefix}:{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
