"""The server's config file (YAML): listen address, store, keys, and queues to declare.

```yaml
port: 9324
data_dir: ./conveyor-data
mode: strict            # or relaxed
access_keys: {AKIDEXAMPLE: secret}
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


def load(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    known = {"host", "port", "data_dir", "store", "pool_size", "mode", "account_id", "region",
             "access_keys", "allow_open", "queues", "log_level"}
    unknown = set(data) - known
    if unknown:
        raise ConfigError(f"{path}: unknown keys {sorted(unknown)}; known: {sorted(known)}")
    return data


def queue_declarations(raw: Any) -> list[QueueDeclaration]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError("queues: expected a list")
    declarations = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or "name" not in item:
            raise ConfigError(f"queues[{i}]: expected a mapping with a name")
        unknown = set(item) - {"name", "region", "attributes", "tags", "dead_letter"}
        if unknown:
            raise ConfigError(f"queues[{i}] ({item['name']}): unknown keys {sorted(unknown)}")
        attributes = {k: v if isinstance(v, str) else _attr_text(v)
                      for k, v in (item.get("attributes") or {}).items()}
        declarations.append(QueueDeclaration(str(item["name"]), item.get("region"), attributes,
                                             {str(k): str(v) for k, v in
                                              (item.get("tags") or {}).items()},
                                             item.get("dead_letter")))
    return declarations


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
            target = decl.dead_letter.get("queue")
            count = decl.dead_letter.get("max_receive_count", 10)
            attributes["RedrivePolicy"] = orjson.dumps(
                {"deadLetterTargetArn": ctx.queue_arn(str(target)),
                 "maxReceiveCount": int(count)}).decode()
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
