"""Headless Chromium (Debian's ``chromium``) driven by Playwright for Python, with
axe-core from npm. ``make test-browser`` installs all three and sets
PGWAKE_BROWSER=1, under which anything missing is a failure; a plain ``make test``
skips these tests with a message when they are not installed."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import service  # noqa: F401  (the live service fixture)

HERE = Path(__file__).resolve().parent
AXE = HERE / "node_modules" / "axe-core" / "axe.min.js"
ARTIFACTS = HERE.parent / "artifacts"
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _missing() -> list[str]:
    missing = []
    if _chromium() is None:
        missing.append("Debian's chromium (apt-get install chromium)")
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        missing.append("Playwright for Python (pip install -e '.[browser]')")
    if not AXE.exists():
        missing.append("axe-core (npm ci --prefix tests/browser)")
    return missing


@pytest.fixture(scope="session")
def chromium_path() -> str:
    missing = _missing()
    if missing:
        message = "browser tests need " + ", ".join(missing) + "; `make test-browser` installs them"
        if os.environ.get("PGWAKE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    path = _chromium()
    assert path is not None
    return path


@pytest.fixture
async def browser(chromium_path: str) -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    async with async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=chromium_path, args=CHROMIUM_FLAGS)
        try:
            yield chromium
        finally:
            await chromium.close()
