"""A rollback is visible and can be refused: the signed manifest's ``sequence`` orders bundles;
an older one served again is refused by default, activated with a ``policy_rollback`` record
when allowed, and ``min_sequence`` refuses what is below it (and a manifest without one)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from _support.bundles import BASE, bundle_server, prod
from jsonschema import Draft202012Validator
from prunewarden import AuditLog, ReloadingEngine
from prunewarden._json import encode_canonical
from prunewarden._resources import schema
from prunewarden.bundle import (
    MANIFEST_NAME,
    SIGNATURES_NAME,
    BundleRules,
    KeyPair,
    build_bundle,
    generate_key_pair,
    sign_bundle,
)
from prunewarden.bundle._archive import pack, unpack
from prunewarden.bundle._signing import sign
from prunewarden.errors import BundleError
from prunewarden.policy._lock import update as update_lock
from prunewarden.policy._overlay import resolve_file
from prunewarden.server._bundle_tenants import BundleTenants
from prunewarden.server._tenant_config import TenantSpec

RECORD = Draft202012Validator(schema("audit-record"))


@pytest.fixture(scope="module")
def keys() -> KeyPair:
    return generate_key_pair()


def bundle_of(folder: Path, keys: KeyPair, version: str, sequence: int | None) -> bytes:
    """prod@``version`` as revision ``r-version`` with ``sequence`` (None: the build time)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "base.yaml").write_text(BASE, encoding="utf-8")
    (folder / "prod.yaml").write_text(prod(0.25, version), encoding="utf-8")
    update_lock(folder / "policy.lock", [resolve_file(folder / "prod.yaml")])
    built = build_bundle(
        [folder / "prod.yaml"],
        revision=f"r-{version}",
        built_at="2026-12-01T00:00:00Z",
        sequence=sequence,
    )
    return sign_bundle(built, keys.private_pem)


def without_sequence(bundle: bytes, keys: KeyPair) -> bytes:
    """``bundle`` as a builder before sequences wrote it: manifest version 1, signed."""
    files, _ = unpack(bundle, "b")
    manifest = json.loads(files[MANIFEST_NAME])
    del manifest["sequence"]
    manifest["manifest_version"] = 1
    files[MANIFEST_NAME] = encode_canonical(manifest)
    files[SIGNATURES_NAME] = sign(files[MANIFEST_NAME], keys.private_pem)
    return pack(files)


def records(stream: io.StringIO, kind: str) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [record for record in lines if record["kind"] == kind]


class TestSequence:
    def test_the_default_sequence_is_the_build_time_in_ms(
        self, tmp_path: Path, keys: KeyPair
    ) -> None:
        """built_at 2026-12-01T00:00:00Z is sequence 1796083200000; an explicit one is kept."""
        files, _ = unpack(bundle_of(tmp_path / "a", keys, "1.0.0", None), "a")
        manifest = json.loads(files[MANIFEST_NAME])
        assert (manifest["manifest_version"], manifest["sequence"]) == (3, 1796083200000)
        files, _ = unpack(bundle_of(tmp_path / "b", keys, "1.0.0", 7), "b")
        assert json.loads(files[MANIFEST_NAME])["sequence"] == 7


