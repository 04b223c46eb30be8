"""The route table: one :class:`Endpoint` per operation (R-H1, R-H2).

Each endpoint declares its permission, its query and body models and its
response model. :func:`mount` turns the table into Starlette routes that check
the token, then validate the query and the body, before the handler runs; the
OpenAPI document (:mod:`service.http.openapi`) is generated from the same table
and the same pydantic models, so the docs and the validation cannot drift, and
a route cannot ship without saying who may call it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

import pydantic
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from service.errors import ValidationError
from service.http.auth import require
from service.http.body import read_model

Permission = Literal["ingest", "read", "admin"]
Handler = Callable[[Request], Awaitable[Response]]
M = TypeVar("M", bound=pydantic.BaseModel)


@dataclass(frozen=True)
class Endpoint:
    """One HTTP operation.

    Args:
        method, path: e.g. ``"GET"``, ``"/schedules/{name}"``.
        handler: ``async (request) -> Response``; reads its validated input with
            :func:`body_of` and :func:`query_of`.
        permission: the token permission required (R-H1); ``None`` only for the
            public probes and documents.
        summary: one line for the OpenAPI document.
        body, query: pydantic models validating the JSON body and the query string.
        response: pydantic model of the success body (``None``: not JSON).
        status: the success status code; ``also``: other success codes, same body.
        errors: the problem statuses this operation can answer besides 401/403/422.
        media_type: the success body's media type.
        tag: OpenAPI grouping.
    """

    method: str
    path: str
    handler: Handler
    permission: Permission | None
    summary: str
    tag: str
    body: type[pydantic.BaseModel] | None = None
    query: type[pydantic.BaseModel] | None = None
    response: type[pydantic.BaseModel] | None = None
    status: int = 200
    also: tuple[int, ...] = ()
    errors: tuple[int, ...] = ()
    media_type: str = "application/json"

    @property
    def operation_id(self) -> str:
        return self.handler.__name__


def _query_errors(exc: pydantic.ValidationError) -> ValidationError:
    errors = [
        {"loc": ["query", *e.get("loc", ())], "msg": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False, include_input=False)
    ]
    return ValidationError(
        "query string failed validation: "
        + "; ".join(f"{'.'.join(map(str, e['loc'][1:]))}: {e['msg']}" for e in errors),
        errors=errors,
    )


def _wrap(ep: Endpoint) -> Handler:
    async def endpoint(request: Request) -> Response:
        if ep.permission is not None:
            await require(request, ep.permission)
        if ep.query is not None:
            raw = {k: request.query_params.get(k) for k in request.query_params}
            try:
                request.state.query = ep.query.model_validate(raw)
            except pydantic.ValidationError as exc:
                raise _query_errors(exc) from None
        if ep.body is not None:
            request.state.body = await read_model(
                request, ep.body, request.app.state.max_body_bytes
            )
        return await ep.handler(request)

    endpoint.__name__ = ep.operation_id
    endpoint.__doc__ = ep.handler.__doc__
    return endpoint


def mount(endpoints: Sequence[Endpoint]) -> list[Route]:
    """Starlette routes for ``endpoints``, each behind its permission and models.

    One route per path with every method of that path, so a wrong method answers
    405 with an ``Allow`` header listing all of them (RFC 9110 §15.5.6).
    """
    by_path: dict[str, dict[str, Handler]] = {}
    for ep in endpoints:
        by_path.setdefault(ep.path, {})[ep.method] = _wrap(ep)
    return [
        Route(path, _by_method(handlers), methods=list(handlers))
        for path, handlers in by_path.items()
    ]


def _by_method(handlers: dict[str, Handler]) -> Handler:
    async def route(request: Request) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        return await handlers[method](request)

    return route


def body_of(request: Request, model: type[M]) -> M:
    """The validated body of an endpoint that declared ``body=model``."""
    body = request.state.body
    if not isinstance(body, model):
        raise TypeError(f"endpoint did not declare body={model.__name__}")
    return body


def query_of(request: Request, model: type[M]) -> M:
    """The validated query of an endpoint that declared ``query=model``."""
    query = request.state.query
    if not isinstance(query, model):
        raise TypeError(f"endpoint did not declare query={model.__name__}")
    return query
