"""API v1 over a real server on a loopback port: answers, headers, problem documents, limits."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Mapping
from pathlib import Path

import pytest
from _support.server import Server, audit_decisions, policy_text, running_server
from prometheus_client.parser import text_string_to_metric_families
from prunewarden import ReloadingEngine
from prunewarden.cli._main import run
from prunewarden.server import Built, Listen, ServerConfig, build_app, create_app
from prunewarden.server._service import Answer, DecisionService
from starlette.testclient import TestClient

ALLOWED = {
    "check": "eviction",
    "segment": {"id": "s1", "kind": "tool_output", "tombstone_written": True},
    "score": 0.1,
    "perturbed_score": 0.12,
}
DENIED = {"check": "eviction", "segment": {"id": "s1", "kind": "tool_output"}, "score": 0.1}
# A document the CLI refuses with a located problem on line 4.
BAD = (
    '{\n  "check": "eviction",\n  "segment": {"id": "s1", "kind": "tool_output"},\n'
    '  "score": "high"\n}'
)


def window(segment_id: str, score: float) -> dict[str, object]:
    """A window segment the plan may evict: scored on its current text, stable, tombstoned."""
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


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


class TestEvaluate:
    def test_allow_is_the_cli_decision_document(self, server: Server) -> None:
        """POST /v1/evaluate answers the decision.v1 document, its id and policy in headers."""
        with server.client() as http:
            response = http.post("/v1/evaluate", json=ALLOWED)
        body = response.json()
        assert response.status_code == 200
        assert (body["check"], body["outcome"]) == ("eviction", "allow")
        assert response.headers["prunewarden-decision-ids"] == body["decision_id"]
        assert response.headers["prunewarden-policy"] == (
            f"served@1.0.0 {body['policy']['digest']}"
        )

    def test_refusal_is_an_answer_not_an_error(self, server: Server) -> None:
        """An enforced deny is a 200 answer carrying the refusal and its reasons."""
        with server.client() as http:
            response = http.post("/v1/evaluate", json=DENIED)
        body = response.json()
        assert response.status_code == 200
        assert body["outcome"] == "deny"
        assert "no_tombstone" in [reason["code"] for reason in body["reasons"]]

    def test_every_decision_returned_is_logged(self, server: Server) -> None:
        """The decision ids returned are decision records of the audit log."""
        with server.client() as http:
            ids = [http.post("/v1/evaluate", json=ALLOWED).json()["decision_id"] for _ in range(3)]
        logged = {record["decision_id"] for record in audit_decisions(server.audit_log)}
        assert set(ids) <= logged

    def test_bad_input_is_a_located_problem_as_the_cli_prints_it(
        self, server: Server, tmp_path: Path
    ) -> None:
        """A 400 problem document carries the CLI's located messages, file named <request>."""
        with server.client() as http:
            response = http.post(
                "/v1/evaluate", content=BAD, headers={"content-type": "application/json"}
            )
        problem = response.json()
        assert response.status_code == 400
        assert response.headers["content-type"] == "application/problem+json"
        assert problem["type"].endswith("/invalid-input")
        document = tmp_path / "bad.json"
        document.write_text(BAD, encoding="utf-8")
        code, _, err = cli("evaluate", str(document), "--audit-log", str(tmp_path / "a.jsonl"))
        assert code == 2
        assert [p["text"] for p in problem["problems"]] == [
            line.replace(str(document), "<request>") for line in err.splitlines()
        ]
        assert problem["problems"][0]["line"] == 4

    def test_malformed_json_is_located(self, server: Server) -> None:
        """A body that is not JSON is a 400 naming line and column."""
        with server.client() as http:
            response = http.post("/v1/evaluate", content=b'{"check": ')
        assert response.status_code == 400
        assert response.json()["problems"][0]["file"] == "<request>"

    def test_a_halted_session_id_refuses_a_stateless_call(self, server: Server) -> None:
        """?session_id= is recorded with the decision."""
        with server.client() as http:
            body = http.post("/v1/evaluate?session_id=stateless-1", json=ALLOWED).json()
        records = [
            r for r in audit_decisions(server.audit_log) if r["decision_id"] == body["decision_id"]
        ]
        assert records[0]["session_id"] == "stateless-1"


