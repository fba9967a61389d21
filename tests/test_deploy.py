"""The deploy configs: checked by the real tools offline, then run by real Prometheus and Alertmanager.

Offline: ``amtool check-config`` and route tests, ``promtool check config`` with the
target and rule files beside it, the Compose file against the compose-spec schema,
pinned images, loopback-only ports, secrets only from files, and the generated
files agreeing with docker-compose.yml on paths and ports. Integration: Prometheus
scrapes a prometheus_client server that falls into the colon trap and stores
``vllm:`` names anyway; Alertmanager pages a local PagerDuty stand-in with runbook
and dashboard links and inhibits warnings the way the config says.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import prometheus_client
import pytest
import yaml

from infersight import deploy
from infersight.catalog import vllm
from infersight.config import Config, parse_config
from infersight.testing.pagerduty import LocalPager
from tests.harness.monitoring import (
    api,
    running_alertmanager,
    running_prometheus,
    wait_for_series,
    write_prometheus_dir,
)
from tests.harness.scrape_server import ScrapeServer, Script

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DEPLOY = ROOT / "deploy"
ROUTING_KEY = "0123456789abcdef0123456789abcdef"  # a dummy of the length PagerDuty requires


def tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found on PATH: apt-get install {package}")
    return path


def run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))


def service(name: str) -> dict[str, Any]:
    return compose()["services"][name]


def mounts(svc: dict[str, Any]) -> dict[str, str]:
    """Container path -> host path of a service's bind mounts."""
    out = {}
    for volume in svc.get("volumes", []):
        source, target = volume.split(":")[:2]
        out[target] = source
    return out


def load_yaml(rel: str) -> Any:
    return yaml.safe_load((ROOT / rel).read_text(encoding="utf-8"))


# --- Alertmanager, offline ------------------------------------------------------------------


def test_amtool_accepts_the_committed_config() -> None:
    config_file = DEPLOY / "alertmanager" / "alertmanager.yml"
    result = run(tool("amtool", "prometheus-alertmanager"), "check-config", str(config_file))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (["severity=critical", "model_name=m"], "pagerduty"),
        (["severity=warning", "model_name=m"], "warning-webhook"),
        (["severity=info", "alertname=InfersightWatchdog"], "null"),
        (["alertname=SomethingUnlabelled"], "warning-webhook"),
    ],
)
def test_routes(labels: list[str], receiver: str) -> None:
    result = run(
        tool("amtool", "prometheus-alertmanager"),
        "config", "routes", "test",
        f"--config.file={DEPLOY / 'alertmanager/alertmanager.yml'}",
        *labels,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [receiver]


def test_pagerduty_receiver_fields() -> None:
    config = Config()
    data = yaml.safe_load(deploy.alertmanager_config(config))
    (pd,) = next(r for r in data["receivers"] if r["name"] == "pagerduty")["pagerduty_configs"]
    assert pd["routing_key_file"] == config.alerting.pagerduty.routing_key_file
    assert pd["url"] == config.alerting.pagerduty.url
    assert "routing_key" not in pd and "service_key" not in pd
    assert [link["text"] for link in pd["links"]] == ["Runbook", "Dashboard"]
    assert {"action", "model", "description"} <= set(pd["details"])
    assert data["route"]["group_by"] == ["alertname", "model_name"]
    assert (data["route"]["group_wait"], data["route"]["group_interval"], data["route"]["repeat_interval"]) == (
        config.alerting.group_wait, config.alerting.group_interval, config.alerting.repeat_interval
    )
    override = yaml.safe_load(deploy.alertmanager_config(config, "/tmp/key"))
    assert override["receivers"][0]["pagerduty_configs"][0]["routing_key_file"] == "/tmp/key"


# --- Prometheus, offline ----------------------------------------------------------------------


def test_promtool_accepts_the_committed_config_with_compose_mounts(tmp_path: Path) -> None:
    """deploy/prometheus/ as /etc/prometheus and alerts/generated/ as its rules/, as Compose mounts them."""
    prom = service("prometheus")
    bind = mounts(prom)
    config_dir = tmp_path / "etc"
    shutil.copytree(ROOT / bind["/etc/prometheus"], config_dir)
    shutil.copytree(ROOT / bind["/etc/prometheus/rules"], config_dir / "rules")
    rule_files = sorted((config_dir / "rules").glob(Path(deploy.COMPOSE_RULES).name))
    assert rule_files, "the rules glob matches no generated rule file"
    result = run(tool("promtool", "prometheus"), "check", "config", "prometheus.yml", cwd=config_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rule_files)} rule files found" in result.stdout


