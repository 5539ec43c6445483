"""The how-to pages' examples, run top to bottom as written (tests/markdown_runner.py), on
a machine with no AWS configuration. A page joins by being listed here; its blocks say
with `<!-- test: ... -->` comments what they start and print."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.markdown_runner import ROOT, Reader, blocks, run_blocks
from tests.support import free_port

PAGES = ["how-to/large-payloads.md", "how-to/elastic-beanstalk.md", "how-to/security.md",
         "operations/backups.md"]


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run(page: str, tmp_path: Path) -> None:
    found = blocks(ROOT / "docs" / page)
    assert any(block.directives for block in found), f"{page}: nothing told to check"
    run_blocks(found, Reader(tmp_path, free_port(), free_port()))
