"""Latency and fleet size over time, one PNG per trace (needs the `sim` extra: matplotlib)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from conveyor.scale.sim.engine import SimResult
from conveyor.scale.sim.traces import Trace

_COLOURS = {"backlog": "tab:blue", "cpu": "tab:orange", "static": "tab:gray"}


def plot(trace: Trace, results: Sequence[SimResult], path: Path) -> Path:
    """Oldest message's age (against the goal) and fleet size over time, per policy."""
    try:
        import matplotlib
    except ImportError as exc:
        msg = "plots need matplotlib: pip install 'conveyor-sqs[sim]'"
        raise RuntimeError(msg) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hours = trace.duration_s > 4 * 3600
    scale, unit = (3600.0, "h") if hours else (60.0, "min")
    fig, (age_ax, fleet_ax, rate_ax) = plt.subplots(
        3, 1, figsize=(10, 7.5), sharex=True, gridspec_kw={"height_ratios": [3, 3, 1.2]})
    for result in results:
        xs = [s.t_s / scale for s in result.samples]
        colour = _COLOURS.get(result.policy)
        age_ax.plot(xs, [s.oldest_age_s for s in result.samples], label=result.policy,
                    color=colour, linewidth=0.9)
        fleet_ax.step(xs, [s.fleet for s in result.samples], where="post", label=result.policy,
                      color=colour, linewidth=0.9)
    age_ax.axhline(trace.latency_goal_s, color="red", linestyle="--", linewidth=0.8,
                   label=f"goal {trace.latency_goal_s:g} s")
    age_ax.set_ylabel("oldest message age (s)")
    age_ax.set_yscale("symlog", linthresh=max(1.0, trace.latency_goal_s))
    age_ax.set_ylim(bottom=0)
    age_ax.legend(loc="upper right", fontsize=8)
    age_ax.set_title(f"{trace.name}: {trace.description}", fontsize=9)
    fleet_ax.set_ylabel("workers (running + starting)")
    fleet_ax.legend(loc="upper right", fontsize=8)
    times = [i * trace.duration_s / 2000 for i in range(2001)]
    rate_ax.step([t / scale for t in times], [trace.rate_at(t) for t in times], where="post",
                 color="black", linewidth=0.8)
    rate_ax.set_ylabel("msg/s")
    rate_ax.set_xlabel(f"time ({unit})")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
