"""examples/fleet/fleet_demo.py, as ``make demo`` runs it: a signed bundle served to two real
servers of two tenants each, a tampered bundle refused by both with the last good one kept,
both logs shipped to ``audit collect`` and verified there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "fleet" / "fleet_demo.py"
TENANTS = ROOT / "examples" / "fleet" / "tenants.yaml"
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
    def test_each_tenant_decides_under_its_policy_of_the_bundle(
        self, ran: tuple[str, dict[str, Any]]
    ) -> None:
        """On each server, prod-eu's requests (labels in the header) are decided by
        prod-eu@1.4.0 and staging's (labels in the document) by staging@0.9.0, all under bundle
        fleet-1; prod-eu's shadow (prod-eu@1.5.0, from the manifest) decides beside prod-eu's
        only."""
        _, summary = ran
        assert summary["revision"] == "fleet-1"
        assert [server["index"] for server in summary["servers"]] == [1, 2]
        keys = ("tenant", "input", "labels_in", "policy", "bundle_revision", "outcome")
        inputs = ["eviction-healthy.json", "eviction-utc-constraint.json"]
        expected = [
            ("prod-eu", name, "header", "prod-eu@1.4.0", "fleet-1", outcome)
            for name, outcome in zip(inputs, ["allow", "deny"], strict=True)
        ] + [
            ("staging", name, "document", "staging@0.9.0", "fleet-1", outcome)
            for name, outcome in zip(inputs, ["allow", "deny"], strict=True)
        ]
        for server in summary["servers"]:
            made = [tuple(d[key] for key in keys) for d in server["decisions"]]
            assert made == expected
            # prod-eu@1.5.0 pins what 1.4.0 lets go: it would deny both of prod-eu's evictions.
            assert server["shadow_outcomes"] == ["deny", "deny", None, None] * 2

    def test_the_tenants_file_is_valid(self) -> None:
        """examples/fleet/tenants.yaml validates against tenants.v1 and names two tenants."""
        tenants = yaml.safe_load(TENANTS.read_text(encoding="utf-8"))
        schema = json.loads((ROOT / "schemas" / "tenants.v1.schema.json").read_text("utf-8"))
        jsonschema.Draft202012Validator(schema).validate(tenants)
        assert [t["name"] for t in tenants["tenants"]] == ["prod-eu", "staging"]

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

    def test_both_logs_are_collected_whole_and_verify(
        self, ran: tuple[str, dict[str, Any]]
    ) -> None:
        """audit collect holds one file per replica, with every record each server shipped
        (none dropped), the local log's bytes, and audit verify passes on each."""
        _, summary = ran
        collected = summary["collected"]
        assert collected["files"] == ["server-1.jsonl", "server-2.jsonl"]
        for server in summary["servers"]:
            replica = collected["replicas"][f"server-{server['index']}"]
            assert server["dropped"] == 0
            # Shipped before the stop, in the local log after it: nothing written in between.
            assert replica["records"] == replica["lines"] == server["shipped"]
            assert server["local_records"] == server["shipped"]
            assert (replica["same_as_local"], replica["audit_verify_exit"]) == (True, 0)

    def test_the_story_shows_the_commands_and_the_refusal(
        self, ran: tuple[str, dict[str, Any]]
    ) -> None:
        """The output shows the bundle commands, the fleet's status lines (every tenant, the
        log shipping), the refusal and the four logs verified."""
        stdout, summary = ran
        lines = stdout.splitlines()
        assert "$ prunewarden bundle build examples/deployments/prod-eu.yaml" in stdout
        assert any(line.startswith("      shadow prod-eu@1.5.0 sha256:") for line in lines)
        urls = [server["url"] for server in summary["servers"]]
        tenants = (
            "tenants prod-eu prod-eu@1.4.0 shadow prod-eu@1.5.0, staging staging@0.9.0; "
            "default staging"
        )
        for url in urls:
            healthy = f"  {url}  healthy  bundle fleet-1  {tenants}  allow 2 deny 2 halt 0  ship "
            assert any(line.startswith(healthy) for line in lines)
        assert stdout.count("$ prunewarden audit verify") == 4
        assert stdout.count("revision fleet-1 kept") == 2
