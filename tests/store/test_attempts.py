"""Attempt records (service/attempts.py) on every store kind: the store's `amend` finds a
message wherever it is (memory or SQLite, its queue or its dead-letter queue) and
`find_message` reads no further than it is told."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from conveyor.sqs.errors import InvalidParameterValue
from tests.store.conformance import CTX, Sqs, run
from tests.store.helpers import KINDS


def _attempt(handle: str, at: int, entry_id: str = "0") -> dict[str, Any]:
    return {"Id": entry_id, "ReceiptHandle": handle, "At": at, "Reason": "http-500",
            "Status": 500}


async def _record(sqs: Sqs, url: str, *entries: dict[str, Any]) -> dict[str, Any]:
    return await sqs.call("RecordAttempts", QueueUrl=url, Entries=list(entries))


async def _ats(sqs: Sqs, url: str, message_id: str) -> list[int]:
    answer = await sqs.call("GetMessageAttempts", QueueUrl=url, MessageId=message_id)
    return [a["At"] for a in answer["Attempts"]]


@pytest.mark.parametrize("kind", KINDS)
def test_attempts_follow_a_message_into_its_dead_letter_queue(kind: str, tmp_path: Path
                                                              ) -> None:
    async def scenario(sqs: Sqs) -> None:
        dlq = await sqs.create("dlq")
        url = await sqs.create("q", RedrivePolicy=json.dumps(
            {"deadLetterTargetArn": await sqs.arn(dlq), "maxReceiveCount": 1}))
        await sqs.send(url, "poison")
        [got] = await sqs.receive(url, VisibilityTimeout=0)
        assert await _record(sqs, url, _attempt(got["ReceiptHandle"], 1)) == {
            "Successful": [{"Id": "0"}]}
        assert await sqs.receive(url) == []  # moved
        assert await _record(sqs, url, _attempt(got["ReceiptHandle"], 2)) == {
            "Successful": [{"Id": "0"}]}  # recorded after the move: kept all the same
        assert await _ats(sqs, dlq, got["MessageId"]) == [1, 2]
        # Another queue's handle names no message of this one's dead letters.
        other = await sqs.create("other")
        failed = await _record(sqs, other, _attempt(got["ReceiptHandle"], 3))
        assert failed["Failed"][0]["Code"] == "ReceiptHandleIsInvalid"

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", KINDS)
def test_attempts_are_kept_before_and_after_a_checkpoint(kind: str, tmp_path: Path) -> None:
    """The journal holds a fresh message in memory; a peek (the console) moves it into
    SQLite: a record lands wherever it is."""
    async def scenario(sqs: Sqs) -> None:
        url = await sqs.create("q")
        await sqs.send(url, "x")
        [got] = await sqs.receive(url, VisibilityTimeout=60)
        await _record(sqs, url, _attempt(got["ReceiptHandle"], 1))
        await sqs.service.peek(await sqs.service.queue(CTX, url), 10)
        await _record(sqs, url, _attempt(got["ReceiptHandle"], 2))
        assert await _ats(sqs, url, got["MessageId"]) == [1, 2]

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", KINDS)
def test_a_message_is_looked_for_among_the_oldest_only(kind: str, tmp_path: Path) -> None:
    """Limits.attempts_scan_messages bounds what a read costs (no index by message id)."""
    async def scenario(sqs: Sqs) -> None:
        sqs.service.limits = dataclasses.replace(sqs.service.limits, attempts_scan_messages=3)
        url = await sqs.create("q")
        ids = []
        for n in range(5):
            sent = await sqs.call("SendMessage", QueueUrl=url, MessageBody=str(n))
            ids.append(sent["MessageId"])
            sqs.advance(1)
        assert await _ats(sqs, url, ids[2]) == []
        with pytest.raises(InvalidParameterValue):
            await _ats(sqs, url, ids[3])

    run(kind, tmp_path, scenario)
