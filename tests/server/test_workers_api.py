"""The worker registry beside SQS (`X-Amz-Target: ConveyorWorkers.<Action>`)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from tests.server.helpers import RawClient, assert_json_error


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
