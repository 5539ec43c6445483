"""Log output: plain lines by default, one JSON object per line on request."""

from __future__ import annotations

import json
import logging
import sys

import pytest
from click.testing import CliRunner

from conveyor.cli import main
from conveyor.logs import JsonFormatter


def _record(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord("conveyor.test", logging.WARNING, __file__, 1,
                               "job failed: %s", ("m-1",), None)
    record.__dict__.update(extra)
    return record


def test_json_lines_carry_the_text_and_the_extra_fields() -> None:
    line = json.loads(JsonFormatter().format(_record(message_id="m-1", receive_count=3)))
    assert line["level"] == "warning"
    assert line["logger"] == "conveyor.test"
    assert line["message"] == "job failed: m-1"
    assert line["message_id"] == "m-1" and line["receive_count"] == 3
    assert line["time"].endswith("+00:00")
    assert set(line) == {"time", "level", "logger", "message", "message_id", "receive_count"}


def test_json_lines_carry_the_exception() -> None:
    try:
        raise ValueError("broken")
    except ValueError:
        record = _record()
        record.exc_info = sys.exc_info()
    line = json.loads(JsonFormatter().format(record))
    assert "ValueError: broken" in line["exception"]


def test_an_unknown_log_format_is_refused_before_anything_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVEYOR_LOG_FORMAT", "yaml")
    result = CliRunner().invoke(main, ["queue", "list"])
    assert result.exit_code == 2
    assert "Invalid value for '--log-format'" in result.output
