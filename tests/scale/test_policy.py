"""The policy arithmetic: seed 001's worked example, tolerance, cooldowns, zero, bounds."""

from __future__ import annotations

import pytest

from conveyor.scale.policy import (
    BacklogPolicy,
    BacklogSettings,
    CpuSettings,
    CpuStepPolicy,
    Observation,
    StaticPolicy,
    parse_bounds,
)


def backlog(**settings) -> BacklogPolicy:
    base = {"min_workers": 0, "max_workers": 100, "scale_in_cooldown_s": 0.0,
            "scale_in_stabilization_s": 0.0}
    return BacklogPolicy(BacklogSettings(**{**base, **settings}))


def test_seed_worked_example_latency_over_processing_time():
    """1,500 messages, 10 workers, 0.1 s each, 10 s acceptable latency → target 100, 15."""
    policy = backlog(latency_s=10.0)
    d = policy.decide(Observation(0.0, visible=1500, in_service=10, processing_s=0.1))
    assert d.target == pytest.approx(100.0)
    assert d.metric == pytest.approx(150.0)
    assert d.desired == 15
    assert d.reason == "backlog above target"
    assert "depth=1500" in d.describe() and "desired=15" in d.describe()


@pytest.mark.parametrize(("visible", "in_service", "target", "kwargs", "desired", "reason"), [
    (1500, 10, 100, {}, 15, "backlog above target"),
    (1000, 10, 100, {}, 10, "within tolerance"),  # metric = target exactly
    (1080, 10, 100, {}, 10, "within tolerance"),  # 8 % over: inside the 10 % band
    (1120, 10, 100, {}, 12, "backlog above target"),  # 12 % over: outside it
    (930, 10, 100, {}, 10, "within tolerance"),
    (500, 10, 100, {}, 5, "backlog below target"),
    (0, 10, 100, {}, 0, "backlog below target"),  # scale in to zero
    (0, 10, 100, {"min_workers": 2}, 2, "at min"),
    (50_000, 10, 100, {"max_workers": 20}, 20, "at max"),
    (1, 0, 100, {}, 1, "scale out from zero"),  # the first message starts a worker
    (0, 0, 100, {}, 0, "backlog below target"),
    (0, 0, 100, {"min_workers": 1}, 1, "scale out from zero"),
    (250, 0, 100, {}, 3, "scale out from zero"),
    (1000, 10, 100, {"tolerance": 0.0}, 10, "within tolerance"),
    (1001, 10, 100, {"tolerance": 0.0}, 11, "backlog above target"),
])
def test_backlog_table(visible, in_service, target, kwargs, desired, reason):
    d = backlog(target=target, **kwargs).decide(
        Observation(0.0, visible=visible, in_service=in_service))
    assert (d.desired, d.reason) == (desired, reason)


def test_in_flight_and_delayed_are_counted_only_when_asked():
    obs = Observation(0.0, visible=100, in_flight=300, delayed=200, in_service=2)
    assert backlog(target=100).decide(obs).desired == 1
    assert backlog(target=100, count_in_flight=True).decide(obs).desired == 4
    assert backlog(target=100, count_in_flight=True, count_delayed=True).decide(obs).desired == 6


def test_target_from_latency_uses_concurrency_and_a_default_before_any_report():
    policy = backlog(latency_s=10.0, concurrency=4, default_processing_s=2.0)
    assert policy.decide(Observation(0.0, visible=0, in_service=1)).target == 20.0
    assert policy.decide(Observation(1.0, visible=0, in_service=1,
                                     processing_s=0.5)).target == 80.0


def test_pending_workers_count_toward_the_fleet():
    """Workers still starting are not started again on the next round."""
    d = backlog(target=10).decide(Observation(0.0, visible=50, in_service=2, pending=3))
    assert (d.current, d.desired) == (5, 5)


