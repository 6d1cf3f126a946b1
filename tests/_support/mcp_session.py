"""One scripted MCP client session against ``prunewarden mcp``, for the transport tests.

The session is run once per transport with the SDK's own client (``mcp.Client``), and what it
saw is kept, so that each test asserts one behaviour on it without starting another server.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from mcp import Client
from mcp_types import CallToolResult, ListToolsResult, ReadResourceResult
from prunewarden import load_builtin_policy
from prunewarden.audit import decision_rows, verify_files

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def example(name: str) -> dict[str, Any]:
    """A bundled example document (``examples/inputs`` or ``examples/windows``)."""
    folder = "windows" if name.startswith("free-") else "inputs"
    loaded: dict[str, Any] = json.loads((EXAMPLES / folder / name).read_text(encoding="utf-8"))
    return loaded


def transition_arguments() -> dict[str, Any]:
    """The transition example without its check: verify_transition implies it."""
    document = example("transition-trim-dropped-task.json")
    return {key: value for key, value in document.items() if key != "check"}


@dataclass
class Scripted:
    """What one session saw, call by call."""

    tools: ListToolsResult
    evaluated: CallToolResult
    explained: CallToolResult
    planned: CallToolResult
    verified: CallToolResult
    bad_input: CallToolResult
    policy: ReadResourceResult
    input_schema: ReadResourceResult


async def scripted_session(client: Client) -> Scripted:
    """List the tools, evaluate, explain a refusal, plan, verify a transition, send a bad
    document, and read the policy and a schema."""
    tools = await client.list_tools()
    evaluated = await client.call_tool("evaluate", example("eviction-healthy.json"))
    explained = await client.call_tool("explain", example("eviction-buf-definition.json"))
    planned = await client.call_tool("plan", example("free-30k-tokens.json"))
    verified = await client.call_tool("verify_transition", transition_arguments())
    bad = transition_arguments()
    bad["after"] = [*bad["after"], {"id": "late", "kind": "turn", "tokens": -3}]
    bad_input = await client.call_tool("verify_transition", bad)
    policy = await client.read_resource("prunewarden://policy")
    input_schema = await client.read_resource("prunewarden://schemas/input.v1.schema.json")
    return Scripted(tools, evaluated, explained, planned, verified, bad_input, policy, input_schema)


def text_of(result: ReadResourceResult) -> dict[str, Any]:
    """The JSON document of a resource read."""
    (content,) = result.contents
    loaded: dict[str, Any] = json.loads(getattr(content, "text", ""))
    return loaded


def audit_records(path: Path) -> list[dict[str, Any]]:
    """Every record of an audit log."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


DECISION_SCHEMA = Draft202012Validator(
    json.loads((ROOT / "schemas" / "decision.v1.schema.json").read_text(encoding="utf-8"))
)


