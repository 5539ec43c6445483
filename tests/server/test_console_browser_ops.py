"""The console's operations in a real browser (Playwright + Debian's Chromium, the fixtures of
test_console_browser.py): everything matching a filter deleted, moved or redrived with a
typed confirmation and progress; typed attribute forms; retry now; pause and resume with
a real worker; a 20,000-message queue; and every page free of console errors, on a
phone too.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import asyncpg
import pytest

from conveyor.client import SQSClient
from tests.server import test_console_browser as base
from tests.server.helpers import counts, unique
from tests.server.test_console_actions import (
    ADMIN,
    ADMIN_SECRET,
    CONFIG,
    ORDERS,
    ORDERS_SECRET,
    READER,
    READER_SECRET,
)
from tests.server.test_console_browser import WAIT_MS, _errors_of, _sign_in, _sqs
from tests.support import (
    POSTGRES_URL,
    RecordingApp,
    ServerProcess,
    free_port,
    isolated,
    require_postgres,
)

# The browser test's fixtures: a real server with access keys, Chromium, screenshots.
server, chromium, shots = base.server, base.chromium, base.shots


def _signed_in(chromium: Any, server: ServerProcess) -> tuple[Any, Any, list[str]]:
    """A desktop browser signed in with the admin key: (context, page, its errors)."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900},
                                   color_scheme="light")
    page = context.new_page()
    errors = _errors_of(page)
    _sign_in(page, server, ADMIN, ADMIN_SECRET)
    return context, page, errors


def _send(sqs: Any, url: str, bodies: list[str]) -> list[str]:
    """SendMessageBatch, ten at a time: the message ids, in order."""
    ids = []
    for start in range(0, len(bodies), 10):
        entries = [{"Id": str(i), "MessageBody": b}
                   for i, b in enumerate(bodies[start:start + 10])]
        answer = {e["Id"]: e["MessageId"]
                  for e in sqs.send_message_batch(QueueUrl=url, Entries=entries)["Successful"]}
        ids += [answer[str(i)] for i in range(len(entries))]
    return ids


def _confirm_bulk(page: Any, typed: str) -> None:
    """On the bulk page: the Apply button stays disabled until `typed` is typed."""
    apply = page.locator("button:has-text('Apply to')")
    assert apply.is_disabled()
    page.fill("input[name=confirm]", typed + "x")
    assert apply.is_disabled()
    page.fill("input[name=confirm]", typed)
    assert apply.is_enabled()
    apply.click()
    page.wait_for_selector("text=Started: its progress is below.")


def _finished(page: Any) -> None:
    """Wait (the page refreshes itself) until no bulk job of the queue is running."""
    page.wait_for_function("""() => {
        const text = document.querySelector('#tasks').textContent;
        return text.includes('COMPLETED') && !text.includes('RUNNING'); }""",
                           timeout=WAIT_MS * 2)


def test_everything_matching_a_filter_is_deleted_moved_and_redriven(
        server: ServerProcess, chromium: Any, shots: Path) -> None:
    sqs = _sqs(server)
    source, target = unique("orders-bulk"), unique("orders-bulk-to")
    url = sqs.create_queue(QueueName=source)["QueueUrl"]
    target_url = sqs.create_queue(QueueName=target)["QueueUrl"]
    # 1,200 messages: more than one step of the job's scan (bulk.SCAN_STEP = 500).
    _send(sqs, url, [json.dumps({"kind": "refund" if i % 3 == 0 else "order", "n": i})
                     for i in range(1_200)])
    context, page, errors = _signed_in(chromium, server)
    page.goto(f"{server.url}/console/queues/us-east-1/{source}?search=refund")
    page.click("text=Act on everything matching")
    assert "400 messages matching “refund”" in page.inner_text("main")
    page.screenshot(path=str(shots / "console-bulk.png"), full_page=True)
    page.check("input[name=kind][value=delete]")
    _confirm_bulk(page, "400")  # the count typed, as GitHub takes it
    _finished(page)
    assert "400 of 400" in page.inner_text("#tasks")
    assert counts(sqs, url) == (800, 0, 0)

    # Move what matches "n": 1" (n 1, 10-19, 100-199, 1000-1199: 1 + 10 + 100 + 200,
    # less the refunds, deleted above: every third n).
    expected = sum(1 for n in range(1_200)
                   if str(n).startswith("1") and n % 3 != 0)
    page.goto(f"{server.url}/console/queues/us-east-1/{source}?search=%22n%22%3A+1")
    page.click("text=Act on everything matching")
    assert f"{expected} messages matching" in page.inner_text("main")
    page.check("input[name=kind][value=move]")
    page.fill("input[name=destination]", target)
    _confirm_bulk(page, source)  # or the queue's name
    _finished(page)
    assert f"{expected} of {expected}" in page.inner_text("#tasks")
    assert counts(sqs, target_url) == (expected, 0, 0)
    assert counts(sqs, url) == (800 - expected, 0, 0)
    context.close()
    assert errors == []


