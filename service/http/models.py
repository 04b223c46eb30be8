"""Request and response models: they validate bodies and query strings and generate
the OpenAPI document (R-H2), so the two cannot drift."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
)

from service.errors import PgwakeError
from service.events import missing_facts
from service.payloads import require_aware


def _iso_string(value: Any) -> Any:
    # R-N2: instants arrive as ISO 8601 strings with an offset. Numbers and numeric
    # strings (which pydantic would read as Unix time in UTC) are refused, not guessed.
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError("must be an ISO 8601 date-time with a UTC offset") from None
        if parsed.tzinfo is None or len(value) < 16:
            raise ValueError("must be an ISO 8601 date-time with a UTC offset") from None
        return parsed
    raise ValueError("must be an ISO 8601 string with a UTC offset")


def _in_range(value: datetime) -> datetime:
    try:
        return require_aware(value, "instant")
    except PgwakeError as exc:
        raise ValueError(exc.detail) from None


Instant = Annotated[AwareDatetime, BeforeValidator(_iso_string), AfterValidator(_in_range)]
Text = Annotated[str, Field(min_length=1, max_length=256)]
#: R-N1 names (queues, schedules, outboxes); ``__`` prefixes are the engine's.
NAME_PATTERN = r"^(?!__)[A-Za-z0-9_.:\-]{1,128}$"
Name = Annotated[str, Field(pattern=NAME_PATTERN)]


def _json_integer(value: Any) -> Any:
    # JSON has numbers, not ints: 3.0 is the integer 3 (JSON Schema agrees). Strings,
    # booleans and fractional numbers are refused rather than coerced.
    if isinstance(value, bool) or isinstance(value, str):
        raise ValueError("must be an integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("must be an integer")
        return int(value)
    return value


def _json_number(value: Any) -> Any:
    if isinstance(value, bool) or isinstance(value, str):
        raise ValueError("must be a number")
    return value


JsonInt = Annotated[int, BeforeValidator(_json_integer)]
JsonNumber = Annotated[float, BeforeValidator(_json_number)]
TEN_YEARS = 10 * 365 * 86400


class _Model(BaseModel):
    # python-re: name patterns use a look-ahead (no "__" prefix), as in the schema.
    model_config = ConfigDict(extra="forbid", strict=False, regex_engine="python-re")


def check_facts_members(facts: dict[str, Any]) -> dict[str, Any]:
    """R-E1: facts is a non-empty object carrying ``facts_version`` and ``scenario``."""
    if not facts:
        raise ValueError("facts must be a non-empty object")
    missing = missing_facts(facts)
    if missing:
        raise ValueError(f"facts is missing {' and '.join(missing)}")
    return facts


class _WithFacts(_Model):
    facts: Annotated[
        dict[str, Any],
        Field(
            json_schema_extra={"required": ["facts_version", "scenario"]},
            examples=[{"facts_version": 1, "scenario": "reminder", "order": 42}],
        ),
    ]

    @field_validator("facts")
    @classmethod
    def _facts(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_facts_members(value)


class ScheduledEventIn(_WithFacts):
    """Body of ``POST /admin/scheduled-events`` (R-E1)."""

    event_type: Annotated[str, Field(min_length=1, max_length=256, examples=["reminder"])]
    subject_id: Text | None = None
    tenant_id: Text | None = None
    trigger_at: Annotated[Instant, Field(examples=["2030-01-01T09:00:00+01:00"])]
    external_key: Text | None = None


class LiveEventIn(_WithFacts):
    """Body of ``POST /events`` (R-E4)."""

    event_type: Text
    subject_id: Text | None = None
    tenant_id: Text | None = None


class OutboxMessageIn(_Model):
    """Body of ``POST /outbox/{name}/messages`` (R-O4): the payload plus options."""

    payload: dict[str, Any]
    max_attempts: Annotated[JsonInt, Field(ge=1, le=1000)] | None = None
    delay_seconds: Annotated[JsonNumber, Field(ge=0, le=TEN_YEARS)] | None = None
    dedupe_key: Text | None = None


class OutboxConfigIn(_Model):
    """Body of ``PUT /admin/outboxes/{name}`` (R-O4)."""

    webhook_url: (
        Annotated[
            str,
            Field(
                max_length=2048,
                pattern=r"^https?://[^/?#\s\[\]]+(?:[/?#]\S*)?$",
                examples=["https://example.com/hooks/pgwake"],
            ),
        ]
        | None
    ) = None
    secret: Annotated[str, Field(min_length=1, max_length=512)] | None = None
    timeout_seconds: Annotated[JsonNumber, Field(gt=0, le=300)] | None = None


class ScheduleIn(_Model):
    """Body of ``PUT /schedules/{name}`` (R-S1); spec and zone are checked by
    :mod:`service.recurrence` when stored."""

    spec: Annotated[
        str,
        Field(
            min_length=1, max_length=1024, examples=["@every 5m", "0 3 * * *", "0 9 * * MON-FRI"]
        ),
    ]
    queue: Annotated[str, Field(pattern=NAME_PATTERN, examples=["reports"])]
    payload: dict[str, Any] = Field(default_factory=dict)
    timezone: Annotated[
        str, Field(min_length=1, max_length=64, examples=["UTC", "Europe/Berlin"])
    ] = "UTC"
    catch_up: Annotated[JsonInt, Field(ge=0, le=10_000)] = 64
    grace_seconds: Annotated[JsonNumber, Field(gt=0, le=TEN_YEARS)] | None = None
    priority: Annotated[JsonInt, Field(ge=-(2**31), le=2**31 - 1)] = 0
    max_attempts: Annotated[JsonInt, Field(ge=1, le=1000)] | None = None


class SkipIn(_Model):
    """Body of ``POST /schedules/{name}/skip`` (R-S10)."""

    instant: Annotated[AwareDatetime, BeforeValidator(_iso_string), AfterValidator(_in_range)]


# -- query strings ---------------------------------------------------------------

MAX_ID = 2**63 - 1
Id = Annotated[int, Field(ge=1, le=MAX_ID)]


class _Query(BaseModel):
    # Unknown query parameters are ignored, as HTTP clients and proxies add their own.
    model_config = ConfigDict(extra="ignore", regex_engine="python-re")


class EventListQuery(_Query):
    """``GET /admin/scheduled-events``: newest first, keyset pagination by id."""

    status: Literal["pending", "dispatched", "failed", "cancelled"] | None = None
    limit: Annotated[int, Field(ge=1, le=500)] = 50
    before: Id | None = None


class PageQuery(_Query):
    """Dead-letter lists: newest first, keyset pagination by id."""

    limit: Annotated[int, Field(ge=1, le=500)] = 50
    before: Id | None = None


class ScheduleListQuery(_Query):
    """``GET /schedules``: by name, keyset pagination."""

    limit: Annotated[int, Field(ge=1, le=1000)] = 100
    after: Name | None = None


class UpcomingQuery(_Query):
    """``GET /schedules/{name}/upcoming``."""

    count: Annotated[int, Field(ge=1, le=1000)] = 10
    after: Instant | None = None


# -- responses -------------------------------------------------------------------
# They document the success bodies (and schemathesis checks every answer against
# them); members beyond the listed ones are allowed, so adding a column is not a
# breaking change.


class _Out(BaseModel):
    model_config = ConfigDict(extra="allow")


class ScheduledEventOut(_Out):
    """A scheduled event row (R-E1, R-E2)."""

    id: int
    event_type: str
    subject_id: str | None
    tenant_id: str | None
    trigger_at: datetime
    facts: dict[str, Any]
    external_key: str | None
    status: Literal["pending", "dispatched", "failed", "cancelled"]
    attempts: int
    dispatched_at: datetime | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime


class ScheduledEventPage(_Out):
    items: list[ScheduledEventOut]
    next_before: int | None


class LiveEventOut(_Out):
    """The event as handed to the handler (R-E4)."""

    event_type: str
    facts: dict[str, Any]


class JobOut(_Out):
    """A job or outbox message row (R-Q1)."""

    id: int
    queue: str
    status: Literal["pending", "running", "done", "dead"]
    payload: dict[str, Any]
    priority: int
    run_at: datetime
    attempts: int
    max_attempts: int
    dedupe_key: str | None
    scheduled_for: datetime | None
    last_error: str | None
    created_at: datetime
    finished_at: datetime | None


class JobPage(_Out):
    items: list[JobOut]
    next_before: int | None


class QueueStatsOut(_Out):
    """Counts per status and the oldest pending ``run_at``."""

    queue: str
    pending: int
    running: int
    done: int
    dead: int
    oldest_pending_run_at: datetime | None


class QueueSummaryOut(_Out):
    """Live counts of one queue."""

    queue: str
    pending: int
    running: int
    dead: int
    oldest_pending_run_at: datetime | None


class QueueListOut(_Out):
    items: list[QueueSummaryOut]


class OutboxStatsOut(QueueStatsOut):
    outbox: str


class EnqueuedOut(_Out):
    id: int


class RequeuedOut(_Out):
    id: int
    status: Literal["pending"]


class OutboxConfigOut(_Out):
    """The stored webhook target; the secret is never echoed."""

    name: str
    webhook_url: str | None


class ScheduleOut(_Out):
    """A schedule row (R-S1)."""

    name: str
    spec: str
    timezone: str
    queue: str
    payload: dict[str, Any]
    priority: int
    max_attempts: int | None
    catch_up: int
    grace_seconds: float | None
    anchor: datetime
    next_fire_at: datetime
    paused: bool
    skips: list[datetime]
    fired_total: int
    skipped_total: int
    missed_total: int
    last_fired_at: datetime | None
    last_error: str | None


class SchedulePage(_Out):
    items: list[ScheduleOut]
    next_after: str | None


class DeletedOut(_Out):
    name: str
    deleted: bool


class FireOut(_Out):
    """One forecast fire: the instant in UTC and in the schedule's zone (R-S10)."""

    utc: datetime
    local: datetime


class UpcomingOut(_Out):
    name: str
    items: list[FireOut]


class LoopOut(_Out):
    name: str
    period_seconds: float
    last_ok: float | None
    seconds_since_ok: float | None
    stale: bool
    down: bool
    restarts: int
    last_crash_at: float | None
    last_error: str | None


class HealthOut(_Out):
    """``/healthz``: each runner loop's liveness and the LISTEN connection."""

    status: Literal["ok", "degraded"]
    listener: dict[str, Any]
    loops: list[LoopOut]


class ReadyOut(_Out):
    status: Literal["ready", "not ready"]
    database: bool
    migrations: bool
    runner: bool


class Problem(_Out):
    """An RFC 9457 problem document (``application/problem+json``)."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    instance: str | None = None
    errors: list[dict[str, Any]] | None = None
