"""Back-off arithmetic (pure functions)."""

from __future__ import annotations

import random

from conveyor.worker.backoff import IdleBackoff, failure_visibility, parse_retry_after


def test_first_failure_waits_exactly_error_visibility_timeout():
    assert failure_visibility(1, 2, 3600, random.Random(1)) == 2


def test_failure_visibility_grows_exponentially_with_jitter_and_cap():
    rng = random.Random(7)
    for count in range(2, 12):
        ceiling = min(100, 2 * 2 ** (count - 1))
        for _ in range(50):
            value = failure_visibility(count, 2, 100, rng)
            assert max(2, ceiling // 2) <= value <= ceiling
    spread = {failure_visibility(6, 2, 3600, rng) for _ in range(100)}
    assert len(spread) > 5  # jittered, not one fixed value


def test_zero_error_visibility_timeout_means_immediate_retry():
    assert failure_visibility(5, 0, 3600, random.Random()) == 0


def test_retry_after_seconds_and_http_date():
    now_s = 1445412470
    assert parse_retry_after("7", now_s) == 7
    assert parse_retry_after("99999999", now_s) == 43200
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now_s) == 10
    assert parse_retry_after("soon", now_s) is None
    assert parse_retry_after(None, now_s) is None


def test_idle_backoff_spares_the_first_empty_poll_then_grows_to_max():
    backoff = IdleBackoff(0.5, 4.0, random.Random(3))
    assert backoff.next_pause() == 0.0
    pauses = [backoff.next_pause() for _ in range(20)]
    assert pauses[0] == 0.5
    assert all(0.5 <= p <= 4.0 for p in pauses)
    assert max(pauses[8:]) > 2.0  # the ceiling has grown
    backoff.reset()
    assert backoff.next_pause() == 0.0
