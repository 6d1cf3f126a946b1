"""The MCP server's tools and resources failing closed, with the SDK's client connected in
process: an audit log that cannot write, an engine that breaks, a document naming another
check, an unknown resource; the caller's fields and a reloaded policy; the command's usage
errors."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from _support.mcp_session import audit_records, example, text_of, transition_arguments
from _support.server import policy_text
from mcp import Client, MCPError
from mcp_types import INVALID_PARAMS
from prunewarden import Engine, load_builtin_policy
from prunewarden.audit import AuditLog
from prunewarden.cli import run
from prunewarden.errors import AuditError
from prunewarden.mcp import POLICY_URI, Caller, create_server
from prunewarden.reload import ReloadingEngine

_T = TypeVar("_T")


class FailingStream(io.StringIO):
    """An audit sink whose every write fails as a full disk does."""

    def write(self, _text: str) -> int:
        raise OSError(28, "No space left on device")


class BrokenEngine(Engine):
    """An engine whose decisions raise what no guard catches."""

    def evaluate(self, *_args: Any, **_kwargs: Any) -> Any:
        msg = "the engine broke"
        raise RuntimeError(msg)


class RefusingEngine(Engine):
    """An engine whose decisions raise one of prunewarden's own errors."""

    def evaluate(self, *_args: Any, **_kwargs: Any) -> Any:
        msg = "the audit log is closed"
        raise AuditError(msg)


def session(engine: Engine | ReloadingEngine, act: Callable[[Client], Awaitable[_T]]) -> _T:
    """``act`` on a client connected in process to a server on ``engine``."""

    async def connected() -> _T:
        async with Client(create_server(engine), mode="legacy") as client:
            return await act(client)

    return anyio.run(connected)


def text(result: Any) -> str:
    return str(getattr(result.content[0], "text", ""))


class TestFailClosed:
    def test_an_unlogged_decision_is_a_tool_error(self) -> None:
        """A decision the audit log did not take is withheld as a tool error naming it,
        never answered (so never an allow a caller could act on)."""
        engine = Engine.default(audit=AuditLog(FailingStream(), fsync="never"))
        document = example("eviction-healthy.json")
        result = session(engine, lambda c: c.call_tool("evaluate", document))
        assert result.is_error is True
        assert result.structured_content["type"] == "audit-unavailable"
        assert result.structured_content["decision_id"] in text(result)
        assert "allow" not in text(result)

    def test_an_unlogged_explained_decision_is_a_tool_error(self) -> None:
        """explain withholds a decision the audit log did not take, as evaluate does."""
        engine = Engine.default(audit=AuditLog(FailingStream(), fsync="never"))
        document = example("eviction-buf-definition.json")
        result = session(engine, lambda c: c.call_tool("explain", document))
        assert (result.is_error, result.structured_content["type"]) == (True, "audit-unavailable")
        assert "would_allow" not in text(result)

    def test_explain_refuses_a_bad_document_with_its_path(self) -> None:
        """explain on a document the parser refuses is a tool error naming the JSON path."""
        document = {**example("eviction-buf-definition.json"), "score": 7}
        result = session(Engine.default(), lambda c: c.call_tool("explain", document))
        assert result.is_error is True
        assert [p["path"] for p in result.structured_content["problems"]] == ["$.score"]

    def test_an_unlogged_plan_is_a_tool_error(self) -> None:
        """A plan whose pass the audit log did not take is withheld the same way."""
        engine = Engine.default(audit=AuditLog(FailingStream(), fsync="never"))
        document = example("free-30k-tokens.json")
        result = session(engine, lambda c: c.call_tool("plan", document))
        assert (result.is_error, result.structured_content["type"]) == (True, "audit-unavailable")

    def test_an_engine_failure_is_a_tool_error_without_traceback(self) -> None:
        """An exception escaping the engine is a tool error that names its type, without a
        traceback, and no decision."""
        engine = BrokenEngine(load_builtin_policy())
        document = example("eviction-healthy.json")
        result = session(engine, lambda c: c.call_tool("evaluate", document))
        assert result.is_error is True
        assert result.structured_content["type"] == "internal-error"
        assert text(result) == "internal error (RuntimeError): no decision is answered"

    def test_an_engine_error_is_a_tool_error_with_its_message(self) -> None:
        """An error the engine raises on purpose is a tool error naming its class and message."""
        engine = RefusingEngine(load_builtin_policy())
        result = session(engine, lambda c: c.call_tool("verify_transition", transition_arguments()))
        assert result.is_error is True
        assert result.structured_content == {
            "type": "error",
            "error": "AuditError",
            "detail": "the audit log is closed",
        }

    def test_verify_transition_refuses_another_check(self) -> None:
        """verify_transition on a document naming another check is a tool error at $.check."""
        document = {**transition_arguments(), "check": "eviction"}
        result = session(Engine.default(), lambda c: c.call_tool("verify_transition", document))
        assert result.is_error is True
        assert [p["path"] for p in result.structured_content["problems"]] == ["$.check"]

    def test_an_unknown_tool_is_a_tool_error(self) -> None:
        """A tool the server does not have is a tool error naming it."""
        result = session(Engine.default(), lambda c: c.call_tool("forget", {}))
        assert result.is_error is True
        assert result.structured_content == {"type": "unknown-tool", "tool": "forget"}

    def test_an_unknown_resource_is_an_error(self) -> None:
        """Reading a resource the server does not have is an invalid-params error naming it."""

        async def read_missing(client: Client) -> MCPError | None:
            try:
                await client.read_resource("prunewarden://schemas/nope")
            except MCPError as exc:
                return exc
            return None

        error = session(Engine.default(), read_missing)
        assert error is not None
        assert (error.code, error.message) == (
            INVALID_PARAMS,
            "no resource 'prunewarden://schemas/nope'",
        )


