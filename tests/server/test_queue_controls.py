"""Pausing and resuming a queue's delivery (ConveyorQueues.PauseQueue / ResumeQueue,
service/controls.py), on a real server over boto3 and raw JSON calls, on both stores.

No SQS counterpart (issue 32): what is grounded outside is what strict mode must keep
answering as Amazon SQS does. An attribute name SQS does not know is refused by
SetQueueAttributes with InvalidAttributeName, "Unknown Attribute <name>." (the answer the
attributes module already gives, LocalStack's recordings of AWS), and `All` lists only
the names of botocore's QueueAttributeName enum (service-2.json).
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from click.testing import CliRunner

from conveyor.cli import main
from tests.server.helpers import RawClient, raises_sqs, unique
from tests.server.test_workers_api import workers_call
from tests.support import (
    POSTGRES_URL,
    LongPoll,
    ServerProcess,
    isolated,
    require_postgres,
    sqs_client,
)

PAUSED = "ConveyorPaused"


def control(server: ServerProcess, action: str, url: str) -> None:
    resp = workers_call(RawClient(server.url), action, {"QueueUrl": url}, "ConveyorQueues.")
    assert resp.status == 200, resp.body


def paused(sqs: Any, url: str) -> str:
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[PAUSED])["Attributes"][PAUSED]


def test_a_paused_queue_takes_sends_delivers_nothing_and_a_resume_wakes_its_parked_poll(
        server: ServerProcess, sqs: Any) -> None:
    url = sqs.create_queue(QueueName=unique("paused"))["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="before")
    control(server, "PauseQueue", url)
    assert paused(sqs, url) == "true"
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    poll = LongPoll(server.url, url, MaxNumberOfMessages=10)
    sqs.send_message(QueueUrl=url, MessageBody="during")  # producers keep sending
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages"])["Attributes"]
    assert counts["ApproximateNumberOfMessages"] == "2"
    time.sleep(1)  # the send's wake-up came and went: the poll looked, and parked again
    assert not poll.answered()
    control(server, "ResumeQueue", url)
    assert sorted(poll.bodies()) == ["before", "during"]
    assert paused(sqs, url) == "false"


def test_pause_and_resume_are_idempotent_and_name_a_queue(server: ServerProcess,
                                                          sqs: Any) -> None:
    url = sqs.create_queue(QueueName=unique("twice"))["QueueUrl"]
    control(server, "PauseQueue", url)
    control(server, "PauseQueue", url)
    control(server, "ResumeQueue", url)
    control(server, "ResumeQueue", url)
    assert paused(sqs, url) == "false"
    raw = RawClient(server.url)
    missing = workers_call(raw, "PauseQueue", {"QueueUrl": url + "-gone"}, "ConveyorQueues.")
    assert missing.status == 400 and "QueueDoesNotExist" in missing.json()["__type"]
    unnamed = workers_call(raw, "PauseQueue", {}, "ConveyorQueues.")
    assert unnamed.status == 400


def test_poll_messages_on_several_queues_skips_a_paused_one(server: ServerProcess,
                                                            sqs: Any) -> None:
    held, open_ = (sqs.create_queue(QueueName=unique(n))["QueueUrl"] for n in ("held", "open"))
    sqs.send_message(QueueUrl=held, MessageBody="held")
    control(server, "PauseQueue", held)
    sqs.send_message(QueueUrl=open_, MessageBody="open")
    resp = workers_call(RawClient(server.url), "PollMessages", {
        "QueueUrls": [held, open_], "MaxNumberOfMessages": 10, "WaitTimeSeconds": 0})
    assert [m["Body"] for m in resp.json()["Messages"]] == ["open"]
    control(server, "ResumeQueue", held)
    resp = workers_call(RawClient(server.url), "PollMessages", {
        "QueueUrls": [held, open_], "MaxNumberOfMessages": 10, "WaitTimeSeconds": 0})
    assert [m["Body"] for m in resp.json()["Messages"]] == ["held"]


def test_strict_mode_refuses_the_attribute_through_sqs_calls_but_answers_it_by_name(
        strict_server: ServerProcess, strict_sqs: Any) -> None:
    url = strict_sqs.create_queue(QueueName=unique("strict"))["QueueUrl"]
    with raises_sqs("InvalidAttributeName") as caught:
        strict_sqs.set_queue_attributes(QueueUrl=url, Attributes={PAUSED: "true"})
    assert caught[0].response["Error"]["Message"] == f"Unknown Attribute {PAUSED}."
    with raises_sqs("InvalidAttributeName"):
        strict_sqs.create_queue(QueueName=unique("strict"), Attributes={PAUSED: "true"})
    control(strict_server, "PauseQueue", url)  # Conveyor's own call: the designed way
    everything = strict_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    model = botocore.session.get_session().get_service_model("sqs")
    aws_names = set(model.shape_for("QueueAttributeName").enum)
    assert set(everything["Attributes"]) <= aws_names  # `All` stays SQS's
    assert paused(strict_sqs, url) == "true"
    assert "Messages" not in strict_sqs.receive_message(QueueUrl=url)


def test_relaxed_mode_sets_it_as_an_attribute_and_lists_it_under_all(server: ServerProcess,
                                                                    sqs: Any) -> None:
    url = sqs.create_queue(QueueName=unique("relaxed"), Attributes={PAUSED: "true"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])[
        "Attributes"][PAUSED] == "true"
    poll = LongPoll(server.url, url)
    sqs.set_queue_attributes(QueueUrl=url, Attributes={PAUSED: "false"})  # a resume
    assert poll.bodies() == ["x"]
    with raises_sqs("InvalidAttributeValue"):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={PAUSED: "maybe"})


def test_metrics_count_paused_queues(server: ServerProcess, sqs: Any) -> None:
    def gauge() -> float:
        with urllib.request.urlopen(server.url + "/metrics") as resp:
            text = resp.read().decode()
        [line] = [ln for ln in text.splitlines() if ln.startswith("conveyor_queues_paused ")]
        return float(line.split()[1])

    url = sqs.create_queue(QueueName=unique("gauge"))["QueueUrl"]
    before = gauge()
    control(server, "PauseQueue", url)
    assert gauge() == before + 1
    control(server, "ResumeQueue", url)
    assert gauge() == before


def test_the_cli_pauses_lists_and_resumes(server: ServerProcess, sqs: Any) -> None:
    name = unique("clipause")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]

    def cli(*args: str) -> Any:
        return CliRunner().invoke(main, ["queue", *args, "--endpoint-url", server.url,
                                         "--region", "us-east-1"])

    assert cli("list", "--prefix", name).output.split()[:5] == [
        "QUEUE", "VISIBLE", "IN", "FLIGHT", "DELAYED"]
    done = cli("pause", name)
    assert done.exit_code == 0 and done.output.strip() == f"paused {name}"
    header, row = cli("list", "--prefix", name).output.splitlines()
    assert "DELIVERY" in header and row.split() == [name, "0", "0", "0", "paused"]
    assert json.loads(cli("list", "--prefix", name, "--json").output)[0][PAUSED] == "true"
    assert cli("resume", url).exit_code == 0  # by URL as well as name
    assert paused(sqs, url) == "false"


@pytest.fixture
def two_nodes(tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Two server nodes on one PostgreSQL schema."""
    require_postgres()
    store = isolated(["--store", POSTGRES_URL])
    nodes = [ServerProcess(tmp_path / name, *store, "--mode", "relaxed") for name in "ab"]
    try:
        yield nodes[0].start(), nodes[1].start()
    finally:
        for node in nodes:
            node.stop()


def test_a_pause_and_resume_on_one_node_hold_on_another(
        two_nodes: tuple[ServerProcess, ServerProcess]) -> None:
    a, b = two_nodes
    sqs_a, sqs_b = sqs_client(a.url), sqs_client(b.url)
    url = sqs_a.create_queue(QueueName=unique("nodes"))["QueueUrl"]
    control(a, "PauseQueue", url)
    sqs_a.send_message(QueueUrl=url, MessageBody="held")
    assert "Messages" not in sqs_b.receive_message(QueueUrl=url)
    poll = LongPoll(b.url, url)  # parked on node b
    control(a, "ResumeQueue", url)  # node a's resume wakes it through NOTIFY
    assert poll.bodies() == ["held"]  # answered well before its 20 s wait ends
