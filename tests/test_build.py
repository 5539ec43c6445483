"""The two builds: pure Python, and the one mypyc compiles (setup.py, `make test-compiled`).

The suite runs on both; these tests make sure each run tests the build it means to, and
that the modules setup.py compiles keep the types mypyc needs (a type error there breaks
only the compiled build, so the pure-Python run must catch it first)."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETUP = runpy.run_path(str(ROOT / "setup.py"), run_name="setup_lists")
# Set by `make test-compiled`: this run must be on the compiled build, its servers too.
EXPECT_COMPILED = os.environ.get("CONVEYOR_EXPECT_COMPILED") == "1"


def test_compiled_modules_pass_mypy() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", *SETUP["MYPY_FLAGS"],
                           *SETUP["COMPILED"]], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_build_this_run_means() -> None:
    """Each compiled module, as a new process imports it, is an extension exactly when this
    run is the compiled one, and `conveyor --version` says so."""
    modules = [path.removesuffix(".py").replace("/", ".") for path in SETUP["COMPILED"]]
    code = ("import importlib, sys\n"
            "for name in sys.argv[1:]: print(importlib.import_module(name).__file__)")
    done = subprocess.run([sys.executable, "-c", code, *modules], capture_output=True,
                          text=True, check=True)
    files = done.stdout.split()
    assert len(files) == len(modules)
    for module, file in zip(modules, files, strict=True):
        assert file.endswith(tuple(EXTENSION_SUFFIXES)) == EXPECT_COMPILED, (module, file)
    version = subprocess.run([sys.executable, "-m", "conveyor", "--version"],
                             capture_output=True, text=True, check=True).stdout
    assert version.endswith("(compiled with mypyc)\n" if EXPECT_COMPILED
                            else "(pure Python)\n"), version
