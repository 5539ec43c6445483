"""`conveyor cron run`: the scheduler alone, without delivering anything."""

from __future__ import annotations

import asyncio
import logging

from conveyor.client import SQSClient, endpoint_from_queue_url, queue_name_from_url
from conveyor.cron.service import CronService, check_cron_endpoint
from conveyor.runtime.loop import install_signal_handlers

log = logging.getLogger(__name__)


async def run_scheduler(queue_url: str, *, cron_file: str, lease_spec: str, grace_s: float,
                        ttl_s: float, endpoint_url: str | None = None,
                        signing_key: str = "") -> None:
    """Campaign and enqueue until SIGTERM / SIGINT, then release the lease. Raises
    CronConfigError when the endpoint cannot serve the lease backend."""
    await check_cron_endpoint(cron_file, lease_spec, queue_url, endpoint_url=endpoint_url)
    queue_name = queue_name_from_url(queue_url)
    service = CronService(queue_name, cron_file=cron_file, lease_spec=lease_spec,
                          grace_s=grace_s, ttl_s=ttl_s, signing_key=signing_key)
    stopped = asyncio.Event()
    install_signal_handlers(stopped.set)
    async with SQSClient(endpoint_url or endpoint_from_queue_url(queue_url)) as sqs:
        await service.start(sqs, queue_url)
        log.info("cron scheduler started: queue=%s holder=%s file=%s", queue_name,
                 service.holder, cron_file)
        try:
            await stopped.wait()
        finally:
            await service.close()
    log.info("cron scheduler stopped: queue=%s", queue_name)
