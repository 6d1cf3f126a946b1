"""``?explain=true`` on the app in process: ``POST /v1/evaluate``, ``/v1/plan`` and a session's
deciding endpoints answer the explained decisions, and a value other than true or false is a
located 400."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from prunewarden.server import Built, Listen, ServerConfig, build_app
from starlette.testclient import TestClient

UNTOMBSTONED = {
    "check": "eviction",
    "segment": {"id": "s1", "kind": "tool_output", "tombstone_written": False},
    "score": 0.1,
    "perturbed_score": 0.12,
}


@pytest.fixture
def http(policy_file: Path, tmp_path: Path) -> Iterator[TestClient]:
    built: Built = build_app(
        ServerConfig(str(policy_file), str(tmp_path / "audit.jsonl"), Listen())
    )
    try:
        yield TestClient(built.app, base_url="http://127.0.0.1")
    finally:
        built.close()


class TestExplainQuery:
    def test_explain_true_answers_the_explained_decision(self, http: TestClient) -> None:
        """?explain=true: would_allow on the refusing reason, and the explanation."""
        response = http.post("/v1/evaluate?explain=true", json=UNTOMBSTONED)
        assert response.status_code == 200
        decision = response.json()
        (reason,) = decision["reasons"]
        assert reason["code"] == "no_tombstone"
        assert reason["detail"]["would_allow"][0] == {
            "field": "segment.tombstone_written",
            "op": "==",
            "value": True,
        }
        assert decision["explanation"]["mode"] == "enforce"

    @pytest.mark.parametrize("query", ["", "?explain=false"])
    def test_without_explain_nothing_is_explained(self, http: TestClient, query: str) -> None:
        """No explain, or explain=false: the plain decision."""
        decision = http.post(f"/v1/evaluate{query}", json=UNTOMBSTONED).json()
        assert "explanation" not in decision
        assert "would_allow" not in decision["reasons"][0]["detail"]

    def test_another_value_is_a_located_400(self, http: TestClient) -> None:
        """?explain=yes is refused with a problem naming $.explain."""
        response = http.post("/v1/evaluate?explain=yes", json=UNTOMBSTONED)
        assert response.status_code == 400
        problem = response.json()
        assert problem["problems"][0]["path"] == "$.explain"

    def test_the_refusal_is_located_at_the_query(self, http: TestClient) -> None:
        """The problem names the request, no line or column (a query is not the body), the
        path and the value refused."""
        (problem,) = http.post("/v1/evaluate?explain=yes", json=UNTOMBSTONED).json()["problems"]
        assert problem == {
            "file": "<request>",
            "line": 0,
            "column": 0,
            "path": "$.explain",
            "message": "'yes' is not one of 'true', 'false'",
            "text": "<request>: $.explain: 'yes' is not one of 'true', 'false'",
        }

    def test_a_long_value_is_cut_to_120_characters(self, http: TestClient) -> None:
        """The message quoting a long value is cut at 120 characters."""
        response = http.post(f"/v1/evaluate?explain={'x' * 200}", json=UNTOMBSTONED)
        (problem,) = response.json()["problems"]
        assert problem["message"] == "'" + "x" * 119

    def test_explain_inside_another_parameter_explains_nothing(self, http: TestClient) -> None:
        """A query that holds the word only in another parameter's value is not explain."""
        response = http.post("/v1/evaluate?session_id=explainer", json=UNTOMBSTONED)
        assert response.status_code == 200
        assert "explanation" not in response.json()

    def test_the_last_explain_given_counts(self, http: TestClient) -> None:
        """?explain=true&explain=false is the plain decision; the reverse is explained."""
        plain = http.post("/v1/evaluate?explain=true&explain=false", json=UNTOMBSTONED).json()
        explained = http.post("/v1/evaluate?explain=false&explain=true", json=UNTOMBSTONED)
        assert "explanation" not in plain
        assert explained.json()["explanation"]["mode"] == "enforce"


def window_segment(segment_id: str, score: float, perturbed: float) -> dict[str, object]:
    """A window segment scored on its current text, without a tombstone (a plan writes it)."""
    text = f"text of {segment_id}"
    return {
        "id": segment_id,
        "kind": "tool_output",
        "text": text,
        "text_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "score": score,
        "perturbed_score": perturbed,
        "tokens": 10,
    }


TRANSITION = {
    "check": "transition",
    "before": [
        {"id": "m1", "kind": "constraint", "text": "All timestamps must be UTC."},
        {"id": "m2", "kind": "turn", "text": "ran it"},
    ],
    "after": [{"id": "m2", "kind": "turn", "text": "ran it"}],
}


class TestExplainEverywhere:
    @pytest.mark.parametrize(
        ("part", "body", "code"),
        [
            ("evictions", UNTOMBSTONED, "no_tombstone"),
            ("transitions", TRANSITION, "pinned_removed"),
        ],
    )
    def test_session_endpoints_explain(
        self, http: TestClient, part: str, body: dict[str, object], code: str
    ) -> None:
        """A session's evictions and transitions answer ?explain=true with would_allow."""
        response = http.post(f"/v1/sessions/explained/{part}?explain=true", json=body)
        assert response.status_code == 200
        decision = response.json()
        reason = next(r for r in decision["reasons"] if r["code"] == code)
        assert reason["detail"]["would_allow"]
        assert decision["explanation"]["mode"] == "enforce"

    def test_session_cycles_and_prunes_explain(self, http: TestClient) -> None:
        """cycles and prunes take ?explain=true: each decision carries its explanation."""
        cycle = http.post("/v1/sessions/cycles/cycles?explain=true", json={"scores": {"a": 0.5}})
        prune = http.post(
            "/v1/sessions/cycles/prunes?explain=true",
            json={"check": "staleness", "spans": [], "keep_top_k": 0},
        )
        assert [r.status_code for r in (cycle, prune)] == [200, 200]
        assert cycle.json()["explanation"]["mode"] == "enforce"
        assert prune.json()["explanation"]["mode"] == "enforce"

    @pytest.mark.parametrize("path", ["/v1/plan", "/v1/sessions/planned/plans"])
    def test_plans_explain_every_decision(self, http: TestClient, path: str) -> None:
        """A plan, stateless or a session's, explains each decision of its pass."""
        # b's score is unstable under perturbation: refused, and explained.
        body = {"segments": [window_segment("a", 0.1, 0.1), window_segment("b", 0.2, 0.9)]}
        response = http.post(f"{path}?explain=true", json={**body, "keep_top_k": 0})
        assert response.status_code == 200
        decisions = response.json()["decisions"]
        assert decisions
        assert all(d["explanation"]["mode"] == "enforce" for d in decisions)
        refused = [d for d in decisions if d["outcome"] != "allow"]
        assert refused
        assert all("would_allow" in r["detail"] for d in refused for r in d["reasons"])

    def test_plain_session_answers_stay_plain(self, http: TestClient) -> None:
        """Without ?explain, a session's decision carries no explanation."""
        decision = http.post("/v1/sessions/plain/evictions", json=UNTOMBSTONED).json()
        assert "explanation" not in decision
        assert "would_allow" not in decision["reasons"][0]["detail"]

    @pytest.mark.parametrize("path", ["/v1/plan", "/v1/sessions/bad/evictions"])
    def test_another_value_is_a_located_400_everywhere(self, http: TestClient, path: str) -> None:
        """?explain=1 on a plan or a session endpoint is refused naming $.explain."""
        response = http.post(f"{path}?explain=1", json=UNTOMBSTONED)
        assert response.status_code == 400
        assert response.json()["problems"][0]["path"] == "$.explain"
