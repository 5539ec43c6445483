"""Names on the wire, shared with the AWS Java temporary-queues client, and defaults.

Every string here appears in SQS requests (queue attributes, message attributes, tags, queue
names), so a Conveyor client and a Java `AmazonSQSRequesterClient` on the same endpoint
understand each other's messages and sweep each other's orphaned host queues.
"""

from __future__ import annotations

# CreateQueue attribute naming the real queue that hosts a virtual queue.
HOST_QUEUE_URL = "HostQueueUrl"
# CreateQueue attribute: seconds without use after which a queue counts as idle.
IDLE_QUEUE_RETENTION_PERIOD = "IdleQueueRetentionPeriodSeconds"
# Message attribute carrying the virtual queue's name on messages sent to its host queue.
VIRTUAL_QUEUE_NAME_ATTRIBUTE = "__AmazonSQSVirtualQueuesClient.QueueName"
# Message attribute carrying the URL a responder should reply to.
RESPONSE_QUEUE_URL = "ResponseQueueUrl"

# Tags on host queues: the retention period (seconds) and the last heartbeat (epoch ms).
RETENTION_TAG = "__IdleQueueRetentionPeriodSeconds"
HEARTBEAT_TAG = "__AmazonSQSIdleQueueDeletingClient.LastHeartbeatTimestamp"

# Names of temporary host queues start with this, so sweepers can find them with ListQueues.
DEFAULT_PREFIX = "__RequesterClientQueues__"
# Our sweepers' shared work queue is `<prefix>` + this. The Java client's own work queue is
# named exactly `<prefix>` and holds Java-serialized tasks, so ours must not share it.
SWEEP_QUEUE_SUFFIX = "ConveyorSweeper.fifo"

VIRTUAL_URL_SEPARATOR = "#"

# Defaults, in seconds, as in the Java client: 5 minutes of idleness, a heartbeat every 5 s.
DEFAULT_RETENTION_S = 300
DEFAULT_HEARTBEAT_INTERVAL_S = 5.0
DEFAULT_SWEEP_PERIOD_S = 300.0
# SQS answers TagQueue with throttling above a few calls per second per account; one client
# stays well under that even when it owns many host queues.
DEFAULT_MAX_TAG_CALLS_PER_S = 4.0
# Long-poll length of the background receiver on each host queue (SQS maximum).
DEFAULT_POLL_WAIT_S = 20
MIN_RETENTION_S = 1