class TestPlanAndPolicy:
    def test_plan_carries_every_decision_id(self, server: Server) -> None:
        """POST /v1/plan answers the plan; the header lists each decision's id."""
        document = {"segments": [window("a", 0.1), window("b", 0.9)], "keep_top_k": 1}
        with server.client() as http:
            response = http.post("/v1/plan", json=document)
        plan = response.json()
        assert response.status_code == 200
        assert plan["evict"] == ["a"]
        ids = [decision["decision_id"] for decision in plan["decisions"]]
        assert response.headers["prunewarden-decision-ids"].split(",") == ids

    def test_policy_names_identity_digest_and_document(self, server: Server) -> None:
        """GET /v1/policy: the identity, digest, files and resolved document in force."""
        with server.client() as http:
            body = http.get("/v1/policy").json()
        assert body["policy"]["name"] == "served"
        assert body["digest"] == body["policy"]["digest"]
        assert body["document"]["spec"]["collapse"]["consecutive_cycles"] == 2
        assert body["sources"][0]["path"].endswith("policy.yaml")

    def test_probes(self, server: Server) -> None:
        """/healthz and /readyz answer 200 with the policy identity."""
        with server.client() as http:
            health, ready = http.get("/healthz"), http.get("/readyz")
        assert (health.status_code, ready.status_code) == (200, 200)
        assert ready.json()["checks"] == {"policy": True, "audit_log": True}
        assert health.json()["policy"]["name"] == "served"

    def test_bundled_schemas_are_served(self, server: Server) -> None:
        """GET /schemas/NAME serves a bundled schema under its $id's file name."""
        with server.client() as http:
            found = http.get("/schemas/input.v1.schema.json")
            missing = http.get("/schemas/nothing.v1.schema.json")
        assert found.json()["$id"].endswith("/input.v1.schema.json")
        assert missing.status_code == 404
        assert missing.json()["type"].endswith("/not-found")

    def test_unknown_route_and_method_are_problem_documents(self, server: Server) -> None:
        """404 and 405 are problem documents too."""
        with server.client() as http:
            missing, wrong = http.get("/v2/evaluate"), http.get("/v1/evaluate")
        assert (missing.status_code, wrong.status_code) == (404, 405)
        assert wrong.headers["content-type"] == "application/problem+json"

    def test_metrics_are_prometheus_text(self, server: Server) -> None:
        """GET /metrics serves the Prometheus text format: requests by route, and the decision
        metrics of docs/observability.md for this server's engine."""
        with server.client() as http:
            http.get("/healthz")
            http.post("/v1/evaluate", json=ALLOWED)
            text = http.get("/metrics").text
        assert 'prunewarden_http_requests_total{route="/healthz",status="200"}' in text
        families = {f.name: f for f in text_string_to_metric_families(text)}
        allowed = [
            s.value
            for s in families["prunewarden_decisions"].samples
            if s.name == "prunewarden_decisions_total"
            and (s.labels["check"], s.labels["outcome"], s.labels["enforced"])
            == ("eviction", "allow", "true")
        ]
        assert sum(allowed) >= 1  # the server is shared by the tests of this module
        assert "prunewarden_policy_info" in families


