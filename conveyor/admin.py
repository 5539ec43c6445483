"""`conveyor queue ...` and `conveyor message ...`: look after queues from the shell.

Plain SQS calls through the project's client, so they work against `conveyor server`,
Amazon SQS or any SQS-compatible endpoint, without the AWS CLI. A queue is named by
its name or its URL; a URL is sent to its own host unless --endpoint-url (or
CONVEYOR_ENDPOINT_URL) says otherwise. `--json` prints what a script would rather parse.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from conveyor._click import HTTP_URL
from conveyor.client.attempts import Attempt
from conveyor.client.client import QUEUES_TARGET_PREFIX, SQSClient, endpoint_from_queue_url
from conveyor.client.errors import SQSError, SQSTransportError
from conveyor.client.partitions import (
    MAX_PARTITIONS,
    PartitionedQueue,
    PartitionError,
    partition_name,
)
from conveyor.payloads.blobs import BlobError, BlobSettings, BlobStore
from conveyor.payloads.offload import Offloader, OffloadError, default_store
from conveyor.payloads.pointer import DEFAULT_THRESHOLD_BYTES, EMBEDDED_BUCKET, EMBEDDED_STORE_PATH

DEFAULT_ENDPOINT = "http://127.0.0.1:9324"
MOVE_POLL_S = 0.5
LIST_CONCURRENCY = 16  # GetQueueAttributes calls in flight while listing many queues

T = TypeVar("T")


class Target:
    """The endpoint the commands talk to; one client per command."""

    def __init__(self, endpoint_url: str, region: str | None, explicit: bool = True) -> None:
        self.endpoint_url = endpoint_url
        self.region = region
        self.explicit = explicit  # given by flag or variable, not the default

    def run(self, work: Callable[[SQSClient], Awaitable[T]], queue: str | None = None) -> T:
        """Run `work` with a client; a `queue` given by URL picks the endpoint, unless one
        was given explicitly (as the AWS CLI sends to --endpoint-url whatever the URL)."""
        if queue is not None and not self.explicit and queue.startswith(("http://", "https://")):
            try:
                self.endpoint_url = endpoint_from_queue_url(queue)
            except ValueError as exc:
                raise click.ClickException(str(exc)) from None

        async def main() -> T:
            async with SQSClient(self.endpoint_url, region=self.region) as sqs:
                return await work(sqs)

        try:
            return asyncio.run(main())
        except SQSError as exc:
            about = f"{queue}: " if queue and exc.matches("QueueDoesNotExist") else ""
            raise click.ClickException(f"{about}{exc.type_name}: {exc.message}") from None
        except SQSTransportError as exc:
            raise click.ClickException(
                f"cannot reach {self.endpoint_url} ({exc.detail}); is `conveyor server` "
                "running there? Set --endpoint-url or CONVEYOR_ENDPOINT_URL.") from None


def _target(command: Callable[..., None]) -> Callable[..., None]:
    """Give a command --endpoint-url and --region, and call it with the Target they name."""
    @wraps(command)
    def with_target(*args: Any, endpoint_url: str, region: str | None, **kwargs: Any) -> None:
        source = click.get_current_context().get_parameter_source("endpoint_url")
        explicit = source not in (None, ParameterSource.DEFAULT)
        command(Target(endpoint_url, region, explicit), *args, **kwargs)

    with_target = click.option(
        "--region", envvar="AWS_REGION",
        help="Region to sign for (default: AWS_DEFAULT_REGION, else us-east-1).")(with_target)
    return click.option("--endpoint-url", envvar="CONVEYOR_ENDPOINT_URL", type=HTTP_URL,
                        default=DEFAULT_ENDPOINT, show_default=True,
                        help="The SQS endpoint (also CONVEYOR_ENDPOINT_URL).")(with_target)


async def queue_url(sqs: SQSClient, queue: str) -> str:
    """A queue given by URL stays as it is; a name is looked up (an unknown one is named)."""
    if queue.startswith(("http://", "https://")):
        return queue
    try:
        return await sqs.get_queue_url(queue)
    except SQSError as exc:
        if exc.matches("QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue"):
            raise click.ClickException(
                f"there is no queue named {queue} at {sqs.endpoint_url}") from None
        raise


async def partitioned_queue(sqs: SQSClient, queue: str, partitions: int) -> PartitionedQueue:
    """The logical queue `queue` (a name or its URL) of `partitions` partitions; a name is
    looked up through its first partition, since the logical queue itself does not exist."""
    if queue.startswith(("http://", "https://")):
        url = queue
    else:
        first = await sqs.get_queue_url(partition_name(queue, 0))
        url = first.rsplit("/", 1)[0] + "/" + queue
    try:
        return PartitionedQueue(url, partitions)
    except PartitionError as exc:
        raise click.BadParameter(str(exc), param_hint="--partitions") from None


def _pairs(values: tuple[str, ...], what: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{value!r}: expected NAME=VALUE", param_hint=what)
        out[key] = val
    return out


def _print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _print_table(headings: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headings)]
    for row in [headings, *rows]:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


# --- conveyor queue -------------------------------------------------------------------------

@click.group("queue")
def queue_group() -> None:
    """Create, list, inspect, purge, delete and redrive queues."""


COUNTS = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
          "ApproximateNumberOfMessagesDelayed")
PAUSED = "ConveyorPaused"  # a Conveyor server's own attribute (service/controls.py)


@queue_group.command("list")
@click.option("--prefix", default="", help="Only queues whose name starts with this.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_target
def list_queues(target: Target, prefix: str, as_json: bool) -> None:
    """Every queue with its visible / in-flight / delayed messages."""
    async def work(sqs: SQSClient) -> list[tuple[str, dict[str, str]]]:
        params: dict[str, Any] = {"QueueNamePrefix": prefix} if prefix else {}
        urls: list[str] = []
        while True:  # every page
            answer = await sqs.call("ListQueues", {**params, "MaxResults": 1000})
            urls += answer.get("QueueUrls", [])
            if not answer.get("NextToken"):
                break
            params["NextToken"] = answer["NextToken"]
        looking = asyncio.Semaphore(LIST_CONCURRENCY)
        names = [*COUNTS, "RedrivePolicy", PAUSED]

        async def counts(url: str) -> dict[str, str] | None:
            async with looking:
                try:
                    return await sqs.get_queue_attributes(url, names)
                except SQSError as exc:
                    if exc.matches("QueueDoesNotExist"):
                        return None  # deleted since it was listed
                    if exc.matches("InvalidAttributeName") and PAUSED in names:
                        names.remove(PAUSED)  # not a Conveyor server: no pauses to show
                        return await counts(url)
                    raise

        found = await asyncio.gather(*(counts(url) for url in urls))
        return [(url, attrs) for url, attrs in zip(urls, found, strict=True)
                if attrs is not None]

    queues = target.run(work)
    if as_json:
        _print_json([{"QueueUrl": url, **attrs} for url, attrs in queues])
        return
    if not queues:
        click.echo("no queues" + (f" named {prefix}..." if prefix else ""))
        return
    rows = []
    for url, attrs in queues:
        policy = json.loads(attrs.get("RedrivePolicy") or "{}")
        dead_letters = policy.get("deadLetterTargetArn", "").rsplit(":", 1)[-1]
        rows.append([url.rsplit("/", 1)[-1], *(attrs.get(name, "?") for name in COUNTS),
                     "paused" if attrs.get(PAUSED) == "true" else "",
                     dead_letters and f"{dead_letters} after {policy['maxReceiveCount']} receives"])
    headings = ["QUEUE", "VISIBLE", "IN FLIGHT", "DELAYED", "DELIVERY", "DEAD LETTERS TO"]
    if not any(row[4] for row in rows):  # the column only when a queue is paused
        headings.pop(4)
        rows = [row[:4] + row[5:] for row in rows]
    _print_table(headings, rows)


@queue_group.command("create")
@click.argument("name")
@click.option("--attribute", "-a", "attributes", multiple=True, metavar="NAME=VALUE",
              help="A queue attribute, e.g. -a VisibilityTimeout=60 (repeatable).")
@click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE", help="A tag (repeatable).")
@click.option("--dead-letter", metavar="QUEUE",
              help="Send messages received too often to this existing queue.")
@click.option("--max-receive-count", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Receives before a message goes to --dead-letter.")
@_target
def create_queue(target: Target, name: str, attributes: tuple[str, ...], tags: tuple[str, ...],
                 dead_letter: str | None, max_receive_count: int) -> None:
    """Create queue NAME (a name ending in .fifo makes a FIFO queue); prints its URL."""
    attrs = _pairs(attributes, "--attribute")
    if name.endswith(".fifo"):
        attrs.setdefault("FifoQueue", "true")

    async def work(sqs: SQSClient) -> str:
        if dead_letter:
            attrs["RedrivePolicy"] = json.dumps({
                "deadLetterTargetArn": await _arn(sqs, dead_letter),
                "maxReceiveCount": max_receive_count})
        return await sqs.create_queue(name, attrs, _pairs(tags, "--tag"))

    click.echo(target.run(work, queue=dead_letter))


@queue_group.command("show")
@click.argument("queue")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_target
def show_queue(target: Target, queue: str, as_json: bool) -> None:
    """QUEUE's URL, attributes and tags."""
    async def work(sqs: SQSClient) -> tuple[str, dict[str, str], dict[str, str]]:
        url = await queue_url(sqs, queue)
        tags = (await sqs.call("ListQueueTags", {"QueueUrl": url})).get("Tags", {})
        return url, await sqs.get_queue_attributes(url), tags

    url, attrs, tags = target.run(work, queue=queue)
    if as_json:
        _print_json({"QueueUrl": url, "Attributes": attrs, "Tags": tags})
        return
    _print_table(["ATTRIBUTE", "VALUE"], [["QueueUrl", url], *sorted(attrs.items()),
                                          *[[f"tag:{k}", v] for k, v in sorted(tags.items())]])


