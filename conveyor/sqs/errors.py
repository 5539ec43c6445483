"""SQS errors: one exception per wire code, and the one table that maps them to the wire.

Service code raises these by name; only the protocol layer reads `code`, `query_code`
and `status` to render them in the JSON or the Query shape.
"""

from __future__ import annotations


class SqsError(Exception):
    """An error SQS reports to the client.

    `code` is the JSON protocol's `__type` suffix (`com.amazonaws.sqs#<code>`),
    `query_code` the Query protocol's `<Code>` (also sent in `x-amzn-query-error`).
    """

    code = "InternalError"
    query_code = ""
    status = 400
    sender_fault = True
    default_message = ""
    action: str | None = None  # set when the request's action was known, for logs and metrics

    def __init__(self, message: str | None = None) -> None:
        self.message = message if message is not None else self.default_message
        super().__init__(self.message)

    @classmethod
    def wire_query_code(cls) -> str:
        return cls.query_code or cls.code


class InvalidParameterValue(SqsError):
    code = "InvalidParameterValue"


class MissingParameter(SqsError):
    code = "MissingParameter"


class InvalidAttributeName(SqsError):
    code = "InvalidAttributeName"


class InvalidAttributeValue(SqsError):
    code = "InvalidAttributeValue"


class InvalidMessageContents(SqsError):
    code = "InvalidMessageContents"


class QueueDoesNotExist(SqsError):
    code = "QueueDoesNotExist"
    query_code = "AWS.SimpleQueueService.NonExistentQueue"
    default_message = "The specified queue does not exist."


class QueueNameExists(SqsError):
    code = "QueueNameExists"
    query_code = "QueueAlreadyExists"


class QueueDeletedRecently(SqsError):
    code = "QueueDeletedRecently"
    query_code = "AWS.SimpleQueueService.QueueDeletedRecently"


class PurgeQueueInProgress(SqsError):
    code = "PurgeQueueInProgress"
    query_code = "AWS.SimpleQueueService.PurgeQueueInProgress"


class ReceiptHandleIsInvalid(SqsError):
    code = "ReceiptHandleIsInvalid"


class MessageNotInflight(SqsError):
    code = "MessageNotInflight"
    query_code = "AWS.SimpleQueueService.MessageNotInflight"
    default_message = "The message referred to isn't in flight."


class BatchEntryIdsNotDistinct(SqsError):
    code = "BatchEntryIdsNotDistinct"
    query_code = "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"


class TooManyEntriesInBatchRequest(SqsError):
    code = "TooManyEntriesInBatchRequest"
    query_code = "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"


class EmptyBatchRequest(SqsError):
    code = "EmptyBatchRequest"
    query_code = "AWS.SimpleQueueService.EmptyBatchRequest"


class InvalidBatchEntryId(SqsError):
    code = "InvalidBatchEntryId"
    query_code = "AWS.SimpleQueueService.InvalidBatchEntryId"


class BatchRequestTooLong(SqsError):
    code = "BatchRequestTooLong"
    query_code = "AWS.SimpleQueueService.BatchRequestTooLong"


class UnsupportedOperation(SqsError):
    code = "UnsupportedOperation"
    query_code = "AWS.SimpleQueueService.UnsupportedOperation"


class OverLimit(SqsError):
    code = "OverLimit"


class ResourceNotFoundException(SqsError):
    code = "ResourceNotFoundException"


class InvalidAction(SqsError):
    code = "UnknownOperationException"
    query_code = "InvalidAction"


class MissingAction(SqsError):
    code = "MissingAction"
    default_message = "No action was supplied with this request."


class MalformedRequest(SqsError):
    """The body cannot be decoded at all (bad JSON, wrong content type, bad encoding)."""

    code = "SerializationException"
    query_code = "MalformedQueryString"


class InvalidClientTokenId(SqsError):
    code = "InvalidClientTokenId"
    status = 403
    default_message = "The security token included in the request is invalid."


class SignatureDoesNotMatch(SqsError):
    code = "SignatureDoesNotMatch"
    status = 403
    default_message = (
        "The request signature we calculated does not match the signature you provided. "
        "Check your AWS Secret Access Key and signing method. "
        "Consult the service documentation for details."
    )


class MissingAuthenticationToken(SqsError):
    code = "MissingAuthenticationToken"
    status = 403
    default_message = "Request is missing Authentication Token"


class IncompleteSignature(SqsError):
    """The signature's parts are missing or malformed (SQS API reference, Common Errors)."""

    code = "IncompleteSignature"
    default_message = "The request signature does not conform to AWS standards."


class AccessDenied(SqsError):
    """Signed by a known key that may not do this. SQS answers 403 with code AccessDenied
    and names the endpoint (recorded in aws/aws-sdk-php#188 and bbc/sqs-consumer#225)."""

    code = "AccessDenied"
    status = 403
    default_message = "Access to the resource is denied."


class RequestTooLarge(SqsError):
    code = "RequestEntityTooLarge"
    status = 413
    default_message = "Request body is larger than the server accepts."


class InternalError(SqsError):
    code = "InternalFailure"
    query_code = "InternalError"
    status = 500
    sender_fault = False
    default_message = "We encountered an internal error. Please try again."


class ServiceUnavailable(SqsError):
    """The store cannot be reached for now (its database restarts, or is down).

    503 ServiceUnavailable rather than 500 InternalFailure: SQS's own table of common
    errors (SQS Developer Guide, API 2007-05-01, Query_QueryErrors.html) gives
    ServiceUnavailable, HTTP 503, for a server SQS needs being unavailable for a while,
    to be resent after a short wait, and the later versions of that page tell clients to
    be ready to retry any 503; today's CommonErrors.html keeps InternalFailure (500) for
    an unknown error or failure. botocore's SQS model declares neither shape, and its
    retry rules retry both (data/_retry.json `service_unavailable`; retries/standard.py's
    transient statuses 500/502/503/504), so clients retry either way; 503 also tells
    them, a load balancer and /metrics that this is an outage that passes, not a bug.
    """

    code = "ServiceUnavailable"
    status = 503
    sender_fault = False
    default_message = "The service is unavailable right now. Please try again shortly."


def invalid_value(value: object, name: str, reason: str) -> InvalidParameterValue:
    """SQS's usual wording for a parameter that is present but wrong."""
    return InvalidParameterValue(f"Value {value} for parameter {name} is invalid. Reason: {reason}")
