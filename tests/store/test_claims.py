"""The store primitives themselves, on every store kind, and explicit interleavings of two
claimers on PostgreSQL (two nodes on one schema), step by step: no sleeps."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import apsw
import asyncpg
import pytest

from conveyor.clock import ManualClock
from conveyor.service import rules
from conveyor.store.base import OK, STALE, Counts, Handle, StoreError
from tests.store.conformance import open_store
from tests.store.helpers import ATTRIBUTES, KINDS, message
from tests.support import CREATED_SCHEMAS, POSTGRES_URL, require_postgres

NOW = 1_800_000_000_000
FAR = 1 << 40  # a cut-off no message is sent before: nothing has expired
PICK = rules.Picking(fifo_scan=100, fair_groups=rules.FAIR_GROUPS)


def _run(kind: str, tmp_path: Path, scenario: Any) -> None:
    if kind == "postgresql":
        require_postgres()

    async def main() -> None:
        store = await open_store(kind, tmp_path, ManualClock(NOW))
        try:
            await scenario(store)
        finally:
            await store.close()

    asyncio.run(main())


@pytest.mark.parametrize("kind", KINDS)
def test_claim_receives_and_dead_letter_moves(kind: str, tmp_path: Path) -> None:
    async def scenario(store: Any) -> None:
        queue = await store.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
        dlq = await store.create_queue("us-east-1", "dlq", ATTRIBUTES, {}, 0)
        await store.send(queue, [message(f"m-{i}", NOW - 10 + i) for i in range(4)], NOW, 0)
        async with store.claim(queue, 3, NOW, NOW - FAR, NOW + 30_000, PICK) as claim:
            taken = claim.messages
            assert [m.body for m in taken] == ["m-0", "m-1", "m-2"]
            assert {(m.receive_count, m.first_receive_ms) for m in taken} == {(1, NOW)}
            assert len({m.receipt for m in taken}) == 1
            await claim.dead_letter([taken[0].seq, taken[1].seq], dlq.id, "arn:source", NOW,
                                    ['{"why": "spent"}', None])
        async with store.claim(queue, 10, NOW, NOW - FAR, NOW + 30_000, PICK) as claim:
            assert [m.body for m in claim.messages] == ["m-3"]  # the rest are held
        async with store.claim(dlq, 10, NOW, NOW - FAR, NOW + 30_000, PICK) as claim:
            moved = claim.messages
            assert [(m.body, m.receive_count, m.dlq_source_arn, m.system) for m in moved] == [
                ("m-0", 1, "arn:source", '{"why": "spent"}'), ("m-1", 1, "arn:source", None)]
        assert await _counts(store, queue, NOW - FAR) == Counts(0, 2, 0)

    _run(kind, tmp_path, scenario)


async def _counts(store: Any, queue: Any, cutoff_ms: int) -> Counts:
    return rules.counts(await store.tally(queue, NOW, cutoff_ms))


@pytest.mark.parametrize("kind", KINDS)
def test_claim_skips_what_is_not_due_or_is_past_the_cutoff(kind: str, tmp_path: Path) -> None:
    async def scenario(store: Any) -> None:
        queue = await store.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
        await store.send(queue, [message("old", NOW - 5000), message("young", NOW - 1000),
                                 message("later", NOW, NOW + 1)], NOW, 0)
        async with store.claim(queue, 10, NOW, NOW - 2000, NOW + 30_000, PICK) as claim:
            assert [m.body for m in claim.messages] == ["young"]
        assert await _counts(store, queue, NOW - 2000) == Counts(0, 1, 1)
        assert await store.expire({queue.id: NOW - 2000}, NOW) == 1

    _run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", KINDS)
def test_hold_reports_and_sets_visibility(kind: str, tmp_path: Path) -> None:
    async def scenario(store: Any) -> None:
        queue = await store.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
        await store.send(queue, [message("m", NOW)], NOW, 0)
        async with store.claim(queue, 1, NOW, NOW - FAR, NOW + 30_000, PICK) as claim:
            [m] = claim.messages
        async with store.hold(queue, [m.seq, m.seq + 10_000_000]) as held:
            assert held.found == {m.seq: (m.receipt, NOW + 30_000)}
            await held.set_visible_at([(m.seq, NOW)])
        assert await _counts(store, queue, NOW - FAR) == Counts(1, 0, 0)
        assert await store.delete(queue, [Handle(m.seq, "other")]) == [STALE]
        assert await store.delete(queue, [Handle(m.seq, m.receipt or "")], NOW) == [STALE]
        assert await store.delete(queue, [Handle(m.seq, m.receipt or "")]) == [OK]
        assert await store.delete(queue, [Handle(m.seq, m.receipt or "")]) == [OK]  # gone

    _run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", KINDS)
def test_movable_is_oldest_first_and_move_is_unconditional_but_for_visibility(
        kind: str, tmp_path: Path) -> None:
    async def scenario(store: Any) -> None:
        queue = await store.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
        other = await store.create_queue("us-east-1", "other", ATTRIBUTES, {}, 0)
        await store.send(queue, [message("second", NOW - 10)], NOW, 0)
        await store.send(queue, [message("first", NOW - 20)], NOW, 0)
        await store.send(queue, [message("hidden", NOW - 30, NOW + 5)], NOW, 0)
        found = await store.movable(queue, 10, NOW, NOW - FAR)
        assert [m.body for m in found] == ["first", "second"]
        moves = [(found[0].seq, other.id), (found[1].seq, queue.id)]
        assert await store.move(queue, moves, NOW) == 2
        assert [m.body for m in await store.movable(other, 10, NOW, NOW - FAR)] == ["first"]

    _run(kind, tmp_path, scenario)


# --- two claimers on PostgreSQL, interleaved ---------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_concurrent_sends_and_deletes_each_get_their_own_outcome(kind: str,
                                                                  tmp_path: Path) -> None:
    """Calls made at once (PostgreSQL writes them in one statement: store/_coalesce.py)
    each get their own messages' seqs and their own handles' outcomes, whatever queue
    and whichever other calls went with them."""
    async def scenario(store: Any) -> None:
        q1 = await store.create_queue("us-east-1", "q1", ATTRIBUTES, {}, 0)
        q2 = await store.create_queue("us-east-1", "q2", ATTRIBUTES, {}, 0)
        batches = [(q1, ["a-0", "a-1"]), (q2, ["b-0"]), (q1, ["c-0", "c-1", "c-2"])]
        sent = await asyncio.gather(*(
            store.send(q, [message(body, NOW) for body in bodies], NOW, 0)
            for q, bodies in batches))
        assert [[s.message_id for s in call] for call in sent] == [b for _, b in batches]
        assert len({s.seq for call in sent for s in call}) == 6
        taken = {}
        for q in (q1, q2):
            async with store.claim(q, 10, NOW, NOW - FAR, NOW + 30_000, PICK) as claim:
                taken |= {m.body: Handle(m.seq, m.receipt) for m in claim.messages}
        assert sorted(taken) == ["a-0", "a-1", "b-0", "c-0", "c-1", "c-2"]
        stale = Handle(taken["c-1"].seq, "not-its-receipt")
        outcomes = await asyncio.gather(
            store.delete(q1, [taken["a-0"], taken["a-1"]]),
            store.delete(q2, [taken["b-0"]]),
            store.delete(q1, [taken["c-0"], stale]),
            store.delete(q2, [taken["c-2"]]))  # a handle of another queue's message
        assert outcomes == [[OK, OK], [OK], [OK, STALE], [OK]]
        assert await _counts(store, q1, NOW - FAR) == Counts(0, 2, 0)  # c-1 and c-2
        assert await _counts(store, q2, NOW - FAR) == Counts(0, 0, 0)

    _run(kind, tmp_path, scenario)


def _two_nodes(scenario: Any) -> None:
    """Run `scenario(a, b)` with two PostgreSQL stores (two nodes) on one schema."""
    require_postgres()

    async def main() -> None:
        schema = "t_" + os.urandom(6).hex()
        CREATED_SCHEMAS.append(schema)
        clock = ManualClock(NOW)
        a = await open_store("postgresql", Path(), clock, schema)
        b = await open_store("postgresql", Path(), clock, schema)
        try:
            await scenario(a, b)
        finally:
            await a.close()
            await b.close()

    asyncio.run(main())


def test_a_claim_skips_rows_another_node_holds_without_waiting() -> None:
    """Node a holds two messages for a visibility change; node b's claim meanwhile takes
    the others at once (SKIP LOCKED), never the held two."""
    async def scenario(a: Any, b: Any) -> None:
        queue = await a.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
        await a.send(queue, [message(f"m-{i}", NOW) for i in range(4)], NOW, 0)
        rows = await a.movable(queue, 4, NOW, NOW - FAR)
        async with a.hold(queue, [rows[0].seq, rows[1].seq]) as held:
            assert len(held.found) == 2
            async with b.claim(queue, 10, NOW, NOW - FAR, NOW + 30_000, PICK) as claim:
                assert sorted(m.body for m in claim.messages) == ["m-2", "m-3"]
        async with b.claim(queue, 10, NOW, NOW - FAR, NOW + 30_000, PICK) as claim:
            assert sorted(m.body for m in claim.messages) == ["m-0", "m-1"]

    _two_nodes(scenario)


def test_a_dead_letter_by_a_claim_overtaken_by_another_moves_nothing_twice() -> None:
    """Visibility 0: node a claims a message past its maximum, node b claims it again
    before a moves it, and moves it; a's move, guarded by its receipt, changes nothing."""
    async def scenario(a: Any, b: Any) -> None:
        queue = await a.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
        dlq = await a.create_queue("us-east-1", "dlq", ATTRIBUTES, {}, 0)
        await a.send(queue, [message("poison", NOW)], NOW, 0)
        async with a.claim(queue, 1, NOW, NOW - FAR, NOW, PICK) as first:
            async with b.claim(queue, 1, NOW, NOW - FAR, NOW, PICK) as second:
                [m] = second.messages
                assert m.receive_count == 2
                await second.dead_letter([m.seq], dlq.id, "arn:by-b", NOW)
            await first.dead_letter([m.seq], dlq.id, "arn:by-a", NOW)
        async with a.claim(dlq, 10, NOW, NOW - FAR, NOW + 1, PICK) as claim:
            assert [(x.body, x.dlq_source_arn) for x in claim.messages] == [
                ("poison", "arn:by-b")]
        assert await _counts(a, queue, NOW - FAR) == Counts(0, 0, 0)

    _two_nodes(scenario)


