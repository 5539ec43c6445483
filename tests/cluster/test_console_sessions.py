"""Console sessions on a cluster: signed in through one node, signed in on every node.

Behind one address a load balancer sends each request of a browser to any node. A session
cookie carries its own proof (conveyor/server/console/sessions.py), so every node with the
same access keys takes it, and its CSRF token, without sticky sessions.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.conftest import keyed_nodes
from tests.server.helpers import Browser
from tests.support import ServerProcess

KEY, SECRET = "AKIDCLUSTER", "cluster-console-secret"


@pytest.fixture
def keyed_pair(tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Two nodes on one PostgreSQL schema with the same access key."""
    with keyed_nodes(tmp_path, KEY, SECRET) as nodes:
        yield nodes


def test_a_session_made_on_one_node_holds_on_the_other(
        keyed_pair: tuple[ServerProcess, ServerProcess]) -> None:
    a, b = keyed_pair
    on_a = Browser(a.url)
    assert on_a.sign_in(KEY, SECRET).status == 303
    token = on_a.get("/console").form_token()

    on_b = Browser(b.url, dict(on_a.cookies))  # the same browser, balanced to node b
    page = on_b.get("/console")
    assert page.status == 200, page.header("location")
    assert f"Signed in as <code>{KEY}</code>" in page.text
    assert page.form_token() == token  # the session's CSRF token, whichever node asks
    created = on_b.post("/console/create-queue", {"csrf": token, "name": "made-through-b",
                                                  "region": "us-east-1"})
    assert created.status == 303, created.text[:300]
    assert on_a.get("/console/queues/us-east-1/made-through-b").status == 200

    assert on_b.post("/console/sign-out", {"csrf": token}).status == 303
    assert on_b.get("/console").status == 303
