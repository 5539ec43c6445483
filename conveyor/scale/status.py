"""The scaler's own port: GET /metrics (Prometheus), /status (JSON), /health."""

from __future__ import annotations

from conveyor.runtime.status import StatusServer
from conveyor.scale.scaler import Scaler

# Where `conveyor scale run` serves /status and `conveyor scale status` looks by default.
DEFAULT_STATUS_PORT = 9330
DEFAULT_STATUS_URL = f"http://127.0.0.1:{DEFAULT_STATUS_PORT}"


def scale_status_server(scaler: Scaler, host: str, port: int) -> StatusServer:
    """The worker's status site over one Scaler, with its last decision on /status."""
    return StatusServer(host, port, scaler.metrics, lambda: (True, {"status": "ok"}),
                        {"/status": scaler.status})
