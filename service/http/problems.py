"""RFC 9457 problem details for every error the HTTP surface answers (R-H3, R-N3)."""

from __future__ import annotations

import logging
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from service.errors import PgwakeError

log = logging.getLogger("pgwake.http")

PROBLEM_TYPE = "application/problem+json"


def problem(
    status: int,
    title: str,
    detail: str,
    *,
    code: str,
    instance: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> Response:
    """An ``application/problem+json`` response (RFC 9457).

    Members: ``type`` (``urn:pgwake:problem:<code>``), ``title``, ``status``,
    ``detail``, ``instance`` (the request path), ``code`` and any ``extra``.
    """
    body: dict[str, Any] = {
        "type": f"urn:pgwake:problem:{code}",
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
    }
    if instance is not None:
        body["instance"] = instance
    body.update({k: v for k, v in extra.items() if v is not None})
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_TYPE)


async def pgwake_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, PgwakeError)
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return problem(
        exc.status,
        exc.title,
        exc.detail,
        code=exc.code,
        instance=request.url.path,
        headers=headers,
        **exc.extra,
    )


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return problem(
        exc.status_code,
        str(exc.detail),
        str(exc.detail),
        code=code,
        instance=request.url.path,
        headers=dict(exc.headers or {}) or None,
    )


async def data_error(request: Request, exc: Exception) -> Response:
    """A value PostgreSQL refused (SQLSTATE class 22) that validation let through: the
    client's input, so 422 rather than 500. Validation should catch it first; log it."""
    log.warning("database refused a value on %s %s: %s", request.method, request.url.path, exc)
    return problem(
        422,
        "Invalid value",
        f"the database refused a value: {exc}",
        code="invalid_value",
        instance=request.url.path,
    )


async def unexpected_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return problem(
        500,
        "Internal server error",
        "an unexpected error occurred; see the server log",
        code="internal_error",
        instance=request.url.path,
    )
