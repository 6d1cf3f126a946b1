"""LogShipper in-process: a real AuditLog and Engine, a real collector on loopback."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from _support.shipping import (
    decide,
    dropped_in,
    free_port,
    receiver,
    records_in,
    verified,
    wait_for,
)
from prunewarden import AuditLog, Engine
from prunewarden.audit import rotated_files, verify_files
from prunewarden.shipping import LogShipper, ShipError
from prunewarden.shipping._sinks import HttpSink


def fast_shipper(
    audit: AuditLog, url: str, buffer_records: int = 50_000, buffer_bytes: int = 2**25
) -> LogShipper:
    """A shipper as replica ``r`` that polls and retries quickly, for tests."""
    return LogShipper(
        audit,
        [url],
        replica="r",
        buffer_records=buffer_records,
        buffer_bytes=buffer_bytes,
        poll_seconds=0.02,
        retry_seconds=0.02,
        retry_max_seconds=0.2,
    )


def local_records(log: Path) -> int:
    return len(records_in(rotated_files(log)))


class TestShipping:
    def test_every_record_arrives_and_the_copy_verifies(self, tmp_path: Path) -> None:
        """Records written before and after the start arrive once, and the copy verifies."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit, receiver(tmp_path / "out") as rx:
            engine = Engine.default(audit=audit)
            decide(engine, 20, "before")
            with fast_shipper(audit, rx.url) as shipper:
                decide(engine, 20, "after")
                assert shipper.wait_caught_up(60)
                (status,) = shipper.status()
            copy = records_in(rx.files("r"))
            assert status.shipped == local_records(log) == len(copy)
            assert status.dropped == 0
            assert status.healthy
            assert status.last_shipped_hash == copy[-1]["hash"]
            assert rx.files("r")[0].read_bytes() == log.read_bytes()
            verified(rx.files("r"))

    def test_rotated_files_are_followed_and_rotated_alike(self, tmp_path: Path) -> None:
        """A log that rotates while shipping arrives whole, rotated at the same records."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log, max_bytes=8_000) as audit, receiver(tmp_path / "out") as rx:
            engine = Engine.default(audit=audit)
            with fast_shipper(audit, rx.url) as shipper:
                decide(engine, 60, "a")
                assert shipper.wait_caught_up(60)
            assert len(rotated_files(log)) > 2
            local = [path.read_bytes() for path in rotated_files(log)]
            assert [path.read_bytes() for path in rx.files("r")] == local
            verified(rx.files("r"))

    def test_a_restart_resumes_from_the_cursor(self, tmp_path: Path) -> None:
        """A shipper started again ships only what the last one did not get acknowledged."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit, receiver(tmp_path / "out") as rx:
            engine = Engine.default(audit=audit)
            decide(engine, 10, "first")
            with fast_shipper(audit, rx.url) as shipper:
                assert shipper.wait_caught_up(60)
            decide(engine, 5, "second")
            with fast_shipper(audit, rx.url) as shipper:
                assert shipper.wait_caught_up(60)
                (status,) = shipper.status()
            assert status.shipped == 5
            assert len(records_in(rx.files("r"))) == local_records(log)
            verified(rx.files("r"))

    def test_an_unknown_scheme_is_refused(self, tmp_path: Path) -> None:
        """A URL naming no sink is refused when the shipper is made."""
        with AuditLog(tmp_path / "audit.jsonl") as audit, pytest.raises(ShipError) as caught:
            LogShipper(audit, ["amqp://broker:5672/decisions"])
        assert caught.value.retry is False
        assert "'amqp://broker:5672/decisions': expected http(s)://" in str(caught.value)


