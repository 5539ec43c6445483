"""Signed scheduled-job messages: the leader signs each run, the receiving daemon checks.

Anyone who may send to the worker queue could otherwise enqueue a scheduled-job message
and make the daemon POST any task, at any time, to any path. With a key shared by every
daemon of the queue (`CronSigningKey`), the leader adds the message attribute
`beanstalk.sqsd.conveyor-signature: v1=<hex HMAC-SHA256>` and a daemon POSTs only
messages whose signature is right.

The MAC covers the queue name, task name, path, scheduled time and body, encoded as one
JSON array so no two different messages share an input. The path and the queue are
covered besides what identifies the run: without the path a signed run could be re-sent
to another url, and without the queue a run signed for one queue could be replayed on
another queue that shares the key. The attribute lives under `beanstalk.sqsd.` so the
daemon does not pass it on to the app as an `X-Aws-Sqsd-Attr-*` header, and Elastic
Beanstalk's own sqsd ignores it.
"""

from __future__ import annotations

import hashlib
import hmac

import orjson

ATTR_SIGNATURE = "beanstalk.sqsd.conveyor-signature"
_VERSION = "v1"


def run_signature(key: str, queue_name: str, task: str, path: str, scheduled_at: str,
                  body: str) -> str:
    """The attribute value that signs one scheduled-job message."""
    signed = orjson.dumps([f"conveyor-cron-{_VERSION}", queue_name, task, path, scheduled_at,
                           body])
    return f"{_VERSION}={hmac.new(key.encode(), signed, hashlib.sha256).hexdigest()}"


def signature_matches(key: str, signature: str, queue_name: str, task: str, path: str,
                      scheduled_at: str, body: str) -> bool:
    """True if `signature` is the one `key` gives this message (compared in constant time)."""
    expected = run_signature(key, queue_name, task, path, scheduled_at, body)
    return hmac.compare_digest(expected.encode(), signature.encode())
