"""Message and request ids: UUID-shaped, distinct, and telling apart in their first digits."""

from __future__ import annotations

import uuid

from conveyor.ids import UuidSequence

SEQ = UuidSequence()


def test_ids_are_distinct_version_4_uuids() -> None:
    ids = [UuidSequence().next() for _ in range(3)] + [SEQ.next() for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    assert all(uuid.UUID(i).version == 4 and str(uuid.UUID(i)) == i for i in ids)


def test_consecutive_ids_differ_in_the_digits_logs_show() -> None:
    ids = [SEQ.next() for _ in range(5000)]
    assert len({i[:8] for i in ids}) == len(ids)
