"""The Kubernetes actuator: read and set a Deployment's replicas through the `scale`
subresource, with the pod's service-account credentials (in-cluster config).

    GET   /apis/apps/v1/namespaces/{ns}/deployments/{name}         status.readyReplicas
    PATCH /apis/apps/v1/namespaces/{ns}/deployments/{name}/scale   {"spec": {"replicas": n}}

The service account needs `get` on deployments and `get, patch` on deployments/scale
(see conveyor/scale/README.md for the Role). Which pod goes on scale-in is the
ReplicaSet's choice: give the pods `terminationGracePeriodSeconds` above the worker's
DrainTimeout so a stopped pod finishes or releases its messages (the daemon drains on
SIGTERM) and nothing waits out a visibility timeout.
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from conveyor.scale.actuator import ScaleResult
from conveyor.scale.protection import WorkerView

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


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

    def __init__(self, client: KubeClient, deployment: str) -> None:
        self.client = client
        self.deployment = deployment
        self._replicas = 0

    async def refresh(self) -> list[WorkerView]:
        """Ready replicas count as in service, the rest of spec.replicas as starting.
        (Per-pod busy state is not read: the ReplicaSet picks the pod on scale-in.)"""
        found = await self.client.get_deployment(self.deployment)
        self._replicas = int(found.get("spec", {}).get("replicas", 0))
        ready = min(self._replicas, int(found.get("status", {}).get("readyReplicas") or 0))
        return ([WorkerView(f"{self.deployment}-{i}", "running") for i in range(ready)]
                + [WorkerView(f"{self.deployment}-{i}", "starting")
                   for i in range(ready, self._replicas)])

    async def scale_to(self, desired: int, views: Sequence[WorkerView]) -> ScaleResult:
        """PATCH spec.replicas when it differs from `desired`."""
        if desired == self._replicas:
            return ScaleResult()
        await self.client.set_replicas(self.deployment, desired)
        log.info("deployment scaled: deployment=%s namespace=%s replicas=%d->%d",
                 self.deployment, self.client.config.namespace, self._replicas, desired)
        before, self._replicas = self._replicas, desired
        if desired > before:
            return ScaleResult(started=desired - before)
        return ScaleResult(stopped=before - desired)

    async def close(self) -> None:
        """Close the client; the Deployment keeps its size."""
        await self.client.close()
