"""The authorization matrix, generated: a key stays in its scope (DESIGN.md, invariant 5).

For every action of botocore's SQS model and every call of Conveyor's own APIs, and for
every queue the call touches (named in a member, or implied: server/authz.py's TABLE),
one case: the call made by a key whose queues exclude exactly that queue is refused with
AccessDenied and changes nothing (the server's state read before and after with an admin
key), and the same call by a key whose queues include it succeeds. For a list, the key
that excludes the queue gets an answer without it, the other one with it.

The cases come from the table, and the table is held against the model: an action of the
model, or a queue-bearing member of one (anything named like a queue, an ARN or a
handle, at any depth), that the table does not account for fails here; so does a table
entry with no case below. AWS's IAM actions per queue are the table's, each cited there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from conveyor.server import app as server_app
from conveyor.server.authz import TABLE, Named
from tests.server.conftest import Launcher
from tests.server.helpers import RawClient, unique
from tests.support import ServerProcess

ACCOUNT = "000000000000"
ADMIN, ADMIN_SECRET = "AKIDMXADMIN", "admin-secret"
SLOTS = ("a", "b", "c")  # every case's queues are mx-<slot>-<case id>
WITHIN = "AKIDMXWITHIN"  # queues ["mx-*"]: limited, yet every case's queues are its own
SECRET = "matrix-secret"


def excluding(slot: str) -> str:
    """The key whose queues are every slot's but `slot`'s."""
    return f"AKIDMXNOT{slot.upper()}"


CONFIG = "access_keys:\n" + f"  {ADMIN}: {ADMIN_SECRET}\n" + f"""  {WITHIN}:
    secret: {SECRET}
    queues: ["mx-*"]
""" + "".join(f"""  {excluding(slot)}:
    secret: {SECRET}
    queues: {json.dumps([f"mx-{other}-*" for other in SLOTS if other != slot])}
""" for slot in SLOTS)

MODEL = botocore.session.get_session().get_service_model("sqs")
EXTENSIONS = sorted(set().union(*server_app.EXTENSIONS.values()))


def lacking(action: str) -> str:
    """The key with every queue of the cases and every action but `action`."""
    return f"AKIDMXNO{action.upper()}"


# The IAM actions the table asks on a queue beyond the call's own (a move task's source
# and destination, a RedrivePolicy's target, an announcement inside a poll).
EXTRA_ACTIONS = sorted({needed for entry in TABLE.values() for t in entry.touches
                        for needed in t.actions})
CONFIG += "".join(f"""  {lacking(action)}:
    secret: {SECRET}
    actions: {json.dumps(sorted({*MODEL.operation_names, *EXTENSIONS} - {action}))}
    queues: ["mx-*"]
""" for action in EXTRA_ACTIONS)
WORKERS_PREFIX = "ConveyorWorkers."
# Named like something that names a queue: a queue's name/URL/ARN, or a handle that may.
QUEUE_BEARING = re.compile(r"queue|arn|handle", re.IGNORECASE)


# --- the model against the table ----------------------------------------------------------

def _paths(shape: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every member path of an input or output shape, at any depth (lists and maps are
    walked through: `Entries.ReceiptHandle`)."""
    if shape is None:
        return
    if shape.type_name == "structure":
        for name, member in shape.members.items():
            path = f"{prefix}{name}"
            yield path, member
            yield from _paths(_inner(member), path + ".")
    elif shape.type_name == "list":
        yield from _paths(_inner(shape.member), prefix)


def _inner(shape: Any) -> Any:
    while shape.type_name == "list":
        shape = shape.member
    return shape if shape.type_name == "structure" else None


def queue_bearing_inputs(action: str) -> set[str]:
    shape = MODEL.operation_model(action).input_shape
    return {path for path, member in _paths(shape)
            if QUEUE_BEARING.search(path.rsplit(".", 1)[-1])
            or member.name == "QueueAttributeMap"}


def accounted(action: str) -> set[str]:
    """The request members the table says something about: each named queue's member (its
    first part: `Attributes.RedrivePolicy...` is the model's `Attributes`), and the
    members it declares are not queues."""
    entry = TABLE[action]
    named = {t.member for t in entry.touches if isinstance(t, Named)}
    return named | set(entry.unscoped)


