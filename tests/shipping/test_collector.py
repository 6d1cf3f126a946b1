"""The receiving side: a real collector on loopback taking batches of a real log, and refusing
gaps, forgeries and malformed batches with problem documents; verify over what it wrote."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _support.shipping import Receiver, decide, receiver, records_in, verified
from prunewarden import AuditLog, Engine
from prunewarden.audit import seal, verify_files
from prunewarden.audit._record import records_dropped_record
from prunewarden.cli._main import run


@pytest.fixture
def lines(tmp_path: Path) -> list[bytes]:
    """The lines of a real local log: an activation and 9 decisions."""
    log = tmp_path / "local.jsonl"
    with AuditLog(log) as audit:
        decide(Engine.default(audit=audit), 9, "s")
    return log.read_bytes().splitlines(keepends=True)


@pytest.fixture
def rx(tmp_path: Path) -> Iterator[Receiver]:
    with receiver(tmp_path / "out") as running:
        yield running


def post(
    url: str, body: bytes, *, replica: str = "r", headers: dict[str, str] | None = None
) -> httpx.Response:
    sent = {
        "Content-Type": "application/x-ndjson",
        "Content-Encoding": "gzip",
        "Prunewarden-Replica": replica,
        **(headers or {}),
    }
    data = gzip.compress(body) if sent["Content-Encoding"] == "gzip" else body
    return httpx.post(url, content=data, headers=sent, timeout=30)


def problem(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"] == "application/problem+json"
    document: dict[str, Any] = response.json()
    assert document["status"] == response.status_code
    return document


class TestAccepting:
    def test_duplicates_are_dropped(self, rx: Receiver, lines: list[bytes]) -> None:
        """A batch sent again (a shipper restarted before its acknowledgement) adds nothing."""
        first = post(rx.url, b"".join(lines[:6]))
        assert first.json() == {
            "accepted": 6,
            "duplicates": 0,
            "dropped": 0,
            "head": json.loads(lines[5])["hash"],
        }
        again = post(rx.url, b"".join(lines[3:]))
        assert again.json()["accepted"] == len(lines) - 6
        assert again.json()["duplicates"] == 3
        assert rx.files("r")[0].read_bytes() == b"".join(lines)
        verified(rx.files("r"))

    def test_replicas_get_a_file_each(self, rx: Receiver, lines: list[bytes]) -> None:
        """Two replicas' batches go to two files; GET /v1/replicas lists both heads."""
        post(rx.url, b"".join(lines), replica="eu-1")
        post(rx.url, b"".join(lines[:2]), replica="us-1")
        listed = httpx.get(rx.url.replace("/v1/logs", "/v1/replicas"), timeout=30).json()
        assert listed["eu-1"]["records"] == len(lines)
        assert listed["us-1"]["head"] == json.loads(lines[1])["hash"]


