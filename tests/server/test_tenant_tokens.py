"""Tenants as a trust boundary: a tenant that lists ``tokens`` in the tenants file decides only
requests presenting one of them, a request presenting one is that tenant's whatever its labels
say, and no token is ever shown (problems, ``/readyz``, records, ``repr``). On the app in
process, with the server's own token beside the tenants'."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.server import policy_text
from prunewarden.cli._main import run
from prunewarden.server import Built, Listen, ServerConfig, build_app, read_tenants
from prunewarden.server._config import ServerConfigError
from prunewarden.server._tenant_config import TenantsError
from starlette.testclient import TestClient

EVICTION = {
    "check": "eviction",
    "segment": {"id": "turn-30", "kind": "turn", "tombstone_written": True, "tokens": 240},
    "score": 0.08,
    "perturbed_score": 0.1,
    "eviction_candidates": ["turn-30"],
}
CYCLE = {"scores": {"turn-30": 0.5}}
SERVER_TOKEN = "server-token-0123456789"  # noqa: S105 - test credentials
PROD_TOKEN = "prod-token-0123456789abc"  # noqa: S105
PROD_FILE_TOKEN = "prod-file-token-0123456789"  # noqa: S105
TENANTS = """\
tenantsVersion: 1
default: staging
tenants:
  - name: prod-eu
    selector: {matchLabels: {deployment: prod-eu}}
    policy: prod/policy.yaml
    tokens: [prod-token-0123456789abc, {token_file: prod.token}]
  - name: staging
    selector: {matchLabels: {deployment: staging}}
    policy: staging/policy.yaml
"""
PROD = {"Prunewarden-Labels": "deployment=prod-eu"}
STAGING = {"Prunewarden-Labels": "deployment=staging"}


def bearer(token: str, labels: dict[str, str] | None = None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **(labels or {})}


@pytest.fixture
def tenants_file(tmp_path: Path) -> Path:
    for folder, name in (("prod", "prod-eu"), ("staging", "staging")):
        (tmp_path / folder).mkdir()
        text = policy_text({"eviction": {"stability_delta": 0.25}}, name=name, version="1.0.0")
        (tmp_path / folder / "policy.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "prod.token").write_text(PROD_FILE_TOKEN + "\n", encoding="utf-8")
    path = tmp_path / "tenants.yaml"
    path.write_text(TENANTS, encoding="utf-8")
    return path


@pytest.fixture
def built(tmp_path: Path, tenants_file: Path) -> Iterator[Built]:
    config = ServerConfig(
        None,
        str(tmp_path / "audit.jsonl"),
        Listen(),
        token=SERVER_TOKEN,
        tenants=read_tenants(tenants_file),
    )
    app = build_app(config)
    try:
        yield app
    finally:
        app.close()


@pytest.fixture
def http(built: Built) -> TestClient:
    return TestClient(built.app, base_url="http://127.0.0.1")


def decided_by(response: Any) -> str:
    """The policy that decided an answer, which must be a 200."""
    assert response.status_code == 200, response.text
    name: str = response.json()["policy"]["name"]
    return name


class TestRouting:
    def test_a_tenants_token_chooses_its_tenant(self, http: TestClient) -> None:
        """Its token alone (given in the file or by token_file) makes a request prod-eu's;
        the server's token goes to the tenant the labels choose."""
        assert (
            decided_by(http.post("/v1/evaluate", json=EVICTION, headers=bearer(PROD_TOKEN)))
            == "prod-eu"
        )
        plan = {"segments": [], "keep_top_k": 0}
        by_file = http.post("/v1/plan", json=plan, headers=bearer(PROD_FILE_TOKEN))
        assert by_file.status_code == 200
        assert by_file.headers["Prunewarden-Policy"].startswith("prod-eu@")
        policy = http.get("/v1/policy", headers=bearer(PROD_TOKEN)).json()
        assert policy["tenant"] == "prod-eu"
        staging = http.post("/v1/evaluate", json=EVICTION, headers=bearer(SERVER_TOKEN, STAGING))
        assert decided_by(staging) == "staging"

    def test_labels_choosing_another_tenant_than_the_tokens_are_refused(
        self, http: TestClient
    ) -> None:
        """A prod-eu token with labels (header or document) choosing staging: 403
        forbidden-tenant, not decided; labels choosing prod-eu are fine."""
        header = http.post("/v1/evaluate", json=EVICTION, headers=bearer(PROD_TOKEN, STAGING))
        document = http.post(
            "/v1/evaluate",
            json={**EVICTION, "labels": {"deployment": "staging"}},
            headers=bearer(PROD_TOKEN),
        )
        same = http.post("/v1/evaluate", json=EVICTION, headers=bearer(PROD_TOKEN, PROD))
        for refused in (header, document):
            assert refused.status_code == 403
            assert refused.headers["content-type"] == "application/problem+json"
            problem = refused.json()
            assert problem["type"].endswith("/forbidden-tenant")
            assert "'prod-eu'" in problem["detail"]
            assert PROD_TOKEN not in refused.text
        assert decided_by(same) == "prod-eu"

    def test_a_tenant_with_tokens_is_not_reached_without_one(self, http: TestClient) -> None:
        """The server's token, or a tenant token of another tenant, never reaches prod-eu:
        by its labels 403, and a token that is nobody's 401."""
        by_labels = http.post("/v1/evaluate", json=EVICTION, headers=bearer(SERVER_TOKEN, PROD))
        policy = http.get("/v1/policy", headers=bearer(SERVER_TOKEN, PROD))
        wrong = http.post("/v1/evaluate", json=EVICTION, headers=bearer("x" * 24, PROD))
        none = http.post("/v1/evaluate", json=EVICTION, headers=PROD)
        assert by_labels.status_code == policy.status_code == 403
        assert "only requests presenting one of its own tokens" in by_labels.json()["detail"]
        assert wrong.status_code == none.status_code == 401

    def test_a_tenants_token_does_not_show_every_tenant(self, http: TestClient) -> None:
        """/v1/policies, /v1/status and /metrics show every tenant: the server's token only."""
        for path in ("/v1/policies", "/v1/status", "/metrics"):
            refused = http.get(path, headers=bearer(PROD_TOKEN))
            assert refused.status_code == 403, path
            assert http.get(path, headers=bearer(SERVER_TOKEN)).status_code == 200, path


