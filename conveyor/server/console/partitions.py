"""The overview's partitioned queues: the backlog of each logical queue, its partitions'
added up (client/partitions.py names them NAME-p0 … NAME-p{N-1}).

A logical queue is shown when its partitions from p0 up are there without a gap and
number two or more; only the first MAX_LOGICAL of them are counted on each view.
"""

from __future__ import annotations

from html import escape

from conveyor.client.partitions import split_partition_name
from conveyor.server.console import parts
from conveyor.service import Counts, QueueRecord, Service

MAX_LOGICAL = 50  # logical queues counted on every view of the overview


def logical_queues(queues: list[QueueRecord]) -> dict[tuple[str, str], list[QueueRecord]]:
    """(region, logical name) → its partitions in index order, for complete sets only."""
    found: dict[tuple[str, str], dict[int, QueueRecord]] = {}
    for queue in queues:
        split = split_partition_name(queue.name)
        if split is not None:
            found.setdefault((queue.region, split[0]), {})[split[1]] = queue
    return {key: [by_index[i] for i in range(len(by_index))]
            for key, by_index in sorted(found.items())
            if len(by_index) >= 2 and set(by_index) == set(range(len(by_index)))}


async def partitions_section(service: Service, queues: list[QueueRecord],
                             known: dict[int, Counts]) -> str:
    """A table of the logical queues with their summed counts ('' when there are none);
    `known`: counts the page already has, by queue id, not asked of the store again."""
    logical = list(logical_queues(queues).items())[:MAX_LOGICAL]
    if not logical:
        return ""
    rows = []
    for (region, name), members in logical:
        total = Counts()
        for queue in members:
            counts = known.get(queue.id)
            if counts is None:
                counts = await service.counts(queue)
            total.visible += counts.visible
            total.in_flight += counts.in_flight
            total.delayed += counts.delayed
        links = ", ".join(parts.queue_link(q.region, q.name) for q in members)
        rows.append([escape(name), escape(region), str(len(members)),
                     *parts.count_cells(total), links])
    table = parts.table(["Partitioned queue", "Region", "Partitions", "Visible", "In flight",
                         "Delayed", "Its queues"], rows, numeric=(2, 3, 4, 5))
    return f'<section id="partitioned" data-live><h2>Partitioned queues</h2>{table}</section>'
