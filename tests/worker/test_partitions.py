"""A logical queue over several SQS queues (client/partitions.py, worker/partitions.py):
producers spread messages by a key's CRC-32 or round robin, one worker reads every
partition fairly, FIFO groups keep their order, dead letters go per partition or to one
shared queue, and the autoscaler adds the partitions' backlog up."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.request
import zlib
from typing import Any

import pytest
from aiohttp import web

from conveyor.client import SQSClient
from conveyor.client.partitions import (
    PartitionedProducer,
    PartitionedQueue,
    PartitionError,
    partition_index,
    partition_name,
    split_partition_name,
)
from conveyor.clock import ManualClock
from conveyor.scale.observe import backlog_counts
from conveyor.worker.partitions import RECHECK_EMPTY_S, PartitionedReceiver, PartitionRouter
from tests.support import MOTO, ServerProcess, free_port, running_moto, sqs_client
from tests.worker.conftest import (
    Recorded,
    aio,
    queue_total,
    recording_app,
    run,
    running_worker,
    wait_until,
)

# The "check" value of CRC-32/ISO-HDLC (the CRC of zlib, gzip RFC 1952 and PNG) over the
# ASCII bytes "123456789", from the Catalogue of parametrised CRC algorithms (Greg Cook,
# reveng.sourceforge.io/crc-catalogue/17plus.htm#crc.cat.crc-32-iso-hdlc).
CRC32_CHECK = 0xCBF43926


def _conveyor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conveyor", *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **(env or {})})


def _logical(sqs: Any, name: str, count: int) -> PartitionedQueue:
    first = sqs.get_queue_url(QueueName=partition_name(name, 0))["QueueUrl"]
    return PartitionedQueue(first.rsplit("/", 1)[0] + "/" + name, count)


def _create(server: ServerProcess, name: str, count: int, *more: str) -> str:
    done = _conveyor("queue", "create-partitioned", name, "--partitions", str(count),
                     "--endpoint-url", server.url, *more)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _made(server: ServerProcess, name: str, count: int) -> tuple[Any, PartitionedQueue]:
    """A boto3 client and the logical queue `name`, its partitions made by the CLI."""
    sqs = sqs_client(server.url)
    _create(server, name, count)
    return sqs, _logical(sqs, name, count)


def _fill(sqs: Any, url: str, count: int, prefix: str) -> None:
    """`count` messages `<prefix><n>` into one queue, ten a call."""
    for start in range(0, count, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"{prefix}{start + i}"}
            for i in range(min(10, count - start))])


# -- where a message goes ----------------------------------------------------------------

def test_partition_of_a_key_is_its_crc32_modulo_the_count():
    """The key's partition is the standard CRC-32 of its UTF-8 bytes mod N, the same in
    any process and language (unlike Python's salted hash())."""
    for count in (1, 2, 3, 7, 64):
        assert partition_index("123456789", count) == CRC32_CHECK % count
    other = subprocess.run(
        [sys.executable, "-c", "from conveyor.client.partitions import partition_index;"
         "print(partition_index('user-42', 7))"],
        capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "12345"},
        check=True)
    assert int(other.stdout) == zlib.crc32(b"user-42") % 7 == partition_index("user-42", 7)


def test_partition_names_keep_the_fifo_suffix_last():
    """SQS: "The name of a FIFO queue must end with the .fifo suffix" (CreateQueue,
    QueueName), so the partition index goes before it."""
    assert partition_name("jobs", 0) == "jobs-p0"
    assert partition_name("jobs.fifo", 3) == "jobs-p3.fifo"
    assert split_partition_name("jobs-p3.fifo") == ("jobs.fifo", 3)
    assert split_partition_name("jobs-p12") == ("jobs", 12)
    assert split_partition_name("jobs-p03") is None and split_partition_name("jobs") is None
    queue = PartitionedQueue("http://127.0.0.1:9324/000000000000/jobs.fifo", 2)
    assert queue.urls == ["http://127.0.0.1:9324/000000000000/jobs-p0.fifo",
                          "http://127.0.0.1:9324/000000000000/jobs-p1.fifo"]


