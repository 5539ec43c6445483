"""cron.yaml in Elastic Beanstalk's format, read with line numbers for every error.

    version: 1
    cron:
     - name: "backup-job"
       url: "/backup"
       schedule: "0 */12 * * *"

The YAML is composed into nodes rather than loaded, so each problem names its line and
scalars keep their text (`version: 1` and `version: "1"` both work; no type guessing).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

import yaml

from conveyor.cron.expr import CronExpr, CronSyntaxError

TASK_KEYS = ("name", "url", "schedule")


class CronFileError(ValueError):
    """cron.yaml is unreadable or invalid; the message names the file, line and problem."""


@dataclass(frozen=True, slots=True)
class Task:
    """One periodic task: POST to `url` (a path on the app) on `schedule` (UTC)."""

    name: str
    url: str
    schedule: CronExpr
    line: int = 0


def load_cron_file(path: Path) -> tuple[Task, ...]:
    """Read and validate `path`; raise CronFileError naming the line and the problem."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}"
        raise CronFileError(msg) from exc
    return parse_cron_yaml(text, str(path))


def parse_cron_yaml(text: str, where: str = "cron.yaml") -> tuple[Task, ...]:
    """Parse the text of a cron.yaml (`where` names it in errors)."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        raise CronFileError(_yaml_message(exc, where)) from None
    if root is None:
        raise CronFileError(f"{where} line 1: the file is empty (expected version: 1 and cron:)")
    mapping = _mapping(root, where, "the file")
    _check_keys(mapping, root, where, ("version", "cron"), "the file")
    version = mapping.get("version")
    if version is None:
        raise CronFileError(f"{where} line 1: missing 'version: 1'")
    if not isinstance(version, yaml.ScalarNode) or version.value.strip() != "1":
        shown = version.value if isinstance(version, yaml.ScalarNode) else "a collection"
        raise CronFileError(f"{_at(where, version)}: unsupported version {shown!r} "
                            "(only version: 1 exists)")
    tasks_node = mapping.get("cron")
    if tasks_node is None:
        raise CronFileError(f"{where} line 1: missing 'cron:' (the list of tasks)")
    if isinstance(tasks_node, yaml.ScalarNode) and tasks_node.tag.endswith(":null"):
        return ()
    if not isinstance(tasks_node, yaml.SequenceNode):
        raise CronFileError(f"{_at(where, tasks_node)}: 'cron' must be a list of tasks")
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for item in tasks_node.value:
        task = _task(item, where)
        if task.name in seen:
            raise CronFileError(f"{_at(where, item)}: duplicate task name {task.name!r} "
                                f"(first at line {seen[task.name]})")
        seen[task.name] = task.line
        tasks.append(task)
    return tuple(tasks)


def _task(node: yaml.Node, where: str) -> Task:
    mapping = _mapping(node, where, "each task")
    _check_keys(mapping, node, where, TASK_KEYS, "a task")
    values: dict[str, str] = {}
    for key in TASK_KEYS:
        value = mapping.get(key)
        if value is None:
            raise CronFileError(f"{_at(where, node)}: task is missing {key!r}")
        if not isinstance(value, yaml.ScalarNode) or not value.value.strip():
            raise CronFileError(f"{_at(where, value)}: {key!r} must be a non-empty string")
        values[key] = value.value.strip()
    if not values["url"].startswith("/"):
        raise CronFileError(f"{_at(where, mapping['url'])}: url {values['url']!r} must be a "
                            "path on the app starting with '/'")
    try:
        schedule = CronExpr.parse(values["schedule"])
    except CronSyntaxError as exc:
        raise CronFileError(f"{_at(where, mapping['schedule'])}: task {values['name']!r} "
                            f"schedule {values['schedule']!r}: {exc}") from None
    return Task(values["name"], values["url"], schedule, node.start_mark.line + 1)


def _mapping(node: yaml.Node, where: str, what: str) -> dict[str, yaml.Node]:
    if not isinstance(node, yaml.MappingNode):
        raise CronFileError(f"{_at(where, node)}: {what} must be a mapping of keys to values")
    result: dict[str, yaml.Node] = {}
    for key, value in node.value:
        name = key.value if isinstance(key, yaml.ScalarNode) else str(key)
        if name in result:
            raise CronFileError(f"{_at(where, key)}: key {name!r} is given twice")
        result[name] = value
    return result


def _check_keys(mapping: dict[str, yaml.Node], node: yaml.Node, where: str,
                allowed: tuple[str, ...], what: str) -> None:
    for key in mapping:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            line = _key_line(node, key)
            raise CronFileError(f"{where} line {line}: unknown key {key!r} in {what} "
                                f"(allowed: {', '.join(allowed)}){hint}")


def _key_line(node: yaml.Node, key: str) -> int:
    for key_node, _value in node.value:
        if getattr(key_node, "value", None) == key:
            return key_node.start_mark.line + 1
    return node.start_mark.line + 1


def _at(where: str, node: yaml.Node) -> str:
    return f"{where} line {node.start_mark.line + 1}"


def _yaml_message(exc: yaml.YAMLError, where: str) -> str:
    mark = getattr(exc, "problem_mark", None)
    line = f" line {mark.line + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc)
    hint = ""
    if mark is not None and ("alias" in str(problem) or "found '/'" in str(problem)
                             or "found ' '" in str(problem)):
        hint = " (a schedule starting with '*' must be quoted: schedule: \"*/5 * * * *\")"
    return f"{where}{line}: not valid YAML: {problem}{hint}"
