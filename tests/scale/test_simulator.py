"""The simulator: deterministic for a seed, protection respected, the CLI end to end."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

from conveyor.cli import main
from conveyor.scale import protection
from conveyor.scale.policy import BacklogPolicy, BacklogSettings
from conveyor.scale.sim.compare import compare, static_size
from conveyor.scale.sim.engine import Simulation, arrivals
from conveyor.scale.sim.report import rows
from conveyor.scale.sim.traces import BUILTIN, Trace, load_trace

SHORT = Trace("short", 1200.0, ((0.0, 1.0), (300.0, 8.0), (420.0, 1.0), (900.0, 0.0)),
              processing_mean_s=1.0, processing_cv=0.5, startup_s=10.0, latency_goal_s=60.0)


def test_same_seed_same_figures_other_seed_other_arrivals():
    first = rows(compare(SHORT, seed=7), SHORT)
    again = rows(compare(SHORT, seed=7), SHORT)
    assert first == again
    assert arrivals(SHORT, 7) != arrivals(SHORT, 8)


def test_every_message_is_served_or_counted_as_waiting():
    messages = arrivals(SHORT, 3)
    for result in compare(SHORT, seed=3):
        assert len(result.latencies_s) == len(messages)
        assert result.unfinished == 0  # the trace ends idle: everything was served


def test_backlog_policy_scales_to_zero_when_idle_and_back_on_the_first_message():
    trace = Trace("gap", 1800.0, ((0.0, 2.0), (300.0, 0.0), (1500.0, 0.2)), 1.0, 0.3, 5.0, 60.0)
    policy = BacklogPolicy(BacklogSettings(min_workers=0, max_workers=5, target=5,
                                           scale_in_cooldown_s=30, scale_in_stabilization_s=60))
    result = Simulation(trace, policy, arrivals(trace, 1)).run()
    fleet_by_time = {s.t_s: s.fleet for s in result.samples}
    assert fleet_by_time[1400.0] == 0  # idle: nothing runs
    assert max(f for t, f in fleet_by_time.items() if t > 1500) >= 1
    assert result.unfinished == 0


def test_the_simulator_never_stops_a_busy_worker(monkeypatch):
    chosen: list[protection.WorkerView] = []
    real = protection.choose_to_stop

    def spy(views, count):
        picked = real(views, count)
        chosen.extend(picked)
        return picked

    monkeypatch.setattr("conveyor.scale.sim.engine.choose_to_stop", spy)
    compare(SHORT, seed=5, policies=("backlog",))
    assert chosen and not any(v.busy for v in chosen)


def test_backlog_uses_fewer_worker_seconds_than_static_on_a_bundled_trace():
    trace = replace(BUILTIN["bursts"], duration_s=3600.0)
    by_policy = {r["policy"]: r for r in rows(compare(trace, seed=1), trace)}
    assert by_policy["backlog"]["goal_held"]
    assert by_policy["backlog"]["worker_seconds"] < by_policy["static"]["worker_seconds"]
    assert static_size(trace) == 19


def test_simulate_cli_writes_json_and_reads_a_trace_file(tmp_path):
    trace_file = tmp_path / "short.json"
    trace_file.write_text(json.dumps(SHORT.to_json()))
    assert load_trace(trace_file) == SHORT
    out = tmp_path / "figures.json"
    runner = CliRunner()
    result = runner.invoke(main, ["scale", "simulate", "--trace", str(trace_file), "--seed",
                                  "2", "--json", str(out), "--markdown"])
    assert result.exit_code == 0, result.output
    assert "| short | backlog |" in result.output
    figures = json.loads(out.read_text())
    assert [f["policy"] for f in figures] == ["backlog", "cpu", "static"]
    again = runner.invoke(main, ["scale", "simulate", "--trace", str(trace_file), "--seed", "2",
                                 "--json", str(out)])
    assert json.loads(out.read_text()) == figures and again.exit_code == 0
    bad = runner.invoke(main, ["scale", "simulate", "--trace", "nope"])
    assert bad.exit_code != 0 and "no trace" in bad.output


@pytest.mark.parametrize(("content", "problem"), [
    (b"nope", "JSONDecodeError"),
    (b"\xff", "UnicodeDecodeError"),
    (b'{"rate": 5}', "TypeError"),
    (json.dumps({**SHORT.to_json(), "rate": []}).encode(), "rate must list"),
    (json.dumps({**SHORT.to_json(), "concurrency": 0}).encode(), "must be above 0"),
    (json.dumps({k: v for k, v in SHORT.to_json().items() if k != "name"}).encode(),
     "TypeError"),
])
def test_a_bad_trace_file_is_refused_by_name(tmp_path, content, problem):
    trace_file = tmp_path / "bad.json"
    trace_file.write_bytes(content)
    with pytest.raises(ValueError, match=problem):
        load_trace(trace_file)
    result = CliRunner().invoke(main, ["scale", "simulate", "--trace", str(trace_file)])
    assert result.exit_code == 2
    assert "Invalid value for --trace" in result.output