def test_round_robin_spreads_evenly_and_is_refused_on_fifo():
    queue = PartitionedQueue("http://127.0.0.1:9324/000000000000/jobs", 3)
    assert [queue.index_for() for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    fifo = PartitionedQueue("http://127.0.0.1:9324/000000000000/jobs.fifo", 3)
    with pytest.raises(PartitionError, match="MessageGroupId"):
        fifo.index_for()
    assert fifo.index_for(group_id="g") == zlib.crc32(b"g") % 3


def test_partition_names_longer_than_sqs_allows_are_refused():
    """SQS: "A queue name can have up to 80 characters" (CreateQueue, QueueName)."""
    with pytest.raises(PartitionError, match="80"):
        PartitionedQueue("http://h/1/" + "q" * 77, 11)  # ...-p10: 81 characters
    PartitionedQueue("http://h/1/" + "q" * 77, 10)  # ...-p9: 80


# -- producers and the worker, with real processes ---------------------------------------

def test_cli_creates_partitions_and_sends_by_key_and_a_worker_process_reads_them(server,
                                                                                 queue_name):
    """`conveyor queue create-partitioned`, `conveyor message send --partitions`, and a
    `conveyor worker --partitions` process POSTing every partition's messages to an app."""
    sqs = sqs_client(server.url)
    out = _create(server, queue_name, 3)
    for i in range(3):
        assert f"{queue_name}-p{i}-dead-letter" in out
    logical = _logical(sqs, queue_name, 3)
    keys = ["alice", "bob", "carol", "dave", "erin", "frank"]
    for key in keys:
        done = _conveyor("message", "send", queue_name, f"for {key}", "--partition-key", key,
                         "--endpoint-url", server.url, env={"CONVEYOR_PARTITIONS": "3"})
        assert done.returncode == 0, done.stderr
    expected = [0, 0, 0]
    for key in keys:
        expected[zlib.crc32(key.encode()) % 3] += 1
    assert [queue_total(sqs, url) for url in logical.urls] == expected

    async def scenario() -> list[str]:
        async with recording_app() as app:
            worker = subprocess.Popen(
                [sys.executable, "-m", "conveyor", "worker", "--worker-queue-url", logical.url,
                 "--app-url", app.url, "--partitions", "3", "--poll-wait-time", "1",
                 "--status-port", "0", "--cron", ""],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                await wait_until(lambda: len(app.requests) >= len(keys), 60,
                                 "every message POSTed")
                await wait_until(lambda: all(queue_total(sqs, u) == 0 for u in logical.urls),
                                 30, "every message deleted from its partition")
            finally:
                worker.terminate()
                await aio(worker.wait, 30)
            return sorted(r.body.decode() for r in app.requests)

    assert run(scenario()) == sorted(f"for {key}" for key in keys)


def test_message_send_without_a_group_on_a_partitioned_fifo_queue_is_refused(server,
                                                                              queue_name):
    _create(server, queue_name + ".fifo", 2)
    done = _conveyor("message", "send", queue_name + ".fifo", "x", "--partitions", "2",
                     "--endpoint-url", server.url)
    assert done.returncode != 0
    assert "MessageGroupId" in done.stderr and "Traceback" not in done.stderr


def test_a_big_backlog_in_one_partition_does_not_starve_the_others(server, queue_name):
    """100 messages wait in p0 and 3 in each of p1-p3 before the worker starts; with one
    connection the app sees the messages in the order they were received. Taking the
    partitions in turn, the worker has every message of p1-p3 at the app within its
    first rounds; a worker that emptied p0 first would show them after 100 others."""
    sqs, logical = _made(server, queue_name, 4)
    _fill(sqs, logical.urls[0], 100, "p0-")
    for p in (1, 2, 3):
        for i in range(3):
            sqs.send_message(QueueUrl=logical.urls[p], MessageBody=f"p{p}-{i}")

    async def scenario() -> list[str]:
        async with recording_app() as app, running_worker(
                logical.url, app.url, Partitions=4, HttpConnections=1):
            await wait_until(lambda: len(app.requests) >= 109, 90, "all 109 POSTed")
            return [r.body.decode() for r in app.requests]

    order = run(scenario(), timeout_s=120)
    others = [i for i, body in enumerate(order) if not body.startswith("p0-")]
    assert len(others) == 9
    # One receive of one message per partition in turn: p1-p3 are done in 3 rounds of 4
    # (12 receives); 20 leaves room for a poller's receive under way, and is far from 100.
    assert max(others) < 20, order[:30]


def test_fifo_groups_keep_their_order_across_partitions(server, queue_name):
    """Each group hashes to one partition (its MessageGroupId's CRC-32), so the worker,
    reading all partitions at once, still POSTs each group's messages in order."""
    sqs, logical = _made(server, queue_name + ".fifo", 3)
    groups = [f"g{i}" for i in range(6)]
    for n in range(5):
        for group in groups:
            sqs.send_message(QueueUrl=logical.url_for(group_id=group), MessageGroupId=group,
                             MessageBody=f"{group}:{n}", MessageDeduplicationId=f"{group}:{n}")
    expected = [0, 0, 0]
    for group in groups:
        expected[zlib.crc32(group.encode()) % 3] += 5
    assert [queue_total(sqs, url) for url in logical.urls] == expected

    async def scenario() -> list[str]:
        async with recording_app() as app, running_worker(logical.url, app.url, Partitions=3):
            await wait_until(lambda: len(app.requests) >= 30, 60, "all 30 POSTed")
            await wait_until(lambda: all(queue_total(sqs, u) == 0 for u in logical.urls), 30,
                             "all deleted")
            return [r.body.decode() for r in app.requests]

    bodies = run(scenario())
    for group in groups:
        assert [b for b in bodies if b.startswith(group + ":")] == [f"{group}:{n}"
                                                                     for n in range(5)]


@pytest.mark.parametrize("shared", [False, True], ids=["per-partition", "shared"])
def test_dead_letters_per_partition_or_shared(server, queue_name, shared):
    """A worker that creates the partitions (CreateQueue) gives each a RedrivePolicy to its
    own dead-letter queue, or with SharedDeadLetter to one for all; a message that fails
    MaxRetries times ends there."""
    sqs = sqs_client(server.url)
    logical_url = server.url + "/000000000000/" + queue_name

    async def fail(_request: Recorded) -> web.StreamResponse:
        return web.Response(status=500)

    async def scenario() -> None:
        async with recording_app(fail) as app, running_worker(
                logical_url, app.url, Partitions=2, SharedDeadLetter=shared, MaxRetries=1):
            logical = _logical(sqs, queue_name, 2)
            for i, url in enumerate(logical.urls):
                sqs.send_message(QueueUrl=url, MessageBody=f"doomed-{i}")
            dlqs = ([f"{queue_name}-dead-letter"] if shared else
                    [f"{partition_name(queue_name, i)}-dead-letter" for i in range(2)])
            dlq_urls = [sqs.get_queue_url(QueueName=n)["QueueUrl"] for n in dlqs]
            await wait_until(lambda: sum(queue_total(sqs, u) for u in dlq_urls) == 2, 60,
                             "both messages dead-lettered")
            if not shared:
                assert [queue_total(sqs, u) for u in dlq_urls] == [1, 1]
            for url in logical.urls:
                policy = json.loads(sqs.get_queue_attributes(
                    QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"]
                    ["RedrivePolicy"])
                assert policy["deadLetterTargetArn"].rsplit(":", 1)[-1] in dlqs

    run(scenario())


def _waiting(server: ServerProcess) -> float:
    """The server's conveyor_long_polls_waiting."""
    with urllib.request.urlopen(server.url + "/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("conveyor_long_polls_waiting"))


def test_without_poll_messages_an_idle_worker_keeps_one_long_poll_open_and_turns_it_over(
        server, queue_name):
    """Where PollMessages is not to be had (as on Amazon SQS; here turned off with
    ExtendedPollWaitTime 0), the idle worker parks one ReceiveMessage at a time (the
    server's conveyor_long_polls_waiting never shows more), on each partition in turn."""
    _sqs, logical = _made(server, queue_name, 4)

    def waiting() -> float:
        return _waiting(server)

    async def scenario() -> tuple[dict[str, int], float]:
        most = 0.0
        async with recording_app() as app, running_worker(
                logical.url, app.url, Partitions=4, ExtendedPollWaitTime=0) as worker:
            receiver = worker.receiver
            assert isinstance(receiver, PartitionedReceiver)

            async def rounds_done() -> bool:
                nonlocal most
                most = max(most, await aio(waiting))
                return min(receiver.polls.values()) >= 3

            await wait_until(rounds_done, 60, "three rounds of long polls")
            return dict(receiver.polls), most

    polls, most = run(scenario())
    assert most <= 1, polls
    assert set(polls) == {partition_name(queue_name, i) for i in range(4)}


def test_autoscaler_backlog_adds_up_the_partitions(server, queue_name):
    sqs, logical = _made(server, queue_name, 3)
    for p, count in enumerate((3, 0, 2)):
        for i in range(count):
            sqs.send_message(QueueUrl=logical.urls[p], MessageBody=str(i))

    async def counts() -> Any:
        async with SQSClient(server.url) as client:
            return await backlog_counts(client, logical.urls)

    assert asyncio.run(counts()).visible == 5


def test_partitioned_worker_on_moto(tmp_path, queue_name):
    """The same worker against moto's SQS server (plain SQS calls): it creates the
    partitions and delivers what the producer helper spread round robin."""
    with running_moto(lambda port: [str(MOTO), "-H", "127.0.0.1", "-p", str(port)],
                      tmp_path) as url:
        sqs = sqs_client(url)
        logical_url = url + "/123456789012/" + queue_name

        async def scenario() -> list[str]:
            async with recording_app() as app, running_worker(
                    logical_url, app.url, Partitions=3, ExtendedPollWaitTime=0):
                logical = _logical(sqs, queue_name, 3)
                for i in range(9):
                    sqs.send_message(QueueUrl=logical.url_for(), MessageBody=f"m{i}")
                await wait_until(lambda: len(app.requests) >= 9, 60, "all 9 POSTed")
                await wait_until(lambda: all(queue_total(sqs, u) == 0 for u in logical.urls),
                                 30, "all deleted")
                return sorted(r.body.decode() for r in app.requests)

        assert run(scenario()) == sorted(f"m{i}" for i in range(9))


def test_a_fifo_message_that_holds_its_group_is_dead_lettered_to_its_partitions_queue(
        server, queue_name):
    """A failing FIFO message with its group's next behind it is dead-lettered by the
    worker itself (daemon.py); on a partitioned queue the copy goes to the dead-letter
    queue of the partition it came from, and the group's next message goes on."""
    sqs = sqs_client(server.url)
    name = queue_name + ".fifo"
    logical_url = server.url + "/000000000000/" + name
    group = "A"
    partition = zlib.crc32(group.encode()) % 2

    async def behaviour(request: Recorded) -> web.StreamResponse:
        return web.Response(status=500 if request.body == b"A1" else 200)

    async def scenario() -> list[str]:
        async with recording_app(behaviour) as app, running_worker(
                logical_url, app.url, Partitions=2, MaxRetries=2):
            logical = _logical(sqs, name, 2)
            assert logical.url_for(group_id=group) == logical.urls[partition]
            sqs.send_message_batch(QueueUrl=logical.url_for(group_id=group), Entries=[
                {"Id": str(i), "MessageBody": body, "MessageGroupId": group,
                 "MessageDeduplicationId": body} for i, body in enumerate(["A1", "A2"])])
            dlq = sqs.get_queue_url(
                QueueName=partition_name(queue_name, partition) + "-dead-letter.fifo")["QueueUrl"]
            await wait_until(lambda: queue_total(sqs, dlq) == 1, 60, "A1 dead-lettered")
            await wait_until(lambda: any(r.body == b"A2" for r in app.requests), 30,
                             "A2 POSTed after A1")
            got = sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=1)["Messages"]
            return [m["Body"] for m in got]

    assert run(scenario()) == ["A1"]


def test_producer_helper_sends_each_key_to_its_partition(server, queue_name):
    """conveyor.client.partitions.PartitionedProducer, the helper for Python apps."""
    sqs, logical = _made(server, queue_name, 4)
    keys = [f"user-{i}" for i in range(12)]

    async def send() -> list[str]:
        async with SQSClient(server.url) as client:
            producer = PartitionedProducer(client, logical)
            return [(await producer.send(f"for {key}", key=key))[0] for key in keys]

    urls = asyncio.run(send())
    assert urls == [logical.urls[zlib.crc32(k.encode()) % 4] for k in keys]
    assert [queue_total(sqs, u) for u in logical.urls] == [urls.count(u) for u in logical.urls]


def test_worker_help_and_bad_partition_options():
    """--help describes the options; a bad value is one clear line, not a traceback."""
    helped = _conveyor("worker", "--help")
    assert "--partitions" in helped.stdout and "--shared-dead-letter" in helped.stdout
    assert "create-partitioned" in _conveyor("queue", "--help").stdout
    for args, expected in ((["--partitions", "65"], "Partitions must be between 0 and 64"),
                           (["--partitions", "2", "--worker-queue-url",
                             "http://127.0.0.1:1/000000000000/" + "q" * 78],
                            "longer than SQS's 80")):
        done = _conveyor("worker", "--worker-queue-url", "http://127.0.0.1:1/0/jobs", *args)
        assert done.returncode != 0
        assert expected in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_partition_found_empty_is_passed_over_while_another_has_a_backlog(server,
                                                                            queue_name):
    """With 30 messages in p0 only, the receiver looks at p1 and p2 once each while it
    empties p0 (the clock stands still), not once per round; once RECHECK_EMPTY_S has
    passed it looks at them again and finds what was sent meanwhile."""
    sqs, logical = _made(server, queue_name, 3)
    _fill(sqs, logical.urls[0], 30, "m")
    clock = ManualClock()
    names = [partition_name(queue_name, i) for i in range(3)]

    async def scenario() -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        async with SQSClient(server.url) as client:
            router = PartitionRouter(logical.urls[0], set, keep_s=60, clock=clock)
            receiver = PartitionedReceiver(client, logical.urls, router, clock=clock, wait_s=1,
                                           visibility_timeout_s=600)
            for _ in range(20):
                await receiver.receive(10)
                if receiver.received[names[0]] == 30:
                    break
            emptying = dict(receiver.polls)
            clock.advance(RECHECK_EMPTY_S)
            sqs.send_message(QueueUrl=logical.urls[2], MessageBody="late")
            for _ in range(5):
                if (await receiver.receive(10)).messages:
                    break
            return emptying, dict(receiver.polls), dict(receiver.received)

    emptying, polls, received = run(scenario())
    assert emptying[names[1]] == emptying[names[2]] == 1, emptying
    assert emptying[names[0]] >= 3
    assert received == {names[0]: 30, names[1]: 0, names[2]: 1}
    assert polls[names[2]] == 2, polls


def test_batch_delivery_from_every_partition(server, queue_name):
    """With BatchSize, the messages of all partitions go to the app as Lambda SQS events
    and, the app answering 200 with an empty body ("an empty or null response: all
    succeeded", Lambda Developer Guide, Reporting batch item failures), each is deleted
    from the partition it came from."""
    sqs, logical = _made(server, queue_name, 3)
    sent_to: dict[str, str] = {}
    for i in range(30):
        sent_to[f"m{i}"] = logical.url_for()
        sqs.send_message(QueueUrl=sent_to[f"m{i}"], MessageBody=f"m{i}")

    async def empty(_request: Recorded) -> web.StreamResponse:
        return web.Response(status=200)

    async def scenario() -> list[tuple[str, str]]:
        async with recording_app(empty) as app, running_worker(
                logical.url, app.url, Partitions=3, BatchSize=10, HttpConnections=2):
            await wait_until(lambda: all(queue_total(sqs, u) == 0 for u in logical.urls), 60,
                             "every partition emptied")
            return [(record["body"], record["eventSourceARN"]) for r in app.requests
                    for record in json.loads(r.body)["Records"]]

    records = dict(run(scenario()))
    assert sorted(records) == sorted(sent_to)
    # Lambda's record names the queue the message came from ("eventSourceARN":
    # "arn:aws:sqs:us-east-2:123456789012:my-queue" beside "awsRegion": "us-east-2",
    # Lambda Developer Guide, the example SQS event): the partition each was sent to.
    for body, url in sent_to.items():
        account, name = url.rsplit("/", 2)[1:]
        assert records[body] == f"arn:aws:sqs:us-east-1:{account}:{name}", (body, url)
    assert len(set(sent_to.values())) == 3  # round robin: every partition named


@pytest.mark.parametrize("count", [1, 4])
def test_an_idle_worker_parks_one_poll_on_every_partition_and_counts_each(server, queue_name,
                                                                          count):
    """On a Conveyor server the idle worker parks one PollMessages on all its partitions
    (conveyor_long_polls_waiting shows one), five minutes long: a message sent to the last
    partition reaches the app within the test's far shorter limit, so that one poll held
    it (turning over the partitions, it would wait for the others' polls first). The
    worker's /metrics and /health count what each partition gave."""
    sqs, logical = _made(server, queue_name, count)
    names = [partition_name(queue_name, i) for i in range(count)]
    port = free_port()

    async def scenario() -> tuple[str, dict[str, Any]]:
        async with recording_app() as app, running_worker(
                logical.url, app.url, Partitions=count, ExtendedPollWaitTime=300,
                StatusPort=port) as worker:
            receiver = worker.receiver
            assert isinstance(receiver, PartitionedReceiver)
            await wait_until(lambda: receiver.polls_of_all >= 1, 60, "the poll of all")
            await wait_until(lambda: aio(_waiting, server), 60, "the poll parked")
            assert await aio(_waiting, server) == 1
            await aio(sqs.send_message, QueueUrl=logical.urls[-1], MessageBody="to the last")
            await wait_until(lambda: app.requests, 60, "the message at the app")
            metrics = await aio(_get_text, f"http://127.0.0.1:{port}/metrics")
            health = json.loads(await aio(_get_text, f"http://127.0.0.1:{port}/health"))
            return metrics, health

    metrics, health = run(scenario(), timeout_s=120)
    labels = f'partition="{names[-1]}",queue="{queue_name}"'
    sample = f"conveyor_worker_partition_messages_received_total{{{labels}}} 1.0"
    assert sample in metrics, metrics
    assert health["partitions"] == {name: {"received": int(name == names[-1])}
                                    for name in names}


def _get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.read().decode()
