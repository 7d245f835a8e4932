"""The deploy configs: valid YAML, a shared sessions folder on every node, placement."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ollm_cli.config.settings import OllmSettings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_ray_cluster_launcher_config_mounts_shared_sessions_on_every_node() -> None:
    config = yaml.safe_load((DEPLOY / "ray-cluster.yaml").read_text())
    assert config["provider"]["type"] == "local"
    assert config["provider"]["worker_ips"] and config["provider"]["head_ip"]
    assert any("mount -t nfs4" in c and "/mnt/ollm" in c for c in config["initialization_commands"])
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        start = [c for c in config[key] if "ray start" in c]
        assert start and all("OLLM_HOME=/mnt/ollm/home" in c for c in start)
    assert any("--head" in c for c in config["head_start_ray_commands"])
    assert any("--address=$RAY_HEAD_IP:6379" in c for c in config["worker_start_ray_commands"])
    placement = next(c for c in config["setup_commands"] if "runtime:" in c)
    assert "toolWorkers" in placement and "compressionCpus" in placement


def test_kuberay_manifest_shares_one_claim_and_ollm_home_across_pods() -> None:
    documents = [
        d for d in yaml.safe_load_all((DEPLOY / "kuberay-raycluster.yaml").read_text()) if d
    ]
    by_kind = {d["kind"]: d for d in documents}
    claim = by_kind["PersistentVolumeClaim"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    cluster = by_kind["RayCluster"]
    assert cluster["apiVersion"] == "ray.io/v1"
    templates: list[dict[str, Any]] = [cluster["spec"]["headGroupSpec"]["template"]]
    templates += [group["template"] for group in cluster["spec"]["workerGroupSpecs"]]
    assert len(templates) >= 2
    for template in templates:
        spec = template["spec"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert (
            volumes["sessions"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
        )
        container = spec["containers"][0]
        env = {e["name"]: e["value"] for e in container["env"]}
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert env["OLLM_HOME"].startswith(mounts["sessions"] + "/")
        assert mounts["config"] == env["OLLM_HOME"] + "/config.yaml"
    # the ConfigMap's config is a valid OLLM config placing the actors
    config = yaml.safe_load(by_kind["ConfigMap"]["data"]["config.yaml"])
    settings = OllmSettings.model_validate(config)
    assert settings.runtime.tool_workers == 4 and settings.runtime.compression_actors == 2
    assert settings.services.session.max_sessions == 0


def test_readme_points_at_every_deploy_file() -> None:
    readme = (DEPLOY / "README.md").read_text()
    for name in ("ray-cluster.yaml", "kuberay-raycluster.yaml", "examples/batch.yaml"):
        assert name in readme
        assert (DEPLOY / name).is_file()
