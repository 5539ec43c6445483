"""Tell a Conveyor server each scaling decision, so that its console draws the timeline.

`ConveyorWorkers.RecordScalingDecision` (service/workers.py) keeps the queue's last ones in
the server's store. Only actions and changes of mind are sent (what the scaler logs at
INFO), so a scaler that holds steady costs the server nothing. An endpoint without that
API (Amazon SQS, other emulators) refuses the first call and is not asked again for an
hour (extensions.py); a failed call is dropped: the timeline must never slow the scaling.
"""

from __future__ import annotations

import logging
from typing import Any

from conveyor.client import SQSClient, SQSError, SQSTransportError
from conveyor.clock import Clock
from conveyor.runtime.extensions import Extension
from conveyor.runtime.presence import TARGET_PREFIX
from conveyor.scale.policy import Decision

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 5.0


def decision_json(decision: Decision, protected: int) -> dict[str, Any]:
    """The figures a timeline entry shows."""
    obs = decision.observation
    return {"policy": decision.policy, "direction": decision.direction,
            "current": decision.current, "desired": decision.desired,
            "reason": decision.reason, "backlog": decision.backlog,
            "visible": obs.visible, "in_flight": obs.in_flight,
            "metric": round(decision.metric, 3), "target": round(decision.target, 3),
            "protected": protected}


class Timeline:
    """Records one queue's scaling decisions on the server it talks to."""

    def __init__(self, sqs: SQSClient, queue_name: str, *, clock: Clock) -> None:
        self.sqs = sqs
        self.queue_name = queue_name
        self.extension = Extension("RecordScalingDecision", clock=clock)

    async def record(self, decision: dict[str, Any]) -> None:
        if not self.extension.usable:
            return
        try:
            await self.sqs.call("RecordScalingDecision",
                                {"Queue": self.queue_name, "Decision": decision},
                                timeout_s=CALL_TIMEOUT_S, target_prefix=TARGET_PREFIX)
        except SQSError as exc:
            if self.extension.refused(exc):
                log.debug("%s keeps no scaling timeline (%s)", self.sqs.endpoint_url, exc.code)
            return
        except SQSTransportError:
            return
        self.extension.worked()
