"""deploy/compose: both files parse as Compose (podman-compose's own loader), run the
image built from the Containerfile, and give Conveyor arguments and settings it accepts.
compose.yaml also runs for real in test_container.py; compose.postgres.yaml needs a
PostgreSQL image, which no registry here can give, so it is checked only here."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from typing import Any

import pytest
import yaml

from tests.packaging.conftest import ROOT, missing, parse_conveyor_args, require_module

COMPOSE = ROOT / "deploy" / "compose"
FILES = sorted(COMPOSE.glob("compose*.yaml"))


def _services(path) -> dict[str, dict[str, Any]]:
    return yaml.safe_load(path.read_text())["services"]


def _conveyor_services(path) -> list[tuple[str, dict[str, Any]]]:
    return [(name, svc) for name, svc in _services(path).items()
            if "conveyor-sqs" in svc.get("image", "") and "entrypoint" not in svc]


def test_both_files_are_there() -> None:
    assert [p.name for p in FILES] == ["compose.postgres.yaml", "compose.yaml"]


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_podman_compose_reads_the_file(path) -> None:
    require_module("podman_compose")
    if shutil.which("podman") is None:  # podman-compose asks podman for its version first
        missing("podman is not installed")
    done = subprocess.run([sys.executable, "-m", "podman_compose", "-f", str(path), "config"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_services_run_conveyor_as_it_accepts(path) -> None:
    services = _conveyor_services(path)
    assert services
    built = [svc for _, svc in services if "build" in svc]
    assert len(built) == 1 and built[0]["build"]["dockerfile"] == "Containerfile"
    for name, svc in services:
        env = {k: str(v) for k, v in (svc.get("environment") or {}).items()}
        parse_conveyor_args(svc["command"], env)
        if svc["command"][0] == "worker":
            grace_s = int(re.fullmatch(r"(\d+)s", svc["stop_grace_period"])[1])
            assert grace_s > int(env.get("CONVEYOR_DRAIN_TIMEOUT", 30)), name
        if svc["command"][0] == "server" and "0.0.0.0" in svc["command"]:
            assert env.get("CONVEYOR_ALLOW_OPEN") == "true" or "CONVEYOR_ACCESS_KEY" in env


def test_the_sample_app_is_mounted_from_here() -> None:
    for path in FILES:
        app = _services(path)["app"]
        assert app["entrypoint"] == ["python3", "/app/app.py"]
        assert (COMPOSE / "sample-app" / "app.py").exists()
