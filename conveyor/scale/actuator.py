"""What every actuator offers the scaler: read the fleet, move it toward a size."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from conveyor.scale.protection import WorkerView

# A worker's /health status while it serves its queue: "app-down" is a worker holding its
# messages while its app does not answer (in service: another worker would not help).
IN_SERVICE = ("ok", "app-down")


@dataclass(frozen=True, slots=True)
class ScaleResult:
    """What one `scale_to` did: workers started, stopped, and held back by protection."""

    started: int = 0
    stopped: int = 0
    protected: int = 0


class Actuator(Protocol):
    """Local processes, a Kubernetes Deployment, or a test's fake."""

    async def refresh(self) -> list[WorkerView]:
        """The fleet as it is now."""
        ...

    async def scale_to(self, desired: int, views: Sequence[WorkerView]) -> ScaleResult:
        """Move toward `desired` workers; never stop a busy one."""
        ...

    async def close(self) -> None:
        """Release what the actuator holds (the local one drains its workers)."""
        ...