@queue_group.command("purge")
@click.argument("queue")
@_target
def purge_queue(target: Target, queue: str) -> None:
    """Delete every message in QUEUE (SQS allows one purge a minute)."""
    async def work(sqs: SQSClient) -> None:
        await sqs.call("PurgeQueue", {"QueueUrl": await queue_url(sqs, queue)})

    target.run(work, queue=queue)
    click.echo(f"purged {queue}")


@queue_group.command("delete")
@click.argument("queue")
@click.option("--yes", is_flag=True, help="Do not ask first.")
@_target
def delete_queue(target: Target, queue: str, yes: bool) -> None:
    """Delete QUEUE and every message in it."""
    async def existing(sqs: SQSClient) -> str:  # asked only about a queue that exists
        url = await queue_url(sqs, queue)
        await sqs.get_queue_attributes(url, ["QueueArn"])
        return url

    url = target.run(existing, queue=queue)
    if not yes:
        click.confirm(f"Delete {queue} and all its messages?", abort=True)

    async def work(sqs: SQSClient) -> None:
        await sqs.delete_queue(url)

    target.run(work, queue=queue)
    click.echo(f"deleted {queue}")


@queue_group.command("set")
@click.argument("queue")
@click.option("--attribute", "-a", "attributes", multiple=True, required=True,
              metavar="NAME=VALUE", help="An attribute, e.g. -a VisibilityTimeout=60 or "
              "-a ConveyorMaxDelaySeconds=86400 (repeatable).")
