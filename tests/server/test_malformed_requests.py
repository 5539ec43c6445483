"""Seeded random breakage of valid requests, in both wire protocols.

Each request starts as a valid call of some action and has one to three things broken:
a field set to a value of the wrong type, size or charset, a field dropped or added, the
body cut short or replaced, the action misspelt. Whatever arrives, the answer is a
success or an SQS error in the request's own protocol: never a 5xx, never a traceback on
the wire or in the server's log, and the server keeps answering. Seeds are fixed, so a
failure replays.
"""

from __future__ import annotations

import copy
import json
import random
from collections import Counter
from typing import Any

from tests.server.helpers import RawClient, RawResponse, strip_ns, unique
from tests.support import ServerProcess

REQUESTS_PER_PROTOCOL = 1500
BIG = "b" * 300_000

# Values that each break some rule: types, ranges, empty, huge, control and non-BMP
# characters, lone surrogates, paths and ARNs that lead nowhere.
NASTY: list[Any] = [None, 0, -1, 2**64, 1.5, True, "", " ", BIG, "\u0000", "\ud800",
                    "😀" * 50, "x" * 81, [], {}, [1, "a"], {"a": {"b": None}}, "../..",
                    "http://host/000000000000/", "arn:aws:sqs:us-east-1:1:", "%zz", "-1",
                    "99999999999999999999", "NaN", "All"]


def _nasty(rnd: random.Random) -> Any:
    return copy.deepcopy(rnd.choice(NASTY))  # a fresh one: requests are changed in place


