"""A second SDK as the spec: the AWS SDK for JavaScript v3 (pinned in js/package.json)
drives a real server over a socket. It checks the body MD5s it is sent and maps errors to
its own typed exceptions from the JSON protocol's details, independently of botocore.

Needs Node.js and npm: without them the test is skipped, and in CI (CI=true) it fails."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.server.helpers import unique
from tests.support import ServerProcess

JS_DIR = Path(__file__).parent / "js"


@pytest.fixture(scope="module")
def node() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        if os.environ.get("CI") == "true":
            pytest.fail("Node.js and npm are needed for the JavaScript SDK test in CI")
        pytest.skip("Node.js and npm are not installed")
    if not (JS_DIR / "node_modules" / "@aws-sdk" / "client-sqs").exists():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=JS_DIR,
                       check=True, timeout=600)
    return node


def test_javascript_sdk_round_trip(node: str, server: ServerProcess) -> None:
    done = subprocess.run([node, "sqs_roundtrip.mjs", server.url, unique("js")], cwd=JS_DIR,
                          capture_output=True, text=True, timeout=120)
    checks = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(line.startswith("ok ") for line in checks), done.stdout
    assert checks[-1] == "ok PurgeQueue and DeleteQueue", "the script stopped early"
