"""Run a markdown file's code blocks top to bottom, as a reader pasting them would.

The blocks are read from the markdown itself, so a page and its test cannot drift. Bash
blocks run in one bash session, as in one terminal (exports and background jobs carry
over); Python blocks run with this interpreter. The reader's machine has no AWS
configuration: HOME is an empty directory and every AWS_* variable is removed, so each
command must name its endpoint, region and credentials itself. Only ports change: 9324
(the queue server) and 8000 (the reader's app) become free ports, in the blocks' text and,
where a block relies on a default, through CONVEYOR_PORT and CONVEYOR_ENDPOINT_URL.
`.venv/bin/conveyor` (and `conveyor` after `source .venv/bin/activate`) runs this
checkout's code with `python -P`, so the working directory is never imported from.

An HTML comment just before a block, `<!-- test: ... -->`, tells the runner more, in
directives separated by `;`:

- `save as FILE`: the block is a file the reader creates, not a command;
- `background until "TEXT"`: the block runs on (a second terminal) once it printed TEXT;
  at the end it gets Ctrl-C, in reverse order of starting;
- `stops with "TEXT"`: after its Ctrl-C, the background block must print TEXT and exit;
- `prints "TEXT"`: the block's output must contain TEXT;
- `eventually prints "TEXT"`: the block is run again (as a reader would, a moment later)
  until its output contains TEXT: for counts that follow an event by a moment, as SQS's
  approximate counts do;
- `then "TEXT"`: after the block, some background block prints TEXT (a new line of it);
- `skip (why)`: shown to the reader, never run (the whole comment is the reason);
  a `text` block is output shown to the reader, never run either;
- any other `NAME "ARG"`: a check the test hands the runner under NAME.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_BLOCK = re.compile(r"(?:<!-- (?P<note>[^\n]*?) -->\n)?```(?P<lang>\w+)[^\n]*\n(?P<code>.*?)```",
                    re.DOTALL)
# A directive's argument runs from its first double quote to its last (it may hold quotes).
_DIRECTIVE = re.compile(r'^(?P<name>[a-z][a-z ]*?)\s*(?:"(?P<arg>.*)")?$')
_DONE = "__MARKDOWN_BLOCK_DONE__"
WAIT_S = 120.0  # the longest a block or an expected line may take (a cron minute included)


@dataclass
class Block:
    lang: str
    code: str
    directives: list[tuple[str, str]] = field(default_factory=list)

    def arg(self, name: str) -> str | None:
        """The argument of the first directive called `name`, if any."""
        return next((arg for key, arg in self.directives if key == name), None)

    def args(self, name: str) -> list[str]:
        return [arg for key, arg in self.directives if key == name]


def blocks(path: Path, section: str | None = None) -> list[Block]:
    """The code blocks of `path` (of its `section` heading only, when given), in order."""
    text = path.read_text()
    if section is not None:
        start = text.index(section)
        level = section.split(" ", 1)[0]
        end = text.find(f"\n{level} ", start + len(section))
        text = text[start:end if end != -1 else len(text)]
    found = []
    for match in _BLOCK.finditer(text):
        found.append(Block(match["lang"], match["code"], _directives(match["note"] or "")))
    return found


def _directives(note: str) -> list[tuple[str, str]]:
    if not note.startswith("test:"):
        return []
    body = note.removeprefix("test:").strip()
    if body.startswith("skip"):  # the rest is the reason, whatever it holds
        return [("skip", body.removeprefix("skip").strip())]
    out = []
    for part in body.split(";"):
        if not part.strip():
            continue
        if part.strip().startswith("save as "):
            out.append(("save as", part.strip().removeprefix("save as ").strip()))
            continue
        match = _DIRECTIVE.match(part.strip())
        assert match, f"unreadable test directive {part!r} in <!-- {note} -->"
        out.append((match["name"], match["arg"] or ""))
    return out


class Reader:
    """A fresh directory with `.venv/bin/conveyor`, no AWS configuration, free ports."""

    def __init__(self, home: Path, port: int, app_port: int) -> None:
        self.cwd, self.port, self.app_port = home, port, app_port
        bin_dir = home / ".venv" / "bin"
        bin_dir.mkdir(parents=True)
        shim = bin_dir / "conveyor"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -P -m conveyor "$@"\n')
        shim.chmod(0o755)
        (bin_dir / "activate").write_text(f'export PATH="{bin_dir}:$PATH"\n')
        env = {name: value for name, value in os.environ.items()
               if not name.startswith("AWS_")}
        self.env = {**env, "HOME": str(home), "PYTHONPATH": str(ROOT),
                    "CONVEYOR_PORT": str(port),
                    "CONVEYOR_ENDPOINT_URL": f"http://127.0.0.1:{port}",
                    "PATH": os.pathsep.join((str(bin_dir), str(Path(sys.executable).parent),
                                             os.environ.get("PATH", "")))}

    def ports(self, code: str) -> str:
        """The block's text with the test's ports."""
        code = code.replace("9324", str(self.port))
        return re.sub(r"(?<![0-9])8000(?![0-9])", str(self.app_port), code)


class Shell:
    """One bash session fed block after block, like a terminal."""

    def __init__(self, reader: Reader, log: Path) -> None:
        self.log = log
        self._err = open(log, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(["bash"], cwd=reader.cwd, env=reader.env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err, text=True, start_new_session=True)

    def run(self, code: str, timeout_s: float = WAIT_S) -> str:
        """Run `code` with `set -e`; return its standard output."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"set -e\n{code}\nset +e\necho {_DONE}\n")
        self.proc.stdin.flush()
        out: list[str] = []
        deadline = time.monotonic() + timeout_s
        for line in self.proc.stdout:
            if line.strip() == _DONE:
                return "".join(out)
            out.append(line)
            if time.monotonic() > deadline:
                break
        pytest.fail(f"block failed:\n{code}\n--- output ---\n{''.join(out)}"
                    f"--- errors ---\n{self.log.read_text()[-3000:]}")

    def close(self) -> None:
        """End the session and everything it started in the background."""
        stop_group(self.proc)
        self._err.close()


