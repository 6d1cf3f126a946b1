"""A ReloadingEngine on a signed bundle served over HTTP on loopback: new revisions swapped in
whole, every fault keeping the last good bundle, said once, and no decision mixed."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.bundles import (
    Bundles,
    BundleServer,
    bundle_server,
    make_bundles,
    prod,
    signed_bundle,
)
from jsonschema import Draft202012Validator
from prunewarden import AuditLog, ReloadingEngine
from prunewarden._resources import schema
from prunewarden.errors import BundleError

ROOT = Path(__file__).resolve().parent.parent
EVICTION = json.loads((ROOT / "examples" / "inputs" / "eviction-healthy.json").read_text())
RECORD = Draft202012Validator(schema("audit-record"))
DECISION = Draft202012Validator(schema("decision"))


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Bundles:
    return make_bundles(tmp_path_factory.mktemp("bundles"))


@pytest.fixture
def served(bundles: Bundles) -> Iterator[BundleServer]:
    with bundle_server() as server:
        server.serve(bundles.r1)
        yield server


@pytest.fixture
def stream() -> io.StringIO:
    return io.StringIO()


@pytest.fixture
def engine(
    served: BundleServer, bundles: Bundles, stream: io.StringIO
) -> Iterator[ReloadingEngine]:
    with (
        AuditLog(stream) as audit,
        ReloadingEngine(
            bundle=served.url, bundle_key=bundles.keys.public_pem, interval=0, audit=audit
        ) as reloading,
    ):
        yield reloading


def records(stream: io.StringIO, kind: str | None = None) -> list[dict[str, Any]]:
    found = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [r for r in found if kind is None or r["kind"] == kind]


class TestBundleReload:
    def test_decisions_and_records_name_the_bundle_revision(
        self, engine: ReloadingEngine, stream: io.StringIO
    ) -> None:
        """A decision under a bundle names its revision (policy.bundle_revision) and the
        files as bundle:REVISION/PATH; decision and records are schema-valid."""
        decision = engine.evaluate(EVICTION)
        assert decision.outcome == "allow"
        document = decision.to_dict()
        assert document["policy"]["bundle_revision"] == "r1"
        assert list(DECISION.iter_errors(document)) == []
        activated, logged = records(stream)
        assert activated["policy"]["bundle_revision"] == "r1"
        assert logged["policy"]["bundle_revision"] == "r1"
        assert logged["policy"]["sources"][0]["path"] == "bundle:r1/prod.yaml"
        for record in (activated, logged):
            assert list(RECORD.iter_errors(record)) == []
        assert engine.bundle == engine.path

    def test_a_new_revision_is_swapped_in(
        self, engine: ReloadingEngine, served: BundleServer, bundles: Bundles
    ) -> None:
        """Once r2 is served, a reload activates it and the decisions follow it."""
        served.serve(bundles.r2)
        result = engine.reload()
        assert (result.changed, result.policy.bundle_revision) == (True, "r2")
        decision = engine.evaluate(EVICTION)
        assert (decision.outcome, decision.policy.version) == ("deny", "1.1.0")
        assert decision.policy.bundle_revision == "r2"

    def test_an_unchanged_bundle_is_asked_for_with_its_etag(
        self, engine: ReloadingEngine, served: BundleServer
    ) -> None:
        """A poll sends If-None-Match with the ETag in force; a 304 changes nothing."""
        assert engine.poll() is None
        assert served.requests[-1] == (served.etag, 304)
        assert engine.status().last_reload is None

    def test_without_etags_the_same_bytes_change_nothing(
        self, engine: ReloadingEngine, served: BundleServer, bundles: Bundles
    ) -> None:
        """A server sending no ETag serves the whole bundle each time: the same bytes are not
        swapped in again, new bytes are."""
        served.etags = False
        before = engine.engine
        assert engine.poll() is None
        assert served.requests[-1] == (None, 200)
        assert engine.engine is before
        served.serve(bundles.r2)
        result = engine.poll()
        assert result is not None
        assert result.policy.bundle_revision == "r2"

    def test_the_first_bundle_must_verify(self, served: BundleServer, bundles: Bundles) -> None:
        """An engine cannot start on a bundle signed by another key: BundleError."""
        with pytest.raises(BundleError) as caught:
            ReloadingEngine(bundle=served.url, bundle_key=bundles.other.public_pem, interval=0)
        assert caught.value.problems[0].message.startswith("not signed by the key")

    def test_a_path_is_a_bundle_too(self, tmp_path: Path, bundles: Bundles) -> None:
        """A bundle file is read again at each poll and swapped in when its bytes change."""
        path = tmp_path / "bundle.tar.gz"
        path.write_bytes(bundles.r1)
        with ReloadingEngine(bundle=str(path), bundle_key=bundles.keys.public_pem, interval=0) as e:
            assert e.poll() is None
            path.write_bytes(bundles.r2)
            result = e.poll()
            assert result is not None
            assert (result.changed, result.policy.bundle_revision) == (True, "r2")


def wrong_key(bundles: Bundles, folder: Path) -> bytes:
    return signed_bundle(folder, prod(0.01, "1.1.0"), "r2", bundles.other)


FAULTS = ["500", "partial download", "truncated bundle", "wrong key", "unreachable"]
EXPECTED = {
    "500": "HTTP 500",
    "partial download": "the download ended early",
    "truncated bundle": "not a complete gzip archive",
    "wrong key": "not signed by the key",
    "unreachable": "cannot fetch",
}


def inject(fault: str, served: BundleServer, bundles: Bundles, folder: Path) -> None:
    if fault == "500":
        served.serve(bundles.r2, "500")
    elif fault == "partial download":
        served.serve(bundles.r2, "partial")
    elif fault == "truncated bundle":
        served.serve(bundles.r2[: len(bundles.r2) // 2])
    elif fault == "wrong key":
        served.serve(wrong_key(bundles, folder))
    else:
        served.stop()


class TestFaults:
    @pytest.mark.parametrize("fault", FAULTS)
    def test_a_fault_keeps_the_last_good_bundle_and_is_said_once(
        self,
        fault: str,
        *,
        engine: ReloadingEngine,
        served: BundleServer,
        bundles: Bundles,
        stream: io.StringIO,
        tmp_path: Path,
    ) -> None:
        """Whatever fails, r1 keeps deciding; one policy_reload_failed record names the
        bundle, the problem and r1, however often the fault is seen; status() says so."""
        before = engine.engine
        inject(fault, served, bundles, tmp_path)
        for _ in range(3):
            result = engine.reload()
            assert not result.changed
            assert EXPECTED[fault] in result.problems[0]
        assert engine.engine is before
        decision = engine.evaluate(EVICTION)
        assert (decision.outcome, decision.policy.bundle_revision) == ("allow", "r1")
        (failed,) = records(stream, "policy_reload_failed")
        assert failed["error"]["path"] == served.url
        assert EXPECTED[fault] in failed["error"]["problems"][0]
        assert failed["policy"]["bundle_revision"] == "r1"
        assert list(RECORD.iter_errors(failed)) == []
        status = engine.status()
        assert (status.healthy, status.last_reload) == (False, "failed")
        assert status.policy.bundle_revision == "r1"

    @pytest.mark.parametrize("fault", ["500", "partial download", "wrong key"])
    def test_a_good_bundle_after_a_fault_is_activated(
        self,
        fault: str,
        engine: ReloadingEngine,
        served: BundleServer,
        bundles: Bundles,
        tmp_path: Path,
    ) -> None:
        """Once the server serves a good bundle again, it is verified and swapped in."""
        inject(fault, served, bundles, tmp_path)
        assert engine.reload().problems
        served.serve(bundles.r2)
        result = engine.reload()
        assert (result.changed, result.problems) == (True, ())
        assert engine.status().healthy
        assert engine.evaluate(EVICTION).policy.bundle_revision == "r2"

    def test_back_to_the_bundle_in_force_is_healthy_again(
        self, engine: ReloadingEngine, served: BundleServer, bundles: Bundles
    ) -> None:
        """A 500 and then the same bundle again (304): the status is healthy, nothing swapped."""
        before = engine.engine
        served.serve(bundles.r1, "500")
        assert engine.poll() is not None
        served.serve(bundles.r1)
        result = engine.poll()
        assert result is not None
        assert (result.changed, result.problems) == (False, ())
        assert engine.status().healthy
        assert engine.engine is before

    # One round of swaps in make test; the soak of 4 rounds is slow (make fuzz).
    @pytest.mark.parametrize("rounds", [1, pytest.param(4, marks=pytest.mark.slow)])
    def test_no_decision_is_mixed_between_revisions(
        self, rounds: int, *, engine: ReloadingEngine, served: BundleServer, bundles: Bundles
    ) -> None:
        """Decisions made while revisions and faults alternate each match one revision whole:
        r1 allows at 1.0.0, r2 denies at 1.1.0."""
        seen: set[tuple[str, str, str | None]] = set()
        done = threading.Event()

        def decide() -> None:
            while not done.is_set():
                decision = engine.evaluate(EVICTION)
                policy = decision.policy
                seen.add((decision.outcome, policy.version, policy.bundle_revision))

        worker = threading.Thread(target=decide)
        worker.start()
        try:
            swaps = [(bundles.r2, None), (bundles.r1, "500"), (bundles.r1, None)]
            for body, fault in swaps * rounds:
                served.serve(body, fault)  # type: ignore[arg-type]
                engine.reload()
        finally:
            done.set()
            worker.join()
        assert seen <= {("allow", "1.0.0", "r1"), ("deny", "1.1.0", "r2")}
        assert seen
