"""The status of a whole server: ``/v1/status`` and ``/readyz`` describe every tenant, and
``prunewarden status`` names them and the records shipped and dropped per destination."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _support.server import Server, policy_text, running_server
from _support.shipping import receiver, records_in, wait_for
from prunewarden.audit import rotated_files
from prunewarden.cli._main import run
from prunewarden.server import openapi_document

PATIENCE = 60.0  # seconds a background reload may take on a loaded machine
EVICTION = {
    "check": "eviction",
    "segment": {"id": "turn-30", "kind": "turn", "tombstone_written": True, "tokens": 240},
    "score": 0.08,
    "perturbed_score": 0.1,
    "eviction_candidates": ["turn-30"],
}
PROD = {"Prunewarden-Labels": "deployment=prod-eu"}
TENANTS = """\
tenantsVersion: 1
default: staging
tenants:
  - {name: prod-eu, selector: {matchLabels: {deployment: prod-eu}}, policy: prod/policy.yaml}
  - {name: staging, selector: {matchLabels: {deployment: staging}}, policy: staging/policy.yaml}
"""
HELD = "tenants prod-eu prod-eu@1.0.0, staging staging@1.0.0; default staging"


def write_policy(folder: Path, name: str, version: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    spec: dict[str, object] = {"eviction": {"stability_delta": 0.25}}
    text = policy_text(spec, name=name, version=version)
    (folder / "policy.yaml").write_text(text, encoding="utf-8")


@pytest.fixture
def tenants_file(tmp_path: Path) -> Path:
    write_policy(tmp_path / "prod", "prod-eu", "1.0.0")
    write_policy(tmp_path / "staging", "staging", "1.0.0")
    path = tmp_path / "tenants.yaml"
    path.write_text(TENANTS, encoding="utf-8")
    return path


@pytest.fixture
def server(tmp_path: Path, tenants_file: Path) -> Iterator[Server]:
    with running_server(None, tmp_path, "--tenants", str(tenants_file)) as running:
        yield running


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def eventually(client: httpx.Client, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """``GET /v1/status`` once ``check`` holds for it (the server polls every 0.2 s)."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        document: dict[str, Any] = client.get("/v1/status").json()
        if check(document):
            return document
        time.sleep(0.05)
    raise AssertionError(f"never: {document}")


def health(document: dict[str, Any]) -> list[tuple[str, bool, str, bool]]:
    """Each tenant's name, default flag, policy and health."""
    return [
        (t["name"], t["default"], f"{t['policy']['name']}@{t['policy']['version']}", t["healthy"])
        for t in document["tenants"]
    ]


def shipped(client: httpx.Client) -> int:
    """The records the server's one destination acknowledged, as /v1/status counts them."""
    (destination,) = client.get("/v1/status").json()["log_shipping"]["destinations"]
    count: int = destination["shipped"]
    return count


class TestEveryTenant:
    def test_status_and_readyz_list_every_tenant(self, server: Server) -> None:
        """Both documents name the default tenant and list both tenants, healthy, with the
        fields the OpenAPI document requires."""
        with server.client() as client:
            status = client.get("/v1/status").json()
            ready = client.get("/readyz").json()
        expected = [
            ("prod-eu", False, "prod-eu@1.0.0", True),
            ("staging", True, "staging@1.0.0", True),
        ]
        assert (status["healthy"], status["default_tenant"]) == (True, "staging")
        assert health(status) == health(ready) == expected
        assert ready["default_tenant"] == "staging"
        schemas = openapi_document()["components"]["schemas"]
        assert [name for name in schemas["Status"]["required"] if name not in status] == []
        for tenant in status["tenants"]:
            assert [name for name in schemas["Tenant"]["required"] if name not in tenant] == []

    def test_a_tenant_whose_reload_failed_makes_the_server_unhealthy(
        self, server: Server, tmp_path: Path
    ) -> None:
        """prod-eu's broken file: the status is unhealthy and says which tenant, /readyz stays
        200 (it decides on the last good policy) and shows it, the default tenant is well."""
        (tmp_path / "prod" / "policy.yaml").write_text("spec: [\n", encoding="utf-8")
        with server.client() as client:
            status = eventually(client, lambda d: not d["healthy"])
            ready = client.get("/readyz")
            decision = client.post("/v1/evaluate", json=EVICTION, headers=PROD).json()
        assert health(status) == [
            ("prod-eu", False, "prod-eu@1.0.0", False),
            ("staging", True, "staging@1.0.0", True),
        ]
        assert status["last_reload"]["outcome"] != "failed"  # the default tenant's
        (prod, _) = status["tenants"]
        assert "policy.yaml" in prod["problems"][0]
        assert ready.status_code == 200
        assert health(ready.json()) == health(status)
        assert decision["policy"]["version"] == "1.0.0"


class TestStatusCommand:
    def test_a_line_names_every_tenant(self, server: Server) -> None:
        """A server of two tenants: its line names each tenant's policy and the default."""
        with server.client() as client:
            client.post("/v1/evaluate", json=EVICTION, headers=PROD)
        code, out, err = cli("status", server.url)
        assert (code, err) == (0, "")
        assert out.startswith(f"{server.url}  healthy  {HELD}  allow 1 deny 0 halt 0  since ")

    def test_an_unhealthy_tenant_is_marked_and_its_problem_told(
        self, server: Server, tmp_path: Path
    ) -> None:
        """prod-eu's reload failed: the line marks it, ends with its problem, and exits 1."""
        (tmp_path / "prod" / "policy.yaml").write_text("spec: [\n", encoding="utf-8")
        with server.client() as client:
            prod = eventually(client, lambda d: not d["healthy"])["tenants"][0]
        code, out, _ = cli("status", server.url)
        assert code == 1
        assert "  unhealthy  tenants prod-eu prod-eu@1.0.0 (unhealthy), staging" in out
        assert out.splitlines()[0].endswith(f"  last reload failed: {prod['problems'][0]}")
        assert out.splitlines()[1] == "1 server: 0 healthy, 1 unhealthy"

    def test_a_line_counts_what_each_destination_shipped(
        self, tmp_path: Path, tenants_file: Path
    ) -> None:
        """A server shipping its log: the line counts the records shipped and dropped to the
        destination; --format json gives the whole document, tenants and shipping."""
        with (
            receiver(tmp_path / "out") as rx,
            running_server(None, tmp_path, "--tenants", str(tenants_file), "--ship", rx.url)
            as server,
            server.client() as client,
        ):  # fmt: skip
            client.post("/v1/evaluate", json=EVICTION)
            local = len(records_in(rotated_files(server.audit_log)))
            wait_for(lambda: shipped(client) == local, "the records shipped")
            code, out, err = cli("status", server.url)
            json_code, document, _ = cli("status", server.url, "--format", "json")
        assert (code, err, json_code) == (0, "", 0)
        assert f"  allow 1 deny 0 halt 0  ship {rx.url} shipped {local} dropped 0  since " in out
        (answer,) = json.loads(document)
        assert [t["name"] for t in answer["status"]["tenants"]] == ["prod-eu", "staging"]
        (destination,) = answer["status"]["log_shipping"]["destinations"]
        assert (destination["shipped"], destination["dropped"]) == (local, 0)
