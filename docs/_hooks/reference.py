"""MkDocs hook: the reference pages' tables, generated from the code at build time.

A page asks for a table with a marker on a line of its own:

- `<!-- generated: cli -->`: every `conveyor` command, its arguments and options, walked
  from conveyor.cli.main's click tree (each option's text is click's own --help line);
- `<!-- generated: worker-options -->`: conveyor/worker/options.py's OPTIONS, the one table
  behind the worker's config file keys, flags and CONVEYOR_* variables;
- `<!-- generated: metrics -->`: every Prometheus metric the server, worker, cron and
  scaler register, read from their registries.

So the reference cannot drift from the code: a new option or metric appears at the next
build, and a marker that names nothing fails the build.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import click

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the checkout the docs are built from, not an installed copy

_MARKER = re.compile(r"^<!-- generated: (?P<what>[\w-]+) -->$", re.MULTILINE)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace each `<!-- generated: ... -->` marker with its table."""
    def generate(match: re.Match[str]) -> str:
        what = match["what"]
        if what not in GENERATORS:
            msg = f"{page.file.src_path}: no generator for <!-- generated: {what} -->"
            raise ValueError(msg)
        return GENERATORS[what]()
    return _MARKER.sub(generate, markdown)


def _cell(text: object) -> str:
    """Text for one table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


# --- the CLI -----------------------------------------------------------------------------

def cli_reference() -> str:
    """A section per command, in the order `conveyor --help` lists them."""
    from conveyor.cli import main

    out: list[str] = []
    _command(main, ["conveyor"], None, out)
    return "\n".join(out)


def _command(command: click.Command, path: list[str], parent: click.Context | None,
             out: list[str]) -> None:
    ctx = click.Context(command, info_name=path[-1], parent=parent)
    name = " ".join(path)
    out.append(f"{'#' * min(len(path) + 1, 4)} `{name}`\n")
    text = (command.help or "").replace("\b\n", "")
    if text:
        out.append(_help_text(text) + "\n")
    out.append(f"```text\n{command.get_usage(ctx)}\n```\n")
    # Arguments are in the usage line; the table has the options.
    rows = [param.get_help_record(ctx) for param in command.get_params(ctx)
            if not isinstance(param, click.Argument)]
    rows = [row for row in rows if row is not None]
    if rows:
        out.append("| option | what it does |\n| --- | --- |")
        out.extend(f"| `{_cell(opts)}` | {_cell(help_text)} |" for opts, help_text in rows)
        out.append("")
    if isinstance(command, click.Group):
        for sub in command.list_commands(ctx):
            child = command.get_command(ctx, sub)
            if child is not None and not child.hidden:
                _command(child, [*path, sub], ctx, out)


def _help_text(text: str) -> str:
    """A command's docstring as markdown: paragraphs kept, example lines as code."""
    paragraphs = [p.strip("\n") for p in text.strip().split("\n\n")]
    out = []
    for paragraph in paragraphs:
        lines = paragraph.splitlines()
        if any(line.lstrip().startswith("conveyor ") for line in lines):
            out.append("```text\n" + "\n".join(line.strip() for line in lines) + "\n```")
        else:
            out.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(out)


# --- the worker's options ----------------------------------------------------------------

def worker_options() -> str:
    """One table per family of options, as options.py groups them."""
    from conveyor.worker import options

    families = (
        ("Elastic Beanstalk's options (`aws:elasticbeanstalk:sqsd`), with its defaults and "
         "ranges", options.EB_OPTIONS),
        ("Conveyor's additions", options.CONVEYOR_OPTIONS),
        ("Partitioned queues", options.PARTITION_OPTIONS),
        ("Large payloads", options.PAYLOAD_OPTIONS),
        ("Periodic tasks (cron.yaml)", options.CRON_OPTIONS),
    )
    covered = sum(len(family) for _, family in families)
    if covered != len(options.OPTIONS):
        msg = "conveyor/worker/options.py has a family of options the reference does not show"
        raise ValueError(msg)
    out = []
    for title, family in families:
        out.append(f"### {title}\n")
        out.append("| config key | flag | environment | default | range | what it does |")
        out.append("| --- | --- | --- | --- | --- | --- |")
        for option in family:
            flag = (f"`{option.flag}` / `--no-{option.flag[2:]}`" if option.kind is bool
                    else f"`{option.flag}`")
            default = "(required)" if option.default is None else f"`{option.default!r}`"
            span = option.range_text() if option.low is not None else ""
            out.append(f"| `{option.name}` | {flag} | `{option.env}` | {_cell(default)} | "
                       f"{span} | {_cell(option.help)} |")
        out.append("")
    return "\n".join(out)


# --- metrics -----------------------------------------------------------------------------

