"""What service/tenants.py tells /metrics and the console of a queue's limits: which apply,
in what units, and which limit held a receive back (pure: no store)."""

from __future__ import annotations

from conveyor.service import tenants
from conveyor.store.base import QueueRecord


def _queue(name: str = "q", **attributes: str) -> QueueRecord:
    return QueueRecord(1, "us-east-1", name, attributes, {}, 0, 0, 0)


def test_settings_are_those_set_with_the_default_burst_and_no_group_limits_on_fifo() -> None:
    assert tenants.settings(_queue()) == {}
    assert tenants.settings(_queue(ConveyorGroupConcurrency="3", ConveyorReceiveRate="2.5",
                                   ConveyorGroupReceiveRate="5", ConveyorGroupReceiveBurst="8",
                                   ConveyorMaxDelaySeconds="86400")) == {
        "group_concurrency": 3, "receive_rate": 2.5, "receive_burst": 3,  # ceil(2.5)
        "group_receive_rate": 5, "group_receive_burst": 8, "max_delay_seconds": 86400}
    fifo = _queue("q.fifo", FifoQueue="true", ConveyorReceiveRate="1")
    assert fifo.fifo and tenants.settings(fifo) == {"receive_rate": 1, "receive_burst": 1}


def test_a_receive_is_held_back_only_when_it_handed_out_less_than_a_limit_let_it() -> None:
    picked = tenants.Picking(1, 1, group_cap=1)
    assert tenants.held(10, 10, 3, picked) == []  # fewer, but no limit was met
    picked.group_room(1, None, 0, 10)
    assert tenants.held(10, 10, 3, picked) == ["group_concurrency"]
    assert tenants.held(10, 10, 10, picked) == []  # other groups filled the receive
    assert tenants.held(10, 4, 4, tenants.Picking(1, 1)) == ["receive_rate"]
    assert tenants.held(10, 0, 0, tenants.Picking(1, 1)) == ["receive_rate"]
    assert tenants.held(10, 4, 2, tenants.Picking(1, 1)) == []  # the rate was not what held
