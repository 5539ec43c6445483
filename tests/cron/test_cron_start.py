"""A cron file that cannot work stops `conveyor worker`, `conveyor up` and `conveyor cron
run` at start, in one line naming the file, the line and the problem (issue 33); the
default cron.yaml is optional, as in an Elastic Beanstalk source bundle. Nothing is
contacted: the refusal comes before any connection (the queue URL is a closed port)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from conveyor.cli import main
from conveyor.cron.service import DEFAULT_CRON_FILE, CronConfigError, check_cron_settings

QUEUE = "http://127.0.0.1:1/000000000000/jobs"
COMMANDS = {
    "worker": ["worker", "--worker-queue-url", QUEUE],
    "cron run": ["cron", "run", "--worker-queue-url", QUEUE],
    "up": ["up", "--app", "http://127.0.0.1:1", "--port", "1"],
}


def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, *cron: str) -> str:
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(main, [*COMMANDS[command], *cron])
    assert done.exit_code != 0, done.output
    assert "Traceback" not in done.output and done.output.count("\n") == 1, done.output
    return done.output


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_invalid_cron_file_stops_the_start_naming_its_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    (tmp_path / "cron.yaml").write_text(
        "version: 1\ncron:\n - name: backup\n   url: /backup\n   schedule: '0 * * *'\n")
    said = run(tmp_path, monkeypatch, command)
    assert "cron.yaml line 5" in said and "backup" in said and "--cron ''" in said


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_cron_file_named_but_missing_stops_the_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    said = run(tmp_path, monkeypatch, command, "--cron", "periodic.yaml")
    assert "periodic.yaml: cannot read: No such file or directory" in said


def test_the_default_cron_file_is_optional(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """No cron.yaml where the default looks: no periodic tasks, nothing refused; the same
    name given explicitly but absent would be (above, with another name)."""
    monkeypatch.chdir(tmp_path)
    check_cron_settings(DEFAULT_CRON_FILE, "server", QUEUE)
    check_cron_settings("", "server", QUEUE)
    with pytest.raises(CronConfigError, match="nope.yaml: cannot read"):
        check_cron_settings("nope.yaml", "server", QUEUE)
