"""The status document as Prometheus metrics: ``GET /metrics`` of an app in process, parsed
with prometheus_client's own parser, says what ``GET /v1/status`` says of each tenant's
policy and health, the log shipped per destination and the sessions live."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.shipping import receiver, records_in, wait_for
from conftest import SERVED_SPEC, policy_text
from prometheus_client.parser import text_string_to_metric_families
from prunewarden import ReloadingEngine
from prunewarden.audit import rotated_files
from prunewarden.server import Built, Listen, ServerConfig, build_app, read_tenants
from starlette.testclient import TestClient

TENANTS = """\
tenantsVersion: 1
default: us
tenants:
  - {name: eu, selector: {matchLabels: {region: eu}}, policy: eu.yaml}
  - {name: us, selector: {matchLabels: {region: us}}, policy: us.yaml}
"""
EVICTION = {
    "check": "eviction",
    "segment": {"id": "s1", "kind": "tool_output", "tombstone_written": True},
    "score": 0.1,
    "perturbed_score": 0.12,
}
Samples = dict[str, list[tuple[dict[str, str], float]]]


def scraped(client: TestClient) -> Samples:
    """Every sample of ``/metrics``, by sample name: its labels and value."""
    found: Samples = {}
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def by_label(samples: Samples, name: str, label: str) -> dict[str, float]:
    return {labels[label]: value for labels, value in samples.get(name, [])}


@pytest.fixture
def tenants_file(tmp_path: Path) -> Path:
    (tmp_path / "eu.yaml").write_text(policy_text(SERVED_SPEC, name="eu"), encoding="utf-8")
    us = policy_text(SERVED_SPEC, name="us", version="2.3.0")
    (tmp_path / "us.yaml").write_text(us, encoding="utf-8")
    path = tmp_path / "tenants.yaml"
    path.write_text(TENANTS, encoding="utf-8")
    return path


@pytest.fixture
def built(tmp_path: Path, tenants_file: Path) -> Iterator[tuple[Built, str]]:
    with receiver(tmp_path / "out") as rx:
        config = ServerConfig(
            None,
            str(tmp_path / "audit.jsonl"),
            Listen(),
            reload_interval=0,
            tenants=read_tenants(tenants_file),
            ship=(rx.url,),
            ship_replica="eu-1",
        )
        app = build_app(config)
        try:
            yield app, rx.url
        finally:
            app.close()


def status_of(client: TestClient) -> dict[str, Any]:
    answer = client.get("/v1/status")
    assert answer.status_code == 200
    document: dict[str, Any] = answer.json()
    return document


class TestStatusMetrics:
    def test_each_tenant_policy_and_health_as_in_the_status(self, built: tuple[Built, str]) -> None:
        """One info sample per tenant of the file, labelled as ``/v1/status`` names its
        policy (the digest cut to a prefix), and each tenant healthy."""
        client = TestClient(built[0].app, base_url="http://127.0.0.1")
        client.post("/v1/evaluate", json=EVICTION, headers={"Prunewarden-Labels": "region=eu"})
        samples, status = scraped(client), status_of(client)
        info = samples["prunewarden_tenant_policy_info"]
        expected = [
            {
                "tenant": tenant["name"],
                "policy": tenant["policy"]["name"],
                "version": tenant["policy"]["version"],
                "digest": tenant["policy"]["digest"][: len("sha256:") + 12],
                "bundle_revision": "",
            }
            for tenant in status["tenants"]
        ]
        assert [labels for labels, _ in info] == expected
        assert [value for _, value in info] == [1.0, 1.0]
        assert expected[1]["version"] == "2.3.0"
        health = by_label(samples, "prunewarden_tenant_healthy", "tenant")
        assert health == {t["name"]: float(t["healthy"]) for t in status["tenants"]}
        assert health == {"eu": 1.0, "us": 1.0}
        assert samples["prunewarden_server_healthy"] == [({}, 1.0)]

    def test_a_tenant_that_failed_to_reload_is_0(
        self, built: tuple[Built, str], tmp_path: Path
    ) -> None:
        """A tenant whose policy file broke is 0, the other stays 1, the server 0; its
        policy info still names the version in force."""
        app = built[0]
        client = TestClient(app.app, base_url="http://127.0.0.1")
        (tmp_path / "eu.yaml").write_text("policyVersion: [", encoding="utf-8")
        eu = next(t.holder for t in app.tenants.all if t.name == "eu")
        assert isinstance(eu, ReloadingEngine)
        assert eu.reload().problems
        samples, status = scraped(client), status_of(client)
        health = by_label(samples, "prunewarden_tenant_healthy", "tenant")
        assert health == {t["name"]: float(t["healthy"]) for t in status["tenants"]}
        assert health == {"eu": 0.0, "us": 1.0}
        assert samples["prunewarden_server_healthy"] == [({}, 0.0)]
        versions = by_label(samples, "prunewarden_tenant_policy_info", "tenant")
        assert versions == {"eu": 1.0, "us": 1.0}

    def test_shipping_and_sessions_live_as_in_the_status(
        self, built: tuple[Built, str], tmp_path: Path
    ) -> None:
        """Records shipped, dropped and buffered per destination, and the sessions live."""
        app, url = built
        client = TestClient(app.app, base_url="http://127.0.0.1")
        for _ in range(3):
            assert client.post("/v1/evaluate", json=EVICTION).status_code == 200
        body = {"scores": {"c": 0.9, "a": 0.6, "b": 0.1}, "pinned": ["c"]}
        assert client.post("/v1/sessions/one/cycles", json=body).status_code == 200
        local = len(records_in(rotated_files(tmp_path / "audit.jsonl")))

        def shipped() -> int:
            destination = status_of(client)["log_shipping"]["destinations"][0]
            count: int = destination["shipped"]
            return count

        wait_for(lambda: shipped() == local, "every record shipped")
        samples, status = scraped(client), status_of(client)
        (destination,) = status["log_shipping"]["destinations"]
        for metric, key in [
            ("prunewarden_log_records_shipped_total", "shipped"),
            ("prunewarden_log_records_dropped_total", "dropped"),
            ("prunewarden_log_records_buffered", "buffered_records"),
        ]:
            assert by_label(samples, metric, "destination") == {url: destination[key]}
        assert destination["shipped"] == local > 0
        assert samples["prunewarden_server_live_sessions"] == [({}, 1.0)]