class TestRefusing:
    def test_a_gap_is_refused(self, rx: Receiver, lines: list[bytes]) -> None:
        """Records that do not follow the chain's head are refused whole, with 409."""
        post(rx.url, b"".join(lines[:3]))
        refused = post(rx.url, b"".join(lines[5:]))
        assert refused.status_code == 409
        document = problem(refused)
        assert document["type"].endswith("/chain-gap")
        assert json.loads(lines[2])["hash"] in document["detail"]
        assert rx.files("r")[0].read_bytes() == b"".join(lines[:3])

    def test_a_forgery_is_refused(self, rx: Receiver, lines: list[bytes]) -> None:
        """A record whose body no longer hashes to its hash is refused with 422."""
        forged = lines[3].replace(b'"outcome":"allow"', b'"outcome":"deny"')
        assert forged != lines[3]
        refused = post(rx.url, b"".join([*lines[:3], forged]))
        assert refused.status_code == 422
        assert problem(refused)["type"].endswith("/forged-record")
        assert not rx.files("r")

    def test_a_dropped_range_that_does_not_start_at_the_head_is_refused(
        self, rx: Receiver, lines: list[bytes]
    ) -> None:
        """A records_dropped record must bridge from the head here to its own prev_hash."""
        records = [json.loads(line) for line in lines]
        post(rx.url, b"".join(lines[:3]))
        marker = records_dropped_record(
            "http://x/v1/logs", 4, records[3]["hash"], records[4]["hash"], records[-1]["hash"]
        )
        line, _ = seal(marker, records[-1]["hash"], None)
        refused = post(rx.url, line)
        assert refused.status_code == 409
        good = records_dropped_record(
            "http://x/v1/logs", 6, records[2]["hash"], records[3]["hash"], records[-1]["hash"]
        )
        line, _ = seal(good, records[-1]["hash"], None)
        assert post(rx.url, line).json()["dropped"] == 6

    @pytest.mark.parametrize(
        ("headers", "status", "kind"),
        [
            ({"Prunewarden-Replica": "../etc"}, 400, "invalid-batch"),
            ({"Content-Type": "text/plain"}, 415, "unsupported-media-type"),
            ({"Content-Encoding": "identity"}, 400, "invalid-batch"),  # gzip bytes, not lines
        ],
        ids=["replica-name", "media-type", "not-records"],
    )
    def test_malformed_batches(
        self, rx: Receiver, lines: list[bytes], headers: dict[str, str], status: int, kind: str
    ) -> None:
        """A bad replica name, media type or body is refused with its problem kind."""
        body = gzip.compress(lines[0]) if headers.get("Content-Encoding") else lines[0]
        refused = post(rx.url, body, headers=headers)
        assert refused.status_code == status
        assert problem(refused)["type"].endswith(f"/{kind}")

    def test_a_token_is_required_when_set(self, tmp_path: Path, lines: list[bytes]) -> None:
        """A collector with a token answers 401 without it, and takes the batch with it."""
        token = "s3cret-token"  # noqa: S105 - a test's token
        with receiver(tmp_path / "out", token=token) as running:
            refused = post(running.url, lines[0])
            assert refused.status_code == 401
            taken = post(running.url, lines[0], headers={"Authorization": f"Bearer {token}"})
            assert taken.json()["accepted"] == 1


class TestVerifyingCopies:
    def test_verify_reports_a_dropped_range_and_passes(
        self, rx: Receiver, lines: list[bytes]
    ) -> None:
        """audit verify notes a bridged range and what is missing, and exits 0."""
        records = [json.loads(line) for line in lines]
        post(rx.url, b"".join(lines[:3]))
        marker = records_dropped_record(
            "http://x/v1/logs", 6, records[2]["hash"], records[3]["hash"], records[-1]["hash"]
        )
        line, _ = seal(marker, records[-1]["hash"], None)
        post(rx.url, line)
        out, err = io.StringIO(), io.StringIO()
        code = run(["audit", "verify", str(rx.files("r")[0])], out, err)
        assert code == 0, err.getvalue()
        assert "6 records not shipped to http://x/v1/logs" in out.getvalue()
        assert "ok, 4 records, 6 dropped (not shipped)" in out.getvalue()
        assert records_in(rx.files("r"))[-1]["kind"] == "records_dropped"

    def test_a_bridge_to_elsewhere_fails(self, tmp_path: Path, lines: list[bytes]) -> None:
        """A records_dropped record whose range ends elsewhere than before it fails verify."""
        records = [json.loads(line) for line in lines]
        marker = records_dropped_record(
            "http://x/v1/logs", 6, records[2]["hash"], records[3]["hash"], records[4]["hash"]
        )
        line, _ = seal(marker, records[-1]["hash"], None)
        copy = tmp_path / "copy.jsonl"
        copy.write_bytes(b"".join([*lines, line]))
        result = verify_files([copy])
        assert not result.ok
        assert result.files[0].broken_at == len(lines) + 1
