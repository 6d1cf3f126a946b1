"""What a collector trusts: a token bound to its replica, keyed records where keys are used,
only the bytes it acknowledged, and a body it reads a line at a time; and a shipper that reads
a receiver's answer no further than it needs."""

from __future__ import annotations

import gzip
import http.server
import io
import json
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _support.shipping import decide, receiver, verified
from prunewarden import AuditLog, Engine
from prunewarden.audit import seal
from prunewarden.cli._main import run
from prunewarden.shipping import ShipError, TokensError, read_collect_tokens
from prunewarden.shipping._reading import Position, Shipped
from prunewarden.shipping._sinks import ANSWER_BYTES, HttpSink

KEY = b"k" * 32
TOKEN_A = "token-of-replica-a-0001"  # noqa: S105 - a test's token
TOKEN_B = "token-of-replica-b-0002"  # noqa: S105 - a test's token
TOKENS_YAML = f"""\
tokensVersion: 1
replicas:
  - name: eu-1
    tokens: [{TOKEN_A}]
  - name: us-1
    tokens: [{TOKEN_B}]
"""


def local_lines(
    path: Path, monkeypatch: pytest.MonkeyPatch | None = None, count: int = 5
) -> list[bytes]:
    """The lines of a real log of ``count`` decisions, keyed with KEY when ``monkeypatch``
    is given (to set the key's variable)."""
    env = None
    if monkeypatch is not None:
        env = "TEST_COLLECT_KEY"
        monkeypatch.setenv(env, KEY.decode())
    with AuditLog(path, hmac_key_env=env) as audit:
        decide(Engine.default(audit=audit), count, path.stem)
    return path.read_bytes().splitlines(keepends=True)


def post(
    url: str, body: bytes, replica: str, token: str | None = None, *, gzipped: bool = True
) -> httpx.Response:
    headers = {"Content-Type": "application/x-ndjson", "Prunewarden-Replica": replica}
    if gzipped:
        headers["Content-Encoding"] = "gzip"
        body = gzip.compress(body)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.post(url, content=body, headers=headers, timeout=30)


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.yaml"
    path.write_text(TOKENS_YAML, encoding="utf-8")
    return path


class TestReplicaTokens:
    def test_a_token_ships_only_as_its_replica(self, tmp_path: Path, tokens_file: Path) -> None:
        """Replica A's token cannot write B's file (403 forbidden-replica); each writes its
        own; an unknown token is 401."""
        lines = local_lines(tmp_path / "local.jsonl")
        tokens = read_collect_tokens(tokens_file)
        with receiver(tmp_path / "out", tokens=tokens) as rx:
            refused = post(rx.url, b"".join(lines), "us-1", TOKEN_A)
            assert refused.status_code == 403
            assert refused.json()["type"].endswith("/forbidden-replica")
            assert not (tmp_path / "out" / "us-1.jsonl").exists()
            assert post(rx.url, b"".join(lines), "eu-1", TOKEN_A).json()["accepted"] == len(lines)
            assert post(rx.url, b"".join(lines), "us-1", TOKEN_B).json()["accepted"] == len(lines)
            assert post(rx.url, lines[0], "eu-1", "not-a-token-at-all").status_code == 401

    def test_a_bad_tokens_file_is_located(self, tmp_path: Path) -> None:
        """A token given to two replicas, and a token too short, are each one located line;
        the collector does not start (exit 2)."""
        path = tmp_path / "tokens.yaml"
        path.write_text(
            f"tokensVersion: 1\nreplicas:\n  - name: eu-1\n    tokens: [{TOKEN_A}]\n"
            f"  - name: us-1\n    tokens: [{TOKEN_A}, short]\n",
            encoding="utf-8",
        )
        with pytest.raises(TokensError) as raised:
            read_collect_tokens(path)
        shown = [str(problem) for problem in raised.value.problems]
        assert any(
            line.startswith(f"{path}:6:") and "$.replicas[1].tokens[1]" in line for line in shown
        )
        stderr = io.StringIO()
        argv = ["audit", "collect", "--listen", "127.0.0.1:0", "--out", str(tmp_path / "o")]
        assert run([*argv, "--tokens", str(path)], io.StringIO(), stderr) == 2
        assert f"{path}:6:" in stderr.getvalue()


