"""The web console: queues, counts and dead-letter wiring as an operator's browser sees them."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest

from tests.server.conftest import Launcher, QueueFactory
from tests.server.helpers import Browser, RawClient, queue_name_of

ACCESS_KEY = "AKIDCONSOLE"
SECRET_KEY = "console/s3cret"


def _get(client: RawClient, path: str, **headers: str) -> Any:
    return client.request("GET", path, headers=headers, sign=False)


def _rows(html: str) -> list[list[str]]:
    """The cells of every table row in `html`, tags stripped (header rows have none)."""
    rows = [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", html)]
    return [cells for cells in rows if cells]


def _row(page: str, name: str) -> list[str]:
    """The cells of the overview's row for queue `name`."""
    for cells in _rows(page):
        if cells[0] == name:
            return cells
    raise AssertionError(f"no row for {name}")


def test_overview_shows_counts_and_dead_letter_wiring(sqs: Any, raw: RawClient,
                                                      make_queue: QueueFactory) -> None:
    dlq = make_queue(prefix="con-dlq")
    source = make_queue(prefix="con-src", RedrivePolicy=json.dumps(
        {"deadLetterTargetArn": make_queue.arn_of(dlq), "maxReceiveCount": 5}))
    for delay in (0, 0, 0, 600):
        sqs.send_message(QueueUrl=source, MessageBody="m", DelaySeconds=delay)
    sqs.receive_message(QueueUrl=source, VisibilityTimeout=600)
    fifo = make_queue(fifo=True, prefix="con-fifo")

    resp = _get(raw, "/console")
    assert resp.status == 200
    assert resp.header("content-type").startswith("text/html")
    page = resp.body.decode()
    src, dl = queue_name_of(source), queue_name_of(dlq)
    row = _row(page, src)
    assert row[:6] + row[8:] == [src, "us-east-1", "standard", "2", "1", "1",
                                 f"{dl} after 5 receives", "none"]
    # Received 1 a moment ago: counted in the hour; no failed attempt of it recorded.
    assert row[6:8] == ["Received in the last hour: 1; at most 0 in a minute", "0%"]
    assert _row(page, dl) == [dl, "us-east-1", "standard", "0", "0", "0", "—", "—",
                              "nowhere", src]
    assert _row(page, queue_name_of(fifo))[2] == "FIFO"
    assert f'href="/console/queues/us-east-1/{dl}"' in page


def test_queue_page_shows_attributes_tags_sources_and_move_tasks(
        sqs: Any, raw: RawClient, make_queue: QueueFactory) -> None:
    dlq = make_queue(prefix="con-dlq", tags={"team": "<script>alert(1)</script>"})
    dlq_arn = make_queue.arn_of(dlq)
    source = make_queue(prefix="con-src", VisibilityTimeout=7, RedrivePolicy=json.dumps(
        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1}))
    sqs.send_message(QueueUrl=dlq, MessageBody="dead")
    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=make_queue.arn_of(source),
                                MaxNumberOfMessagesPerSecond=1)

    page = _get(raw, f"/console/queues/us-east-1/{queue_name_of(dlq)}").body.decode()
    assert f"<code>{dlq_arn}</code>" in page
    assert f">{queue_name_of(source)}</a>" in page.split("Come from:")[1].split("</p>")[0]
    assert "Message move tasks" in page
    assert re.search(r"<td>(RUNNING|COMPLETED)</td>", page)
    assert "<script>" not in page  # tag values are escaped
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page

    page = _get(raw, f"/console/queues/us-east-1/{queue_name_of(source)}").body.decode()
    assert "<td>VisibilityTimeout</td><td>7 s <code>7</code></td>" in page
    assert "&quot;maxReceiveCount&quot;:1" in page  # the policy, escaped
    assert "Message move tasks" not in page