class SessionBehaviour:
    """What a session sees over any transport; a test module gives the ``scripted`` session
    and the ``audit_log`` its server wrote."""

    def test_lists_the_four_tools_with_their_schemas(self, scripted: Scripted) -> None:
        """The server offers evaluate, explain, plan and verify_transition, each with an object
        input schema and an output schema."""
        tools = {tool.name: tool for tool in scripted.tools.tools}
        assert sorted(tools) == ["evaluate", "explain", "plan", "verify_transition"]
        assert {tool.input_schema["type"] for tool in tools.values()} == {"object"}
        assert tools["evaluate"].output_schema is not None
        decision_schema: dict[str, Any] = json.loads(
            (ROOT / "schemas" / "decision.v1.schema.json").read_text(encoding="utf-8")
        )
        assert tools["evaluate"].output_schema["required"] == decision_schema["required"]
        assert tools["verify_transition"].input_schema["required"] == ["before", "after"]
        assert tools["explain"].input_schema == tools["evaluate"].input_schema
        assert tools["explain"].output_schema == tools["evaluate"].output_schema

    def test_explain_answers_what_would_have_allowed_the_refusal(self, scripted: Scripted) -> None:
        """explain on a refused eviction answers the explained decision: the pinned reason
        with its would_allow, and the explanation, schema-valid and the same JSON as text."""
        result = scripted.explained
        decision = result.structured_content
        assert result.is_error is False
        assert (decision["check"], decision["outcome"]) == ("eviction", "deny")
        (reason,) = decision["reasons"]
        assert reason["code"] == "pinned"
        assert reason["detail"]["would_allow"] == [
            {"field": "spec.eviction.pinned_kinds", "op": "excludes", "value": "definition"}
        ]
        assert reason["detail"]["would_allow_text"].startswith("kind 'definition' is pinned")
        assert decision["explanation"] == {"mode": "enforce", "rules": [], "rule_backend": None}
        assert list(DECISION_SCHEMA.iter_errors(decision)) == []
        assert json.loads(getattr(result.content[0], "text", "")) == decision

    def test_evaluate_answers_a_schema_valid_decision(self, scripted: Scripted) -> None:
        """evaluate on an eviction document answers its decision as structured content, the
        same JSON as text."""
        result = scripted.evaluated
        decision = result.structured_content
        assert result.is_error is False
        assert (decision["check"], decision["outcome"], decision["reasons"][0]["code"]) == (
            "eviction",
            "allow",
            "authorized",
        )
        assert list(DECISION_SCHEMA.iter_errors(decision)) == []
        assert json.loads(getattr(result.content[0], "text", "")) == decision

    def test_plan_answers_the_plan_and_its_decisions(self, scripted: Scripted) -> None:
        """plan answers what the pass evicts and every decision it made, each decision.v1."""
        plan = scripted.planned.structured_content
        assert scripted.planned.is_error is False
        assert plan["evict"]
        assert plan["frozen"] is False
        assert plan["decisions"]
        assert all(not list(DECISION_SCHEMA.iter_errors(d)) for d in plan["decisions"])

    def test_verify_transition_refuses_a_dropped_pinned_task(self, scripted: Scripted) -> None:
        """verify_transition denies a trim that drops a pinned segment without a tombstone,
        and names the segments to restore."""
        decision = scripted.verified.structured_content
        assert scripted.verified.is_error is False
        assert decision["check"] == "transition"
        assert decision["outcome"] == "deny"
        assert [r["code"] for r in decision["reasons"]] == [
            "pinned_removed",
            "group_split",
            "no_tombstone",
        ]
        assert decision["actions"][0] == {"action": "restore", "ids": ["m1", "m2"]}

    def test_a_bad_document_is_a_tool_error_naming_the_path(self, scripted: Scripted) -> None:
        """A document the parser refuses is a tool error naming the JSON path, not a
        decision and not a traceback."""
        result = scripted.bad_input
        text = getattr(result.content[0], "text", "")
        assert result.is_error is True
        assert result.structured_content["type"] == "invalid-input"
        paths = [p["path"] for p in result.structured_content["problems"]]
        assert paths == ["$.after[4].tokens"]
        assert text.startswith("<arguments>: $.after[4].tokens: ")
        assert "Traceback" not in text

    def test_policy_resource_names_the_policy_in_force(self, scripted: Scripted) -> None:
        """The policy resource gives the policy's name@version, digest and resolved document."""
        policy = load_builtin_policy()
        document = text_of(scripted.policy)
        assert document["policy"] == policy.identity.to_dict()
        assert document["digest"] == policy.digest
        assert document["document"]["metadata"]["name"] == "default"
        assert document["shadow"] is None

    def test_schema_resources_are_the_bundled_schemas(self, scripted: Scripted) -> None:
        """A schema resource is the bundled file, unchanged."""
        schema = text_of(scripted.input_schema)
        assert schema == json.loads((ROOT / "schemas" / "input.v1.schema.json").read_text())

    def test_every_decision_is_in_the_audit_log(self, scripted: Scripted, audit_log: Path) -> None:
        """Each decision answered was logged, the bad document was not, and the chain
        verifies."""
        answered = {
            scripted.evaluated.structured_content["decision_id"],
            scripted.explained.structured_content["decision_id"],
            scripted.verified.structured_content["decision_id"],
            *(d["decision_id"] for d in scripted.planned.structured_content["decisions"]),
        }
        logged = [row["decision_id"] for r in audit_records(audit_log) for row in decision_rows(r)]
        assert sorted(logged) == sorted(answered)
        assert verify_files([audit_log]).ok
