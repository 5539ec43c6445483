"""The worker registry beside SQS (`X-Amz-Target: ConveyorWorkers.<Action>`)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from tests.server.helpers import RawClient, assert_json_error, unique


def workers_call(raw: RawClient, action: str, payload: Any, prefix: str = "ConveyorWorkers."
                 ) -> Any:
    headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": prefix + action}
    return raw.request("POST", "/", json.dumps(payload).encode(), headers)


def listed(raw: RawClient) -> dict[str, dict[str, Any]]:
    resp = workers_call(raw, "ListWorkers", {})
    assert resp.status == 200, resp.body
    return {w["WorkerId"]: w for w in resp.json()["Workers"]}


def test_an_announced_worker_is_listed_until_its_announcement_runs_out(raw: RawClient) -> None:
    worker_id = f"host:1:{uuid.uuid4().hex[:8]}"
    status = {"status": "ok", "in_flight": 3, "app": "http://localhost:8000/"}
    resp = workers_call(raw, "AnnounceWorker", {"WorkerId": worker_id, "Queue": "jobs",
                                                "TtlSeconds": 30, "Status": status})
    assert resp.status == 200, resp.body
    first = listed(raw)[worker_id]
    assert (first["Kind"], first["Region"], first["Queue"], first["Status"]) == (
        "worker", "us-east-1", "jobs", status)

    status["in_flight"] = 0
    workers_call(raw, "AnnounceWorker", {"WorkerId": worker_id, "Queue": "jobs",
                                         "TtlSeconds": 0.3, "Status": status})
    again = listed(raw)[worker_id]
    assert again["Status"]["in_flight"] == 0
    assert again["FirstSeen"] == first["FirstSeen"] and again["LastSeen"] >= first["LastSeen"]
    time.sleep(0.5)
    assert worker_id not in listed(raw)


@pytest.mark.parametrize("payload", [
    {}, {"WorkerId": "w", "Queue": "q"}, {"WorkerId": "", "Queue": "q", "TtlSeconds": 5},
    {"WorkerId": "w w", "Queue": "q", "TtlSeconds": 5},
    {"WorkerId": "w", "Queue": "q", "TtlSeconds": 0},
    {"WorkerId": "w", "Queue": "q", "TtlSeconds": True},
    {"WorkerId": "w", "Queue": "q", "TtlSeconds": 3601},
    {"WorkerId": "w", "Queue": "q", "TtlSeconds": "5"},
    {"WorkerId": "w", "Queue": "q", "TtlSeconds": 5, "Status": [1]},
    {"WorkerId": "w", "Queue": "q", "TtlSeconds": 5, "Status": {"x": "y" * 20_000}},
    {"WorkerId": 7, "Queue": "q", "TtlSeconds": 5},
    {"WorkerId": "w", "Queue": "q", "TtlSeconds": 5, "Kind": "robot"},
    {"WorkerId": "w", "Queue": "q", "TtlSeconds": 5, "Kind": ["worker"]},
])
def test_bad_announcements_are_refused(raw: RawClient, payload: dict[str, Any]) -> None:
    assert_json_error(workers_call(raw, "AnnounceWorker", payload), "InvalidParameterValue")


def test_the_registry_is_not_part_of_the_sqs_api(raw: RawClient) -> None:
    assert_json_error(workers_call(raw, "ListWorkers", {}, prefix="AmazonSQS."))
    assert_json_error(workers_call(raw, "ListWorkers", {}, prefix="ConveyorLease."))
    assert_json_error(workers_call(raw, "DeleteQueue", {"QueueUrl": "x"}))
    resp = raw.query({"Action": "ListWorkers"})
    assert resp.status == 400 and b"Traceback" not in resp.body


def _announce(raw: RawClient, worker_id: str, kind: str = "worker") -> Any:
    resp = workers_call(raw, "AnnounceWorker", {"WorkerId": worker_id, "Queue": "jobs",
                                                "TtlSeconds": 30, "Status": {}, "Kind": kind})
    assert resp.status == 200, resp.body
    return resp.json()


def test_a_drain_request_rides_back_on_the_next_announcement(raw: RawClient) -> None:
    """DrainWorker is answered on the worker's next AnnounceWorker (`Drain: true`), and on
    a PollMessages answer that carried one; only a live worker can be asked."""
    worker_id, other = f"host:1:{uuid.uuid4().hex[:8]}", f"host:2:{uuid.uuid4().hex[:8]}"
    assert _announce(raw, worker_id) == {} and _announce(raw, other) == {}
    assert workers_call(raw, "DrainWorker", {"WorkerId": worker_id}).status == 200
    assert _announce(raw, worker_id) == {"Drain": True}
    assert _announce(raw, other) == {}  # only the one asked

    queue = raw.json_call("CreateQueue", {"QueueName": unique("poll")}).json()["QueueUrl"]
    poll = workers_call(raw, "PollMessages", {
        "QueueUrl": queue, "WaitTimeSeconds": 0,
        "Announce": {"WorkerId": worker_id, "Queue": "jobs", "TtlSeconds": 30, "Status": {}}})
    assert poll.status == 200 and poll.json() == {"Drain": True}

    assert_json_error(workers_call(raw, "DrainWorker", {"WorkerId": "host:9:nobody"}),
                      "InvalidParameterValue")
    assert_json_error(workers_call(raw, "DrainWorker", {"WorkerId": "no spaces please"}),
                      "InvalidParameterValue")


def test_scaling_decisions_are_kept_newest_first_and_bounded(raw: RawClient) -> None:
    queue = f"scaled-{uuid.uuid4().hex[:8]}"
    for n in range(55):
        resp = workers_call(raw, "RecordScalingDecision", {
            "Queue": queue, "Decision": {"current": n, "desired": n + 1, "reason": "backlog"}})
        assert resp.status == 200, resp.body
    decisions = workers_call(raw, "ListScalingDecisions", {"Queue": queue}).json()["Decisions"]
    assert [d["current"] for d in decisions] == list(range(54, 4, -1))  # the last 50
    assert all(isinstance(d["At"], int) for d in decisions)
    assert workers_call(raw, "ListScalingDecisions", {"Queue": "never-scaled"}).json() == {
        "Decisions": []}
    for bad in ({"Queue": queue}, {"Queue": queue, "Decision": [1]},
                {"Queue": queue, "Decision": {"x": "y" * 5000}}, {"Decision": {}}):
        assert_json_error(workers_call(raw, "RecordScalingDecision", bad),
                          "InvalidParameterValue")