def metrics_reference() -> str:
    """One table per process, each metric with its type, labels and help."""
    out = []
    for title, families in (("Queue server (`conveyor server`, `GET /metrics`)",
                             _server_metrics()),
                            ("Worker (`conveyor worker`, `--status-port`)", _worker_metrics()),
                            ("Periodic tasks (in the worker's registry)", _cron_metrics()),
                            ("Autoscaler (`conveyor scale run`, `--status-port`)",
                             _scale_metrics())):
        out.append(f"### {title}\n")
        out.append("| metric | type | labels | what it counts |\n| --- | --- | --- | --- |")
        for name, kind, labels, text in families:
            label_text = ", ".join(f"`{label}`" for label in labels)
            out.append(f"| `{name}` | {kind} | {label_text} | {_cell(text)} |")
        out.append("")
    return "\n".join(out)


Family = tuple[str, str, list[str], str]


def all_families() -> list[Family]:
    """Every metric of every part: (name, type, labels, help)."""
    return _server_metrics() + _worker_metrics() + _cron_metrics() + _scale_metrics()


def metric_names() -> set[str]:
    """Every metric name a scrape can show (counters with their `_total`, histograms with
    `_bucket`, `_sum`, `_count`); what deploy/monitoring's files may refer to."""
    names = set()
    for name, kind, _, _ in all_families():
        names.add(name)
        if kind == "histogram":
            names.update(f"{name}{suffix}" for suffix in ("_bucket", "_sum", "_count"))
    return names


def _families(registry: Any) -> list[Family]:
    found: dict[str, Family] = {}
    for metric in registry.collect():
        labels = sorted({key for sample in metric.samples for key in sample.labels} - {"le"})
        name = metric.name + ("_total" if metric.type == "counter" else "")
        found[name] = (name, metric.type, labels, metric.documentation)
    return sorted(found.values())


def _server_metrics() -> list[Family]:
    from conveyor.server.metrics import LIMIT_GAUGES, ServerMetrics
    from conveyor.service.activity import KINDS
    from conveyor.store.journal import JournaledStore

    # A store's figures without opening one (a real instance: compiled, its methods check it).
    journal = JournaledStore.__new__(JournaledStore)
    journal._held, journal._journal_bytes = 0, 0
    journal._checkpoints, journal._checkpoint_failures, journal._checkpoint_s = 0, 0, 0.0
    figures = (journal.gauges(), journal.counters())
    metrics = ServerMetrics(lambda: figures, lambda: [("us-east-1", "jobs", [1] * len(KINDS))],
                            lambda: [("us-east-1", "jobs", "receive_rate", 1)])
    metrics.set_limits([("us-east-1", "jobs", dict.fromkeys(LIMIT_GAUGES, 1))])
    metrics.requests.observe("SendMessage", "ok", 0.001)
    metrics.messages.labels("us-east-1", "jobs", "visible").set(0)
    metrics.announced("AnnounceWorker")
    return _families(metrics.registry)


def _worker_metrics() -> list[Family]:
    from conveyor.worker.metrics import WorkerMetrics

    metrics = WorkerMetrics("jobs")
    _touch(metrics.registry)
    return _families(metrics.registry)


def _cron_metrics() -> list[Family]:
    from conveyor.cron.metrics import CronMetrics

    metrics = CronMetrics("jobs")
    _touch(metrics.registry)
    return _families(metrics.registry)


def _scale_metrics() -> list[Family]:
    from conveyor.scale.metrics import ScaleMetrics

    metrics = ScaleMetrics("jobs")
    _touch(metrics.registry)
    return _families(metrics.registry)


def _touch(registry: Any) -> None:
    """Give each labelled metric one child, so its labels show in the samples."""
    for collector in list(registry._collector_to_names):  # noqa: SLF001 - no public walk
        names = getattr(collector, "_labelnames", ())
        if names:
            collector.labels(*["x"] * len(names))


# --- SQS actions -------------------------------------------------------------------------

def sqs_actions() -> str:
    """Every action of botocore's SQS model, and whether the service answers it."""
    from conveyor.service import Service
    from conveyor.sqs.shapes import service_model

    model = service_model()
    out = ["| action | Conveyor | what it does (the API reference's summary) |",
           "| --- | --- | --- |"]
    for name in sorted(model.operation_names):
        # ReceiveMessage is answered by the server itself (it may park a long poll).
        answered = name == "ReceiveMessage" or hasattr(Service, _snake(name))
        summary = _first_sentence(model.operation_model(name).documentation)
        out.append(f"| `{name}` | {'yes' if answered else '**no**'} | {_cell(summary)} |")
    return "\n".join(out) + "\n"


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _first_sentence(html: str) -> str:
    text = " ".join(re.sub(r"<[^>]+>", " ", html or "").split())
    match = re.match(r"(.+?\.)(\s|$)", text)
    return match[1] if match else text


GENERATORS = {"cli": cli_reference, "worker-options": worker_options,
              "metrics": metrics_reference, "sqs-actions": sqs_actions}
