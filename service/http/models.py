"""Request models: they validate bodies and (later) generate the OpenAPI schema."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

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
        return require_aware(value, "trigger_at")
    except PgwakeError as exc:
        raise ValueError(exc.detail) from None


Instant = Annotated[AwareDatetime, BeforeValidator(_iso_string), AfterValidator(_in_range)]
Text = Annotated[str, Field(min_length=1, max_length=256)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)


def check_facts_members(facts: dict[str, Any]) -> dict[str, Any]:
    """R-E1: facts is a non-empty object carrying ``facts_version`` and ``scenario``."""
    if not facts:
        raise ValueError("facts must be a non-empty object")
    missing = missing_facts(facts)
    if missing:
        raise ValueError(f"facts is missing {' and '.join(missing)}")
    return facts


class _WithFacts(_Model):
    facts: dict[str, Any]

    @field_validator("facts")
    @classmethod
    def _facts(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_facts_members(value)


class ScheduledEventIn(_WithFacts):
    """Body of ``POST /admin/scheduled-events`` (R-E1)."""

    event_type: Text
    subject_id: Text | None = None
    tenant_id: Text | None = None
    trigger_at: Instant
    external_key: Text | None = None


class LiveEventIn(_WithFacts):
    """Body of ``POST /events`` (R-E4)."""

    event_type: Text
    subject_id: Text | None = None
    tenant_id: Text | None = None


class OutboxMessageIn(_Model):
    """Body of ``POST /outbox/{name}/messages`` (R-O4): the payload plus options."""

    payload: dict[str, Any]
    max_attempts: Annotated[int, Field(ge=1, le=1000, strict=True)] | None = None
    delay_seconds: Annotated[float, Field(ge=0, le=10 * 365 * 86400, strict=True)] | None = None
    dedupe_key: Text | None = None


class OutboxConfigIn(_Model):
    """Body of ``PUT /admin/outboxes/{name}`` (R-O4)."""

    webhook_url: Annotated[str, Field(min_length=1, max_length=2048)] | None = None
    secret: Annotated[str, Field(min_length=1, max_length=512)] | None = None
    timeout_seconds: Annotated[float, Field(gt=0, le=300, strict=True)] | None = None


class ScheduleIn(_Model):
    """Body of ``PUT /schedules/{name}`` (R-S1); spec and zone are checked by
    :mod:`service.recurrence` when stored."""

    spec: Annotated[str, Field(min_length=1, max_length=1024)]
    queue: Text
    payload: dict[str, Any] = Field(default_factory=dict)
    timezone: Annotated[str, Field(min_length=1, max_length=64)] = "UTC"
    catch_up: Annotated[int, Field(ge=0, le=10_000, strict=True)] = 64
    grace_seconds: Annotated[float, Field(gt=0, le=10 * 365 * 86400, strict=True)] | None = None
    priority: Annotated[int, Field(ge=-(2**31), le=2**31 - 1, strict=True)] = 0
    max_attempts: Annotated[int, Field(ge=1, le=1000, strict=True)] | None = None


class SkipIn(_Model):
    """Body of ``POST /schedules/{name}/skip`` (R-S10)."""

    instant: Annotated[AwareDatetime, BeforeValidator(_iso_string), AfterValidator(_in_range)]