class TestRollback:
    def test_an_older_bundle_is_refused_by_default(self, tmp_path: Path, keys: KeyPair) -> None:
        """Sequence 2 in force; sequence 1 served again (a replay of a signed bundle) is
        refused, recorded once, and 2 stays."""
        newer = bundle_of(tmp_path / "n", keys, "1.1.0", 2)
        older = bundle_of(tmp_path / "o", keys, "1.0.0", 1)
        stream = io.StringIO()
        with bundle_server() as served, AuditLog(stream) as audit:
            served.serve(newer)
            engine = ReloadingEngine(
                bundle=served.url, bundle_key=keys.public_pem, interval=0, audit=audit
            )
            served.serve(older)
            result = engine.reload()
            engine.close()
        assert not result.changed
        assert any("older than sequence 2" in problem for problem in result.problems)
        assert engine.policy.identity.bundle_revision == "r-1.1.0"
        assert len(records(stream, "policy_reload_failed")) == 1
        assert records(stream, "policy_rollback") == []

    def test_an_allowed_rollback_is_recorded(self, tmp_path: Path, keys: KeyPair) -> None:
        """With allow_rollback, the older bundle is activated and a policy_rollback record
        (valid against the schema) names both sides, before any decision under it."""
        newer = bundle_of(tmp_path / "n", keys, "1.1.0", 2)
        older = bundle_of(tmp_path / "o", keys, "1.0.0", 1)
        stream = io.StringIO()
        with bundle_server() as served, AuditLog(stream) as audit:
            served.serve(newer)
            engine = ReloadingEngine(
                bundle=served.url,
                bundle_key=keys.public_pem,
                bundle_rules=BundleRules(allow_rollback=True),
                interval=0,
                audit=audit,
            )
            served.serve(older)
            result = engine.reload()
            engine.close()
        assert result.changed
        assert engine.policy.identity.bundle_revision == "r-1.0.0"
        (record,) = records(stream, "policy_rollback")
        RECORD.validate(record)
        assert record["rollback"] == {
            "location": served.url,
            "from": {"revision": "r-1.1.0", "sequence": 2},
            "to": {"revision": "r-1.0.0", "sequence": 1},
        }

    def test_a_bundle_without_a_sequence_is_older_than_one_with(
        self, tmp_path: Path, keys: KeyPair
    ) -> None:
        """A version 1 manifest after a sequenced bundle is a rollback: refused."""
        newer = bundle_of(tmp_path / "n", keys, "1.1.0", 2)
        old_format = without_sequence(bundle_of(tmp_path / "o", keys, "1.0.0", 1), keys)
        with bundle_server() as served:
            served.serve(newer)
            engine = ReloadingEngine(bundle=served.url, bundle_key=keys.public_pem, interval=0)
            served.serve(old_format)
            result = engine.reload()
            engine.close()
        assert any("no sequence (revision r-1.0.0)" in p for p in result.problems), result.problems


class TestMinSequence:
    def test_a_first_bundle_below_the_minimum_is_refused(
        self, tmp_path: Path, keys: KeyPair
    ) -> None:
        """min_sequence holds from the first bundle: a server restarted cannot be handed an
        old one; a manifest without a sequence is refused too, saying to build it again."""
        older = bundle_of(tmp_path / "o", keys, "1.0.0", 1)
        with bundle_server() as served:
            served.serve(older)
            with pytest.raises(BundleError) as raised:
                ReloadingEngine(
                    bundle=served.url,
                    bundle_key=keys.public_pem,
                    bundle_rules=BundleRules(min_sequence=5),
                    interval=0,
                )
            assert "below --bundle-min-sequence 5" in str(raised.value)
            served.serve(without_sequence(older, keys))
            with pytest.raises(BundleError) as raised:
                ReloadingEngine(
                    bundle=served.url,
                    bundle_key=keys.public_pem,
                    bundle_rules=BundleRules(min_sequence=0),
                    interval=0,
                )
            assert "manifest version 1 has no sequence: build it again" in str(raised.value)


class TestTenantsOfABundle:
    def test_tenants_refuse_an_older_bundle_and_record_an_allowed_one(
        self, tmp_path: Path, keys: KeyPair
    ) -> None:
        """One fetch for every tenant: the same order holds (refused by default, a
        policy_rollback record when allowed)."""
        newer = bundle_of(tmp_path / "n", keys, "1.1.0", 2)
        older = bundle_of(tmp_path / "o", keys, "1.0.0", 1)
        specs = [TenantSpec("prod", "prod")]
        for allowed in (False, True):
            stream = io.StringIO()
            with bundle_server() as served, AuditLog(stream) as audit:
                served.serve(newer)
                rules = BundleRules(allow_rollback=allowed)
                watch = BundleTenants(
                    served.url, keys.public_pem, specs, interval=0, rules=rules, audit=audit
                )
                served.serve(older)
                result = watch.poll()
                watch.close()
            assert result is not None
            revision = watch.engines["prod"].policy.identity.bundle_revision
            if allowed:
                assert (result.changed, revision) == (True, "r-1.0.0")
                (record,) = records(stream, "policy_rollback")
                RECORD.validate(record)
            else:
                assert (result.changed, revision) == (False, "r-1.1.0")
                assert any("older than sequence 2" in p for p in result.problems)
                assert records(stream, "policy_rollback") == []
