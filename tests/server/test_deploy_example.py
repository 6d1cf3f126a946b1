"""examples/deploy/: the sidecar pod and its ConfigMap hold together."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from prunewarden import parse_policy
from prunewarden.server import parse_listen

DEPLOY = Path(__file__).resolve().parents[2] / "examples" / "deploy"


def load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((DEPLOY / name).read_text(encoding="utf-8"))
    return document


class TestSidecarExample:
    def test_configmap_policy_is_valid(self) -> None:
        """The policy in the ConfigMap validates."""
        configmap = load("policy-configmap.yaml")
        policy = parse_policy(configmap["data"]["policy.yaml"], "policy-configmap.yaml")
        assert policy.name == "agent-prod"

    def test_agent_and_sidecar_share_the_socket(self) -> None:
        """The agent's URL is the sidecar's --listen, on a volume both mount; the policy
        volume is the ConfigMap and the audit log is on the persistent volume."""
        pod = load("sidecar-pod.yaml")["spec"]
        agent, sidecar = pod["containers"]
        args = dict(arg.removeprefix("--").split("=", 1) for arg in sidecar["args"][1:])
        listen = parse_listen(args["listen"])
        url = next(e["value"] for e in agent["env"] if e["name"] == "PRUNEWARDEN_URL")
        assert url == f"unix:{listen.unix_path}"
        mounts = {m["name"]: m["mountPath"] for m in sidecar["volumeMounts"]}
        agent_mounts = {m["name"]: m["mountPath"] for m in agent["volumeMounts"]}
        assert str(Path(str(listen.unix_path)).parent) == mounts["pdp-socket"]
        assert agent_mounts["pdp-socket"] == mounts["pdp-socket"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert (
            volumes["policy"]["configMap"]["name"]
            == load("policy-configmap.yaml")["metadata"]["name"]
        )
        assert args["policy"].startswith(mounts["policy"])
        assert args["audit-log"].startswith(mounts["audit"])
        assert "persistentVolumeClaim" in volumes["audit"]
