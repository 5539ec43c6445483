"""Turn a run's results into tables (markdown, which reads fine in a terminal too)."""

from __future__ import annotations

from typing import Any

SUBJECT = "conveyor"
# Each gets its row of ratios to every peer: the pure-Python package and the compiled build.
SUBJECTS = (SUBJECT, "conveyor-compiled")
# Measured beside the peers, never counted as one in the targets (bench/peers/floor.py).
YARDSTICKS = {"python-floor"}

# Issue 36's targets for the queue server on the 2-core machine, durable store: messages
# per server CPU-second as ratios to peers measured in the same run (absolute figures move
# 2.5x with the VM), for each build.
CPU_RATIO_TARGETS = (("fauxqs", 1.2), ("python-floor", 0.6))
PICKUP_P50_MS = 5.0

PIPELINE_COLUMNS = [
    ("msgs/s", "messages_per_s"),
    ("p50 ms", "latency_p50_ms"),
    ("p99 ms", "latency_p99_ms"),
    ("server CPU s", "server_cpu_s"),
    ("msgs / server CPU-s", "messages_per_server_cpu_s"),
    ("server system share", "server_system_share"),
    ("client CPU s", "client_cpu_s"),
    ("other CPU s", "other_cpu_s"),
    ("msgs", "messages_received"),
    ("errors", "errors"),
]
LONGPOLL_COLUMNS = [
    ("pick-up p50 ms", "pickup_p50_ms"),
    ("pick-up p99 ms", "pickup_p99_ms"),
    ("after ack p50 ms", "after_ack_p50_ms"),
    ("after ack p99 ms", "after_ack_p99_ms"),
    ("samples", "samples"),
    ("missed", "missed"),
]
TITLES = {
    "batched": "Batched pipeline (SendMessageBatch 10 x 256 B, Receive 10 long-poll, "
               "DeleteMessageBatch)",
    "unbatched": "Unbatched pipeline (SendMessage, Receive 1 long-poll, DeleteMessage)",
    "longpoll": "Long-poll pick-up (receiver parked on an empty queue, one message sent)",
}


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def scenario_table(scenario: str, servers: dict[str, Any]) -> list[str]:
    columns = LONGPOLL_COLUMNS if scenario == "longpoll" else PIPELINE_COLUMNS
    rows = []
    for name, info in servers.items():
        result = info["scenarios"].get(scenario)
        if result is None:
            continue
        cells = [result.get("error", "")] if "error" in result else [
            _fmt(result.get(key)) for _, key in columns]
        version = "" if info["version"] in ("", "-") else f" {info['version']}"
        rows.append([f"{name}{version}", info["storage"], *cells])
    return _table(["server", "store", *[title for title, _ in columns]], rows)


def _ratio(subject: float | None, peer: float | None, lower_is_better: bool = False) -> str:
    if not subject or not peer:
        return "n/a"
    ratio = peer / subject if lower_is_better else subject / peer
    return f"{ratio:.2f}x"


def ratio_table(results: dict[str, Any]) -> list[str]:
    """Conveyor's figures divided by each peer's (above 1 means Conveyor is better), for
    each build measured."""
    servers = results["servers"]
    metrics = [
        ("batched msgs/s", "batched", "messages_per_s", False),
        ("batched msgs/CPU-s", "batched", "messages_per_server_cpu_s", False),
        ("unbatched msgs/s", "unbatched", "messages_per_s", False),
        ("unbatched msgs/CPU-s", "unbatched", "messages_per_server_cpu_s", False),
        ("pick-up p50 (speed)", "longpoll", "pickup_p50_ms", True),
    ]
    rows = []
    for subject in (s for s in SUBJECTS if s in servers):
        mine = servers[subject]["scenarios"]
        for peer, info in servers.items():
            if peer in SUBJECTS:
                continue
            cells = []
            for _, scenario, key, lower in metrics:
                theirs = info["scenarios"].get(scenario) or {}
                cells.append(_ratio((mine.get(scenario) or {}).get(key), theirs.get(key),
                                    lower))
            rows.append([f"{subject} vs {peer}", *cells])
    if not rows:
        return []
    return _table(["Conveyor ÷ peer", *[title for title, *_ in metrics]], rows)