def test_prometheus_config_shape() -> None:
    config = Config.model_validate({"prometheus": {"vllm_job": "llm", "sidecar_job": "side", "scrape_interval": "5s"}})
    data = yaml.safe_load(deploy.prometheus_config(config, ["a.yaml", "b.yaml"]))
    assert data["global"]["scrape_interval"] == "5s"
    assert data["rule_files"] == ["a.yaml", "b.yaml"]
    jobs = {job["job_name"]: job for job in data["scrape_configs"]}
    assert jobs["llm"]["file_sd_configs"] == [{"files": [deploy.VLLM_TARGETS]}]
    assert jobs["side"]["file_sd_configs"] == [{"files": [deploy.SIDECAR_TARGETS]}]
    assert jobs["llm"]["metric_relabel_configs"][0]["replacement"] == "vllm:$1"
    assert "metric_relabel_configs" not in jobs["side"]
    assert data["alerting"]["alertmanagers"][0]["file_sd_configs"] == [{"files": [deploy.ALERTMANAGER_TARGETS]}]


def test_targets_json_is_file_sd() -> None:
    assert json.loads(deploy.targets_json(["a:1", "b:2"], {"env": "x"})) == [
        {"targets": ["a:1", "b:2"], "labels": {"env": "x"}}
    ]
    assert json.loads(deploy.targets_json([])) == [{"targets": []}]


# --- docker-compose.yml -----------------------------------------------------------------------


def test_compose_file_matches_the_compose_spec() -> None:
    result = run(
        sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(COMPOSE_FILE)
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _images() -> dict[str, str]:
    images = {name: svc["image"] for name, svc in compose()["services"].items()}
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    froms = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("FROM ")]
    assert froms, "Dockerfile has no FROM"
    images |= {f"Dockerfile FROM #{i}": image for i, image in enumerate(froms)}
    return images


def test_images_are_pinned() -> None:
    for where, image in _images().items():
        name, _, tag = image.rpartition(":")
        assert name and tag and "/" not in tag, f"{where}: {image} has no tag"
        assert tag != "latest", f"{where}: {image} floats"


def test_ports_bind_loopback_only() -> None:
    for name, svc in compose()["services"].items():
        for port in svc.get("ports", []):
            host_ip = port.get("host_ip") if isinstance(port, dict) else str(port).split(":")[0]
            assert host_ip == "127.0.0.1", f"{name} publishes {port} beyond loopback"


def test_secrets_come_from_ignored_files() -> None:
    data = compose()
    for name, secret in data["secrets"].items():
        assert secret["file"].startswith("./secrets/"), name
        ignored = run("git", "check-ignore", "-q", secret["file"], cwd=ROOT)
        assert ignored.returncode == 0, f"{secret['file']} is not git-ignored"
    for name, svc in data["services"].items():
        for key, value in (svc.get("environment") or {}).items():
            if any(word in key for word in ("PASSWORD", "TOKEN", "KEY", "SECRET")):
                assert key.endswith("__FILE") and value.startswith("/run/secrets/"), f"{name}: {key} is inline"
    assert "secrets/" in (ROOT / ".dockerignore").read_text(encoding="utf-8").split()


SECRET_KEYS = {"routing_key", "service_key", "password", "api_key", "bearer_token", "token", "secret"}


def _inline_secrets(node: Any, where: str) -> list[str]:
    """Paths of keys that hold a secret value itself (``*_file`` keys point at one and are fine)."""
    if isinstance(node, dict):
        found = [f"{where}.{k}" for k, v in node.items() if str(k).lower() in SECRET_KEYS and isinstance(v, str)]
        return found + [x for k, v in node.items() for x in _inline_secrets(v, f"{where}.{k}")]
    if isinstance(node, list):
        return [x for i, v in enumerate(node) for x in _inline_secrets(v, f"{where}[{i}]")]
    return []


