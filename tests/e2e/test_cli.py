"""The pgwake command line against a real database (R-H5)."""

from __future__ import annotations

import os
import subprocess
import sys


def _cli(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service.cli", *args],
        env={**os.environ, "DATABASE_URL": db},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_token_create_prints_the_token_alone_on_the_last_line(clean_db: str) -> None:
    out = _cli(clean_db, "token", "create", "--name", "demo", "--permissions", "ingest,read,admin")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1].startswith("pgw_")
    again = _cli(clean_db, "token", "create", "--name", "demo", "--permissions", "read")
    assert again.returncode == 2 and "already exists" in again.stderr
    bad = _cli(clean_db, "token", "create", "--name", "x", "--permissions", "root")
    assert bad.returncode == 2
    listed = _cli(clean_db, "token", "list")
    assert "demo\tadmin,ingest,read\tactive" in listed.stdout
    assert _cli(clean_db, "token", "revoke", "demo").returncode == 0


def test_outbox_configure(clean_db: str) -> None:
    ok = _cli(
        clean_db,
        "outbox",
        "configure",
        "events",
        "--webhook-url",
        "http://127.0.0.1:9/hook",
        "--secret",
        "s3cret",
    )
    assert ok.returncode == 0 and '"has_secret": true' in ok.stdout
    bad = _cli(clean_db, "outbox", "configure", "events", "--webhook-url", "ftp://x")
    assert bad.returncode == 2 and "webhook_url" in bad.stderr


def test_schedule_add_list_upcoming_rm(clean_db: str) -> None:
    added = _cli(
        clean_db,
        "schedule",
        "add",
        "nightly",
        "--spec",
        "0 3 * * *",
        "--queue",
        "reports",
        "--timezone",
        "Europe/Berlin",
        "--payload",
        '{"kind": "daily"}',
    )
    assert added.returncode == 0 and "created schedule 'nightly'" in added.stdout
    assert (
        "nightly\t0 3 * * *\tEurope/Berlin\treports\tactive"
        in _cli(clean_db, "schedule", "list").stdout
    )
    fires = _cli(clean_db, "schedule", "upcoming", "nightly", "--count", "3").stdout.split("\n")
    assert len([f for f in fires if f]) == 3 and all("T03:00:00+0" in f for f in fires if f)
    bad = _cli(clean_db, "schedule", "add", "x", "--spec", "61 * * * *", "--queue", "q")
    assert bad.returncode == 2 and "61" in bad.stderr
    assert _cli(clean_db, "schedule", "rm", "nightly").returncode == 0
    assert _cli(clean_db, "schedule", "rm", "nightly").returncode == 1


async def test_status_prints_queues_schedules_events_and_loops(service) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    e = service.engine
    await e.enqueue("mail", {"to": "a"})
    await e.schedules.schedule("nightly", "0 3 * * *", "reports", {}, timezone="Europe/Berlin")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "service.cli",
        "status",
        "--url",
        service.url,
        env={**os.environ, "DATABASE_URL": e.dsn},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    text = out.decode()
    assert proc.returncode == 0, err.decode()
    lines = text.splitlines()
    assert any(line.split()[:4] == ["mail", "1", "0", "0"] for line in lines), text
    assert any(line.startswith("nightly") and "Europe/Berlin" in line for line in lines), text
    assert "leader: pgwake:" in text
    assert any(line.split()[:2] == ["dispatcher", "ok"] for line in lines), text
    assert "overall: ok" in text


def test_status_without_a_running_service(clean_db: str) -> None:
    out = _cli(clean_db, "status", "--url", "http://127.0.0.1:9")
    assert out.returncode == 0, out.stderr
    assert "QUEUES" in out.stdout and "service not reachable" in out.stdout