class TestKeyedChains:
    def test_a_collector_with_a_key_refuses_an_unkeyed_record(self, tmp_path: Path) -> None:
        """With the key, an unkeyed record (anyone holding the token can seal one) is a
        forgery, 422, even as the first record of a replica."""
        plain = local_lines(tmp_path / "plain.jsonl")
        with receiver(tmp_path / "out", key=KEY) as rx:
            refused = post(rx.url, b"".join(plain), "eu-1")
            assert refused.status_code == 422
            assert refused.json()["type"].endswith("/forged-record")
            assert not (tmp_path / "out" / "eu-1.jsonl").exists()

    def test_an_unkeyed_record_cannot_follow_a_keyed_one(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without the key, a keyed chain still cannot be extended by unkeyed records (as
        AuditLog refuses to append unkeyed after keyed)."""
        keyed = local_lines(tmp_path / "keyed.jsonl", monkeypatch, count=2)
        forged = _unkeyed_after(keyed[-1])
        with receiver(tmp_path / "out") as rx:
            assert post(rx.url, b"".join(keyed), "eu-1").status_code == 200
            refused = post(rx.url, forged, "eu-1")
            assert refused.status_code == 422, refused.text
            assert "not keyed" in refused.json()["detail"]


def _unkeyed_after(line: bytes) -> bytes:
    """A record sealed without a key that links to the record ``line``."""
    record = {"kind": "note", "ts": "2026-12-01T00:00:00.000000Z", "record_version": 2}
    sealed, _ = seal(record, json.loads(line)["hash"], None)
    return sealed


class TestUnacknowledgedTail:
    def test_a_torn_tail_is_cut_at_start(self, tmp_path: Path) -> None:
        """A collector killed mid-write left half a record: the next collector cuts it, and
        the batch sent again verifies."""
        lines = local_lines(tmp_path / "local.jsonl")
        out = tmp_path / "out"
        with receiver(out) as rx:
            assert post(rx.url, b"".join(lines[:3]), "eu-1").status_code == 200
        collected = out / "eu-1.jsonl"
        with collected.open("ab") as handle:
            handle.write(lines[3][:40])  # the write the kill cut
        with receiver(out) as rx:
            taken = post(rx.url, b"".join(lines[3:]), "eu-1")
            assert taken.json()["accepted"] == len(lines) - 3
            verified(rx.files("eu-1"))
        assert collected.read_bytes() == b"".join(lines)

    def test_a_torn_tail_is_cut_before_an_append(self, tmp_path: Path) -> None:
        """Bytes that appeared after the last newline while the collector ran are cut before
        the next batch is written."""
        lines = local_lines(tmp_path / "local.jsonl")
        with receiver(tmp_path / "out") as rx:
            assert post(rx.url, b"".join(lines[:2]), "eu-1").status_code == 200
            with (tmp_path / "out" / "eu-1.jsonl").open("ab") as handle:
                handle.write(b'{"half a rec')
            assert post(rx.url, b"".join(lines[2:]), "eu-1").status_code == 200
            verified(rx.files("eu-1"))


class TestStreamedBatches:
    def test_a_bad_first_line_is_refused_before_the_rest_is_decompressed(
        self, tmp_path: Path
    ) -> None:
        """A 200 KiB gzip body holding a bad line and then 200 MiB of zeros is refused at
        line 1 without the 200 MiB ever being held."""
        zeros = gzip.compress(b"not a record\n" + bytes(200 * 2**20), compresslevel=9)
        assert len(zeros) < 300_000
        with receiver(tmp_path / "out") as rx:
            tracemalloc.start()
            try:
                refused = _post_raw(rx.url, zeros)
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
        assert refused.status_code == 400
        assert "line 1" in refused.json()["detail"]
        assert peak < 32 * 2**20, f"peak {peak} bytes"

    def test_a_batch_is_held_once(self, tmp_path: Path) -> None:
        """A good batch of about 8 MiB is taken with a peak of a small multiple of it."""
        lines = local_lines(tmp_path / "local.jsonl", count=200)
        body = b"".join(lines)
        copies = max(1, (8 * 2**20) // len(body))
        # The same records again and again are duplicates after the first copy: checked all.
        batch = body * copies
        with receiver(tmp_path / "out") as rx:
            tracemalloc.start()
            try:
                taken = post(rx.url, batch, "eu-1")
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
        assert taken.json()["accepted"] == len(lines)
        assert peak < 4 * len(batch), f"peak {peak} bytes for a batch of {len(batch)}"


def _post_raw(url: str, gzipped: bytes) -> httpx.Response:
    headers = {
        "Content-Type": "application/x-ndjson",
        "Content-Encoding": "gzip",
        "Prunewarden-Replica": "eu-1",
    }
    return httpx.post(url, content=gzipped, headers=headers, timeout=60)


class _EndlessAnswer(http.server.BaseHTTPRequestHandler):
    """Answers every batch 500 with a body that never ends."""

    def log_message(self, *_args: object) -> None:
        return

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(500)
        self.send_header("Content-Length", str(2**40))
        self.end_headers()
        chunk = b"x" * 65536
        try:
            while True:
                self.wfile.write(chunk)
        except OSError:
            return


@pytest.fixture
def endless() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EndlessAnswer)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/logs"
    finally:
        server.shutdown()
        server.server_close()


def test_a_receivers_answer_is_read_bounded(endless: str) -> None:
    """A receiver answering without end: the sink reads at most ANSWER_BYTES of it and fails
    the batch, instead of reading for ever."""
    sink = HttpSink(endless, timeout=5)
    record = Shipped(
        b'{"hash":"sha256:00"}\n', "sha256:00", "sha256:ff", "x", None, Position((0, 0), 0)
    )
    failed: list[BaseException] = []

    def send() -> None:
        try:
            sink.send("eu-1", [record])
        except ShipError as exc:
            failed.append(exc)

    started = time.monotonic()
    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "the sink kept reading the answer"
    assert failed
    assert "HTTP 500" in str(failed[0])
    assert time.monotonic() - started < 10
    assert ANSWER_BYTES <= 2**20