class TestSessions:
    def test_a_session_halts_and_refuses_evictions(self, server: Server) -> None:
        """Collapsing cycles halt the session; its evictions are refused pruning_halted."""
        cycles = [
            {"cycle": 1, "scores": {"c": 0.9, "a": 0.5, "b": 0.1}, "pinned": ["c"]},
            {"cycle": 2, "scores": {"c": 0.3, "a": 0.31, "b": 0.3}, "pinned": ["c"]},
            {"cycle": 3, "scores": {"c": 0.3, "a": 0.31, "b": 0.3}, "pinned": ["c"]},
        ]
        with server.client() as http:
            outcomes = [
                http.post("/v1/sessions/halting/cycles", json=c).json()["outcome"] for c in cycles
            ]
            refused = http.post("/v1/sessions/halting/evictions", json=ALLOWED).json()
            other = http.post("/v1/sessions/other/evictions", json=ALLOWED).json()
            state = http.get("/v1/sessions/halting").json()
        assert outcomes[-1] == "halt"
        assert refused["reasons"][0]["code"] == "pruning_halted"
        assert other["outcome"] == "allow"
        assert state["halted"] is True
        assert state["state"]["halt"]["code"] == "collapse_detected"

    def test_out_of_order_cycle_is_a_conflict(self, server: Server) -> None:
        """A cycle that does not follow the last is 409, located in the body."""
        with server.client() as http:
            http.post("/v1/sessions/order/cycles", json={"cycle": 5, "scores": {"a": 0.5}})
            response = http.post(
                "/v1/sessions/order/cycles", json={"cycle": 5, "scores": {"a": 0.5}}
            )
        problem = response.json()
        assert response.status_code == 409
        assert problem["type"].endswith("/session-conflict")
        assert problem["problems"][0]["path"] == "$.cycle"

    def test_bad_cycle_is_located_in_the_body(self, server: Server) -> None:
        """A score out of range in a cycle is 400 at $.scores.NAME, not the built document."""
        with server.client() as http:
            response = http.post("/v1/sessions/range/cycles", json={"scores": {"a": 7.0}})
        assert response.status_code == 400
        assert response.json()["problems"][0]["path"] == "$.scores.a"

    def test_session_supplied_fields_are_refused(self, server: Server) -> None:
        """A prune naming its own turns is refused at the key: the session supplies them."""
        prune = {"check": "staleness", "spans": [], "keep_top_k": 0, "turns": []}
        with server.client() as http:
            response = http.post("/v1/sessions/supplied/prunes", json=prune)
        assert response.status_code == 400
        assert response.json()["problems"][0]["path"] == "$.turns"

    def test_delete_forgets_the_session(self, server: Server) -> None:
        """DELETE forgets a session; its state is then 404."""
        with server.client() as http:
            http.post("/v1/sessions/gone/turns", json={"mean_relevance": 0.5, "tokens": 10})
            deleted = http.delete("/v1/sessions/gone").json()
            after = http.get("/v1/sessions/gone")
        assert deleted["deleted"] is True
        assert after.status_code == 404


class TestLimits:
    def test_oversized_body_is_413(self, policy_file: Path, tmp_path: Path) -> None:
        """A body over --max-request-bytes is refused 413 before it reaches the engine."""
        with running_server(policy_file, tmp_path, "--max-request-bytes", "64") as small:
            with small.client() as http:
                response = http.post("/v1/evaluate", json=ALLOWED)
            assert response.status_code == 413
            assert response.json()["limit"] == 64
        assert audit_decisions(small.audit_log) == []

    def test_unlogged_decision_is_503(self, policy_file: Path, tmp_path: Path) -> None:
        """When the audit log cannot be written, the caller gets 503 and no decision."""
        with running_server(policy_file, tmp_path) as failing:
            failing.audit_log.unlink()
            failing.audit_log.mkdir()  # the path is now a directory: no record can be appended
            with failing.client() as http:
                response = http.post("/v1/evaluate", json=ALLOWED)
                ready = http.get("/readyz")
        problem = response.json()
        assert response.status_code == 503
        assert problem["type"].endswith("/audit-unavailable")
        assert "outcome" not in problem
        assert ready.status_code == 503


class TestCommandLine:
    def test_no_tcp_beyond_loopback_without_a_token(self, policy_file: Path) -> None:
        """serve refuses a non-loopback TCP address when no token is set."""
        code, _, err = cli("serve", "--policy", str(policy_file), "--listen", "0.0.0.0:0")
        assert code == 2
        assert "without a token" in err

    def test_print_openapi(self) -> None:
        """--print-openapi prints the document and exits 0."""
        code, out, _ = cli("serve", "--print-openapi")
        assert code == 0
        assert json.loads(out)["openapi"] == "3.1.0"

    @pytest.mark.parametrize("listen", ["nope", "unix:", "127.0.0.1:99999"])
    def test_bad_listen_address(self, policy_file: Path, listen: str) -> None:
        """A malformed --listen is a usage error naming it."""
        code, _, err = cli("serve", "--policy", str(policy_file), "--listen", listen)
        assert code == 2
        assert "--listen" in err


class TestDeadline:
    def test_request_past_its_deadline_is_503(self, policy_file: Path, tmp_path: Path) -> None:
        """--request-timeout: a pass over 20,000 segments cannot finish in 10 ms; 503."""
        document = {"segments": [window(f"s{i}", 0.5) for i in range(20_000)], "keep_top_k": 1}
        with (
            running_server(policy_file, tmp_path, "--request-timeout", "0.01") as slow,
            slow.client() as http,
        ):
            response = http.post("/v1/plan", json=document)
            healthy = http.get("/healthz")
        assert response.status_code == 503
        assert response.json()["type"].endswith("/deadline-exceeded")
        assert healthy.status_code == 200