def test_a_bulk_redrive_sends_dead_letters_home_and_a_scoped_key_stays_in_its_scope(
        server: ServerProcess, chromium: Any) -> None:
    sqs = _sqs(server)
    dlq, source, outside = unique("orders-dl"), unique("orders-src"), unique("billing")
    dlq_url = sqs.create_queue(QueueName=dlq)["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    src_url = sqs.create_queue(QueueName=source, Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})})["QueueUrl"]
    outside_url = sqs.create_queue(QueueName=outside)["QueueUrl"]
    _send(sqs, src_url, [f"job {i} {'poison' if i % 2 else 'ok'}" for i in range(20)])
    while counts(sqs, dlq_url)[0] < 20:  # a failing worker: past maxReceiveCount
        sqs.receive_message(QueueUrl=src_url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    context = chromium.new_context()
    page = context.new_page()
    _sign_in(page, server, ORDERS, ORDERS_SECRET)  # queues: orders-* only
    page.goto(f"{server.url}/console/queues/us-east-1/{dlq}/bulk?search=poison")
    assert "10 messages matching “poison”" in page.inner_text("main")
    # Out of its scope: moving them to billing-* is refused by the one table, and nothing
    # moves.
    page.check("input[name=kind][value=move]")
    page.fill("input[name=destination]", outside)
    page.fill("input[name=confirm]", "10")
    page.click("button:has-text('Apply to')")
    assert "AccessDenied" in page.inner_text("main")
    assert counts(sqs, outside_url) == (0, 0, 0) and counts(sqs, dlq_url) == (20, 0, 0)
    # Redriven home (to orders-src, in its scope): the ten matching, and only them.
    page.goto(f"{server.url}/console/queues/us-east-1/{dlq}/bulk?search=poison")
    page.check("input[name=kind][value=redrive]")
    _confirm_bulk(page, "10")
    _finished(page)
    assert counts(sqs, src_url) == (10, 0, 0) and counts(sqs, dlq_url) == (10, 0, 0)
    bodies = {m["Body"] for m in sqs.receive_message(
        QueueUrl=src_url, MaxNumberOfMessages=10)["Messages"]}
    assert all("poison" in b for b in bodies)
    context.close()


@pytest.fixture
def pg_server(tmp_path: Path) -> Iterator[tuple[ServerProcess, str]]:
    """A server on its own PostgreSQL schema: (the server, the schema)."""
    require_postgres()
    (tmp_path / "conveyor.yaml").write_text(CONFIG)
    store = isolated(["--store", POSTGRES_URL])
    proc = ServerProcess(tmp_path, *store, "--mode", "relaxed", "--config",
                         str(tmp_path / "conveyor.yaml")).start()
    yield proc, parse_qs(urlsplit(store[1]).query)["schema"][0]
    proc.stop()


class RowLock:
    """Another PostgreSQL session holding one message's row (FOR UPDATE) until released:
    a job's delete of it waits there, so a test knows which step a job is in."""

    def __init__(self, schema: str, queue: str, position: int) -> None:
        self.locked, self.release = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=asyncio.run,
                                       args=(self._hold(schema, queue, position),))

    async def _hold(self, schema: str, queue: str, position: int) -> None:
        db = await asyncpg.connect(POSTGRES_URL, server_settings={"search_path": schema})
        try:
            async with db.transaction():
                # The queue's messages in the order a bulk job scans them (visible_at, seq);
                # only the one found is locked (FOR UPDATE beside OFFSET would lock those
                # skipped too).
                held = await db.fetchval(
                    "SELECT seq FROM conveyor_messages WHERE seq = (SELECT m.seq FROM"
                    " conveyor_messages m JOIN conveyor_queues q ON q.id = m.queue_id"
                    " WHERE q.name = $1 ORDER BY m.visible_at, m.seq OFFSET $2 LIMIT 1)"
                    " FOR UPDATE", queue, position)
                assert held is not None
                self.locked.set()
                await asyncio.get_running_loop().run_in_executor(None, self.release.wait)
        finally:
            await db.close()

    def __enter__(self) -> RowLock:
        self.thread.start()
        assert self.locked.wait(WAIT_MS / 1000)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.thread.join(WAIT_MS / 1000)


def test_a_bulk_delete_cancelled_mid_way_keeps_what_it_did_and_stops(
        pg_server: tuple[ServerProcess, str], chromium: Any) -> None:
    server, schema = pg_server
    sqs = _sqs(server)
    name = unique("orders-cancel")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    # 1,500 matching messages: three steps of the job's scan (bulk.SCAN_STEP = 500).
    _send(sqs, url, [f"stale {i}" for i in range(1_500)])
    context, page, errors = _signed_in(chromium, server)
    page.goto(f"{server.url}/console/queues/us-east-1/{name}/bulk?search=stale")
    assert "1,500 messages matching “stale”" in page.inner_text("main")
    page.check("input[name=kind][value=delete]")
    # The 750th message held by another session: the job's second step waits on it, so
    # the cancel below lands while the job runs, whatever the machine's speed.
    with RowLock(schema, name, 750):
        _confirm_bulk(page, "1500")
        page.wait_for_selector("#tasks >> text=500 of 1,500")  # the first step done
        reader = chromium.new_context()
        other = reader.new_page()
        _sign_in(other, server, READER, READER_SECRET)  # may look, may not delete
        other.goto(f"{server.url}/console/queues/us-east-1/{name}")
        assert "RUNNING" in other.inner_text("#tasks")
        assert other.locator("form[action='/console/cancel-bulk']").count() == 0
        reader.close()
        page.locator("form[action='/console/cancel-bulk'] button").click()
        page.wait_for_selector("text=Cancelling: the job stops before its next step")
    # Released: the step under way finishes, then the job stops.
    page.wait_for_selector("#tasks >> text=CANCELLED", timeout=WAIT_MS * 2)
    line = page.inner_text("#tasks")
    assert "cancelled after 1,000 of 1,500" in line
    assert "RUNNING" not in line
    assert page.locator("form[action='/console/cancel-bulk']").count() == 0
    left = counts(sqs, url)[0]
    assert 0 < left < 1_500 and left == 500
    context.close()
    assert errors == []


def test_attributes_are_typed_fields_with_units_ranges_and_errors_in_place(
        server: ServerProcess, chromium: Any, shots: Path) -> None:
    """Ranges and defaults from AWS's SetQueueAttributes reference (botocore's model says
    the same): VisibilityTimeout 0 to 43,200 s, MessageRetentionPeriod 60 to 1,209,600 s
    with 345,600 (4 days) by default, maxReceiveCount 1 to 1,000."""
    sqs = _sqs(server)
    name, dlq = unique("typed"), unique("typed-dlq")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.create_queue(QueueName=dlq)
    context, page, errors = _signed_in(chromium, server)
    page.goto(f"{server.url}/console/queues/us-east-1/{name}")
    page.click("summary:has-text('Edit attributes')")
    form = page.locator("form[action='/console/edit-queue']")
    assert form.locator("input[name=MessageRetentionPeriod]").input_value() == "4"
    assert form.locator("select[name='MessageRetentionPeriod.unit']").input_value() == "days"
    assert "1 min to 14 days" in form.inner_text()  # the retention's range, said
    form.locator("input[name=VisibilityTimeout]").fill("13")
    form.locator("select[name='VisibilityTimeout.unit']").select_option("h")
    form.locator("select[name=dlq]").select_option(dlq)
    form.locator("input[name=max_receive_count]").fill("3")
    form.locator("button:has-text('Save attributes')").click()
    # Refused in place: the error under its field, everything typed still there.
    error = page.locator(".field.invalid .field-error")
    assert "Must be from 0 s to 12 h (0–43,200 s); 13 h is not." in error.inner_text()
    form = page.locator("form[action='/console/edit-queue']")
    assert form.locator("input[name=VisibilityTimeout]").input_value() == "13"
    assert form.locator("select[name=dlq]").input_value() == dlq
    assert form.locator("input[name=max_receive_count]").input_value() == "3"
    page.screenshot(path=str(shots / "console-attributes-error.png"), full_page=True)
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["VisibilityTimeout"] == "30" and "RedrivePolicy" not in attrs
    form.locator("input[name=VisibilityTimeout]").fill("2")
    form.locator("button:has-text('Save attributes')").click()
    page.wait_for_selector("text=Changed RedrivePolicy, VisibilityTimeout.")
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["VisibilityTimeout"] == "7200"
    assert json.loads(attrs["RedrivePolicy"])["maxReceiveCount"] == 3
    assert dlq in page.inner_text("text=Go to:")
    assert "2 h" in page.locator("#attributes tr", has_text="VisibilityTimeout").inner_text()
    context.close()
    # The refused form answers 400 on purpose, which Chromium reports; nothing else.
    assert errors == ["Failed to load resource: the server responded with a status of 400 "
                      "(Bad Request)"]


def test_the_create_form_takes_typed_fields_with_units_and_keeps_a_refused_one(
        server: ServerProcess, chromium: Any) -> None:
    """MessageRetentionPeriod 60 to 1,209,600 s (1 min to 14 days), AWS's CreateQueue
    reference (botocore's model says the same)."""
    sqs = _sqs(server)
    name, refused = unique("created"), unique("refused")
    context, page, errors = _signed_in(chromium, server)
    page.click("summary:has-text('Create a queue')")
    form = page.locator("form[action='/console/create-queue']")
    assert "1 min to 14 days" in form.inner_text()  # the retention's range, said
    form.locator("input[name=name]").fill(name)
    form.locator("input[name=MessageRetentionPeriod]").fill("4")
    form.locator("select[name='MessageRetentionPeriod.unit']").select_option("days")
    form.locator("button:has-text('Create queue')").click()
    page.wait_for_selector("text=Created the queue.")
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["MessageRetentionPeriod"] == "345600"

    page.goto(f"{server.url}/console")
    page.click("summary:has-text('Create a queue')")
    form = page.locator("form[action='/console/create-queue']")
    form.locator("input[name=name]").fill(refused)
    form.locator("input[name=MessageRetentionPeriod]").fill("15")
    form.locator("select[name='MessageRetentionPeriod.unit']").select_option("days")
    form.locator("textarea[name=tags]").fill("team = billing")
    form.locator("button:has-text('Create queue')").click()
    # Refused in place: the error under its field, the name and the rest still typed.
    error = page.locator(".field.invalid .field-error")
    assert ("Must be from 1 min to 14 days (60–1,209,600 s); 15 days is not."
            in error.inner_text())
    form = page.locator("form[action='/console/create-queue']")
    assert form.locator("input[name=name]").input_value() == refused
    assert form.locator("input[name=MessageRetentionPeriod]").input_value() == "15"
    assert form.locator("select[name='MessageRetentionPeriod.unit']").input_value() == "days"
    assert form.locator("textarea[name=tags]").input_value() == "team = billing"
    assert refused not in [u.rsplit("/", 1)[-1]
                           for u in sqs.list_queues(QueueNamePrefix=refused).get("QueueUrls", [])]
    context.close()
    # The refused form answers 400 on purpose, which Chromium reports; nothing else.
    assert errors == ["Failed to load resource: the server responded with a status of 400 "
                      "(Bad Request)"]


def _record_failure(server: ServerProcess, queue_url: str, receipt: str) -> None:
    """What a worker tells the server after its app failed a message: RecordAttempts."""
    async def record() -> None:
        async with SQSClient(server.url, region="us-east-1", access_key=ADMIN,
                             secret_key=ADMIN_SECRET) as client:
            await client.call("RecordAttempts", {"QueueUrl": queue_url, "Entries": [{
                "Id": "1", "ReceiptHandle": receipt, "At": int(time.time() * 1000),
                "Reason": "http-500", "Status": 500, "AnswerHead": "boom"}]},
                target_prefix="ConveyorWorkers.")
    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API holds this thread's loop
        pool.submit(asyncio.run, record()).result()


def test_a_queue_s_limits_show_on_its_page_and_as_a_badge_on_the_overview(
        server: ServerProcess, chromium: Any) -> None:
    sqs = _sqs(server)
    name = unique("limited")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]

    async def limit() -> None:  # docs/queue-controls.md: Conveyor's own call, any mode
        async with SQSClient(server.url, region="us-east-1", access_key=ADMIN,
                             secret_key=ADMIN_SECRET) as client:
            await client.call("SetConveyorAttributes", {"QueueUrl": url, "Attributes": {
                "ConveyorGroupConcurrency": "3", "ConveyorReceiveRate": "50",
                "ConveyorReceiveBurst": "10"}}, target_prefix="ConveyorQueues.")
    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API holds this thread's loop
        pool.submit(asyncio.run, limit()).result()
    context, page, errors = _signed_in(chromium, server)
    page.goto(f"{server.url}/console/queues/us-east-1/{name}")
    shown = page.locator("#counts table", has_text="Setting").inner_text()
    assert "Group concurrency\t3 in flight per group" in shown
    assert "Receive rate\t50/s, burst 10" in shown
    page.goto(f"{server.url}/console?q={name}")
    badge = page.locator("#queues tr", has_text=name).locator(".badge.limits")
    assert badge.inner_text() == "limits"
    assert badge.get_attribute("title") == ("Group concurrency: 3 in flight per group; "
                                            "Receive rate: 50/s, burst 10")
    # An unlimited queue carries no badge.
    plain = unique("unlimited")
    sqs.create_queue(QueueName=plain)
    page.goto(f"{server.url}/console?q={plain}")
    assert page.locator("#queues tr", has_text=plain).locator(".badge.limits").count() == 0
    context.close()
    assert errors == []


