"""Tenants from one signed bundle: every tenant switches revision in one swap, and a bundle
refused for any tenant keeps the last good revision for all of them."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _support.server import Server, policy_text, running_server
from prunewarden import AuditLog
from prunewarden.bundle import KeyPair, build_bundle, generate_key_pair, sign_bundle
from prunewarden.server._bundle_tenants import BundleTenants
from prunewarden.server._tenant_config import TenantSpec

EVICTION = {
    "check": "eviction",
    "segment": {"id": "turn-30", "kind": "turn", "tombstone_written": True, "tokens": 240},
    "score": 0.08,
    "perturbed_score": 0.1,
    "eviction_candidates": ["turn-30"],
}
SPECS = (TenantSpec("eu", "prod-eu", {"region": "eu"}), TenantSpec("us", "prod-us", {}))
TENANTS = """\
tenantsVersion: 1
default: us
tenants:
  - {name: eu, selector: {matchLabels: {region: eu}}, policy: prod-eu}
  - {name: us, policy: prod-us}
"""


@dataclass(frozen=True)
class Revisions:
    """Bundles of two policies under r1 and r2 (r2: new versions of both), one lacking
    prod-us, the key pair that signed them and another."""

    r1: bytes
    r2: bytes
    without_us: bytes
    keys: KeyPair
    other: KeyPair


def bundle_of(folder: Path, revision: str, versions: dict[str, str], keys: KeyPair) -> bytes:
    folder.mkdir(parents=True)
    paths = []
    for name, version in versions.items():
        path = folder / f"{name}.yaml"
        spec: dict[str, object] = {
            "eviction": {"stability_delta": 0.25 if name == "prod-eu" else 0.01}
        }
        path.write_text(policy_text(spec, name=name, version=version), encoding="utf-8")
        paths.append(path)
    built = build_bundle(paths, revision=revision, lock=False, built_at="2026-12-01T00:00:00Z")
    return sign_bundle(built, keys.private_pem)


@pytest.fixture(scope="module")
def revisions(tmp_path_factory: pytest.TempPathFactory) -> Revisions:
    folder = tmp_path_factory.mktemp("bundles")
    keys = generate_key_pair()
    both = {"prod-eu": "1.0.0", "prod-us": "1.0.0"}
    return Revisions(
        bundle_of(folder / "r1", "r1", both, keys),
        bundle_of(folder / "r2", "r2", {"prod-eu": "1.1.0", "prod-us": "1.1.0"}, keys),
        bundle_of(folder / "r3", "r3", {"prod-eu": "1.2.0"}, keys),
        keys,
        generate_key_pair(),
    )


@pytest.fixture
def served(tmp_path: Path, revisions: Revisions) -> Path:
    path = tmp_path / "bundle.tar.gz"
    path.write_bytes(revisions.r1)
    return path


@pytest.fixture
def watch(served: Path, revisions: Revisions) -> Iterator[tuple[BundleTenants, io.StringIO]]:
    """The tenants of the bundle at ``served`` (polled only when a test asks), and their log."""
    stream = io.StringIO()
    tenants = BundleTenants(
        str(served), revisions.keys.public_pem, SPECS, interval=0, audit=AuditLog(stream)
    )
    yield tenants, stream
    tenants.close()


def revisions_in_force(tenants: BundleTenants) -> dict[str, str | None]:
    return {name: e.policy.identity.bundle_revision for name, e in tenants.engines.items()}


def failures(stream: io.StringIO) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [r for r in records if r.get("kind") == "policy_reload_failed"]


class TestOneSwap:
    def test_a_new_revision_swaps_every_tenant_at_once(
        self, watch: tuple[BundleTenants, io.StringIO], served: Path, revisions: Revisions
    ) -> None:
        """One poll replaces the mapping of every tenant's engine by one holding r2 for all:
        the mapping read before holds r1 for all, the one read after r2 for all."""
        tenants, _ = watch
        before = tenants.engines
        served.write_bytes(revisions.r2)
        result = tenants.poll()
        assert result is not None
        assert (result.changed, result.problems) == (True, ())
        assert revisions_in_force(tenants) == {"eu": "r2", "us": "r2"}
        assert {e.policy.identity.bundle_revision for e in before.values()} == {"r1"}

    def test_decisions_follow_the_revision(
        self, watch: tuple[BundleTenants, io.StringIO], served: Path, revisions: Revisions
    ) -> None:
        """Each tenant decides under its own policy of the bundle, and under r2 once polled."""
        tenants, _ = watch
        eu, us = tenants.tenant("eu"), tenants.tenant("us")
        first = (eu.evaluate(EVICTION), us.evaluate(EVICTION))
        served.write_bytes(revisions.r2)
        tenants.poll()
        second = eu.evaluate(EVICTION)
        assert [(d.policy.name, d.outcome) for d in first] == [
            ("prod-eu", "allow"),
            ("prod-us", "deny"),
        ]
        assert (second.policy.version, second.policy.bundle_revision) == ("1.1.0", "r2")

    def test_a_session_follows_the_revision(
        self, watch: tuple[BundleTenants, io.StringIO], served: Path, revisions: Revisions
    ) -> None:
        """A session opened under r1 decides under r2 after the swap, on its tenant's policy."""
        tenants, _ = watch
        session = tenants.tenant("eu").session("s1")
        served.write_bytes(revisions.r2)
        tenants.poll()
        decision = session.observe_cycle({"a": 0.9, "b": 0.2}, ["a"])
        assert (decision.policy.name, decision.policy.bundle_revision) == ("prod-eu", "r2")


