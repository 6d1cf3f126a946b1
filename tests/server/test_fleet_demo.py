"""examples/fleet/fleet_demo.py, as ``make demo`` runs it: a signed bundle served to two real
servers, a tampered bundle refused by both with the last good one kept, both logs verified."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "fleet" / "fleet_demo.py"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    """The demo's standard output and its summary.json (run once for the module)."""
    out = tmp_path_factory.mktemp("fleet") / "demo"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRUNEWARDEN_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        [sys.executable, str(DEMO), str(out)],
        capture_output=True, text=True, timeout=300, check=False, env=env, cwd=ROOT,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, ""), done.stdout
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return done.stdout, summary


class TestFleetDemo:
    def test_both_servers_decide_under_the_bundle_revision(
        self, ran: tuple[str, dict[str, Any]]
    ) -> None:
        """Each server decides both inputs under prod-eu@1.4.0 from bundle fleet-1, and the
        shadow (prod-eu@1.5.0, from the bundle's manifest) decides beside each."""
        _, summary = ran
        assert summary["revision"] == "fleet-1"
        assert [server["index"] for server in summary["servers"]] == [1, 2]
        for server in summary["servers"]:
            assert [
                (d["input"], d["policy"], d["bundle_revision"]) for d in server["decisions"]
            ] == [
                ("eviction-healthy.json", "prod-eu@1.4.0", "fleet-1"),
                ("eviction-utc-constraint.json", "prod-eu@1.4.0", "fleet-1"),
            ]
            # prod-eu@1.5.0 pins what 1.4.0 lets go: it would deny both evictions.
            assert server["shadow_outcomes"] == ["deny"] * 4

    def test_the_tampered_bundle_is_refused_with_the_last_good_kept(
        self, ran: tuple[str, dict[str, Any]]
    ) -> None:
        """Both servers stay ready on fleet-1, say why in /readyz, write one record, and
        decide on fleet-1 after the refusal; status exits 0 before and 1 after."""
        _, summary = ran
        assert (summary["status_exit"], summary["status_exit_after_refusal"]) == (0, 1)
        for server in summary["servers"]:
            refusal = server["refusal"]
            assert (refusal["ready_status"], refusal["healthy"]) == ("ready", False)
            assert refusal["revision_kept"] == "fleet-1"
            assert "prod-eu.yaml" in refusal["problems"][0]
            assert "the manifest lists" in refusal["problems"][0]
            assert refusal["reload_failed_records"] == 1
            assert refusal["record_policy"]["bundle_revision"] == "fleet-1"
            revisions = {d["bundle_revision"] for d in refusal["decisions_after"]}
            assert revisions == {"fleet-1"}

    def test_each_log_verifies_after_a_clean_stop(self, ran: tuple[str, dict[str, Any]]) -> None:
        """Both servers stop on SIGTERM (exit 0) and audit verify passes on both logs."""
        _, summary = ran
        for server in summary["servers"]:
            assert (server["stopped"], server["audit_verify_exit"]) == (0, 0)
        assert summary["collected"] is None

    def test_the_story_shows_the_commands_and_the_refusal(
        self, ran: tuple[str, dict[str, Any]]
    ) -> None:
        """The output shows the bundle commands, the fleet's status lines and the refusal."""
        stdout, summary = ran
        lines = stdout.splitlines()
        assert "$ prunewarden bundle build examples/deployments/prod-eu.yaml" in stdout
        assert any(line.startswith("      shadow prod-eu@1.5.0 sha256:") for line in lines)
        urls = [server["url"] for server in summary["servers"]]
        for url in urls:
            healthy = f"  {url}  healthy  prod-eu@1.4.0 bundle fleet-1 shadow prod-eu@1.5.0  "
            assert any(line.startswith(healthy + "allow 1 deny 1 halt 0") for line in lines)
        assert stdout.count("revision fleet-1 kept") == 2