def test_retry_now_makes_a_message_waiting_out_its_back_off_visible(
        server: ServerProcess, chromium: Any) -> None:
    sqs = _sqs(server)
    name = unique("retry")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    failed_id, held_id = _send(sqs, url, ["fails", "being delivered"])
    # A worker received both; its app failed the first, which now waits out a 10-minute
    # back-off; the second is still being delivered (no attempt recorded): not to retry.
    taken = {m["MessageId"]: m for m in sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600)["Messages"]}
    _record_failure(server, url, taken[failed_id]["ReceiptHandle"])
    sqs.change_message_visibility(QueueUrl=url, VisibilityTimeout=600,
                                  ReceiptHandle=taken[failed_id]["ReceiptHandle"])
    assert counts(sqs, url) == (0, 2, 0)
    context = chromium.new_context()
    page = context.new_page()
    errors = _errors_of(page)
    _sign_in(page, server, ADMIN, ADMIN_SECRET)
    page.goto(f"{server.url}/console/queues/us-east-1/{name}/messages/{held_id}")
    assert page.locator("button:has-text('Retry now')").count() == 0
    page.goto(f"{server.url}/console/queues/us-east-1/{name}/messages/{failed_id}")
    assert "waiting out its back-off" in page.inner_text("main")
    page.click("button:has-text('Retry now')")
    page.wait_for_selector(f"text=Message {failed_id} is visible now")
    assert counts(sqs, url) == (1, 1, 0)
    again = sqs.receive_message(QueueUrl=url, AttributeNames=["ApproximateReceiveCount"])
    [message] = again["Messages"]
    assert message["MessageId"] == failed_id
    assert message["Attributes"]["ApproximateReceiveCount"] == "2"
    # Received again: a worker holds it, so the button is gone.
    page.goto(f"{server.url}/console/queues/us-east-1/{name}/messages/{failed_id}")
    assert page.locator("button:has-text('Retry now')").count() == 0
    context.close()
    assert errors == []


