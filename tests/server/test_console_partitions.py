"""The console's overview adds up the backlog of each partitioned queue (NAME-p0 …)."""

from __future__ import annotations

import re
from typing import Any

from conveyor.client.partitions import partition_name
from tests.server.helpers import RawClient, unique


def _partitioned_rows(page: str) -> list[list[str]]:
    section = re.search(r'<section id="partitioned".*?</section>', page, re.S)
    assert section, "no partitioned-queues section"
    rows = [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", section.group(0))]
    return [cells for cells in rows if cells]


def test_overview_adds_up_the_partitions_of_a_logical_queue(sqs: Any, raw: RawClient) -> None:
    name = unique("con-part")
    urls = [sqs.create_queue(QueueName=partition_name(name, i))["QueueUrl"] for i in range(3)]
    for url, count in zip(urls, (2, 0, 3), strict=True):
        for _ in range(count):
            sqs.send_message(QueueUrl=url, MessageBody="m")
    sqs.receive_message(QueueUrl=urls[2], VisibilityTimeout=600)  # one in flight
    sqs.send_message(QueueUrl=urls[0], MessageBody="later", DelaySeconds=600)
    # p1 of this one is missing: not a partitioned queue, only two queues with odd names
    broken = unique("con-gap")
    for i in (0, 2):
        sqs.create_queue(QueueName=partition_name(broken, i))

    resp = raw.request("GET", "/console", sign=False)
    assert resp.status == 200
    rows = {cells[0]: cells for cells in _partitioned_rows(resp.body.decode())}
    assert rows[name][:6] == [name, "us-east-1", "3", "4", "1", "1"]
    assert broken not in rows
