"""A ReloadingEngine on a bundle whose manifest names a shadow: the policy and its candidate
activated together from one verified bundle, swapped together, kept together on a refusal."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.bundles import BASE, BundleServer, bundle_server, prod
from prunewarden import AuditLog, ReloadingEngine
from prunewarden.bundle import KeyPair, build_bundle, generate_key_pair, sign_bundle

ROOT = Path(__file__).resolve().parent.parent
EVICTION = json.loads((ROOT / "examples" / "inputs" / "eviction-healthy.json").read_text())


def bundle(folder: Path, keys: KeyPair, revision: str, policy: str, candidate: str | None) -> bytes:
    """prod.yaml (and candidate.yaml as its shadow, when given) built and signed."""
    folder.mkdir()
    (folder / "base.yaml").write_text(BASE, encoding="utf-8")
    (folder / "prod.yaml").write_text(policy, encoding="utf-8")
    shadows = {}
    if candidate is not None:
        (folder / "candidate.yaml").write_text(candidate, encoding="utf-8")
        shadows["prod"] = folder / "candidate.yaml"
    built = build_bundle([folder / "prod.yaml"], revision=revision, lock=False, shadows=shadows)
    return sign_bundle(built, keys.private_pem)


class Revisions:
    """r1: prod@1.0.0 (allows) with the candidate prod@2.0.0-rc.1 (denies); r2: the same
    policy with another candidate, prod@2.0.0-rc.2 (allows); r3: prod@1.0.0 alone; reused:
    r1's candidate version with another content."""

    def __init__(self, folder: Path) -> None:
        self.keys = generate_key_pair()
        allow, deny = prod(0.25, "1.0.0"), prod(0.01, "2.0.0-rc.1")
        self.r1 = bundle(folder / "r1", self.keys, "r1", allow, deny)
        self.r2 = bundle(folder / "r2", self.keys, "r2", allow, prod(0.3, "2.0.0-rc.2"))
        self.r3 = bundle(folder / "r3", self.keys, "r3", allow, None)
        self.reused = bundle(folder / "reused", self.keys, "r4", allow, prod(0.3, "2.0.0-rc.1"))


@pytest.fixture(scope="module")
def revisions(tmp_path_factory: pytest.TempPathFactory) -> Revisions:
    return Revisions(tmp_path_factory.mktemp("shadow-bundles"))


@pytest.fixture
def served(revisions: Revisions) -> Iterator[BundleServer]:
    with bundle_server() as server:
        server.serve(revisions.r1)
        yield server


@pytest.fixture
def stream() -> io.StringIO:
    return io.StringIO()


@pytest.fixture
def engine(
    served: BundleServer, revisions: Revisions, stream: io.StringIO
) -> Iterator[ReloadingEngine]:
    with (
        AuditLog(stream) as audit,
        ReloadingEngine(
            bundle=served.url, bundle_key=revisions.keys.public_pem, interval=0, audit=audit
        ) as reloading,
    ):
        yield reloading


def shadow_of(engine: ReloadingEngine) -> tuple[str, str | None] | None:
    """The shadow's version and bundle revision in force, from the engine's status."""
    shadow = engine.status().shadow
    return None if shadow is None else (shadow.version, shadow.bundle_revision)


def decided_records(stream: io.StringIO) -> list[dict[str, Any]]:
    found = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [record for record in found if record["kind"] == "decision"]


class TestShadowFromBundle:
    def test_the_bundle_shadow_decides_beside_the_policy(
        self, engine: ReloadingEngine, stream: io.StringIO
    ) -> None:
        """The policy allows, its shadow denies; both name the bundle's revision, in the
        decision and in its record."""
        decision = engine.evaluate(EVICTION)
        assert decision.outcome == "allow"
        assert decision.shadow is not None
        assert (decision.shadow.outcome, decision.shadow.policy.version) == ("deny", "2.0.0-rc.1")
        assert decision.shadow.policy.bundle_revision == "r1"
        (record,) = decided_records(stream)
        assert record["policy"]["bundle_revision"] == "r1"
        assert record["shadow"]["policy"]["bundle_revision"] == "r1"
        assert record["shadow"]["outcome"] == "deny"

    def test_a_new_candidate_alone_is_a_new_activation(
        self, engine: ReloadingEngine, served: BundleServer, revisions: Revisions
    ) -> None:
        """r2 changes only the candidate: swapped in; r3 drops it: the shadow goes too."""
        served.serve(revisions.r2)
        result = engine.reload()
        assert (result.changed, result.policy.bundle_revision) == (True, "r2")
        assert shadow_of(engine) == ("2.0.0-rc.2", "r2")
        served.serve(revisions.r3)
        assert engine.reload().changed
        assert shadow_of(engine) is None
        assert engine.evaluate(EVICTION).shadow is None

    def test_a_candidate_reusing_a_version_keeps_the_pair_in_force(
        self,
        engine: ReloadingEngine,
        served: BundleServer,
        revisions: Revisions,
        stream: io.StringIO,
    ) -> None:
        """A candidate giving the shadow's name@version another content refuses the whole
        bundle: policy and shadow of r1 stay, and one policy_reload_failed says why."""
        before = engine.engine
        served.serve(revisions.reused)
        result = engine.reload()
        assert not result.changed
        assert "prod@2.0.0-rc.1 is in force with another content" in result.problems[0]
        assert engine.engine is before
        assert shadow_of(engine) == ("2.0.0-rc.1", "r1")
        found = [json.loads(line) for line in stream.getvalue().splitlines()]
        assert [r["kind"] for r in found].count("policy_reload_failed") == 1

    # One round of swaps in make test; the soak of 4 rounds is slow (make fuzz).
    @pytest.mark.parametrize("rounds", [1, pytest.param(4, marks=pytest.mark.slow)])
    def test_policy_and_shadow_are_never_mixed_between_revisions(
        self, rounds: int, *, engine: ReloadingEngine, served: BundleServer, revisions: Revisions
    ) -> None:
        """Decisions made while r1, r2 and r3 alternate each name one revision for the
        policy and its shadow alike."""
        seen: set[tuple[str | None, str | None]] = set()
        done = threading.Event()

        def decide() -> None:
            while not done.is_set():
                decision = engine.evaluate(EVICTION)
                shadow = decision.shadow.policy.bundle_revision if decision.shadow else None
                seen.add((decision.policy.bundle_revision, shadow))

        worker = threading.Thread(target=decide)
        worker.start()
        try:
            for body in [revisions.r2, revisions.r3, revisions.r1] * rounds:
                served.serve(body)
                engine.reload()
        finally:
            done.set()
            worker.join()
        assert seen
        assert seen <= {("r1", "r1"), ("r2", "r2"), ("r3", None)}
