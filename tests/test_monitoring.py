"""deploy/monitoring/: the Grafana dashboard and the Prometheus alert rules, checked offline.

Both must be what Grafana and Prometheus load (JSON and YAML of the right shape), and every
metric they name must exist: the names and labels come from the metrics the server, worker,
cron and scaler really register (read from their registries by the docs' reference hook,
docs/_hooks/reference.py, which also writes docs/reference/metrics.md), so a renamed metric
or label fails here before a dashboard goes blank in production."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from conveyor.sqs.errors import WIRE

ROOT = Path(__file__).resolve().parent.parent
MONITORING = ROOT / "deploy" / "monitoring"
# Prometheus's duration syntax (prometheus.io/docs/prometheus/latest/configuration: <duration>)
_DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")
_NAME = re.compile(r"\bconveyor_[a-z0-9_]+")
# A selector: metric{label="value", label=~"regex", ...}
_SELECTOR = re.compile(r"\b(?P<metric>conveyor_[a-z0-9_]+)\{(?P<matchers>[^}]*)\}")
_MATCHER = re.compile(r'(?P<label>\w+)\s*(?:=~|!~|!=|=)\s*"(?P<value>[^"]*)"')


def _reference() -> Any:
    spec = importlib.util.spec_from_file_location("docs_reference",
                                                  ROOT / "docs" / "_hooks" / "reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REFERENCE = _reference()
METRICS = REFERENCE.metric_names()
LABELS = {name: set(labels) | {"instance", "job", "le"}
          for name, _, labels, _ in REFERENCE.all_families()}


def _dashboard() -> dict[str, Any]:
    return json.loads((MONITORING / "grafana-dashboard.json").read_text())


def _rules() -> list[dict[str, Any]]:
    data = yaml.safe_load((MONITORING / "prometheus-alerts.yaml").read_text())
    return [rule for group in data["groups"] for rule in group["rules"]]


def _dashboard_exprs() -> list[str]:
    return [target["expr"] for panel in _dashboard()["panels"]
            for target in panel.get("targets", [])]


def _exprs() -> list[str]:
    return _dashboard_exprs() + [rule["expr"] for rule in _rules()]


def test_the_dashboard_is_a_grafana_dashboard() -> None:
    dashboard = _dashboard()
    assert dashboard["title"] and dashboard["uid"] and dashboard["schemaVersion"] >= 36
    [datasource] = dashboard["templating"]["list"]
    assert datasource["type"] == "datasource" and datasource["query"] == "prometheus"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["type"] == "timeseries" and panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], f"{panel['title']}: no query"
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]


def test_the_alert_rules_are_prometheus_rules() -> None:
    data = yaml.safe_load((MONITORING / "prometheus-alerts.yaml").read_text())
    assert set(data) == {"groups"}
    names = [group["name"] for group in data["groups"]]
    assert len(names) == len(set(names)), "group names must be unique"
    alerts = [rule["alert"] for rule in _rules()]
    assert len(alerts) == len(set(alerts))
    for rule in _rules():
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", rule["alert"])
        assert _DURATION.match(rule.get("for", "0s")), rule["alert"]
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]


@pytest.mark.parametrize("expr", _exprs())
def test_every_expression_is_balanced(expr: str) -> None:
    for opening, closing in ("()", "[]", "{}"):
        depth = 0
        for char in expr:
            depth += (char == opening) - (char == closing)
            assert depth >= 0, expr
        assert depth == 0, expr


def test_every_metric_named_exists_in_the_code() -> None:
    named = {name for expr in _exprs() for name in _NAME.findall(expr)}
    assert named, "no conveyor_* metric found: the pattern is wrong"
    assert not named - METRICS, f"not registered by any Conveyor part: {named - METRICS}"


def test_every_label_matched_exists_on_its_metric() -> None:
    for expr in _exprs():
        for selector in _SELECTOR.finditer(expr):
            base = re.sub(r"_(bucket|sum|count)$", "", selector["metric"])
            labels = LABELS.get(selector["metric"], LABELS.get(base, set()))
            for matcher in _MATCHER.finditer(selector["matchers"]):
                assert matcher["label"] in labels, f"{selector[0]}: no label {matcher['label']}"


def test_request_outcomes_named_are_ones_the_server_counts() -> None:
    # outcome is "ok", an SQS error code (conveyor/sqs/errors.py's WIRE), or InternalFailure
    # (server/app.py's answer to the unexpected).
    known = {"ok", "InternalFailure"} | set(WIRE)
    for expr in _exprs():
        for value in re.findall(r'outcome!?=~?"([^"]*)"', expr):
            assert value in known, f"{expr}: no outcome {value!r}"


def test_the_scrape_jobs_are_the_ones_the_alerts_name() -> None:
    scrape = yaml.safe_load((MONITORING / "prometheus-scrape.yaml").read_text())
    jobs = {job["job_name"] for job in scrape["scrape_configs"]}
    named = {job for rule in _rules() for job in re.findall(r'job="([^"]+)"', rule["expr"])}
    assert named <= jobs
