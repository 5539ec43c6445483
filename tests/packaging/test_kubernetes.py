"""deploy/kubernetes: every manifest passes the Kubernetes API's schema offline (the
`kubernetes-validate` package bundles them), the KEDA example passes KEDA's ScaledObject
CRD schema (vendored in schemas/), the CloudNativePG example the fields of its Cluster and
Pooler it uses (CNPG_SCHEMAS), and the pieces fit together: the names they refer to
exist, the `conveyor` arguments parse, the server's config file loads."""

from __future__ import annotations

import copy
import urllib.request
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.packaging.conftest import ROOT, parse_conveyor_args, require_module
from tests.support import ServerProcess

kubernetes_validate = require_module("kubernetes_validate")

MANIFESTS = ROOT / "deploy" / "kubernetes"
KEDA_SCHEMA = Path(__file__).parent / "schemas" / "keda-2.16.1-scaledobject.yaml"
# The oldest Kubernetes the manifests are written for (native sidecar containers, 1.29),
# and the newest the validator knows.
KUBERNETES_VERSIONS = ["1.29.0", kubernetes_validate.utils.latest_version()]
# KEDA's aws-sqs-queue scaler parameters (keda.sh/docs/2.16/scalers/aws-sqs).
SQS_SCALER_PARAMETERS = {"queueURL", "queueURLFromEnv", "queueLength", "activationQueueLength",
                         "awsRegion", "awsEndpoint", "identityOwner", "scaleOnInFlight",
                         "scaleOnDelayed"}
SQS_AUTH_PARAMETERS = {"awsAccessKeyID", "awsSecretAccessKey", "awsSessionToken", "awsRoleArn"}


def _documents() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        out += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return out


DOCS = _documents()
CNPG = "postgresql.cnpg.io/v1"
BUILT_IN = [(name, doc) for name, doc in DOCS
            if not doc["apiVersion"].startswith(("keda.sh/", "postgresql.cnpg.io/"))]


def _object(required: list[str], **properties: Any) -> dict[str, Any]:
    """A JSON schema object of exactly these properties (as _strict makes KEDA's)."""
    return {"type": "object", "required": required, "properties": properties,
            "additionalProperties": False}


_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_NAME_REF = _object(["name"], name={"type": "string"})
# The fields of CloudNativePG's Cluster and Pooler (API postgresql.cnpg.io/v1, 1.25 and
# later: cloudnative-pg.io/docs, "API Reference") that the example sets, with their types
# and allowed values; anything else fails, as a misspelt field would be pruned unseen.
CNPG_SCHEMAS = {
    "Cluster": _object(
        ["instances"],
        instances={"type": "integer", "minimum": 1},
        primaryUpdateStrategy={"enum": ["supervised", "unsupervised"]},
        postgresql=_object(
            [], parameters=_STRING_MAP,
            synchronous=_object(["method", "number"], method={"enum": ["any", "first"]},
                                number={"type": "integer", "minimum": 1},
                                dataDurability={"enum": ["required", "preferred"]})),
        bootstrap=_object(["initdb"], initdb=_object(
            [], database={"type": "string"}, owner={"type": "string"}, secret=_NAME_REF)),
        storage=_object(["size"], size={"type": "string"}),
        affinity=_object([], enablePodAntiAffinity={"type": "boolean"},
                         topologyKey={"type": "string"})),
    "Pooler": _object(
        ["cluster", "pgbouncer"],
        cluster=_NAME_REF,
        instances={"type": "integer", "minimum": 0},
        type={"enum": ["rw", "ro", "r"]},
        pgbouncer=_object([], poolMode={"enum": ["session", "transaction"]},
                          parameters=_STRING_MAP)),
}


def _ids(items: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [f"{name}:{doc['kind']}/{doc['metadata']['name']}" for name, doc in items]


def _by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for _, doc in DOCS if doc["kind"] == kind}


def _pod_specs() -> list[tuple[str, dict[str, Any]]]:
    return [(doc["metadata"]["name"], doc["spec"]["template"]["spec"]) for _, doc in DOCS
            if doc["kind"] in ("Deployment", "StatefulSet")]


def _conveyor_containers() -> list[tuple[str, dict[str, Any]]]:
    return [(owner, c) for owner, spec in _pod_specs() for c in spec["containers"]
            if "conveyor" in c["image"]]


