"""Profile a Python server under load, after the measurement (bench/run.py --profile).

Three views, because each alone misleads on a busy 2-core machine (see profiling.py):
py-spy and perf on the measured server during extra load, then yappi on the CPU clock
in a freshly started, instrumented server, so the measured one is never instrumented.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import peers
import profiling
from sqs_load import LoadSettings, run_scenario

YAPPI_DUMP_TIMEOUT_S = 30.0


def _sample_profile(server: peers.RunningServer, settings: LoadSettings, scenario: str,
                    seconds: float, out_dir: Path) -> dict[str, Any]:
    """py-spy (and perf, when installed) on the measured server during extra load."""
    raw_path = out_dir / f"py-spy-{server.name}-{scenario}.txt"
    perf_path = out_dir / f"perf-{server.name}-{scenario}.data"
    recorder = profiling.start_recording(server.pid, seconds, raw_path)
    perf = profiling.start_perf(server.pid, seconds, perf_path)
    run_scenario(scenario, server.endpoint, replace(settings, duration_s=seconds), server.cpu_s)
    _, err = recorder.communicate(timeout=seconds + 60)
    if perf is not None:
        perf.communicate(timeout=seconds + 60)
    result: dict[str, Any] = {}
    if recorder.returncode == 0 and raw_path.exists():
        result["py_spy"] = asdict(profiling.fold(raw_path))
    else:
        result["py_spy"] = {"error": err.decode(errors="replace")[-500:]}
    if perf is not None and perf.returncode == 0:
        result["perf_by_dso"] = profiling.perf_split(perf_path, "dso")
        result["perf_by_symbol"] = profiling.perf_split(perf_path, "dso,sym", top=20)
    return result


def _cpu_profile(name: str, settings: LoadSettings, scenario: str, seconds: float,
                 out_dir: Path, conveyor_args: list[str]) -> dict[str, Any]:
    """yappi on the CPU clock, in a fresh instrumented server (never the measured one)."""
    dump = out_dir / f"yappi-{name}-{scenario}.json"
    extra = conveyor_args if name == "conveyor" else []
    server = peers.start(name, out_dir, extra, env=profiling.yappi_env(dump),
                         label=f"{name}-yappi")
    try:
        run_scenario(scenario, server.endpoint, replace(settings, duration_s=2), server.cpu_s)
        os.kill(server.pid, signal.SIGUSR1)
        run_scenario(scenario, server.endpoint, replace(settings, duration_s=seconds),
                     server.cpu_s)
        os.kill(server.pid, signal.SIGUSR2)
        deadline = time.monotonic() + YAPPI_DUMP_TIMEOUT_S
        while not dump.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        server.stop()
    if not dump.exists():
        return {"error": f"no yappi dump (is yappi installed?); see {server.log_path}"}
    return asdict(profiling.fold_yappi(dump))


def profile_server(server: peers.RunningServer, settings: LoadSettings, scenario: str,
                   seconds: float, out_dir: Path, conveyor_args: list[str]) -> dict[str, Any]:
    """Where the server's time goes under `scenario` load, three ways (see profiling.py)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"[bench] profiling {server.name} under {scenario} load ({seconds:g} s sampled, "
          f"then {seconds:g} s on a yappi-instrumented instance) ...", file=sys.stderr,
          flush=True)
    result: dict[str, Any] = {"scenario": scenario, "seconds": seconds}
    result.update(_sample_profile(server, settings, scenario, seconds, out_dir))
    server.stop()  # the measured server is done; the instrumented one gets the CPU
    result["yappi"] = _cpu_profile(server.name, settings, scenario, seconds, out_dir,
                                   conveyor_args)
    for key in ("yappi", "py_spy"):
        if "top_self" in result[key]:
            print("\n".join(profiling.Profile(**result[key]).lines()), file=sys.stderr)
    if "perf_by_dso" in result:
        print("perf (on-CPU samples) by shared object:", file=sys.stderr)
        for name, share in result["perf_by_dso"]:
            print(f"  {share:5.1f}%  {name}", file=sys.stderr)
    return result
