"""deploy/systemd: the unit files pass `systemd-analyze verify` and keep their hardening.

systemd-analyze comes with systemd; CI's machines have it, so there a missing tool fails
the test instead of skipping it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.packaging.conftest import ROOT

UNITS = ROOT / "deploy" / "systemd"
# The units' ExecStart (a venv at /opt/conveyor, as their comments install it); verify
# checks that the program exists, so the copies under test point at this Python instead.
EXEC = "/opt/conveyor/bin/conveyor"
MAX_EXPOSURE = 2.0  # systemd-analyze security: 0 (locked down) .. 10 (unprotected)


def _tool() -> str:
    tool = shutil.which("systemd-analyze")
    if tool:
        return tool
    if os.environ.get("CI") == "true":
        pytest.fail("systemd-analyze is not installed (CI must not skip the unit checks)")
    pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")


def _copies(tmp_path: Path) -> list[Path]:
    out = []
    for unit in sorted(UNITS.glob("*.service")):
        text = unit.read_text()
        assert EXEC in text, f"{unit.name}: ExecStart should run {EXEC}"
        # A template is checked as one of its instances.
        name = unit.name.replace("@.service", "@jobs.service")
        copy = tmp_path / name
        copy.write_text(text.replace(EXEC, sys.executable))
        out.append(copy)
    return out


def test_there_are_units_for_server_and_worker() -> None:
    names = {p.name for p in UNITS.glob("*.service")}
    assert names == {"conveyor-server.service", "conveyor-worker@.service"}


def test_units_verify_cleanly(tmp_path: Path) -> None:
    tool = _tool()
    for unit in _copies(tmp_path):
        done = subprocess.run([tool, "verify", str(unit)], capture_output=True, text=True,
                              timeout=60, check=False)
        # Unknown or misspelled settings are only warnings: any line about our file fails.
        about_us = [line for line in (done.stdout + done.stderr).splitlines()
                    if unit.name in line]
        assert done.returncode == 0 and not about_us, f"{unit.name}:\n{done.stderr}"


def test_units_are_hardened(tmp_path: Path) -> None:
    tool = _tool()
    for unit in _copies(tmp_path):
        done = subprocess.run([tool, "security", "--offline=yes", "--no-pager", str(unit)],
                              capture_output=True, text=True, timeout=60, check=False)
        found = re.search(r"Overall exposure level for \S+: ([\d.]+)", done.stdout)
        assert found, done.stdout + done.stderr
        assert float(found.group(1)) <= MAX_EXPOSURE, done.stdout
