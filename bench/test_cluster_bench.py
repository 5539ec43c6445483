"""Unit tests of the cluster benchmark's arithmetic (no servers, no timings).

    .venv/bin/python -m pytest bench/test_cluster_bench.py
"""

from __future__ import annotations

import argparse

import pytest
from cluster_bench import CLIENT_BACKEND, _configs, cpu_delta, derived
from pipeline import PipelineConfig


def test_one_endpoint_serves_every_client() -> None:
    cfg = PipelineConfig(endpoint="http://127.0.0.1:1", batched=True, clients=3)
    assert {cfg.client_endpoint(i, consumer) for i in range(3) for consumer in (False, True)} \
        == {"http://127.0.0.1:1"}


def test_pairs_spread_over_nodes_and_consumers_cross_nodes() -> None:
    nodes = ("a", "b", "c")
    cfg = PipelineConfig(endpoint="a", batched=True, clients=6, endpoints=nodes,
                         consumer_shift=1)
    assert [cfg.client_endpoint(i, consumer=False) for i in range(6)] == list("abcabc")
    assert [cfg.client_endpoint(i, consumer=True) for i in range(6)] == list("bcabca")


def test_cpu_delta_counts_new_processes_only_when_asked() -> None:
    before, after = {1: 1.0, 2: 2.0}, {1: 1.5, 2: 2.0, 3: 0.25}
    assert cpu_delta(before, after, new_ones=True) == 0.75
    assert cpu_delta(before, after, new_ones=False) == 0.5


def test_client_backends_are_told_by_their_port() -> None:
    match = CLIENT_BACKEND.search("postgres: 15/main: postgres test 127.0.0.1(56134) idle ")
    assert match is not None and match.group() == "(56134)"
    assert CLIENT_BACKEND.search("postgres: 15/main: walwriter ") is None


def test_cpu_per_message_adds_the_backends() -> None:
    figures = derived({"messages_received": 1000, "server_cpu_s": 0.2, "pg_backend_cpu_s": 0.1})
    assert figures == {"node_cpu_us_per_msg": 200.0, "total_cpu_us_per_msg": 300.0}
    assert derived({"error": "x"}) == {}


def test_configs_are_read_from_the_command_line() -> None:
    assert _configs("sqlite:1,postgresql:2") == [("sqlite", 1), ("postgresql", 2)]
    for bad in ("mysql:1", "sqlite", "postgresql:0", "sqlite:x"):
        with pytest.raises(argparse.ArgumentTypeError):
            _configs(bad)
