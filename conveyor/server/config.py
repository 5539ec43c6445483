"""The server's config file (YAML): listen address, store, keys, and queues to declare.

```yaml
port: 9324
data_dir: ./conveyor-data
mode: strict            # or relaxed
# shards:                 # several PostgreSQL primaries instead of `store`: the first
#   a: postgresql://db-a/conveyor   # holds the catalog of where each queue lives
#   b: postgresql://db-b/conveyor
access_keys:                         # without any, requests are not authenticated
  AKIDEXAMPLE: secret                  # full access
  AKIDPRODUCER: {secret: s2, actions: ["SendMessage*"], queues: ["orders-*"]}
metrics_token: s3cret-scrape-token   # GET /metrics then needs Authorization: Bearer <it>
# metrics_port: 9325                 # or: /metrics only on 127.0.0.1:9325
console_session_hours: 8             # how long a console sign-in lasts
request_timeout: 30     # seconds to receive a request once begun (408 after)
max_connections: 10000
# tls_cert: /etc/conveyor/cert.pem   # serve HTTPS
# tls_key: /etc/conveyor/key.pem     # default: the key inside tls_cert
queues:
  - name: jobs-dlq
  - name: jobs
    attributes: {VisibilityTimeout: 60}
    dead_letter: {queue: jobs-dlq, max_receive_count: 5}
    tags: {team: billing}
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from conveyor.server.access import EVERYTHING, AccessKey, normalized_actions
from conveyor.service import RequestContext, Service
from conveyor.sqs.errors import QueueNameExists, SqsError


class ConfigError(Exception):
    """The config file is unreadable or wrong; the message says where."""


@dataclass
class QueueDeclaration:
    name: str
    region: str | None = None
    attributes: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    dead_letter: dict[str, Any] | None = None


# Each top-level key and what its value must be: (type, description for the error).
_SETTINGS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "host": (str, "a host name or address"),
    "port": (int, "a port number"),
    "data_dir": (str, "a directory"),
    "store": (str, "sqlite or a postgresql:// URL"),
    "store_listen": (str, "a postgresql:// URL or poll"),
    "shards": (dict, "a mapping of shard name to a postgresql:// URL, the catalog shard first"),
    "pool_size": (int, "a number of connections"),
    "mode": (str, "strict or relaxed"),
    "account_id": ((str, int), "an account id"),
    "region": (str, "a region name"),
    "access_keys": (dict, "a mapping of access key id to a secret or a key policy"),
    "allow_open": (bool, "true or false"),
    "metrics_token": (str, "a bearer token"),
    "metrics_port": (int, "a port number"),
    "console_session_hours": ((int, float), "a number of hours"),
    "queues": (list, "a list of queues"),
    "log_level": (str, "debug, info, warning or error"),
    "request_timeout": ((int, float), "seconds"),
    "max_connections": (int, "a number of connections"),
    "tls_cert": (str, "a PEM certificate file"),
    "tls_key": (str, "a PEM private key file"),
    "payload_dir": (str, "a directory, or off"),
    "payload_max_bytes": (int, "a number of bytes"),
}


def load(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    unknown = set(data) - set(_SETTINGS)
    if unknown:
        raise ConfigError(f"{path}: unknown keys {sorted(unknown)}; known: {sorted(_SETTINGS)}")
    for key, value in data.items():
        kind, what = _SETTINGS[key]
        wrong = not isinstance(value, kind) or isinstance(value, bool) and kind is not bool
        if value is not None and wrong:
            raise ConfigError(f"{path}: {key}: expected {what}, not {value!r}")
    if "account_id" in data:
        data["account_id"] = str(data["account_id"])
    data["access_keys"] = access_keys(data.get("access_keys") or {}, f"{path}: access_keys")
    return data


def access_keys(raw: dict[Any, Any], where: str) -> dict[str, AccessKey]:
    """`KEY: secret`, or `KEY: {secret, session_token, actions, queues}` (see access.py)."""
    keys = {}
    for key_id, entry in raw.items():
        if not isinstance(key_id, str) or not key_id:
            raise ConfigError(f"{where}: expected key ids as text, not {key_id!r}")
        if isinstance(entry, str):
            entry = {"secret": entry}
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: {key_id}: expected a secret or a mapping")
        unknown = set(entry) - {"secret", "session_token", "actions", "queues"}
        if unknown:
            raise ConfigError(f"{where}: {key_id}: unknown keys {sorted(unknown)}")
        secret, token = entry.get("secret"), entry.get("session_token")
        if not isinstance(secret, str) or not secret:
            raise ConfigError(f"{where}: {key_id}: secret: expected text")
        if token is not None and (not isinstance(token, str) or not token):
            raise ConfigError(f"{where}: {key_id}: session_token: expected text")
        keys[key_id] = AccessKey(
            key_id, secret, token,
            normalized_actions(_patterns(entry, "actions", f"{where}: {key_id}")),
            _patterns(entry, "queues", f"{where}: {key_id}"))
    return keys


def _patterns(entry: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = entry.get(key, list(EVERYTHING))
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
        raise ConfigError(f"{where}: {key}: expected a list of patterns, not {value!r}")
    return tuple(value)


def queue_declarations(raw: Any) -> list[QueueDeclaration]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError("queues: expected a list")
    declarations = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ConfigError(f"queues[{i}]: expected a mapping with a name")
        where = f"queues[{i}] ({item['name']})"
        unknown = set(item) - {"name", "region", "attributes", "tags", "dead_letter"}
        if unknown:
            raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
        region = item.get("region")
        if region is not None and not isinstance(region, str):
            raise ConfigError(f"{where}: region: expected a region name")
        attributes = {str(k): v if isinstance(v, str) else _attr_text(v)
                      for k, v in _mapping(item, "attributes", where).items()}
        tags = {str(k): str(v) for k, v in _mapping(item, "tags", where).items()}
        declarations.append(QueueDeclaration(item["name"], region, attributes, tags,
                                             _dead_letter(item, where)))
    return declarations


def _mapping(item: dict[str, Any], key: str, where: str) -> dict[Any, Any]:
    value = item.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {key}: expected a mapping, not {value!r}")
    return value


def _dead_letter(item: dict[str, Any], where: str) -> dict[str, Any] | None:
    if item.get("dead_letter") is None:
        return None
    dead_letter = _mapping(item, "dead_letter", where)
    unknown = set(dead_letter) - {"queue", "max_receive_count"}
    if unknown or not isinstance(dead_letter.get("queue"), str):
        raise ConfigError(f"{where}: dead_letter: expected {{queue: NAME, "
                          "max_receive_count: N}")
    count = dead_letter.get("max_receive_count", 10)
    if not isinstance(count, int) or isinstance(count, bool):
        raise ConfigError(f"{where}: dead_letter: max_receive_count: expected a whole "
                          f"number, not {count!r}")
    return {"queue": dead_letter["queue"], "max_receive_count": count}


def _attr_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return orjson.dumps(value).decode()
    return str(value)


async def declare_queues(service: Service, declarations: list[QueueDeclaration],
                         account_id: str, default_region: str) -> None:
    """Create declared queues (dead-letter targets first), updating ones that exist."""
    ordered = sorted(declarations, key=lambda d: d.dead_letter is not None)
    for decl in ordered:
        ctx = RequestContext(decl.region or default_region, account_id, "http://localhost")
        attributes = dict(decl.attributes)
        if decl.dead_letter:
            attributes["RedrivePolicy"] = orjson.dumps(
                {"deadLetterTargetArn": ctx.queue_arn(decl.dead_letter["queue"]),
                 "maxReceiveCount": decl.dead_letter["max_receive_count"]}).decode()
        try:
            request: dict[str, Any] = {"QueueName": decl.name, "Attributes": attributes}
            if decl.tags:
                request["tags"] = decl.tags
            try:
                await service.create_queue(ctx, request)
            except QueueNameExists:
                changes = {k: v for k, v in attributes.items() if k != "FifoQueue"}
                await service.set_queue_attributes(ctx, {"QueueUrl": decl.name,
                                                         "Attributes": changes})
            if decl.tags:
                await service.tag_queue(ctx, {"QueueUrl": decl.name, "Tags": decl.tags})
        except SqsError as error:
            raise ConfigError(f"queue {decl.name}: {error.code}: {error.message}") from None
