"""The HTTP surface through uvicorn and a real client (R-H1, R-H3, R-E1, R-O4)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.e2e.conftest import Service

FACTS = {"facts_version": 1, "scenario": "reminder"}


def _event(**over: object) -> dict[str, object]:
    body: dict[str, object] = {
        "event_type": "reminder",
        "trigger_at": (datetime.now(UTC) + timedelta(hours=1)).isoformat(),
        "facts": FACTS,
    }
    body.update(over)
    return body


async def _count(service: Service) -> int:
    return int(
        await service.engine.pool.fetchval(
            "SELECT (SELECT count(*) FROM pgwake.scheduled_events)"
            " + (SELECT count(*) FROM pgwake.jobs)"
        )
    )


def _assert_problem(resp, status: int) -> dict:  # type: ignore[no-untyped-def]
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    body = resp.json()
    assert body["status"] == status and body["title"] and body["detail"] and body["type"]
    return body


async def test_health_and_ready_need_no_token(service: Service) -> None:
    assert (await service.client.get("/readyz")).status_code == 200
    resp = await service.client.get("/healthz")
    assert resp.status_code == 200
    names = {loop["name"] for loop in resp.json()["loops"]}
    assert {"dispatcher", "reaper", "webhooks"} <= names


async def test_create_get_list_scheduled_event(service: Service) -> None:
    resp = await service.client.post(
        "/admin/scheduled-events", json=_event(external_key="k1"), headers=service.auth()
    )
    assert resp.status_code == 201
    row = resp.json()
    assert row["status"] == "pending" and row["external_key"] == "k1" and row["id"]
    got = await service.client.get(
        f"/admin/scheduled-events/{row['id']}", headers=service.auth("read")
    )
    assert got.json()["status"] == "pending" and "dispatched_at" in got.json()
    listed = await service.client.get(
        "/admin/scheduled-events?status=pending", headers=service.auth("read")
    )
    assert [r["id"] for r in listed.json()["items"]] == [row["id"]]


async def test_external_key_over_http(service: Service) -> None:
    """Acceptance 4: two posts → one row rewritten; 20 concurrent posts → one row."""
    a = (
        await service.client.post(
            "/admin/scheduled-events", headers=service.auth(), json=_event(external_key="dup")
        )
    ).json()
    b = (
        await service.client.post(
            "/admin/scheduled-events",
            headers=service.auth(),
            json=_event(external_key="dup", event_type="changed"),
        )
    ).json()
    assert a["id"] == b["id"] and b["event_type"] == "changed" and b["status"] == "pending"
    resps = await asyncio.gather(
        *(
            service.client.post(
                "/admin/scheduled-events",
                headers=service.auth(),
                json=_event(external_key="race", subject_id=str(n)),
            )
            for n in range(20)
        )
    )
    assert {r.status_code for r in resps} == {201}
    assert len({r.json()["id"] for r in resps}) == 1
    n = await service.engine.pool.fetchval(
        "SELECT count(*) FROM pgwake.scheduled_events WHERE external_key = 'race'"
    )
    assert n == 1


BAD_BODIES = [
    ("facts empty", _event(facts={}), 422, "facts"),
    ("facts_version missing", _event(facts={"scenario": "s"}), 422, "facts"),
    ("scenario missing", _event(facts={"facts_version": 1}), 422, "facts"),
    ("naive trigger_at", _event(trigger_at="2030-01-01T09:00:00"), 422, "trigger_at"),
    ("numeric trigger_at", _event(trigger_at=1893456000), 422, "trigger_at"),
    (
        "trigger_at before year 1 in UTC",
        _event(trigger_at="0001-01-01T00:00:00+01:00"),
        422,
        "trigger_at",
    ),
    (
        "trigger_at after 9999 in UTC",
        _event(trigger_at="9999-12-31T23:59:59-14:00"),
        422,
        "trigger_at",
    ),
    ("trigger_at date only", _event(trigger_at="2026-01-01"), 422, "trigger_at"),
    ("trigger_at numeric string", _event(trigger_at="1700000000"), 422, "trigger_at"),
    (
        "event_type missing",
        {k: v for k, v in _event().items() if k != "event_type"},
        422,
        "event_type",
    ),
    ("unknown member", _event(surprise=1), 422, "surprise"),
    ("facts not object", _event(facts=[1]), 422, "facts"),
]


@pytest.mark.parametrize(
    ("why", "body", "status", "field"), BAD_BODIES, ids=[b[0] for b in BAD_BODIES]
)
async def test_bad_event_bodies(
    service: Service, why: str, body: dict, status: int, field: str
) -> None:
    resp = await service.client.post("/admin/scheduled-events", json=body, headers=service.auth())
    problem = _assert_problem(resp, status)
    assert any(field in map(str, e["loc"]) for e in problem["errors"]), problem
    assert await _count(service) == 0


RAW_BAD = [
    ("non-JSON", b"{not json", "application/json", 400),
    ("empty body", b"", "application/json", 400),
    (
        "NaN",
        b'{"event_type":"x","trigger_at":"2030-01-01T00:00:00Z","facts":'
        b'{"facts_version":1,"scenario":NaN}}',
        "application/json",
        400,
    ),
    (
        "Infinity",
        b'{"event_type":"x","trigger_at":"2030-01-01T00:00:00Z","facts":'
        b'{"facts_version":1,"scenario":"s","v":Infinity}}',
        "application/json",
        400,
    ),
    (
        "NUL",
        b'{"event_type":"x","trigger_at":"2030-01-01T00:00:00Z","facts":'
        b'{"facts_version":1,"scenario":"a\\u0000b"}}',
        "application/json",
        422,
    ),
    (
        "lone surrogate",
        b'{"event_type":"x","trigger_at":"2030-01-01T00:00:00Z","facts":'
        b'{"facts_version":1,"scenario":"\\ud800"}}',
        "application/json",
        422,
    ),
    ("invalid UTF-8", b'{"event_type":"\xff"}', "application/json", 400),
    ("deep nesting", b'{"facts":' + b"[" * 5000 + b"]" * 5000 + b"}", "application/json", 422),
    ("wrong content type", json.dumps(_event()).encode(), "text/plain", 415),
    ("no content type", json.dumps(_event()).encode(), "", 415),
    ("2 MiB body", b'{"event_type":"' + b"x" * (2 * 1024 * 1024) + b'"}', "application/json", 413),
]


@pytest.mark.parametrize(("why", "raw", "ctype", "status"), RAW_BAD, ids=[b[0] for b in RAW_BAD])
async def test_bad_raw_bodies(
    service: Service, why: str, raw: bytes, ctype: str, status: int
) -> None:
    headers = {**service.auth()}
    if ctype:
        headers["content-type"] = ctype
    resp = await service.client.post("/admin/scheduled-events", content=raw, headers=headers)
    _assert_problem(resp, status)
    assert await _count(service) == 0


async def test_streamed_oversize_body_without_length_is_413(service: Service) -> None:
    async def chunks():  # type: ignore[no-untyped-def]
        for _ in range(40):
            yield b"x" * 65536

    headers = {**service.auth(), "content-type": "application/json"}
    resp = await service.client.post("/admin/scheduled-events", content=chunks(), headers=headers)
    _assert_problem(resp, 413)


@pytest.mark.parametrize("header", [None, "Bearer nope", "Basic abc", "Bearer", "bearer  x y"])
async def test_missing_or_invalid_token_is_401(service: Service, header: str | None) -> None:
    headers = {"authorization": header} if header else {}
    resp = await service.client.post("/admin/scheduled-events", json=_event(), headers=headers)
    _assert_problem(resp, 401)
    assert resp.headers["www-authenticate"] == "Bearer"
    assert await _count(service) == 0


async def test_token_without_permission_is_403(service: Service) -> None:
    resp = await service.client.post(
        "/admin/scheduled-events", json=_event(), headers=service.auth("read")
    )
    _assert_problem(resp, 403)
    resp = await service.client.post(
        "/outbox/events/messages", json={"payload": {}}, headers=service.auth("read")
    )
    _assert_problem(resp, 403)
    resp = await service.client.get("/admin/scheduled-events", headers=service.auth("ingest"))
    _assert_problem(resp, 403)
    row = (
        await service.client.post(
            "/admin/scheduled-events", json=_event(), headers=service.auth("ingest")
        )
    ).json()
    resp = await service.client.delete(
        f"/admin/scheduled-events/{row['id']}", headers=service.auth("ingest")
    )
    _assert_problem(resp, 403)


async def test_cancel_and_retry_are_compare_and_set(service: Service) -> None:
    row = (
        await service.client.post("/admin/scheduled-events", json=_event(), headers=service.auth())
    ).json()
    path = f"/admin/scheduled-events/{row['id']}"
    assert (await service.client.delete(path, headers=service.auth())).json()["status"] == (
        "cancelled"
    )
    body = _assert_problem(await service.client.delete(path, headers=service.auth()), 409)
    assert body["current"] == {"status": "cancelled"}
    _assert_problem(await service.client.post(path + "/retry", headers=service.auth()), 409)
    _assert_problem(
        await service.client.get("/admin/scheduled-events/999999", headers=service.auth()), 404
    )
    _assert_problem(
        await service.client.get("/admin/scheduled-events/abc", headers=service.auth()), 404
    )


async def test_outbox_over_http(service: Service) -> None:
    resp = await service.client.post(
        "/outbox/mail/messages", json={"payload": {"to": "a"}}, headers=service.auth("ingest")
    )
    assert resp.status_code == 202
    msg_id = resp.json()["id"]
    job = await service.engine.get_job(msg_id)
    assert job and job.queue == "__outbox:mail" and job.payload == {"to": "a"}
    _assert_problem(
        await service.client.post(
            "/outbox/__x/messages", json={"payload": {}}, headers=service.auth()
        ),
        422,
    )
    _assert_problem(
        await service.client.post(
            "/outbox/mail/messages", json={"payload": [1]}, headers=service.auth()
        ),
        422,
    )
    stats = await service.client.get("/outbox/mail/stats", headers=service.auth("read"))
    assert stats.json()["pending"] == 1
    _assert_problem(
        await service.client.put(
            "/admin/outboxes/mail", json={"webhook_url": "ftp://x"}, headers=service.auth()
        ),
        422,
    )


async def test_live_event_goes_to_events_outbox(service: Service) -> None:
    resp = await service.client.post(
        "/events",
        json={"event_type": "signup", "subject_id": "u1", "facts": FACTS},
        headers=service.auth("ingest"),
    )
    assert resp.status_code == 202
    body = resp.json()
    assert body["event_type"] == "signup" and body["facts"] == FACTS
    stats = await service.engine.outbox("events").stats()
    assert stats["pending"] == 1


async def test_unknown_route_and_method_are_problems(service: Service) -> None:
    _assert_problem(await service.client.get("/nope"), 404)
    _assert_problem(await service.client.put("/events", json={}), 405)


@pytest.mark.parametrize("segment", ["%C2%B2", "%D9%A3", "0", "-1", "1e3", "99999999999999999999"])
async def test_odd_path_ids_are_404(service: Service, segment: str) -> None:
    for method, path in [
        ("GET", f"/admin/scheduled-events/{segment}"),
        ("POST", f"/admin/scheduled-events/{segment}/retry"),
        ("DELETE", f"/admin/scheduled-events/{segment}"),
        ("POST", f"/outbox/x/dead/{segment}/requeue"),
    ]:
        resp = await service.client.request(method, path, headers=service.auth())
        _assert_problem(resp, 404)


@pytest.mark.parametrize(
    "body",
    [
        {"webhook_url": "http://127.0.0.1:1/hook", "secret": "whsec_a"},
        {"webhook_url": "http://127.0.0.1:1/hook", "secret": "whsec_"},
        {"webhook_url": "http://127.0.0.1:1/hook", "timeout_seconds": "5"},
    ],
)
async def test_bad_outbox_config_is_422(service: Service, body: dict) -> None:
    resp = await service.client.put("/admin/outboxes/x", json=body, headers=service.auth())
    _assert_problem(resp, 422)
    assert await service.engine.outbox("x").webhook() is None


@pytest.mark.parametrize(
    "options",
    [
        {"max_attempts": True},
        {"max_attempts": "5"},
        {"delay_seconds": "5"},
        {"max_attempts": 2**70},
    ],
)
async def test_outbox_message_options_are_strict(service: Service, options: dict) -> None:
    resp = await service.client.post(
        "/outbox/x/messages", json={"payload": {}, **options}, headers=service.auth()
    )
    _assert_problem(resp, 422)
    assert await _count(service) == 0


async def test_invalid_payload_names_its_location(service: Service) -> None:
    resp = await service.client.post(
        "/outbox/x/messages",
        content=b'{"payload": {"a": "\\u0000"}}',
        headers={**service.auth(), "content-type": "application/json"},
    )
    body = _assert_problem(resp, 422)
    assert body["errors"] and "$.payload.a" in body["errors"][0]["loc"]
