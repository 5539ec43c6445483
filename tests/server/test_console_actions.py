"""The console's actions over HTTP, as a browser's forms send them: each one an SQS call
that boto3 then sees the effect of; refused ones (limited keys, unconfirmed, forged)
change nothing."""

from __future__ import annotations

import json
import re
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest

from tests.server.conftest import Launcher, QueueFactory
from tests.server.helpers import (
    Browser,
    BrowserResponse,
    counts,
    queue_name_of,
    receive_all,
    unique,
)
from tests.support import ServerProcess

ADMIN, ADMIN_SECRET = "AKIDADMIN", "admin-secret"
READER, READER_SECRET = "AKIDREADER", "reader-secret"
ORDERS, ORDERS_SECRET = "AKIDORDERS", "orders-secret"
CONFIG = f"""
access_keys:
  {ADMIN}: {ADMIN_SECRET}
  {READER}:
    secret: {READER_SECRET}
    actions: ["ListQueues", "GetQueue*"]
  {ORDERS}:
    secret: {ORDERS_SECRET}
    queues: ["orders-*"]
"""


def _post(browser: Browser, action: str, page: str, **fields: str) -> BrowserResponse:
    """Send the console form `action` with the CSRF token of `page`'s forms."""
    token = browser.get(page).form_token()
    return browser.post(f"/console/{action}", {"csrf": token, **fields})


def _done(resp: BrowserResponse) -> dict[str, str]:
    assert resp.status == 303, resp.text[:500]
    return {k: v[0] for k, v in parse_qs(urlsplit(resp.header("location") or "").query).items()}


@pytest.fixture
def browser(server: ServerProcess) -> Browser:
    return Browser(server.url)


@pytest.fixture(scope="module")
def secured(launch: Launcher, tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    config = tmp_path_factory.mktemp("keys") / "conveyor.yaml"
    config.write_text(CONFIG)
    return launch("--mode", "relaxed", "--config", str(config))


def _signed_in(server: ServerProcess, key: str, secret: str) -> Browser:
    browser = Browser(server.url)
    assert browser.sign_in(key, secret).status == 303
    return browser


def test_create_a_queue_with_a_dead_letter_queue(browser: Browser, sqs: Any) -> None:
    dlq, name = unique("con-dlq"), unique("con-src")
    assert _post(browser, "create-queue", "/console", name=dlq, region="us-east-1").status == 303
    resp = _post(browser, "create-queue", "/console", name=name, region="us-east-1", dlq=dlq,
                 max_receive_count="3", VisibilityTimeout="45",
                 attributes="MessageRetentionPeriod = 3600", tags="team = payments")
    assert _done(resp)["done"] == "created"
    assert resp.header("location") == f"/console/queues/us-east-1/{name}?done=created"
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert json.loads(attrs["RedrivePolicy"]) == {
        "deadLetterTargetArn": f"arn:aws:sqs:us-east-1:000000000000:{dlq}", "maxReceiveCount": 3}
    assert (attrs["VisibilityTimeout"], attrs["MessageRetentionPeriod"]) == ("45", "3600")
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "payments"}
    assert "Created the queue." in browser.get(resp.header("location") or "").text


def test_create_a_fifo_queue_and_bad_input_gets_the_sqs_error(browser: Browser,
                                                              sqs: Any) -> None:
    name = unique("con-fifo")
    resp = _post(browser, "create-queue", "/console", name=name, region="us-east-1",
                 fifo="on", content_dedup="on")
    assert _done(resp)["done"] == "created"
    url = sqs.get_queue_url(QueueName=name + ".fifo")["QueueUrl"]
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ContentBasedDeduplication"])[
        "Attributes"]["ContentBasedDeduplication"] == "true"
    bad = _post(browser, "create-queue", "/console", name="no spaces", region="us-east-1")
    assert bad.status == 400 and "InvalidParameterValue" in bad.text
    bad = _post(browser, "create-queue", "/console", name=unique(), region="us-east-1",
                VisibilityTimeout="soon")  # refused under its field, as the edit form does
    assert bad.status == 400 and "A whole number of s/min/h/days, not &#x27;soon&#x27;" in bad.text
    bad = _post(browser, "create-queue", "/console", name=unique(), region="us-east-1",
                dlq="x", max_receive_count="many")
    assert bad.status == 400 and "whole number" in bad.text