def _valid_calls(queue_url: str, queue_arn: str) -> dict[str, dict[str, Any]]:
    """One valid request per action, in the JSON protocol's shape."""
    q = {"QueueUrl": queue_url}
    attrs = {"a": {"DataType": "String", "StringValue": "v"}}
    return {
        "CreateQueue": {"QueueName": unique("fz"), "Attributes": {"VisibilityTimeout": "5"},
                        "tags": {"k": "v"}},
        "GetQueueUrl": {"QueueName": queue_url.rsplit("/", 1)[-1]},
        "ListQueues": {"QueueNamePrefix": "fz", "MaxResults": 5},
        "GetQueueAttributes": {**q, "AttributeNames": ["All"]},
        "SetQueueAttributes": {**q, "Attributes": {"DelaySeconds": "0"}},
        "SendMessage": {**q, "MessageBody": "x", "DelaySeconds": 0, "MessageAttributes": attrs,
                        "MessageSystemAttributes": {"AWSTraceHeader": {
                            "DataType": "String", "StringValue": "Root=1"}}},
        "SendMessageBatch": {**q, "Entries": [{"Id": "1", "MessageBody": "x",
                                               "MessageAttributes": attrs}]},
        "ReceiveMessage": {**q, "MaxNumberOfMessages": 2, "VisibilityTimeout": 0,
                           "WaitTimeSeconds": 0, "MessageAttributeNames": ["All"],
                           "MessageSystemAttributeNames": ["All"]},
        "DeleteMessage": {**q, "ReceiptHandle": "handle"},
        "DeleteMessageBatch": {**q, "Entries": [{"Id": "1", "ReceiptHandle": "handle"}]},
        "ChangeMessageVisibility": {**q, "ReceiptHandle": "handle", "VisibilityTimeout": 5},
        "ChangeMessageVisibilityBatch": {**q, "Entries": [
            {"Id": "1", "ReceiptHandle": "handle", "VisibilityTimeout": 5}]},
        "TagQueue": {**q, "Tags": {"k": "v"}},
        "UntagQueue": {**q, "TagKeys": ["k"]},
        "ListQueueTags": q,
        "ListDeadLetterSourceQueues": {**q, "MaxResults": 5},
        "StartMessageMoveTask": {"SourceArn": queue_arn, "MaxNumberOfMessagesPerSecond": 5},
        "ListMessageMoveTasks": {"SourceArn": queue_arn, "MaxResults": 5},
        "CancelMessageMoveTask": {"TaskHandle": "dGFzaw=="},
        "AddPermission": {**q, "Label": "l", "AWSAccountIds": ["1"], "Actions": ["*"]},
        "RemovePermission": {**q, "Label": "l"},
    }


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path into a nested request, e.g. ("Entries", 0, "Id")."""
    found: list[tuple] = [prefix] if prefix else []
    items = value.items() if isinstance(value, dict) else (
        enumerate(value) if isinstance(value, list) else [])
    for key, child in items:
        found += _paths(child, (*prefix, key))
    return found


def _break(rnd: random.Random, request: dict[str, Any]) -> None:
    """Break one thing in `request`, in place."""
    paths = _paths(request)
    if not paths:  # everything already dropped
        request["QueueUrl"] = _nasty(rnd)
        return
    path = rnd.choice(paths)
    parent: Any = request
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    kind = rnd.random()
    if kind < 0.6:
        parent[last] = _nasty(rnd)
    elif kind < 0.8 and isinstance(parent, dict):
        del parent[last]
    elif isinstance(parent, dict):
        parent[rnd.choice(["Unknown", "", "queueurl", last + " "])] = _nasty(rnd)
    elif isinstance(parent, list):
        parent.extend(copy.deepcopy(parent[:1]) * rnd.choice([1, 10, 11]))  # duplicates, too many


def _json_request(rnd: random.Random, action: str, request: dict[str, Any]) -> tuple[str, bytes]:
    for _ in range(rnd.randint(1, 3)):
        _break(rnd, request)
    body = json.dumps(request).encode()
    roll = rnd.random()
    if roll < 0.05:
        body = body[:rnd.randrange(len(body) + 1)]  # cut short
    elif roll < 0.1:
        body = json.dumps(_nasty(rnd)).encode()  # not an object at all
    elif roll < 0.12:
        body = b"\xff\xfe" + body  # not UTF-8
    if rnd.random() < 0.05:
        action = rnd.choice(["", action.lower(), action + "X", "Send Message", "\u00e9"])
    return action, body


def _query_params(rnd: random.Random, action: str,
                  request: dict[str, Any]) -> list[tuple[str, str]]:
    """The request flattened to Query-protocol pairs (Entries.1.Id, Attribute.1.Name, ...),
    with one to three pairs broken."""
    pairs = [("Action", action)]

    def flatten(value: Any, name: str) -> None:
        if isinstance(value, dict):
            for n, (key, child) in enumerate(value.items(), 1):
                if name in ("Attributes", "Tags", "tags"):
                    pairs.append((f"{name}.{n}.Name", str(key)))
                    flatten(child, f"{name}.{n}.Value")
                else:
                    flatten(child, f"{name}.{key}" if name else str(key))
        elif isinstance(value, list):
            for n, child in enumerate(value, 1):
                flatten(child, f"{name}.{n}")
        else:
            pairs.append((name, str(value)))

    flatten(request, "")
    for _ in range(rnd.randint(1, 3)):
        i = rnd.randrange(len(pairs))
        key, value = pairs[i]
        roll = rnd.random()
        if roll < 0.5:
            pairs[i] = (key, str(_nasty(rnd)))
        elif roll < 0.7:
            del pairs[i]
            if not pairs:
                pairs.append(("Action", ""))
        elif roll < 0.85:
            index = rnd.choice(["0", "-1", "99999999999", "x", ""])
            pairs[i] = (".".join(index if p.isdigit() else p for p in key.split(".")), value)
        else:
            pairs.append((key, str(_nasty(rnd))))  # the same name twice
    return pairs


def _check(resp: RawResponse, protocol: str, what: str) -> None:
    assert resp.status < 500, f"{what}: HTTP {resp.status} {resp.body[:300]!r}"
    assert b"Traceback" not in resp.body, what
    if resp.status < 400 or resp.status in (413, 414, 431):  # the last from the HTTP layer
        return
    if protocol == "json":
        body = resp.json()
        assert isinstance(body, dict) and body.get("__type"), f"{what}: {body}"
    else:
        root = strip_ns(resp.xml())
        if root.tag == "UnknownOperationException":  # no action: AWS's bare 404
            assert resp.status == 404, what
            return
        assert root.tag == "ErrorResponse" and root.findtext("Error/Code"), (
            f"{what}: {resp.body[:300]!r}")


def test_broken_requests_get_sqs_errors(raw: RawClient, server: ServerProcess,
                                        sqs: Any) -> None:
    url = sqs.create_queue(QueueName=unique("fz"))["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    log_start = server.log_path.stat().st_size
    rnd = random.Random(20261124)
    answered: Counter[int] = Counter()
    for n in range(REQUESTS_PER_PROTOCOL * 2):
        protocol = "json" if n % 2 == 0 else "query"
        action, request = rnd.choice(list(_valid_calls(url, arn).items()))
        if protocol == "json":
            target, body = _json_request(rnd, action, request)
            resp = raw.json_call(target, raw_body=body)
            what = f"#{n} {target}: {body[:200]!r}"
        else:
            params = _query_params(rnd, action, request)
            resp = raw.query(params)
            what = f"#{n} {params[:8]}"
        _check(resp, protocol, what)
        answered[resp.status] += 1

    assert answered[200] > 50 and answered[400] > 1000, answered
    assert raw.request("GET", "/health", sign=False).status == 200
    with server.log_path.open("rb") as log:
        log.seek(log_start)
        written = log.read()
    assert b"Traceback" not in written and b"unexpectedly" not in written, written[-2000:]
