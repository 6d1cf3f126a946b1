"""Rewrite fidelity over HTTP: a real server on a policy with spec.fidelity refuses the seed's
constraint summarized without its negation, statelessly and in a session."""

from __future__ import annotations

from collections.abc import Iterator
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