def test_no_secret_values_committed() -> None:
    files = [COMPOSE_FILE, *(p for p in DEPLOY.rglob("*") if p.suffix in {".yml", ".yaml"})]
    for path in files:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert _inline_secrets(data, path.name) == []
    configmap = load_yaml("deploy/k8s/configmap.yaml")
    assert _inline_secrets(yaml.safe_load(configmap["data"]["infersight.yaml"]), "configmap") == []
    tracked = run("git", "ls-files", "secrets", cwd=ROOT)
    assert tracked.stdout == "", f"files under secrets/ are tracked: {tracked.stdout}"


def test_compose_agrees_with_the_generated_configs() -> None:
    config = Config()
    # Every bind mount exists in the repository.
    for name, svc in compose()["services"].items():
        for source in mounts(svc).values():
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name} mounts {source}, which does not exist"
    # Alertmanager reads the routing key where the generated config says.
    am = service("alertmanager")
    (secret,) = am["secrets"]
    assert secret["target"] == config.alerting.pagerduty.routing_key_file
    # The sidecar: image, port, config and token paths.
    sidecar = service("infersight")
    assert sidecar["image"] == deploy.SIDECAR_IMAGE
    assert sidecar["ports"] == [f"127.0.0.1:{config.exporter.port}:{config.exporter.port}"]
    assert f":{config.exporter.port}/healthz" in " ".join(sidecar["healthcheck"]["test"])
    config_path = sidecar["command"][sidecar["command"].index("--config") + 1]
    assert mounts(sidecar)[config_path] == "./deploy/compose/infersight.yaml"
    assert sidecar["secrets"] == ["ingest_token"]
    assert deploy.COMPOSE_INGEST_TOKEN_FILE == "/run/secrets/ingest_token"
    targets = json.loads((DEPLOY / "prometheus" / deploy.SIDECAR_TARGETS).read_text())
    assert targets[0]["targets"] == [f"infersight:{config.exporter.port}"]
    # Grafana: dashboards where the provider looks, datasource pointing at the prometheus service.
    grafana = mounts(service("grafana"))
    assert grafana[deploy.GRAFANA_DASHBOARDS_DIR] == "./dashboards/generated"
    provider = load_yaml("deploy/grafana/provisioning/dashboards/infersight.yaml")
    assert provider["providers"][0]["options"]["path"] == deploy.GRAFANA_DASHBOARDS_DIR
    home = service("grafana")["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert (ROOT / grafana[deploy.GRAFANA_DASHBOARDS_DIR] / Path(home).name).is_file()
    (source,) = load_yaml("deploy/grafana/provisioning/datasources/prometheus.yaml")["datasources"]
    assert source["url"] == f"http://prometheus:{deploy.PROMETHEUS_PORT}"
    assert source["jsonData"]["timeInterval"] == config.prometheus.scrape_interval
    assert service("prometheus")["ports"] == [f"127.0.0.1:{deploy.PROMETHEUS_PORT}:{deploy.PROMETHEUS_PORT}"]
    assert service("alertmanager")["ports"] == [f"127.0.0.1:{deploy.ALERTMANAGER_PORT}:{deploy.ALERTMANAGER_PORT}"]
    assert service("grafana")["ports"] == [f"127.0.0.1:{deploy.GRAFANA_PORT}:{deploy.GRAFANA_PORT}"]


def test_container_configs_load_in_the_sidecar() -> None:
    """The sidecar configs deploy/ ships pass the config validator and carry the token file."""
    compose_config = parse_config(load_yaml("deploy/compose/infersight.yaml"), "compose")
    assert compose_config.exporter.ingest_token_file == deploy.COMPOSE_INGEST_TOKEN_FILE
    assert [t.url for t in compose_config.vllm.targets] == [f"http://{deploy.VLLM_ADDRESS}/metrics"]
    configmap = load_yaml("deploy/k8s/configmap.yaml")
    k8s_config = parse_config(yaml.safe_load(configmap["data"]["infersight.yaml"]), "configmap")
    assert k8s_config.exporter.ingest_token_file == deploy.K8S_INGEST_TOKEN_FILE
    assert k8s_config.vllm.targets == Config().vllm.targets


def test_k8s_manifests_agree() -> None:
    config = Config()
    patch = load_yaml("deploy/k8s/sidecar-patch.yaml")["spec"]["template"]["spec"]
    (container,) = patch["containers"]
    assert container["ports"] == [{"name": "infersight", "containerPort": config.exporter.port}]
    config_arg = container["args"][container["args"].index("--config") + 1]
    mount_paths = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in patch["volumes"]}
    config_volume = next(n for n, p in mount_paths.items() if config_arg.startswith(p + "/"))
    assert volumes[config_volume]["configMap"]["name"] == load_yaml("deploy/k8s/configmap.yaml")["metadata"]["name"]
    assert deploy.K8S_INGEST_TOKEN_FILE.rsplit("/", 1)[0] in mount_paths.values()
    monitor = load_yaml("deploy/k8s/podmonitor.yaml")["spec"]
    jobs = [e["relabelings"][0]["replacement"] for e in monitor["podMetricsEndpoints"]]
    assert jobs == [config.prometheus.vllm_job, config.prometheus.sidecar_job]


