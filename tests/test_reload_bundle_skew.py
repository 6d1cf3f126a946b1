"""Clock skew between a fleet and its bundles: a bundle built "in the future" or "in the past",
a bundle server whose Date header is years off, one that reuses an ETag for new bytes. Time
orders nothing: the bundle served and verified is the one activated (or, for a 304, the one
kept), and no decision is lost or made half under one revision."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _support.bundles import BASE, BundleServer, bundle_server, prod
from prunewarden import AuditLog, ReloadingEngine
from prunewarden.bundle import BundleRules, build_bundle, generate_key_pair, sign_bundle
from prunewarden.decision import Decision

ROOT = Path(__file__).resolve().parent.parent
EVICTION = json.loads((ROOT / "examples" / "inputs" / "eviction-healthy.json").read_text())
REUSED = '"5f3a-1b2"'  # an mtime-size ETag, as a file server makes, repeated across a clock step


class Skewed:
    """r1 (prod@1.0.0, allows) built now; future (prod@1.1.0, denies) built in 2099; past
    (prod@1.2.0, allows) built in 1999, after both. Their sequences are given (1, 2, 3): the
    build time is not what orders them."""

    def __init__(self, folder: Path) -> None:
        self.keys = generate_key_pair()
        self.r1 = self._built(folder, prod(0.25, "1.0.0"), "r1", "2026-12-01T00:00:00Z", 1)
        self.future = self._built(folder, prod(0.01, "1.1.0"), "future", "2099-01-01T00:00:00Z", 2)
        self.past = self._built(folder, prod(0.25, "1.2.0"), "past", "1999-01-01T00:00:00Z", 3)

    def _built(self, folder: Path, text: str, revision: str, built_at: str, sequence: int) -> bytes:
        here = folder / revision
        here.mkdir()
        (here / "base.yaml").write_text(BASE, encoding="utf-8")
        (here / "prod.yaml").write_text(text, encoding="utf-8")
        built = build_bundle(
            [here / "prod.yaml"],
            revision=revision,
            lock=False,
            built_at=built_at,
            sequence=sequence,
        )
        return sign_bundle(built, self.keys.private_pem)


@pytest.fixture(scope="module")
def skewed(tmp_path_factory: pytest.TempPathFactory) -> Skewed:
    return Skewed(tmp_path_factory.mktemp("skewed"))


@pytest.fixture
def served(skewed: Skewed) -> Iterator[BundleServer]:
    with bundle_server() as server:
        server.serve(skewed.r1)
        yield server


@contextmanager
def engine_on(
    served: BundleServer, skewed: Skewed, stream: io.StringIO
) -> Iterator[ReloadingEngine]:
    """An engine on what ``served`` serves now, logging to ``stream``, reloaded when asked;
    it allows rollbacks (the tests swap bundles back and forth)."""
    with (
        AuditLog(stream) as audit,
        ReloadingEngine(
            bundle=served.url,
            bundle_key=skewed.keys.public_pem,
            bundle_rules=BundleRules(allow_rollback=True),
            interval=0,
            audit=audit,
        ) as engine,
    ):
        yield engine


def revision(engine: ReloadingEngine) -> str | None:
    return engine.evaluate(EVICTION).policy.bundle_revision


class TestBuiltAt:
    def test_a_bundle_built_in_the_future_or_the_past_is_activated(
        self, served: BundleServer, skewed: Skewed
    ) -> None:
        """built_at orders nothing: a bundle built in 2099, then one built in 1999, are each
        activated when served, and the status names the one in force."""
        with engine_on(served, skewed, io.StringIO()) as engine:
            served.serve(skewed.future)
            assert engine.reload().changed
            assert revision(engine) == "future"
            served.serve(skewed.past)
            assert engine.reload().changed
            assert revision(engine) == "past"
            assert engine.status().healthy


class TestServerClock:
    @pytest.mark.parametrize(
        "date", ["Mon, 01 Jan 2001 00:00:00 GMT", "Fri, 01 Jan 2100 00:00:00 GMT", "not a date"]
    )
    def test_a_skewed_date_header_changes_nothing(
        self, served: BundleServer, skewed: Skewed, date: str
    ) -> None:
        """The bundle server's Date is not read: the same bytes stay (304), new ones come."""
        served.date = date
        with engine_on(served, skewed, io.StringIO()) as engine:
            before = engine.engine
            assert engine.poll() is None
            assert served.requests[-1] == (served.etag, 304)
            assert engine.engine is before
            served.serve(skewed.future)
            assert engine.reload().changed
            assert revision(engine) == "future"

    def test_new_bytes_under_a_reused_etag_are_activated(
        self, served: BundleServer, skewed: Skewed
    ) -> None:
        """A server that gives new bytes the old ETag and answers 200 anyway: the bytes
        differ from the bundle in force, so they are verified and activated."""
        served.reused_etag, served.conditional = REUSED, False
        with engine_on(served, skewed, io.StringIO()) as engine:
            served.serve(skewed.future)
            result = engine.reload()
            assert served.requests[-1] == (REUSED, 200)
            assert (result.changed, result.policy.bundle_revision) == (True, "future")

    def test_a_304_for_a_reused_etag_keeps_the_bundle_in_force(
        self, served: BundleServer, skewed: Skewed
    ) -> None:
        """A server answering 304 for an ETag it reused says nothing changed: the bundle in
        force stays, healthy, until the server gives the new bytes a new ETag."""
        served.reused_etag = REUSED
        with engine_on(served, skewed, io.StringIO()) as engine:
            served.serve(skewed.future)
            assert engine.poll() is None
            assert served.requests[-1] == (REUSED, 304)
            assert revision(engine) == "r1"
            assert engine.status().healthy
            served.reused_etag = None
            assert engine.reload().changed
            assert revision(engine) == "future"


class TestNothingLostOrMixed:
    # One round of swaps in make test; the soak of 3 rounds is slow (make fuzz).
    @pytest.mark.parametrize("rounds", [1, pytest.param(3, marks=pytest.mark.slow)])
    def test_every_decision_is_recorded_under_the_revision_it_names(
        self, rounds: int, *, served: BundleServer, skewed: Skewed
    ) -> None:
        """While skewed bundles swap in and out (future, past, a reused ETag), each decision
        matches one revision whole, and the log holds one record per decision, naming the
        same revision and outcome."""
        stream = io.StringIO()
        decided: list[Decision] = []
        done = threading.Event()
        served.reused_etag, served.conditional = REUSED, False
        with engine_on(served, skewed, stream) as engine:

            def decide() -> None:
                while not done.is_set():
                    decided.append(engine.evaluate(EVICTION))

            worker = threading.Thread(target=decide)
            worker.start()
            try:
                for body in [skewed.future, skewed.past, skewed.r1] * rounds:
                    served.serve(body)
                    assert engine.reload().changed
            finally:
                done.set()
                worker.join()
        records: dict[str, dict[str, Any]] = {
            record["decision_id"]: record
            for record in map(json.loads, stream.getvalue().splitlines())
            if record["kind"] == "decision"
        }
        assert decided
        assert len(records) == len(decided)
        whole = {("allow", "1.0.0", "r1"), ("deny", "1.1.0", "future"), ("allow", "1.2.0", "past")}
        for decision in decided:
            policy = decision.policy
            assert (decision.outcome, policy.version, policy.bundle_revision) in whole
            record = records[decision.decision_id]
            assert (record["outcome"], record["policy"]["bundle_revision"]) == (
                decision.outcome,
                policy.bundle_revision,
            )