def test_queue_page_shows_the_next_messages_without_receiving_them(
        sqs: Any, raw: RawClient, make_queue: QueueFactory) -> None:
    dlq = make_queue(prefix="con-dlq")
    source = make_queue(prefix="con-src", RedrivePolicy=json.dumps(
        {"deadLetterTargetArn": make_queue.arn_of(dlq), "maxReceiveCount": 1}))
    sqs.send_message(QueueUrl=source, MessageBody="<i>first</i>")
    sqs.send_message(QueueUrl=source, MessageBody="é" * 300)
    taken = sqs.receive_message(QueueUrl=source, VisibilityTimeout=900)["Messages"][0]
    later = sqs.send_message(QueueUrl=source, MessageBody="later", DelaySeconds=120)
    sqs.send_message(QueueUrl=dlq, MessageBody="plain")

    page = _get(raw, f"/console/queues/us-east-1/{queue_name_of(source)}").body.decode()
    messages = page.split("<h2>Messages</h2>")[1].split("<h2>")[0]
    rows = [r[1:] for r in _rows(messages)]  # the first column: boxes to select messages
    assert [r[2] for r in rows] == ["visible", "delayed for 120 s", "in flight for 900 s"]
    assert rows[1][0] == later["MessageId"] and rows[2][0] == taken["MessageId"]
    assert [r[3] for r in rows] == ["0", "0", "1"]
    assert rows[0][5] == "é" * 200 + "…"  # bodies are cut short
    assert "&lt;i&gt;first&lt;/i&gt;" in messages and "<i>" not in messages
    activity = page.split('<section id="activity" data-live>')[1].split("</section>")[0]
    assert re.findall(r'<figure class="chart" data-kind="(\w+)"', activity) == [
        "sent", "received", "deleted", "dead_lettered", "failed", "oldest"]
    assert activity.count('<svg class="chart"') == 6
    # Sent 3 a moment ago: counted in the hour, but the current minute is not drawn (partly
    # counted, it would end the chart in a false drop): the hour's full minutes hold none.
    assert "<b>Sent</b> 3 in the last hour" in activity
    assert "· now 3" in activity  # the current minute, told apart
    sent = activity.split('data-kind="sent"')[1].split("</figure>")[0]
    assert 'class="bars"' not in sent
    assert re.findall(r"<title>(\d\d:\d\d)–(\d\d:\d\d) UTC: none</title>", sent)
    assert "No failed attempts recorded in the last hour." in activity

    # Looking changed nothing: the visible message is still there to receive, once.
    got = sqs.receive_message(QueueUrl=source, MaxNumberOfMessages=10,
                              AttributeNames=["ApproximateReceiveCount"])["Messages"]
    assert [(m["Body"], m["Attributes"]["ApproximateReceiveCount"]) for m in got] == [
        ("é" * 300, "1")]
    sqs.delete_message(QueueUrl=source, ReceiptHandle=got[0]["ReceiptHandle"])
    page = _get(raw, f"/console/queues/us-east-1/{queue_name_of(dlq)}").body.decode()
    assert "plain" in page


@pytest.mark.parametrize("path", [
    "/console/queues/us-east-1/no-such-queue", "/console/queues/eu-west-3/no-such-queue",
    "/console/elsewhere", "/console/queues/us-east-1", "/console/queues/%00/x",
    "/console/queues/us-east-1/%00", "/console/queues/us-east-1/%3Cb%3E",
    "/console/queues/" + "r" * 100 + "/x",
])
def test_unknown_pages_and_queues_are_404(raw: RawClient, path: str) -> None:
    resp = _get(raw, path)
    assert resp.status == 404, (path, resp.status)
    assert b"All queues" in resp.body
    assert b"<b>" not in resp.body


def test_console_only_reads(raw: RawClient) -> None:
    assert raw.request("POST", "/console", b"x", sign=False).status == 405
    assert raw.request("DELETE", "/console/queues/us-east-1/x", sign=False).status == 405


