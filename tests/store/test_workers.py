"""Workers' announcements on every store: renewals keep the first-seen time until an
announcement runs out, expired ones are forgotten, and the limit counts live ones only."""

from __future__ import annotations

from pathlib import Path

import pytest

from conveyor.store.base import Store
from tests.store.helpers import KINDS, run


@pytest.mark.parametrize("kind", KINDS)
def test_announcements_renew_expire_and_are_limited(kind: str, tmp_path: Path) -> None:
    async def scenario(store: Store) -> None:
        assert await store.save_worker("w1", '{"n": 1}', 1_000, 31_000, 2)
        assert await store.save_worker("w2", '{"n": 2}', 2_000, 3_000, 2)
        assert not await store.save_worker("w3", "{}", 2_500, 9_000, 2)  # two are live
        assert await store.save_worker("w1", '{"n": 11}', 2_500, 32_500, 2)  # a renewal
        assert await store.workers(2_900) == [("w1", 1_000, '{"n": 11}'),
                                              ("w2", 2_000, '{"n": 2}')]
        assert await store.workers(3_000) == [("w1", 1_000, '{"n": 11}')]  # w2 ran out
        assert await store.save_worker("w3", "{}", 3_000, 9_000, 2)  # room again
        assert await store.save_worker("w3", "{}", 9_500, 20_000, 2)  # back after expiry:
        assert await store.workers(9_500) == [("w1", 1_000, '{"n": 11}'),
                                              ("w3", 9_500, "{}")]  # seen anew

    run(kind, tmp_path, scenario)