def test_send_then_view_a_message_without_receiving_it(browser: Browser, sqs: Any,
                                                       make_queue: QueueFactory) -> None:
    url = make_queue(prefix="con-send")
    page = f"/console/queues/us-east-1/{queue_name_of(url)}"
    resp = _post(browser, "send-message", page, region="us-east-1", queue=queue_name_of(url),
                 body='{"order": 7, "items": ["<b>"]}',
                 attributes="kind = invoice\ncount (Number) = 3", delay="0")
    message_id = _done(resp)["id"]
    assert f"Sent message {message_id}." in browser.get(resp.header("location") or "").text

    view = browser.get(f"{page}/messages/{message_id}")
    assert view.status == 200
    # pretty and escaped
    assert "&quot;order&quot;: 7,\n  &quot;items&quot;: [\n    &quot;&lt;b&gt;&quot;" in view.text
    assert "<td>kind</td><td>String</td><td><code>invoice</code></td>" in view.text
    assert "<td>count</td><td>Number</td><td><code>3</code></td>" in view.text
    assert "<td>Receives</td><td>0</td>" in view.text
    got = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"],
                              AttributeNames=["All"])["Messages"]
    assert [m["MessageId"] for m in got] == [message_id]  # looking received nothing
    assert got[0]["MessageAttributes"]["count"] == {"DataType": "Number", "StringValue": "3"}
    assert got[0]["Attributes"]["ApproximateReceiveCount"] == "1"
    assert browser.get(f"{page}/messages/nope").status == 404


def test_delay_and_fifo_ids_are_sent(browser: Browser, sqs: Any,
                                     make_queue: QueueFactory) -> None:
    url = make_queue(prefix="con-sendfifo", fifo=True)
    name = queue_name_of(url)
    page = f"/console/queues/us-east-1/{name}"
    _done(_post(browser, "send-message", page, region="us-east-1", queue=name, body="b",
                group_id="g1", dedup_id="d1"))
    got = sqs.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"][0]
    assert (got["Attributes"]["MessageGroupId"], got["Attributes"]["MessageDeduplicationId"]) \
        == ("g1", "d1")
    refused = _post(browser, "send-message", page, region="us-east-1", queue=name, body="b")
    assert refused.status == 400 and "MessageGroupId" in refused.text

    std = make_queue(prefix="con-delay")
    _done(_post(browser, "send-message", f"/console/queues/us-east-1/{queue_name_of(std)}",
                region="us-east-1", queue=queue_name_of(std), body="later", delay="60"))
    assert counts(sqs, std) == (0, 0, 1)


def test_edit_attributes_redrive_policy_and_tags(browser: Browser, sqs: Any,
                                                make_queue: QueueFactory) -> None:
    dlq = make_queue(prefix="con-edlq")
    url = make_queue(prefix="con-edit", tags={"team": "a", "old": "x"})
    name = queue_name_of(url)
    page = f"/console/queues/us-east-1/{name}"
    shown = browser.get(page).text
    assert 'name="VisibilityTimeout" type="number"' in shown and 'value="30"' in shown
    assert 'action="/console/edit-tags"' in shown
    resp = _post(browser, "edit-queue", page, region="us-east-1", queue=name,
                 VisibilityTimeout="45", DelaySeconds="0", dlq=queue_name_of(dlq),
                 max_receive_count="4")
    assert _done(resp) == {"done": "edited", "id": "RedrivePolicy, VisibilityTimeout"}
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["VisibilityTimeout"] == "45"
    assert json.loads(attrs["RedrivePolicy"]) == {
        "deadLetterTargetArn": make_queue.arn_of(dlq), "maxReceiveCount": 4}
    assert f"<option selected>{queue_name_of(dlq)}</option>" in browser.get(page).text
    same = _post(browser, "edit-queue", page, region="us-east-1", queue=name,
                 VisibilityTimeout="45", dlq=queue_name_of(dlq), max_receive_count="4")
    assert _done(same) == {"done": "unchanged"}
    # 13 hours: past SetQueueAttributes' 43,200 s (12 h, AWS API reference). Refused by
    # its field, the typed value kept, nothing set.
    bad = _post(browser, "edit-queue", page, **{
        "region": "us-east-1", "queue": name, "VisibilityTimeout": "13",
        "VisibilityTimeout.unit": "h", "dlq": queue_name_of(dlq)})
    assert bad.status == 400 and "Must be from 0 s to 12 h (0–43,200 s)" in bad.text
    assert 'value="13"' in bad.text and "<option selected>h</option>" in bad.text
    lines = _post(browser, "edit-queue", page, region="us-east-1", queue=name,
                  attributes="VisibilityTimeout = 99999", dlq=queue_name_of(dlq))
    assert lines.status == 400 and "Invalid value for the parameter VisibilityTimeout" in \
        lines.text
    _done(_post(browser, "edit-queue", page, region="us-east-1", queue=name, dlq=""))
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert "RedrivePolicy" not in attrs and attrs["VisibilityTimeout"] == "45"

    resp = _post(browser, "edit-tags", page, region="us-east-1", queue=name,
                 tags="team = b\nnew = y")
    assert _done(resp) == {"done": "tagged", "n": "2", "m": "1"}
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "b", "new": "y"}