def test_a_paused_queue_delivers_nothing_to_a_real_worker_until_resumed(
        server: ServerProcess, chromium: Any, tmp_path: Path) -> None:
    """Pause and resume from the console (ConveyorQueues.PauseQueue / ResumeQueue, see
    docs/queue-controls.md) with a real `conveyor worker` POSTing to a real app."""
    sqs = _sqs(server)
    name = unique("paused")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    app = RecordingApp(free_port())
    context, page, errors = _signed_in(chromium, server)
    page.goto(f"{server.url}/console/queues/us-east-1/{name}")
    page.click("button:has-text('Pause delivery')")
    page.wait_for_selector("text=Delivery paused: receives answer nothing")
    assert "Delivery paused: receives (and workers) get nothing" in page.inner_text("#counts")
    sqs.send_message(QueueUrl=url, MessageBody="sent while paused")
    env = {**os.environ, "AWS_ACCESS_KEY_ID": ADMIN, "AWS_SECRET_ACCESS_KEY": ADMIN_SECRET}
    with open(tmp_path / "worker.log", "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "conveyor", "worker", "--worker-queue-url", url,
             "--app-url", f"http://127.0.0.1:{app.server.server_port}",
             "--extended-poll-wait-time", "1", "--region", "us-east-1"],
            env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        # The worker is up and polling (it announced itself): still nothing delivered.
        page.goto(server.url + "/console")
        page.wait_for_selector(f"#workers tr:has-text('{name}')", timeout=WAIT_MS * 2)
        assert page.locator("tr", has_text=name).locator(".badge.paused").count() == 1
        sqs_receive = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)
        assert "Messages" not in sqs_receive  # paused for every receiver
        assert app.posts == [] and counts(sqs, url) == (1, 0, 0)
        page.goto(f"{server.url}/console/queues/us-east-1/{name}")
        page.click("button:has-text('Resume delivery')")
        page.wait_for_selector("text=Delivery resumed.")
        app.wait_for_post(b"sent while paused")
        page.goto(server.url + "/console")
        assert page.locator("tr", has_text=name).locator(".badge.paused").count() == 0
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        app.close()
    context.close()
    assert errors == []