def test_the_table_has_every_action_of_the_model_and_the_server() -> None:
    assert set(MODEL.operation_names) <= set(TABLE), "actions missing from server/authz.py"
    assert set(EXTENSIONS) <= set(TABLE), "Conveyor calls missing from server/authz.py"
    assert set(TABLE) <= set(MODEL.operation_names) | set(EXTENSIONS), "entries of no call"


@pytest.mark.parametrize("action", sorted(MODEL.operation_names))
def test_every_queue_bearing_member_is_in_the_table(action: str) -> None:
    """Each queue-bearing member of the model, at any depth, is a named queue of the table
    or declared not to be one; and the table names no member the model does not have."""
    members = queue_bearing_inputs(action)
    covered = accounted(action)
    missing = {m for m in members if not any(c == m or c.startswith(m + ".") for c in covered)}
    assert not missing, f"{action}: members the authorization table does not account for"
    model_paths = {path for path, _ in _paths(MODEL.operation_model(action).input_shape)}
    stale = {c for c in covered if not any(c == p or c.startswith(p + ".") for p in model_paths)}
    assert not stale, f"{action}: the table names members the model does not have"


@pytest.mark.parametrize("action", sorted(a for a in MODEL.operation_names
                                          if a.startswith("List")))
def test_every_list_of_queues_is_filtered(action: str) -> None:
    """A list call's results that name queues are filtered by the key's queues, or named
    as shown on purpose (the table's `shown`)."""
    output = MODEL.operation_model(action).output_shape
    queues = {path for path, member in _paths(output)
              if QUEUE_BEARING.search(path.rsplit(".", 1)[-1])}
    entry = TABLE[action]
    assert queues == set(entry.listed) | set(entry.shown), action


# --- the cases ------------------------------------------------------------------------------------

def roles(action: str) -> list[str]:
    entry = TABLE[action]
    return [t.member if isinstance(t, Named) else t.role for t in entry.touches] + [
        f"listed {member}" for member in entry.listed]


CASES = [(action, role) for action in sorted(TABLE) for role in roles(action)]


