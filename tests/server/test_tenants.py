"""``prunewarden serve --tenants``: a real server on loopback holding two policies, chosen per
request by labels, with sessions bound to the tenant that opened them."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _support.server import Server, audit_decisions, policy_text, running_server
from prometheus_client.parser import text_string_to_metric_families
from prunewarden.cli._main import run
from prunewarden.client import Client, ServerError
from prunewarden.errors import InputError
from prunewarden.server import read_tenants
from prunewarden.server._tenant_config import merged_labels, parse_labels_header

PATIENCE = 60.0  # seconds a background reload may take on a loaded machine
# Allowed by a policy with stability_delta 0.25, refused (unstable_score) with 0.01.
EVICTION = {
    "check": "eviction",
    "segment": {"id": "turn-30", "kind": "turn", "tombstone_written": True, "tokens": 240},
    "score": 0.08,
    "perturbed_score": 0.1,
    "eviction_candidates": ["turn-30"],
}
PROD = {"Prunewarden-Labels": "deployment=prod-eu, team=search"}
STAGING = {"Prunewarden-Labels": "deployment=staging"}
TENANTS = """\
# yaml-language-server: $schema=../schemas/tenants.v1.schema.json
tenantsVersion: 1
default: staging
tenants:
  - name: prod-eu
    selector:
      matchLabels: {deployment: prod-eu}
    policy: prod/policy.yaml
  - name: staging
    selector:
      matchLabels: {deployment: staging}
    policy: staging/policy.yaml
"""


def write_policy(folder: Path, name: str, version: str, stability_delta: float) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "policy.yaml"
    spec: dict[str, object] = {"eviction": {"stability_delta": stability_delta}}
    path.write_text(policy_text(spec, name=name, version=version), encoding="utf-8")
    return path


@pytest.fixture
def tenants_file(tmp_path: Path) -> Path:
    write_policy(tmp_path / "prod", "prod-eu", "1.0.0", 0.25)
    write_policy(tmp_path / "staging", "staging", "1.0.0", 0.01)
    path = tmp_path / "tenants.yaml"
    path.write_text(TENANTS, encoding="utf-8")
    return path


@pytest.fixture
def server(tmp_path: Path, tenants_file: Path) -> Iterator[Server]:
    with running_server(None, tmp_path, "--tenants", str(tenants_file)) as running:
        yield running


def eventually(client: httpx.Client, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """``GET /v1/policies`` once ``check`` holds for it (the server polls every 0.2 s)."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        document: dict[str, Any] = client.get("/v1/policies").json()
        if check(document):
            return document
        time.sleep(0.05)
    raise AssertionError(f"never: {document}")


