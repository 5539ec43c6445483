"""SQS errors: one exception per SQS error, and the one table that maps them to the wire.

Service code raises these by name; only the protocol layer reads the wire facts of each
(`code`, `query_code`, `status`, `sender_fault`) to render them in the JSON or Query shape.

Where the facts come from
-------------------------
SQS speaks two protocols and is `awsQueryCompatible` (botocore's SQS model, metadata): a
JSON error carries the error's JSON name in `__type` *and* its Query-era code in the
`x-amzn-query-error: <code>;<Sender|Receiver>` header, which botocore, the AWS SDKs for
JavaScript v3, Java v2 and Go v2 report as the error's code (botocore: parsers.py,
`_do_query_compatible_error_parse`: `Error.Code` = the header's code, `Error.QueryErrorCode`
= the `__type` name). A Query error carries the Query code in `<Code>`.

- JSON names: the shape names of botocore's current model (`exception: true` shapes,
  data/sqs/2012-11-05/service-2.json.gz, botocore 1.44), and for the two errors the model
  does not declare, the names AWS sends: `InvalidParameterValueException` and
  `MissingRequiredParameterException` (LocalStack's recordings against AWS, file
  tests/aws/services/sqs/test_sqs.snapshot.json, recorded 14-11-2023 with the JSON
  protocol: `"Code": "InvalidParameterValue", "QueryErrorCode":
  "InvalidParameterValueException"` in test_send_oversized_message and others,
  `"Code": "MissingParameter", "QueryErrorCode": "MissingRequiredParameterException"` in
  test_posting_to_fifo_requires_deduplicationid_group_id).
- Query codes, HTTP statuses, sender/receiver: the `error` traits of botocore's last
  Query-protocol SQS model (botocore 1.34, e.g. `QueueDoesNotExist`:
  `AWS.SimpleQueueService.NonExistentQueue`, 400; `PurgeQueueInProgress`: 403; `OverLimit`:
  403; `ResourceNotFoundException`: 404), checked against the same recordings
  (`QueueNameExists` ↔ `QueueAlreadyExists`, `PurgeQueueInProgress` 403, the batch errors'
  `AWS.SimpleQueueService.*` codes) and the move-task recordings
  (tests/aws/services/sqs/test_sqs_move_task.snapshot.json: ResourceNotFoundException, 404).
  The current JSON model dropped those traits; the wire kept them.
- The current Smithy model carries the Query codes and statuses again (`awsQueryError`
  traits; read in the AWS SDK for JavaScript v3's generated schema, @aws-sdk/client-sqs
  3.1175, dist-es/schemas/schemas_0.js, pinned by tests/compat): the same as above, and
  InvalidAddress and ReceiptHandleIsInvalid 404.
- Whole JSON answers (status, `__type` with its namespace, x-amzn-query-error) recorded from
  AWS in yavosh/pail, test/diff/testdata/golden/sqs-*.json: the request layer's errors
  (InvalidParameterValueException, MissingRequiredParameterException,
  UnknownOperationException, SerializationException, the signature errors) carry
  `com.amazon.coral.service#`, SQS's own `com.amazonaws.sqs#`; ReceiptHandleIsInvalid is
  HTTP 404. The JSON body holds `__type` and `message` only (botocore's own test of SQS's
  errors, tests/functional/test_sqs.py, stubs exactly that).
"""

from __future__ import annotations

from typing import NamedTuple


class Wire(NamedTuple):
    """How one error looks on the wire."""

    json_type: str  # the JSON protocol's `__type` name (<json_namespace>#<json_type>)
    query_code: str  # the Query protocol's <Code>, and the code in x-amzn-query-error
    status: int
    sender_fault: bool
    json_namespace: str = "com.amazonaws.sqs"  # SQS's own shapes