@_target
def set_attributes(target: Target, queue: str, attributes: tuple[str, ...]) -> None:
    """Set attributes of QUEUE: SQS's through SetQueueAttributes, a Conveyor server's own
    (`Conveyor...`, e.g. ConveyorMaxDelaySeconds for delays past 15 minutes) through its
    SetConveyorAttributes, which takes them in strict mode too."""
    given = _pairs(attributes, "--attribute")
    own = {k: v for k, v in given.items() if k.startswith("Conveyor")}
    sqs_own = {k: v for k, v in given.items() if k not in own}

    async def work(sqs: SQSClient) -> None:
        url = await queue_url(sqs, queue)
        if own:  # first: a raised delay limit lets the DelaySeconds beside it through
            await sqs.call("SetConveyorAttributes", {"QueueUrl": url, "Attributes": own},
                           target_prefix=QUEUES_TARGET_PREFIX)
        if sqs_own:
            await sqs.set_queue_attributes(url, sqs_own)

    target.run(work, queue=queue)
    click.echo(f"set {', '.join(given)} of {queue}")


@queue_group.command("pause")
@click.argument("queue")
@_target
def pause_queue(target: Target, queue: str) -> None:
    """Pause QUEUE's delivery (a Conveyor server's own call): receives answer nothing,
    sends go on, parked long polls stay parked until `conveyor queue resume`."""
    _control(target, queue, "PauseQueue")
    click.echo(f"paused {queue}")


