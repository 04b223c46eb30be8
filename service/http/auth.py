"""Bearer-token authentication and per-route permissions (R-H1)."""

from __future__ import annotations

from starlette.requests import Request

from service.engine import Engine
from service.errors import Forbidden, Unauthorized
from service.tokens import authenticate


async def require(request: Request, permission: str) -> str:
    """Authenticate the request and check ``permission``; returns the token's name.

    Raises:
        Unauthorized: no ``Authorization: Bearer`` header, or an unknown/revoked token.
        Forbidden: the token lacks ``permission``.
    """
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer token (Authorization: Bearer <token>)")
    engine: Engine = request.app.state.engine
    found = await authenticate(engine.pool, token.strip())
    if found is None:
        raise Unauthorized("invalid or revoked token")
    name, perms = found
    if permission not in perms:
        raise Forbidden(f"token {name!r} lacks the {permission!r} permission")
    return name
