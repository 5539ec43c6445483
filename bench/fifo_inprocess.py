"""FIFO receives in-process, without sockets: messages per receive and how fast a queue
drains, with 1, 10 and 100 message groups.

    .venv/bin/python bench/fifo_inprocess.py [--messages 3000]
    PYTHONPATH=OTHER_TREE .venv/bin/python bench/fifo_inprocess.py   # another tree (main)

A FIFO queue (the server's store: SQLite behind the journal) gets the messages, sent in
batches of 10 round-robin over the groups; then until it is empty: a receive of 10, a
second receive of 10 while the first one's groups are in flight (on a queue whose few
groups are all held it finds nothing), and a delete of everything received. Reported:
messages per first and per second receive, the second receive's time, and messages
drained per second.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from typing import Any

from conveyor.clock import ManualClock
from conveyor.service import RequestContext, Service
from conveyor.sqs.limits import STRICT
from conveyor.store.journal import JournaledStore

CTX = RequestContext("us-east-1", "000000000000", "http://localhost")


async def drain(groups: int, count: int) -> dict[str, Any]:
    store = JournaledStore(tempfile.mkdtemp(prefix="fifo-inprocess-"))
    service = Service(store, STRICT, ManualClock())
    url = (await service.action("CreateQueue")(CTX, {
        "QueueName": "q.fifo", "Attributes": {"FifoQueue": "true"}}))["QueueUrl"]
    for start in range(0, count, 10):
        await service.action("SendMessageBatch")(CTX, {"QueueUrl": url, "Entries": [
            {"Id": str(i), "MessageBody": "x", "MessageGroupId": f"g{(start + i) % groups}",
             "MessageDeduplicationId": str(start + i)} for i in range(10)]})

    async def receive() -> list[dict[str, Any]]:
        plan = await service.plan_receive(CTX, {"QueueUrl": url, "MaxNumberOfMessages": 10,
                                                "WaitTimeSeconds": 0})
        return (await service.fetch(CTX, plan)).get("Messages", [])

    drained = firsts = taken_first = taken_second = 0
    second_s = 0.0
    started = time.perf_counter()
    while drained < count:
        first = await receive()
        if not first:
            break
        firsts += 1
        taken_first += len(first)
        t = time.perf_counter()
        second = await receive()
        second_s += time.perf_counter() - t
        taken_second += len(second)
        for m in first + second:
            await service.action("DeleteMessage")(CTX, {"QueueUrl": url,
                                                        "ReceiptHandle": m["ReceiptHandle"]})
        drained += len(first) + len(second)
    took_s = time.perf_counter() - started
    await store.close()
    return {"groups": groups, "per_receive": round(taken_first / firsts, 2),
            "per_second_receive": round(taken_second / firsts, 2),
            "second_receive_ms": round(second_s / firsts * 1000, 3),
            "msgs_per_s": round(drained / took_s)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=3000)
    args = parser.parse_args()
    for groups in (1, 10, 100):
        print(asyncio.run(drain(groups, args.messages)))


if __name__ == "__main__":
    main()