class TestLastGood:
    def test_a_bundle_signed_by_another_key_keeps_r1_for_all(
        self,
        watch: tuple[BundleTenants, io.StringIO],
        served: Path,
        revisions: Revisions,
        tmp_path: Path,
    ) -> None:
        """Refused: every tenant keeps r1; polled twice, one policy_reload_failed record."""
        tenants, stream = watch
        unsigned = bundle_of(tmp_path / "forged", "r9", {"prod-eu": "9.0.0"}, revisions.other)
        served.write_bytes(unsigned)
        first, second = tenants.poll(), tenants.poll()
        assert first is not None
        assert second is not None
        assert first.problems == second.problems
        assert revisions_in_force(tenants) == {"eu": "r1", "us": "r1"}
        (record,) = failures(stream)
        assert record["policy"]["name"] == "prod-eu"
        assert tenants.status("us").healthy is False

    def test_a_bundle_lacking_a_tenants_policy_keeps_r1_for_all(
        self, watch: tuple[BundleTenants, io.StringIO], served: Path, revisions: Revisions
    ) -> None:
        """r3 lacks prod-us: refused whole, not swapped in for eu alone."""
        tenants, _ = watch
        served.write_bytes(revisions.without_us)
        result = tenants.poll()
        assert result is not None
        (problem,) = result.problems
        assert "tenant 'us': no policy 'prod-us' in the bundle (it holds prod-eu)" in problem
        assert revisions_in_force(tenants) == {"eu": "r1", "us": "r1"}

    def test_healthy_again_once_a_good_bundle_is_served(
        self, watch: tuple[BundleTenants, io.StringIO], served: Path, revisions: Revisions
    ) -> None:
        """After a refused bundle, r2 swaps in and every tenant is healthy."""
        tenants, _ = watch
        served.write_bytes(revisions.without_us)
        tenants.poll()
        served.write_bytes(revisions.r2)
        tenants.poll()
        assert [tenants.status(name).healthy for name in ("eu", "us")] == [True, True]
        assert revisions_in_force(tenants) == {"eu": "r2", "us": "r2"}


