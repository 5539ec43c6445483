"""The console's charts in a real browser (Playwright driving Debian's Chromium) against a
real server whose clock the test moves (--dev-clock): a queue whose jobs fail, a failing
worker's attempts recorded over the wire (ConveyorWorkers.RecordAttempts, as the worker
sends them), its messages dead-lettered; the charts show failures on the queue and
arrivals on its dead-letter queue, with axes and a value on hover, over 1 h, 24 h and
7 d, and the overview shows the failure rate. Needs what test_console_browser.py needs;
screenshots go to $CONVEYOR_SCREENSHOTS (docs/) or a temporary folder."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import pytest

from conveyor.client import SQSClient
from conveyor.client.attempts import Attempt
from tests.server.helpers import advance_clock, unique
from tests.server.test_console_browser import _errors_of, chromium, shots  # noqa: F401
from tests.support import ServerProcess

WAIT_MS = 15_000
# Each simulated minute: (messages sent, of which the app fails); the failed ones go on
# to the dead-letter queue at their next receive (maxReceiveCount 1).
MINUTES = ((12, 2), (20, 5), (8, 0), (25, 3), (30, 9), (18, 1), (10, 0), (22, 6), (16, 4))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("charts"), "--mode", "relaxed",
                         "--dev-clock").start()
    yield proc
    proc.stop()


def _sqs(server: ServerProcess) -> Any:
    return boto3.client("sqs", endpoint_url=server.url, region_name="us-east-1",
                        aws_access_key_id="x", aws_secret_access_key="x")


def _record_failures(server: ServerProcess, url: str, handles: list[str], at_ms: int) -> None:
    """What a worker whose app answered 500 tells the server, over the wire."""
    async def record() -> None:
        async with SQSClient(server.url, region="us-east-1", access_key="x",
                             secret_key="x") as client:
            for start in range(0, len(handles), 10):
                result = await client.record_attempts(url, [
                    (str(i), handle, Attempt(at_ms, "http-500", 500, "boom"))
                    for i, handle in enumerate(handles[start:start + 10])])
                assert not result.failed
    # Playwright's sync API keeps an event loop in this thread: run ours in another.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, record()).result()


def _work(server: ServerProcess, sqs: Any, url: str) -> None:
    """MINUTES of a worker's work, a simulated minute each: the app takes most messages
    (deleted), fails some (recorded, then dead-lettered at their next receive)."""
    for sent, failing in MINUTES:
        for start in range(0, sent, 10):
            sqs.send_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "MessageBody": json.dumps({"n": i})}
                for i in range(start, min(sent, start + 10))])
        got: list[dict[str, Any]] = []
        while len(got) < sent:
            got += sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                       VisibilityTimeout=30)["Messages"]
        failed, done = got[:failing], got[failing:]
        for start in range(0, len(done), 10):
            sqs.delete_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                for i, m in enumerate(done[start:start + 10])])
        if failed:
            _record_failures(server, url, [m["ReceiptHandle"] for m in failed], 1)
            sqs.change_message_visibility_batch(QueueUrl=url, Entries=[  # to try again
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                for i, m in enumerate(failed)])
            assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get(
                "Messages", []) == []  # each went to the dead-letter queue instead
        advance_clock(server.url, 60)


def _to_a_minute_s_start(server: ServerProcess) -> None:
    """Move the server's clock to a second past a minute's start, so that each simulated
    minute's calls (a few seconds of real time) fall in one minute."""
    request = urllib.request.Request(f"{server.url}/_conveyor/clock?advance=0",
                                     method="POST")
    advanced_ms = json.loads(urllib.request.urlopen(request, timeout=10).read())["advanced_ms"]
    now_s = time.time() + advanced_ms / 1000
    advance_clock(server.url, 61 - now_s % 60)


def _hovered_title(page: Any, figure: str) -> str:
    """The hover text (SVG <title>) of the column under the mouse in a chart."""
    return page.evaluate(
        "kind => { const r = [...document.querySelectorAll("
        "`figure[data-kind=${kind}] .hover rect`)].find(e => e.matches(':hover'));"
        " return r ? r.querySelector('title').textContent : null; }", figure)