@queue_group.command("resume")
@click.argument("queue")
@_target
def resume_queue(target: Target, queue: str) -> None:
    """Resume QUEUE's delivery: its parked long polls wake at once."""
    _control(target, queue, "ResumeQueue")
    click.echo(f"resumed {queue}")


def _control(target: Target, queue: str, action: str) -> None:
    async def work(sqs: SQSClient) -> None:
        await sqs.call(action, {"QueueUrl": await queue_url(sqs, queue)},
                       target_prefix=QUEUES_TARGET_PREFIX)

    target.run(work, queue=queue)


@queue_group.command("redrive")
@click.argument("dead_letter_queue")
@click.option("--to", "destination", metavar="QUEUE",
              help="Move the messages here instead of back to the queues they came from.")
@click.option("--rate", type=click.IntRange(1, 500),
              help="At most this many messages per second.")
@click.option("--no-wait", is_flag=True, help="Start the move task and return at once.")
@_target
def redrive(target: Target, dead_letter_queue: str, destination: str | None, rate: int | None,
            no_wait: bool) -> None:
    """Move DEAD_LETTER_QUEUE's messages back (StartMessageMoveTask), showing progress."""
    async def work(sqs: SQSClient) -> dict[str, Any]:
        source_arn = await _arn(sqs, dead_letter_queue)
        params: dict[str, Any] = {"SourceArn": source_arn}
        if destination:
            params["DestinationArn"] = await _arn(sqs, destination)
        if rate:
            params["MaxNumberOfMessagesPerSecond"] = rate
        await sqs.call("StartMessageMoveTask", params)
        if no_wait:
            return {"Status": "RUNNING"}
        return await _follow(sqs, source_arn)

    try:
        task = target.run(work, queue=dead_letter_queue)
    except KeyboardInterrupt:
        click.echo("\nstopped watching; the move task goes on "
                   "(conveyor queue redrive --help, or ListMessageMoveTasks)")
        return
    if task["Status"] == "FAILED":
        raise click.ClickException(f"move task failed: {task.get('FailureReason', '?')}")
    if no_wait:
        click.echo(f"move task started from {dead_letter_queue}")


async def _arn(sqs: SQSClient, queue: str) -> str:
    return (await sqs.get_queue_attributes(await queue_url(sqs, queue), ["QueueArn"]))["QueueArn"]


async def _follow(sqs: SQSClient, source_arn: str) -> dict[str, Any]:
    """Poll the move task until it ends, printing its progress as it changes."""
    shown = None
    while True:
        [task] = (await sqs.call("ListMessageMoveTasks",
                                 {"SourceArn": source_arn, "MaxResults": 1}))["Results"]
        progress = (f"{task['Status'].lower()}: moved {task['ApproximateNumberOfMessagesMoved']}"
                    f" of {task['ApproximateNumberOfMessagesToMove']}")
        if progress != shown:
            click.echo(progress)
            shown = progress
        if task["Status"] != "RUNNING":
            return task
        await asyncio.sleep(MOVE_POLL_S)


# --- conveyor message -----------------------------------------------------------------------

@click.group("message")
def message_group() -> None:
    """Send and receive messages."""


