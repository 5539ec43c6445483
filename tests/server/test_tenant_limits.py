"""Tenant limits (service/tenants.py, rules.py): a cap on each message group's messages in
flight (ConveyorGroupConcurrency) and receive rates, queue-wide and per group, with a
burst (ConveyorReceiveRate / ConveyorGroupReceiveRate); real servers over boto3 and raw
JSON calls, on both stores, moved in time with --dev-clock where a rate refills.

No SQS counterpart (issue 32): what is grounded outside is what strict mode must keep
answering as Amazon SQS does. SetQueueAttributes refuses a name SQS does not know with
InvalidAttributeName, "Unknown Attribute <name>." (LocalStack's recordings of AWS, as the
attributes module answers), and a bad value with InvalidAttributeValue ("Invalid value for
the parameter <name>."), the two errors botocore's model lists for SetQueueAttributes.
"""

from __future__ import annotations

import urllib.request
from collections import Counter
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.server.helpers import RawClient, advance_clock, raises_sqs, unique
from tests.server.test_workers_api import workers_call
from tests.support import LongPoll, ServerProcess, sqs_client

CAP = "ConveyorGroupConcurrency"
RATE, BURST = "ConveyorReceiveRate", "ConveyorReceiveBurst"
GROUP_RATE, GROUP_BURST = "ConveyorGroupReceiveRate", "ConveyorGroupReceiveBurst"


def set_own(server: ServerProcess, url: str, **attributes: str) -> Any:
    return workers_call(RawClient(server.url), "SetConveyorAttributes",
                        {"QueueUrl": url, "Attributes": attributes}, "ConveyorQueues.")


def poll(server: ServerProcess, url: str, **more: Any) -> dict[str, Any]:
    resp = workers_call(RawClient(server.url), "PollMessages", {
        "QueueUrl": url, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 0,
        "MessageSystemAttributeNames": ["MessageGroupId"], **more})
    assert resp.status == 200, resp.body
    return resp.json()


def send(sqs: Any, url: str, group: str | None, count: int) -> None:
    for start in range(0, count, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"{group}-{i}",
             **({"MessageGroupId": group} if group else {})}
            for i in range(start, min(count, start + 10))])


def by_group(messages: list[dict[str, Any]]) -> Counter[str | None]:
    return Counter(m.get("Attributes", {}).get("MessageGroupId") for m in messages)


def receive(sqs: Any, url: str) -> list[dict[str, Any]]:
    return sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                               MessageSystemAttributeNames=["MessageGroupId"]
                               ).get("Messages", [])


def test_strict_mode_refuses_the_limits_as_sqs_refuses_unknown_names(
        strict_server: ServerProcess, strict_sqs: Any) -> None:
    url = strict_sqs.create_queue(QueueName=unique("lim"))["QueueUrl"]
    for name in (CAP, RATE, GROUP_RATE):
        with raises_sqs("InvalidAttributeName") as caught:
            strict_sqs.set_queue_attributes(QueueUrl=url, Attributes={name: "3"})
        assert caught[0].response["Error"]["Message"] == f"Unknown Attribute {name}."
    assert set_own(strict_server, url, **{CAP: "3", RATE: "50", BURST: "10"}).status == 200
    got = strict_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[CAP, RATE, BURST])
    assert got["Attributes"] == {CAP: "3", RATE: "50", BURST: "10"}
    for name, value in ((CAP, "-1"), (CAP, "x"), (RATE, "-2"), (RATE, "0.0001"),
                        (GROUP_BURST, "1.5")):
        bad = set_own(strict_server, url, **{name: value})
        assert bad.status == 400 and "InvalidAttributeValue" in bad.json()["__type"], value
    fifo = strict_sqs.create_queue(QueueName=unique("lim") + ".fifo",
                                   Attributes={"FifoQueue": "true"})["QueueUrl"]
    refused = set_own(strict_server, fifo, **{CAP: "2"})  # a FIFO group has its cap of 1
    assert refused.status == 400 and "InvalidAttributeName" in refused.json()["__type"]


def test_a_capped_group_gets_no_more_in_flight_while_other_groups_are_served(
        server: ServerProcess, sqs: Any) -> None:
    url = sqs.create_queue(QueueName=unique("cap"))["QueueUrl"]
    assert set_own(server, url, **{CAP: "3"}).status == 200
    send(sqs, url, "noisy", 40)
    send(sqs, url, "quiet", 2)
    send(sqs, url, None, 12)
    taken: list[dict[str, Any]] = []
    for _ in range(6):
        taken += receive(sqs, url)
    counted = by_group(taken)
    assert counted["noisy"] == 3 and counted["quiet"] == 2 and counted[None] == 12
    assert by_group(receive(sqs, url)) == Counter()  # only the noisy group's are left
    first = next(m for m in taken if m["Attributes"]["MessageGroupId"] == "noisy")
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    assert by_group(receive(sqs, url)) == Counter({"noisy": 1})  # one place came free
    assert by_group(receive(sqs, url)) == Counter()


def test_a_group_whose_messages_come_back_visible_gets_its_places_back(
        clock_server: ServerProcess) -> None:
    sqs = sqs_client(clock_server.url)
    url = sqs.create_queue(QueueName=unique("capvis"),
                           Attributes={CAP: "2", "VisibilityTimeout": "60"})["QueueUrl"]
    send(sqs, url, "g", 5)
    assert by_group(receive(sqs, url)) == Counter({"g": 2})
    assert by_group(receive(sqs, url)) == Counter()
    advance_clock(clock_server.url, 61)  # both visible again: the group has 2 places
    assert by_group(receive(sqs, url)) == Counter({"g": 2})


