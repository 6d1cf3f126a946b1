"""The container image's probe and the Kubernetes manifests of deploy/.

No container engine runs here: the Dockerfile is linted by hadolint (`make lint`), its probe
(tools/container_probe.py) is run against a real server, and the manifests are checked as
YAML, then rendered by `kubectl kustomize` where kubectl (with kustomize v4 or later) is on PATH.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from _support.server import running_server
from prunewarden.policy import load_policy

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
PROBE = ROOT / "tools" / "container_probe.py"
SOCKET = "/run/prunewarden/pdp.sock"


def kustomize_version() -> str | None:
    """The major version of kubectl's kustomize, when kubectl is on PATH."""
    if shutil.which("kubectl") is None:
        return None
    done = subprocess.run(
        ["kubectl", "version", "--client"], capture_output=True, text=True, check=False
    )
    found = re.search(r"Kustomize Version: v(\d+)", done.stdout)
    return found.group(1) if found else None


KUSTOMIZE = kustomize_version()
needs_kustomize = pytest.mark.skipif(
    KUSTOMIZE is None or int(KUSTOMIZE) < 4,
    reason="kubectl with kustomize v4 or later is not on PATH (the manifests are still checked "
    "as YAML)",
)


def probe(*argv: str, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROBE), *argv],
        env={"PRUNEWARDEN_URL": url},
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )


def render(folder: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        ["kubectl", "kustomize", str(folder)], capture_output=True, text=True, check=True
    )
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def documents(*names: str) -> list[dict[str, Any]]:
    """The base's manifests as written, without kustomize."""
    found: list[dict[str, Any]] = []
    for name in names:
        found += [doc for doc in yaml.safe_load_all((DEPLOY / "base" / name).read_text()) if doc]
    return found


