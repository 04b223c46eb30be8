"""Helpers shared by route modules: JSON encoding of rows, path and query parsing."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from service.engine import Engine
from service.errors import NotFound, ValidationError


def engine_of(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def jsonable(value: Any) -> Any:
    """Rows and lists of rows with instants as ISO 8601 strings."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(jsonable(data), status_code=status, headers=headers)


def page(
    items: list[dict[str, Any]], limit: int, *, cursor: str = "next_before", key: str = "id"
) -> JSONResponse:
    """A keyset-paginated list: ``{"items": …, cursor: …}``. The cursor is the last
    item's ``key`` when the page is full (there may be more), else None."""
    last = items[-1][key] if len(items) == limit else None
    return json_response({"items": items, cursor: last})


def path_id(request: Request, name: str = "id") -> int:
    """A positive bigint path parameter; anything else is a 404 (no such resource)."""
    raw = request.path_params[name]
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18 or int(raw) < 1:
        raise NotFound(f"{request.url.path} does not exist")
    return int(raw)


def query_int(request: Request, name: str, default: int | None, lo: int, hi: int) -> int | None:
    """An integer query parameter within [lo, hi].

    Raises:
        ValidationError: not an integer or out of range.
    """
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = lo - 1
    if not lo <= value <= hi:
        raise ValidationError(
            f"query parameter {name} must be an integer in [{lo}, {hi}]",
            errors=[{"loc": ["query", name], "msg": "out of range", "type": "int"}],
        )
    return value
