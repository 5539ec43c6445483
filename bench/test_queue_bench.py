"""Unit tests of the queue benchmark's own arithmetic (no servers, no timings).

    .venv/bin/python -m pytest bench/test_queue_bench.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import peers
import procstat
import profiling
import pytest
import report
from run import combine
from sqs_client import make_client, sent_at, stamped_body
from sqs_load import require_loopback
from stats import ms, percentile


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([3.0], 99) == 3.0
    assert percentile([], 50) is None
    assert ms(0.0012345) == 1.234


def test_stamped_body_has_the_size_and_carries_its_send_time() -> None:
    body = stamped_body(256)
    assert len(body.encode()) == 256
    assert sent_at(body) > 0


def test_only_loopback_endpoints_are_loaded() -> None:
    require_loopback("http://127.0.0.1:9324")
    require_loopback("http://localhost:9324")
    with pytest.raises(SystemExit):
        require_loopback("http://10.0.0.5:9324")


def test_procstat_reads_this_process() -> None:
    stat = procstat.read_stat(os.getpid())
    assert stat is not None and stat.pid == os.getpid()
    assert procstat.tree_cpu_s(os.getpid()) >= 0
    assert procstat.machine_busy_s() > 0


def test_combine_takes_the_median_and_keeps_the_rounds() -> None:
    rounds = [{"messages_per_s": v, "errors": e, "note": "x"}
              for v, e in ((1.0, 0), (5.0, 2), (3.0, 1))]
    combined = combine(rounds)
    assert combined["messages_per_s"] == 3.0
    assert combined["errors"] == 1
    assert combined["note"] == "x"
    assert combined["rounds"] == rounds


def _results(conveyor: dict, fauxqs: dict, floor: dict | None = None) -> dict:
    servers = {"conveyor": {"version": "0", "storage": "s", "scenarios": conveyor},
               "fauxqs": {"version": "1", "storage": "m", "scenarios": fauxqs}}
    if floor is not None:
        servers["python-floor"] = {"version": "-", "storage": "m", "scenarios": floor}
    return {"servers": servers}


def test_targets_are_judged_against_the_issue() -> None:
    results = _results({
        "batched": {"messages_per_server_cpu_s": 13_000.0, "messages_per_s": 900.0},
        "unbatched": {"messages_per_server_cpu_s": 1_100.0},
        "longpoll": {"pickup_p50_ms": 3.0},
    }, fauxqs={"batched": {"messages_per_server_cpu_s": 10_000.0, "messages_per_s": 1000.0},
               "unbatched": {"messages_per_server_cpu_s": 1_000.0}},
       floor={"batched": {"messages_per_server_cpu_s": 20_000.0},
              "unbatched": {"messages_per_server_cpu_s": 1_800.0}})
    judged = [(value, ok) for _, value, ok in report.targets(results)]
    assert judged == [("1.30x", True), ("0.65x", True), ("1.10x", False), ("0.61x", True),
                      ("900", False), ("3.00", True)]


def test_unmeasured_targets_are_not_called_met() -> None:
    met = [ok for _, _, ok in report.targets(_results({}, fauxqs={}))]
    assert met == [None] * 6


def test_a_yardstick_is_never_the_fastest_peer() -> None:
    results = _results({"batched": {"messages_per_s": 900.0}},
                       fauxqs={"batched": {"messages_per_s": 800.0}},
                       floor={"batched": {"messages_per_s": 5000.0}})
    what, _, met = report.targets(results)[4]
    assert "fauxqs: 800" in what
    assert met is True


def test_the_floor_server_moves_messages_for_boto3(tmp_path: Path) -> None:
    server = peers.start("python-floor", tmp_path)
    try:
        client = make_client(server.endpoint)
        url = client.create_queue(QueueName="floor")["QueueUrl"]
        sent = client.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"m{i}"} for i in range(3)])  # boto3 checks MD5s
        assert len(sent["Successful"]) == 3
        got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        assert [m["Body"] for m in got["Messages"]] == ["m0", "m1", "m2"]
        deleted = client.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
            for i, m in enumerate(got["Messages"])])
        assert len(deleted["Successful"]) == 3
        assert "Messages" not in client.receive_message(QueueUrl=url, WaitTimeSeconds=1)
    finally:
        server.stop()


def test_py_spy_fold_ranks_functions(tmp_path: Path) -> None:
    raw = tmp_path / "raw.txt"
    raw.write_text(
        'process 1:"python";main (app/a.py:1);hot (app/b.py:2) 3\n'
        'process 1:"python";main (app/a.py:1);cold (app/c.py:3) 1\n')
    folded = profiling.fold(raw)
    assert folded.total == 4
    assert folded.top_self[0] == ("hot (b.py:2)", 75.0)
    assert ("hot (b.py:2)", 75.0) in folded.top_inclusive
    assert all(frame != "main (a.py:1)" for frame, _ in folded.top_inclusive)  # trunk
    assert folded.self_by_file[0] == ("app/b.py", 75.0)


def test_yappi_fold_ranks_functions_by_cpu(tmp_path: Path) -> None:
    dump = tmp_path / "yappi.json"
    dump.write_text(json.dumps([
        {"name": "serve", "module": "/x/conveyor/server/http.py", "line": 1, "calls": 1,
         "self_s": 1.0, "total_s": 4.0},
        {"name": "commit", "module": "/x/lib/python3.11/site-packages/a/b.py", "line": 2,
         "calls": 9, "self_s": 3.0, "total_s": 3.0},
    ]))
    folded = profiling.fold_yappi(dump)
    assert folded.total == 4.0
    assert folded.top_self[0] == ("commit (b.py:2)", 75.0)
    assert ("a/b.py", 75.0) in folded.self_by_file
