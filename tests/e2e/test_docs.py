"""The README's examples run as written (they must not rot)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_readme_library_example_is_the_runnable_file() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Library use", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block, "README has no python example under 'Library use'"
    example = (ROOT / "docs" / "library_example.py").read_text()
    for line in block.group(1).splitlines():
        code = line.split("#")[0].rstrip()
        assert code in example, f"README line not in docs/library_example.py: {line!r}"


def test_library_example_runs(clean_db: str) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "library_example.py")],
        env={**os.environ, "DATABASE_URL": clean_db},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert "sending {'order': 1}" in out.stdout


def test_readme_schedule_commands_run(clean_db: str) -> None:
    """Every ``pgwake schedule`` line of the README's schedules section, as written."""
    section = (ROOT / "README.md").read_text().split("## Recurring schedules", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README has no shell block under 'Recurring schedules'"
    commands = block.group(1).replace("\\\n", " ").strip().splitlines()
    assert len(commands) >= 4
    outputs = []
    for command in commands:
        assert command.startswith(".venv/bin/pgwake schedule "), command
        out = subprocess.run(
            ["bash", "-c", command.replace(".venv/bin/pgwake", f"{sys.executable} -m service.cli")],
            env={**os.environ, "DATABASE_URL": clean_db},
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert out.returncode == 0, (command, out.stderr)
        outputs.append(out.stdout)
    assert "nightly-report" in outputs[2]  # list
    assert "+01:00" in outputs[1] or "+02:00" in outputs[1]  # upcoming in Berlin time


async def test_readme_curl_examples_run(service) -> None:  # type: ignore[no-untyped-def]
    """Issue 4 acceptance 3: every curl block of 'HTTP API by example', in order, as one
    bash script with ``set -euo pipefail`` against the live service."""
    import asyncio
    import shutil

    if shutil.which("jq") is None or shutil.which("curl") is None:
        pytest.fail("the README examples need curl and jq on PATH")
    section = (ROOT / "README.md").read_text().split("## HTTP API by example", 1)[1]
    section = section.split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(blocks) >= 6
    # A dead job, so the re-queue example has one to act on.
    e = service.engine
    await e.enqueue("emails", {"to": "a@example.com"}, max_attempts=1)
    (job,) = await e.claim("emails", "docs", 1)
    await job.retry("mailbox full")
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        "set -euo pipefail\n" + "\n".join(blocks),
        env={**os.environ, "TOKEN": service.tokens["all"], "PGWAKE_URL": service.url},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    text = out.decode()
    assert proc.returncode == 0, text
    assert '"status":"cancelled"' in text  # the DELETE
    assert f'"id":{job.id},"status":"pending"' in text  # the queue re-queue
    assert "pgwake_jobs_enqueued_total" in text
    assert (await e.get_job(job.id)).status == "pending"  # type: ignore[union-attr]