def test_a_20000_message_queue_opens_deep_pages_deep_and_deletes_what_matches(
        server: ServerProcess, chromium: Any) -> None:
    """20,000 messages (SendMessageBatch): message 15,000 opens by
    its id (deeper than the 10,000 a list reads), page 300 is reached by next → (the
    keyset cursor past the 200 numbered pages), and everything a search matches is
    counted and deleted."""
    sqs = _sqs(server)
    name = unique("deep")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    total = 20_000
    # One client, in order: the order sent is the order they become visible.
    ids = _send(sqs, url, [f"order {i} shard-{i % 10}" for i in range(total)])
    assert counts(sqs, url) == (total, 0, 0)
    context, page, errors = _signed_in(chromium, server)

    page.goto(f"{server.url}/console/queues/us-east-1/{name}/messages/{ids[14_999]}")
    assert page.inner_text("pre") == "order 14999 shard-9"

    # Page 300: numbers reach 200, next → goes on by the cursor.
    page.goto(f"{server.url}/console/queues/us-east-1/{name}?page=200")
    assert "Messages 9,951–10,000 of 20,000" in page.inner_text("#messages")
    for _ in range(100):
        page.click("#messages a:has-text('next →')")
    text = page.inner_text("#messages")
    assert "Messages 14,951–15,000 of 20,000" in text
    assert ids[14_950] in text and ids[14_999] in text and ids[15_000] not in text

    # Everything matching "shard-7": 2,000 messages, counted and deleted.
    page.goto(f"{server.url}/console/queues/us-east-1/{name}/bulk?search=shard-7")
    assert "2,000 messages matching “shard-7”" in page.inner_text("main")
    page.check("input[name=kind][value=delete]")
    _confirm_bulk(page, "2000")
    _finished(page)
    assert "2,000 of 2,000" in page.inner_text("#tasks")
    assert counts(sqs, url) == (total - 2_000, 0, 0)
    context.close()
    assert errors == []


