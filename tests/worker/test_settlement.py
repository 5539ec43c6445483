"""The checks the owner of each message's fate makes (settlement.py `Invariants`), driven
directly: each one must be able to fail. End to end, the model-based test (test_model.py)
reads whatever they found after every schedule."""

from __future__ import annotations

from conveyor.client import Message
from conveyor.worker.groups import GroupQueues
from conveyor.worker.job import Job
from conveyor.worker.settlement import Invariants


def _job(name: str, group: str | None = None) -> Job:
    return Job(Message(name, f"handle-{name}", name), 0.0, 30.0, group=group)


def test_a_message_answered_2xx_is_never_posted_again() -> None:
    invariants, groups = Invariants("jobs"), GroupQueues[Job]()
    job = _job("a")
    invariants.posting([job], groups)
    invariants.posted([job])
    assert invariants.broken == []
    invariants.done(job.message)
    invariants.posting([_job("a")], groups)  # the same message, received again
    assert invariants.broken == ["a 2xx is final"]


def test_fifo_one_post_at_a_time_per_group_and_only_its_first() -> None:
    invariants, groups = Invariants("jobs.fifo"), GroupQueues[Job]()
    first, second = _job("1", "g"), _job("2", "g")
    groups.add("g", first)
    groups.add("g", second)
    invariants.posting([first, second], groups)  # one batch carries the group, in order
    assert invariants.broken == []
    invariants.posting([first], groups)  # a second POST while the first is open
    assert invariants.broken == ["one POST at a time per group"]
    invariants.posted([first])
    invariants.posted([first, second])
    invariants.posting([second], groups)  # not the group's first
    assert invariants.broken[-1] == "FIFO order within a group"


def test_a_capped_group_has_at_most_its_cap_at_the_app_and_only_its_front() -> None:
    invariants, groups = Invariants("jobs"), GroupQueues[Job](2, ordered=False)
    first, second, third = _job("1", "g"), _job("2", "g"), _job("3", "g")
    for job in (first, second, third):
        groups.add("g", job)
    invariants.posting([first, second], groups)  # two places: one batch may take both
    assert invariants.broken == []
    invariants.posting([third], groups)  # behind the front, and the group is at its cap
    assert invariants.broken == ["a group's cap", "a group's cap"]
    invariants.posted([third])
    invariants.posted([first, second])
    groups.remove("g", first)
    invariants.posting([third], groups)  # it took the freed place
    assert len(invariants.broken) == 2