def test_purge_and_delete_need_the_queue_name_typed(browser: Browser, sqs: Any,
                                                    make_queue: QueueFactory) -> None:
    url = make_queue(prefix="con-purge")
    name = queue_name_of(url)
    page = f"/console/queues/us-east-1/{name}"
    sqs.send_message(QueueUrl=url, MessageBody="m")
    for confirm in ("", name.upper(), "x"):
        resp = _post(browser, "purge-queue", page, region="us-east-1", queue=name,
                     confirm=confirm)
        assert resp.status == 400 and "nothing was changed" in resp.text
    assert counts(sqs, url) == (1, 0, 0)
    assert _done(_post(browser, "purge-queue", page, region="us-east-1", queue=name,
                       confirm=name))["done"] == "purged"
    assert counts(sqs, url) == (0, 0, 0)

    assert _post(browser, "delete-queue", page, region="us-east-1", queue=name,
                 confirm="").status == 400
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"]
    assert _done(_post(browser, "delete-queue", page, region="us-east-1", queue=name,
                       confirm=name)) == {"done": "queue-deleted", "id": name}
    assert name not in " ".join(sqs.list_queues(QueueNamePrefix=name).get("QueueUrls", []))


def test_delete_a_selection_of_messages(browser: Browser, sqs: Any,
                                        make_queue: QueueFactory) -> None:
    url = make_queue(prefix="con-del")
    name = queue_name_of(url)
    page = f"/console/queues/us-east-1/{name}"
    ids = [sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")["MessageId"] for i in range(4)]
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    assert len(received["Messages"]) == 4  # now each has a receipt to delete it by
    listed = browser.get(page).text
    assert all(f'name="m.{i}"' in listed for i in ids)
    resp = _post(browser, "delete-messages", page, region="us-east-1", queue=name,
                 **{f"m.{ids[0]}": "1", f"m.{ids[2]}": "1"})
    assert _done(resp) == {"done": "deleted-messages", "n": "2"}
    left = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["MessageId"] for m in left) == sorted([ids[1], ids[3]])

    never = sqs.send_message(QueueUrl=url, MessageBody="fresh")["MessageId"]
    assert f'name="m.{never}"' in browser.get(page).text  # no receipt, still deletable
    resp = _post(browser, "delete-messages", page, region="us-east-1", queue=name,
                 **{f"m.{never}": "1", f"m.{ids[1]}": "1", "m.gone": "1"})
    assert _done(resp) == {"done": "not-deleted", "n": "2", "m": "1"}
    assert counts(sqs, url) == (0, 1, 0)  # ids[3], still in flight from the receive above
    assert "not received, deleted by the console" in browser.get("/console").text
    assert _post(browser, "delete-messages", page, region="us-east-1", queue=name).status == 400


