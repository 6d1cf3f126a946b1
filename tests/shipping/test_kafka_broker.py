"""The Kafka destination on the real protocol: librdkafka's mock cluster (a broker inside the
confluent-kafka wheel, on loopback) receives what the sink produces, a real consumer reads it
back, and ``audit collect --from kafka://...`` writes the replicas' files from it."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
from _support.session_faults import fill, small_filesystem
from _support.shipping import decide, records_in, verified, wait_for
from prunewarden import AuditLog, Engine
from prunewarden.audit import rotated_files
from prunewarden.cli._main import run
from prunewarden.shipping import LogShipper, open_sink
from prunewarden.shipping._cursor import cursor_path, load_cursor

pytestmark = pytest.mark.skipif(
    find_spec("confluent_kafka") is None,
    reason="the kafka extra (confluent-kafka) is not installed",
)
if find_spec("confluent_kafka") is not None:
    from _support.kafka_mock import MockCluster, committed_and_ends, mock_cluster, read_topic
    from confluent_kafka import OFFSET_INVALID, Message, Producer
    from prunewarden.shipping._kafka_collect import KafkaCollector

PRUNEWARDEN = str(Path(sys.executable).with_name("prunewarden"))


@pytest.fixture
def kafka() -> Any:
    with mock_cluster() as cluster:
        yield cluster


def shipper(audit: AuditLog, cluster: MockCluster, replica: str, **options: Any) -> LogShipper:
    """A shipper to the cluster's ``decisions`` topic that polls and retries quickly."""
    sink = open_sink(cluster.url("decisions"), timeout=options.pop("timeout", 5.0))
    return LogShipper(
        audit,
        [sink],
        replica=replica,
        poll_seconds=0.02,
        retry_seconds=0.02,
        retry_max_seconds=0.2,
        **options,
    )


def distinct(messages: list[Message]) -> list[Message]:
    """The messages a consumer keeps: the first of each ``prunewarden-hash``."""
    seen: set[bytes] = set()
    kept = []
    for message in messages:
        digest = header(message, "prunewarden-hash")
        if digest not in seen:
            seen.add(digest)
            kept.append(message)
    return kept


def header(message: Message, name: str) -> bytes:
    value = dict(message.headers() or [])[name]
    assert isinstance(value, bytes)
    return value


def lines(messages: list[Message]) -> bytes:
    return b"".join(bytes(message.value() or b"") + b"\n" for message in messages)


