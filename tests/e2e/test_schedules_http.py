"""Schedules over HTTP (R-S1, R-S10, R-H6)."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import Service


def _problem(resp, status: int) -> dict:  # type: ignore[no-untyped-def]
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    return resp.json()


async def test_schedule_lifecycle(service: Service) -> None:
    c, admin, read = service.client, service.auth(), service.auth("read")
    body = {
        "spec": "0 9 * * MON-FRI",
        "queue": "mail",
        "payload": {"k": 1},
        "timezone": "Europe/Berlin",
    }
    created = await c.put("/schedules/digest", json=body, headers=admin)
    assert created.status_code == 201 and created.json()["timezone"] == "Europe/Berlin"
    again = await c.put("/schedules/digest", json=body, headers=admin)
    assert again.status_code == 200
    assert again.json()["next_fire_at"] == created.json()["next_fire_at"]  # R-S5

    got = await c.get("/schedules/digest", headers=read)
    assert got.json()["spec"] == "0 9 * * MON-FRI"
    listed = await c.get("/schedules", headers=read)
    assert [s["name"] for s in listed.json()["items"]] == ["digest"]

    fc = await c.get("/schedules/digest/upcoming?count=3&after=2026-03-27T12:00:00Z", headers=read)
    items = fc.json()["items"]
    assert [i["utc"] for i in items] == [
        "2026-03-30T07:00:00+00:00",
        "2026-03-31T07:00:00+00:00",
        "2026-04-01T07:00:00+00:00",
    ]
    # 2026-03-30 is past: it cannot be skipped any more.
    _problem(
        await c.post("/schedules/digest/skip", json={"instant": items[0]["utc"]}, headers=admin),
        422,
    )
    forecast = await c.get("/schedules/digest/upcoming?count=3", headers=read)
    coming = [i["utc"] for i in forecast.json()["items"]]
    skipped = await c.post("/schedules/digest/skip", json={"instant": coming[0]}, headers=admin)
    assert skipped.status_code == 200
    fc = await c.get("/schedules/digest/upcoming?count=2", headers=read)
    assert [i["utc"] for i in fc.json()["items"]] == coming[1:]

    assert (await c.post("/schedules/digest/pause", headers=admin)).json()["paused"] is True
    body409 = _problem(await c.post("/schedules/digest/pause", headers=admin), 409)
    assert body409["current"] == {"paused": True}
    assert (await c.post("/schedules/digest/resume", headers=admin)).json()["paused"] is False
    assert (await c.delete("/schedules/digest", headers=admin)).status_code == 200
    _problem(await c.delete("/schedules/digest", headers=admin), 404)
    _problem(await c.get("/schedules/digest", headers=read), 404)


@pytest.mark.parametrize(
    "body",
    [
        {"spec": "@every 0s", "queue": "q"},
        {"spec": "@every 5x", "queue": "q"},
        {"spec": "61 * * * *", "queue": "q"},
        {"spec": "* * *", "queue": "q"},
        {"spec": "0 9 * * *", "queue": "q", "timezone": "Nowhere/City"},
        {"spec": "0 0 30 2 *", "queue": "q"},
        {"spec": "@every 1m", "queue": "__outbox:x"},
        {"spec": "@every 1m", "queue": "q", "catch_up": -1},
        {"spec": "@every 1m", "queue": "q", "payload": [1]},
        {"queue": "q"},
    ],
)
async def test_bad_schedules_are_422_and_store_nothing(service: Service, body: dict) -> None:
    _problem(await service.client.put("/schedules/bad", json=body, headers=service.auth()), 422)
    assert await service.engine.pool.fetchval("SELECT count(*) FROM pgwake.schedules") == 0


async def test_schedule_permissions(service: Service) -> None:
    body = {"spec": "@every 1m", "queue": "q"}
    _problem(await service.client.put("/schedules/x", json=body), 401)
    _problem(await service.client.put("/schedules/x", json=body, headers=service.auth("read")), 403)
    _problem(await service.client.get("/schedules", headers=service.auth("ingest")), 403)


async def test_bad_names_and_queries(service: Service) -> None:
    c, admin = service.client, service.auth()
    _problem(
        await c.put(
            "/schedules/__scheduler", json={"spec": "@every 1m", "queue": "q"}, headers=admin
        ),
        422,
    )
    await c.put("/schedules/ok", json={"spec": "@every 1m", "queue": "q"}, headers=admin)
    for query in ["count=0", "count=x", "after=2026-01-01T00:00:00", "after=nonsense"]:
        _problem(await c.get(f"/schedules/ok/upcoming?{query}", headers=admin), 422)
    _problem(
        await c.post("/schedules/ok/skip", json={"instant": "2026-01-01T00:00:30Z"}, headers=admin),
        422,
    )


async def test_forecasts_at_the_end_of_the_calendar_are_not_errors(service: Service) -> None:
    """Found by a helper: these answered 500 (OverflowError)."""
    auth = service.auth()
    put = await service.client.put(
        "/schedules/big", json={"spec": "@every 36600d", "queue": "q1"}, headers=auth
    )
    assert put.status_code == 201
    far = await service.client.get("/schedules/big/upcoming?count=1000", headers=auth)
    assert far.status_code == 200 and 0 < len(far.json()["items"]) < 1000
    await service.client.put(
        "/schedules/ny",
        json={"spec": "0 * * * *", "queue": "q1", "timezone": "Pacific/Kiritimati"},
        headers=auth,
    )
    end = await service.client.get(
        "/schedules/ny/upcoming?count=100&after=9999-12-31T00:00:00Z", headers=auth
    )
    # Up to 09:00Z; 10:00Z is already 10000-01-01 on Kiritimati (UTC+14).
    assert end.status_code == 200 and len(end.json()["items"]) == 9
    start = await service.client.get(
        "/schedules/ny/upcoming?count=2&after=0001-01-01T00:00:01Z", headers=auth
    )
    assert start.status_code == 200
    skip = await service.client.post(
        "/schedules/big/skip", json={"instant": "9999-12-31T00:00:00Z"}, headers=auth
    )
    assert skip.status_code == 422
