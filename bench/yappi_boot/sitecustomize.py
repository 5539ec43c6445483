"""CPU-clock profiling of a Python server, switched on from outside (bench/run.py --profile).

Python imports this module at start-up when bench/yappi_boot is on PYTHONPATH. With
BENCH_YAPPI_OUT set, SIGUSR1 starts yappi on the CPU clock (so time spent preempted or
waiting is not counted) and SIGUSR2 stops it and writes every function's figures as
JSON to that path. Without the variable it does nothing.
"""

from __future__ import annotations

import json
import os
import signal
from types import FrameType

OUT_PATH = os.environ.get("BENCH_YAPPI_OUT")


def _start(_signum: int, _frame: FrameType | None) -> None:
    import yappi

    yappi.set_clock_type("cpu")
    yappi.clear_stats()
    yappi.start(builtins=True)


def _dump(_signum: int, _frame: FrameType | None) -> None:
    import yappi

    yappi.stop()
    rows = [{"name": f.name, "module": f.module, "line": f.lineno, "calls": f.ncall,
             "self_s": f.tsub, "total_s": f.ttot} for f in yappi.get_func_stats()]
    tmp = f"{OUT_PATH}.tmp"
    with open(tmp, "w") as out:
        json.dump(rows, out)
    os.replace(tmp, OUT_PATH)


if OUT_PATH:
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _dump)
