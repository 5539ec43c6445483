"""Console sign-in throttling on a cluster: a guess on one node counts on every node.

Failed sign-ins are counted in the shared PostgreSQL store (service/signins.py), so a
guesser whom a load balancer spreads over the nodes meets one count, not one per node. The
schedule and its source are those of tests/server/test_console_throttle.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.conftest import keyed_nodes
from tests.server.helpers import Browser, advance_clock
from tests.server.test_console_throttle import KEY, SECRET, fail, retry_after
from tests.support import ServerProcess


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Two nodes on one PostgreSQL schema, with the same key and clocks tests move."""
    with keyed_nodes(tmp_path, KEY, SECRET, "--dev-clock") as nodes:
        yield nodes


def test_failures_on_one_node_lock_the_key_on_the_other(
        pair: tuple[ServerProcess, ServerProcess]) -> None:
    """Failures through a alone (a's clock moved past each lock) lock the key on b, whose
    clock was never moved: the lock lies as far ahead of it, or further."""
    a, b = pair
    wait_s = fail(Browser(a.url), [a.url], 9)  # locked 16 s after the ninth
    on_b = Browser(b.url).sign_in(KEY, SECRET)  # the right secret, on the other node
    assert on_b.status == 429
    assert retry_after(on_b) >= wait_s
    assert "Too many failed sign-ins" in on_b.text


def test_the_schedule_runs_across_nodes_and_ends_on_both(
        pair: tuple[ServerProcess, ServerProcess]) -> None:
    """Tries alternate between the nodes (moving both clocks past each lock): the lock
    doubles with each as one count would; then the right secret waits on either node until
    the lock has passed, and signs in."""
    a, b = pair
    browser = Browser(a.url)
    wait_s = fail(browser, [a.url, b.url], 9)  # 16 s after the ninth, counted on both
    assert wait_s >= 15
    for node in (a, b):
        locked = Browser(node.url).sign_in(KEY, SECRET)
        assert locked.status == 429, node.url
        assert 0 < retry_after(locked) <= wait_s
    for node in (a, b):
        advance_clock(node.url, wait_s + 1)
    assert Browser(b.url).sign_in(KEY, SECRET).status == 303
    assert Browser(a.url).sign_in(KEY, SECRET).status == 303
