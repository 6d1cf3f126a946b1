"""prunewarden.client against a real server: Session's method names, sync and async, and the
engine's exceptions for the server's problem documents."""

from __future__ import annotations

import asyncio
import hashlib

import pytest
from _support.server import Server
from prunewarden import InputError
from prunewarden.client import (
    AsyncClient,
    Client,
    DecisionDocument,
    PlanDocument,
    ServerError,
    decision_ids,
)

SEGMENT = {"id": "s1", "kind": "tool_output", "tombstone_written": True}
HEALTHY = [
    {"c": 0.9, "a": 0.6, "b": 0.1},
    {"c": 0.88, "a": 0.55, "b": 0.12},
]
COLLAPSED = {"c": 0.3, "a": 0.31, "b": 0.3}


def window(segment_id: str, score: float) -> dict[str, object]:
    """A window segment a plan may evict (scored on its current text, tombstoned)."""
    text = f"text of {segment_id}"
    return {
        "id": segment_id,
        "kind": "tool_output",
        "text": text,
        "text_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "score": score,
        "perturbed_score": score,
        "tombstone_written": True,
        "tokens": 10,
    }


class TestSyncClient:
    def test_session_methods_mirror_session(self, server: Server) -> None:
        """observe_cycle, observe_turn, authorize, prune, plan, state, delete on one session."""
        with Client(server.url) as client:
            session = client.session("client-sync")
            first = session.observe_cycle(HEALTHY[0], ["c"])
            second = session.observe_cycle(HEALTHY[1], ["c"])
            turn = session.observe_turn(0.5, 100)
            allowed = session.authorize(SEGMENT, 0.1, 0.12)
            pruned = session.prune([], 0)
            plan = session.plan([], keep_top_k=0)
            state = session.state()
            deleted = session.delete()
        assert (first["check"], second["check"]) == ("collapse", "collapse")
        assert turn["halted"] is False
        assert allowed["outcome"] == "allow"
        assert pruned["check"] == "staleness"
        assert plan["frozen"] is False
        assert state["session_id"] == "client-sync"
        assert deleted["deleted"] is True

    def test_halt_holds_across_calls(self, server: Server) -> None:
        """After a halting cycle, authorize answers pruning_halted."""
        with Client(server.url) as client:
            session = client.session("client-halt")
            for scores in (*HEALTHY, COLLAPSED, COLLAPSED):
                last = session.observe_cycle(scores, ["c"])
            refused = session.authorize(SEGMENT, 0.1, 0.12)
        assert last["outcome"] == "halt"
        assert refused["reasons"][0]["code"] == "pruning_halted"

    def test_invalid_input_raises_input_error_with_located_problems(self, server: Server) -> None:
        """A 400 becomes the engine's InputError, its problems as the server located them."""
        with Client(server.url) as client, pytest.raises(InputError) as info:
            client.session("client-bad").authorize({"id": "s1", "kind": 3}, 0.1)
        assert info.value.problems[0].path == "$.segment.kind"
        assert info.value.problems[0].file == "<request>"

    def test_out_of_order_cycle_raises_input_error(self, server: Server) -> None:
        """A 409 conflict is an InputError at $.cycle, as Session raises it."""
        with Client(server.url) as client:
            session = client.session("client-order")
            session.observe_cycle({"a": 0.5}, cycle=3)
            with pytest.raises(InputError) as info:
                session.observe_cycle({"a": 0.5}, cycle=2)
        assert info.value.problems[0].path == "$.cycle"

    def test_missing_session_raises_server_error(self, server: Server) -> None:
        """The state of a session the server does not hold is a ServerError 404."""
        with Client(server.url) as client, pytest.raises(ServerError) as info:
            client.session("never-seen").state()
        assert info.value.status == 404

    def test_session_ids_are_escaped_in_paths(self, server: Server) -> None:
        """A session id with spaces, % and ? names one session; one with / is refused."""
        with Client(server.url) as client:
            session = client.session("team a%20?agent 7")
            session.observe_turn(0.5, 10)
            assert session.state()["session_id"] == "team a%20?agent 7"
            with pytest.raises(InputError):
                client.session("a/b")

    def test_evaluate_explain_asks_for_the_explained_decision(self, server: Server) -> None:
        """evaluate(explain=True): would_allow on the refusal and the explanation; without it,
        neither."""
        untombstoned = {
            "check": "eviction",
            "segment": {**SEGMENT, "tombstone_written": False},
            "score": 0.1,
            "perturbed_score": 0.12,
        }
        with Client(server.url) as client:
            explained = client.evaluate(untombstoned, explain=True)
            plain = client.evaluate(untombstoned)
        assert explained["reasons"][0]["detail"]["would_allow"][0]["field"] == (
            "segment.tombstone_written"
        )
        assert explained["explanation"]["mode"] == "enforce"
        assert "explanation" not in plain

    def test_session_calls_and_plan_ask_for_explanations(self, server: Server) -> None:
        """explain=True on each session call that decides and on plan: every decision comes
        explained; the same calls without it, plain."""
        untombstoned = {**SEGMENT, "tombstone_written": False}
        with Client(server.url) as client:
            session = client.session("client-explain")
            answers = [
                session.observe_cycle(HEALTHY[0], ["c"], explain=True),
                session.authorize(untombstoned, 0.1, 0.12, explain=True),
                session.prune([], 0, explain=True),
                session.verify([], [], explain=True),
                *session.plan([window("p", 0.1)], keep_top_k=0, explain=True)["decisions"],
                *client.plan({"segments": [window("q", 0.1)], "keep_top_k": 0}, explain=True)[
                    "decisions"
                ],
            ]
            plain = session.authorize(untombstoned, 0.1, 0.12)
        # Each plan decides its staleness gate and its one eviction: 4 + 2 + 2 decisions.
        assert [a["explanation"]["mode"] for a in answers] == ["enforce"] * 8
        assert answers[1]["reasons"][0]["detail"]["would_allow"][0] == {
            "field": "segment.tombstone_written",
            "op": "==",
            "value": True,
        }
        assert "explanation" not in plain


