"""Log output of every long-running part: plain lines, or one JSON object per line.

`conveyor --log-format json ...` (or CONVEYOR_LOG_FORMAT=json, which the processes that
`conveyor up` and the scaler start inherit) writes each record as a JSON object with
`time` (UTC, ISO 8601), `level`, `logger` and `message`, an `exception` when there is one,
and the fields a call site passes in `extra=` (`message_id`, `queue`, ...), so that a log
shipper can index them without parsing the text.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime

import orjson

FORMATS = ("text", "json")
ENV = "CONVEYOR_LOG_FORMAT"
TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"

# What every LogRecord carries; anything else on a record came from `extra=`.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        out |= {k: v for k, v in vars(record).items() if k not in _STANDARD}
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


def setup(level: str) -> None:
    """Log at `level` to stderr in the format CONVEYOR_LOG_FORMAT names (text by default)."""
    handler = logging.StreamHandler()
    json_lines = os.environ.get(ENV, "text").lower() == "json"
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler])
