"""The admin calendar in a real browser (issue 7 acceptance): log in with the
keyboard, read a schedule's fires in local time across a DST change, skip one,
retry a failed event, pass axe-core, and work without JavaScript. Screenshots
go to tests/artifacts/ (ignored by git)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from service.events import Event
from service.tokens import create_token
from tests.browser.conftest import ARTIFACTS, AXE
from tests.e2e.conftest import Service

FACTS = {"facts_version": 1, "scenario": "browser"}
SERIOUS = ("serious", "critical")


async def axe_violations(page: Any, where: str) -> list[dict[str, Any]]:
    """Run axe-core on the page; print every violation, return the serious ones."""
    await page.add_script_tag(path=str(AXE))
    result = await page.evaluate("async () => await axe.run(document)")
    for v in result["violations"]:
        print(f"[axe {where}] {v['impact']}: {v['id']} ({len(v['nodes'])} nodes) {v['help']}")
    return [v for v in result["violations"] if v["impact"] in SERIOUS]


async def fire_times(page: Any, name: str) -> list[str]:
    times: list[str] = await page.locator(f'li.item[data-name="{name}"] time').all_inner_texts()
    return times


async def test_operator_journey(service: Service, browser: Any) -> None:
    token = await create_token(service.engine.pool, "operator", ["read", "admin"])
    await service.engine.schedules.schedule(
        "nightly", "0 9 * * *", "reports", {}, timezone="America/New_York"
    )
    # An event whose first dispatch fails, so the page has something to retry.
    default = service.engine.events.handler
    calls = []

    async def flaky(event: Event, conn: Any) -> None:
        calls.append(event.id)
        if len(calls) == 1:
            raise RuntimeError("receiver answered 503")
        assert default is not None
        await default(event, conn)

    service.engine.on_event(flaky)
    row, _ = await service.engine.events.store("reminder", datetime.now(UTC), FACTS)
    for _ in range(200):
        if (await service.engine.events.get(row["id"]))["status"] == "failed":
            break
        await asyncio.sleep(0.05)

    # bypass_csp lets axe-core's script in; the page's own CSP forbids inline scripts.
    context = await browser.new_context(
        timezone_id="Europe/Berlin", viewport={"width": 1400, "height": 1000}, bypass_csp=True
    )
    page = await context.new_page()

    # 1. Never served without a session: the login form, used with the keyboard only.
    await page.goto(service.url + "/admin/calendar")
    assert page.url.endswith("/admin/login")
    assert not await axe_violations(page, "login")
    await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.textContent") == "Skip to content"
    await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.id") == "token"
    await page.keyboard.type(token)
    await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.textContent") == "Log in"
    await page.keyboard.press("Enter")
    await page.wait_for_url("**/admin/calendar")
    cookie = next(c for c in await context.cookies() if c["name"] == "__Host-pgwake_session")
    assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Strict"
    assert await page.evaluate("document.cookie") == ""  # HttpOnly: no script can read it
    # The browser's zone (Europe/Berlin) was sent at login and is the default.
    assert await page.locator("#viewer-zone").inner_text() == "Europe/Berlin"

    # 2. The window across the US change on 2027-03-14, chosen through the form.
    await page.get_by_label("From day").fill("2027-03-08")
    await page.get_by_role("button", name="Apply").click()
    await page.wait_for_url("**start=2027-03-08**")
    assert await fire_times(page, "nightly") == ["15:00"] * 6 + ["14:00"] * 8
    first_edt = page.locator('li.item[data-name="nightly"][data-at="2027-03-14T13:00:00Z"] time')
    assert await first_edt.get_attribute("title") == "2027-03-14 09:00 EDT (America/New_York)"
    await page.screenshot(path=str(ARTIFACTS / "calendar-dst.png"), full_page=True)
    assert not await axe_violations(page, "calendar")

    # 3. Skip one occurrence: it disappears, the rest stay.
    await page.get_by_role("button", name="Skip nightly at Sun 14 Mar 14:00").click()
    await page.wait_for_url("**done=skipped**")
    assert "The occurrence was skipped" in await page.get_by_role("status").inner_text()
    assert await fire_times(page, "nightly") == ["15:00"] * 6 + ["14:00"] * 7
    assert await first_edt.count() == 0
    await page.screenshot(path=str(ARTIFACTS / "calendar-skipped.png"), full_page=True)

    # 4. Retry the failed event from the history, filtered to failures.
    await page.goto(service.url + "/admin/calendar")
    await page.get_by_label("Status").select_option("failed")
    await page.get_by_role("button", name="Apply").click()
    failed = page.locator(f'tr.past[data-status="failed"][data-ref="{row["id"]}"]')
    assert "receiver answered 503" in await failed.inner_text()
    await page.screenshot(path=str(ARTIFACTS / "calendar-failed.png"), full_page=True)
    await failed.get_by_role("button", name=f"Retry event {row['id']} (reminder)").click()
    await page.wait_for_url("**done=retried**")
    dispatched = page.locator(f'tr.past[data-status="dispatched"][data-ref="{row["id"]}"]')
    for _ in range(100):
        await page.goto(service.url + "/admin/calendar?status=dispatched")
        if await dispatched.count():
            break
        await asyncio.sleep(0.1)
    assert await dispatched.count() == 1
    assert (await service.engine.events.get(row["id"]))["status"] == "dispatched"
    await page.screenshot(path=str(ARTIFACTS / "calendar-retried.png"), full_page=True)

    # 5. Narrow screens get an agenda list: one column of days.
    await page.set_viewport_size({"width": 420, "height": 900})
    await page.goto(service.url + "/admin/calendar")
    columns = await page.evaluate(
        "getComputedStyle(document.querySelector('.days')).gridTemplateColumns.split(' ').length"
    )
    assert columns == 1
    await page.screenshot(path=str(ARTIFACTS / "calendar-narrow.png"), full_page=True)
    await context.close()


async def test_the_page_works_without_javascript(service: Service, browser: Any) -> None:
    token = await create_token(service.engine.pool, "nojs", ["read"])
    await service.engine.schedules.schedule("hourly", "0 * * * *", "q", {})
    context = await browser.new_context(java_script_enabled=False, timezone_id="Asia/Tokyo")
    page = await context.new_page()
    await page.goto(service.url + "/admin/login")
    await page.get_by_label("API token").fill(token)
    await page.get_by_role("button", name="Log in").click()
    await page.wait_for_url("**/admin/calendar")
    # No script sent the browser's zone: the page says UTC, and the selector changes it.
    assert await page.locator("#viewer-zone").inner_text() == "UTC"
    await page.get_by_label("Time zone").select_option("Asia/Tokyo")
    await page.get_by_role("button", name="Apply").click()
    assert await page.locator("#viewer-zone").inner_text() == "Asia/Tokyo"
    assert len(await fire_times(page, "hourly")) > 300
    await page.screenshot(path=str(ARTIFACTS / "calendar-nojs.png"))
    await context.close()