class TestDelivery:
    def test_records_arrive_byte_identical_keyed_by_replica_with_headers(
        self, kafka: MockCluster, tmp_path: Path
    ) -> None:
        """What a real consumer reads is the local log, byte for byte, one message a record,
        in one partition, keyed by the replica, with the documented headers; it verifies."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit:
            decide(Engine.default(audit=audit), 5, "run-7")
            with shipper(audit, kafka, "eu-1") as running:
                assert running.wait_caught_up(60)
                (status,) = running.status()
        messages = read_topic(kafka.bootstrap, "decisions")
        local = records_in([log])
        assert lines(messages) == log.read_bytes()
        assert {m.partition() for m in messages} == {messages[0].partition()}
        assert {m.key() for m in messages} == {b"eu-1"}
        assert [dict(m.headers() or []) for m in messages] == [
            {
                "prunewarden-hash": r["hash"].encode(),
                "prunewarden-replica": b"eu-1",
                "prunewarden-kind": r["kind"].encode(),
                "prunewarden-prev-hash": r["prev_hash"].encode(),
            }
            for r in local
        ]
        assert (status.shipped, status.dropped, status.healthy) == (len(local), 0, True)
        copy = tmp_path / "consumed.jsonl"
        copy.write_bytes(lines(messages))
        verified([copy])

    def test_a_broker_that_hangs_then_comes_back_loses_nothing_acknowledged(
        self, kafka: MockCluster, tmp_path: Path
    ) -> None:
        """The broker hangs mid-run (its owner stopped) while decisions go on and overflow a
        small buffer: nothing is acknowledged meanwhile (the cursor stays on the last record
        delivered), and once it is back the topic holds every record acknowledged before,
        then a records_dropped record for the ones passed over, then the rest: shipped plus
        dropped are the local records, and the consumed chain verifies, blind where it says."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit:
            engine = Engine.default(audit=audit)
            with shipper(audit, kafka, "eu-1", timeout=1.0, buffer_records=8) as running:
                decide(engine, 3, "before")
                assert running.wait_caught_up(60)
                acknowledged = [r["hash"] for r in records_in([log])]
                cursor = cursor_path(log, running.status()[0].destination, "eu-1")
                kafka.pause()
                decide(engine, 30, "while-down")
                wait_for(lambda: running.status()[0].failing >= 2, "two failed batches")
                held = load_cursor(cursor)
                kafka.resume()
                assert running.wait_caught_up(60)
                decide(engine, 2, "after")
                assert running.wait_caught_up(60)
                (status,) = running.status()
        assert held is not None
        assert held.last_hash == acknowledged[-1]
        local = records_in(rotated_files(log))
        consumed = distinct(read_topic(kafka.bootstrap, "decisions"))
        hashes = [header(m, "prunewarden-hash").decode() for m in consumed]
        (marker,) = [r for r in local if r["kind"] == "records_dropped"]
        first = [r["hash"] for r in local].index(marker["dropped"]["first"])
        last = [r["hash"] for r in local].index(marker["dropped"]["last"])
        expected = local[:first] + local[last + 1 :]
        assert hashes[: len(acknowledged)] == acknowledged
        assert hashes == [r["hash"] for r in expected]
        assert status.shipped + status.dropped == len(local)
        assert (status.shipped, status.dropped) == (len(expected), marker["dropped"]["count"])
        copy = tmp_path / "consumed.jsonl"
        copy.write_bytes(lines(consumed))
        assert verified([copy]).files[0].dropped == status.dropped
        assert load_cursor(cursor) is not None
        assert load_cursor(cursor).last_hash == local[-1]["hash"]  # type: ignore[union-attr]

    def test_a_broker_gone_for_good_is_acknowledged_nothing(
        self, kafka: MockCluster, tmp_path: Path
    ) -> None:
        """The mock cluster's owner killed: batches fail, the cursor stays where the last
        delivery left it, the status says so, and decisions go on."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit:
            engine = Engine.default(audit=audit)
            with shipper(audit, kafka, "eu-1", timeout=0.5) as running:
                decide(engine, 2, "before")
                assert running.wait_caught_up(60)
                delivered = running.status()[0]
                kafka.kill()
                decide(engine, 4, "after")
                wait_for(lambda: running.status()[0].failing >= 2, "two failed batches")
                (status,) = running.status()
                cursor = load_cursor(cursor_path(log, status.destination, "eu-1"))
        assert status.shipped == delivered.shipped == len(records_in([log])) - 4
        assert cursor is not None
        assert cursor.last_hash == delivered.last_shipped_hash
        assert not status.healthy
        assert "not acknowledged" in (status.last_error or "")


def duplicates(collector: KafkaCollector) -> int:
    return sum(chain.duplicates for chain in collector.chains.values())


def same_files(out: Path, logs: dict[str, Path]) -> bool:
    """Whether each replica's collected file holds its local log's bytes."""
    files = {name: out / f"{name}.jsonl" for name in logs}
    return all(
        path.exists() and path.read_bytes() == logs[name].read_bytes()
        for name, path in files.items()
    )


class TestCollectFromKafka:
    def test_each_replica_gets_its_verified_file(self, kafka: MockCluster, tmp_path: Path) -> None:
        """Two replicas shipping to one topic: the collector writes each one's file, the same
        bytes as its local log; the group's offsets are committed to the end of what it read
        (a collector started again on it reads nothing twice), and one of a new group reads
        everything again and drops it as duplicates."""
        logs = {name: tmp_path / f"{name}.audit.jsonl" for name in ("eu-1", "eu-2")}
        for name, log in logs.items():
            with AuditLog(log) as audit:
                decide(Engine.default(audit=audit), 4, name)
                with shipper(audit, kafka, name) as running:
                    assert running.wait_caught_up(60)
        out = tmp_path / "collected"
        collector = KafkaCollector(kafka.url("decisions"), out)
        try:
            wait_for(lambda: collector.step(0.2) >= 0 and same_files(out, logs), "both files")
        finally:
            collector.close()
        for name in logs:
            verified([out / f"{name}.jsonl"])
        # Committed once synced: a collector started again on the group reads nothing twice.
        offsets = committed_and_ends(kafka.bootstrap, "decisions", "prunewarden-collect")
        assert offsets
        assert all(offset == end for offset, end in offsets)
        anew = KafkaCollector(kafka.url("decisions?group.id=another"), out)
        try:
            wait_for(
                lambda: anew.step(0.2) >= 0 and duplicates(anew) == 2 * 5, "every record again"
            )
        finally:
            anew.close()
        assert {n: (out / f"{n}.jsonl").read_bytes() for n in logs} == {
            n: log.read_bytes() for n, log in logs.items()
        }

    def test_a_forged_message_is_skipped_and_said(self, kafka: MockCluster, tmp_path: Path) -> None:
        """A message whose record was edited is not written; it is reported with its place,
        and the records of its replica after it still continue the chain."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit:
            engine = Engine.default(audit=audit)
            decide(engine, 2, "first")
            with shipper(audit, kafka, "eu-1") as running:
                assert running.wait_caught_up(60)
                last = records_in([log])[-1]
                forged = {**last, "outcome": "deny"}
                producer = Producer({"bootstrap.servers": kafka.bootstrap})
                producer.produce("decisions", json.dumps(forged).encode(), key="eu-1")
                assert producer.flush(10) == 0
                decide(engine, 2, "second")
                assert running.wait_caught_up(60)
        said: list[str] = []
        out = tmp_path / "collected"
        collector = KafkaCollector(kafka.url("decisions"), out, on_refused=said.append)
        try:
            wait_for(
                lambda: collector.step(0.2) >= 0 and same_files(out, {"eu-1": log}), "the file"
            )
        finally:
            collector.close()
        assert collector.refused == 1
        (line,) = said
        assert line.startswith(f"{kafka.url('decisions')}: decisions[")
        assert "skipped: replica eu-1: " in line

    def test_a_full_disk_stops_it_before_the_offsets_are_committed(
        self, kafka: MockCluster, tmp_path: Path
    ) -> None:
        """The folder's filesystem full: the command stops (exit 1) with one line saying why,
        and the group commits nothing, so what it read is read again at the next start."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit:
            decide(Engine.default(audit=audit), 3, "full")
            with shipper(audit, kafka, "eu-1") as running:
                assert running.wait_caught_up(60)
        with small_filesystem(tmp_path / "small") as out:
            fill(out)
            stdout, stderr = io.StringIO(), io.StringIO()
            code = run(["audit", "collect", "--from", kafka.url("decisions"), "--out", str(out)],
                       stdout, stderr)  # fmt: skip
        assert code == 1
        assert stderr.getvalue() == (
            f"prunewarden audit collect: {out}: No space left on device: stopped;"
            " what was read since the last commit is read again at the next start\n"
        )
        offsets = committed_and_ends(kafka.bootstrap, "decisions", "prunewarden-collect")
        assert [offset for offset, _end in offsets] == [OFFSET_INVALID]

    def test_the_command_collects_until_it_is_stopped(
        self, kafka: MockCluster, tmp_path: Path
    ) -> None:
        """`prunewarden audit collect --from kafka://...` writes the replica's file; SIGTERM
        stops it (exit 0); `audit verify` passes on what it wrote."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit:
            decide(Engine.default(audit=audit), 3, "cli")
            with shipper(audit, kafka, "eu-1") as running:
                assert running.wait_caught_up(60)
        out = tmp_path / "collected"
        command = [PRUNEWARDEN, "audit", "collect", "--from", kafka.url("decisions")]
        process = subprocess.Popen(
            [*command, "--out", str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            target = out / "eu-1.jsonl"
            wait_for(
                lambda: target.exists() and target.read_bytes() == log.read_bytes(),
                "the collected file",
            )
        finally:
            process.send_signal(signal.SIGTERM)
            stdout, stderr = process.communicate(timeout=30)
        assert process.returncode == 0, stderr
        started = f"reading {kafka.url('decisions')} (group prunewarden-collect), writing to {out}"
        assert stdout.splitlines() == [
            f"prunewarden audit collect: {started}",
            "prunewarden audit collect: stopped",
        ]
        verify = subprocess.run(
            [PRUNEWARDEN, "audit", "verify", str(target)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert verify.returncode == 0, verify.stdout + verify.stderr


class TestCollectUsage:
    @pytest.mark.parametrize(
        ("options", "problem"),
        [
            ([], "give one of --listen HOST:PORT, --from URL"),
            (["--listen", "127.0.0.1:0", "--from", "kafka://b/t"], "give one of --listen"),
            (["--from", "kafka://b:x/t"], "--from 'kafka://b:x/t': broker: 'b:x' has no port"),
            (["--from", "kafka://b/t", "--token-file", "t"], "--token-file goes with --listen"),
            (
                ["--from", "kafka://b/t?linger.mss=1"],
                'No such configuration property: "linger.mss"',
            ),
        ],
    )
    def test_a_collect_that_cannot_work_is_a_usage_error(
        self, tmp_path: Path, options: list[str], problem: str
    ) -> None:
        """Exit 2 with one line saying what is wrong, before anything is read."""
        stdout, stderr = io.StringIO(), io.StringIO()
        code = run(["audit", "collect", "--out", str(tmp_path / "out"), *options], stdout, stderr)
        assert (code, stdout.getvalue()) == (2, "")
        assert problem in stderr.getvalue()
        assert len(stderr.getvalue().splitlines()) == 1
