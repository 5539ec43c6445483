"""What a claim under group limits learns of the groups it visits (service/rules.py,
tenant limits): each group's room and bucket, the messages dealt from it, and when a group
its rate held back has a token again. Both stores' fair deals keep their notes here; the
rules themselves come with the claim's `picking`."""

from __future__ import annotations

from conveyor.store.base import Picking


class GroupLimits:
    __slots__ = ("picking", "retry_ms", "_tats", "_runs")

    def __init__(self, picking: Picking) -> None:
        self.picking = picking
        self.retry_ms: int | None = None  # the earliest a rate-held group gives again
        self._tats: dict[str, float | None] = {}
        self._runs: dict[str, list[int]] = {}

    def note(self, group: str, in_flight: int, tat_ms: float | None, now_ms: int,
             limit: int) -> int:
        """The group's room for this receive, from its messages in flight and bucket."""
        picking = self.picking
        room = picking.group_room(in_flight, tat_ms, now_ms, limit)
        self._tats[group] = tat_ms
        capped = bool(picking.group_cap) and in_flight >= picking.group_cap
        if room == 0 and not capped:  # held back by its rate alone: it has a time
            ready = picking.group_ready_ms(tat_ms, now_ms)
            if ready is not None and (self.retry_ms is None or ready < self.retry_ms):
                self.retry_ms = ready
        return room

    def dealt(self, group: str, run: list[int]) -> None:
        """The group's messages offered to the deal (its room's worth at most)."""
        self._runs[group] = run

    def spent(self, seqs: list[int], now_ms: int) -> list[tuple[str, float]]:
        """(group, bucket) of each group that gave some of `seqs`, its bucket spent by
        them; none when the queue has no group rate."""
        if self.picking.group_rate is None:
            return []
        taken = set(seqs)
        buckets = []
        for group, run in self._runs.items():
            given = sum(seq in taken for seq in run)
            if given:
                tat = self.picking.group_spent(self._tats[group], now_ms, given)
                assert tat is not None
                buckets.append((group, tat))
        return buckets
