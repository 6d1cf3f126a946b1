"""Tamper evidence: the hash chain, keyed mode, rotation and ``prunewarden audit verify``."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prunewarden import AuditError, AuditLog, Engine, Policy
from prunewarden.audit import _reading
from prunewarden.audit._chain import GENESIS, seal
from prunewarden.audit._record import policy_activated_record
from prunewarden.audit._verify import Verification, verify_files
from prunewarden.cli._main import run

KEY_ENV = "PW_TEST_AUDIT_KEY"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "inputs" / "eviction-healthy.json"
KEY = b"s3cret-key-of-thirty-two-bytes!!"
ITEM = ("segment", "score", "perturbed_score")


def eviction(segment_id: str = "s41") -> dict[str, Any]:
    return {
        "check": "eviction",
        "segment": {"id": segment_id, "kind": "turn", "tombstone_written": True},
        "score": 0.08,
        "perturbed_score": 0.1,
        "eviction_candidates": [segment_id],
    }


def write_log(path: Path, decisions: int = 8, **settings_: Any) -> Path:
    """A log of ``decisions`` decisions (under two policies, every third under the second)."""
    with AuditLog(path, **settings_) as audit:
        default = Engine.default(audit=audit)
        strict = Engine(_strict_policy(), audit=audit)
        for i in range(decisions):
            (strict if i % 3 == 2 else default).evaluate(eviction(f"s{i}"), session_id="sess")
    return path


def _strict_policy() -> Policy:
    from prunewarden import parse_policy  # noqa: PLC0415 - test helper

    return parse_policy(
        "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: strict, version: 2.0.0}\n"
        "spec: {eviction: {stability_delta: 0.01}}\n",
        "strict.yaml",
    )


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def verify(*paths: Path, **kwargs: Any) -> Verification:
    return verify_files(paths, **kwargs)


def failure(result: Verification) -> tuple[int | None, str]:
    """The first broken line and the message of the first fatal finding."""
    fatal = [f for f in result.findings if f.fatal]
    assert fatal, "verification should have failed"
    broken = [r.broken_at for r in result.files if r.broken_at is not None]
    return (broken[0] if broken else None), fatal[0].message


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The bytes of an intact log of 8 decisions (10 records with 2 activations)."""
    return write_log(tmp_path_factory.mktemp("pristine") / "audit.jsonl").read_bytes()


@pytest.fixture
def log(tmp_path: Path, pristine: bytes) -> Path:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(pristine)
    return path


class TestIntact:
    def test_a_written_log_verifies(self, log: Path) -> None:
        """Every record of an untouched log verifies, with its head hash reported."""
        result = verify(log)
        assert result.ok
        (report,) = result.files
        assert report.records == 10
        assert report.head == json.loads(lines_of(log)[-1])["hash"]

    def test_the_chain_links_every_record(self, log: Path) -> None:
        """Each prev_hash is the hash before it; the first is the genesis value."""
        records = [json.loads(line) for line in lines_of(log)]
        assert records[0]["prev_hash"] == GENESIS
        for before, after in itertools.pairwise(records):
            assert after["prev_hash"] == before["hash"]

    def test_cli_verify_exits_zero_and_prints_the_head(self, log: Path) -> None:
        """audit verify prints one ok line per file and exits 0."""
        code, out, err = cli("audit", "verify", str(log))
        assert (code, err) == (0, "")
        assert out.startswith(f"{log}: ok, 10 records, ")
        assert json.loads(lines_of(log)[-1])["hash"] in out


