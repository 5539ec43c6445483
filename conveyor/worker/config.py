"""WorkerConfig and how it is assembled: defaults < config file < CONVEYOR_* env < CLI flags."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from conveyor.client import check_http_url
from conveyor.client.partitions import PartitionedQueue, PartitionError
from conveyor.worker.options import BY_NAME, OPTIONS, Option

EB_NAMESPACE = "aws:elasticbeanstalk:sqsd"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class ConfigError(ValueError):
    """A config value is missing, malformed or out of range; the message says which and why."""


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """Every worker option, validated. Field names are the snake_case of the EB names."""

    worker_queue_url: str
    http_path: str = "/"
    mime_type: str = "application/json"
    http_connections: int = 50
    connect_timeout: int = 5
    inactivity_timeout: int = 180
    visibility_timeout: int = 300
    error_visibility_timeout: int = 2
    retention_period: int = 345600
    max_retries: int = 10
    app_url: str = "http://localhost:80"
    accept_any_2xx: bool = False
    adaptive_concurrency: bool = False
    expired_to_dead_letter: bool = False
    max_error_visibility_timeout: int = 3600
    drain_timeout: int = 30
    poll_wait_time: int = 20
    extended_poll_wait_time: int = 120
    idle_backoff_min: float = 0.5
    idle_backoff_max: float = 5.0
    batch_size: int = 0
    batching_window: float = 0.0
    receive_rate: float = 0.0
    receive_burst: int = 0
    group_concurrency: int = 0
    health_check_path: str = ""
    signing_secret: str = ""
    status_port: int = 0
    status_host: str = "127.0.0.1"
    create_queue: bool = True
    region: str = ""
    endpoint_url: str = ""
    partitions: int = 0
    shared_dead_letter: bool = False
    cron_file: str = "cron.yaml"
    cron_lease: str = "server"
    cron_grace_period: int = 300
    cron_lease_ttl: float = 10.0
    cron_signing_key: str = ""
    payload_endpoint_url: str = ""
    payload_region: str = ""
    payload_access_key: str = ""
    payload_bucket: str = ""
    delete_payloads: bool = True

    @property
    def post_url(self) -> str:
        """Where each message is POSTed: AppURL + HttpPath."""
        return self.app_url.rstrip("/") + self.http_path

    def replace(self, **changes: Any) -> WorkerConfig:
        """A copy with some fields changed, validated again."""
        return validate(dataclasses.replace(self, **changes))


def load_config(cli: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
                file: Path | None = None) -> WorkerConfig:
    """Merge the sources (later wins) and validate. `cli` maps EB names to values."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if file is not None:
        for name, raw in read_config_file(file).items():
            values[name], sources[name] = raw, f"{file}"
    for option in OPTIONS:
        if env and env.get(option.env) is not None:
            values[option.name], sources[option.name] = env[option.env], option.env
    for name, raw in (cli or {}).items():
        if raw is not None:
            values[name], sources[name] = raw, BY_NAME[name].flag
    fields = {BY_NAME[name].field: _coerce(BY_NAME[name], raw, sources[name])
              for name, raw in values.items()}
    if not fields.get("worker_queue_url"):
        msg = "WorkerQueueURL is required (--worker-queue-url or CONVEYOR_WORKER_QUEUE_URL)"
        raise ConfigError(msg)
    return validate(WorkerConfig(**fields), sources)


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a YAML/JSON file of EB option names: flat, under `aws:elasticbeanstalk:sqsd`,
    or as an .ebextensions `option_settings` block (mapping or list form)."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        msg = f"cannot read config file {path}: {exc}"
        raise ConfigError(msg) from exc
    data = _unwrap(data, path)
    for key in data:
        if key not in BY_NAME:
            close = difflib.get_close_matches(str(key), BY_NAME, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            msg = f"unknown option {key!r} in {path}{hint}"
            raise ConfigError(msg)
    return data


def _unwrap(data: Any, path: Path) -> dict[str, Any]:
    if isinstance(data, dict) and "option_settings" in data:
        data = data["option_settings"]
    if isinstance(data, list):  # [{namespace, option_name, value}, ...]
        data = {item["option_name"]: item.get("value") for item in data
                if isinstance(item, dict) and item.get("namespace", EB_NAMESPACE) == EB_NAMESPACE}
    if isinstance(data, dict) and EB_NAMESPACE in data:
        data = data[EB_NAMESPACE]
    if not isinstance(data, dict):
        msg = f"{path} must hold a mapping of option names to values"
        raise ConfigError(msg)
    return data


def _coerce(option: Option, raw: Any, source: str) -> Any:
    """Convert one raw value (string from env/file, or typed from the CLI) to the option's type."""
    if option.kind is bool:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        msg = f"{option.name} must be true or false, got {raw!r} (from {source})"
        raise ConfigError(msg)
    if option.kind in (int, float):
        try:
            number = option.kind(str(raw).strip()) if isinstance(raw, str) else option.kind(raw)
        except (TypeError, ValueError):
            kind = "a whole number" if option.kind is int else "a number"
            msg = f"{option.name} must be {kind}, got {raw!r} (from {source})"
            raise ConfigError(msg) from None
        _check_range(option, number, source)
        return number
    return "" if raw is None else str(raw)


def _check_range(option: Option, number: float, source: str) -> None:
    low_ok = option.low is None or number >= option.low
    high_ok = option.high is None or number <= option.high
    if not (low_ok and high_ok):
        low, high = option.range_text().split("-")
        msg = f"{option.name} must be between {low} and {high}, got {number:g} (from {source})"
        raise ConfigError(msg)


def validate(config: WorkerConfig, sources: Mapping[str, str] | None = None) -> WorkerConfig:
    """Check ranges and the rules that involve more than one option; return the config."""
    where = dict(sources or {})
    for option in OPTIONS:
        value = getattr(config, option.field)
        if option.kind in (int, float) and not isinstance(value, bool):
            _check_range(option, value, where.get(option.name, "default"))
    _check_url("WorkerQueueURL", config.worker_queue_url)
    _check_url("AppURL", config.app_url)
    if config.endpoint_url:
        _check_url("EndpointURL", config.endpoint_url)
    if config.payload_endpoint_url:
        _check_url("PayloadEndpointURL", config.payload_endpoint_url)
    if config.payload_access_key and ":" not in config.payload_access_key:
        msg = "PayloadAccessKey must be KEY:SECRET"
        raise ConfigError(msg)
    for name, path in (("HttpPath", config.http_path),
                       ("HealthCheckPath", config.health_check_path or "/")):
        if not path.startswith("/"):
            msg = f"{name} must start with '/', got {path!r}"
            raise ConfigError(msg)
    if config.idle_backoff_min > config.idle_backoff_max:
        msg = (f"IdleBackoffMin ({config.idle_backoff_min:g}) must not exceed "
               f"IdleBackoffMax ({config.idle_backoff_max:g})")
        raise ConfigError(msg)
    if config.partitions:
        try:
            PartitionedQueue(config.worker_queue_url, config.partitions)
        except PartitionError as exc:
            msg = f"Partitions: {exc}"
            raise ConfigError(msg) from None
    if config.error_visibility_timeout > config.max_error_visibility_timeout:
        msg = (f"ErrorVisibilityTimeout ({config.error_visibility_timeout}) must not exceed "
               f"MaxErrorVisibilityTimeout ({config.max_error_visibility_timeout})")
        raise ConfigError(msg)
    return config


def _check_url(name: str, url: str) -> None:
    if not url.startswith(("http://", "https://")):
        msg = f"{name} must be an http(s) URL, got {url!r}"
        raise ConfigError(msg)
    try:
        check_http_url(url)  # a host, and a port that is a port
    except ValueError as exc:
        msg = f"{name}: {exc}"
        raise ConfigError(msg) from None
