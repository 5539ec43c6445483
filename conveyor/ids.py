"""Unique ids in UUID form, cheap enough to make one for every message and request."""

from __future__ import annotations

import itertools
import uuid


class UuidSequence:
    """Version-4-shaped UUIDs: 74 random bits drawn once per process, then a counter in
    the last 48 bits. Unique across processes and restarts as uuid4() is, without drawing
    and formatting 122 random bits each time: message and request ids need uniqueness,
    not secrecy (receipt handles carry their own random token)."""

    def __init__(self) -> None:
        self._prefix = str(uuid.uuid4())[:24]  # "xxxxxxxx-xxxx-4xxx-yxxx-"
        self._counter = itertools.count(1)

    def next(self) -> str:
        return f"{self._prefix}{next(self._counter):012x}"
