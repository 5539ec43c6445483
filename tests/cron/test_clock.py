"""The cron clock is a conveyor Clock: cron time on its wall, real time on its monotonic."""

from __future__ import annotations

from conveyor.clock import ManualClock
from conveyor.cron.clock import ENV, CronClock


def test_cron_time_is_the_base_time_unless_sped_up() -> None:
    base = ManualClock(now_ms=1_800_000_000_000)
    clock = CronClock.from_env({}, base=base)
    assert clock.now_ms() == base.now_ms() and clock.now_s() == 1_800_000_000
    clock.advance(1.5)  # moves the base: wall and monotonic together
    assert clock.now_ms() == base.now_ms() == 1_800_000_001_500
    assert clock.monotonic_s() == base.monotonic_s() == 1_800_000_001.5
    assert clock.real_seconds(60) == 60


def test_a_sped_up_clock_runs_its_wall_fast_and_its_monotonic_real() -> None:
    base = ManualClock(now_ms=1_800_000_000_000)
    clock = CronClock.from_env({ENV: "1000000020,1800000000,20"}, base=base)
    assert clock.now_ms() == 1_000_000_020_000
    mono = clock.monotonic_s()
    base.advance(3)
    assert clock.now_ms() == 1_000_000_080_000  # 3 real seconds are 60 cron seconds
    assert clock.monotonic_s() - mono == 3  # leases stay real time
    assert clock.real_seconds(60) == 3