class TestFaults:
    def test_receiver_down_then_up(self, tmp_path: Path) -> None:
        """Batches to a closed port fail and are retried until a receiver starts there."""
        log = tmp_path / "audit.jsonl"
        port = free_port()
        url = f"http://127.0.0.1:{port}/v1/logs"
        with AuditLog(log) as audit:
            engine = Engine.default(audit=audit)
            with fast_shipper(audit, url) as shipper:
                decide(engine, 15, "down")
                wait_for(lambda: shipper.status()[0].failing >= 3, "failed batches")
                (down,) = shipper.status()
                assert not down.healthy
                assert "Connection refused" in (down.last_error or "")
                with receiver(tmp_path / "out", port=port) as rx:
                    decide(engine, 5, "up")
                    assert shipper.wait_caught_up(60)
                    (status,) = shipper.status()
            assert status.healthy
            assert status.shipped == local_records(log) == len(records_in(rx.files("r")))
            verified(rx.files("r"))

    def test_slow_receiver_holds_no_decision_back(self, tmp_path: Path) -> None:
        """While the receiver holds a batch, decisions go on; then everything arrives."""
        log = tmp_path / "audit.jsonl"
        gate = threading.Event()
        with AuditLog(log) as audit, receiver(tmp_path / "out", gate=gate) as rx:
            engine = Engine.default(audit=audit)
            with fast_shipper(audit, rx.url) as shipper:
                decide(engine, 3, "first")
                assert rx.arrived.wait(60)
                decide(engine, 40, "held")  # returns while the receiver is still held
                assert shipper.status()[0].shipped == 0
                gate.set()
                assert shipper.wait_caught_up(60)
                (status,) = shipper.status()
            assert status.dropped == 0
            assert status.shipped == local_records(log)
            verified(rx.files("r"))

    def test_a_receiver_slower_than_the_timeout_gets_duplicates(self, tmp_path: Path) -> None:
        """A batch whose answer comes after the sender's timeout is sent again; the receiver
        keeps it once and drops the copies."""
        log = tmp_path / "audit.jsonl"
        gate = threading.Event()
        with AuditLog(log) as audit, receiver(tmp_path / "out", gate=gate) as rx:
            decide(Engine.default(audit=audit), 5, "slow")
            sink = HttpSink(rx.url, timeout=0.3)
            with LogShipper(audit, [sink], replica="r", retry_seconds=0.02) as shipper:
                wait_for(lambda: shipper.status()[0].failing >= 2, "timed-out batches")
                assert "timed out" in (shipper.status()[0].last_error or "")
                gate.set()
                assert shipper.wait_caught_up(60)
                (status,) = shipper.status()
            chain = rx.collector.replica("r")
        assert chain.duplicates > 0
        assert status.shipped == chain.records == local_records(log)
        assert rx.files("r")[0].read_bytes() == log.read_bytes()
        verified(rx.files("r"))

    @pytest.mark.parametrize(
        ("buffer_records", "buffer_bytes"), [(8, 2**25), (50_000, 8_000)], ids=["records", "bytes"]
    )
    def test_overflow_writes_records_dropped(
        self, tmp_path: Path, buffer_records: int, buffer_bytes: int
    ) -> None:
        """A buffer full (of records, or of bytes) drops records; a records_dropped record
        names them, in both chains, and shipped plus dropped add up to the local records."""
        log = tmp_path / "audit.jsonl"
        gate = threading.Event()
        with AuditLog(log) as audit, receiver(tmp_path / "out", gate=gate) as rx:
            engine = Engine.default(audit=audit)
            with fast_shipper(audit, rx.url, buffer_records, buffer_bytes) as shipper:
                decide(engine, 3, "first")
                assert rx.arrived.wait(60)
                decide(engine, 50, "overflow")
                gate.set()
                assert shipper.wait_caught_up(60)
                decide(engine, 4, "after")
                assert shipper.wait_caught_up(60)
                (status,) = shipper.status()
        local = records_in(rotated_files(log))
        copy = records_in(rx.files("r"))
        (marker,) = [r for r in local if r["kind"] == "records_dropped"]
        assert marker["dropped"]["count"] == status.dropped > 0
        assert marker["dropped"]["sink"] == rx.url
        assert status.shipped == len(copy)
        assert status.shipped + status.dropped == len(local)
        assert dropped_in(copy) == status.dropped
        result = verified(rx.files("r"))
        assert result.files[0].dropped == status.dropped
        verified(rotated_files(log))
        # Policies are activated again after the gap: decisions after it are reviewable.
        after = copy[copy.index(marker) + 1 :]
        assert after[0]["kind"] == "policy_activated"


class TestKeyedLogs:
    def test_a_keyed_log_is_checked_with_the_key(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A collector with the key takes a keyed log that verifies with the key; one with
        another key refuses its records as forged."""
        monkeypatch.setenv("SHIP_TEST_KEY", "k" * 32)
        log = tmp_path / "audit.jsonl"
        with AuditLog(log, hmac_key_env="SHIP_TEST_KEY") as audit:
            decide(Engine.default(audit=audit), 4, "keyed")
            with (
                receiver(tmp_path / "good", key=b"k" * 32) as good,
                receiver(tmp_path / "bad", key=b"x" * 32) as bad,
                LogShipper(audit, [good.url, bad.url], replica="r", poll_seconds=0.02) as shipper,
            ):
                local = local_records(log)
                wait_for(lambda: shipper.status()[0].shipped == local, "the keyed records")
                wait_for(lambda: shipper.status()[1].failing > 0, "the refusal")
                ok, refused = shipper.status()
        assert ok.healthy
        assert refused.shipped == 0
        assert "HTTP 422" in (refused.last_error or "")
        result = verify_files(good.files("r"), key=b"k" * 32)
        assert result.ok, [str(finding) for finding in result.findings]


class TestReceiverRestarts:
    def test_a_restarted_collector_continues_its_files(self, tmp_path: Path) -> None:
        """A collector started again on the same folder learns each replica's head from its
        file and takes the batches that follow it."""
        log = tmp_path / "audit.jsonl"
        port = free_port()
        url = f"http://127.0.0.1:{port}/v1/logs"
        with AuditLog(log) as audit, fast_shipper(audit, url) as shipper:
            engine = Engine.default(audit=audit)
            with receiver(tmp_path / "out", port=port):
                decide(engine, 6, "first")
                assert shipper.wait_caught_up(60)
            decide(engine, 6, "while-down")
            with receiver(tmp_path / "out", port=port) as second:
                assert shipper.wait_caught_up(60)
                (status,) = shipper.status()
                chain = second.collector.replica("r")
        assert status.shipped == local_records(log) == chain.records
        assert chain.duplicates == 0
        assert second.files("r")[0].read_bytes() == log.read_bytes()
        verified(second.files("r"))

    def test_a_removed_log_is_shown_not_hidden(self, tmp_path: Path) -> None:
        """When the file the cursor is in is removed, shipping goes on from the new file and
        the collector refuses the gap: the status says so, nothing is skipped silently."""
        log = tmp_path / "audit.jsonl"
        with receiver(tmp_path / "out") as rx:
            with AuditLog(log) as audit:
                decide(Engine.default(audit=audit), 3, "old")
                with fast_shipper(audit, rx.url) as shipper:
                    assert shipper.wait_caught_up(60)
            log.unlink()
            with AuditLog(log) as audit:
                decide(Engine.default(audit=audit), 2, "new")
                with fast_shipper(audit, rx.url) as shipper:
                    wait_for(lambda: "HTTP 409" in (shipper.status()[0].last_error or ""), "409")
                    (status,) = shipper.status()
        assert status.shipped == 0
        assert not status.healthy
        assert "chain" in (status.last_error or "")
        verified(rx.files("r"))
