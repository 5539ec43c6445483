"""The two exceptions every SQS call can raise."""

from __future__ import annotations

# Codes that mean "try again later" rather than "the request is wrong".
_RETRYABLE_CODES = frozenset({
    "ServiceUnavailable", "InternalError", "InternalFailure", "RequestThrottled",
    "ThrottlingException", "Throttling", "AWS.SimpleQueueService.RequestThrottled",
})


class SQSError(Exception):
    """An error answer from the SQS endpoint.

    `code` is the Query-compatible code when the server sends `x-amzn-query-error`
    (e.g. `AWS.SimpleQueueService.NonExistentQueue`), else the JSON `__type` name;
    `type_name` is always the JSON `__type` name (e.g. `QueueDoesNotExist`).
    """

    def __init__(self, code: str, message: str, *, status: int, type_name: str = "",
                 sender_fault: bool = True, request_id: str = "") -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message
        self.status = status
        self.type_name = type_name or code
        self.sender_fault = sender_fault
        self.request_id = request_id

    def matches(self, *codes: str) -> bool:
        """True if either the Query code or the JSON type name is one of `codes`."""
        return self.code in codes or self.type_name in codes

    @property
    def retryable(self) -> bool:
        """True for server-side and throttling errors worth retrying as they are."""
        return self.status >= 500 or self.status == 429 or self.matches(*_RETRYABLE_CODES)


class SQSTransportError(Exception):
    """The request did not get an SQS answer: refused, reset, timed out, or not SQS at all."""

    retryable = True

    def __init__(self, action: str, endpoint: str, detail: str) -> None:
        super().__init__(f"{action} to {endpoint} failed: {detail}")
        self.action = action
        self.endpoint = endpoint
        self.detail = detail
