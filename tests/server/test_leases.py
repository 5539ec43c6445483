"""The lease API beside SQS (`X-Amz-Target: ConveyorLease.<Action>`), on every store."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from tests.server.helpers import RawClient, assert_json_error
from tests.support import ServerProcess


def lease_call(raw: RawClient, action: str, payload: dict[str, Any]) -> Any:
    body = json.dumps(payload).encode()
    headers = {"Content-Type": "application/x-amz-json-1.0",
               "X-Amz-Target": f"ConveyorLease.{action}"}
    return raw.request("POST", "/", body, headers)


@pytest.fixture
def name() -> str:
    return "cron/" + uuid.uuid4().hex[:8]


def test_one_holder_at_a_time(raw: RawClient, name: str) -> None:
    first = lease_call(raw, "AcquireLease", {"Name": name, "Holder": "a", "TtlSeconds": 30})
    assert first.status == 200 and first.json()["Lease"]["Holder"] == "a"
    refused = lease_call(raw, "AcquireLease", {"Name": name, "Holder": "b", "TtlSeconds": 30})
    assert_json_error(refused, "ConditionalCheckFailedException")
    again = lease_call(raw, "AcquireLease", {"Name": name, "Holder": "a", "TtlSeconds": 30})
    assert again.json()["Lease"]["Version"] == first.json()["Lease"]["Version"] + 1


def test_update_is_conditional_on_version_and_holder(raw: RawClient, name: str) -> None:
    lease = lease_call(raw, "AcquireLease",
                       {"Name": name, "Holder": "a", "TtlSeconds": 30}).json()["Lease"]
    update = {"Name": name, "Holder": "a", "Version": lease["Version"], "TtlSeconds": 30,
              "Data": '{"backup": 1}'}
    written = lease_call(raw, "UpdateLease", update)
    assert written.json()["Lease"]["Data"] == '{"backup": 1}'
    assert_json_error(lease_call(raw, "UpdateLease", update), "ConditionalCheckFailedException")
    other = {**update, "Holder": "b", "Version": written.json()["Lease"]["Version"]}
    assert_json_error(lease_call(raw, "UpdateLease", other), "ConditionalCheckFailedException")


def test_data_survives_a_handover(raw: RawClient, name: str) -> None:
    lease = lease_call(raw, "AcquireLease",
                       {"Name": name, "Holder": "a", "TtlSeconds": 30}).json()["Lease"]
    lease_call(raw, "UpdateLease", {"Name": name, "Holder": "a", "Version": lease["Version"],
                                    "TtlSeconds": 30, "Data": "last=0900"})
    assert lease_call(raw, "ReleaseLease", {"Name": name, "Holder": "a"}).status == 200
    taken = lease_call(raw, "AcquireLease", {"Name": name, "Holder": "b", "TtlSeconds": 30})
    assert taken.json()["Lease"]["Holder"] == "b"
    assert taken.json()["Lease"]["Data"] == "last=0900"


def test_an_expired_lease_can_be_taken(private_server: ServerProcess, name: str) -> None:
    raw = RawClient(private_server.url)
    lease_call(raw, "AcquireLease", {"Name": name, "Holder": "a", "TtlSeconds": 0.2})
    time.sleep(0.4)
    taken = lease_call(raw, "AcquireLease", {"Name": name, "Holder": "b", "TtlSeconds": 30})
    assert taken.status == 200 and taken.json()["Lease"]["Holder"] == "b"
    assert lease_call(raw, "GetLease", {"Name": name}).json()["Lease"]["Holder"] == "b"


@pytest.mark.parametrize("payload", [
    {"Name": "", "Holder": "a", "TtlSeconds": 5},
    {"Name": "x", "Holder": "", "TtlSeconds": 5},
    {"Name": "x", "Holder": "a", "TtlSeconds": 0},
    {"Name": "x", "Holder": "a", "TtlSeconds": "5"},
    {"Name": 5, "Holder": "a", "TtlSeconds": 5},
])
def test_bad_lease_requests(raw: RawClient, payload: dict[str, Any]) -> None:
    assert_json_error(lease_call(raw, "AcquireLease", payload), "InvalidParameterValue")


def test_unknown_lease_action(raw: RawClient) -> None:
    assert_json_error(lease_call(raw, "StealLease", {}), "UnknownOperationException")