def test_scale_out_cooldown_holds_a_second_scale_out():
    policy = backlog(target=10, scale_out_cooldown_s=30.0)
    assert policy.decide(Observation(0.0, visible=40, in_service=2)).desired == 4
    held = policy.decide(Observation(10.0, visible=80, in_service=4))
    assert (held.desired, held.reason) == (4, "scale-out cooldown")
    assert policy.decide(Observation(31.0, visible=80, in_service=4)).desired == 8


def test_scale_out_from_zero_ignores_the_cooldown():
    policy = backlog(target=10, scale_out_cooldown_s=300.0)
    policy.decide(Observation(0.0, visible=40, in_service=2))
    d = policy.decide(Observation(1.0, visible=5, in_service=0))
    assert (d.desired, d.reason) == (1, "scale out from zero")


def test_scale_in_cooldown_counts_from_the_last_action():
    policy = backlog(target=10, scale_in_cooldown_s=60.0)
    assert policy.decide(Observation(0.0, visible=100, in_service=5)).desired == 10
    held = policy.decide(Observation(30.0, visible=0, in_service=10))
    assert (held.desired, held.reason) == (10, "scale-in cooldown")
    assert policy.decide(Observation(61.0, visible=0, in_service=10)).desired == 0


def test_scale_in_stabilization_takes_the_highest_recent_desire():
    policy = backlog(target=10, scale_in_stabilization_s=60.0)
    assert policy.decide(Observation(0.0, visible=80, in_service=8)).desired == 8
    held = policy.decide(Observation(20.0, visible=0, in_service=8))
    assert (held.desired, held.reason) == (8, "scale-in stabilization")
    assert policy.decide(Observation(50.0, visible=30, in_service=8)).desired == 8
    # t=70: the 8 of t=0 left the window, 3 (t=50) is the highest left
    assert policy.decide(Observation(70.0, visible=0, in_service=8)).desired == 3
    assert policy.decide(Observation(200.0, visible=0, in_service=3)).desired == 0


def test_settings_are_checked():
    with pytest.raises(ValueError, match="target"):
        BacklogSettings()
    with pytest.raises(ValueError, match="min"):
        BacklogSettings(target=1, min_workers=5, max_workers=2)
    assert parse_bounds("0:4") == (0, 4)
    for bad in ("4", "3:1", "a:b", "0:0", "-1:2"):
        with pytest.raises(ValueError):
            parse_bounds(bad)


def test_cpu_steps_after_a_sustained_breach_then_cools_down():
    policy = CpuStepPolicy(CpuSettings(min_workers=1, max_workers=5, period_s=60.0,
                                       breach_s=30.0, cooldown_s=120.0))

    def at(t: float, workers: int) -> tuple[int, str]:
        d = policy.decide(Observation(t, 0, in_service=workers, utilization=0.9))
        return d.desired, d.reason

    assert at(0.0, 2) == (2, "above upper, breach pending")
    assert at(30.0, 2) == (3, "above upper threshold")
    assert at(60.0, 3) == (3, "above upper, breach pending")
    assert at(90.0, 3) == (3, "cooldown")
    assert at(150.0, 3) == (4, "above upper threshold")


def test_cpu_steps_down_but_never_below_min():
    policy = CpuStepPolicy(CpuSettings(min_workers=1, max_workers=5, period_s=10.0,
                                       breach_s=10.0, cooldown_s=0.0))
    sizes = []
    workers = 2
    for t in range(0, 100, 10):
        workers = policy.decide(Observation(float(t), 0, in_service=workers,
                                            utilization=0.0)).desired
        sizes.append(workers)
    assert min(sizes) == 1 and sizes[-1] == 1 and 2 in sizes


def test_static_is_static():
    policy = StaticPolicy(7)
    assert policy.decide(Observation(0.0, visible=10_000, in_service=3)).desired == 7
    assert policy.decide(Observation(1.0, visible=0, in_service=7)).desired == 7
