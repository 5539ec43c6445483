"""CPU time and memory of a server process, read from /proc (Linux only).

A server's CPU is its own utime+stime plus that of its descendants: the ones
still alive (read one by one) and the ones already reaped (cutime+cstime of the
process that waited for them). Threads are included in a process's own figures.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
PROC = Path("/proc")


@dataclass(frozen=True)
class Stat:
    """The fields of /proc/<pid>/stat that the benchmark needs."""

    pid: int
    ppid: int
    utime_s: float
    stime_s: float
    cutime_s: float
    cstime_s: float

    @property
    def own_cpu_s(self) -> float:
        return self.utime_s + self.stime_s

    @property
    def reaped_children_cpu_s(self) -> float:
        return self.cutime_s + self.cstime_s


def read_stat(pid: int) -> Stat | None:
    """Parse /proc/<pid>/stat; None when the process is gone."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name sits in parentheses and may itself contain spaces or ")".
    fields = raw[raw.rindex(")") + 2 :].split()
    ticks = [int(v) / CLOCK_TICKS_PER_S for v in fields[11:15]]
    return Stat(pid, int(fields[1]), *ticks)


def _all_parents() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            stat = read_stat(int(entry.name))
            if stat is not None:
                parents[stat.pid] = stat.ppid
    return parents


def descendants(pid: int) -> list[int]:
    """Every live process below pid (children, grandchildren, ...)."""
    parents = _all_parents()
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        children = [child for child, parent in parents.items() if parent == current]
        found.extend(children)
        frontier.extend(children)
    return found


def tree_times(pid: int) -> tuple[float, float]:
    """User and system CPU seconds used so far by pid and everything it started."""
    user = system = 0.0
    for member in [pid, *descendants(pid)]:
        stat = read_stat(member)
        if stat is not None:
            user += stat.utime_s + stat.cutime_s
            system += stat.stime_s + stat.cstime_s
    return user, system


def tree_cpu_s(pid: int) -> float:
    """CPU seconds used so far by pid and everything it started."""
    return sum(tree_times(pid))


def tree_rss_mib(pid: int) -> float:
    """Resident memory of pid and its live descendants, in MiB."""
    total_kib = 0
    for member in [pid, *descendants(pid)]:
        try:
            status = (PROC / str(member) / "status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total_kib += int(line.split()[1])
    return total_kib / 1024


def machine_busy_s() -> float:
    """CPU seconds all cores have spent busy since boot (user, nice, system, irq, softirq)."""
    fields = (PROC / "stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[:7])
    return (user + nice + system + irq + softirq) / CLOCK_TICKS_PER_S
