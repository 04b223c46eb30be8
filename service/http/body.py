"""Reading request bodies safely (R-H3, R-N4): content type, size limit while
streaming, strict JSON, then a pydantic model."""

from __future__ import annotations

from typing import Any, TypeVar

import pydantic
from starlette.requests import Request

from service.errors import (
    MalformedJSON,
    PayloadTooLarge,
    UnsupportedMediaType,
    ValidationError,
)
from service.payloads import parse_json

M = TypeVar("M", bound=pydantic.BaseModel)


async def read_limited(request: Request, limit: int) -> bytes:
    """The raw body, refusing more than ``limit`` bytes without reading the rest.

    Raises:
        PayloadTooLarge: ``Content-Length`` or the streamed size exceeds ``limit``.
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > limit:
                raise PayloadTooLarge(f"body is {declared} bytes; the limit is {limit}")
        except ValueError:
            raise MalformedJSON("invalid Content-Length header") from None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request, limit: int) -> Any:
    """Check the content type, read at most ``limit`` bytes and parse strict JSON.

    Raises:
        UnsupportedMediaType (415), PayloadTooLarge (413), MalformedJSON (400),
        InvalidPayload (422).
    """
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json" and not (
        ctype.startswith("application/") and ctype.endswith("+json")
    ):
        raise UnsupportedMediaType(f"expected Content-Type application/json, got {ctype!r}")
    raw = await read_limited(request, limit)
    if not raw.strip():
        raise MalformedJSON("the request body is empty")
    return parse_json(raw, max_bytes=limit)


async def read_model(request: Request, model: type[M], limit: int) -> M:
    """Parse the body into ``model``.

    Raises:
        ValidationError (422) with pydantic's failing fields, plus the errors of
        :func:`read_json`.
    """
    data = await read_json(request, limit)
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        errors = [
            {"loc": ["body", *exc_loc(e)], "msg": e["msg"], "type": e["type"]}
            for e in exc.errors(include_url=False, include_input=False)
        ]
        raise ValidationError(
            "request body failed validation: "
            + "; ".join(f"{'.'.join(map(str, e['loc'][1:]))}: {e['msg']}" for e in errors),
            errors=errors,
        ) from None


def exc_loc(error: Any) -> list[str | int]:
    return list(error.get("loc", ()))
