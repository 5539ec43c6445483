"""What a receive looks at, on every store: a FIFO receive scans the queue's head only,
as SQS does, and a receive dead-letters only the messages it would have returned, so
that neither reads a whole backlog."""

from __future__ import annotations

from pathlib import Path

import pytest

from conveyor.service import rules
from conveyor.service.messages import Redrive
from conveyor.store.base import Store
from tests.store.helpers import ATTRIBUTES, KINDS, counts, message, now_ms, receive, run


@pytest.mark.parametrize("kind", KINDS)
def test_a_fifo_receive_looks_at_the_queues_head_only(kind: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """SQS "looks through the first 120,000 messages to determine available message
    groups" (SQS Developer Guide, FIFO quotas): a backlog in a group whose head is in
    flight holds back the groups found after it. Conveyor walks the visible messages in
    the order they became visible, at most FIFO_SCAN of them."""
    monkeypatch.setattr(rules, "FIFO_SCAN", 15)

    async def scenario(store: Store) -> None:
        queue = await store.create_queue("us-east-1", "q.fifo", ATTRIBUTES, {}, 0)
        now = now_ms()
        backlog = [message(f"a-{i}", now, group_id="a") for i in range(25)]
        await store.send(queue, backlog, now, 300_000)
        await store.send(queue, [message("b-0", now, group_id="b")], now, 300_000)

        async def bodies() -> list[str]:
            return [m.body for m in await receive(store, queue, 10, 30_000, now, None)]

        assert await bodies() == [f"a-{i}" for i in range(10)]  # group a now in flight
        assert await bodies() == []  # a-10..a-24 fill the walk: b-0 is the 16th
        monkeypatch.setattr(rules, "FIFO_SCAN", 16)
        assert await bodies() == ["b-0"]

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", KINDS)
def test_a_receive_dead_letters_only_what_it_would_return(kind: str, tmp_path: Path) -> None:
    """Messages received too often move when a receive meets them, up to its limit; the
    rest of a big backlog is not read for it."""
    async def scenario(store: Store) -> None:
        queue = await store.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
        dlq = await store.create_queue("us-east-1", "dlq", ATTRIBUTES, {}, 0)
        now = now_ms()
        await store.send(queue, [message(f"m-{i}", now) for i in range(5)], now, 300_000)
        for _ in range(2):  # every message received twice, visible again at once
            assert len(await receive(store, queue, 10, 0, now, None)) == 5
            now += 1
        redrive = Redrive(2, dlq.id, "arn:aws:sqs:us-east-1:000000000000:q")
        assert await receive(store, queue, 2, 30_000, now, redrive) == []
        assert len(redrive.moved) == 2
        found = await counts(store, queue, now)
        assert found.visible == 3
        assert (await counts(store, dlq, now)).visible == 2

    run(kind, tmp_path, scenario)
