"""The Kafka destination without a broker: its URL and refusals, and the real confluent-kafka
producer against a closed loopback port (test_kafka_broker.py runs it against librdkafka's mock
cluster)."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

import pytest
from _support.shipping import decide, free_port, records_in, wait_for
from prunewarden import AuditLog, Engine
from prunewarden.audit import rotated_files
from prunewarden.shipping import LogShipper, ShipError, destination_name, open_sink
from prunewarden.shipping._kafka_url import PASSWORD_ENV, DestinationError, parse_kafka_url
from prunewarden.shipping._reading import ChainReader, start_of

needs_kafka = pytest.mark.skipif(
    find_spec("confluent_kafka") is None,
    reason="the kafka extra (confluent-kafka) is not installed",
)


class TestKafkaUrl:
    def test_brokers_topic_and_settings(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Brokers (9092 when no port is given), the topic, at-least-once defaults, settings."""
        monkeypatch.delenv(PASSWORD_ENV, raising=False)
        url = "kafka://b1:9093,b2,[::1]:9094/prunewarden.decisions?compression.type=zstd"
        destination = parse_kafka_url(url)
        assert destination.servers == ("b1:9093", "b2:9092", "[::1]:9094")
        assert destination.bootstrap == "b1:9093,b2:9092,[::1]:9094"
        assert destination.topic == "prunewarden.decisions"
        assert destination.settings == {
            "acks": "all",
            "enable.idempotence": "true",
            "compression.type": "zstd",
        }

    def test_the_url_may_loosen_the_defaults(self) -> None:
        """acks=1 with idempotence off is taken as written."""
        url = "kafka://b:9092/t?acks=1&enable.idempotence=false"
        settings = parse_kafka_url(url).settings
        assert (settings["acks"], settings["enable.idempotence"]) == ("1", "false")

    def test_the_password_comes_from_the_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """$PRUNEWARDEN_SHIP_KAFKA_PASSWORD becomes sasl.password."""
        monkeypatch.setenv(PASSWORD_ENV, "s3cret")
        settings = parse_kafka_url("kafka://b:9092/t?sasl.username=eu").settings
        assert settings["sasl.password"] == "s3cret"
        assert settings["sasl.username"] == "eu"

    @pytest.mark.parametrize(
        ("url", "part", "value"),
        [
            ("kafka://b:9092/t?acks=0", "?acks", "0"),
            ("kafka://b:9092/t?request.required.acks=0", "?request.required.acks", "0"),
            ("kafka://b:9092/", "topic", ""),
            ("kafka://b:9092/a/b", "topic", "a/b"),
            ("kafka://b:9092/..", "topic", ".."),
            ("kafka://b:70000/t", "broker", "b:70000"),
            ("kafka://b:x/t", "broker", "b:x"),
            ("kafka://b:9092,/t", "broker", ""),
            ("kafka://user@b:9092/t", "broker", "user@b:9092"),
            ("kafka://b:9092/t?bootstrap.servers=c:9092", "?bootstrap.servers", "c:9092"),
            ("kafka://b:9092/t?dr_msg_cb=x", "?dr_msg_cb", "x"),
            ("kafka://b:9092/t?sasl.password=s3cret", "?sasl.password", "…"),
            ("kafka://b:9092/t?acks", "query", "acks"),
        ],
    )
    def test_a_url_that_cannot_work_is_refused_where_it_is_wrong(
        self, url: str, part: str, value: str
    ) -> None:
        """A URL that cannot ship at least once is refused naming the part and its value."""
        with pytest.raises(DestinationError) as caught:
            parse_kafka_url(url)
        error = caught.value
        assert (error.part, error.value, error.retry) == (part, value, False)
        assert str(error).startswith(f"--ship {destination_name(url)!r}: {part}: {value!r} ")
        assert "s3cret" not in str(error)

    def test_the_name_keeps_the_brokers_and_drops_the_rest(self) -> None:
        """Status and metrics show the brokers and topic, not credentials or settings."""
        url = "kafka://eu:pw@b1:9092,b2:9092/t?acks=all"
        assert destination_name(url) == "kafka://b1:9092,b2:9092/t"

    def test_an_unknown_scheme_names_kafka_among_those_known(self) -> None:
        """A scheme that names no sink is refused listing the ones that exist."""
        with pytest.raises(ShipError) as caught:
            open_sink("amqp://broker/decisions")
        assert caught.value.retry is False
        assert "kafka://HOST:PORT[,HOST:PORT]/TOPIC" in str(caught.value)


@needs_kafka
class TestKafkaSink:
    def test_the_client_refuses_a_setting_it_does_not_know(self) -> None:
        """A query setting librdkafka does not know is refused when the sink is made."""
        with pytest.raises(ShipError) as caught:
            open_sink("kafka://127.0.0.1:9092/t?linger.mss=5")
        assert caught.value.retry is False
        assert 'No such configuration property: "linger.mss"' in str(caught.value)

    def test_the_client_refuses_an_idempotent_producer_without_acks_all(self) -> None:
        """acks=1 with idempotence left on is refused by librdkafka, not sent half-acknowledged."""
        with pytest.raises(ShipError) as caught:
            open_sink("kafka://127.0.0.1:9092/t?acks=1")
        assert "`acks` must be set to `all`" in str(caught.value)

    def test_a_broker_that_is_not_there_acknowledges_nothing(
        self, tmp_path: Path, capfd: pytest.CaptureFixture[str]
    ) -> None:
        """Against a closed port every batch fails within the sink's timeout, nothing is
        acknowledged, the status says why, decisions go on, and nothing is printed."""
        log = tmp_path / "audit.jsonl"
        sink = open_sink(f"kafka://127.0.0.1:{free_port()}/decisions", timeout=0.5)
        with AuditLog(log) as audit:
            engine = Engine.default(audit=audit)
            decide(engine, 5, "before")
            with LogShipper(
                audit, [sink], replica="r", poll_seconds=0.02, retry_seconds=0.02
            ) as shipper:
                wait_for(lambda: shipper.status()[0].failing >= 2, "two failed batches")
                decide(engine, 5, "while-failing")
                local = records_in(rotated_files(log))
                wait_for(lambda: shipper.status()[0].buffered_records == len(local), "all buffered")
                (status,) = shipper.status()
        assert sum(record["kind"] == "decision" for record in local) == 10
        assert status.buffered_records == len(local)
        assert (status.shipped, status.dropped, status.last_shipped_hash) == (0, 0, None)
        assert not status.healthy
        assert status.destination == sink.name
        assert "records not acknowledged" in (status.last_error or "")
        assert capfd.readouterr() == ("", "")

    def test_a_failed_send_raises_and_the_next_one_tries_again(self, tmp_path: Path) -> None:
        """A batch no broker acknowledged raises a retryable ShipError; so does the next."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit:
            decide(Engine.default(audit=audit), 3, "s")
        position = start_of(log)
        assert position is not None
        batch, _more = ChainReader(log, position).read(100, 2**20, at_least_one=True)
        assert len(batch) == len(records_in([log]))  # the activation and 3 decisions
        sink = open_sink(f"kafka://127.0.0.1:{free_port()}/decisions", timeout=0.3)
        try:
            for _ in range(2):
                with pytest.raises(ShipError) as caught:
                    sink.send("r", batch)
                assert caught.value.retry is True
                assert f"{len(batch)} of {len(batch)} records not acknowledged" in str(caught.value)
        finally:
            sink.close()
