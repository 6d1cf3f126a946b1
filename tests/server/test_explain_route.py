"""``POST /v1/evaluate?explain=true`` on the app in process: the explained decision, and a
located 400 for a value other than true or false."""

from __future__ import annotations

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
