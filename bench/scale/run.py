"""The autoscaling figures in BENCHMARKS.md: every bundled trace against every policy, the
plots, and a sweep of the backlog policy's one tuning knob (latency share).

    .venv/bin/python bench/scale/run.py          # about a minute; needs the `sim` extra
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conveyor.scale.sim.compare import POLICIES, Tuning, compare
from conveyor.scale.sim.plot import plot
from conveyor.scale.sim.report import markdown, rows
from conveyor.scale.sim.traces import BUILTIN

HERE = Path(__file__).parent
SEEDS = (1, 2, 3)
SHARES = (0.25, 0.5, 0.75, 1.0)


def main() -> None:
    """Write results.json, results.md and <trace>.png beside this file."""
    (HERE / "traces").mkdir(exist_ok=True)
    figures: dict[str, list] = {"main": [], "seeds": [], "sweep": []}
    for trace in BUILTIN.values():
        (HERE / "traces" / f"{trace.name}.json").write_text(
            json.dumps(trace.to_json(), indent=1) + "\n")
        results = compare(trace, SEEDS[0], POLICIES)
        figures["main"] += rows(results, trace)
        plot(trace, results, HERE / f"{trace.name}.png")
        for seed in SEEDS[1:]:
            figures["seeds"] += [dict(r, seed=seed) for r in rows(compare(trace, seed), trace)]
        for share in SHARES:
            tuned = compare(trace, SEEDS[0], ("backlog", "static"), Tuning(latency_share=share))
            row = rows(tuned, trace)[0]
            figures["sweep"].append(dict(row, latency_share=share))
        print(f"{trace.name}: done", file=sys.stderr)
    (HERE / "results.json").write_text(json.dumps(figures, indent=1) + "\n")
    sweep = [dict(r, policy=f"backlog @ {r['latency_share']:g}") for r in figures["sweep"]]
    seeds = [dict(r, trace=f"{r['trace']} (seed {r['seed']})") for r in figures["seeds"]]
    text = ("## main (seed 1)\n\n" + markdown(figures["main"]) + "\n\n## other seeds\n\n"
            + markdown(seeds) + "\n\n## latency share sweep\n\n" + markdown(sweep) + "\n")
    (HERE / "results.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