def _get(results: dict[str, Any], server: str, scenario: str, key: str) -> Any:
    info = results["servers"].get(server) or {}
    return (info.get("scenarios", {}).get(scenario) or {}).get(key)


def targets(results: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """The issue's targets, for each build measured: (what, measured, met?); met is None
    when not measured."""
    peers = [name for name in results["servers"]
             if name not in SUBJECTS and name not in YARDSTICKS]
    peer_rates = [(_get(results, p, "batched", "messages_per_s"), p) for p in peers]
    fastest_peer = max(((r, p) for r, p in peer_rates if r), default=(None, None))
    rows: list[tuple[str, str, bool | None]] = []
    for subject in (s for s in SUBJECTS if s in results["servers"]):
        for scenario in ("batched", "unbatched"):
            mine = _get(results, subject, scenario, "messages_per_server_cpu_s")
            for peer, wanted in CPU_RATIO_TARGETS:
                theirs = _get(results, peer, scenario, "messages_per_server_cpu_s")
                ratio = mine / theirs if mine and theirs else None
                rows.append((f"{subject}: {scenario} msgs per server CPU-second >= "
                             f"{wanted:g}x {peer}'s", "n/a" if ratio is None else f"{ratio:.2f}x",
                             None if ratio is None else ratio >= wanted))
        rate = _get(results, subject, "batched", "messages_per_s")
        rows.append((f"{subject}: batched end-to-end msgs/s >= fastest peer "
                     f"({fastest_peer[1]}: {_fmt(fastest_peer[0])})", _fmt(rate),
                     None if rate is None or fastest_peer[0] is None
                     else rate >= fastest_peer[0]))
        pickup = _get(results, subject, "longpoll", "pickup_p50_ms")
        rows.append((f"{subject}: long-poll pick-up p50 < {PICKUP_P50_MS:g} ms", _fmt(pickup),
                     None if pickup is None else pickup < PICKUP_P50_MS))
    return rows


def targets_table(results: dict[str, Any]) -> list[str]:
    if SUBJECT not in results["servers"]:
        return []
    marks = {True: "met", False: "NOT met", None: "not measured"}
    rows = [[what, value, marks[met]] for what, value, met in targets(results)]
    return _table(["target (issue 36)", "measured", "status"], rows)


def markdown(results: dict[str, Any]) -> str:
    """The whole report: settings, one table per scenario, ratios and targets."""
    machine, params = results["machine"], results["params"]
    lines = [
        f"Command: `{results['command']}`",
        "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB; "
        f"{machine['os']}; Python {machine['python']}; Node {machine.get('node', 'n/a')}; "
        f"load average {machine['loadavg_before']} before, {machine['loadavg_after']} after.",
        "",
        f"Settings: {params['clients']} producer + {params['clients']} consumer processes "
        f"({'one shared queue' if params['shared_queue'] else 'a queue per pair'}), "
        f"{params['duration_s']:g} s per pipeline, backlog cap {params['backlog_batched']} "
        f"(batched) / {params['backlog_unbatched']} (unbatched) messages per queue, "
        f"{params['samples']} pick-up samples; {params['warmup_s']:g} s of unrecorded "
        "load (half batched, half unbatched) per server first"
        + (f"; median of {params['rounds']} interleaved rounds." if params.get("rounds", 1) > 1
           else "."),
    ]
    for name, reason in results.get("unavailable", {}).items():
        lines += ["", f"Not measured: {name} ({reason})."]
    for scenario in results["scenarios"]:
        lines += ["", f"**{TITLES[scenario]}**", ""]
        lines += scenario_table(scenario, results["servers"])
    for extra in (ratio_table(results), targets_table(results)):
        if extra:
            lines += ["", *extra]
    return "\n".join(lines) + "\n"
