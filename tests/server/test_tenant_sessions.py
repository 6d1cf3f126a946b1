"""Sessions on a server of tenants, in process: the binding held across two replicas sharing a
real redis-server, stateless calls naming a session decided under its tenant, a state kept
before tenants adopted by the tenant that opens it, and a tenant gone from the file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.redis_server import running_redis
from _support.server import audit_decisions
from conftest import SERVED_SPEC, policy_text
from prunewarden.errors import PolicyError
from prunewarden.server import Built, Listen, ServerConfig, build_app, read_tenants
from prunewarden.session import SqliteSessionStore
from starlette.testclient import TestClient

EVICTION = {
    "check": "eviction",
    "segment": {"id": "s1", "kind": "tool_output", "tombstone_written": True},
    "score": 0.1,
    "perturbed_score": 0.12,
}
HEALTHY = [{"c": 0.9, "a": 0.6, "b": 0.1}, {"c": 0.88, "a": 0.55, "b": 0.12}]
COLLAPSED = {"c": 0.3, "a": 0.31, "b": 0.3}
EU = {"Prunewarden-Labels": "region=eu"}
US = {"Prunewarden-Labels": "region=us"}
TENANTS = """\
tenantsVersion: 1
default: us
tenants:
  - {name: eu, selector: {matchLabels: {region: eu}}, policy: eu.yaml}
  - {name: us, selector: {matchLabels: {region: us}}, policy: us.yaml}