_S, _R = True, False  # sender's fault / receiver's (the server's) fault
_NQ = "AWS.SimpleQueueService."
# The errors AWS's request layer raises before SQS's code runs (validation, routing,
# decoding, signatures) carry this namespace in `__type`, not SQS's: recorded from AWS in
# yavosh/pail, test/diff/testdata/golden/sqs-errors.json and sqs-auth-errors.json
# ("__type: com.amazon.coral.service#InvalidParameterValueException", ...).
_CORAL = "com.amazon.coral.service"

# THE table: error class name → its wire facts (sources in the module docstring).
WIRE: dict[str, Wire] = {
    # the model's shapes ------------------------------------------------------------------
    "BatchEntryIdsNotDistinct":     Wire("BatchEntryIdsNotDistinct", _NQ + "BatchEntryIdsNotDistinct", 400, _S),  # noqa: E501
    "BatchRequestTooLong":          Wire("BatchRequestTooLong", _NQ + "BatchRequestTooLong", 400, _S),  # noqa: E501
    "EmptyBatchRequest":            Wire("EmptyBatchRequest", _NQ + "EmptyBatchRequest", 400, _S),
    "InvalidAddress":               Wire("InvalidAddress", "InvalidAddress", 404, _S),
    "InvalidAttributeName":         Wire("InvalidAttributeName", "InvalidAttributeName", 400, _S),
    "InvalidAttributeValue":        Wire("InvalidAttributeValue", "InvalidAttributeValue", 400, _S),
    "InvalidBatchEntryId":          Wire("InvalidBatchEntryId", _NQ + "InvalidBatchEntryId", 400, _S),  # noqa: E501
    "InvalidMessageContents":       Wire("InvalidMessageContents", "InvalidMessageContents", 400, _S),  # noqa: E501
    "MessageNotInflight":           Wire("MessageNotInflight", _NQ + "MessageNotInflight", 400, _S),
    "OverLimit":                    Wire("OverLimit", "OverLimit", 403, _S),
    "PurgeQueueInProgress":         Wire("PurgeQueueInProgress", _NQ + "PurgeQueueInProgress", 403, _S),  # noqa: E501
    "QueueDeletedRecently":         Wire("QueueDeletedRecently", _NQ + "QueueDeletedRecently", 400, _S),  # noqa: E501
    "QueueDoesNotExist":            Wire("QueueDoesNotExist", _NQ + "NonExistentQueue", 400, _S),
    "QueueNameExists":              Wire("QueueNameExists", "QueueAlreadyExists", 400, _S),
    # 404, as AWS answers a handle it never issued (recording: pail's sqs-visibility.json,
    # "delete-garbage-handle"; ballerina-platform/module-ballerinax-aws.sqs's tests against
    # SQS, testDeleteMessageWithInvalidReceiptHandle); the model gives no status.
    "ReceiptHandleIsInvalid":       Wire("ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", 404, _S),  # noqa: E501
    "ResourceNotFoundException":    Wire("ResourceNotFoundException", "ResourceNotFoundException", 404, _S),  # noqa: E501
    "TooManyEntriesInBatchRequest": Wire("TooManyEntriesInBatchRequest", _NQ + "TooManyEntriesInBatchRequest", 400, _S),  # noqa: E501
    "UnsupportedOperation":         Wire("UnsupportedOperation", _NQ + "UnsupportedOperation", 400, _S),  # noqa: E501
    # SQS's errors the model leaves out (recorded) ------------------------------------------
    "InvalidParameterValue":        Wire("InvalidParameterValueException", "InvalidParameterValue", 400, _S, _CORAL),  # noqa: E501
    "MissingParameter":             Wire("MissingRequiredParameterException", "MissingParameter", 400, _S, _CORAL),  # noqa: E501
    # A batch entry with an empty body fails with this code alone (the tests of
    # ballerina-platform/module-ballerinax-aws.sqs against SQS,
    # testSendMessageBatchPartialFailure: Code "EmptyValue", SenderFault true).
    "EmptyValue":                   Wire("EmptyValue", "EmptyValue", 400, _S),
    # the protocol's own -------------------------------------------------------------------
    # An X-Amz-Target SQS does not know (JSON), an Action it does not know (Query): the
    # Query wording is LocalStack's AWS-validated test_invalid_action_raises_exception.
    "InvalidAction":                Wire("UnknownOperationException", "InvalidAction", 400, _S, _CORAL),  # noqa: E501
    # A Query request without an Action: AWS answers 404 and a bare
    # <UnknownOperationException/> (test_get_without_query_returns_unknown_operation).
    "MissingAction":                Wire("UnknownOperationException", "UnknownOperationException", 404, _S, _CORAL),  # noqa: E501
    # A body that cannot be decoded, or is no JSON object: pail's recordings "malformed-json",
    # "body-array", "body-string" (MalformedInput).
    "MalformedRequest":             Wire("SerializationException", "MalformedInput", 400, _S, _CORAL),  # noqa: E501
    # The signature errors' JSON names as recorded (pail's sqs-auth-errors.json); with no
    # credentials at all AWS answers AccessDenied ("no-credentials").
    "InvalidClientTokenId":         Wire("UnrecognizedClientException", "InvalidClientTokenId", 403, _S, _CORAL),  # noqa: E501
    "SignatureDoesNotMatch":        Wire("InvalidSignatureException", "SignatureDoesNotMatch", 403, _S, _CORAL),  # noqa: E501
    "MissingAuthenticationToken":   Wire("AccessDeniedException", "AccessDenied", 403, _S, _CORAL),  # noqa: E501
    "IncompleteSignature":          Wire("IncompleteSignatureException", "IncompleteSignature", 400, _S, _CORAL),  # noqa: E501
    "AccessDenied":                 Wire("AccessDeniedException", "AccessDenied", 403, _S, _CORAL),  # noqa: E501
    "RequestTooLarge":              Wire("RequestEntityTooLarge", "RequestEntityTooLarge", 413, _S),  # noqa: E501
    "InternalError":                Wire("InternalFailure", "InternalError", 500, _R),
    "ServiceUnavailable":           Wire("ServiceUnavailable", "ServiceUnavailable", 503, _R),
    # Conveyor's own APIs beside SQS (service/leases.py): DynamoDB's name for a lost race --
    "ConditionalCheckFailed":       Wire("ConditionalCheckFailedException", "ConditionalCheckFailedException", 400, _S),  # noqa: E501
}


