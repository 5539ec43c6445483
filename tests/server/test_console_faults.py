"""Small faults of the console an operator met (issue 31), each checked against the
standard it broke: HTML's `datetime` syntax, the `v`-flag regular expressions browsers
compile `pattern` with, a browser's unbidden /favicon.ico, the query a sign-in must keep,
attributes in units people read, Binary values as SQS's JSON protocol carries them
(base64), and a dead letter's receive counts that agree."""

from __future__ import annotations

import base64
import json
import re
from typing import Any
from urllib.parse import quote

from tests.server.conftest import Launcher, QueueFactory
from tests.server.helpers import Browser, RawClient, queue_name_of
from tests.server.test_console import ACCESS_KEY, SECRET_KEY, _rows


def _page(raw: RawClient, path: str) -> str:
    resp = raw.request("GET", path, sign=False)
    assert resp.status == 200, (path, resp.status)
    return resp.body.decode()


def test_times_carry_an_html_datetime(sqs: Any, raw: RawClient,
                                      make_queue: QueueFactory) -> None:
    queue = make_queue(prefix="con-time")
    sqs.send_message(QueueUrl=queue, MessageBody="m")
    page = _page(raw, f"/console/queues/us-east-1/{queue_name_of(queue)}")
    stamps = re.findall(r'<time datetime="([^"]*)"', page)
    assert stamps
    # HTML's "global date and time string" (WHATWG HTML §2.3.5.8): ...T...Z, no " UTC".
    for stamp in stamps:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp), stamp


def test_queue_name_pattern_compiles_under_the_v_flag(raw: RawClient) -> None:
    page = _page(raw, "/console")
    pattern = re.search(r'<input name="name"[^>]*pattern="([^"]*)"', page)
    assert pattern
    # Under the `v` flag (HTML's pattern attribute, ECMAScript 2024), a class may not hold
    # an unescaped `-` beside a range's end or `_`: every `-` not making a range is `\-`.
    for cls in re.findall(r"\[([^\]]*)\]", pattern.group(1).replace("&#x27;", "'")):
        unranged = re.sub(r"[A-Za-z0-9]-[A-Za-z0-9]", "", cls)
        assert "-" not in unranged.replace("\\-", ""), cls


def test_favicon_is_served_not_refused(raw: RawClient) -> None:
    icon = raw.request("GET", "/favicon.ico", sign=False)
    assert icon.status == 200 and icon.header("content-type") == "image/svg+xml"
    assert icon.body.startswith(b"<svg")
    page = _page(raw, "/console")
    assert '<link rel="icon" href="/console/static/favicon.svg"' in page
    assert _page(raw, "/console/static/favicon.svg").startswith("<svg")


def test_sign_in_keeps_the_query_it_interrupted(launch: Launcher) -> None:
    server = launch("--access-key", f"{ACCESS_KEY}:{SECRET_KEY}")
    browser = Browser(server.url)
    wanted = "/console/queues/us-east-1/orders?search=abc%20def&page=3"
    first = browser.get(wanted)
    assert first.status == 303
    assert first.header("location") == f"/console/sign-in?next={quote(wanted, safe='')}"
    form = browser.get(first.header("location") or "")
    token = form.form_token()
    assert f'name="next" value="{wanted.replace("&", "&amp;")}"' in form.text
    signed = browser.post("/console/sign-in", {"csrf": token, "access_key_id": ACCESS_KEY,
                                               "secret_access_key": SECRET_KEY,
                                               "next": wanted})
    assert signed.status == 303 and signed.header("location") == wanted
    # Elsewhere stays refused: only console paths and URL characters go through.
    browser.cookies.clear()
    token = browser.get("/console/sign-in").form_token()
    for bad in ("https://evil.example/console", "/console?x=<b>", "//evil/console"):
        out = browser.post("/console/sign-in", {"csrf": token, "access_key_id": ACCESS_KEY,
                                                "secret_access_key": SECRET_KEY,
                                                "next": bad})
        assert out.header("location") == "/console", bad
        browser.cookies.pop("conveyor_session", None)


def test_queue_attributes_in_units_people_read(raw: RawClient,
                                               make_queue: QueueFactory) -> None:
    queue = make_queue(prefix="con-units", MessageRetentionPeriod="345600",
                       VisibilityTimeout="90")
    page = _page(raw, f"/console/queues/us-east-1/{queue_name_of(queue)}")
    shown = {r[0]: r[1] for r in _rows(page.split("<h2>Attributes</h2>")[1])
             if len(r) == 2}
    assert shown["MessageRetentionPeriod"] == "4 days 345600"
    assert shown["VisibilityTimeout"] == "1 min 30 s 90"
    # SQS's default, 1 MiB (conveyor/service/attributes.py, after the AWS API reference).
    assert shown["MaximumMessageSize"] == "1 MiB 1048576"
    created = shown["CreatedTimestamp"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \d{10}", created), created


def test_a_binary_attribute_shows_in_base64(sqs: Any, raw: RawClient,
                                            make_queue: QueueFactory) -> None:
    queue = make_queue(prefix="con-bin")
    sent = sqs.send_message(QueueUrl=queue, MessageBody="m", MessageAttributes={
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xffhi"}})
    page = _page(raw, f"/console/queues/us-east-1/{queue_name_of(queue)}/messages/"
                     f"{sent['MessageId']}")
    row = next(r for r in _rows(page) if r and r[0] == "blob")
    assert row == ["blob", "Binary", base64.b64encode(b"\x00\xffhi").decode() + " (base64)"]
    assert "b&#x27;" not in page and "b'" not in page


def test_a_dead_letter_s_receive_counts_agree(sqs: Any, raw: RawClient,
                                              make_queue: QueueFactory) -> None:
    dlq = make_queue(prefix="con-dlq")
    source = make_queue(prefix="con-src", RedrivePolicy=json.dumps(
        {"deadLetterTargetArn": make_queue.arn_of(dlq), "maxReceiveCount": 2}))
    sent = sqs.send_message(QueueUrl=source, MessageBody="m")
    for _ in range(2):  # delivered twice, never deleted
        assert sqs.receive_message(QueueUrl=source, VisibilityTimeout=0)["Messages"]
    assert "Messages" not in sqs.receive_message(QueueUrl=source)  # the third moves it
    got = sqs.receive_message(QueueUrl=dlq, VisibilityTimeout=0)["Messages"]  # one here
    assert got[0]["MessageId"] == sent["MessageId"]
    page = _page(raw, f"/console/queues/us-east-1/{queue_name_of(dlq)}/messages/"
                     f"{sent['MessageId']}")
    facts = {r[0]: r[1] for r in _rows(page) if len(r) == 2}
    # Its count goes along (AWS: ApproximateReceiveCount is not reset on a move to the
    # dead-letter queue), less the receive that moved it: 2 there and 1 here.
    assert facts["Receives"].startswith("3 (those in the queue it came from included")
    assert facts["Why here"].startswith(f"dead-lettered from {queue_name_of(source)}: "
                                        "delivered there 2 times without being deleted")
