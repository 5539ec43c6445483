"""The README's tour, run top to bottom as written (tests/markdown_runner.py), on a machine
with no AWS configuration: `conveyor up` in front of the reader's app on :8000 (here an app
that records what it is POSTed), then the jobs sent from the shell and from boto3, each
checked to reach the app at /tasks, then Ctrl-C."""

from __future__ import annotations

import re
from pathlib import Path

from tests.markdown_runner import ROOT, Reader, blocks, run_blocks
from tests.support import RecordingApp, free_port

SECTION = "## A 10-line tour"


def test_readme_tour_runs_top_to_bottom(tmp_path: Path) -> None:
    found = blocks(ROOT / "README.md", SECTION)
    assert [b.lang for b in found] == ["bash", "bash", "python"]
    assert found[0].arg("background until") == "conveyor up: ready"
    app = RecordingApp(free_port())
    try:
        reader = Reader(tmp_path, free_port(), app.server.server_address[1])
        checks = {"app gets": lambda body: app.wait_for_post(body.encode(), "/tasks")}
        run_blocks(found, reader, checks)
    finally:
        app.close()


def test_readme_keeps_the_two_commands_first() -> None:
    text = (ROOT / "README.md").read_text()
    first = blocks(ROOT / "README.md")[0].code
    assert first.startswith("make run") and "make test" in first
    assert "Both need only Python 3.11+" in text
    assert "../" not in text, "the README links only inside the repository"


def test_readme_links_lead_to_files_in_the_repository() -> None:
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert links, "the README points into docs/"
    for link in links:
        if link.startswith(("http://", "https://")):
            continue
        target = (ROOT / link).resolve()
        assert target.is_relative_to(ROOT) and target.exists(), f"README links {link}"