def test_the_expected_pieces_are_there() -> None:
    kinds = {(doc["kind"], doc["metadata"]["name"]) for _, doc in DOCS}
    assert {("StatefulSet", "conveyor-server"), ("Deployment", "conveyor-server"),
            ("Deployment", "conveyor-worker"), ("Deployment", "my-app-worker"),
            ("Deployment", "conveyor-scaler"), ("Role", "conveyor-scaler"),
            ("RoleBinding", "conveyor-scaler"), ("ServiceAccount", "conveyor-scaler"),
            ("ScaledObject", "conveyor-worker"), ("Secret", "conveyor-credentials")} <= kinds
    assert (MANIFESTS / "README.md").exists()


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize(("name", "doc"), BUILT_IN, ids=_ids(BUILT_IN))
def test_manifest_passes_the_kubernetes_schema(name: str, doc: dict[str, Any],
                                               version: str) -> None:
    # strict: a misspelt or misplaced field fails instead of being dropped by the API server
    kubernetes_validate.validate(doc, version, strict=True)


def _strict(schema: Any) -> Any:
    """The CRD schema with unknown fields refused (the API server would prune them)."""
    if isinstance(schema, dict):
        schema = {k: _strict(v) for k, v in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema \
                and schema.get("properties", {}).keys() != {"apiVersion", "kind", "metadata"}:
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        schema = [_strict(v) for v in schema]
    return schema


def test_scaled_object_passes_kedas_crd_schema() -> None:
    schema = _strict(yaml.safe_load(KEDA_SCHEMA.read_text()))
    objects = _by_kind("ScaledObject")
    assert objects
    for obj in objects.values():
        assert obj["apiVersion"] == "keda.sh/v1alpha1"
        jsonschema.Draft7Validator(schema).validate(obj)
    bad = copy.deepcopy(next(iter(objects.values())))
    bad["spec"]["minReplicas"] = 0  # the HPA's name for it, not KEDA's
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(schema).validate(bad)


def test_cloudnativepg_example_passes_its_fields_schema_and_fits_together() -> None:
    cnpg = [doc for _, doc in DOCS if doc["apiVersion"] == CNPG]
    assert sorted(doc["kind"] for doc in cnpg) == ["Cluster", "Pooler"]
    for doc in cnpg:
        jsonschema.Draft7Validator(CNPG_SCHEMAS[doc["kind"]]).validate(doc["spec"])
    (cluster,) = (doc for doc in cnpg if doc["kind"] == "Cluster")
    (pooler,) = (doc for doc in cnpg if doc["kind"] == "Pooler")
    bad = copy.deepcopy(pooler)
    bad["spec"]["pgbouncer"]["poolmode"] = "transaction"  # misspelt: pruned by the API
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(CNPG_SCHEMAS["Pooler"]).validate(bad["spec"])
    assert pooler["spec"]["cluster"]["name"] == cluster["metadata"]["name"]
    # Conveyor keeps no session state only when told (--store-listen): the server reads it.
    assert pooler["spec"]["pgbouncer"]["poolMode"] == "transaction"
    assert pooler["spec"]["type"] == "rw"  # writes: the primary
    server = _by_kind("Deployment")["conveyor-server"]["spec"]["template"]["spec"]
    env = {e["name"] for c in server["containers"] for e in c.get("env", [])}
    assert "CONVEYOR_STORE_LISTEN" in env
    # A failover loses nothing acknowledged: a synchronous standby, promoted first.
    assert cluster["spec"]["postgresql"]["synchronous"]["number"] >= 1
    assert cluster["spec"]["instances"] >= 3
    initdb = cluster["spec"]["bootstrap"]["initdb"]
    owner = _by_kind("Secret")[initdb["secret"]["name"]]
    assert owner["type"] == "kubernetes.io/basic-auth"
    assert owner["stringData"]["username"] == initdb["owner"]


def test_keda_trigger_points_at_conveyor_with_known_parameters() -> None:
    auths = _by_kind("TriggerAuthentication")
    secrets = _by_kind("Secret")
    for obj in _by_kind("ScaledObject").values():
        assert obj["spec"]["scaleTargetRef"]["name"] in _by_kind("Deployment")
        for trigger in obj["spec"]["triggers"]:
            assert trigger["type"] == "aws-sqs-queue"
            meta = trigger["metadata"]
            assert set(meta) <= SQS_SCALER_PARAMETERS, set(meta) - SQS_SCALER_PARAMETERS
            assert meta["queueURL"].startswith(meta["awsEndpoint"] + "/")
            assert "amazonaws.com" not in meta["awsEndpoint"]
            auth = auths[trigger["authenticationRef"]["name"]]
            for ref in auth["spec"]["secretTargetRef"]:
                assert ref["parameter"] in SQS_AUTH_PARAMETERS
                assert ref["key"] in secrets[ref["name"]]["stringData"]


def test_secret_references_resolve() -> None:
    secrets = _by_kind("Secret")
    for owner, spec in _pod_specs():
        for container in spec["containers"] + spec.get("initContainers", []):
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["key"] in secrets[ref["name"]]["stringData"], (owner, env)
        for volume in spec.get("volumes", []):
            if "secret" in volume:
                data = secrets[volume["secret"]["secretName"]]["stringData"]
                assert {i["key"] for i in volume["secret"]["items"]} <= set(data), owner


def test_services_select_their_pods() -> None:
    labels = [spec_doc["spec"]["template"]["metadata"]["labels"] for _, spec_doc in DOCS
              if spec_doc["kind"] in ("Deployment", "StatefulSet")]
    for name, service in _by_kind("Service").items():
        selector = service["spec"]["selector"].items()
        assert any(selector <= pod.items() for pod in labels), name


def test_scaler_rbac_allows_what_the_actuator_calls() -> None:
    (role,) = _by_kind("Role").values()
    allowed = {(group, resource, verb) for rule in role["rules"]
               for group in rule["apiGroups"] for resource in rule["resources"]
               for verb in rule["verbs"]}
    # conveyor/scale/kubernetes.py: GET deployment, PATCH deployments/scale, list and
    # PATCH pods (busy-pod protection)
    assert {("apps", "deployments", "get"), ("apps", "deployments/scale", "patch"),
            ("", "pods", "list"), ("", "pods", "patch")} <= allowed
    scaler = _by_kind("Deployment")["conveyor-scaler"]["spec"]["template"]["spec"]
    binding = _by_kind("RoleBinding")["conveyor-scaler"]
    assert binding["subjects"][0]["name"] == scaler["serviceAccountName"]
    args = scaler["containers"][0]["args"]
    deployment = next(a.split("=", 1)[1] for a in args if a.startswith("--deployment="))
    assert deployment in _by_kind("Deployment")
    for rule in role["rules"]:
        assert rule.get("resourceNames", [deployment]) == [deployment]


@pytest.mark.parametrize(("owner", "container"), _conveyor_containers(),
                         ids=[f"{o}/{c['name']}" for o, c in _conveyor_containers()])
def test_conveyor_arguments_parse(owner: str, container: dict[str, Any]) -> None:
    env = {e["name"]: e.get("value", "x") for e in container.get("env", [])}
    parse_conveyor_args(container["args"], env)


def test_workers_outlast_their_drain() -> None:
    for owner, spec in _pod_specs():
        for container in spec["containers"]:
            env = {e["name"]: e.get("value") for e in container.get("env", [])}
            if container.get("args", [None])[0] == "worker":
                drain_s = float(env.get("CONVEYOR_DRAIN_TIMEOUT", 30))
                assert spec["terminationGracePeriodSeconds"] > drain_s, owner


def test_server_config_in_the_secret_loads(tmp_path: Path) -> None:
    from conveyor.server.config import load

    config = tmp_path / "server.yaml"
    config.write_text(_by_kind("Secret")["conveyor-credentials"]["stringData"]["server.yaml"])
    loaded = load(config)
    assert loaded["access_keys"]


def _server_containers() -> list[tuple[str, dict[str, Any]]]:
    return [(owner, c) for owner, c in _conveyor_containers() if c["args"][0] == "server"]


def test_server_probes_tell_readiness_from_liveness(tmp_path: Path) -> None:
    """Kubernetes removes a pod failing its readiness probe from the Service and restarts a
    container failing its liveness probe (kubernetes.io/docs/tasks/configure-pod-container/
    configure-liveness-readiness-startup-probes/): a server whose database is down must
    only leave the Service, so readiness asks /ready, liveness /health, and a real server
    answers both paths (an httpGet probe passes on 200-399)."""
    servers = _server_containers()
    assert {owner for owner, _ in servers} == {"conveyor-server"}
    assert len(servers) == 2  # the SQLite StatefulSet and the PostgreSQL Deployment
    paths = set()
    for owner, container in servers:
        ports = {p["name"] for p in container["ports"]}
        ready, live = container["readinessProbe"]["httpGet"], container["livenessProbe"]["httpGet"]
        assert (ready["path"], live["path"]) == ("/ready", "/health"), owner
        assert {ready["port"], live["port"]} <= ports, owner
        paths |= {ready["path"], live["path"]}
    server = ServerProcess(tmp_path).start()
    try:
        for path in sorted(paths):
            with urllib.request.urlopen(server.url + path, timeout=10) as resp:
                assert 200 <= resp.status < 400, path
    finally:
        server.stop()
