"""A key stays in its scope through the queues a call implies (issue 30), on the API and
in the console: the reproductions of the scope bypass, the IAM actions a move task needs,
forged task handles, and the console's workers and scaling views of a limited key.

The generated matrix (test_authz_matrix.py) covers every action; these are the stories.
AWS documents that a move task needs sqs:StartMessageMoveTask, sqs:ReceiveMessage,
sqs:DeleteMessage and sqs:GetQueueAttributes on its source and sqs:SendMessage on its
destination (SQS developer guide, "Configuring queue permissions for dead-letter queue
redrive"), and that a task without DestinationArn moves messages back to their original
source queues (SQS API reference, StartMessageMoveTask).
"""

from __future__ import annotations

import base64
import json
import re
import time
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tests.server.conftest import Launcher
from tests.server.helpers import (
    Browser,
    RawClient,
    counts,
    raises_sqs,
    unique,
)
from tests.server.test_workers_api import workers_call
from tests.support import ServerProcess

ADMIN, ADMIN_SECRET = "AKIDADMIN", "admin-secret"
ORDERS, ORDERS_SECRET = "AKIDORDERS", "orders-secret"
MOVER, NO_SEND, NO_RECEIVE = "AKIDMOVER", "AKIDMOVERNOSEND", "AKIDMOVERNORECEIVE"
SECRET = "mover-secret"
MOVE_SOURCE = ["StartMessageMoveTask", "ReceiveMessage", "DeleteMessage", "GetQueueAttributes"]
CONFIG = f"""
access_keys:
  {ADMIN}: {ADMIN_SECRET}
  {ORDERS}:
    secret: {ORDERS_SECRET}
    queues: ["orders-*"]
  {MOVER}:
    secret: {SECRET}
    actions: {json.dumps([*MOVE_SOURCE, "SendMessage", "ListMessageMoveTasks"])}
    queues: ["orders-*"]
  {NO_SEND}:
    secret: {SECRET}
    actions: {json.dumps(MOVE_SOURCE)}
    queues: ["orders-*"]
  {NO_RECEIVE}:
    secret: {SECRET}
    actions: {json.dumps([a for a in MOVE_SOURCE if a != "ReceiveMessage"] + ["SendMessage"])}
    queues: ["orders-*"]
"""


@pytest.fixture(scope="module")
def secured(launch: Launcher, tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    config = tmp_path_factory.mktemp("keys") / "conveyor.yaml"
    config.write_text(CONFIG)
    return launch("--mode", "relaxed", "--config", str(config))


def client(server: ServerProcess, key: str = ADMIN, secret: str = ADMIN_SECRET) -> Any:
    return boto3.client("sqs", endpoint_url=server.url, region_name="us-east-1",
                        aws_access_key_id=key, aws_secret_access_key=secret,
                        config=Config(retries={"max_attempts": 1}))


def arn_of(sqs: Any, url: str) -> str:
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]


def payroll_dead_letters_in_orders(server: ServerProcess, n: int = 3) -> dict[str, str]:
    """The issue's setting: `payroll-secret` dead-letters into `orders-dlq`, which holds
    `n` of its messages; `orders-main` dead-letters there too, `orders-back` is another."""
    admin = client(server)
    tag = unique("t").split("-")[1][:8]
    urls = {role: admin.create_queue(QueueName=f"{prefix}-{tag}")["QueueUrl"]
            for role, prefix in (("dlq", "orders-dlq"), ("back", "orders-back"))}
    policy = json.dumps({"deadLetterTargetArn": arn_of(admin, urls["dlq"]),
                         "maxReceiveCount": 1})
    for role, prefix in (("payroll", "payroll-secret"), ("main", "orders-main")):
        urls[role] = admin.create_queue(QueueName=f"{prefix}-{tag}",
                                        Attributes={"RedrivePolicy": policy})["QueueUrl"]
    for i in range(n):
        admin.send_message(QueueUrl=urls["payroll"], MessageBody=f"salary {i}")
    for _ in range(3):  # past maxReceiveCount: into orders-dlq
        admin.receive_message(QueueUrl=urls["payroll"], MaxNumberOfMessages=10,
                              VisibilityTimeout=0)
    assert counts(admin, urls["dlq"]) == (n, 0, 0)
    return urls


def tasks_of(server: ServerProcess, url: str) -> list[dict[str, Any]]:
    admin = client(server)
    return admin.list_message_move_tasks(SourceArn=arn_of(admin, url), MaxResults=10)["Results"]