def test_a_fifo_claim_waits_for_another_nodes_and_then_skips_its_group() -> None:
    """Node a's FIFO claim holds the queue's lock until its block ends; node b's claim,
    issued meanwhile, waits for it, then finds group g held and takes group h only."""
    async def scenario(a: Any, b: Any) -> None:
        queue = await a.create_queue("us-east-1", "q.fifo", ATTRIBUTES, {}, 0)
        await a.send(queue, [message("g-1", NOW, group_id="g"), message("g-2", NOW, group_id="g"),
                             message("h-1", NOW, group_id="h")], NOW, 0)

        async def claim_on_b() -> list[str]:
            async with b.claim(queue, 10, NOW, NOW - FAR, NOW + 30_000, PICK) as claim:
                return [m.body for m in claim.messages]

        async with a.claim(queue, 1, NOW, NOW - FAR, NOW + 30_000, PICK) as claim:
            assert [m.body for m in claim.messages] == ["g-1"]
            waiting = asyncio.create_task(claim_on_b())
            await _until_a_backend_waits("advisory")
            assert not waiting.done()
        assert await waiting == ["h-1"]

    _two_nodes(scenario)


def test_a_delete_of_a_message_another_node_holds_waits_and_deletes_it() -> None:
    """Node a holds a message for a visibility change; node b's delete with its receipt,
    meanwhile, waits for it and then deletes it: OK, not stale (the delete statements
    shared between requests wait on a held row rather than skip it)."""
    async def scenario(a: Any, b: Any) -> None:
        queue = await a.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
        await a.send(queue, [message("m", NOW)], NOW, 0)
        async with a.claim(queue, 1, NOW, NOW - FAR, NOW + 30_000, PICK) as claim:
            [m] = claim.messages
        async with a.hold(queue, [m.seq]) as held:
            assert set(held.found) == {m.seq}
            deleting = asyncio.create_task(b.delete(queue, [Handle(m.seq, m.receipt)]))
            await _until_a_backend_waits("transactionid", "DELETE FROM conveyor_messages")
            assert not deleting.done()
        assert await deleting == [OK]
        assert await _counts(a, queue, NOW - FAR) == Counts(0, 0, 0)

    _two_nodes(scenario)