def _warnings_of(page: Any) -> list[str]:
    """Errors and warnings the browser reports on `page` (console and script)."""
    said: list[str] = []
    page.on("console", lambda msg: said.append(f"{msg.type}: {msg.text}")
            if msg.type in ("error", "warning") else None)
    page.on("pageerror", lambda exc: said.append(f"pageerror: {exc}"))
    return said


def test_no_page_logs_an_error_or_a_warning_and_none_scrolls_sideways_on_a_phone(
        server: ServerProcess, chromium: Any) -> None:
    sqs = _sqs(server)
    dlq, source = unique("every-dlq"), unique("every-page-with-a-long-name")
    dlq_url = sqs.create_queue(QueueName=dlq)["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    url = sqs.create_queue(QueueName=source, Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})})["QueueUrl"]
    ids = _send(sqs, url, [json.dumps({"n": i, "text": "y" * 400}) for i in range(60)])
    taken = sqs.receive_message(QueueUrl=url, VisibilityTimeout=600)["Messages"][0]
    _record_failure(server, url, taken["ReceiptHandle"])  # a failing one, backing off
    dead = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"][0]
    sqs.receive_message(QueueUrl=url, VisibilityTimeout=0, MaxNumberOfMessages=10)
    paused = sqs.create_queue(QueueName=unique("every-paused"))["QueueUrl"]
    _control(server, "PauseQueue", paused)
    base._record_decisions(server, source)  # an autoscaler and its timeline
    queue = f"/console/queues/us-east-1/{source}"
    pages = ["/console", f"/console?q={source[:8]}", queue, f"{queue}?page=2",
             f"{queue}?search=%22n%22", f"{queue}?view=failing",
             f"{queue}/messages/{ids[-1]}", f"{queue}/messages/{taken['MessageId']}",
             f"{queue}/bulk?search=yyyy", f"/console/queues/us-east-1/{dlq}",
             f"/console/queues/us-east-1/{dlq}/messages/{dead['MessageId']}",
             f"/console/queues/us-east-1/{paused.rsplit('/', 1)[-1]}"]
    for size, mobile in (({"width": 1280, "height": 900}, False),
                         ({"width": 375, "height": 740}, True)):
        context = chromium.new_context(viewport=size, is_mobile=mobile, has_touch=mobile)
        page = context.new_page()
        said = _warnings_of(page)
        page.set_default_timeout(WAIT_MS)
        page.goto(server.url + "/console/sign-in")
        assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]
        _sign_in(page, server, ADMIN, ADMIN_SECRET)
        for path in pages:
            response = page.goto(server.url + path)
            assert response is not None and response.status == 200, path
            page.wait_for_load_state("load")
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= size["width"], (path, size, wide)
            page.wait_for_timeout(100)  # the page's script has run (and logged nothing)
        context.close()
        assert said == [], (size, said)


def _control(server: ServerProcess, action: str, queue_url: str) -> None:
    async def call() -> None:
        async with SQSClient(server.url, region="us-east-1", access_key=ADMIN,
                             secret_key=ADMIN_SECRET) as client:
            await client.call(action, {"QueueUrl": queue_url},
                              target_prefix="ConveyorQueues.")
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, call()).result()
