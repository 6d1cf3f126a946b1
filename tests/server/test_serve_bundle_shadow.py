"""``prunewarden serve --bundle URL`` on a bundle naming a shadow: a real server runs the
candidate beside the policy, and swaps both in or out together as the bundle changes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _support.bundles import BASE, BundleServer, bundle_server, prod
from _support.server import Server, audit_decisions, running_server
from prunewarden.bundle import KeyPair, build_bundle, generate_key_pair, sign_bundle

ROOT = Path(__file__).resolve().parents[2]
EVICTION = json.loads((ROOT / "examples" / "inputs" / "eviction-healthy.json").read_text())
PATIENCE = 60.0  # seconds a background poll may take on a loaded machine


def signed(folder: Path, keys: KeyPair, revision: str, candidate: str | None) -> bytes:
    """prod@1.0.0 (allows the example eviction), with ``candidate`` as its shadow if given."""
    folder.mkdir()
    (folder / "base.yaml").write_text(BASE, encoding="utf-8")
    (folder / "prod.yaml").write_text(prod(0.25, "1.0.0"), encoding="utf-8")
    shadows = {}
    if candidate is not None:
        (folder / "candidate.yaml").write_text(candidate, encoding="utf-8")
        shadows["prod"] = folder / "candidate.yaml"
    built = build_bundle([folder / "prod.yaml"], revision=revision, lock=False, shadows=shadows)
    return sign_bundle(built, keys.private_pem)


def status_when(client: httpx.Client, revision: str) -> dict[str, Any]:
    """``GET /v1/status`` once the bundle in force is ``revision`` (the server polls every
    0.2 s)."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        status: dict[str, Any] = client.get("/v1/status").json()
        if status["policy"].get("bundle_revision") == revision:
            return status
        time.sleep(0.05)
    raise AssertionError(f"never on {revision}: {status}")


@pytest.fixture
def keys() -> KeyPair:
    return generate_key_pair()


@pytest.fixture
def served(tmp_path: Path, keys: KeyPair) -> Iterator[BundleServer]:
    with bundle_server() as server:
        server.serve(signed(tmp_path / "r1", keys, "r1", prod(0.01, "2.0.0-rc.1")))
        yield server


@pytest.fixture
def server(tmp_path: Path, served: BundleServer, keys: KeyPair) -> Iterator[Server]:
    key = tmp_path / "bundle.pub.pem"
    key.write_bytes(keys.public_pem)
    options = ("--bundle", served.url, "--bundle-key", str(key))
    with running_server(None, tmp_path, *options) as running:
        yield running


class TestServeBundleShadow:
    def test_the_shadow_comes_and_goes_with_its_bundle(
        self, server: Server, served: BundleServer, keys: KeyPair, tmp_path: Path
    ) -> None:
        """On r1 the status names the shadow of r1 and the record holds its verdict; once r2
        (no shadow) is served, the shadow is gone from the status and from the records."""
        with server.client() as client:
            first = status_when(client, "r1")
            shadow = first["shadow"]
            assert (shadow["version"], shadow["bundle_revision"]) == ("2.0.0-rc.1", "r1")
            assert client.post("/v1/evaluate", json=EVICTION).json()["outcome"] == "allow"
            served.serve(signed(tmp_path / "r2", keys, "r2", None))
            assert status_when(client, "r2")["shadow"] is None
            assert client.post("/v1/evaluate", json=EVICTION).json()["outcome"] == "allow"
        before, after = audit_decisions(server.audit_log)
        assert before["shadow"]["outcome"] == "deny"
        assert before["shadow"]["policy"]["bundle_revision"] == "r1"
        assert after["policy"]["bundle_revision"] == "r2"
        assert "shadow" not in after
