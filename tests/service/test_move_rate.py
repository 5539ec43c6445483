"""A message move task's MaxNumberOfMessagesPerSecond, on a clock that moves only when the
test says: what is moved is counted per step of the clock, never timed."""

from __future__ import annotations

import json
from pathlib import Path

from tests.store.conformance import CTX, Sqs, run

RUNS_PER_STEP = 5  # the mover runs often; the rate, not how often it runs, decides


def test_rate_one_moves_four_messages_over_three_seconds_of_the_clock(tmp_path: Path) -> None:
    """MaxNumberOfMessagesPerSecond=1 moves 4 messages in no less than 3 s (LocalStack's
    AWS-validated test_move_task_with_throughput_limit, tests/aws/services/sqs/
    test_sqs_move_task.py): one at once, then one more per second of the server's clock,
    however often the mover runs in between; then the task completes having moved 4."""
    async def scenario(sqs: Sqs) -> None:
        dlq = await sqs.create("dlq")
        dlq_arn = await sqs.arn(dlq)
        await sqs.create("source", RedrivePolicy=json.dumps(
            {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1}))
        target = await sqs.create("target")
        await sqs.send(dlq, "m0", "m1", "m2", "m3")
        await sqs.call("StartMessageMoveTask", SourceArn=dlq_arn,
                       DestinationArn=await sqs.arn(target), MaxNumberOfMessagesPerSecond=1)
        moved = []
        for _ in range(7):  # at 0, 0.5, 1, ... 3 s of the clock
            for _ in range(RUNS_PER_STEP):
                await sqs.service.run_move_tasks(CTX)
            visible, _in_flight, _delayed = await sqs.counts(target)
            moved.append(visible)
            sqs.advance(0.5)
        assert moved == [1, 1, 2, 2, 3, 3, 4]
        sqs.advance(1)
        await sqs.service.run_move_tasks(CTX)  # finds the dead-letter queue empty
        [task] = (await sqs.call("ListMessageMoveTasks", SourceArn=dlq_arn))["Results"]
        assert (task["Status"], task["ApproximateNumberOfMessagesMoved"]) == ("COMPLETED", 4)

    run("journal", tmp_path, scenario)
