"""`conveyor up`: queue server + worker queue and dead-letter queue + worker daemon, one command.

The server runs as a child process (`conveyor server`); the queues are made through the
SQS API like any client would; the worker runs in this process once the app answers (so
"ready" means jobs can flow). Ctrl-C drains the worker first (so nothing is left
invisible), then stops the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

import click
import orjson

from conveyor import logs
from conveyor._click import HTTP_URL, PORT, OneLineError
from conveyor.client import SQSClient, queue_name_from_url
from conveyor.cron.service import CronConfigError, check_cron_config
from conveyor.payloads.pointer import EMBEDDED_STORE_PATH
from conveyor.runtime.loop import install_signal_handlers, run_loop
from conveyor.up.app_wait import AppNotAnswering, wait_for_app
from conveyor.up.child_server import ChildServer, ServerStartError
from conveyor.up.demo_app import DEMO_JOBS, DemoApp, start_demo_app
from conveyor.worker.cli import WORKER_HOOKS, click_option
from conveyor.worker.config import ConfigError, WorkerConfig, load_config
from conveyor.worker.daemon import Worker
from conveyor.worker.options import OPTIONS
from conveyor.worker.queues import WorkerQueues, create_worker_queues

# `up` decides these itself; every other worker option is accepted as a flag.
_UP_OWNS = {"WorkerQueueURL", "AppURL", "CreateQueue", "EndpointURL", "Region"}
# So the demo shows a retry and a dead letter within seconds instead of minutes.
_DEMO_DEFAULTS = {"MaxRetries": 3, "ErrorVisibilityTimeout": 1, "IdleBackoffMax": 2}


def _up_options(func: Any) -> Any:
    for option in reversed(OPTIONS):
        if option.name not in _UP_OWNS:
            func = click_option(option)(func)
    return func


def _say(text: str, **style: Any) -> None:
    click.echo(click.style(text, **style) if style else text)


@click.command("up")
@click.option("--app", "app_url", metavar="URL", type=HTTP_URL, help="Base URL of your app, "
              "e.g. http://localhost:8000 (each message is POSTed to URL + HttpPath).")
@click.option("--app-timeout", type=click.FloatRange(min=0), default=60.0, show_default=True,
              metavar="SECONDS", help="How long to wait for the app to answer a GET of URL + "
              "HttpPath (any answer but 502/503/504) before giving up (0: wait for ever).")
@click.option("--demo", is_flag=True, help="Use a small bundled example app and send demo jobs.")
@click.option("--port", type=PORT, default=9324, show_default=True, envvar="CONVEYOR_PORT",
              help="Queue server port (also CONVEYOR_PORT, as for conveyor server).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("conveyor-data"), show_default=True, help="Queue server data.")
@click.option("--queue", "queue_name", default="worker-queue", show_default=True,
              help="Worker queue name (its dead-letter queue is NAME-dead-letter).")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False,
              path_type=Path), help="YAML/JSON file of worker options under their EB names.")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False))
@click.option("--autoscale", metavar="MIN:MAX", help="Run MIN..MAX worker processes, scaled "
              "on backlog per instance (conveyor scale), instead of one in-process worker.")
@click.option("--scale-latency", type=float, default=10.0, show_default=True,
              help="With --autoscale: acceptable queue latency (s) the fleet is sized for.")
@_up_options
def up_command(app_url: str | None, app_timeout: float, demo: bool, port: int, data_dir: Path,
               queue_name: str, config_file: Path | None, log_level: str,
               autoscale: str | None, scale_latency: float, **values: Any) -> None:
    """Run a whole worker environment locally: queue server, queues, worker daemon.

    \b
    conveyor up --demo                        see jobs flow in seconds
    conveyor up --app http://localhost:8000   POST your queue's jobs to your app
    (at HttpPath, / by default as on Elastic Beanstalk: add --http-path /tasks for another)
    """
    if demo == bool(app_url):
        raise click.UsageError("give exactly one of --app URL or --demo")
    if demo:
        values = {**_DEMO_DEFAULTS, **{k: v for k, v in values.items() if v is not None}}
    server = ChildServer(port, data_dir)
    values.update(WorkerQueueURL=f"{server.url}/queue/{queue_name}",
                  AppURL=app_url or "http://127.0.0.1:1", CreateQueue="false")
    try:
        config = load_config(values, os.environ, config_file)
        check_cron_config(config)
        if not config.payload_endpoint_url:  # large payloads: the server's embedded store
            config = config.replace(payload_endpoint_url=server.url + EMBEDDED_STORE_PATH)
    except (ConfigError, CronConfigError) as exc:
        raise OneLineError(str(exc)) from None
    scale = None
    if autoscale:
        from conveyor.scale.fleet import up_scaling

        try:
            scale = up_scaling(autoscale, scale_latency, data_dir)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--autoscale") from None
    logs.setup(log_level)
    try:
        run_loop(lambda: _up(config, server, queue_name, demo, scale, app_timeout))
    except (ServerStartError, AppNotAnswering) as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    _say("conveyor up: stopped.", fg="cyan")


async def _up(config: WorkerConfig, server: ChildServer, queue_name: str, demo: bool,
              scale: Any = None, app_timeout_s: float = 60.0) -> None:
    _say(f"conveyor up: starting the queue server on {server.url} (data in {server.data_dir})",
         fg="cyan")
    # Until the worker takes over the signals: Ctrl-C / SIGTERM while the server starts or
    # the app is awaited stops here, and the server with it (the finally below).
    stopping = asyncio.Event()
    install_signal_handlers(stopping.set)
    await server.start()
    demo_app = DemoApp(lambda line: _say(line, fg="green" if "✓" in line else "yellow"))
    runner = None
    try:
        if demo:
            runner, url = await start_demo_app(demo_app)
            config = config.replace(app_url=url)
        async with SQSClient(server.url) as sqs:
            queues = await create_worker_queues(
                sqs, queue_name, max_retries=config.max_retries,
                visibility_timeout_s=config.visibility_timeout,
                retention_period_s=config.retention_period)
            config = config.replace(worker_queue_url=queues.queue_url)
            if not demo and not await _wait_for_app(config, app_timeout_s, stopping):
                return
            if stopping.is_set():
                return
            # --autoscale: a fleet of `conveyor worker` processes instead of one here
            worker = scale(config) if scale else Worker(config, hooks=WORKER_HOOKS)
            install_signal_handlers(worker.stop)
            _banner(server, queues, config, demo, getattr(worker, "status_url", None))
            watch = asyncio.create_task(_watch_server(server, worker))
            demo_task = (asyncio.create_task(_run_demo(sqs, worker, queues, demo_app))
                         if demo else None)
            try:
                await worker.run()
            finally:
                for task in (watch, demo_task):
                    if task is not None:
                        task.cancel()
    finally:
        if runner is not None:
            await runner.cleanup()
        await asyncio.to_thread(server.stop)


async def _wait_for_app(config: WorkerConfig, timeout_s: float,
                        stopping: asyncio.Event) -> bool:
    """True once the app answers; False if stopped first. Raises AppNotAnswering."""
    def waiting(problem: str) -> None:
        limit = f"up to {timeout_s:g}s" if timeout_s else "until it does"
        _say(f"conveyor up: waiting for your app at {config.post_url} to answer ({problem}); "
             f"the worker starts when it does ({limit})", fg="yellow")

    answered = asyncio.create_task(wait_for_app(config.post_url, timeout_s, waiting))
    stopped = asyncio.create_task(stopping.wait())
    try:
        await asyncio.wait({answered, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (answered, stopped):
            task.cancel()
    if not answered.done() or answered.cancelled():
        return False
    answered.result()
    _say(f"conveyor up: your app answers at {config.post_url}", fg="cyan")
    return True


def _banner(server: ChildServer, queues: WorkerQueues, config: WorkerConfig, demo: bool,
            scale_status_url: str | None = None) -> None:
    _say("conveyor up: ready", fg="cyan", bold=True)
    _say(f"  queue server      {server.url}  (log: {server.log_path})")
    _say(f"  web console       {server.url}/console")
    _say(f"  large payloads    {config.payload_endpoint_url}  (S3-compatible; `conveyor "
         "message send` offloads bodies too large for the queue there)")
    _say(f"  worker queue      {queues.queue_url}")
    _say(f"  dead-letter queue {queues.dead_letter_url}  "
         f"(after {queues.max_receive_count} receives)")
    _say(f"  app               {config.post_url}{'  (bundled demo app)' if demo else ''}")
    if scale_status_url is not None:
        from conveyor.scale.status import DEFAULT_STATUS_URL

        url_flag = "" if scale_status_url == DEFAULT_STATUS_URL else f" --url {scale_status_url}"
        _say(f"  autoscaling       conveyor scale status{url_flag}  "
             f"(metrics: {scale_status_url}/metrics)")
    _say(f"  send a job:       conveyor message send --endpoint-url {server.url} "
         f"{queue_name_from_url(queues.queue_url)} '{{\"hello\": 1}}'")
    # Any key signs for the local server; the AWS CLI only needs to find one and a region.
    _say("    or the AWS CLI: AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local aws sqs "
         f"send-message --region us-east-1 --endpoint-url {server.url} "
         f"--queue-url {queues.queue_url} --message-body '{{\"hello\": 1}}'", dim=True)
    _say("  stop:             Ctrl-C (drains the worker, then stops the server)", dim=True)


async def _watch_server(server: ChildServer, worker: Worker) -> None:
    """If the queue server dies under us, say so and stop the worker."""
    while server.running():
        await asyncio.sleep(0.5)
    _say(f"conveyor up: the queue server exited unexpectedly; see {server.log_path}:",
         fg="red", err=True)
    _say(server.log_tail(), err=True)
    worker.stop()
    worker.stop()


async def _run_demo(sqs: SQSClient, worker: Worker, queues: WorkerQueues,
                    app: DemoApp) -> None:
    """Send the demo jobs, then report once every one has settled."""
    await worker.ready.wait()
    _say(f"conveyor up: sending {len(DEMO_JOBS)} demo jobs", fg="cyan")
    for job in DEMO_JOBS:
        await sqs.send_message(queues.queue_url, orjson.dumps(job).decode())
    expect_dead = sum(bool(job.get("always_fail")) for job in DEMO_JOBS)
    expect_done = len(DEMO_JOBS) - expect_dead
    dead = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(120):
            while len(app.done) < expect_done or dead < expect_dead:
                await asyncio.sleep(0.5)
                if queues.dead_letter_url:
                    attributes = await sqs.get_queue_attributes(
                        queues.dead_letter_url, ["ApproximateNumberOfMessages"])
                    dead = int(attributes.get("ApproximateNumberOfMessages", 0))
    _say(f"conveyor up: demo settled — {len(app.done)} jobs done, {dead} in the dead-letter "
         f"queue ({queues.dead_letter_url}). The worker keeps running; Ctrl-C to stop.",
         fg="cyan", bold=True)
