"""Who may choose a tenant: labels given twice are refused, ``/readyz`` (open without the
token) names tenants and their health but not the selectors that route to them, and with
``--trusted-labels-header`` only the proxy's header chooses."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _support.server import Server, policy_text, running_server

EVICTION = {
    "check": "eviction",
    "segment": {"id": "turn-30", "kind": "turn", "tombstone_written": True, "tokens": 240},
    "score": 0.08,
    "perturbed_score": 0.1,
    "eviction_candidates": ["turn-30"],
}
TENANTS = """\
tenantsVersion: 1
default: staging
tenants:
  - {name: prod-eu, selector: {matchLabels: {deployment: prod-eu}}, policy: prod/policy.yaml}
  - {name: staging, selector: {matchLabels: {deployment: staging}}, policy: staging/policy.yaml}
"""
PROXY = "X-Proxy-Labels"


@pytest.fixture
def tenants_file(tmp_path: Path) -> Path:
    for folder, name in (("prod", "prod-eu"), ("staging", "staging")):
        (tmp_path / folder).mkdir()
        text = policy_text({"eviction": {"stability_delta": 0.25}}, name=name, version="1.0.0")
        (tmp_path / folder / "policy.yaml").write_text(text, encoding="utf-8")
    path = tmp_path / "tenants.yaml"
    path.write_text(TENANTS, encoding="utf-8")
    return path


@pytest.fixture
def server(tmp_path: Path, tenants_file: Path) -> Iterator[Server]:
    with running_server(None, tmp_path, "--tenants", str(tenants_file)) as running:
        yield running


def problem_of(response: httpx.Response) -> dict[str, object]:
    assert response.headers["content-type"] == "application/problem+json"
    document: dict[str, object] = response.json()
    return document


class TestLabels:
    def test_two_label_header_lines_are_refused(self, server: Server) -> None:
        """A proxy's line and the caller's line: 400, located, never one of them preferred."""
        headers = [
            ("Prunewarden-Labels", "deployment=staging"),
            ("Prunewarden-Labels", "deployment=prod-eu"),
        ]
        with server.client() as client:
            refused = client.post("/v1/evaluate", json=EVICTION, headers=headers)
            one = client.post(
                "/v1/evaluate", json=EVICTION, headers={"Prunewarden-Labels": "deployment=prod-eu"}
            )
        assert refused.status_code == 400
        assert "given on 2 header lines" in str(problem_of(refused)["detail"])
        assert one.status_code == 200
        assert one.json()["policy"]["name"] == "prod-eu"

    def test_readyz_shows_names_and_health_not_selectors(self, server: Server) -> None:
        """/readyz lists each tenant's name, policy and health; selectors only behind the
        token-guarded /v1/policies."""
        with server.client() as client:
            ready = client.get("/readyz").json()
            policies = client.get("/v1/policies").json()
        assert [(t["name"], t["healthy"]) for t in ready["tenants"]] == [
            ("prod-eu", True),
            ("staging", True),
        ]
        assert all("selector" not in tenant for tenant in ready["tenants"])
        assert "deployment" not in str(ready)
        assert policies["tenants"][0]["selector"] == {"matchLabels": {"deployment": "prod-eu"}}


class TestTrustedHeader:
    def test_only_the_proxys_header_chooses(self, tmp_path: Path, tenants_file: Path) -> None:
        """With --trusted-labels-header, the proxy's header chooses the tenant; a caller's
        Prunewarden-Labels header, or labels in its document, are refused (400)."""
        options = ("--tenants", str(tenants_file), "--trusted-labels-header", PROXY)
        with running_server(None, tmp_path, *options) as running, running.client() as client:
            chosen = client.post(
                "/v1/evaluate", json=EVICTION, headers={PROXY: "deployment=prod-eu"}
            )
            by_caller = client.post(
                "/v1/evaluate", json=EVICTION, headers={"Prunewarden-Labels": "deployment=prod-eu"}
            )
            in_document = client.post(
                "/v1/evaluate",
                json={**EVICTION, "labels": {"deployment": "prod-eu"}},
                headers={PROXY: "deployment=staging"},
            )
            without = client.post("/v1/evaluate", json=EVICTION)
        assert chosen.json()["policy"]["name"] == "prod-eu"
        assert by_caller.status_code == 400
        assert f"from the proxy's {PROXY} header" in str(problem_of(by_caller)["detail"])
        assert in_document.status_code == 400
        assert "$.labels" in str(problem_of(in_document)["detail"])
        assert without.json()["policy"]["name"] == "staging"