def test_a_redrive_back_into_a_queue_out_of_scope_is_refused(secured: ServerProcess) -> None:
    """Issue 30's first defect: without DestinationArn the messages would go back to
    payroll-secret, which the key may not send to. Refused, and nothing moves."""
    urls = payroll_dead_letters_in_orders(secured)
    orders = client(secured, ORDERS, ORDERS_SECRET)
    with raises_sqs("AccessDenied", 403):
        orders.send_message(QueueUrl=urls["payroll"], MessageBody="no")  # as before
    with raises_sqs("AccessDenied", 403):
        orders.start_message_move_task(SourceArn=arn_of(client(secured), urls["dlq"]))
    time.sleep(0.5)  # move tasks step every 0.2 s: one would have moved something by now
    admin = client(secured)
    assert counts(admin, urls["payroll"]) == (0, 0, 0)
    assert counts(admin, urls["dlq"]) == (3, 0, 0)
    assert tasks_of(secured, urls["dlq"]) == []
    # To a queue of its own it may: the dead letters are in its queue already.
    orders.start_message_move_task(SourceArn=arn_of(admin, urls["dlq"]),
                                   DestinationArn=arn_of(admin, urls["back"]))
    deadline = time.monotonic() + 10
    while counts(admin, urls["back"])[0] < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert counts(admin, urls["back"]) == (3, 0, 0)
    assert counts(admin, urls["payroll"]) == (0, 0, 0)


def test_a_move_task_needs_the_iam_actions_aws_documents(secured: ServerProcess) -> None:
    urls = payroll_dead_letters_in_orders(secured)
    admin = client(secured)
    task = {"SourceArn": arn_of(admin, urls["dlq"]), "DestinationArn": arn_of(admin,
                                                                              urls["back"])}
    for key in (NO_SEND, NO_RECEIVE):
        with raises_sqs("AccessDenied", 403):
            client(secured, key, SECRET).start_message_move_task(**task)
    assert tasks_of(secured, urls["dlq"]) == []
    assert client(secured, MOVER, SECRET).start_message_move_task(**task)["TaskHandle"]


def _handle(source_arn: str, task_id: str) -> str:
    return base64.b64encode(json.dumps({"taskId": task_id, "sourceArn": source_arn}
                                       ).encode()).decode()