class TestSessions:
    def test_a_session_of_a_tenant_with_tokens_is_its_tokens(self, http: TestClient) -> None:
        """A session opened with prod-eu's token is bound to prod-eu: the server's token is
        refused it (403), a staging session is refused to prod-eu's token (409
        tenant-conflict), and prod-eu's token does not open a session with staging labels."""
        opened = http.post("/v1/sessions/p1/cycles", json=CYCLE, headers=bearer(PROD_TOKEN))
        assert decided_by(opened) == "prod-eu"
        again = http.get("/v1/sessions/p1", headers=bearer(PROD_FILE_TOKEN))
        assert again.json()["tenant"] == "prod-eu"
        by_server = http.post("/v1/sessions/p1/cycles", json=CYCLE, headers=bearer(SERVER_TOKEN))
        assert by_server.status_code == 403
        staging = http.post("/v1/sessions/s1/cycles", json=CYCLE, headers=bearer(SERVER_TOKEN))
        assert decided_by(staging) == "staging"
        crossing = http.post("/v1/sessions/s1/cycles", json=CYCLE, headers=bearer(PROD_TOKEN))
        assert crossing.status_code == 409
        assert crossing.json()["type"].endswith("/tenant-conflict")
        stateless = http.post(
            "/v1/evaluate?session_id=s1", json=EVICTION, headers=bearer(PROD_TOKEN)
        )
        assert stateless.status_code == 409
        labelled = http.post(
            "/v1/sessions/p2/cycles", json=CYCLE, headers=bearer(PROD_TOKEN, STAGING)
        )
        assert labelled.status_code == 403
        deleted = http.delete("/v1/sessions/p1", headers=bearer(SERVER_TOKEN))
        assert deleted.status_code == 403


class TestNeverShown:
    def test_no_token_in_readyz_records_or_repr(
        self, http: TestClient, built: Built, tmp_path: Path, tenants_file: Path
    ) -> None:
        """Neither /readyz, /v1/policies, the audit log nor a tenant's repr holds a token."""
        http.post("/v1/evaluate", json=EVICTION, headers=bearer(PROD_TOKEN))
        ready = http.get("/readyz").text
        policies = http.get("/v1/policies", headers=bearer(SERVER_TOKEN)).text
        records = (tmp_path / "audit.jsonl").read_text(encoding="utf-8")
        shown = repr(read_tenants(tenants_file)) + repr(built.tenants.all)
        for text in (ready, policies, records, shown):
            assert PROD_TOKEN not in text
            assert PROD_FILE_TOKEN not in text
        assert '"prod-eu"' in records


