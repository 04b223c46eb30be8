"""The OpenAPI 3.1 document, generated from the route table (R-H2).

Every operation, parameter, body and response schema comes from the
:class:`service.http.api.Endpoint` entries and their pydantic models, the same
objects that validate requests, so the document cannot drift from the service.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pydantic
from pydantic.json_schema import models_json_schema

from service import __version__
from service.http.api import Endpoint
from service.http.models import MAX_ID, Problem
from service.http.problems import PROBLEM_TYPE

REF = "#/components/schemas/{model}"

#: Path parameters by name: the rules the handlers enforce (R-N1 names, bigint ids).
PATH_PARAMS: dict[str, dict[str, Any]] = {
    "name": {
        "type": "string",
        "pattern": r"^(?!__)[A-Za-z0-9_.:\-]{1,128}$",
        "description": "R-N1 name; `__` prefixes are reserved for the engine",
    },
    "id": {"type": "integer", "minimum": 1, "maximum": MAX_ID},
}

ERROR_TEXT = {
    400: "Malformed JSON",
    401: "Missing or invalid bearer token",
    403: "The token lacks the permission",
    404: "Not found",
    409: "Conflict: the row is not in the state this action acts from (R-H6)",
    413: "Body too large",
    415: "Unsupported content type",
    422: "Validation failed; `errors` names the fields",
    503: "Not healthy or not ready (same body as 200)",
}


def _path_params(path: str) -> list[str]:
    return re.findall(r"{(\w+)}", path)


def _problems(ep: Endpoint) -> list[int]:
    codes = set(ep.errors)
    if ep.permission is not None:
        codes |= {401, 403}
    if ep.body is not None:
        codes |= {400, 413, 415, 422}
    if ep.query is not None or "name" in _path_params(ep.path):
        codes.add(422)
    if _path_params(ep.path):
        codes.add(404)
    return sorted(codes)


def build(endpoints: Sequence[Endpoint], *, title: str = "pgwake") -> dict[str, Any]:
    """The OpenAPI 3.1 document for ``endpoints`` as a JSON-ready dict."""
    models: list[tuple[type[pydantic.BaseModel], Any]] = [(Problem, "serialization")]
    for ep in endpoints:
        if ep.body is not None:
            models.append((ep.body, "validation"))
        if ep.response is not None:
            models.append((ep.response, "serialization"))
    keys, defs = models_json_schema(models, ref_template=REF)
    schemas: dict[str, Any] = defs.get("$defs", {})

    def ref(model: type[pydantic.BaseModel], mode: str) -> dict[str, Any]:
        return dict(keys[(model, mode)])  # type: ignore[index]

    paths: dict[str, dict[str, Any]] = {}
    for ep in endpoints:
        params: list[dict[str, Any]] = [
            {"name": p, "in": "path", "required": True, "schema": PATH_PARAMS[p]}
            for p in _path_params(ep.path)
        ]
        if ep.query is not None:
            qschema = ep.query.model_json_schema(ref_template=REF)
            required = set(qschema.get("required", ()))
            for pname, pschema in qschema.get("properties", {}).items():
                params.append(
                    {
                        "name": pname,
                        "in": "query",
                        "required": pname in required,
                        "schema": {k: v for k, v in pschema.items() if k != "title"},
                    }
                )
        ok: dict[str, Any] = {"description": ep.summary}
        if ep.response is not None:
            ok["content"] = {ep.media_type: {"schema": ref(ep.response, "serialization")}}
        elif ep.media_type == "application/json":
            ok["content"] = {ep.media_type: {"schema": {"type": "object"}}}
        else:
            ok["content"] = {ep.media_type: {"schema": {"type": "string"}}}
        responses: dict[str, Any] = {str(ep.status): ok}
        for code in ep.also:
            responses[str(code)] = ok
        for code in _problems(ep):
            if code == 503:
                responses["503"] = {**ok, "description": ERROR_TEXT[503]}
                continue
            responses[str(code)] = {
                "description": ERROR_TEXT[code],
                "content": {PROBLEM_TYPE: {"schema": ref(Problem, "serialization")}},
            }
        op: dict[str, Any] = {
            "operationId": ep.operation_id,
            "summary": ep.summary,
            "description": (ep.handler.__doc__ or "").strip(),
            "tags": [ep.tag],
            "parameters": params,
            "responses": responses,
            "security": [] if ep.permission is None else [{"bearer": []}],
        }
        if ep.permission is not None:
            op["x-permission"] = ep.permission
            op["description"] += f"\n\nRequires a token with the `{ep.permission}` permission."
        if ep.body is not None:
            op["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": ref(ep.body, "validation")}},
            }
        paths.setdefault(ep.path, {})[ep.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {
            "title": title,
            "version": __version__,
            "description": "PostgreSQL-native scheduler, job queue and transactional outbox."
            " Errors are RFC 9457 problem documents (application/problem+json).",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a token from `pgwake token create`",
                }
            },
        },
    }
