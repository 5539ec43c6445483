"""GroupQueues: a group's messages held in order, its cap let go (FIFO: only the first)."""

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


def test_a_cap_lets_that_many_of_a_group_go_and_each_freed_place_goes_to_the_next() -> None:
    groups: GroupQueues[Item] = GroupQueues(2, ordered=False)
    a1, a2, a3, a4 = (Item(f"a{i}") for i in range(1, 5))
    assert [groups.add("A", item) for item in (a1, a2, a3, a4)] == [True, True, False, False]
    assert groups.behind("A") == 2
    assert groups.at_front("A", a2) and not groups.at_front("A", a3)
    assert groups.remove("A", a2) is a3  # its place goes to the first waiting
    assert groups.remove("A", a4) is None  # one waiting leaves: no place frees
    assert groups.remove("A", a1) is None  # nobody waits for it
    assert groups.at_front("A", a3) and groups.behind("A") == 0
