"""The Kubernetes actuator against a small fake API server (no cluster here)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web

from conveyor.scale.kubernetes import (
    KubeClient,
    KubeConfig,
    KubernetesActuator,
    KubernetesError,
)
from conveyor.scale.local import free_port

TOKEN = "sa-token-123"


class FakeApi:
    """GET a Deployment, PATCH its scale subresource; checks the bearer token."""

    def __init__(self) -> None:
        self.replicas = 2
        self.ready = 1
        self.patches: list[dict[str, Any]] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> FakeApi:
        app = web.Application()
        base = "/apis/apps/v1/namespaces/{ns}/deployments/{name}"
        app.router.add_get(base, self.get)
        app.router.add_patch(base + "/scale", self.patch)
        self.routes(app)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        return self

    def _check(self, request: web.Request) -> web.Response | None:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.json_response({"kind": "Status", "message": "Unauthorized"}, status=401)
        if request.match_info["ns"] != "jobs" or request.match_info["name"] != "worker":
            return web.json_response({"kind": "Status", "message": "not found"}, status=404)
        return None

    def routes(self, app: web.Application) -> None:
        """More routes, for subclasses."""

    async def get(self, request: web.Request) -> web.Response:
        refused = self._check(request)
        return refused or web.json_response({
            "spec": {"replicas": self.replicas},
            "status": {"replicas": self.replicas, "readyReplicas": self.ready}})

    async def patch(self, request: web.Request) -> web.Response:
        refused = self._check(request)
        if refused:
            return refused
        assert request.content_type == "application/merge-patch+json"
        body = await request.json()
        self.patches.append(body)
        self.replicas = body["spec"]["replicas"]
        return web.json_response({"kind": "Scale", "spec": {"replicas": self.replicas}})

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def test_in_cluster_config_reads_the_service_account(tmp_path):
    (tmp_path / "token").write_text(TOKEN + "\n")
    (tmp_path / "namespace").write_text("jobs")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    config = KubeConfig.in_cluster(env, tmp_path)
    assert (config.server, config.token, config.namespace, config.ca_file) == (
        "https://10.0.0.1:443", TOKEN, "jobs", None)
    with pytest.raises(KubernetesError, match="not in a cluster"):
        KubeConfig.in_cluster({}, tmp_path)


def test_reads_replicas_and_patches_the_scale_subresource():
    async def scenario() -> None:
        api = await FakeApi().start()
        actuator = KubernetesActuator(KubeClient(KubeConfig(api.url, TOKEN, "jobs")), "worker")
        try:
            views = await actuator.refresh()
            assert [v.state for v in views] == ["running", "starting"]
            result = await actuator.scale_to(5, views)
            assert (result.started, api.replicas) == (3, 5)
            api.ready = 5
            views = await actuator.refresh()
            assert (await actuator.scale_to(5, views)).started == 0
            assert len(api.patches) == 1  # no PATCH when nothing changes
            result = await actuator.scale_to(0, views)
            assert (result.stopped, api.replicas) == (5, 0)
            assert api.patches[-1] == {"spec": {"replicas": 0}}
        finally:
            await actuator.close()
            await api.stop()

    asyncio.run(scenario())


def test_refusals_become_kubernetes_errors():
    async def scenario() -> None:
        api = await FakeApi().start()
        wrong = KubernetesActuator(KubeClient(KubeConfig(api.url, "bad", "jobs")), "worker")
        missing = KubernetesActuator(KubeClient(KubeConfig(api.url, TOKEN, "jobs")), "nope")
        try:
            with pytest.raises(KubernetesError, match="401"):
                await wrong.refresh()
            with pytest.raises(KubernetesError, match="404"):
                await missing.refresh()
        finally:
            await wrong.close()
            await missing.close()
            await api.stop()
        gone = KubernetesActuator(KubeClient(KubeConfig(api.url, TOKEN, "jobs")), "worker")
        with pytest.raises(KubernetesError, match="GET"):
            await gone.refresh()
        await gone.close()

    asyncio.run(scenario())


class FakeApiWithPods(FakeApi):
    """Also lists the Deployment's pods and takes their deletion-cost annotation."""

    def __init__(self, pods: dict[str, str]) -> None:
        super().__init__()
        self.pods = pods  # name -> pod IP (distinct loopback addresses)
        self.replicas = self.ready = len(pods)
        self.costs: dict[str, str] = {}
        self.selectors: list[str] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/api/v1/namespaces/{ns}/pods", self.list_pods)
        app.router.add_patch("/api/v1/namespaces/{ns}/pods/{pod}", self.patch_pod)

    async def get(self, request: web.Request) -> web.Response:
        refused = self._check(request)
        return refused or web.json_response({
            "spec": {"replicas": self.replicas, "selector": {"matchLabels": {"app": "worker"}}},
            "status": {"replicas": self.replicas, "readyReplicas": self.ready}})

    async def list_pods(self, request: web.Request) -> web.Response:
        self.selectors.append(request.query["labelSelector"])
        return web.json_response({"items": [
            {"metadata": {"name": name},
             "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]}}
            for name, ip in self.pods.items()]})

    async def patch_pod(self, request: web.Request) -> web.Response:
        annotations = (await request.json())["metadata"]["annotations"]
        self.costs[request.match_info["pod"]] = annotations[
            "controller.kubernetes.io/pod-deletion-cost"]
        return web.json_response({})


async def _fake_worker(ip: str, port: int, holding: int) -> web.AppRunner:
    """A worker pod's status port: /health as the daemon reports it."""
    async def health(_request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "holding": holding, "processed": 3,
                                  "processing_avg_s": 0.5})
    app = web.Application()
    app.router.add_get("/health", health)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, ip, port).start()
    return runner


def test_busy_pods_are_protected_on_scale_in():
    """Three pods, two busy: asked for one, the Deployment shrinks only to two, and the
    idle pod is the one marked cheap to delete."""
    async def scenario() -> None:
        pods = {"pod-a": "127.0.0.2", "pod-b": "127.0.0.3", "pod-idle": "127.0.0.4"}
        holding = {"pod-a": 1, "pod-b": 2, "pod-idle": 0}
        port = free_port("127.0.0.2")
        workers = [await _fake_worker(ip, port, holding[name]) for name, ip in pods.items()]
        api = await FakeApiWithPods(pods).start()
        actuator = KubernetesActuator(KubeClient(KubeConfig(api.url, TOKEN, "jobs")), "worker",
                                      worker_status_port=port)
        try:
            views = await actuator.refresh()
            assert api.selectors == ["app=worker"]
            assert {v.worker_id: (v.state, v.busy) for v in views} == {
                "pod-a": ("running", True), "pod-b": ("running", True),
                "pod-idle": ("running", False)}
            result = await actuator.scale_to(1, views)
            assert api.replicas == 2 and (result.stopped, result.protected) == (1, 1)
            assert api.costs == {"pod-a": "1000", "pod-b": "1000", "pod-idle": "0"}
            assert (await actuator.scale_to(1, views)).protected == 1  # stays at the floor
            assert api.replicas == 2
        finally:
            await actuator.close()
            await api.stop()
            for runner in workers:
                await runner.cleanup()

    asyncio.run(scenario())
