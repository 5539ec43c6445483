"""The boto3 client every load process uses, and the timestamped message body."""

from __future__ import annotations

import time
from typing import Any

import boto3
from botocore.config import Config

REGION = "us-east-1"


def make_client(endpoint: str, read_timeout_s: float = 60.0) -> Any:
    """An SQS client for a local endpoint: one attempt per call, no retries to hide errors."""
    config = Config(
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=5,
        read_timeout=read_timeout_s,
        max_pool_connections=4,
    )
    return boto3.session.Session().client(
        "sqs",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        config=config,
    )


def stamped_body(size_bytes: int) -> str:
    """A body of size_bytes that starts with the send time (CLOCK_MONOTONIC, system-wide)."""
    stamp = f"{time.monotonic():.6f} "
    return stamp + "x" * max(0, size_bytes - len(stamp))


def sent_at(body: str) -> float:
    """The send time that stamped_body put in front of a body."""
    return float(body.split(" ", 1)[0])
