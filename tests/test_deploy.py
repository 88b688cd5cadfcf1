"""deploy/k8s: every built-in resource valid against the Kubernetes schemas (kubernetes-validate),
and the manifests agree with the code they run: probe paths, grace periods, the queue KEDA
watches, the settings the ConfigMap names, the ports the ServiceMonitor and PodMonitor scrape."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from service.api.server import GRACEFUL_SHUTDOWN_S
from service.config import Settings
from service.jobs.celery_app import QUEUE

K8S = Path(__file__).resolve().parents[1] / "deploy" / "k8s"
KUBERNETES_VERSION = "1.33"
CUSTOM = {
    "ScaledObject",
    "ServiceMonitor",
    "PodMonitor",
}  # CRDs (KEDA, Prometheus Operator): checked below


def resources() -> list[dict]:
    return [
        doc for path in sorted(K8S.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text())
    ]


def named(kind: str, name: str) -> dict:
    (found,) = [r for r in resources() if r["kind"] == kind and r["metadata"]["name"] == name]
    return found


@pytest.mark.parametrize(
    "resource",
    [r for r in resources() if r["kind"] not in CUSTOM],
    ids=lambda r: f"{r['kind']}/{r['metadata']['name']}",
)
def test_each_resource_is_valid_kubernetes(resource: dict) -> None:
    kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)


def test_the_manifests_agree_with_the_code() -> None:
    api = named("Deployment", "foley-api")["spec"]["template"]["spec"]
    (container,) = api["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    pause = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert api["terminationGracePeriodSeconds"] > GRACEFUL_SHUTDOWN_S + pause
    worker = named("Deployment", "foley-worker")["spec"]["template"]["spec"]
    assert worker["terminationGracePeriodSeconds"] > Settings().export_shutdown_grace_s
    scaled = named("ScaledObject", "foley-worker")["spec"]
    assert scaled["scaleTargetRef"]["name"] == "foley-worker"
    assert scaled["triggers"][0]["metadata"]["listName"] == QUEUE
    settings = {f"FOLEY_{name.upper()}" for name in Settings.model_fields}
    assert set(named("ConfigMap", "foley")["data"]) <= settings
    monitor = named("ServiceMonitor", "foley-api")["spec"]
    service = named("Service", "foley-api")
    assert monitor["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert monitor["endpoints"][0]["path"] == "/metrics"
    workers = named("PodMonitor", "foley-worker")["spec"]
    worker_labels = named("Deployment", "foley-worker")["spec"]["template"]["metadata"]["labels"]
    assert workers["selector"]["matchLabels"].items() <= worker_labels.items()
    (endpoint,) = workers["podMetricsEndpoints"]
    (worker_container,) = worker["containers"]
    ports = {p["name"]: p["containerPort"] for p in worker_container["ports"]}
    assert ports[endpoint["port"]] == Settings().worker_metrics_port
