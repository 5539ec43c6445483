"""SQS limits as data: `STRICT` is Amazon's, `RELAXED` is for test suites (ElasticMQ-style)."""

from __future__ import annotations

from dataclasses import dataclass, replace

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True)
class Limits:
    max_message_bytes: int = MIB  # body + attribute names, types and values
    max_batch_bytes: int = MIB  # sum over the entries of one SendMessageBatch
    max_request_bytes: int = 4 * MIB  # raw HTTP body; base64 and JSON overhead on top of 1 MiB
    max_batch_entries: int = 10
    max_receive_messages: int = 10
    max_message_attributes: int = 10
    max_attribute_name_chars: int = 256
    max_data_type_chars: int = 256
    max_queue_name_chars: int = 80
    max_batch_id_chars: int = 80
    max_group_id_chars: int = 128
    max_dedup_id_chars: int = 128  # also ReceiveRequestAttemptId
    max_tags: int = 50
    max_tag_key_chars: int = 128
    max_tag_value_chars: int = 256
    max_list_queues: int = 1000
    max_visibility_s: int = 12 * 3600
    max_delay_s: int = 15 * 60
    max_wait_s: int = 20
    min_retention_s: int = 60
    max_retention_s: int = 14 * 24 * 3600
    min_max_message_size: int = KIB
    max_receive_count: int = 1000
    dedup_interval_s: int = 5 * 60  # FIFO deduplication window
    receive_attempt_s: int = 5 * 60  # ReceiveRequestAttemptId replay window
    deleted_name_cooldown_s: int = 60  # QueueDeletedRecently
    purge_cooldown_s: int = 60  # PurgeQueueInProgress
    max_move_rate: int = 500  # StartMessageMoveTask MaxNumberOfMessagesPerSecond
    # Conveyor's own, no SQS counterpart: a message's failed delivery attempts, as workers
    # record them (service/attempts.py). The last 10 cover a whole life under Elastic
    # Beanstalk's default MaxRetries (10), so a dead letter shows every failure that killed
    # it, while its row grows by at most ~10 x 0.7 KB.
    max_attempts_kept: int = 10
    max_attempt_answer_bytes: int = 512  # of the app's answer: enough for an error's text
    max_attempt_reason_chars: int = 64  # `http-500`, `refused`, `payload-unavailable`...
    # GetMessageAttempts looks for a message among its queue's oldest this many, as the
    # console finds one: a bound on what a read costs, since no index is kept by message id
    # (every send would pay for one).
    attempts_scan_messages: int = 100_000
    # Conveyor's own queue attributes (`Conveyor*`, service/attributes.py OWN) set through
    # CreateQueue / SetQueueAttributes and listed under `All`: not in strict mode, where
    # SQS's calls refuse names SQS does not know; Conveyor's own calls set them there.
    conveyor_attributes: bool = False


STRICT = Limits()

# Larger messages and no cool-downs: for test suites that recreate queues at once.
RELAXED = replace(
    STRICT,
    max_message_bytes=16 * MIB,
    max_batch_bytes=16 * MIB,
    max_request_bytes=64 * MIB,
    deleted_name_cooldown_s=0,
    purge_cooldown_s=0,
    conveyor_attributes=True,
)

MODES = {"strict": STRICT, "relaxed": RELAXED}
