"""The console in a real browser: Playwright driving Debian's Chromium against a real server.

An operator signs in, creates a queue with a dead-letter queue, sends messages from the
console, watches them land in the dead-letter queue (received past maxReceiveCount with
boto3, as a failing worker would) and reads why one died, redrives them with a rate while
the page shows the progress by itself, searches, deletes a message, purges with the name
typed; moves a selection to another queue and redrives a selected dead letter; sees a
real worker's failures and version, drains it with its button, and reads an autoscaler's
decisions as a timeline. A read-only key sees no buttons and its forged POST is refused.
It needs Chromium (`apt-get install chromium`) and the `playwright` package (dev extras);
without them it skips locally and fails in CI. Screenshots go to $CONVEYOR_SCREENSHOTS
(docs/, for the documentation site) or a temporary folder.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import pytest

from conveyor import __version__
from conveyor.client import SQSClient
from tests.server.helpers import counts, unique
from tests.server.test_console_actions import (
    ADMIN,
    ADMIN_SECRET,
    CONFIG,
    READER,
    READER_SECRET,
)
from tests.support import ServerProcess, free_port, unavailable

WAIT_MS = 15_000


def _chromium() -> str:
    """Chromium's path, or a skip (a failure in CI) saying what is missing."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = "the playwright package (pip install -e '.[dev]')"
    else:
        missing = "" if path else "Chromium (apt-get install chromium)"
    if missing:
        unavailable(f"the console's browser test needs {missing}")
    assert path
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("browser")
    config = data / "conveyor.yaml"
    config.write_text(CONFIG)
    proc = ServerProcess(data, "--mode", "relaxed", "--config", str(config)).start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    path = _chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # --no-sandbox: CI runs as root, where Chromium's sandbox cannot start.
        browser = p.chromium.launch(executable_path=path, args=["--no-sandbox"],
                                    timeout=WAIT_MS)
        yield browser
        browser.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("CONVEYOR_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _sqs(server: ServerProcess) -> Any:
    return boto3.client("sqs", endpoint_url=server.url, region_name="us-east-1",
                        aws_access_key_id=ADMIN, aws_secret_access_key=ADMIN_SECRET)


def _sign_in(page: Any, server: ServerProcess, key: str, secret: str) -> None:
    page.set_default_timeout(WAIT_MS)
    page.goto(server.url + "/console")
    assert page.url.endswith("/console/sign-in")
    page.fill("input[name=access_key_id]", key)
    page.fill("input[name=secret_access_key]", secret)
    page.click("button:has-text('Sign in')")
    page.wait_for_url(server.url + "/console")


def _create_queue(page: Any, name: str, dlq: str = "", max_receives: str = "") -> None:
    page.click("summary:has-text('Create a queue')")
    page.fill("input[name=name]", name)
    if dlq:
        page.fill("input[name=dlq]", dlq)
        page.fill("input[name=max_receive_count]", max_receives)
    page.click("button:has-text('Create queue')")
    page.wait_for_selector("text=Created the queue.")


def test_an_operator_acts_from_the_console(server: ServerProcess, chromium: Any,
                                           shots: Path) -> None:
    sqs = _sqs(server)
    context = chromium.new_context(viewport={"width": 1280, "height": 900},
                                   color_scheme="light")
    page = context.new_page()
    _sign_in(page, server, ADMIN, ADMIN_SECRET)
    dlq, source = unique("orders-dlq"), unique("orders")
    _create_queue(page, dlq)
    page.click("a.brand")
    _create_queue(page, source, dlq=dlq, max_receives="2")
    assert page.inner_text("h1") == source
    assert dlq in page.inner_text("text=Go to:")

    for i in range(3):  # sent from the console's own form
        page.click("summary:has-text('Send a message')")
        page.fill("textarea[name=body]", json.dumps({"order": 1000 + i, "total": "12.50"}))
        page.fill("textarea[name=attributes]", f"tenant = acme\nattempt (Number) = {i}")
        page.click("button:has-text('Send message')")
        page.wait_for_selector("text=Sent message")
    source_url = sqs.get_queue_url(QueueName=source)["QueueUrl"]
    assert counts(sqs, source_url) == (3, 0, 0)

    # A failing worker: receive each message past maxReceiveCount without deleting it.
    for _ in range(3):
        sqs.receive_message(QueueUrl=source_url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    dlq_url = sqs.get_queue_url(QueueName=dlq)["QueueUrl"]
    assert counts(sqs, dlq_url) == (3, 0, 0)

    page.goto(server.url + "/console")
    alert = page.locator("tr.alert", has_text=dlq)
    assert alert.count() == 1 and alert.locator(".badge").inner_text() == "dead letters"
    assert "1 dead-letter queue holds 3 messages" in page.inner_text("#queues")
    page.screenshot(path=str(shots / "console-overview.png"), full_page=True)

    alert.locator("a", has_text=dlq).click()
    page.wait_for_selector("#messages table")
    assert page.locator("#messages tbody tr, #messages tr").count() >= 4
    page.screenshot(path=str(shots / "console-dead-letters.png"), full_page=True)
    page.locator("#messages a", has_text="-").first.click()
    page.wait_for_selector("h2:has-text('Body')")
    assert '"order": 10' in page.inner_text("pre")
    assert f"dead-lettered from {source}: delivered there 2 times" in page.inner_text("main")
    assert "First received there" in page.inner_text("main")  # why it died
    page.screenshot(path=str(shots / "console-message.png"), full_page=True)
    # Not received since it landed: no receipt names it, and the console deletes it still.
    page.click("button:has-text('Delete this message')")
    page.wait_for_selector("text=Deleted 1 message(s).")
    assert counts(sqs, dlq_url) == (2, 0, 0)

    # Redrive them home with a rate; the page follows the task without a reload.
    page.fill("input[name=destination]", "")  # blank: back to the queue each came from
    page.fill("input[name=rate]", "1")
    page.click("button:has-text('Start redrive')")
    page.wait_for_selector("text=Redrive started")
    page.evaluate("window.__same_page = true")
    page.wait_for_selector("#tasks >> text=COMPLETED", timeout=WAIT_MS)
    assert page.evaluate("window.__same_page") is True  # updated in place, not reloaded
    assert "2 of 2" in page.inner_text("#tasks")
    page.screenshot(path=str(shots / "console-redrive.png"), full_page=True)
    assert counts(sqs, source_url) == (2, 0, 0) and counts(sqs, dlq_url) == (0, 0, 0)

    # Search, then delete a message that a worker has received (its receipt deletes it).
    page.goto(f"{server.url}/console/queues/us-east-1/{source}")
    taken = sqs.receive_message(QueueUrl=source_url, VisibilityTimeout=0)["Messages"][0]
    page.fill("input[name=search]", taken["MessageId"])
    page.press("input[name=search]", "Enter")
    page.wait_for_selector(f"#messages >> text={taken['MessageId']}")
    assert "1 found" in page.inner_text("#messages")
    page.check(f"input[name='m.{taken['MessageId']}']")
    assert page.inner_text("[data-selected-count]") == "1 selected"
    asked: list[str] = []

    def answer(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()
    page.once("dialog", answer)
    page.click("button:has-text('Delete selected')")
    page.wait_for_selector("text=Deleted 1 message(s).")
    assert asked == ["Delete 1 message? This cannot be undone."]
    assert counts(sqs, source_url)[0] == 1
    # Charted (test_console_charts_browser.py): sent, received, deleted, dead letters
    # arrived, failed attempts and the oldest's age.
    assert page.locator("#activity svg.chart").count() == 6
    assert "Oldest message" in page.inner_text("#activity")

    # Edit an attribute and the tags after creation.
    page.click("summary:has-text('Edit attributes')")
    page.fill("form[action='/console/edit-queue'] input[name=VisibilityTimeout]", "45")
    page.click("button:has-text('Save attributes')")
    page.wait_for_selector("text=Changed VisibilityTimeout.")
    assert sqs.get_queue_attributes(QueueUrl=source_url, AttributeNames=["All"])[
        "Attributes"]["VisibilityTimeout"] == "45"
    assert dlq in page.inner_text("text=Go to:")  # the redrive policy kept
    page.click("summary:has-text('Edit tags')")
    page.fill("form[action='/console/edit-tags'] textarea[name=tags]", "team = orders")
    page.click("button:has-text('Save tags')")
    page.wait_for_selector("text=Tags: 1 set, 0 removed.")
    assert sqs.list_queue_tags(QueueUrl=source_url)["Tags"] == {"team": "orders"}
    page.fill("input[name=search]", '"order": 1001')
    page.press("input[name=search]", "Enter")
    assert "found" in page.inner_text("#messages")

    # Purge: the button stays disabled until the queue's name is typed.
    page.click("summary:has-text('Purge')")
    purge = page.locator("button:has-text('Purge queue')")
    assert purge.is_disabled()
    page.fill("form[action='/console/purge-queue'] input[name=confirm]", source[:-1])
    assert purge.is_disabled()
    page.fill("form[action='/console/purge-queue'] input[name=confirm]", source)
    assert purge.is_enabled()
    purge.click()
    page.wait_for_selector("text=Purged")
    page.wait_for_function("document.querySelector('#counts td').textContent === '0'",
                           timeout=WAIT_MS)
    assert counts(sqs, source_url) == (0, 0, 0)

    for scheme, size, name in (("dark", {"width": 1280, "height": 900}, "console-dark.png"),
                               ("light", {"width": 390, "height": 844}, "console-phone.png")):
        other = chromium.new_context(viewport=size, color_scheme=scheme)
        view = other.new_page()
        view.context.add_cookies(context.cookies())
        view.goto(f"{server.url}/console/queues/us-east-1/{dlq}")
        background = view.evaluate("getComputedStyle(document.body).backgroundColor")
        assert (background == "rgb(21, 23, 26)") == (scheme == "dark"), background
        view.screenshot(path=str(shots / name), full_page=False)
        other.close()
    context.close()


def test_a_read_only_key_sees_no_buttons_and_a_forged_action_is_refused(
        server: ServerProcess, chromium: Any) -> None:
    sqs = _sqs(server)
    name = unique("keep")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="precious")
    context = chromium.new_context()
    page = context.new_page()
    _sign_in(page, server, READER, READER_SECRET)
    assert page.locator("form[action='/console/create-queue']").count() == 0
    page.goto(f"{server.url}/console/queues/us-east-1/{name}")
    forms = page.eval_on_selector_all("form[method=post]", "fs => fs.map(f => f.action)")
    assert forms == [server.url + "/console/sign-out"]
    assert "precious" not in page.content()
    # The reader's own session and CSRF token, a well-formed form: refused all the same.
    status = page.evaluate("""async (name) => {
        const csrf = document.querySelector("input[name=csrf]").value;
        const body = new URLSearchParams({csrf, region: "us-east-1", queue: name,
                                          confirm: name});
        const resp = await fetch("/console/purge-queue", {method: "POST", body});
        return resp.status;
    }""", name)
    assert status == 403
    assert counts(sqs, url) == (1, 0, 0)
    assert f"PurgeQueue {name} by access key {READER}: AccessDenied" in server.log()
    context.close()


def test_an_operator_moves_messages_drains_a_worker_and_reads_the_scaling_timeline(
        server: ServerProcess, chromium: Any, shots: Path, tmp_path: Path) -> None:
    """A selection moved to another queue, one dead letter of two redriven to its source;
    a real `conveyor worker` whose app is down
    shows its failures and version, and the Drain button makes it exit; an autoscaler's
    recorded decisions read as a timeline."""
    sqs = _sqs(server)
    source, target = unique("inbox"), unique("billing")
    source_url = sqs.create_queue(QueueName=source)["QueueUrl"]
    target_url = sqs.create_queue(QueueName=target)["QueueUrl"]
    ids = [sqs.send_message(QueueUrl=source_url, MessageBody=f"invoice {i}")["MessageId"]
           for i in range(3)]
    context = chromium.new_context(viewport={"width": 1280, "height": 900},
                                   color_scheme="light")
    page = context.new_page()
    _sign_in(page, server, ADMIN, ADMIN_SECRET)
    page.goto(f"{server.url}/console/queues/us-east-1/{source}")
    page.check(f"input[name='m.{ids[0]}']")
    page.check(f"input[name='m.{ids[2]}']")
    page.fill("#messages input[name=destination]", target)
    page.click("button:has-text('Move selected')")
    page.wait_for_selector("text=Moved 2 message(s).")
    assert counts(sqs, target_url) == (2, 0, 0) and counts(sqs, source_url) == (1, 0, 0)

    # Redrive one dead letter of two, back where it came from.
    dlq_url = sqs.create_queue(QueueName=unique("inbox-dlq"))["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    sqs.set_queue_attributes(QueueUrl=source_url, Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})})
    sqs.send_message(QueueUrl=source_url, MessageBody="invoice 3")
    for _ in range(2):  # a failing worker: past maxReceiveCount, into the dead-letter queue
        sqs.receive_message(QueueUrl=source_url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    assert counts(sqs, dlq_url) == (2, 0, 0)
    page.goto(f"{server.url}/console/queues/us-east-1/{dlq_url.rsplit('/', 1)[-1]}")
    page.check(f"input[name='m.{ids[1]}']")
    page.click("button:has-text('Redrive selected')")  # no destination: to its source
    page.wait_for_selector("text=Moved 1 message(s).")
    assert counts(sqs, dlq_url) == (1, 0, 0) and counts(sqs, source_url) == (1, 0, 0)

    # A worker whose app never answers (nothing listens): no job fails, the app is down.
    env = {**os.environ, "AWS_ACCESS_KEY_ID": ADMIN, "AWS_SECRET_ACCESS_KEY": ADMIN_SECRET}
    with open(tmp_path / "worker.log", "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "conveyor", "worker", "--worker-queue-url", target_url,
             "--app-url", f"http://127.0.0.1:{free_port()}", "--extended-poll-wait-time", "2",
             "--error-visibility-timeout", "0", "--region", "us-east-1"],
            env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _record_decisions(server, target)
        page.goto(server.url + "/console")
        row = page.locator("#workers tr", has_text=target).filter(
            has=page.locator("button:has-text('Drain')"))
        page.wait_for_function(
            """(q) => [...document.querySelectorAll('#workers tr')].some(r =>
                   r.cells.length > 6 && r.textContent.includes(q)
                   && r.cells[2].textContent.startsWith('app-down since'))""",
            arg=target, timeout=WAIT_MS * 2)
        assert __version__ in row.inner_text()
        timeline = page.locator(f"ol[aria-label='scaling decisions of {target}'] li")
        assert timeline.count() == 2 and "0 → 2" in timeline.nth(1).inner_text()
        page.locator("#workers").screenshot(path=str(shots / "console-workers.png"))
        row.locator("button:has-text('Drain')").click()
        page.wait_for_selector("text=Asked worker")
        assert worker.wait(timeout=60) == 0, (tmp_path / "worker.log").read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert "asked this worker to drain" in (tmp_path / "worker.log").read_text()
    context.close()


def _record_decisions(server: ServerProcess, queue: str) -> None:
    """What `conveyor scale` tells the server: it is alive (announced as a scaler), and two
    decisions of the queue's autoscaler."""
    async def record() -> None:
        async with SQSClient(server.url, region="us-east-1", access_key=ADMIN,
                             secret_key=ADMIN_SECRET) as client:
            await client.call("AnnounceWorker", {
                "WorkerId": f"scaler-of-{queue}", "Kind": "scaler", "Queue": queue,
                "TtlSeconds": 300, "Status": {"policy": "backlog", "current": 1, "desired": 1,
                                              "metric": 1.0, "target": 2.0,
                                              "reason": "within target"}},
                target_prefix="ConveyorWorkers.")
            for current, desired in ((0, 2), (2, 1)):
                await client.call("RecordScalingDecision", {"Queue": queue, "Decision": {
                    "policy": "backlog", "direction": "out" if desired > current else "in",
                    "current": current, "desired": desired, "reason": "backlog per worker",
                    "backlog": 4, "metric": 2.0, "target": 2.0}},
                    target_prefix="ConveyorWorkers.")
    # Playwright's sync API keeps an event loop in this thread: run ours in another.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, record()).result()


def _errors_of(page: Any) -> list[str]:
    """What the browser reports as errors on `page` from now on (console and script)."""
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return errors


def test_the_page_keeps_the_operator_s_work_and_fits_a_phone(
        server: ServerProcess, chromium: Any, shots: Path) -> None:
    """A search being typed survives the live refresh while new messages arrive; on a
    phone the page never scrolls sideways and messages are cards; no page logs an error
    (a 403 favicon or an invalid `pattern` would)."""
    sqs = _sqs(server)
    name = unique("con-keep")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sent = [sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"n": i, "text": "x" * 300}),
                             MessageAttributes={"blob": {"DataType": "Binary",
                                                         "BinaryValue": b"\x01\x02"}})
            for i in range(3)]
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors = _errors_of(page)
    _sign_in(page, server, ADMIN, ADMIN_SECRET)
    page.goto(f"{server.url}/console/queues/us-east-1/{name}")
    page.fill("input[name=search]", "half-typed")
    sqs.send_message(QueueUrl=url, MessageBody="arrived meanwhile")
    page.wait_for_timeout(7_000)  # two live refreshes at least (frame.LIVE_EVERY_S = 3)
    assert page.input_value("input[name=search]") == "half-typed"
    assert page.evaluate("document.activeElement.name") == "search"
    page.locator("input[name=search]").blur()
    page.wait_for_selector("#messages >> text=arrived meanwhile")  # then it updates
    page.goto(f"{server.url}/console")
    page.goto(f"{server.url}/console/queues/us-east-1/{name}/messages/{sent[0]['MessageId']}")
    assert "AQI= (base64)" in page.inner_text("main")
    context.close()
    assert errors == []

    phone = chromium.new_context(viewport={"width": 375, "height": 740}, is_mobile=True,
                                 has_touch=True)
    page = phone.new_page()
    errors = _errors_of(page)
    _sign_in(page, server, ADMIN, ADMIN_SECRET)
    for path in ("/console", f"/console/queues/us-east-1/{name}",
                 f"/console/queues/us-east-1/{name}/messages/{sent[0]['MessageId']}"):
        page.goto(server.url + path)
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= 375, (path, wide)
    page.goto(f"{server.url}/console/queues/us-east-1/{name}")
    card = page.locator("#messages table.cards tr").nth(1)
    assert card.evaluate("r => getComputedStyle(r).display") == "block"
    box = card.bounding_box()
    assert box and box["width"] <= 375
    page.screenshot(path=str(shots / "console-phone-messages.png"), full_page=True)
    phone.close()
    assert errors == []