def tenant(document: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(t for t in document["tenants"] if t["name"] == name)
    return found


class TestRouting:
    def test_the_header_chooses_the_policy(self, server: Server) -> None:
        """Labels choosing prod-eu decide under it (allow); none, under the default (deny)."""
        with server.client() as client:
            chosen = client.post("/v1/evaluate", json=EVICTION, headers=PROD)
            default = client.post("/v1/evaluate", json=EVICTION)
        assert (chosen.json()["policy"]["name"], chosen.json()["outcome"]) == ("prod-eu", "allow")
        assert chosen.headers["prunewarden-policy"].startswith("prod-eu@1.0.0 sha256:")
        assert (default.json()["policy"]["name"], default.json()["outcome"]) == (
            "staging",
            "deny",
        )

    def test_the_documents_labels_choose_too(self, server: Server) -> None:
        """A document's own ``labels`` choose its tenant as the header does."""
        document = {**EVICTION, "labels": {"deployment": "prod-eu"}}
        with server.client() as client:
            decision = client.post("/v1/evaluate", json=document).json()
        assert decision["policy"]["name"] == "prod-eu"

    def test_labels_matching_no_selector_go_to_the_default(self, server: Server) -> None:
        """Labels no selector matches: the default tenant decides."""
        with server.client() as client:
            decision = client.post(
                "/v1/evaluate", json=EVICTION, headers={"Prunewarden-Labels": "deployment=qa"}
            ).json()
        assert decision["policy"]["name"] == "staging"

    def test_a_label_given_twice_with_two_values_is_refused(self, server: Server) -> None:
        """Header and document disagree on a label: 400, located at the document's key."""
        body = json.dumps({**EVICTION, "labels": {"deployment": "staging"}}, indent=1)
        with server.client() as client:
            response = client.post("/v1/evaluate", content=body, headers=PROD)
        assert response.status_code == 400
        (problem,) = response.json()["problems"]
        assert problem["path"] == "$.labels.deployment"
        assert (problem["file"], problem["line"]) == (
            "<request>",
            body.splitlines().index(
                next(line for line in body.splitlines() if '"deployment"' in line)
            )
            + 1,
        )
        assert "'prod-eu'" in problem["message"]

    def test_a_malformed_header_is_located(self, server: Server) -> None:
        """An item without ``=``: 400, at its column in the header."""
        with server.client() as client:
            response = client.post(
                "/v1/evaluate",
                json=EVICTION,
                headers={"Prunewarden-Labels": "deployment=prod-eu,oops"},
            )
        assert response.status_code == 400
        (problem,) = response.json()["problems"]
        assert (problem["file"], problem["line"], problem["column"]) == (
            "<header Prunewarden-Labels>",
            1,
            20,
        )
        assert problem["message"] == "expected NAME=VALUE"

    def test_records_name_the_policy_and_carry_the_labels(self, server: Server) -> None:
        """Each decision's record names the policy chosen and carries the request's labels."""
        with server.client() as client:
            client.post("/v1/evaluate", json=EVICTION, headers=PROD)
            client.post("/v1/evaluate", json=EVICTION, headers=STAGING)
        decisions = audit_decisions(server.audit_log)
        assert [(d["policy"]["name"], d["labels"]) for d in decisions] == [
            ("prod-eu", {"deployment": "prod-eu", "team": "search"}),
            ("staging", {"deployment": "staging"}),
        ]

    def test_metrics_count_decisions_by_policy_not_by_labels(self, server: Server) -> None:
        """``/metrics`` counts decisions under each policy's name; no label of a request
        becomes a metric label."""
        with server.client() as client:
            client.post("/v1/evaluate", json=EVICTION, headers=PROD)
            client.post("/v1/evaluate", json=EVICTION)
            text = client.get("/metrics").text
        samples = [
            sample
            for family in text_string_to_metric_families(text)
            if family.name == "prunewarden_decisions"
            for sample in family.samples
            if sample.name == "prunewarden_decisions_total"
        ]
        assert {(s.labels["policy"], s.labels["outcome"]) for s in samples} == {
            ("prod-eu", "allow"),
            ("staging", "deny"),
        }
        assert all("deployment" not in s.labels for s in samples)


class TestPolicies:
    def test_policies_lists_each_tenant(self, server: Server) -> None:
        """``GET /v1/policies``: each tenant in file order, its selector, policy and shadow."""
        with server.client() as client:
            document = client.get("/v1/policies").json()
        assert document["default"] == "staging"
        assert [
            (t["name"], t["default"], t["selector"], t["policy"]["name"], t["shadow"])
            for t in document["tenants"]
        ] == [
            ("prod-eu", False, {"matchLabels": {"deployment": "prod-eu"}}, "prod-eu", None),
            ("staging", True, {"matchLabels": {"deployment": "staging"}}, "staging", None),
        ]
        assert all(t["bundle_revision"] is None and t["healthy"] for t in document["tenants"])

    def test_policy_answers_for_the_tenant_chosen(self, server: Server) -> None:
        """``GET /v1/policy`` with labels: that tenant's policy, and its name."""
        with server.client() as client:
            document = client.get("/v1/policy", headers=PROD).json()
        assert (document["tenant"], document["policy"]["name"]) == ("prod-eu", "prod-eu")

    def test_each_tenant_reloads_on_its_own(self, server: Server, tmp_path: Path) -> None:
        """A broken staging policy keeps its last good version while prod-eu reloads."""
        (tmp_path / "staging" / "policy.yaml").write_text("spec: [\n", encoding="utf-8")
        write_policy(tmp_path / "prod", "prod-eu", "1.1.0", 0.01)
        with server.client() as client:
            document = eventually(
                client,
                lambda d: (
                    tenant(d, "prod-eu")["policy"]["version"] == "1.1.0"
                    and not tenant(d, "staging")["healthy"]
                ),
            )
            decision = client.post("/v1/evaluate", json=EVICTION).json()
        staging = tenant(document, "staging")
        assert (staging["policy"]["version"], staging["last_reload"]) == ("1.0.0", "failed")
        assert tenant(document, "prod-eu")["healthy"] is True
        assert decision["policy"]["version"] == "1.0.0"


CYCLE = {"scores": {"a": 0.9, "b": 0.2}, "pinned": ["a"]}


class TestSessionBinding:
    def test_a_session_is_not_moved_to_another_tenant(self, server: Server) -> None:
        """Opened under prod-eu, a session refuses labels choosing staging (409); calls
        without labels stay with prod-eu."""
        with server.client() as client:
            opened = client.post("/v1/sessions/s1/cycles", json=CYCLE, headers=PROD)
            refused = client.post("/v1/sessions/s1/cycles", json=CYCLE, headers=STAGING)
            unlabelled = client.post("/v1/sessions/s1/evictions", json=EVICTION)
            state = client.get("/v1/sessions/s1").json()
        assert opened.json()["policy"]["name"] == "prod-eu"
        assert refused.status_code == 409
        problem = refused.json()
        assert problem["type"].endswith("/tenant-conflict")
        assert "bound to tenant 'prod-eu'" in problem["detail"]
        assert (unlabelled.json()["policy"]["name"], unlabelled.json()["outcome"]) == (
            "prod-eu",
            "allow",
        )
        assert (state["tenant"], state["state"]["labels"]) == (
            "prod-eu",
            {"deployment": "prod-eu", "team": "search"},
        )

    def test_the_binding_survives_a_restart(self, tmp_path: Path, tenants_file: Path) -> None:
        """Stopped and started again on the same files, the server still refuses to move the
        session (the binding was saved with its state)."""
        options = ("--tenants", str(tenants_file))
        with running_server(None, tmp_path, *options) as first, first.client() as client:
            client.post("/v1/sessions/kept/cycles", json=CYCLE, headers=PROD)
        with running_server(None, tmp_path, *options) as second, second.client() as client:
            refused = client.post("/v1/sessions/kept/cycles", json=CYCLE, headers=STAGING)
            kept = client.post("/v1/sessions/kept/cycles", json=CYCLE)
        assert refused.status_code == 409
        assert kept.json()["policy"]["name"] == "prod-eu"

    def test_labels_in_a_session_body_are_refused(self, server: Server) -> None:
        """A session's labels are its own: an eviction body carrying labels is refused at
        the key (the header chooses the tenant)."""
        with server.client() as client:
            response = client.post(
                "/v1/sessions/s2/evictions", json={**EVICTION, "labels": {"deployment": "x"}}
            )
        assert response.status_code == 400
        assert response.json()["problems"][0]["path"] == "$.labels"


class TestTenantsFile:
    def test_a_bad_tenants_file_is_located_and_exits_2(self, tmp_path: Path) -> None:
        """Two tenants of one name and a default naming none: each problem on a located
        line, exit code 2, nothing started."""
        path = tmp_path / "tenants.yaml"
        path.write_text(
            "tenantsVersion: 1\ndefault: nobody\ntenants:\n"
            "  - {name: a, policy: a.yaml}\n  - {name: a, policy: b.yaml}\n",
            encoding="utf-8",
        )
        out, err = io.StringIO(), io.StringIO()
        code = run(
            ["serve", "--tenants", str(path), "--audit-log", str(tmp_path / "a.jsonl")], out, err
        )
        assert code == 2
        assert err.getvalue().splitlines() == [
            f"{path}:2:10: $.default: 'nobody' is not one of the tenants (a)",
            f"{path}:5:12: $.tenants[1].name: 'a': two tenants of one name",
        ]
        assert not (tmp_path / "a.jsonl").exists()

    def test_a_schema_problem_names_the_value(self, tmp_path: Path) -> None:
        """A name the schema refuses: located, with the value."""
        path = tmp_path / "tenants.yaml"
        path.write_text(
            "tenantsVersion: 1\ndefault: a\ntenants:\n  - {name: Prod_EU, policy: a.yaml}\n",
            encoding="utf-8",
        )
        out, err = io.StringIO(), io.StringIO()
        code = run(["serve", "--tenants", str(path)], out, err)
        assert code == 2
        (line,) = err.getvalue().splitlines()
        assert line.startswith(f"{path}:4:12: $.tenants[0].name: 'Prod_EU' is not valid here: ")

    def test_the_example_of_docs_fleet_is_valid(self, tmp_path: Path) -> None:
        """The tenants file docs/fleet.md shows reads as it says: two tenants, in order."""
        page = (Path(__file__).resolve().parents[2] / "docs" / "fleet.md").read_text()
        start = page.index("# yaml-language-server: $schema=https://prunewarden.dev/schemas/ten")
        path = tmp_path / "tenants.yaml"
        path.write_text(page[start : page.index("```", start)], encoding="utf-8")
        config = read_tenants(path)
        assert config.default == "staging"
        assert [(t.name, dict(t.match_labels)) for t in config.tenants] == [
            ("prod-eu", {"deployment": "prod-eu"}),
            ("staging", {"deployment": "staging"}),
        ]
        assert config.tenants[0].shadow == str(tmp_path / "policies" / "prod-eu-next.yaml")


class TestLabelLimits:
    def test_header_and_document_together_hold_at_most_the_limit(self) -> None:
        """40 labels in the header and 40 others in the document: over MAX_LABELS together,
        refused at ``$.labels``."""
        header = {f"h{i}": "x" for i in range(40)}
        document = {"labels": {f"d{i}": "x" for i in range(40)}}
        with pytest.raises(InputError) as refused:
            merged_labels(header, document)
        (problem,) = refused.value.problems
        assert (problem.path, problem.message) == (
            "$.labels",
            "80 labels with the header's, more than the limit of 64",
        )

    def test_a_header_of_too_many_labels_is_refused(self) -> None:
        """65 labels in the header: refused at ``$.labels``."""
        with pytest.raises(InputError) as refused:
            parse_labels_header(",".join(f"k{i}=v" for i in range(65)))
        assert [p.message for p in refused.value.problems] == [
            "65 labels, more than the limit of 64"
        ]


class TestClient:
    def test_a_clients_labels_choose_its_tenant(self, server: Server) -> None:
        """``Client(url, labels=...)`` sends them with every call: its decisions and its
        sessions are prod-eu's; ``policies()`` lists both tenants."""
        with Client(server.url, labels={"deployment": "prod-eu"}) as client:
            decision = client.evaluate(EVICTION)
            cycle = client.session("c1").observe_cycle({"a": 0.9, "b": 0.2}, ["a"])
            listed = client.policies()
        staging = Client(server.url, labels={"deployment": "staging"})
        with staging, pytest.raises(ServerError) as refused:
            staging.session("c1").observe_cycle({"a": 0.9, "b": 0.2}, ["a"])
        assert (decision["policy"]["name"], cycle["policy"]["name"]) == ("prod-eu", "prod-eu")
        assert [t["name"] for t in listed["tenants"]] == ["prod-eu", "staging"]
        assert refused.value.status == 409
