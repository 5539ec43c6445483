"""The asyncio SQS client against the real queue server: answers and errors."""

from __future__ import annotations

import asyncio

import pytest

from conveyor.client import SQSClient, SQSError, SQSTransportError
from tests.support import free_port


def test_round_trip_and_batches(server, queue_name):
    async def scenario() -> None:
        async with SQSClient(server.url, region="eu-west-1") as sqs:
            url = await sqs.create_queue(queue_name)
            await sqs.send_message(url, "héllo", attributes={
                "a": {"DataType": "String", "StringValue": "x"}})
            [message] = await sqs.receive_messages(url, wait_time_s=1, visibility_timeout_s=30)
            assert message.body == "héllo"
            assert message.receive_count == 1
            assert message.message_attributes["a"]["StringValue"] == "x"
            result = await sqs.change_message_visibility_batch(
                url, [("a", message.receipt_handle, 0), ("b", "bogus", 0)])
            assert result.successful == ["a"]
            assert [f.id for f in result.failed] == ["b"]
            deleted = await sqs.delete_message_batch(url, [("0", message.receipt_handle)])
            assert deleted.successful == ["0"]

    asyncio.run(scenario())


def test_error_answer_carries_both_codes(server):
    async def scenario() -> None:
        async with SQSClient(server.url) as sqs:
            with pytest.raises(SQSError) as caught:
                await sqs.get_queue_url("no-such-queue-here")
        error = caught.value
        assert error.type_name == "QueueDoesNotExist"
        assert error.code == "AWS.SimpleQueueService.NonExistentQueue"
        assert error.matches("QueueDoesNotExist")
        assert error.sender_fault
        assert error.status == 400
        assert not error.retryable

    asyncio.run(scenario())


def test_transport_error_chains_its_cause():
    async def scenario() -> None:
        async with SQSClient(f"http://127.0.0.1:{free_port()}") as sqs:
            with pytest.raises(SQSTransportError) as caught:
                await sqs.get_queue_url("x")
        assert caught.value.__cause__ is not None
        assert caught.value.action == "GetQueueUrl"

    asyncio.run(scenario())