class TestRecording:
    def test_the_callers_session_and_labels_are_recorded(self, tmp_path: Path) -> None:
        """Every decision records the server's session id and labels, as evaluate's flags do."""
        log = tmp_path / "audit.jsonl"
        audit = AuditLog(log, fsync="never")
        server = create_server(Engine.default(audit=audit), Caller("agent-7", {"team": "search"}))

        async def act() -> Any:
            async with Client(server) as client:
                return await client.call_tool("evaluate", example("eviction-healthy.json"))

        result = anyio.run(act)
        audit.close()
        (record,) = [r for r in audit_records(log) if r.get("kind") == "decision"]
        assert record["decision_id"] == result.structured_content["decision_id"]
        assert (record["session_id"], record["labels"]) == ("agent-7", {"team": "search"})


class TestPolicyResource:
    def test_follows_a_reload(self, tmp_path: Path) -> None:
        """The policy resource names the policy in force after a reload, not the first one."""
        path = tmp_path / "policy.yaml"
        path.write_text(policy_text({}, name="team", version="1.0.0"))
        engine = ReloadingEngine(path, interval=0)
        first = session(engine, lambda c: c.read_resource(POLICY_URI))
        path.write_text(policy_text({"eviction": {"mode": "audit"}}, name="team", version="1.1.0"))
        assert engine.reload().changed is True
        second = session(engine, lambda c: c.read_resource(POLICY_URI))
        assert text_of(first)["policy"]["version"] == "1.0.0"
        assert text_of(second)["policy"]["version"] == "1.1.0"
        assert text_of(second)["digest"] == engine.policy.digest

    def test_names_the_shadow_policy(self, tmp_path: Path) -> None:
        """With a shadow policy, the resource names it beside the active one."""
        active, shadow = tmp_path / "active.yaml", tmp_path / "shadow.yaml"
        active.write_text(policy_text({}, name="active", version="1.0.0"))
        shadow.write_text(policy_text({}, name="candidate", version="2.0.0"))
        engine = ReloadingEngine(active, shadow=shadow, interval=0)
        document = text_of(session(engine, lambda c: c.read_resource(POLICY_URI)))
        assert document["policy"]["name"] == "active"
        assert document["shadow"]["name"] == "candidate"


class TestCommand:
    def test_refuses_a_non_loopback_address(self) -> None:
        """--listen on a non-loopback address is a usage error (exit 2): the endpoint has no
        authentication."""
        out, err = io.StringIO(), io.StringIO()
        argv = ["mcp", "--transport", "http", "--listen", "0.0.0.0:0"]
        assert run(argv, out, err) == 2
        assert "loopback only" in err.getvalue()

    def test_refuses_the_audit_log_on_standard_output(self) -> None:
        """--audit-log - is a usage error: stdout carries the protocol."""
        out, err = io.StringIO(), io.StringIO()
        assert run(["mcp", "--audit-log", "-"], out, err) == 2
        assert "--audit-log -" in err.getvalue()

    @pytest.mark.spawns
    def test_stdio_stops_when_the_client_closes_its_input(self, tmp_path: Path) -> None:
        """Over stdio the server exits 0 once its input closes, having written nothing but the
        protocol to standard output (its own line goes to standard error)."""
        command = [sys.executable, "-m", "prunewarden", "mcp"]
        done = subprocess.run(
            [*command, "--audit-log", str(tmp_path / "audit.jsonl")],
            input="",
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert (done.returncode, done.stdout) == (0, "")
        assert done.stderr == "prunewarden mcp: serving stdio (policy default@1.0.0)\n"

    def test_an_invalid_policy_exits_3(self, tmp_path: Path) -> None:
        """An invalid policy stops the command before it serves (exit 3), naming the path."""
        path = tmp_path / "bad.yaml"
        path.write_text(policy_text({"eviction": {"mode": "sometimes"}}, name="b", version="1.0.0"))
        out, err = io.StringIO(), io.StringIO()
        argv = ["mcp", "--policy", str(path), "--audit-log", str(tmp_path / "a.jsonl")]
        assert run(argv, out, err) == 3
        assert "$.spec.eviction.mode" in err.getvalue()
        assert json.dumps(out.getvalue()) == '""'
