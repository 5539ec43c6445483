"""The AWS CLI (`aws sqs ... --endpoint-url`) against the server, as a user would type it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.server.helpers import md5_hex, unique
from tests.support import ServerProcess


def _aws_executable() -> str:
    beside = Path(sys.executable).with_name("aws")
    found = str(beside) if beside.exists() else shutil.which("aws")
    if not found:
        if os.environ.get("CI") == "true":
            pytest.fail("the AWS CLI is not installed (CI must not skip)")
        pytest.skip("the AWS CLI is not installed (it is in the dev extra)")
    return found


@pytest.fixture(scope="module")
def aws(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Any:
    exe = _aws_executable()
    home = tmp_path_factory.mktemp("awshome")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": str(home / "config"),
                "AWS_SHARED_CREDENTIALS_FILE": str(home / "credentials"),
                "AWS_MAX_ATTEMPTS": "1", "AWS_PAGER": "", "HOME": str(home)})

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [exe, "sqs", *args, "--endpoint-url", server.url, "--output", "json"]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        if check:
            assert proc.returncode == 0, proc.stderr
        return proc

    return run


def _json(proc: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(proc.stdout) if proc.stdout.strip() else {}


def test_cli_queue_lifecycle(aws: Any, server: ServerProcess) -> None:
    name = unique("cli")
    url = _json(aws("create-queue", "--queue-name", name,
                    "--attributes", "VisibilityTimeout=40,DelaySeconds=0"))["QueueUrl"]
    assert url == f"{server.url}/000000000000/{name}"
    assert _json(aws("get-queue-url", "--queue-name", name))["QueueUrl"] == url
    listed = _json(aws("list-queues", "--queue-name-prefix", name))
    assert listed["QueueUrls"] == [url]
    attrs = _json(aws("get-queue-attributes", "--queue-url", url, "--attribute-names", "All"))
    assert attrs["Attributes"]["VisibilityTimeout"] == "40"
    aws("set-queue-attributes", "--queue-url", url, "--attributes", "VisibilityTimeout=50")
    aws("tag-queue", "--queue-url", url, "--tags", "team=ops")
    assert _json(aws("list-queue-tags", "--queue-url", url))["Tags"] == {"team": "ops"}
    aws("delete-queue", "--queue-url", url)
    proc = aws("get-queue-url", "--queue-name", name, check=False)
    assert proc.returncode != 0
    assert "NonExistentQueue" in proc.stderr or "QueueDoesNotExist" in proc.stderr


def test_cli_messages(aws: Any) -> None:
    url = _json(aws("create-queue", "--queue-name", unique("cli")))["QueueUrl"]
    attributes = json.dumps({"kind": {"DataType": "String", "StringValue": "report"}})
    sent = _json(aws("send-message", "--queue-url", url, "--message-body", "hello from cli",
                     "--message-attributes", attributes))
    assert sent["MD5OfMessageBody"] == md5_hex("hello from cli")
    got = _json(aws("receive-message", "--queue-url", url, "--wait-time-seconds", "2",
                    "--message-attribute-names", "All", "--attribute-names", "All"))
    msg = got["Messages"][0]
    assert msg["Body"] == "hello from cli"
    assert msg["MessageAttributes"]["kind"]["StringValue"] == "report"
    assert msg["Attributes"]["ApproximateReceiveCount"] == "1"
    aws("change-message-visibility", "--queue-url", url, "--receipt-handle",
        msg["ReceiptHandle"], "--visibility-timeout", "60")
    aws("delete-message", "--queue-url", url, "--receipt-handle", msg["ReceiptHandle"])
    entries = json.dumps([{"Id": "a", "MessageBody": "1"}, {"Id": "b", "MessageBody": "2"}])
    batch = _json(aws("send-message-batch", "--queue-url", url, "--entries", entries))
    assert sorted(e["Id"] for e in batch["Successful"]) == ["a", "b"]
    aws("purge-queue", "--queue-url", url)
    attrs = _json(aws("get-queue-attributes", "--queue-url", url, "--attribute-names",
                      "ApproximateNumberOfMessages"))
    assert attrs["Attributes"]["ApproximateNumberOfMessages"] == "0"


def test_cli_reports_sqs_errors(aws: Any) -> None:
    url = _json(aws("create-queue", "--queue-name", unique("cli")))["QueueUrl"]
    proc = aws("receive-message", "--queue-url", url, "--max-number-of-messages", "11",
               check=False)
    assert proc.returncode != 0
    assert "InvalidParameterValue" in proc.stderr