def only(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = [doc for doc in docs if doc["kind"] == kind]
    return found


def sidecar(deployment: dict[str, Any]) -> dict[str, Any]:
    """The pod's one init container: prunewarden, as a native sidecar."""
    containers: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["initContainers"]
    [found] = containers
    return found


def flags(container: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for argument in container["args"][1:]:
        name, _, value = argument.partition("=")
        yield name, value


def check_sidecar(deployment: dict[str, Any]) -> None:
    """What every rendering of the sidecar must keep: non-root, read-only, probed, mounted."""
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = sidecar(deployment)
    assert container["restartPolicy"] == "Always"  # a native sidecar
    assert container["args"][0] == "serve"
    context = container["securityContext"]
    assert (context["readOnlyRootFilesystem"], context["runAsNonRoot"]) == (True, True)
    assert context["allowPrivilegeEscalation"] is False
    probes = {
        kind: container[kind]["exec"]["command"]
        for kind in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert probes == {
        "startupProbe": ["prunewarden-probe", "/readyz"],
        "livenessProbe": ["prunewarden-probe", "/healthz"],
        "readinessProbe": ["prunewarden-probe", "/readyz"],
    }
    options = dict(flags(container))
    assert options["--listen"] == f"unix:{SOCKET}"
    assert {"name": "PRUNEWARDEN_URL", "value": f"unix:{SOCKET}"} in container["env"]
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    # Every path the server writes is a mounted volume: the root filesystem stays read-only.
    for written in (SOCKET, options["--audit-log"], options["--sessions"].removeprefix("sqlite:")):
        assert mounts[str(Path(written).parent)] in volumes
    assert volumes[mounts["/etc/prunewarden"]]["configMap"]["name"] == "prunewarden-policy"
    assert options["--policy"] == "/etc/prunewarden/policy.yaml"
    agent_mounts = {m["mountPath"]: m["name"] for c in pod["containers"] for m in c["volumeMounts"]}
    assert agent_mounts[str(Path(SOCKET).parent)] == mounts[str(Path(SOCKET).parent)]


class TestContainerProbe:
    def test_healthz_and_readyz_of_a_real_server_pass(self, tmp_path: Path) -> None:
        """The probe exits 0 on a server's /healthz and /readyz over its unix socket."""
        sock = tmp_path / "pdp.sock"
        policy = ROOT / "deploy" / "base" / "policy.yaml"
        with running_server(policy, tmp_path, listen=f"unix:{sock}"):
            health = probe("/healthz", url=f"unix:{sock}")
            ready = probe("/readyz", url=f"unix:{sock}")
        assert (health.returncode, health.stdout) == (0, "/healthz: 200 OK\n")
        assert (ready.returncode, ready.stdout) == (0, "/readyz: 200 OK\n")

    def test_no_server_fails_saying_where_it_asked(self, tmp_path: Path) -> None:
        """Nothing listening: exit 1, one line naming the path and the address."""
        done = probe("/healthz", url=f"unix:{tmp_path / 'none.sock'}")
        assert done.returncode == 1
        assert done.stderr.startswith(f"/healthz: unix:{tmp_path / 'none.sock'}: ")
        assert done.stderr.count("\n") == 1

    @pytest.mark.parametrize("argv", [(), ("/metrics",), ("/healthz", "/readyz")])
    def test_anything_but_one_probe_path_is_a_usage_error(self, argv: tuple[str, ...]) -> None:
        """Only /healthz or /readyz, alone: otherwise exit 2 with the usage line."""
        done = probe(*argv, url=f"unix:{SOCKET}")
        assert (done.returncode, done.stderr) == (2, "usage: prunewarden-probe /healthz|/readyz\n")


class TestDockerfile:
    def test_the_image_runs_the_probe_as_its_healthcheck_as_a_non_root_user(self) -> None:
        """HEALTHCHECK runs prunewarden-probe /healthz, USER is not root, two stages."""
        text = (ROOT / "Dockerfile").read_text()
        assert len(re.findall(r"^FROM ", text, re.MULTILINE)) == 2
        assert re.search(r'^\s+CMD \["prunewarden-probe", "/healthz"\]$', text, re.MULTILINE)
        assert re.findall(r"^USER (\S+)$", text, re.MULTILINE) == ["10001:10001"]
        assert f"--listen=unix:{SOCKET}" in text
        assert f"PRUNEWARDEN_URL=unix:{SOCKET}" in text

    def test_the_image_carries_the_extras_of_its_documented_paths(self) -> None:
        """serve, and bundle for serve --bundle (signed bundles), both extras of the package,
        as docs/ci.md says."""
        text = (ROOT / "Dockerfile").read_text()
        (extras,) = re.findall(r'pip install --no-cache-dir "\.\[([a-z,-]+)\]"', text)
        installed = extras.split(",")
        assert {"serve", "bundle"} <= set(installed)
        declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
        assert set(installed) <= set(declared["optional-dependencies"])
        assert f"`prunewarden[{extras}]`" in (ROOT / "docs" / "ci.md").read_text()


class TestManifestsAsWritten:
    def test_the_sidecar_is_non_root_read_only_and_probed(self) -> None:
        """The base Deployment's sidecar, read as YAML without kustomize."""
        check_sidecar(only(documents("deployment.yaml"), "Deployment"))

    @pytest.mark.parametrize("folder", ["base", "overlays/production"])
    def test_each_policy_the_manifests_ship_is_valid(self, folder: str) -> None:
        """The policies the ConfigMaps are generated from load (extends builtin:default)."""
        policy = load_policy(str(DEPLOY / folder / "policy.yaml"))
        assert policy.identity.version == "1.0.0"


@needs_kustomize
class TestKustomize:
    def test_the_base_renders_its_configmap_volume_and_sidecar(self) -> None:
        """kubectl kustomize deploy/base: the policy ConfigMap under its fixed name, the
        volume claim, and the sidecar as written."""
        docs = render(DEPLOY / "base")
        assert sorted(doc["kind"] for doc in docs) == [
            "ConfigMap",
            "Deployment",
            "PersistentVolumeClaim",
        ]
        config = only(docs, "ConfigMap")
        assert config["metadata"]["name"] == "prunewarden-policy"
        assert config["data"]["policy.yaml"] == (DEPLOY / "base" / "policy.yaml").read_text()
        deployment = only(docs, "Deployment")
        check_sidecar(deployment)
        assert sidecar(deployment)["image"] == "registry.example.internal/prunewarden:0.1"

    def test_the_production_overlay_keeps_the_sidecar_and_changes_what_it_says(self) -> None:
        """The overlay: its namespace, pinned image, own policy, fsync always, larger volume."""
        docs = render(DEPLOY / "overlays" / "production")
        assert {doc["metadata"]["namespace"] for doc in docs} == {"agents"}
        config = only(docs, "ConfigMap")
        overlay_policy = DEPLOY / "overlays" / "production" / "policy.yaml"
        assert config["data"]["policy.yaml"] == overlay_policy.read_text()
        deployment = only(docs, "Deployment")
        check_sidecar(deployment)
        container = sidecar(deployment)
        assert container["image"] == "registry.example.internal/prunewarden:0.1.0"
        assert dict(flags(container))["--audit-fsync"] == "always"
        claim = only(docs, "PersistentVolumeClaim")
        assert claim["spec"]["resources"]["requests"]["storage"] == "20Gi"
