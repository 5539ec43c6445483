"""What the leader keeps in its lease's Data, and which runs are due.

    {"v": 1,
     "last":    {"<task>": <epoch ms>},          # newest scheduled time claimed (or skipped)
     "pending": [["<task>", "<url>", <ms>], ...]} # claimed, send not yet confirmed

A run is identified by (task name, scheduled time). It is *claimed* by writing it into
`pending` (and moving `last` past it) in a conditional write of the lease; only then is it
sent; once SendMessage succeeded a second conditional write removes it from `pending`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import orjson

from conveyor.cron.cronfile import Task

log = logging.getLogger(__name__)

_FORMAT = 1
# Counting skipped runs stops here (a task every minute, down for weeks).
_SKIP_COUNT_CAP = 10_000


@dataclass(frozen=True, slots=True, order=True)
class Run:
    """One scheduled run of one task."""

    at_ms: int  # the scheduled time, epoch milliseconds (a whole minute)
    task: str
    url: str = field(compare=False)

    @property
    def at(self) -> datetime:
        """The scheduled time as an aware UTC datetime."""
        return datetime.fromtimestamp(self.at_ms / 1000, UTC)


@dataclass(frozen=True, slots=True)
class Due:
    """What one look at the schedule found: runs to claim, and runs too late to enqueue."""

    runs: tuple[Run, ...] = ()
    skipped: dict[str, int] = field(default_factory=dict)  # task → runs older than the grace


@dataclass(frozen=True, slots=True)
class LeaderState:
    """The leader's durable memory, carried in the lease from leader to leader."""

    last: dict[str, int] = field(default_factory=dict)
    pending: tuple[Run, ...] = ()

    # -- wire -----------------------------------------------------------------

    def encode(self) -> str:
        """The lease Data text."""
        return orjson.dumps({
            "v": _FORMAT, "last": self.last,
            "pending": [[run.task, run.url, run.at_ms] for run in self.pending],
        }).decode()

    @classmethod
    def decode(cls, data: str) -> LeaderState:
        """Read lease Data; empty, foreign or damaged data starts afresh (logged)."""
        if not data:
            return cls()
        try:
            raw = orjson.loads(data)
            last = {str(k): int(v) for k, v in raw["last"].items()}
            pending = tuple(Run(int(at), str(task), str(url)) for task, url, at in raw["pending"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            log.warning("cron lease data unreadable, starting afresh: %.200s", data)
            return cls()
        return cls(last, pending)

    # -- transitions ----------------------------------------------------------

    def adopt(self, tasks: Iterable[Task], now_ms: int) -> LeaderState:
        """Follow the task list: a new task starts from now (no back-fill), a removed one is
        forgotten (its pending runs are still sent)."""
        names = {task.name for task in tasks}
        last = {name: at for name, at in self.last.items() if name in names}
        for name in names - last.keys():
            last[name] = now_ms
        return self if last == self.last else replace(self, last=last)

    def claim(self, due: Due, now_ms: int, grace_ms: int) -> LeaderState:
        """Write-ahead: move `last` past the due runs (and skipped ones) and mark the due
        runs pending. Must be persisted by a conditional write before any is sent."""
        last = dict(self.last)
        for run in due.runs:
            last[run.task] = max(last.get(run.task, 0), run.at_ms)
        for task in due.skipped:
            last[task] = max(last.get(task, 0), now_ms - grace_ms)
        return LeaderState(last, tuple(sorted({*self.pending, *due.runs})))

    def confirm(self, sent: Iterable[Run]) -> LeaderState:
        """Forget the runs whose send succeeded."""
        done = set(sent)
        return replace(self, pending=tuple(run for run in self.pending if run not in done))


def due_runs(tasks: Sequence[Task], state: LeaderState, now_ms: int, grace_ms: int) -> Due:
    """Runs with last < t <= now, split into those within the grace period (due) and
    those older (skipped). Tasks without a `last` yet have nothing due."""
    runs: list[Run] = []
    skipped: dict[str, int] = {}
    now = _dt(now_ms)
    floor = _dt(now_ms - grace_ms)
    for task in tasks:
        last_ms = state.last.get(task.name)
        if last_ms is None:
            continue
        start = _dt(last_ms)
        if start < floor:
            count = _count(task, start, floor)
            if count:
                skipped[task.name] = count
            start = _dt(now_ms - grace_ms - 1)  # a run exactly at the floor is still due
        for at in task.schedule.runs_between(start, now):
            runs.append(Run(_ms(at), task.name, task.url))
    return Due(tuple(sorted(runs)), skipped)


def _count(task: Task, after: datetime, until: datetime) -> int:
    """Runs in (after, until), capped."""
    count = 0
    for at in task.schedule.runs_between(after, until):
        if at >= until or count >= _SKIP_COUNT_CAP:
            break
        count += 1
    return count


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)
