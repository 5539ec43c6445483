"""Orphan clean-up: host queues of dead clients are swept by live ones, once, when empty."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conveyor.tempqueues import TemporaryQueuesClient
from conveyor.tempqueues.names import HEARTBEAT_TAG, RETENTION_TAG
from tests.support import ServerProcess

from .test_virtual import wait_until


def exists(sqs: Any, url: str) -> bool:
    name = url.rsplit("/", 1)[1]
    return url in sqs.list_queues(QueueNamePrefix=name).get("QueueUrls", [])


def stale_queue(sqs: Any, name: str) -> str:
    """A queue that looks like a dead client's host: retention 1 s, heartbeat a minute old."""
    old_ms = int((time.time() - 60) * 1000)
    return sqs.create_queue(QueueName=name,
                            tags={RETENTION_TAG: "1", HEARTBEAT_TAG: str(old_ms)})["QueueUrl"]


def test_killed_clients_host_queue_is_swept(server: ServerProcess, prefix: str,
                                            make_temporary: Callable[..., TemporaryQueuesClient]
                                            ) -> None:
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("orphan_client.py")), server.url, prefix,
         "2"], stdout=subprocess.PIPE, text=True)
    try:
        orphan = child.stdout.readline().strip() if child.stdout else ""
        assert orphan.rsplit("/", 1)[1].startswith(prefix)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    live = make_temporary(retention_s=2, heartbeat_interval_s=0.2, sweep_period_s=1)
    live.create_queue(QueueName="alive")
    (own,) = live.host_queue_urls
    assert live.sweeper is not None
    assert wait_until(lambda: not exists(live.sqs, orphan), timeout_s=20)
    assert orphan in live.sweeper.stats.deleted
    # The live client's host queue was checked too, but its heartbeat is fresh.
    assert wait_until(lambda: (any(url == own for _, url in live.sweeper.stats.checks)))
    assert exists(live.sqs, own) and own not in live.sweeper.stats.deleted


def test_non_empty_idle_queue_is_kept(prefix: str,
                                      make_temporary: Callable[..., TemporaryQueuesClient]
                                      ) -> None:
    live = make_temporary(sweep_period_s=1)
    sqs = live.sqs
    full, empty = stale_queue(sqs, prefix + "full"), stale_queue(sqs, prefix + "empty")
    untagged = sqs.create_queue(QueueName=prefix + "plain")["QueueUrl"]  # not temporary
    sqs.send_message(QueueUrl=full, MessageBody="still needed")
    assert live.sweeper is not None
    stats = live.sweeper.stats
    assert wait_until(lambda: not exists(sqs, empty), timeout_s=20)
    assert wait_until(lambda: {full, untagged} <= {url for _, url in stats.checks})
    assert exists(sqs, full) and exists(sqs, untagged)
    assert list(stats.deleted) == [empty]


def test_two_live_clients_split_sweeping(prefix: str,
                                         make_temporary: Callable[..., TemporaryQueuesClient]
                                         ) -> None:
    first, second = make_temporary(sweep_period_s=1), make_temporary(sweep_period_s=1)
    orphans = [stale_queue(first.sqs, f"{prefix}orphan{i}") for i in range(8)]
    assert wait_until(lambda: not any(exists(first.sqs, u) for u in orphans), timeout_s=20)
    time.sleep(1.5)  # let both run another period or so
    stats = [c.sweeper.stats for c in (first, second) if c.sweeper is not None]
    lists = Counter(epoch for s in stats for epoch in s.lists)
    checks = Counter(check for s in stats for check in s.checks)
    deleted = Counter(url for s in stats for url in s.deleted)
    assert lists and max(lists.values()) == 1  # each period listed by one client only
    assert max(checks.values()) == 1  # each queue checked once per period, not once per client
    assert set(deleted) == set(orphans) and max(deleted.values()) == 1
