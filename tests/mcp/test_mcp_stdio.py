"""``prunewarden mcp`` over stdio, driven by the SDK's own client: the command is spawned as
an MCP host spawns it (``python -m prunewarden mcp``) and one session evaluates, plans,
verifies a transition, sends a bad document and reads the resources."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from _support.mcp_session import (
    Scripted,
    SessionBehaviour,
    audit_records,
    example,
    scripted_session,
)
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.spawns  # spawns the server


@pytest.fixture(scope="module")
def audit_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-stdio") / "audit.jsonl"


@pytest.fixture(scope="module")
def scripted(audit_log: Path) -> Scripted:
    server = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "prunewarden",
            "mcp",
            "--audit-log",
            str(audit_log),
            "--audit-inputs",
            "--session-id",
            "mcp-stdio",
            "--label",
            "team=search",
        ],
        cwd=str(audit_log.parent),
    )

    async def session() -> Scripted:
        async with Client(server) as client:
            return await scripted_session(client)

    return anyio.run(session)


class TestStdioSession(SessionBehaviour):
    """The scripted session over stdio."""


class TestStdioCommandOptions:
    def test_records_carry_the_commands_caller_fields_and_input(
        self, scripted: Scripted, audit_log: Path
    ) -> None:
        """--session-id, --label and --audit-inputs reach every record, as with evaluate."""
        decision_id = scripted.evaluated.structured_content["decision_id"]
        (record,) = [r for r in audit_records(audit_log) if r.get("decision_id") == decision_id]
        assert (record["session_id"], record["labels"]) == ("mcp-stdio", {"team": "search"})
        assert record["input"] == example("eviction-healthy.json")
