"""Decision records: what each holds, the policy behind it, redaction, and failing closed."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from prunewarden import (
    AuditError,
    AuditLog,
    Engine,
    InputError,
    load_builtin_policy,
    load_policy,
    parse_policy,
)
from prunewarden._json import canonical_digest, encode_canonical
from prunewarden._resources import builtin_policy_path, schema
from prunewarden.audit._record import log_policy_reload_failed
from prunewarden.audit._verify import verify_files

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "inputs").glob("*.json"))
RECORD = Draft202012Validator(schema("audit-record"))


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def eviction(segment_id: str = "s41", text: str = "", **segment: Any) -> dict[str, Any]:
    return {
        "check": "eviction",
        "segment": {"id": segment_id, "kind": "turn", "tombstone_written": True, **segment}
        | ({"text": text} if text else {}),
        "score": 0.08,
        "perturbed_score": 0.1,
        "eviction_candidates": [segment_id],
    }


RULES_POLICY = """\
apiVersion: prunewarden/v1
kind: Policy
metadata: {{name: rules, version: 1.0.0}}
spec:
  params: {{word: do not touch}}
  rules:
    - name: watch
      check: eviction
      when: segment.id == "s41"
      effect: warn
      timeout_ms: 10000  # a loaded machine must not turn the match into rule_error
      {message}
