"""Other SDKs as the spec: the AWS SDKs for JavaScript (pinned in js/package.json) drive a
real server over a socket. v3 speaks the JSON protocol, v2 (2.1400) the Query protocol with
XML answers, as older SDKs do; both check the body MD5s they are sent and map errors to
their own codes, independently of botocore.

Needs Node.js and npm: without them the tests are skipped, and in CI (CI=true) they fail."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conveyor.sqs.errors import WIRE
from tests.server.helpers import unique
from tests.support import ServerProcess

JS_DIR = Path(__file__).parent / "js"


@pytest.fixture(scope="module")
def node() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        if os.environ.get("CI") == "true":
            pytest.fail("Node.js and npm are needed for the JavaScript SDK tests in CI")
        pytest.skip("Node.js and npm are not installed")
    if not (JS_DIR / "node_modules" / "aws-sdk").exists():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=JS_DIR,
                       check=True, timeout=600)
    return node


@pytest.mark.parametrize("script", ["sqs_roundtrip.mjs", "sqs_roundtrip_v2.cjs"],
                         ids=["v3-json", "v2-query"])
def test_javascript_sdk_round_trip(node: str, server: ServerProcess, script: str) -> None:
    done = subprocess.run([node, script, server.url, unique("js")], cwd=JS_DIR,
                          capture_output=True, text=True, timeout=120)
    checks = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(line.startswith("ok ") for line in checks), done.stdout
    assert checks[-1] == "ok PurgeQueue and DeleteQueue", "the script stopped early"


def test_error_table_matches_the_current_model(node: str) -> None:
    """Every error the current SQS model gives a Query code and status (its awsQueryError
    traits, generated into the JS SDK v3's schema) goes on the wire with that code and
    status: conveyor/sqs/errors.py's table, checked against AWS's own model."""
    schema = (JS_DIR / "node_modules" / "@aws-sdk" / "client-sqs" / "dist-es" / "schemas"
              / "schemas_0.js").read_text()
    modelled = {name: (code, int(status)) for name, code, status in re.findall(
        r"export var (\w+)\$ = \[-3, n0, \w+,\s*\{ \[_aQE\]: \[`([^`]+)`, (\d+)\]", schema)}
    assert len(modelled) >= 20, "the schema's layout changed: read it again"
    ours = {name: (wire.query_code, wire.status) for name, wire in WIRE.items()
            if name in modelled}
    assert len(ours) >= 15
    assert ours == {name: modelled[name] for name in ours}
