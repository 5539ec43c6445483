"""Instructions and cycles per message of the Conveyor server under load, by `perf stat`.

    .venv/bin/python bench/perfstat.py [--src OTHER_CHECKOUT] [--pairs 2] [--scenarios batched]

Starts a fresh server from each source tree in turn (this checkout, and `--src` trees such
as a `git worktree` of an older commit), drives it with `sqs_load`'s pipelines and counts,
with `perf stat` on the server's PID only, user and kernel instructions and cycles. Per
message, instruction counts repeat within about 0.5 % from run to run and cycle counts
within 10-20 %, where messages per server CPU-second (run.py) move by 25 % on a shared
VM: use this to tell whether a small change pays under real load. Needs Linux `perf`
with access to the hardware counters (as root, or with kernel.perf_event_paranoid <= 1).
"""

from __future__ import annotations

import argparse
import csv
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import peers
from sqs_load import LoadSettings, run_scenario

EVENTS = ("instructions:u", "instructions:k", "cycles:u", "cycles:k")


def measure(src: Path, scenario: str, settings: LoadSettings) -> dict[str, float]:
    """One fresh server from `src` under one scenario: the counts per message moved."""
    work = Path(tempfile.mkdtemp(prefix="conveyor-perfstat-"))
    out = work / "perf.csv"
    server = peers.start("conveyor", work, src=src)
    perf = None
    try:
        perf = subprocess.Popen(["perf", "stat", "-x,", "-e", ",".join(EVENTS), "-p",
                                 str(server.pid), "-o", str(out)], stderr=subprocess.DEVNULL)
        time.sleep(0.2)  # perf attaches before the load starts
        result = run_scenario(scenario, server.endpoint, settings, server.cpu_s)
    finally:
        if perf is not None:
            perf.send_signal(signal.SIGINT)
            perf.wait(10)
        server.stop()
    counts = _read_counts(out)
    shutil.rmtree(work, ignore_errors=True)
    moved = result["messages_received"]
    return {event: counts.get(event, float("nan")) / max(moved, 1) for event in EVENTS}


def _read_counts(path: Path) -> dict[str, float]:
    counts = {}
    for row in csv.reader(path.read_text().splitlines()):
        if len(row) > 2 and row[0] and row[0][0].isdigit():
            counts[row[2]] = float(row[0])
    return counts


def _counters_supported() -> bool:
    probe = subprocess.run(["perf", "stat", "-x,", "-e", "instructions:u", "true"],
                           capture_output=True, text=True)
    return probe.returncode == 0 and "<not supported>" not in probe.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, action="append", default=[],
                        help="another source tree to compare, alternated with this one")
    parser.add_argument("--pairs", type=int, default=2, help="runs of each tree (default 2)")
    parser.add_argument("--scenarios", nargs="+", choices=("batched", "unbatched"),
                        default=["batched", "unbatched"])
    parser.add_argument("--duration", type=float, default=5.0,
                        help="seconds of sending per run (default %(default)s)")
    args = parser.parse_args()
    if shutil.which("perf") is None:
        raise SystemExit("perf is not installed (Debian: apt install linux-perf)")
    if not _counters_supported():
        raise SystemExit("perf cannot read the hardware counters here (a VM that does not "
                         "expose them?); `perf stat -e instructions:u true` shows why")
    trees = [*args.src, peers.REPO_DIR]
    settings = LoadSettings(duration_s=args.duration)
    print("tree scenario " + " ".join(f"{e}/msg" for e in EVENTS), flush=True)
    for _ in range(args.pairs):
        for scenario in args.scenarios:
            for tree in trees:
                per_message = measure(tree.resolve(), scenario, settings)
                print(f"{tree} {scenario} "
                      + " ".join(f"{per_message[e]:,.0f}" for e in EVENTS), flush=True)


if __name__ == "__main__":
    main()
