"""The documentation site (mkdocs.yml, docs/) builds with `mkdocs build --strict`: a broken
link or anchor, a page missing from the navigation, or a generated reference table that no
longer matches the code fails here, so `make test` and CI check the docs as they check the
code. The generated tables are checked against the code they come from."""

from __future__ import annotations

import re
import subprocess
import sys
from html import unescape
from pathlib import Path

import click
import pytest

from conveyor.cli import main
from conveyor.worker.options import OPTIONS
from tests.markdown_runner import ROOT


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}{done.stderr}"
    return out


def _text(page: Path) -> str:
    return unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def _commands(group: click.Command, path: tuple[str, ...] = ("conveyor",)):
    yield path, group
    if isinstance(group, click.Group):
        for name, command in group.commands.items():
            if not command.hidden:
                yield from _commands(command, (*path, name))


def test_every_command_and_option_is_in_the_cli_reference(site: Path) -> None:
    text = _text(site / "reference" / "cli.html")
    for path, command in _commands(main):
        assert " ".join(path) in text, f"{' '.join(path)} missing from the reference"
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:  # as --help
                assert param.opts[0] in text, f"{' '.join(path)} {param.opts[0]} missing"


def test_every_worker_option_is_in_the_worker_reference(site: Path) -> None:
    text = _text(site / "reference" / "worker-options.html")
    for option in OPTIONS:
        for name in (option.name, option.flag, option.env):
            assert name in text, f"{name} missing from the worker options"


def test_the_generated_pages_hold_no_marker(site: Path) -> None:
    for page in site.rglob("*.html"):
        assert "<!-- generated:" not in page.read_text(), page


def test_the_screenshots_are_in_the_site(site: Path) -> None:
    shots = sorted(p.name for p in (ROOT / "docs").glob("*.png"))
    assert shots and all((site / name).exists() for name in shots)
    console = (site / "console.html").read_text()
    assert all(name in console for name in shots), "every screenshot shown on the console page"


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The strict build is what catches a broken link: prove it on a copy of the docs."""
    docs = tmp_path / "docs"
    subprocess.run(["cp", "-a", str(ROOT / "docs"), str(docs)], check=True)
    page = docs / "tutorial.md"
    page.write_text(page.read_text() + "\n[gone](no-such-page.md)\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text((ROOT / "mkdocs.yml").read_text())
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "--config-file", str(config), "--site-dir", str(tmp_path / "site")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "no-such-page.md" in done.stdout + done.stderr