def test_redrive_dead_letters_back_with_a_rate_and_cancel(browser: Browser, sqs: Any,
                                                          make_queue: QueueFactory) -> None:
    dlq = make_queue(prefix="con-rdlq")
    source = make_queue(prefix="con-rsrc", RedrivePolicy=json.dumps(
        {"deadLetterTargetArn": make_queue.arn_of(dlq), "maxReceiveCount": 1}))
    for i in range(3):
        sqs.send_message(QueueUrl=source, MessageBody=f"poison {i}")
    for _ in range(3):  # past maxReceiveCount: into the dead-letter queue
        sqs.receive_message(QueueUrl=source, MaxNumberOfMessages=10, VisibilityTimeout=0)
    assert counts(sqs, dlq) == (3, 0, 0)
    overview = browser.get("/console").text
    assert re.search(rf'<tr class="alert"><td><a href="[^"]+">{queue_name_of(dlq)}</a>',
                     overview)
    page = f"/console/queues/us-east-1/{queue_name_of(dlq)}"
    assert 'action="/console/redrive"' in browser.get(page).text
    resp = _post(browser, "redrive", page, region="us-east-1", queue=queue_name_of(dlq),
                 destination="", rate="100")
    assert _done(resp)["done"] == "redrive"
    deadline = time.monotonic() + 10
    while counts(sqs, source)[0] < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert counts(sqs, source) == (3, 0, 0) and counts(sqs, dlq) == (0, 0, 0)
    while "COMPLETED" not in browser.get(page).text and time.monotonic() < deadline:
        time.sleep(0.1)  # the task completes at its next step, finding nothing left
    assert "COMPLETED" in browser.get(page).text

    for i in range(30):
        sqs.send_message(QueueUrl=dlq, MessageBody=f"slow {i}")
    _done(_post(browser, "redrive", page, region="us-east-1", queue=queue_name_of(dlq),
                destination=queue_name_of(source), rate="1"))
    running = browser.get(page)
    assert "<progress" in running.text
    task = re.search(r'name="task" value="([^"]+)"', running.text)
    assert task, running.text
    resp = _post(browser, "cancel-redrive", page, region="us-east-1",
                 queue=queue_name_of(dlq), task=task.group(1))
    assert _done(resp)["done"] == "cancelled"
    assert "CANCELLED" in browser.get(page).text
    assert counts(sqs, dlq)[0] > 20


def test_move_a_selection_and_redrive_selected_dead_letters(browser: Browser, sqs: Any,
                                                             make_queue: QueueFactory) -> None:
    """Ticked messages move to a queue typed in, or (dead letters) each back to the queue
    it came from; the others stay. Looked at, never received: their bodies arrive whole."""
    dlq = make_queue(prefix="con-mdlq")
    source = make_queue(prefix="con-msrc", RedrivePolicy=json.dumps(
        {"deadLetterTargetArn": make_queue.arn_of(dlq), "maxReceiveCount": 1}))
    other = make_queue(prefix="con-mother")
    ids = [sqs.send_message(QueueUrl=source, MessageBody=f"poison {i}")["MessageId"]
           for i in range(4)]
    for _ in range(3):  # past maxReceiveCount: into the dead-letter queue
        sqs.receive_message(QueueUrl=source, MaxNumberOfMessages=10, VisibilityTimeout=0)
    assert counts(sqs, dlq) == (4, 0, 0)
    page = f"/console/queues/us-east-1/{queue_name_of(dlq)}"
    assert "Redrive selected</button>" in browser.get(page).text

    resp = _post(browser, "move-messages", page, region="us-east-1", queue=queue_name_of(dlq),
                 destination="", **{f"m.{ids[0]}": "1", f"m.{ids[1]}": "1"})
    assert _done(resp) == {"done": "moved", "n": "2"}
    back = receive_all(sqs, source, 2)
    assert sorted(m["Body"] for m in back) == ["poison 0", "poison 1"]
    resp = _post(browser, "move-messages", page, region="us-east-1", queue=queue_name_of(dlq),
                 destination=queue_name_of(other), **{f"m.{ids[2]}": "1", "m.gone": "1"})
    assert _done(resp) == {"done": "not-moved", "n": "1", "m": "1"}
    assert [m["Body"] for m in receive_all(sqs, other, 1)] == ["poison 2"]
    assert counts(sqs, dlq) == (1, 0, 0)  # ids[3], not ticked

    plain = f"/console/queues/us-east-1/{queue_name_of(other)}"
    fresh = sqs.send_message(QueueUrl=other, MessageBody="fresh")["MessageId"]
    refused = _post(browser, "move-messages", plain, region="us-east-1",
                    queue=queue_name_of(other), destination="", **{f"m.{fresh}": "1"})
    assert refused.status == 400 and "choose a destination" in refused.text
    refused = _post(browser, "move-messages", plain, region="us-east-1",
                    queue=queue_name_of(other), destination=queue_name_of(other),
                    **{f"m.{fresh}": "1"})
    assert refused.status == 400 and "must differ" in refused.text
    assert _post(browser, "move-messages", plain, region="us-east-1",
                 queue=queue_name_of(other), destination="x").status == 400  # none ticked


