"""docs/tutorial.md, every block run top to bottom as the page says (tests/markdown_runner.py):
its own app on :8000, `conveyor up`, a job, a failing job and its dead letter, a redrive, a
cron task and the console, on a machine with no AWS configuration."""

from __future__ import annotations

from pathlib import Path

from tests.markdown_runner import ROOT, Reader, blocks, run_blocks
from tests.support import free_port

TUTORIAL = ROOT / "docs" / "tutorial.md"


def test_tutorial_runs_top_to_bottom(tmp_path: Path) -> None:
    found = blocks(TUTORIAL)
    # The page's story, so a block dropped from the page (or its check) fails here.
    assert sum(bool(b.arg("background until")) for b in found) == 2
    assert any("redrive" in b.code and "moved 1 of 1" in b.args("prints") for b in found)
    assert any(b.arg("save as") == "cron.yaml" for b in found)
    run_blocks(found, Reader(tmp_path, free_port(), free_port()))