# --- real Prometheus and Alertmanager -----------------------------------------------------------


@pytest.fixture
def pager() -> Iterator[LocalPager]:
    with LocalPager() as local:
        yield local


@pytest.fixture
def fast_config(pager: LocalPager) -> Config:
    return Config.model_validate(
        {
            "prometheus": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "alerting": {
                "group_wait": "1s",
                "group_interval": "1s",
                "pagerduty": {"url": pager.enqueue_url},
                "warning_webhook_url": pager.webhook_url,
            },
        }
    )


@pytest.fixture
def alertmanager(tmp_path: Path, fast_config: Config) -> Iterator[str]:
    key = tmp_path / "secrets" / "routing_key"
    key.parent.mkdir()
    key.write_text(ROUTING_KEY + "\n", encoding="utf-8")
    with running_alertmanager(tmp_path / "alertmanager", fast_config, key) as url:
        yield url


@pytest.fixture
def colon_trap_server() -> Iterator[str]:
    """A vLLM-named gauge and counter served by prometheus_client's own handler (the trap); yields host:port."""
    registry = prometheus_client.CollectorRegistry()
    labels = ["model_name", "engine"]
    gauge = prometheus_client.Gauge(vllm.NUM_REQUESTS_RUNNING.name, "running", labels, registry=registry)
    gauge.labels("trap", "0").set(7)
    counter = prometheus_client.Counter(vllm.NUM_PREEMPTIONS.family, "preemptions", labels, registry=registry)
    counter.labels("trap", "0").inc(3)
    server, thread = prometheus_client.start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _alert(name: str, severity: str, **labels: str) -> dict[str, Any]:
    return {
        "labels": {"alertname": name, "severity": severity, **labels},
        "annotations": {
            "summary": f"{name} summary.",
            "description": f"{name} description.",
            "action": f"{name} action",
            "runbook_url": f"https://runbooks.example/{name}.md",
            "dashboard_url": "http://localhost:3000/d/infersight-overview",
        },
    }