@message_group.command("send")
@click.argument("queue")
@click.argument("body", required=False)
@click.option("--delay", type=click.IntRange(0, 900), help="Seconds before it can be received.")
@click.option("--group", "group_id", help="MessageGroupId (FIFO queues).")
@click.option("--dedup-id", help="MessageDeduplicationId (FIFO queues).")
@click.option("--attribute", "-a", "attributes", multiple=True, metavar="NAME=VALUE",
              help="A String message attribute (repeatable).")
@click.option("--partitions", type=click.IntRange(0, MAX_PARTITIONS), default=0,
              envvar="CONVEYOR_PARTITIONS", show_default=True,
              help="QUEUE is a logical queue of this many partitions QUEUE-p0 ... (as the "
              "worker's Partitions option; also CONVEYOR_PARTITIONS); 0 = a plain queue.")
@click.option("--partition-key", metavar="KEY",
              help="Pick the partition by CRC-32 of KEY (default: the --group on FIFO "
              "queues, else round robin).")
@click.option("--payload-bucket", envvar="CONVEYOR_PAYLOAD_BUCKET",
              help="Store a body larger than --payload-threshold in this bucket and send a "
              "pointer (the SQS Extended Client's format)  [default: the Conveyor server's "
              f"embedded {EMBEDDED_BUCKET}; none on Amazon SQS]")
@click.option("--payload-endpoint-url", envvar="CONVEYOR_PAYLOAD_ENDPOINT_URL", type=HTTP_URL,
              help="S3-compatible endpoint of that bucket  [default: the Conveyor server's "
              f"{EMBEDDED_STORE_PATH}; Amazon S3 on Amazon SQS]")
@click.option("--payload-threshold", type=click.IntRange(0), metavar="BYTES",
              help="Offload bodies (with attributes) larger than this  [default: the queue's "
              "MaximumMessageSize]")
@click.option("--compress", is_flag=True,
              help="gzip the stored body (marked ConveyorPayloadEncoding: gzip; Conveyor's "
              "worker inflates it, the Extended Client cannot).")
@_target
def send(target: Target, queue: str, body: str | None, delay: int | None, group_id: str | None,
         dedup_id: str | None, attributes: tuple[str, ...], partitions: int,
         partition_key: str | None, payload_bucket: str | None,
         payload_endpoint_url: str | None, payload_threshold: int | None,
         compress: bool) -> None:
    """Send BODY (or standard input when BODY is - or left out) to QUEUE; prints its id.

    A body too large for the queue goes to a blob store and a pointer is sent instead."""
    if body is None or body == "-":
        if body is None and sys.stdin.isatty():
            raise click.UsageError("give the message BODY, or pipe it on standard input "
                                   "(BODY - or left out)")
        body = sys.stdin.read()
        if not body:
            raise click.UsageError("the message body is empty: SQS needs at least one "
                                   "character (give BODY, or pipe it on standard input)")
    message_attributes = {k: {"DataType": "String", "StringValue": v}
                          for k, v in _pairs(attributes, "--attribute").items()}
    if partition_key is not None and not partitions:
        raise click.UsageError("--partition-key needs --partitions (or CONVEYOR_PARTITIONS)")

    async def work(sqs: SQSClient) -> str:
        if partitions:
            logical = await partitioned_queue(sqs, queue, partitions)
            try:
                url = logical.url_for(partition_key, group_id=group_id)
            except PartitionError as exc:
                raise click.UsageError(str(exc)) from None
        else:
            url = await queue_url(sqs, queue)
        text, attrs = body, message_attributes
        offloader = _offloader(target, payload_bucket, payload_endpoint_url, compress)
        if offloader is not None:
            threshold = payload_threshold
            if threshold is None:
                found = await sqs.get_queue_attributes(url, ["MaximumMessageSize"])
                threshold = int(found.get("MaximumMessageSize", DEFAULT_THRESHOLD_BYTES))
            try:
                text, attrs = await asyncio.to_thread(offloader.prepare, body, attrs, threshold)
            except (OffloadError, BlobError) as exc:
                raise click.ClickException(f"cannot offload the body: {exc}") from None
        return await sqs.send_message(url, text, delay_s=delay, attributes=attrs,
                                      group_id=group_id, deduplication_id=dedup_id)

    click.echo(target.run(work, queue=queue))


