"""``prunewarden serve --bundle URL``: a real server on a bundle served over HTTP on loopback,
keeping the last good bundle through a fault and telling it in /readyz and one record."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _support.bundles import Bundles, BundleServer, bundle_server, make_bundles
from _support.server import PRUNEWARDEN, Server, audit_decisions, running_server
from prunewarden.cli._main import run

ROOT = Path(__file__).resolve().parents[2]
EVICTION = json.loads((ROOT / "examples" / "inputs" / "eviction-healthy.json").read_text())
PATIENCE = 60.0  # seconds a background poll may take on a loaded machine


def eventually(client: httpx.Client, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The readiness document once ``check`` holds for it (the server polls every 0.2 s)."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        document: dict[str, Any] = client.get("/readyz").json()
        if check(document):
            return document
        time.sleep(0.05)
    raise AssertionError(f"never: {document}")


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Bundles:
    return make_bundles(tmp_path_factory.mktemp("bundles"))


@pytest.fixture
def served(bundles: Bundles) -> Iterator[BundleServer]:
    with bundle_server() as server:
        server.serve(bundles.r1)
        yield server


@pytest.fixture
def server(tmp_path: Path, served: BundleServer, bundles: Bundles) -> Iterator[Server]:
    key = tmp_path / "bundle.pub.pem"
    key.write_bytes(bundles.keys.public_pem)
    options = ("--bundle", served.url, "--bundle-key", str(key))
    with running_server(None, tmp_path, *options) as running:
        yield running


class TestServeBundle:
    def test_the_last_good_bundle_survives_a_500(
        self, server: Server, served: BundleServer, bundles: Bundles
    ) -> None:
        """Decisions name r1; through a 500 they still do and /readyz says why (still 200);
        once r2 is served, decisions name r2; the audit log holds one policy_reload_failed."""
        with server.client() as client:
            decision = client.post("/v1/evaluate", json=EVICTION).json()
            assert decision["policy"]["bundle_revision"] == "r1"
            ready = client.get("/readyz")
            assert ready.status_code == 200
            assert ready.json()["bundle"]["revision"] == "r1"
            assert ready.json()["bundle"]["healthy"] is True
            served.serve(bundles.r2, "500")
            failed = eventually(client, lambda d: d["bundle"]["healthy"] is False)
            assert failed["status"] == "ready"
            assert failed["bundle"]["revision"] == "r1"
            assert "HTTP 500" in failed["bundle"]["problems"][0]
            kept = client.post("/v1/evaluate", json=EVICTION).json()
            assert (kept["outcome"], kept["policy"]["bundle_revision"]) == ("allow", "r1")
            served.serve(bundles.r2)
            eventually(client, lambda d: d["bundle"]["revision"] == "r2")
            after = client.post("/v1/evaluate", json=EVICTION).json()
            assert (after["outcome"], after["policy"]["bundle_revision"]) == ("deny", "r2")
            status = client.get("/v1/status").json()
        assert status["decisions"] == {"allow": 2, "deny": 1, "halt": 0}
        assert (status["healthy"], status["bundle"]["revision"]) == (True, "r2")
        assert "HTTP 500" in status["last_error"]["problems"][0]
        assert status["log_shipping"] is None
        records = [json.loads(line) for line in server.audit_log.read_text().splitlines()]
        failures = [r for r in records if r["kind"] == "policy_reload_failed"]
        assert len(failures) == 1
        assert failures[0]["error"]["path"] == served.url
        revisions = [r["policy"]["bundle_revision"] for r in audit_decisions(server.audit_log)]
        assert revisions == ["r1", "r1", "r2"]

    def test_a_first_bundle_that_fails_verification_exits_5(
        self, tmp_path: Path, served: BundleServer, bundles: Bundles
    ) -> None:
        """A server does not start on a bundle signed by another key: exit 5, one line."""
        key = tmp_path / "other.pub.pem"
        key.write_bytes(bundles.other.public_pem)
        done = subprocess.run(
            [PRUNEWARDEN, "serve", "--bundle", served.url, "--bundle-key", str(key),
             "--audit-log", str(tmp_path / "audit.jsonl"), "--listen", "127.0.0.1:0"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 5
        assert "not signed by the key" in done.stderr


def closed_port() -> int:
    """A loopback port nothing listens on: bound by the kernel's choice, then closed."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


class TestStatusCommand:
    def test_status_of_a_fleet(self, server: Server) -> None:
        """One line per server: a healthy one names its policy, bundle revision and counts;
        one that does not answer says so, and the exit code is 1."""
        with server.client() as client:
            client.post("/v1/evaluate", json=EVICTION)
        code, out, err = cli("status", server.url)
        assert (code, err) == (0, "")
        assert out.startswith(f"{server.url}  healthy  prod@1.0.0 bundle r1  allow 1 deny 0 halt 0")
        gone = f"http://127.0.0.1:{closed_port()}"
        code, out, _ = cli("status", server.url, gone, "--format", "json")
        answers = json.loads(out)
        assert code == 1
        assert [a["url"] for a in answers] == [server.url, gone]
        assert answers[0]["status"]["decisions"]["allow"] == 1
        assert answers[1]["status"] is None
        assert answers[1]["error"].startswith("no answer:")

    def test_an_address_that_is_not_http_is_a_usage_error(self) -> None:
        """Exit 2 before asking anyone."""
        code, _, err = cli("status", "unix:/tmp/x.sock")
        assert code == 2
        assert "is not an http(s):// address" in err
