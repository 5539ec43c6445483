"""Histories of what SQS clients saw under faults, and a checker of them (Jepsen's way).

Clients (boto3, against real server processes) record every operation with the times it
was invoked and answered, on a monotonic clock shared by the test's threads: each send
acknowledged with its message ids, each receive with what it got, each delete with the
entries acknowledged. Nothing is recorded for a call that failed: it may or may not have
been applied, and a history promises nothing about it. Afterwards the checker asserts
what SQS promises (Amazon SQS Developer Guide: a message sent successfully is stored
until deleted, expired or moved; DeleteMessage removes it for good when the receipt
handle is the latest one, i.e. within the message's visibility timeout from the receive
that gave it):

- every acknowledged send was received at some point, or is still queued at the end;
- no acknowledged delete is undone: no receive that began after a delete's acknowledgement
  returns the message again, when the delete came within the visibility timeout of the
  receive that handed out its receipt (a later delete carries a stale receipt, and SQS
  may then deliver the message again: the visibility rules, not a fault);
- FIFO order per message group: each message of a group is first delivered after every
  message sent before it in the group ("the order in which messages are sent and
  received is strictly preserved", SQS Developer Guide, FIFO queues);
- FIFO deduplication: a body sent again with the same deduplication id within the
  five-minute interval (a retried send) is one message, delivered under one message id
  ("any messages sent with the same message deduplication ID are accepted successfully
  but aren't delivered during the 5-minute deduplication interval", ibid.).

FIFO messages are told apart by their bodies, `group:seq`: one producer per group sends
seq 0, 1, 2... in order, each until acknowledged, with the body as deduplication id.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError


@dataclass(frozen=True)
class Op:
    """One operation as the client saw it: invoked at `start`, answered at `end`."""

    kind: str  # "send" | "receive" | "delete"
    node: int  # which server node it went to
    start: float
    end: float
    ids: tuple[str, ...]  # send: acknowledged ids; receive: got; delete: acknowledged
    bodies: tuple[str, ...] = ()  # a FIFO receive's bodies (`group:seq`), as `ids`


@dataclass
class History:
    """Every operation of a run; appended to from many threads."""

    visibility_timeout_s: float
    ops: list[Op] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)  # (node, error code)
    failures: list[str] = field(default_factory=list)  # a client thread's own crash
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, op: Op) -> None:
        with self._lock:
            self.ops.append(op)

    def call(self, kind: str, node: int, ids: Callable[[Any], Iterable[str]],
             call: Callable[..., Any], bodies: Callable[[Any], Iterable[str]] | None = None,
             **request: Any) -> Any | None:
        """Run `call(**request)`; record it as acknowledged (with `ids` of its answer, and
        `bodies` if given) or as an error (nothing recorded then: its outcome is unknown).
        None when it failed."""
        start = time.monotonic()
        try:
            answer = call(**request)
        except ClientError as exc:
            self.errors.append((node, exc.response["Error"]["Code"]))
            return None
        except BotoCoreError as exc:  # no answer at all: a read timeout, a refused socket
            self.errors.append((node, type(exc).__name__))
            return None
        self.record(Op(kind, node, start, time.monotonic(), tuple(ids(answer)),
                       tuple(bodies(answer)) if bodies else ()))
        return answer

    def of(self, kind: str) -> list[Op]:
        return [op for op in self.ops if op.kind == kind]


@dataclass
class Verdict:
    acknowledged: int  # sends acknowledged
    lost: dict[str, float]  # acknowledged, never received, not queued at the end: id -> ack time
    undone: list[tuple[str, float, float]]  # (id, delete acknowledged, received again at)
    # FIFO: (group, seq first delivered, a seq sent earlier first delivered after it)
    out_of_order: list[tuple[str, int, int]] = field(default_factory=list)
    duplicated: dict[str, set[str]] = field(default_factory=dict)  # body -> message ids

    @property
    def ok(self) -> bool:
        return not (self.lost or self.undone or self.out_of_order or self.duplicated)


def check(history: History, queued_at_end: set[str]) -> Verdict:
    """The checker: what `history` breaks of SQS's promises (module docstring)."""
    acked = {i: op.end for op in history.of("send") for i in op.ids}
    receives = history.of("receive")
    received = {i for op in receives for i in op.ids}
    lost = {i: at for i, at in acked.items() if i not in received and i not in queued_at_end}
    return Verdict(len(acked), lost, _undone_deletes(history, receives),
                   *_fifo(receives))


def _fifo(receives: list[Op]) -> tuple[list[tuple[str, int, int]], dict[str, set[str]]]:
    """Groups whose messages were first delivered out of their send order, and bodies
    delivered under more than one message id (a duplicate that deduplication let in)."""
    ids: dict[str, set[str]] = {}
    first: dict[str, list[int]] = {}  # group -> seqs in the order first delivered
    for op in sorted(receives, key=lambda op: op.end):  # a group's receives never overlap
        for message_id, body in zip(op.ids, op.bodies, strict=False):
            seen = ids.setdefault(body, set())
            if not seen:
                group, _, seq = body.rpartition(":")
                first.setdefault(group, []).append(int(seq))
            seen.add(message_id)
    out_of_order = [(group, a, b) for group, seqs in first.items()
                    for a, b in zip(seqs, seqs[1:], strict=False) if b < a]
    return out_of_order, {body: seen for body, seen in ids.items() if len(seen) > 1}


def _undone_deletes(history: History, receives: list[Op]) -> list[tuple[str, float, float]]:
    # The receive that handed out a delete's receipt is the latest one answered with the
    # message before the delete was invoked: the consumers delete what they just received.
    got: dict[str, list[Op]] = {}
    for op in sorted(receives, key=lambda op: op.end):
        for i in op.ids:
            got.setdefault(i, []).append(op)
    undone = []
    for delete in history.of("delete"):
        for i in delete.ids:
            handed = [r for r in got.get(i, []) if r.end <= delete.start]
            if not handed or delete.end > handed[-1].start + history.visibility_timeout_s:
                continue  # a stale receipt: the visibility rules allow another delivery
            again = [r.end for r in got[i] if r.start > delete.end]
            if again:
                undone.append((i, delete.end, again[0]))
    return undone