"""


POLICIES = {
    "default": load_builtin_policy("default"),
    "content-pins": load_policy(ROOT / "examples" / "policies" / "content-pins.yaml"),
    "quoting": parse_policy(
        RULES_POLICY.format(message="message_expression: '\"quoting \" + segment.text'"),
        "quoting.yaml",
    ),
}


def staleness(*texts: str) -> dict[str, Any]:
    spans = [
        {
            "span_id": f"p{i}",
            "text": text,
            "score": 0.5 + i / 100,
            "text_sha256": hashlib.sha256(text.encode()).hexdigest(),
            "rewrite_count": 0,
            "derived_from": [],
        }
        for i, text in enumerate(texts)
    ]
    return {"check": "staleness", "spans": spans, "keep_top_k": 1}


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "audit.jsonl"


class TestDecisionRecords:
    @pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
    def test_every_decision_names_its_policy(self, example: Path, log_path: Path) -> None:
        """Each example's decision is logged with policy name, version, digest and sources."""
        with AuditLog(log_path) as audit:
            engine = Engine.default(audit=audit)
            decision = engine.evaluate(json.loads(example.read_text()))
        activation, record = records(log_path)
        assert record["kind"] == "decision"
        assert record["decision_id"] == decision.decision_id
        assert record["policy"]["name"] == "default"
        assert record["policy"]["version"] == "1.0.0"
        assert record["policy"]["digest"] == engine.policy.digest
        (source,) = record["policy"]["sources"]
        assert source["path"] == "builtin:default"
        bundled = builtin_policy_path("default").read_bytes()
        assert source["sha256"] == hashlib.sha256(bundled).hexdigest()
        assert (record["outcome"], record["enforced"]) == (decision.outcome, decision.enforced)
        assert [r["code"] for r in record["reasons"]] == list(decision.codes)
        assert activation["kind"] == "policy_activated"

    @pytest.mark.parametrize(("mode", "enforced"), [("audit", False), ("enforce", True)])
    def test_the_record_says_whether_a_refusal_binds(
        self, log_path: Path, make_policy: Any, mode: str, enforced: bool
    ) -> None:
        """A refusal in audit mode is recorded with enforced false; in enforce mode, true."""
        policy = make_policy(eviction={"mode": mode})
        with AuditLog(log_path) as audit:
            decision = Engine(policy, audit=audit).evaluate(eviction(non_recoverable=True))
        assert (decision.outcome, decision.enforced) == ("deny", enforced)
        record = records(log_path)[-1]
        assert (record["outcome"], record["enforced"]) == ("deny", enforced)

    def test_records_follow_the_schema(self, log_path: Path) -> None:
        """Every record written for the examples validates against audit-record.v3."""
        with AuditLog(log_path, inputs=True) as audit:
            engine = Engine.default(audit=audit)
            for example in EXAMPLES:
                engine.evaluate(json.loads(example.read_text()), session_id="s", labels={"a": "b"})
        written = records(log_path)
        assert len(written) == len(EXAMPLES) + 1
        for record in written:
            assert list(RECORD.iter_errors(record)) == []

    def test_input_digest_is_sha256_of_the_canonical_input(self, log_path: Path) -> None:
        """input_digest hashes the canonical JSON of the document, whatever its key order."""
        document = eviction()
        reordered = dict(reversed(list(document.items())))
        with AuditLog(log_path) as audit:
            Engine.default(audit=audit).evaluate(reordered)
        expected = hashlib.sha256(encode_canonical(document)).hexdigest()
        assert records(log_path)[-1]["input_digest"] == f"sha256:{expected}"

    def test_session_and_labels_are_recorded(self, log_path: Path) -> None:
        """The caller's session id and labels reach the record through every entry point."""
        with AuditLog(log_path) as audit:
            engine = Engine.default(audit=audit)
            engine.evaluate(eviction(), session_id="sess-1", labels={"agent": "planner"})
            engine.authorize_eviction(
                {"id": "s2", "kind": "turn", "tombstone_written": True},
                0.1,
                0.1,
                ["s2"],
                session_id="sess-2",
            )
            engine.detect_collapse([{"cycle": 1, "scores": {"a": 0.5}}], labels={"k": "v"})
            engine.prune(staleness("x").get("spans", []), 1, session_id="sess-3")
            engine.enforce(eviction(), session_id="sess-4")
        decisions = [r for r in records(log_path) if r["kind"] == "decision"]
        assert [(r["session_id"], r["labels"]) for r in decisions] == [
            ("sess-1", {"agent": "planner"}),
            ("sess-2", {}),
            (None, {"k": "v"}),
            ("sess-3", {}),
            ("sess-4", {}),
        ]

    @pytest.mark.parametrize(
        ("session_id", "labels", "path"),
        [(7, None, "$.session_id"), (None, {"k": 1}, "$.labels.k"), (None, ["x"], "$.labels")],
    )
    def test_bad_session_or_labels_are_input_errors(
        self, session_id: Any, labels: Any, path: str
    ) -> None:
        """A session id or labels that are not strings are refused before deciding."""
        with pytest.raises(InputError) as caught:
            Engine.default(audit=AuditLog(io.StringIO())).evaluate(
                eviction(), session_id=session_id, labels=labels
            )
        assert [p.path for p in caught.value.problems] == [path]

    def test_subject_per_check(self, log_path: Path) -> None:
        """collapse names its last cycle, eviction its segment, staleness every span."""
        history = [{"cycle": c, "scores": {"a": 0.5, "b": 0.4}} for c in (3, 4, 9)]
        with AuditLog(log_path) as audit:
            engine = Engine.default(audit=audit)
            engine.evaluate({"check": "collapse", "history": history})
            engine.evaluate(eviction("s41", text="UTC only"))
            engine.evaluate(staleness("alpha", "beta"))
        subjects = [r["subject"] for r in records(log_path) if r["kind"] == "decision"]
        assert subjects[0] == {"cycle": 9}
        assert subjects[1] == {
            "segment": {
                "id": "s41",
                "kind": "turn",
                "text_length": 8,
                "text_sha256": hashlib.sha256(b"UTC only").hexdigest(),
            }
        }
        assert [s["span_id"] for s in subjects[2]["spans"]] == ["p0", "p1"]
        assert subjects[2]["spans"][1]["text_length"] == 4

    def test_staleness_records_kept_and_evicted(self, log_path: Path) -> None:
        """An allowed prune records which spans it kept and which it evicted."""
        with AuditLog(log_path) as audit:
            Engine.default(audit=audit).evaluate(staleness("a", "b", "c"))
        record = records(log_path)[-1]
        assert (record["kept"], record["evicted"]) == (["p2"], ["p0", "p1"])


