"""Argument checks shared by every public entry point: each raises a typed
:class:`service.errors.ValidationError` (R-N3) before any round trip."""

from __future__ import annotations

import math

from service.errors import NotFound, ValidationError

MAX_BIGINT = 2**63 - 1
MAX_SECONDS = 10 * 365 * 86400


def _fail(what: str, message: str, kind: str = "value_error") -> ValidationError:
    return ValidationError(
        f"{what} {message}", errors=[{"loc": [what], "msg": message, "type": kind}]
    )


def check_int(value: object, what: str, lo: int, hi: int = 2**31 - 1) -> int:
    """``value`` as an int in [lo, hi]. Raises ValidationError (bools are not ints here)."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise _fail(what, f"must be an integer in [{lo}, {hi}], got {value!r:.60}", "int")
    return value


def check_id(value: object, what: str = "id") -> int:
    """A row id (positive bigint).

    Raises:
        ValidationError: not an int.  NotFound: an int no row can have.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(what, f"must be an integer, got {value!r:.60}", "int")
    if not 1 <= value <= MAX_BIGINT:
        raise NotFound(f"{what} {value} does not exist")
    return value


def check_seconds(
    value: object, what: str, *, allow_zero: bool = True, maximum: float = MAX_SECONDS
) -> float:
    """A finite, non-negative number of seconds (at most ``maximum``). Raises ValidationError."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not allow_zero)
        or value > maximum
    ):
        raise _fail(what, f"must be a finite number of seconds in [0, {maximum:g}]")
    return float(value)


def check_text(
    value: object, what: str, *, required: bool = True, max_len: int = 256
) -> str | None:
    """A string of 1..max_len characters without NUL or lone surrogates (or None when
    not ``required``). Raises ValidationError."""
    if value is None and not required:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= max_len or "\x00" in value:
        raise _fail(what, f"must be a string of 1-{max_len} characters without NUL", "string_type")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail(what, "contains a lone surrogate", "string_type") from None
    return value


def storable_text(value: object, limit: int = 8192) -> str:
    """``str(value)`` as PostgreSQL text can hold it: NUL escaped, lone surrogates
    replaced, at most ``limit`` characters (for error texts recorded on rows)."""
    text = str(value).replace("\x00", "\\0")
    return text.encode("utf-8", "replace").decode("utf-8")[:limit]


def require_text(value: object, what: str, *, max_len: int = 256) -> str:
    """Like :func:`check_text` with ``required=True``, typed as ``str``."""
    text = check_text(value, what, max_len=max_len)
    assert text is not None
    return text
