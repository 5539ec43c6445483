"""Tables of simulation results: text for the terminal, Markdown for BENCHMARKS.md, JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conveyor.scale.sim.engine import SimResult
from conveyor.scale.sim.traces import Trace

_HEADER = ("trace", "policy", "p50 s", "p95 s", "p99 s", "over goal", "worker-s",
           "vs static", "actions", "goal held")


def summary(result: SimResult, trace: Trace, static_ws: float | None) -> dict[str, Any]:
    """The figures the issue asks for, for one result."""
    p99 = result.percentile(0.99)
    return {"trace": result.trace, "policy": result.policy,
            "p50_s": round(result.percentile(0.50), 2), "p95_s": round(result.percentile(0.95), 2),
            "p99_s": round(p99, 2), "share_over_goal": round(result.share_over_goal, 5),
            "worker_seconds": round(result.worker_seconds),
            "vs_static": round(result.worker_seconds / static_ws, 3) if static_ws else None,
            "actions": result.actions, "messages": len(result.latencies_s),
            "unfinished": result.unfinished, "latency_goal_s": trace.latency_goal_s,
            "goal_held": p99 <= trace.latency_goal_s}


def rows(results: Sequence[SimResult], trace: Trace) -> list[dict[str, Any]]:
    """One summary per result; worker-seconds also as a share of the static fleet's."""
    static_ws = next((r.worker_seconds for r in results if r.policy == "static"), None)
    return [summary(r, trace, static_ws) for r in results]


def _cells(row: dict[str, Any]) -> list[str]:
    vs = "" if row["vs_static"] is None else f"{row['vs_static'] * 100:.0f} %"
    return [row["trace"], row["policy"], f"{row['p50_s']:.1f}", f"{row['p95_s']:.1f}",
            f"{row['p99_s']:.1f}", f"{row['share_over_goal'] * 100:.2f} %",
            f"{row['worker_seconds']:,}", vs, str(row["actions"]),
            "yes" if row["goal_held"] else "no"]


def markdown(all_rows: Sequence[dict[str, Any]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(_HEADER) + " |", "|" + "---|" * len(_HEADER)]
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in all_rows]
    return "\n".join(lines)


def text(all_rows: Sequence[dict[str, Any]]) -> str:
    """An aligned plain-text table."""
    table = [list(_HEADER)] + [_cells(row) for row in all_rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(_HEADER))]
    return "\n".join("  ".join(cell.rjust(w) if i > 1 else cell.ljust(w)
                               for i, (cell, w) in enumerate(zip(r, widths, strict=True)))
                     for r in table)