class TestSessionIds:
    @pytest.mark.parametrize("escaped", ["%FF", "%FE", "a%C3", "%80b"])
    def test_an_id_that_is_not_utf8_is_a_located_400(self, server: Server, escaped: str) -> None:
        """A session id whose escapes are not UTF-8 is refused at $.session_id, never read with
        a replacement character (which made %FF and %FE one session)."""
        with server.client() as http:
            posted = http.post(f"/v1/sessions/{escaped}/turns", json={"mean_relevance": 0.5})
            read = http.get(f"/v1/sessions/{escaped}")
        for response in (posted, read):
            problem = response.json()
            assert response.status_code == 400
            assert problem["problems"][0]["path"] == "$.session_id"
            assert "not UTF-8" in problem["problems"][0]["message"]

    def test_an_escaped_utf8_id_is_that_id(self, server: Server) -> None:
        """%C3%A9 is the session "é"; an escaped U+FFFD is a session of its own."""
        with server.client() as http:
            http.post("/v1/sessions/%C3%A9/turns", json={"mean_relevance": 0.5, "tokens": 1})
            state = http.get("/v1/sessions/%C3%A9").json()
            replacement = http.get("/v1/sessions/%EF%BF%BD")
        assert state["session_id"] == "\u00e9"
        assert replacement.status_code == 404

    def test_a_query_session_id_that_is_not_utf8_is_refused(self, server: Server) -> None:
        """POST /v1/evaluate?session_id=%FF is a 400 too."""
        with server.client() as http:
            response = http.post("/v1/evaluate?session_id=%FF", json=ALLOWED)
        assert response.status_code == 400
        assert response.json()["problems"][0]["path"] == "$.session_id"


class TestUnixSocketDirectory:
    def test_a_missing_directory_is_named(self, policy_file: Path, tmp_path: Path) -> None:
        """--listen unix:DIR/pdp.sock with DIR missing: exit 2, the error names DIR."""
        missing = tmp_path / "run" / "prunewarden"
        code, _, err = cli(
            "serve",
            "--policy",
            str(policy_file),
            "--audit-log",
            str(tmp_path / "audit.jsonl"),
            "--listen",
            f"unix:{missing}/pdp.sock",
        )
        assert code == 2
        assert f"the directory {missing} does not exist" in err


# The spec of the module's policy (tests/conftest.py), served under two versions below.
SERVED_SPEC = {
    "collapse": {"consecutive_cycles": 2, "spread_floor": 0.1, "canary_margin": 0.2},
    "eviction": {"require_perturbation": True, "require_tombstone": True},
}


class _ReloadingFirst(DecisionService):
    """Reloads a new policy version just before deciding: the reload a request may meet."""

    def __init__(self, built: Built, policy: Path) -> None:
        super().__init__(built.engine, built.audit)
        assert isinstance(built.engine, ReloadingEngine)
        self.reloading = built.engine
        self.policy = policy

    def evaluate(
        self,
        body: bytes,
        session_id: str | None = None,
        *,
        explain: bool = False,
        labels: Mapping[str, str] | None = None,
        credential: str | None = None,
    ) -> Answer:
        self.policy.write_text(policy_text(SERVED_SPEC, name="served", version="2.0.0"))
        self.reloading.reload()
        return super().evaluate(
            body, session_id, explain=explain, labels=labels, credential=credential
        )


class TestPolicyHeader:
    def test_header_names_the_policy_the_decision_was_made_under(self, tmp_path: Path) -> None:
        """A reload between a request's arrival and its decision: the Prunewarden-Policy
        header names the policy of the decision, not the one in force when it arrived."""
        policy = tmp_path / "policy.yaml"
        policy.write_text(policy_text(SERVED_SPEC, name="served", version="1.0.0"))
        config = ServerConfig(
            policy=str(policy),
            audit_log=str(tmp_path / "audit.jsonl"),
            listen=Listen(),
            reload_interval=0,
        )
        built = build_app(config)
        try:
            app = create_app(config, _ReloadingFirst(built, policy), built.sessions)
            with TestClient(app) as http:
                response = http.post("/v1/evaluate", json=ALLOWED)
        finally:
            built.close()
        body = response.json()
        assert body["policy"]["version"] == "2.0.0"
        assert response.headers["prunewarden-policy"] == (
            f"served@2.0.0 {body['policy']['digest']}"
        )
