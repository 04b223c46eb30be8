"""The README's examples run as written (they must not rot)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

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
