"""How Conveyor starts Conveyor: `conveyor up` its queue server, the local actuator its
workers.

`python -m conveyor` would put the working directory first on the child's import path, so
a folder named `conveyor` there (a project's own package, the default data directory of
an older release) would be imported instead of Conveyor and break the child. `-P`
(Python 3.11+, `sys.flags.safe_path`) leaves the working directory out; the directory
this process imported Conveyor from is put on PYTHONPATH instead, so a child runs the
same code as its parent even when that is a source checkout rather than an installed
package. The console script is not used: it may belong to another installation than the
code that is running.
"""

from __future__ import annotations

import os
import site
import sys
from collections.abc import Mapping
from pathlib import Path

import conveyor


def conveyor_command(*args: str) -> list[str]:
    """The argv that runs `conveyor ARGS` with this interpreter and this Conveyor."""
    return [sys.executable, "-P", "-m", "conveyor", *args]


def conveyor_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment plus `extra`, with PYTHONPATH leading to this Conveyor
    when the interpreter would not find it by itself."""
    env = {**os.environ, **(extra or {})}
    root = str(Path(conveyor.__file__).resolve().parent.parent)
    if root not in _site_dirs():
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _site_dirs() -> set[str]:
    """site-packages directories, which are on every child's path already (and must not be
    put ahead of the standard library through PYTHONPATH)."""
    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    return {str(Path(d).resolve()) for d in dirs}
