"""`conveyor scale simulate`: replay traces against the policies, print, plot, save."""

from __future__ import annotations

import json
from pathlib import Path

import click

from conveyor.scale.sim.compare import POLICIES, Tuning, compare
from conveyor.scale.sim.report import markdown, rows, text
from conveyor.scale.sim.traces import BUILTIN, resolve

_DEFAULTS = Tuning()


@click.command("simulate")
@click.option("--trace", "traces", multiple=True, metavar="NAME|FILE",
              help=f"Bundled ({', '.join(BUILTIN)}) or a JSON trace; repeatable. Default: all.")
@click.option("--policy", "policies", multiple=True, type=click.Choice(POLICIES),
              help="Policies to compare; repeatable. Default: all.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--latency-share", type=float, default=_DEFAULTS.latency_share, show_default=True,
              help="Backlog policy: acceptable latency = the trace's goal × this.")
@click.option("--interval", "interval_s", type=float, default=_DEFAULTS.interval_s,
              show_default=True, help="Seconds between decisions.")
@click.option("--plot-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write <trace>.png here (needs matplotlib: the `sim` extra).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write every figure as JSON.")
@click.option("--markdown", "as_markdown", is_flag=True, help="Print a Markdown table.")
@click.option("--dump-traces", type=click.Path(file_okay=False, path_type=Path),
              help="Write the bundled traces as JSON files here and exit.")
def simulate_command(traces: tuple[str, ...], policies: tuple[str, ...], seed: int,
                     latency_share: float, interval_s: float, plot_dir: Path | None,
                     json_path: Path | None, as_markdown: bool,
                     dump_traces: Path | None) -> None:
    """Replay workload traces against the backlog, CPU and static policies.

    Reports per policy: p50/p95/p99 queue latency, share of time the oldest message was
    over the trace's latency goal, worker-seconds, scaling actions. Same seed, same answer.
    """
    if dump_traces is not None:
        dump_traces.mkdir(parents=True, exist_ok=True)
        for trace in BUILTIN.values():
            (dump_traces / f"{trace.name}.json").write_text(
                json.dumps(trace.to_json(), indent=1) + "\n")
        click.echo(f"wrote {len(BUILTIN)} traces to {dump_traces}")
        return
    tuning = Tuning(latency_share=latency_share, interval_s=interval_s)
    all_rows = []
    for spec in traces or tuple(BUILTIN):
        try:
            trace = resolve(spec)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--trace") from None
        results = compare(trace, seed, policies or POLICIES, tuning)
        all_rows += rows(results, trace)
        if plot_dir is not None:
            from conveyor.scale.sim.plot import plot

            try:
                path = plot(trace, results, plot_dir / f"{trace.name}.png")
            except RuntimeError as exc:
                raise click.ClickException(str(exc)) from None
            click.echo(f"plot: {path}", err=True)
    click.echo(markdown(all_rows) if as_markdown else text(all_rows))
    if json_path is not None:
        json_path.write_text(json.dumps(all_rows, indent=1) + "\n")