class Background:
    """A long-running block in a terminal of its own; its output is collected."""

    def __init__(self, code: str, reader: Reader) -> None:
        self.code = code
        self.proc = subprocess.Popen(["bash", "-c", code], cwd=reader.cwd, env=reader.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, text: str, after_line: int = 0, timeout_s: float = WAIT_S) -> bool:
        """Until a line from `after_line` on holds `text`; False on timeout or exit."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines[after_line:]):
                return True
            if self.proc.poll() is not None:
                self._reader.join(5)
                return any(text in line for line in self.lines[after_line:])
            time.sleep(0.05)
        return False

    def interrupt(self) -> str:
        """Ctrl-C, as in its terminal; the output after it."""
        before = len(self.lines)
        stop_group(self.proc, signal.SIGINT)
        self._reader.join(10)
        return "".join(self.lines[before:])


def stop_group(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Signal a process group, then wait for it (killing it if it will not go)."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def wait_closed(port: int, timeout_s: float = 30) -> None:
    """Until nothing listens on `port` any more."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) != 0:
                return
        time.sleep(0.1)
    pytest.fail(f"port {port} still in use")


Check = Callable[[str], None]


def run_blocks(found: list[Block], reader: Reader, checks: dict[str, Check] | None = None,
               before_block: Callable[[Block, Shell], Shell] | None = None) -> None:
    """Run `found` top to bottom in `reader`'s directory; fail the test on the first
    block that fails or does not print what its directives say.

    `before_block` may replace the shell before a block runs (say, to stop what the
    earlier blocks started, as the page tells the reader to)."""
    checks = checks or {}
    shell = Shell(reader, reader.cwd / "shell.log")
    background: list[Background] = []
    try:
        for block in found:
            if block.arg("skip") is not None or block.lang == "text":
                continue  # `text` blocks show output, not commands
            if before_block is not None:
                shell = before_block(block, shell)
            marks = [len(bg.lines) for bg in background]
            code = reader.ports(block.code)
            name = block.arg("save as")
            if name:
                (reader.cwd / name).write_text(code)
                continue
            until = block.arg("background until")
            if until is not None:
                assert block.lang == "bash", f"a background {block.lang} block"
                started = Background(code, reader)
                background.append(started)
                if not started.wait_for(until):
                    pytest.fail(f"{code}\nnever printed {until!r}:\n{started.output}")
                continue
            out = _run_one(block, code, shell, reader)
            for text in block.args("eventually prints"):
                deadline = time.monotonic() + WAIT_S
                while text not in out and time.monotonic() < deadline:
                    time.sleep(0.5)
                    out = _run_one(block, code, shell, reader)
                assert text in out, f"{code}\nnever printed {text!r}; last printed:\n{out}"
            for text in block.args("prints"):
                assert text in out, f"{code}\nshould print {text!r}; printed:\n{out}"
            for text in block.args("then"):
                _expect_background(background, marks, text, code)
            for key, arg in block.directives:
                if key not in _KNOWN:
                    assert key in checks, f"no check {key!r} for <!-- test: {key} ... -->"
                    checks[key](arg)
        for bg in reversed(background):
            rest = bg.interrupt()
            for text in _block_of(found, bg.code, reader).args("stops with"):
                assert text in rest, f"{bg.code}\nafter Ctrl-C: {rest}"
                assert bg.proc.returncode == 0, f"{bg.code}\nexit {bg.proc.returncode}: {rest}"
    finally:
        for bg in reversed(background):
            if bg.proc.poll() is None:
                stop_group(bg.proc, signal.SIGINT)
        shell.close()


_KNOWN = {"save as", "background until", "stops with", "prints", "eventually prints", "then",
          "skip"}


def _run_one(block: Block, code: str, shell: Shell, reader: Reader) -> str:
    if block.lang == "bash":
        return shell.run(code)
    if block.lang == "python":
        done = subprocess.run([sys.executable, "-c", code], cwd=reader.cwd, env=reader.env,
                              capture_output=True, text=True, timeout=WAIT_S)
        assert done.returncode == 0, f"{code}\n{done.stdout}\n{done.stderr}"
        return done.stdout
    pytest.fail(f"a {block.lang} block: say how to run it (or `<!-- test: skip ... -->`)")


def _expect_background(background: list[Background], marks: list[int], text: str,
                       code: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        for bg, mark in zip(background, marks, strict=False):
            if any(text in line for line in bg.lines[mark:]):
                return
        time.sleep(0.05)
    outputs = "\n---\n".join(bg.output[-2000:] for bg in background)
    pytest.fail(f"{code}\nthen nothing printed {text!r}:\n{outputs}")


def _block_of(found: list[Block], code: str, reader: Reader) -> Block:
    return next(block for block in found if reader.ports(block.code) == code)
