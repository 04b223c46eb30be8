"""Name rules shared by queues, schedules, locks and outboxes (R-N1)."""

from __future__ import annotations

import re

from service.errors import InvalidName, ReservedName

_NAME = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")
RESERVED_PREFIX = "__"


def check_name(name: object, *, kind: str = "name", allow_reserved: bool = False) -> str:
    """Validate a queue, schedule, lock or outbox name before any round trip (R-N1).

    Args:
        name: the candidate; must be a ``str`` of 1–128 characters of ``[A-Za-z0-9_.:-]``.
        kind: what the name names ("queue", "outbox", …), used in the error message.
        allow_reserved: engine-internal callers pass True to use ``__``-prefixed names.

    Returns:
        The name, unchanged.

    Raises:
        InvalidName: not a string, empty, too long, or outside the alphabet.
        ReservedName: starts with ``__`` and ``allow_reserved`` is False.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidName(
            f"{kind} name must be 1-128 characters of [A-Za-z0-9_.:-], got {name!r}",
            errors=[{"loc": [kind], "msg": "invalid name", "type": "invalid_name"}],
        )
    if not allow_reserved and name.startswith(RESERVED_PREFIX):
        raise ReservedName(
            f"{kind} name {name!r} starts with '__', which is reserved for the engine",
            errors=[{"loc": [kind], "msg": "reserved name", "type": "reserved_name"}],
        )
    return name