class TestOddInputs:
    def test_lone_surrogates_are_decided_and_logged(self, log_path: Path) -> None:
        """An id JSON can spell but UTF-8 cannot still gets a decision and a record."""
        with AuditLog(log_path) as audit:
            decision = Engine.default(audit=audit).evaluate(eviction("s\ud800", text="\udfff"))
        assert decision.codes == ("authorized",)
        record = records(log_path)[-1]
        assert record["subject"]["segment"]["id"] == "s\ud800"
        assert record["input_digest"].startswith("sha256:")
        assert verify_files([log_path]).ok


class TestOtherKinds:
    def test_policy_reload_failed(self, log_path: Path) -> None:
        """A reload failure is a chained, schema-valid record naming the policy kept in force."""
        with AuditLog(log_path) as audit:
            engine = Engine.default(audit=audit)
            log_policy_reload_failed(
                audit.logger,
                "policies/prod.yaml",
                ["prod.yaml:3:1: $.spec: bad"],
                engine.policy.identity,
            )
            engine.evaluate(eviction())
        failed = records(log_path)[0]
        assert failed["kind"] == "policy_reload_failed"
        assert failed["policy"]["digest"] == engine.policy.digest
        assert failed["error"] == {
            "path": "policies/prod.yaml",
            "problems": ["prod.yaml:3:1: $.spec: bad"],
        }
        for record in records(log_path):
            assert list(RECORD.iter_errors(record)) == []
        assert verify_files([log_path]).ok


class TestFork:
    def test_a_forked_child_opens_its_own_file(self, log_path: Path) -> None:
        """Parent and forked child share one AuditLog object yet lock each other out."""
        audit = AuditLog(log_path)
        engine = Engine.default(audit=audit)
        engine.evaluate(eviction("before-fork"))
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 0
            try:
                for i in range(200):
                    engine.evaluate(eviction(f"child-{i}"))
                audit.close()
            except BaseException:  # noqa: BLE001 - report through the exit status
                code = 1
            os._exit(code)
        for i in range(200):
            engine.evaluate(eviction(f"parent-{i}"))
        _, status = os.waitpid(pid, 0)
        audit.close()
        assert os.waitstatus_to_exitcode(status) == 0
        assert verify_files([log_path]).ok
        ids = [r["subject"]["segment"]["id"] for r in records(log_path) if r["kind"] == "decision"]
        assert len(ids) == 401
        assert sum(i.startswith("child-") for i in ids) == 200


class TestPolicyActivation:
    def test_activation_precedes_the_first_decision_only(self, log_path: Path) -> None:
        """One policy_activated per digest per file, before its first decision."""
        with AuditLog(log_path) as audit:
            engine = Engine.default(audit=audit)
            for _ in range(3):
                engine.evaluate(eviction())
        assert [r["kind"] for r in records(log_path)] == ["policy_activated"] + ["decision"] * 3

    def test_each_policy_is_activated_once(self, log_path: Path, make_policy: Any) -> None:
        """Two engines on two policies share a log; a later writer finds both activations."""
        strict = make_policy(eviction={"stability_delta": 0.01})
        with AuditLog(log_path) as audit:
            default, other = Engine.default(audit=audit), Engine(strict, audit=audit)
            default.evaluate(eviction())
            other.evaluate(eviction())
            default.evaluate(eviction())
        with AuditLog(log_path) as audit:
            Engine(strict, audit=audit).evaluate(eviction())
            Engine.default(audit=audit).evaluate(eviction())
        kinds = [r["kind"] for r in records(log_path)]
        assert kinds.count("policy_activated") == 2
        assert kinds.count("decision") == 5

    def test_policy_is_reconstructible_from_the_log(self, log_path: Path, make_policy: Any) -> None:
        """The activated document hashes to the digest, and loads back as the same policy."""
        policy = make_policy(collapse={"spread_floor": 0.125}, eviction={"pinned_kinds": ["plan"]})
        with AuditLog(log_path) as audit:
            Engine(policy, audit=audit).evaluate(eviction())
        activation, decision = records(log_path)
        digest = decision["policy"]["digest"]
        assert activation["policy"]["digest"] == digest
        assert canonical_digest(activation["document"]) == digest
        rebuilt = parse_policy(yaml.safe_dump(activation["document"]), "<from-log>")
        assert rebuilt.digest == digest
        assert rebuilt.spec.collapse.spread_floor == 0.125


