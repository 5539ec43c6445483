"""The schedule in force: cron.yaml reloaded when it changes, the last good one kept on error."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from conveyor.clock import Clock
from conveyor.cron.cronfile import CronFileError, Task, load_cron_file

log = logging.getLogger(__name__)

# How often the file's metadata is looked at; a change shows within this.
RELOAD_EVERY_S = 1.0

Signature = tuple[int, int, int] | None  # (inode, size, mtime_ns), None when missing


class CronSource:
    """Holds the current tasks of one cron.yaml and reloads it when its metadata changes.

    A bad file is logged (with its line and problem) and the last good schedule stays in
    force; a missing file means no periodic tasks.
    """

    def __init__(self, path: Path | None, *, clock: Clock,
                 reload_every_s: float = RELOAD_EVERY_S,
                 on_error: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.tasks: tuple[Task, ...] = ()
        self.error: str | None = None
        self._signature: Signature = None
        self._checked_s = -float("inf")
        self._reload_every_s = reload_every_s
        self._on_error = on_error
        self._clock = clock

    def refresh(self, force: bool = False) -> tuple[Task, ...]:
        """Reload if the file changed (looked at no more than every reload_every_s)."""
        now = self._clock.monotonic_s()
        if self.path is None or (not force and now - self._checked_s < self._reload_every_s):
            return self.tasks
        self._checked_s = now
        signature = _signature(self.path)
        if signature == self._signature and not force:
            return self.tasks
        self._signature = signature
        if signature is None:
            if self.tasks:
                log.warning("cron file %s is gone: no periodic tasks", self.path)
            self.tasks, self.error = (), None
            return self.tasks
        try:
            tasks = load_cron_file(self.path)
        except CronFileError as exc:
            self.error = str(exc)
            kept = f"keeping the last good schedule ({len(self.tasks)} tasks)"
            log.error("invalid cron file, %s: %s", kept, exc)
            if self._on_error is not None:
                self._on_error(self.error)
            return self.tasks
        self.tasks, self.error = tasks, None
        log.info("cron file %s loaded: %d tasks (%s)", self.path, len(tasks),
                 ", ".join(f"{t.name} {t.schedule.text!r}" for t in tasks) or "none")
        return self.tasks


def _signature(path: Path) -> Signature:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)