def _offloader(target: Target, bucket: str | None, endpoint_url: str | None,
               compress: bool) -> Offloader | None:
    """The Offloader `send` uses, or None when there is no bucket to offload to."""
    default_endpoint, default_bucket = default_store(target.endpoint_url)
    bucket = default_bucket if bucket is None else bucket
    if not bucket:
        return None
    settings = BlobSettings(endpoint_url if endpoint_url is not None else default_endpoint,
                            target.region or "", bucket=bucket)
    return Offloader(BlobStore(settings), compress=compress)


@message_group.command("receive")
@click.argument("queue")
@click.option("--max", "max_messages", type=click.IntRange(1, 10), default=1, show_default=True)
@click.option("--wait", type=click.IntRange(0, 20), default=0, show_default=True,
              help="Long-poll this many seconds for a message.")
@click.option("--delete", is_flag=True,
              help="Delete what was received (otherwise it reappears after the visibility "
              "timeout).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, one object per message.")
@_target
def receive(target: Target, queue: str, max_messages: int, wait: int, delete: bool,
            as_json: bool) -> None:
    """Receive up to --max messages from QUEUE and print them."""
    async def work(sqs: SQSClient) -> list[Any]:
        url = await queue_url(sqs, queue)
        messages = await sqs.receive_messages(url, max_messages=max_messages, wait_time_s=wait)
        if delete and messages:
            result = await sqs.delete_message_batch(
                url, [(str(i), m.receipt_handle) for i, m in enumerate(messages)])
            if result.failed:
                raise click.ClickException(f"{len(result.failed)} could not be deleted: "
                                           f"{result.failed[0].message}")
        return messages

    started = time.monotonic()
    messages = target.run(work, queue=queue)
    for m in messages:
        if as_json:
            click.echo(json.dumps({"MessageId": m.message_id, "ReceiptHandle": m.receipt_handle,
                                   "Body": m.body, "Attributes": m.attributes,
                                   "MessageAttributes": m.message_attributes},
                                  ensure_ascii=False))
        else:
            click.echo(f"--- {m.message_id} (receive {m.receive_count})")
            click.echo(m.body)
    if not messages and not as_json:
        click.echo(f"no messages (waited {time.monotonic() - started:.0f} s)", err=True)


@message_group.command("attempts")
@click.argument("queue")
@click.argument("message_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, one object per attempt.")
@_target
def attempts(target: Target, queue: str, message_id: str, as_json: bool) -> None:
    """The failed delivery attempts a Conveyor server keeps with message MESSAGE_ID of QUEUE,
    oldest first: when, why (http-500, refused, timeout...), by which worker, and the start
    of the app's answer. A dead letter keeps those of its source queue: why it died."""
    async def work(sqs: SQSClient) -> list[Attempt]:
        return await sqs.message_attempts(await queue_url(sqs, queue), message_id)

    found = target.run(work, queue=queue)
    if as_json:
        for attempt in found:
            click.echo(json.dumps(attempt.to_wire(), ensure_ascii=False))
        return
    if not found:
        click.echo(f"no failed attempts recorded for {message_id}", err=True)
        return
    for number, attempt in enumerate(found, 1):
        click.echo(_attempt_line(number, attempt))
        for line in attempt.answer_head.splitlines():
            click.echo(f"    {line}")


def _attempt_line(number: int, attempt: Attempt) -> str:
    """`#1  2026-11-29 06:50:01.123 UTC  http-500 (HTTP 500)  worker host:42:ab12cd34`."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(attempt.at_ms / 1000))
    why = attempt.reason + (f" (HTTP {attempt.status})" if attempt.status is not None else "")
    by = f"  worker {attempt.worker_id}" if attempt.worker_id else ""
    return f"#{number}  {when}.{attempt.at_ms % 1000:03d} UTC  {why}{by}"


def register(main: click.Group) -> None:
    main.add_command(queue_group)
    main.add_command(message_group)

