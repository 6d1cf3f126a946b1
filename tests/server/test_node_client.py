"""The Node example drives a session through a live server with @prunewarden/client (skipped
without node; ``make typescript-example`` builds the package and installs the example)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from _support.server import audit_decisions, running_server

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "clients" / "node"
DRIVER = EXAMPLE / "drive-session.mjs"
INSTALLED = (
    ROOT / "clients" / "typescript" / "dist" / "index.js",
    EXAMPLE / "node_modules" / "@prunewarden" / "client",
)
NODE = shutil.which("node")
TOKEN = "node-token"  # noqa: S105 - the test server's own token

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not on PATH")


@pytest.fixture(autouse=True)
def _example_installed() -> None:
    missing = [str(path.relative_to(ROOT)) for path in INSTALLED if not path.exists()]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: run make typescript-example first")


def drive(url: str, session_id: str, token: str | None = None) -> list[str]:
    assert NODE is not None
    env = {**os.environ, "PRUNEWARDEN_TOKEN": token or ""}
    done = subprocess.run(
        [NODE, str(DRIVER), url, session_id],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


class TestNodeClient:
    def test_drives_a_session_to_a_halt_over_tcp_with_a_token(
        self, policy_file: Path, tmp_path: Path
    ) -> None:
        """Over TCP with a bearer token: allow, collapse halt, pruning_halted, 409."""
        with running_server(policy_file, tmp_path, token=TOKEN) as server:
            lines = drive(server.url, "node-tcp", TOKEN)
        assert lines[0] == "policy: served@1.0.0"
        assert lines[3] == "evict tool-42: eviction allow authorized"
        assert lines[5].startswith("cycle 4: collapse halt")
        assert lines[6] == "evict tool-42: eviction deny pruning_halted"
        assert lines[7] == "state: halted=true"
        assert lines[8].startswith("cycle 1 again: HTTP 409 <request>:1:")
        assert lines[9] == "trim tool-42: transition deny pruning_halted"
        assert len(audit_decisions(server.audit_log)) == 7

    def test_drives_a_session_over_a_unix_socket(self, policy_file: Path, tmp_path: Path) -> None:
        """The package's unix-socket agent reaches the same API."""
        sock = tmp_path / "node.sock"
        with running_server(policy_file, tmp_path, listen=f"unix:{sock}") as server:
            lines = drive(server.url, "node-unix")
        assert lines[6] == "evict tool-42: eviction deny pruning_halted"


# A 3,000-segment pass through the package: how many ids it reads, and whether they are the
# plan's decisions in order (run from the example's folder, where the package is installed).
BIG_PLAN_SCRIPT = """
import { createHash } from "node:crypto";
import { Client, decisionIds } from "@prunewarden/client";
const segment = (i) => ({
  id: `n${i}`, kind: "tool_output", text: `text ${i}`,
  text_sha256: createHash("sha256").update(`text ${i}`).digest("hex"),
  score: 0.5, perturbed_score: 0.5, tombstone_written: true, tokens: 10,
});
const segments = Array.from({ length: 3000 }, (_, i) => segment(i));
const client = new Client(process.argv[1]);
const plan = await client.plan({ segments, keep_top_k: 1 });
await client.close();
const ids = decisionIds(plan);
console.log(ids.length, ids.every((id, i) => id === plan.decisions[i].decision_id));
"""


class TestLargePass:
    def test_reads_the_ids_of_a_3000_segment_pass(self, policy_file: Path, tmp_path: Path) -> None:
        """The package reads a 3,000-decision answer (the ids in the body, not a 113 KB header)."""
        assert NODE is not None
        with running_server(policy_file, tmp_path) as server:
            done = subprocess.run(
                [NODE, "--input-type=module", "-e", BIG_PLAN_SCRIPT, server.url],
                cwd=EXAMPLE,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        assert (done.returncode, done.stdout.split()) == (0, ["3000", "true"]), done.stderr