"""

Replica = Callable[..., TestClient]


@pytest.fixture
def replica(tmp_path: Path) -> Iterator[Replica]:
    """Makes an app of the two tenants on a session store (a replica: its own audit log)."""
    (tmp_path / "eu.yaml").write_text(policy_text(SERVED_SPEC, name="eu"), encoding="utf-8")
    (tmp_path / "us.yaml").write_text(policy_text(SERVED_SPEC, name="us"), encoding="utf-8")
    (tmp_path / "tenants.yaml").write_text(TENANTS, encoding="utf-8")
    built: list[Built] = []

    def make(sessions: str, text: str = TENANTS) -> TestClient:
        path = tmp_path / f"tenants-{len(built)}.yaml"
        path.write_text(text, encoding="utf-8")
        config = ServerConfig(
            None,
            str(tmp_path / f"audit-{len(built)}.jsonl"),
            Listen(),
            sessions=sessions,
            reload_interval=0,
            tenants=read_tenants(path),
        )
        built.append(build_app(config))
        return TestClient(built[-1].app, base_url="http://127.0.0.1")

    try:
        yield make
    finally:
        for each in built:
            each.close()


def cycle(client: TestClient, session_id: str, scores: dict[str, float], **headers: Any) -> Any:
    body = {"scores": scores, "pinned": ["c"]}
    return client.post(f"/v1/sessions/{session_id}/cycles", json=body, headers=headers)


class TestReplicas:
    def test_the_binding_holds_on_every_replica(self, replica: Replica) -> None:
        """Opened on one replica under eu, a session is refused us on the other (409) and
        decides under eu there without labels."""
        with running_redis() as url:
            first, second = replica(url), replica(url)
            opened = cycle(first, "r", HEALTHY[0], **EU)
            refused = cycle(second, "r", HEALTHY[1], **US)
            kept = cycle(second, "r", HEALTHY[1])
        assert opened.json()["policy"]["name"] == "eu"
        assert (refused.status_code, refused.json()["type"]) == (
            409,
            "https://prunewarden.dev/problems/tenant-conflict",
        )
        assert kept.json()["policy"]["name"] == "eu"


class TestStatelessCallsNamingASession:
    def test_a_halt_gates_a_stateless_call_naming_the_session(
        self, replica: Replica, tmp_path: Path
    ) -> None:
        """``evaluate?session_id=`` without labels is decided under the session's tenant (eu),
        and refused by its halt."""
        client = replica(f"sqlite:{tmp_path / 's.sqlite3'}")
        answers = [cycle(client, "h", s, **EU) for s in (*HEALTHY, COLLAPSED, COLLAPSED)]
        refused = client.post("/v1/evaluate?session_id=h", json=EVICTION)
        assert answers[-1].json()["outcome"] == "halt"
        decision = refused.json()
        assert (decision["policy"]["name"], decision["outcome"]) == ("eu", "deny")
        assert decision["reasons"][0]["code"] == "pruning_halted"

    def test_labels_choosing_another_tenant_are_refused(
        self, replica: Replica, tmp_path: Path
    ) -> None:
        """``evaluate?session_id=`` naming a session of eu, with labels choosing us: 409, as
        on the session's own endpoints; the same id without a session is us's to decide."""
        client = replica(f"sqlite:{tmp_path / 's.sqlite3'}")
        cycle(client, "e", HEALTHY[0], **EU)
        refused = client.post("/v1/evaluate?session_id=e", json=EVICTION, headers=US)
        free = client.post("/v1/evaluate?session_id=none-yet", json=EVICTION, headers=US)
        assert (refused.status_code, refused.json()["type"]) == (
            409,
            "https://prunewarden.dev/problems/tenant-conflict",
        )
        assert free.json()["policy"]["name"] == "us"


class TestStoredStates:
    def test_a_state_kept_before_tenants_is_adopted(self, replica: Replica, tmp_path: Path) -> None:
        """A stored state naming no tenant is bound to the tenant that opens it next."""
        path = tmp_path / "s.sqlite3"
        client = replica(f"sqlite:{path}")
        cycle(client, "old", HEALTHY[0], **EU)
        with SqliteSessionStore(path) as store:
            state = store.load("old")
            assert state is not None
            assert state["tenant"] == "eu"
            del state["tenant"]
            store.save("old", state)
        again = replica(f"sqlite:{path}")
        adopted = cycle(again, "old", HEALTHY[1], **US)
        refused = cycle(again, "old", HEALTHY[1], **EU)
        assert adopted.json()["policy"]["name"] == "us"
        assert refused.status_code == 409

    def test_a_tenant_gone_from_the_file_is_a_conflict(
        self, replica: Replica, tmp_path: Path
    ) -> None:
        """A session bound to a tenant the server no longer holds: 409, naming it; DELETE
        clears it."""
        path = tmp_path / "s.sqlite3"
        cycle(replica(f"sqlite:{path}"), "gone", HEALTHY[0], **EU)
        only_us = TENANTS.replace(
            "  - {name: eu, selector: {matchLabels: {region: eu}}, policy: eu.yaml}\n", ""
        )
        client = replica(f"sqlite:{path}", only_us)
        refused = cycle(client, "gone", HEALTHY[1])
        deleted = client.delete("/v1/sessions/gone")
        fresh = cycle(client, "gone", HEALTHY[0])
        assert refused.status_code == 409
        assert "bound to tenant 'eu'" in refused.json()["detail"]
        assert deleted.json()["deleted"] is True
        assert fresh.json()["policy"]["name"] == "us"


class TestEachTenantsOwnFiles:
    def test_a_tenant_has_its_own_shadow(self, replica: Replica, tmp_path: Path) -> None:
        """eu's shadow decides beside eu's decisions (in their records), and us has none."""
        text = TENANTS.replace("policy: eu.yaml}", "policy: eu.yaml, shadow: us.yaml}")
        client = replica(f"sqlite:{tmp_path / 's.sqlite3'}", text)
        client.post("/v1/evaluate", json=EVICTION, headers=EU)
        client.post("/v1/evaluate", json=EVICTION, headers=US)
        listed = client.get("/v1/policies").json()["tenants"]
        records = audit_decisions(tmp_path / "audit-0.jsonl")
        assert [(r["policy"]["name"], "shadow" in r) for r in records] == [
            ("eu", True),
            ("us", False),
        ]
        assert records[0]["shadow"]["policy"]["name"] == "us"
        assert [t["shadow"] and t["shadow"]["name"] for t in listed] == ["us", None]

    def test_a_tenant_is_held_to_its_own_lock_file(self, replica: Replica, tmp_path: Path) -> None:
        """A lock file holding eu@1.0.0 to another digest refuses eu (PolicyError, located in
        eu's policy); us, without it, would load."""
        digest = "sha256:" + "0" * 64
        (tmp_path / "eu.lock").write_text(
            f"lockVersion: 1\ndigestVersion: 2\npolicies:\n  eu@1.0.0: '{digest}'\n",
            encoding="utf-8",
        )
        text = TENANTS.replace("policy: eu.yaml}", "policy: eu.yaml, lock: eu.lock}")
        with pytest.raises(PolicyError) as refused:
            replica(f"sqlite:{tmp_path / 's.sqlite3'}", text)
        (problem,) = refused.value.problems
        assert (Path(problem.file).name, problem.path) == ("eu.yaml", "$.metadata.version")

    def test_a_plan_naming_a_session_follows_its_tenant(
        self, replica: Replica, tmp_path: Path
    ) -> None:
        """A stateless plan whose document names a session of eu is planned under eu without
        labels, and refused with labels choosing us."""
        client = replica(f"sqlite:{tmp_path / 's.sqlite3'}")
        cycle(client, "p", HEALTHY[0], **EU)
        plan = {
            "session_id": "p",
            "segments": [{"id": "a", "kind": "turn", "tokens": 10, "score": 0.5}],
            "keep_top_k": 1,
        }
        planned = client.post("/v1/plan", json=plan)
        refused = client.post("/v1/plan", json=plan, headers=US)
        assert planned.headers["prunewarden-policy"].startswith("eu@1.0.0 ")
        assert refused.status_code == 409
