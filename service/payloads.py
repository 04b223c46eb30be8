"""JSON payload rules (R-N4) and timezone-aware instants (R-N2).

Payloads, facts and outbox messages are JSON objects stored as ``jsonb``. Every
entry point — Python API and HTTP — passes them through :func:`encode_payload`
so that nothing jsonb cannot store faithfully is ever half-stored.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from service.errors import (
    InvalidPayload,
    MalformedJSON,
    NaiveDatetime,
    PayloadTooLarge,
    ValidationError,
)

DEFAULT_MAX_BYTES = 1024 * 1024
MAX_DEPTH = 64


def _reject_constant(name: str) -> Any:
    raise MalformedJSON(f"non-finite number {name} is not valid JSON")


def parse_json(raw: bytes | str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Any:
    """Parse JSON text strictly (R-N4).

    Args:
        raw: UTF-8 JSON text.
        max_bytes: size limit in bytes.

    Returns:
        The decoded value (any JSON type), already checked by :func:`check_json`.

    Raises:
        PayloadTooLarge: ``raw`` exceeds ``max_bytes``.
        MalformedJSON: not JSON, invalid UTF-8, or NaN/Infinity.
        InvalidPayload: NUL characters, lone surrogates or nesting deeper than 64.
    """
    if len(raw) > max_bytes:
        raise PayloadTooLarge(f"body is {len(raw)} bytes; the limit is {max_bytes}")
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        value = json.loads(text, parse_constant=_reject_constant)
    except MalformedJSON:
        raise
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedJSON(f"malformed JSON: {exc}") from None
    except RecursionError:
        raise InvalidPayload(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    check_json(value)
    return value


def check_json(value: Any, *, path: str = "$", _depth: int = 0) -> None:
    """Check that ``value`` is JSON that jsonb stores faithfully (R-N4).

    Args:
        value: a decoded JSON value (dict, list, str, int, float, bool, None).
        path: JSONPath-like location used in error messages.

    Raises:
        InvalidPayload: a non-JSON type, non-string key, NaN/Infinity, a NUL
            character, a lone surrogate, or nesting deeper than 64 levels.
    """
    if _depth > MAX_DEPTH:
        raise _invalid(f"JSON nested deeper than {MAX_DEPTH} levels at {path}", path)
    if isinstance(value, str):
        _check_str(value, path)
    elif isinstance(value, bool) or value is None or isinstance(value, int):
        return
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise _invalid(f"non-finite number at {path}", path)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise _invalid(f"object key {key!r} at {path} is not a string", path)
            _check_str(key, f"{path} (key)")
            check_json(item, path=f"{path}.{key}", _depth=_depth + 1)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_json(item, path=f"{path}[{index}]", _depth=_depth + 1)
    else:
        raise _invalid(f"{type(value).__name__} at {path} is not a JSON type", path)


def _invalid(message: str, path: str) -> InvalidPayload:
    return InvalidPayload(message, errors=[{"loc": [path], "msg": message, "type": "json"}])


def _check_str(value: str, path: str) -> None:
    if "\x00" in value:
        raise _invalid(f"NUL character (\\u0000) at {path}; jsonb cannot store it", path)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _invalid(f"lone surrogate at {path}; not valid Unicode", path) from None


def encode_payload(value: Any, *, max_bytes: int = DEFAULT_MAX_BYTES, what: str = "payload") -> str:
    """Validate a payload object and encode it as JSON text for a ``jsonb`` column (R-N4).

    Args:
        value: must be a ``dict`` (a JSON object).
        max_bytes: limit on the encoded size, in bytes (default 1 MiB).
        what: noun used in error messages ("payload", "facts").

    Returns:
        Compact JSON text.

    Raises:
        InvalidPayload: not an object, or content :func:`check_json` rejects.
        PayloadTooLarge: the encoding exceeds ``max_bytes``.
    """
    if not isinstance(value, dict):
        raise InvalidPayload(f"{what} must be a JSON object, got {type(value).__name__}")
    check_json(value)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError as exc:  # e.g. an int past Python's digit limit for str()
        raise InvalidPayload(f"{what} cannot be encoded as JSON: {exc}") from None
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise PayloadTooLarge(f"{what} is {size} bytes; the limit is {max_bytes}")
    return text


def require_aware(value: datetime, what: str = "datetime") -> datetime:
    """Return ``value`` if it carries a UTC offset (R-N2).

    Raises:
        NaiveDatetime: ``value`` is naive (never silently taken as local or UTC).
        ValidationError: the instant falls outside the years 1-9999 in UTC.
    """
    if not isinstance(value, datetime):
        raise NaiveDatetime(f"{what} must be a timezone-aware datetime, got {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise NaiveDatetime(
            f"{what} {value.isoformat()} has no UTC offset; pass a timezone-aware datetime",
            errors=[{"loc": [what], "msg": "datetime without offset", "type": "naive_datetime"}],
        )
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not 1 <= utc.year <= 9999 or utc in (_MIN, _MAX):
        raise ValidationError(
            f"{what} {value.isoformat()} is outside the years 0001-9999 in UTC",
            errors=[{"loc": [what], "msg": "out of range", "type": "datetime_range"}],
        )
    return value


# datetime.min / max in UTC cannot be shifted by a timezone on the way to PostgreSQL.
_MIN = datetime.min.replace(tzinfo=UTC)
_MAX = datetime.max.replace(tzinfo=UTC)
