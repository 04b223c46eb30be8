"""Every error pgwake raises (R-N3).

Each class carries a stable machine-readable ``code`` and the HTTP status the
HTTP layer answers with; ``service.http.problems`` turns them into RFC 9457
``application/problem+json`` bodies. Catch :class:`PgwakeError` to catch them all.
"""

from __future__ import annotations

from typing import Any


class PgwakeError(Exception):
    """Base of every pgwake error (R-N3).

    Attributes:
        code: stable identifier, e.g. ``"invalid_name"``; part of the public API.
        status: HTTP status code the HTTP layer maps this error to.
        detail: human-readable explanation.
        extra: optional JSON-serialisable members added to the problem body.
    """

    code: str = "pgwake_error"
    status: int = 500
    title: str = "pgwake error"

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra


class ValidationError(PgwakeError):
    """Input that does not satisfy the contract (HTTP 422).

    ``errors`` lists the failing fields as ``{"loc": [...], "msg": str, "type": str}``.
    """

    code = "validation_error"
    status = 422
    title = "Validation failed"

    def __init__(self, detail: str, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(detail, errors=errors or [])
        self.errors = errors or []


class InvalidName(ValidationError):
    """A queue, schedule, lock or outbox name outside ``[A-Za-z0-9_.:-]{1,128}`` (R-N1)."""

    code = "invalid_name"
    title = "Invalid name"


class ReservedName(ValidationError):
    """A user call named something starting with ``__``, reserved for the engine (R-N1)."""

    code = "reserved_name"
    title = "Reserved name"


class NaiveDatetime(ValidationError):
    """A datetime (or ISO string) without a UTC offset (R-N2)."""

    code = "naive_datetime"
    title = "Datetime without offset"


class InvalidPayload(ValidationError):
    """A payload or facts object jsonb cannot store faithfully (R-N4):
    not an object, NaN/Infinity, NUL characters, lone surrogates or too deep."""

    code = "invalid_payload"
    title = "Invalid payload"


class PayloadTooLarge(PgwakeError):
    """A payload or request body over the configured limit (R-N4, HTTP 413)."""

    code = "payload_too_large"
    status = 413
    title = "Payload too large"


class NotFound(PgwakeError):
    """The addressed row does not exist (HTTP 404)."""

    code = "not_found"
    status = 404
    title = "Not found"


class Conflict(PgwakeError):
    """A compare-and-set found the row in another state (R-H6, HTTP 409).

    ``extra["current"]`` carries the row's current state when known.
    """

    code = "conflict"
    status = 409
    title = "Conflict"


class MigrationError(PgwakeError):
    """Migrations cannot be applied: a checksum differs from the recorded one,
    or the database holds a migration this code does not know (R-X3)."""

    code = "migration_error"
    status = 500
    title = "Migration error"


class Unauthorized(PgwakeError):
    """Missing or invalid bearer token (R-H1, HTTP 401)."""

    code = "unauthorized"
    status = 401
    title = "Unauthorized"


class Forbidden(PgwakeError):
    """A valid token without the permission the route needs (R-H1, HTTP 403)."""

    code = "forbidden"
    status = 403
    title = "Forbidden"


class MalformedJSON(PgwakeError):
    """A body that is not valid JSON, NaN/Infinity included (R-H3, HTTP 400)."""

    code = "malformed_json"
    status = 400
    title = "Malformed JSON"


class UnsupportedMediaType(PgwakeError):
    """A request body that is not ``application/json`` (R-H3, HTTP 415)."""

    code = "unsupported_media_type"
    status = 415
    title = "Unsupported media type"


class LeadershipLost(PgwakeError):
    """The schedule leader failed to acquire or renew the ``__scheduler`` lock (R-S6):
    it must not tick again until it re-acquires leadership."""

    code = "leadership_lost"
    status = 503
    title = "Leadership lost"
