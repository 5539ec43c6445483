"""Delays past 15 minutes: a queue that opts in (ConveyorMaxDelaySeconds, up to its
MessageRetentionPeriod) takes DelaySeconds beyond SQS's 900 s, on itself and on its
messages; real servers over boto3, on both stores, moved in time with --dev-clock.

Grounded outside: SQS's own limit, "DelaySeconds ... Valid values: 0 to 900" (SQS API
reference, SendMessage and SetQueueAttributes; botocore's service-2.json documents the
same 15 minutes), which a queue that has not opted in keeps in either mode, with SQS's
error codes (InvalidParameterValue for a message, InvalidAttributeValue for a queue).
"""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner

from conveyor.cli import main
from tests.server.conftest import Launcher
from tests.server.helpers import (
    RawClient,
    advance_clock,
    counts,
    raises_sqs,
    receive_all,
    unique,
)
from tests.server.test_workers_api import workers_call
from tests.support import ServerProcess, sqs_client

MAX_DELAY = "ConveyorMaxDelaySeconds"
DAY_S = 24 * 3600


def set_own(server: ServerProcess, url: str, **attributes: str) -> Any:
    return workers_call(RawClient(server.url), "SetConveyorAttributes",
                        {"QueueUrl": url, "Attributes": attributes}, "ConveyorQueues.")


def test_strict_mode_keeps_900_s_until_the_queue_opts_in(strict_server: ServerProcess,
                                                          strict_sqs: Any) -> None:
    url = strict_sqs.create_queue(QueueName=unique("late"))["QueueUrl"]
    with raises_sqs("InvalidParameterValue"):
        strict_sqs.send_message(QueueUrl=url, MessageBody="x", DelaySeconds=901)
    with raises_sqs("InvalidAttributeValue"):
        strict_sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "901"})
    with raises_sqs("InvalidAttributeName"):  # SQS's call: a name SQS does not know
        strict_sqs.set_queue_attributes(QueueUrl=url, Attributes={MAX_DELAY: str(DAY_S)})

    assert set_own(strict_server, url, **{MAX_DELAY: str(DAY_S)}).status == 200
    strict_sqs.send_message(QueueUrl=url, MessageBody="x", DelaySeconds=DAY_S)
    strict_sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "7200"})
    assert counts(strict_sqs, url) == (0, 0, 1)
    with raises_sqs("InvalidParameterValue") as caught:
        strict_sqs.send_message(QueueUrl=url, MessageBody="x", DelaySeconds=DAY_S + 1)
    assert caught[0].response["Error"]["Message"].endswith(f"<= {DAY_S}.")
    assert strict_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[MAX_DELAY])[
        "Attributes"][MAX_DELAY] == str(DAY_S)


def test_the_limit_is_checked_against_retention_and_the_queue_delay(
        strict_server: ServerProcess, strict_sqs: Any) -> None:
    url = strict_sqs.create_queue(QueueName=unique("late"))["QueueUrl"]
    four_days = "345600"  # the default MessageRetentionPeriod
    too_long = set_own(strict_server, url, **{MAX_DELAY: str(int(four_days) + 1)})
    assert too_long.status == 400 and "InvalidAttributeValue" in too_long.json()["__type"]
    too_short = set_own(strict_server, url, **{MAX_DELAY: "899"})  # it only raises SQS's
    assert too_short.status == 400
    unknown = set_own(strict_server, url, VisibilityTimeout="60")  # SQS's: its own call
    assert unknown.status == 400 and "InvalidAttributeName" in unknown.json()["__type"]
    assert set_own(strict_server, url, **{MAX_DELAY: four_days}).status == 200
    strict_sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "3600"})
    with raises_sqs("InvalidAttributeValue"):  # retention below the delay limit
        strict_sqs.set_queue_attributes(QueueUrl=url, Attributes={
            "MessageRetentionPeriod": "3600"})
    lowered = set_own(strict_server, url, **{MAX_DELAY: "900"})  # below the queue's delay
    assert lowered.status == 400 and "InvalidAttributeValue" in lowered.json()["__type"]
    assert strict_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DelaySeconds"])[
        "Attributes"]["DelaySeconds"] == "3600"