class SqsError(Exception):
    """An error SQS reports to the client; its wire facts come from WIRE.

    `code` is the JSON protocol's `__type` name (com.amazonaws.sqs#<code>), `query_code`
    the Query protocol's `<Code>` and the code of `x-amzn-query-error` (what SDKs report).
    `query_message`, when a class sets it, is the default wording of the Query protocol
    where AWS words it differently there.
    """

    code = "InternalFailure"
    query_code = "InternalError"
    status = 500
    sender_fault = False
    json_namespace = "com.amazonaws.sqs"
    default_message = ""
    query_message: str | None = None
    action: str | None = None  # set when the request's action was known, for logs and metrics

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        wire = WIRE.get(cls.__name__)
        if wire is None:  # every error goes on the wire as the table says, or not at all
            raise TypeError(f"{cls.__name__} has no row in conveyor.sqs.errors.WIRE")
        cls.code, cls.query_code, cls.status, cls.sender_fault, cls.json_namespace = wire

    def __init__(self, message: str | None = None) -> None:
        self.message = message if message is not None else self.default_message
        self.defaulted = message is None
        super().__init__(self.message)

    def message_for(self, protocol: str) -> str:
        """The message as AWS words it in `protocol` ("json" or "query")."""
        if protocol == "query" and self.defaulted and self.query_message is not None:
            return self.query_message
        return self.message


class InvalidParameterValue(SqsError):
    """A parameter is present but wrong (see invalid_value for SQS's usual wording)."""