def test_a_dead_letter_tells_why_it_died(browser: Browser, sqs: Any,
                                        make_queue: QueueFactory) -> None:
    """Its receive count past maxReceiveCount, its first and last receive in the source
    queue; SQS's own answers stay as they were: a receive of the dead letter returns the
    attributes SQS names (botocore's MessageSystemAttributeName enum) and no other."""
    dlq = make_queue(prefix="con-why-dlq")
    source = make_queue(prefix="con-why", RedrivePolicy=json.dumps(
        {"deadLetterTargetArn": make_queue.arn_of(dlq), "maxReceiveCount": 2}))
    message_id = sqs.send_message(QueueUrl=source, MessageBody="poison")["MessageId"]
    received_at = []
    for _ in range(3):  # two deliveries, then the receive that moves it
        got = sqs.receive_message(QueueUrl=source, VisibilityTimeout=0,
                                  MessageSystemAttributeNames=["All"]).get("Messages", [])
        received_at += [int(m["Attributes"]["ApproximateFirstReceiveTimestamp"]) for m in got]
    assert counts(sqs, dlq) == (1, 0, 0) and len(received_at) == 2
    view = browser.get(f"/console/queues/us-east-1/{queue_name_of(dlq)}/messages/{message_id}")
    assert (f"dead-lettered from {queue_name_of(source)}: delivered there 2 times without "
            "being deleted; the next receive, past its maxReceiveCount, moved it here"
            ) in view.text
    first = re.search(r"<td>First received there</td><td><time datetime=\"([^\"]+)\"",
                      view.text)
    assert first and first.group(1) == time.strftime(  # the first receive's own timestamp
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(received_at[0] / 1000))
    assert "<td>Last received there</td><td><time" in view.text

    model = botocore_enum("MessageSystemAttributeName")
    attributes = sqs.receive_message(QueueUrl=dlq, MessageSystemAttributeNames=["All"])[
        "Messages"][0]["Attributes"]
    assert set(attributes) <= set(model) and "DeadLetterQueueSourceArn" in attributes


