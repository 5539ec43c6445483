"""The worker's options: Elastic Beanstalk's `aws:elasticbeanstalk:sqsd` names, defaults and
ranges, plus Conveyor's own. One table drives the config file, the CLI flags and the
CONVEYOR_* environment variables, so the three can never disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Option:
    """One option: its EB-style name (the config file key), type, default and range."""

    name: str
    field: str
    kind: type
    default: Any
    help: str
    low: float | None = None
    high: float | None = None
    flag_name: str | None = None

    @property
    def flag(self) -> str:
        """The CLI flag, e.g. `--http-connections`."""
        return "--" + (self.flag_name or _kebab(self.name))

    @property
    def env(self) -> str:
        """The environment variable, e.g. `CONVEYOR_HTTP_CONNECTIONS`."""
        return "CONVEYOR_" + (self.flag_name or _kebab(self.name)).replace("-", "_").upper()

    def range_text(self) -> str:
        """`1-100`-style text for help."""
        return f"{_num(self.low)}-{_num(self.high)}"


def _kebab(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", name).lower()


def _num(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


# Elastic Beanstalk's options (seed 000), with EB's defaults and ranges exactly.
EB_OPTIONS = (
    Option("WorkerQueueURL", "worker_queue_url", str, None,
           "URL of the queue to read (required)."),
    Option("HttpPath", "http_path", str, "/", "Path on the app that receives each POST."),
    Option("MimeType", "mime_type", str, "application/json",
           "Content-Type of each POST (any value)."),
    Option("HttpConnections", "http_connections", int, 50,
           "Most requests open to the app at once.", 1, 100),
    Option("ConnectTimeout", "connect_timeout", int, 5,
           "Seconds to wait for a connection to the app.", 1, 60),
    Option("InactivityTimeout", "inactivity_timeout", int, 180,
           "Seconds to wait for the app's answer before abandoning the request.", 1, 36000),
    Option("VisibilityTimeout", "visibility_timeout", int, 300,
           "Seconds a received message stays invisible (overrides the queue's).", 0, 43200),
    Option("ErrorVisibilityTimeout", "error_visibility_timeout", int, 2,
           "Seconds before a failed message is visible again (first retry).", 0, 43200),
    Option("RetentionPeriod", "retention_period", int, 345600,
           "Seconds after it was sent (SentTimestamp) after which a message is deleted "
           "unposted.",
           60, 1209600),
    Option("MaxRetries", "max_retries", int, 10,
           "Receives before a message moves to the dead-letter queue (maxReceiveCount).",
           1, 100),
)

# Conveyor's additions (what sqsd users keep asking for).
CONVEYOR_OPTIONS = (
    Option("AppURL", "app_url", str, "http://localhost:80", "Base URL of the app."),
    Option("AdaptiveConcurrency", "adaptive_concurrency", bool, False,
           "Let the number of open POSTs follow the app, between 1 and HttpConnections "
           "(starting at 10): it grows while the app's latency stays flat, shrinks when "
           "latency climbs or 429 / 503 / 504 answers or timeouts come (TCP Vegas with "
           "multiplicative decrease; /health and /metrics show the limit). Off: always "
           "HttpConnections, as EB."),
    Option("AcceptAny2xx", "accept_any_2xx", bool, False,
           "Treat any 2xx answer as success (EB accepts only 200).", flag_name="accept-any-2xx"),
    Option("ExpiredToDeadLetter", "expired_to_dead_letter", bool, False,
           "Move messages older than RetentionPeriod to the dead-letter queue instead of "
           "deleting them (EB deletes them)."),
    Option("MaxErrorVisibilityTimeout", "max_error_visibility_timeout", int, 3600,
           "Cap of the exponential back-off after repeated failures (seconds).", 0, 43200),
    Option("DrainTimeout", "drain_timeout", int, 30,
           "Seconds to let open requests finish on SIGTERM before releasing them.", 0, 3600),
    Option("PollWaitTime", "poll_wait_time", int, 20,
           "Long-poll WaitTimeSeconds of each receive.", 0, 20),
    Option("ExtendedPollWaitTime", "extended_poll_wait_time", int, 120,
           "Long-poll wait on a Conveyor server, which allows more than SQS's 20 s "
           "(ConveyorWorkers.PollMessages); 0 = ReceiveMessage only.", 0, 300),
    Option("IdleBackoffMin", "idle_backoff_min", float, 0.5,
           "First pause (seconds) between empty polls that came back before their wait "
           "(PollWaitTime 0, or a server that does not long-poll).", 0, 3600),
    Option("IdleBackoffMax", "idle_backoff_max", float, 5.0,
           "Longest pause (seconds) between such empty polls; the pause is randomized.",
           0, 3600),
    Option("BatchSize", "batch_size", int, 0,
           "POST up to this many messages in one request, as AWS Lambda's SQS event, and read "
           "the answer as Lambda's partial batch response (batchItemFailures); HttpConnections "
           "then counts batches. 0 = one message per POST, as Elastic Beanstalk.", 0, 100),
    Option("BatchingWindow", "batching_window", float, 0.0,
           "With BatchSize: seconds a batch short of BatchSize waits, from its first "
           "message, for more before it is POSTed (AWS Lambda's "
           "MaximumBatchingWindowInSeconds; 0 = POST what is there at once).", 0, 300),
    Option("ReceiveRate", "receive_rate", float, 0.0,
           "Messages a second this worker's receives take, where the queue server cannot "
           "bound it (Amazon SQS: applied per worker); on a Conveyor server set the queue's "
           "ConveyorReceiveRate instead, which holds for every worker. 0 = none.", 0, 100000),
    Option("ReceiveBurst", "receive_burst", int, 0,
           "With ReceiveRate: messages taken at once at most (0 = the rate's one second).",
           0, 100000),
    Option("GroupConcurrency", "group_concurrency", int, 0,
           "Most messages of one MessageGroupId at the app at once from this worker, where "
           "the queue server caps none (Amazon SQS; a Conveyor queue without "
           "ConveyorGroupConcurrency, which holds for every worker and is then left to): "
           "the others wait here, invisible, while other groups' messages go on. "
           "Standard queues (FIFO's cap is 1). 0 = none.", 0, 100000),
    Option("HealthCheckPath", "health_check_path", str, "",
           "Path on the app to GET while it looks unavailable; a 2xx answer means it is back "
           "('' = none: a held message is POSTed instead)."),
    Option("SigningSecret", "signing_secret", str, "",
           "If set, each POST carries an X-Conveyor-Signature HMAC-SHA256 header."),
    Option("StatusPort", "status_port", int, 0,
           "Port for /health and /metrics (0 = off).", 0, 65535),
    Option("StatusHost", "status_host", str, "127.0.0.1", "Address /health and /metrics bind to."),
    Option("CreateQueue", "create_queue", bool, True,
           "Create the queue and its dead-letter queue if missing."),
    Option("Region", "region", str, "", "AWS region (default: AWS_REGION, profile, or host)."),
    Option("EndpointURL", "endpoint_url", str, "",
           "SQS endpoint (default: the queue URL's scheme://host:port)."),
)

# A logical queue over several SQS queues (client/partitions.py, worker/partitions.py).
PARTITION_OPTIONS = (
    Option("Partitions", "partitions", int, 0,
           "Read WorkerQueueURL's logical queue as this many partition queues NAME-p0 ... "
           "(NAME-p0.fifo ... for FIFO), in turn, with plain ReceiveMessage calls; idle, "
           "one PollMessages of ExtendedPollWaitTime parked on all of them at once on a "
           "Conveyor server (a message reaches the app at once), elsewhere one long poll "
           "of PollWaitTime at a time turning over them (a message may wait up to "
           "Partitions x PollWaitTime); 0 = one plain queue.", 0, 64),
    Option("SharedDeadLetter", "shared_dead_letter", bool, False,
           "With Partitions: one dead-letter queue NAME-dead-letter for every partition "
           "instead of one per partition (NAME-p0-dead-letter ...)."),
)

# Periodic tasks (conveyor/cron): EB reads cron.yaml from the source bundle; here it is a path.
CRON_OPTIONS = (
    Option("CronFile", "cron_file", str, "cron.yaml",
           "cron.yaml of periodic tasks, reloaded when it changes ('' = none).",
           flag_name="cron"),
    Option("CronLease", "cron_lease", str, "server",
           "Leader lease backend: server (the queue server's lease API) or dynamodb:TABLE."),
    Option("CronGracePeriod", "cron_grace_period", int, 300,
           "Runs due while no daemon led are still enqueued up to this many seconds late.",
           0, 86400),
    Option("CronLeaseTtl", "cron_lease_ttl", float, 10.0,
           "Seconds the cron leader's lease lasts unrenewed around due runs (a silent "
           "leader is replaced this long after a run); idle, it is held until then.",
           0.2, 600),
    Option("CronSigningKey", "cron_signing_key", str, "",
           "Secret shared by every daemon of the queue: the cron leader signs its "
           "scheduled-job messages with it, and unsigned or mismatched ones are deleted "
           "unposted ('' = unsigned; jobs are then checked against cron.yaml)."),
)

# Large payloads (conveyor/payloads): messages the Amazon SQS Extended Client, `conveyor
# message send` or conveyor.payloads.Offloader stored in an S3-compatible blob store.
PAYLOAD_OPTIONS = (
    Option("PayloadEndpointURL", "payload_endpoint_url", str, "",
           "S3-compatible endpoint of the blob store that offloaded bodies live in, e.g. a "
           "Conveyor server's embedded one, http://127.0.0.1:9324/_conveyor/s3 ('' = Amazon "
           "S3, or AWS_ENDPOINT_URL_S3)."),
    Option("PayloadRegion", "payload_region", str, "",
           "Region of the blob store ('' = Region, else us-east-1)."),
    Option("PayloadAccessKey", "payload_access_key", str, "",
           "KEY:SECRET for the blob store ('' = the usual AWS credential chain)."),
    Option("PayloadBucket", "payload_bucket", str, "",
           "The only bucket pointers may name; others fail their message ('' = any bucket "
           "the credentials reach)."),
    Option("DeletePayloads", "delete_payloads", bool, True,
           "Delete a message's stored body once the app answered 200 and the message is "
           "deleted, or RetentionPeriod deleted it unposted (the Extended Client's "
           "cleanupS3Payload default); a dead-lettered message keeps it."),
)

OPTIONS = EB_OPTIONS + CONVEYOR_OPTIONS + PARTITION_OPTIONS + PAYLOAD_OPTIONS + CRON_OPTIONS
BY_NAME = {option.name: option for option in OPTIONS}
