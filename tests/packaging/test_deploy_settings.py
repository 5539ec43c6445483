"""Every CONVEYOR_* variable that a file under deploy/ (or the Containerfile) sets is one
that Conveyor reads: a misspelt name would be silently ignored where it is deployed."""

from __future__ import annotations

import re

from tests.packaging.conftest import ROOT

NAME = re.compile(r"\bCONVEYOR_[A-Z0-9_]*[A-Z0-9]\b")
# ${CONVEYOR_IMAGE:-...} in a compose file: the file's own parameters, not Conveyor's.
INTERPOLATION = re.compile(r"\$\{[A-Z0-9_]+")


def _known() -> set[str]:
    """Names written out in the source, and the worker's, made from its options table."""
    from conveyor.worker.options import OPTIONS

    written = {m for path in (ROOT / "conveyor").rglob("*.py")
               for m in NAME.findall(path.read_text())}
    return written | {option.env for option in OPTIONS}


def _deploy_files() -> list:
    files = [p for p in (ROOT / "deploy").rglob("*") if p.is_file()]
    return files + [p for p in (ROOT / "Containerfile",) if p.exists()]


def test_deploy_files_use_only_known_variables() -> None:
    known = _known()
    assert "CONVEYOR_DATA_DIR" in known and "CONVEYOR_WORKER_QUEUE_URL" in known
    unknown = {(str(p.relative_to(ROOT)), name) for p in _deploy_files()
               for name in NAME.findall(INTERPOLATION.sub("", p.read_text()))
               if name not in known}
    assert not unknown, sorted(unknown)
