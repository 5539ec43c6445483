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
