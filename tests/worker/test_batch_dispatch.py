"""Which messages go to the app together with BatchSize (batch_dispatch.py), driven directly.

FIFO order follows AWS Lambda's rule for SQS FIFO batches (AWS Lambda Developer Guide,
"Using Lambda with Amazon SQS", "Reporting batch item failures": "stop processing messages
after the first failure and return all failed and unprocessed messages"): a group's later
messages ride in its first's batch, and none of a group goes after one that failed. The
worker end to end (a real server and app) is tested in test_batch_delivery.py and
tests/payloads/test_worker.py.
"""

from __future__ import annotations

from conveyor.client import Message
from conveyor.payloads.resolver import PayloadUnavailable
from conveyor.worker.batch_delivery import QueueIdentity, queue_identities
from conveyor.worker.batch_dispatch import followers, with_bodies
from conveyor.worker.groups import GroupQueues
from conveyor.worker.job import Job


def _job(name: str, group: str | None = None) -> Job:
    return Job(Message(name, f"handle-{name}", f"body of {name}"), 0.0, 30.0, group=group)


def _names(jobs: list[Job]) -> list[str]:
    return [job.message.message_id for job in jobs]


def test_a_groups_first_brings_the_messages_behind_it_up_to_one_that_goes_alone() -> None:
    groups: GroupQueues[Job] = GroupQueues()
    first, *rest = [_job(name, "g") for name in ("first", "b", "c", "alone", "e")]
    for job in (first, *rest):
        groups.add("g", job)
    alone = {"alone"}

    def one_by_one(job: Job) -> bool:
        return job.message.message_id in alone

    assert _names(followers(first, groups, 9, one_by_one)) == ["b", "c"]  # in order
    assert _names(followers(first, groups, 1, one_by_one)) == ["b"]  # the batch is full
    assert followers(first, groups, 0, one_by_one) == []
    assert followers(_job("standard"), groups, 9, one_by_one) == []  # no group


def test_a_missing_body_fails_its_message_and_holds_back_its_group() -> None:
    batch = [_job("a1", "a"), _job("a2", "a"), _job("a3", "a"), _job("b1", "b"),
             _job("lone")]
    missing = PayloadUnavailable("NoSuchKey")
    resolved: list[Message | PayloadUnavailable] = [
        batch[0].message, missing, batch[2].message, batch[3].message, missing]
    outcomes, ready = with_bodies(batch, resolved, ordered=True)
    assert ready == {0: batch[0].message, 3: batch[3].message}
    assert [o.status if o else None for o in outcomes] == [
        None, "payload-unavailable", None, None, "payload-unavailable"]
    assert outcomes[1] is not None and outcomes[1].detail == "NoSuchKey"


def test_each_record_names_the_queue_its_message_came_from() -> None:
    """Lambda's eventSourceARN is the ARN of the queue the record was read from (AWS Lambda
    Developer Guide, "Using Lambda with Amazon SQS", example events)."""
    urls = {"m1": "http://localhost:9324/000000000000/jobs-p0",
            "m2": "http://localhost:9324/000000000000/jobs-p1"}
    identity = queue_identities(lambda message: urls[message.message_id], "eu-west-1")
    m1, m2 = (Message(name, f"handle-{name}", "") for name in ("m1", "m2"))
    assert identity(m1) == QueueIdentity("arn:aws:sqs:eu-west-1:000000000000:jobs-p0",
                                         "eu-west-1")
    assert identity(m2).arn == "arn:aws:sqs:eu-west-1:000000000000:jobs-p1"
    assert identity(m1) is identity(m1)  # made once per queue