class TestRedaction:
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        text=st.text(max_size=40).map(lambda t: f"secret<{t}>"),
        negation=st.sampled_from(["", " never", " do not"]),
        policy=st.sampled_from(["default", "content-pins", "quoting"]),
    )
    def test_no_text_in_a_default_log(self, text: str, negation: str, policy: str) -> None:
        """Segment and span text never reach a default log, in any spelling, whatever rules
        the policy has (content-pins pins by wording; quoting puts the text in its message)."""
        text += negation
        stream = io.StringIO()
        engine = Engine(POLICIES[policy], audit=AuditLog(stream, inputs=True))
        engine.evaluate(eviction(text=text))
        engine.evaluate(staleness(text, text + "!"))
        logged = stream.getvalue()
        for spelling in (text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]):
            assert spelling not in logged

    def test_rule_messages_that_read_text_are_withheld(self, log_path: Path) -> None:
        """A rule may quote text in its message: the decision keeps it, the log does not."""
        policy = parse_policy(
            RULES_POLICY.format(message="message_expression: '\"quoting \" + segment.text'"),
            "quoting.yaml",
        )
        with AuditLog(log_path) as audit:
            decision = Engine(policy, audit=audit).evaluate(
                eviction(text="do not touch the UTC rule")
            )
        (rule,) = [r for r in decision.reasons if r.code == "rule:watch"]
        assert rule.message == "quoting do not touch the UTC rule"
        (logged,) = [r for r in records(log_path)[-1]["reasons"] if r["code"] == "rule:watch"]
        assert (
            logged["message"]
            == "rule 'watch' matched (its message reads text, which is not logged)"
        )
        assert "UTC rule" not in log_path.read_text()

    def test_text_found_in_a_rule_message_is_replaced(self, log_path: Path) -> None:
        """A message that reads no text but happens to spell it loses it in the log."""
        policy = parse_policy(
            RULES_POLICY.format(
                message='message_expression: \'"found " + params.word + " in " + segment.id\''
            ),
            "params.yaml",
        )
        with AuditLog(log_path) as audit:
            engine = Engine(policy, audit=audit)
            engine.evaluate(eviction(text="do not touch"))
            engine.evaluate(eviction(text="other"))
        first, second = (
            next(r["message"] for r in record["reasons"] if r["code"] == "rule:watch")
            for record in records(log_path)[1:]
        )
        assert first == "found [text] in s41"
        assert second == "found do not touch in s41"

    def test_default_masks_erase_text_from_logged_inputs(self, log_path: Path) -> None:
        """inputs=True logs the document without segment and span text, listing what it erased."""
        with AuditLog(log_path, inputs=True) as audit:
            engine = Engine.default(audit=audit)
            engine.evaluate(eviction(text="secret"))
            engine.evaluate(staleness("one", "two"))
        first, second = records(log_path)[1:]
        assert first["input_erased"] == ["/segment/text"]
        assert "text" not in first["input"]["segment"]
        assert first["input"]["segment"]["id"] == "s41"
        assert second["input_erased"] == ["/spans/0/text", "/spans/1/text"]
        assert "secret" not in log_path.read_text()

    @pytest.mark.parametrize(
        ("masks", "erased"),
        [
            ([], []),
            (["/segment/text", "/eviction_candidates"], ["/eviction_candidates", "/segment/text"]),
            (
                ["/segment/*"],
                ["/segment/id", "/segment/kind", "/segment/text", "/segment/tombstone_written"],
            ),
            (["/eviction_candidates/0"], ["/eviction_candidates/0"]),
            (["/no/such/path"], []),
        ],
    )
    def test_explicit_masks(self, masks: list[str], erased: list[str], log_path: Path) -> None:
        """Explicit JSON-pointer masks erase exactly what they point at (none: a replayable log)."""
        document = eviction(text="kept verbatim")
        with AuditLog(log_path, inputs=masks) as audit:
            Engine.default(audit=audit).evaluate(document)
        record = records(log_path)[-1]
        assert record["input_erased"] == erased
        if not masks:
            assert record["input"] == document

    def test_masks_must_be_pointers(self) -> None:
        """A mask that is not a JSON pointer is a configuration error."""
        with pytest.raises(AuditError, match="not a JSON pointer"):
            AuditLog(io.StringIO(), inputs=["segment/text"])
        with pytest.raises(AuditError, match="list of JSON pointers"):
            AuditLog(io.StringIO(), inputs="/segment/text")


