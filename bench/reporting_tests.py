"""Run a test of the suite that writes its figures as JSON lines (to the file an
environment variable names), and read them back: the fault tests' long forms are
benchmarks too (failover_bench.py, ha_bench.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def run_reporting_test(test: str, report_variable: str, long: bool = True
                       ) -> tuple[int, list[dict[str, Any]]]:
    """pytest's exit code for `test` (a path from the repository's root), run with
    `report_variable` naming a fresh file (and CONVEYOR_LONG_TESTS=1 if `long`), and the
    reports it wrote there."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.jsonl"
        env = {**os.environ, report_variable: str(report),
               "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        if long:
            env["CONVEYOR_LONG_TESTS"] = "1"
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               test], cwd=ROOT, env=env, check=False)
        rows = [json.loads(line) for line in report.read_text().splitlines()] \
            if report.exists() else []
    return done.returncode, rows