class MissingParameter(SqsError):
    """A required parameter is missing."""


class EmptyValue(SqsError):
    """A batch entry's MessageBody is empty."""


class InvalidAttributeName(SqsError):
    """The attribute name is unknown (to this queue type)."""


class InvalidAttributeValue(SqsError):
    """A queue attribute value is invalid."""


class InvalidMessageContents(SqsError):
    """The message contains characters outside the allowed set."""


class QueueDoesNotExist(SqsError):
    """The queue does not exist (or was deleted).

    AWS words it differently per protocol (LocalStack's recordings, test_non_existent_queue,
    14-11-2023: JSON "The specified queue does not exist.", Query "The specified queue does
    not exist for this wsdl version.")."""

    default_message = "The specified queue does not exist."
    query_message = "The specified queue does not exist for this wsdl version."


class InvalidAddress(SqsError):
    """The queue URL or id names no queue this endpoint could hold."""


class QueueNameExists(SqsError):
    """A queue of that name exists with other attribute values."""


class QueueDeletedRecently(SqsError):
    """A queue of that name was deleted less than 60 seconds ago."""


class PurgeQueueInProgress(SqsError):
    """The queue was purged less than 60 seconds ago."""


class ReceiptHandleIsInvalid(SqsError):
    """The receipt handle is not one SQS issued for this queue."""


class MessageNotInflight(SqsError):
    default_message = "The message referred to isn't in flight."


class BatchEntryIdsNotDistinct(SqsError):
    """Two batch entries have the same Id."""


class TooManyEntriesInBatchRequest(SqsError):
    """A batch has more entries than SQS allows."""


class EmptyBatchRequest(SqsError):
    """A batch has no entries."""


class InvalidBatchEntryId(SqsError):
    """A batch entry's Id is not alphanumerics, hyphens and underscores, 1 to 80."""


class BatchRequestTooLong(SqsError):
    """A batch's messages (bodies and attributes) are longer than SQS allows."""


class UnsupportedOperation(SqsError):
    """The operation is not supported here."""


class OverLimit(SqsError):
    """The action would exceed a limit (in-flight messages, tags...)."""


class ResourceNotFoundException(SqsError):
    """A resource named by ARN or handle (move tasks) does not exist."""


class InvalidAction(SqsError):
    """The action is unknown, or not valid for this endpoint."""


class MissingAction(SqsError):
    default_message = "No action was supplied with this request."


class MalformedRequest(SqsError):
    """The body cannot be decoded at all (bad JSON, wrong content type, bad encoding)."""


class InvalidClientTokenId(SqsError):
    default_message = "The security token included in the request is invalid."


class SignatureDoesNotMatch(SqsError):
    default_message = (
        "The request signature we calculated does not match the signature you provided. "
        "Check your AWS Secret Access Key and signing method. "
        "Consult the service documentation for details."
    )


class MissingAuthenticationToken(SqsError):
    default_message = "Request is missing Authentication Token"


class IncompleteSignature(SqsError):
    """The signature's parts are missing or malformed (SQS API reference, Common Errors)."""

    default_message = "The request signature does not conform to AWS standards."


class AccessDenied(SqsError):
    """Signed by a known key that may not do this. SQS answers 403 with code AccessDenied
    and names the endpoint (recorded in aws/aws-sdk-php#188 and bbc/sqs-consumer#225)."""

    default_message = "Access to the resource is denied."


class RequestTooLarge(SqsError):
    default_message = "Request body is larger than the server accepts."


class InternalError(SqsError):
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

    default_message = "The service is unavailable right now. Please try again shortly."


def invalid_value(value: object, name: str, reason: str) -> InvalidParameterValue:
    """SQS's usual wording for a parameter that is present but wrong."""
    return InvalidParameterValue(f"Value {value} for parameter {name} is invalid. Reason: {reason}")
