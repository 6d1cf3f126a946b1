"""Hot reload: whole snapshots swapped in, bad changes kept out, decisions never mixed."""

from __future__ import annotations

import io
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from jsonschema import Draft202012Validator
from prunewarden import AuditLog, Decision, ReloadingEngine, parse_policy
from prunewarden import reload as reload_module
from prunewarden._resources import schema
from prunewarden.policy import _overlay as overlay_module

ROOT = Path(__file__).resolve().parent.parent
EVICTION = json.loads((ROOT / "examples" / "inputs" / "eviction-healthy.json").read_text())
RECORD = Draft202012Validator(schema("audit-record"))

BASE = """\
apiVersion: prunewarden/v1
kind: Policy
metadata: {name: base, version: 1.0.0}
spec:
  collapse: {canary_margin: 0.25}
  validators:
    - name: floor-band
      expression: spec.collapse.spread_floor <= 0.15
      message: the spread floor stays at or below 0.15
"""


def prod(stability_delta: float, *, version: str = "1.0.0", extra: str = "") -> str:
    return (
        "apiVersion: prunewarden/v1\nkind: Policy\nextends: base.yaml\n"
        f"metadata: {{name: prod, version: {version}}}\n"
        f"spec:\n  eviction: {{stability_delta: {stability_delta}}}\n{extra}"
    )


# Two valid versions that decide the example eviction differently (its score moved by 0.02),
# and changes that must never be swapped in.
VERSION_A = prod(0.25)  # allow: authorized
VERSION_B = prod(0.01, version="1.1.0")  # deny: unstable_score
INVALID = {
    "broken YAML": "apiVersion: prunewarden/v1\nkind: [Policy\n",
    "schema": prod(2.0, version="1.2.0"),
    "guardrail": prod(0.2, version="1.3.0", extra="  collapse: {spread_floor: 0.5}\n"),
    "unknown base": VERSION_A.replace("base.yaml", "missing.yaml"),
}


def replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` the safe way: a temporary file renamed over it."""
    temporary = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
    temporary.write_text(text)
    temporary.replace(path)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    replace(tmp_path / "base.yaml", BASE)
    replace(tmp_path / "prod.yaml", VERSION_A)
    return tmp_path / "prod.yaml"


def digest_of(path: Path, text: str) -> str:
    return parse_policy(text, str(path)).digest


def events(logger: Any, name: str) -> list[dict[str, Any]]:
    return [call.kwargs for call in list(logger.calls) if call.args and call.args[0] == name]


@pytest.fixture
def logger() -> Any:
    return structlog.testing.CapturingLogger()


@pytest.fixture
def engine(files: Path, logger: Any) -> Iterator[ReloadingEngine]:
    with ReloadingEngine(files, interval=0, logger=logger) as reloading:
        yield reloading


class TestReload:
    def test_a_valid_change_swaps_in(
        self, files: Path, engine: ReloadingEngine, logger: Any
    ) -> None:
        """reload() loads the new version; decisions from then on name it and follow it."""
        assert engine.evaluate(EVICTION).outcome == "allow"
        replace(files, VERSION_B)
        result = engine.reload()
        assert result.changed
        assert result.policy.digest == digest_of(files, VERSION_B)
        decision = engine.evaluate(EVICTION)
        assert (decision.outcome, decision.policy.version) == ("deny", "1.1.0")
        (reloaded,) = events(logger, "policy_reloaded")
        assert reloaded["previous"]["version"] == "1.0.0"
        assert reloaded["policy"]["version"] == "1.1.0"

    @pytest.mark.parametrize("kind", INVALID)
    def test_an_invalid_change_keeps_the_last_good_policy(
        self, files: Path, engine: ReloadingEngine, logger: Any, kind: str
    ) -> None:
        """The old version keeps deciding; policy_reload_failed names every problem and the
        policy still in force."""
        before = engine.engine
        replace(files, INVALID[kind])
        result = engine.reload()
        assert not result.changed
        assert result.problems
        assert engine.engine is before
        assert engine.evaluate(EVICTION).policy.digest == before.policy.digest
        (failed,) = events(logger, "policy_reload_failed")
        assert failed["error"] == {"path": str(files), "problems": list(result.problems)}
        assert failed["policy"]["digest"] == before.policy.digest

    def test_a_failure_is_logged_once_per_content(
        self, files: Path, engine: ReloadingEngine, logger: Any
    ) -> None:
        """Looking again at the same bad files logs nothing new; new bad content logs again."""
        replace(files, INVALID["schema"])
        engine.reload()
        engine.reload()
        assert len(events(logger, "policy_reload_failed")) == 1
        replace(files, INVALID["guardrail"])
        engine.reload()
        assert len(events(logger, "policy_reload_failed")) == 2

    def test_unchanged_bytes_swap_nothing(self, files: Path, engine: ReloadingEngine) -> None:
        """A touched file with the same bytes keeps the snapshot in force."""
        before = engine.engine
        os.utime(files, ns=(time.time_ns(), time.time_ns() + 10**9))
        assert not engine.reload().changed
        assert engine.engine is before

    def test_a_comment_swaps_in_new_sources_under_the_same_digest(
        self, files: Path, engine: ReloadingEngine
    ) -> None:
        """Decisions name the files' hashes, so a new file version is swapped in even when the
        content digest is the same."""
        before = engine.policy
        replace(files, "# reviewed\n" + VERSION_A)
        assert engine.reload().changed
        assert engine.policy.digest == before.digest
        assert engine.policy.sources[0].sha256 != before.sources[0].sha256

    def test_a_change_to_the_base_reloads_the_overlay(
        self, files: Path, engine: ReloadingEngine
    ) -> None:
        """Every file of the chain is watched, not only the top one: a changed base changes the
        overlay's content, which reloads once the overlay's version says so."""
        replace(
            files.parent / "base.yaml", BASE.replace("canary_margin: 0.25", "canary_margin: 0.2")
        )
        assert engine.poll() is None  # seen, settling
        result = engine.poll()
        assert result is not None
        assert not result.changed
        assert "prod@1.0.0 is in force with another content" in result.problems[0]
        replace(files, prod(0.25, version="1.0.1"))
        assert engine.reload().changed
        assert engine.policy.spec.collapse.canary_margin == 0.2

    def test_a_lock_file_that_appears_is_enforced(
        self, files: Path, engine: ReloadingEngine
    ) -> None:
        """policy.lock next to the policy applies as soon as it exists: a reused version is
        refused and the policy in force stays."""
        replace(files, VERSION_A.replace("0.25", "0.2"))  # new content, same version 1.0.0
        (files.parent / "policy.lock").write_text(
            "lockVersion: 1\ndigestVersion: 2\n"
            f"policies:\n  prod@1.0.0: {digest_of(files, VERSION_A)}\n"
        )
        result = engine.reload()
        assert not result.changed
        assert "version 1.0.0 reused for different content: bump the version" in result.problems[0]

    def test_a_shadow_policy_reloads_too(self, files: Path, logger: Any) -> None:
        """The candidate is watched like the active policy and swapped with it."""
        candidate = files.parent / "candidate.yaml"
        replace(candidate, VERSION_B.replace("name: prod", "name: candidate"))
        with ReloadingEngine(files, shadow=candidate, interval=0, logger=logger) as engine:
            shadow = engine.evaluate(EVICTION).shadow
            assert shadow is not None
            assert shadow.outcome == "deny"
            replace(candidate, VERSION_A.replace("name: prod", "name: candidate"))
            assert engine.reload().changed
            shadow = engine.evaluate(EVICTION).shadow
            assert shadow is not None
            assert shadow.outcome == "allow"


class TestSessionsAndPlans:
    def test_a_session_follows_a_reload(self, files: Path, engine: ReloadingEngine) -> None:
        """A session started before a reload decides under the new snapshot after it, as a
        session started after the reload does."""
        before = engine.session("run-1")
        replace(files, VERSION_B)
        assert engine.reload().changed
        after = engine.session("run-2")
        segment, score, perturbed = (
            EVICTION["segment"],
            EVICTION["score"],
            EVICTION["perturbed_score"],
        )
        old = before.authorize(segment, score, perturbed, EVICTION["eviction_candidates"])
        new = after.authorize(segment, score, perturbed, EVICTION["eviction_candidates"])
        assert (old.outcome, old.policy.version) == ("deny", "1.1.0")
        assert (new.outcome, new.policy.version) == ("deny", "1.1.0")

    def test_a_plan_is_decided_under_one_snapshot(
        self, files: Path, engine: ReloadingEngine
    ) -> None:
        """Every decision of one pruning pass names the same policy version."""
        window = json.loads((ROOT / "examples" / "windows" / "free-30k-tokens.json").read_text())
        first = engine.plan(window)
        replace(files, VERSION_B)
        engine.reload()
        second = engine.plan(window)
        assert {d.policy.version for d in first.decisions} == {"1.0.0"}
        assert {d.policy.version for d in second.decisions} == {"1.1.0"}


class TestReadingSafely:
    def test_files_replaced_while_the_chain_is_read_never_mix(
        self, files: Path, engine: ReloadingEngine, logger: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A deploy replacing both files between the reads of the overlay and its base would
        give a policy that never existed; it is discarded and the new pair is read again."""
        new_base = BASE.replace("canary_margin: 0.25", "canary_margin: 0.2")
        read = overlay_module._read_bytes
        deployed: list[bool] = []

        def deploy_while_reading(path: Path) -> bytes:
            if path.name == "base.yaml" and not deployed:
                deployed.append(True)
                replace(files.parent / "base.yaml", new_base)
                replace(files, VERSION_B)
            return read(path)

        monkeypatch.setattr(overlay_module, "_read_bytes", deploy_while_reading)
        replace(files, VERSION_A + "# touched to start a reload\n")
        result = engine.reload()
        assert deployed
        assert result.changed
        expected = parse_policy(VERSION_B, str(files))
        assert engine.policy.digest == expected.digest
        assert engine.policy.spec.collapse.canary_margin == 0.2
        swapped = [e["policy"]["digest"] for e in events(logger, "policy_reloaded")]
        assert swapped == [expected.digest]  # the mix of old overlay and new base never was

    def test_a_new_base_changed_right_after_it_was_read_is_read_again(
        self, files: Path, engine: ReloadingEngine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A file the chain did not have before is not watched yet; its bytes are checked after
        the load, so the reload ends on what is on disk."""
        other = files.parent / "other.yaml"
        replace(other, BASE.replace("name: base", "name: other"))
        newer = BASE.replace("name: base", "name: other").replace("0.25", "0.2")
        read = overlay_module._read_bytes

        def change_after_reading(path: Path) -> bytes:
            data = read(path)
            if path.name == "other.yaml" and b"0.25" in data:
                replace(other, newer)
            return data

        monkeypatch.setattr(overlay_module, "_read_bytes", change_after_reading)
        replace(files, VERSION_B.replace("base.yaml", "other.yaml"))
        assert engine.reload().changed
        assert engine.policy.spec.collapse.canary_margin == 0.2
        assert engine.policy.sources[1].path == str(other)

    def test_a_file_removed_while_read_keeps_the_policy(
        self, files: Path, engine: ReloadingEngine, logger: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """No crash, no half-load: the policy in force stays and the failure is reported."""
        read = overlay_module._read_bytes

        def vanish(path: Path) -> bytes:
            if path.name == "base.yaml":
                path.unlink(missing_ok=True)
            return read(path)

        monkeypatch.setattr(overlay_module, "_read_bytes", vanish)
        before = engine.engine
        replace(files, VERSION_B)
        result = engine.reload()
        assert not result.changed
        assert "cannot read" in result.problems[0]
        assert engine.engine is before
        assert len(events(logger, "policy_reload_failed")) == 1

    def test_the_watcher_waits_for_a_write_in_place_to_settle(
        self, files: Path, engine: ReloadingEngine
    ) -> None:
        """A file written in place in two steps is not loaded from its first half, even when
        that half is a valid policy of its own."""
        half = VERSION_B.split("spec:")[0]  # the overlay with no spec: valid, and different
        assert parse_policy(half, str(files)).digest not in {
            digest_of(files, VERSION_A),
            digest_of(files, VERSION_B),
        }
        files.write_text(half)  # in place: same file, first write
        assert engine.poll() is None
        with files.open("a") as stream:
            stream.write(VERSION_B.removeprefix(half))
        assert engine.poll() is None  # changed again since the last look
        result = engine.poll()
        assert result is not None
        assert result.changed
        assert engine.policy.digest == digest_of(files, VERSION_B)
        assert engine.poll() is None  # nothing left to do

    def test_the_background_thread_reloads_and_stops(self, files: Path, logger: Any) -> None:
        """With an interval the engine follows its files by itself until closed."""
        target = digest_of(files, VERSION_B)
        with ReloadingEngine(files, interval=0.005, logger=logger) as engine:
            replace(files, VERSION_B)
            deadline = time.monotonic() + 10
            while engine.policy.digest != target and time.monotonic() < deadline:
                time.sleep(0.005)
            assert engine.policy.digest == target
        replace(files, VERSION_A)
        time.sleep(0.05)
        assert engine.policy.digest == target  # closed: no longer watching


class TestConcurrency:
    def test_decisions_under_concurrent_reloads_are_never_lost_or_mixed(
        self, files: Path, logger: Any
    ) -> None:
        """Threads evaluate while the files are replaced with valid and invalid versions (the
        background watcher and explicit reloads racing): every decision names a valid version
        and is exactly what that version decides, and every decision is logged once."""
        expected = {
            digest_of(files, VERSION_A): ("allow", ("authorized",)),
            digest_of(files, VERSION_B): ("deny", ("unstable_score",)),
        }
        script = [VERSION_B, *INVALID.values(), VERSION_A, INVALID["guardrail"], VERSION_B]
        stop = threading.Event()
        made: list[list[Decision]] = [[] for _ in range(4)]
        failures: list[BaseException] = []

        def hammer(found: list[Decision]) -> None:
            try:
                while not stop.is_set():
                    found.append(reloading.evaluate(EVICTION))
                    time.sleep(0.0002)  # leave the writer and the watcher some of the GIL
            except BaseException as exc:  # noqa: BLE001 - reported by the test below
                failures.append(exc)

        with ReloadingEngine(files, interval=0.001, logger=logger) as reloading:
            threads = [threading.Thread(target=hammer, args=(found,)) for found in made]
            for thread in threads:
                thread.start()
            for _ in range(4):
                for text in script:
                    replace(files, text)
                    reloading.reload()
                    time.sleep(0.002)
            replace(files, VERSION_A)
            reloading.reload()
            stop.set()
            for thread in threads:
                thread.join()
        assert failures == []
        decisions = [d for found in made for d in found]
        assert len(decisions) > 100
        for decision in decisions:
            assert (decision.outcome, decision.codes) == expected[decision.policy.digest]
        assert {d.policy.digest for d in decisions} == set(expected)
        logged = {e["decision_id"]: e["policy"]["digest"] for e in events(logger, "decision")}
        assert logged == {d.decision_id: d.policy.digest for d in decisions}
        swapped = {e["policy"]["digest"] for e in events(logger, "policy_reloaded")}
        assert swapped <= set(expected)
        kept = {e["policy"]["digest"] for e in events(logger, "policy_reload_failed")}
        assert kept
        assert kept <= set(expected)
        assert reloading.policy.digest == digest_of(files, VERSION_A)


class TestAuditRecords:
    def test_reload_records_go_to_the_audit_log(self, files: Path, logger: Any) -> None:
        """With an audit log, a failed reload is a policy_reload_failed record and the new
        policy is activated before its first decision; every record is schema-valid."""
        stream = io.StringIO()
        with (
            AuditLog(stream) as audit,
            ReloadingEngine(files, interval=0, logger=logger, audit=audit) as engine,
        ):
            engine.evaluate(EVICTION)
            replace(files, INVALID["guardrail"])
            engine.reload()
            replace(files, VERSION_B)
            engine.reload()
            engine.evaluate(EVICTION)
        records = [json.loads(line) for line in stream.getvalue().splitlines()]
        for record in records:
            assert list(RECORD.iter_errors(record)) == []
        assert [r["kind"] for r in records] == [
            "policy_activated",
            "decision",
            "policy_reload_failed",
            "policy_activated",
            "decision",
        ]
        failed = records[2]
        assert failed["error"]["path"] == str(files)
        assert "refused by validator 'floor-band'" in failed["error"]["problems"][0]
        assert failed["policy"]["digest"] == records[1]["policy"]["digest"]
        assert records[4]["policy"]["version"] == "1.1.0"


class TestHostileFiles:
    def test_a_policy_python_cannot_read_is_a_result_not_an_exception(
        self, files: Path, engine: ReloadingEngine
    ) -> None:
        """An integer too long to read, or a lone surrogate, is reported, never raised."""
        for extra in ("  params: {n: " + "9" * 5000 + "}\n", '  params: {s: "\\ud800"}\n'):
            replace(files, prod(0.25, version="9.0.0", extra=extra))
            result = engine.reload()
            assert not result.changed
            assert result.problems
        assert engine.policy.version == "1.0.0"

    def test_any_failure_of_a_load_is_a_result(
        self, files: Path, engine: ReloadingEngine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Whatever a load raises, reload() returns with the last good policy in force."""

        def broken(*args: object, **kwargs: object) -> None:
            msg = "unexpected"
            raise RuntimeError(msg)

        monkeypatch.setattr(reload_module, "load_policy", broken)
        replace(files, VERSION_B)
        result = engine.reload()
        assert (result.changed, result.policy.version) == (False, "1.0.0")
        assert result.problems == (f"{files}: $: the policy could not be loaded (RuntimeError)",)

    def test_a_touched_bad_file_is_reported_once(
        self, files: Path, engine: ReloadingEngine, logger: Any
    ) -> None:
        """The same bad content seen again under a new modification time logs nothing new."""
        replace(files, INVALID["schema"])
        engine.reload()
        for step in range(1, 4):
            os.utime(files, ns=(time.time_ns(), time.time_ns() + step * 10**9))
            engine.reload()
        assert len(events(logger, "policy_reload_failed")) == 1

    def test_the_poller_reports_a_bad_content_once(
        self, files: Path, engine: ReloadingEngine, logger: Any
    ) -> None:
        """Polling bad files again and again logs one policy_reload_failed."""
        replace(files, prod(0.25, version="9.0.0", extra="  params: {n: " + "9" * 5000 + "}\n"))
        for _ in range(6):
            engine.poll()
        assert len(events(logger, "policy_reload_failed")) == 1

    def test_new_content_under_the_version_in_force_is_refused(
        self, files: Path, engine: ReloadingEngine, logger: Any
    ) -> None:
        """A write read half-done (a rule dropped, the version unchanged) is not swapped in."""
        before = engine.policy
        replace(files, prod(0.01))  # another content, still prod@1.0.0
        result = engine.reload()
        assert not result.changed
        assert "prod@1.0.0 is in force with another content" in result.problems[0]
        assert engine.policy is before
        (failed,) = events(logger, "policy_reload_failed")
        assert failed["policy"]["digest"] == before.digest