def _post_alerts(url: str, alerts: list[dict[str, Any]]) -> None:
    request = urllib.request.Request(
        f"{url}/api/v2/alerts", json.dumps(alerts).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200


@pytest.mark.integration
def test_alertmanager_pages_with_links_and_inhibits_per_model(alertmanager: str, pager: LocalPager) -> None:
    _post_alerts(
        alertmanager,
        [
            _alert("InfersightP99LatencyCritical", "critical", model_name="m1"),
            _alert("InfersightP99LatencyWarning", "warning", model_name="m1"),  # inhibited by the critical
            _alert("InfersightP99LatencyWarning", "warning", model_name="m2"),  # another model: notified
            _alert("InfersightGPUCritical", "critical"),  # no model_name: must not inhibit ...
            _alert("InfersightSidecarDown", "warning"),  # ... this model-less warning
            _alert("InfersightWatchdog", "info"),
        ],
    )
    event = pager.events.wait_for(lambda e: _summary(e) == "InfersightP99LatencyCritical summary.", 20).body
    assert event["routing_key"] == ROUTING_KEY
    assert event["payload"]["severity"] == "critical"
    assert event["links"] == [
        {"href": "https://runbooks.example/InfersightP99LatencyCritical.md", "text": "Runbook"},
        {"href": "http://localhost:3000/d/infersight-overview", "text": "Dashboard"},
    ]
    details = event["payload"]["custom_details"]
    assert details["action"] == "InfersightP99LatencyCritical action"
    assert details["model"] == "m1"
    assert "InfersightP99LatencyCritical description." in details["description"]
    pager.webhooks.wait_for(lambda b: b["commonLabels"].get("model_name") == "m2", 20)
    pager.webhooks.wait_for(lambda b: b["commonLabels"].get("alertname") == "InfersightSidecarDown", 20)
    pager.events.wait_for(lambda e: _summary(e) == "InfersightGPUCritical summary.", 20)
    alerts = api_v2_alerts(alertmanager)
    state = {(a["labels"]["alertname"], a["labels"].get("model_name")): a["status"] for a in alerts}
    assert state[("InfersightP99LatencyWarning", "m1")]["inhibitedBy"], "the m1 warning was not inhibited"
    assert not state[("InfersightP99LatencyWarning", "m2")]["inhibitedBy"]
    assert not state[("InfersightSidecarDown", None)]["inhibitedBy"]
    sent = [a["labels"] for b in pager.webhooks.items() for a in b.body["alerts"]]
    assert {"alertname": "InfersightP99LatencyWarning", "severity": "warning", "model_name": "m1"} not in sent
    assert all(labels["alertname"] != "InfersightWatchdog" for labels in sent)


def _summary(event: dict[str, Any]) -> str | None:
    return event.get("payload", {}).get("summary")


def api_v2_alerts(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/api/v2/alerts", timeout=5) as response:
        return json.loads(response.read())


@pytest.mark.integration
def test_prometheus_defuses_the_colon_trap_and_finds_alertmanager(
    tmp_path: Path, fast_config: Config, alertmanager: str, colon_trap_server: str
) -> None:
    with ScrapeServer() as sidecar:
        sidecar.scripts["/metrics"] = Script(body=b'infersight_collector_up{collector="vllm"} 1\n')
        sidecar_address = sidecar.url("/metrics").split("/")[2]
        config_file = write_prometheus_dir(
            tmp_path / "prometheus",
            fast_config,
            vllm=[colon_trap_server],
            sidecar=[sidecar_address],
            alertmanagers=[alertmanager.removeprefix("http://")],
            rule_files={"infersight.rules.yaml": (ROOT / "alerts/generated/infersight.rules.yaml").read_text()},
        )
        with running_prometheus(tmp_path / "prometheus", config_file) as url:
            (running,) = wait_for_series(url, f'{vllm.NUM_REQUESTS_RUNNING}{{model_name="trap"}}')
            assert running["value"][1] == "7"
            assert running["metric"]["job"] == fast_config.prometheus.vllm_job
            (preempted,) = wait_for_series(url, f'{vllm.NUM_PREEMPTIONS}{{model_name="trap"}}')
            assert preempted["value"][1] == "3"
            assert api(url, "/api/v1/query", query='{__name__=~"vllm_.+"}')["result"] == []
            (sidecar_up,) = wait_for_series(url, f'up{{job="{fast_config.prometheus.sidecar_job}"}} == 1')
            assert sidecar_up["metric"]["instance"] == sidecar_address
            managers = api(url, "/api/v1/alertmanagers")["activeAlertmanagers"]
            assert [m["url"] for m in managers] == [f"{alertmanager}/api/v2/alerts"]
            groups = api(url, "/api/v1/rules")["groups"]
            assert groups and all(g["file"].endswith("rules/infersight.rules.yaml") for g in groups)
