"""Verification compares to the letter: a record's keyed hash with ``hmac.compare_digest``, a
lock file's digest whole, and a ``log_rotated`` header only at the top of a file."""

from __future__ import annotations

import hmac
import json
from pathlib import Path
from typing import Any

import pytest
from prunewarden import AuditLog, Engine, PolicyError, load_policy
from prunewarden.audit._chain import seal
from prunewarden.audit._record import log_rotated_record
from prunewarden.audit._verify import Verification, verify_files
from prunewarden.policy._lock import LOCK_FILENAME, update
from prunewarden.policy._overlay import resolve_file

KEY = b"a-key-of-thirty-two-bytes-for-it"
KEY_ENV = "PW_TEST_EXACT_KEY"
EVICTION = {
    "check": "eviction",
    "segment": {"id": "s1", "kind": "turn", "tombstone_written": True},
    "score": 0.125,
    "perturbed_score": 0.125,
}


def write_log(path: Path, decisions: int = 3, **options: Any) -> Path:
    with AuditLog(path, **options) as audit:
        engine = Engine.default(audit=audit)
        for _ in range(decisions):
            engine.evaluate(EVICTION)
    return path


def fatal(result: Verification) -> list[str]:
    return [finding.message for finding in result.findings if finding.fatal]


class TestRotationHeaders:
    def test_a_header_after_the_first_record_is_refused(self, tmp_path: Path) -> None:
        """A log_rotated header chained correctly after a file's records is refused: a file
        continues another only from its first line."""
        path = write_log(tmp_path / "audit.jsonl")
        last = json.loads(path.read_bytes().splitlines()[-1])["hash"]
        line, _ = seal(log_rotated_record("audit.jsonl.1", 1), last, None)
        path.write_bytes(path.read_bytes() + line)
        result = verify_files([path])
        assert not result.ok
        assert fatal(result)[0] == "a log_rotated header in the middle of a file"

    def test_the_log_as_written_verifies(self, tmp_path: Path) -> None:
        """The same log without the header verifies (the control)."""
        assert verify_files([write_log(tmp_path / "audit.jsonl")]).ok


class TestPassRecordsNeedTheirPolicy:
    @pytest.mark.parametrize("version", [2, 3])
    def test_a_pass_under_a_policy_never_activated_fails(
        self, tmp_path: Path, version: int
    ) -> None:
        """A pass record (version 3: columns; 2: a verdict each) naming a policy digest that no
        earlier record of its file activates fails verification, as a decision record does."""
        path = tmp_path / "audit.jsonl"
        item = {key: EVICTION[key] for key in ("segment", "score", "perturbed_score")}
        with AuditLog(path) as audit:
            # A shadow policy sends the pass down the general path: a version 2 record.
            shadow = Engine.default().policy if version == 2 else None
            Engine.default(audit=audit, shadow=shadow).authorize_evictions([item])
        *before, last = path.read_bytes().splitlines(keepends=True)
        record = {k: v for k, v in json.loads(last).items() if k not in ("hash", "prev_hash")}
        assert (record["kind"], record["record_version"]) == ("pass", version)
        assert verify_files([path]).ok
        unknown = "sha256:" + "0" * 64
        record["policy"] = {**record["policy"], "digest": unknown}
        line, _ = seal(record, json.loads(before[-1])["hash"], None)
        path.write_bytes(b"".join([*before, line]))
        result = verify_files([path])
        assert not result.ok
        assert fatal(result) == [
            f"decision under policy {unknown}, which no earlier record of this file activates"
        ]


class TestKeyedHashes:
    def test_keyed_hashes_are_compared_in_constant_time(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A keyed (HMAC) record's hash is compared with hmac.compare_digest: an ``==`` would
        leak through timing how much of a forged hash is right."""
        monkeypatch.setenv(KEY_ENV, KEY.decode())
        path = write_log(tmp_path / "keyed.jsonl", hmac_key_env=KEY_ENV)
        compared: list[tuple[Any, Any]] = []
        real = hmac.compare_digest

        def spy(a: Any, b: Any) -> bool:
            compared.append((a, b))
            return real(a, b)

        monkeypatch.setattr(hmac, "compare_digest", spy)
        assert verify_files([path], key=KEY).ok
        claimed = {json.loads(line)["hash"] for line in path.read_bytes().splitlines()}
        assert claimed <= {str(b) for pair in compared for b in pair}

    def test_a_keyed_hash_wrong_in_its_last_digit_fails(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A keyed hash that differs from the record's in its last digit only is a mismatch."""
        monkeypatch.setenv(KEY_ENV, KEY.decode())
        path = write_log(tmp_path / "keyed.jsonl", decisions=1, hmac_key_env=KEY_ENV)
        lines = path.read_bytes().splitlines(keepends=True)
        record = json.loads(lines[-1])
        forged = record["hash"][:-1] + ("0" if record["hash"][-1] != "0" else "1")
        lines[-1] = lines[-1].replace(record["hash"].encode(), forged.encode())
        path.write_bytes(b"".join(lines))
        assert fatal(verify_files([path], key=KEY))[0].startswith("hash mismatch")


def policy(version: str, floor: str) -> str:
    return (
        "apiVersion: prunewarden/v1\nkind: Policy\n"
        f"metadata:\n  name: prod\n  version: {version}\n"
        f"spec:\n  collapse: {{spread_floor: {floor}}}\n"
    )


class TestLockDigests:
    def test_a_locked_digest_is_compared_whole(self, tmp_path: Path) -> None:
        """A lock entry agreeing with the content's digest on all but its last digit refuses
        the policy: a prefix is not the digest."""
        path = tmp_path / "prod.yaml"
        path.write_text(policy("1.0.0", "0.09"), encoding="utf-8")
        lock = tmp_path / LOCK_FILENAME
        update(lock, [resolve_file(path)])
        digest = load_policy(path).digest
        near = digest[:-1] + ("0" if digest[-1] != "0" else "1")
        lock.write_text(lock.read_text(encoding="utf-8").replace(digest, near), encoding="utf-8")
        with pytest.raises(PolicyError, match="reused for different content"):
            load_policy(path)

    def test_the_recorded_digest_loads(self, tmp_path: Path) -> None:
        """The lock as written holds the content (the control)."""
        path = tmp_path / "prod.yaml"
        path.write_text(policy("1.0.0", "0.09"), encoding="utf-8")
        update(tmp_path / LOCK_FILENAME, [resolve_file(path)])
        assert load_policy(path).version == "1.0.0"