def test_console_of_a_signing_server_asks_for_an_access_key(launch: Launcher) -> None:
    server = launch("--access-key", f"{ACCESS_KEY}:{SECRET_KEY}")
    browser = Browser(server.url)

    refused = browser.get("/console")
    assert refused.status == 303
    assert refused.header("location") == "/console/sign-in"
    # HTTP Basic is gone: the pair in a header opens nothing.
    basic = "Basic " + base64.b64encode(f"{ACCESS_KEY}:{SECRET_KEY}".encode()).decode()
    assert browser.request("GET", "/console", headers={"Authorization": basic}).status == 303
    for key, secret in ((ACCESS_KEY, "nope"), ("OTHER", SECRET_KEY), ("\u00e9", "\u00e9"),
                        (ACCESS_KEY, SECRET_KEY + "\u00e9")):
        assert browser.sign_in(key, secret).status == 401, (key, secret)
    assert browser.sign_in(ACCESS_KEY, SECRET_KEY).status == 303
    welcome = browser.get("/console")
    assert welcome.status == 200
    assert "No queues yet" in welcome.text
    assert "Traceback" not in server.log()


def test_an_open_console_has_no_sign_in(raw: RawClient) -> None:
    to_console = _get(raw, "/console/sign-in")
    assert to_console.status == 303
    assert to_console.header("location") == "/console"
    assert "sign out" not in _get(raw, "/console").body.decode().lower()
    # Its forms still need a CSRF token (none is shown yet, so none can match).
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    assert raw.request("POST", "/console/sign-out", b"", form, sign=False).status == 403


def test_assets_ship_inside_the_package_and_pages_run_no_inline_script(raw: RawClient) -> None:
    page = _get(raw, "/console")
    policy = page.header("content-security-policy") or ""
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    html = page.body.decode()
    assert re.findall(r"<script[^>]*>", html) == ['<script src="/console/static/console.js" '
                                                  "defer>"]
    for name, kind in (("console.js", "text/javascript"), ("console.css", "text/css")):
        asset = _get(raw, f"/console/static/{name}")
        assert asset.status == 200 and asset.header("content-type").startswith(kind)
        assert len(asset.body) > 500
    assert b"prefers-color-scheme: dark" in _get(raw, "/console/static/console.css").body
    for path in ("/console/static/../app.py", "/console/static/__init__.py",
                 "/console/static/nope.js"):
        assert _get(raw, path).status == 404, path


def test_paging_by_cursor_reaches_every_message_once(sqs: Any, raw: RawClient,
                                                      make_queue: QueueFactory) -> None:
    """Past the numbered pages, next → carries a keyset cursor (visible_at, seq): the
    pages it leads through hold every message once, in the numbered pages' order; a page
    number past the numbered ones says where they stop instead of showing another page."""
    url = make_queue(prefix="con-pages")
    for start in range(0, 120, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"m{start + i}"} for i in range(10)])
    base = f"/console/queues/us-east-1/{queue_name_of(url)}"

    def ids(html: str) -> list[str]:
        section = html.split('<section id="messages"')[1].split("</section>")[0]
        return [r[1] for r in _rows(section)]

    numbered = [i for p in (1, 2, 3) for i in ids(_get(raw, f"{base}?page={p}").body.decode())]
    assert len(numbered) == 120 == len(set(numbered))
    seen, path = [], f"{base}?page=1&after=0.0"
    while path:
        html = _get(raw, path).body.decode()
        seen += ids(html)
        found = re.search(r'<a href="([^"]*)">next →</a>', html)
        path = found.group(1).replace("&amp;", "&") if found else ""
        assert not path or "after=" in path
    assert seen == numbered
    far = _get(raw, f"{base}?page=250").body.decode()
    assert "Page 250 cannot be opened by number: numbers reach page 200" in far


def test_a_message_deeper_than_the_listed_ones_opens_and_is_found_by_id(
        sqs: Any, raw: RawClient, make_queue: QueueFactory) -> None:
    """The console lists the next 10,000 (messages.SCAN_LIMIT); one past them, the last to
    become visible, still opens by its id and a search by its exact id finds it."""
    url = make_queue(prefix="con-deep")
    deep = sqs.send_message(QueueUrl=url, MessageBody="the deep one",
                            DelaySeconds=900)["MessageId"]
    for _ in range(1_000):
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": "x"} for i in range(10)])
    base = f"/console/queues/us-east-1/{queue_name_of(url)}"
    page = _get(raw, f"{base}/messages/{deep}")
    assert page.status == 200
    text = page.body.decode()
    assert "the deep one" in text and "deeper than the next 10,000" in text
    found = _get(raw, f"{base}?search={deep}").body.decode()
    assert f'href="{base}/messages/{deep}"' in found
    assert _get(raw, f"{base}/messages/00000000-0000-0000-0000-000000000000").status == 404


