"""Errors raised by the temporary-queues library, and recognising SQS's own."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

# Query-compatible and JSON names of "the queue does not exist".
_MISSING_QUEUE_CODES = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})
_NAME_TAKEN_CODES = frozenset({"QueueAlreadyExists", "QueueNameExists"})


class TempQueuesError(Exception):
    """Base class of every error this library raises itself."""


class ResponseTimeout(TempQueuesError, TimeoutError):
    """No response arrived on the temporary queue within the timeout."""

    def __init__(self, queue_url: str, timeout_s: float) -> None:
        super().__init__(f"no response on {queue_url} within {timeout_s:g}s")
        self.queue_url = queue_url
        self.timeout_s = timeout_s


class InvalidVirtualQueueAttributes(TempQueuesError, ValueError):
    """A virtual queue was asked for attributes only its host queue can have."""


class ClientClosed(TempQueuesError, RuntimeError):
    """The client was shut down."""


def error_code(exc: BaseException) -> str:
    """The SQS error code of a botocore ClientError, else ''."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def is_queue_missing(exc: BaseException) -> bool:
    """True if `exc` is SQS saying the queue does not exist."""
    return error_code(exc) in _MISSING_QUEUE_CODES


def is_name_taken(exc: BaseException) -> bool:
    """True if `exc` is CreateQueue refusing an existing name with other attributes."""
    return error_code(exc) in _NAME_TAKEN_CODES


def queue_missing(sqs: Any, queue_url: str, operation: str) -> Exception:
    """The exception boto3 itself would raise for a missing queue, for drop-in callers."""
    response = {"Error": {"Code": "AWS.SimpleQueueService.NonExistentQueue",
                          "Message": f"The specified queue does not exist: {queue_url}"}}
    return sqs.exceptions.QueueDoesNotExist(response, operation)
