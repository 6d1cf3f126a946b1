"""Who may call a server: a unix socket by its permissions, TCP by a bearer token; and how it
stops and reloads."""

from __future__ import annotations

import io
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _support.server import PRUNEWARDEN, Server, audit_decisions, policy_text, running_server
from prunewarden.cli._main import run
from prunewarden.client import Client, ServerError

TOKEN = "s3cret"  # noqa: S105 - the test server's own token
FILE_TOKEN = "from-a-file"  # noqa: S105 - the same, read from a file
OTHER_TOKEN = "other"  # noqa: S105 - a wrong one
SEGMENT = {"id": "s1", "kind": "tool_output", "tombstone_written": True}
EVICTION = {
    "check": "eviction",
    "segment": {"id": "s1", "kind": "tool_output", "tombstone_written": True},
    "score": 0.1,
    "perturbed_score": 0.12,
}


@pytest.fixture(scope="module")
def guarded(policy_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(policy_file, tmp_path_factory.mktemp("token"), token=TOKEN) as server:
        yield server


class TestToken:
    def test_no_token_is_401(self, guarded: Server) -> None:
        """Without the bearer token a data route answers 401 with WWW-Authenticate."""
        with guarded.client() as http:
            response = http.post("/v1/evaluate", json=EVICTION)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json()["type"].endswith("/unauthorized")

    def test_wrong_token_is_401(self, guarded: Server) -> None:
        """A wrong token (even a prefix of the right one) is refused."""
        with guarded.client(TOKEN[:-1]) as http:
            assert http.get("/v1/policy").status_code == 401

    def test_right_token_decides(self, guarded: Server) -> None:
        """With the token the call is answered."""
        with guarded.client(TOKEN) as http:
            assert http.post("/v1/evaluate", json=EVICTION).json()["outcome"] == "allow"

    def test_probes_need_no_token(self, guarded: Server) -> None:
        """/healthz and /readyz answer without a token (orchestrators probe them)."""
        with guarded.client() as http:
            assert http.get("/readyz").status_code == 200

    def test_token_file(self, policy_file: Path, tmp_path: Path) -> None:
        """--token-file is read once; its first line is the token."""
        token_file = tmp_path / "token"
        token_file.write_text(FILE_TOKEN + "\n", encoding="utf-8")
        with running_server(
            policy_file, tmp_path, "--token-file", str(token_file), token=FILE_TOKEN
        ) as server:
            with Client(server.url, token=FILE_TOKEN) as client:
                assert client.policy()["policy"]["name"] == "served"
            with (
                Client(server.url, token=OTHER_TOKEN) as client,
                pytest.raises(ServerError) as info,
            ):
                client.policy()
        assert info.value.status == 401


class TestUnixSocket:
    def test_socket_has_owner_and_group_permissions(
        self, policy_file: Path, tmp_path: Path
    ) -> None:
        """A unix socket is created 0660 and served; it is removed at shutdown."""
        sock = tmp_path / "pdp.sock"
        with running_server(policy_file, tmp_path, listen=f"unix:{sock}") as server:
            assert stat.S_IMODE(sock.stat().st_mode) == 0o660
            with Client(server.url) as client:
                decision = client.session("unix-1").authorize(SEGMENT, 0.1, 0.12)
        assert decision["outcome"] == "allow"
        assert not sock.exists()

    def test_socket_mode_option(self, policy_file: Path, tmp_path: Path) -> None:
        """--socket-mode 600 leaves the socket to its owner alone."""
        sock = tmp_path / "owner.sock"
        with running_server(
            policy_file, tmp_path, "--socket-mode", "600", listen=f"unix:{sock}"
        ) as server:
            assert stat.S_IMODE(sock.stat().st_mode) == 0o600
            assert server.url == f"unix:{sock}"


class TestLifecycle:
    def test_sigterm_stops_cleanly_with_every_decision_logged(
        self, policy_file: Path, tmp_path: Path
    ) -> None:
        """SIGTERM: exit 0, the audit log verifies, and holds each decision returned."""
        with running_server(policy_file, tmp_path) as server:
            with Client(server.url) as client:
                ids = [client.evaluate(EVICTION)["decision_id"] for _ in range(20)]
            assert server.stop(signal.SIGTERM) == 0
        verify = subprocess.run(
            [PRUNEWARDEN, "audit", "verify", str(server.audit_log)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert [r["decision_id"] for r in audit_decisions(server.audit_log)] == ids

    def test_policy_reloads_without_restart(self, tmp_path: Path) -> None:
        """A policy file replaced on disk is in force for the next request (polled)."""
        policy = tmp_path / "policy.yaml"
        policy.write_text(policy_text({}, name="reloaded", version="1.0.0"), encoding="utf-8")
        with running_server(policy, tmp_path) as server, server.client() as http:
            before = http.get("/v1/policy").json()["policy"]["version"]
            replacement = tmp_path / "next.yaml"
            replacement.write_text(
                policy_text({}, name="reloaded", version="1.1.0"), encoding="utf-8"
            )
            replacement.replace(policy)
            after = _await_version(http, "1.1.0")
        assert (before, after) == ("1.0.0", "1.1.0")


def _await_version(http: httpx.Client, version: str) -> str:
    """The version in force once it is ``version`` (bounded: the poll interval is 0.2 s)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = http.get("/v1/policy").json()["policy"]["version"]
        if found == version:
            return str(found)
        time.sleep(0.05)
    return str(found)


class TestMetricsListener:
    def test_metrics_without_the_token_on_the_loopback_listener_only(
        self, policy_file: Path, tmp_path: Path
    ) -> None:
        """--metrics-listen: GET /metrics answers there without the token (and nothing else
        does), while the main listener still asks the token for it."""
        with running_server(
            policy_file, tmp_path, "--metrics-listen", "127.0.0.1:0", token=TOKEN
        ) as server:
            (line,) = [line for line in server.startup if "metrics without a token" in line]
            url = line.rsplit(" ", 1)[1].strip()
            with httpx.Client(timeout=30) as http:
                scraped = http.get(url)
                other = http.get(url.removesuffix("/metrics") + "/v1/policy")
            with server.client() as anonymous:
                refused = anonymous.get("/metrics")
        assert scraped.status_code == 200
        assert "prunewarden_server_limit_reached_total" in scraped.text
        assert other.status_code == 404
        assert refused.status_code == 401

    def test_a_metrics_listener_beyond_loopback_is_refused(self, policy_file: Path) -> None:
        """Metrics without a token are never offered beyond loopback: exit 2."""
        out, err = io.StringIO(), io.StringIO()
        argv = ["serve", "--policy", str(policy_file), "--metrics-listen", "0.0.0.0:0"]
        assert run(argv, out, err) == 2
        assert "loopback TCP address only" in err.getvalue()
