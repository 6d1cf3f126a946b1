"""Rewrite fidelity over HTTP: a real server on a policy with spec.fidelity refuses the seed's
constraint summarized without its negation, statelessly and in a session; with ``--embedder
minilm`` a policy using the meaning method decides instead of failing closed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.server import Server, policy_text, running_server
from prunewarden.client import Client

CONSTRAINT = {
    "id": "c1",
    "kind": "constraint",
    "text": "All timestamps must be UTC; never emit local time.",
}


def _summary(text: str) -> dict[str, Any]:
    return {"id": "s1", "kind": "summary", "text": text, "derived_from": ["c1"]}


@pytest.fixture(scope="module")
def fidelity_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    workdir = tmp_path_factory.mktemp("fidelity")
    policy = workdir / "policy.yaml"
    spec: dict[str, object] = {"fidelity": {"mode": "enforce"}}
    policy.write_text(policy_text(spec, name="fidelity", version="1.0.0"), encoding="utf-8")
    with running_server(policy, workdir) as server:
        yield server


class TestFidelityOverHttp:
    def test_evaluate_refuses_the_lost_negation(self, fidelity_server: Server) -> None:
        """POST /v1/evaluate: negation_lost with its ids and kinds, and the restore."""
        document = {
            "check": "transition",
            "before": [CONSTRAINT],
            "after": [_summary("Timestamps in UTC; emit local time.")],
            "tombstones": ["c1"],
        }
        with Client(fidelity_server.url) as client:
            decision = client.evaluate(document)
        assert decision["outcome"] == "deny"
        assert [r["detail"] for r in decision["reasons"]] == [
            {"parent": "c1", "child": "s1", "lost": ["negation"]}
        ]
        assert decision["actions"] == [{"action": "restore", "ids": ["c1"]}]

    def test_a_session_allows_a_faithful_summary(self, fidelity_server: Server) -> None:
        """POST /v1/sessions/{id}/transitions: the negation kept, the summary allowed."""
        with Client(fidelity_server.url) as client:
            session = client.session("fidelity-1")
            decision = session.verify(
                [CONSTRAINT],
                [_summary("Timestamps are UTC; local time is never emitted.")],
                tombstones=["c1"],
            )
        assert [r["code"] for r in decision["reasons"]] == ["transition_clean"]


TASK = {
    "id": "task",
    "kind": "task",
    "text": "Fix the CSV exporter in src/report/export.py. All timestamps must be UTC; never "
    "emit local time. Keep the diff small and explain each change in the pull request.",
}
# Every fact kept, the last instruction dropped: only the meaning method sees it.
DROPPED = (
    "Fix the CSV exporter in src/report/export.py. Timestamps are UTC; local time is never emitted."
)
KEPT = (
    "Fix the CSV exporter in src/report/export.py. Timestamps are UTC; local time is never "
    "emitted. Keep the diff small and explain every change in the pull request."
)


def _folded(text: str) -> dict[str, Any]:
    summary = {"id": "sum", "kind": "summary", "text": text, "derived_from": ["task"]}
    return {
        "check": "transition",
        "before": [TASK],
        "after": [summary],
        "tombstones": ["task"],
        "canaries": ["task"],
    }


@pytest.fixture(scope="module")
def meaning_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("meaning")
    policy = workdir / "policy.yaml"
    spec: dict[str, object] = {"fidelity": {"method": "both", "embedding_floor": 0.6}}
    policy.write_text(policy_text(spec, name="meaning", version="1.0.0"), encoding="utf-8")
    return policy


@pytest.fixture(scope="module")
def meaning_server(meaning_policy: Path) -> Iterator[Server]:
    with running_server(meaning_policy, meaning_policy.parent, "--embedder", "minilm") as server:
        yield server


class TestMeaningOverHttp:
    def test_evaluate_refuses_the_drift(self, meaning_server: Server) -> None:
        """--embedder minilm: POST /v1/evaluate refuses meaning_drift and restores the task."""
        with Client(meaning_server.url) as client:
            decision = client.evaluate(_folded(DROPPED))
        assert decision["outcome"] == "deny"
        assert [(r["code"], r["detail"]) for r in decision["reasons"]] == [
            ("meaning_drift", {"parent": "task", "child": "sum", "lost": ["meaning"]})
        ]
        assert decision["actions"] == [{"action": "restore", "ids": ["task"]}]

    def test_a_session_judges_meaning(self, meaning_server: Server) -> None:
        """--embedder minilm: in a session, the drift is refused and the paraphrase is clean."""
        with Client(meaning_server.url) as client:
            session = client.session("meaning-1")
            drifted = session.verify(
                [TASK], [_folded(DROPPED)["after"][0]], tombstones=["task"], canaries=["task"]
            )
            kept = session.verify(
                [TASK], [_folded(KEPT)["after"][0]], tombstones=["task"], canaries=["task"]
            )
        assert [r["code"] for r in drifted["reasons"]] == ["meaning_drift"]
        assert [r["code"] for r in kept["reasons"]] == ["transition_clean"]

    def test_without_an_embedder_every_summary_is_refused(
        self, meaning_policy: Path, tmp_path: Path
    ) -> None:
        """No --embedder: the same policy refuses even the faithful paraphrase, internal_error."""
        with running_server(meaning_policy, tmp_path) as server, Client(server.url) as client:
            decision = client.evaluate(_folded(KEPT))
        assert (decision["outcome"], [r["code"] for r in decision["reasons"]]) == (
            "deny",
            ["internal_error"],
        )