class TestTheFile:
    def write(self, tmp_path: Path, tokens: str) -> Path:
        path = tmp_path / "tenants.yaml"
        path.write_text(
            "tenantsVersion: 1\ndefault: a\ntenants:\n"
            f"  - name: a\n    policy: a.yaml\n    tokens: {tokens}\n"
            "  - name: b\n    policy: b.yaml\n    tokens: [b-token-0123456789abcdef]\n",
            encoding="utf-8",
        )
        return path

    def test_a_bad_token_is_located_and_not_shown(self, tmp_path: Path) -> None:
        """A token too short: FILE:LINE:COL $.path, the value not shown, exit code 2."""
        path = self.write(tmp_path, "[ok-token-0123456789abc, short-secret]")
        with pytest.raises(TenantsError) as caught:
            read_tenants(path)
        (problem,) = caught.value.problems
        assert (problem.line, problem.column, problem.path) == (6, 38, "$.tenants[0].tokens[1]")
        assert "short-secret" not in str(problem)
        assert "not a token" in str(problem)
        out, err = io.StringIO(), io.StringIO()
        code = run(
            ["serve", "--tenants", str(path), "--audit-log", str(tmp_path / "a.jsonl")], out, err
        )
        assert code == 2
        assert f"{path}:6:38: $.tenants[0].tokens[1]: not a token" in err.getvalue()
        assert "short-secret" not in err.getvalue()

    def test_a_token_of_two_tenants_or_a_missing_token_file_is_located(
        self, tmp_path: Path
    ) -> None:
        """One token given to two tenants, a token_file that cannot be read: each located."""
        path = self.write(tmp_path, "[b-token-0123456789abcdef, {token_file: gone.token}]")
        with pytest.raises(TenantsError) as caught:
            read_tenants(path)
        shown = [f"{p.line}:{p.column}: {p.path}: {p.message}" for p in caught.value.problems]
        assert any(
            "$.tenants[0].tokens[0]: this token is also tenant 'b'" in line
            or "$.tenants[1].tokens[0]: this token is also tenant 'a'" in line
            for line in shown
        ), shown
        assert any("$.tenants[0].tokens[1].token_file: gone.token: cannot read" in s for s in shown)
        assert all("b-token-0123456789abcdef" not in line for line in shown)

    def test_the_servers_token_may_not_be_a_tenants(self, tmp_path: Path) -> None:
        """The server's token and a tenant's being one would make a request both: refused."""
        path = self.write(tmp_path, "[a-token-0123456789abcdef]")
        with pytest.raises(ServerConfigError, match="also tenant 'a'"):
            ServerConfig(
                None,
                str(tmp_path / "audit.jsonl"),
                Listen(),
                token="a-token-0123456789abcdef",  # noqa: S106
                tenants=read_tenants(path),
            )


class TestTheDocs:
    def test_fleet_md_shows_what_a_bad_tokens_file_prints(self, tmp_path: Path) -> None:
        """docs/fleet.md's example file and the two lines it says it prints, one per fix."""
        page = (Path(__file__).parents[2] / "docs" / "fleet.md").read_text(encoding="utf-8")
        section = page.split("### Tenants with their own tokens", 1)[1]
        found = re.search(r"```yaml\n([^`]*- short\n[^`]*)```\n\n```\n([^`]*)```", section)
        assert found is not None
        example, lines = found.group(1), found.group(2).splitlines()
        path = tmp_path / "tenants.yaml"
        printed = []
        for text in (example, example.replace("- short", "- prod-token-0123456789abc")):
            path.write_text(text, encoding="utf-8")
            with pytest.raises(TenantsError) as caught:
                read_tenants(path)
            printed += [str(p).replace(str(path), "tenants.yaml") for p in caught.value.problems]
        assert printed == lines


class TestWithoutTheServersToken:
    def test_tenant_tokens_alone(self, tmp_path: Path, tenants_file: Path) -> None:
        """A server with no token of its own: a request without a token reaches staging, not
        prod-eu (403); prod-eu's token reaches prod-eu; a token that is nobody's is 401, not
        ignored."""
        config = ServerConfig(
            None, str(tmp_path / "audit.jsonl"), Listen(), tenants=read_tenants(tenants_file)
        )
        built = build_app(config)
        try:
            http = TestClient(built.app, base_url="http://127.0.0.1")
            assert decided_by(http.post("/v1/evaluate", json=EVICTION)) == "staging"
            assert http.post("/v1/evaluate", json=EVICTION, headers=PROD).status_code == 403
            own = http.post("/v1/evaluate", json=EVICTION, headers=bearer(PROD_TOKEN))
            assert decided_by(own) == "prod-eu"
            nobodys = http.post("/v1/evaluate", json=EVICTION, headers=bearer("y" * 20))
            assert nobodys.status_code == 401
            assert http.get("/v1/policies", headers=bearer(PROD_TOKEN)).status_code == 200
        finally:
            built.close()
