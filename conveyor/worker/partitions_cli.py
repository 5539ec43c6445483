"""`conveyor queue create-partitioned`: make the SQS queues of a partitioned queue."""

from __future__ import annotations

import click

from conveyor.admin import Target, _print_table, _target, queue_group
from conveyor.client import SQSClient
from conveyor.client.partitions import MAX_PARTITIONS, PartitionError, check_partitions
from conveyor.worker.options import BY_NAME
from conveyor.worker.partitions import create_partitions
from conveyor.worker.queues import WorkerQueues


@click.command("create-partitioned")
@click.argument("name")
@click.option("--partitions", type=click.IntRange(1, MAX_PARTITIONS), required=True,
              help="How many queues NAME-p0 ... (NAME-p0.fifo ... when NAME ends in .fifo).")
@click.option("--shared-dead-letter", is_flag=True,
              help="One dead-letter queue NAME-dead-letter for all (default: one each).")
@click.option("--max-receive-count", type=click.IntRange(1, 100),
              default=BY_NAME["MaxRetries"].default, show_default=True,
              help="Receives before a message goes to the dead-letter queue (MaxRetries).")
@click.option("--visibility-timeout", type=click.IntRange(0, 43200),
              default=BY_NAME["VisibilityTimeout"].default, show_default=True)
@click.option("--retention-period", type=click.IntRange(60, 1209600),
              default=BY_NAME["RetentionPeriod"].default, show_default=True)
@_target
def create_partitioned(target: Target, name: str, partitions: int, shared_dead_letter: bool,
                       max_receive_count: int, visibility_timeout: int,
                       retention_period: int) -> None:
    """Create the partitions of logical queue NAME, each with a redrive policy to its
    dead-letter queue, as `conveyor worker --partitions N` would; prints them. Existing
    queues are kept as they are."""
    try:
        check_partitions(name, partitions)
    except PartitionError as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from None

    async def work(sqs: SQSClient) -> list[WorkerQueues]:
        return await create_partitions(
            sqs, name, partitions, shared_dead_letter=shared_dead_letter,
            max_retries=max_receive_count, visibility_timeout_s=visibility_timeout,
            retention_period_s=retention_period)

    created = target.run(work)
    _print_table(["PARTITION", "DEAD LETTERS TO"],
                 [[q.queue_url, q.dead_letter_url or ""] for q in created])


def register() -> None:
    """Add `create-partitioned` to `conveyor queue`."""
    queue_group.add_command(create_partitioned)