class TestAsyncClient:
    def test_concurrent_sessions(self, server: Server) -> None:
        """AsyncClient: the same calls awaited, several sessions at once."""

        async def drive(client: AsyncClient, name: str) -> str:
            session = client.session(name)
            await session.observe_cycle(HEALTHY[0], ["c"])
            decision = await session.authorize(SEGMENT, 0.1, 0.12)
            return str(decision["outcome"])

        async def main() -> list[str]:
            async with AsyncClient(server.url) as client:
                policy = await client.policy()
                assert policy["policy"]["name"] == "served"
                return await asyncio.gather(*(drive(client, f"async-{i}") for i in range(8)))

        assert asyncio.run(main()) == ["allow"] * 8

    def test_explain_is_passed_on_awaited(self, server: Server) -> None:
        """AsyncClient's session authorize and plan take explain as the sync client's."""

        async def main() -> tuple[DecisionDocument, PlanDocument]:
            async with AsyncClient(server.url) as client:
                untombstoned = {**SEGMENT, "tombstone_written": False}
                session = client.session("async-explain")
                refused = await session.authorize(untombstoned, 0.1, 0.12, explain=True)
                document = {"segments": [window("r", 0.1)], "keep_top_k": 0}
                plan = await client.plan(document, explain=True)
                return refused, plan

        refused, plan = asyncio.run(main())
        assert refused["reasons"][0]["detail"]["would_allow"]
        assert [d["explanation"]["mode"] for d in plan["decisions"]] == ["enforce"] * 2


class TestLargePasses:
    def test_a_pass_over_3000_segments_reads_its_ids_from_the_body(self, server: Server) -> None:
        """A 3,000-decision pass: the header gives the count, not 3,000 ids (113 KB, past what
        HTTP clients read); decision_ids reads every id from the body, in order."""
        segments = [window(f"big-{i}", 0.5) for i in range(3000)]
        with Client(server.url) as client:
            plan = client.session("client-large").plan(segments, keep_top_k=1)
        with server.client() as http:
            response = http.post("/v1/plan", json={"segments": segments, "keep_top_k": 1})
        assert len(decision_ids(plan)) == 3000
        assert decision_ids(plan) == [d["decision_id"] for d in plan["decisions"]]
        assert response.headers["prunewarden-decision-count"] == "3000"
        assert "prunewarden-decision-ids" not in response.headers

    def test_a_small_answer_still_lists_its_ids_in_the_header(self, server: Server) -> None:
        """Up to 64 decisions, the header lists their ids as before."""
        with Client(server.url) as client:
            decision = client.session("client-small").authorize(SEGMENT, 0.1, 0.12)
        assert decision_ids(decision) == [decision["decision_id"]]
