"""The sign-in throttle's rule (service/signins.py) on every store, with time as a value.

The schedule is the one OWASP's Web Security Testing Guide quotes from Amazon Cognito
(WSTG-ATHN-03): "After 5 failed sign-in attempts with a password, the user is locked out for
one second. The lockout duration doubles with each failed attempt, with a maximum of 15
minutes."
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from conveyor.clock import ManualClock
from conveyor.service.signins import ADDRESS, FORGET_AFTER_S, KEY, SignInThrottle, address_subject
from tests.store.helpers import KINDS, run


def test_the_key_schedule_is_the_cited_one() -> None:
    locks = [KEY.lock_ms(n) // 1000 for n in range(1, 20)]
    assert locks[:4] == [0, 0, 0, 0]
    assert locks[4:14] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert locks[14:] == [900] * 5  # 15 minutes, and no longer
    assert KEY.lock_ms(10**9) == 900_000
    assert [ADDRESS.lock_ms(n) for n in (19, 20, 21)] == [0, 1000, 2000]


@pytest.mark.parametrize(("address", "subject"), [
    ("127.0.0.1", "127.0.0.1"),
    ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),  # one host's /64 is one address
    ("2001:db8:1:2:ffff::9", "2001:db8:1:2::/64"),
    ("::ffff:192.0.2.7", "192.0.2.7"),
    ("", ""),
])
def test_addresses_count_by_host(address: str, subject: str) -> None:
    assert address_subject(address) == subject


@pytest.mark.parametrize("kind", KINDS)
def test_failures_lock_double_and_are_forgotten(kind: str, tmp_path: Path) -> None:
    clock = ManualClock()

    async def scenario(store: Any) -> None:
        throttle = SignInThrottle(store, clock)
        waits = [await throttle.failed("AKID", "192.0.2.1") for _ in range(4)]
        assert waits == [0, 0, 0, 0]
        assert await throttle.failed("AKID", "192.0.2.1") == 1
        assert await throttle.locked_s("AKID", "192.0.2.1") == 1
        assert await throttle.locked_s("AKID", "192.0.2.2") == 1  # the key is locked anywhere
        assert await throttle.locked_s("OTHER", "192.0.2.1") == 0  # 5 from here is no limit
        clock.advance(1)
        assert await throttle.locked_s("AKID", "192.0.2.1") == 0
        assert await throttle.failed("AKID", "192.0.2.1") == 2
        clock.advance(2)
        await throttle.succeeded("AKID")
        assert await throttle.failed("AKID", "192.0.2.1") == 0  # cleared: counts from 1
        clock.advance(FORGET_AFTER_S + 1)
        for _ in range(4):
            assert await throttle.failed("AKID", "192.0.2.1") == 0  # forgotten after a day

    run(kind, tmp_path, scenario)


@pytest.mark.parametrize("kind", KINDS)
def test_concurrent_failures_all_count(kind: str, tmp_path: Path) -> None:
    """Failures counted at once (two nodes, or two requests) are each counted: the store's
    change is atomic, so none is lost to another."""
    clock = ManualClock()

    async def scenario(store: Any) -> None:
        throttle = SignInThrottle(store, clock)
        await asyncio.gather(*(throttle.failed("AKID", f"192.0.2.{i}") for i in range(8)))
        counts = await store.sign_in_failures(["key:AKID"])
        assert counts["key:AKID"][0] == 8

    run(kind, tmp_path, scenario)
