"""cron.yaml parsing (EB's format, errors with line numbers), reloading, and the CLI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from conveyor.cli import main
from conveyor.clock import ManualClock
from conveyor.cron.cronfile import CronFileError, parse_cron_yaml
from conveyor.cron.source import CronSource

EB_EXAMPLE = """\
version: 1
cron:
 - name: "backup-job"
   url: "/backup"
   schedule: "0 */12 * * *"
 - name: "audit"
   url: "/audit"
   schedule: "0 23 * * *"
"""


def test_eb_example_parses() -> None:
    tasks = parse_cron_yaml(EB_EXAMPLE)
    assert [(t.name, t.url, t.schedule.text, t.line) for t in tasks] == [
        ("backup-job", "/backup", "0 */12 * * *", 3), ("audit", "/audit", "0 23 * * *", 6)]


def test_unquoted_scalars_and_empty_list() -> None:
    tasks = parse_cron_yaml("version: '1'\ncron:\n - name: 2024\n   url: /x\n"
                            "   schedule: 0 0 * * *\n")
    assert tasks[0].name == "2024" and tasks[0].schedule.text == "0 0 * * *"
    assert parse_cron_yaml("version: 1\ncron:\n") == ()
    assert parse_cron_yaml("version: 1\ncron: []\n") == ()


@pytest.mark.parametrize(("text", "message"), [
    ("", "line"),  # empty: no line, but named
    ("version: 2\ncron: []\n", "line 1: unsupported version '2'"),
    ("cron: []\n", "line 1: missing 'version: 1'"),
    ("version: 1\n", "missing 'cron:'"),
    ("version: 1\ncron: {}\n", "line 2: 'cron' must be a list"),
    ("version: 1\ncron:\n - name: a\n   url: /a\n", "line 3: task is missing 'schedule'"),
    ("version: 1\ncron:\n - name: a\n   url: a\n   schedule: '* * * * *'\n",
     "line 4: url 'a' must be a path"),
    ("version: 1\ncron:\n - name: a\n   url: /a\n   schedule: '0 25 * * *'\n",
     "line 5: task 'a' schedule '0 25 * * *': hour value 25 is out of range 0-23"),
    ("version: 1\ncron:\n - name: a\n   url: /a\n   schedule: '* * * *'\n",
     "line 5: task 'a' schedule '* * * *': expected 5 fields"),
    ("version: 1\ncron:\n - name: a\n   url: /a\n   schedule: '* * * * *'\n"
     " - name: a\n   url: /b\n   schedule: '* * * * *'\n",
     "line 6: duplicate task name 'a' (first at line 3)"),
    ("version: 1\ncron:\n - name: a\n   url: /a\n   schedul: '* * * * *'\n",
     "line 5: unknown key 'schedul' in a task (allowed: name, url, schedule); did you "
     "mean 'schedule'?"),
    ("version: 1\ncron:\n - name: a\n   url: /a\n   schedule: */5 * * * *\n",
     "line 5: not valid YAML"),
    ("version: 1\ncron:\n - just a string\n", "line 3: each task must be a mapping"),
])
def test_errors_name_the_line_and_problem(text: str, message: str) -> None:
    with pytest.raises(CronFileError) as info:
        parse_cron_yaml(text, "cron.yaml")
    assert message in str(info.value)
    assert str(info.value).startswith("cron.yaml")


def test_unquoted_star_schedule_gets_a_hint() -> None:
    with pytest.raises(CronFileError, match="must be quoted"):
        parse_cron_yaml("version: 1\ncron:\n - name: a\n   url: /a\n   schedule: */5 * * * *\n")


def test_a_file_that_is_not_text_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "cron.yaml"
    path.write_bytes(b"version: 1\n\xff")
    result = CliRunner().invoke(main, ["cron", "check", str(path)])
    assert result.exit_code != 0
    assert f"{path}: cannot read" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def _write(path: Path, text: str, bump_ns: int) -> None:
    path.write_text(text)
    stat = path.stat()  # make the change visible even within one mtime tick
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + bump_ns))


def test_source_reloads_on_change_and_keeps_the_last_good_schedule(tmp_path: Path) -> None:
    path = tmp_path / "cron.yaml"
    errors: list[str] = []
    source = CronSource(path, clock=ManualClock(), reload_every_s=0,
                        on_error=errors.append)
    assert source.refresh() == ()  # no file: no tasks
    _write(path, EB_EXAMPLE, 1)
    assert [t.name for t in source.refresh()] == ["backup-job", "audit"]
    _write(path, EB_EXAMPLE.replace("0 23 * * *", "0 99 * * *"), 2)
    assert [t.name for t in source.refresh()] == ["backup-job", "audit"]  # last good kept
    assert source.error and "line 8" in source.error and errors == [source.error]
    _write(path, "version: 1\ncron:\n - name: only\n   url: /o\n   schedule: '@daily'\n", 3)
    assert [t.name for t in source.refresh()] == ["only"] and source.error is None
    path.unlink()
    assert source.refresh() == ()


def test_cli_check_and_list(tmp_path: Path) -> None:
    good, bad = tmp_path / "cron.yaml", tmp_path / "bad.yaml"
    good.write_text(EB_EXAMPLE)
    bad.write_text(EB_EXAMPLE.replace("name: \"audit\"", "name: \"backup-job\""))
    runner = CliRunner()
    result = runner.invoke(main, ["cron", "check", str(good)])
    assert result.exit_code == 0 and "ok, 2 tasks" in result.output
    result = runner.invoke(main, ["cron", "check", str(bad)])
    assert result.exit_code == 1 and "line 6: duplicate task name 'backup-job'" in result.output
    result = runner.invoke(main, ["cron", "list", str(good), "-n", "2",
                                  "--after", "2028-02-28T23:30"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "backup-job  POST /backup  schedule '0 */12 * * *'",
        "    2028-02-29T00:00:00Z  Tue",
        "    2028-02-29T12:00:00Z  Tue",
        "audit  POST /audit  schedule '0 23 * * *'",
        "    2028-02-29T23:00:00Z  Tue",
        "    2028-03-01T23:00:00Z  Wed",
    ]
