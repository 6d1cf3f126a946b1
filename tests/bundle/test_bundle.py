"""Bundles: built the same way every time, signed, and refused whole when anything differs."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
from _support.bundles import BASE, make_bundles, prod
from prunewarden.bundle import (
    MANIFEST_NAME,
    build_bundle,
    generate_key_pair,
    key_id,
    sign_bundle,
    verify_bundle,
)
from prunewarden.bundle._archive import pack
from prunewarden.errors import BundleError, PolicyError
from prunewarden.policy import load_policy
from prunewarden.policy._lock import update as update_lock
from prunewarden.policy._overlay import resolve_file

BUILT_AT = "2026-12-01T00:00:00Z"


def members(bundle: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz") as archive:
        return {m.name: archive.extractfile(m).read() for m in archive}  # type: ignore[union-attr]


def repacked(bundle: bytes, **changes: bytes) -> bytes:
    """``bundle`` with some members' bytes replaced (or added), the manifest untouched."""
    return pack({**members(bundle), **changes})


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "base.yaml").write_text(BASE, encoding="utf-8")
    (tmp_path / "prod.yaml").write_text(prod(0.25, "1.0.0"), encoding="utf-8")
    return tmp_path


class TestBuild:
    def test_the_same_files_build_the_same_bytes(self, folder: Path) -> None:
        """Two builds of the same files, revision and time are byte-identical archives whose
        entries are sorted, dated 0 and owned by 0:0."""
        first = build_bundle([folder / "prod.yaml"], revision="r1", built_at=BUILT_AT)
        second = build_bundle([folder / "prod.yaml"], revision="r1", built_at=BUILT_AT)
        assert first == second
        with tarfile.open(fileobj=io.BytesIO(first), mode="r:gz") as archive:
            infos = archive.getmembers()
        assert [i.name for i in infos] == sorted(i.name for i in infos)
        assert {(i.mtime, i.uid, i.gid, i.uname, i.mode) for i in infos} == {(0, 0, 0, "", 0o644)}

    def test_the_manifest_lists_every_file_and_policy(self, folder: Path) -> None:
        """The manifest holds each file's SHA-256, the policy's name@version and digest, the
        revision and when it was built; bases come along, relative to a common root."""
        policy = load_policy(folder / "prod.yaml")
        bundle = build_bundle([folder / "prod.yaml"], revision="r1", built_at=BUILT_AT)
        files = members(bundle)
        manifest = json.loads(files[MANIFEST_NAME])
        assert manifest["revision"] == "r1"
        assert manifest["built_at"] == BUILT_AT
        assert manifest["lock"] is None
        assert manifest["files"] == {
            name: hashlib.sha256(files[name]).hexdigest() for name in ("base.yaml", "prod.yaml")
        }
        assert manifest["policies"] == [
            {"path": "prod.yaml", "name": "prod", "version": "1.0.0", "digest": policy.digest}
        ]

    def test_a_policy_its_lock_file_refuses_is_not_bundled(self, folder: Path) -> None:
        """A version reused for different content fails the build (PolicyError), located."""
        update_lock(folder / "policy.lock", [resolve_file(folder / "prod.yaml")])
        (folder / "prod.yaml").write_text(prod(0.3, "1.0.0"), encoding="utf-8")
        with pytest.raises(PolicyError) as caught:
            build_bundle([folder / "prod.yaml"], revision="r1")
        assert "reused for different content" in caught.value.problems[0].message

    def test_a_bad_revision_is_refused(self, folder: Path) -> None:
        """A revision travels in every record: spaces and slashes are refused."""
        with pytest.raises(PolicyError) as caught:
            build_bundle([folder / "prod.yaml"], revision="r 1/2")
        assert caught.value.problems[0].path == "$.revision"


