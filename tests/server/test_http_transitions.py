"""Transitions over HTTP: POST /v1/evaluate and /v1/sessions/{id}/transitions on a real server,
through the Python client."""

from __future__ import annotations

from typing import Any

import pytest
from _support.server import Server
from prunewarden import InputError
from prunewarden.client import Client

BEFORE: list[dict[str, Any]] = [
    {"id": "sys", "kind": "system", "text": "You are a coding agent."},
    {"id": "rule", "kind": "constraint", "text": "All timestamps must be UTC."},
    {"id": "call", "kind": "assistant", "text": "read_file()", "group": "g"},
    {"id": "result", "kind": "tool", "text": "def export(): ...", "group": "g"},
]
HEALTHY = [{"c": 0.9, "a": 0.6, "b": 0.1}, {"c": 0.88, "a": 0.55, "b": 0.12}]
COLLAPSED = {"c": 0.3, "a": 0.31, "b": 0.3}


class TestTransitionsOverHttp:
    def test_evaluate_answers_a_transition_with_its_restore(self, server: Server) -> None:
        """POST /v1/evaluate decides a transition document: the refusal and what to restore."""
        document = {"check": "transition", "before": BEFORE, "after": [BEFORE[0], BEFORE[3]]}
        with Client(server.url) as client:
            decision = client.evaluate(document)
        assert (decision["check"], decision["outcome"]) == ("transition", "deny")
        assert [r["code"] for r in decision["reasons"]] == [
            "pinned_removed",
            "group_split",
            "no_tombstone",
        ]
        assert decision["actions"] == [{"action": "restore", "ids": ["rule", "call"]}]

    def test_a_session_verifies_with_its_halt(self, server: Server) -> None:
        """POST /v1/sessions/{id}/transitions: allowed before the halt, pruning_halted after."""
        with Client(server.url) as client:
            session = client.session("transitions-halt")
            tombstoned = session.verify(BEFORE, BEFORE[:1], tombstones=["rule", "call", "result"])
            for scores in (*HEALTHY, COLLAPSED, COLLAPSED):
                session.observe_cycle(scores, ["c"])
            halted = session.verify(BEFORE, BEFORE[:1], tombstones=["rule", "call", "result"])
        assert [r["code"] for r in tombstoned["reasons"]] == ["transition_clean"]
        assert [r["code"] for r in halted["reasons"]] == ["pruning_halted"]

    def test_a_session_document_may_not_name_another_session(self, server: Server) -> None:
        """session_id and labels come from the path and the session: a body carrying them is
        a located 400."""
        body = {"check": "transition", "before": [], "after": [], "session_id": "other"}
        with server.client() as http:
            response = http.post("/v1/sessions/transitions-body/transitions", json=body)
        assert response.status_code == 400
        assert [p["path"] for p in response.json()["problems"]] == ["$.session_id"]

    def test_a_malformed_transition_is_a_located_400(self, server: Server) -> None:
        """A derived_from cycle is refused as the CLI refuses it, before anything is decided."""
        after = [
            {"id": "a", "kind": "summary", "derived_from": ["b"]},
            {"id": "b", "kind": "summary", "derived_from": ["a"]},
        ]
        with Client(server.url) as client, pytest.raises(InputError) as raised:
            client.session("transitions-bad").verify([], after)
        assert [(p.path, p.message) for p in raised.value.problems] == [
            ("$.after[0].derived_from", "derived_from cycle: a -> b -> a")
        ]