@pytest.fixture
def server(tmp_path: Path, served: Path, revisions: Revisions) -> Iterator[Server]:
    key = tmp_path / "bundle.pub.pem"
    key.write_bytes(revisions.keys.public_pem)
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(TENANTS, encoding="utf-8")
    options = ("--bundle", str(served), "--bundle-key", str(key), "--tenants", str(tenants))
    with running_server(None, tmp_path, *options) as running:
        yield running


class TestServed:
    def test_a_server_of_bundle_tenants(self, server: Server) -> None:
        """``serve --bundle --tenants``: each tenant runs its policy of the bundle, listed with
        the revision in ``/v1/policies``; the start line names every tenant."""
        with server.client() as client:
            listed = client.get("/v1/policies").json()
            eu = client.post(
                "/v1/evaluate", json=EVICTION, headers={"Prunewarden-Labels": "region=eu"}
            )
        assert [
            (t["name"], t["policy"]["name"], t["bundle_revision"]) for t in listed["tenants"]
        ] == [
            ("eu", "prod-eu", "r1"),
            ("us", "prod-us", "r1"),
        ]
        assert eu.json()["policy"]["name"] == "prod-eu"
        assert "tenants eu prod-eu@1.0.0, us prod-us@1.0.0; default us" in server.startup[-1]


class TestShadowFromTheBundle:
    def test_a_tenants_shadow_is_a_policy_of_the_bundle(
        self, served: Path, revisions: Revisions
    ) -> None:
        """eu's shadow names prod-us of the bundle: it decides beside eu, under r1 as well."""
        specs = (TenantSpec("eu", "prod-eu", {}, shadow="prod-us"),)
        tenants = BundleTenants(str(served), revisions.keys.public_pem, specs, interval=0)
        try:
            decision = tenants.tenant("eu").evaluate(EVICTION)
            status = tenants.status("eu")
        finally:
            tenants.close()
        assert decision.shadow is not None
        assert (decision.outcome, decision.shadow.outcome) == ("allow", "deny")
        assert status.shadow is not None
        assert (status.shadow.name, status.shadow.bundle_revision) == ("prod-us", "r1")

    def test_a_tenant_without_one_runs_the_shadow_the_manifest_names(
        self, tmp_path: Path, revisions: Revisions
    ) -> None:
        """A tenant naming no shadow decides with the candidate the manifest names for its
        policy, as --bundle-policy does; a tenant of another policy has none."""
        folder = tmp_path / "r1"
        folder.mkdir()
        paths = {}
        for name, delta in (("prod-eu", 0.25), ("prod-us", 0.01), ("prod-eu-next", 0.01)):
            path = folder / f"{name}.yaml"
            version, policy_name = (
                ("1.1.0", "prod-eu") if name == "prod-eu-next" else ("1.0.0", name)
            )
            spec: dict[str, object] = {"eviction": {"stability_delta": delta}}
            path.write_text(policy_text(spec, name=policy_name, version=version), encoding="utf-8")
            paths[name] = path
        built = build_bundle(
            [paths["prod-eu"], paths["prod-us"]],
            revision="r1",
            lock=False,
            built_at="2026-12-01T00:00:00Z",
            shadows={"prod-eu": paths["prod-eu-next"]},
        )
        served = tmp_path / "bundle.tar.gz"
        served.write_bytes(sign_bundle(built, revisions.keys.private_pem))
        tenants = BundleTenants(str(served), revisions.keys.public_pem, SPECS, interval=0)
        try:
            decision = tenants.tenant("eu").evaluate(EVICTION)
            eu, us = tenants.status("eu"), tenants.status("us")
        finally:
            tenants.close()
        assert decision.shadow is not None
        assert (decision.outcome, decision.shadow.outcome) == ("allow", "deny")
        assert eu.shadow is not None
        assert (eu.shadow.name, eu.shadow.version, eu.shadow.bundle_revision) == (
            "prod-eu",
            "1.1.0",
            "r1",
        )
        assert us.shadow is None
