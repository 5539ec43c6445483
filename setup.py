"""The optional compiled build: `CONVEYOR_COMPILE=1` compiles the server's request path with
mypyc (as black and mypy ship themselves); without it, and for every editable install, the
package is the pure Python it always was. Everything else about the build is in
pyproject.toml. `make test-compiled` builds it and runs the tests on it; `conveyor --version`
says which build is running."""

import os
from glob import glob
from pathlib import Path

HERE = Path(__file__).resolve().parent  # the lists hold for any working directory

# The modules a request runs through (BENCHMARKS.md, "Per message"). Each must pass mypy
# (tests/test_build.py): mypyc trusts the annotations and checks them at run time. The
# Service class is made of parts (service/*.py), which mypyc compiles as traits (@trait):
# a compiled class has one base class at most, besides traits. A @dataclass's generated
# __init__ stays interpreted (four times the cost of one written out, compiled): the classes
# made for every message write theirs out (init=False). Left out: sqs/errors.py, whose
# classes' codes are read off the class.
COMPILED = [
    *sorted(glob("conveyor/service/*.py", root_dir=HERE)),
    "conveyor/server/app.py",
    "conveyor/server/authz.py",
    "conveyor/server/http.py",
    "conveyor/server/metrics.py",
    "conveyor/server/sigv4.py",
    "conveyor/server/waiters.py",
    "conveyor/store/base.py",
    "conveyor/store/journal.py",
    "conveyor/sqs/jsonproto.py",
    "conveyor/sqs/md5.py",
    "conveyor/sqs/queryproto.py",
    "conveyor/sqs/shapes.py",
    "conveyor/clock.py",
    "conveyor/ids.py",
]
# The modules around them stay interpreted: their types are read, not held to mypy.
MYPY_FLAGS = ["--ignore-missing-imports", "--follow-imports=silent"]

MYPY = "mypy==2.4.1"  # the compiler; the dev extra pins the same for tests/test_build.py

if __name__ == "__main__":  # as setuptools runs it (tests/test_build.py only reads the lists)
    from setuptools import setup

    if os.environ.get("CONVEYOR_COMPILE") == "1":
        try:
            from mypyc.build import mypycify
        except ImportError:  # a PEP 517 build asks for its requirements first: here, mypy
            setup(setup_requires=[MYPY])
            raise SystemExit(f"CONVEYOR_COMPILE=1: the build needs {MYPY}") from None
        setup(ext_modules=mypycify([*MYPY_FLAGS, *COMPILED], opt_level="3"),
              setup_requires=[MYPY])
    else:
        setup()