def test_charts_show_failures_dead_letters_axes_and_ranges(
        server: ServerProcess, chromium: Any, shots: Path) -> None:  # noqa: F811
    sqs = _sqs(server)
    dlq_name, name = unique("charts-dlq"), unique("charts")
    dlq = sqs.create_queue(QueueName=dlq_name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    url = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": arn, "maxReceiveCount": 1})})["QueueUrl"]
    _to_a_minute_s_start(server)
    _work(server, sqs, url)
    sent = sum(s for s, _ in MINUTES)
    failed = sum(f for _, f in MINUTES)

    context = chromium.new_context(viewport={"width": 1280, "height": 900},
                                   color_scheme="light")
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    errors = _errors_of(page)
    page.goto(f"{server.url}/console/queues/us-east-1/{name}?search=order")
    activity = page.locator("#activity")
    assert page.locator("#activity nav.ranges a[aria-current]").inner_text() == "1 hour"
    # Every kind charted; failures counted from the recorded attempts, with the rate.
    received = sent  # a receive that moves a message to the dead-letter queue returns none
    assert (f"Failed attempts in the last hour: {failed} of {received} received "
            f"({failed / received:.0%})") in activity.inner_text()
    caption = page.locator("figure[data-kind=failed] figcaption").inner_text()
    assert caption.startswith(f"Failed attempts {failed} in the last hour")
    assert page.locator("figure[data-kind=failed] path.bars").count() == 1
    # Axes: counts at the left (0 and a round top), time below from "now" back an hour.
    values = page.locator("figure[data-kind=sent] .values text").all_text_contents()
    assert values == ["0", "25", "50"]  # the busiest minute sent 30: a round top above
    assert page.locator("figure[data-kind=sent] .time text").all_text_contents() == [
        "now", "−15 min", "−30 min", "−45 min", "−60 min"]
    # Hover: the last full minute's column tells its time and count.
    page.locator("figure[data-kind=sent] .hover rect").last.hover()
    title = _hovered_title(page, "sent")
    assert title is not None and title.endswith(f": {MINUTES[-1][0]} sent"), title
    assert " UTC" in title
    page.locator("figure[data-kind=failed] .hover rect").last.hover()
    assert _hovered_title(page, "failed").endswith(f": {MINUTES[-1][1]} failed attempts")
    activity.screenshot(path=str(shots / "console-charts.png"))

    # The dead-letter queue charts what arrived, a minute at a time.
    page.goto(f"{server.url}/console/queues/us-east-1/{dlq_name}")
    caption = page.locator("figure[data-kind=dead_lettered] figcaption").inner_text()
    assert caption.startswith(f"Dead letters arrived {failed} in the last hour")
    page.locator("figure[data-kind=dead_lettered] .hover rect").last.hover()
    assert _hovered_title(page, "dead_lettered").endswith(
        f": {MINUTES[-1][1]} dead letters arrived")

    # The overview: the failure rate of each queue over the last hour.
    page.goto(f"{server.url}/console?q={name}")
    row = page.locator("tr", has=page.locator(f"a:text-is('{name}')"))
    assert row.locator(".failing").inner_text() == f"{failed / received:.0%}"

    # Ranges: the link keeps the page's state (the search), and the figures come from the
    # store: two hours on, the hour is empty but the day and the week still hold them.
    page.goto(f"{server.url}/console/queues/us-east-1/{name}?search=order")
    advance_clock(server.url, 2 * 3600)
    page.reload()
    assert page.locator("figure[data-kind=sent] figcaption").inner_text().startswith(
        "Sent 0 in the last hour")
    page.click("#activity nav.ranges a:text('24 hours')")
    page.wait_for_url("**range=24h**")
    assert "search=order" in page.url and page.input_value("input[name=search]") == "order"
    caption = page.locator("figure[data-kind=sent] figcaption").inner_text()
    assert caption.startswith(f"Sent {sent} in the last 24 hours")
    assert page.locator("figure[data-kind=sent] .time text").all_text_contents() == [
        "now", "−6 h", "−12 h", "−18 h", "−24 h"]
    page.click("#activity nav.ranges a:text('7 days')")
    page.wait_for_url("**range=7d**")
    assert page.locator("figure[data-kind=failed] figcaption").inner_text().startswith(
        f"Failed attempts {failed} in the last 7 days")
    assert page.locator("figure[data-kind=sent] .time text").all_text_contents()[-1] == "−7 d"
    page.wait_for_timeout(4_000)  # a live refresh keeps the range (it fetches this URL)
    assert "in the last 7 days" in activity.inner_text()
    assert errors == []
    context.close()