class Refused(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass
class Caller:
    """One access key's clients: boto3 for SQS, signed raw JSON for Conveyor's calls."""

    sqs: Any
    raw: RawClient

    def call(self, action: str, **params: Any) -> Any:
        method = getattr(self.sqs, re.sub(r"(?<!^)(?=[A-Z])", "_", action).lower())
        try:
            return method(**params)
        except ClientError as error:
            raise Refused(error.response["Error"]["Code"]) from None

    def workers(self, action: str, prefix: str = WORKERS_PREFIX, **payload: Any) -> Any:
        resp = self.raw.request("POST", "/", json.dumps(payload).encode(), {
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": prefix + action})
        if resp.status != 200:  # the Query-era code, as botocore reads it for SQS calls
            raise Refused((resp.header("x-amzn-query-error") or "").split(";")[0]
                          or resp.json().get("__type", "").rsplit("#", 1)[-1])
        return resp.json()


def caller(server: ServerProcess, key: str, secret: str = SECRET) -> Caller:
    sqs = boto3.client("sqs", endpoint_url=server.url, region_name="us-east-1",
                       aws_access_key_id=key, aws_secret_access_key=secret,
                       config=Config(retries={"max_attempts": 1}))
    return Caller(sqs, RawClient(server.url, access_key=key, secret_key=secret))


@dataclass
class Env:
    """One case's queues (one a slot), workers and the admin that sets them up."""

    server: ServerProcess
    admin: Caller
    case: str = field(default_factory=lambda: unique("c").replace("-", ""))
    worker_payloads: list[dict[str, Any]] = field(default_factory=list)
    moving: bool = False  # a move task runs throughout: its counts are not compared
    received: list[tuple[str, str]] = field(default_factory=list)  # (slot, message id)

    def name(self, slot: str) -> str:
        return f"mx-{slot}-{self.case}"

    def url(self, slot: str) -> str:
        return f"{self.server.url}/{ACCOUNT}/{self.name(slot)}"

    def arn(self, slot: str) -> str:
        return f"arn:aws:sqs:us-east-1:{ACCOUNT}:{self.name(slot)}"

    def queue(self, slot: str, **attributes: str) -> str:
        return self.admin.call("CreateQueue", QueueName=self.name(slot),
                               Attributes=attributes)["QueueUrl"]

    def redrive_into(self, dlq: str, source: str) -> None:
        """`source` (created) dead-letters into `dlq` (created) after one receive."""
        self.queue(dlq)
        self.queue(source, RedrivePolicy=json.dumps(
            {"deadLetterTargetArn": self.arn(dlq), "maxReceiveCount": 1}))

    def dead_letter(self, source: str, n: int = 1) -> None:
        """Send `n` messages to `source` and receive them past maxReceiveCount (1)."""
        for i in range(n):
            self.admin.call("SendMessage", QueueUrl=self.url(source), MessageBody=f"m{i}")
        for _ in range(3):
            self.admin.call("ReceiveMessage", QueueUrl=self.url(source),
                            MaxNumberOfMessages=10, VisibilityTimeout=0)

    def send(self, slot: str) -> None:
        self.admin.call("SendMessage", QueueUrl=self.url(slot), MessageBody="x")

    def receipt(self, slot: str) -> str:
        self.send(slot)
        got = self.admin.call("ReceiveMessage", QueueUrl=self.url(slot), VisibilityTimeout=600)
        self.received.append((slot, got["Messages"][0]["MessageId"]))
        return got["Messages"][0]["ReceiptHandle"]

    def worker(self, slot: str) -> str:
        worker_id = f"w-{self.case}-{slot}"
        payload = {"WorkerId": worker_id, "Queue": self.name(slot), "TtlSeconds": 600}
        self.admin.workers("AnnounceWorker", **payload)
        self.worker_payloads.append(payload)
        return worker_id

    def state(self) -> dict[str, Any]:
        """Everything a call could have changed, read with the admin key."""
        seen: dict[str, Any] = {}
        for slot in SLOTS:
            try:
                attributes = self.admin.call("GetQueueAttributes", QueueUrl=self.url(slot),
                                             AttributeNames=["All"])["Attributes"]
            except Refused:
                seen[slot] = None
                continue
            tasks = self.admin.call("ListMessageMoveTasks", SourceArn=self.arn(slot),
                                    MaxResults=10)["Results"]
            if self.moving:
                attributes = {k: v for k, v in attributes.items() if "NumberOf" not in k}
                tasks = [t["Status"] for t in tasks]
            seen[slot] = (attributes, self.admin.call("ListQueueTags", QueueUrl=self.url(slot)
                                                      ).get("Tags", {}), tasks,
                          self.admin.workers("ListScalingDecisions", Queue=self.name(slot)))
        seen["workers"] = sorted(
            (w["WorkerId"], w["Queue"], w["Kind"], json.dumps(w["Status"]))
            for w in self.admin.workers("ListWorkers")["Workers"] if self.case in w["WorkerId"])
        seen["attempts"] = [  # a message's failed attempts (ConveyorWorkers.RecordAttempts)
            self.admin.workers("GetMessageAttempts", QueueUrl=self.url(slot), MessageId=mid)
            for slot, mid in self.received if seen[slot] is not None]
        # A drain asked for shows in the worker's next announcement's answer.
        seen["drains"] = [self.admin.workers("AnnounceWorker", **p).get("Drain", False)
                          for p in self.worker_payloads]
        return seen


# A case: set up in `env`, return (the excluded queue's slot, the call as a function of
# the caller, and for a list the function picking the queue names out of its answer).
Call = Callable[[Caller], Any]
Setup = Callable[[Env], tuple[str, Call]]
ListSetup = Callable[[Env], tuple[str, Call, Callable[[Any], list[str]]]]


def _sqs(action: str, **params: Any) -> Call:
    return lambda c: c.call(action, **params)


def _names(urls: list[str]) -> list[str]:
    return [u.rsplit("/", 1)[-1] for u in urls]


def on_queue_url(action: str, **params: Any) -> Setup:
    """An action on one QueueUrl: the queue (slot a) with a message in it."""
    def setup(env: Env) -> tuple[str, Call]:
        env.queue("a")
        env.send("a")
        return "a", _sqs(action, QueueUrl=env.url("a"), **params)
    return setup


def with_receipt(action: str, batch: bool = False, **params: Any) -> Setup:
    def setup(env: Env) -> tuple[str, Call]:
        env.queue("a")
        handle = env.receipt("a")
        if batch:
            entry = {"Id": "1", "ReceiptHandle": handle, **params}
            return "a", _sqs(action, QueueUrl=env.url("a"), Entries=[entry])
        return "a", _sqs(action, QueueUrl=env.url("a"), ReceiptHandle=handle, **params)
    return setup


def remove_permission(env: Env) -> tuple[str, Call]:
    env.queue("a")
    env.admin.call("AddPermission", QueueUrl=env.url("a"), Label="l1",
                   AWSAccountIds=["111122223333"], Actions=["SendMessage"])
    return "a", _sqs("RemovePermission", QueueUrl=env.url("a"), Label="l1")


def create_queue(env: Env) -> tuple[str, Call]:
    return "a", _sqs("CreateQueue", QueueName=env.name("a"))


def create_queue_with_dlq(env: Env) -> tuple[str, Call]:
    env.queue("b")
    policy = json.dumps({"deadLetterTargetArn": env.arn("b"), "maxReceiveCount": 3})
    return "b", _sqs("CreateQueue", QueueName=env.name("a"), Attributes={"RedrivePolicy": policy})


def get_queue_url(env: Env) -> tuple[str, Call]:
    env.queue("a")
    return "a", _sqs("GetQueueUrl", QueueName=env.name("a"))


def set_dlq(env: Env) -> tuple[str, Call]:
    env.queue("a")
    env.queue("b")
    policy = json.dumps({"deadLetterTargetArn": env.arn("b"), "maxReceiveCount": 3})
    return "b", _sqs("SetQueueAttributes", QueueUrl=env.url("a"),
                     Attributes={"RedrivePolicy": policy})


def move_task(excluded: str) -> Setup:
    """StartMessageMoveTask from dead-letter queue a (fed by b) to c."""
    def setup(env: Env) -> tuple[str, Call]:
        env.redrive_into("a", "b")
        env.queue("c")
        env.dead_letter("b")
        return excluded, _sqs("StartMessageMoveTask", SourceArn=env.arn("a"),
                              DestinationArn=env.arn("c"))
    return setup


def move_back_to_an_origin(env: Env) -> tuple[str, Call]:
    """The issue's bypass: dead letters of c (which no longer dead-letters into a) sit in
    a, whose configured source is b; a task without DestinationArn sends them back to c."""
    env.redrive_into("a", "c")
    env.dead_letter("c")
    env.admin.call("SetQueueAttributes", QueueUrl=env.url("c"), Attributes={"RedrivePolicy": ""})
    env.queue("b", RedrivePolicy=json.dumps({"deadLetterTargetArn": env.arn("a"),
                                             "maxReceiveCount": 1}))
    return "c", _sqs("StartMessageMoveTask", SourceArn=env.arn("a"))


def move_back_to_a_configured_source(env: Env) -> tuple[str, Call]:
    """a is c's dead-letter queue: a task without DestinationArn would move c's next
    dead letters back into c."""
    env.redrive_into("a", "c")
    env.send("a")  # sent to a directly: no origin
    return "c", _sqs("StartMessageMoveTask", SourceArn=env.arn("a"))


def list_move_tasks(env: Env) -> tuple[str, Call]:
    env.redrive_into("a", "b")
    return "a", _sqs("ListMessageMoveTasks", SourceArn=env.arn("a"))


def cancel_move_task(env: Env) -> tuple[str, Call]:
    """A running task of a (a rate of 1 a second with 30 messages: half a minute)."""
    env.redrive_into("a", "b")
    env.queue("c")
    env.dead_letter("b")
    for _ in range(30):
        env.send("a")
    handle = env.admin.call("StartMessageMoveTask", SourceArn=env.arn("a"),
                            DestinationArn=env.arn("c"),
                            MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    env.moving = True
    return "a", _sqs("CancelMessageMoveTask", TaskHandle=handle)


def dead_letter_sources_of(env: Env) -> tuple[str, Call]:
    env.redrive_into("a", "b")
    return "a", _sqs("ListDeadLetterSourceQueues", QueueUrl=env.url("a"))


def listed_dead_letter_sources(env: Env) -> tuple[str, Call, Callable[[Any], list[str]]]:
    env.redrive_into("a", "b")
    env.queue("c", RedrivePolicy=json.dumps({"deadLetterTargetArn": env.arn("a"),
                                             "maxReceiveCount": 1}))
    return "b", _sqs("ListDeadLetterSourceQueues", QueueUrl=env.url("a")), lambda r: _names(
        r.get("queueUrls", []))


def listed_queues(env: Env) -> tuple[str, Call, Callable[[Any], list[str]]]:
    for slot in SLOTS:
        env.queue(slot)
    return "b", _sqs("ListQueues", QueueNamePrefix="mx-"), lambda r: _names(
        r.get("QueueUrls", []))


def _workers(action: str, **payload: Any) -> Call:
    return lambda c: c.workers(action, **payload)


def announce(env: Env) -> tuple[str, Call]:
    return "a", _workers("AnnounceWorker", WorkerId=f"w-{env.case}-new", Queue=env.name("a"),
                         TtlSeconds=600)


def record_attempt(env: Env) -> tuple[str, Call]:
    env.queue("a")
    entry = {"Id": "0", "ReceiptHandle": env.receipt("a"), "At": 1_796_000_000_000,
             "Reason": "refused"}
    return "a", _workers("RecordAttempts", QueueUrl=env.url("a"), Entries=[entry])


def get_attempts(env: Env) -> tuple[str, Call]:
    env.queue("a")
    sent = env.admin.call("SendMessage", QueueUrl=env.url("a"), MessageBody="x")
    return "a", _workers("GetMessageAttempts", QueueUrl=env.url("a"),
                         MessageId=sent["MessageId"])


def _queues(action: str, **payload: Any) -> Call:
    return lambda c: c.workers(action, prefix="ConveyorQueues.", **payload)


def pause(env: Env) -> tuple[str, Call]:
    env.queue("a")
    return "a", _queues("PauseQueue", QueueUrl=env.url("a"))


def resume(env: Env) -> tuple[str, Call]:
    env.queue("a")
    env.admin.workers("PauseQueue", prefix="ConveyorQueues.", QueueUrl=env.url("a"))
    return "a", _queues("ResumeQueue", QueueUrl=env.url("a"))


def set_conveyor_attributes(env: Env) -> tuple[str, Call]:
    env.queue("a")
    return "a", _queues("SetConveyorAttributes", QueueUrl=env.url("a"),
                        Attributes={"ConveyorMaxDelaySeconds": "3600"})


def drain(env: Env) -> tuple[str, Call]:
    return "a", _workers("DrainWorker", WorkerId=env.worker("a"))


def record_decision(env: Env) -> tuple[str, Call]:
    return "a", _workers("RecordScalingDecision", Queue=env.name("a"),
                         Decision={"current": 1, "desired": 2})


def list_decisions(env: Env) -> tuple[str, Call]:
    env.admin.workers("RecordScalingDecision", Queue=env.name("a"), Decision={"desired": 2})
    return "a", _workers("ListScalingDecisions", Queue=env.name("a"))


def listed_workers(env: Env) -> tuple[str, Call, Callable[[Any], list[str]]]:
    for slot in SLOTS:
        env.worker(slot)
    return "a", _workers("ListWorkers"), lambda r: [w["Queue"] for w in r["Workers"]]


def poll(env: Env) -> tuple[str, Call]:
    env.queue("a")
    env.send("a")
    return "a", _workers("PollMessages", QueueUrl=env.url("a"), WaitTimeSeconds=0,
                         VisibilityTimeout=600)


def poll_several(env: Env) -> tuple[str, Call]:
    env.queue("a")
    env.queue("b")
    env.send("a")
    return "a", _workers("PollMessages", QueueUrls=[env.url("b"), env.url("a")],
                         WaitTimeSeconds=0, VisibilityTimeout=600)


def poll_announcing(env: Env) -> tuple[str, Call]:
    env.queue("b")
    return "a", _workers("PollMessages", QueueUrl=env.url("b"), WaitTimeSeconds=0,
                         Announce={"WorkerId": f"w-{env.case}-poll", "Queue": env.name("a"),
                                   "TtlSeconds": 600})


_ENTRY = {"Id": "1", "MessageBody": "batch"}
SETUPS: dict[tuple[str, str], list[Setup]] = {
    ("AddPermission", "QueueUrl"): [on_queue_url(
        "AddPermission", Label="l1", AWSAccountIds=["111122223333"], Actions=["SendMessage"])],
    ("ChangeMessageVisibility", "QueueUrl"): [with_receipt("ChangeMessageVisibility",
                                                           VisibilityTimeout=0)],
    ("ChangeMessageVisibilityBatch", "QueueUrl"): [with_receipt(
        "ChangeMessageVisibilityBatch", batch=True, VisibilityTimeout=0)],
    ("CreateQueue", "QueueName"): [create_queue],
    ("CreateQueue", "Attributes.RedrivePolicy.deadLetterTargetArn"): [create_queue_with_dlq],
    ("DeleteMessage", "QueueUrl"): [with_receipt("DeleteMessage")],
    ("DeleteMessageBatch", "QueueUrl"): [with_receipt("DeleteMessageBatch", batch=True)],
    ("DeleteQueue", "QueueUrl"): [on_queue_url("DeleteQueue")],
    ("GetQueueAttributes", "QueueUrl"): [on_queue_url("GetQueueAttributes",
                                                      AttributeNames=["All"])],
    ("GetQueueUrl", "QueueName"): [get_queue_url],
    ("ListDeadLetterSourceQueues", "QueueUrl"): [dead_letter_sources_of],
    ("ListMessageMoveTasks", "SourceArn"): [list_move_tasks],
    ("ListQueueTags", "QueueUrl"): [on_queue_url("ListQueueTags")],
    ("PurgeQueue", "QueueUrl"): [on_queue_url("PurgeQueue")],
    ("ReceiveMessage", "QueueUrl"): [on_queue_url("ReceiveMessage", VisibilityTimeout=600)],
    ("RemovePermission", "QueueUrl"): [remove_permission],
    ("SendMessage", "QueueUrl"): [on_queue_url("SendMessage", MessageBody="y")],
    ("SendMessageBatch", "QueueUrl"): [on_queue_url("SendMessageBatch", Entries=[_ENTRY])],
    ("SetQueueAttributes", "QueueUrl"): [on_queue_url(
        "SetQueueAttributes", Attributes={"VisibilityTimeout": "45"})],
    ("SetQueueAttributes", "Attributes.RedrivePolicy.deadLetterTargetArn"): [set_dlq],
    ("StartMessageMoveTask", "SourceArn"): [move_task("a")],
    ("StartMessageMoveTask", "DestinationArn"): [move_task("c")],
    ("StartMessageMoveTask", "original sources (no DestinationArn)"): [
        move_back_to_an_origin, move_back_to_a_configured_source],
    ("CancelMessageMoveTask", "TaskHandle.sourceArn"): [cancel_move_task],
    ("CancelMessageMoveTask", "TaskHandle's task source"): [cancel_move_task],
    ("TagQueue", "QueueUrl"): [on_queue_url("TagQueue", Tags={"team": "x"})],
    ("UntagQueue", "QueueUrl"): [on_queue_url("UntagQueue", TagKeys=["team"])],
    ("AnnounceWorker", "Queue"): [announce],
    ("DrainWorker", "the worker's queue"): [drain],
    ("RecordScalingDecision", "Queue"): [record_decision],
    ("ListScalingDecisions", "Queue"): [list_decisions],
    ("PollMessages", "QueueUrl"): [poll],
    ("PollMessages", "QueueUrls"): [poll_several],
    ("PollMessages", "Announce.Queue"): [poll_announcing],
    ("RecordAttempts", "QueueUrl"): [record_attempt],
    ("GetMessageAttempts", "QueueUrl"): [get_attempts],
    ("PauseQueue", "QueueUrl"): [pause],
    ("ResumeQueue", "QueueUrl"): [resume],
    ("SetConveyorAttributes", "QueueUrl"): [set_conveyor_attributes],
}
LIST_SETUPS: dict[tuple[str, str], ListSetup] = {
    ("ListQueues", "listed QueueUrls"): listed_queues,
    ("ListDeadLetterSourceQueues", "listed queueUrls"): listed_dead_letter_sources,
    ("ListWorkers", "listed Workers.Queue"): listed_workers,
}


def test_every_case_of_the_table_has_a_setup() -> None:
    assert set(CASES) == set(SETUPS) | set(LIST_SETUPS)


@pytest.fixture(scope="module")
def matrix_server(launch: Launcher, tmp_path_factory: pytest.TempPathFactory
                  ) -> ServerProcess:
    config = tmp_path_factory.mktemp("matrix") / "conveyor.yaml"
    config.write_text(CONFIG)
    return launch("--mode", "relaxed", "--config", str(config))


REFUSED_CASES = [c for c in CASES if c not in LIST_SETUPS]


@pytest.mark.parametrize(("action", "role"), REFUSED_CASES,
                         ids=[f"{action}:{role}" for action, role in REFUSED_CASES])
def test_a_key_without_the_queue_is_refused_and_changes_nothing(
        matrix_server: ServerProcess, action: str, role: str) -> None:
    for setup in SETUPS[(action, role)]:
        env = Env(matrix_server, caller(matrix_server, ADMIN, ADMIN_SECRET))
        slot, call = setup(env)
        before = env.state()
        with pytest.raises(Refused) as refused:
            call(caller(matrix_server, excluding(slot)))
        assert refused.value.code == "AccessDenied", (setup.__name__, refused.value.code)
        assert env.state() == before, setup.__name__
        call(caller(matrix_server, WITHIN))  # the same call, by a key with the queue: done


@pytest.mark.parametrize(("action", "role"), sorted(LIST_SETUPS))
def test_a_list_shows_a_key_only_its_queues(matrix_server: ServerProcess, action: str,
                                            role: str) -> None:
    env = Env(matrix_server, caller(matrix_server, ADMIN, ADMIN_SECRET))
    slot, call, names = LIST_SETUPS[(action, role)](env)
    hidden = names(call(caller(matrix_server, excluding(slot))))
    assert env.name(slot) not in hidden
    assert [n for n in hidden if env.case in n], "the key's other queues are listed"
    assert env.name(slot) in names(call(caller(matrix_server, WITHIN)))


def _needing(action: str, role: str) -> list[str]:
    touch = next(t for t in TABLE[action].touches
                 if (t.member if isinstance(t, Named) else t.role) == role)
    return [needed for needed in touch.actions if needed != action]


ACTION_CASES = [(action, role, needed) for action, role in REFUSED_CASES
                for needed in _needing(action, role)]


@pytest.mark.parametrize(("action", "role", "needed"), ACTION_CASES,
                         ids=[f"{a}:{r}:{n}" for a, r, n in ACTION_CASES])
def test_a_key_without_the_iam_action_on_the_queue_is_refused(
        matrix_server: ServerProcess, action: str, role: str, needed: str) -> None:
    """The IAM action the table asks on that queue (a move task's source needs
    ReceiveMessage, DeleteMessage and GetQueueAttributes, its destination SendMessage:
    SQS developer guide, "Configuring queue permissions for dead-letter queue redrive"):
    a key with the queue and every action but that one is refused and changes nothing."""
    for setup in SETUPS[(action, role)]:
        env = Env(matrix_server, caller(matrix_server, ADMIN, ADMIN_SECRET))
        _, call = setup(env)
        before = env.state()
        with pytest.raises(Refused) as refused:
            call(caller(matrix_server, lacking(needed)))
        assert refused.value.code == "AccessDenied", (setup.__name__, refused.value.code)
        assert env.state() == before, setup.__name__
