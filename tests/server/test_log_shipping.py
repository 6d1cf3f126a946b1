"""prunewarden serve --ship: a real server shipping its audit log to a real collector, its
state in /v1/status and /metrics, and a SIGKILL in the middle of a batch."""

from __future__ import annotations

import io
import re
import signal
import subprocess
import threading
from importlib.util import find_spec
from pathlib import Path

import httpx
import pytest
from _support.server import PRUNEWARDEN, running_server
from _support.shipping import WAIT_SECONDS, receiver, records_in, verified, wait_for
from prunewarden.audit import rotated_files
from prunewarden.cli._main import run

EVICTION = {
    "check": "eviction",
    "segment": {"id": "s1", "kind": "turn", "tombstone_written": True},
    "score": 0.08,
    "perturbed_score": 0.1,
    "eviction_candidates": ["s1"],
}


def decide(client: httpx.Client, count: int) -> None:
    for _ in range(count):
        assert client.post("/v1/evaluate", json=EVICTION).json()["outcome"] == "allow"


def shipping(client: httpx.Client) -> dict[str, object]:
    status = client.get("/v1/status").json()["log_shipping"]
    (destination,) = status["destinations"]
    assert isinstance(destination, dict)
    return destination


def serve_shipping_to(tmp_path: Path, policy_file: Path, url: str) -> tuple[int, str]:
    """``serve --ship url`` in-process: its exit code and standard error."""
    out, err = io.StringIO(), io.StringIO()
    argv = ["serve", "--policy", str(policy_file), "--audit-log", str(tmp_path / "a.jsonl")]
    code = run([*argv, "--listen", "127.0.0.1:0", "--ship", url], out, err)
    return code, err.getvalue()


class TestServeShipping:
    def test_status_and_metrics_count_what_was_shipped(
        self, tmp_path: Path, policy_file: Path
    ) -> None:
        """/v1/status and /metrics count the records the collector acknowledged."""
        with (
            receiver(tmp_path / "out") as rx,
            running_server(
                policy_file, tmp_path, "--ship", rx.url, "--ship-replica", "eu-1"
            ) as server,
            server.client() as client,
        ):
            decide(client, 7)
            local = len(records_in(rotated_files(server.audit_log)))
            wait_for(lambda: shipping(client)["shipped"] == local, "the records shipped")
            state = shipping(client)
            metrics = client.get("/metrics").text
        assert state["destination"] == rx.url
        assert state["replica"] == "eu-1"
        assert state["healthy"] is True
        assert state["dropped"] == 0
        assert f'prunewarden_log_records_shipped_total{{destination="{rx.url}"}} {local}.0' in (
            metrics
        )
        assert f'prunewarden_log_records_dropped_total{{destination="{rx.url}"}} 0.0' in metrics
        verified(rx.files("eu-1"))

    def test_sigkill_mid_batch_ships_the_batch_again(
        self, tmp_path: Path, policy_file: Path
    ) -> None:
        """A server killed before its batch is acknowledged ships it again after a restart;
        the collector drops the duplicates and its copy is the local log, verified."""
        gate = threading.Event()
        options = ("--ship-replica", "eu-1")
        with receiver(tmp_path / "out", gate=gate) as rx:
            with running_server(policy_file, tmp_path, "--ship", rx.url, *options) as server:
                with server.client() as client:
                    decide(client, 5)
                assert rx.arrived.wait(WAIT_SECONDS)  # a batch is held, unacknowledged
                server.stop(signal.SIGKILL)
            gate.set()  # the held batch is written now; its sender is gone
            chain = rx.collector.replica("eu-1")
            wait_for(lambda: chain.records > 0, "the held batch written")
            with (
                running_server(policy_file, tmp_path, "--ship", rx.url, *options) as server,
                server.client() as client,
            ):
                decide(client, 3)
                local = len(records_in(rotated_files(server.audit_log)))
                wait_for(lambda: shipping(client)["shipped"] == local, "all shipped again")
                state = shipping(client)
        assert chain.duplicates > 0
        assert chain.records == local
        assert [p.read_bytes() for p in rx.files("eu-1")] == [
            p.read_bytes() for p in rotated_files(server.audit_log)
        ]
        assert state["dropped"] == 0
        verified(rx.files("eu-1"))


class TestCollectCommand:
    def test_collect_serves_until_sigterm(self, tmp_path: Path, policy_file: Path) -> None:
        """audit collect, as a command, takes a server's log and exits 0 on SIGTERM; audit
        verify passes on what it wrote."""
        out = tmp_path / "collected"
        process = subprocess.Popen(
            [PRUNEWARDEN, "audit", "collect", "--listen", "127.0.0.1:0", "--out", str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            found = re.search(r"listening on (http://\S+),", line)
            assert found, line
            url = found.group(1) + "/v1/logs"
            with (
                running_server(policy_file, tmp_path, "--ship", url, "--ship-replica", "a") as srv,
                srv.client() as client,
            ):
                decide(client, 4)
                local = len(records_in(rotated_files(srv.audit_log)))
                wait_for(lambda: shipping(client)["shipped"] == local, "the records shipped")
        finally:
            process.send_signal(signal.SIGTERM)
            stdout, stderr = process.communicate(timeout=WAIT_SECONDS)
        assert process.returncode == 0, stderr
        assert "stopped" in stdout
        verify = subprocess.run(
            [PRUNEWARDEN, "audit", "verify", str(out / "a.jsonl")],
            capture_output=True,
            text=True,
            check=False,
        )
        assert verify.returncode == 0, verify.stderr
        assert f"ok, {local} records" in verify.stdout


class TestUsage:
    def test_an_unknown_destination_is_a_usage_error(
        self, tmp_path: Path, policy_file: Path
    ) -> None:
        """serve --ship amqp://... exits 2 before it serves, naming the schemes it knows."""
        code, err = serve_shipping_to(tmp_path, policy_file, "amqp://b:5672/t")
        assert code == 2
        assert "'amqp://b:5672/t': expected http(s)://" in err

    def test_a_kafka_url_that_cannot_work_is_a_usage_error(
        self, tmp_path: Path, policy_file: Path
    ) -> None:
        """serve --ship kafka://...?acks=0 exits 2 before it serves, naming the setting."""
        code, err = serve_shipping_to(tmp_path, policy_file, "kafka://b:9092/t?acks=0")
        assert code == 2
        assert "--ship 'kafka://b:9092/t': ?acks: '0' cannot ship at least once" in err

    @pytest.mark.skipif(
        find_spec("confluent_kafka") is None,
        reason="the kafka extra (confluent-kafka) is not installed",
    )
    def test_a_setting_the_kafka_client_refuses_is_a_usage_error(
        self, tmp_path: Path, policy_file: Path
    ) -> None:
        """serve --ship kafka://...?NAME=VALUE exits 2 when librdkafka refuses the setting."""
        code, err = serve_shipping_to(tmp_path, policy_file, "kafka://b:9092/t?linger.mss=5")
        assert code == 2
        assert 'No such configuration property: "linger.mss"' in err

    def test_collect_beyond_loopback_needs_a_token(self, tmp_path: Path) -> None:
        """audit collect refuses a non-loopback address without a token (exit 2)."""
        out, err = io.StringIO(), io.StringIO()
        argv = ["audit", "collect", "--listen", "0.0.0.0:0", "--out", str(tmp_path)]
        assert run(argv, out, err) == 2
        assert "without a token" in err.getvalue()
