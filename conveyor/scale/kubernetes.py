"""The Kubernetes actuator: read and set a Deployment's replicas through the `scale`
subresource, with the pod's service-account credentials (in-cluster config).

    GET   /apis/apps/v1/namespaces/{ns}/deployments/{name}         status.readyReplicas
    PATCH /apis/apps/v1/namespaces/{ns}/deployments/{name}/scale   {"spec": {"replicas": n}}

With the workers' status port known (`--worker-status-port`), it also reads each ready
pod's /health, so busy pods (holding a message) are protected on scale-in: the fleet never
shrinks below the busy pods, and before it shrinks every running pod gets the
`controller.kubernetes.io/pod-deletion-cost` annotation (busy high, idle low) so the
ReplicaSet removes idle pods first:

    GET   /api/v1/namespaces/{ns}/pods?labelSelector=...                 the Deployment's pods
    PATCH /api/v1/namespaces/{ns}/pods/{pod}                             the annotation

The service account needs `get` on deployments, `get, patch` on deployments/scale and,
for protection, `list, patch` on pods (see conveyor/scale/README.md for the Role). Give
the pods `terminationGracePeriodSeconds` above the worker's DrainTimeout so a stopped pod
finishes or releases its messages (the daemon drains on SIGTERM).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from conveyor.scale.actuator import IN_SERVICE, ScaleResult
from conveyor.scale.observe import worker_health
from conveyor.scale.protection import WorkerView

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
BUSY_COST, IDLE_COST = 1000, 0


class KubernetesError(RuntimeError):
    """The API server refused or could not be reached; the message says which call."""


@dataclass(frozen=True, slots=True)
class KubeConfig:
    """Where the API server is and how to authenticate."""

    server: str  # https://host:port (http:// only for tests)
    token: str
    namespace: str
    ca_file: Path | None = None

    @classmethod
    def in_cluster(cls, env: Mapping[str, str] = os.environ,
                   account_dir: Path = SERVICE_ACCOUNT_DIR,
                   namespace: str | None = None) -> KubeConfig:
        """The pod's own config: KUBERNETES_SERVICE_HOST/PORT and the mounted token, CA
        and namespace files."""
        host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
        if not host or not port:
            msg = "not in a cluster: KUBERNETES_SERVICE_HOST / _PORT are not set"
            raise KubernetesError(msg)
        try:
            token = (account_dir / "token").read_text().strip()
            ns = namespace or (account_dir / "namespace").read_text().strip()
        except OSError as exc:
            msg = f"cannot read the service account in {account_dir}: {exc}"
            raise KubernetesError(msg) from exc
        ca = account_dir / "ca.crt"
        host = f"[{host}]" if ":" in host else host  # IPv6 service address
        return cls(f"https://{host}:{port}", token, ns, ca if ca.exists() else None)


class KubeClient:
    """The two calls the actuator needs, over aiohttp."""

    def __init__(self, config: KubeConfig) -> None:
        self.config = config
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            ssl_context: ssl.SSLContext | bool = True
            if self.config.ca_file is not None:
                ssl_context = ssl.create_default_context(cafile=str(self.config.ca_file))
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=ssl_context),
                headers={"Authorization": f"Bearer {self.config.token}",
                         "Accept": "application/json"})
        return self._session

    def _path(self, name: str, sub: str = "") -> str:
        ns = self.config.namespace
        return f"{self.config.server}/apis/apps/v1/namespaces/{ns}/deployments/{name}{sub}"

    async def get_deployment(self, name: str) -> dict[str, Any]:
        """GET the Deployment."""
        return await self._call("GET", self._path(name))

    async def set_replicas(self, name: str, replicas: int) -> dict[str, Any]:
        """PATCH the scale subresource (JSON merge patch)."""
        return await self._call("PATCH", self._path(name, "/scale"),
                                json={"spec": {"replicas": replicas}},
                                headers={"Content-Type": "application/merge-patch+json"})

    async def list_pods(self, match_labels: Mapping[str, str]) -> list[dict[str, Any]]:
        """The pods a Deployment's selector matches."""
        selector = ",".join(f"{k}={v}" for k, v in sorted(match_labels.items()))
        url = f"{self.config.server}/api/v1/namespaces/{self.config.namespace}/pods"
        found = await self._call("GET", url, params={"labelSelector": selector})
        return list(found.get("items", []))

    async def set_deletion_cost(self, pod: str, cost: int) -> None:
        """Annotate a pod: the ReplicaSet removes lower-cost pods first on scale-in."""
        url = f"{self.config.server}/api/v1/namespaces/{self.config.namespace}/pods/{pod}"
        patch = {"metadata": {"annotations": {DELETION_COST: str(cost)}}}
        await self._call("PATCH", url, json=patch,
                         headers={"Content-Type": "application/merge-patch+json"})

    async def _call(self, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
        with _translate(method, url):
            async with self._http().request(method, url, timeout=aiohttp.ClientTimeout(
                    total=10), **kwargs) as resp:
                body = await resp.json(content_type=None)
                if resp.status >= 400:
                    reason = body.get("message") if isinstance(body, dict) else body
                    msg = f"{method} {url}: HTTP {resp.status}: {reason}"
                    raise KubernetesError(msg)
                return body

    async def close(self) -> None:
        """Close the connection pool."""
        if self._session is not None:
            await self._session.close()
            self._session = None


@contextlib.contextmanager
def _translate(method: str, url: str) -> Iterator[None]:
    try:
        yield
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
        msg = f"{method} {url}: {type(exc).__name__}: {exc}"
        raise KubernetesError(msg) from exc


class KubernetesActuator:
    """Scales one Deployment; its replicas are the fleet."""

    def __init__(self, client: KubeClient, deployment: str,
                 worker_status_port: int | None = None) -> None:
        self.client = client
        self.deployment = deployment
        self.worker_status_port = worker_status_port
        self._replicas = 0
        self._costs: dict[str, int] = {}  # deletion cost last written per pod
        self._session: aiohttp.ClientSession | None = None

    async def refresh(self) -> list[WorkerView]:
        """One view per pod when the workers' status port is known (ready and answering
        /health: running, busy if it holds a message); otherwise ready replicas count as
        running and the rest as starting."""
        found = await self.client.get_deployment(self.deployment)
        self._replicas = int(found.get("spec", {}).get("replicas", 0))
        if self.worker_status_port is None:
            ready = min(self._replicas, int(found.get("status", {}).get("readyReplicas") or 0))
            return ([WorkerView(f"{self.deployment}-{i}", "running") for i in range(ready)]
                    + [WorkerView(f"{self.deployment}-{i}", "starting")
                       for i in range(ready, self._replicas)])
        labels = found.get("spec", {}).get("selector", {}).get("matchLabels", {})
        pods = [p for p in await self.client.list_pods(labels)
                if not p.get("metadata", {}).get("deletionTimestamp")]
        if self._session is None:
            self._session = aiohttp.ClientSession()
        reports = await asyncio.gather(*(self._health(p) for p in pods))
        return [_pod_view(pod, report) for pod, report in zip(pods, reports, strict=True)]

    async def _health(self, pod: dict[str, Any]) -> dict[str, Any] | None:
        ip = pod.get("status", {}).get("podIP")
        if not ip or not _ready(pod) or self._session is None:
            return None
        host = f"[{ip}]" if ":" in ip else ip
        return await worker_health(self._session, f"http://{host}:{self.worker_status_port}")

    async def scale_to(self, desired: int, views: Sequence[WorkerView]) -> ScaleResult:
        """PATCH spec.replicas toward `desired`; on scale-in never below the busy pods, and
        mark busy pods costly to delete first."""
        busy = [v for v in views if v.in_service and v.busy]
        allowed = max(desired, len(busy)) if desired < self._replicas else desired
        if allowed == self._replicas:
            return ScaleResult(protected=allowed - desired)
        if allowed < self._replicas and self.worker_status_port is not None:
            await self._mark(views)
        await self.client.set_replicas(self.deployment, allowed)
        log.info("deployment scaled: deployment=%s namespace=%s replicas=%d->%d protected=%d",
                 self.deployment, self.client.config.namespace, self._replicas, allowed,
                 allowed - desired)
        before, self._replicas = self._replicas, allowed
        if allowed > before:
            return ScaleResult(started=allowed - before)
        return ScaleResult(stopped=before - allowed, protected=allowed - desired)

    async def _mark(self, views: Sequence[WorkerView]) -> None:
        for view in views:
            if not view.in_service:
                continue  # not-ready pods go first anyway
            cost = BUSY_COST if view.busy else IDLE_COST
            if self._costs.get(view.worker_id) != cost:
                await self.client.set_deletion_cost(view.worker_id, cost)
                self._costs[view.worker_id] = cost

    async def close(self) -> None:
        """Close the clients; the Deployment keeps its size."""
        await self.client.close()
        if self._session is not None:
            await self._session.close()
            self._session = None


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _pod_view(pod: dict[str, Any], report: dict[str, Any] | None) -> WorkerView:
    name = pod.get("metadata", {}).get("name", "?")
    if report is None or report.get("status") not in IN_SERVICE:
        state = "stopping" if report and report.get("status") in ("draining", "stopped") \
            else "starting"
        return WorkerView(name, state)
    return WorkerView(name, "running", busy=int(report.get("holding", 0)) > 0,
                      in_flight=int(report.get("in_flight", 0)),
                      processing_avg_s=report.get("processing_avg_s"),
                      processed=int(report.get("processed", 0)))