class TestFailClosed:
    @pytest.mark.parametrize("where", ["file-as-dir", "directory", "dev-full"])
    def test_required_log_that_cannot_be_written_refuses(self, where: str, tmp_path: Path) -> None:
        """An allow that cannot be logged becomes a deny with audit_unavailable."""
        blocker = tmp_path / "plain-file"
        blocker.write_text("")
        target = {
            "file-as-dir": blocker / "audit.jsonl",
            "directory": tmp_path,
            "dev-full": Path("/dev/full"),
        }[where]
        if where == "dev-full" and not target.exists():
            pytest.skip("no /dev/full on this system")
        engine = Engine.default(audit=AuditLog(target))
        decision = engine.evaluate(eviction())
        assert (decision.outcome, decision.enforced) == ("deny", True)
        assert decision.codes == ("audit_unavailable",)
        assert decision.reasons[0].detail["error"] == "AuditError"

    def test_optional_log_failure_keeps_the_decision_and_reports(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """With required=False the decision stands and the failure goes to the diagnostics
        logger (logging "prunewarden")."""
        engine = Engine.default(audit=AuditLog(tmp_path, required=False))
        with caplog.at_level("WARNING", logger="prunewarden"):
            decision = engine.evaluate(eviction())
        assert decision.codes == ("authorized",)
        (event,) = caplog.records
        assert (event.name, event.levelname) == ("prunewarden", "WARNING")
        assert event.getMessage().startswith("audit_write_failed")
        assert decision.decision_id in event.getMessage()

    def test_a_closed_stream_refuses(self) -> None:
        """A stream sink that can no longer be written refuses like a file."""
        stream = io.StringIO()
        engine = Engine.default(audit=AuditLog(stream))
        stream.close()
        assert engine.evaluate(eviction()).codes == ("audit_unavailable",)

    def test_a_policy_the_sink_does_not_know_refuses(self) -> None:
        """A record whose policy was never added cannot be written: the decision refuses."""
        audit = AuditLog(io.StringIO())
        engine = Engine.default(audit=audit)
        audit._policies.clear()
        assert engine.evaluate(eviction()).codes == ("audit_unavailable",)

    @pytest.mark.parametrize("fsync", ["sometimes", ""])
    def test_bad_settings_are_refused(self, fsync: Any) -> None:
        """Unknown fsync modes and non-positive sizes are configuration errors."""
        with pytest.raises(AuditError, match="fsync must be one of"):
            AuditLog(io.StringIO(), fsync=fsync)
        with pytest.raises(AuditError, match="max_bytes must be positive"):
            AuditLog(io.StringIO(), max_bytes=0)

    def test_keyed_mode_needs_its_key(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """hmac_key_env naming an unset variable is a configuration error."""
        monkeypatch.delenv("PW_TEST_KEY", raising=False)
        with pytest.raises(AuditError, match="PW_TEST_KEY is not set"):
            AuditLog(io.StringIO(), hmac_key_env="PW_TEST_KEY")


class TestStructlog:
    def test_without_a_sink_nothing_is_logged(self) -> None:
        """No audit sink and no logger: the structlog configuration receives nothing."""
        with structlog.testing.capture_logs() as logged:
            Engine.default().evaluate(eviction(), session_id="s")
        assert logged == []

    def test_a_structlog_logger_passed_in_receives_the_records(self) -> None:
        """logger=structlog.get_logger(): the application's structlog configuration receives
        the same fields as an audit record, without the chain."""
        engine = Engine.default(logger=structlog.get_logger())
        with structlog.testing.capture_logs() as logged:
            decision = engine.evaluate(eviction(), session_id="s")
        (event,) = logged
        assert event["event"] == "decision"
        assert event["decision_id"] == decision.decision_id
        assert event["policy"]["name"] == "default"
        assert event["session_id"] == "s"
        assert "hash" not in event

    def test_the_sink_is_a_structlog_logger(self) -> None:
        """AuditLog.logger is a structlog logger whose event name becomes the record kind."""
        stream = io.StringIO()
        audit = AuditLog(stream)
        audit.logger.info("policy_reload_failed", error={"path": "p", "problems": []}, policy=None)
        (record,) = [json.loads(line) for line in stream.getvalue().splitlines()]
        assert record["kind"] == "policy_reload_failed"
        assert record["prev_hash"] == "sha256:" + "0" * 64


WITHOUT_FCNTL = """
import io, json, sys
sys.modules["fcntl"] = None  # as on Windows: import fcntl raises ImportError
sys.modules["resource"] = None  # POSIX only too
import prunewarden
from prunewarden import AuditError, AuditLog, Engine
document = json.loads(sys.argv[2])
stream = io.StringIO()
with AuditLog(stream) as audit:
    streamed = Engine.default(audit=audit).evaluate(document)
try:
    AuditLog(sys.argv[1]).open()
    opened = "opened"
except AuditError as exc:
    opened = str(exc)
with AuditLog(sys.argv[1]) as audit:
    refused = Engine.default(audit=audit).evaluate(document)
print(json.dumps({
    "streamed": [streamed.outcome, len(stream.getvalue().splitlines())],
    "opened": opened,
    "refused": [refused.outcome, list(refused.codes)],
}))
"""


@pytest.mark.spawns
class TestWithoutFileLocks:
    def test_stream_sink_works_and_file_sink_refuses_clearly(self, tmp_path: Path) -> None:
        """Where fcntl and resource are missing (Windows), prunewarden imports and logs to a
        stream (rule budgets on time.thread_time); a file sink alone refuses, saying why, and a
        decision it cannot log is refused (fail closed)."""
        log = tmp_path / "audit.jsonl"
        document = json.dumps(eviction())
        run = subprocess.run(
            [sys.executable, "-c", WITHOUT_FCNTL, str(log), document],
            capture_output=True,
            text=True,
            check=False,
        )
        assert (run.returncode, run.stderr) == (0, "")
        result = json.loads(run.stdout)
        assert result["streamed"] == ["allow", 2]  # the activation, then the decision
        assert result["opened"] == (
            f"cannot write audit log {log}: the audit log file sink needs POSIX file locks "
            "(fcntl), which this platform lacks; log to a stream instead (AuditLog(stream), or "
            "--audit-log - on the command line)"
        )
        assert result["refused"] == ["deny", ["audit_unavailable"]]
        assert not log.exists()
