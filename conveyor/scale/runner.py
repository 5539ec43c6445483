"""`conveyor scale run`: wire a policy, an actuator, the scaler and its status port."""

from __future__ import annotations

from typing import Any

from conveyor.runtime.loop import install_signal_handlers
from conveyor.scale.actuator import Actuator
from conveyor.scale.fleet import AutoscaledFleet
from conveyor.scale.kubernetes import KubeClient, KubeConfig, KubernetesActuator
from conveyor.scale.local import LocalActuator
from conveyor.scale.policy import Policy
from conveyor.worker.config import load_config


async def run_scaler(policy: Policy, queue_url: str, app_url: str,
                     worker_args: tuple[str, ...], options: dict[str, Any]) -> None:
    """Scale until SIGTERM / SIGINT, then drain the local fleet (a Deployment keeps its size)."""
    config = load_config({"WorkerQueueURL": queue_url, "AppURL": app_url,
                          "HttpConnections": options["concurrency"], "CreateQueue": False,
                          "Partitions": options["partitions"]})
    actuator: Actuator
    if options["actuator"] == "kubernetes":
        kube = KubeConfig.in_cluster(namespace=options["namespace"])
        actuator = KubernetesActuator(KubeClient(kube), options["deployment"],
                                      options.get("worker_status_port"))
    else:
        args = ["--worker-queue-url", queue_url, "--app-url", app_url, "--no-create-queue",
                "--http-connections", str(options["concurrency"]),
                "--partitions", str(options["partitions"]), *worker_args]
        actuator = LocalActuator(args, options["log_dir"])
    fleet = AutoscaledFleet(config, policy, log_dir=options["log_dir"],
                            interval_s=options["interval_s"],
                            status_port=options["status_port"],
                            status_host=options["status_host"], actuator=actuator)
    install_signal_handlers(fleet.stop)
    await fleet.run()