class TestTampering:
    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def test_flipping_any_byte_is_detected_at_its_line(self, pristine: bytes, data: Any) -> None:
        """Any single changed byte fails verification, and the broken line is the byte's line."""
        position = data.draw(st.integers(0, len(pristine) - 1))
        change = data.draw(st.integers(1, 255))
        tampered = bytearray(pristine)
        tampered[position] ^= change
        line = pristine[:position].count(b"\n") + 1
        result = self._verify_bytes(bytes(tampered))
        assert not result.ok
        assert failure(result)[0] == line

    @staticmethod
    def _verify_bytes(data: bytes) -> Verification:
        import tempfile  # noqa: PLC0415 - a fresh file per example, outside pytest's fixtures

        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "audit.jsonl"
            path.write_bytes(data)
            return verify(path)

    @pytest.mark.parametrize("index", range(9))
    def test_deleting_a_line_is_detected(self, log: Path, index: int) -> None:
        """Removing any record but the last breaks the chain at the line that follows it."""
        lines = lines_of(log)
        log.write_bytes(b"".join(lines[:index] + lines[index + 1 :]))
        line, message = failure(verify(log))
        assert line == index + 1
        expected = "does not start here" if index == 0 else "chain broken"
        assert expected in message

    def test_deleting_the_last_line_is_detected_against_the_kept_head(self, log: Path) -> None:
        """A cut at a line boundary is found by checking for a head hash kept elsewhere."""
        head = verify(log).files[0].head
        assert head is not None
        log.write_bytes(b"".join(lines_of(log)[:-1]))
        assert verify(log).ok  # the file alone cannot tell
        result = verify(log, expect=[head])
        assert not result.ok
        assert "not in the chain" in failure(result)[1]
        code, _, err = cli("audit", "verify", "--expect", head, str(log))
        assert code == 5
        assert "not in the chain" in err

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def test_truncating_inside_a_record_is_detected(self, pristine: bytes, data: Any) -> None:
        """A truncation that leaves a partial last line fails; everything before it verifies."""
        cut = data.draw(st.integers(1, len(pristine) - 2))
        if pristine[cut - 1 : cut] == b"\n" or pristine[cut : cut + 1] == b"\n":
            return  # at a line boundary, or only the newline lost: covered separately
        result = self._verify_bytes(pristine[:cut])
        line, message = failure(result)
        assert line == pristine[:cut].count(b"\n") + 1
        assert "partial last record" in message
        assert result.files[0].records == pristine[:cut].count(b"\n")

    def test_losing_only_the_final_newline_is_a_note(self, log: Path) -> None:
        """A last record whose newline was cut is whole: a note, not a failure."""
        log.write_bytes(log.read_bytes()[:-1])
        result = verify(log)
        assert result.ok
        assert any("no newline" in f.message for f in result.findings)

    def test_swapping_two_records_is_detected(self, log: Path) -> None:
        """Reordering breaks the chain where the order changed."""
        lines = lines_of(log)
        lines[3], lines[4] = lines[4], lines[3]
        log.write_bytes(b"".join(lines))
        assert failure(verify(log))[0] == 4

    def test_a_decision_without_its_activation_is_refused(self, tmp_path: Path) -> None:
        """A well-chained decision whose policy no earlier record activates fails."""
        path = tmp_path / "audit.jsonl"
        write_log(path, decisions=1)
        activation, decision = (json.loads(line) for line in lines_of(path))
        del decision["hash"], decision["prev_hash"]
        line, _ = seal(decision, GENESIS, None)
        path.write_bytes(line)
        line_no, message = failure(verify(path))
        assert line_no == 1
        assert "which no earlier record of this file activates" in message
        assert activation["kind"] == "policy_activated"

    def test_an_activation_whose_document_does_not_match_fails(self, tmp_path: Path) -> None:
        """A sealed policy_activated record must hold the document its digest names."""
        record = policy_activated_record(Engine.default().policy)
        record["document"]["spec"]["eviction"]["stability_delta"] = 0.9
        line, _ = seal(record, GENESIS, None)
        path = tmp_path / "audit.jsonl"
        path.write_bytes(line)
        assert "does not hash to its digest" in failure(verify(path))[1]

    def test_an_inserted_line_that_is_not_a_record_fails(self, log: Path) -> None:
        """A foreign line, even with the chain intact around it, is reported."""
        lines = lines_of(log)
        log.write_bytes(b"".join([*lines[:5], b'{"note": "hello"}\n', *lines[5:]]))
        line, message = failure(verify(log))
        assert line == 6
        assert "not a record" in message

    def test_cli_reports_the_first_broken_line_and_exits_five(self, log: Path) -> None:
        """audit verify names FILE:LINE on stderr and exits 5."""
        lines = lines_of(log)
        lines[1] = lines[1].replace(b'"outcome":"allow"', b'"outcome":"deny"')
        log.write_bytes(b"".join(lines))
        code, out, err = cli("audit", "verify", str(log))
        assert code == 5
        assert err.startswith(f"{log}:2: hash mismatch")
        assert f"{log}: FAILED at line 2 (1 records before it verify)" in out


