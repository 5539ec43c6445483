"""Profile a server under load: py-spy for Python functions, perf for CPU by library.

py-spy (pip install -e '.[bench]') records collapsed stacks ("frame;frame;frame N")
that this module folds into the functions with the most samples: on top of the
stack (self), anywhere on it (inclusive, leaving out the trunk that every sample
shares) and self time by file. perf, where installed, adds the CPU split by shared
object and symbol.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Profile:
    """Top functions by share of the total (py-spy samples or yappi CPU seconds)."""

    tool: str
    total: float
    unit: str
    top_self: list[tuple[str, float]]
    top_inclusive: list[tuple[str, float]]
    self_by_file: list[tuple[str, float]]
    source: str

    def lines(self) -> list[str]:
        out = [f"{self.tool}: {self.total:g} {self.unit}, raw data in {self.source}",
               "top functions, self:"]
        out += [f"  {share:5.1f}%  {frame}" for frame, share in self.top_self]
        out.append(f"top functions, inclusive (frames above {TRUNK_SHARE:g}% left out):")
        out += [f"  {share:5.1f}%  {frame}" for frame, share in self.top_inclusive]
        out.append("self by file:")
        out += [f"  {share:5.1f}%  {path}" for path, share in self.self_by_file]
        return out


def _ranked(counter: Counter[str], total: float, top: int,
            limit: float = 100.0) -> list[tuple[str, float]]:
    shares = [(f, round(100 * n / total, 1)) for f, n in counter.most_common()] if total else []
    return [(f, share) for f, share in shares if share <= limit][:top]


def py_spy() -> str | None:
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


def start_recording(pid: int, seconds: float, raw_path: Path) -> subprocess.Popen[bytes]:
    """Start py-spy on pid for `seconds`; wait on the returned process, then fold()."""
    exe = py_spy()
    if exe is None:
        raise FileNotFoundError("py-spy is not installed: pip install -e '.[bench]'")
    cmd = [exe, "record", "--pid", str(pid), "--duration", str(max(1, round(seconds))),
           "--rate", "250", "--format", "raw", "--subprocesses", "--nonblocking",
           "--output", str(raw_path)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _short(frame: str) -> str:
    # "func (path/to/module.py:123)" -> "func (module.py:123)"
    name, _, where = frame.partition(" (")
    return f"{name} ({Path(where.rstrip(')')).name})" if where else name


REPO_PREFIX = str(Path(__file__).resolve().parent.parent) + "/"
_LIB_PREFIX = re.compile(r"^.*/(site-packages|dist-packages|lib/python3\.\d+)/")


def _file_of(frame: str) -> str:
    """The file of a "func (path:line)" frame, without the install prefix."""
    _, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    if _LIB_PREFIX.match(path):
        return _LIB_PREFIX.sub("", path)
    return path.removeprefix(REPO_PREFIX) or frame


TRUNK_SHARE = 90.0  # inclusive frames in more samples than this are the common trunk


def fold(raw_path: Path, top: int = 15) -> Profile:
    """Read py-spy's collapsed stacks and rank the functions."""
    self_counts: Counter[str] = Counter()
    by_file: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw_path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        full = [f for f in stack.split(";") if not f.startswith("process ")]
        if not full:
            continue
        frames = [_short(f) for f in full]
        total += count
        self_counts[frames[-1]] += count
        by_file[_file_of(full[-1])] += count
        for frame in set(frames):
            inclusive[frame] += count
    return Profile("py-spy", total, "samples", _ranked(self_counts, total, top),
                   _ranked(inclusive, total, top, TRUNK_SHARE), _ranked(by_file, total, top),
                   str(raw_path))


# --- yappi: Python functions by CPU time ---------------------------------------------------
# bench/yappi_boot/sitecustomize.py runs inside a separately started server; SIGUSR1 starts
# yappi on the CPU clock, SIGUSR2 writes every function's self and total CPU seconds.

YAPPI_BOOT = Path(__file__).resolve().parent / "yappi_boot"


def yappi_env(out_path: Path) -> dict[str, str]:
    """Environment additions that arm the yappi hooks in a Python server."""
    return {"PYTHONPATH": str(YAPPI_BOOT), "BENCH_YAPPI_OUT": str(out_path)}


def fold_yappi(json_path: Path, top: int = 20) -> Profile:
    """Rank the functions of a yappi dump by CPU seconds."""
    self_s: Counter[str] = Counter()
    total_s: Counter[str] = Counter()
    by_file: Counter[str] = Counter()
    for row in json.loads(json_path.read_text()):
        module = row["module"]
        where = f"{row['name']} ({Path(module).name}:{row['line']})" if module else row["name"]
        self_s[where] += row["self_s"]
        total_s[where] = max(total_s[where], row["total_s"])
        by_file[_file_of(f"x ({module}:0)") if module else "builtins"] += row["self_s"]
    total = sum(self_s.values())
    return Profile("yappi (CPU clock)", round(total, 3), "CPU s", _ranked(self_s, total, top),
                   _ranked(total_s, total, top, TRUNK_SHARE), _ranked(by_file, total, top),
                   str(json_path))


# --- perf: where the CPU time really goes --------------------------------------------------
# py-spy samples wall-clock time of a running (or runnable) thread, so on a busy 2-core
# machine a server preempted right after waking a client (e.g. in a socket write) gets
# samples it did not spend on the CPU. perf's cpu-clock samples only on-CPU time: its
# split by shared object (interpreter, SQLite, kernel, libc, ...) is the CPU-accurate view.


def start_perf(pid: int, seconds: float, data_path: Path) -> subprocess.Popen[bytes] | None:
    """Start `perf record` on pid for `seconds`; None when perf is not installed."""
    exe = shutil.which("perf")
    if exe is None:
        return None
    cmd = [exe, "record", "-F", "499", "-p", str(pid), "-o", str(data_path), "--",
           "sleep", str(max(1, round(seconds)))]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def perf_split(data_path: Path, sort: str = "dso", top: int = 12) -> list[tuple[str, float]]:
    """perf report's top entries by `sort` (dso or sym) as (name, percent)."""
    out = subprocess.run(["perf", "report", "-i", str(data_path), "--no-children", "--sort",
                          sort, "--stdio", "-g", "none"],
                         capture_output=True, text=True, check=False).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0].endswith("%"):
            rows.append((" ".join(parts[1].split()), float(parts[0].rstrip("%"))))
    return rows[:top]
