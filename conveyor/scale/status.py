"""The scaler's own port: GET /metrics (Prometheus), /status (JSON), /health."""

from __future__ import annotations

from conveyor.scale.scaler import Scaler
from conveyor.worker.status import StatusServer


def scale_status_server(scaler: Scaler, host: str, port: int) -> StatusServer:
    """The worker's status site over one Scaler, with its last decision on /status."""
    return StatusServer(host, port, scaler.metrics, lambda: (True, {"status": "ok"}),
                        {"/status": scaler.status})