class TestVerify:
    def test_a_signed_bundle_verifies_and_names_its_revision(self, tmp_path: Path) -> None:
        """Verified policies carry the revision in their identity and name their files
        ``bundle:REVISION/PATH`` with the bytes' SHA-256."""
        bundles = make_bundles(tmp_path)
        verified = verify_bundle(bundles.r1, bundles.keys.public_pem)
        policy = verified.policies["prod"]
        assert verified.revision == "r1"
        assert policy.identity.bundle_revision == "r1"
        assert policy.identity.to_dict()["bundle_revision"] == "r1"
        assert [s.path for s in policy.sources] == ["bundle:r1/prod.yaml", "bundle:r1/base.yaml"]
        assert policy.digest == load_policy(tmp_path / "r1" / "prod.yaml").digest

    def test_the_lock_file_travels_and_is_checked(self, tmp_path: Path) -> None:
        """The lock file is one of the bundle's files, named by the manifest."""
        bundles = make_bundles(tmp_path)
        manifest = json.loads(members(bundles.r1)[MANIFEST_NAME])
        assert manifest["lock"] == "policy.lock"
        assert "policy.lock" in manifest["files"]

    def test_a_bundle_signed_by_another_key_is_refused(self, tmp_path: Path) -> None:
        """The signature names its key; a verifier with another key refuses the bundle."""
        bundles = make_bundles(tmp_path)
        with pytest.raises(BundleError) as caught:
            verify_bundle(bundles.r1, bundles.other.public_pem, "b.tar.gz")
        (problem,) = caught.value.problems
        assert (problem.file, problem.path) == ("b.tar.gz", "$['signatures.json']")
        assert problem.message == f"not signed by the key {key_id(bundles.other.public_pem)}"

    def test_an_unsigned_bundle_is_refused(self, folder: Path) -> None:
        """Nothing is used from a bundle without a signature."""
        bundle = build_bundle([folder / "prod.yaml"], revision="r1")
        with pytest.raises(BundleError) as caught:
            verify_bundle(bundle, generate_key_pair().public_pem)
        assert caught.value.problems[0].message == "unsigned: no signatures.json"

    def test_a_forged_signature_is_refused(self, tmp_path: Path) -> None:
        """A manifest changed after signing no longer matches its signature."""
        bundles = make_bundles(tmp_path)
        files = members(bundles.r1)
        manifest = json.loads(files[MANIFEST_NAME])
        manifest["revision"] = "r9"
        forged = repacked(bundles.r1, **{MANIFEST_NAME: json.dumps(manifest).encode()})
        with pytest.raises(BundleError) as caught:
            verify_bundle(forged, bundles.keys.public_pem)
        assert "does not match the manifest" in caught.value.problems[0].message

    def test_a_file_unlike_its_manifest_is_refused(self, tmp_path: Path) -> None:
        """A changed file, or a file the manifest does not list, is named with its digest."""
        bundles = make_bundles(tmp_path)
        tampered = repacked(bundles.r1, **{"prod.yaml": prod(0.01, "1.0.0").encode()})
        with pytest.raises(BundleError) as caught:
            verify_bundle(tampered, bundles.keys.public_pem)
        (problem,) = caught.value.problems
        assert problem.path == "$['prod.yaml']"
        assert problem.message.startswith("SHA-256 ")
        extra = repacked(bundles.r1, **{"extra.yaml": b"x"})
        with pytest.raises(BundleError) as caught:
            verify_bundle(extra, bundles.keys.public_pem)
        assert caught.value.problems[0].message == "not listed in the manifest"

    def test_a_truncated_bundle_is_refused(self, tmp_path: Path) -> None:
        """An archive cut short is refused whole: no file of it is used."""
        bundles = make_bundles(tmp_path)
        with pytest.raises(BundleError) as caught:
            verify_bundle(bundles.r1[: len(bundles.r1) // 2], bundles.keys.public_pem)
        assert caught.value.problems[0].message.startswith("not a complete gzip archive")

    def test_a_path_leaving_the_archive_is_refused(self, tmp_path: Path) -> None:
        """Members with ``..``, absolute paths or links are refused, never written anywhere."""
        bundles = make_bundles(tmp_path)
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w") as archive:
            for name, data in members(bundles.r1).items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
            evil = tarfile.TarInfo("../evil.yaml")
            evil.size = 1
            archive.addfile(evil, io.BytesIO(b"x"))
            link = tarfile.TarInfo("link.yaml")
            link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
            archive.addfile(link)
        hostile = gzip.compress(raw.getvalue())
        with pytest.raises(BundleError) as caught:
            verify_bundle(hostile, bundles.keys.public_pem)
        messages = {p.path: p.message for p in caught.value.problems}
        assert messages["$['../evil.yaml']"] == "not a plain relative path inside the archive"
        assert messages["$['link.yaml']"].startswith("not a regular file")
        assert not (tmp_path.parent / "evil.yaml").exists()

    def test_a_file_that_is_also_a_folder_is_refused(self, tmp_path: Path) -> None:
        """A signed manifest listing both ``x`` and ``x/y`` is refused, not a traceback."""
        bundles = make_bundles(tmp_path)
        files = members(bundles.r1)
        extra = {"x": b"1", "x/y": b"2"}
        manifest = json.loads(files[MANIFEST_NAME])
        manifest["files"].update({k: hashlib.sha256(v).hexdigest() for k, v in extra.items()})
        odd = pack({**files, **extra, MANIFEST_NAME: json.dumps(manifest).encode()})
        with pytest.raises(BundleError) as caught:
            verify_bundle(sign_bundle(odd, bundles.keys.private_pem), bundles.keys.public_pem)
        (problem,) = caught.value.problems
        assert problem.message.startswith("cannot be laid out as a file")

    def test_a_policy_that_loads_otherwise_than_listed_is_refused(self, tmp_path: Path) -> None:
        """A signed manifest whose digest is not the policy's content is refused."""
        bundles = make_bundles(tmp_path)
        files = members(bundles.r1)
        manifest = json.loads(files[MANIFEST_NAME])
        manifest["policies"][0]["digest"] = "sha256:" + "1" * 64
        lying = pack({**files, MANIFEST_NAME: json.dumps(manifest).encode()})
        resigned = sign_bundle(lying, bundles.keys.private_pem)
        with pytest.raises(BundleError) as caught:
            verify_bundle(resigned, bundles.keys.public_pem)
        (problem,) = caught.value.problems
        assert problem.path == "$.policies[0]"
        assert problem.message.startswith("loads as prod@1.0.0 sha256:")

    def test_signing_refuses_a_bundle_unlike_its_manifest(self, tmp_path: Path) -> None:
        """Only a consistent bundle is signed."""
        bundles = make_bundles(tmp_path)
        tampered = repacked(bundles.r1, **{"base.yaml": b"changed"})
        with pytest.raises(PolicyError) as caught:
            sign_bundle(tampered, bundles.keys.private_pem)
        assert caught.value.problems[0].message == "missing or not as listed"

    def test_a_key_of_another_kind_is_the_callers_error(self, tmp_path: Path) -> None:
        """A PEM that holds no Ed25519 key raises ValueError, not BundleError."""
        bundles = make_bundles(tmp_path)
        with pytest.raises(ValueError, match="not a PEM public key"):
            verify_bundle(bundles.r1, b"not a key")
        with pytest.raises(ValueError, match="not an unencrypted PEM private key"):
            sign_bundle(bundles.r1, b"not a key")
