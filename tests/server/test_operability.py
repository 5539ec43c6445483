"""Health and Prometheus metrics endpoints."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.server.conftest import Launcher, QueueFactory
from tests.server.helpers import RawClient, queue_name_of, unique
from tests.support import ServerProcess, free_port, sqs_client


def _get(url: str) -> tuple[int, str, str]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()


def _action_count(server: ServerProcess, action: str) -> float:
    """Sum of every counter sample labelled with this action (any outcome)."""
    _, _, text = _get(server.url + "/metrics")
    total = 0.0
    for family in text_string_to_metric_families(text):
        if family.type != "counter":
            continue
        for sample in family.samples:
            if sample.name.endswith("_total") and sample.labels.get("action") == action:
                total += sample.value
    return total


def test_health(server: ServerProcess) -> None:
    status, _, _ = _get(server.url + "/health")
    assert status == 200


def test_a_plain_get_of_the_root_says_what_answers_where(server: ServerProcess) -> None:
    """A browser goes to the console; anything else gets a short text. SQS's own answer to
    a GET without an action (a signed one, or one with a query) is unchanged: see
    test_aws_recorded.test_get_without_action and test_query_protocol.test_missing_action."""
    status, content_type, body = _get(server.url + "/")
    assert status == 200 and content_type.startswith("text/plain")
    assert "/console" in body and "/metrics" in body
    request = urllib.request.Request(server.url + "/", headers={"Accept": "text/html"})
    with urllib.request.urlopen(request, timeout=10) as resp:  # follows the redirect
        assert resp.url.startswith(server.url + "/console")


def test_metrics_is_prometheus_text(server: ServerProcess) -> None:
    status, content_type, text = _get(server.url + "/metrics")
    assert status == 200
    assert content_type.startswith("text/plain")
    families = list(text_string_to_metric_families(text))
    assert families
    assert any(f.type == "histogram" for f in families), "no latency histogram"


METRICS_TOKEN = "scrape-Token.~+/9="  # every kind of character RFC 6750's b64token allows


def _status(url: str, **headers: str) -> tuple[int, Message]:
    """The status and headers (names case-insensitive) of a GET, errors included."""
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, resp.headers
    except urllib.error.HTTPError as error:
        return error.code, error.headers


def test_metrics_token_needs_a_bearer(launch: Launcher, tmp_path: Path) -> None:
    """RFC 6750: a missing token gets a bare Bearer challenge (§3.1: no error code), a
    wrong one error="invalid_token" (§3.1), both with 401; the right one the metrics."""
    config = tmp_path / "conveyor.yaml"
    config.write_text(f"metrics_token: '{METRICS_TOKEN}'\n")
    server = launch("--access-key", "AKIDM:secret", "--config", str(config))
    url = server.url + "/metrics"
    status, headers = _status(url)
    assert status == 401
    assert headers["WWW-Authenticate"] == 'Bearer realm="conveyor"'
    for wrong in ("Bearer nope", f"Bearer {METRICS_TOKEN}x", f"Bearer {METRICS_TOKEN[:-1]}",
                  "Bearer ", "Bearer", "Bearer \u00e9t\u00e9"):
        status, headers = _status(url, Authorization=wrong)
        assert status == 401, wrong
        assert headers["WWW-Authenticate"] == 'Bearer realm="conveyor", error="invalid_token"'
    for other_scheme in (f"Basic {METRICS_TOKEN}", METRICS_TOKEN):
        status, headers = _status(url, Authorization=other_scheme)
        assert status == 401
        assert headers["WWW-Authenticate"] == 'Bearer realm="conveyor"'
    for right in (f"Bearer {METRICS_TOKEN}", f"bearer {METRICS_TOKEN}"):
        status, headers = _status(url, Authorization=right)
        assert status == 200, right
        assert headers["Content-Type"].startswith("text/plain")
    assert _status(server.url + "/health")[0] == 200
    assert "/metrics is open" not in server.log()
    assert "Traceback" not in server.log()


def test_metrics_port_serves_metrics_apart(launch: Launcher) -> None:
    port = free_port()
    server = launch("--metrics-port", str(port))
    apart = f"http://127.0.0.1:{port}"
    assert _status(server.url + "/metrics")[0] == 404
    status, headers = _status(apart + "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain")
    assert _status(server.url + "/health")[0] == 200
    assert _status(apart + "/health")[0] == 200
    assert _status(apart + "/console")[0] == 404  # nothing else there
    assert f"metrics at http://127.0.0.1:{port}/metrics" in server.log()


def test_the_journal_reports_what_it_holds(server: ServerProcess, store_args: list[str],
                                           sqs: Any, make_queue: QueueFactory) -> None:
    """The embedded store's journal shows its backlog and checkpoints; PostgreSQL has no
    journal."""
    def journal() -> dict[str, float]:
        text = _get(server.url + "/metrics")[2]
        return {f.name: f.samples[0].value for f in text_string_to_metric_families(text)
                if f.name.startswith("conveyor_journal_")}

    url = make_queue()
    for _ in range(3):  # a checkpoint (every 5 s) may fall between the send and the scrape
        sqs.send_message(QueueUrl=url, MessageBody="held")
        figures = journal()
        if store_args or figures["conveyor_journal_held_messages"]:
            break
    if store_args:
        assert figures == {}
        return
    assert figures["conveyor_journal_held_messages"] >= 1
    assert figures["conveyor_journal_bytes"] > len("held")
    sqs.purge_queue(QueueUrl=url)  # a purge checkpoints first
    after = journal()
    assert after["conveyor_journal_checkpoints"] > figures["conveyor_journal_checkpoints"]
    assert after["conveyor_journal_checkpoint_seconds"] > 0
    assert after["conveyor_journal_checkpoint_failures"] == 0


def test_requests_counted_by_action(server: ServerProcess, sqs: Any,
                                    make_queue: QueueFactory) -> None:
    url = make_queue()
    before_send = _action_count(server, "SendMessage")
    before_receive = _action_count(server, "ReceiveMessage")
    for _ in range(3):
        sqs.send_message(QueueUrl=url, MessageBody="counted")
    sqs.receive_message(QueueUrl=url)
    assert _action_count(server, "SendMessage") >= before_send + 3
    assert _action_count(server, "ReceiveMessage") >= before_receive + 1


def test_errors_counted_by_action(server: ServerProcess, sqs: Any) -> None:
    before = _action_count(server, "GetQueueUrl")
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName="no-such-queue-for-metrics")
    assert _action_count(server, "GetQueueUrl") >= before + 1


def test_malformed_requests_counted_by_their_action(server: ServerProcess,
                                                    raw: RawClient) -> None:
    """A request rejected while decoding is still counted under the action it named, in
    both protocols; a name that is no SQS action is not (no label per made-up name)."""
    before = _action_count(server, "ChangeMessageVisibility")
    rejected = raw.json_call("ChangeMessageVisibility", {"QueueUrl": 7})
    assert rejected.status == 400
    rejected = raw.query({"Action": "ChangeMessageVisibility", "VisibilityTimeout": "soon"})
    assert rejected.status == 400
    assert _action_count(server, "ChangeMessageVisibility") == before + 2
    assert raw.json_call("NoSuchAction", {}).status == 400
    assert _action_count(server, "NoSuchAction") == 0


def test_queue_gauges(server: ServerProcess, sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue()
    name = url.rsplit("/", 1)[1]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    sqs.send_message(QueueUrl=url, MessageBody="y")
    _, _, text = _get(server.url + "/metrics")
    values = [s.value for f in text_string_to_metric_families(text) if f.type == "gauge"
              for s in f.samples if name in s.labels.values()]
    assert 2.0 in values, "no per-queue gauge shows the 2 visible messages"


def test_json_logs_say_what_happened_to_each_message(launch: Launcher) -> None:
    server = launch("--mode", "relaxed", "--log-level", "debug",
                    env={"CONVEYOR_LOG_FORMAT": "json"})
    sqs = sqs_client(server.url)
    dlq = sqs.create_queue(QueueName=unique("log-dlq"))["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    name = unique("log")
    url = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1}), "VisibilityTimeout": "0"})[
        "QueueUrl"]
    message_id = sqs.send_message(QueueUrl=url, MessageBody="x")["MessageId"]
    sqs.receive_message(QueueUrl=url)
    sqs.receive_message(QueueUrl=url)  # received once already: dead-lettered

    lines = [json.loads(line) for line in server.log().splitlines() if line.strip()]
    about = {line["message"].split(" ")[0]: line for line in lines
             if line.get("message_id") == message_id}
    assert set(about) == {"sent", "received", "dead-lettered"}
    assert about["received"]["receive_count"] == 1
    assert about["dead-lettered"]["queue"] == name
    assert about["dead-lettered"]["level"] == "info"
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)


def test_metrics_count_messages_per_queue_as_the_console_charts_them(
        server: ServerProcess, sqs: Any, make_queue: QueueFactory) -> None:
    url = make_queue(prefix="activity")
    name = queue_name_of(url)
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": "m"} for i in range(3)])
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2)["Messages"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
    _, _, text = _get(server.url + "/metrics")
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("queue") == name and sample.name.endswith("_total"):
                found[sample.name] = sample.value
    assert found == {"conveyor_queue_messages_sent_total": 3,
                     "conveyor_queue_messages_received_total": 2,
                     "conveyor_queue_messages_deleted_total": 1,
                     "conveyor_queue_messages_dead_lettered_total": 0,
                     "conveyor_queue_attempts_failed_total": 0}
