"""Unique ids in UUID form, cheap enough to make one for every message and request."""

from __future__ import annotations

import itertools
import uuid

_MASK_48 = (1 << 48) - 1
_SCRAMBLE = 0x9E3779B97F4B  # odd: multiplying by it permutes the numbers modulo 2**48


class UuidSequence:
    """Version-4-shaped UUIDs: 74 random bits drawn once per process, and in the first 48
    bits a counter times an odd constant. Unique across processes and restarts as uuid4()
    is, without drawing and formatting 122 random bits each time (message and request ids
    need uniqueness, not secrecy: receipt handles carry their own random token); the
    scrambling keeps the leading digits, which logs show, different from id to id."""

    def __init__(self) -> None:
        self._suffix = str(uuid.uuid4())[13:]  # "-4xxx-yxxx-xxxxxxxxxxxx"
        self._counter = itertools.count(1)

    def next(self) -> str:
        # to_bytes().hex(): about half the cost of format specs such as {n:08x}.
        digits = (next(self._counter) * _SCRAMBLE & _MASK_48).to_bytes(6, "big").hex()
        return f"{digits[:8]}-{digits[8:]}{self._suffix}"