async def _until_a_backend_waits(lock: str, statement: str = "") -> None:
    """Step the interleaving: return once some session waits on a lock of the kind given
    (running a statement that starts with `statement`)."""
    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        for _ in range(1000):
            if await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE"
                                   " wait_event_type='Lock' AND wait_event=$1"
                                   " AND starts_with(query, $2)", lock, statement):
                return
            await asyncio.sleep(0.01)  # polling for a state, not timing anything
        raise AssertionError(f"no session waited on a lock ({lock})")
    finally:
        await conn.close()


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_sqlite_read_errors_come_out_as_store_errors(kind: str, tmp_path: Path) -> None:
    async def scenario(store: Any) -> None:
        queue = await store.create_queue("us-east-1", "q", ATTRIBUTES, {}, 0)
        store.db.close()  # as a broken file would make every read fail
        for read in (store.get_queue("us-east-1", "q"), store.list_queues(None, ""),
                     store.tally(queue, NOW, 0), store.peek(queue, 1, 0)):
            with pytest.raises(StoreError, match="SQLite"):
                await read
        store.db = apsw.Connection(":memory:")  # so that close() can run

    _run(kind, tmp_path, scenario)


def test_a_send_tells_other_nodes_in_one_word_per_queue() -> None:
    """Sends made at once to two standard queues and a FIFO queue reach node b's long
    polls as one notification per queue, counting the messages receivable now (not the
    delayed one); node a hears none of its own."""
    async def scenario(a: Any, b: Any) -> None:
        heard: dict[str, list[tuple[int, int]]] = {"a": [], "b": []}
        arrived = asyncio.Event()

        def on_b(queue_id: int, count: int) -> None:
            heard["b"].append((queue_id, count))
            if len(heard["b"]) == 3:
                arrived.set()
        a.on_remote_ready = lambda queue_id, count: heard["a"].append((queue_id, count))
        b.on_remote_ready = on_b
        q1 = await a.create_queue("us-east-1", "q1", ATTRIBUTES, {}, 0)
        q2 = await a.create_queue("us-east-1", "q2", ATTRIBUTES, {}, 0)
        fifo = await a.create_queue("us-east-1", "f.fifo", ATTRIBUTES, {}, 0)
        await asyncio.gather(
            a.send(q1, [message("a-0", NOW), message("a-1", NOW, NOW + 5_000)], NOW, 0),
            a.send(q2, [message("b-0", NOW)], NOW, 0),
            a.send(q1, [message("c-0", NOW), message("c-1", NOW)], NOW, 0),
            a.send(fifo, [message("f-0", NOW, group_id="g")], NOW, 0))
        await asyncio.wait_for(arrived.wait(), 30)  # a bound against hanging, not a timing
        assert sorted(heard["b"]) == sorted([(q1.id, 3), (q2.id, 1), (fifo.id, 1)])
        assert heard["a"] == []

    _two_nodes(scenario)


