"""Options: EB names, defaults and ranges; file < env < flag; clear errors."""

from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner

from conveyor.worker.cli import worker_command
from conveyor.worker.config import ConfigError, WorkerConfig, load_config
from conveyor.worker.options import EB_OPTIONS, OPTIONS

URL = "http://127.0.0.1:9324/000000000000/jobs"


def test_elastic_beanstalk_defaults():
    config = load_config({"WorkerQueueURL": URL})
    assert (config.http_path, config.mime_type, config.http_connections) == (
        "/", "application/json", 50)
    assert (config.connect_timeout, config.inactivity_timeout, config.visibility_timeout) == (
        5, 180, 300)
    assert (config.error_visibility_timeout, config.retention_period, config.max_retries) == (
        2, 345600, 10)
    assert config.app_url == "http://localhost:80"
    assert config.post_url == "http://localhost:80/"


def test_option_table_defaults_are_the_config_defaults():
    """--help shows the table's defaults; WorkerConfig applies its own: they must agree."""
    fields = {f.name: f.default for f in dataclasses.fields(WorkerConfig)}
    for option in OPTIONS:
        expected = dataclasses.MISSING if option.default is None else option.default
        assert fields[option.field] == expected, option.name


@pytest.mark.parametrize(("name", "low", "high"), [
    ("HttpConnections", 1, 100), ("ConnectTimeout", 1, 60), ("InactivityTimeout", 1, 36000),
    ("VisibilityTimeout", 0, 43200), ("ErrorVisibilityTimeout", 0, 43200),
    ("RetentionPeriod", 60, 1209600), ("MaxRetries", 1, 100),
])
def test_elastic_beanstalk_ranges(name, low, high):
    option = {o.name: o for o in EB_OPTIONS}[name]
    assert (option.low, option.high) == (low, high)
    load_config({"WorkerQueueURL": URL, name: low})
    load_config({"WorkerQueueURL": URL, name: high, "MaxErrorVisibilityTimeout": 43200})
    for bad in (low - 1, high + 1):
        with pytest.raises(ConfigError, match=rf"^{name} must be between {low} and {high}"):
            load_config({"WorkerQueueURL": URL, name: bad})


def test_precedence_file_env_flag(tmp_path):
    path = tmp_path / "worker.yaml"
    path.write_text("option_settings:\n  aws:elasticbeanstalk:sqsd:\n"
                    "    HttpPath: /from-file\n    MaxRetries: 4\n    MimeType: text/plain\n")
    env = {"CONVEYOR_MAX_RETRIES": "5", "CONVEYOR_HTTP_PATH": "/from-env"}
    config = load_config({"WorkerQueueURL": URL, "HttpPath": "/from-flag"}, env, path)
    assert config.mime_type == "text/plain"  # file
    assert config.max_retries == 5  # env beats file
    assert config.http_path == "/from-flag"  # flag beats env


def test_flat_file_with_typo_is_refused(tmp_path):
    path = tmp_path / "worker.yaml"
    path.write_text("WorkerQueueURL: http://x:1/q\nHttpConection: 3\n")
    with pytest.raises(ConfigError, match="unknown option 'HttpConection'.*HttpConnections"):
        load_config(file=path)


def test_a_file_that_is_not_text_is_refused(tmp_path):
    path = tmp_path / "worker.yaml"
    path.write_bytes(b"HttpPath: /\xff")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(file=path)


def test_missing_queue_url_is_named():
    with pytest.raises(ConfigError, match="WorkerQueueURL is required"):
        load_config({})


def test_cli_reports_out_of_range_option_and_exits_2():
    result = CliRunner().invoke(worker_command, ["--worker-queue-url", URL,
                                                 "--http-connections", "500"], env={})
    assert result.exit_code == 2
    assert "HttpConnections must be between 1 and 100, got 500 (from --http-connections)" in (
        result.output)


def test_env_variable_is_named_in_errors():
    result = CliRunner().invoke(worker_command, [], env={
        "CONVEYOR_WORKER_QUEUE_URL": URL, "CONVEYOR_VISIBILITY_TIMEOUT": "43201"})
    assert result.exit_code == 2
    assert "VisibilityTimeout must be between 0 and 43200" in result.output
    assert "CONVEYOR_VISIBILITY_TIMEOUT" in result.output


def test_cross_option_rules():
    with pytest.raises(ConfigError, match="IdleBackoffMin"):
        load_config({"WorkerQueueURL": URL, "IdleBackoffMin": 5, "IdleBackoffMax": 1})
    with pytest.raises(ConfigError, match="HttpPath must start with '/'"):
        load_config({"WorkerQueueURL": URL, "HttpPath": "jobs"})
    with pytest.raises(ConfigError, match="AppURL must be an http"):
        load_config({"WorkerQueueURL": URL, "AppURL": "localhost:80"})
    assert isinstance(load_config({"WorkerQueueURL": URL, "AcceptAny2xx": "yes"}), WorkerConfig)
