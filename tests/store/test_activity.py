"""The console's charts kept in the store (service/activity.py), on every store kind: each
range's buckets add up what the service counted (dead letters arrived and failed attempts
too), every node of a shared store reads the same figures, and the table stays bounded."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from conveyor.clock import ManualClock
from conveyor.service import Service
from conveyor.service.activity import HOUR, RANGES
from conveyor.sqs.limits import STRICT
from tests.store.conformance import CONFORMANCE_KINDS, Sqs, open_store, run
from tests.support import CREATED_SCHEMAS, require_postgres


async def _failing_queue(sqs: Sqs) -> tuple[str, str, int, int]:
    """A queue whose 3 messages fail once each (2 attempts recorded) and then go to its
    dead-letter queue: (url, dlq url, queue id, dlq id)."""
    dlq = await sqs.create("charts-dlq")
    url = await sqs.create("charts", RedrivePolicy=json.dumps(
        {"deadLetterTargetArn": await sqs.arn(dlq), "maxReceiveCount": 1}))
    await sqs.send(url, "a", "b", "c")
    got = await sqs.receive(url, VisibilityTimeout=0)
    assert len(got) == 3
    entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "At": 1,
                "Reason": "http-500", "Status": 500} for i, m in enumerate(got[:2])]
    assert len((await sqs.call("RecordAttempts", QueueUrl=url,
                               Entries=entries))["Successful"]) == 2
    assert await sqs.receive(url) == []  # received past maxReceiveCount: dead-lettered
    store = sqs.service.store
    queue, dead = (await store.get_queue("us-east-1", "charts"),
                   await store.get_queue("us-east-1", "charts-dlq"))
    return url, dlq, queue.id, dead.id


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_every_range_adds_up_what_was_counted_from_the_store(kind: str, tmp_path: Path
                                                             ) -> None:
    async def scenario(sqs: Sqs) -> None:
        _, _, queue_id, dlq_id = await _failing_queue(sqs)
        await sqs.service.save_activity()
        assert sqs.service.activity.unsaved({queue_id, dlq_id}) == {}  # all in the store
        sqs.advance(60)  # the minute is over: a full bucket of the hour's chart
        for range_ in RANGES.values():
            found = await sqs.service.histories([queue_id, dlq_id], range_)
            queue, dlq = found[queue_id], found[dlq_id]
            assert queue is not None and dlq is not None
            assert len(queue.counts["sent"]) == range_.points + 1
            assert (queue.total("sent"), queue.total("received"), queue.total("failed"),
                    queue.total("dead_lettered")) == (3, 3, 2, 0), range_.name
            assert (dlq.total("dead_lettered"), dlq.total("sent")) == (3, 0), range_.name
        hour = (await sqs.service.histories([queue_id], HOUR))[queue_id]
        assert hour is not None
        assert hour.counts["received"][-2:] == [3, 0]  # the last full minute; the current

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", CONFORMANCE_KINDS)
def test_buckets_older_than_their_range_are_pruned(kind: str, tmp_path: Path) -> None:
    """The table cannot grow without limit: each span's buckets go once they are older
    than their chart's range, minutes after an hour, hours after 7 days."""
    async def scenario(sqs: Sqs) -> None:
        _, _, queue_id, _ = await _failing_queue(sqs)
        await sqs.service.save_activity()
        store = sqs.service.store
        sqs.advance(2 * 3600)
        await sqs.service.save_activity()  # a minute later than the last prune: prunes
        assert await store.activity([queue_id], 1, 0) == []
        assert len(await store.activity([queue_id], 10, 0)) == 1
        assert (await sqs.service.histories([queue_id], HOUR))[queue_id] is None
        sqs.advance(8 * 86_400)
        await sqs.service.save_activity()
        for range_ in RANGES.values():
            assert await store.activity([queue_id], range_.span_min, 0) == []

    run(kind, tmp_path, scenario)


def test_every_postgresql_node_draws_the_same_figures(tmp_path: Path) -> None:
    """Two nodes on one database: what one counted and saved, the other charts."""
    require_postgres()

    async def main() -> None:
        clock = ManualClock()
        schema = "t_" + os.urandom(6).hex()
        CREATED_SCHEMAS.append(schema)
        first = await open_store("postgresql", tmp_path, clock, schema)
        second = await open_store("postgresql", tmp_path, clock, schema)
        try:
            one, two = Service(first, STRICT, clock), Service(second, STRICT, clock)
            _, _, queue_id, dlq_id = await _failing_queue(Sqs(one, clock))
            await one.save_activity()
            clock.advance(60)
            for range_ in RANGES.values():
                mine = await one.histories([queue_id, dlq_id], range_)
                theirs = await two.histories([queue_id, dlq_id], range_)
                assert mine == theirs
                assert theirs[dlq_id] is not None
                assert theirs[dlq_id].total("dead_lettered") == 3
        finally:
            await asyncio.sleep(0)
            await first.close()
            await second.close()

    asyncio.run(main())
