"""`conveyor queue ...` and `conveyor message ...` against a real server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

from conveyor.cli import main
from conveyor.client.client import SQSClient
from tests.server.helpers import unique
from tests.support import ServerProcess


@pytest.fixture
def cli(server: ServerProcess) -> Any:
    def run(group: str, *args: str, stdin: str | None = None) -> Result:
        return CliRunner().invoke(main, [group, *args, "--endpoint-url", server.url,
                                         "--region", "us-east-1"], input=stdin)
    return run


def test_queues_from_creation_to_deletion(cli: Any, sqs: Any) -> None:
    dlq_name, name = unique("cli-dlq"), unique("cli")
    dlq_url = cli("queue", "create", dlq_name).output.strip()
    created = cli("queue", "create", name, "--dead-letter", dlq_name, "--max-receive-count", "2",
                  "-a", "VisibilityTimeout=45", "--tag", "team=billing")
    assert created.exit_code == 0, created.output
    url = created.output.strip()
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["VisibilityTimeout"] == "45"
    assert json.loads(attributes["RedrivePolicy"])["maxReceiveCount"] == 2
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "billing"}
    fifo = cli("queue", "create", unique("cli") + ".fifo").output.strip()
    assert sqs.get_queue_attributes(QueueUrl=fifo, AttributeNames=["FifoQueue"])[
        "Attributes"]["FifoQueue"] == "true"

    sqs.send_message(QueueUrl=url, MessageBody="one")
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=300)
    listed = cli("queue", "list", "--prefix", name)
    assert listed.exit_code == 0
    header, row = listed.output.splitlines()
    assert header.split()[:4] == ["QUEUE", "VISIBLE", "IN", "FLIGHT"]
    assert row.split() == [name, "1", "0", "1", dlq_name, "after", "2", "receives"]
    [entry] = json.loads(cli("queue", "list", "--prefix", name, "--json").output)
    assert entry["QueueUrl"] == url and entry["ApproximateNumberOfMessagesDelayed"] == "1"

    shown = json.loads(cli("queue", "show", url, "--json").output)  # by URL as well as name
    assert shown["Attributes"]["QueueArn"].endswith(f":{name}")
    assert shown["Tags"] == {"team": "billing"}

    assert cli("queue", "purge", name).exit_code == 0
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"])["Attributes"]
    assert counts == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesDelayed": "0"}
    assert cli("queue", "delete", name, stdin="n\n").exit_code == 1  # asked, and refused
    assert cli("queue", "delete", name, "--yes").exit_code == 0
    assert url not in sqs.list_queues(QueueNamePrefix=name).get("QueueUrls", [])
    assert dlq_url in sqs.list_queues(QueueNamePrefix=dlq_name)["QueueUrls"]


def test_list_of_many_queues(cli: Any, sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = unique("many")
    urls = [sqs.create_queue(QueueName=f"{prefix}-{n:02d}")["QueueUrl"] for n in range(40)]
    for n, url in enumerate(urls):
        for _ in range(n % 3):
            sqs.send_message(QueueUrl=url, MessageBody="x")
    listed = json.loads(cli("queue", "list", "--prefix", prefix, "--json").output)
    assert [e["QueueUrl"] for e in listed] == urls
    assert [int(e["ApproximateNumberOfMessages"]) for e in listed] == [n % 3 for n in range(40)]

    # a queue deleted between ListQueues and its GetQueueAttributes is left out, not an error
    asked = SQSClient.get_queue_attributes

    async def deleted_first(client: SQSClient, url: str, *args: Any) -> dict[str, str]:
        if url == urls[7]:
            await client.delete_queue(url)
        return await asked(client, url, *args)

    monkeypatch.setattr(SQSClient, "get_queue_attributes", deleted_first)
    result = cli("queue", "list", "--prefix", prefix, "--json")
    assert result.exit_code == 0, result.output
    assert [e["QueueUrl"] for e in json.loads(result.output)] == urls[:7] + urls[8:]


def test_messages_sent_received_and_redriven(cli: Any, sqs: Any) -> None:
    dlq_name, name = unique("cli-dlq"), unique("cli")
    cli("queue", "create", dlq_name)
    url = cli("queue", "create", name, "--dead-letter", dlq_name, "--max-receive-count", "1",
              "-a", "VisibilityTimeout=0").output.strip()
    sent = cli("message", "send", name, "héllo", "-a", "kind=greeting")
    assert sent.exit_code == 0, sent.output
    assert cli("message", "send", name, stdin='{"from": "stdin"}').exit_code == 0

    received = cli("message", "receive", name, "--max", "10", "--json")
    messages = [json.loads(line) for line in received.output.splitlines()]
    assert sorted(m["Body"] for m in messages) == ["héllo", '{"from": "stdin"}']
    assert [m["MessageId"] for m in messages if m["Body"] == "héllo"] == [sent.output.strip()]
    assert any(m["MessageAttributes"].get("kind", {}).get("StringValue") == "greeting"
               for m in messages)

    # Received once already: the next receive moves both to the dead-letter queue.
    assert "no messages" in cli("message", "receive", name, "--max", "10").output
    moved = cli("queue", "redrive", dlq_name)
    assert moved.exit_code == 0, moved.output
    assert moved.output.splitlines()[-1] == "completed: moved 2 of 2"

    text = cli("message", "receive", name, "--max", "10", "--delete")
    assert "--- " in text.output and "héllo" in text.output
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)


def test_errors_are_one_clear_line(cli: Any) -> None:
    name = unique("nope")
    missing = cli("message", "send", name, "x")
    assert missing.exit_code == 1
    assert f"Error: there is no queue named {name} at http://127.0.0.1:" in missing.output
    assert cli("queue", "create", "bad name!").exit_code == 1
    bad = cli("queue", "create", unique("cli"), "-a", "VisibilityTimeout")
    assert bad.exit_code == 2 and "expected NAME=VALUE" in bad.output
    assert "Traceback" not in missing.output + bad.output

    unreachable = CliRunner().invoke(main, ["queue", "list", "--endpoint-url",
                                            "http://127.0.0.1:1"])
    assert unreachable.exit_code == 1
    assert "cannot reach http://127.0.0.1:1" in unreachable.output


def test_errors_name_the_queue_they_are_about(cli: Any, server: ServerProcess) -> None:
    """Issue 33: which queue does not exist, asked before any confirmation; a forgotten
    message body explained in the CLI's terms, not as the wire's missing parameter."""
    dlq = unique("nosuch-dlq")
    created = cli("queue", "create", unique("q2"), "--dead-letter", dlq)
    assert created.exit_code == 1 and f"no queue named {dlq}" in created.output

    gone = unique("nosuch")
    deleted = cli("queue", "delete", gone, stdin="y\n")
    assert deleted.exit_code == 1 and f"no queue named {gone}" in deleted.output
    assert "Delete" not in deleted.output  # not asked about a queue that is not there
    by_url = cli("queue", "delete", f"{server.url}/000000000000/{gone}", stdin="y\n")
    assert by_url.exit_code == 1 and "Delete" not in by_url.output
    assert f"{gone}: QueueDoesNotExist" in by_url.output

    queue = cli("queue", "create", unique("body")).output.strip()
    empty = cli("message", "send", queue, stdin="")
    assert empty.exit_code == 2 and "the message body is empty" in empty.output
    assert "MissingRequiredParameter" not in empty.output


def test_a_messages_attempts_are_printed_readably(cli: Any, sqs: Any, raw: Any) -> None:
    """`conveyor message attempts QUEUE MESSAGE_ID`: what a worker recorded with it
    (ConveyorWorkers.RecordAttempts), oldest first, the app's answer indented below."""
    from tests.server.test_attempts_api import entry, record

    name = unique("cli-att")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    message_id = sqs.send_message(QueueUrl=url, MessageBody="x")["MessageId"]
    handle = sqs.receive_message(QueueUrl=url, VisibilityTimeout=60)["Messages"][0][
        "ReceiptHandle"]
    at_ms = 1_796_000_000_123  # 2026-11-30 00:53:20.123 UTC
    record(raw, url, entry(handle, at_ms, "a", AnswerHead="Traceback:\nZeroDivisionError",
                           WorkerId="host:42:ab12cd34"),
           {"Id": "b", "ReceiptHandle": handle, "At": at_ms + 1000, "Reason": "refused"})

    shown = cli("message", "attempts", name, message_id)
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines() == [
        "#1  2026-11-30 00:53:20.123 UTC  http-500 (HTTP 500)  worker host:42:ab12cd34",
        "    Traceback:",
        "    ZeroDivisionError",
        "#2  2026-11-30 00:53:21.123 UTC  refused"]
    as_json = cli("message", "attempts", url, message_id, "--json")
    assert [json.loads(line)["Reason"] for line in as_json.output.splitlines()] == [
        "http-500", "refused"]

    missing = cli("message", "attempts", name, "no-such-message")
    assert missing.exit_code == 1 and "No message no-such-message" in missing.output
    assert "Traceback" not in missing.output
