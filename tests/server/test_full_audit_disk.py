"""`prunewarden serve` with its audit log on a real filesystem that fills up (a 1 MiB tmpfs):
decisions are refused and `/readyz` says why while the disk is full; once space is back the
server decides again, and the whole log verifies.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import resource
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _support.server import PRUNEWARDEN, Server, running_server
from prunewarden.audit import decision_rows, verify_files

ALLOWED = {
    "check": "eviction",
    "segment": {"id": "s1", "kind": "tool_output", "tombstone_written": True},
    "score": 0.1,
    "perturbed_score": 0.12,
}
PAGE = 4096
KEY = "k" * 32

pytestmark = pytest.mark.spawns


def window(count: int) -> dict[str, Any]:
    """A plan over ``count`` segments: its pass record is several pages long."""
    segments = []
    for i in range(count):
        text = f"text of s{i}"
        segments.append(
            {
                "id": f"s{i}",
                "kind": "tool_output",
                "text": text,
                "text_sha256": hashlib.sha256(text.encode()).hexdigest(),
                "score": 0.5,
                "perturbed_score": 0.5,
                "tombstone_written": True,
                "tokens": 10,
            }
        )
    return {"segments": segments, "keep_top_k": 1}


class SmallDisk:
    """A tmpfs of 1 MiB mounted for one test; ``fill`` takes every free byte, ``free`` gives
    them back."""

    def __init__(self, mountpoint: Path) -> None:
        self.mountpoint = mountpoint
        self.filler = mountpoint / "filler"

    def fill(self) -> None:
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while True:
                os.write(fd, b"\0" * PAGE)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
        finally:
            os.close(fd)

    def free(self) -> None:
        self.filler.unlink()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mountpoint = tmp_path / "disk"
    mountpoint.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mountpoint)],
        check=True,
        capture_output=True,
    )
    try:
        yield SmallDisk(mountpoint)
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=True, capture_output=True)


def unaligned(http: httpx.Client, log: Path) -> None:
    """Decide until the log does not end on a page boundary, so that a full disk still takes
    the rest of its last page: the next record is cut, not refused whole."""
    while log.stat().st_size % PAGE == 0:
        assert http.post("/v1/evaluate", json=ALLOWED).status_code == 200


def until_refused(http: httpx.Client, path: str, body: dict[str, Any]) -> list[str]:
    """Post until the full disk refuses: what the last page still had room for is decided
    (and answered), the first record it has no room for is cut. The answered ids."""
    answered: list[str] = []
    for _ in range(PAGE // 1024 + 1):  # each record that fits takes over 1 KiB of the page
        response = http.post(path, json=body)
        if response.status_code != 200:
            break
        answered.extend(response.headers["prunewarden-decision-ids"].split(","))
    assert (response.status_code, response.json()["type"].rsplit("/", 1)[-1]) == (
        503,
        "audit-unavailable",
    )
    return answered


def expect_refused(http: httpx.Client, path: str, body: dict[str, Any]) -> None:
    response = http.post(path, json=body)
    assert (response.status_code, response.json()["type"].rsplit("/", 1)[-1]) == (
        503,
        "audit-unavailable",
    )


def readiness(http: httpx.Client) -> tuple[int, dict[str, Any]]:
    response = http.get("/readyz")
    document: dict[str, Any] = response.json()
    return response.status_code, document


class TestFullAuditDisk:
    @pytest.mark.parametrize(
        ("fsync", "key"),
        [("always", None), ("batch", None), ("never", None), ("batch", KEY)],
        ids=["always", "batch", "never", "batch-keyed"],
    )
    def test_refused_while_full_then_deciding_on_a_log_that_verifies(
        self,
        policy_file: Path,
        tmp_path: Path,
        small_disk: SmallDisk,
        fsync: str,
        key: str | None,
    ) -> None:
        """Three decisions refused on a full disk (the first one cut), then a cut pass record:
        /readyz answers 503 with the reason meanwhile, 200 once space is back. Then, cut to the
        byte, one refusal and a refusal whose recovery is cut too. The decisions after each
        recovery are answered and logged, and the whole log verifies (with its key, for a keyed
        log)."""
        options = ["--audit-fsync", fsync, "--sessions", f"sqlite:{tmp_path / 'sessions.db'}"]
        env = {} if key is None else {"PRUNEWARDEN_AUDIT_KEY": key}
        answered = []
        with (
            running_server(policy_file, small_disk.mountpoint, *options, env=env) as server,
            server.client() as http,
        ):
            log = server.audit_log
            for path, body in (("/v1/evaluate", ALLOWED), ("/v1/plan", window(40))):
                unaligned(http, log)
                small_disk.fill()
                answered.extend(until_refused(http, path, body))
                for _ in range(2 if path == "/v1/evaluate" else 0):
                    expect_refused(http, path, body)
                status, document = readiness(http)
                assert (status, document["status"], document["title"]) == (
                    503,
                    503,
                    "The server is not ready",
                )
                assert document["checks"]["audit_log"] is False
                assert "No space left on device" in document["checks"]["audit_error"]
                small_disk.free()
                assert readiness(http)[0] == 200
                response = http.post(path, json=body)
                assert response.status_code == 200
                answered.extend(response.headers["prunewarden-decision-ids"].split(","))
            # Cut to the byte by a file size limit on the server process: a decision cut after
            # 40 bytes; then one cut after 40 bytes and the next one's recovery after 30.
            for rooms in ([40], [40, 30]):
                for room in rooms:
                    limit_file_size(server, log.stat().st_size + room)
                    expect_refused(http, "/v1/evaluate", ALLOWED)
                limit_file_size(server, resource.RLIM_INFINITY)
                response = http.post("/v1/evaluate", json=ALLOWED)
                assert response.status_code == 200
                answered.append(response.headers["prunewarden-decision-ids"])
            stop(server)
        result = verify_files([log], key=None if key is None else key.encode())
        assert result.ok, [str(f) for f in result.findings]
        notes = [f.message for f in result.findings]
        assert len(notes) >= 2
        assert all("of an interrupted write" in note for note in notes)
        assert re.match(r"line \d+: 40 bytes", notes[-2])
        assert re.match(r"lines (\d+)-\d+: 69 bytes", notes[-1])
        assert set(answered) <= logged_ids(log)


def limit_file_size(server: Server, limit: int) -> None:
    """Let the server's process write files up to ``limit`` bytes (RLIMIT_FSIZE, set from
    outside: the server ignores SIGXFSZ, as Python does, and a write past it fails)."""
    resource.prlimit(server.process.pid, resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


def stop(server: Server) -> None:
    """Stop the server before the log is read (so ``batch`` has synced and closed it)."""
    assert server.stop() == 0


def logged_ids(log: Path) -> set[str]:
    """The ids of the decisions a log holds (a pass's decisions are ``<pass_id>-<index>``)."""
    ids: set[str] = set()
    for line in log.read_bytes().split(b"\n"):
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict):
                ids.update(row["decision_id"] for row in decision_rows(record))
    return ids


class TestKeyedServe:
    def test_serve_keys_its_log_and_refuses_another_key(
        self, policy_file: Path, tmp_path: Path
    ) -> None:
        """With $PRUNEWARDEN_AUDIT_KEY set, serve writes a keyed log; started again with another
        key on that log, it refuses to start (exit 2) and names the line."""
        with running_server(policy_file, tmp_path, env={"PRUNEWARDEN_AUDIT_KEY": KEY}) as server:
            with server.client() as http:
                assert http.post("/v1/evaluate", json=ALLOWED).status_code == 200
            stop(server)
        log = server.audit_log
        assert verify_files([log], key=KEY.encode()).ok
        command = [PRUNEWARDEN, "serve", "--policy", str(policy_file), "--audit-log", str(log)]
        done = subprocess.run(
            [*command, "--listen", "127.0.0.1:0"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PRUNEWARDEN_AUDIT_KEY": "w" * 32},
            check=False,
        )
        assert done.returncode == 2
        assert "line 2: its record is sealed with another HMAC key" in done.stderr
