"""librdkafka's own mock cluster on loopback, for the Kafka shipping tests.

A client made with ``test.mock.num.brokers`` starts an in-process Kafka cluster speaking the
real protocol on a loopback port (librdkafka's ``rdkafka_mock``, inside the confluent-kafka
wheel). Its owner here is a producer in a child process, so that a test can make the broker
hang (SIGSTOP the owner: connections open, nothing answered) and come back on the same port
with what it held (SIGCONT), or go away for good (SIGKILL: connections refused). The child
prints the brokers' ``HOST:PORT`` (from the cluster's own metadata) and lives until its
standard input closes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition

WAIT_SECONDS = 30.0


@dataclass
class MockCluster:
    """The owner process of a mock cluster, and the brokers it serves."""

    process: subprocess.Popen[str]
    bootstrap: str

    def url(self, topic: str) -> str:
        return f"kafka://{self.bootstrap}/{topic}"

    def pause(self) -> None:
        """The broker hangs: it accepts nothing and answers nothing."""
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def kill(self) -> None:
        """The owner gone: the cluster with it, and its port closed."""
        self.process.kill()
        self.process.wait(10)


@contextmanager
def mock_cluster(brokers: int = 1) -> Iterator[MockCluster]:
    """A mock cluster of ``brokers`` brokers, owned by a child process; stopped on exit."""
    process = subprocess.Popen(
        [sys.executable, __file__, str(brokers)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        bootstrap = process.stdout.readline().strip()
        assert bootstrap, "the mock cluster's owner printed no brokers"
        yield MockCluster(process, bootstrap)
    finally:
        with suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGCONT)
        if process.stdin is not None:
            with suppress(BrokenPipeError):
                process.stdin.close()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


def read_topic(bootstrap: str, topic: str) -> list[Message]:
    """Every message of ``topic`` (up to each partition's high watermark now), read by a
    real consumer assigned each partition from its beginning (no group), in partition then
    offset order."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "tests-reader", "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        messages: list[Message] = []
        deadline = time.monotonic() + WAIT_SECONDS
        while len(messages) < sum(ends.values()):
            assert time.monotonic() < deadline, f"{len(messages)} of {sum(ends.values())} read"
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                messages.append(message)
        return sorted(messages, key=lambda m: (m.partition(), m.offset()))
    finally:
        consumer.close()


def committed_and_ends(bootstrap: str, topic: str, group: str) -> list[tuple[int, int]]:
    """For each partition holding messages: the offset ``group`` committed, and its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        held = [TopicPartition(topic, p) for p in sorted(partitions)]
        ends = [consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in held]
        offsets = consumer.committed(held, timeout=10)
        return [(o.offset, end) for o, end in zip(offsets, ends, strict=True) if end > 0]
    finally:
        consumer.close()


def _own(brokers: int) -> None:
    owner = Producer({"test.mock.num.brokers": brokers, "bootstrap.servers": "unused:9092"})
    metadata = owner.list_topics(timeout=10)
    sys.stdout.write(",".join(f"{b.host}:{b.port}" for b in metadata.brokers.values()) + "\n")
    sys.stdout.flush()
    sys.stdin.read()  # until the test closes it
    owner.flush(1)


if __name__ == "__main__":
    _own(int(sys.argv[1]))