def test_the_failing_view_lists_messages_whose_last_attempt_failed(
        sqs: Any, raw: RawClient, make_queue: QueueFactory) -> None:
    """?view=failing: the messages with a recorded failed attempt (a worker's
    RecordAttempts), each with its last reason, searchable by that reason."""
    from tests.server.test_attempts_api import entry, record

    url = make_queue(prefix="con-fail")
    fine = sqs.send_message(QueueUrl=url, MessageBody="fine")["MessageId"]
    bad = sqs.send_message(QueueUrl=url, MessageBody="bad")["MessageId"]
    slow = sqs.send_message(QueueUrl=url, MessageBody="slow")["MessageId"]
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                              VisibilityTimeout=600)["Messages"]
    handles = {m["MessageId"]: m["ReceiptHandle"] for m in got}
    assert set(handles) == {fine, bad, slow}
    record(raw, url, entry(handles[bad], 1_000, "0"),
           entry(handles[slow], 2_000, "1", Reason="timeout", Status=None))
    base = f"/console/queues/us-east-1/{queue_name_of(url)}"

    def listed(path: str) -> dict[str, str]:
        html = _get(raw, path).body.decode()
        section = html.split('<section id="messages"')[1].split("</section>")[0]
        return {r[1]: r[-1] for r in _rows(section)}

    assert listed(f"{base}?view=failing") == {bad: "http-500 (HTTP 500)", slow: "timeout"}
    assert listed(f"{base}?view=failing&search=timeout") == {slow: "timeout"}
    assert fine in listed(base)


def test_limits_show_on_the_queue_page_with_units_and_mark_the_queue_in_the_list(
        raw: RawClient, make_queue: QueueFactory) -> None:
    limited = queue_name_of(make_queue(
        prefix="con-lim", ConveyorGroupConcurrency=3, ConveyorReceiveRate=50,
        ConveyorReceiveBurst=10, ConveyorGroupReceiveRate=0.5,
        ConveyorMaxDelaySeconds=86400))
    delays_only = queue_name_of(make_queue(prefix="con-late", ConveyorMaxDelaySeconds=7200))
    plain = queue_name_of(make_queue(prefix="con-plain"))

    page = _get(raw, f"/console/queues/us-east-1/{limited}").body.decode()
    limits = page.split("<h2>Limits</h2>")[1].split("</table>")[0]
    assert _rows(limits) == [["Group concurrency", "3 in flight per group"],
                             ["Receive rate", "50/s, burst 10"],
                             # the group burst left at 0: the rate's second, at least 1
                             ["Group receive rate", "0.5/s per group, burst 1"],
                             ["Longest delay", "1 day"]]
    page = _get(raw, f"/console/queues/us-east-1/{delays_only}").body.decode()
    assert _rows(page.split("<h2>Limits</h2>")[1].split("</table>")[0]) == [
        ["Longest delay", "2 h"]]
    assert "<h2>Limits</h2>" not in _get(raw, f"/console/queues/us-east-1/{plain}").body.decode()

    overview = _get(raw, "/console").body.decode()
    names = {cells[0] for cells in _rows(overview)}
    assert {f"{limited} limits", delays_only, plain} <= names  # rates and caps, not delays
    badge = re.search(rf">{limited}</a> <span class=\"badge limits\" title=\"([^\"]*)\"",
                      overview)
    assert badge and badge[1] == ("Group concurrency: 3 in flight per group; Receive rate: "
                                  "50/s, burst 10; Group receive rate: 0.5/s per group, "
                                  "burst 1")