def test_many_messages_scheduled_up_to_a_day_come_due_on_time(clock_server: ServerProcess
                                                              ) -> None:
    sqs = sqs_client(clock_server.url)
    url = sqs.create_queue(QueueName=unique("sched"),  # relaxed mode: as an attribute
                           Attributes={MAX_DELAY: str(DAY_S)})["QueueUrl"]
    scheduled = 3000
    delays = [(i * 28) + 60 for i in range(scheduled)]  # from 1 minute to ~23.3 hours
    for start in range(0, scheduled, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": str(delays[i]), "DelaySeconds": delays[i]}
            for i in range(start, start + 10)])
    assert counts(sqs, url) == (0, 0, scheduled)
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)

    advance_clock(clock_server.url, 12 * 3600)  # half a day on: those due, and no other
    due = sum(d <= 12 * 3600 for d in delays)
    got = receive_all(sqs, url, due)
    assert len(got) == due and all(int(m["Body"]) <= 12 * 3600 for m in got)
    assert counts(sqs, url) == (0, 0, scheduled - due)

    sqs.send_message(QueueUrl=url, MessageBody="last", DelaySeconds=DAY_S)
    advance_clock(clock_server.url, max(delays) - 12 * 3600)  # every other one's time
    assert len(receive_all(sqs, url, scheduled - due)) == scheduled - due
    assert counts(sqs, url) == (0, 0, 1)
    # 10 minutes before the last one's time (the dev clock runs on with real time too,
    # so not a second before: the test's own seconds would pass it)
    advance_clock(clock_server.url, DAY_S - (max(delays) - 12 * 3600) - 600)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    advance_clock(clock_server.url, 600)
    assert [m["Body"] for m in receive_all(sqs, url, 1)] == ["last"]


def test_a_parked_poll_gets_a_long_delayed_message_at_its_time(clock_server: ServerProcess
                                                               ) -> None:
    sqs = sqs_client(clock_server.url)
    url = sqs.create_queue(QueueName=unique("park"), Attributes={MAX_DELAY: "7200"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=3600)
    advance_clock(clock_server.url, 3599)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    advance_clock(clock_server.url, 1)
    got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5).get("Messages", [])
    assert [m["Body"] for m in got] == ["later"]


def test_long_delayed_messages_are_purged_like_delayed_ones(server: ServerProcess,
                                                           sqs: Any) -> None:
    url = sqs.create_queue(QueueName=unique("purge"), Attributes={MAX_DELAY: str(DAY_S)})[
        "QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="a", DelaySeconds=DAY_S)
    sqs.send_message(QueueUrl=url, MessageBody="b", DelaySeconds=60)
    assert counts(sqs, url) == (0, 0, 2)
    sqs.purge_queue(QueueUrl=url)
    assert counts(sqs, url) == (0, 0, 0)


def test_scheduled_messages_survive_a_restart(launch: Launcher) -> None:
    server = launch("--mode", "relaxed", "--dev-clock")
    sqs = sqs_client(server.url)
    url = sqs.create_queue(QueueName=unique("restart"), Attributes={
        MAX_DELAY: str(2 * DAY_S), "DelaySeconds": str(DAY_S)})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="tomorrow")  # the queue's own day
    sqs.send_message(QueueUrl=url, MessageBody="the day after", DelaySeconds=2 * DAY_S)
    server.restart()  # the dev clock starts from now again
    assert counts(sqs, url) == (0, 0, 2)
    advance_clock(server.url, DAY_S + 1)
    assert [m["Body"] for m in receive_all(sqs, url, 1)] == ["tomorrow"]
    advance_clock(server.url, DAY_S)
    assert [m["Body"] for m in receive_all(sqs, url, 1)] == ["the day after"]
    assert counts(sqs, url) == (0, 0, 0)


def test_the_cli_sets_the_limit_in_strict_mode(strict_server: ServerProcess,
                                               strict_sqs: Any) -> None:
    name = unique("clidelay")
    url = strict_sqs.create_queue(QueueName=name)["QueueUrl"]
    done = CliRunner().invoke(main, ["queue", "set", name, "-a", f"{MAX_DELAY}=7200",
                                     "-a", "DelaySeconds=3600", "--endpoint-url",
                                     strict_server.url, "--region", "us-east-1"])
    assert done.exit_code == 0, done.output
    got = strict_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        MAX_DELAY, "DelaySeconds"])["Attributes"]
    assert got == {MAX_DELAY: "7200", "DelaySeconds": "3600"}