def botocore_enum(shape: str) -> list[str]:
    """An enum of SQS's service model, as botocore ships it."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("sqs")
    return list(model.shape_for(shape).enum)


def test_paging_and_search_read_no_further_than_they_show(browser: Browser, sqs: Any,
                                                          make_queue: QueueFactory) -> None:
    url = make_queue(prefix="con-page")
    page = f"/console/queues/us-east-1/{queue_name_of(url)}"
    for start in range(0, 120, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"body {i:03d}",
             "MessageAttributes": {"n": {"DataType": "String", "StringValue": f"a{i:03d}"}}}
            for i in range(start, start + 10)])
    first = browser.get(page).text
    assert "Messages 1–50 of 120" in first and "page=2" in first
    third = browser.get(page + "?page=3").text
    assert "Messages 101–120 of 120" in third and "page=4" not in third
    found = browser.get(page + "?search=body+07").text
    assert found.count("<code>body 07") == 10  # body 070 … 079
    by_attribute = browser.get(page + "?search=a119").text
    assert "<code>body 119</code>" in by_attribute and "<code>body 118" not in by_attribute
    one = sqs.send_message(QueueUrl=url, MessageBody="needle")["MessageId"]
    assert "<code>needle</code>" in browser.get(f"{page}?search={one}").text
    assert counts(sqs, url) == (121, 0, 0)


def test_a_read_only_key_sees_no_actions_and_a_forged_one_is_refused(
        secured: ServerProcess) -> None:
    admin = _signed_in(secured, ADMIN, ADMIN_SECRET)
    name = unique("ro")
    _done(_post(admin, "create-queue", "/console", name=name, region="us-east-1"))
    page = f"/console/queues/us-east-1/{name}"
    _done(_post(admin, "send-message", page, region="us-east-1", queue=name, body="keep me"))
    assert 'action="/console/purge-queue"' in admin.get(page).text

    reader = _signed_in(secured, READER, READER_SECRET)
    overview = reader.get("/console").text
    assert name in overview and 'action="/console/create-queue"' not in overview
    seen = reader.get(page).text
    assert re.findall(r'action="/console/([a-z-]+)"', seen) == ["sign-out"]
    assert "keep me" not in seen  # no ReceiveMessage: no bodies either
    token = reader.get(page).form_token()
    for action, fields in (("purge-queue", {"confirm": name}), ("delete-queue",
                                                                 {"confirm": name}),
                           ("send-message", {"body": "x"}),
                           ("create-queue", {"name": unique("ro")}),
                           ("edit-queue", {"attributes": "VisibilityTimeout = 5"}),
                           ("edit-tags", {"tags": "team = x"}),
                           ("delete-messages", {"m.x": "1"}),
                           ("move-messages", {"m.x": "1", "destination": name}),
                           ("drain-worker", {"worker": "host:1:abc"})):
        resp = reader.post(f"/console/{action}", {"csrf": token, "region": "us-east-1",
                                                  "queue": name, **fields})
        assert resp.status == 403, (action, resp.status)
        assert "AccessDenied" in resp.text
    sqs = boto3.client("sqs", endpoint_url=secured.url, region_name="us-east-1",
                       aws_access_key_id=ADMIN, aws_secret_access_key=ADMIN_SECRET)
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    assert counts(sqs, url) == (1, 0, 0)
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])[
        "Attributes"]["VisibilityTimeout"] == "30"
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=url)
    assert f"PurgeQueue {name} by access key {READER}: AccessDenied" in secured.log()
    assert f"SendMessage {name} by access key {ADMIN}: ok" in secured.log()


def test_a_key_limited_to_queues_sees_and_touches_only_those(secured: ServerProcess) -> None:
    admin = _signed_in(secured, ADMIN, ADMIN_SECRET)
    mine, other = unique("orders"), unique("billing")
    for name in (mine, other):
        _done(_post(admin, "create-queue", "/console", name=name, region="us-east-1"))
    orders = _signed_in(secured, ORDERS, ORDERS_SECRET)
    overview = orders.get("/console").text
    assert mine in overview and other not in overview
    assert orders.get(f"/console/queues/us-east-1/{other}").status == 404
    token = orders.get(f"/console/queues/us-east-1/{mine}").form_token()
    refused = orders.post("/console/delete-queue", {"csrf": token, "region": "us-east-1",
                                                    "queue": other, "confirm": other})
    assert refused.status == 403
    assert other in admin.get("/console").text


def test_a_refused_send_keeps_the_typed_message(browser: Browser,
                                                make_queue: QueueFactory) -> None:
    url = make_queue(prefix="con-keep")
    page = f"/console/queues/us-east-1/{queue_name_of(url)}"
    typed = "a long <message> the operator typed"
    # DelaySeconds over 900 is InvalidParameterValue (SendMessage, AWS API reference).
    resp = _post(browser, "send-message", page, region="us-east-1", queue=queue_name_of(url),
                 body=typed, attributes="kind = x", delay="5000")
    assert resp.status == 400 and "Not done" in resp.text
    assert ('<textarea name="body" required>a long &lt;message&gt; the operator typed'
            "</textarea>") in resp.text
    assert "kind = x</textarea>" in resp.text
    token = resp.form_token()  # the form carries the session's token: it can post again
    again = browser.post("/console/send-message", {
        "csrf": token, "region": "us-east-1", "queue": queue_name_of(url), "body": typed})
    assert again.status == 303