def test_a_delete_wakes_a_long_poll_parked_on_a_capped_group(server: ServerProcess,
                                                             sqs: Any) -> None:
    url = sqs.create_queue(QueueName=unique("capwake"), Attributes={CAP: "1"})["QueueUrl"]
    send(sqs, url, "g", 2)
    [first] = receive(sqs, url)
    waiting = LongPoll(server.url, url, MaxNumberOfMessages=10)
    assert not waiting.answered()
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    assert waiting.bodies() == ["g-1"]


def test_a_queue_rate_hands_out_its_burst_then_says_when_to_come_back(
        clock_server: ServerProcess) -> None:
    sqs = sqs_client(clock_server.url)
    url = sqs.create_queue(QueueName=unique("rate"))["QueueUrl"]
    # One message every 10 s, 4 at once: the test's own seconds never add a token.
    assert set_own(clock_server, url, **{RATE: "0.1", BURST: "4"}).status == 200
    send(sqs, url, None, 20)
    first = poll(clock_server, url)
    assert len(first["Messages"]) == 4 and 0 < first["RetryAfterSeconds"] <= 40
    empty = poll(clock_server, url)
    assert "Messages" not in empty and 0 < empty["RetryAfterSeconds"] <= 40
    assert receive(sqs, url) == []  # ReceiveMessage too, with SQS's answer alone
    advance_clock(clock_server.url, 20)  # two tokens back
    assert len(receive(sqs, url)) == 2
    advance_clock(clock_server.url, 100)  # full again: the burst, not more
    assert len(receive(sqs, url)) == 4


def test_a_group_rate_holds_each_group_to_its_own_bucket(clock_server: ServerProcess) -> None:
    sqs = sqs_client(clock_server.url)
    url = sqs.create_queue(QueueName=unique("grate"), Attributes={
        GROUP_RATE: "0.1", GROUP_BURST: "2"})["QueueUrl"]
    send(sqs, url, "a", 10)
    send(sqs, url, "b", 10)
    first = poll(clock_server, url)
    assert by_group(first["Messages"]) == Counter({"a": 2, "b": 2})
    again = poll(clock_server, url)
    assert "Messages" not in again and 0 < again["RetryAfterSeconds"] <= 20
    advance_clock(clock_server.url, 10)
    assert by_group(receive(sqs, url)) == Counter({"a": 1, "b": 1})


def test_a_long_poll_held_back_by_the_rate_is_answered_when_a_token_comes(
        server: ServerProcess, sqs: Any) -> None:
    url = sqs.create_queue(QueueName=unique("ratepark"))["QueueUrl"]
    assert set_own(server, url, **{RATE: "2", BURST: "1"}).status == 200
    send(sqs, url, None, 2)
    assert len(receive(sqs, url)) == 1
    # Parked, not answered at its wait's end: the token's time ends its sleep.
    waiting = LongPoll(server.url, url, MaxNumberOfMessages=10)
    assert waiting.bodies() == ["None-1"]



# The per-queue figures of the limits on /metrics (conveyor/server/metrics.py).
LIMIT_METRICS = ("conveyor_queue_group_concurrency", "conveyor_queue_receive_rate",
                 "conveyor_queue_receive_burst", "conveyor_queue_group_receive_rate",
                 "conveyor_queue_group_receive_burst", "conveyor_queue_max_delay_seconds",
                 "conveyor_queue_receives_held_back_total")


def limit_metrics(server: ServerProcess, queue_url: str) -> dict[str, float]:
    """The queue's limit samples on /metrics, by name (and `limit` label, in brackets)."""
    queue = queue_url.rsplit("/", 1)[1]
    with urllib.request.urlopen(server.url + "/metrics") as resp:
        families = text_string_to_metric_families(resp.read().decode())
    return {s.name + (f"[{s.labels['limit']}]" if "limit" in s.labels else ""): s.value
            for family in families for s in family.samples
            if s.labels.get("queue") == queue and s.name in LIMIT_METRICS}


def test_metrics_show_each_queues_limits_and_count_the_receives_they_held_back(
        server: ServerProcess, sqs: Any) -> None:
    capped = sqs.create_queue(QueueName=unique("mcap"), Attributes={CAP: "1"})["QueueUrl"]
    rated = sqs.create_queue(QueueName=unique("mrate"), Attributes={
        RATE: "0.01", GROUP_RATE: "5", GROUP_BURST: "2",
        "ConveyorMaxDelaySeconds": "3600"})["QueueUrl"]
    plain = sqs.create_queue(QueueName=unique("mplain"))["QueueUrl"]
    send(sqs, capped, "a", 3)
    send(sqs, rated, None, 3)
    send(sqs, plain, None, 3)

    assert len(receive(sqs, capped)) == 1  # the cap: one of group a in flight
    assert len(receive(sqs, capped)) == 0
    assert len(receive(sqs, rated)) == 1  # the rate's burst: its one second, 1 message
    assert len(receive(sqs, rated)) == 0  # the next token in 100 s
    assert len(receive(sqs, plain)) == 3

    assert limit_metrics(server, capped) == {
        "conveyor_queue_group_concurrency": 1,
        "conveyor_queue_receives_held_back_total[group_concurrency]": 2}
    assert limit_metrics(server, rated) == {
        "conveyor_queue_receive_rate": 0.01, "conveyor_queue_receive_burst": 1,
        "conveyor_queue_group_receive_rate": 5, "conveyor_queue_group_receive_burst": 2,
        "conveyor_queue_max_delay_seconds": 3600,
        "conveyor_queue_receives_held_back_total[receive_rate]": 2}
    assert limit_metrics(server, plain) == {}
