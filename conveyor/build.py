"""Which build of Conveyor is running: pure Python, or the one whose request path mypyc
compiled (setup.py's CONVEYOR_COMPILE=1). Both pass the same tests; `conveyor --version`
and the server's start-up line say which one this is."""

from __future__ import annotations

from importlib.machinery import EXTENSION_SUFFIXES
from importlib.util import find_spec

# A module setup.py always compiles: where it was found tells the build.
_WITNESS = "conveyor.sqs.shapes"


def compiled() -> bool:
    """Whether the request path runs compiled (an extension module, not a .py file)."""
    spec = find_spec(_WITNESS)
    return bool(spec and spec.origin and spec.origin.endswith(tuple(EXTENSION_SUFFIXES)))


def name() -> str:
    return "compiled with mypyc" if compiled() else "pure Python"