@pytest.mark.parametrize("kind", KINDS)
def test_dead_letter_origins_name_every_dead_letters_source_once(kind: str,
                                                                 tmp_path: Path) -> None:
    """Where a move task without a destination would send a queue's messages (the
    authorization table's implied queues, server/authz.py): visible or not, each source
    once, none for a message sent to the queue itself."""
    async def scenario(store: Any) -> None:
        a = await store.create_queue("us-east-1", "a", ATTRIBUTES, {}, 0)
        b = await store.create_queue("us-east-1", "b", ATTRIBUTES, {}, 0)
        dlq = await store.create_queue("us-east-1", "dlq", ATTRIBUTES, {}, 0)
        await store.send(a, [message(f"a-{i}", NOW - 10 + i) for i in range(2)], NOW, 0)
        await store.send(b, [message("b-0", NOW - 5)], NOW, 0)
        await store.send(dlq, [message("direct", NOW - 5)], NOW, 0)
        assert await store.dead_letter_origins(dlq) == []
        for queue, arn in ((a, "arn:aws:sqs:us-east-1:000000000000:a"),
                           (b, "arn:aws:sqs:us-east-1:000000000000:b")):
            async with store.claim(queue, 10, NOW, NOW - FAR, NOW + 30_000, PICK) as claim:
                await claim.dead_letter([m.seq for m in claim.messages], dlq.id, arn, NOW)
        async with store.claim(dlq, 1, NOW, NOW - FAR, NOW + 30_000, PICK) as claim:
            assert len(claim.messages) == 1  # one in flight: still counted
        assert sorted(await store.dead_letter_origins(dlq)) == [
            "arn:aws:sqs:us-east-1:000000000000:a", "arn:aws:sqs:us-east-1:000000000000:b"]
        assert await store.dead_letter_origins(a) == []

    _run(kind, tmp_path, scenario)
