"""``prunewarden serve --bundle URL`` against a bundle server that trickles bytes: a fetch fails
at its total deadline (``/readyz`` says so, the bundle in force keeps deciding), and SIGTERM
stops the server within its ~10 s whatever the poller is doing."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from _support.bundles import Bundles, make_bundles
from _support.server import running_server
from _support.slow_bundles import slow_bundle_server

PATIENCE = 60.0


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Bundles:
    return make_bundles(tmp_path_factory.mktemp("bundles"))


def eventually(client: httpx.Client, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        document: dict[str, Any] = client.get("/readyz").json()
        if check(document):
            return document
        time.sleep(0.05)
    raise AssertionError(f"never: {document}")


def test_a_trickled_fetch_fails_at_its_deadline_and_sigterm_stops_at_once(
    tmp_path: Path, bundles: Bundles
) -> None:
    """Each fetch fails at 1 s and is recorded; the server stays ready on r1."""
    key = tmp_path / "bundle.pub.pem"
    key.write_bytes(bundles.keys.public_pem)
    with slow_bundle_server(bundles.r1) as served:
        options = ("--bundle", served.url, "--bundle-key", str(key), "--bundle-timeout", "1")
        with running_server(None, tmp_path, *options) as server, server.client() as client:
            served.body, served.trickle = bundles.r2, True
            document = eventually(client, lambda d: d["bundle"]["healthy"] is False)
            assert document["status"] == "ready"
            assert document["bundle"]["revision"] == "r1"
            assert any("deadline (1 s)" in p for p in document["bundle"]["problems"])
            assert served.trickling.wait(PATIENCE)
            served.trickling.clear()
            assert served.trickling.wait(PATIENCE), "the poller stopped fetching"
            started = time.monotonic()
            assert server.stop(signal.SIGTERM) == 0
            stopped = time.monotonic() - started
        assert stopped < 10, f"SIGTERM took {stopped:.1f} s"
        lines = server.audit_log.read_text(encoding="utf-8").splitlines()
        assert any('"policy_reload_failed"' in line for line in lines)


def test_sigterm_ends_a_long_fetch_in_flight(tmp_path: Path, bundles: Bundles) -> None:
    """With a deadline of ten minutes, a fetch in flight does not hold the stop."""
    key = tmp_path / "bundle.pub.pem"
    key.write_bytes(bundles.keys.public_pem)
    with slow_bundle_server(bundles.r1) as served:
        options = ("--bundle", served.url, "--bundle-key", str(key), "--bundle-timeout", "600")
        with running_server(None, tmp_path, *options) as server:
            served.body, served.trickle = bundles.r2, True
            assert served.trickling.wait(PATIENCE), "the poller never fetched"
            started = time.monotonic()
            assert server.stop(signal.SIGTERM) == 0
            stopped = time.monotonic() - started
        assert stopped < 10, f"SIGTERM took {stopped:.1f} s"
