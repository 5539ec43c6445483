"""The same lease contract on every backend: the server's lease API and DynamoDB (moto)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from conveyor.cron.leases import LeaseConflict
from conveyor.cron.ledger import RunLedger
from tests.cron.leasekit import BACKENDS, open_kit
from tests.worker.conftest import run


@pytest.fixture(params=BACKENDS)
def kind(request) -> str:
    return request.param


@pytest.fixture
def backend(kind, request):
    server = request.getfixturevalue("clock_server") if kind == "server" else None
    moto = request.getfixturevalue("moto_url") if kind == "dynamodb" else None
    return lambda: open_kit(kind, server, moto)


def name() -> str:
    return "conveyor-cron:q-" + uuid.uuid4().hex[:8]


def test_one_holder_at_a_time_and_reacquire_bumps_version(backend) -> None:
    async def scenario() -> None:
        async with backend() as kit:
            lease = name()
            first = await kit.leases.acquire(lease, "a", 30)
            assert (first.holder, first.data) == ("a", "")
            with pytest.raises(LeaseConflict):
                await kit.leases.acquire(lease, "b", 30)
            again = await kit.leases.acquire(lease, "a", 30)
            assert again.version == first.version + 1
            assert (await kit.leases.get(lease)).holder == "a"
            assert await kit.leases.get(name()) is None
    run(scenario())


def test_update_is_conditional_on_holder_and_version(backend) -> None:
    async def scenario() -> None:
        async with backend() as kit:
            lease = name()
            held = await kit.leases.acquire(lease, "a", 30)
            written = await kit.leases.update(lease, "a", held.version, 30, '{"x": 1}')
            assert written.data == '{"x": 1}' and written.version == held.version + 1
            with pytest.raises(LeaseConflict):  # stale version
                await kit.leases.update(lease, "a", held.version, 30, "stale")
            with pytest.raises(LeaseConflict):  # not the holder
                await kit.leases.update(lease, "b", written.version, 30, "theirs")
            with pytest.raises(LeaseConflict):  # never existed
                await kit.leases.update(name(), "a", 1, 30, "")
            assert (await kit.leases.get(lease)).data == '{"x": 1}'
    run(scenario())


def test_expiry_hands_over_and_data_survives(backend) -> None:
    async def scenario() -> None:
        async with backend() as kit:
            lease = name()
            held = await kit.leases.acquire(lease, "a", 5)
            written = await kit.leases.update(lease, "a", held.version, 5, "last=0900")
            await asyncio.to_thread(kit.advance, 6)
            with pytest.raises(LeaseConflict):  # an expired lease cannot be renewed ...
                await kit.leases.update(lease, "a", written.version, 5, "late")
            taken = await kit.leases.acquire(lease, "b", 5)  # ... but can be taken
            assert (taken.holder, taken.data) == ("b", "last=0900")
    run(scenario())


def test_release_frees_it_now_and_keeps_data(backend) -> None:
    async def scenario() -> None:
        async with backend() as kit:
            lease = name()
            held = await kit.leases.acquire(lease, "a", 300)
            await kit.leases.update(lease, "a", held.version, 300, "kept")
            await kit.leases.release(lease, "b")  # not b's: no effect
            with pytest.raises(LeaseConflict):
                await kit.leases.acquire(lease, "b", 300)
            await kit.leases.release(lease, "a")
            taken = await kit.leases.acquire(lease, "b", 300)
            assert (taken.holder, taken.data) == ("b", "kept")
    run(scenario())


def test_concurrent_campaigns_elect_exactly_one(backend) -> None:
    async def scenario() -> None:
        async with backend() as kit:
            lease = name()

            async def campaign(holder: str) -> bool:
                try:
                    await kit.leases.acquire(lease, holder, 30)
                except LeaseConflict:
                    return False
                return True

            wins = await asyncio.gather(*(campaign(f"h{i}") for i in range(8)))
            assert sum(wins) == 1
    run(scenario())


def test_run_ledger_admits_the_first_message_of_a_run_only(backend) -> None:
    async def scenario() -> None:
        async with backend() as kit:
            base = name()
            one, two = (RunLedger(kit.leases, base, h) for h in ("r1", "r2"))
            at = "2026-01-31T23:00:00Z"
            verdicts = await asyncio.gather(one.admit("audit", at, "m1"),
                                            two.admit("audit", at, "m2"))
            assert sorted(verdicts) == [False, True]
            winner = "m1" if verdicts[0] else "m2"
            assert await two.admit("audit", at, winner)  # a redelivery of the winner
            assert not await one.admit("audit", at, "m3")
            assert await one.admit("audit", "2026-02-01T23:00:00Z", "m3")  # another run
            assert await one.admit("backup job/ü", at, "m4")  # another task, odd name
    run(scenario())


def test_a_lease_says_how_long_it_has_left_by_the_clock_that_judges_it(backend) -> None:
    """What a follower sleeps on (leader.py): the time left, not an epoch time to compare
    with its own clock (the server's clock judges server leases; the writer's DynamoDB's)."""
    async def scenario() -> None:
        async with backend() as kit:
            lease = name()
            held = await kit.leases.acquire(lease, "a", 30)
            assert 25_000 < held.expires_in_ms <= 30_000
            await asyncio.to_thread(kit.advance, 20)
            read = await kit.leases.get(lease)
            assert 5_000 < read.expires_in_ms <= 10_000
            await asyncio.to_thread(kit.advance, 11)
            assert (await kit.leases.get(lease)).expires_in_ms == 0  # ended, never negative
    run(scenario())