class TestKeyed:
    @pytest.fixture
    def keyed(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        monkeypatch.setenv(KEY_ENV, KEY.decode())
        return write_log(tmp_path / "keyed.jsonl", decisions=4, hmac_key_env=KEY_ENV)

    def test_keyed_log_verifies_with_its_key(self, keyed: Path) -> None:
        """Records are sealed with HMAC-SHA-256 and verify with the key."""
        assert all(json.loads(line)["hash"].startswith("hmac-sha256:") for line in lines_of(keyed))
        assert verify(keyed, key=KEY).ok
        code, _, _ = cli("audit", "verify", "--key-env", KEY_ENV, str(keyed))
        assert code == 0

    def test_without_the_key_a_keyed_log_cannot_be_verified(self, keyed: Path) -> None:
        """No key: keyed records are unverifiable, which fails."""
        assert "needs the key" in failure(verify(keyed))[1]

    def test_a_wrong_key_fails(self, keyed: Path) -> None:
        """The wrong key fails at the first record."""
        line, message = failure(verify(keyed, key=b"guess"))
        assert line == 1
        assert "or the key is wrong" in message

    def test_an_unkeyed_writer_cannot_append_to_a_keyed_log(
        self, keyed: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without the key, appending to a keyed log refuses (audit_unavailable); nothing is
        written, and the log still verifies with its key."""
        before = keyed.read_bytes()
        with AuditLog(keyed) as audit:
            decision = Engine.default(audit=audit).evaluate(eviction())
        assert decision.codes == ("audit_unavailable",)
        assert "records are keyed" in decision.reasons[0].message
        assert keyed.read_bytes() == before
        monkeypatch.setenv("PRUNEWARDEN_AUDIT_KEY", "")
        code, _, err = cli("evaluate", "--audit-log", str(keyed), str(EXAMPLE))
        assert code != 0
        assert "PRUNEWARDEN_AUDIT_KEY is not set or empty" in err
        assert keyed.read_bytes() == before
        assert verify(keyed, key=KEY).ok

    def test_a_writer_with_another_key_is_refused(
        self, keyed: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A key of valid length that did not seal the log: ``open()`` and every append are
        refused, naming the line whose seal it does not reproduce; nothing is written."""
        before = keyed.read_bytes()
        monkeypatch.setenv(KEY_ENV, "w" * 32)
        with AuditLog(keyed, hmac_key_env=KEY_ENV) as audit:
            with pytest.raises(AuditError) as raised:
                audit.open()
            decision = Engine.default(audit=audit).evaluate(eviction())
        expected = (
            f"cannot write audit log {keyed}: line {len(lines_of(keyed))}: its record is sealed "
            f"with another HMAC key than the one in {KEY_ENV}"
        )
        assert str(raised.value).startswith(expected)
        assert decision.codes == ("audit_unavailable",)
        assert expected in decision.reasons[0].message
        assert keyed.read_bytes() == before
        assert verify(keyed, key=KEY).ok

    def test_the_command_line_refuses_another_key_before_deciding(
        self, keyed: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``prunewarden evaluate`` with another key: a usage error naming the line, exit 2."""
        before = keyed.read_bytes()
        monkeypatch.setenv("PRUNEWARDEN_AUDIT_KEY", "w" * 32)
        code, out, err = cli("evaluate", "--audit-log", str(keyed), str(EXAMPLE))
        assert (code, out) == (2, "")
        assert f"line {len(lines_of(keyed))}: its record is sealed with another HMAC key" in err
        assert keyed.read_bytes() == before

    def test_the_right_key_appends(self, keyed: Path) -> None:
        """The key that sealed the log goes on appending to it (the check reads only the last
        record)."""
        write_log(keyed, decisions=2, hmac_key_env=KEY_ENV)
        assert verify(keyed, key=KEY).files[0].records == 8

    @pytest.mark.parametrize("key", ["k", "x" * 31])
    def test_keys_shorter_than_32_bytes_are_refused(
        self, key: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A key must be at least 32 bytes: a shorter one is a configuration error."""
        monkeypatch.setenv(KEY_ENV, key)
        with pytest.raises(AuditError, match=f"is {len(key)} bytes; at least 32"):
            AuditLog(io.StringIO(), hmac_key_env=KEY_ENV)

    def test_a_rewritten_chain_without_the_key_is_detected(self, keyed: Path) -> None:
        """Whoever can write the file but lacks the key cannot re-seal an edited chain."""
        records = [json.loads(line) for line in lines_of(keyed)]
        records[2]["outcome"] = "deny"
        forged, last = [], GENESIS
        for record in records:
            body = {k: v for k, v in record.items() if k not in ("hash", "prev_hash")}
            line, last = seal(body, last, None)
            forged.append(line)
        keyed.write_bytes(b"".join(forged))
        assert verify(keyed).ok  # plain chain: recomputable by anyone
        line_no, message = failure(verify(keyed, key=KEY))
        assert line_no == 1
        assert "not keyed although a key was given" in message


class TestRotation:
    @pytest.fixture
    def rotated(self, tmp_path: Path) -> list[Path]:
        path = write_log(tmp_path / "audit.jsonl", decisions=30, max_bytes=8_000)
        files = [*sorted(tmp_path.glob("audit.jsonl.*")), path]
        assert len(files) >= 3
        return files

    def test_rotated_files_verify_as_one_chain(self, rotated: list[Path]) -> None:
        """The chain carries across files; each file activates the policies it uses."""
        result = verify(*reversed(rotated))  # given in any order: rotation order is restored
        assert result.ok
        assert sum(r.records for r in result.files) == sum(len(lines_of(p)) for p in rotated)
        for path in rotated:
            kinds = [json.loads(line)["kind"] for line in lines_of(path)]
            assert "policy_activated" in kinds
            assert kinds.index("policy_activated") < kinds.index("decision")
        first = json.loads(lines_of(rotated[1])[0])
        assert first["kind"] == "log_rotated"
        assert first["rotation"] == {"previous_file": rotated[0].name, "sequence": 1}
        assert first["prev_hash"] == json.loads(lines_of(rotated[0])[-1])["hash"]

    def test_a_missing_file_is_a_rotation_gap(self, rotated: list[Path]) -> None:
        """Leaving out a middle file breaks the chain at the next file's header."""
        result = verify(rotated[0], *rotated[2:])
        line, message = failure(result)
        assert line == 1
        assert message.startswith("rotation gap")
        code, _, err = cli("audit", "verify", str(rotated[0]), *map(str, rotated[2:]))
        assert code == 5
        assert f"{rotated[2]}:1: rotation gap" in err

    def test_a_later_file_alone_verifies_from_its_header(self, rotated: list[Path]) -> None:
        """A file that continues one not given is verified from its header, with a note."""
        result = verify(rotated[-1])
        assert result.ok
        assert any("which was not given" in f.message for f in result.findings)

    def test_files_default_to_the_environment_log(
        self, rotated: list[Path], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without FILE arguments, $PRUNEWARDEN_AUDIT_LOG and its rotated files are verified."""
        monkeypatch.setenv("PRUNEWARDEN_AUDIT_LOG", str(rotated[-1]))
        code, out, _ = cli("audit", "verify")
        assert code == 0
        assert out.count(": ok, ") == len(rotated)


class TestRecovery:
    def test_a_torn_tail_is_recovered_by_the_next_writer(self, log: Path) -> None:
        """A partial record left by a killed writer is closed and accounted for; the chain
        continues from the last whole record."""
        whole = lines_of(log)
        log.write_bytes(log.read_bytes() + whole[-1][:57])
        assert "partial last record" in failure(verify(log))[1]
        with AuditLog(log) as audit:
            Engine.default(audit=audit).evaluate(eviction())
        result = verify(log)
        assert result.ok
        (note,) = [f for f in result.findings if not f.fatal]
        assert note.line == len(whole) + 1
        assert "57 bytes of an interrupted write" in note.message
        recovered = json.loads(lines_of(log)[len(whole) + 1])
        assert recovered["kind"] == "write_recovered"
        assert recovered["prev_hash"] == json.loads(whole[-1])["hash"]

    def test_a_forged_recovery_fails(self, log: Path) -> None:
        """A write_recovered record must name exactly the lines it follows."""
        lines = lines_of(log)
        log.write_bytes(b"".join(lines) + b'{"torn\n')
        with AuditLog(log) as audit:
            Engine.default(audit=audit).evaluate(eviction())
        data = log.read_bytes().replace(b'{"torn\n', b'{"tern\n')
        log.write_bytes(data)
        line, message = failure(verify(log))
        assert line == len(lines) + 1
        assert "no write_recovered record accounts for it" in message

    def test_a_huge_garbage_tail_is_read_in_bounded_chunks(self, log: Path) -> None:
        """32 MB without a newline: the next writer recovers it holding at most a few MB (the
        whole tail was copied, then parsed, at about three times its size)."""
        whole = lines_of(log)
        garbage = b"x" * (32 * 1024 * 1024)
        with log.open("ab") as handle:
            handle.write(garbage)
        tracemalloc.start()
        try:
            with AuditLog(log) as audit:
                Engine.default(audit=audit).evaluate(eviction())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 16 * 1024 * 1024
        recovered = json.loads(lines_of(log)[len(whole) + 1])
        assert recovered["torn"] == [
            {"bytes": len(garbage), "sha256": hashlib.sha256(garbage).hexdigest()}
        ]
        assert verify(log).ok

    def test_a_whole_record_missing_only_its_newline_is_adopted(self, log: Path) -> None:
        """A writer cut just before the newline wrote a whole record: the next writer keeps it."""
        log.write_bytes(log.read_bytes()[:-1])
        with AuditLog(log) as audit:
            Engine.default(audit=audit).evaluate(eviction())
        result = verify(log)
        assert result.ok
        assert [f for f in result.findings if not f.fatal] == []
        assert json.loads(lines_of(log)[-1])["kind"] == "decision"


class TestRecordsTooLongToParse:
    """A record longer than ``MAX_PARSED_LINE`` (a pass over 100,000 segments is ~50 MB): a
    writer that did not write it learns it from its seal, without parsing it. The limit is
    lowered to 512 bytes here, so that an ordinary pass record is one."""

    @pytest.fixture(autouse=True)
    def small_parse_limit(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(_reading, "MAX_PARSED_LINE", 512)

    @staticmethod
    def with_long_pass(path: Path, **settings_: Any) -> Path:
        with AuditLog(path, **settings_) as audit:
            Engine.default(audit=audit).authorize_evictions(
                [{k: v for k, v in eviction(f"s{i}").items() if k in ITEM} for i in range(8)]
            )
        assert len(lines_of(path)[-1]) > 512
        return path

    def test_a_fresh_writer_chains_after_a_long_record(self, tmp_path: Path) -> None:
        """The next process appends after the long record, not after a write_recovered
        naming it as torn: the chain stays whole."""
        log = self.with_long_pass(tmp_path / "audit.jsonl")
        write_log(log, decisions=1)
        result = verify(log)
        assert result.ok
        assert [f for f in result.findings if not f.fatal] == []
        kinds = [json.loads(line)["kind"] for line in lines_of(log)]
        assert "write_recovered" not in kinds
        assert kinds[-1] == "decision"

    def test_a_long_record_missing_only_its_newline_is_kept(self, tmp_path: Path) -> None:
        """Cut just before its newline, the long record is whole: the next writer ends it."""
        log = self.with_long_pass(tmp_path / "audit.jsonl")
        log.write_bytes(log.read_bytes()[:-1])
        write_log(log, decisions=1)
        assert verify(log).ok
        assert "write_recovered" not in log.read_text()

    def test_a_long_line_that_does_not_hash_to_its_seal_is_torn(self, tmp_path: Path) -> None:
        """A long line ending like a sealed one, whose body was altered, is not a record: the
        next writer accounts for it as torn instead of chaining after it (verify then names the
        altered line)."""
        log = self.with_long_pass(tmp_path / "audit.jsonl")
        whole = lines_of(log)
        altered = whole[-1].replace(b'"authorized"', b'"AUTHORIZED"', 1)
        log.write_bytes(b"".join([*whole[:-1], altered]))
        write_log(log, decisions=1)
        recovered = json.loads(lines_of(log)[len(whole)])
        assert recovered["kind"] == "write_recovered"
        assert recovered["torn"] == [
            {"bytes": len(altered) - 1, "sha256": hashlib.sha256(altered[:-1]).hexdigest()}
        ]
        assert recovered["prev_hash"] == json.loads(whole[-2])["hash"]

    def test_keyed_writers_check_a_long_record_with_their_key(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The key that sealed a long last record appends after it; another key is refused."""
        monkeypatch.setenv(KEY_ENV, KEY.decode())
        log = self.with_long_pass(tmp_path / "audit.jsonl", hmac_key_env=KEY_ENV)
        write_log(log, decisions=1, hmac_key_env=KEY_ENV)
        assert verify(log, key=KEY).ok
        self.with_long_pass(log, hmac_key_env=KEY_ENV)
        monkeypatch.setenv(KEY_ENV, "w" * 32)
        with pytest.raises(AuditError, match="its record is sealed with another HMAC key"):
            AuditLog(log, hmac_key_env=KEY_ENV).open()


class TestCatchUp:
    @pytest.mark.parametrize("mmap_from", [0, 1 << 30], ids=["mmap", "pread"])
    def test_writers_learn_what_others_appended(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mmap_from: int
    ) -> None:
        """Two sinks alternate on one file, one leaving a torn tail: each reads the other's
        records (through mmap or pread), activates each policy once and keeps one chain."""
        monkeypatch.setattr(_reading, "_MMAP_FROM", mmap_from)
        log = tmp_path / "audit.jsonl"
        first, second = AuditLog(log), AuditLog(log)
        engines = [Engine.default(audit=first), Engine(_strict_policy(), audit=second)]
        for i in range(6):
            engines[i % 2].evaluate(eviction(f"s{i}"))
            if i == 3:
                log.write_bytes(log.read_bytes() + b'{"kind":"decis')
        first.close()
        second.close()
        result = verify(log)
        assert result.ok
        kinds = [
            json.loads(line)["kind"]
            for line in lines_of(log)
            if line.startswith(b'{"') and line.endswith(b"}\n")
        ]
        assert kinds.count("policy_activated") == 2
        assert kinds.count("write_recovered") == 1
        assert kinds.count("decision") == 6


class TestStreams:
    def test_stream_records_form_a_chain_that_verifies(self, tmp_path: Path) -> None:
        """Records written to a stream (stdout for a log shipper) are chained the same way."""
        stream = io.StringIO()
        engine = Engine.default(audit=AuditLog(stream))
        for i in range(3):
            engine.evaluate(eviction(f"s{i}"))
        path = tmp_path / "shipped.jsonl"
        path.write_text(stream.getvalue())
        result = verify(path)
        assert result.ok
        assert result.files[0].records == 4
