"""GroupQueues: a FIFO group's messages held in order, only the first let go."""

from __future__ import annotations

from conveyor.worker.groups import GroupQueues


class Item:
    """Compared by identity, as the daemon's jobs are."""

    def __init__(self, name: str) -> None:
        self.name = name


def test_only_the_first_of_a_group_goes_and_the_next_follows_it():
    groups: GroupQueues[Item] = GroupQueues()
    a1, a2, a3, b1 = Item("a1"), Item("a2"), Item("a3"), Item("b1")
    assert [groups.add("A", a1), groups.add("A", a2), groups.add("B", b1),
            groups.add("A", a3)] == [True, False, True, False]
    assert groups.behind("A") == 2
    assert groups.remove("A", a1) is a2
    assert groups.remove("A", a2) is a3
    assert groups.remove("A", a3) is None
    assert groups.behind("A") == 0
    assert groups.add("A", Item("a4")) is True  # the group starts over
    assert groups.remove("B", b1) is None


def test_removing_a_later_message_lets_nothing_go():
    groups: GroupQueues[Item] = GroupQueues()
    a1, a2, a3 = Item("a1"), Item("a2"), Item("a3")
    for item in (a1, a2, a3):
        groups.add("A", item)
    assert groups.remove("A", a2) is None
    assert groups.remove("A", Item("stranger")) is None
    assert groups.remove("A", a1) is a3