def test_a_task_handle_is_checked_against_the_task_it_is(secured: ServerProcess) -> None:
    """A handle of another queue's task, the same handle altered to name a queue of the
    key's, and one made up to name another queue: each refused, the task runs on."""
    admin = client(secured)
    tag = unique("t").split("-")[1][:8]
    dlq = admin.create_queue(QueueName=f"payroll-dlq-{tag}")["QueueUrl"]
    back = admin.create_queue(QueueName=f"payroll-back-{tag}")["QueueUrl"]
    admin.create_queue(QueueName=f"payroll-{tag}", Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": arn_of(admin, dlq), "maxReceiveCount": 1})})
    for i in range(30):
        admin.send_message(QueueUrl=dlq, MessageBody=f"m{i}")
    handle = admin.start_message_move_task(SourceArn=arn_of(admin, dlq),
                                           DestinationArn=arn_of(admin, back),
                                           MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    orders = client(secured, ORDERS, ORDERS_SECRET)
    mine = admin.create_queue(QueueName=f"orders-{tag}")["QueueUrl"]
    task_id = json.loads(base64.b64decode(handle))["taskId"]
    with raises_sqs("AccessDenied", 403):
        orders.cancel_message_move_task(TaskHandle=handle)
    with raises_sqs("ResourceNotFoundException", {400, 404}):  # altered: no such task
        orders.cancel_message_move_task(TaskHandle=_handle(arn_of(admin, mine), task_id))
    with raises_sqs("AccessDenied", 403):  # made up, naming another queue: no probing
        orders.cancel_message_move_task(TaskHandle=_handle(arn_of(admin, dlq), "made-up"))
    assert [t["Status"] for t in tasks_of(secured, dlq)] == ["RUNNING"]
    admin.cancel_message_move_task(TaskHandle=handle)


# --- the console ----------------------------------------------------------------------------

def _signed_in(server: ServerProcess, key: str, secret: str) -> Browser:
    browser = Browser(server.url)
    assert browser.sign_in(key, secret).status == 303
    return browser


def _post(browser: Browser, action: str, page: str, **fields: str) -> Any:
    token = browser.get(page).form_token()
    return browser.post(f"/console/{action}", {"csrf": token, **fields})


def test_the_consoles_redrive_and_move_refuse_the_bypass(secured: ServerProcess) -> None:
    """The console's Redrive button (and Move selection without a destination) is the same
    StartMessageMoveTask under the same table: refused for payroll's dead letters."""
    urls = payroll_dead_letters_in_orders(secured)
    dlq = urls["dlq"].rsplit("/", 1)[-1]
    orders = _signed_in(secured, ORDERS, ORDERS_SECRET)
    page = f"/console/queues/us-east-1/{dlq}"
    shown = orders.get(page).text
    assert 'action="/console/redrive"' not in shown  # no button it may not press
    refused = _post(orders, "redrive", page, region="us-east-1", queue=dlq, destination="")
    assert refused.status == 403 and "AccessDenied" in refused.text
    ids = [m["MessageId"] for m in client(secured).receive_message(
        QueueUrl=urls["dlq"], MaxNumberOfMessages=10, VisibilityTimeout=0)["Messages"]]
    refused = _post(orders, "move-messages", page, region="us-east-1", queue=dlq,
                    destination="", **{f"m.{i}": "1" for i in ids})
    assert refused.status == 403 and "AccessDenied" in refused.text
    time.sleep(0.5)
    admin = client(secured)
    assert counts(admin, urls["payroll"]) == (0, 0, 0)
    assert counts(admin, urls["dlq"]) == (3, 0, 0)
    assert tasks_of(secured, urls["dlq"]) == []
    assert f"StartMessageMoveTask {dlq} by access key {ORDERS}: AccessDenied" in secured.log()


def test_a_limited_keys_console_shows_only_its_queues_workers_and_decisions(
        secured: ServerProcess) -> None:
    """Issue 30's third defect: the workers table, the autoscalers and their timelines,
    and the Drain buttons show a key limited to `orders-*` only its queues'."""
    admin = RawClient(secured.url, access_key=ADMIN, secret_key=ADMIN_SECRET)
    tag = unique("t").split("-")[1][:8]
    mine, theirs = f"orders-{tag}", f"payroll-{tag}"
    for queue in (mine, theirs):
        for kind in ("worker", "scaler"):
            status = {"status": "ok", "policy": "target", "current": 1, "desired": 2}
            assert workers_call(admin, "AnnounceWorker", {
                "WorkerId": f"{kind}-{queue}", "Queue": queue, "TtlSeconds": 600,
                "Kind": kind, "Status": status}).status == 200
        assert workers_call(admin, "RecordScalingDecision", {
            "Queue": queue, "Decision": {"current": 1, "desired": 2,
                                         "reason": f"backlog of {queue}"}}).status == 200

    assert workers_call(admin, "AnnounceWorker", {"WorkerId": f"spare-{theirs}", "Queue": theirs,
                                                  "TtlSeconds": 600,
                                                  "Status": {"status": "ok"}}).status == 200
    administrator = _signed_in(secured, ADMIN, ADMIN_SECRET)
    assert _post(administrator, "drain-worker", "/console", region="us-east-1",
                 worker=f"spare-{theirs}").status == 303  # in the recent actions now
    everything = administrator.get("/console").text
    assert f"worker-{theirs}" in everything and f"backlog of {theirs}" in everything
    assert f"DrainWorker</td><td>worker spare-{theirs}" in everything

    orders = _signed_in(secured, ORDERS, ORDERS_SECRET)
    overview = orders.get("/console").text
    assert f"worker-{mine}" in overview and f"scaling decisions of {mine}" in overview
    assert f"backlog of {mine}" in overview
    assert theirs not in overview  # no worker, scaler, timeline, drain or link of payroll
    drains = re.findall(r'aria-label="Drain ([^"]+)"', overview)
    assert f"worker-{mine}" in drains and f"worker-{theirs}" not in drains
    refused = _post(orders, "drain-worker", "/console", region="us-east-1",
                    worker=f"worker-{theirs}")
    assert refused.status == 403 and "AccessDenied" in refused.text
    assert "Drain" not in workers_call(admin, "AnnounceWorker", {
        "WorkerId": f"worker-{theirs}", "Queue": theirs, "TtlSeconds": 600,
        "Status": {"status": "ok"}}).json()
    assert _post(orders, "drain-worker", "/console", region="us-east-1",
                 worker=f"worker-{mine}").status == 303

    api = RawClient(secured.url, access_key=ORDERS, secret_key=ORDERS_SECRET)
    listed = {w["Queue"] for w in workers_call(api, "ListWorkers", {}).json()["Workers"]}
    assert mine in listed and theirs not in listed


def test_the_query_protocol_names_the_same_queues(secured: ServerProcess) -> None:
    """A RedrivePolicy sent as Query parameters (Attribute.N.Name/Value, as kombu sends
    them) names its dead-letter queue to the check exactly as a JSON body does."""
    admin = client(secured)
    tag = unique("t").split("-")[1][:8]
    mine = admin.create_queue(QueueName=f"orders-{tag}")["QueueUrl"]
    theirs = admin.create_queue(QueueName=f"payroll-{tag}")["QueueUrl"]
    raw = RawClient(secured.url, access_key=ORDERS, secret_key=ORDERS_SECRET)
    policy = json.dumps({"deadLetterTargetArn": arn_of(admin, theirs), "maxReceiveCount": 2})
    refused = raw.query({"Action": "SetQueueAttributes", "QueueUrl": mine,
                         "Attribute.1.Name": "RedrivePolicy", "Attribute.1.Value": policy})
    assert refused.status == 403 and b"<Code>AccessDenied</Code>" in refused.body
    assert "RedrivePolicy" not in admin.get_queue_attributes(
        QueueUrl=mine, AttributeNames=["All"])["Attributes"]
